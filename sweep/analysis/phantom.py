"""Phantom speedups: a drafter that looks good on the benchmark's built-in prompts and accepts less
on the user's own traffic. Pure (the tables in, a frame out).

Where a results directory holds a drafter configuration measured both on the user's workload
(``benchmark.workload``: ShareGPT, a trace, synthetic lengths, a prompt file of their own) and on a
built-in prompt set (``coding``, ``encyclopedic``), its acceptance on each (tokens per verify step)
is compared: the ratio of the user's to the built-in's mean accept length, with its percentile
bootstrap interval over the requests' accept lengths (each request's ``spec_accept_length``; where
the requests carry none, the levels' figures, one per level). Below beyond noise (the interval's top
under 1) is a phantom speedup: the report flags it with both figures and what it does to the
speedup (single stream, and output throughput at the highest level both measured, each against the
baseline on the same workload).
"""

from __future__ import annotations

import polars as pl

from sweep.analysis import noise, workloads
from sweep.analysis.frames import Tables

BUILTIN_PROMPTS = ("coding", "encyclopedic")  # sweep/bench/prompts.py BUILTIN (a test keeps them equal)

SCHEMA = {
    "configuration": pl.String,
    "user_workload": pl.String,
    "builtin_workload": pl.String,
    "user_point_id": pl.String,
    "builtin_point_id": pl.String,
    "user_label": pl.String,
    "user_accept": pl.Float64,
    "builtin_accept": pl.Float64,
    "accept_ratio": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "below": pl.Boolean,
    "user_speedup": pl.Float64,
    "builtin_speedup": pl.Float64,
    "user_throughput_ratio": pl.Float64,
    "builtin_throughput_ratio": pl.Float64,
    "user_concurrency": pl.Int64,
    "builtin_concurrency": pl.Int64,
}


def is_builtin(name: str | None) -> bool:
    """A built-in prompt set's name, as the requests record it (``coding``; a user's file is a path)."""
    return name is not None and name in BUILTIN_PROMPTS


def _user_workloads(tables: Tables) -> set[str]:
    """The workloads (as the requests name them) that are not a built-in prompt set."""
    return {w for w in workloads.point_workloads(tables).values() if not is_builtin(w)}


def _samples(tables: Tables) -> pl.LazyFrame:
    """Accept lengths keyed by point id: each ok request's where recorded, else each level's."""
    req = tables.get("requests")
    parts = []
    if req is not None and "accept_length" in req.collect_schema().names():
        parts.append(
            req.filter(
                pl.col("ok").fill_null(False) & (pl.col("phase") != "warmup") & pl.col("accept_length").is_not_null()
            ).select(key="point_id", value=pl.col("accept_length").cast(pl.Float64))
        )
    have = set(pl.concat([p.select("key") for p in parts]).unique().collect()["key"].to_list()) if parts else set()
    levels = tables.get("levels")
    if levels is not None:
        cols = [c for c in workloads.SERVER_FIRST if c in levels.collect_schema().names()]
        if cols:
            parts.append(
                levels.select(key="point_id", value=pl.coalesce(cols).cast(pl.Float64)).filter(
                    pl.col("value").is_not_null() & ~pl.col("key").is_in(list(have))
                )
            )
    if not parts:
        return pl.LazyFrame(schema={"key": pl.String, "value": pl.Float64})
    return pl.concat(parts)


def phantoms(
    tables: Tables, single: pl.DataFrame, levels: pl.DataFrame, *, confidence: float = 0.95, seed: int = 0
) -> pl.DataFrame:
    """One row per (configuration, user's workload, built-in prompt set) it was measured on
    (``SCHEMA``); ``below``: its acceptance on the user's workload is below the built-in's beyond noise.
    ``single``/``levels``: ``speedups.speedup_table`` and ``level_speedups`` of the same tables."""
    frame = workloads.by_workload(tables, single, levels)
    if not frame.height:
        return pl.DataFrame(schema=SCHEMA)
    named = {workloads.short(w): w for w in workloads.point_workloads(tables).values()}
    rows = []
    for (config,), g in frame.group_by("configuration", maintain_order=True):
        mine = [r for r in g.iter_rows(named=True) if not is_builtin(named.get(r["workload"], r["workload"]))]
        theirs = [r for r in g.iter_rows(named=True) if is_builtin(named.get(r["workload"], r["workload"]))]
        for u in mine:
            for b in theirs:
                if u["accept_length"] is None or b["accept_length"] is None:
                    continue
                rows.append(
                    {
                        "configuration": config,
                        "user_workload": u["workload"],
                        "builtin_workload": b["workload"],
                        "user_point_id": u["point_id"],
                        "builtin_point_id": b["point_id"],
                        "user_label": u["label"],
                        "user_accept": u["accept_length"],
                        "builtin_accept": b["accept_length"],
                        "user_speedup": u["speedup"],
                        "builtin_speedup": b["speedup"],
                        "user_throughput_ratio": u["throughput_ratio"],
                        "builtin_throughput_ratio": b["throughput_ratio"],
                        "user_concurrency": u["concurrency"],
                        "builtin_concurrency": b["concurrency"],
                    }
                )
    if not rows:
        return pl.DataFrame(schema=SCHEMA)
    out = pl.DataFrame(
        rows, schema={k: v for k, v in SCHEMA.items() if k not in ("accept_ratio", "ci_low", "ci_high", "below")}
    )
    pairs = out.select(key="user_point_id", base_key="builtin_point_id")
    cis = noise.ratio_intervals(pairs, _samples(tables), stat="mean", confidence=confidence, seed=seed)
    out = out.with_columns(
        accept_ratio=pl.col("user_accept") / pl.col("builtin_accept"), ci_low=cis["ci_low"], ci_high=cis["ci_high"]
    )
    return out.with_columns(
        below=pl.when(pl.col("ci_high").is_not_null()).then(pl.col("ci_high") < 1).otherwise(False)
    ).select(list(SCHEMA))


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def lines(frame: pl.DataFrame) -> list[str]:
    """One sentence per phantom speedup (``below``): both accept lengths, the ratio with its interval,
    and the speedups on each workload."""
    out = []
    for r in frame.filter(pl.col("below")).iter_rows(named=True):
        interval = "" if r["ci_low"] is None else f", 95% interval {_x(r['ci_low'])} .. {_x(r['ci_high'])}"
        speed = [
            f"single-stream speedup {_x(r['user_speedup'])} on it against {_x(r['builtin_speedup'])} on "
            f"{r['builtin_workload']}"
        ]
        if r["user_throughput_ratio"] is not None and r["builtin_throughput_ratio"] is not None:
            speed.append(
                f"{_x(r['user_throughput_ratio'])} at C={r['user_concurrency']} against "
                f"{_x(r['builtin_throughput_ratio'])} at C={r['builtin_concurrency']}"
            )
        out.append(
            f"phantom speedup: {r['configuration']} accepts {r['user_accept']:.2f} tokens per verify on the "
            f"user's workload {r['user_workload']} against {r['builtin_accept']:.2f} on the built-in "
            f"{r['builtin_workload']} ({_x(r['accept_ratio'])}{interval}, below beyond noise): "
            + "; ".join(speed)
            + "."
        )
    return out
