"""sweep/results/records.py: the points row of a point, in the types of the schema; and the shapes the
layers above hand it (the reaper's report, the dry run's scale) fit the structs declared for them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

from sweep.core.errors import ResultsError
from sweep.results.records import point_row, struct_value
from sweep.results.schema import BENCH_SCALE, POINTS, PROCESS, REAPED

REPO = Path(__file__).resolve().parents[2]


def _names(struct: pa.StructType) -> list[str]:
    return [struct.field(i).name for i in range(struct.num_fields)]


def _planned(**kw):
    from sweep.experiment.plan import PlannedPoint

    base = dict(
        id="p1",
        label="drafter=d1,steps=2,nccl=tuned",
        params={"drafter": "d1", "steps": "2", "nccl": "tuned"},
        roles={"drafter": "drafter", "steps": "steps", "nccl": "env"},
        baseline=False,
        flags={},
        env={"NCCL_ALGO": "Ring", "HF_TOKEN": "hf_secret", "A_FIRST": "1"},
        launcher=["python"],
        baseline_id="p0",
    )
    return PlannedPoint(**{**base, **kw})


def _result(**kw):
    from sweep.core.record import PointResult

    reaped = {
        "killed": [{"pid": 11, "name": "python", "cmdline": "python -m sglang", "reason": "stopped after the point"}],
        "foreign": [{"pid": 12, "name": "x", "cmdline": "x", "reason": "holds 900 MiB on GPU 1", "gpu": 1}],
        "gpu_free": True,
        "port_free": True,
        "waited_s": 0.25,
    }
    return PointResult("p1", "gpu-1", "n1", "ok", reaped=reaped, **kw)


SCALE = {
    "fake_speed": 5.0,
    "fake_startup_speed": 300.0,
    "stream_interval": 8,
    "max_tokens_scale": 0.125,
    "single_stream": [2048, 256],
    "concurrency_max_tokens": [512, 64],
    "rounds": [2, 1],
    "single_stream_runs": [5, 3],
    "levels": [1, 8],
}


def test_a_launched_point_row():
    t = point_row(
        _planned(),
        "exp",
        axes=["drafter", "steps", "nccl", "model"],
        argv=["python", "--api-key", "k"],
        result=_result(attempts=2),
        mode="dry-run",
        bench_scale=SCALE,
    )
    assert t.schema.field("param_roles").type == POINTS.field("param_roles").type
    assert t.schema.field("reaped").type == REAPED and t.schema.field("bench_scale").type == BENCH_SCALE
    assert "params" not in t.column_names
    # the axis values, once, in the grid's order (null where the point has none)
    assert [c for c in t.column_names if c.startswith("axis_")] == [
        "axis_drafter",
        "axis_steps",
        "axis_nccl",
        "axis_model",
    ]
    row = t.to_pylist()[0]
    assert (row["axis_drafter"], row["axis_steps"], row["axis_nccl"], row["axis_model"]) == ("d1", "2", "tuned", None)
    assert row["param_roles"] == [("drafter", "drafter"), ("steps", "steps"), ("nccl", "env")]  # arrow: pairs
    assert [k for k, _ in row["env"]] == ["A_FIRST", "HF_TOKEN", "NCCL_ALGO"]  # sorted
    assert dict(row["env"])["HF_TOKEN"] != "hf_secret" and dict(row["env"])["NCCL_ALGO"] == "Ring"
    assert "k" not in row["argv"]
    assert row["reaped"]["killed"][0]["pid"] == 11 and row["reaped"]["foreign"][0]["gpu"] == 1
    assert row["reaped"]["waited_s"] == 0.25
    assert row["bench_scale"]["levels"] == [1, 8] and row["bench_scale"]["single_stream"] == [2048, 256]
    assert row["dry_run"] and row["attempts"] == 2 and row["status"] == "ok"


def test_an_invalid_point_row_and_an_unscaled_run():
    t = point_row(
        _planned(errors=["draft tree too small"]),
        "exp",
        axes=["drafter"],
        argv=[],
        result=None,
        mode="real",
        bench_scale={},
    )
    row = t.to_pylist()[0]
    assert row["status"] == "invalid" and row["failure_phase"] == "plan"
    assert row["reaped"] is None and row["bench_scale"] is None and not row["dry_run"]


def test_struct_value_refuses_fields_its_type_lacks():
    assert struct_value({}, BENCH_SCALE) is None and struct_value(None, REAPED) is None
    with pytest.raises(ResultsError, match=r"\['speed'\]") as e:
        struct_value({"speed": 2.0}, BENCH_SCALE)
    assert "schema.py" in e.value.fix
    with pytest.raises(ResultsError, match=r"killed\[\] has fields \['signal'\]"):
        struct_value({"killed": [{"pid": 1, "signal": 9}]}, REAPED)


def test_the_reapers_report_fits_its_struct():
    """What sweep/host/reaper.py records is what schema.REAPED declares (a new field needs a column)."""
    from sweep.host import reaper

    assert [f.name for f in dataclasses.fields(reaper.ReapReport)] == _names(REAPED)
    described = reaper._describe(psutil.Process(), "a reason")
    assert set(described) <= set(_names(PROCESS))
    report = reaper.ReapReport(killed=[described], foreign=[{**described, "gpu": 0}])
    assert struct_value(report.as_dict(), REAPED)["foreign"][0]["gpu"] == 0


def test_the_dry_runs_scale_fits_its_struct():
    from sweep.experiment.config import load
    from sweep.experiment.dryrun import scaled

    _, scale = scaled(load(REPO / "experiments" / "k26_eagle.yaml"))
    assert list(scale) == _names(BENCH_SCALE)
    assert struct_value(scale, BENCH_SCALE) == scale


def test_a_pruned_point_row_names_no_sglang_version():
    """The adaptive search pruned it: it never reached a host, so no version (not 'unknown')."""
    from sweep.core.record import Failure, PointResult

    pruned = PointResult("p1", "", "", "pruned", Failure("search", "within noise of ..."), attempts=0)
    row = point_row(
        _planned(), "exp", axes=["drafter"], argv=[], result=pruned, mode="dry-run", bench_scale=SCALE
    ).to_pylist()[0]
    assert row["status"] == "pruned" and row["sglang_version"] is None
    ran = point_row(
        _planned(),
        "exp",
        axes=["drafter"],
        argv=[],
        result=_result(sglang_version="0.5.10"),
        mode="dry-run",
        bench_scale=SCALE,
    ).to_pylist()[0]
    assert ran["sglang_version"] == "0.5.10"
