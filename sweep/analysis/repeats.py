"""A level measured more than once, as one level: the analysis pools a level's repeats.

A level is measured more than once by the grid itself (``benchmark.repeats``: back to back in one
launch) and, in results written before decide measured in pairs, by ``decide``'s relaunches; each
measurement is a ``levels`` row of its own with its ``repeat`` index (0, or null in older results:
the first), and its requests carry the same index. Every figure, interval and pick of the report uses
all of them: :func:`pooled` turns the tables into ones with one ``levels`` row per (point, level), so
that nothing downstream needs to know about repeats:

- counts (requests, ok, failed, planned, cancelled, the server's counters) and ``wall_s`` are summed;
- the throughputs are the pooled tokens (requests) over the pooled wall time: each repeat's figure
  weighted by its wall time; ``per_request_tok_s`` is the mean over every ok request of every repeat;
- the request percentiles (latency, TTFT, TPOT) are recomputed from the pooled requests;
- every other number is the repeats' mean weighted by wall time (ITL percentiles, accept lengths,
  gauges, power); flags and text are the first measurement's;
- ``repeats``: how many measurements the row pools (1 for a level measured once). A level's
  run-to-run noise (``noise.curve_noise``: what moves a level as a whole) shrinks as 1/sqrt(repeats)
  in its pooled figure, and the verdicts that take it (``noise.widened``, ``slo_noise``) use that.

The requests need no pooling: a level's requests are its rows of every repeat. Tables without a
repeat come back as they are (the same frames), so a sweep that never re-measured reads as before.
What decide measures now, in paired rounds (``decide_round``), is not pooled: :func:`grid_only`
leaves it out, and the decisions carry its verdicts (``sweep.analysis.decided``).
Open-loop levels (concurrency 0) are never re-measured and pass through.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from sweep.results import LEVELS

REPEATS = "repeats"  # the pooled levels' column: how many measurements a row pools
KEYS = ("point_id", "concurrency")
_SUMMED = {
    "requests",
    "ok",
    "failed",
    "wall_s",
    "planned_requests",
    "stop_cancelled",
    "metrics_scrapes",
    "metrics_prompt_tokens",
    "metrics_generation_tokens",
    "metrics_requests",
    "energy_j",
    "power_samples",
    "precision_batches",
}
_FROM_REQUESTS = {
    "latency_p50_s": ("latency_s", 0.50),
    "latency_p90_s": ("latency_s", 0.90),
    "latency_p99_s": ("latency_s", 0.99),
    "ttft_p50_s": ("ttft_s", 0.50),
    "ttft_p99_s": ("ttft_s", 0.99),
    "tpot_p50_s": ("tpot_s", 0.50),
    "tpot_p99_s": ("tpot_s", 0.99),
}
_FIRST_ONLY = {"level_started_at"}  # the first repeat's start; level_ended_at: the last's end


_DECIDE_ROUND = "decide_round"  # levels measured in decide's paired rounds: judged in pairs, never pooled here


def grid_only(tables: Mapping[str, pl.LazyFrame]) -> dict[str, pl.LazyFrame]:
    """``tables`` without what ``decide`` measured in its paired rounds (``levels`` rows with a
    ``decide_round``, and their requests): those are judged in their pairs (sweep/search/decide.py)
    and reach the report through the decisions, never pooled with the grid's figures, which were taken
    under other load. Unchanged (the same frames) where decide measured nothing in pairs."""
    out = dict(tables)
    levels = tables.get("levels")
    if levels is None or _DECIDE_ROUND not in levels.collect_schema().names():
        return out
    paired = levels.filter(pl.col(_DECIDE_ROUND).is_not_null()).select(*KEYS, "repeat").collect()
    if not paired.height:
        return out
    out["levels"] = levels.filter(pl.col(_DECIDE_ROUND).is_null())
    requests = tables.get("requests")
    if requests is not None:
        drop = paired.with_columns(pl.col("repeat").fill_null(0), _drop=pl.lit(True)).unique()
        out["requests"] = (
            requests.with_columns(_rep=pl.col("repeat").fill_null(0).cast(drop.schema["repeat"]))
            .join(drop.lazy().rename({"repeat": "_rep"}), on=[*KEYS, "_rep"], how="left")
            .filter(pl.col("_drop").is_null() | (pl.col("phase") != "level"))
            .drop("_rep", "_drop")
        )
    return out


def has_repeats(tables: Mapping[str, pl.LazyFrame]) -> bool:
    """Whether any level of these tables was measured more than once."""
    levels = grid_only(tables).get("levels")
    if levels is None or "repeat" not in levels.collect_schema().names():
        return False
    top = levels.select(pl.col("repeat").max()).collect().item()
    return bool(top)


def pooled(tables: Mapping[str, pl.LazyFrame]) -> dict[str, pl.LazyFrame]:
    """``tables`` with each re-measured level pooled into one ``levels`` row (module docstring), and a
    ``repeats`` column on ``levels``; unchanged (no ``repeats`` column either) when nothing was
    re-measured."""
    tables = grid_only(tables)  # decide's paired rounds are judged in their pairs, never pooled
    out = dict(tables)
    if REPEATS in tables["levels"].collect_schema().names() or not has_repeats(tables):  # pooled already, or no repeat
        return out
    levels = tables["levels"].collect()
    closed = levels.filter(pl.col("concurrency") > 0)
    open_ = levels.filter(~(pl.col("concurrency") > 0)).with_columns(pl.lit(1, pl.Int64).alias(REPEATS))
    wall = pl.col("wall_s").fill_null(0.0)
    weight = pl.when(wall > 0).then(wall).otherwise(1.0)
    aggs: list[pl.Expr] = [pl.len().cast(pl.Int64).alias(REPEATS)]
    for name in closed.columns:
        if name in KEYS:
            continue
        dtype = closed.schema[name]
        col = pl.col(name)
        if name in _SUMMED:
            aggs.append(col.sum().cast(dtype).alias(name))
        elif name == "repeat":
            aggs.append(col.fill_null(0).max().cast(dtype).alias(name))
        elif name == "level_ended_at":
            aggs.append(col.max().alias(name))
        elif name == "per_request_tok_s":
            ok = pl.col("ok").fill_null(0).cast(pl.Float64)
            aggs.append(((col * ok).sum() / ok.filter(col.is_not_null()).sum()).cast(dtype).alias(name))
        elif dtype.is_float() and name not in _FIRST_ONLY:
            present = col.is_not_null()
            aggs.append(
                pl.when(present.any())
                .then((col * weight).filter(present).sum() / weight.filter(present).sum())
                .cast(dtype)
                .alias(name)
            )
        elif name == "stopped_early":
            aggs.append(col.any().alias(name))
        else:
            aggs.append(col.first().alias(name))
    merged = (
        closed.sort("point_id", "concurrency", pl.col("repeat").fill_null(0))
        .group_by(list(KEYS), maintain_order=True)
        .agg(aggs)
    )
    merged = _percentiles(merged, tables["requests"])
    frame = pl.concat(
        [merged.select(levels.columns + [REPEATS]), open_.select(levels.columns + [REPEATS])], how="vertical_relaxed"
    )
    out["levels"] = frame.lazy()
    return out


def _percentiles(merged: pl.DataFrame, requests: pl.LazyFrame) -> pl.DataFrame:
    """The pooled rows' request percentiles recomputed from every repeat's ok requests (levels measured
    once keep theirs: the same requests give the same figure)."""
    again = merged.filter(pl.col(REPEATS) > 1).select(*KEYS)
    if not again.height:
        return merged
    found = (
        requests.filter((pl.col("phase") == "level") & pl.col("ok").fill_null(False))
        .join(again.lazy(), on=list(KEYS), how="inner")
        .group_by(*KEYS)
        .agg([pl.col(src).quantile(q, "linear").alias(name) for name, (src, q) in _FROM_REQUESTS.items()])
        .collect()
    )
    found = found.with_columns([pl.col(c).cast(merged.schema[c]) for c in KEYS])
    cols = list(_FROM_REQUESTS)
    return (
        merged.join(found.rename({c: f"_{c}" for c in cols}), on=list(KEYS), how="left")
        .with_columns([pl.coalesce(f"_{c}", c).alias(c) for c in cols])
        .drop([f"_{c}" for c in cols])
    )


def _repeats_of(levels: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """``point_id, concurrency, repeats`` of pooled levels (1 everywhere for levels never re-measured)."""
    frame = levels.collect() if isinstance(levels, pl.LazyFrame) else levels
    if REPEATS not in frame.columns:
        return frame.select(*KEYS).unique().with_columns(pl.lit(1, pl.Int64).alias(REPEATS))
    return frame.select(*KEYS, REPEATS).unique(list(KEYS))


assert set(_FROM_REQUESTS) <= set(LEVELS.names) and _SUMMED <= set(LEVELS.names)


_MIN_DF = 8  # repeats (beyond each level's first) before their spread stands for the level-wide noise


def repeat_noise(levels: pl.DataFrame | pl.LazyFrame, value: str = "output_throughput") -> tuple[float | None, int]:
    """The level-wide run-to-run noise measured directly: the pooled standard deviation of ``log value``
    between the repeats of each re-measured level (point, concurrency), as a relative SD, and its
    degrees of freedom (measurements beyond each level's first). ``noise.curve_noise`` infers the same
    quantity from the scatter of the curves about smooth ones, and errs wide where a curve bends; a
    level measured again on a fresh launch shows it as it is. None under ``_MIN_DF`` degrees of freedom.
    Raw levels (before :func:`pooled`)."""
    frame = levels.collect() if isinstance(levels, pl.LazyFrame) else levels
    if _DECIDE_ROUND in frame.columns:  # decide's paired rounds: the noise of those pairs is theirs
        frame = frame.filter(pl.col(_DECIDE_ROUND).is_null())
    if "repeat" not in frame.columns or not frame.height:
        return None, 0
    groups = (
        frame.filter((pl.col("concurrency") > 0) & (pl.col(value) > 0))
        .with_columns(_l=pl.col(value).log())
        .group_by("point_id", "concurrency")
        .agg(n=pl.len(), ss=((pl.col("_l") - pl.col("_l").mean()) ** 2).sum())
        .filter(pl.col("n") > 1)
    )
    df = int(groups["n"].sum() - groups.height) if groups.height else 0
    if df < _MIN_DF:
        return None, df
    return float(groups["ss"].sum() / df) ** 0.5, df
