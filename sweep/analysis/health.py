"""The report's building blocks about the sweep itself: what ran, where startup time goes, what
failed and why, and what the plan warned about. Each returns a polars DataFrame (or a dict)."""

from __future__ import annotations

import json
from typing import TypedDict

import polars as pl

from sweep.analysis.frames import Tables, configurations, points_frame

PHASES = ["load_s", "kv_cache_s", "capture_s", "draft_capture_s", "http_s", "ready_s"]


def startup_phases(tables: Tables) -> pl.DataFrame:
    """Startup time of each point, split by phase (seconds).

    Columns: point_id, label, status, baseline, the phases of ``PHASES``, other_s (startup_s
    minus the phases recorded: launch overhead and gaps between phases) and startup_s. A point
    that died during startup has the phases it reached and a null startup_s.
    """
    conf = configurations(tables).select("point_id", "label", "status", "baseline", "order")
    times = points_frame(tables).select("point_id", *PHASES, "startup_s")
    return (
        conf.join(times, on="point_id", how="left")
        .with_columns(other_s=(pl.col("startup_s") - pl.sum_horizontal(PHASES)).clip(lower_bound=0))
        .sort("order")
        .select("point_id", "label", "status", "baseline", *PHASES, "other_s", "startup_s")
    )


def failures(tables: Tables) -> pl.DataFrame:
    """Failed and invalid points: where they failed and why.

    Columns: point_id, label, status, failure_phase, failure_reason, failure_fix (how to fix it,
    where the sweep knows), errors (the plan's errors of an invalid point, joined), attempts,
    log_tail (the last lines of the server log).
    """
    conf = configurations(tables).select("point_id", "order")
    points = points_frame(tables).filter(pl.col("status").is_in(["failed", "invalid"]))
    return (
        points.join(conf, on="point_id", how="left")
        .sort("order")
        .select(
            "point_id",
            "label",
            "status",
            "failure_phase",
            "failure_reason",
            "failure_fix",
            errors=pl.col("errors").list.join("; "),
            attempts="attempts",
            log_tail="log_tail",
        )
    )


def pruned(tables: Tables) -> pl.DataFrame:
    """Points the adaptive search did not run, and why (what was measured and predicted instead).

    Columns: point_id, label, reason, fix (how to measure it anyway)."""
    conf = configurations(tables).select("point_id", "order")
    points = points_frame(tables).filter(pl.col("status") == "pruned")
    return (
        points.join(conf, on="point_id", how="left")
        .sort("order")
        .select("point_id", "label", reason="failure_reason", fix="failure_fix")
    )


def request_failures(tables: Tables) -> pl.DataFrame:
    """Points whose benchmark lost requests: failed single-stream runs and level requests.

    Columns: point_id, label, failed_single, failed_levels, first_error (the most frequent error
    text), error_count.
    """
    counts = (
        tables["requests"]
        .filter(~pl.col("ok").fill_null(False) & (pl.col("phase") != "warmup"))
        .group_by("point_id", error=pl.col("error").fill_null("unknown"))
        .agg(
            n=pl.len().cast(pl.Int64),
            single=(pl.col("phase") == "single").sum().cast(pl.Int64),
            level=(pl.col("phase") == "level").sum().cast(pl.Int64),
        )
        .collect()
    )
    per_point = (
        counts.sort(["point_id", "n", "error"], descending=[False, True, False])
        .group_by("point_id", maintain_order=True)
        .agg(
            failed_single=pl.col("single").sum(),
            failed_levels=pl.col("level").sum(),
            first_error=pl.col("error").first(),
            error_count=pl.col("n").first(),
        )
    )
    conf = configurations(tables).select("point_id", "label", "order")
    return (
        per_point.join(conf, on="point_id", how="left")
        .sort("order", nulls_last=True)
        .select("point_id", "label", "failed_single", "failed_levels", "first_error", "error_count")
    )


def plan_warnings(tables: Tables) -> pl.DataFrame:
    """Each distinct plan warning with the points it applies to (columns: warning, points, labels)."""
    return (
        points_frame(tables)
        .select("label", "warnings")
        .explode("warnings")
        .filter(pl.col("warnings").is_not_null())
        .group_by("warnings", maintain_order=True)
        .agg(points=pl.len().cast(pl.Int64), labels=pl.col("label").sort().str.join(", "))
        .rename({"warnings": "warning"})
    )


def _distinct(points: pl.DataFrame, column: str) -> list:
    return sorted(v for v in points[column].unique().to_list() if v not in (None, ""))


_NEVER_RAN = ("pruned", "invalid")  # statuses of points that never reached a host


class SweepSummary(TypedDict):
    """The report's header facts (:func:`sweep_summary`); a dict, its keys typed."""

    experiments: list[str]
    points: int
    baselines: int
    status: dict[str, int]  # status -> points
    dry_run: bool
    bench_scale: list[str]  # each distinct benchmark scaling, as JSON
    sglang_versions: list[str]  # of the points that ran
    gpus: list[str]
    hosts: list[str]
    levels: list[int]  # the concurrency levels measured
    started_at: float | None
    ended_at: float | None


def sweep_summary(tables: Tables) -> SweepSummary:
    """Facts for the report's header: experiment, point counts, dry run and benchmark scaling,
    SGLang versions, GPUs, hosts, and the time span covered."""
    points = points_frame(tables)
    statuses = dict(points.group_by("status").len().iter_rows()) if points.height else {}
    scales = sorted(
        {
            json.dumps({k: v for k, v in scale.items() if v is not None})
            for scale in points["bench_scale"].to_list()
            if scale
        }
    )
    levels = tables["levels"].select(pl.col("concurrency").unique().sort()).collect()["concurrency"]
    span = points.select(pl.col("started_at").min(), pl.col("ended_at").max()).row(0) if points.height else (None, None)
    ran = points.filter(~pl.col("status").is_in(_NEVER_RAN)) if points.height else points
    return SweepSummary(
        experiments=_distinct(points, "experiment"),
        points=points.height,
        baselines=int(points["baseline"].fill_null(False).sum()) if points.height else 0,
        status=statuses,
        dry_run=bool(points["dry_run"].fill_null(False).any()) if points.height else False,
        bench_scale=scales,
        # of the points that ran: a pruned one never reached a host (its row says SGLang "unknown", no GPU)
        sglang_versions=_distinct(ran, "sglang_version"),
        gpus=_distinct(ran, "gpu_name"),
        hosts=_distinct(ran, "host"),
        levels=levels.to_list(),
        started_at=span[0],
        ended_at=span[1],
    )
