"""The whole sweep through the command line, on a local multi-node Ray cluster with the fake server:
a crash recorded while the rest completes, Ctrl-C and kill -9 of the driver, then resume."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import psutil
import pytest

from sweep.results.writer import sweep_id
from tests.conftest import REPO, run_sweep_cli
from tests.experiments import DRAFT_TOKENS, DRAFTERS, FAULTS, write
from tests.experiments import experiment as build

pytestmark = [pytest.mark.slow, pytest.mark.scenario]  # the scenario tier: python -m pytest -m scenario


def experiment(tmp_path, port, speed=4, faults=True):
    """A baseline and one drafter at steps 1 and 2; with ``faults``, its steps-2 point also runs once
    with the fake dying in capture (without, the fault axis has its clean value only)."""
    axes = {
        "drafter": DRAFTERS,
        "steps": {"flag": "speculative-num-steps", "values": [1, 2]},
        "fault": FAULTS if faults else {"values": {"none": {}}},
    }
    exp = build(
        name="e2e",
        server={"port": port, "flags": {"enable-metrics": True}},
        grid={
            "axes": axes,
            "derived": DRAFT_TOKENS,
            "exclude": [{"drafter": "none", "fault": "oom"}, {"steps": "1", "fault": "oom"}] if faults else None,
        },
        benchmark={
            "server_metrics": True,
            "single_stream": {"runs": 2, "warmup": 1, "max_tokens": 48},
            "concurrency": {"levels": [1, 4, 8], "rounds": 2, "max_tokens": 48},
        },
        dry_run={"hosts": 2, "fake_speed": speed},
    )
    return write(tmp_path / "e2e.yaml", exp, results_dir=tmp_path / "res")


def points(tmp_path) -> pl.DataFrame:
    return pl.read_parquet(str(tmp_path / "res" / "points" / "*.parquet"))


def our_processes(results: Path) -> list[psutil.Process]:
    """Fake servers this sweep started (their marker names the results directory)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SWEEP_SWEEP") == sweep_id(results):
                out.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return out


def test_crash_recorded_rest_completes_then_resume(tmp_path):
    exp = experiment(tmp_path, 32200)
    r = run_sweep_cli(str(exp), "--dry-run", timeout=240)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    pts = points(tmp_path)
    assert pts.height == 4
    failed = pts.filter(pl.col("status") == "failed").row(0, named=True)
    assert failed["label"] == "drafter=d1,steps=2,fault=oom"
    assert failed["failure_phase"] == "capture" and "CUDA out of memory" in failed["failure_reason"]
    assert pts.filter(pl.col("status") == "ok").height == 3
    assert set(pts["axis_drafter"]) == {"none", "d1"} and pts["dry_run"].all()
    assert pts["axis_steps"].dtype == pl.Int64, pts["axis_steps"]  # a numeric axis written as numbers
    ok_ids = pts.filter(pl.col("status") == "ok")["point_id"].to_list()
    for table in ("levels", "single_stream", "requests"):
        t = pl.read_parquet(str(tmp_path / "res" / table / "*.parquet"))
        assert set(t["point_id"]) == set(ok_ids), table
    assert pl.read_parquet(str(tmp_path / "res" / "levels" / "*.parquet")).height == 3 * 3
    assert (tmp_path / "res" / "plan.json").is_file() and (tmp_path / "res" / "experiment.yaml").is_file()
    assert all((tmp_path / "res" / "logs" / f"{i}.log").is_file() for i in pts["point_id"])
    assert not our_processes(tmp_path / "res")
    # the same command again: nothing to run, the failure is still reported
    again = run_sweep_cli(str(exp), "--dry-run", timeout=60)
    assert again.returncode == 1 and "0 to run" in again.stdout
    # --retry-failed --only: just that point runs again (and fails again, as the fault is deterministic)
    retry = run_sweep_cli(str(exp), "--dry-run", "--retry-failed", "--only", "*fault=oom", timeout=180)
    assert "1 to run" in retry.stdout
    after = points(tmp_path)
    assert after.height == 4
    assert (
        after.filter(pl.col("status") == "ok")["started_at"].sort().to_list()
        == pts.filter(pl.col("status") == "ok")["started_at"].sort().to_list()
    )


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a job started with & from a script inherits


def _start_driver(exp: Path, ignore_sigint: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sweep", str(exp), "--dry-run"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_ignore_sigint if ignore_sigint else None,
    )


def _wait_for_first_point(tmp_path, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if list((tmp_path / "res" / "points").glob("*.parquet")):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError("no point finished in time")


def _resume_and_check(tmp_path, exp, before: pl.DataFrame):
    r = run_sweep_cli(str(exp), "--dry-run", timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    after = points(tmp_path)
    assert after.height == 3 and after["point_id"].n_unique() == 3
    assert (after["status"] == "ok").all()
    kept = after.filter(pl.col("point_id").is_in(before["point_id"].to_list()))
    assert kept["started_at"].sort().to_list() == before["started_at"].sort().to_list(), "a finished point ran twice"
    assert not our_processes(tmp_path / "res")


@pytest.mark.parametrize(
    ("sig", "ignored", "said"),
    [
        (signal.SIGINT, False, "interrupted"),  # Ctrl-C
        (signal.SIGINT, True, "interrupted"),  # kill -INT on a sweep started with & from a script
        (signal.SIGTERM, False, "stopped by SIGTERM"),  # kill, a scheduler's stop
    ],
    ids=["ctrl-c", "sigint-ignored-at-start", "sigterm"],
)
def test_ctrl_c_then_resume(tmp_path, sig, ignored, said):
    exp = experiment(tmp_path, 32300, speed=1, faults=False)
    proc = _start_driver(exp, ignore_sigint=ignored)
    try:
        _wait_for_first_point(tmp_path, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert said in err and "run the same command again" in err
    assert not our_processes(tmp_path / "res"), "Ctrl-C left a server running"
    before = points(tmp_path)
    assert 1 <= before.height < 3
    _resume_and_check(tmp_path, exp, before)


def test_driver_killed_then_resume(tmp_path):
    exp = experiment(tmp_path, 32400, speed=1, faults=False)
    proc = _start_driver(exp)
    try:
        _wait_for_first_point(tmp_path, proc)
        proc.kill()  # kill -9: no cleanup runs in the driver
        proc.wait()
        before = points(tmp_path)
        assert 1 <= before.height < 3
        _resume_and_check(tmp_path, exp, before)
    finally:
        try:  # whatever Ray left in the dead driver's process group (the resume reaps it too)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
