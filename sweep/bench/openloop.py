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

What the level records besides the requests (``OpenRun``): the arrival times, the requests
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
from sweep.bench.load import Notifier, RequestOptions, Sent, _one, tokens_for
from sweep.core.events import PointProgress

OPEN_PHASE = "rate"  # the requests table's phase of an open-loop level's requests


@dataclass
class OpenRun:
    """One open-loop level: what completed, and how the arrivals went."""

    sent: list[Sent]
    arrivals: list[float]  # scheduled arrival of each request, seconds from the level's start
    waits: list[Optional[float]]  # per request: actual send minus scheduled arrival (None: never sent)
    outstanding: list[int] = field(default_factory=list)  # at each arrival: arrived and not answered, itself included
    max_in_flight_seen: int = 0  # most requests sent and unanswered at once


async def open_loop(clients: Clients, opts: RequestOptions, *, arrivals: list[float], indices: list[int],
                    max_tokens: int, notify: Notifier, concurrency: int = 0,
                    max_in_flight: Optional[int] = None, rate: Optional[float] = None) -> OpenRun:
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
    notify(PointProgress("level", concurrency=concurrency, done=0, of=n, rate=rate))
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
                    rec = await _one(clients.slot(slot), opts, idx, mt)
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
        notify(PointProgress("level", concurrency=concurrency, done=done, of=n, rate=rate))

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
    return OpenRun([s for s in results if s is not None], list(arrivals), waits, outstanding, peak)


def queue_growth(arrivals: list[float], outstanding: list[int]) -> Optional[float]:
    """How many requests the backlog grew by over the level: the least-squares slope of the
    requests outstanding at each arrival against its time, times the arrivals' span. About 0 when
    the server keeps up (the backlog hovers around rate x latency), (rate - capacity) x span when it
    does not. None with fewer than 10 arrivals or no span."""
    n = len(arrivals)
    if n < 10 or arrivals[-1] <= arrivals[0]:
        return None
    mt, mo = sum(arrivals) / n, sum(outstanding) / n
    var = sum((t - mt) ** 2 for t in arrivals)
    if var <= 0:
        return None
    slope = sum((t - mt) * (o - mo) for t, o in zip(arrivals, outstanding)) / var
    return slope * (arrivals[-1] - arrivals[0])


def growth_noise(outstanding: list[int]) -> float:
    """The growth a server that keeps up may still show by chance: 3 sigma of a backlog that is
    Poisson around its mean (as requests in flight at an unsaturated server are: M/G/inf), + 1."""
    mean = sum(outstanding) / len(outstanding) if outstanding else 0.0
    return 3 * math.sqrt(mean + 1) + 1


def kept_up(growth: Optional[float], outstanding: list[int]) -> Optional[bool]:
    """Whether the server kept up with the arrivals: the backlog did not grow beyond chance
    (``growth_noise``). None where too little arrived to say (``queue_growth`` is None)."""
    if growth is None:
        return None
    return growth <= growth_noise(outstanding)


def level_columns(run: OpenRun, *, offered_rate: Optional[float], arrival: str, burstiness: Optional[float],
                  max_in_flight: Optional[int], wall_s: Optional[float], ok: int) -> dict:
    """The open-loop columns of a levels row (null in a closed-loop row). ``offered_rate`` None
    (a trace): the trace's own mean rate."""
    a = run.arrivals
    span = a[-1] - a[0] if len(a) > 1 else 0.0
    growth = queue_growth(a, run.outstanding)
    waits = sorted(w for w in run.waits if w is not None)
    return {
        "offered_rate": offered_rate if offered_rate is not None else ((len(a) - 1) / span if span > 0 else None),
        "arrival": arrival, "burstiness": burstiness, "max_in_flight": max_in_flight,
        "arrival_rate": (len(a) - 1) / span if span > 0 else None,
        "achieved_rate": ok / wall_s if wall_s else None,
        "max_in_flight_seen": run.max_in_flight_seen,
        "outstanding_mean": sum(run.outstanding) / len(run.outstanding) if run.outstanding else None,
        "queue_growth": growth, "kept_up": kept_up(growth, run.outstanding),
        "wait_mean_s": sum(waits) / len(waits) if waits else None,
        "wait_max_s": waits[-1] if waits else None,
    }
