"""Startup phases, failures, warnings and the header facts."""

from __future__ import annotations

import pytest

from sweep.analysis import failures, plan_warnings, request_failures, startup_phases, sweep_summary
from sweep.results import load
from tests.analysis.sweepdir import SweepDir


@pytest.fixture
def sweep(tmp_path):
    sd = SweepDir(tmp_path, dry_run=True, bench_scale={"levels": [1, 4]})
    base = sd.point(
        drafter="none",
        nccl="default",
        baseline=True,
        tok_s=[100, 100],
        levels={1: 100},
        lost=[("level", 1, "timeout"), ("level", 1, "timeout"), ("single", 1, "http 503: busy")],
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        status="failed",
        failure_phase="capture",
        failure_reason="CUDA out of memory",
        startup_s=None,
        http_s=None,
        ready_s=None,
        warnings=["topk=1: draft tokens forced to 3"],
    )
    sd.point(
        drafter="d1",
        steps="9",
        nccl="default",
        baseline_of=base,
        status="invalid",
        failure_phase="plan",
        errors=["tree too small", "steps > 8"],
        warnings=["topk=1: draft tokens forced to 3"],
    )
    return load(sd.write())


def test_startup_phases(sweep):
    rows = {r["label"]: r for r in startup_phases(sweep).iter_rows(named=True)}
    base = rows["drafter=none,nccl=default"]
    assert base["other_s"] == pytest.approx(125 - (60 + 5 + 30 + 2 + 3))
    died = rows["drafter=d1,steps=2,nccl=default"]
    assert died["startup_s"] is None and died["other_s"] is None and died["capture_s"] == 30


def test_failures_and_warnings(sweep):
    failed = {r["label"]: r for r in failures(sweep).iter_rows(named=True)}
    assert set(failed) == {"drafter=d1,steps=2,nccl=default", "drafter=d1,steps=9,nccl=default"}
    assert failed["drafter=d1,steps=2,nccl=default"]["failure_phase"] == "capture"
    assert failed["drafter=d1,steps=9,nccl=default"]["errors"] == "tree too small; steps > 8"
    warnings = plan_warnings(sweep).row(0, named=True)
    assert warnings["points"] == 2 and "steps=9" in warnings["labels"]


def test_request_failures(sweep):
    row = request_failures(sweep).row(0, named=True)
    assert (row["failed_single"], row["failed_levels"]) == (1, 2)
    assert row["first_error"] == "timeout" and row["error_count"] == 2


def test_summary_shows_dry_run_and_scaling(sweep):
    s = sweep_summary(sweep)
    assert s["dry_run"] is True and s["points"] == 3 and s["baselines"] == 1
    assert s["status"] == {"ok": 1, "failed": 1, "invalid": 1}
    assert s["bench_scale"] == ['{"levels": [1, 4]}'] and s["levels"] == [1]
