"""The whole benchmark against one running server: single stream, then every concurrency level.

This is what ``python -m sweep bench`` runs and what the sweep runs on every grid point. Sequence:

1. probe ``/server_info`` (the only step that can raise: ``BenchError`` if nothing answers);
2. flush the cache, warmup runs, single-stream runs;
3. per level: flush the cache (resets the server's accept-length average), scrape ``/metrics``,
   run the closed loop while ``server_metrics.Sampler`` scrapes every ``metrics_every_s`` (with
   ``concurrency.stop``, until the throughput is known well enough: ``sweep.bench.stop``), scrape
   again, read ``/server_info``; then ``level_metrics`` turns the scrapes into the level's
   ``metrics_*`` columns and its rows of the ``metrics`` table; with a ``power`` source,
   ``sweep.bench.power.Meter`` samples the GPUs' watts meanwhile (the ``power_*``/``energy_*`` columns);
4. build the four tables with ``sweep.results.schema.from_rows``.

Every request's failure is a row with ``ok=False``; a server that dies mid-level gives a level
full of failures that still finishes, and the next levels fail fast on connect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

import pyarrow as pa

from sweep.bench import level_metrics as lm
from sweep.bench import power as pw
from sweep.bench import server_metrics as sm
from sweep.bench import stats
from sweep.bench.client import Clients, Endpoint
from sweep.bench.load import LevelRun, Notifier, RequestOptions, Sent, closed_loop_until, single_stream
from sweep.bench import workloads
from sweep.bench.workloads import Workload
from sweep.bench.workloads.fit import fit
from sweep.core.settings import BenchSettings
from sweep.core.errors import BenchError
from sweep.core.events import PointProgress
from sweep.results.schema import METRICS, from_rows
from sweep.results.writer import write_tables

TABLE_NAMES = ("requests", "single_stream", "levels", "metrics")
METRICS_EVERY_S = 2.0  # /metrics scrapes during a level: at 1 s, then every 2 s (SGLang renders one in ~15 ms)


@dataclass
class BenchResult:
    """The four result tables of one benchmark (schemas in ``sweep.results.schema``)."""

    requests: pa.Table
    single_stream: pa.Table
    levels: pa.Table
    server_info: Optional[dict] = None  # /server_info as read before the benchmark
    single_summary: dict = field(default_factory=dict)  # overall single-stream figures
    metrics: pa.Table = field(default_factory=METRICS.empty_table)  # the raw /metrics around each level

    def write(self, directory: str | Path) -> dict[str, Path]:
        """Write ``requests.parquet``, ``single_stream.parquet``, ``levels.parquet`` and
        ``metrics.parquet`` into ``directory``, each to a temporary name then renamed, so a reader
        never sees half a file (``sweep.results.writer.write_tables``)."""
        return write_tables(directory, {name: getattr(self, name) for name in TABLE_NAMES})


def check_url(url: str) -> str:
    """``url`` without a trailing slash; BenchError unless it is http(s)://HOST[:PORT]."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BenchError(f"--url {url!r} is not an http(s) server address",
                         fix="pass the server's base address, e.g. http://127.0.0.1:30000")
    return url.rstrip("/")


def check_settings(s: BenchSettings) -> None:
    """Reject settings that cannot run, naming the field (the rules: ``BenchSettings.problems``)."""
    for key, value, use in s.problems():
        raise BenchError(f"benchmark setting {key} = {value!r} is invalid", fix=f"use {use}")


def request_row(point_id: str, workload: Workload, api: str, s: Sent) -> dict:
    r = s.record
    q = workload.requests[s.prompt_index]
    return {
        "point_id": point_id, "phase": s.phase, "concurrency": s.concurrency, "seq": s.seq,
        "prompt_set": workload.name, "prompt_index": s.prompt_index, "api": api, "max_tokens": s.max_tokens,
        "workload": workload.name, "input_len_given": q.input_len, "output_len_given": q.output_len,
        "lengths_exact": q.lengths_exact,
        "conversation": q.conversation, "turn": q.turn, "prefix_group": q.group, "arrival_s": q.arrival_s,
        "start_at": r.start_at, "ttft_s": r.ttft_s if r.ok else None, "latency_s": r.latency_s,
        "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens, "chunks": r.chunks,
        **stats.request_figures(r),
        "chunk_times_s": r.chunk_times_s, "chunk_tokens": r.chunk_tokens,
        "accept_length": r.accept_length, "spec_verify_ct": r.spec_verify_ct,
        "spec_accept_histogram": r.accept_histogram,
        "finish_reason": r.finish_reason, "ok": r.ok, "error": r.error, "http_status": r.http_status,
    }


def single_row(point_id: str, s: Sent) -> dict:
    r = s.record
    return {
        "point_id": point_id, "run": s.seq + 1, "max_tokens": s.max_tokens, "prompt_index": s.prompt_index,
        "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
        "latency_s": r.latency_s, "ttft_s": r.ttft_s if r.ok else None,
        "tok_per_s": stats.tok_per_s(r.completion_tokens, r.latency_s) if r.ok else None,
        "accept_length": r.accept_length, "ok": r.ok, "error": r.error,
    }


def stop_columns(run: LevelRun) -> dict:
    """The levels columns that say how a level ended and how precisely it measured throughput."""
    p = run.precision
    return {"planned_requests": run.planned, "stopped_early": run.stopped_early,
            "stop_cancelled": run.cancelled, "steady_throughput": p.rate,
            "throughput_precision": p.half_width, "precision_batches": p.batches}


