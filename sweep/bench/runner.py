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
   with ``concurrency.refine``, then the levels ``sweep.bench.refine`` adds where an SLO's boundary
   or the crossover with the baseline lies (``levels: auto``: the coarse start, capped at the server's
   running-request cap), each run the same way and marked ``refined``;
4. per open-loop level (``benchmark.rates``, then a trace at its own timing with
   ``open_loop.replay``; ``_open_level``): the same flush, scrapes and power, with requests sent at
   their arrival times (``sweep.bench.openloop``), a levels row with concurrency 0 and the
   open-loop columns (offered and achieved rate, queue growth, kept_up);
5. build the four tables with ``sweep.results.schema.from_rows``.

Every request's failure is a row with ``ok=False``; a server that dies mid-level gives a level
full of failures that still finishes, and the next levels fail fast on connect.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

import pyarrow as pa

from sweep.bench import arrivals as arr
from sweep.bench import level_metrics as lm
from sweep.bench import openloop as ol
from sweep.bench import power as pw
from sweep.bench import refine, stats, workloads
from sweep.bench import server_metrics as sm
from sweep.bench.client import Clients, Endpoint
from sweep.bench.load import LevelRun, Notifier, RequestOptions, Sent, closed_loop_until, single_stream
from sweep.bench.workloads import Workload
from sweep.bench.workloads.fit import fit
from sweep.core import NO_CONTEXT, BenchError, BenchSettings, HostProgress, RunContext, slo_rule
from sweep.results import METRICS, from_rows, write_tables

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
    # per levels row, in order: what ``run_benchmark``'s ``window`` returned as the level began and ended
    windows: list[tuple[int | None, int | None]] = field(default_factory=list)

    def write(self, directory: str | Path) -> dict[str, Path]:
        """Write ``requests.parquet``, ``single_stream.parquet``, ``levels.parquet`` and
        ``metrics.parquet`` into ``directory``, each to a temporary name then renamed, so a reader
        never sees half a file (``sweep.results.writer.write_tables``)."""
        return write_tables(directory, {name: getattr(self, name) for name in TABLE_NAMES})


