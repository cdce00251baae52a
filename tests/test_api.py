"""``sweep.run`` from Python: a plan, and a dry run on a real local Ray cluster with the real fake
server (a point that fails in capture included), returning a ``SweepResult``: every point with its
status and failure as data, the tables as LazyFrames, the best configuration per level, the summary
and the report; the typed progress events; resume; the command line's exit code of each."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import polars as pl
import pytest
from rich.console import Console

import sweep
from sweep.cli import exit_code
from sweep.core.errors import ConfigError, PlanError
from sweep.core.events import ClusterReady, ClusterStarting, PointFinished, PointStage, SweepStarted
from sweep.core.types import STAGES
from tests.conftest import REPO
from tests.experiments import D1, DRAFT_TOKENS, DRAFTERS, FAULTS, experiment, write

# a baseline, and one drafter at one step count whose second point dies in capture (the fake's fault)
EXPERIMENT = experiment(
    name="api",
    grid={
        "axes": {"drafter": DRAFTERS, "steps": {"flag": "speculative-num-steps", "values": [1]}, "fault": FAULTS},
        "derived": DRAFT_TOKENS,
        "exclude": [{"drafter": "none", "fault": "oom"}],
    },
    dry_run={"hosts": 2},
    benchmark={"slo": [{"name": "loose", "tpot_s": 10.0}]},  # met everywhere: the summary's Deploy answers it
)

OOM = "drafter=d1,steps=1,fault=oom"


def _experiment(tmp_path, port: int = 32600):
    """The experiment, its results in ``tmp_path/api-res-<pid>``: the directory's name is the sweep's
    name in its servers' marker, so that no other sweep on this machine reaps them as its own."""
    return write(
        tmp_path / "api.yaml",
        experiment(EXPERIMENT, server={"port": port}),
        results_dir=tmp_path / f"api-res-{os.getpid()}",
    )


