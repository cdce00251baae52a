"""``decide`` as part of a whole sweep: a dry run on local Ray with the fake server, two drafters whose
picks are close. After the grid, the picks within noise get their candidates measured again in pairs
(back to back on one host, A B then B A), each measurement kept as a repeat beside the grid's rows; every
decision ends decided, equal or out of budget in ``decisions.parquet``; the report says which; the
grid's own rows stay as they were."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.conftest import free_port, run_sweep_cli
from tests.experiments import DRAFT_TOKENS, experiment, write

pytestmark = [
    pytest.mark.slow,
    pytest.mark.scenario,
]  # a whole dry run with its phase after the grid: the scenario tier

D = {"speculative-algorithm": "EAGLE3", "speculative-eagle-topk": 1}


def test_the_picks_within_noise_are_measured_again_and_each_decision_ends(tmp_path):
    exp = experiment(
        name="decide",
        server={"port": free_port()},
        grid={
            "axes": {
                "drafter": {
                    "values": {
                        "none": {},
                        "a": {"flags": {**D, "speculative-draft-model-path": "/da"}},
                        "b": {"flags": {**D, "speculative-draft-model-path": "/db"}},
                    }
                },
                "steps": {"flag": "speculative-num-steps", "values": [2]},
            },
            "derived": DRAFT_TOKENS,
        },
        benchmark={
            "single_stream": {"runs": 1, "warmup": 1, "max_tokens": 32},
            "concurrency": {"levels": [1, 4], "rounds": 1, "max_tokens": 32},
            "slo": [{"name": "any", "percentile": 90, "tok_s": 1}],
        },
        dry_run={"hosts": 2, "fake_args": ["--fake-accept-map", json.dumps({"da": 0.7, "db": 0.69})]},
        decide={"enabled": True, "budget_share": 3.0, "max_repeats": 3},
    )
    path = write(tmp_path / "decide.yaml", exp, results_dir=tmp_path / "res")
    res = tmp_path / "res"

    r = run_sweep_cli(str(path), "--dry-run", timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "decide:" in r.stdout and "within noise to decide" in r.stdout, r.stdout[-3000:]

    decisions = pl.read_parquet(res / "decisions.parquet")
    assert decisions.height >= 1, r.stdout[-3000:]
    assert set(decisions["outcome"]) <= {"decided", "equal", "budget"}
    measured = decisions.filter(pl.col("rounds") > 0)
    assert measured.height >= 1 and (measured["repeats_pick"] >= 2).all(), decisions.rows()

    levels = pl.read_parquet(str(res / "levels" / "*.parquet"))
    again = levels.filter(pl.col("repeat").fill_null(0) > 0)
    assert again.height >= 2  # both candidates of a decision, measured again
    # in pairs: each round measured both candidates, back to back, the second round in reverse order
    d = measured.row(0, named=True)
    for k in (1, 2):
        starts = {
            pid: again.filter((pl.col("point_id") == pid) & (pl.col("decide_round") == k))["level_started_at"].min()
            for pid in (d["pick_id"], d["other_id"])
        }
        assert None not in starts.values(), (k, starts, again.select("point_id", "concurrency", "decide_round").rows())
        if k == 1:
            first = min(starts, key=starts.get)
        else:
            assert min(starts, key=starts.get) != first  # A B, then B A
    # the grid's rows are all there, one per (point, level), and each repeat has its requests
    assert levels.filter(pl.col("repeat").is_null()).group_by("point_id", "concurrency").len()["len"].max() == 1
    requests = pl.read_parquet(str(res / "requests" / "*.parquet"))
    for pid, c, k in again.select("point_id", "concurrency", "repeat").iter_rows():
        mine = requests.filter(
            (pl.col("point_id") == pid)
            & (pl.col("concurrency") == c)
            & (pl.col("phase") == "level")
            & (pl.col("repeat") == k)
        )
        assert (
            mine.height
            == again.filter((pl.col("point_id") == pid) & (pl.col("concurrency") == c) & (pl.col("repeat") == k))[
                "requests"
            ][0]
        )
    # a repeat is recorded as a measurement, not as a point: the points table is the grid's
    points = pl.read_parquet(str(res / "points" / "*.parquet"))
    assert points.height == 3 and (points["status"] == "ok").all()

    report = run_sweep_cli("report", str(res), "--no-plots", timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    md = (res / "report" / "report.md").read_text()
    assert "Decisions measured again (decide)" in md
    for outcome in decisions["outcome"].to_list():
        assert f"| {outcome} " in md or f"|{outcome}|" in md.replace(" ", "")

    again_run = run_sweep_cli(str(path), "--dry-run", timeout=120)  # resumed: nothing to run, decided already
    assert again_run.returncode == 0 and "decide:" not in again_run.stdout, again_run.stdout[-2000:]
