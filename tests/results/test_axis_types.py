"""Axis columns (``axis_<name>``) in the type of their values: a numeric axis is stored as numbers,
so ``steps`` sorts 2, 5, 16 (as text "16" < "2"); an axis with any name that is not a number stays
text; and results written as text by an older version read as numbers too."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from sweep.analysis.frames import configurations
from sweep.analysis.frontier import panel_column
from sweep.results import load
from sweep.results.records import axis_types, point_row
from sweep.results.schema import axis_type, from_rows
from sweep.results.writer import ResultsDir

ROLES = {"drafter": "drafter", "steps": "steps", "scale": "other", "nccl": "env"}


def _planned(pid, **params):
    from sweep.experiment.plan import PlannedPoint

    label = ",".join(f"{k}={v}" for k, v in params.items() if v is not None)
    return PlannedPoint(
        id=pid,
        label=label,
        params={k: v for k, v in params.items() if v is not None},
        roles=dict(ROLES),
        baseline=params.get("steps") is None,
        flags={},
        env={},
        launcher=["python"],
        baseline_id=None if params.get("steps") is None else "base",
    )


def _points():
    return [
        _planned("base", drafter="none", nccl="default"),
        *[
            _planned(f"s{s}", drafter="d1", steps=str(s), scale=x, nccl="default")
            for s, x in ((16, "0.5"), (2, "1.25"), (5, "3"))
        ],
    ]


def _dry_run_dir(tmp_path, points, axes):
    rd = ResultsDir(tmp_path / "res", "e", "dry-run").open()
    for pp in points:
        rd.write_point(
            pp.id, point_row(pp, "e", axes=axes, argv=["python"], result=None, mode="dry-run", bench_scale={}), {}
        )
    return rd.path


def test_the_type_of_an_axis_is_that_of_all_its_values():
    assert axis_type(["2", "5", "16", None]) == pa.int64()
    assert axis_type(["0.5", "1.25", "3"]) == pa.float64()
    assert axis_type(["1", "auto"]) == pa.string()
    for texts in (["True", "False"], ["007"], ["1e3"], ["nan"], ["inf"], ["+1"], [None], []):
        assert axis_type(texts) == pa.string(), texts  # only names a number prints back as
    types = axis_types(_points(), ["drafter", "steps", "scale", "nccl"])
    assert types == {"drafter": pa.string(), "steps": pa.int64(), "scale": pa.float64(), "nccl": pa.string()}


def test_a_numeric_axis_is_stored_as_numbers_and_sorts_as_numbers(tmp_path):
    points = _points()
    d = _dry_run_dir(tmp_path, points, axis_types(points, list(ROLES)))
    for f in (d / "points").glob("*.parquet"):  # every file of the folder in the same types
        schema = pq.read_schema(f)
        assert (
            schema.field("axis_steps").type,
            schema.field("axis_scale").type,
            schema.field("axis_drafter").type,
        ) == (pa.int64(), pa.float64(), pa.string()), f
    pts = load(d)["points"].collect()
    assert pts.filter(pl.col("axis_steps").is_not_null()).sort("axis_steps")["axis_steps"].to_list() == [2, 5, 16]
    assert pts.sort("axis_scale", nulls_last=True)["axis_scale"].to_list() == [0.5, 1.25, 3.0, None]
    assert pl.scan_parquet(d / "points" / "*.parquet").select("axis_steps").collect()["axis_steps"].dtype == pl.Int64
    conf = {r["point_id"]: r for r in configurations(load(d)).iter_rows(named=True)}
    assert conf["s2"]["spec"] == "steps=2" and conf["s16"]["group"] == "scale=0.5"
    assert list(conf) == ["base", "s16", "s2", "s5"]  # natural order: by group (scale=0.5, 1.25, 3) first
    panels = configurations(load(d)).select("point_id", p=panel_column(load(d), "steps"))
    assert dict(panels.iter_rows()) == {"base": "steps=(none)", "s2": "steps=2", "s5": "steps=5", "s16": "steps=16"}


def test_older_results_with_text_axes_read_as_numbers_beside_new_ones(tmp_path):
    points = _points()
    d = _dry_run_dir(tmp_path, points[:2], list(ROLES))  # an older writer: every axis as text
    assert pq.read_schema(d / "points" / "s16.parquet").field("axis_steps").type == pa.string()
    for pp in points[2:]:  # resumed by today's writer
        ResultsDir(d, "e", "dry-run").write_point(
            pp.id,
            point_row(
                pp,
                "e",
                axes=axis_types(points, list(ROLES)),
                argv=["python"],
                result=None,
                mode="dry-run",
                bench_scale={},
            ),
            {},
        )
    pts = load(d)["points"].collect()
    assert pts.schema["axis_steps"] == pl.Int64 and pts.schema["axis_drafter"] == pl.String
    assert pts.filter(pl.col("axis_steps").is_not_null()).sort("axis_steps")["axis_steps"].to_list() == [2, 5, 16]
    text_only = from_rows(
        [
            {"point_id": "x", "axis_steps": "2", "axis_drafter": "d1"},
            {"point_id": "y", "axis_steps": "auto", "axis_drafter": "2"},
        ],
        "points",
    )
    (tmp_path / "old" / "points").mkdir(parents=True)
    pq.write_table(text_only, tmp_path / "old" / "points" / "x.parquet")
    old = load(tmp_path / "old")["points"].collect()
    assert old.schema["axis_steps"] == pl.String and old["axis_steps"].to_list() == ["2", "auto"]