def test_import_sweep_stays_cheap():
    code = (
        "import sys, sweep; assert 'sweep.api' not in sys.modules and 'ray' not in sys.modules; "
        "import sweep.fake.main; assert 'ray' not in sys.modules and 'sweep.api' not in sys.modules; "
        "assert callable(sweep.run) and sweep.SweepResult.__name__ == 'SweepResult'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_plan_mode_launches_nothing(tmp_path):
    result = sweep.run(_experiment(tmp_path), mode="plan", overrides=["benchmark.single_stream.runs=2"])
    assert result.mode == "plan" and result.ok and not result.ran and exit_code(result) == 0
    assert [p.status for p in result.points] == ["pending"] * 3
    assert result.plan.experiment.benchmark.single_stream.runs == 2  # the override applied
    assert not result.path.exists() and result.path.name.startswith("api-res-")
    tables = result.tables  # empty, with every column
    assert isinstance(tables["levels"], pl.LazyFrame) and tables["levels"].collect().height == 0
    assert "output_throughput" in tables["levels"].collect_schema().names()
    assert result.best.height == 0 and "concurrency" in result.best.columns
    frame = result.points_frame
    assert frame.height == 3 and set(frame["status"]) == {"pending"}
    assert set(frame["axis_fault"]) == {"none", "oom"}
    assert "nothing recorded" in str(result.summary())


def test_the_points_frame_has_numeric_axes_as_numbers():
    """As in the points table (sweep/results/schema.axis_type): steps 10 sorts after 5, not before 2."""
    frame = sweep.run(
        "experiments/k26_eagle.yaml", mode="plan", overrides=["grid.axes.steps.values=[1,2,10]"]
    ).points_frame
    assert frame.schema["axis_steps"] == pl.Int64 and frame.schema["axis_drafter"] == pl.String
    assert frame.drop_nulls("axis_steps").sort("axis_steps")["axis_steps"].unique(maintain_order=True).to_list() == [
        1,
        2,
        10,
    ]


def test_plan_mode_reports_invalid_points_as_data(tmp_path):
    no_topk = {k: v for k, v in D1.items() if k != "speculative-eagle-topk"}  # steps without topk
    bad = experiment(EXPERIMENT, server={"port": 32600})
    bad["grid"]["axes"]["drafter"] = {"values": {"none": {}, "d1": {"flags": no_topk}}}
    exp = write(tmp_path / "bad.yaml", bad, results_dir=tmp_path / f"api-res-{os.getpid()}")
    result = sweep.run(exp, mode="plan")
    invalid = result.invalid
    assert len(invalid) == 2 and all(p.failure_phase == "plan" for p in invalid)
    assert all("steps-without-topk" in p.failure_reason for p in invalid)
    assert not result.ok and exit_code(result) == 3
    with pytest.raises(PlanError) as e:  # a run stops before anything launches, as the CLI does
        sweep.run(exp, mode="dry-run", progress=False)
    assert e.value.exit_code == 3 and "steps-without-topk" in e.value.message


def test_bad_mode_and_overrides_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown mode 'dryrun'"):
        sweep.run(_experiment(tmp_path), mode="dryrun")  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as e:
        sweep.run(_experiment(tmp_path), mode="plan", overrides=["server.tp_szie=8"])
    assert e.value.exit_code == 2 and "tp_size" in str(e.value)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """One dry run of three points (one fails in capture), its events, then the same call again."""
    tmp = tmp_path_factory.mktemp("api")
    exp = _experiment(tmp)
    events: list = []
    printed = io.StringIO()  # not a terminal: the plain progress lines, as in CI or a pipe
    first = sweep.run(exp, mode="dry-run", progress=events.append, console=Console(file=printed, width=400))
    again = sweep.run(exp, mode="dry-run", progress=False)
    first.printed = printed.getvalue()  # type: ignore[attr-defined]
    return first, events, again


@pytest.mark.slow
def test_dry_run_points_with_status_and_failure(dry_run):
    result, _, _ = dry_run
    assert result.mode == "dry-run" and result.path.is_dir()
    assert sorted(p.status for p in result.points) == ["failed", "ok", "ok"]
    assert len(result.ran) == 3 and all(p.ran for p in result.points)
    (failed,) = result.failed
    assert failed.label == OOM and failed.failure_phase == "capture"
    assert "CUDA out of memory" in failed.failure_reason
    assert "mem-fraction-static" in failed.failure_fix  # the fix comes with the reason
    # the host's record of each point run now is kept (its tables are on disk, not in memory)
    assert failed.result.failure is failed.failure and failed.result.host and failed.result.requests is None
    assert all(p.result.status == p.status and p.result.attempts == 1 for p in result.points)
    assert result.point(OOM) == failed
    assert not result.ok and exit_code(result) == 1
    frame = result.points_frame
    assert frame.filter(pl.col("status") == "failed")["failure_phase"].to_list() == ["capture"]
    assert frame.filter(pl.col("status") == "failed")["failure_fix"].to_list() == [failed.failure_fix]


@pytest.mark.slow
def test_dry_run_tables_best_summary_report(dry_run):
    result, _, _ = dry_run
    tables = result.tables
    assert set(tables) == {"points", "single_stream", "levels", "requests", "metrics", "decisions"}
    assert all(isinstance(t, pl.LazyFrame) for t in tables.values())
    levels = tables["levels"].select("point_id", "concurrency").collect()
    ok_ids = {p.point_id for p in result.points if p.status == "ok"}
    assert set(levels["point_id"]) == ok_ids and levels.height == 2 * 2
    best = result.best
    assert best["concurrency"].to_list() == [1, 4]
    assert set(best["label"]) <= {p.label for p in result.points if p.status == "ok"}
    summary = result.summary()
    assert summary.error is None and [b.concurrency for b in summary.best] == [1, 4]
    assert [b.value for b in summary.best] == pytest.approx(best["value"].to_list())  # one notion of best
    assert [b.label for b in summary.best] == best["label"].to_list()
    # each best names its runner-up with the margin's interval (C=1 has one request a side: the level-wide
    # noise alone, at least its floor)
    assert [b.runner_up for b in summary.best] == best["runner_up"].to_list() and None not in best["runner_up"]
    assert all(b.margin_low is not None and "(95% interval " in b.vs_runner_up() for b in summary.best)
    assert all(b.vs_runner_up() in str(summary) for b in summary.best)
    assert f"python -m sweep report {result.path}" in str(summary)
    # the answer first, as the report has it: its Deploy section, and the policy (steps 1 against none)
    # where steps 1 is ahead of its baseline beyond noise at some level (the fake's noise decides)
    from sweep.analysis import deploy

    assert summary.deploy == deploy.deploy_section(result.findings()).paragraphs and summary.deploy
    assert str(summary).startswith("Deploy:\n" + summary.deploy[0])
    assert summary.deploy[0].startswith("- SLO loose: ")  # judged by the experiment's SLO, as the report is
    assert summary.policies == list(result.policies)
    assert [p.group for p in summary.policies] in ([], ["drafter=d1,fault=none"])
    for policy in summary.policies:
        assert any(line.startswith(f"- Policy {policy.group}: ") for line in summary.deploy), summary.deploy
    if not summary.policies:
        assert result.policies.notes and "no policy" in result.policies.notes[0]  # why there is none
    report = result.report()
    assert report.startswith("#") and OOM in report  # the failure is in the report's failures section
    assert not (result.path / "report").exists()  # not written unless asked


@pytest.mark.slow
def test_dry_run_progress_events_are_typed(dry_run):
    _, events, _ = dry_run
    assert isinstance(events[0], SweepStarted) and events[0].to_run == 3 and events[0].mode == "dry-run"
    assert events[0].phase == "grid"
    # the seconds while the local Ray cluster starts are announced, then its hosts
    assert events[1] == ClusterStarting(local=True, hosts=2)
    assert isinstance(events[2], ClusterReady) and len(events[2].hosts) == 2
    assert not any(isinstance(e, PointStage) for e in events[:3])
    stages = [e for e in events if isinstance(e, PointStage)]
    assert stages and {e.stage for e in stages} <= set(STAGES)
    assert {"preflight", "load", "benchmark", "level"} <= {e.stage for e in stages}
    levels = [e for e in stages if e.stage == "level"]
    assert all(e.concurrency in (1, 4) for e in levels)
    finished = [e for e in events if isinstance(e, PointFinished)]
    assert sorted(e.status for e in finished) == ["failed", "ok", "ok"]
    oom = next(e for e in finished if e.status == "failed")
    assert oom.label == OOM and oom.failure.phase == "capture" and oom.reason.startswith("capture: ")
    assert oom.failure.fix and "mem-fraction-static" in oom.failure.fix
    assert all(e.failure is None and e.result.attempts == 1 for e in finished if e.status == "ok")


@pytest.mark.slow
def test_the_same_call_again_resumes(dry_run):
    first, _, again = dry_run
    assert again.ran == [] and exit_code(again) == 1  # nothing to run; the failure is still reported
    assert {p.point_id: p.status for p in again.points} == {p.point_id: p.status for p in first.points}
    assert not any(p.ran for p in again.points)
    assert again.failed[0].failure_reason == first.failed[0].failure_reason


@pytest.mark.slow
def test_plain_progress_is_a_few_lines_a_point_each_level_by_its_c(dry_run):
    """Not a line per stage of each point ('...: level', without its C): a line as a point starts on a
    host, one as its benchmark begins, and one as it ends, saying what it measured (the levels by
    their C) or why it failed."""
    result, _, _ = dry_run
    stamped = [line for line in result.printed.splitlines() if re.match(r"\[\d\d:\d\d:\d\d\] ", line)]
    # start, benchmark (ok points), end; a 30 s heartbeat or two at most, on a slow machine
    assert len(stamped) <= 3 * len(result.ran) + 2, "\n".join(stamped)
    for p in result.points:
        (end,) = [line for line in stamped if f"] {p.label}: {p.status} in " in line]
        if p.status == "ok":
            assert "single stream, C=1, 4" in end
        else:
            assert "capture: " in end and "fix: " in end
    assert not any(line.endswith(": level") for line in stamped)