async def _level_metrics(side, url: str, point_id: str, c: int, before: Optional[str],
                         during: list[str]) -> tuple[dict, list[dict]]:
    """After a level: its last scrape, and every scrape parsed into columns and metrics rows."""
    after = await sm.scrape_text(side, url) if before is not None else None
    b, a = lm.index(sm.samples_of(before)), lm.index(sm.samples_of(after))
    d = [s for s in (lm.index(sm.samples_of(t)) for t in during) if s is not None]
    return lm.columns(b, d, a), lm.rows(point_id, c, b, d, a)


async def run_benchmark(server: Endpoint | str, settings: BenchSettings, *, point_id: str = "",
                        progress: Callable[[PointProgress], None] | None = None,
                        metrics_every_s: float = METRICS_EVERY_S, power: pw.PowerSource | None = None,
                        power_every_s: float = pw.POWER_EVERY_S) -> BenchResult:
    """Benchmark ``server`` (an ``Endpoint``: its URL and keys; or a URL, for a server that wants no
    key) as ``settings`` say; see the module docstring.

    ``progress`` gets a ``sweep.core.types.PointProgress`` as the benchmark goes: stage ``warmup`` or
    ``single`` with ``run`` (1-based) ``of`` n as each run starts, and stage ``level`` with its
    ``concurrency`` and ``done`` ``of`` n when a level starts (done 0) and as each of its requests ends
    (``stopped`` when it ended early, having measured enough). ``metrics_every_s`` is
    the period of the ``/metrics`` scrapes during a level (the first at half of it). ``power``: the
    watts of the GPUs serving (``sweep.bench.power``), sampled every ``power_every_s`` during each
    level; None (``sweep bench``): the energy columns are null.
    """
    endpoint = Endpoint.of(server)
    url = check_url(endpoint.url)
    check_settings(settings)
    workload = workloads.load(settings)  # a bad file fails here, before anything is sent
    notify = Notifier(progress)
    levels = list(settings.concurrency.levels)
    sent: list[Sent] = []
    level_rows: list[dict] = []
    metric_rows: list[dict] = []
    admin = endpoint.admin_headers()  # /flush_cache is an admin route
    async with Clients(settings.request_timeout_s, api_key=endpoint.api_key) as clients:
        side = clients.side
        info = await sm.probe(side, url)
        limit = (info or {}).get("max_req_input_len")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:  # the server's input cap
            workloads.check_context(workload, limit, max_tokens=None, what=f"the server's max_req_input_len at {url}",
                                    given_only=True)  # text: the server counts (an estimate must not refuse it)
        workload = await fit(side, url, workload, settings.api, settings.workload.output_scale if settings.workload else 1.0)
        opts = RequestOptions(url=url, api=settings.api, prompts=workload, seed=settings.seed,
                              temperature=settings.temperature, ignore_eos=settings.ignore_eos,
                              model=settings.model or sm.model_name_of(info), timeout_s=settings.request_timeout_s)
        ss = settings.single_stream
        if ss.runs + ss.warmup > 0:
            if settings.flush_between_levels:
                await sm.flush_cache(side, url, headers=admin)
            sent += await single_stream(clients, opts, runs=ss.runs, warmup=ss.warmup,
                                        max_tokens=ss.max_tokens, notify=notify)
        for c in levels:
            flushed = await sm.flush_cache(side, url, headers=admin) if settings.flush_between_levels else False
            before = await sm.scrape_text(side, url) if settings.server_metrics else None
            sampler = sm.Sampler(side, url, metrics_every_s) if before is not None else None
            meter = pw.Meter(power, power_every_s) if power is not None else None
            try:
                run = await closed_loop_until(clients, opts, concurrency=c, requests=settings.requests_at(c),
                                              max_tokens=settings.concurrency.max_tokens, notify=notify,
                                              stop=settings.concurrency.stop)
            finally:
                during = await sampler.stop() if sampler is not None else []
                watts, gpus = await meter.stop() if meter is not None else ([], 0)
            columns, rows = await _level_metrics(side, url, point_id, c, before, during)
            after_info = await sm.server_info(side, url) if flushed else None
            sent += run.sent
            metric_rows += rows
            figures = stats.level_figures([s.record for s in run.sent])
            tokens = sum(s.record.completion_tokens or 0 for s in run.sent if s.record.ok)
            level_rows.append({
                "point_id": point_id, "concurrency": c, "max_tokens": settings.concurrency.max_tokens,
                **figures, **pw.columns(watts, gpus, figures["wall_s"], tokens),
                "accept_length_server": sm.accept_length_of(after_info),
                "flushed": flushed,
                **stop_columns(run),
                **columns,
            })
    singles = [s for s in sent if s.phase == "single"]
    return BenchResult(
        requests=from_rows([request_row(point_id, workload, settings.api, s) for s in sent], "requests"),
        single_stream=from_rows([single_row(point_id, s) for s in singles], "single_stream"),
        levels=from_rows(level_rows, "levels"),
        metrics=from_rows(metric_rows, "metrics"),
        server_info=info,
        single_summary=stats.single_overall([s.record for s in singles]),
    )


def run(server: Endpoint | str, settings: BenchSettings, *, point_id: str = "",
        progress: Callable[[PointProgress], None] | None = None, metrics_every_s: float = METRICS_EVERY_S,
        power: pw.PowerSource | None = None) -> BenchResult:
    """``run_benchmark`` from synchronous code (its own event loop)."""
    return asyncio.run(run_benchmark(server, settings, point_id=point_id, progress=progress,
                                     metrics_every_s=metrics_every_s, power=power))
