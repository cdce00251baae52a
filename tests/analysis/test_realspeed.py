"""A dry run's figures divided back to the speed of the system the fake models."""

from __future__ import annotations

import polars as pl
import pytest

from sweep.analysis import realspeed
from sweep.results import load
from tests.analysis.sweepdir import SweepDir


def _dir(tmp_path, scale):
    sd = SweepDir(tmp_path, dry_run=scale is not None, bench_scale=scale)
    sd.point(drafter="none", nccl="default", baseline=True, tok_s=[315, 315], levels={1: 315, 4: 1000}, jitter=0.0)
    return sd.write()


def test_times_multiplied_and_rates_divided_by_the_fakes_speed(tmp_path):
    raw = load(_dir(tmp_path / "dry", {"fake_speed": 5.0}))
    tables, speed = realspeed.at_real_speed(raw)
    assert speed.scaled and speed.factor == 5.0 and speed.points == 1 and "DRY RUN at 5x" in speed.note()
    single = tables["single_stream"].collect()
    assert single["tok_per_s"].to_list() == pytest.approx([63.0, 63.0])
    assert single["latency_s"].to_list() == pytest.approx((raw["single_stream"].collect()["latency_s"] * 5).to_list())
    levels = tables["levels"].collect().sort("concurrency")
    assert levels["output_throughput"].to_list() == pytest.approx([63.0, 200.0])
    req = tables["requests"].collect()
    assert req["latency_s"].to_list() == pytest.approx((raw["requests"].collect()["latency_s"] * 5).to_list())
    # counts and the raw tables are left alone
    assert levels["requests"].to_list() == raw["levels"].collect().sort("concurrency")["requests"].to_list()
    assert raw["single_stream"].collect()["tok_per_s"].to_list() == pytest.approx([315.0, 315.0])


def test_real_results_are_untouched(tmp_path):
    raw = load(_dir(tmp_path / "real", None))
    tables, speed = realspeed.at_real_speed(raw)
    assert not speed.scaled and speed.note() == ""
    assert tables["single_stream"].collect().equals(raw["single_stream"].collect())


def test_list_columns_scale_per_element(tmp_path):
    frame = pl.DataFrame({"point_id": ["a", "b"], "chunk_times_s": [[0.1, 0.2], [0.3]]}).lazy()
    points = pl.DataFrame({"point_id": ["a", "b"], "bench_scale": [{"fake_speed": 2.0}, None]}).lazy()
    tables, _ = realspeed.at_real_speed({"points": points, "requests": frame})
    assert tables["requests"].collect()["chunk_times_s"].to_list() == [pytest.approx([0.2, 0.4]), pytest.approx([0.3])]
