"""``benchmark.repeats``: every level measured N times back to back on the one server (issue 44),
each measurement its own ``levels`` row and requests with its ``repeat`` index; the report pools
them and measures the level-wide noise from their spread."""

from __future__ import annotations

import polars as pl
import pytest

from sweep.bench.runner import run
from sweep.core import RunContext
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings

pytestmark = pytest.mark.slow


def _settings(repeats: int = 1) -> BenchSettings:
    return BenchSettings(
        single_stream=SingleStreamSettings(runs=1, warmup=0, max_tokens=32),
        concurrency=ConcurrencySettings(levels=[1, 4], rounds=1, max_tokens=32),
        repeats=repeats,
    )


def test_each_level_is_measured_repeats_times_back_to_back(fake_sglang):
    server = fake_sglang(speed=20.0)
    result = run(server.url, _settings(3), point_id="p1")
    levels = pl.DataFrame(pl.from_arrow(result.levels))
    assert levels.select("concurrency", "repeat").rows() == [(1, 0), (1, 1), (1, 2), (4, 0), (4, 1), (4, 2)]
    started = levels["level_started_at"].to_list()
    assert started == sorted(started)  # in that order: a level's repeats before the next level
    req = pl.DataFrame(pl.from_arrow(result.requests)).filter(pl.col("phase") == "level")
    counts = req.group_by("concurrency", pl.col("repeat").fill_null(0)).len().sort("concurrency", "repeat")
    assert counts.rows() == [(1, 0, 1), (1, 1, 1), (1, 2, 1), (4, 0, 4), (4, 1, 4), (4, 2, 4)]


def test_a_dry_runs_context_repeats_levels_whatever_the_settings(fake_sglang):
    server = fake_sglang(speed=20.0)
    result = run(server.url, _settings(1), point_id="p1", context=RunContext(level_repeats=2))
    assert pl.DataFrame(pl.from_arrow(result.levels))["repeat"].to_list() == [0, 1, 0, 1]
    once = run(server.url, _settings(1), point_id="p1")
    assert pl.DataFrame(pl.from_arrow(once.levels))["repeat"].null_count() == 2  # as before: no index


def test_repeats_are_checked():
    assert any(key == "repeats" for key, _, _ in _settings(0).problems())
