"""`report DIR`: the Markdown, the terminal output and the plots, on full, partial and empty sweeps."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from sweep.analysis.cli import add_report_arguments, run_report
from sweep.core.errors import ResultsError
from tests.analysis.sweepdir import SweepDir, story_sweep

PNG = b"\x89PNG\r\n\x1a\n"


def report_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.slow  # draws six plots (~3 s)
def test_dry_run_report_tells_the_story(tmp_path, capsys):
    directory = story_sweep(tmp_path / "k26_eagle-dryrun").write()
    assert run_report(report_args(str(directory))) == 0
    out = directory / "report"
    md = (out / "report.md").read_text()
    for name in ("single_stream", "concurrency", "speedup_vs_concurrency", "speedup_grid", "nccl_effect", "startup"):
        assert (out / f"{name}.png").read_bytes().startswith(PNG)
        assert f"]({name}.png)" in md
    assert "DRY RUN" in md and '{"single_stream_runs": [5, 3]}' in md
    assert "12 of 12 speculative configurations are faster than their baseline" in md  # C=1
    assert "(C=250), 12 of 12 speculative configurations are slower" in md  # saturation
    assert (
        "no decision there: drafter=none,nccl=tuned measured highest, within noise of drafter=none,nccl=default"
    ) in md  # the two baselines, 2 % apart at C=250
    assert "deploy" not in md.split("## Summary")[1].split("\n## ")[0]
    assert "nccl=tuned against nccl=default lifts every curve" in md
    assert "Speculation stops paying from C=30 to C=100, by configuration (12 configurations that were ahead" in md
    assert re.search(r"\| drafter=k26_300k,steps=4,nccl=tuned +\| failed +\| capture +\| torch", md)
    assert "topk=1: num-draft-tokens forced to steps + 1" in md
    assert "percentile bootstrap" in md  # the method footer
    printed = capsys.readouterr().out
    assert "Summary" in printed and "report written to" in printed


def test_partial_sweep(tmp_path, capsys):
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], written=False)
    sd.point(drafter="d1", steps="1", nccl="default", baseline_of=base, tok_s=[120, 121])  # no levels yet
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        status="failed",
        failure_phase="load",
        failure_reason="drafter path not found",
        failure_fix="copy the drafter to every host",
        log_tail="Load weight begin.\nOSError: /models/d1 does not exist\n\n",
    )
    directory = sd.write()
    plan = {
        "experiment": "test",
        "points": [{"id": p.point_id, "label": p.label} for p in sd.points],
        "warnings": ["3 hosts for 3 points"],
    }
    (directory / "plan.json").write_text(json.dumps(plan))
    assert run_report(report_args(str(directory), "--no-plots", "--quiet")) == 0
    md = (directory / "report" / "report.md").read_text()
    assert "Partial sweep: 1 of 3 planned points not written yet (drafter=none,nccl=default)" in md
    assert "baseline not written yet" in md and "drafter path not found" in md
    assert re.search(r"\| drafter path not found +\| copy the drafter to every host +\|", md)  # reason, then fix
    assert "| OSError: /models/d1 does not exist |" in md  # the log's last line
    assert "- 3 hosts for 3 points" in md  # a warning about the plan as a whole
    assert not list((directory / "report").glob("*.png"))
    assert "report written to" in capsys.readouterr().out


def test_within_noise_is_marked(tmp_path):
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 102, 98])
    sd.point(drafter="d1", steps="1", nccl="default", baseline_of=base, tok_s=[99, 101, 103])
    directory = sd.write()
    run_report(report_args(str(directory), "--no-plots", "--quiet"))
    md = (directory / "report" / "report.md").read_text()
    assert re.search(r"\| ~1\.01x +\| \[0\.\d\d, 1\.\d\d\] +\| within noise", md)


def test_empty_and_missing_directories(tmp_path):
    """A sweep that has measured nothing yet (its sweep.json, no tables) gets a report saying so; a
    folder no sweep wrote gets an error and nothing written into it."""
    (tmp_path / "sweep.json").write_text('{"experiment": "x", "mode": "dry-run"}')
    run_report(report_args(str(tmp_path), "--no-plots", "--quiet", "--out", str(tmp_path / "r")))
    assert "Nothing measured yet" in (tmp_path / "r" / "report.md").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ResultsError, match="not a sweep's results directory"):
        run_report(report_args(str(empty), "--quiet"))
    assert not any(empty.iterdir())
    with pytest.raises(ResultsError, match="does not exist"):
        run_report(report_args(str(tmp_path / "nope"), "--quiet"))


def test_the_crossover_table_agrees_with_the_per_level_ratios(tmp_path):
    """0.98x at C=10 and 0.96x at C=100 then 1.02x at C=250, inside the level-wide noise (unknown with 4
    levels: the floor stands in): ahead up to C=1, never behind, not 'mixed'; the best per level's ratio
    and verdict are both of throughput and of that one rule (1.02x within noise, no '1.02x faster' beside
    a margin within noise), and the summary says neither 'stops paying' nor 'mixed'."""
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, levels={1: 100, 10: 1000, 100: 5000, 250: 6000})
    sd.point(
        drafter="d1",
        steps="1",
        nccl="default",
        baseline_of=base,
        levels={1: 130, 10: 980, 100: 4800, 250: 6120},
        per_request={250: 6000 / 250 * 0.96},
    )
    directory = sd.write()
    run_report(report_args(str(directory), "--no-plots", "--quiet"))
    md = (directory / "report" / "report.md").read_text()
    section = md.split("## Where speculation stops paying")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if line.startswith("| drafter=d1"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:5] == ["1", "-", "-"]  # ahead up to C, first behind at C, slower from C
    assert "never behind beyond noise: ahead at C=1; within noise at C=10, 100, 250" in row
    best = md.split("## Best configuration per concurrency level")[1].split("\n## ")[0]
    row = next(line for line in best.splitlines() if line.startswith("| 250 "))
    assert re.search(r"\| ~1\.02x +\| within noise +\|", row) and "~+2.0%" in row
    summary = md.split("## Summary")[1].split("\n## ")[0]
    assert "mixed" not in summary and "Speculation stops paying" not in summary
    assert "Verdicts at a level: the level-wide noise is unknown" in summary  # said where verdicts are made
    assert "the level-wide noise is unknown" in section and "the level-wide noise is unknown" in best
