"""Is a ratio real or run-to-run noise? Confidence intervals for the ratio of two samples.

Every speedup in the report is a ratio ``stat(a) / stat(b)`` of two independent samples (a point's
single-stream runs against its baseline's; a level's per-request tok/s against the baseline's at
the same concurrency). Its interval is:

- a percentile bootstrap: resample each side with replacement, ``resamples`` times, and take the
  central ``confidence`` quantiles of the resampled ratios. Used whenever a side is small (single
  stream has a handful of runs) and always for the median;
- for the mean with at least ``normal_from`` observations on both sides, the normal approximation
  the bootstrap converges to (delta method on the log ratio:
  se^2 = sd_a^2 / (n_a mean_a^2) + sd_b^2 / (n_b mean_b^2)), which needs only per-group
  count/mean/sd, so a million request rows never leave polars.

A side with fewer than two observations has no spread, hence no interval (null).
The bootstrap is seeded per pair, so the report is reproducible and independent of row order.
"""

from __future__ import annotations

from enum import StrEnum
from statistics import NormalDist
from typing import Literal

import numpy as np
import polars as pl

Stat = Literal["mean", "median"]


class Verdict(StrEnum):
    """THE judgement of one pair (A against B, at one level, for one figure): what every sentence,
    table, pick, policy tier, history line and API row that compares the two says. ``pair_verdict``
    computes it from the pair's ratio and interval; the frames carry it as the strings below (their
    older spellings, ``faster``/``slower``/``no interval``, read as ``ahead``/``behind``/``unknown``
    through :meth:`of`)."""

    AHEAD = "ahead"  # A ahead of B beyond noise (the interval of A / B lies above 1)
    BEHIND = "behind"  # A behind B beyond noise (the interval lies below 1)
    WITHIN_NOISE = "within noise"  # the interval contains 1: no decision
    EQUAL = "equal"  # the interval contains 1 and lies within +-the practical margin: either will do
    UNKNOWN = "unknown"  # no interval (a side with no spread and no level-wide noise)

    @classmethod
    def of(cls, text: str | None) -> Verdict:
        """A verdict from a frame's string (either spelling); null: unknown."""
        return _SPELLINGS.get(text or "", cls.UNKNOWN)

    @property
    def decided(self) -> bool:
        """One of the two is ahead beyond noise."""
        return self in (Verdict.AHEAD, Verdict.BEHIND)

    @property
    def settled(self) -> bool:
        """Decided, or equal within the practical margin: nothing left to measure."""
        return self.decided or self is Verdict.EQUAL

    def flipped(self) -> Verdict:
        """The verdict of B against A."""
        return {Verdict.AHEAD: Verdict.BEHIND, Verdict.BEHIND: Verdict.AHEAD}.get(self, self)


_SPELLINGS = {
    **{v.value: v for v in Verdict},
    "faster": Verdict.AHEAD,
    "slower": Verdict.BEHIND,
    "no interval": Verdict.UNKNOWN,
}


def pair_verdict(
    ratio: float | None, low: float | None, high: float | None, *, equal_within: float | None = None
) -> Verdict:
    """The verdict of a ratio A / B with its interval [low, high] (of the ratio, not of the margin):
    beyond noise where the interval excludes 1, ``equal`` where it contains 1 and lies within
    1 +- ``equal_within`` (a practical margin; None: never equal), else within noise."""
    if ratio is None or low is None or high is None or any(x != x for x in (ratio, low, high)):
        return Verdict.UNKNOWN
    if low > 1:
        return Verdict.AHEAD
    if high < 1:
        return Verdict.BEHIND
    if equal_within is not None and low >= 1 - equal_within and high <= 1 + equal_within:
        return Verdict.EQUAL
    return Verdict.WITHIN_NOISE


METHOD = (
    "{pct:g}% interval of the ratio: percentile bootstrap ({resamples} resamples of each "
    "side, seed {seed}); for means with at least {normal_from} observations on both sides, "
    "the normal approximation on the log ratio (delta method). Fewer than 2 observations on "
    "a side: no interval."
)


