"""sweep/results/schema.py: the one definition of the tables, and ``check`` / ``from_rows`` holding
every writer to it."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.core.errors import ResultsError
from sweep.results.schema import (
    AXIS_PREFIX,
    BENCH_SCALE,
    ENV,
    PARAM_ROLES,
    POINTS,
    REAPED,
    REQUESTS,
    TABLES,
    check,
    from_rows,
)


def test_every_table_has_point_id_and_unique_names():
    for name, schema in TABLES.items():
        assert schema.names[0] == "point_id", name
        assert len(set(schema.names)) == len(schema.names), name


def test_no_column_holds_json_text():
    """Issue 14: nested values are Arrow types (the JSON-text columns are gone, axis values stored once)."""
    assert "params" not in POINTS.names
    assert POINTS.field("param_roles").type == PARAM_ROLES == pa.map_(pa.string(), pa.string())
    assert POINTS.field("env").type == ENV == pa.map_(pa.string(), pa.string())
    assert POINTS.field("reaped").type == REAPED and pa.types.is_struct(REAPED)
    assert POINTS.field("bench_scale").type == BENCH_SCALE and pa.types.is_struct(BENCH_SCALE)
    assert REQUESTS.field("spec_accept_histogram").type == pa.list_(pa.int64())
    # what is left as text is text: names, reasons, log tails, label strings
    text = {f.name for schema in TABLES.values() for f in schema if pa.types.is_string(f.type)}
    assert not text & {"params", "param_roles", "env", "reaped", "bench_scale", "checks", "argv"}


def test_from_rows_fills_nulls_and_keeps_axis_order():
    t = from_rows(
        [
            {"point_id": "p", "label": "x", "axis_steps": "2", "axis_drafter": "d"},
            {"point_id": "q", "axis_nccl": "tuned"},
        ],
        "points",
    )
    assert t.column_names[len(POINTS.names) :] == ["axis_steps", "axis_drafter", "axis_nccl"]  # as given
    assert t.column("status").to_pylist() == [None, None]
    assert t.column("axis_nccl").to_pylist() == [None, "tuned"]
    assert t.schema.field("axis_steps").type == pa.string()


def test_nested_values_round_trip_through_parquet_and_polars(tmp_path):
    row = {
        "point_id": "p",
        "param_roles": {"drafter": "drafter", "nccl": "env"},
        "env": {"NCCL_ALGO": "Ring", "API_TOKEN": "<redacted>"},
        "reaped": {
            "killed": [{"pid": 7, "name": "python", "cmdline": "python -m x", "reason": "left over"}],
            "foreign": [{"pid": 9, "name": "other", "cmdline": "", "reason": "holds 900 MiB", "gpu": 3}],
            "gpu_free": True,
            "port_free": True,
            "waited_s": 0.5,
        },
        "bench_scale": {"fake_speed": 5.0, "levels": [1, 8]},
        "axis_drafter": "d1",
        "axis_nccl": "tuned",
    }
    pq.write_table(from_rows([row], "points"), tmp_path / "p.parquet")
    back = pl.read_parquet(tmp_path / "p.parquet").row(0, named=True)
    roles = back["param_roles"]
    roles = roles if isinstance(roles, dict) else {e["key"]: e["value"] for e in roles}  # polars 1: a list
    assert roles == {"drafter": "drafter", "nccl": "env"}
    assert back["reaped"]["foreign"][0]["gpu"] == 3 and back["reaped"]["killed"][0]["gpu"] is None
    assert back["bench_scale"]["fake_speed"] == 5.0 and back["bench_scale"]["levels"] == [1, 8]
    assert back["bench_scale"]["rounds"] is None


def test_check_rejects_a_table_that_does_not_fit():
    good = from_rows([{"point_id": "p", "concurrency": 1}], "levels")
    assert check(good, "levels").schema == TABLES["levels"]
    with pytest.raises(ResultsError, match=r"missing \['wall_s'\]") as e:
        check(good.drop_columns(["wall_s"]), "levels")
    assert "sweep/results/schema.py" in e.value.fix
    with pytest.raises(ResultsError, match=r"unexpected \['extra'\]"):
        check(good.append_column("extra", pa.array([1])), "levels")
    with pytest.raises(ResultsError, match="unexpected"):  # only points may add axis_* columns
        check(good.append_column(f"{AXIS_PREFIX}x", pa.array(["a"])), "levels")
    bad = good.set_column(good.column_names.index("concurrency"), "concurrency", pa.array(["many"]))
    with pytest.raises(ResultsError, match="wrong type"):
        check(bad, "levels")


def test_check_casts_to_the_schema_and_orders_columns():
    t = pa.table({f.name: pa.nulls(1, f.type) for f in reversed(list(TABLES["single_stream"]))})
    t = t.set_column(t.column_names.index("run"), "run", pa.array([3], pa.int64()))
    out = check(t, "single_stream")
    assert out.schema == TABLES["single_stream"] and out.column("run").to_pylist() == [3]
