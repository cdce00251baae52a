"""A dry run's figures at the speed of the system the fake models.

The fake server serves ``dry_run.fake_speed`` times faster than the real 8-GPU host it models (so a
dry run of the reference experiment takes minutes, not hours). Every time it measured is that many
times shorter and every rate that many times higher; dividing them back gives what the real system
would show (the baseline at about 63 tok/s with default NCCL, not 313). The report, the plots,
``sweep query`` (its tables and its views) and the analysis functions read the tables through
:func:`at_real_speed`, so that every output of a dry run is in one unit. A dry run writes its files
at real speed already (sweep/results/speed.py: DuckDB on the files reads the figures ``sweep query``
gives, under the same names); a directory written before holds what the fake measured, and is scaled
here as it is read. Each scaled column keeps what was measured beside it as ``<column>_measured``,
and the points table says what was divided out per point in ``fake_speed_divided``; scaling tables
already scaled is a no-op. Startup phases are not scaled: the fake compresses its startup by
``fake_startup_speed`` on top of a real process launch, so no one factor gives the real figure back.

Scaled per point, by the ``fake_speed`` in its own ``bench_scale`` (1, i.e. untouched, for points
measured on a real server). Counts (tokens, requests, concurrency) and ratios (speedups, accept
lengths, cache hit rates) do not depend on the speed and are left alone, and so is power: the fake's
GPUs draw what the real ones would (its forwards and the gaps between them shrink together), while
energy, watts times seconds, is scaled as a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from sweep.analysis.frames import Tables, points_frame
from sweep.results import FAKE_SPEED_DIVIDED, MEASURED, SCALED_RATES, SCALED_TIME_LISTS, SCALED_TIMES

# per table: columns in seconds (multiplied by the speed) and in per-second rates (divided by it): the
# results' column reference (sweep/results/schema.py), by which a dry run now writes its tables
_TIMES = SCALED_TIMES
RATES = SCALED_RATES
_TIME_LISTS = SCALED_TIME_LISTS
_MEASURED = MEASURED  # suffix of the column that keeps a scaled column's measured values
_DIVIDED = FAKE_SPEED_DIVIDED  # points column: the factor divided out of each point (1: none)


@dataclass(frozen=True)
class Speed:
    """How a results directory's figures were scaled back: the fake's speed factor (1.0: none, a
    real run) and how many points were scaled."""

    factor: float = 1.0
    points: int = 0

    @property
    def scaled(self) -> bool:
        return self.factor != 1.0 and self.points > 0

    def note(self) -> str:
        return (
            (
                f"DRY RUN at {self.factor:g}x: the fake served {self.factor:g} times faster than the real system "
                f"it models; every benchmark time and rate below is divided back by {self.factor:g} (real "
                "speed). Startup times are the fake's own (its startup is compressed separately). What the fake "
                f"measured is beside each figure (`sweep query`, the Parquet files: the *{_MEASURED} columns)."
            )
            if self.scaled
            else ""
        )

    def query_note(self) -> str:
        """What ``sweep query`` says (on stderr) about a dry run's figures."""
        return (
            (
                f"DRY RUN at {self.factor:g}x: times and rates in these tables and views are at real speed (the "
                f"fake's divided back by {self.factor:g}, as in the report); what the fake measured is in the "
                f"*{_MEASURED} columns of single_stream, levels and requests."
            )
            if self.scaled
            else ""
        )


def _all_divided(tables: Tables) -> bool:
    """Whether every point's figures are at real speed already: written so (a dry run since its files
    hold real speed) or scaled here (``at_real_speed`` fills the column)."""
    points = tables["points"]
    if _DIVIDED not in points.collect_schema().names():
        return False
    return not points.select(pl.col(_DIVIDED).is_null().any()).collect().item()


def speeds(tables: Tables) -> pl.DataFrame:
    """``point_id, speed`` of every point that ran on the fake at a speed other than 1 and whose
    figures are still as measured (a dry run's written before its files held real speed)."""
    empty = pl.DataFrame(schema={"point_id": pl.String, "speed": pl.Float64})
    if _all_divided(tables):
        return empty
    pts = points_frame(tables)
    if not pts.height or "bench_scale" not in pts.columns:
        return empty
    divided = pts[_DIVIDED].to_list() if _DIVIDED in pts.columns else [None] * pts.height
    rows = []
    for pid, scale, done in zip(pts["point_id"].to_list(), pts["bench_scale"].to_list(), divided):
        value = (scale or {}).get("fake_speed") if isinstance(scale, dict) else None
        if done is None and isinstance(value, (int, float)) and value > 0 and value != 1:
            rows.append({"point_id": pid, "speed": float(value)})
    return pl.DataFrame(rows, schema={"point_id": pl.String, "speed": pl.Float64}) if rows else empty


def _speed(factors: list[float], points: int) -> Speed:
    factors = sorted(set(factors))
    return Speed(factors[0] if len(factors) == 1 else max(factors), points) if factors else Speed()


def _divided(points: pl.LazyFrame) -> Speed:
    done = points.select(_DIVIDED).collect()[_DIVIDED].drop_nulls()
    done = done.filter(done != 1.0)
    return _speed(done.to_list(), done.len())


def scaled(tables: Tables) -> dict[str, pl.LazyFrame]:
    """``tables`` at real speed, for a caller that needs only the tables: those already at real speed
    come back at once, anything else through :func:`at_real_speed`."""
    if _all_divided(tables):
        return dict(tables)
    return at_real_speed(tables)[0]


def at_real_speed(tables: Tables) -> tuple[dict[str, pl.LazyFrame], Speed]:
    """``tables`` with each dry-run point's times and rates at real speed (the measured values
    beside as ``<column>_measured``), and how. A point written at real speed (its
    ``fake_speed_divided`` set) is as it is; one of a dry run written before is scaled here; tables
    already at real speed come back as they are, with the same ``Speed``."""
    out = dict(tables)
    if _all_divided(tables):
        return out, _divided(tables["points"])
    per_point = speeds(tables)
    if not per_point.height:
        has = _DIVIDED in tables["points"].collect_schema().names()
        return out, (_divided(tables["points"]) if has else Speed())
    lazy = per_point.lazy()
    for table in _TIMES:
        if table not in out:
            continue
        names = set(out[table].collect_schema().names())
        k = pl.col("__speed").fill_null(1.0)
        times = [c for c in _TIMES[table] + _TIME_LISTS.get(table, ()) if c in names]
        rates = [c for c in RATES[table] if c in names]
        # what was measured: the column beside where a point was written at real speed, else the column
        kept = [
            (pl.coalesce(pl.col(c + _MEASURED), pl.col(c)) if c + _MEASURED in names else pl.col(c)).alias(
                c + _MEASURED
            )
            for c in times + rates
        ]
        exprs = [pl.col(c) * k for c in times] + [pl.col(c) / k for c in rates]
        frame = out[table].join(lazy.rename({"speed": "__speed"}), on="point_id", how="left", maintain_order="left")
        frame = frame.with_columns(kept).with_columns(exprs)
        out[table] = frame.drop("__speed")
    points = out["points"].join(lazy.rename({"speed": "__div"}), on="point_id", how="left", maintain_order="left")
    had = _DIVIDED in points.collect_schema().names()
    out["points"] = points.with_columns(
        pl.coalesce(*([pl.col(_DIVIDED)] if had else []), pl.col("__div"), pl.lit(1.0)).alias(_DIVIDED)
    ).drop("__div")
    return out, _divided(out["points"])
