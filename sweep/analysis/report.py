"""``python -m sweep report DIR``: the sweep's answers, as DIR/report/report.md with PNG plots
beside it, as DIR/report/report.html (one self-contained page: the same sections, an interactive
chart where the Markdown has a plot), and the same sections on the terminal.

Works on whatever the directory holds: a finished sweep, one still running (points not written
yet are listed from plan.json when it names them), failed points, missing baselines, dry runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, cast

import polars as pl

from sweep.analysis import acceptance, achieved, charts, deploy, noise, openloop, plots, render, slo_noise
from sweep.analysis import energy as energy_mod
from sweep.analysis import frontier as frontier_mod
from sweep.analysis import policy as policy_mod
from sweep.analysis import slo as slo_mod
from sweep.analysis import workloads as workloads_mod
from sweep.analysis.compare import compare_sections
from sweep.analysis.findings import Findings, analyze, headlines
from sweep.analysis.frames import natural_key
from sweep.analysis.health import PHASES
from sweep.analysis.render import Section
from sweep.core import OutputError, atomic, plural
from sweep.results import check_sweep_dir, decisions, load, read_columns, read_experiment, read_plan


@dataclass
class Report:
    sections: list[Section]
    markdown: str
    images: list[Path]
    html: str = ""  # report.html: the same sections, the charts inlined
    files: dict[str, str] = field(default_factory=dict)  # beside report.md: {name: text} (policy-*.json)


def _planned_points(plan: dict) -> list[dict]:
    """The plan's points as {point_id, label} (empty when the plan does not list them)."""
    points = plan.get("points")
    if not isinstance(points, list):
        return []
    return [
        {"point_id": p.get("id") or p.get("point_id"), "label": p.get("label") or ""}
        for p in points
        if isinstance(p, dict) and (p.get("id") or p.get("point_id"))
    ]


def _when(epoch: float | None) -> str:
    return render.MISSING if epoch is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def header(directory: Path, f: Findings, plan: dict) -> Section:
    """The report's title and the two lines that place it (what was written, on what); the rest of
    what the sweep was (its directory, a partial sweep, a dry run's scaling) is ``_about_section``,
    below the answer (``deploy.deploy_section``)."""
    s = f.summary
    title = f"Sweep report: {', '.join(s['experiments']) or directory.name}"
    counts = ", ".join(f"{n} {status}" for status, n in sorted(s["status"].items()))
    lines = [
        f"Points written: {s['points']} ({counts or 'none yet'}), of which {plural(s['baselines'], 'baseline')}."
        + (" DRY RUN: the fake server's figures, not a GPU's (see 'This sweep')." if s["dry_run"] else "")
    ]
    lines.append(
        f"Concurrency levels: {', '.join(map(str, s['levels'])) or 'none measured yet'}. "
        f"SGLang {', '.join(s['sglang_versions']) or render.MISSING}; GPU "
        f"{', '.join(s['gpus']) or render.MISSING}; {plural(len(s['hosts']), 'host')}; "
        f"{_when(s['started_at'])} to {_when(s['ended_at'])}."
    )
    return Section(title, lines, level=1)


def _about_section(directory: Path, f: Findings, plan: dict) -> Section:
    """Where the results are, what is not written yet, and how a dry run's figures came to be."""
    s = f.summary
    lines = [f"Directory: {directory}"]
    planned = _planned_points(plan)
    written = set(f.single["point_id"].to_list())
    if planned:
        pending = [p for p in planned if p["point_id"] not in written]
        if pending:
            names = ", ".join(p["label"] or p["point_id"] for p in pending[:10])
            more = f" and {len(pending) - 10} more" if len(pending) > 10 else ""
            lines.append(
                f"Partial sweep: {len(pending)} of {plural(len(planned), 'planned point')} not written "
                f"yet ({names}{more})."
            )
    if s["dry_run"]:
        lines.append("DRY RUN: every number below comes from the fake server's performance model, not from a GPU.")
    if f.speed.scaled:
        lines.append(f.speed.note())
    for scale in s["bench_scale"]:
        lines.append(f"Benchmark scaled down for this run: {scale}")
    return Section("This sweep", lines)


def _summary_section(f: Findings) -> Section:
    measured = f.levels.height > 0 or f.single.filter(pl.col("tok_s").is_not_null()).height > 0
    lines = headlines(f) or [
        "Only baselines were measured: no speculative point finished its benchmark (see Failures)."
        if measured
        else "Nothing measured yet: no point has finished its benchmark."
    ]
    return Section("Summary", [f"- {line}" for line in lines])


def _n(digits: int):
    return lambda v: render.num(v, digits)


Columns = dict[str, str | pl.Expr]
"""Columns of a table as ``select`` takes them by keyword: a heading, and a column's name or an
expression (the headings that are no identifiers, passed as ``**columns``)."""


_COUNTED = (
    "Tokens counted: output (completion) tokens only, prompt tokens not; per GPU = the level's "
    "output tok/s divided by the GPUs the server uses (tp x pp, x dp for data-parallel replicas, from "
    "its argv; over every host it spans), not by the host's GPUs"
)


def _per_note(frame: pl.DataFrame) -> str:
    """How "per GPU" was counted, naming the points counted otherwise: per host (CPU points) or by the
    host's GPUs (an argv that names no parallelism)."""

    def names(rows: pl.DataFrame) -> str:
        labels = sorted(rows["label"].unique().to_list())
        return ", ".join(labels[:4]) + (" ..." if len(labels) > 4 else "")

    text = _COUNTED
    if frame.height and "per" in frame.columns:
        hosts = frame.filter(pl.col("per") == "host")
        if hosts.height:
            text += f"; points with no GPU (CPU hosts: {names(hosts)}) are counted per host instead"
    if frame.height and "gpus_from" in frame.columns:
        fallback = frame.filter((pl.col("per") == "GPU") & (pl.col("gpus_from") == "host"))
        if fallback.height:
            text += (
                f"; WARNING: the argv of {names(fallback)} names no parallelism (--tp-size), so those are "
                "divided by the host's GPUs (gpu_count), which is right only if the server used them all"
            )
    return text + "."


