"""An open-loop level: requests sent at their arrival times, whatever the server does.

A closed loop (``load.closed_loop``) sends the next request when one ends, so an overloaded server
only slows the loop down; here each request goes at its time (``arrivals.times`` for a rate, or a
trace's own ``arrival_s``), so a server that cannot keep up builds a queue, and its TTFT grows with
it (the server's waiting queue: SGLang, and the fake, queue what is beyond their running cap).

Times, as SGLang's ``bench_serving`` takes them: TTFT and latency run from the moment a request is
actually sent (``client.send``), not from its scheduled arrival. With ``max_in_flight`` a request
whose time has come waits for a slot first (``bench_serving --max-concurrency``: a semaphore around
the send, also outside its TTFT); that wait, and any lateness of the event loop, is recorded per
request (``wait_s``: actual send minus scheduled arrival), so the client-side queue is not hidden.

What the level records besides the requests (``_OpenRun``): the arrival times, the requests
outstanding (arrived, not answered: waiting for a slot or at the server) at each arrival, and the
most in flight at the server at once. ``kept_up`` (``sweep.bench.stats``-like, pure) judges from
them whether the server kept up with the rate.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Optional

from sweep.bench.client import Clients
from sweep.bench.load import Notifier, RequestOptions, Sent, one_request, tokens_for
from sweep.core import LevelProgress

OPEN_PHASE = "rate"  # the requests table's phase of an open-loop level's requests


@dataclass
class _OpenRun:
    """One open-loop level: what completed, and how the arrivals went."""

    sent: list[Sent]
    arrivals: list[float]  # scheduled arrival of each request, seconds from the level's start
    waits: list[Optional[float]]  # per request: actual send minus scheduled arrival (None: never sent)
    outstanding: list[int] = field(default_factory=list)  # at each arrival: arrived and not answered, itself included
    max_in_flight_seen: int = 0  # most requests sent and unanswered at once


async def open_loop(
    clients: Clients,
    opts: RequestOptions,
    *,
    arrivals: list[float],
    indices: list[int],
    max_tokens: int,
    notify: Notifier,
    concurrency: int = 0,
    max_in_flight: Optional[int] = None,
    rate: Optional[float] = None,
) -> _OpenRun:
    """Send request ``indices[k]`` at ``arrivals[k]`` seconds after the start (at most
    ``max_in_flight`` unanswered at once, the rest waiting in arrival order for a slot), and wait
    for every answer. ``concurrency`` is what the requests' ``Sent.concurrency`` holds (0: an
    open-loop level has none); ``rate`` goes into the progress reports. Each in-flight request uses its own keep-alive connection, the
    lowest free one (``Clients.slot``)."""
    n = len(arrivals)
    results: list[Optional[Sent]] = [None] * n
    waits: list[Optional[float]] = [None] * n
    outstanding: list[int] = [0] * n
    free: list[int] = []  # slot numbers not in use (a heap: the lowest first)
    slots_made = 0
    in_flight = 0
    peak = 0
    arrived = answered = 0
    gate = asyncio.Semaphore(max_in_flight) if max_in_flight else None
    done = 0
    notify(LevelProgress(concurrency, done=0, of=n, rate=rate))
    t0 = time.perf_counter()

    async def one(k: int) -> None:
        nonlocal slots_made, in_flight, peak, answered, done
        try:
            if gate is not None:
                await gate.acquire()
            try:
                if free:
                    slot = heapq.heappop(free)
                else:
                    slot, slots_made = slots_made, slots_made + 1
                in_flight += 1
                peak = max(peak, in_flight)
                waits[k] = time.perf_counter() - t0 - arrivals[k]
                idx = indices[k]
                mt = tokens_for(opts, idx, max_tokens)
                try:
                    rec = await one_request(clients.slot(slot), opts, idx, mt)
                finally:
                    in_flight -= 1
                    heapq.heappush(free, slot)
                results[k] = Sent(OPEN_PHASE, concurrency, k, idx, mt, rec)
            finally:
                if gate is not None:
                    gate.release()
        finally:
            answered += 1
        done += 1
        notify(LevelProgress(concurrency, done=done, of=n, rate=rate))

    tasks: list[asyncio.Task] = []
    try:
        for k, at in enumerate(arrivals):
            delay = t0 + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            arrived += 1
            outstanding[k] = arrived - answered
            tasks.append(asyncio.ensure_future(one(k)))
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        raise
    return _OpenRun([s for s in results if s is not None], list(arrivals), waits, outstanding, peak)


def _settle_s(run: _OpenRun) -> float:
    """How long the backlog takes to fill from empty to its steady level: the latency of an
    unqueued request, the median of the first five requests' (sent into an idle server)."""
    first = sorted(s.record.latency_s or 0.0 for s in run.sent if s.seq < 5)
    return first[len(first) // 2] if first else 0.0


def _unqueued_s(run: _OpenRun) -> float:
    """The latency of a request that did not queue: the level's shortest (no queued request is
    faster than an unqueued one). Not the first five's median (``_settle_s``): where they arrive as a
    burst at a server that takes fewer at once, that is a queued one's, and it moves with the order
    the server takes them in and with a slow first connection."""
    done = [s.record.latency_s for s in run.sent if s.record.latency_s]
    return min(done) if done else 0.0


def queue_growth(arrivals: list[float], outstanding: list[int], settle: float = 0.0) -> Optional[float]:
    """How many requests the backlog grew by over the level: the least-squares slope of the
    requests outstanding at each arrival against its time, times the span, over the arrivals after
    the first ``settle`` seconds (a level starts empty: its backlog climbs to rate x latency over
    the first latency, which is no growth). About 0 when the server keeps up (the backlog hovers
    around rate x latency), (rate - capacity) x span when it does not. None with fewer than 10
    arrivals after the settling, or no span."""
    pairs = [(t, o) for t, o in zip(arrivals, outstanding) if t >= arrivals[0] + settle] if arrivals else []
    n = len(pairs)
    if n < 10 or pairs[-1][0] <= pairs[0][0]:
        return None
    mt, mo = sum(t for t, _ in pairs) / n, sum(o for _, o in pairs) / n
    var = sum((t - mt) ** 2 for t, _ in pairs)
    if var <= 0:
        return None
    slope = sum((t - mt) * (o - mo) for t, o in pairs) / var
    return slope * (pairs[-1][0] - pairs[0][0])


def growth_noise(outstanding: list[int]) -> float:
    """The growth a server that keeps up may still show by chance: 3 sigma of a backlog that is
    Poisson around its mean (as requests in flight at an unsaturated server are: M/G/inf), + 1."""
    mean = sum(outstanding) / len(outstanding) if outstanding else 0.0
    return 3 * math.sqrt(mean + 1) + 1


def _drain_s(run: _OpenRun) -> Optional[float]:
    """From the last send to the last answer (None without an answer)."""
    ends = [s.record.end_mono for s in run.sent]
    starts = [s.record.start_mono for s in run.sent]
    return max(ends) - max(starts) if ends else None


def kept_up(
    growth: Optional[float], outstanding: list[int], drain: Optional[float] = None, settle: float = 0.0
) -> Optional[bool]:
    """Whether the server kept up with the arrivals: the backlog did not grow beyond chance
    (``growth_noise``). A level too short to fit a growth (fewer than 10 arrivals after the
    settling, e.g. a burst) is judged by its drain instead: kept up unless the last request took
    more than 3 unqueued latencies (``settle``: ``_unqueued_s``) to answer after the last send. None
    where neither can say."""
    if growth is not None:
        return growth <= growth_noise(outstanding)
    if drain is None or not settle > 0 or len(outstanding) < 2:
        return None
    return drain <= 3 * settle


def level_columns(
    run: _OpenRun,
    *,
    offered_rate: Optional[float],
    arrival: str,
    burstiness: Optional[float],
    max_in_flight: Optional[int],
    wall_s: Optional[float],
    ok: int,
) -> dict:
    """The open-loop columns of a levels row (null in a closed-loop row). ``offered_rate`` None
    (a trace): the trace's own mean rate."""
    a = run.arrivals
    span = a[-1] - a[0] if len(a) > 1 else 0.0
    settle = _settle_s(run)
    growth = queue_growth(a, run.outstanding, settle)
    waits = sorted(w for w in run.waits if w is not None)
    return {
        "offered_rate": offered_rate if offered_rate is not None else ((len(a) - 1) / span if span > 0 else None),
        "arrival": arrival,
        "burstiness": burstiness,
        "max_in_flight": max_in_flight,
        "arrival_rate": (len(a) - 1) / span if span > 0 else None,
        "achieved_rate": ok / wall_s if wall_s else None,
        "max_in_flight_seen": run.max_in_flight_seen,
        "outstanding_mean": sum(run.outstanding) / len(run.outstanding) if run.outstanding else None,
        "queue_growth": growth,
        "kept_up": kept_up(growth, run.outstanding, _drain_s(run), _unqueued_s(run)),
        "wait_mean_s": sum(waits) / len(waits) if waits else None,
        "wait_max_s": waits[-1] if waits else None,
    }
