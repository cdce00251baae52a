"""sweep/results/store.py: ``load`` of a results directory -- partial, mixed with files of older
versions (the points table's JSON-text columns converted on load), temporaries ignored."""

from __future__ import annotations

import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.analysis.frames import configurations
from sweep.core.errors import ResultsError
from sweep.results import load, store
from sweep.results.schema import DECISIONS_SCHEMA, POINTS, REQUESTS, TABLES, from_rows
from sweep.results.store import upgrade_points
from sweep.results.writer import ResultsDir

OLD_JSON = ("param_roles", "env", "reaped", "bench_scale")
OLD_REAPED = {
    "killed": [{"pid": 41, "name": "python", "cmdline": "python -m sweep.fake_sglang", "reason": "stopped"}],
    "foreign": [],
    "gpu_free": True,
    "port_free": True,
    "waited_s": 0.0,
}
OLD_SCALE = {
    "fake_speed": 5.0,
    "fake_startup_speed": 300.0,
    "stream_interval": 8,
    "max_tokens_scale": 0.125,
    "single_stream": [2048, 256],
    "concurrency_max_tokens": [512, 64],
    "rounds": [2, 1],
    "single_stream_runs": [5, 3],
    "levels": [1, 2, 5],
}


def old_points_file(
    path,
    pid: str,
    params: dict,
    roles: dict,
    *,
    env: dict | None = None,
    reaped="{}",
    bench_scale: dict | None = None,
    axes: dict | None = None,
    baseline_id=None,
) -> None:
    """A points file as the version before the typed columns wrote it: ``params``, ``param_roles``,
    ``env``, ``reaped`` and ``bench_scale`` as JSON text, beside the axis_* columns."""
    fields = [pa.field(f.name, pa.string()) if f.name in OLD_JSON else f for f in POINTS]
    fields.insert(5, pa.field("params", pa.string()))
    values = {f.name: pa.nulls(1, f.type) for f in fields}
    label = ",".join(f"{k}={v}" for k, v in params.items() if v is not None)
    text = {
        "point_id": pid,
        "label": label,
        "experiment": "exp",
        "status": "ok",
        "params": json.dumps(params),
        "param_roles": json.dumps(roles),
        "env": json.dumps(env or {}, sort_keys=True),
        "reaped": reaped if isinstance(reaped, str) else json.dumps(reaped),
        "bench_scale": json.dumps(bench_scale or {}),
        "baseline_id": baseline_id,
    }
    for k, v in text.items():
        values[k] = pa.array([v], pa.string())
    values["baseline"] = pa.array([baseline_id is None])
    table = pa.table(values, schema=pa.schema(fields))
    for axis, value in (params if axes is None else axes).items():
        table = table.append_column(f"axis_{axis}", pa.array([value], pa.string()))
    (path / "points").mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path / "points" / f"{pid}.parquet")


def test_a_missing_directory_is_an_error_that_says_what_to_pass(tmp_path):
    with pytest.raises(ResultsError, match="does not exist") as e:
        load(tmp_path / "nope")
    assert "results/" in e.value.fix


def test_a_sweep_that_measured_nothing_has_every_table_empty_with_its_schema(tmp_path):
    (tmp_path / "sweep.json").write_text('{"experiment": "x", "mode": "dry-run"}')  # opened, nothing written yet
    tables = load(tmp_path)
    assert set(tables) == {*TABLES, "decisions"}  # decide's decisions come with the tables
    for name, schema in {**TABLES, "decisions": DECISIONS_SCHEMA}.items():
        frame = tables[name].collect()
        assert frame.height == 0 and frame.columns == schema.names


def test_temporaries_and_other_files_are_not_read(tmp_path):
    (tmp_path / "levels").mkdir()
    pq.write_table(from_rows([{"point_id": "a", "concurrency": 1}], "levels"), tmp_path / "levels" / "a.parquet")
    (tmp_path / "levels" / "b.parquet.tmp").write_bytes(b"half a file")
    (tmp_path / "levels" / "c.parquet.corrupt").write_bytes(b"set aside")
    assert load(tmp_path)["levels"].collect()["point_id"].to_list() == ["a"]