def _frontier_section(f: Findings, images: list[str]) -> list[Section]:
    fr = f.frontier
    if fr.is_empty():
        return []
    by = f.frontier_by
    panels = (
        "one panel per NCCL profile"
        if by in (None, "profile")
        else "one panel for all points"
        if by.lower() in frontier_mod.ALL
        else f"one panel per value of {by}"
    )
    paragraphs = [
        "Every configuration at every concurrency level: per-user speed (x: output tokens / latency of "
        "each request, TTFT included, mean over the level) against output tokens per second per GPU (y), "
        f"{panels}. A point is on the frontier when no other point is at least as fast per user and serves "
        "more per GPU: read along it, it names the configuration to run for the per-user speed wanted. " + _per_note(fr)
    ]
    spans = frontier_mod.frontier_spans(fr)
    for panel, g in spans.group_by("panel", maintain_order=True):
        parts = [
            f"{r['label']}{' (baseline)' if r['baseline'] else ''} "
            + (
                f"from {render.num(r['user_tok_s_max'], 0)} to {render.num(r['user_tok_s_min'], 0)} "
                f"tok/s per user (C={r['c_from']}-{r['c_to']})"
                if r["c_to"] != r["c_from"]
                else f"at {render.num(r['user_tok_s_max'], 0)} tok/s per user (C={r['c_from']})"
            )
            for r in g.iter_rows(named=True)
        ]
        paragraphs.append(f"- {panel[0] or 'all points'}: " + "; then ".join(parts) + ".")
    on = frontier_mod.frontier_only(fr)
    power: Columns = (
        {"tok/s per kW": render.cell(_n(1), "tok_s_kw"), "J/token": render.cell(_n(2), "j_per_token")}
        if energy_mod.measured(f.energy)
        else {}
    )
    table = on.select(
        panel=pl.when(pl.col("panel") == "").then(pl.lit("all")).otherwise("panel"),
        configuration=pl.when("baseline").then(pl.col("label") + " (baseline)").otherwise("label"),
        C="concurrency",
        **{
            "per-user tok/s": render.cell(_n(1), "user_tok_s"),
            "output tok/s per GPU": render.cell(
                lambda v, per: render.num(v, 1) + ("" if per == "GPU" else " (per host)"), "tok_s_gpu", "per"
            ),
            **power,
        },
    )
    return [Section("Throughput-interactivity frontier", paragraphs, table, images)]


def _margin_cell(margin: float | None, rank: int, tok: float, within_noise: bool | None = None) -> str:
    if not tok:
        return render.MISSING
    if margin is None:
        return "only one" if rank == 1 else render.MISSING
    return render.marked(margin, within_noise, render.change)


def _vs_baseline_cell(
    vs: float | None, baseline: bool, tok: float, base_tok: float | None, within_noise: bool | None = None
) -> str:
    if baseline:
        return "(is one)"
    if not tok:
        return render.MISSING
    if base_tok is not None and not base_tok:
        return "its baseline meets it nowhere"
    return render.marked(vs, within_noise, render.change)


def _pick_over_cell(low: float | None, high: float | None, within_noise: bool | None, rank: int, tok: float) -> str:
    """The pick's margin over this row's configuration: its interval, and the one verdict of that pair
    (``slo_noise``'s ``vs_pick_*``): '~' within noise."""
    if rank == 1 or not tok or low is None or high is None:
        return render.MISSING
    return (render.NOISE_MARK if within_noise else "") + f"{render.bound(low, 1)} .. {render.bound(high, 1)}"


def _slo_sections(f: Findings) -> list[Section]:
    if not f.slos:
        return [
            Section(
                "SLOs and goodput",
                [
                    "No SLO given: set benchmark.slo in the experiment, or try some with "
                    "`python -m sweep report DIR --slo 'ttft_p90<=2s,tpot_p90<=50ms'` (metrics ttft, tpot, "
                    "latency, tok_s; any percentile; several --slo for several SLOs)."
                ],
            )
        ]
    paragraphs = [
        "Per configuration, the highest concurrency at which every limit of the SLO holds at its "
        "percentile (interpolated in log concurrency between the last level that meets it and the first "
        "that does not; '>=' when even the highest level measured meets it, '<' the lowest when none "
        "does; the boundary column names those two levels, and says 'found by bisection' where the benchmark "
        "added one of them to find it: benchmark.concurrency.refine), the output tok/s per GPU there (the throughput under the SLO, ranked), and the margin over "
        "the next configuration and over its own matched baseline; the pick's margins carry their 95% "
        f"interval in the Summary, and '{render.NOISE_MARK}' marks the pick's margins (over the next one, over "
        "its baseline) when they are within noise (see Method); the margins of the other rows carry no "
        "interval and no verdict: each row's own judgement against the pick is 'the pick over it' (its "
        f"interval, '{render.NOISE_MARK}' within noise). Goodput is the rate of requests that "
        "meet their SLO (DistServe): per level, the requests that met every limit, their output tok/s per "
        "GPU. A failed request meets no limit. " + _per_note(f.frontier)
    ]
    if f.speed.scaled:
        paragraphs.append("DRY RUN: the SLOs are judged on the figures at real speed (see the top of the report).")
    out = [Section("SLOs and goodput", paragraphs)]
    for slo in f.slos:
        t = f.slo_table.filter(pl.col("slo") == slo.name).sort("workload", "rank")
        several = t["workload"].n_unique() > 1
        text = [
            f"{slo.describe()}." + (" Ranked within each workload (a traffic mix, not a setup)." if several else "")
        ]
        columns: Columns = {
            "highest C meeting it": "c_text",
            "output tok/s per GPU there": render.cell(
                lambda v: render.num(v, 1) if v else "0 (meets it nowhere)", "tok_s_gpu"
            ),
            "vs next": render.cell(_margin_cell, "margin", "rank", "tok_s_gpu", "margin_within_noise"),
            "vs its baseline": render.cell(
                _vs_baseline_cell,
                "vs_baseline",
                "baseline",
                "tok_s_gpu",
                "baseline_tok_s_gpu",
                "vs_baseline_within_noise",
            ),
            "the pick over it, 95% interval": render.cell(
                _pick_over_cell, "vs_pick_low", "vs_pick_high", "vs_pick_within_noise", "rank", "tok_s_gpu"
            ),
            "binding limit": "binding",
            "boundary": "boundary",
        }
        if energy_mod.measured(f.energy):  # at the highest level measured that meets it
            t = t.join(
                f.energy.select("point_id", last_met="concurrency", kw="tok_s_kw"),
                on=["point_id", "last_met"],
                how="left",
            ).sort("workload", "rank")
            columns["tok/s per kW at the last level meeting it"] = render.cell(_n(1), "kw")
        table = t.select(
            *([pl.col("workload")] if several else []),
            rank="rank",
            configuration=pl.when("baseline").then(pl.col("setup") + " (baseline)").otherwise("setup"),
            **columns,
        )
        out.append(Section(f"SLO {slo.name}", text, table, level=3))
        good = f.slo_levels.filter(pl.col("slo") == slo.name)
        if good.height:
            conf = t.with_row_index("order").select("point_id", "label", "order")
            cells = good.join(conf, on="point_id", how="inner").with_columns(
                cell=render.cell(
                    lambda g, a, met: f"{render.num(g, 1)} ({a:.0%})" + ("" if met else " x"),
                    "goodput_tok_s_gpu",
                    "attainment",
                    "met",
                )
            )
            out.append(
                Section(
                    f"Goodput under {slo.name}",
                    [
                        "Output tok/s per GPU of the requests that met every limit, at each level; in brackets the "
                        "share of requests that did; 'x' marks a level that misses the SLO at its percentiles."
                    ],
                    _level_pivot(cells, pl.col("cell")),
                    level=3,
                )
            )
    return out


