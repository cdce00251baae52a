"""Terminal tables of a benchmark result (rich), the way an engineer reads them.

Built from the result tables themselves, so what is printed is exactly what was written.
"""

from __future__ import annotations

from typing import Optional

import pyarrow as pa
from rich.console import Console
from rich.table import Table

from sweep.analysis import position_rates
from sweep.core import achieved


def _f(value: Optional[float], digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value * 1000:,.1f}"


def _single_stream_table(single: pa.Table, summary: Optional[dict] = None) -> Table:
    """One row per run (tokens, seconds, tok/s, prompt tokens, TTFT, accept length) + overall."""
    t = Table(title="Single stream", title_justify="left")
    for col in ("run", "tokens", "seconds", "tok/s", "prompt tok", "TTFT ms", "accept len", "status"):
        t.add_column(col, justify="left" if col == "status" else "right")
    for r in single.to_pylist():
        t.add_row(
            str(r["run"]),
            str(r["completion_tokens"] or 0),
            _f(r["latency_s"], 2),
            _f(r["tok_per_s"]),
            "-" if r["prompt_tokens"] is None else str(r["prompt_tokens"]),
            _ms(r["ttft_s"]),
            _f(r["accept_length"], 2),
            "ok" if r["ok"] else str(r["error"]),
        )
    if summary and summary.get("runs"):
        t.add_section()
        t.add_row(
            "all",
            f"{summary['completion_tokens']:,}",
            _f(summary["seconds"], 2),
            _f(summary["tok_per_s"]),
            "",
            "",
            _f(summary["accept_length"], 2),
            f"{summary['ok']}/{summary['runs']} ok",
            style="bold",
        )
    return t


def _open(row: dict) -> bool:
    """An open-loop level's row (``benchmark.rates``, a trace replay), not a concurrency level's."""
    return row.get("arrival") is not None


def level_name(row: dict) -> str:
    """``C=8``, or an open-loop level's ``4 req/s`` (``trace 3.1 req/s``)."""
    if not _open(row):
        return f"C={row['concurrency']}"
    rate = "-" if row.get("offered_rate") is None else f"{row['offered_rate']:g} req/s"
    return f"trace {rate}" if row["arrival"] == "trace" else rate


def levels_table(levels: pa.Table) -> Optional[Table]:
    """One row per concurrency level (None without one)."""
    rows = [r for r in levels.to_pylist() if not _open(r)]
    if not rows:
        return None
    t = Table(title="Concurrency levels (latencies in ms)", title_justify="left")
    cols = (
        "C",
        "ok/total",
        "tok/s",
        "req/s",
        "tok/s/req",
        "lat avg",
        "lat p50",
        "lat p99",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "ITL p50",
        "ITL p99",
        "achieved C",
        "accept srv",
        "accept req",
    )
    for col in cols:
        t.add_column(col, justify="right")
    short = [r for r in rows if achieved.is_short(r["concurrency"], r["achieved_concurrency"])]
    if short:
        t.caption = (
            f"achieved C 'short': fewer than {achieved.SHORT:.0%} of C in flight on average (C="
            + ", ".join(str(r["concurrency"]) for r in short)
            + "): the figures are those of the load achieved"
        )
    for r in rows:
        style = (
            "red"
            if r["failed"]
            else "yellow"
            if achieved.is_short(r["concurrency"], r["achieved_concurrency"])
            else None
        )
        t.add_row(
            str(r["concurrency"]),
            f"{r['ok']}/{r['requests']}",
            _f(r["output_throughput"]),
            _f(r["request_throughput"], 2),
            _f(r["per_request_tok_s"]),
            _ms(r["latency_mean_s"]),
            _ms(r["latency_p50_s"]),
            _ms(r["latency_p99_s"]),
            _ms(r["ttft_p50_s"]),
            _ms(r["ttft_p99_s"]),
            _ms(r["tpot_p50_s"]),
            _ms(r["itl_p50_s"]),
            _ms(r["itl_p99_s"]),
            achieved.cell(r["concurrency"], r["achieved_concurrency"]),
            _f(r["accept_length_server"], 2),
            _f(r["accept_length_requests"], 2),
            style=style,
        )
    return t


def _open_loop_table(levels: pa.Table) -> Optional[Table]:
    """One row per open-loop level (None without one): offered against achieved rate, whether the
    server kept up (its backlog did not grow beyond chance), and the latencies."""
    rows = [r for r in levels.to_pylist() if _open(r)]
    if not rows:
        return None
    t = Table(title="Open-loop levels (latencies in ms; kept up: the backlog did not grow)", title_justify="left")
    for col in (
        "offered",
        "arrival",
        "drawn req/s",
        "achieved req/s",
        "ok/total",
        "tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "lat p99",
        "in flight max",
        "backlog +",
        "kept up",
        "wait max",
    ):
        t.add_column(col, justify="right")
    for r in rows:
        kept = "-" if r["kept_up"] is None else ("yes" if r["kept_up"] else "NO")
        arrival = r["arrival"] if r["arrival"] != "gamma" else f"gamma({r['burstiness']:g})"
        t.add_row(
            level_name(r),
            arrival,
            _f(r["arrival_rate"], 2),
            _f(r["achieved_rate"], 2),
            f"{r['ok']}/{r['requests']}",
            _f(r["output_throughput"]),
            _ms(r["ttft_p50_s"]),
            _ms(r["ttft_p99_s"]),
            _ms(r["tpot_p50_s"]),
            _ms(r["latency_p99_s"]),
            "-" if r["max_in_flight_seen"] is None else str(r["max_in_flight_seen"]),
            _f(r["queue_growth"]),
            kept,
            _ms(r["wait_max_s"]),
            style="red" if r["failed"] or r["kept_up"] is False else None,
        )
    return t


