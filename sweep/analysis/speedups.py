"""The report's building blocks about speed: each a function returning a polars DataFrame.

They take the tables of ``sweep.results.load(DIR)``. The level-based ones (``best_per_level``,
``crossover``, ``env_effect``) also accept the frame ``level_speedups`` returned, so that a caller
needing several of them reads the request table once.

A speedup is always against the baseline the plan matched the point with (``baseline_id``: same
model, tp and NCCL profile); ``baseline_label`` names it in every table. A dry run's tables are read
at real speed (``realspeed.scaled``; a no-op on tables already scaled), as the report reads them.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from sweep.analysis import noise, realspeed, repeats
from sweep.analysis.frames import Tables, configurations, natural_key, note_expr
from sweep.core import UnknownMetricError

_ID_COLUMNS = [
    "point_id",
    "label",
    "baseline",
    "baseline_label",
    "config",
    "profile",
    "group",
    "drafter",
    "spec",
    "workload",
    "setup",
    "order",
]
_LEVEL_METRICS = ("output_throughput", "per_request_tok_s")


def single_stream_summary(tables: Tables) -> pl.DataFrame:
    """Per point: ok runs, median/min/max tok/s, median accept length and TTFT over ok runs."""
    tables = realspeed.scaled(tables)
    ok = pl.col("ok").fill_null(False)
    return (
        tables["single_stream"]
        .group_by("point_id")
        .agg(
            runs=ok.sum().cast(pl.Int64),
            failed_runs=(~ok).sum().cast(pl.Int64),
            tok_s=pl.col("tok_per_s").filter(ok).median(),
            tok_s_min=pl.col("tok_per_s").filter(ok).min(),
            tok_s_max=pl.col("tok_per_s").filter(ok).max(),
            accept_length=pl.col("accept_length").filter(ok).median(),
            ttft_s=pl.col("ttft_s").filter(ok).median(),
        )
        .collect()
    )


def single_samples(tables: Tables) -> pl.LazyFrame:
    """Single-stream tok/s of each ok run, keyed by point id (the noise model's observations)."""
    return (
        realspeed.scaled(tables)["single_stream"]
        .filter(pl.col("ok").fill_null(False))
        .select(key="point_id", value="tok_per_s")
    )


def speedup_table(tables: Tables, *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> pl.DataFrame:
    """Single-stream tok/s of every point and its speedup over its matched baseline.

    One row per point (baselines included, with null speedup). ``speedup`` is the ratio of median
    tok/s over the runs; ``ci_low``/``ci_high`` its bootstrap interval (see ``noise``);
    ``verdict`` is faster | slower | within noise | no interval; ``note`` says why a speculative
    point has no speedup (point failed, baseline missing or failed, no runs yet).
    """
    tables = realspeed.scaled(tables)
    conf = configurations(tables).with_columns(note=note_expr())
    summary = single_stream_summary(tables)
    base = summary.select(baseline_id="point_id", baseline_tok_s="tok_s", baseline_runs="runs")
    frame = (
        conf.join(summary, on="point_id", how="left")
        .join(base, on="baseline_id", how="left")
        .with_columns(speedup=pl.when(~pl.col("baseline")).then(pl.col("tok_s") / pl.col("baseline_tok_s")))
    )
    pairs = frame.filter(pl.col("speedup").is_not_null()).select(key="point_id", base_key="baseline_id")
    cis = noise.ratio_intervals(
        pairs, single_samples(tables), stat="median", confidence=confidence, resamples=resamples, seed=seed
    )
    frame = (
        frame.join(cis.select(point_id="key", ci_low="ci_low", ci_high="ci_high"), on="point_id", how="left")
        .with_columns(within_noise=noise.within_noise(), verdict=noise.verdict("speedup"))
        .with_columns(
            note=pl.coalesce(
                "note",
                pl.when(~pl.col("baseline") & pl.col("speedup").is_null()).then(pl.lit("no single-stream runs yet")),
            )
        )
    )
    return frame.sort("order").select(
        *_ID_COLUMNS,
        "status",
        "baseline_id",
        "runs",
        "failed_runs",
        "tok_s",
        "tok_s_min",
        "tok_s_max",
        "baseline_tok_s",
        "baseline_runs",
        "speedup",
        "ci_low",
        "ci_high",
        "within_noise",
        "verdict",
        "accept_length",
        "ttft_s",
        "note",
    )


def fastest_single(
    single: pl.DataFrame,
    samples: pl.LazyFrame | None,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """The fastest point in single stream (baselines included; ``single`` is ``speedup_table``'s frame)
    against the next fastest, within each workload (``workload``; labels are the ``setup``, the label
    without the workload): at most one row per workload with workload, label, tok_s, runner_up, runner_up_tok_s, margin
    (tok_s / runner_up_tok_s - 1), margin_low / margin_high (its interval: the bootstrap of the two
    points' median tok/s over their runs, ``noise.ratio_intervals``) and margin_within_noise."""
    schema = {
        "workload": pl.String,
        "label": pl.String,
        "tok_s": pl.Float64,
        "runner_up": pl.String,
        "runner_up_tok_s": pl.Float64,
        "margin": pl.Float64,
        "margin_low": pl.Float64,
        "margin_high": pl.Float64,
        "margin_within_noise": pl.Boolean,
    }
    if "workload" in single.columns and single["workload"].n_unique() > 1:  # one race per workload
        return pl.concat(
            [
                fastest_single(g, samples, confidence=confidence, resamples=resamples, seed=seed)
                for _, g in single.sort("order").group_by("workload", maintain_order=True)
            ]
            + [pl.DataFrame(schema=schema)]
        )
    ranked = single.filter(pl.col("tok_s").is_not_null()).sort(["tok_s", "order"], descending=[True, False]).head(2)
    if ranked.height < 2:
        return pl.DataFrame(schema=schema)
    top, nxt = ranked.row(0, named=True), ranked.row(1, named=True)
    name = "setup" if "setup" in ranked.columns else "label"
    pair = pl.DataFrame({"key": [top["point_id"]], "base_key": [nxt["point_id"]]})
    ci = (
        noise.ratio_intervals(pair, samples, stat="median", confidence=confidence, resamples=resamples, seed=seed).row(
            0, named=True
        )
        if samples is not None
        else {"ci_low": None, "ci_high": None}
    )
    return (
        pl.DataFrame(
            [
                {
                    "workload": top.get("workload") or "",
                    "label": top[name],
                    "tok_s": top["tok_s"],
                    "runner_up": nxt[name],
                    "runner_up_tok_s": nxt["tok_s"],
                    "margin": top["tok_s"] / nxt["tok_s"] - 1,
                    "ci_low": ci["ci_low"],
                    "ci_high": ci["ci_high"],
                }
            ],
            schema_overrides={"ci_low": pl.Float64, "ci_high": pl.Float64},
        )
        .with_columns(
            margin_low=pl.col("ci_low") - 1, margin_high=pl.col("ci_high") - 1, margin_within_noise=noise.within_noise()
        )
        .select(list(schema))
    )


def level_samples(tables: Tables) -> pl.LazyFrame:
    """Per-request tok/s at each concurrency level, keyed "point_id@concurrency"."""
    return (
        realspeed.scaled(tables)["requests"]
        .filter((pl.col("phase") == "level") & pl.col("ok").fill_null(False) & (pl.col("latency_s") > 0))
        .select(
            key=pl.col("point_id") + "@" + pl.col("concurrency").cast(pl.String),
            value=pl.col("completion_tokens") / pl.col("latency_s"),
        )
    )


def measured_level_noise(tables: Tables) -> noise.MeasuredNoise | None:
    """The level-wide noise measured between repeats of the same levels (``repeats.repeat_noise``: the
    grid's ``benchmark.repeats``, decide's re-measurements), where there are enough of them; None
    otherwise (then every verdict takes the curves' own, ``noise.curve_noise``). Raw tables, before
    ``repeats.pooled``. Every judgement at a level takes its noise from here or from the curves: one
    rule, so that no two parts of a report judge one pair with two noises."""
    if not repeats.has_repeats(tables):
        return None
    measured, _ = repeats.repeat_noise(tables["levels"])
    return None if measured is None else noise.MeasuredNoise(measured)


def level_speedups(
    tables: Tables, *, level_noise: float | None = None, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> pl.DataFrame:
    """One row per (point, concurrency level): throughputs, the matched baseline's, and ratios.

    ``throughput_ratio`` compares output throughput (tok/s of the whole server) and
    ``per_request_ratio`` the mean per-request tok/s at the same concurrency. One metric per
    comparison: ``ci_low``/``ci_high``, ``within_noise`` and ``verdict`` are the throughput ratio's
    (every level comparison of the report, best per level and crossover included, is of throughput),
    ``per_request_ci_low``/``_high``, ``per_request_within_noise`` and ``per_request_verdict`` the
    per-request ratio's. The per-request interval comes from the level's request rows; a level has one
    throughput figure, so its ratio's interval is the per-request interval's relative width around
    the throughput ratio (the same requests' noise; it is centred on the throughput ratio, so a ratio
    above 1 is never called slower). Both intervals are then widened by the level-wide noise
    (``noise.judged``: ``level_noise``, by default ``noise.curve_noise`` of these levels, at least
    ``noise.LEVEL_NOISE_FLOOR``), so that a level's verdict is never made on its requests' spread alone.
    """
    if level_noise is None:  # measured between repeats where there are enough (read before pooling)
        level_noise = measured_level_noise(tables)
    tables = realspeed.scaled(repeats.pooled(tables))  # a level measured again by decide: one pooled row
    conf = configurations(tables).with_columns(note=note_expr())
    pooled = repeats.REPEATS in tables["levels"].collect_schema().names()
    levels = (
        tables["levels"]
        .select(
            "point_id",
            "concurrency",
            "requests",
            "failed",
            "output_throughput",
            "per_request_tok_s",
            "achieved_concurrency",
            "latency_p50_s",
            "ttft_p50_s",
            accept_length=pl.coalesce("accept_length_server", "accept_length_requests", "accept_length_metrics"),
            **({repeats.REPEATS: pl.col(repeats.REPEATS)} if pooled else {}),
        )
        .collect()
        .unique(["point_id", "concurrency"], keep="last")
    )
    base = levels.select(
        baseline_id="point_id",
        concurrency="concurrency",
        baseline_output_throughput="output_throughput",
        baseline_per_request_tok_s="per_request_tok_s",
        **({"baseline_repeats": pl.col(repeats.REPEATS)} if pooled else {}),
    )
    frame = (
        conf.join(levels, on="point_id", how="inner")
        .join(base, on=["baseline_id", "concurrency"], how="left")
        .with_columns(
            throughput_ratio=pl.col("output_throughput") / pl.col("baseline_output_throughput"),
            per_request_ratio=pl.col("per_request_tok_s") / pl.col("baseline_per_request_tok_s"),
            key=pl.col("point_id") + "@" + pl.col("concurrency").cast(pl.String),
            base_key=pl.col("baseline_id") + "@" + pl.col("concurrency").cast(pl.String),
        )
    )
    pairs = frame.filter(pl.col("per_request_ratio").is_not_null()).select("key", "base_key")
    cis = noise.ratio_intervals(
        pairs, level_samples(tables), stat="mean", confidence=confidence, resamples=resamples, seed=seed
    )
    if level_noise is None:
        level_noise = noise.curve_noise(frame)
    frame = frame.join(cis.select("key", "ci_low", "ci_high"), on="key", how="left")
    moved = frame.with_columns(
        [
            noise.moved(f"ci_{end}", "per_request_ratio", "throughput_ratio").alias(f"ci_{end}")
            for end in ("low", "high")
        ]
    )
    frame = (
        noise.judged(frame, "per_request_ratio", level_noise, confidence=confidence)
        .rename(
            {
                "ci_low": "per_request_ci_low",
                "ci_high": "per_request_ci_high",
                "within_noise": "per_request_within_noise",
                "verdict": "per_request_verdict",
            }
        )
        .with_columns(
            noise.judged(moved, "throughput_ratio", level_noise, confidence=confidence).select(
                "ci_low", "ci_high", "within_noise", "verdict"
            )
        )
    )
    # against its baseline: the one judgement of the pair at the level (judge_pairs), as every other
    # comparison of two configurations at a level reads it
    versus = frame.filter(
        (pl.col("point_id") != pl.col("baseline_id")) & pl.col("baseline_output_throughput").is_not_null()
    ).select("point_id", other_id="baseline_id", concurrency="concurrency")
    if versus.height:
        found = judge_pairs(
            levels, versus, level_samples(tables), level_noise, confidence=confidence, resamples=resamples, seed=seed
        ).select("point_id", "concurrency", _lo="ci_low", _hi="ci_high", _v="verdict")
        mine = pl.col("_v").is_not_null()
        frame = (
            frame.join(found, on=["point_id", "concurrency"], how="left")
            .with_columns(
                ci_low=pl.when(mine).then("_lo").otherwise("ci_low"),
                ci_high=pl.when(mine).then("_hi").otherwise("ci_high"),
            )
            .with_columns(
                within_noise=pl.when(mine).then(noise.within_noise()).otherwise("within_noise"),
                verdict=pl.when(mine).then(_old_spelling(pl.col("_v"))).otherwise("verdict"),
            )
            .drop("_lo", "_hi", "_v")
        )
    return frame.sort("order", "concurrency").select(
        *_ID_COLUMNS,
        "status",
        "baseline_id",
        "concurrency",
        "requests",
        "failed",
        "output_throughput",
        "per_request_tok_s",
        "baseline_output_throughput",
        "baseline_per_request_tok_s",
        "throughput_ratio",
        "per_request_ratio",
        "ci_low",
        "ci_high",
        "within_noise",
        "verdict",
        "per_request_ci_low",
        "per_request_ci_high",
        "per_request_within_noise",
        "per_request_verdict",
        "accept_length",
        "achieved_concurrency",
        "latency_p50_s",
        "ttft_p50_s",
        "note",
        *([repeats.REPEATS] if pooled else []),
    )


def _levels(source: Tables | pl.DataFrame) -> pl.DataFrame:
    return source if isinstance(source, pl.DataFrame) else level_speedups(source)


def _check_metric(metric: str) -> str:
    if metric not in _LEVEL_METRICS:
        raise UnknownMetricError(f"unknown level metric {metric!r}", fix=f"use one of {', '.join(_LEVEL_METRICS)}")
    return metric


def _ratio_of(metric: str) -> str:
    return "throughput_ratio" if metric == "output_throughput" else "per_request_ratio"


def _verdict_of(metric: str) -> str:
    """The verdict of ``metric``'s ratio: a ratio and its verdict are of the same figure."""
    return "verdict" if metric == "output_throughput" else "per_request_verdict"


def best_per_level(
    source: Tables | pl.DataFrame,
    *,
    metric: str = "output_throughput",
    by: list[str] | None = None,
    samples: pl.LazyFrame | None = None,
    level_noise: float | None = None,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """The best configuration (baselines included) at each concurrency level of each workload.

    Per workload (``workload``: the client-side benchmark axes as ``axis=value``, "" without any): two
    workloads are two traffic mixes on one server, never two setups to choose between, so each is
    ranked apart and ``label``/``runner_up`` name the setup (the point's label without the workload).
    Ranked by the metric itself (the absolute figure one deploys for), never by a ratio.
    Columns: [by...], workload, concurrency, label, baseline (is the winner a baseline), value (the metric),
    speedup (the winner's ratio of that metric to its own baseline's), verdict (of that same ratio),
    runner_up, runner_up_value, margin
    (value / runner_up_value - 1), configurations (how many were measured at that level),
    point_id, runner_up_id, margin_low / margin_high (the margin's interval: the interval of the
    winner's mean per-request tok/s over the runner-up's at that level, from the two levels' request
    rows (``noise.ratio_intervals``), for output throughput as a relative width around the throughput
    ratio, as the level speedups do, then widened by the level-wide noise of each of the two levels,
    ``level_noise``: a relative SD, by default ``noise.curve_noise`` of the levels ranked, at least
    ``noise.LEVEL_NOISE_FLOOR`` as every verdict at a level) and margin_within_noise (that interval contains 0: the runner-up is as good, within
    run-to-run noise; null: no interval).
    ``by`` groups further, e.g. ``["profile"]`` for the best under each NCCL profile. ``samples``: the
    per-request samples (``level_samples``) when ``source`` is a ``level_speedups`` frame; from the
    tables otherwise (without either, the margins have no interval).
    """
    metric = _check_metric(metric)
    keys = [*(by or []), *([] if "workload" in (by or []) else ["workload"]), "concurrency"]
    levels = _levels(source)
    if level_noise is None:
        level_noise = noise.curve_noise(levels, metric)
    ranked = levels.filter(pl.col(metric).is_not_null()).sort([*keys, metric], descending=[False] * len(keys) + [True])
    best = (
        ranked.group_by(keys, maintain_order=True)
        .agg(
            label=pl.col("setup").first(),
            baseline=pl.col("baseline").first(),
            value=pl.col(metric).first(),
            speedup=pl.col(_ratio_of(metric)).first(),
            verdict=pl.col(_verdict_of(metric)).first(),
            runner_up=pl.col("setup").get(1, null_on_oob=True),
            runner_up_value=pl.col(metric).get(1, null_on_oob=True),
            configurations=pl.len().cast(pl.Int64),
            point_id=pl.col("point_id").first(),
            runner_up_id=pl.col("point_id").get(1, null_on_oob=True),
        )
        .with_columns(margin=pl.col("value") / pl.col("runner_up_value") - 1)
        .sort(keys)
    )
    if samples is None and not isinstance(source, pl.DataFrame):
        samples = level_samples(source)
    return _with_margin_intervals(
        best, metric, samples, level_noise, confidence=confidence, resamples=resamples, seed=seed, levels=levels
    ).select(
        *keys,
        "label",
        "baseline",
        "value",
        "speedup",
        "verdict",
        "runner_up",
        "runner_up_value",
        "configurations",
        "margin",
        "point_id",
        "runner_up_id",
        "margin_low",
        "margin_high",
        "margin_within_noise",
    )


def _with_margin_intervals(
    best: pl.DataFrame,
    metric: str,
    samples: pl.LazyFrame | None,
    level_noise: float | None,
    *,
    confidence: float,
    resamples: int,
    seed: int,
    levels: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """``best`` with the interval of each winner's margin over its runner-up (see ``best_per_level``)."""
    at = lambda pid: pl.col(pid) + "@" + pl.col("concurrency").cast(pl.String)  # noqa: E731
    pairs = (
        best.filter(pl.col("runner_up_id").is_not_null())
        .select("point_id", "runner_up_id", "concurrency", key=at("point_id"), base_key=at("runner_up_id"))
        .unique()
    )
    if samples is None or not pairs.height:
        found = pairs.select("key", "base_key", ci_low=pl.lit(None, pl.Float64), ci_high=pl.lit(None, pl.Float64))
    else:
        found = noise.ratio_intervals(
            pairs.select("key", "base_key"), samples, stat="mean", confidence=confidence, resamples=resamples, seed=seed
        )
    per_request = pairs.join(found, on=["key", "base_key"], how="left").select(
        "point_id", "runner_up_id", "concurrency", "ci_low", "ci_high"
    )
    if metric == "output_throughput":  # a level has one throughput figure: the requests' noise, as a
        # relative width around the throughput ratio (as level_speedups does against the baseline)
        wanted = pl.concat([pairs["key"], pairs["base_key"]]).unique().implode()
        means = (
            samples.filter(pl.col("key").is_in(wanted) & (pl.col("value") > 0))
            .group_by("key")
            .agg(mean=pl.col("value").mean())
            .collect()
            if samples is not None and pairs.height
            else pl.DataFrame(schema={"key": pl.String, "mean": pl.Float64})
        )
        per_request = (
            per_request.with_columns(key=at("point_id"), base_key=at("runner_up_id"))
            .join(means, on="key", how="left")
            .join(means.rename({"key": "base_key", "mean": "base_mean"}), on="base_key", how="left")
            .with_columns(_pr=pl.col("mean") / pl.col("base_mean"))
            .drop("key", "base_key", "mean", "base_mean")
        )
    else:
        per_request = per_request.with_columns(_pr=pl.lit(None, pl.Float64))
    joined = best.join(per_request, on=["point_id", "runner_up_id", "concurrency"], how="left").with_columns(
        _ratio=pl.col("margin") + 1
    )
    if metric == "output_throughput":
        joined = joined.with_columns(
            ci_low=noise.moved("ci_low", "_pr", "_ratio"), ci_high=noise.moved("ci_high", "_pr", "_ratio")
        )
    sides: pl.Expr | int = 2
    if (
        levels is not None and repeats.REPEATS in levels.columns
    ):  # levels pooled over repeats: each side's level-wide noise / sqrt(R)
        counts = levels.select("point_id", "concurrency", _r=pl.col(repeats.REPEATS)).unique(
            ["point_id", "concurrency"]
        )
        joined = joined.join(counts, on=["point_id", "concurrency"], how="left").join(
            counts.rename({"point_id": "runner_up_id", "_r": "_r_b"}), on=["runner_up_id", "concurrency"], how="left"
        )
        sides = noise.sides_of(joined, "_r", "_r_b")
    joined = joined.with_columns(
        noise.widened("_ratio", noise.level_sigma(level_noise), sides=sides, confidence=confidence)
    )
    return joined.with_columns(
        margin_low=pl.col("ci_low") - 1, margin_high=pl.col("ci_high") - 1, margin_within_noise=noise.within_noise()
    )


def judge_pairs(
    levels: pl.DataFrame,
    pairs: pl.DataFrame,
    samples: pl.LazyFrame | None,
    level_noise: float | None,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """THE judgement of two configurations at one level, for every pair the report compares there
    (a configuration against its baseline, a level's best against the second and against every other,
    the policy's step counts): ``pairs`` (``point_id``, ``other_id``, ``concurrency``) with ``ratio``
    (output throughput, point / other), its interval ``ci_low``/``ci_high`` (the two levels' request
    rows, ``noise.ratio_intervals``, as a relative width around the throughput ratio, widened by the
    level-wide noise of each level, ``noise.level_sigma``; levels pooled over repeats count 1/R each)
    and ``verdict`` (``noise.Verdict``: ahead / behind / within noise / unknown, of point against
    other). One rule, one orientation-free interval: B against A is 1 / A against B, its verdict the
    flipped one. ``levels``: ``level_speedups`` (or any frame with point_id, concurrency,
    output_throughput and, where pooled, ``repeats``)."""
    values = levels.select("point_id", "concurrency", _v="output_throughput").unique(["point_id", "concurrency"])
    frame = (
        pairs.select("point_id", "other_id", "concurrency")
        .join(values, on=["point_id", "concurrency"], how="left")
        .join(
            values.rename({"point_id": "other_id", "_v": "_o"}),
            on=["other_id", "concurrency"],
            how="left",
        )
        .with_columns(margin=pl.col("_v") / pl.col("_o") - 1, runner_up_id=pl.col("other_id"))
    )
    judged = _with_margin_intervals(
        frame,
        "output_throughput",
        samples,
        level_noise,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        levels=levels,
    )
    return judged.select(
        "point_id",
        "other_id",
        "concurrency",
        ratio=pl.col("margin") + 1,
        ci_low=pl.when(pl.col("margin").is_not_null()).then("ci_low"),
        ci_high=pl.when(pl.col("margin").is_not_null()).then("ci_high"),
    ).with_columns(verdict=_verdict_expr("ratio"))


def _old_spelling(verdict: pl.Expr) -> pl.Expr:
    """A ``noise.Verdict`` column in the spelling the level frames carry against a baseline
    (faster | slower | within noise | no interval)."""
    return verdict.replace_strict(
        {
            noise.Verdict.AHEAD.value: "faster",
            noise.Verdict.BEHIND.value: "slower",
            noise.Verdict.WITHIN_NOISE.value: "within noise",
            noise.Verdict.UNKNOWN.value: "no interval",
        },
        default=None,
    )


def _verdict_expr(ratio: str) -> pl.Expr:
    """``noise.Verdict`` of a ratio column and its ``ci_low``/``ci_high``, as a string column."""
    return (
        pl.when(pl.col(ratio).is_null() | pl.col("ci_low").is_null() | pl.col("ci_high").is_null())
        .then(pl.lit(noise.Verdict.UNKNOWN.value))
        .when(pl.col("ci_low") > 1)
        .then(pl.lit(noise.Verdict.AHEAD.value))
        .when(pl.col("ci_high") < 1)
        .then(pl.lit(noise.Verdict.BEHIND.value))
        .otherwise(pl.lit(noise.Verdict.WITHIN_NOISE.value))
    )


def _levels_text(levels: list[int]) -> str:
    return "C=" + ", ".join(str(c) for c in levels)


def _crossing(levels: list[int], ratios: list[float], verdicts: list[str | None]) -> dict:
    """Where a ratio curve falls behind, judged by each level's verdict (``noise.judged``): a level is
    behind when its ratio is slower beyond noise, ahead when faster beyond noise, level otherwise (see
    ``crossover``)."""
    behind = [v == "slower" for v in verdicts]
    ahead = [v == "faster" for v in verdicts]
    first = next((i for i, b in enumerate(behind) if b), None)
    behind_from = len(ratios)
    while behind_from > 0 and behind[behind_from - 1]:
        behind_from -= 1
    last_ahead = max((i for i in range(len(ratios) if first is None else first) if ahead[i]), default=None)
    out: dict[str, Any] = {
        "first_behind": None if first is None else levels[first],
        "crossover": levels[behind_from] if behind_from < len(ratios) else None,
        "ahead_up_to": None if last_ahead is None else levels[last_ahead],
        "crossover_est": None,
        "mixed": first is not None and any(ahead[first + 1 :]),
    }
    if first is not None and last_ahead is not None:  # where it crosses 1 between them, linearly in log C
        j = max(i for i in range(last_ahead, first) if ratios[i] >= 1)  # ratios[j + 1 .. first] < 1
        c0, c1, r0, r1 = levels[j], levels[j + 1], ratios[j], ratios[j + 1]
        frac = (r0 - 1) / (r0 - r1)  # r0 >= 1 > r1, so 0 <= frac < 1
        out["crossover_est"] = math.exp(math.log(c0) + frac * (math.log(c1) - math.log(c0)))
    noisy = [c for c, v in zip(levels, verdicts) if v == "within noise"]
    unjudged = [c for c, a, b, v in zip(levels, ahead, behind, verdicts) if not a and not b and v != "within noise"]
    level_at = (f"; within noise at {_levels_text(noisy)}" if noisy else "") + (
        f"; no verdict at {_levels_text(unjudged)} (no interval)" if unjudged else ""
    )
    if first is None:
        ahead_at = [c for c, a in zip(levels, ahead) if a]
        out["outcome"] = (
            f"within noise of its baseline at every level ({_levels_text(levels)})"
            if not ahead_at and not unjudged
            else f"never behind beyond noise: ahead at {_levels_text(ahead_at)}{level_at}"
            if ahead_at
            else f"never behind beyond noise{level_at}"
        )
    elif behind_from == 0:
        out["outcome"] = f"slower at every concurrency from {levels[0]}"
    elif not out["mixed"] and out["crossover"] is None:  # behind, then within noise again up to the highest
        out["outcome"] = (
            f"behind at {_levels_text([c for c, b in zip(levels, behind) if b])}"
            + (f" (crosses 1 near {out['crossover_est']:.0f})" if out["crossover_est"] else "")
            + f", not beyond noise at the highest level measured (C={levels[-1]})"
            + level_at
        )
    elif not out["mixed"]:
        out["outcome"] = (
            f"slower from concurrency {out['crossover']} on"
            + (f" (crosses 1 near {out['crossover_est']:.0f})" if out["crossover_est"] else "")
            + level_at
        )
    else:
        out["outcome"] = (
            f"mixed: behind at {_levels_text([c for c, b in zip(levels, behind) if b])}; "
            f"ahead at {_levels_text([c for c, a in zip(levels, ahead) if a])}{level_at}"
            + (f"; slower from concurrency {out['crossover']} on" if out["crossover"] else "")
        )
    return out


def crossover(source: Tables | pl.DataFrame, *, metric: str = "output_throughput") -> pl.DataFrame:
    """For each speculative point: where it falls behind its baseline, by the per-level verdicts.

    Behind and ahead are beyond noise (the level's ``verdict``: slower / faster, ``noise.judged``); a
    level within noise is neither. ``first_behind`` is the first level behind; ``ahead_up_to`` the last
    level ahead before it (null when none is); ``crossover_est`` where the ratio crosses 1 between
    those two, interpolated linearly in log concurrency; ``crossover`` the lowest level from which it
    is behind at every higher level too (null if it is not behind at the highest level measured).
    ``mixed``: it is behind at some level and ahead at a higher one (the outcome lists both, and the
    levels within noise). Only levels measured for both point and baseline count.
    """
    ratio = _ratio_of(metric := _check_metric(metric))
    levels = _levels(source).filter(~pl.col("baseline") & pl.col(ratio).is_not_null()).sort("order", "concurrency")
    curves = levels.group_by(["point_id", "label", "baseline_label", "workload", "order"], maintain_order=True).agg(
        levels=pl.col("concurrency"), ratios=pl.col(ratio), verdicts=pl.col(_verdict_of(metric))
    )
    rows = [
        {
            "point_id": r["point_id"],
            "label": r["label"],
            "baseline_label": r["baseline_label"],
            "workload": r["workload"],
            "levels_measured": len(r["levels"]),
            "max_level": max(r["levels"]),
            "ratio_at_min": r["ratios"][0],
            "ratio_at_max": r["ratios"][-1],
            **_crossing(r["levels"], r["ratios"], r["verdicts"]),
        }
        for r in curves.iter_rows(named=True)
    ]
    schema = {
        "point_id": pl.String,
        "label": pl.String,
        "baseline_label": pl.String,
        "workload": pl.String,
        "levels_measured": pl.Int64,
        "max_level": pl.Int64,
        "ratio_at_min": pl.Float64,
        "ratio_at_max": pl.Float64,
        "ahead_up_to": pl.Int64,
        "first_behind": pl.Int64,
        "crossover_est": pl.Float64,
        "crossover": pl.Int64,
        "mixed": pl.Boolean,
        "outcome": pl.String,
    }
    return pl.DataFrame(rows, schema=schema).select(list(schema))


_REFERENCE_NAMES = ("default", "none", "off", "baseline", "base", "stock", "vanilla")


def reference_profile(profiles: list[str]) -> str | None:
    """The NCCL profile others are compared with: one whose values are all "default"-like names,
    else the first in natural order."""
    candidates = sorted({p for p in profiles if p}, key=natural_key)
    for p in candidates:
        if all(pair.partition("=")[2].lower() in _REFERENCE_NAMES for pair in p.split(",")):
            return p
    return candidates[0] if candidates else None


def env_effect(
    source: Tables | pl.DataFrame, *, reference: str | None = None, single: pl.DataFrame | None = None
) -> pl.DataFrame:
    """How much each NCCL profile moved every curve, against a reference profile.

    One row per (config, profile != reference): the same configuration (the label without the
    env axes) compared across profiles. Columns: config, group, baseline, profile, reference,
    single_stream_ratio (median tok/s, when ``single`` = ``speedup_table(...)`` is given or
    ``source`` is the tables), ratio_min_level / ratio_max_level (output throughput at the lowest
    / highest common level), geomean_ratio (over all common levels), min_ratio, max_ratio.
    ``reference`` is a profile string such as "nccl=default"; by default the profile whose
    values are named default/none/off..., else the first.
    """
    levels = _levels(source)
    if single is None and not isinstance(source, pl.DataFrame):
        single = speedup_table(source)
    profiles = levels["profile"].to_list() + (single["profile"].to_list() if single is not None else [])
    reference = reference or reference_profile(profiles)
    schema = {
        "config": pl.String,
        "group": pl.String,
        "baseline": pl.Boolean,
        "profile": pl.String,
        "reference": pl.String,
        "single_stream_ratio": pl.Float64,
        "levels": pl.Int64,
        "ratio_min_level": pl.Float64,
        "ratio_max_level": pl.Float64,
        "geomean_ratio": pl.Float64,
        "min_ratio": pl.Float64,
        "max_ratio": pl.Float64,
    }
    if reference is None:
        return pl.DataFrame(schema=schema)
    keys = ["config", "group", "baseline"]
    ref = levels.filter(pl.col("profile") == reference).select(*keys, "concurrency", ref_throughput="output_throughput")
    ratios = (
        levels.filter(pl.col("profile") != reference)
        .join(ref, on=[*keys, "concurrency"], how="inner")
        .with_columns(r=pl.col("output_throughput") / pl.col("ref_throughput"))
        .sort("concurrency")
        .group_by([*keys, "profile", "order"])
        .agg(
            levels=pl.len().cast(pl.Int64),
            ratio_min_level=pl.col("r").first(),
            ratio_max_level=pl.col("r").last(),
            geomean_ratio=pl.col("r").log().mean().exp(),
            min_ratio=pl.col("r").min(),
            max_ratio=pl.col("r").max(),
        )
    )
    if single is not None:
        ss_ref = single.filter(pl.col("profile") == reference).select(*keys, ref_tok_s="tok_s")
        ss = (
            single.filter(pl.col("profile") != reference)
            .join(ss_ref, on=keys, how="inner")
            .select(*keys, "profile", "order", single_stream_ratio=pl.col("tok_s") / pl.col("ref_tok_s"))
            .filter(pl.col("single_stream_ratio").is_not_null())
        )
        ratios = ratios.join(ss, on=[*keys, "profile", "order"], how="full", coalesce=True)
    else:
        ratios = ratios.with_columns(single_stream_ratio=pl.lit(None, pl.Float64))
    return ratios.with_columns(reference=pl.lit(reference)).sort("order").select(list(schema))