def open_loop_sections(f: Findings) -> list[Section]:
    """Goodput against offered rate, per configuration and open-loop level, marking the rate where
    the server stops keeping up (none without open-loop levels)."""
    lv = f.open_levels
    if not lv.height:
        return []
    text = [
        "Open-loop levels (benchmark.rates; a trace replayed at its own timing): requests sent at drawn "
        "arrival times whatever the server does, so a server that cannot keep up builds a queue. 'kept up' "
        "is 'no' where the backlog (requests arrived and unanswered, seen at each arrival) grew over the level "
        "beyond chance (the least-squares growth above 3 sqrt(mean backlog + 1) + 1 requests); '<-' marks the "
        "lowest rate each configuration did not keep up with. Achieved req/s is ok requests over the level's "
        "wall time (SGLang bench_serving's request throughput: the drain after the last arrival keeps it a "
        "little below the rate even when the server keeps up). TTFT runs from the send, as in bench_serving."
    ]
    for r in openloop.first_overload(lv).iter_rows(named=True):
        up = "no rate" if r["kept_up_to"] is None else f"{r['kept_up_to']:g} req/s"
        down = "every rate measured" if r["overloaded_at"] is None else f"not at {r['overloaded_at']:g} req/s"
        text.append(f"{r['label']}: kept up with {up}; {down}.")
    if f.speed.scaled:
        text.append("DRY RUN: rates and times at real speed (the fake's divided back).")
    first = openloop.first_overload(lv).select("point_id", "overloaded_at")
    frame = lv.join(first, on="point_id", how="left")
    columns: Columns = {
        "configuration": "label",
        "offered req/s": render.cell(
            lambda rate, arrival, b: (
                f"{rate:g}" + (" (trace)" if arrival == "trace" else f" (gamma {b:g})" if arrival == "gamma" else "")
            ),
            "offered_rate",
            "arrival",
            "burstiness",
        ),
        "achieved req/s": render.cell(_n(2), "achieved_rate"),
        "output tok/s": render.cell(_n(1), "output_throughput"),
        "TTFT p50 s": render.cell(_n(3), "ttft_p50_s"),
        "TTFT p99 s": render.cell(_n(3), "ttft_p99_s"),
        "TPOT p50 ms": render.cell(lambda v: render.num(None if v is None else v * 1000, 1), "tpot_p50_s"),
        "backlog growth": render.cell(_n(1), "queue_growth"),
        "kept up": render.cell(
            lambda k, rate, over: (
                render.MISSING
                if k is None
                else ("yes" if k else "no") + (" <-" if over is not None and rate == over else "")
            ),
            "kept_up",
            "offered_rate",
            "overloaded_at",
        ),
    }
    for slo in f.slos:
        good = f.open_slo.filter(pl.col("slo") == slo.name).select(
            "point_id",
            "offered_rate",
            **{f"g_{slo.name}": "goodput_rps", f"a_{slo.name}": "attainment", f"m_{slo.name}": "met"},
        )
        frame = openloop.join_on_rate(frame, good)  # on the rate's key, never the raw float
        columns[f"goodput {slo.name} req/s"] = render.cell(
            lambda g, a, met: render.MISSING if g is None else f"{render.num(g, 2)} ({a:.0%})" + ("" if met else " x"),
            f"g_{slo.name}",
            f"a_{slo.name}",
            f"m_{slo.name}",
        )
    if f.slos:
        text.append(
            "Goodput per SLO: requests per second that met every limit (in brackets the share that did; "
            "'x': the level misses the SLO at its percentiles)."
        )
    return [Section("Open loop: goodput against offered rate", text, frame.select(**columns))]


def _energy_section(f: Findings, tables=None) -> Section:
    """Joules per output token and output tok/s per kW at each level, or why there are none
    (``tables``: to name the points whose power covers other GPUs than the server's)."""
    title = "Energy per token"
    if not energy_mod.measured(f.energy):
        return Section(
            title,
            [
                energy_mod.NO_POWER[0].upper() + energy_mod.NO_POWER[1:] + " (GPU hosts with NVML "
                "give real figures; `sweep bench` on its own measures no power)."
            ],
        )
    text = [
        "Joules per output token at each level, and in brackets output tok/s per kW (= 1000 / J per token): "
        "the GPUs' power sampled every 0.5 s while the level ran, summed over the GPUs the server uses "
        "(tp x pp x dp from its argv, on every host it spans); energy = mean power x the level's wall "
        "time, over its output (completion) tokens."
    ]
    other = energy_mod.other_gpus(tables, f.energy) if tables is not None else pl.DataFrame()
    if other.height:
        text.append(
            "WARNING: the power of "
            + ", ".join(
                f"{r['label']} ({r['power_gpus']} GPUs summed, the server uses {r['gpus']})"
                for r in other.head(6).iter_rows(named=True)
            )
            + (" ..." if other.height > 6 else "")
            + " covers other GPUs than the server's (results measured "
            "before power was read on the server's GPUs only): their energy is not the server's."
        )
    if f.summary.get("dry_run"):
        text.append(
            "DRY RUN: the watts are the fake server's power model (sweep/fake/model.py), not a GPU's; "
            "energy is at real speed."
        )
    cells = f.energy.join(
        f.levels.select("point_id", "concurrency", "label", "order"), on=["point_id", "concurrency"], how="inner"
    ).with_columns(
        cell=render.cell(
            lambda j, kw: render.MISSING if j is None else f"{j:.2f} J ({render.num(kw, 1)})", "j_per_token", "tok_s_kw"
        )
    )
    missing = cells.filter(pl.col("j_per_token").is_null())["label"].unique().sort().to_list()
    if missing:
        text.append(
            f"No power figures ('{render.MISSING}') for: {', '.join(missing[:6])}"
            f"{' ...' if len(missing) > 6 else ''} ({energy_mod.NO_POWER})."
        )
    return Section(title, text, _level_pivot(cells, pl.col("cell")))


def _runs_cell(ok: int | None, failed: int | None, status: str | None) -> str:
    """'3', '2 (1 failed)', or '-' with why for a point without runs ('- (pruned)', '- (failed)')."""
    if ok is None:
        return render.MISSING + (f" ({status})" if status and status != "ok" else "")
    return f"{ok} ({failed} failed)" if failed else str(ok)


