"""Achieved concurrency: how many requests a concurrency level actually kept in flight.

A level named C=70 that kept only 31 requests in flight (a client or connection cap, a host too
busy to send) measured another server load: its per-request tok/s is that of ~31, not 70. Every
levels row records ``achieved_concurrency`` (requests in flight, time-weighted over the level's wall
time, from the requests' send and end times: sweep/bench/stats.py). A closed-loop level keeps exactly
C in flight until its last requests drain, so it stays close to C; one that falls below ``SHORT``
of C is flagged ("short") in the report and ``sweep bench``'s tables (sweep/core/achieved.py). Between two
runs, a level whose achieved concurrency differs by more than that margin measured two loads:
``sweep history`` marks its change ``not comparable`` instead of an improvement or a regression.
Pure functions over polars frames.
"""

from __future__ import annotations

import polars as pl

from sweep.analysis import render
from sweep.analysis.render import Section
from sweep.core import SHORT, cell

NOT_COMPARABLE = "not comparable"  # history's verdict for a change between levels that achieved different loads
# the history table's columns beside sweep.analysis.history.HISTORY_SCHEMA's: a level's load in the run and its reference
HISTORY_COLUMNS = {"achieved": pl.Float64, "previous_achieved": pl.Float64}
_JUDGED = ("regression", "improvement", "within noise", "shared shift")  # the verdicts a load mismatch overrides


def _margin_text() -> str:
    """The margin in words, as the report and the docs state it."""
    return f"{SHORT:.0%}"


def _short_expr() -> pl.Expr:
    """``is_short`` over a frame's ``concurrency`` and ``achieved_concurrency`` columns."""
    c = pl.col("concurrency")
    return (c > 0) & pl.col("achieved_concurrency").is_not_null() & (pl.col("achieved_concurrency") < SHORT * c)


def short_levels(levels: pl.DataFrame) -> pl.DataFrame:
    """The levels (of ``level_speedups``: label, concurrency, achieved_concurrency...) that fell short."""
    if "achieved_concurrency" not in levels.columns or not levels.height:
        return levels.clear()
    return levels.filter(_short_expr())


def note(levels: pl.DataFrame, shown: int = 6) -> list[str]:
    """The report's line on the levels that fell short (empty where none did)."""
    short = short_levels(levels)
    if not short.height:
        return []
    order = [c for c in ("order", "concurrency") if c in short.columns]
    parts = [
        f"{r['label']} at C={r['concurrency']} kept {r['achieved_concurrency']:.1f} in flight "
        f"({r['achieved_concurrency'] / r['concurrency']:.0%})"
        for r in short.sort(order).head(shown).iter_rows(named=True)
    ]
    more = f" and {short.height - shown} more" if short.height > shown else ""
    return [
        f"Short of the level: {short.height} level(s) kept fewer than {_margin_text()} of their C in flight on "
        f"average ({'; '.join(parts)}{more}). Their figures are those of the load achieved, not of C: "
        "per-request speed rises as the load falls, so compare them with care (table 'Achieved concurrency')."
    ]


def history_verdicts(history: pl.DataFrame, achieved: pl.DataFrame) -> pl.DataFrame:
    """``history`` (sweep.analysis.history's table) with the verdict of each level figure whose run and
    reference achieved loads beyond the margin apart set to ``NOT_COMPARABLE``, and the two loads
    beside it (``achieved``, ``previous_achieved``). ``achieved``: run, point_id, concurrency,
    achieved_concurrency of every run's levels."""
    keys = ["run", "point_id", "concurrency"]
    mine = achieved.select(*keys, pl.col("achieved_concurrency").alias("achieved")).unique(keys, keep="last")
    theirs = mine.rename({"run": "previous", "point_id": "previous_id", "achieved": "previous_achieved"})
    history = history.drop([c for c in HISTORY_COLUMNS if c in history.columns])
    out = history.join(mine, on=keys, how="left", maintain_order="left").join(
        theirs, on=["previous", "previous_id", "concurrency"], how="left", maintain_order="left"
    )
    a, b = pl.col("achieved"), pl.col("previous_achieved")
    apart = (
        a.is_not_null()
        & b.is_not_null()
        & (a > 0)
        & (b > 0)
        & (pl.min_horizontal(a, b) / pl.max_horizontal(a, b) < SHORT)
    )
    return out.with_columns(
        verdict=pl.when(apart & pl.col("verdict").is_in(_JUDGED))
        .then(pl.lit(NOT_COMPARABLE))
        .otherwise(pl.col("verdict"))
    )


_RUN_LEVELS = {"run": pl.String, "point_id": pl.String, "concurrency": pl.Int64, "achieved_concurrency": pl.Float64}


def _run_levels(run: str, levels: pl.DataFrame) -> pl.DataFrame:
    """One run's ``run, point_id, concurrency, achieved_concurrency`` (for ``history_verdicts``)."""
    if not levels.height or "achieved_concurrency" not in levels.columns:
        return pl.DataFrame(schema=_RUN_LEVELS)
    return levels.select(
        run=pl.lit(run),
        point_id="point_id",
        concurrency=pl.col("concurrency").cast(pl.Int64),
        achieved_concurrency=pl.col("achieved_concurrency").cast(pl.Float64),
    )


def runs_levels(runs) -> pl.DataFrame:
    """``_run_levels`` of every run (``sweep.analysis.history.Run``: its ``run`` and ``findings.levels``)."""
    return pl.concat([pl.DataFrame(schema=_RUN_LEVELS)] + [_run_levels(r.run, r.findings.levels) for r in runs])


def section(levels: pl.DataFrame) -> list[Section]:
    """The report's "Achieved concurrency" table: per configuration and level, the requests kept in
    flight on average ('short' below the margin); none without levels."""
    if not levels.height or "achieved_concurrency" not in levels.columns:
        return []
    cs = sorted(levels["concurrency"].unique().to_list())
    wide = (
        levels.with_columns(
            cell=render.cell(cell, "concurrency", "achieved_concurrency"), c=pl.format("C={}", "concurrency")
        )
        .pivot(on="c", index=["order", "label"], values="cell", aggregate_function="first")
        .sort("order")
    )
    table = wide.select(pl.col("label").alias("point"), *[f"C={c}" for c in cs])
    short = short_levels(levels).height
    return [
        Section(
            "Achieved concurrency",
            [
                "Requests in flight at each level, time-weighted over its wall time (from the requests' send and end "
                "times; a closed loop keeps C in flight until its last requests drain). A level below "
                f"{_margin_text()} of its C is marked 'short' (in brackets its share of C): its figures are those of "
                "the load it achieved, not of C. "
                + (f"{short} level(s) fell short." if short else "Every level kept at least that share.")
            ],
            table,
        )
    ]
