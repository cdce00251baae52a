"""The live view's text as a person reads it: labels, stages and reasons shown as they are (never
read as console markup); and plain output (a pipe, CI) in few lines that say what ran where."""

import io

from rich.console import Console

from sweep.core.events import (
    LevelProgress,
    PointFinished,
    PointStage,
    RunProgress,
    StartupProgress,
    StepStarted,
    TaskStarted,
)
from sweep.core.record import PointResult
from sweep.orchestrate import progress as progress_mod
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


def test_plain_output_is_a_line_at_a_points_start_and_one_at_its_end_naming_its_levels(monkeypatch):
    """Not a line per stage (12 a point, 'level' without its C): a point that runs briskly has three
    (its start, its benchmark's with the server's startup, its end), and its end says what it
    measured, each level by its C, and where the stop rule ended one."""
    buf = io.StringIO()
    sp = SweepProgress(1, 1, Console(file=buf, width=300, force_terminal=False))
    now = [100.0]
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: now[0])
    events = [TaskStarted(), StepStarted("preflight"), StartupProgress("load"), StartupProgress("capture")]
    events += [StartupProgress("ready"), StepStarted("benchmark"), RunProgress("warmup", 1, 1)]
    events += [RunProgress("single", i, 3) for i in (1, 2, 3)]
    for c in (1, 4, 8):
        events += [LevelProgress(c, done=d, of=4) for d in range(4)]
    events += [LevelProgress(8, done=3, of=4, stopped=True), StepStarted("stop")]
    for ev in events:
        sp.on(PointStage.at("id1", "drafter=d1", "gpu-1", ev))
        now[0] += 0.5
    sp.on(PointFinished("drafter=d1", PointResult("id1", "gpu-1", "n", "ok", started_at=0.0, ended_at=12.0)))
    lines = [line.split("] ", 1)[1] for line in buf.getvalue().splitlines()]
    assert lines == [
        "gpu-1: drafter=d1: start",
        "gpu-1: drafter=d1: benchmark, server up in 1s (load 0s, capture 0s)",
        "drafter=d1: ok in 12s on gpu-1 (single stream, C=1, 4, 8; stopped early (measured enough) at C=8) | 1 ok, "
        "0 failed, 0 to go",
    ]


def test_a_long_level_says_its_c_every_30_s(monkeypatch):
    buf = io.StringIO()
    sp = SweepProgress(1, 1, Console(file=buf, width=300, force_terminal=False))
    now = [100.0]
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: now[0])
    sp.on(PointStage.at("id1", "p", "gpu-1", TaskStarted()))
    for d in range(100):
        sp.on(PointStage.at("id1", "p", "gpu-1", LevelProgress(30, done=d, of=100)))
        now[0] += 1.0
    lines = [line.split("] ", 1)[1] for line in buf.getvalue().splitlines()]
    assert lines == [
        "gpu-1: p: start",
        "gpu-1: p: level C=30 30/100",
        "gpu-1: p: level C=30 60/100",
        "gpu-1: p: level C=30 90/100",
    ]