def _single_stream_section(f: Findings, images: list[str]) -> Section:
    columns: Columns = {
        "tok/s": render.cell(_n(1), "tok_s"),
        "min-max": render.cell(
            lambda lo, hi: render.MISSING if lo is None and hi is None else f"{render.num(lo)}-{render.num(hi)}",
            "tok_s_min",
            "tok_s_max",
        ),
        "speedup": render.cell(render.marked, "speedup", "within_noise"),
        "95% CI": render.cell(render.interval, "ci_low", "ci_high"),
        "verdict": "verdict",
        "accept len (single stream)": render.cell(_n(2), "accept_length"),
        "note": "note",
    }
    table = f.single.select(
        point="label",
        baseline=pl.when("baseline").then(pl.lit("(is a baseline)")).otherwise("baseline_label"),
        runs=render.cell(_runs_cell, "runs", "failed_runs", "status"),
        **columns,
    )
    return Section(
        "Single stream",
        [
            "Decode speed of one request at a time: median over the runs (min-max beside it), and the "
            "speedup of the median over the matched baseline's (same model, tp and NCCL profile). "
            f"'{render.NOISE_MARK}' marks a speedup whose interval contains 1 (within run-to-run noise). "
            "Accept len: the single-stream runs' median (Drafter acceptance gives the concurrency levels')."
        ],
        table,
        images,
    )


def _level_pivot(levels: pl.DataFrame, cell: pl.Expr) -> pl.DataFrame:
    """Rows: points in report order; columns: C=<level>; cells: ``cell``."""
    if levels.is_empty():
        return pl.DataFrame()
    concurrencies = sorted(levels["concurrency"].unique().to_list())
    wide = (
        levels.with_columns(cell=cell, c=pl.format("C={}", "concurrency"))
        .pivot(on="c", index=["order", "label"], values="cell")
        .sort("order")
    )
    return wide.select(pl.col("label").alias("point"), *[f"C={c}" for c in concurrencies])


def _throughput_cell(value: float | None, ratio: float | None, noisy: bool | None) -> str:
    """'1,234 (0.93x)': throughput, and its ratio to the baseline when there is one."""
    return render.num(value, 0) + ("" if ratio is None else f" ({render.judged_mark(ratio, noisy)})")


def _stop_note(tables) -> list[str]:
    """How the levels ended, when a stop rule ended some early (empty otherwise)."""
    lv = tables["levels"].select("stopped_early", "requests", "planned_requests", "throughput_precision").collect()
    stopped = lv.filter(pl.col("stopped_early").fill_null(False))
    if not stopped.height:
        return []
    sent, planned = lv["requests"].sum(), lv["planned_requests"].drop_nulls().sum()
    share = f"{sent / planned:.0%} of the {planned:,} requests the fixed rounds would have sent" if planned else ""
    return [
        f"Stop rule (benchmark.concurrency.stop): {stopped.height} of {plural(lv.height, 'level')} ended once their "
        f"throughput was known well enough (median precision +-{stopped['throughput_precision'].median():.1%}); "
        f"the levels sent {share}. Levels table: stopped_early, planned_requests, throughput_precision."
    ]


def _concurrency_section(f: Findings, images: list[str], notes: Sequence[str] = ()) -> Section:
    cell = render.cell(_throughput_cell, "output_throughput", "throughput_ratio", "within_noise")
    return Section(
        "Concurrency",
        [
            "Output throughput (tok/s of the whole server) at each concurrency level, and in brackets "
            "its ratio to the matched baseline at the same level. "
            f"'{render.NOISE_MARK}' marks a ratio within noise (its interval: the relative width of the level's "
            "per-request tok/s interval, around the throughput ratio, widened by the level-wide noise; "
            f"{noise.describe_level_noise(f.level_noise, f.level_noise_repeats)}: see Method).",
            *notes,
        ],
        _level_pivot(f.levels, cell),
        images,
    )


def _best_section(f: Findings) -> Section:
    columns: Columns = {
        "tok/s": render.cell(_n(0), "value"),
        "vs its baseline": render.cell(lambda r, v: render.marked(r, v == "within noise"), "speedup", "verdict"),
        "verdict": "verdict",
        "runner-up": "runner_up",
        "runner-up tok/s": render.cell(_n(0), "runner_up_value"),
        "margin": render.cell(lambda m, noisy: render.marked(m, noisy, render.change), "margin", "margin_within_noise"),
        "margin 95% CI": render.cell(
            lambda lo, hi: (
                render.MISSING if lo is None or hi is None else f"{render.change(lo)} .. {render.change(hi)}"
            ),
            "margin_low",
            "margin_high",
        ),
    }
    several = f.best["workload"].n_unique() > 1 if "workload" in f.best.columns else False
    table = f.best.select(
        *([pl.col("workload")] if several else []),
        C="concurrency",
        best=pl.when("baseline").then(pl.col("label") + " (baseline)").otherwise("label"),
        **columns,
    )
    return Section(
        "Best configuration per concurrency level",
        [
            "Highest output throughput at each level, baselines included"
            + (
                " and ranked within each workload (a workload is a traffic mix, not a setup: the configurations "
                "are named without it)"
                if several
                else ""
            )
            + "; its ratio to its own baseline's throughput and that ratio's verdict; its margin over the "
            f"runner-up with the margin's 95% interval, '{render.NOISE_MARK}' when that contains 0 (the runner-up "
            "is as good, within run-to-run noise). Both intervals: the requests' spread widened by the level-wide "
            f"noise ({noise.describe_level_noise(f.level_noise, f.level_noise_repeats)})."
        ],
        table,
    )


