"""The live view's text as a person reads it: labels, stages and reasons shown as they are (never
read as console markup)."""

import io

from rich.console import Console

from sweep.core.events import StartupProgress
from sweep.orchestrate.progress import SweepProgress


def test_live_lines_show_labels_and_details_as_they_are():
    sp = SweepProgress(1, 1, Console(file=io.StringIO(), width=200, force_terminal=False))
    sp.host_event("gpu-[1]", "drafter=[b]d1,nccl=[dim]", StartupProgress("load", progress="load [red]1/2[/red]"))
    out = io.StringIO()
    Console(file=out, width=200).print(sp._render())
    row = next(line for line in out.getvalue().splitlines() if line.startswith("gpu-"))
    assert "gpu-[1]" in row and "drafter=[b]d1,nccl=[dim]" in row and "[red]1/2[/red]" in row


def test_a_pruned_point_is_neither_failed_nor_pending():
    buf = io.StringIO()
    sp = SweepProgress(
        3, 1, Console(file=buf, width=300, force_terminal=False), estimates={"a": 60.0, "b": 60.0, "c": 60.0}
    )
    sp.point_finished("h", "a", "ok", 60.0)
    sp.point_finished(None, "b", "pruned", 0.0, "at best within noise of a")
    assert (sp.done, sp.failed, sp.pruned) == (1, 0, 1)
    assert "b: pruned (at best within noise of a) | 1 ok, 0 failed, 1 pruned, 1 to go" in buf.getvalue()
    assert sp.durations == [60.0] and sp.eta_s() is not None  # only c is pending
    sp.point_finished(None, "c", "pruned", 0.0, "at best within noise of a")
    assert sp.eta_s() is None  # nothing left