def _n(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


def server_metrics_table(levels: pa.Table) -> Optional[Table]:
    """What the server's /metrics said per level, or None when no level has metrics."""
    rows = [r for r in levels.to_pylist() if r["metrics_scrapes"] is not None]
    if not rows:
        return None
    t = Table(title="Server /metrics per level (gauges: mean over the scrapes during the level)", title_justify="left")
    for col in (
        "C",
        "scrapes",
        "running",
        "run max",
        "queued",
        "gen tok/s",
        "KV used",
        "cache hit",
        "accept len",
        "accept rate",
        "accept counted",
        "gen tokens",
        "prompt tokens",
    ):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(
            level_name(r).removeprefix("C="),
            str(r["metrics_scrapes"]),
            _f(r["metrics_running_reqs"]),
            _n(r["metrics_running_reqs_max"]),
            _f(r["metrics_queue_reqs"]),
            _f(r["metrics_gen_throughput"]),
            _f(r["metrics_token_usage"], 2),
            _f(r["metrics_cache_hit_rate"], 2),
            _f(r["metrics_spec_accept_length"], 2),
            _f(r["metrics_spec_accept_rate"], 2),
            _f(r["accept_length_metrics"], 2),
            _n(r["metrics_generation_tokens"]),
            _n(r["metrics_prompt_tokens"]),
        )
    return t


def _where(request: dict) -> str:
    """A requests row's level: ``C=8``, or ``4 req/s`` for an open-loop level's."""
    if request["phase"] == "rate":
        return "-" if request.get("offered_rate") is None else f"{request['offered_rate']:g} req/s"
    return f"C={request['concurrency']}"


def acceptance_table(requests: pa.Table, steps: Optional[int] = None) -> Optional[Table]:
    """Accept rate per draft position, single stream and per level, from the ok requests'
    ``spec_accept_histogram`` (SGLang's meta_info: /generate only); None when no request has one.
    ``steps`` (the server's speculative_num_steps) shows the positions no verify reached too."""

    sums: dict[str, list[int]] = {}
    for r in requests.select(["phase", "concurrency", "offered_rate", "ok", "spec_accept_histogram"]).to_pylist():
        hist = r["spec_accept_histogram"]
        if not r["ok"] or not hist or r["phase"] == "warmup":
            continue
        acc = sums.setdefault("single" if r["phase"] == "single" else _where(r), [])
        acc += [0] * (len(hist) - len(acc))
        for k, n in enumerate(hist):
            acc[k] += n
    sums = {k: h for k, h in sums.items() if sum(h)}
    if not sums:
        return None
    depth = max([len(h) - 1 for h in sums.values()] + [steps if isinstance(steps, int) else 0])
    t = Table(title="Accept rate per draft position", title_justify="left")
    for col in ("where", "verifies", "accept len", *(f"pos {k}" for k in range(1, depth + 1))):
        t.add_column(col, justify="left" if col == "where" else "right")
    for where, hist in sums.items():
        verifies = sum(hist)
        rates = position_rates(hist, depth)
        t.add_row(
            where,
            f"{verifies:,}",
            _f(1 + sum(k * n for k, n in enumerate(hist)) / verifies, 2),
            *("-" if x is None else f"{x:.0%}" for x in rates),
        )
    return t


def _errors_table(requests: pa.Table, limit: int = 10) -> Optional[Table]:
    """The most frequent request errors with their counts, or None when every request was ok."""
    counts: dict[tuple[str, str], int] = {}
    for r in requests.select(["phase", "concurrency", "offered_rate", "error", "ok"]).to_pylist():
        if not r["ok"]:
            where = r["phase"] if r["phase"] not in ("level", "rate") else _where(r)
            key = (where, (r["error"] or "?").split(":")[0])
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None
    t = Table(title="Failed requests", title_justify="left")
    for col in ("where", "error", "count"):
        t.add_column(col, justify="right" if col == "count" else "left")
    for (where, err), n in sorted(counts.items(), key=lambda kv: -kv[1])[:limit]:
        t.add_row(where, err, str(n))
    return t


def _server_line(info: Optional[dict]) -> Optional[str]:
    """One line naming what was benchmarked (version, model, speculative settings)."""
    if not info:
        return None
    parts = [
        f"SGLang {info['version']}" if info.get("version") else "server",
        str(info.get("served_model_name") or info.get("model_path") or "?"),
    ]
    algo = info.get("speculative_algorithm")
    if algo:
        parts.append(
            f"{algo} steps={info.get('speculative_num_steps')} topk={info.get('speculative_eagle_topk')} "
            f"draft={info.get('speculative_num_draft_tokens')}"
        )
    if info.get("tp_size"):
        parts.append(f"tp={info['tp_size']}")
    return "  ".join(parts)


def print_report(result, console: Optional[Console] = None) -> None:
    """Print the server line and every table of a ``BenchResult`` that has rows."""
    console = console or Console()
    line = _server_line(result.server_info)
    if line:
        console.print(line, style="bold")
    if result.single_stream.num_rows:
        console.print(_single_stream_table(result.single_stream, result.single_summary))
    if result.levels.num_rows:
        for table in (levels_table(result.levels), _open_loop_table(result.levels)):
            if table is not None:
                console.print(table)
        metrics = server_metrics_table(result.levels)
        if metrics is not None:
            console.print(metrics)
    accepted = acceptance_table(result.requests, (result.server_info or {}).get("speculative_num_steps"))
    if accepted is not None:
        console.print(accepted)
    errors = _errors_table(result.requests)
    if errors is not None:
        console.print(errors)