def _decisions_section(directory: Path) -> list[Section]:
    """How ``decide`` ended each pick it measured again (``decisions.parquet``): none without it."""

    d = decisions(directory)
    if not d.height:
        return []
    pct = lambda v: render.MISSING if v is None else ("inf" if v == float("inf") else render.change(v))  # noqa: E731
    counts = {o: int((d["outcome"] == o).sum()) for o in ("decided", "equal", "budget")}

    again = read_columns(directory, "levels", ["decide_round", "wall_s"]).filter(pl.col("decide_round").is_not_null())
    bench = float(again["wall_s"].sum() or 0.0)  # each re-measured level once (decisions may share one)
    margin = float(d["practical_margin"][0])
    table = d.select(
        decision="subject",
        **({"workload": "workload"} if (d["workload"] != "").any() else {}),
        ended="outcome",
        pick="pick_label",
        other="other_label",
        first=pl.struct("margin_first", "low_first", "high_first").map_elements(
            lambda r: f"{pct(r['margin_first'])} ({pct(r['low_first'])} .. {pct(r['high_first'])})",
            return_dtype=pl.String,
        ),
        now=pl.struct("margin", "low", "high").map_elements(
            lambda r: f"{pct(r['margin'])} ({pct(r['low'])} .. {pct(r['high'])})", return_dtype=pl.String
        ),
        measurements=pl.format("{} / {}", "repeats_pick", "repeats_other"),
        bench_s=pl.col("bench_s").round(1),
        why="detail",
    )
    return [
        Section(
            "Decisions measured again (decide)",
            [
                f"{plural(d.height, 'pick')} within noise after the grid had their two candidates measured again "
                "in pairs (back to back on one host, their order reversed every other round, A B B A) and judged "
                "on those pairs alone (the mean of log(pick / other) over the rounds, its 95% t interval; never "
                f"pooled with the grid's figures): {counts['decided']} decided (the interval excludes 0), "
                f"{counts['equal']} equal (the interval within +-{margin:.0%}: either will do), {counts['budget']} "
                f"undecided when the budget ran out (the grid's pick stands); {plural(again.height, 'level')} "
                f"measured again, {bench:,.1f} s of benchmark (as measured; 'bench_s': a decision's own, shared ones "
                "counted in each). 'first': the pick's margin over the other and its interval from the grid; "
                "'now': from the pairs, as every table here reads a decided or equal one (a pick changes only "
                "where it was decided the other way); 'measurements': of the pick's and the other's levels, "
                "the grid's included."
            ],
            table,
        )
    ]


def _crossover_section(f: Findings, images: list[str]) -> Section:
    columns: Columns = {
        "ahead up to C": "ahead_up_to",
        "first behind at C": "first_behind",
        "slower from C": "crossover",
        "crosses 1 near C": render.cell(_n(0), "crossover_est"),
        "at lowest C": render.cell(render.ratio, "ratio_at_min"),
        "at highest C": render.cell(render.ratio, "ratio_at_max"),
        "outcome": "outcome",
    }
    table = f.crossover.select(point="label", baseline="baseline_label", **columns)
    return Section(
        "Where speculation stops paying",
        [
            "For each speculative point, by its output throughput against its baseline's at each level (the "
            "ratios and verdicts of the Concurrency table: ahead and behind are beyond noise, a level within "
            "noise is neither): the last level ahead before it first falls behind ('ahead up to'), that level "
            "('first behind'), where the ratio crosses 1 between them (interpolated in log concurrency), "
            "and the level from which it stays behind at every higher level measured ('slower from'). No "
            "'first behind': never behind beyond noise; no 'ahead up to': not ahead before it falls behind; "
            "'mixed': behind at some levels and ahead at a higher one. Here "
            f"{noise.describe_level_noise(f.level_noise, f.level_noise_repeats)}."
        ],
        table,
        images,
    )


def _grid_sections(f: Findings, images: list[str]) -> list[Section]:
    """The speedup grid: drafter (rows) by speculative shape (columns), a table per NCCL profile,
    at single stream and at the highest concurrency level."""
    sources = [
        (
            "single stream (C=1)",
            f.single.filter(~pl.col("baseline")).with_columns(
                value=render.cell(render.marked, "speedup", "within_noise")
            ),
        )
    ]
    measured = f.levels.filter(~pl.col("baseline") & pl.col("throughput_ratio").is_not_null())
    if measured.height:
        top = cast(Optional[int], measured["concurrency"].max())  # of an integer column
        sources.append(
            (
                f"C={top}, output throughput",
                f.levels.filter(~pl.col("baseline") & (pl.col("concurrency") == top)).with_columns(
                    value=render.cell(render.judged_mark, "throughput_ratio", "within_noise")
                ),
            )
        )
    out = [
        Section(
            "Speedup grid",
            [
                "Speedup over the matched baseline, drafter (rows) by speculative shape (columns), one "
                f"table per NCCL profile and workload; '{render.NOISE_MARK}' marks a speedup within noise (at a "
                "level: the Concurrency table's verdict), a word says why a cell has none."
            ],
            images=images,
        )
    ]
    for title, frame in sources:
        frame = frame.with_columns(
            value=pl.when(pl.col("value") == render.MISSING)
            .then(pl.coalesce(pl.col("note").str.replace("point ", ""), pl.lit(render.MISSING)))
            .otherwise("value"),
            drafter=pl.col("drafter").fill_null(render.MISSING),
        )
        for (workload, group, profile), panel in frame.group_by(["workload", "group", "profile"], maintain_order=True):
            specs = sorted(panel["spec"].unique().to_list(), key=natural_key)
            wide = panel.pivot(on="spec", index="drafter", values="value", aggregate_function="first")
            rank = {d: i for i, d in enumerate(sorted(wide["drafter"].to_list(), key=natural_key))}
            name = " ".join(x for x in (workload, group, profile) if x) or "all points"
            out.append(
                Section(
                    f"{name}, {title}",
                    [],
                    wide.sort(pl.col("drafter").replace_strict(rank)).select("drafter", *specs),
                    level=3,
                )
            )
    return out


def _env_section(f: Findings, images: list[str]) -> Section:
    table = f.env.select(
        configuration=pl.when("baseline").then(pl.col("config") + " (baseline)").otherwise("config"),
        profile="profile",
        against="reference",
        **{
            "single stream": render.cell(render.ratio, "single_stream_ratio"),
            "lowest C": render.cell(render.ratio, "ratio_min_level"),
            "highest C": render.cell(render.ratio, "ratio_max_level"),
            "geomean over C": render.cell(render.ratio, "geomean_ratio"),
            "range": render.cell(lambda lo, hi: f"{render.ratio(lo)}-{render.ratio(hi)}", "min_ratio", "max_ratio"),
        },
    )
    return Section(
        "NCCL profiles",
        [
            "Each configuration under an NCCL profile, relative to the same configuration under the "
            "reference profile (output throughput per level; median tok/s for single stream)."
        ],
        table,
        images,
    )