def test_points_of_the_json_era_are_converted_on_load(tmp_path):
    """A sweep resumed across the upgrade: old points files (JSON text, ``params``) beside new ones
    read as one table of today's types, and the analysis sees the same grid in both."""
    roles = {"drafter": "drafter", "steps": "steps", "nccl": "env"}
    old_points_file(
        tmp_path,
        "base",
        {"drafter": "none", "nccl": "tuned"},
        {"drafter": "drafter", "nccl": "env"},
        env={"NCCL_ALGO": "Ring"},
        bench_scale=OLD_SCALE,
    )
    # an old file whose axis_* columns lack one its params name: the value comes from params
    old_points_file(
        tmp_path,
        "spec",
        {"drafter": "d1", "steps": "2", "nccl": "tuned"},
        roles,
        reaped=OLD_REAPED,
        bench_scale=OLD_SCALE,
        axes={"drafter": "d1", "nccl": "tuned"},
        baseline_id="base",
    )
    new = from_rows(
        [
            {
                "point_id": "new",
                "label": "drafter=d1,steps=3,nccl=tuned",
                "status": "ok",
                "baseline": False,
                "baseline_id": "base",
                "param_roles": roles,
                "env": {"NCCL_ALGO": "Ring"},
                "bench_scale": OLD_SCALE,
                "axis_drafter": "d1",
                "axis_steps": "3",
                "axis_nccl": "tuned",
            }
        ],
        "points",
    )
    pq.write_table(new, tmp_path / "points" / "new.parquet")

    points = load(tmp_path)["points"].collect().sort("point_id")
    assert "params" not in points.columns
    types = pl.from_arrow(POINTS.empty_table()).schema
    for name in OLD_JSON:
        assert points.schema[name] == types[name], name
    rows = {r["point_id"]: r for r in points.iter_rows(named=True)}
    assert rows["spec"]["axis_steps"] == 2 and rows["base"]["axis_steps"] is None  # a numeric axis: numbers
    assert rows["base"]["env"] == {"NCCL_ALGO": "Ring"} == rows["new"]["env"]
    assert rows["spec"]["reaped"]["killed"][0]["pid"] == 41 and rows["base"]["reaped"] is None  # "{}": null
    assert rows["spec"]["bench_scale"] == OLD_SCALE == rows["new"]["bench_scale"]
    assert points.select(pl.col("param_roles").map.get("steps")).to_series().to_list() == [None, "steps", "steps"]

    conf = {r["point_id"]: r for r in configurations(load(tmp_path)).iter_rows(named=True)}
    assert conf["spec"]["spec"] == "steps=2" and conf["new"]["spec"] == "steps=3"
    assert conf["spec"]["profile"] == conf["base"]["profile"] == "nccl=tuned"
    assert conf["spec"]["baseline_label"] == "drafter=none,nccl=tuned"


def test_an_old_json_column_that_does_not_convert_says_what_to_do(tmp_path):
    old_points_file(tmp_path, "bad", {"drafter": "d1"}, {"drafter": "drafter"}, reaped="{not json")
    with pytest.raises(ResultsError, match="older version") as e:
        load(tmp_path)["points"].collect()
    assert "move that file aside" in e.value.fix


def test_upgrade_keeps_unknown_map_keys_and_drops_unknown_struct_fields():
    table = pa.table(
        {
            "point_id": ["p"],
            "env": ['{"B": "2", "A": 1}'],
            "reaped": ['{"killed": [], "gpu_free": false, "retired_field": 3}'],
        }
    )
    up = upgrade_points(table).to_pylist()[0]
    assert up["env"] == [("B", "2"), ("A", "1")]
    assert up["reaped"]["gpu_free"] is False and up["reaped"]["killed"] == [] and up["reaped"]["foreign"] is None


def test_requests_of_an_older_version_read_beside_new_ones(tmp_path):
    """Old requests files have no spec_accept_histogram: null there, the new files' values kept."""
    (tmp_path / "requests").mkdir()
    old_fields = [f for f in REQUESTS if f.name != "spec_accept_histogram"]
    old = pa.table({f.name: pa.nulls(1, f.type) for f in old_fields}, schema=pa.schema(old_fields))
    old = old.set_column(0, "point_id", pa.array(["old"]))
    pq.write_table(old, tmp_path / "requests" / "old.parquet")
    pq.write_table(
        from_rows([{"point_id": "zzz", "ok": True, "spec_accept_histogram": [1, 2, 3]}], "requests"),
        tmp_path / "requests" / "zzz.parquet",
    )

    def histograms() -> list:
        frame = load(tmp_path)["requests"].collect().sort("point_id")
        assert frame.columns == REQUESTS.names
        return frame["spec_accept_histogram"].to_list()

    assert histograms() == [None, [1, 2, 3]]  # the old file first
    (tmp_path / "requests" / "zzz.parquet").rename(tmp_path / "requests" / "aaa.parquet")
    assert histograms() == [None, [1, 2, 3]]  # the new file first


def test_sweeps_under_a_root_and_their_columns_as_load_reads_them(tmp_path):
    a = ResultsDir(tmp_path / "a", "e", "real").open()
    a.write_table("points", "p1", from_rows([{"point_id": "p1", "status": "ok", "startup_s": 3.0}], "points"))
    # a points file of an older version: no dry_run column, the JSON-era env text
    pq.write_table(
        pa.table({"point_id": ["p0"], "status": ["ok"], "startup_s": [2.0], "env": ['{"A": "1"}']}),
        a.path / "points" / "p0.parquet",
    )
    a.write_table(
        "levels",
        "p1",
        from_rows([{"point_id": "p1", "concurrency": 1}, {"point_id": "p1", "concurrency": 2}], "levels"),
    )
    a.write_table("levels", "p2", from_rows([{"point_id": "p2", "concurrency": 4}], "levels"))
    (tmp_path / "b-not-a-sweep").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    assert store.sweep_dirs([tmp_path]) == [a.path]
    assert store.sweep_dirs([a.path, tmp_path, tmp_path / "missing"]) == [a.path]  # once; a missing root: none
    pts = store.read_columns(a.path, "points", ["point_id", "dry_run", "startup_s", "env"]).sort("point_id")
    assert pts.select("point_id", "dry_run", "startup_s").rows() == [("p0", None, 2.0), ("p1", None, 3.0)]
    assert pts.schema["env"] != pl.String  # the old file's JSON text upgraded to today's map
    levels = store.read_columns(a.path, "levels", ["concurrency"], point_ids=["p1"])
    assert levels["concurrency"].to_list() == [1, 2]
    assert store.read_columns(a.path, "requests", ["point_id"]).height == 0  # no file: the empty table
