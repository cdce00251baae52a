"""Picks that say when they are within noise: every "deploy X" for an SLO and every "best at C=N"
carries the interval of its margin over the runner-up, and names both when the runner-up is within
noise of it; a runner-up clearly behind gets its interval and no such words."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from sweep.analysis import analyze, best_per_level, noise, slo_noise
from sweep.analysis.findings import headlines, slo_headlines
from sweep.analysis.slo import highest_meeting, level_slo, parse_slo, slo_table
from sweep.results import load
from tests.analysis.sweepdir import SweepDir

LEVELS = (1, 2, 4, 8, 16)
SLOS = [parse_slo("per_user: tok_s_p10>=70"), parse_slo("loose: tpot_p90<=10s")]


def curve(per_user_at_1: float, c: int, jitter_level: float = 0.0) -> float:
    """A level's throughput: per-user speed falls as 1 / (1 + 0.1 (C - 1)); ``jitter_level`` moves it."""
    return c * per_user_at_1 / (1 + 0.1 * (c - 1)) * (1 + jitter_level)


def sweep_of(tmp_path, runner_up_factor: float, *, jitter: float = 0.1) -> SweepDir:
    """A baseline and two drafters: d_best, and d_next at ``runner_up_factor`` of d_best's speed."""
    sd = SweepDir(tmp_path)
    base = sd.point(
        drafter="none",
        nccl="default",
        baseline=True,
        tok_s=[80, 81, 79],
        levels={c: curve(80, c) for c in LEVELS},
        jitter=jitter,
    )
    sd.point(
        drafter="best",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[120, 121, 119],
        levels={c: curve(120, c) for c in LEVELS},
        jitter=jitter,
    )
    sd.point(
        drafter="next",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[120 * runner_up_factor * r for r in (1.0, 1.01, 0.99)],
        levels={c: curve(120 * runner_up_factor, c) for c in LEVELS},
        jitter=jitter,
    )
    return sd


BEST, NEXT = "drafter=best,steps=2,nccl=default", "drafter=next,steps=2,nccl=default"


def test_a_runner_up_clearly_behind_gets_the_interval_and_no_within_noise(tmp_path):
    f = analyze(load(sweep_of(tmp_path, 0.7).write()), slos=SLOS)
    lines = slo_headlines(f)
    for line in lines:
        assert f"deploy {BEST}" in line and "over the runner-up " + NEXT in line
        assert "95% interval" in line and "within noise of" not in line
    picks = f.slo_table.filter(pl.col("rank") == 1)
    assert picks.height == 2 and not picks["margin_within_noise"].any()
    assert (picks["margin_low"] > 0).all() and (picks["margin_low"] < picks["margin"]).all()
    assert (picks["margin"] < picks["margin_high"]).all()
    assert (picks["vs_baseline_low"] > 0).all() and not picks["vs_baseline_within_noise"].any()
    assert (
        f.slo_table.filter(pl.col("rank") > 1)["margin_low"].null_count() == f.slo_table.height - 2
    )  # the pick's only
    best = f.best.filter(pl.col("concurrency") == 16).row(0, named=True)
    assert best["label"] == BEST and best["runner_up"] == NEXT and best["margin_within_noise"] is False
    assert 0 < best["margin_low"] < best["margin"] < best["margin_high"]
    top = next(line for line in headlines(f) if line.startswith("At the highest concurrency"))
    assert f"the best there is {BEST}, +43% (95% interval" in top and f"over the runner-up {NEXT}" in top
    single = next(line for line in headlines(f) if line.startswith("Single stream"))
    assert f"the fastest is {BEST}" in single and "within noise of" not in single