def _acceptance_section(f: Findings) -> Section:
    a = f.acceptance
    if not a.height:
        return Section("Drafter acceptance", ["No speculative point with a drafter."])
    rates = lambda v: render.MISSING if not v else " ".join(render.MISSING if x is None else f"{x:.0%}" for x in v)  # noqa: E731
    pct = lambda v: render.MISSING if v is None else f"{v:.0%}"  # noqa: E731
    table = a.select(
        point="label",
        steps="steps",
        positions="positions",
        **{
            "accept len": render.cell(
                lambda v, src: (
                    render.MISSING if v is None else f"{v:.2f}" + ("" if src == "levels" else " (single stream)")
                ),
                "accept_length",
                "accept_from",
            ),
            "accept rate": render.cell(pct, "accept_rate"),
            "per position": render.cell(rates, "position_rates"),
            "1st position": render.cell(pct, "first_rate"),
            "predicted len": render.cell(_n(2), "predicted_length"),
            "verdict": pl.col("verdict").fill_null(render.MISSING),
        },
    )
    flagged = acceptance.flagged_lines(a)
    return Section(
        "Drafter acceptance",
        [
            "Tokens per verify step (accept len, the bonus token included: the median over the concurrency "
            "levels, '(single stream)' where no level measured it, so it may differ from the Single stream "
            "table's), accepted / proposed drafts (accept "
            "rate), per draft position where the server's accept histogram was recorded, and what a chain whose "
            "positions accept like its first would reach (predicted len; the first position from the histogram "
            "or from the same drafter's steps=1 point). 'broken': accept rate under "
            f"{acceptance.NEAR_ZERO:.0%}; 'low': under {acceptance.FAR_BELOW:.0%} of the predicted gain.",
            *[f"- {line}" for line in flagged],
        ],
        table,
    )


def _workload_sections(f: Findings, tables) -> list[Section]:
    """Each drafter's accept length and speedup across workloads; none unless the results hold several."""
    frame = workloads_mod.by_workload(tables, f.single, f.levels)
    if not frame.height:
        return []
    table = frame.select(
        configuration="configuration",
        workload="workload",
        **{
            "accept len": render.cell(
                lambda v, src: render.MISSING if v is None else f"{v:.2f}" + ("" if src == "server" else " (requests)"),
                "accept_length",
                "accept_source",
            ),
            "speedup C=1": render.cell(render.ratio, "speedup"),
            "throughput ratio": render.cell(
                lambda r, c: render.MISSING if r is None else f"{render.ratio(r)} at C={c}",
                "throughput_ratio",
                "concurrency",
            ),
        },
    )
    return [
        Section(
            "Acceptance per workload",
            [
                "Each speculative configuration on each workload its points ran (the workload its requests "
                "record; the configuration: its grid axes without the one choosing the workload): its accept "
                "length, the server's where measured, else the requests' '(requests)'; its single-stream speedup "
                "over its baseline on the same workload; its output-throughput ratio to that baseline at the "
                "highest concurrency level both measured.",
                *[f"- {line}" for line in workloads_mod.lines(frame)],
            ],
            table,
        )
    ]


def _startup_section(f: Findings, images: list[str]) -> Section:
    s = f.startup
    cols = [*PHASES, "other_s", "startup_s"]
    table = s.select(point="label", status="status", **{c.removesuffix("_s"): render.cell(_n(1), c) for c in cols})
    mean = s.select(pl.col(cols).mean())
    paragraphs = [
        "Seconds from launch to ready, by phase; 'other' is the launch overhead and the gaps between logged phases."
    ]
    if s.height and mean["startup_s"][0]:
        total = mean["startup_s"][0]
        shares = ", ".join(f"{c.removesuffix('_s')} {mean[c][0] / total:.0%}" for c in cols[:-1] if mean[c][0])
        paragraphs.append(
            f"Mean startup {total:.0f} s over {plural(s['startup_s'].drop_nulls().len(), 'point')}: {shares}."
        )
    return Section("Startup phases", paragraphs, table, images)


def _last_line(text: str | None, width: int = 120) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return render.MISSING if not lines else lines[-1].strip()[:width]


def _failures_section(f: Findings, plan: dict) -> list[Section]:
    out: list[Section] = []
    if f.failures.height:
        out.append(
            Section(
                "Failed and invalid points",
                [
                    "Where each point stopped and why; the last line of its server log, the full log "
                    "being in DIR/logs/<point_id>.log."
                ],
                f.failures.select(
                    point="label",
                    status="status",
                    phase="failure_phase",
                    reason="failure_reason",
                    fix="failure_fix",
                    errors="errors",
                    attempts="attempts",
                    **{"last log line": render.cell(_last_line, "log_tail")},
                ),
            )
        )
    else:
        out.append(Section("Failed and invalid points", ["None."]))
    if f.pruned.height:
        out.append(
            Section(
                "Pruned by the adaptive search",
                [
                    f"{plural(f.pruned.height, 'point')} of the plan were not run (search.strategy=adaptive): what the "
                    "measured points showed, and the prediction made from them, left each the best at no level, so "
                    "the pick of no SLO. The prediction is raised by an allowance (search.tolerance plus the noise "
                    "measured) before it must lose."
                ],
                f.pruned.select(point="label", why="reason", fix="fix"),
                level=3,
            )
        )
    if f.request_failures.height:
        out.append(
            Section(
                "Lost requests",
                ["Points that finished but lost requests."],
                f.request_failures.select(
                    point="label",
                    **{
                        "failed single": "failed_single",
                        "failed in levels": "failed_levels",
                        "most frequent error": "first_error",
                        "times": "error_count",
                    },
                ),
                level=3,
            )
        )
    overall = [w for w in plan.get("warnings") or [] if isinstance(w, str)]
    if f.warnings.height or overall:
        out.append(
            Section(
                "Plan warnings", [f"- {w}" for w in overall], f.warnings.select("warning", "points", "labels"), level=3
            )
        )
    return out