def check_url(url: str) -> str:
    """``url`` without a trailing slash; BenchError unless it is http(s)://HOST[:PORT]."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BenchError(
            f"--url {url!r} is not an http(s) server address",
            fix="pass the server's base address, e.g. http://127.0.0.1:30000",
        )
    return url.rstrip("/")


def check_settings(s: BenchSettings) -> None:
    """Reject settings that cannot run, naming the field (the rules: ``BenchSettings.problems``)."""
    for key, value, use in s.problems():
        raise BenchError(f"benchmark setting {key} = {value!r} is invalid", fix=f"use {use}")


def request_row(point_id: str, workload: Workload, api: str, s: Sent) -> dict:
    r = s.record
    q = workload.requests[s.prompt_index]
    return {
        "point_id": point_id,
        "phase": s.phase,
        "concurrency": s.concurrency,
        "seq": s.seq,
        "prompt_set": workload.name,
        "prompt_index": s.prompt_index,
        "api": api,
        "max_tokens": s.max_tokens,
        "workload": workload.name,
        "input_len_given": q.input_len,
        "output_len_given": q.output_len,
        "lengths_exact": q.lengths_exact,
        "conversation": q.conversation,
        "turn": q.turn,
        "prefix_group": q.group,
        "arrival_s": q.arrival_s,
        "start_at": r.start_at,
        "ttft_s": r.ttft_s if r.ok else None,
        "first_text_s": r.first_text_s if r.ok else None,
        "latency_s": r.latency_s,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "chunks": r.chunks,
        **stats.request_figures(r),
        **(
            {"arrival_s": s.arrival_s, "offered_rate": s.offered_rate, "wait_s": s.wait_s}
            if s.phase == ol.OPEN_PHASE
            else {}
        ),
        "chunk_times_s": r.chunk_times_s,
        "chunk_tokens": r.chunk_tokens,
        "accept_length": r.accept_length,
        "spec_verify_ct": r.spec_verify_ct,
        "spec_accept_histogram": r.accept_histogram,
        "finish_reason": r.finish_reason,
        "ok": r.ok,
        "error": r.error,
        "http_status": r.http_status,
    }


def single_row(point_id: str, s: Sent) -> dict:
    r = s.record
    return {
        "point_id": point_id,
        "run": s.seq + 1,
        "max_tokens": s.max_tokens,
        "prompt_index": s.prompt_index,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "latency_s": r.latency_s,
        "ttft_s": r.ttft_s if r.ok else None,
        "tok_per_s": stats.tok_per_s(r.completion_tokens, r.latency_s) if r.ok else None,
        "accept_length": r.accept_length,
        "ok": r.ok,
        "error": r.error,
    }


def _stop_columns(run: LevelRun) -> dict:
    """The levels columns that say how a level ended and how precisely it measured throughput."""
    p = run.precision
    return {
        "planned_requests": run.planned,
        "stopped_early": run.stopped_early,
        "stop_cancelled": run.cancelled,
        "steady_throughput": p.rate,
        "throughput_precision": p.half_width,
        "precision_batches": p.batches,
    }


async def _level_metrics(
    side, url: str, point_id: str, c: int, before: Optional[str], during: list[str]
) -> tuple[dict, list[dict]]:
    """After a level: its last scrape, and every scrape parsed into columns and metrics rows."""
    after = await sm.scrape_text(side, url) if before is not None else None
    b, a = lm.index(sm.samples_of(before)), lm.index(sm.samples_of(after))
    d = [s for s in (lm.index(sm.samples_of(t)) for t in during) if s is not None]
    return lm.columns(b, d, a), lm.rows(point_id, c, b, d, a)


def refinement(
    settings: BenchSettings,
    level_rows: list[dict],
    rows_at: dict[int, list[dict]],
    context: RunContext = NO_CONTEXT,
) -> Iterator[int]:
    """With ``concurrency.refine``: the levels ``sweep.bench.refine`` adds, each judged (once run, its
    row in ``level_rows`` and its requests in ``rows_at``) by the rule the report uses, at real
    speed (``context.time_scale``: a dry run's, else ``slo_time_scale``), before the next is chosen;
    at most ``refine_max``; where the throughput crosses ``context.baseline_curve`` too."""
    cc = settings.concurrency
    if not cc.refine:
        return
    slos = [slo_rule.limits_of(s) for s in settings.slo]
    names = [str(i) for i in range(len(slos))]
    baseline = [(float(c), float(t)) for c, t in context.baseline_curve]
    scale = context.time_scale(cc.slo_time_scale)
    added = 0
    while added < cc.refine_max:
        measured = [
            refine.MeasuredLevel(
                r["concurrency"],
                {n: slo_rule.level_meets(lim, rows_at[r["concurrency"]], scale) for n, lim in zip(names, slos)},
                r.get("output_throughput"),
            )
            for r in level_rows
            if not r.get("repeat")
        ]
        todo = refine.next_levels(measured, names, baseline=baseline, ratio=cc.refine_ratio)[: cc.refine_max - added]
        if not todo:
            return
        for c in todo:
            added += 1
            yield c


async def run_benchmark(
    server: Endpoint | str,
    settings: BenchSettings,
    *,
    point_id: str = "",
    progress: Callable[[HostProgress], None] | None = None,
    metrics_every_s: float = METRICS_EVERY_S,
    power: pw.PowerSource | None = None,
    power_every_s: float = pw.POWER_EVERY_S,
    window: Callable[[], int] | None = None,
    context: RunContext = NO_CONTEXT,
) -> BenchResult:
    """Benchmark ``server`` (an ``Endpoint``: its URL and keys; or a URL, for a server that wants no
    key) as ``settings`` say; see the module docstring.

    ``progress`` gets a ``sweep.core.events.HostProgress`` as the benchmark goes: stage ``warmup`` or
    ``single`` with ``run`` (1-based) ``of`` n as each run starts, and stage ``level`` with its
    ``concurrency`` and ``done`` ``of`` n when a level starts (done 0) and as each of its requests ends
    (``stopped`` when it ended early, having measured enough). ``metrics_every_s`` is
    the period of the ``/metrics`` scrapes during a level (the first at half of it). ``power``: the
    watts of the GPUs serving (``sweep.bench.power``), sampled every ``power_every_s`` during each
    level; None (``sweep bench``): the energy columns are null. ``window``: called as each level begins
    and as it ends (beside its ``level_started_at`` / ``level_ended_at``), what it returns kept in
    ``BenchResult.windows`` (the host marks where the server's log was, for the lines of each level).
    ``context``: the run-time inputs the sweep supplies beside the settings (``sweep.core.run_context``).
    """
    endpoint = Endpoint.of(server)
    url = check_url(endpoint.url)
    check_settings(settings)
    workload = workloads.load(settings)  # a bad file fails here, before anything is sent
    notify = Notifier(progress)
    levels = list(settings.concurrency.levels)
    sent: list[Sent] = []
    level_rows: list[dict] = []
    windows: list[tuple[int | None, int | None]] = []  # window()'s marks per level row
    metric_rows: list[dict] = []
    admin = endpoint.admin_headers()  # /flush_cache is an admin route
    async with Clients(settings.request_timeout_s, api_key=endpoint.api_key) as clients:
        side = clients.side
        info = await sm.probe(side, url)
        limit = (info or {}).get("max_req_input_len")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:  # the server's input cap
            workloads.check_context(
                workload, limit, max_tokens=None, what=f"the server's max_req_input_len at {url}", given_only=True
            )  # text: the server counts (an estimate must not refuse it)
        workload = await fit(
            side, url, workload, settings.api, settings.workload.output_scale if settings.workload else 1.0
        )
        opts = RequestOptions(
            url=url,
            api=settings.api,
            prompts=workload,
            seed=settings.seed,
            temperature=settings.temperature,
            ignore_eos=settings.ignore_eos,
            model=settings.model or sm.model_name_of(info),
            timeout_s=settings.request_timeout_s,
        )
        request_rows: list[dict] = []  # the requests table's rows, built once as requests are recorded

        def record(got: list[Sent]) -> list[dict]:
            rows = [request_row(point_id, workload, settings.api, s) for s in got]
            sent.extend(got)
            request_rows.extend(rows)
            return rows

        ss = settings.single_stream
        if ss.runs + ss.warmup > 0:
            if settings.flush_between_levels:
                await sm.flush_cache(side, url, headers=admin)
            record(
                await single_stream(
                    clients, opts, runs=ss.runs, warmup=ss.warmup, max_tokens=ss.max_tokens, notify=notify
                )
            )
        rows_at: dict[int, list[dict]] = {}  # each level's requests rows, for the refinement's SLO verdicts

        async def run_level(c: int, refined: bool, repeat: int = 0) -> None:
            nonlocal metric_rows
            flushed = await sm.flush_cache(side, url, headers=admin) if settings.flush_between_levels else False
            before = await sm.scrape_text(side, url) if settings.server_metrics else None
            sampler = sm.Sampler(side, url, metrics_every_s) if before is not None else None
            meter = pw.Meter(power, power_every_s) if power is not None else None
            started = time.time()  # the level's window (a server over several hosts: pw.with_nodes)
            mark = window() if window is not None else None
            try:
                run = await closed_loop_until(
                    clients,
                    opts,
                    concurrency=c,
                    requests=settings.requests_at(c),
                    max_tokens=settings.concurrency.max_tokens,
                    notify=notify,
                    stop=settings.concurrency.stop,
                )
            finally:
                ended = time.time()
                windows.append((mark, window() if window is not None else None))
                during = await sampler.stop() if sampler is not None else []
                watts, gpus = await meter.stop() if meter is not None else ([], 0)
            columns, rows = await _level_metrics(side, url, point_id, c, before, during)
            after_info = await sm.server_info(side, url) if flushed else None
            level_requests = record(run.sent)
            if repeat:  # a level measured again back to back (benchmark.repeats): its rows say which time
                for row in level_requests:
                    row["repeat"] = repeat
            metric_rows += rows
            if settings.concurrency.refine and not repeat:  # the refinement judges each level's first measurement
                rows_at[c] = level_requests
            figures = stats.level_figures([s.record for s in run.sent])
            tokens = sum(s.record.completion_tokens or 0 for s in run.sent if s.record.ok)
            level_rows.append(
                {
                    "point_id": point_id,
                    "concurrency": c,
                    "max_tokens": settings.concurrency.max_tokens,
                    **figures,
                    **pw.columns(watts, gpus, figures["wall_s"], tokens),
                    "level_started_at": started,
                    "level_ended_at": ended,
                    "accept_length_server": sm.accept_length_of(after_info),
                    "flushed": flushed,
                    "refined": refined if settings.concurrency.refine else None,
                    **_stop_columns(run),
                    **columns,
                    **({"repeat": repeat} if context.repeats(settings.repeats) > 1 else {}),
                }
            )

        if settings.concurrency.auto:
            levels = refine.auto_levels(levels, refine.max_running_of(info))
        for c in levels:
            for repeat in range(context.repeats(settings.repeats)):  # back to back, nothing between
                await run_level(c, False, repeat)
        for c in refinement(settings, level_rows, rows_at, context):  # asks again once a round's levels ran
            await run_level(c, True)
        for level in open_levels(settings, workload):
            got, row, rows = await _open_level(
                clients,
                opts,
                settings,
                level,
                point_id=point_id,
                notify=notify,
                admin=admin,
                metrics_every_s=metrics_every_s,
                power=power,
                power_every_s=power_every_s,
                window=window,
                windows=windows,
            )
            record(got)
            level_rows.append(row)
            metric_rows += rows
    singles = [s for s in sent if s.phase == "single"]
    return BenchResult(
        requests=from_rows(request_rows, "requests"),
        single_stream=from_rows([single_row(point_id, s) for s in singles], "single_stream"),
        levels=from_rows(level_rows, "levels"),  # in the order run: the given levels, then the refined ones
        metrics=from_rows(metric_rows, "metrics"),
        windows=windows,
        server_info=info,
        single_summary=stats.single_overall([s.record for s in singles]),
    )


@dataclass(frozen=True)
class _OpenLevel:
    """One open-loop level to run: its arrival times and the requests sent at them."""

    offered_rate: Optional[float]  # requests/s; None: a trace at its own timing
    arrival: str  # poisson | gamma | trace
    burstiness: Optional[float]
    arrivals: list[float]
    indices: list[int]


def open_levels(settings: BenchSettings, workload: Workload) -> list[_OpenLevel]:
    """The open-loop levels ``settings`` ask for: one per ``rates`` entry (arrival times drawn,
    ``sweep.bench.arrivals``; requests drawn from the workload as a closed-loop level's), then with
    ``open_loop.replay`` the trace's requests at their own ``arrival_s`` (times the workload's
    ``time_scale``), the whole trace or its first ``open_loop.duration_s`` seconds."""
    o = settings.open_loop
    out = []
    for rate in settings.rates:
        times = arr.times(
            float(rate),
            seed=settings.seed,
            requests=o.requests,
            duration_s=o.duration_s,
            arrival=o.arrival,
            burstiness=o.burstiness,
            ramp_up_s=o.ramp_up_s,
        )
        out.append(
            _OpenLevel(
                float(rate),
                o.arrival,
                o.burstiness,
                times,
                workload.choose(len(times), settings.seed, f"rate-{float(rate):g}"),
            )
        )
    if o.replay:
        pairs = [
            (r.arrival_s or 0.0, i)
            for i, r in enumerate(workload.requests)
            if o.duration_s is None or (r.arrival_s or 0.0) < o.duration_s
        ]
        out.append(_OpenLevel(None, "trace", None, [t for t, _ in pairs], [i for _, i in pairs]))
    return out


async def _open_level(
    clients: Clients,
    opts: RequestOptions,
    settings: BenchSettings,
    level: _OpenLevel,
    *,
    point_id: str,
    notify: Notifier,
    admin: dict,
    metrics_every_s: float,
    power: pw.PowerSource | None,
    power_every_s: float,
    window: Callable[[], int] | None = None,
    windows: list[tuple[int | None, int | None]] | None = None,
) -> tuple[list[Sent], dict, list[dict]]:
    """Run one open-loop level with the closed loop's flush, scrapes and power; its requests, its
    levels row and its metrics rows (``offered_rate`` set, concurrency 0)."""
    side, url = clients.side, opts.url
    flushed = await sm.flush_cache(side, url, headers=admin) if settings.flush_between_levels else False
    before = await sm.scrape_text(side, url) if settings.server_metrics else None
    sampler = sm.Sampler(side, url, metrics_every_s) if before is not None else None
    meter = pw.Meter(power, power_every_s) if power is not None else None
    o = settings.open_loop
    started = time.time()  # the level's window (a server over several hosts: pw.with_nodes)
    mark = window() if window is not None else None
    try:
        run = await ol.open_loop(
            clients,
            opts,
            arrivals=level.arrivals,
            indices=level.indices,
            max_tokens=settings.concurrency.max_tokens,
            notify=notify,
            max_in_flight=o.max_in_flight,
            rate=level.offered_rate if level.offered_rate is not None else 0.0,
        )
    finally:
        ended = time.time()
        if windows is not None:
            windows.append((mark, window() if window is not None else None))
        during = await sampler.stop() if sampler is not None else []
        watts, gpus = await meter.stop() if meter is not None else ([], 0)
    columns, rows = await _level_metrics(side, url, point_id, 0, before, during)
    after_info = await sm.server_info(side, url) if flushed else None
    figures = stats.level_figures([s.record for s in run.sent])
    tokens = sum(s.record.completion_tokens or 0 for s in run.sent if s.record.ok)
    extra = ol.level_columns(
        run,
        offered_rate=level.offered_rate,
        arrival=level.arrival,
        burstiness=level.burstiness,
        max_in_flight=o.max_in_flight,
        wall_s=figures["wall_s"],
        ok=figures["ok"],
    )
    rate = extra["offered_rate"]
    sent = [replace(s, arrival_s=run.arrivals[s.seq], offered_rate=rate, wait_s=run.waits[s.seq]) for s in run.sent]
    row = {
        "point_id": point_id,
        "concurrency": 0,
        "max_tokens": settings.concurrency.max_tokens,
        **figures,
        **pw.columns(watts, gpus, figures["wall_s"], tokens),
        "level_started_at": started,
        "level_ended_at": ended,
        "accept_length_server": sm.accept_length_of(after_info),
        "flushed": flushed,
        "planned_requests": len(level.arrivals),
        "stopped_early": False,
        "stop_cancelled": 0,
        **columns,
        **extra,
    }
    return sent, row, [{**r, "offered_rate": rate} for r in rows]


def run(
    server: Endpoint | str,
    settings: BenchSettings,
    *,
    point_id: str = "",
    progress: Callable[[HostProgress], None] | None = None,
    metrics_every_s: float = METRICS_EVERY_S,
    power: pw.PowerSource | None = None,
    window: Callable[[], int] | None = None,
    context: RunContext = NO_CONTEXT,
) -> BenchResult:
    """``run_benchmark`` from synchronous code (its own event loop)."""
    return asyncio.run(
        run_benchmark(
            server,
            settings,
            point_id=point_id,
            progress=progress,
            metrics_every_s=metrics_every_s,
            power=power,
            window=window,
            context=context,
        )
    )
