"""The confirmation phase as a whole sweep (``policy.confirm``): a dry run on local Ray with the fake
server runs the grid, derives the policy and runs its own server as one more point of the sweep, in
the same directory; ``python -m sweep confirm DIR`` resumes it without running it again; a failed
confirmation is recorded as data (a fake of SGLang 0.5.10, which has no adaptive flags: the plan was
checked against 0.5.23, the host runs another release); on a fake of 0.5.23 the confirmation alone is
refused (the grid ran 0.5.10), and in a directory of its own the grid and the confirmation run under it."""

from __future__ import annotations

import json

import polars as pl
import pytest

import sweep
from sweep.core.events import SweepStarted
from sweep.results import load
from tests.conftest import free_port, run_sweep_cli
from tests.experiments import DRAFT_TOKENS, DRAFTERS, experiment, write

pytestmark = [
    pytest.mark.slow,
    pytest.mark.scenario,
]  # a whole dry run with its phase after the grid: the scenario tier


def _experiment(tmp_path):
    exp = experiment(
        name="confirm",
        server={"port": free_port()},
        grid={
            "axes": {"drafter": DRAFTERS, "steps": {"flag": "speculative-num-steps", "values": [1, 3]}},
            "derived": DRAFT_TOKENS,
        },
        benchmark={"single_stream": {"runs": 1, "warmup": 0, "max_tokens": 16}, "server_metrics": False},
        dry_run={"hosts": 2},
        policy={"confirm": True},
    )
    return write(tmp_path / "confirm.yaml", exp, results_dir=tmp_path / "res")


def _points(res):
    return load(res)["points"].collect()  # the steps axis: numbers for the grid, "adaptive" for the confirmation


def test_grid_then_confirmation_resumed_and_a_failure_kept_as_data(tmp_path):
    exp, res = _experiment(tmp_path), tmp_path / "res"
    r = run_sweep_cli(str(exp), "--dry-run", timeout=150)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]  # the confirmation failed: recorded, the sweep finished
    pts = _points(res)
    grid = pts.filter(pl.col("axis_steps").fill_null("") != "adaptive")
    assert grid.height == 3 and set(grid["status"]) == {"ok"}, pts.select("label", "status", "failure_reason").rows()
    conf = pts.filter(pl.col("axis_steps") == "adaptive").row(0, named=True)
    assert conf["label"] == "drafter=d1,steps=adaptive" and conf["status"] == "failed"
    assert conf["failure_phase"] == "preflight" and "--speculative-adaptive" in conf["failure_reason"], conf
    assert conf["baseline_id"] == grid.filter(pl.col("baseline"))["point_id"][0]
    i = conf["argv"].index("--speculative-adaptive-config")
    config = json.loads(conf["argv"][i + 1])
    # tiers keyed where SGLang routes the levels' batches (C=4's from above C=1's: 2 to 4), one step count each
    assert set(config) <= {"1", "2", "3", "4"} and "1" in config
    assert all(len(tier["candidate_steps"]) == 1 for tier in config.values()), config
    assert f"drafter=d1,steps=adaptive [{conf['point_id']}]" in out and "failed" in out
    # the plan the directory keeps names it too
    plan = json.loads((res / "plan.json").read_text())
    assert conf["point_id"] in {p["id"] for p in plan["points"]} and len(plan["points"]) == 4

    # the command on the directory: the same policy, the same point, already recorded: nothing runs
    again = run_sweep_cli("confirm", str(res), timeout=60)
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    assert "1 confirmation point, 0 to run, 1 already recorded" in again.stdout, again.stdout[-3000:]
    assert _points(res).height == 4
    # from Python, the same: its events say they are the confirmation's (not a second grid)
    events: list = []
    sweep.confirm(res, progress=events.append)
    assert [(e.phase, e.points, e.to_run) for e in events if isinstance(e, SweepStarted)] == [("confirm", 1, 0)]

    # the confirmation alone on a fake of SGLang 0.5.23 (--only selects it by label) is refused: the
    # grid it is compared with ran 0.5.10, and nothing is run or written
    upgraded = ("--dry-run", "dry_run.fake_args=[--fake-version,0.5.23]")
    alone = run_sweep_cli(str(exp), *upgraded, "--retry-failed", "--only", "*steps=adaptive", timeout=120)
    assert alone.returncode == 5, alone.stdout[-3000:] + alone.stderr[-3000:]
    assert "3 points measured under SGLang 0.5.10" in alone.stderr and _points(res).height == 4
    # measured under 0.5.23 in a directory of its own, as the refusal says: the grid, then the policy's
    # server, which serves every level
    res23 = tmp_path / "res-0.5.23"
    fixed = run_sweep_cli(str(exp), *upgraded, f"results_dir={res23}", timeout=240)
    assert "1 confirmation point, 1 to run" in fixed.stdout, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    assert "3 points, 3 to run" in fixed.stdout and _points(res).height == 4
    pts = _points(res23)
    conf2 = pts.filter(pl.col("axis_steps") == "adaptive").row(0, named=True)
    assert conf2["status"] == "ok", (conf2["failure_phase"], conf2["failure_reason"])
    assert conf2["sglang_version"] == "0.5.23" and pts.height == 4
    assert fixed.returncode == 0
    levels = load(res23)["levels"].filter(pl.col("point_id") == conf2["point_id"]).collect()
    assert sorted(levels["concurrency"].to_list()) == [1, 4]  # the group's levels
    # the server ran SGLang's adaptive speculation (not its fallback to static), its step counts per level
    assert conf2["adaptive"] is True and conf2["adaptive_disabled_reason"] is None
    assert levels["adaptive_steps_final"].null_count() == 0 and levels["adaptive_switches"].null_count() == 0
    i = conf2["argv"].index("--speculative-adaptive-config")
    config2 = json.loads(conf2["argv"][i + 1])
    ran = {s for steps in levels["adaptive_steps"].to_list() for s in steps}
    assert ran <= {k for tier in config2.values() for k in tier["candidate_steps"]}, (ran, config2)
