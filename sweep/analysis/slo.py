"""Service-level objectives, goodput, and the setup to deploy for each SLO.

An SLO is a few limits, each at a percentile of a level's requests::

    ttft_p90<=2s          90 % of requests get their first token within 2 s
    tpot_p90<=50ms        90 % of requests stream at most 50 ms per token after the first
    latency_p99<=30s      99 % of requests finish within 30 s
    tok_s_p10>=20         90 % of requests run at 20 tok/s or more (output tokens / latency)

written on the command line as ``[NAME:] LIMIT[,LIMIT...]`` (``report --slo 'chat: ttft_p90<=2s,
tpot_p90<=50ms'``) or in the experiment as ``benchmark.slo`` (sweep/core/settings.py). A failed
request meets no limit. A level *meets* the SLO when every limit holds at its percentile.

- **Goodput** (DistServe): the rate of requests that meet their SLO. Per level: the requests that
  met every limit themselves, per second of the level's wall time, and their output tokens per
  second per GPU.
- **Highest concurrency that meets it**, per configuration: the levels are walked upwards from the
  lowest one that meets the SLO; between the last level that meets it and the first that does not,
  each broken limit's percentile is interpolated linearly against log concurrency to where it
  crosses the limit, and the lowest crossing is taken. Marked ``>=`` when even the highest level
  measured meets it, and ``<`` the lowest when none does.
- **Throughput under the SLO**: output tok/s per GPU at that concurrency (interpolated the same
  way between the two levels; at the highest level when it is ``>=``). The best configuration per
  SLO has the highest; its margins are over the runner-up and over its own matched baseline (their
  intervals, and whether the runner-up is within noise: ``sweep.analysis.slo_noise``).

Pure functions over the results tables (``sweep.results.load``). The ``SLO`` type and its parser
live in ``sweep.core.slo_rule`` (the host's refinement judges by them too); the parser raises
``ConfigError`` naming the culprit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, TypedDict, cast

import polars as pl

from sweep.analysis import realspeed
from sweep.analysis.frames import Tables, configurations, points_frame
from sweep.core import FAILED, SLO, ConfigError, Limit, SLOSettings, amount, failed_value, from_settings, holds, meets

# the SLO's grammar lives with its type and rule in the core; named here too, where it has always been
from sweep.core import parse_limit as parse_limit
from sweep.core import parse_slo as parse_slo
from sweep.results import FLAGS, experiment_slos, server_flags

_amount = amount


def from_experiment(directory) -> list[SLO]:
    """The ``benchmark.slo`` of a results directory's experiment ([] if none or unreadable; an entry
    that is no valid SLO is left out), as ``sweep.results.meta.experiment_slos`` reads it."""

    out = []
    for item in experiment_slos(directory):
        # the values as the experiment file has them (any type): what SLOSettings or from_settings
        # rejects (ConfigError, TypeError) is left out below
        fields: dict[str, Any] = {
            k: item.get(k) for k in ("name", "percentile", "ttft_s", "tpot_s", "tok_s") if item.get(k) is not None
        }
        try:
            out.append(from_settings(SLOSettings(**fields)))
        except (ConfigError, TypeError):
            continue
    return out


# --- the data -------------------------------------------------------------------------------


def _value(metric: str) -> pl.Expr:
    """A request's value of ``metric``: failed requests get the worst value (FAILED s, or 0
    tok/s); an ok request where it is undefined (TPOT of a one-token answer) gets null, which the
    percentiles skip and which breaks no limit."""
    ok = pl.col("ok").fill_null(False)
    raw = {
        "ttft": pl.col("ttft_s"),
        "tpot": pl.col("tpot_s"),
        "latency": pl.col("latency_s"),
        "tok_s": pl.col("completion_tokens") / pl.col("latency_s"),
    }[metric].cast(pl.Float64)
    worst = 0.0 if metric == "tok_s" else FAILED
    return (
        pl.when(~ok)
        .then(pl.lit(worst))
        .when(raw.is_not_null() & raw.is_finite())
        .then(raw)
        .otherwise(pl.lit(None, pl.Float64))
    )


def _meets(limit: Limit) -> pl.Expr:
    v = _value(limit.metric)
    return (v <= limit.value if limit.upper else v >= limit.value).fill_null(True)


def gpus_frame(tables: Tables) -> pl.DataFrame:
    """point_id -> divisor for "per GPU" figures: ``gpus`` (the GPUs the server uses, from its flags:
    ``ServerFlags.gpus``), ``per`` ("GPU", or "host" for a CPU point: ``gpu_count`` 0, divided by the
    hosts it spans, ``--nnodes``) and ``gpus_from`` ("argv": its flags, or "host" where they name no
    size and the host's ``gpu_count`` is all there is)."""
    points = points_frame(tables)
    rows = []
    for r in points.select("point_id", "gpu_count", *([FLAGS] if FLAGS in points.columns else [])).iter_rows(
        named=True
    ):
        flags, count = server_flags(r), r["gpu_count"] or 0
        used = flags.gpus
        if count <= 0:  # a CPU host: per host, over the hosts one server spans
            rows.append({"point_id": r["point_id"], "gpus": float(flags.nnodes), "per": "host", "gpus_from": "argv"})
        elif used is None:
            rows.append({"point_id": r["point_id"], "gpus": float(count), "per": "GPU", "gpus_from": "host"})
        else:
            rows.append({"point_id": r["point_id"], "gpus": float(used), "per": "GPU", "gpus_from": "argv"})
    return pl.DataFrame(
        rows, schema={"point_id": pl.String, "gpus": pl.Float64, "per": pl.String, "gpus_from": pl.String}
    )


def level_slo(tables: Tables, slos: list[SLO]) -> pl.DataFrame:
    """One row per (SLO, point, level): each limit's percentile value (``v0``, ``v1``...), whether
    the level meets the SLO, the share of requests that met every limit (attainment), and goodput.

    Columns: slo, point_id, concurrency, requests, met, attainment, goodput_rps,
    goodput_tok_s_gpu, throughput_tok_s_gpu, per, refined (the level was added by the host's
    bisection, ``concurrency.refine``), v0..vN (N = most limits of any SLO).
    """
    width = max((len(s.limits) for s in slos), default=0)
    schema = {
        "slo": pl.String,
        "point_id": pl.String,
        "concurrency": pl.Int64,
        "requests": pl.Int64,
        "met": pl.Boolean,
        "attainment": pl.Float64,
        "goodput_rps": pl.Float64,
        "goodput_tok_s_gpu": pl.Float64,
        "throughput_tok_s_gpu": pl.Float64,
        "per": pl.String,
        "refined": pl.Boolean,
        **{f"v{i}": pl.Float64 for i in range(width)},
    }
    if not slos:
        return pl.DataFrame(schema=schema)
    tables = realspeed.scaled(tables)  # a dry run's at real speed, as the report judges it
    requests = tables["requests"].filter(pl.col("phase") == "level")
    level_cols = tables["levels"].collect_schema().names()
    refined = pl.col("refined").fill_null(False) if "refined" in level_cols else pl.lit(False)
    walls = (
        tables["levels"]
        .select(
            "point_id", pl.col("concurrency").cast(pl.Int64), "wall_s", "output_throughput", refined.alias("refined")
        )
        .collect()
        .unique(["point_id", "concurrency"], keep="last")
    )
    gpus = gpus_frame(tables)
    frames = []
    for slo in slos:
        good = pl.all_horizontal([_meets(limit) for limit in slo.limits])
        aggs = [
            pl.len().cast(pl.Int64).alias("requests"),
            good.mean().alias("attainment"),
            good.sum().cast(pl.Float64).alias("good"),
            pl.col("completion_tokens")
            .filter(good & pl.col("ok").fill_null(False))
            .sum()
            .cast(pl.Float64)
            .alias("good_tokens"),
        ]
        aggs += [
            _value(limit.metric).quantile(limit.percentile / 100, "linear").alias(f"v{i}")
            for i, limit in enumerate(slo.limits)
        ]
        per_level = requests.group_by("point_id", pl.col("concurrency").cast(pl.Int64)).agg(aggs).collect()
        # the verdict: the one rule the host's refinement uses too (sweep.core.slo_rule.meets)
        vs = [f"v{i}" for i in range(len(slo.limits))]
        met = pl.Series(
            "met",
            [meets(slo.limits, [r[v] for v in vs]) for r in per_level.select(vs).iter_rows(named=True)],
            dtype=pl.Boolean,
        )
        per_level = per_level.with_columns(met)
        frame = (
            per_level.join(walls, on=["point_id", "concurrency"], how="left")
            .join(gpus, on="point_id", how="left")
            .with_columns(
                slo=pl.lit(slo.name),
                goodput_rps=pl.col("good") / pl.col("wall_s"),
                goodput_tok_s_gpu=pl.col("good_tokens") / pl.col("wall_s") / pl.col("gpus"),
                throughput_tok_s_gpu=pl.col("output_throughput") / pl.col("gpus"),
            )
            .with_columns([pl.lit(None, pl.Float64).alias(f"v{i}") for i in range(len(slo.limits), width)])
        )
        frames.append(frame.select(list(schema)))
    return pl.concat(frames).sort("slo", "point_id", "concurrency")


def _crossing(limit: Limit, lo: float, hi: float) -> float:
    """Where between two levels (0 at the one that meets, 1 at the one that does not) a limit's
    value crosses it; 1 when it holds at both."""
    if hi is None or lo is None:
        return 1.0 if hi is None else 0.0
    holds = (hi <= limit.value) if limit.upper else (hi >= limit.value)
    if holds:
        return 1.0
    if failed_value(hi) or not math.isfinite(hi):  # failed requests past the percentile: no trend
        return 0.0
    if hi == lo:
        return 0.0
    return min(1.0, max(0.0, (limit.value - lo) / (hi - lo)))


@dataclass(frozen=True)
class Reach:
    """How far one configuration's levels meet an SLO (:func:`highest_meeting`): ``c``, the highest
    concurrency meeting it (None without levels); ``bound``: '=' interpolated between ``last_met``
    and ``first_missed``, '>=' beyond the highest level, '<' below the lowest (None without levels);
    ``tok_s_gpu``, the throughput at ``c`` (None where no level meets it); ``binding``, the limit
    that stops it; ``bisected``: one of the two levels was put there by the host's bisection."""

    c: float | None = None
    bound: str | None = None
    tok_s_gpu: float | None = None
    binding: str | None = None
    last_met: int | None = None
    first_missed: int | None = None
    bisected: bool = False


def highest_meeting(slo: SLO, levels: list[dict[str, Any]]) -> Reach:
    """The highest concurrency meeting ``slo`` along one configuration's levels (dicts of
    level_slo rows, any order)."""
    rows = sorted(levels, key=lambda r: r["concurrency"])
    if not rows:
        return Reach()
    first = next((i for i, r in enumerate(rows) if r["met"]), None)
    if first is None:
        r = rows[0]
        broken = [lim.text() for i, lim in enumerate(slo.limits) if not _holds(lim, r.get(f"v{i}"))]
        return Reach(float(r["concurrency"]), "<", binding=", ".join(broken), first_missed=r["concurrency"])
    last = first
    while last + 1 < len(rows) and rows[last + 1]["met"]:
        last += 1
    lo = rows[last]
    if last + 1 == len(rows):
        return Reach(float(lo["concurrency"]), ">=", lo["throughput_tok_s_gpu"], last_met=lo["concurrency"])
    hi = rows[last + 1]
    fracs = [(_crossing(lim, lo[f"v{i}"], hi[f"v{i}"]), lim.text()) for i, lim in enumerate(slo.limits)]
    frac, binding = min(fracs)
    c0, c1 = math.log(lo["concurrency"]), math.log(hi["concurrency"])
    t0, t1 = lo["throughput_tok_s_gpu"], hi["throughput_tok_s_gpu"]
    tok = None if t0 is None or t1 is None else t0 + frac * (t1 - t0)
    return Reach(
        math.exp(c0 + frac * (c1 - c0)),
        "=",
        tok,
        binding,
        last_met=lo["concurrency"],
        first_missed=hi["concurrency"],
        bisected=bool(lo.get("refined") or hi.get("refined")),
    )


_holds = holds


def slo_table(tables: Tables, slos: list[SLO], per_level: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per (SLO, configuration): the highest concurrency meeting it and the throughput there,
    ranked, with the margin over the runner-up and over the matched baseline.

    Ranked within each workload (``workload``: the client-side benchmark axes, "" without any; two
    workloads are two traffic mixes on one server, never two setups to choose between).
    Columns: slo, workload, rank, point_id, label, setup (the label without the workload), baseline, baseline_id, baseline_label, profile, c, bound,
    c_text ("≈12", ">=250", "<1"), tok_s_gpu (0 when no level meets it), per, binding, last_met,
    first_missed, boundary ("between C=12 and C=14, found by bisection": :func:`boundary_text`), baseline_tok_s_gpu, vs_baseline (tok_s_gpu / baseline's - 1), margin (the
    winner's over the runner-up; on every row: over the next row).
    """
    schema = {
        "slo": pl.String,
        "workload": pl.String,
        "rank": pl.Int64,
        "point_id": pl.String,
        "label": pl.String,
        "setup": pl.String,
        "baseline": pl.Boolean,
        "baseline_id": pl.String,
        "baseline_label": pl.String,
        "profile": pl.String,
        "c": pl.Float64,
        "bound": pl.String,
        "c_text": pl.String,
        "tok_s_gpu": pl.Float64,
        "per": pl.String,
        "binding": pl.String,
        "last_met": pl.Int64,
        "first_missed": pl.Int64,
        "boundary": pl.String,
        "baseline_tok_s_gpu": pl.Float64,
        "vs_baseline": pl.Float64,
        "margin": pl.Float64,
    }
    per_level = level_slo(tables, slos) if per_level is None else per_level
    if per_level.is_empty():
        return pl.DataFrame(schema=schema)
    conf = (
        configurations(tables)
        .filter(pl.col("status") == "ok")
        .select(
            "point_id", "label", "setup", "workload", "baseline", "baseline_id", "baseline_label", "profile", "order"
        )
    )
    rows = []
    for slo in slos:
        mine = per_level.filter(pl.col("slo") == slo.name)
        by_point = {pid: g.to_dicts() for (pid,), g in mine.group_by("point_id")}
        found = {pid: highest_meeting(slo, levels) for pid, levels in by_point.items()}
        for r in conf.iter_rows(named=True):
            if r["point_id"] not in found:
                continue
            h = found[r["point_id"]]
            per = by_point[r["point_id"]][0]["per"]
            rows.append(
                {
                    "slo": slo.name,
                    **{
                        k: r[k]
                        for k in (
                            "point_id",
                            "label",
                            "setup",
                            "workload",
                            "baseline",
                            "baseline_id",
                            "baseline_label",
                            "profile",
                            "order",
                        )
                    },
                    "c": h.c,
                    "bound": h.bound,
                    "c_text": c_text(h.c, h.bound),
                    "tok_s_gpu": h.tok_s_gpu if h.tok_s_gpu is not None else 0.0,
                    "per": per,
                    "binding": h.binding,
                    "last_met": h.last_met,
                    "first_missed": h.first_missed,
                    "boundary": _boundary_text(h),
                }
            )
    if not rows:
        return pl.DataFrame(schema=schema)
    frame = pl.DataFrame(
        rows,
        schema_overrides={
            "c": pl.Float64,
            "last_met": pl.Int64,
            "first_missed": pl.Int64,
            "baseline_id": pl.String,
            "baseline_label": pl.String,
            "binding": pl.String,
            "bound": pl.String,
            "boundary": pl.String,
            "baseline": pl.Boolean,
        },
    )  # null in a ``bench --out`` directory
    base = frame.select("slo", baseline_id="point_id", baseline_tok_s_gpu="tok_s_gpu")
    slo_order = {s.name: i for i, s in enumerate(slos)}
    frame = (
        frame.join(base, on=["slo", "baseline_id"], how="left")
        .with_columns(
            vs_baseline=pl.when(~pl.col("baseline") & (pl.col("baseline_tok_s_gpu") > 0)).then(
                pl.col("tok_s_gpu") / pl.col("baseline_tok_s_gpu") - 1
            ),
            _slo=pl.col("slo").replace_strict(slo_order, return_dtype=pl.Int64),
            _c=pl.col("c").fill_null(0),
        )
        .sort(["_slo", "workload", "tok_s_gpu", "_c", "order"], descending=[False, False, True, True, False])
        .with_columns(
            rank=pl.int_range(1, pl.len() + 1).over("slo", "workload").cast(pl.Int64),
            margin=pl.when(pl.col("tok_s_gpu").shift(-1).over("slo", "workload") > 0).then(
                pl.col("tok_s_gpu") / pl.col("tok_s_gpu").shift(-1).over("slo", "workload") - 1
            ),
        )
    )
    return frame.select(list(schema))


def _boundary_text(h: Reach) -> str | None:
    """Where the boundary lies, from :func:`highest_meeting`: the two levels it was interpolated
    between, and whether the host's bisection (``concurrency.refine``) put one of them there."""
    if h.bound != "=":
        return None
    how = "found by bisection" if h.bisected else "interpolated"
    return f"between C={h.last_met} and C={h.first_missed}, {how}"


def reach_text(row: dict[str, Any], *, every: str = "at every level measured") -> str:
    """Where an slo_table row meets its SLO, said so that an interpolated boundary does not read as
    measured: 'up to C≈1.61 (interpolated between the measured levels C=1 and C=2)', or ``every`` with
    the highest level ('at every level measured (C>=250)')."""
    if row["bound"] != "=":
        return f"{every} (C{row['c_text']})"
    how = "found by bisection" if "bisection" in (row.get("boundary") or "") else "interpolated"
    return f"up to C{row['c_text']} ({how} between the measured levels C={row['last_met']} and C={row['first_missed']})"


def at_reach(row: dict[str, Any]) -> str:
    """'≈' before a figure at an interpolated boundary (none where a level measured it)."""
    return "≈" if row["bound"] == "=" else ""


def c_text(c: float | None, bound: str | None) -> str:
    if c is None or bound is None:
        return "-"
    if bound == "=":
        return f"≈{c:.3g}" if c < 10 else f"≈{c:.0f}"
    return f"{bound}{c:g}"


class _Pick(TypedDict):
    slo: SLO
    best: dict[str, Any] | None  # the winner's slo_table row (rank 1); None: no configuration meets it
    runner_up: dict[str, Any] | None  # the next row, where there is one
    reason: str | None  # why there is no winner; None where there is one


class Recommendation(_Pick):
    """One SLO's pick within one workload (:func:`recommendations`): what the report, the deploy
    answer and the history say of it. A dict (its keys typed): the callers read ``rec["best"]``."""

    workload: str  # the client-side benchmark axes' values; "" without any


def recommendations(table: pl.DataFrame, slos: list[SLO]) -> list[Recommendation]:
    """Per SLO and workload: the winner (rank 1) with its runner-up and baseline, or why there is none
    (``workload``: "" without a client-side benchmark axis)."""
    out: list[Recommendation] = []
    workloads = table["workload"].unique(maintain_order=True).to_list() if "workload" in table.columns else []
    for slo in slos:
        for w in workloads or [""]:
            pick = _recommendation(table.filter(pl.col("workload") == w) if workloads else table, slo)
            out.append(Recommendation(workload=w, **pick))
    return out


def _recommendation(table: pl.DataFrame, slo: SLO) -> _Pick:
    mine = table.filter(pl.col("slo") == slo.name).sort("rank")
    if mine.is_empty():
        return _Pick(slo=slo, best=None, runner_up=None, reason="no configuration measured yet")
    best = mine.row(0, named=True)
    if not best["tok_s_gpu"]:
        lowest = cast(Optional[float], mine.filter(pl.col("bound") == "<")["c"].min())  # "c" is Float64
        return _Pick(
            slo=slo,
            best=None,
            runner_up=None,
            reason=f"no configuration meets it at any level measured (not even C={lowest:g})"
            if lowest is not None
            else "no configuration meets it",
        )
    runner = mine.row(1, named=True) if mine.height > 1 else None
    return _Pick(slo=slo, best=best, runner_up=runner, reason=None)
