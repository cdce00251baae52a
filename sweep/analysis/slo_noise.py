"""How sure is each SLO pick: the interval of its margin over the runner-up and over its baseline.

The throughput under an SLO (:func:`sweep.analysis.slo.highest_meeting`) is computed from each level's
request percentiles (where the SLO stops holding) and its throughput figure, and inherits their noise,
which this module measures with the percentile bootstrap of :mod:`sweep.analysis.noise`:

- each level's requests are resampled with replacement (``noise.draws``), ``resamples`` times; every
  limit's percentile is recomputed from the resampled requests (failed ones at their worst value, as
  ``slo.level_slo`` counts them), and the level's throughput is moved by the resampled mean
  per-request tok/s relative to the measured one (a level has one throughput figure: its requests'
  noise, as a relative width, as the level speedups do);
- a level's requests run together, so what slows the whole level (a busy host) moves them all alike
  and resampling them cannot see it: each level also gets a level-wide factor exp(sigma z) per
  resample (z standard normal), sigma the sweep's ``noise.curve_noise`` (the scatter of its
  throughput curves about smooth ones), that multiplies its speeds and throughput and divides its
  times (a failed request stays failed);
- the walk of ``slo.highest_meeting`` is redone on every resample, giving ``resamples`` throughputs
  under the SLO per configuration; the margin's interval is the percentile interval of the pick's
  resampled throughput over the other's (``noise.percentile_interval``).

The resamples are seeded per point and level (``seed``, the point id, the level), so the intervals
are reproducible and independent of row order, and one point's resamples are the same for every SLO
and every comparison it is in. The margin is within noise when its interval contains 0.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import polars as pl

from sweep.analysis import noise, realspeed, repeats
from sweep.analysis import slo as slo_mod
from sweep.analysis.frames import Tables

COLUMNS = {
    "margin_low": pl.Float64,
    "margin_high": pl.Float64,
    "margin_within_noise": pl.Boolean,
    "vs_baseline_low": pl.Float64,
    "vs_baseline_high": pl.Float64,
    "vs_baseline_within_noise": pl.Boolean,
    # on every other row that meets the SLO: the pick's margin over this row (pick / this - 1), its
    # interval and whether it is within noise: the one judgement of that pair (the runner-up's row
    # repeats the pick's margin, the baseline's its vs_baseline)
    "vs_pick_low": pl.Float64,
    "vs_pick_high": pl.Float64,
    "vs_pick_within_noise": pl.Boolean,
}

METHOD = (
    "the pick's margins over the runner-up and over its baseline carry a {pct:g}% percentile-bootstrap "
    "interval ({resamples} resamples): each level's requests resampled and each level moved as a whole "
    "by its level-wide noise, the SLO's percentiles, the highest concurrency meeting it and the "
    "throughput there recomputed; 'within noise of' the runner-up when the interval contains 0"
)


def describe(confidence: float = 0.95, resamples: int = 2000) -> str:
    """The method in one sentence, for the report's method section."""
    return METHOD.format(pct=confidence * 100, resamples=resamples)


