"""The report's speed figures on result directories with known numbers."""

from __future__ import annotations

import math

import polars as pl
import pytest

from sweep.analysis import best_per_level, configurations, crossover, env_effect, level_speedups, speedup_table
from sweep.core.errors import SweepError
from sweep.results import load
from tests.analysis.sweepdir import SweepDir


def by_label(frame: pl.DataFrame) -> dict[str, dict]:
    return {r["label"]: r for r in frame.iter_rows(named=True)}


@pytest.fixture
def two_profiles(tmp_path):
    """Baselines of 100 (default) and 200 tok/s (tuned): each point must use its own profile's."""
    sd = SweepDir(tmp_path)
    base_d = sd.point(
        drafter="none", nccl="default", baseline=True, tok_s=[100, 100, 100], levels={1: 100, 8: 800, 64: 3200}
    )
    base_t = sd.point(
        drafter="none", nccl="tuned", baseline=True, tok_s=[200, 200, 200], levels={1: 200, 8: 1600, 64: 6400}
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base_d,
        tok_s=[149, 150, 151],
        accept_length=2.5,
        levels={1: 150, 8: 960, 64: 2560},
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="tuned",
        baseline_of=base_t,
        tok_s=[239, 240, 241],
        levels={1: 240, 8: 1760, 64: 7040},
    )
    sd.point(
        drafter="d1",
        steps="10",
        nccl="default",
        baseline_of=base_d,
        tok_s=[90, 100, 115],
        levels={1: 100, 8: 800, 64: 1600},
    )
    sd.point(
        drafter="d1",
        steps="3",
        nccl="default",
        baseline_of=base_d,
        tok_s=[79, 80, 81],
        levels={1: 80, 8: 400, 64: 1600},
    )
    return load(sd.write())


def test_speedup_uses_the_baseline_of_the_same_nccl_profile(two_profiles):
    rows = by_label(speedup_table(two_profiles))
    default = rows["drafter=d1,steps=2,nccl=default"]
    tuned = rows["drafter=d1,steps=2,nccl=tuned"]
    assert default["baseline_label"] == "drafter=none,nccl=default"
    assert tuned["baseline_label"] == "drafter=none,nccl=tuned"
    assert default["speedup"] == pytest.approx(1.5)
    assert tuned["speedup"] == pytest.approx(1.2)
    assert default["tok_s"] == 150 and default["tok_s_min"] == 149 and default["tok_s_max"] == 151
    assert default["runs"] == 3 and default["accept_length"] == 2.5
    assert rows["drafter=none,nccl=default"]["speedup"] is None  # baselines have no speedup


def test_noise_marking(two_profiles):
    rows = by_label(speedup_table(two_profiles))
    clear = rows["drafter=d1,steps=2,nccl=default"]
    assert clear["verdict"] == "faster" and clear["within_noise"] is False
    assert clear["ci_low"] > 1 and clear["ci_low"] < 1.5 < clear["ci_high"]
    noisy = rows["drafter=d1,steps=10,nccl=default"]  # 90/100/115 against a steady 100
    assert noisy["speedup"] == pytest.approx(1.0)
    assert noisy["within_noise"] is True and noisy["verdict"] == "within noise"
    assert noisy["ci_low"] <= 0.9 + 1e-9 and noisy["ci_high"] >= 1.15 - 1e-9
    slow = rows["drafter=d1,steps=3,nccl=default"]
    assert slow["verdict"] == "slower" and slow["ci_high"] < 1


def test_single_run_has_no_interval(tmp_path):
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100])
    sd.point(drafter="d1", steps="1", nccl="default", baseline_of=base, tok_s=[130])
    row = by_label(speedup_table(load(sd.write())))["drafter=d1,steps=1,nccl=default"]
    assert row["speedup"] == pytest.approx(1.3)
    assert row["ci_low"] is None and row["within_noise"] is None and row["verdict"] == "no interval"


def test_missing_failed_and_unplanned_baselines(tmp_path):
    sd = SweepDir(tmp_path)
    pending = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100], written=False)
    broken = sd.point(
        drafter="none", nccl="tuned", baseline=True, status="failed", failure_phase="load", failure_reason="oom"
    )
    sd.point(drafter="d1", steps="1", nccl="default", baseline_of=pending, tok_s=[130, 131])
    sd.point(drafter="d1", steps="1", nccl="tuned", baseline_of=broken, tok_s=[130, 131])
    sd.point(drafter="d1", steps="2", nccl="tuned", tok_s=[130, 131])  # no baseline_id at all
    sd.point(drafter="d1", steps="3", nccl="tuned", baseline_of=broken, status="failed")
    rows = by_label(speedup_table(load(sd.write())))
    assert rows["drafter=d1,steps=1,nccl=default"]["note"] == "baseline not written yet"
    assert rows["drafter=d1,steps=1,nccl=tuned"]["note"] == "baseline failed"
    assert rows["drafter=d1,steps=2,nccl=tuned"]["note"] == "no matching baseline in the plan"
    assert rows["drafter=d1,steps=3,nccl=tuned"]["note"] == "point failed"
    assert all(r["speedup"] is None for r in rows.values())


