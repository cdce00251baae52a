"""Open-loop levels (``benchmark.rates``, a trace at its own timing): goodput against offered rate.

The levels table holds two kinds of row: concurrency levels, and open-loop levels (``arrival``
set, ``concurrency`` 0; sweep/bench/openloop.py). Every concurrency analysis (curves, speedups,
frontier, SLO, energy, noise) reads ``closed_loop(tables)``, which leaves the open-loop rows, their
requests (phase ``rate``) and their metrics rows out, so the two never mix on one axis. This
module reads the open-loop rows: per point and offered rate, what was achieved, whether the server
kept up (``kept_up``: its backlog did not grow beyond chance over the level), the latencies, and
per SLO the goodput (requests meeting every limit per second of the level, as ``slo.level_slo``
computes it for a concurrency level), and the lowest rate each configuration failed to keep up with.
"""

from __future__ import annotations

import polars as pl

from sweep.analysis import realspeed
from sweep.analysis import slo as slo_mod
from sweep.analysis.frames import Tables, configurations

OPEN_PHASE = "rate"  # the requests' phase (sweep.bench.openloop.OPEN_PHASE)
_RATE_KEY = 1_000_000  # offered rates as integer keys (micro-requests/s): what rates are matched on, never raw floats


def _rate_key(column: str = "offered_rate") -> pl.Expr:
    """An offered rate as an integer key (``_RATE_KEY`` per request/s, rounded): what open-loop rows
    are matched on. Two computations of one rate need not give the same float (a dry run's 5.0 / 5
    against 1e6 / 1e6 * 0.2), so no join is ever on the float itself."""
    return (pl.col(column) * _RATE_KEY).round(0).cast(pl.Int64)


def join_on_rate(left: pl.DataFrame, right: pl.DataFrame, how: str = "left") -> pl.DataFrame:
    """``left`` joined with ``right`` on ``point_id`` and offered rate (by :func:`rate_key`; ``left``'s
    ``offered_rate`` kept, ``right``'s dropped)."""
    key = "__rate_key"
    joined = left.with_columns(_rate_key().alias(key)).join(
        right.with_columns(_rate_key().alias(key)).drop("offered_rate"),
        on=["point_id", key],
        how=how,  # type: ignore[arg-type]
        maintain_order="left",
    )
    return joined.drop(key)


def _has(frame: pl.LazyFrame, column: str) -> bool:
    return column in frame.collect_schema().names()


def _is_open(frame: pl.LazyFrame) -> pl.Expr:
    return pl.col("arrival").is_not_null() if _has(frame, "arrival") else pl.lit(False)


def closed_loop(tables: Tables) -> dict[str, pl.LazyFrame]:
    """``tables`` without the open-loop levels: their levels rows, requests and metrics rows."""
    out = dict(tables)
    if "levels" in out:
        out["levels"] = out["levels"].filter(~_is_open(out["levels"]))
    if "requests" in out:
        out["requests"] = out["requests"].filter(pl.col("phase") != OPEN_PHASE)
    if "metrics" in out and _has(out["metrics"], "offered_rate"):
        out["metrics"] = out["metrics"].filter(pl.col("offered_rate").is_null())
    return out


SCHEMA = {
    "point_id": pl.String,
    "label": pl.String,
    "order": pl.Int64,
    "offered_rate": pl.Float64,
    "arrival": pl.String,
    "burstiness": pl.Float64,
    "arrival_rate": pl.Float64,
    "achieved_rate": pl.Float64,
    "requests": pl.Int64,
    "ok": pl.Int64,
    "output_throughput": pl.Float64,
    "ttft_p50_s": pl.Float64,
    "ttft_p99_s": pl.Float64,
    "tpot_p50_s": pl.Float64,
    "latency_p99_s": pl.Float64,
    "queue_growth": pl.Float64,
    "kept_up": pl.Boolean,
    "max_in_flight_seen": pl.Int64,
    "wait_max_s": pl.Float64,
}


def rate_levels(tables: Tables) -> pl.DataFrame:
    """One row per (point, open-loop level), at real speed, in the points' order then by rate
    (``SCHEMA``); empty without open-loop levels."""
    if "levels" not in tables or not _has(tables["levels"], "arrival"):
        return pl.DataFrame(schema=SCHEMA)
    tables = realspeed.scaled(tables)
    rows = tables["levels"].filter(_is_open(tables["levels"])).collect()
    if not rows.height:
        return pl.DataFrame(schema=SCHEMA)
    names = configurations(tables).select("point_id", "label", "order")
    cols = [c for c in SCHEMA if c not in ("label", "order")]
    return (
        rows.select(cols)
        .unique(["point_id", "arrival", "offered_rate"], keep="last", maintain_order=True)
        .join(names, on="point_id", how="left")
        .with_columns(label=pl.col("label").fill_null(pl.col("point_id")), order=pl.col("order").fill_null(0))
        .select(list(SCHEMA))
        .cast(pl.Schema(SCHEMA))
        .sort("order", "arrival", "offered_rate")
    )


def first_overload(levels: pl.DataFrame) -> pl.DataFrame:
    """Per point: the highest offered rate it kept up with and the lowest it did not (nulls where
    none), over its rate levels (a trace replay left out). Columns: point_id, label, kept_up_to,
    overloaded_at."""
    rated = levels.filter(pl.col("arrival") != "trace")
    schema = {"point_id": pl.String, "label": pl.String, "kept_up_to": pl.Float64, "overloaded_at": pl.Float64}
    if not rated.height:
        return pl.DataFrame(schema=schema)
    return (
        rated.group_by("point_id", "label", "order", maintain_order=True)
        .agg(
            kept_up_to=pl.col("offered_rate").filter(pl.col("kept_up").fill_null(False)).max(),
            overloaded_at=pl.col("offered_rate").filter(pl.col("kept_up").not_()).min(),
        )
        .sort("order")
        .select(list(schema))
    )


def rate_slo(tables: Tables, slos: list) -> pl.DataFrame:
    """``slo.level_slo`` over the open-loop levels: one row per (SLO, point, offered rate), with
    ``offered_rate`` in place of ``concurrency`` (met, attainment, goodput_rps...)."""
    empty = (
        slo_mod.level_slo(tables, [])
        .rename({"concurrency": "offered_rate"})
        .with_columns(pl.col("offered_rate").cast(pl.Float64))
    )
    if not slos or "levels" not in tables or not _has(tables["levels"], "arrival"):
        return empty
    tables = realspeed.scaled(tables)  # first: the keys are the real-speed rates rate_levels shows
    key = _rate_key()
    view = dict(tables)
    view["levels"] = tables["levels"].filter(_is_open(tables["levels"])).with_columns(concurrency=key)
    view["requests"] = (
        tables["requests"].filter(pl.col("phase") == OPEN_PHASE).with_columns(phase=pl.lit("level"), concurrency=key)
    )
    out = slo_mod.level_slo(view, slos)
    # each key back to its level's own rate (the one rate_levels shows), not a float rebuilt from the key
    rates = (
        view["levels"]
        .select("point_id", "concurrency", "offered_rate")
        .collect()
        .with_columns(pl.col("concurrency").cast(pl.Int64))
        .unique(["point_id", "concurrency"], keep="last")
    )
    return (
        out.join(rates, on=["point_id", "concurrency"], how="left", maintain_order="left")
        .with_columns(pl.col("offered_rate").fill_null(pl.col("concurrency").cast(pl.Float64) / _RATE_KEY))
        .drop("concurrency")
        .select(["offered_rate" if c == "concurrency" else c for c in out.columns])
    )
