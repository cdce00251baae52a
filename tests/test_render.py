"""``--plan`` as a person reads it (sweep/render.py): every id, label, value and reason printed as it
is (never read as console markup), lines that do not wrap in a pipe, and counts with their noun in
the right number."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from sweep import config, plan as planning
from sweep.render import print_plan
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