def test_configurations_parse_roles_and_order(two_profiles):
    conf = configurations(two_profiles)
    assert conf["label"].to_list() == [
        "drafter=none,nccl=default",
        "drafter=d1,steps=2,nccl=default",
        "drafter=d1,steps=3,nccl=default",
        "drafter=d1,steps=10,nccl=default",
        "drafter=none,nccl=tuned",
        "drafter=d1,steps=2,nccl=tuned",
    ]
    row = by_label(conf)["drafter=d1,steps=10,nccl=default"]
    assert (row["drafter"], row["spec"], row["profile"], row["config"]) == (
        "d1",
        "steps=10",
        "nccl=default",
        "drafter=d1,steps=10",
    )


def test_level_speedups(two_profiles):
    levels = level_speedups(two_profiles)
    row = levels.filter((pl.col("label") == "drafter=d1,steps=2,nccl=tuned") & (pl.col("concurrency") == 64))
    assert row["throughput_ratio"][0] == pytest.approx(1.1)
    assert row["per_request_ratio"][0] == pytest.approx(1.1)
    # 128 requests a side: the normal interval; 2 % spread -> tight, and it contains the estimate
    assert row["ci_low"][0] < 1.1 < row["ci_high"][0] and row["verdict"][0] == "faster"
    same = levels.filter((pl.col("label") == "drafter=d1,steps=10,nccl=default") & (pl.col("concurrency") == 8))
    assert same["throughput_ratio"][0] == pytest.approx(1.0) and same["within_noise"][0] is True


def test_best_per_level(two_profiles):
    best = {r["concurrency"]: r for r in best_per_level(two_profiles).iter_rows(named=True)}
    assert best[1]["label"] == "drafter=d1,steps=2,nccl=tuned" and best[1]["value"] == 240
    assert best[1]["runner_up"] == "drafter=none,nccl=tuned" and best[1]["margin"] == pytest.approx(0.2)
    assert best[64]["label"] == "drafter=d1,steps=2,nccl=tuned" and best[64]["speedup"] == pytest.approx(1.1)
    per_profile = best_per_level(two_profiles, by=["profile"]).filter(pl.col("profile") == "nccl=default")
    default = {r["concurrency"]: r for r in per_profile.iter_rows(named=True)}
    assert default[8]["label"] == "drafter=d1,steps=2,nccl=default"
    assert default[64]["label"] == "drafter=none,nccl=default" and default[64]["baseline"] is True
    with pytest.raises(SweepError, match="unknown level metric"):
        best_per_level(two_profiles, metric="nope")


def test_crossover(two_profiles):
    rows = by_label(crossover(two_profiles))
    crossing = rows["drafter=d1,steps=2,nccl=default"]  # 1.5x, 1.2x, 0.8x
    assert crossing["crossover"] == 64 and crossing["ahead_up_to"] == 8
    assert crossing["crossover_est"] == pytest.approx(8 * math.sqrt(8))  # halfway in log C
    never = rows["drafter=d1,steps=2,nccl=tuned"]  # 1.2x, 1.1x, 1.1x
    assert never["crossover"] is None and never["ahead_up_to"] == 64
    always = rows["drafter=d1,steps=3,nccl=default"]  # 0.8x, 0.5x, 0.5x
    assert always["crossover"] == 1 and always["ahead_up_to"] is None
    assert "slower at every concurrency" in always["outcome"]


def test_ahead_up_to_is_the_last_level_before_the_first_dip(tmp_path):
    """1.20x, 0.80x, 1.20x, 0.80x: ahead up to C=1 (not 16: it is behind at 8), slower for good from 64,
    and the mixed curve said so."""
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, levels={1: 100, 8: 800, 16: 1600, 64: 6400})
    sd.point(drafter="d1", steps="1", nccl="default", baseline_of=base, levels={1: 120, 8: 640, 16: 1920, 64: 5120})
    row = crossover(load(sd.write())).row(0, named=True)
    assert row["crossover"] == 64 and row["ahead_up_to"] == 1 and row["first_behind"] == 8
    assert row["crossover_est"] == pytest.approx(math.exp(math.log(8) * 0.5))  # between 1 and 8
    assert row["outcome"].startswith("mixed: behind at C=8, 64; ahead at C=1, 16")