class _Point:
    """One configuration's requests, level by level, and their resamples (drawn once, on first use)."""

    def __init__(
        self,
        point_id: str,
        levels: dict[int, dict[str, np.ndarray]],
        level_noise: float | None,
        resamples: int,
        seed: int,
        repeats: dict[int, int] | None = None,
    ):
        self.point_id, self.levels, self.level_noise = point_id, levels, level_noise or 0.0
        self.resamples, self.seed = resamples, seed
        self.repeats = repeats or {}  # measurements a level pools (decide's repeats): its level noise / sqrt(R)
        self._drawn: dict[int, tuple[np.ndarray | None, np.ndarray]] = {}
        self._found: dict[tuple[int, str, float], np.ndarray] = {}  # a level's resampled percentiles, by metric and q

    def spread(self, level: int) -> bool:
        return self.level_noise > 0 or self.levels[level]["rate"].size >= 2

    def _draw(self, level: int) -> tuple[np.ndarray | None, np.ndarray]:
        """The level's resampled requests (indices, (resamples, n); None with fewer than 2) and its
        level-wide factor per resample (exp(sigma z), ones without a level noise)."""
        if level not in self._drawn:
            n = self.levels[level]["rate"].size
            rng = np.random.default_rng([self.seed, zlib.crc32(self.point_id.encode()), level])
            idx = noise.draws(np.arange(n), self.resamples, rng) if n >= 2 else None
            sigma = self.level_noise / np.sqrt(max(1, self.repeats.get(level, 1)))
            factor = np.exp(sigma * rng.standard_normal(self.resamples)) if sigma else np.ones(self.resamples)
            self._drawn[level] = idx, factor
        return self._drawn[level]

    def speed_factor(self, level: int) -> np.ndarray:
        """Per resample, what the level's throughput is multiplied by: the resampled requests' mean
        tok/s over the measured mean, times the level-wide factor."""
        idx, factor = self._draw(level)
        rate = self.levels[level]["rate"]
        if idx is None or not rate.size or rate.mean() <= 0:
            return factor
        return rate[idx].mean(axis=1) / rate.mean() * factor

    def percentile(self, level: int, limit: slo_mod.Limit) -> np.ndarray:
        """Per resample, the limit's percentile at the level (NaN: undefined for every request); speeds
        move with the level-wide factor, times against it, a failed request's value not at all."""
        idx, factor = self._draw(level)
        found = self._resampled(level, limit.metric, limit.percentile / 100, idx)
        moved = found * factor if limit.metric == "tok_s" else found / factor
        return np.where(found >= slo_mod.FAILED / 10, found, moved)

    def _resampled(self, level: int, metric: str, q: float, idx: np.ndarray | None) -> np.ndarray:
        """The ``q`` quantile of ``metric`` over each resample of the level's requests (drawn once: every
        SLO and comparison with the same percentile reads the same)."""
        key = (level, metric, q)
        if key in self._found:
            return self._found[key]
        values = self.levels[level][metric]
        if idx is None:
            finite = values[~np.isnan(values)]
            found = np.full(self.resamples, float(np.quantile(finite, q)) if finite.size else np.nan)
        elif np.isnan(values).any():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a resample with no defined value: NaN
                found = np.nanquantile(values[idx], q, axis=1)
        else:
            found = np.quantile(values[idx], q, axis=1)
        self._found[key] = found
        return found


def _requests(tables: Tables, point_ids: list[str], metrics: set[str]) -> dict[str, dict[int, dict[str, np.ndarray]]]:
    """The request values each limit needs (as ``slo.level_slo`` computes them; NaN where undefined),
    and each request's tok/s (0 for a failed one), per point and level."""
    ok = pl.col("ok").fill_null(False)
    rows = (
        realspeed.scaled(tables)["requests"]
        .filter((pl.col("phase") == "level") & pl.col("point_id").is_in(point_ids))
        .select(
            "point_id",
            concurrency=pl.col("concurrency").cast(pl.Int64),
            rate=pl.when(ok & (pl.col("latency_s") > 0))
            .then(pl.col("completion_tokens") / pl.col("latency_s"))
            .otherwise(0.0)
            .cast(pl.Float64),
            **{m: slo_mod._value(m).fill_null(float("nan")) for m in metrics},
        )
        .collect()
    )
    out: dict[str, dict[int, dict[str, np.ndarray]]] = {pid: {} for pid in point_ids}
    for (pid, c), g in rows.group_by("point_id", "concurrency"):
        out[str(pid)][int(str(c))] = {col: g[col].to_numpy().astype(float) for col in ("rate", *metrics)}
    return out


