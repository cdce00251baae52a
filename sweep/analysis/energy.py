"""Energy per output token and output tokens per second per kW, per (point, level), where the hosts
measured the GPUs' power (the ``levels`` table's ``power_*`` and ``energy_*`` columns, written by
sweep/bench/power.py: NVML on GPU hosts, the fake's stand-in in dry runs, null elsewhere).

Read at real speed (:mod:`sweep.analysis.realspeed`: a dry run's energy is scaled as a time, its
watts are left alone). ``tok_s_kw`` is the level's output throughput over its mean draw in kW, so
``tok_s_kw`` = 1000 / ``j_per_token``: the same figure, the one per megawatt quoted for fleets
1000 times the one here. Power is summed over the GPUs the server uses (tp x pp x dp from its flags,
on each host it spans: sweep/bench/power.py ``only``), ``power_gpus`` of them; results measured
before that summed every GPU of the host (``other_gpus`` names the points whose count differs).
"""

from __future__ import annotations

import polars as pl

from sweep.analysis import realspeed
from sweep.analysis.frames import Tables, configurations
from sweep.analysis.slo import gpus_frame

NO_POWER = "no power source on these hosts (CPU or no NVML): energy columns are null"
SCHEMA = {
    "point_id": pl.String,
    "concurrency": pl.Int64,
    "power_mean_w": pl.Float64,
    "power_peak_w": pl.Float64,
    "j_per_token": pl.Float64,
    "tok_s_kw": pl.Float64,
    "power_gpus": pl.Int64,
}
_READ = {
    "power_mean_w": pl.Float64,
    "power_peak_w": pl.Float64,
    "energy_per_token_j": pl.Float64,
    "output_throughput": pl.Float64,
    "power_gpus": pl.Int64,
}


def level_energy(tables: Tables) -> pl.DataFrame:
    """One row per (point, level): its mean and peak watts, J per output token, output tok/s per kW
    and the GPUs summed (nulls where the level has no power figures)."""
    levels = realspeed.scaled(tables)["levels"]
    names = set(levels.collect_schema().names())
    cols = [(pl.col(c) if c in names else pl.lit(None)).cast(t).alias(c) for c, t in _READ.items()]
    frame = (
        levels.select("point_id", pl.col("concurrency").cast(pl.Int64), *cols)
        .collect()
        .unique(["point_id", "concurrency"], keep="last", maintain_order=True)
    )
    kw = pl.col("power_mean_w") / 1000.0
    return frame.select(
        "point_id",
        "concurrency",
        "power_mean_w",
        "power_peak_w",
        j_per_token="energy_per_token_j",
        tok_s_kw=pl.when(kw > 0).then(pl.col("output_throughput") / kw),
        power_gpus="power_gpus",
    ).cast(pl.Schema(SCHEMA))


def measured(frame: pl.DataFrame) -> bool:
    """Whether any level of ``frame`` (``level_energy``'s, or one with its columns) has a power figure."""
    return "power_mean_w" in frame.columns and frame.height > 0 and frame["power_mean_w"].is_not_null().any()


def other_gpus(tables: Tables, energy: pl.DataFrame) -> pl.DataFrame:
    """The points whose power was summed over another number of GPUs than the server uses (results
    measured before power was read on the server's GPUs only: a TP=4 server's energy over the host's
    8): label, power_gpus, gpus. Empty where every count agrees or none is known."""
    schema = {"label": pl.String, "power_gpus": pl.Int64, "gpus": pl.Int64}
    if not measured(energy):
        return pl.DataFrame(schema=schema)
    used = gpus_frame(tables).filter((pl.col("per") == "GPU") & (pl.col("gpus_from") == "argv"))
    summed = energy.filter(pl.col("power_gpus").is_not_null()).group_by("point_id").agg(pl.col("power_gpus").max())
    names = configurations(tables).select("point_id", "label")
    return (
        summed.join(used, on="point_id", how="inner")
        .filter(pl.col("power_gpus") != pl.col("gpus"))
        .join(names, on="point_id", how="left")
        .select("label", "power_gpus", pl.col("gpus").cast(pl.Int64))
        .sort("label")
        .cast(pl.Schema(schema))
    )
