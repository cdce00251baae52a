"""A dry run's figures at the speed of the system the fake models.

The fake server serves ``dry_run.fake_speed`` times faster than the real 8-GPU host it models (so a
dry run of the reference experiment takes minutes, not hours). Every time it measured is that many
times shorter and every rate that many times higher; dividing them back gives what the real system
would show (the baseline at about 63 tok/s with default NCCL, not 313). The report, the plots,
``sweep query`` (its tables and its views) and the analysis functions read the tables through
:func:`at_real_speed`, so that every output of a dry run is in one unit. Each scaled column keeps
what was measured beside it as ``<column>_measured`` (the Parquet files keep only that), and the
points table says what was divided out per point in ``fake_speed_divided``; scaling tables already
scaled is a no-op. Startup phases are not scaled: the fake compresses its startup by
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

# per table: columns in seconds (multiplied by the speed) and in per-second rates (divided by it)
_TIMES = {
    "single_stream": ("latency_s", "ttft_s"),
    "levels": (
        "wall_s",
        "latency_mean_s",
        "latency_p50_s",
        "latency_p90_s",
        "latency_p99_s",
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "itl_p50_s",
        "itl_p99_s",
        "energy_j",
        "energy_per_token_j",  # watts x seconds: the fake's watts are real, its seconds not
        "wait_mean_s",
        "wait_max_s",
    ),
    "requests": ("ttft_s", "latency_s", "tpot_s", "itl_p50_s", "itl_p99_s", "wait_s"),
}
RATES = {
    "single_stream": ("tok_per_s",),
    "levels": (
        "output_throughput",
        "request_throughput",
        "per_request_tok_s",
        "steady_throughput",
        "metrics_gen_throughput",
        "offered_rate",
        "arrival_rate",
        "achieved_rate",
    ),  # an open-loop level's (sweep/bench/openloop.py)
    "requests": ("offered_rate",),
}
_TIME_LISTS = {"requests": ("chunk_times_s",)}
_MEASURED = "_measured"  # suffix of the column that keeps a scaled column's measured values
_DIVIDED = "fake_speed_divided"  # points column: the factor divided out of each point (1: none)


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
                "speed). Startup times are the fake's own (its startup is compressed separately). The Parquet "
                f"files keep what was measured (`sweep query`: the *{_MEASURED} columns)."
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


def speeds(tables: Tables) -> pl.DataFrame:
    """``point_id, speed`` of every point that ran on the fake at a speed other than 1 (none when the
    tables are already at real speed)."""
    if _DIVIDED in tables["points"].collect_schema().names():
        return pl.DataFrame(schema={"point_id": pl.String, "speed": pl.Float64})
    pts = points_frame(tables)
    if not pts.height or "bench_scale" not in pts.columns:
        return pl.DataFrame(schema={"point_id": pl.String, "speed": pl.Float64})
    rows = []
    for pid, scale in zip(pts["point_id"].to_list(), pts["bench_scale"].to_list()):
        value = (scale or {}).get("fake_speed") if isinstance(scale, dict) else None
        if isinstance(value, (int, float)) and value > 0 and value != 1:
            rows.append({"point_id": pid, "speed": float(value)})
    return pl.DataFrame(rows, schema={"point_id": pl.String, "speed": pl.Float64})


def _speed(factors: list[float], points: int) -> Speed:
    factors = sorted(set(factors))
    return Speed(factors[0] if len(factors) == 1 else max(factors), points) if factors else Speed()


def scaled(tables: Tables) -> dict[str, pl.LazyFrame]:
    """``tables`` at real speed, for a caller that needs only the tables: those already scaled come
    back at once (no read of the points to say how), anything else through :func:`at_real_speed`."""
    if _DIVIDED in tables["points"].collect_schema().names():
        return dict(tables)
    return at_real_speed(tables)[0]


def at_real_speed(tables: Tables) -> tuple[dict[str, pl.LazyFrame], Speed]:
    """``tables`` with each dry-run point's times and rates scaled back to real speed (the measured
    values kept as ``<column>_measured``), and how. Tables already at real speed come back as they are,
    with the same ``Speed``."""
    out = dict(tables)
    if _DIVIDED in tables["points"].collect_schema().names():  # scaled already
        done = tables["points"].select(_DIVIDED).collect()[_DIVIDED].drop_nulls()
        done = done.filter(done != 1.0)
        return out, _speed(done.to_list(), done.len())
    per_point = speeds(tables)
    if not per_point.height:
        return out, Speed()
    lazy = per_point.lazy()
    for table in _TIMES:
        if table not in out:
            continue
        names = set(out[table].collect_schema().names())
        k = pl.col("__speed").fill_null(1.0)
        times = [c for c in _TIMES[table] + _TIME_LISTS.get(table, ()) if c in names]
        rates = [c for c in RATES[table] if c in names]
        kept = [pl.col(c).alias(c + _MEASURED) for c in times + rates]
        exprs = [pl.col(c) * k for c in times] + [pl.col(c) / k for c in rates]
        frame = out[table].join(lazy.rename({"speed": "__speed"}), on="point_id", how="left", maintain_order="left")
        frame = frame.with_columns(kept).with_columns(exprs)
        out[table] = frame.drop("__speed")
    out["points"] = (
        out["points"]
        .join(lazy.rename({"speed": _DIVIDED}), on="point_id", how="left", maintain_order="left")
        .with_columns(pl.col(_DIVIDED).fill_null(1.0))
    )
    return out, _speed(per_point["speed"].to_list(), per_point.height)