def _throughputs(point: _Point, slo: slo_mod.SLO, levels: list[dict]) -> np.ndarray | None:
    """Per resample, the point's throughput under ``slo`` (0 where it meets it at no level), from its
    ``slo.level_slo`` rows; None when no level of it has a spread (every resample would be the
    measured figure). ``slo.highest_meeting``'s rule, over every resample at once."""
    rows = sorted((r for r in levels if r["concurrency"] in point.levels), key=lambda r: r["concurrency"])
    if not any(point.spread(r["concurrency"]) for r in rows):
        return None
    n, size = len(rows), point.resamples
    values = np.empty((len(slo.limits), n, size))  # per limit, level and resample: its percentile (NaN: none)
    met = np.ones((n, size), dtype=bool)
    tok = np.full((n, size), np.nan)
    for j, r in enumerate(rows):
        c = r["concurrency"]
        for k, limit in enumerate(slo.limits):
            v = point.percentile(c, limit)
            values[k, j] = v
            met[j] &= np.isnan(v) | ((v <= limit.value) if limit.upper else (v >= limit.value))
        if r["throughput_tok_s_gpu"] is not None:
            tok[j] = r["throughput_tok_s_gpu"] * point.speed_factor(c)
    idx = np.arange(size)
    any_met = met.any(axis=0)
    first = np.argmax(met, axis=0)  # the first level meeting it (0 where none does: masked below)
    # the last of the run of met levels from the first: the first unmet level after it, less one
    after = np.arange(n)[:, None] >= first[None, :]
    unmet_after = after & ~met
    last = np.where(unmet_after.any(axis=0), np.argmax(unmet_after, axis=0) - 1, n - 1)
    out = np.zeros(size)
    top = any_met & (last == n - 1)
    out[top] = tok[last[top], idx[top]]
    mid = any_met & (last < n - 1)
    if mid.any():
        lo_i, hi_i, cols = last[mid], last[mid] + 1, idx[mid]
        frac = np.ones(cols.size)
        for k, limit in enumerate(slo.limits):
            lo, hi = values[k, lo_i, cols], values[k, hi_i, cols]
            holds = (hi <= limit.value) if limit.upper else (hi >= limit.value)
            with np.errstate(divide="ignore", invalid="ignore"):
                cross = np.clip((limit.value - lo) / (hi - lo), 0.0, 1.0)
            cross = np.where(
                np.isnan(hi),
                1.0,
                np.where(
                    np.isnan(lo),
                    0.0,
                    np.where(
                        holds, 1.0, np.where((hi >= slo_mod.FAILED / 10) | ~np.isfinite(hi) | (hi == lo), 0.0, cross)
                    ),
                ),
            )
            frac = np.minimum(frac, cross)
        t0, t1 = tok[lo_i, cols], tok[hi_i, cols]
        out[mid] = t0 + frac * (t1 - t0)
    return np.nan_to_num(out, nan=0.0)


_UNBOUNDED = 1e12  # stands for an infinite ratio (the other meets the SLO nowhere in a resample)


def _interval(
    a: np.ndarray | None, b: np.ndarray | None, a_measured: float, b_measured: float, resamples: int, confidence: float
) -> tuple[float | None, float | None]:
    """The interval of a / b - 1 over the resamples; a side without spread is its measured figure. Two
    configurations that both meet the SLO nowhere in a resample tie there; one that meets it where the
    other does not is infinitely ahead (an unbounded interval: ``inf``)."""
    if a is None and b is None:
        return None, None
    a = np.full(resamples, a_measured) if a is None else a
    b = np.full(resamples, b_measured) if b is None else b
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b > 0, a / np.where(b > 0, b, 1.0), np.where(a > 0, _UNBOUNDED, 1.0))
    lo, hi = noise.percentile_interval(ratio, confidence)
    return (lo - 1 if lo < _UNBOUNDED / 10 else float("inf")), (hi - 1 if hi < _UNBOUNDED / 10 else float("inf"))


def _pick(
    slo: slo_mod.SLO,
    best: dict,
    runner: dict | None,
    others: list[dict],
    points: dict[str, _Point],
    per_level: pl.DataFrame,
    measured: dict[str, float],
    *,
    resamples: int,
    confidence: float,
) -> list[dict]:
    """One SLO's rows of intervals: the rank-1 row's over the runner-up and over the pick's baseline,
    and each of ``others``' (rows meeting the SLO, rank 2 on) the pick's over it."""
    needed = {
        best["point_id"],
        *([runner["point_id"]] if runner is not None else []),
        *([best["baseline_id"]] if best["vs_baseline"] is not None else []),
        *[o["point_id"] for o in others],
    }
    draws = {
        pid: _throughputs(points[pid], slo, per_level.filter(pl.col("point_id") == pid).to_dicts()) for pid in needed
    }

    def between(a: str, b: str) -> tuple[float | None, float | None]:
        return _interval(draws[a], draws[b], measured.get(a) or 0.0, measured.get(b) or 0.0, resamples, confidence)

    row: dict = {"slo": slo.name, "workload": best.get("workload") or "", "rank": 1}
    if runner is not None:
        row["margin_low"], row["margin_high"] = between(best["point_id"], runner["point_id"])
    if best["vs_baseline"] is not None:
        row["vs_baseline_low"], row["vs_baseline_high"] = between(best["point_id"], best["baseline_id"])
    rows = [row]
    for o in others:
        low, high = between(best["point_id"], o["point_id"])
        rows.append(
            {"slo": slo.name, "workload": row["workload"], "rank": o["rank"], "vs_pick_low": low, "vs_pick_high": high}
        )
    return rows


