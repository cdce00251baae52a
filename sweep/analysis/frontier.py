"""The throughput-interactivity frontier: what a server can give each user, and how much it serves.

Every (configuration, concurrency level) is one point: its **per-user speed** (x: the mean over
the level's ok requests of output tokens / latency, TTFT included: what one user sees) against its
**output tokens per second per GPU** (y: the level's output throughput, completion tokens only,
prompt tokens not counted, divided by the GPUs the server uses: tp x pp (x dp for data-parallel
replicas) from its flags, over every host it spans (``ServerFlags.gpus`` of the points table's
``flags``: ``slo.gpus_frame``; the host's ``gpu_count`` only where they name no size, marked
``gpus_from="host"``); a point with 0 GPUs, a CPU host,
is counted per host, over the hosts it spans, and marked so). A point is on the
Pareto frontier when no other point of its panel is at least as fast per user *and* serves more
tokens per GPU. Read along the frontier, it says which configuration to run for each per-user
speed one wants (InferenceMAX's "throughput per GPU against interactivity").

Where the hosts measured power, each point also carries its output tokens per second per kW and
its joules per output token (:mod:`sweep.analysis.energy`; null otherwise).

Panels: one per NCCL profile by default, or per value of any grid axis (``by="drafter"``), or one
for everything (``by="all"``).
"""

from __future__ import annotations

import polars as pl

from sweep.analysis.energy import level_energy
from sweep.analysis.frames import Tables, configurations, natural_key
from sweep.analysis.slo import gpus_frame
from sweep.core import ConfigError

ALL = ("all", "none", "")


def panel_column(tables: Tables, by: str | None) -> pl.Expr:
    """The expression naming each point's panel (see the module docstring)."""
    if by is None or by == "profile":
        return pl.col("profile")
    if by.lower() in ALL:
        return pl.lit("")
    axes = [c.removeprefix("axis_") for c in configurations(tables).columns if c.startswith("axis_")]
    if by not in axes:
        raise ConfigError(
            f"--frontier-by {by!r} is not an axis of this sweep",
            fix=f"use one of {', '.join(axes) or '(no axes)'}, or 'all' for one panel",
        )
    col = pl.col(f"axis_{by}").cast(pl.String)  # a numeric axis is stored as numbers
    return pl.when(col.is_null()).then(pl.lit(f"{by}=(none)")).otherwise(pl.lit(f"{by}=") + col)


def frontier_table(tables: Tables, levels: pl.DataFrame, *, by: str | None = None) -> pl.DataFrame:
    """Every measured (point, level) with its panel, per-user speed, tok/s per GPU and whether it
    is on its panel's frontier.

    ``levels`` is ``speedups.level_speedups(tables)``. Columns: panel, point_id, label, config,
    baseline, drafter, spec, profile, group, order, concurrency, user_tok_s, tok_s_gpu, per
    ("GPU" or "host"), gpus (the divisor), gpus_from ("argv", or "host": the argv named no size),
    on_frontier, frontier_rank (1 = the fastest per user on the frontier), tok_s_kw and j_per_token
    (null without power figures).
    """
    schema = {
        "panel": pl.String,
        "point_id": pl.String,
        "label": pl.String,
        "config": pl.String,
        "baseline": pl.Boolean,
        "drafter": pl.String,
        "spec": pl.String,
        "profile": pl.String,
        "group": pl.String,
        "order": pl.Int64,
        "concurrency": pl.Int64,
        "user_tok_s": pl.Float64,
        "tok_s_gpu": pl.Float64,
        "per": pl.String,
        "gpus": pl.Float64,
        "gpus_from": pl.String,
        "on_frontier": pl.Boolean,
        "frontier_rank": pl.Int64,
        "tok_s_kw": pl.Float64,
        "j_per_token": pl.Float64,
    }
    data = levels.filter(pl.col("output_throughput").is_not_null() & pl.col("per_request_tok_s").is_not_null())
    if data.is_empty():
        return pl.DataFrame(schema=schema)
    panels = configurations(tables).select("point_id", panel=panel_column(tables, by))
    energy = level_energy(tables).select("point_id", "concurrency", "tok_s_kw", "j_per_token")
    frame = (
        data.join(panels, on="point_id", how="left")
        .join(gpus_frame(tables), on="point_id", how="left")
        .with_columns(
            concurrency=pl.col("concurrency").cast(pl.Int64),
            user_tok_s=pl.col("per_request_tok_s"),
            tok_s_gpu=pl.col("output_throughput") / pl.col("gpus").fill_null(1.0),
            per=pl.col("per").fill_null("host"),
            gpus=pl.col("gpus").fill_null(1.0),
            gpus_from=pl.col("gpus_from").fill_null("host"),
            panel=pl.col("panel").fill_null(""),
        )
    )
    frame = frame.join(energy, on=["point_id", "concurrency"], how="left")
    # Pareto: walking from the fastest per user down, a point is on the frontier when it serves
    # more per GPU than every faster one (ties in speed: the one that serves more)
    frame = (
        frame.sort(["panel", "user_tok_s", "tok_s_gpu"], descending=[False, True, True])
        .with_columns(best_faster=pl.col("tok_s_gpu").cum_max().shift(1).over("panel"))
        .with_columns(on_frontier=pl.col("best_faster").is_null() | (pl.col("tok_s_gpu") > pl.col("best_faster")))
        .with_columns(
            frontier_rank=pl.when("on_frontier").then(pl.col("on_frontier").cast(pl.Int64).cum_sum().over("panel"))
        )
    )
    order = {p: i for i, p in enumerate(sorted(frame["panel"].unique().to_list(), key=natural_key))}
    return (
        frame.with_columns(_p=pl.col("panel").replace_strict(order, return_dtype=pl.Int64))
        .sort(["_p", "user_tok_s"], descending=[False, True])
        .select(list(schema))
    )


def frontier_only(frame: pl.DataFrame) -> pl.DataFrame:
    """The frontier points, per panel from the fastest per user to the one that serves most."""
    return frame.filter("on_frontier").sort(["panel", "frontier_rank"])


def frontier_spans(frame: pl.DataFrame) -> pl.DataFrame:
    """Along each panel's frontier, the runs of one configuration: panel, label, baseline, levels
    (first and last concurrency), user_tok_s_max / _min, tok_s_gpu_min / _max. The story in a few
    rows: which configuration owns which range of per-user speed."""
    f = frontier_only(frame)
    if f.is_empty():
        return pl.DataFrame(
            schema={
                "panel": pl.String,
                "label": pl.String,
                "baseline": pl.Boolean,
                "c_from": pl.Int64,
                "c_to": pl.Int64,
                "user_tok_s_max": pl.Float64,
                "user_tok_s_min": pl.Float64,
                "tok_s_gpu_min": pl.Float64,
                "tok_s_gpu_max": pl.Float64,
            }
        )
    f = f.with_columns(run=(pl.col("label") != pl.col("label").shift(1)).fill_null(True).cum_sum().over("panel"))
    return (
        f.group_by(["panel", "run"], maintain_order=True)
        .agg(
            label=pl.col("label").first(),
            baseline=pl.col("baseline").first(),
            c_from=pl.col("concurrency").first(),
            c_to=pl.col("concurrency").last(),
            user_tok_s_max=pl.col("user_tok_s").first(),
            user_tok_s_min=pl.col("user_tok_s").last(),
            tok_s_gpu_min=pl.col("tok_s_gpu").first(),
            tok_s_gpu_max=pl.col("tok_s_gpu").last(),
        )
        .drop("run")
    )
