"""The adaptive search as a whole sweep: a dry run on local Ray with the fake server, where a weak
drafter's points cannot win. Its probe runs, the rest of its group is recorded as pruned with the
reason and how to run it anyway, the report lists them, and the same command again runs nothing.
``--plan`` says what it may skip before anything runs."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.conftest import free_port, run_sweep_cli
from tests.experiments import DRAFT_TOKENS, experiment, write

# a whole sweep on a local Ray cluster through a resume, as the other whole-sweep tests: the scenario tier
# (python -m pytest -m scenario); tests/search/test_adaptive.py checks the search itself in the default suite
pytestmark = [pytest.mark.slow, pytest.mark.scenario]

STRONG = {
    "speculative-algorithm": "EAGLE3",
    "speculative-draft-model-path": "/drafters/ds",
    "speculative-eagle-topk": 1,
}
WEAK = {**STRONG, "speculative-draft-model-path": "/drafters/dw"}


def _experiment(tmp_path):
    exp = experiment(
        name="adaptive",
        server={"port": free_port()},
        search={"strategy": "adaptive"},
        grid={
            "axes": {
                "drafter": {"values": {"none": {}, "strong": {"flags": STRONG}, "weak": {"flags": WEAK}}},
                "steps": {"flag": "speculative-num-steps", "values": [1, 2, 3]},
            },
            "derived": DRAFT_TOKENS,
        },
        benchmark={
            "single_stream": {"runs": 2, "warmup": 0, "max_tokens": 32},
            "concurrency": {"levels": [1, 4], "rounds": 1, "max_tokens": 32},
        },
        dry_run={"hosts": 2, "fake_args": ["--fake-accept-map", json.dumps({"ds": 0.85, "dw": 0.2})]},
    )
    return write(tmp_path / "adaptive.yaml", exp, results_dir=tmp_path / "res")


def test_a_weak_drafter_is_probed_then_pruned_and_a_resume_runs_nothing(tmp_path):
    exp = _experiment(tmp_path)
    plan = run_sweep_cli(str(exp), "--plan", "--dry-run", timeout=60)
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    assert "adaptive search (search.strategy=adaptive): runs at least" in plan.stdout
    assert "may skip up to" in plan.stdout

    r = run_sweep_cli(str(exp), "--dry-run", timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    pts = pl.read_parquet(str(tmp_path / "res" / "points" / "*.parquet"))
    assert pts.height == 7  # every point of the plan has its row: run, or pruned
    by = {row["label"]: row for row in pts.iter_rows(named=True)}
    # the weak drafter's probe (its most steps) ran; at least one of its other points was pruned
    assert by["drafter=weak,steps=3"]["status"] == "ok"
    pruned = pts.filter(pl.col("status") == "pruned")
    assert pruned.height >= 1 and set(pruned["label"]) <= {"drafter=weak,steps=1", "drafter=weak,steps=2"}, pts.select(
        "label", "status", "failure_reason"
    ).rows()
    for row in pruned.iter_rows(named=True):
        assert (
            row["failure_phase"] == "search"
            and "at best within noise of a point already measured" in row["failure_reason"]
        )
        assert "--only LABEL" in row["failure_fix"] and row["attempts"] == 0
    # the strong drafter's and the baseline's points all ran: the answer is among them
    assert all(by[f"drafter=strong,steps={k}"]["status"] == "ok" for k in (1, 2, 3))
    levels = pl.read_parquet(str(tmp_path / "res" / "levels" / "*.parquet"))
    assert set(levels["point_id"]) == set(pts.filter(pl.col("status") == "ok")["point_id"])  # pruned: nothing measured

    report = run_sweep_cli("report", str(tmp_path / "res"), "--no-plots", timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    md = (tmp_path / "res" / "report" / "report.md").read_text()
    assert "Pruned by the adaptive search" in md and pruned["label"][0] in md

    again = run_sweep_cli(str(exp), "--dry-run", timeout=120)
    assert again.returncode == 0 and "0 to run" in again.stdout, again.stdout[-2000:]
    assert pl.read_parquet(str(tmp_path / "res" / "points" / "*.parquet")).height == 7
