"""``python -m sweep confirm DIR`` refuses as a sweep refuses, before anything is read, said or
written: on a directory whose SGLang (0.5.10) has no adaptive speculation it exits 3 naming the rule,
as ``policy.confirm`` in the experiment file does; on a directory a sweep is writing it exits 5 naming
that sweep (the lock is taken first). No Ray: both refusals come before any cluster."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from sweep.results import lock as dir_lock
from tests.conftest import REPO, run_sweep_cli

LEGACY = REPO / "tests" / "data" / "legacy-results" / "legacy-dryrun"


def _everything(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != dir_lock.LOCK
    }


@pytest.fixture
def recorded(tmp_path) -> Path:
    out = tmp_path / "legacy-dryrun"
    shutil.copytree(LEGACY, out)
    return out


def _with_step_group(directory: Path) -> None:
    """The directory's experiment with a steps axis (1 and 3 steps for drafter d1): a step group
    whose policy would run --speculative-adaptive, which SGLang 0.5.10 (pinned there) lacks."""
    path = directory / "experiment.yaml"
    exp = yaml.safe_load(path.read_text())
    d1 = exp["grid"]["axes"]["drafter"]["values"]["d1"]["flags"]
    for k in ("speculative-num-steps", "speculative-num-draft-tokens"):
        d1.pop(k)
    exp["grid"]["axes"]["steps"] = {
        "values": {
            str(k): {"flags": {"speculative-num-steps": k, "speculative-num-draft-tokens": k + 1}} for k in (1, 3)
        }
    }
    exp["grid"]["exclude"] = [{"drafter": "none", "steps": "3"}]
    path.write_text(yaml.safe_dump(exp, sort_keys=False))


def test_confirm_on_a_release_without_adaptive_speculation_is_refused_with_nothing_written(recorded):
    _with_step_group(recorded)
    before = _everything(recorded)
    r = run_sweep_cli("confirm", str(recorded), timeout=120)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    assert "policy launch" in r.stderr and "0.5.10" in r.stderr and "nothing was launched or written" in r.stderr
    assert "confirm:" not in r.stdout, "it said what it would run before refusing"
    assert _everything(recorded) == before


def test_confirm_on_a_directory_being_written_names_the_sweep_writing_it(recorded):
    with dir_lock.acquire(recorded, argv=["python", "-m", "sweep", "exp.yaml", "--dry-run"]):
        before = _everything(recorded)
        r = run_sweep_cli("confirm", str(recorded), timeout=120)
    assert r.returncode == 5, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"pid {os.getpid()}" in r.stderr and "exp.yaml --dry-run" in r.stderr, r.stderr
    assert r.stdout == "", "it printed or decided something before taking the lock"
    assert _everything(recorded) == before