def describe(confidence: float = 0.95, resamples: int = 2000, seed: int = 0, normal_from: int = 30) -> str:
    """The method in one sentence, for the report's footer."""
    return METHOD.format(pct=confidence * 100, resamples=resamples, seed=seed, normal_from=normal_from)


def draws(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` resamples of ``values`` with replacement, one per row: (resamples, n)."""
    return values[rng.integers(0, values.size, (resamples, values.size))]


def percentile_interval(resampled: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The central ``confidence`` quantiles of a statistic's resampled values (a percentile bootstrap)."""
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(resampled, [tail, 1 - tail])
    return float(lo), float(hi)


def bootstrap_ratio(
    a: np.ndarray, b: np.ndarray, stat: Stat, *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap interval of ``stat(a) / stat(b)``."""
    rng = np.random.default_rng(seed)
    fn = np.median if stat == "median" else np.mean
    sa = fn(draws(a, resamples, rng), axis=1)
    sb = fn(draws(b, resamples, rng), axis=1)
    return percentile_interval(sa / sb, confidence)


def ratio_intervals(
    pairs: pl.DataFrame,
    samples: pl.LazyFrame,
    *,
    stat: Stat,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    normal_from: int = 30,
) -> pl.DataFrame:
    """``pairs`` (columns ``key``, ``base_key``) with ``ci_low`` and ``ci_high`` added.

    ``samples`` holds the observations as (``key``, ``value``) rows; non-positive values are
    ignored (a ratio of tok/s is only defined for positive ones). A pair's interval does not depend
    on which side is asked first: it is computed with its two keys in sorted order and inverted for
    the other order, so that A against B and B against A are one judgement (1 / each other's bounds).
    """
    if pairs.height:
        swap = pl.col("key") > pl.col("base_key")
        canonical = pairs.with_columns(
            _swap=swap.fill_null(False),
            _k=pl.when(swap).then("base_key").otherwise("key"),
            _b=pl.when(swap).then("key").otherwise("base_key"),
        )
        found = _ratio_intervals(
            canonical.select(key="_k", base_key="_b").unique(maintain_order=True),
            samples,
            stat=stat,
            confidence=confidence,
            resamples=resamples,
            seed=seed,
            normal_from=normal_from,
        ).rename({"key": "_k", "base_key": "_b"})
        joined = canonical.join(found, on=["_k", "_b"], how="left", nulls_equal=True)
        return joined.with_columns(
            ci_low=pl.when("_swap").then(1 / pl.col("ci_high")).otherwise("ci_low"),
            ci_high=pl.when("_swap").then(1 / pl.col("ci_low")).otherwise("ci_high"),
        ).select(*pairs.columns, "ci_low", "ci_high")
    return _ratio_intervals(
        pairs, samples, stat=stat, confidence=confidence, resamples=resamples, seed=seed, normal_from=normal_from
    )


def _ratio_intervals(
    pairs: pl.DataFrame,
    samples: pl.LazyFrame,
    *,
    stat: Stat,
    confidence: float,
    resamples: int,
    seed: int,
    normal_from: int,
) -> pl.DataFrame:
    """``ratio_intervals`` of each pair in the order given."""
    wanted = pl.concat([pairs["key"], pairs["base_key"]]).drop_nulls().unique()
    kept = samples.filter(pl.col("key").is_in(wanted.implode()) & (pl.col("value") > 0))
    stats = kept.group_by("key").agg(n=pl.len(), mean=pl.col("value").mean(), sd=pl.col("value").std()).collect()
    joined = (
        pairs.with_row_index("_row")
        .join(stats, on="key", how="left")
        .join(
            stats.rename(lambda c: c if c == "key" else f"base_{c}"),
            left_on="base_key",
            right_on="key",
            how="left",
            suffix="_b",
        )
    )
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    se = (
        (pl.col("sd") ** 2 / (pl.col("n") * pl.col("mean") ** 2))
        + (pl.col("base_sd") ** 2 / (pl.col("base_n") * pl.col("base_mean") ** 2))
    ).sqrt()
    ratio = pl.col("mean") / pl.col("base_mean")
    normal = pl.lit(stat == "mean") & (pl.col("n") >= normal_from) & (pl.col("base_n") >= normal_from)
    joined = joined.with_columns(
        ci_low=pl.when(normal).then(ratio * (-z * se).exp()),
        ci_high=pl.when(normal).then(ratio * (z * se).exp()),
        _boot=~normal.fill_null(False) & (pl.col("n") >= 2) & (pl.col("base_n") >= 2),
    )
    boot = joined.filter("_boot")
    if boot.height:
        keys = pl.concat([boot["key"], boot["base_key"]]).unique()
        values = dict(
            kept.filter(pl.col("key").is_in(keys.implode())).group_by("key").agg(pl.col("value")).collect().iter_rows()
        )
        bounds = [
            bootstrap_ratio(
                np.asarray(values[k]),
                np.asarray(values[b]),
                stat,
                confidence=confidence,
                resamples=resamples,
                seed=seed,
            )
            for k, b in boot.select("key", "base_key").iter_rows()
        ]
        filled = boot.select("_row").with_columns(
            _lo=pl.Series([lo for lo, _ in bounds], dtype=pl.Float64),
            _hi=pl.Series([hi for _, hi in bounds], dtype=pl.Float64),
        )
        joined = joined.join(filled, on="_row", how="left").with_columns(
            ci_low=pl.coalesce("ci_low", "_lo"), ci_high=pl.coalesce("ci_high", "_hi")
        )
    return joined.sort("_row").select(*pairs.columns, "ci_low", "ci_high")


def moved(bound: str, ratio: str, to: str) -> pl.Expr:
    """An interval bound of ``ratio`` moved to the ratio ``to`` with the same relative width: a
    level's throughput ratio takes the noise of its per-request ratio (one level, the same requests)."""
    return pl.col(to) * pl.col(bound) / pl.col(ratio)


def within_noise() -> pl.Expr:
    """True when the interval [ci_low, ci_high] contains 1; null when there is no interval."""
    return pl.when(pl.col("ci_low").is_not_null() & pl.col("ci_high").is_not_null()).then(
        (pl.col("ci_low") <= 1) & (pl.col("ci_high") >= 1)
    )


def verdict(ratio: str) -> pl.Expr:
    """faster | slower | within noise | no interval, for a ratio column against a baseline."""
    noisy = within_noise()
    return (
        pl.when(pl.col(ratio).is_null())
        .then(None)
        .when(noisy.is_null())
        .then(pl.lit("no interval"))
        .when(noisy)
        .then(pl.lit("within noise"))
        .when(pl.col(ratio) > 1)
        .then(pl.lit("faster"))
        .otherwise(pl.lit("slower"))
    )


LEVEL_NOISE_FLOOR = 0.02
"""The least level-wide noise a verdict at a level assumes (a relative SD of one level's figure): a
level is measured once, so its requests' spread cannot see what moves the whole level; where the
sweep's curves do not show it (``curve_noise``: fewer than 5 levels) or show less, this floor stands
in. Two figures at +-2 % each make a ratio's 95 % interval at least about +-5.5 %."""


class MeasuredNoise(float):
    """A level-wide noise measured directly: the spread between repeated measurements of the same levels
    (``benchmark.repeats``, decide's re-measurements; ``repeats.repeat_noise``), with enough degrees of
    freedom. The floor stands in for noise nobody measured; this one was, and the verdicts take it as
    it is (:func:`level_sigma`)."""


def level_sigma(measured: float | None) -> float:
    """The level-wide noise every verdict at a level uses: measured directly between repeats
    (:class:`MeasuredNoise`) as it is; else the sweep's curves' own (``curve_noise``), at least
    ``LEVEL_NOISE_FLOOR``."""
    if isinstance(measured, MeasuredNoise):
        return float(measured)
    return max(measured or 0.0, LEVEL_NOISE_FLOOR)


def describe_level_noise(measured: float | None, repeats: int = 0) -> str:
    """Which level-wide noise the verdicts used, as a clause (for the report, where verdicts are made).
    ``repeats``: it was measured from levels measured more than once (``benchmark.repeats``), with these
    degrees of freedom."""
    if repeats and measured is not None:
        return (
            f"the level-wide noise is {measured:.1%} per level (measured directly: the spread between "
            f"repeated measurements of the same levels, {repeats} degrees of freedom; no floor stands in)"
        )
    if measured is None:
        return (
            f"the level-wide noise is unknown (no configuration has the 5 levels its estimate needs): "
            f"the floor of {LEVEL_NOISE_FLOOR:.0%} per level stands in"
        )
    if measured < LEVEL_NOISE_FLOOR:
        return (
            f"the level-wide noise measured, {measured:.1%}, is under the floor of {LEVEL_NOISE_FLOOR:.0%} "
            "per level, which stands in"
        )
    return f"the level-wide noise is {measured:.1%} per level (measured from the curves)"


def sides_of(frame: pl.DataFrame, a: str = "repeats", b: str = "baseline_repeats") -> pl.Expr | int:
    """How many level-wide noises a ratio of two levels' figures carries: 2 (one per level), or, where
    the levels pool repeated measurements (``frame``'s ``a`` and ``b`` columns, sweep/analysis/repeats.py),
    1/repeats of each: a level measured R times has the level-wide noise of its mean, sigma/sqrt(R)."""
    if a in frame.columns and b in frame.columns:
        return 1.0 / pl.col(a).fill_null(1).clip(lower_bound=1) + 1.0 / pl.col(b).fill_null(1).clip(lower_bound=1)
    return 2


def judged(frame: pl.DataFrame, ratio: str, measured: float | None, *, confidence: float = 0.95) -> pl.DataFrame:
    """THE rule for a ratio of two levels' figures (a configuration against its baseline, or against
    the runner-up, at one concurrency): ``frame``'s ``ci_low``/``ci_high`` (the requests' interval of
    ``ratio``, null where there is none) widened by the level-wide noise on both figures
    (``level_sigma(measured)``, :func:`widened`), then ``within_noise`` and ``verdict``
    (faster | slower | within noise). Every verdict at a level in the report (the Concurrency table's
    marks, the speedup grid, the best per level, where speculation stops paying, the summary, the SLO
    picks, the history) comes from here."""
    return frame.with_columns(
        widened(ratio, level_sigma(measured), sides=sides_of(frame), confidence=confidence)
    ).with_columns(within_noise=within_noise(), verdict=verdict(ratio))


def curve_noise(levels: pl.DataFrame, value: str = "output_throughput", *, degree: int = 3) -> float | None:
    """The run-to-run noise of one level's figure, as a relative standard deviation, from the sweep's
    own curves.

    A level is measured once, and its requests run together: whatever slows the whole level (a busy
    host, a noisy neighbour, clocks) moves all of them alike, so resampling them cannot see it. It
    shows as the scatter of each configuration's curve about a smooth one: ``log value`` against
    ``log concurrency`` fitted with a polynomial of ``degree`` per configuration (``point_id``) that has
    at least ``degree + 2`` levels, the residuals (scaled by sqrt(n / (n - degree - 1)) for the fitted
    terms) pooled over the sweep as a root mean square. A curve's true bends that the polynomial misses
    count as noise (the estimate errs wide). None when no configuration has enough levels.
    """
    residuals = []
    frame = levels.filter(pl.col(value).is_not_null() & (pl.col(value) > 0) & (pl.col("concurrency") > 0))
    for _, g in frame.group_by("point_id"):
        g = g.unique("concurrency").sort("concurrency")
        n = g.height
        if n < degree + 2:
            continue
        x = np.log(g["concurrency"].to_numpy().astype(float))
        y = np.log(g[value].to_numpy().astype(float))
        fit = np.polyfit(x, y, degree)
        residuals.append((y - np.polyval(fit, x)) * np.sqrt(n / (n - degree - 1)))
    if not residuals:
        return None
    return float(np.sqrt(np.mean(np.concatenate(residuals) ** 2)))


def widened(
    ratio: str, sigma: float | None, *, sides: int | float | pl.Expr = 2, confidence: float = 0.95
) -> list[pl.Expr]:
    """``ci_low``/``ci_high`` of ``ratio`` widened by a level-wide noise ``sigma`` (relative SD,
    :func:`curve_noise`) on each of ``sides`` figures: in log space, each half-width and
    z * sigma * sqrt(sides) add in quadrature; with no interval, that term alone. Unchanged when
    ``sigma`` is None or 0. ``sides`` may be an expression: a figure pooled over R repeated
    measurements counts 1/R (:func:`sides_of`)."""
    if not sigma:
        return [pl.col("ci_low"), pl.col("ci_high")]
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    extra = (z * sigma) ** 2 * sides
    centre = pl.col(ratio).log()
    low_half = (centre - pl.col("ci_low").log()).clip(lower_bound=0).fill_null(0.0)
    high_half = (pl.col("ci_high").log() - centre).clip(lower_bound=0).fill_null(0.0)
    return [
        pl.when(pl.col(ratio) > 0).then((centre - (low_half**2 + extra).sqrt()).exp()).alias("ci_low"),
        pl.when(pl.col(ratio) > 0).then((centre + (high_half**2 + extra).sqrt()).exp()).alias("ci_high"),
    ]


# Student's t, the 0.975 quantile (two-sided 95 %) for 1 .. 30 degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_quantile(df: int, confidence: float = 0.95) -> float:
    """The two-sided ``confidence`` quantile of Student's t with ``df`` degrees of freedom: tabulated
    for 95 % up to 30, else the Cornish-Fisher expansion around the normal's (within 0.1 % from 3 on)."""
    if df < 1:
        raise ValueError(f"t_quantile needs at least 1 degree of freedom, not {df}")
    if abs(confidence - 0.95) < 1e-12 and df <= len(_T975):
        return _T975[df - 1]
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def paired_ratio(
    log_ratios: list[float], confidence: float = 0.95, *, pooled: tuple[float, int] | None = None
) -> tuple[float, float, float] | None:
    """The ratio A / B and its interval from paired measurements: ``log_ratios`` holds log(A / B) of each
    pair (A and B measured back to back), the mean's t interval over the pairs (their spread, so
    whatever moved both of a pair cancels). ``pooled``: (SD, degrees of freedom) of a pair's log ratio
    pooled over several comparisons measured the same way (:func:`pooled_spread`), used in place of
    these pairs' own spread. None under two pairs (no spread to judge by)."""
    n = len(log_ratios)
    if n < 2:
        return None
    mean = sum(log_ratios) / n
    if pooled is not None and pooled[1] >= n - 1:
        sd, df = pooled
    else:
        sd, df = (sum((x - mean) ** 2 for x in log_ratios) / (n - 1)) ** 0.5, n - 1
    half = t_quantile(df, confidence) * sd / n**0.5
    return float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half))


def pooled_spread(groups: list[list[float]]) -> tuple[float, int] | None:
    """The SD of one observation about its group's mean, pooled over ``groups`` (each a comparison's
    paired log ratios), and its degrees of freedom (the observations beyond each group's first): the
    residual of a one-way layout. None without a group of two."""
    df = sum(len(g) - 1 for g in groups if len(g) > 1)
    if df < 1:
        return None
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in groups if len(g) > 1)
    return (ss / df) ** 0.5, df
