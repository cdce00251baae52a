"""``--plan`` as a person reads it (sweep/experiment/render.py): every id, label, value and reason printed as it
is (never read as console markup), lines that do not wrap in a pipe, and counts with their noun in
the right number."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from sweep.experiment import config
from sweep.experiment import plan as planning
from sweep.experiment.render import print_plan
from tests.test_grid import BASE

REPO = Path(__file__).resolve().parents[1]


def _plan(write_yaml, text=BASE, *overrides):
    return planning.build(config.load(write_yaml(text), list(overrides)))


def _printed(plan, **console_kw) -> str:
    buf = io.StringIO()
    print_plan(plan, Console(file=buf, highlight=False, **console_kw))
    return buf.getvalue()


def test_ids_labels_and_reasons_are_printed_as_they_are_not_as_markup(write_yaml):
    plan = _plan(write_yaml)
    a, b = plan.points[0], plan.points[3]
    a.id, b.id = "deadbeef0123", "bold01234567"  # hex ids that start with a letter read as a [tag]
    a.errors = ["ambiguous-flag: [red]--x[/red] [/__w/pytorch/x.py]"]
    b.warnings = ["unchecked-flag: --y [b]"]
    b.label = "drafter=[d1],steps=1"
    plan.warnings.append("see [dim]docs[/dim]")
    out = _printed(plan, width=300)
    assert f"{a.label} [deadbeef0123]: ambiguous-flag: [red]--x[/red] [/__w/pytorch/x.py]" in out
    assert "drafter=[d1],steps=1 [bold01234567]: unchecked-flag: --y [b]" in out
    assert "plan: see [dim]docs[/dim]" in out
    table_ids = [line.split()[1] for line in out.splitlines() if line.startswith("│")]
    assert "deadbeef0123" in table_ids and "bold01234567" in table_ids


LONG = "a_drafter_with_a_long_descriptive_name_trained_on_100k_samples"


def test_a_piped_plan_keeps_each_line_and_each_id_whole(write_yaml):
    """In a pipe rich would fold at 80 columns: a label split as 'nccl=t' / 'uned', ids cut to 'e767ee383…'."""
    exp = write_yaml(
        BASE.replace("d1: {", f"{LONG}: {{").replace("tp_size: 8}", "tp_size: 8, flags: {no-such-flag-anywhere: 1}}")
    )
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", str(exp), "--plan"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    label = f"drafter={LONG},steps=3,nccl=tuned"
    warned = [line for line in lines if line.startswith("warning ") and label in line]
    assert any("no-such-flag-anywhere" in line and line.endswith("checked here)") for line in warned), proc.stdout
    rows = [line for line in lines if line.startswith("│")]
    assert rows and "…" not in proc.stdout
    assert all(len(line.split("│")[1].strip()) == 12 for line in rows)  # every id whole


ONE = """
name: one
server: {model_path: /m, tp_size: 8}
grid:
  axes:
    drafter:
      values:
        none: {}
        d1: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d1, speculative-eagle-topk: 1}}
"""


def test_counts_take_their_noun_in_the_right_number(write_yaml):
    plan = _plan(write_yaml, ONE)
    base, spec = plan.points
    base.errors, base.warnings, spec.errors, spec.warnings = ["e"], [], [], ["w"]
    out = _printed(plan, width=200)
    assert "one: 2 points (1 baseline, 1 invalid)" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert "│ 1 error " in rows[base.id] and "│ 1 warning " in rows[spec.id]
    spec.errors = ["e2", "e3"]
    out = _printed(plan, width=200)
    assert "│ 2 errors " in out
    import pytest

    from sweep.core.errors import PlanError

    plan.points = [base]
    with pytest.raises(PlanError, match=r"^1 of 1 point would fail"):
        plan.require_valid()
