"""A dry run's files hold its figures at real speed, under their own names, with what the fake
measured beside them (``<column>_measured``): DuckDB or polars on ``levels/*.parquet``,
``sweep.results.load`` and ``sweep query`` read one figure under one name. A directory written before
(the fake's figures under the plain names) still reads at real speed, also when a resume added
points of the new writer to it; what the driver compares with a host's measurement reads the
measured values back (``as_measured``)."""

from __future__ import annotations

import polars as pl
import pytest

from sweep.analysis import query, realspeed
from sweep.results import as_measured, load
from tests.analysis.sweepdir import SweepDir

SCALE = {"fake_speed": 5.0}


def _sweep(path) -> SweepDir:
    return SweepDir(path, dry_run=True, bench_scale=SCALE, manifest={"mode": "dry-run"})


def _throughput(frame: pl.DataFrame) -> list[float]:
    return frame.sort("concurrency")["output_throughput"].to_list()


def test_the_files_the_loader_and_query_read_one_figure_under_one_name(tmp_path):
    sd = _sweep(tmp_path / "dry")
    sd.point(drafter="none", nccl="default", baseline=True, tok_s=[315, 315], levels={1: 315, 4: 1000}, jitter=0.0)
    path = sd.write_as_sweep(5.0)
    files = pl.read_parquet(path / "levels" / "*.parquet")  # what DuckDB's read_parquet reads too
    assert _throughput(files) == pytest.approx([63.0, 200.0])
    assert files.sort("concurrency")["output_throughput_measured"].to_list() == pytest.approx([315.0, 1000.0])
    assert pl.read_parquet(path / "single_stream" / "*.parquet")["tok_per_s"].to_list() == pytest.approx([63.0] * 2)
    assert pl.read_parquet(path / "points" / "*.parquet")["fake_speed_divided"].to_list() == [5.0]
    assert _throughput(load(path)["levels"].collect()) == pytest.approx([63.0, 200.0])
    got = query.query(path, "select concurrency, output_throughput, output_throughput_measured from levels", "csv")
    assert _throughput(got) == pytest.approx([63.0, 200.0])
    assert got.sort("concurrency")["output_throughput_measured"].to_list() == pytest.approx([315.0, 1000.0])
    tables, speed = realspeed.at_real_speed(load(path))  # not divided twice
    assert _throughput(tables["levels"].collect()) == pytest.approx([63.0, 200.0])
    assert speed.scaled and speed.factor == 5.0 and speed.points == 1
    # a request's times: each multiplied back, the list of chunk times per element
    req = pl.read_parquet(path / "requests" / "*.parquet")
    assert req["latency_s"].to_list() == pytest.approx((req["latency_s_measured"] * 5).to_list())
    assert as_measured(load(path)["levels"]).collect().sort("concurrency")["output_throughput"].to_list() == (
        pytest.approx([315.0, 1000.0])
    )


def test_a_directory_written_before_and_resumed_reads_at_real_speed_throughout(tmp_path):
    path = tmp_path / "mixed"
    old = _sweep(path)
    old.point(drafter="none", nccl="default", baseline=True, tok_s=[315], levels={1: 315}, jitter=0.0)
    old.write()  # the writer before: the fake's figures under the plain names
    new = _sweep(path)
    new.point(drafter="d1", nccl="default", tok_s=[630], levels={1: 630}, jitter=0.0)
    new.write_as_sweep(5.0)
    got = query.query(path, "select point_id, output_throughput, output_throughput_measured from levels", "csv")
    assert sorted(got["output_throughput"].to_list()) == pytest.approx([63.0, 126.0])
    assert sorted(got["output_throughput_measured"].to_list()) == pytest.approx([315.0, 630.0])
    tables, speed = realspeed.at_real_speed(load(path))
    assert speed.factor == 5.0 and speed.points == 2
    assert sorted(tables["single_stream"].collect()["tok_per_s"].to_list()) == pytest.approx([63.0, 126.0])
    raw = as_measured(load(path)["levels"]).collect()
    assert sorted(raw["output_throughput"].to_list()) == pytest.approx([315.0, 630.0])
