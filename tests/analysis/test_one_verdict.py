"""One judgement per pair and level: no pair anywhere in a report is given two verdicts (a sentence
calling it within noise while a table marks it beyond noise, or the other way round)."""

from __future__ import annotations

import polars as pl
import pytest

from sweep.analysis import analyze, noise
from sweep.analysis.findings import pair_verdict
from sweep.analysis.report import build
from sweep.results import load
from tests.analysis.sweepdir import SweepDir
from tests.analysis.verdict_walk import claims, contradictions


def baselines_of(directory) -> dict[str, str]:
    f = analyze(load(directory))
    return {
        r["label"]: r["baseline_label"]
        for r in f.single.iter_rows(named=True)
        if not r["baseline"] and r["baseline_label"]
    }


def walk(directory, markdown: str) -> dict:
    found = claims(markdown, baselines_of(directory))
    assert found, "the walk read no verdict from the report"
    return contradictions(found)


def _noisy_runner_up(tmp_path):
    """At C=64 the baseline is best; the runner-up's requests spread wide (its margin's interval is
    wide); a third configuration is 8 % behind the baseline with tight requests: behind beyond noise."""
    sd = SweepDir(tmp_path)
    base = sd.point(
        drafter="none", nccl="default", baseline=True, tok_s=[100, 100, 100], levels={1: 100, 64: 1000}, jitter=0.01
    )
    sd.point(
        drafter="d1",
        steps="1",
        nccl="default",
        baseline_of=base,
        tok_s=[120, 120, 120],
        levels={1: 120, 64: 990},
        jitter=0.95,
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[130, 130, 130],
        levels={1: 130, 64: 920},
        jitter=0.01,
    )
    return sd.write()


def test_the_top_level_line_names_only_pairs_judged_within_noise(tmp_path):
    directory = _noisy_runner_up(tmp_path)
    md = build(directory, with_plots=False, slos=[]).markdown
    assert walk(directory, md) == {}
    line = next(x for x in md.splitlines() if x.startswith("- At the highest concurrency measured (C=64)"))
    assert "drafter=d1,steps=2" not in line.split("no decision there:")[-1], line
    assert "0.92x" in md  # the Concurrency table: behind beyond noise, no '~'
    assert "~0.92x" not in md


def test_a_pair_has_one_verdict_whichever_side_is_asked(tmp_path):
    directory = _noisy_runner_up(tmp_path)
    f = analyze(load(directory))
    ids = dict(zip(f.single["label"], f.single["point_id"]))
    base, noisy, behind = (
        ids["drafter=none,nccl=default"],
        ids["drafter=d1,steps=1,nccl=default"],
        ids["drafter=d1,steps=2,nccl=default"],
    )
    assert pair_verdict(f, behind, base, 64) is noise.Verdict.BEHIND
    assert pair_verdict(f, base, behind, 64) is noise.Verdict.AHEAD
    assert pair_verdict(f, base, noisy, 64) is noise.Verdict.WITHIN_NOISE
    row = f.levels.filter((pl.col("point_id") == behind) & (pl.col("concurrency") == 64)).row(0, named=True)
    assert row["verdict"] == "slower"
    # the interval of A over B is 1 / that of B over A: one judgement, not two computations
    lo, hi = (
        noise.ratio_intervals(
            pl.DataFrame({"key": [f"{noisy}@64", f"{base}@64"], "base_key": [f"{base}@64", f"{noisy}@64"]}),
            __import__("sweep.analysis.speedups", fromlist=["x"]).level_samples(load(directory)),
            stat="mean",
        )
        .select("ci_low", "ci_high")
        .rows()
    )
    assert abs(lo[0] * hi[1] - 1) < 1e-12 and abs(lo[1] * hi[0] - 1) < 1e-12


def test_typed_verdicts():
    V = noise.Verdict
    assert noise.pair_verdict(1.1, 1.02, 1.2) is V.AHEAD
    assert noise.pair_verdict(0.9, 0.8, 0.98) is V.BEHIND
    assert noise.pair_verdict(1.01, 0.99, 1.02, equal_within=0.03) is V.EQUAL
    assert noise.pair_verdict(1.01, 0.9, 1.1, equal_within=0.03) is V.WITHIN_NOISE
    assert noise.pair_verdict(1.0, None, None) is V.UNKNOWN
    assert V.of("faster") is V.AHEAD and V.of("slower") is V.BEHIND and V.of("no interval") is V.UNKNOWN
    assert V.AHEAD.flipped() is V.BEHIND and V.EQUAL.settled and not V.WITHIN_NOISE.settled


def test_a_bound_beside_zero_keeps_its_side_in_the_text():
    """An interval whose low bound is +0.3 % is a verdict (ahead); printed at whole percents it read
    '+0% .. +9%', which says within noise (seen in CI's reference dry run: the summary's margin and the
    SLO table gave one pair two verdicts). A bound that is not zero keeps its sign and a digit."""
    from sweep.analysis import render

    assert render.margin(0.04, 0.003, 0.09) == "+4% (95% interval +0.3% .. +9%)"
    assert render.margin(-0.04, -0.09, -0.0004) == "-4% (95% interval -9% .. -0.04%)"
    assert render.bound(0.0, 1) == "+0.0%" and render.bound(float("inf")) == "unbounded"
    assert render.bound(0.031, 1) == "+3.1%"  # a bound away from zero: the digits asked for


def test_the_levels_verdicts_take_the_noise_measured_between_repeats(tmp_path):
    """A sweep whose levels were measured five times: its measured level noise (7.5 %) is what every
    verdict at a level takes, the Concurrency table's against a baseline as the pairs' (the Concurrency
    table judged with the curves' 2 % floor once, calling +8 % ahead where the pairs said within
    noise: one pair, two verdicts, in CI's reference dry run)."""
    from tests.search.test_decide import remeasure

    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[50] * 3, levels={1: 50, 8: 1000}, jitter=0.01)
    d1 = sd.point(
        drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=[80] * 3, levels={1: 80, 8: 1080}, jitter=0.01
    )
    sd.write()
    for k, moved in enumerate([1.1, 0.9, 1.0, 1.05], 1):  # each repeat moves a whole level, both points alike
        for i, (lv, b, d) in enumerate(((1, 50, 80), (8, 1000, 1080))):
            remeasure(sd, base, lv, b * moved, 2 * k + i, k, paired=False)
            remeasure(sd, d1, lv, d * moved, 2 * k + i, k, paired=False)
    f = analyze(load(tmp_path))
    assert isinstance(f.level_noise, noise.MeasuredNoise) and float(f.level_noise) > 0.05
    row = f.levels.filter((pl.col("point_id") == d1) & (pl.col("concurrency") == 8)).row(0, named=True)
    pair = f.pairs.filter((pl.col("point_id") == d1) & (pl.col("other_id") == base) & (pl.col("concurrency") == 8)).row(
        0, named=True
    )
    assert row["throughput_ratio"] == pytest.approx(1.08, abs=0.005)
    assert pair["verdict"] == "within noise"  # +8 % with 7.5 % of level noise on each side: not decided
    assert row["verdict"] == "within noise" and (row["ci_low"], row["ci_high"]) == pytest.approx(
        (pair["ci_low"], pair["ci_high"])
    )