def _method_section(f: Findings) -> Section:
    return Section(
        "Method",
        [
            "- Matching: each speculative point is compared with the baseline the plan matched it to "
            "(baseline_id: same model, tp and NCCL profile); tables name it.",
            "- Single-stream speedup: ratio of median tok/s over the ok runs.",
            f"- Noise: {noise.describe()} A speedup whose interval contains 1 is marked '{render.NOISE_MARK}' "
            "(within noise). At a concurrency level the interval is the mean per-request tok/s ratio's, from the "
            "level's request rows, applied around the output throughput ratio as a relative width, then widened "
            "by the level-wide noise of both levels compared (in log space, z x sigma x sqrt 2 added in "
            "quadrature), sigma the sweep's own (see Picks and their noise) but never under a floor of "
            f"{noise.LEVEL_NOISE_FLOOR:.0%} per level: a level is measured once, so its requests' spread alone "
            "cannot call a difference faster or slower. Here "
            f"{noise.describe_level_noise(f.level_noise, f.level_noise_repeats)}. One rule (sweep/analysis/noise.py `judged`) makes "
            "every verdict at a level: the Concurrency table's marks, the speedup grid, the best per level, "
            "where speculation stops paying, the summary, the SLO picks, and --vs and history at a level.",
            "- Crossover: behind and ahead are beyond noise (a level within noise is neither); ahead up to the "
            "last level ahead before the point first falls behind its baseline, slower from the lowest level "
            "from which it is behind at every higher level, mixed when it is behind at some levels and ahead at "
            "a higher one; the crossing is interpolated linearly in log concurrency.",
            "- Workloads: the client-side axes that set only benchmark settings (role benchmark: the workload, "
            "max_tokens...) are traffic mixes on one server, not setups: every pick (best per level, fastest, "
            "SLOs, the summary) is made within one workload, names the setup without it, and never compares "
            "two workloads.",
            "- One metric per comparison: every ratio at a level and its verdict are of output throughput, its "
            "interval the per-request tok/s interval's relative width around it; every 'best' is ranked by the "
            "absolute figure (tok/s, or tok/s per GPU under an SLO), its ratio beside it.",
            "- NCCL profiles are compared with one reference profile"
            + (f" ({f.env['reference'][0]})" if f.env.height else "")
            + ": --nccl-reference when given, else the one named default/none/off, else the first.",
            "- Frontier: per-user speed = a request's output tokens / its latency (TTFT included), mean over "
            "the level's ok requests; output tok/s per GPU = the level's completion tokens / wall time / "
            "the GPUs the server uses (tp x pp x dp from its argv; the host's gpu_count where it names none); "
            "Pareto frontier within each panel.",
            "- SLOs: each limit at its percentile over the level's requests (failed ones meet none); highest "
            "concurrency meeting it interpolated linearly in log concurrency; goodput counts the requests that "
            "met every limit themselves.",
            f"- Picks and their noise: {_level_noise_text(f)} The best at each level: its margin over the "
            "runner-up has the interval of the two levels' per-request tok/s ratio, as a relative width around "
            "the throughput ratio, widened by that level-wide noise on both sides; the SLOs: "
            f"{slo_noise.describe()}.",
            '- Every figure is recomputable from the Parquet tables: `python -m sweep query DIR "SQL"`.',
        ],
    )


def _level_noise_text(f: Findings) -> str:
    if f.level_noise_repeats and f.level_noise is not None:
        return (
            f"levels measured more than once (benchmark.repeats) show a level's run-to-run noise directly: the spread of log "
            f"throughput between repeated measurements of the same level, pooled ({f.level_noise_repeats} "
            f"degrees of freedom): {f.level_noise:.1%} here; it stands in for the scatter of the curves about "
            "smooth ones (which counts a curve's bends as noise), and a level measured R times has 1/sqrt(R) "
            "of it in its pooled figure."
        )
    if f.level_noise is None:
        return (
            "a level is measured once: its level-wide run-to-run noise would come from the scatter of "
            "the throughput curves about smooth ones, but no configuration has the 5 levels that needs: "
            f"it is unknown, and the floor of {noise.LEVEL_NOISE_FLOOR:.0%} per level stands in."
        )
    return (
        f"a level is measured once, and its requests run together, so what slows the whole level moves "
        f"them all alike: its run-to-run noise is the scatter of the sweep's throughput curves about smooth "
        f"ones (a cubic in log concurrency per configuration, residuals pooled): {f.level_noise:.1%} here."
    )


PLOTS = {
    "single_stream.png": lambda f, p: plots.plot_single_stream(f.single, p),
    "concurrency.png": lambda f, p: plots.plot_concurrency(f.levels, p),
    "speedup_vs_concurrency.png": lambda f, p: plots.plot_speedup_curves(f.levels, f.crossover, p),
    "speedup_grid.png": lambda f, p: plots.plot_speedup_grid(f.single, f.levels, p),
    "nccl_effect.png": lambda f, p: plots.plot_env_effect(
        f.levels, p, f.env["reference"].first() if f.env.height else None
    ),
    "startup.png": lambda f, p: plots.plot_startup(f.startup, p),
    "frontier.png": lambda f, p: plots.plot_frontier(f.frontier, p),
}


_CHARTS = {
    "single_stream.png": lambda f: charts.chart_single_stream(f.single),
    "concurrency.png": lambda f: charts.chart_concurrency(f.levels),
    "speedup_vs_concurrency.png": lambda f: charts.chart_speedup_curves(f.levels, f.crossover),
    "speedup_grid.png": lambda f: charts.chart_speedup_grid(f.single, f.levels),
    "nccl_effect.png": lambda f: charts.chart_env_effect(
        f.levels, f.env["reference"].first() if f.env.height else None
    ),
    "startup.png": lambda f: charts.chart_startup(f.startup),
    "frontier.png": lambda f: charts.chart_frontier(f.frontier),
}
"""The HTML chart in place of each PNG plot (same name, same frames)."""


def _chart_id(name: str) -> str:
    """The HTML id of the chart in place of the plot ``name`` (``concurrency.png`` -> ``chart-concurrency``)."""
    return "chart-" + name.removesuffix(".png")


def html_charts(f: Findings) -> dict[str, str]:
    """Every chart there is data for, as HTML fragments by plot name (plotly.js left out)."""
    drawn = {name: fn(f) for name, fn in _CHARTS.items()}
    return {name: charts.fragment(fig, _chart_id(name)) for name, fig in drawn.items() if fig is not None}


def draw(f: Findings, out_dir: Path) -> dict[str, Path]:
    """Write every plot there is data for; returns {file name: path}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = {name: fn(f, out_dir / name) for name, fn in PLOTS.items()}
    return {name: path for name, path in drawn.items() if path is not None}


def build(
    directory: str | Path,
    *,
    out_dir: str | Path | None = None,
    with_plots: bool = True,
    env_reference: str | None = None,
    vs: str | Path | None = None,
    slos: list | None = None,
    frontier_by: str | None = None,
) -> Report:
    """Analyse ``directory`` and return the report's sections, Markdown and HTML; plots are written to
    ``out_dir`` (default DIR/report) when ``with_plots``, and drawn as charts in the HTML. ``slos``: the SLOs to judge by
    (``sweep.analysis.slo.SLO``; default: the experiment's ``benchmark.slo``, from
    DIR/experiment.yaml); ``frontier_by``: the frontier's panels (an axis name, or 'all')."""
    directory = Path(directory)
    tables = load(directory)
    slos = slo_mod.from_experiment(directory) if slos is None else slos
    f = analyze(
        tables,
        env_reference=env_reference,
        slos=slos,
        frontier_by=frontier_by,
        policy_candidates=policy_mod.candidates_of(read_experiment(directory)),
    )
    out = Path(out_dir) if out_dir else directory / "report"
    drawn = draw(f, out) if with_plots else {}
    img = lambda *names: [n for n in names if n in drawn]  # noqa: E731
    plan = read_plan(directory)  # {} without one (a directory written by ``bench --out`` has none)
    sections = [
        header(directory, f, plan),
        deploy.deploy_section(f),
        _about_section(directory, f, plan),
        _summary_section(f),
        *deploy.policy_sections(f),
        *_frontier_section(f, img("frontier.png")),
        *_slo_sections(f),
        *open_loop_sections(f),
        _energy_section(f, tables),
        _single_stream_section(f, img("single_stream.png")),
        _concurrency_section(
            f, img("concurrency.png"), _stop_note(openloop.closed_loop(tables)) + achieved.note(f.levels)
        ),
        *achieved.section(f.levels),
        _best_section(f),
        *_decisions_section(directory),
        _crossover_section(f, img("speedup_vs_concurrency.png")),
        *_grid_sections(f, img("speedup_grid.png")),
        _env_section(f, img("nccl_effect.png")),
        _acceptance_section(f),
        *_workload_sections(f, tables),
        _startup_section(f, img("startup.png")),
        *_failures_section(f, plan),
    ]
    if vs is not None:
        other, other_tables = Path(vs), load(vs)
        sections += compare_sections(
            f,
            analyze(other_tables, env_reference=env_reference, frontier_by=frontier_by),
            tables,
            other_tables,
            directory,
            other,
        )
    sections.append(_method_section(f))
    fragments = html_charts(f) if with_plots else {}
    page = render.html(sections, fragments, charts.script() if fragments else "", nav_after=2)  # after Deploy
    return Report(
        sections, render.markdown(sections), list(drawn.values()), page, files=deploy.config_files(f.policies, f)
    )


