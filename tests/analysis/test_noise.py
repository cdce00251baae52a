"""The interval behind every "within noise" mark."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from sweep.analysis import noise
from sweep.analysis.noise import bootstrap_ratio, ratio_intervals


def samples(**groups: list[float]) -> pl.LazyFrame:
    return pl.LazyFrame([{"key": k, "value": v} for k, vs in groups.items() for v in vs])


def test_bootstrap_is_reproducible_and_brackets_the_ratio():
    a, b = np.array([150.0, 149, 151, 152, 148]), np.array([100.0, 101, 99, 100, 100])
    first = bootstrap_ratio(a, b, "median")
    assert first == bootstrap_ratio(a, b, "median")
    assert first[0] < 1.5 < first[1] and first[1] - first[0] < 0.1


def test_normal_approximation_agrees_with_the_bootstrap_for_large_samples():
    rng = np.random.default_rng(1)
    a, b = rng.normal(120, 10, 200), rng.normal(100, 10, 200)
    pairs = pl.DataFrame({"key": ["a"], "base_key": ["b"]})
    normal = ratio_intervals(pairs, samples(a=list(a), b=list(b)), stat="mean").row(0, named=True)
    boot = ratio_intervals(pairs, samples(a=list(a), b=list(b)), stat="mean", normal_from=10_000).row(0, named=True)
    assert normal["ci_low"] == pytest.approx(boot["ci_low"], rel=0.01)
    assert normal["ci_high"] == pytest.approx(boot["ci_high"], rel=0.01)


def test_no_interval_without_spread_information():
    pairs = pl.DataFrame({"key": ["a", "c"], "base_key": ["b", "missing"]})
    out = ratio_intervals(pairs, samples(a=[1.0], b=[1.0, 2.0], c=[1.0, 2.0]), stat="median")
    assert out["ci_low"].to_list() == [None, None]
    assert out["key"].to_list() == ["a", "c"]  # the pairs' order is kept


def test_a_level_verdict_never_rests_on_the_requests_spread_alone():
    """A 1.03x ratio whose requests' interval is +-0.5 % is within noise when the level-wide noise is
    unknown (fewer than 5 levels) or measured under the floor: the floor stands in; 1.20x is faster,
    0.80x slower, and a ratio without a requests' interval still gets the level-wide one."""
    frame = pl.DataFrame(
        {"r": [1.03, 1.20, 0.80, 1.03], "ci_low": [1.025, 1.19, 0.79, None], "ci_high": [1.035, 1.21, 0.81, None]}
    )
    for measured in (None, 0.001):
        out = noise.judged(frame, "r", measured)
        assert out["verdict"].to_list() == ["within noise", "faster", "slower", "within noise"]
        assert out["ci_low"][0] < 0.98 and out["ci_high"][0] > 1.08
    wide = noise.judged(frame, "r", 0.10)  # a noisier sweep's own figure is used where above the floor
    assert wide["verdict"].to_list()[:3] == ["within noise", "within noise", "within noise"]
    assert noise.level_sigma(None) == noise.LEVEL_NOISE_FLOOR and noise.level_sigma(0.1) == 0.1
    assert "unknown" in noise.describe_level_noise(None)
