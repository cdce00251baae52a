"""The metrics table through the results directory: written with a point, read by ``load``, queried
by ``python -m sweep query``; and levels files of the older schema (a server_metrics JSON blob)
still read beside new ones, as a resumed sweep has them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from sweep.bench import level_metrics as lm
from sweep.bench import server_metrics as sm
from sweep.results import load
from sweep.results.schema import LEVELS, METRICS, from_rows
from sweep.results.writer import ResultsDir

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "bench" / "data"


def _scrape(name: str) -> lm.Scrape:
    return lm.index(sm.samples_of((DATA / name).read_text()))


def _write_point(rd: ResultsDir, pid: str, *, with_metrics: bool = True) -> None:
    before, after = _scrape("metrics_eagle3_before.txt"), _scrape("metrics_eagle3_after.txt")
    cols = lm.columns(before, [after], after)
    levels = from_rows(
        [{"point_id": pid, "concurrency": c, "requests": 2 * c, "ok": 2 * c, **cols} for c in (1, 8)], "levels"
    )
    metrics = from_rows([r for c in (1, 8) for r in lm.rows(pid, c, before, [after], after)], "metrics")
    point = from_rows([{"point_id": pid, "label": f"drafter={pid}", "status": "ok"}], "points")
    rd.write_point(pid, point, {"levels": levels, "metrics": metrics if with_metrics else None})


def test_written_with_the_point_loaded_and_queried(tmp_path):
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    _write_point(rd, "aaaa")
    _write_point(rd, "bbbb", with_metrics=False)  # a point whose server had no metrics
    assert sorted(p.name for p in (tmp_path / "res" / "metrics").iterdir()) == ["aaaa.parquet"]

    tables = load(tmp_path / "res")
    m = tables["metrics"].collect()
    assert m.schema == pl.from_arrow(METRICS.empty_table()).schema
    gen = m.filter((pl.col("name") == "sglang:generation_tokens_total") & (pl.col("concurrency") == 8))
    assert gen["delta"].sum() == 114 - 8
    assert tables["levels"].collect()["metrics_generation_tokens"].to_list() == [106] * 4

    sql = (
        "SELECT p.label, m.concurrency, SUM(m.delta) AS tokens FROM metrics m JOIN points p USING (point_id) "
        "WHERE m.name = 'sglang:generation_tokens_total' GROUP BY p.label, m.concurrency ORDER BY m.concurrency"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "query", str(tmp_path / "res"), sql, "--format", "csv"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["label,concurrency,tokens", "drafter=aaaa,1,106.0", "drafter=aaaa,8,106.0"]


def test_a_directory_without_metrics_files_has_an_empty_metrics_table(tmp_path):
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    _write_point(rd, "aaaa", with_metrics=False)
    m = load(tmp_path / "res")["metrics"].collect()
    assert m.height == 0 and m.columns == METRICS.names


def test_levels_of_the_older_schema_read_beside_new_ones(tmp_path):
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    _write_point(rd, "new1")
    # a levels file as the previous version wrote it: no metrics_* columns, a server_metrics JSON string
    old_fields = [f for f in LEVELS if not f.name.startswith("metrics_") and f.name != "accept_length_metrics"]
    old = pa.table({f.name: pa.array([None], f.type) for f in old_fields}, schema=pa.schema(old_fields))
    old = old.set_column(old.schema.get_field_index("point_id"), "point_id", pa.array(["old1"]))
    old = old.append_column("server_metrics", pa.array(['{"delta": {}, "gauge": {}}']))
    pq.write_table(old, tmp_path / "res" / "levels" / "old1.parquet")

    levels = load(tmp_path / "res")["levels"].collect().sort("point_id")
    assert set(LEVELS.names) <= set(levels.columns)
    assert levels.filter(pl.col("point_id") == "old1")["metrics_generation_tokens"].to_list() == [None]
    assert levels.filter(pl.col("point_id") == "new1")["metrics_generation_tokens"].to_list() == [106, 106]
    assert levels.schema["metrics_generation_tokens"] == pl.Int64