def write(report: Report, out_dir: Path) -> Path:
    """Write report.md and report.html into ``out_dir`` (the plots are already there); returns
    report.md's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.md"
    atomic.write_text(path, report.markdown)
    if report.html:
        atomic.write_text(out_dir / "report.html", report.html)
    for name, text in report.files.items():
        atomic.write_text(out_dir / name, text)
    return path


# --- where the report's files go, and how they get there whole ------------------------------------

_REPORT_FILES = ("report.md", "report.html", *PLOTS)  # what a report folder holds; nothing else is touched


def _is_report_file(name: str) -> bool:
    """A file a report writes: one of ``_REPORT_FILES``, or a policy's config (``policy-<slug>.json``)."""
    return name in _REPORT_FILES or (name.startswith("policy-") and name.endswith(".json"))


@dataclass
class Written:
    """A report written by ``publish``: the report, its report.md, and why it is not where asked
    (None: it is; else a sentence naming the folder that could not be written)."""

    report: Report
    path: Path
    moved: Optional[str] = None


def _fallback_dir(directory: Path) -> Path:
    """Where the report of a results directory that cannot be written goes: the user's cache
    (``$XDG_CACHE_HOME``, else ``~/.cache``), ``sweep/reports/<name>-<hash of its path>``."""

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    resolved = directory.resolve()
    return cache / "sweep" / "reports" / f"{resolved.name}-{hashlib.sha1(str(resolved).encode()).hexdigest()[:8]}"


def _scratch(target: Path) -> Path:
    """A new empty folder beside ``target`` (same filesystem: renamed onto it at the end), hidden and
    ending in .tmp; OSError where that folder cannot be written."""

    if target.exists() and not target.is_dir():
        raise NotADirectoryError(20, "a file is in the way", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target)
    return Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=atomic.TMP_SUFFIX))


def _swap(scratch: Path, target: Path) -> None:
    """Put the finished report in ``scratch`` at ``target``: a folder holding only a report's files
    (or none) is replaced by one rename, so it is the old report or the new one, never a mix; a
    folder with other files too (``--out`` at a shared folder) gets each file by its own rename, and
    loses the plots the new report does not have. Ctrl-C waits for the renames."""

    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        if not target.exists():
            scratch.rename(target)
            return
        if not target.is_symlink() and all(_is_report_file(p.name) and p.is_file() for p in target.iterdir()):
            old = Path(_scratch_name(target, "old"))
            target.rename(old)
            try:
                scratch.rename(target)
            except BaseException:
                old.rename(target)
                raise
            shutil.rmtree(old, ignore_errors=True)
            return
        new = {p.name for p in scratch.iterdir()}
        for p in scratch.iterdir():
            p.replace(target / p.name)
        for name in _REPORT_FILES:
            if name not in new:
                (target / name).unlink(missing_ok=True)
        for old in target.glob("policy-*.json"):  # an earlier report's policies that are no more
            if old.name not in new and old.is_file():
                old.unlink()
        scratch.rmdir()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _remove_stale(target: Path, age_s: float = 86_400) -> None:
    """The temporaries of reports killed (kill -9) more than ``age_s`` ago beside ``target``; younger
    ones may be another report's at work."""

    for p in target.parent.glob(f".{target.name}.*{atomic.TMP_SUFFIX}"):
        try:
            if time.time() - p.lstat().st_mtime > age_s:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
        except OSError:
            continue


def _scratch_name(target: Path, what: str) -> str:

    return str(target.parent / f".{target.name}.{what}-{uuid.uuid4().hex[:8]}{atomic.TMP_SUFFIX}")


def publish(directory: str | Path, out_dir: str | Path | None = None, **options) -> Written:
    """``build`` and ``write`` the report of ``directory`` (``options``: build's) into ``out_dir``
    (default DIR/report) whole: it is built in a folder beside it and swapped in at the end, so an
    interrupted report leaves the old one as it was and no temporary behind. Where DIR cannot be
    written (a colleague's read-only share), the default goes to ``_fallback_dir`` instead and
    ``moved`` says so; an ``out_dir`` given that cannot be written is an OutputError (exit 7),
    raised before anything is built."""

    directory = Path(directory)
    check_sweep_dir(directory)  # a missing or wrong directory: its own error (exit 5), and nothing created
    target = Path(out_dir) if out_dir else directory / "report"
    moved = None
    try:
        scratch = _scratch(target)
    except OSError as e:
        why = e.strerror or type(e).__name__
        if out_dir:
            raise OutputError(
                f"cannot write the report in {target}: {why}", fix="pass --out a folder you can write"
            ) from None
        fallback = _fallback_dir(directory)
        moved = f"{target} cannot be written ({why}): the report went to {fallback} (--out DIR to choose)"
        target = fallback
        try:
            scratch = _scratch(target)
        except OSError as e2:
            raise OutputError(
                f"cannot write the report in {target} either: {e2.strerror or type(e2).__name__}",
                fix="pass --out a folder you can write",
            ) from None
    try:
        built = build(directory, out_dir=scratch, **options)
        write(built, scratch)
        _swap(scratch, target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    built.images = [target / p.name for p in built.images]
    return Written(built, target / "report.md", moved)