def test_a_runner_up_within_noise_is_named_on_the_line(tmp_path):
    f = analyze(load(sweep_of(tmp_path, 0.995).write()), slos=SLOS)
    for line in slo_headlines(f):  # no "deploy X" where the pick is within noise: both named, neither picked
        assert f"deploy {BEST}" not in line
        assert f": no decision: {BEST} measured highest, within noise of {NEXT}; " in line
        low, high = (float(x) for x in line.split("(95% interval ")[1].split(")")[0].replace("%", "").split(" .. "))
        assert low < 0 < high  # the interval on the line is the one that contains 0
    assert f.slo_table.filter(pl.col("rank") == 1)["margin_within_noise"].all()
    best = f.best.filter(pl.col("concurrency") == 16).row(0, named=True)
    assert best["margin_within_noise"] is True and best["margin_low"] < 0 < best["margin_high"]
    top = next(line for line in headlines(f) if line.startswith("At the highest concurrency"))
    assert (
        f"no decision there: {BEST} measured highest, within noise of {NEXT} (+1% (95% interval" in top
    ) and "the best there is" not in top
    single = next(line for line in headlines(f) if line.startswith("Single stream"))  # 120 against 119.4 tok/s
    assert (
        f"no decision on the fastest: {BEST} at 120.0 tok/s" in single
        and f"and {NEXT} at 119.4 tok/s are within noise of each other: +0.5%" in single
        and "the fastest is" not in single
    )


def test_the_level_wide_noise_widens_what_the_requests_alone_call_clear(tmp_path):
    """11 % ahead on requests that spread 1 %: clear at the floor of the level-wide noise (unknown here:
    the curves have too few levels); a level-wide noise of 8 % (each level measured once) puts the
    runner-up within noise."""
    tables = load(sweep_of(tmp_path, 0.90, jitter=0.01).write())
    per_level = level_slo(tables, SLOS[:1])
    table = slo_table(tables, SLOS[:1], per_level)
    quiet = slo_noise.margins(tables, SLOS[:1], table, per_level).row(0, named=True)
    loud = slo_noise.margins(tables, SLOS[:1], table, per_level, level_noise=0.08).row(0, named=True)
    assert quiet["label"] == BEST and quiet["margin_within_noise"] is False and quiet["margin_low"] > 0
    assert loud["margin_within_noise"] is True and loud["margin_low"] < 0 < loud["margin_high"]
    again = slo_noise.margins(tables, SLOS[:1], table, per_level, level_noise=0.08).row(0, named=True)
    assert again == loud  # seeded: the same interval every time
    assert (
        best_per_level(tables, level_noise=0.0).filter(pl.col("concurrency") == 16)["margin_within_noise"][0] is False
    )
    assert (
        best_per_level(tables, level_noise=0.08).filter(pl.col("concurrency") == 16)["margin_within_noise"][0] is True
    )


def test_two_percent_on_the_requests_alone_is_within_noise(tmp_path):
    """2 % ahead on requests that spread 1 %: clear on the requests alone, but no level-wide noise was
    measured (too few levels), so the floor stands in and the pick is within noise, in the SLO pick and
    the best per level alike."""
    tables = load(sweep_of(tmp_path, 0.98, jitter=0.01).write())
    per_level = level_slo(tables, SLOS[:1])
    pick = slo_noise.margins(tables, SLOS[:1], slo_table(tables, SLOS[:1], per_level), per_level).row(0, named=True)
    assert pick["margin_within_noise"] is True and pick["margin_low"] < 0 < pick["margin_high"]
    assert best_per_level(tables).filter(pl.col("concurrency") == 16)["margin_within_noise"][0] is True


def test_a_runner_up_that_meets_the_slo_nowhere_in_some_resamples_is_unbounded(tmp_path):
    """Both meet the SLO between C=1 and C=2; the runner-up's two requests at C=1 run at 69.6 and 78.4
    tok/s for a limit of 70 at p10: a quarter of the resamples draw the slow one twice, and there it
    meets the SLO nowhere. The interval's upper end is unbounded, and the line says so."""
    sd = SweepDir(tmp_path)
    sd.point(drafter="none", nccl="default", baseline=True, tok_s=[80], levels={1: 74, 2: 110}, jitter=0.06)
    sd.point(drafter="d1", steps="1", nccl="default", tok_s=[90], levels={1: 90, 2: 120}, jitter=0.06)
    f = analyze(load(sd.write()), slos=SLOS[:1])
    pick = f.slo_table.filter(pl.col("rank") == 1).row(0, named=True)
    assert pick["label"] == "drafter=d1,steps=1,nccl=default" and pick["margin_high"] == math.inf
    assert "unbounded)" in slo_headlines(f)[0]


