"""The live view's text as a person reads it: labels, stages and reasons shown as they are (never
read as console markup)."""

import io

from rich.console import Console

from sweep.core.events import PointProgress
from sweep.orchestrate.progress import SweepProgress


def test_live_lines_show_labels_and_details_as_they_are():
    sp = SweepProgress(1, 1, Console(file=io.StringIO(), width=200, force_terminal=False))
    sp.host_event("gpu-[1]", "drafter=[b]d1,nccl=[dim]", PointProgress("load", progress="load [red]1/2[/red]"))
    out = io.StringIO()
    Console(file=out, width=200).print(sp._render())
    row = next(line for line in out.getvalue().splitlines() if line.startswith("gpu-"))
    assert "gpu-[1]" in row and "drafter=[b]d1,nccl=[dim]" in row and "[red]1/2[/red]" in row
