"""Client-side axes as a whole sweep: a dry run on local Ray with the fake server, two workloads and
two max_tokens per server, where each server launches once and each of its points has its own rows."""

from __future__ import annotations

import polars as pl
import pytest

from tests.conftest import free_port, run_sweep_cli
from tests.experiments import D1, experiment, write

# a whole sweep on a local Ray cluster, as the other tests/orchestrate/*_e2e.py: the scenario tier (python -m
# pytest -m scenario); tests/test_launches.py checks the launches a plan makes in the default suite
pytestmark = [pytest.mark.slow, pytest.mark.scenario]

DRAFTERS = {
    "values": {"none": {}, "d1": {"flags": {**D1, "speculative-num-steps": 2, "speculative-num-draft-tokens": 3}}}
}


def _experiment(tmp_path):
    exp = experiment(
        name="launches",
        server={"port": free_port()},
        grid={
            "axes": {
                "drafter": DRAFTERS,
                "workload": {
                    "values": {
                        "code": {"benchmark": {"prompts": "coding"}},
                        "wiki": {"benchmark": {"prompts": "encyclopedic"}},
                    }
                },
                "max_tokens": {"key": "benchmark.concurrency.max_tokens", "values": [16, 32]},
            }
        },
        benchmark={
            "single_stream": {"runs": 1, "warmup": 0, "max_tokens": 16},
            "concurrency": {"levels": [1, 2], "rounds": 1, "max_tokens": 32},
        },
        dry_run={"hosts": 2},
    )
    return write(tmp_path / "launches.yaml", exp, results_dir=tmp_path / "res")


def test_each_server_launches_once_for_its_workloads_and_max_tokens(tmp_path):
    exp = _experiment(tmp_path)
    r = run_sweep_cli(str(exp), "--dry-run", timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    pts = pl.read_parquet(str(tmp_path / "res" / "points" / "*.parquet"))
    assert pts.height == 8 and set(pts["status"]) == {"ok"}, pts.select("label", "status", "failure_reason").rows()
    assert pts["launch_id"].n_unique() == 2 and pts["point_id"].n_unique() == 8
    for _, group in pts.group_by("launch_id"):
        assert group.height == 4 and group["bench_key"].n_unique() == 4
        assert group["startup_s"].drop_nulls().len() == 1  # one startup per launch
    assert set(pts["bench_key"]) == {f"workload={w},max_tokens={m}" for w in ("code", "wiki") for m in (16, 32)}
    # each launch's server log says it started once (the fake's own log lines, one log per launch)
    logs = sorted((tmp_path / "res" / "logs").glob("*.log"))
    assert len(logs) == 2, logs
    levels = pl.read_parquet(str(tmp_path / "res" / "levels" / "*.parquet"))
    assert set(levels["point_id"]) == set(pts["point_id"])  # every point measured its own levels
    assert levels.group_by("point_id").len()["len"].to_list() == [2] * 8
    reqs = pl.read_parquet(str(tmp_path / "res" / "requests" / "*.parquet"))
    by_tokens = dict(pts.select("point_id", "axis_max_tokens").iter_rows())
    mine = reqs.filter(pl.col("phase") == "level") if "phase" in reqs.columns else reqs
    assert all(by_tokens[pid] in (16, 32) for pid in mine["point_id"].unique())