def test_curve_noise_is_the_scatter_about_a_smooth_curve():
    rng = np.random.default_rng(3)
    levels = np.array([1, 2, 5, 10, 30, 70, 100, 250])
    rows = [
        {"point_id": f"p{i}", "concurrency": int(c), "output_throughput": curve(100, int(c)) * math.exp(e)}
        for i in range(30)
        for c, e in zip(levels, rng.normal(0, 0.05, levels.size))
    ]
    frame = pl.DataFrame(rows)
    assert noise.curve_noise(frame) == pytest.approx(0.05, rel=0.2)
    smooth = frame.with_columns(
        output_throughput=pl.struct("concurrency").map_elements(
            lambda r: curve(100, r["concurrency"]), return_dtype=pl.Float64
        )
    )
    assert noise.curve_noise(smooth) < 0.02  # a smooth curve's bends the cubic misses: small
    assert noise.curve_noise(frame.filter(pl.col("concurrency") <= 5)) is None  # 3 levels: too few to tell


def throughputs_loop(point, slo, levels):
    """``slo_noise._throughputs`` resample by resample through ``slo.highest_meeting`` (what the vectorized one
    is checked against)."""
    rows = [r for r in levels if r["concurrency"] in point.levels]
    if not any(point.spread(r["concurrency"]) for r in rows):
        return None
    columns = []  # per level: its concurrency and, per resample, each limit's value, met, throughput
    for r in rows:
        c = r["concurrency"]
        values = [point.percentile(c, limit) for limit in slo.limits]
        met = np.ones(point.resamples, dtype=bool)
        for limit, v in zip(slo.limits, values):
            met &= np.isnan(v) | ((v <= limit.value) if limit.upper else (v >= limit.value))
        tok = (
            [None] * point.resamples
            if r["throughput_tok_s_gpu"] is None
            else (r["throughput_tok_s_gpu"] * point.speed_factor(c)).tolist()
        )
        columns.append((c, [[None if x != x else x for x in v.tolist()] for v in values], met.tolist(), tok))
    out = np.zeros(point.resamples)
    for i in range(point.resamples):
        resampled = [
            {
                "concurrency": c,
                "met": met[i],
                "throughput_tok_s_gpu": tok[i],
                **{f"v{k}": v[i] for k, v in enumerate(values)},
            }
            for c, values, met, tok in columns
        ]
        out[i] = highest_meeting(slo, resampled).tok_s_gpu or 0.0
    return out


def test_the_resampled_throughputs_are_highest_meetings_rule(tmp_path):
    """The SLO intervals' resampled throughputs, computed over every resample at once, are what
    ``slo.highest_meeting`` gives resample by resample (issue 44: every configuration is now judged
    against the pick, so this runs for each)."""
    tables = load(sweep_of(tmp_path, 0.995).write())
    slos = SLOS + [parse_slo("both: ttft_p90<=2s,tpot_p90<=60ms"), parse_slo("fast: tok_s_p10>=30")]
    per = level_slo(tables, slos)
    pids = per["point_id"].unique().to_list()
    req = slo_noise._requests(tables, pids, {lim.metric for s in slos for lim in s.limits})
    compared = 0
    for pid in pids:
        for s in slos:
            point = slo_noise._Point(pid, req[pid], 0.03, 500, 0)
            rows = per.filter((pl.col("slo") == s.name) & (pl.col("point_id") == pid)).to_dicts()
            a, b = slo_noise._throughputs(point, s, rows), throughputs_loop(point, s, rows)
            assert (a is None) == (b is None)
            if a is not None:
                assert np.allclose(a, b, rtol=1e-12, atol=1e-9)
                compared += 1
    assert compared >= 4