def margins(
    tables: Tables,
    slos: list[slo_mod.SLO],
    table: pl.DataFrame,
    per_level: pl.DataFrame,
    *,
    level_noise: float | None = None,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """``slo.slo_table``'s ``table`` with the intervals of the pick's margins: on each SLO's rank-1 row,
    ``margin_low``/``margin_high`` (of its margin over the runner-up, rank 2), ``margin_within_noise``
    (the interval contains 0), and the same of ``vs_baseline`` (``vs_baseline_low``/``_high``/
    ``_within_noise``); null on the other rows, and where there is no interval (no runner-up that meets
    the SLO, or no level with a spread). ``level_noise``: the level-wide run-to-run noise of a level's
    figures (a relative SD, ``noise.curve_noise``; at least ``noise.LEVEL_NOISE_FLOOR``, as every verdict
    at a level). The picks are per workload (``workload``: the client-side benchmark axes)."""
    empty = table.with_columns([pl.lit(None, dtype).alias(c) for c, dtype in COLUMNS.items()])
    if table.is_empty() or not slos:
        return empty
    picks = []
    for slo in slos:  # a pick per workload: two workloads are two traffic mixes, never two setups
        for _, mine in table.filter(pl.col("slo") == slo.name).sort("rank").group_by("workload", maintain_order=True):
            if mine.height and mine["tok_s_gpu"][0]:
                best = mine.row(0, named=True)
                runner = mine.row(1, named=True) if mine.height > 1 and mine["tok_s_gpu"][1] else None
                others = [r for r in mine.slice(1).iter_rows(named=True) if r["tok_s_gpu"]]
                picks.append((slo, best, runner, others))
    wanted = sorted(
        {
            pid
            for _, b, r, others in picks
            for pid in (
                b["point_id"],
                r["point_id"] if r else None,
                b["baseline_id"] if b["vs_baseline"] is not None else None,
                *[o["point_id"] for o in others],
            )
            if pid
        }
    )
    if not wanted:
        return empty
    requests = _requests(tables, wanted, {limit.metric for s in slos for limit in s.limits})
    sigma = noise.level_sigma(level_noise)  # the level-wide noise of every verdict at a level (noise.judged)
    counts: dict[str, dict[int, int]] = {}
    if repeats.REPEATS in tables["levels"].collect_schema().names():
        for pid, c, r in (
            tables["levels"]
            .filter(pl.col("point_id").is_in(wanted))
            .select("point_id", "concurrency", repeats.REPEATS)
            .collect()
            .iter_rows()
        ):
            counts.setdefault(pid, {})[int(c)] = int(r or 1)
    points = {pid: _Point(pid, requests[pid], sigma, resamples, seed, counts.get(pid)) for pid in wanted}
    rows = [
        row
        for slo, best, runner, others in picks
        for row in _pick(
            slo,
            best,
            runner,
            others,
            points,
            per_level.filter(pl.col("slo") == slo.name),
            dict(
                table.filter((pl.col("slo") == slo.name) & (pl.col("workload") == best["workload"]))
                .select("point_id", "tok_s_gpu")
                .iter_rows()
            ),
            resamples=resamples,
            confidence=confidence,
        )
    ]
    found = pl.DataFrame(
        rows,
        schema={
            "slo": pl.String,
            "workload": pl.String,
            "rank": pl.Int64,
            **{c: pl.Float64 for c in COLUMNS if not c.endswith("noise")},
        },
    )
    within = lambda low, high: pl.when(pl.col(low).is_not_null() & pl.col(high).is_not_null()).then(  # noqa: E731
        (pl.col(low) <= 0) & (pl.col(high) >= 0)
    )
    found = found.with_columns(
        margin_within_noise=within("margin_low", "margin_high"),
        vs_baseline_within_noise=within("vs_baseline_low", "vs_baseline_high"),
        vs_pick_within_noise=within("vs_pick_low", "vs_pick_high"),
    )
    return table.join(found, on=["slo", "workload", "rank"], how="left").select(*table.columns, *COLUMNS)