def test_a_curve_that_dips_within_noise_is_neither_behind_nor_mixed(tmp_path):
    """The issue's case: 0.98x at C=10, 0.96x at C=100 and 1.02x at C=250 lie within the level-wide noise
    (here unknown: 4 levels, so the floor stands in): not 'mixed: behind at C=10, 100', and speculation
    does not 'stop paying' there; 1.30x at C=1 is ahead."""
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, levels={1: 100, 10: 1000, 100: 5000, 250: 6000})
    sd.point(drafter="d1", steps="1", nccl="default", baseline_of=base, levels={1: 130, 10: 980, 100: 4800, 250: 6120})
    row = crossover(load(sd.write())).row(0, named=True)
    assert row["ahead_up_to"] == 1 and row["first_behind"] is None and row["crossover"] is None
    assert not row["mixed"]
    assert row["outcome"] == "never behind beyond noise: ahead at C=1; within noise at C=10, 100, 250"


def test_a_curve_behind_then_within_noise_at_the_top_has_no_crossover_and_says_so(tmp_path):
    """1.30x at C=1, 0.70x at C=10 (behind beyond noise), then 0.99x and 1.01x (within noise): behind at
    C=10 only; not 'slower from concurrency None on' (the reference dry run had 4 such rows)."""
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, levels={1: 100, 10: 1000, 100: 5000, 250: 6000})
    sd.point(drafter="d1", steps="1", nccl="default", baseline_of=base, levels={1: 130, 10: 700, 100: 4950, 250: 6060})
    row = crossover(load(sd.write())).row(0, named=True)
    assert row["first_behind"] == 10 and row["crossover"] is None and not row["mixed"]
    assert row["outcome"] == (
        f"behind at C=10 (crosses 1 near {row['crossover_est']:.0f}), not beyond noise at the highest level "
        "measured (C=250); within noise at C=100, 250"
    )
    assert "None" not in row["outcome"]


def test_best_per_level_ratio_and_verdict_are_of_the_same_figure(tmp_path):
    """1.10x the baseline's throughput while each request is 12 % slower (the server queues): the best is
    ranked by throughput, so its ratio (1.10x) and its verdict (faster) are the throughput's; the
    per-request verdict stays in its own column."""
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, levels={1: 100, 8: 800})
    sd.point(drafter="d1", steps="1", nccl="default", baseline_of=base, levels={1: 90, 8: 880}, per_request={8: 88})
    tables = load(sd.write())
    row = best_per_level(tables).filter(pl.col("concurrency") == 8).row(0, named=True)
    assert row["label"] == "drafter=d1,steps=1,nccl=default"
    assert row["speedup"] == pytest.approx(1.10) and row["verdict"] == "faster"
    level = level_speedups(tables).filter(~pl.col("baseline") & (pl.col("concurrency") == 8)).row(0, named=True)
    assert level["verdict"] == "faster" and level["ci_low"] <= 1.10 <= level["ci_high"]
    assert level["per_request_ratio"] == pytest.approx(0.88) and level["per_request_verdict"] == "slower"
    per_request = (
        best_per_level(tables, metric="per_request_tok_s").filter(pl.col("concurrency") == 8).row(0, named=True)
    )
    assert per_request["label"] == "drafter=none,nccl=default" and per_request["verdict"] is None


def test_env_effect(two_profiles):
    effect = by_label(env_effect(two_profiles).rename({"config": "label"}))
    base = effect["drafter=none"]
    assert base["reference"] == "nccl=default" and base["profile"] == "nccl=tuned"
    assert base["single_stream_ratio"] == pytest.approx(2.0) and base["geomean_ratio"] == pytest.approx(2.0)
    spec = effect["drafter=d1,steps=2"]
    assert spec["ratio_min_level"] == pytest.approx(1.6) and spec["ratio_max_level"] == pytest.approx(2.75)
    assert spec["min_ratio"] == pytest.approx(1.6) and spec["levels"] == 3
    assert "drafter=d1,steps=10" not in effect  # not measured under tuned
    flipped = env_effect(two_profiles, reference="nccl=tuned")
    assert flipped["reference"].unique().to_list() == ["nccl=tuned"]
