"""The points table keeps a server's flags as a column beside its argv (``flags``: map<string, string>,
``sweep.core.flags.ServerFlags.text``); a directory written before the column gets it from its argv
as it is read, and its analysis figures are those of a directory that has it."""

from __future__ import annotations

import shutil

import pyarrow.parquet as pq

from sweep.analysis.query import run_sql
from sweep.analysis.slo import gpus_frame
from sweep.core.record import PointResult
from sweep.results import load
from sweep.results.records import point_row, server_flags
from sweep.results.writer import ResultsDir

SECRET = "sk-very-secret-key"
POINTS = {  # point id -> (its flags, the GPUs its host has)
    "dp": (
        {"model-path": "/m/target", "tp-size": 4, "dp-size": 2, "enable-dp-attention": True, "port": 30000,
         "api-key": SECRET, "speculative-algorithm": "EAGLE3", "speculative-num-steps": 3,
         "speculative-eagle-topk": 1, "disable-cuda-graph": False},
        8,
    ),
    "cpu": ({"model-path": "/m/target", "device": "cpu", "nnodes": 2, "port": 30000}, 0),
    "one": ({"model-path": "/m/target", "port": 30000}, 8),
    "bare": ({}, 8),  # an argv that names no server flag: the host's GPUs count
}  # fmt: skip


def _planned(pid: str, flags: dict):
    from sweep.experiment.plan import PlannedPoint

    return PlannedPoint(id=pid, label=f"p={pid}", params={"p": pid}, roles={"p": "other"}, baseline=False,
                        flags=flags, env={}, launcher=["python", "-m", "sglang.launch_server"])  # fmt: skip


def _write(path) -> None:
    rd = ResultsDir(path, "e", "dry-run").open()
    for pid, (flags, gpus) in POINTS.items():
        pp = _planned(pid, flags)
        ran = pp.flags.merged({"port": 31234}) if "port" in flags else pp.flags  # a simulated host's port
        result = PointResult(pid, "h", "n", "ok", gpu_count=gpus, port=31234 if "port" in flags else None)
        argv = [*pp.launcher, *ran.args()]
        rd.write_point(pid, point_row(pp, "e", axes=["p"], argv=argv, result=result, mode="dry-run",
                                      bench_scale={}), {})  # fmt: skip


def _before_the_column(new, old) -> None:
    """``new`` as the writer before the flags column left it: the same points files without it."""
    shutil.copytree(new, old)
    for f in (old / "points").glob("*.parquet"):
        pq.write_table(pq.read_table(f).drop_columns(["flags"]), f)


def _points(path) -> dict:
    return {r["point_id"]: r for r in load(path)["points"].collect().iter_rows(named=True)}


def test_a_new_directory_keeps_the_flags_beside_the_argv(tmp_path):
    _write(tmp_path / "new")
    rows = _points(tmp_path / "new")
    assert rows["dp"]["flags"] == {
        "model-path": "/m/target", "tp-size": "4", "dp-size": "2", "enable-dp-attention": "true",
        "port": "31234", "api-key": "<redacted>", "speculative-algorithm": "EAGLE3",
        "speculative-num-steps": "3", "speculative-eagle-topk": "1",
    }  # fmt: skip
    assert SECRET not in str(rows["dp"]["flags"]) and "--api-key" in rows["dp"]["argv"]
    assert rows["bare"]["flags"] == {} and rows["cpu"]["flags"]["device"] == "cpu"
    for f in (tmp_path / "new" / "points").glob("*.parquet"):
        assert "flags" in pq.read_schema(f).names  # written, not filled on read
    flags = server_flags(rows["dp"])
    assert (flags.gpus, flags.algorithm, flags.steps, flags.model_path) == (4, "EAGLE3", 3, "/m/target")
    by_sql = run_sql(load(tmp_path / "new"), "SELECT point_id, flags FROM points WHERE point_id = 'dp'")
    assert by_sql["flags"].to_list()[0]["tp-size"] == "4"  # query reads the map


def test_a_directory_written_before_the_column_reads_the_same(tmp_path):
    _write(tmp_path / "new")
    _before_the_column(tmp_path / "new", tmp_path / "old")
    assert "flags" not in pq.read_schema(next((tmp_path / "old" / "points").glob("*.parquet"))).names
    new, old = _points(tmp_path / "new"), _points(tmp_path / "old")
    assert {p: r["flags"] for p, r in old.items()} == {p: r["flags"] for p, r in new.items()}
    gpus = gpus_frame(load(tmp_path / "new")).sort("point_id")
    assert gpus_frame(load(tmp_path / "old")).sort("point_id").equals(gpus)
    assert {r["point_id"]: (r["gpus"], r["per"], r["gpus_from"]) for r in gpus.iter_rows(named=True)} == {
        "dp": (4.0, "GPU", "argv"),  # attention DP runs inside the TP group: tp 4, not tp 4 x dp 2
        "cpu": (2.0, "host", "argv"),
        "one": (1.0, "GPU", "argv"),
        "bare": (8.0, "GPU", "host"),
    }
