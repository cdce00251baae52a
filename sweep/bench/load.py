"""The two load shapes: single stream (one request at a time) and a closed loop of C in flight.

Both run on the caller's event loop; in-flight slot i always uses ``clients.slot(i)`` (its own
keep-alive connection, see ``client.Clients``). They only send and record. Figures are computed
afterwards by ``stats`` from the records, so the hot path does no more than parse chunks.

A closed loop with a stop rule (``benchmark.concurrency.stop``) also tells a
``stop.LevelMonitor`` what it sent and what completed; once the monitor says the throughput is
known to the precision asked for, no further request is sent and the requests still in flight are
cancelled (their connections closed, so SGLang aborts them). They are not recorded: the level is
what completed before the stop, and ``LevelRun`` says how many were cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Optional

from sweep.bench.client import Clients, RequestRecord, send
from sweep.bench.prompts import PromptSet
from sweep.bench.stop import LevelMonitor, Precision
from sweep.bench.workloads import Workload
from sweep.core import HostProgress, LevelProgress, RunProgress, StopSettings

log = logging.getLogger(__name__)

OnProgress = Callable[[HostProgress], None]


@dataclass(frozen=True)
class RequestOptions:
    """What every request of a benchmark shares."""

    url: str
    api: str
    prompts: PromptSet | Workload  # what is sent (a prompt set is the workload of its prompts)
    seed: int = 0
    temperature: float = 0.0
    ignore_eos: bool = True
    model: str = "default"
    timeout_s: float = 600.0
    workload: Workload = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        w = self.prompts if isinstance(self.prompts, Workload) else Workload.from_prompts(self.prompts)
        object.__setattr__(self, "workload", w)


@dataclass
class Sent:
    """One request as sent (its place in the benchmark) and what it measured."""

    phase: str  # warmup | single | level | rate
    concurrency: int
    seq: int
    prompt_index: int  # the request's index in its workload
    max_tokens: int  # as sent: the request's own output length, else the phase's
    record: RequestRecord
    # an open-loop level's (phase rate, sweep/bench/openloop.py): scheduled arrival from the level's
    # start, the level's offered rate, and the send's lateness (the wait for a slot)
    arrival_s: Optional[float] = None
    offered_rate: Optional[float] = None
    wait_s: Optional[float] = None


class Notifier:
    """Calls the progress callback; a failing callback is logged once and then ignored, so a
    broken live view never aborts a measurement."""

    def __init__(self, progress: Optional[OnProgress]):
        self._progress = progress

    def __call__(self, info: HostProgress) -> None:
        if self._progress is None:
            return
        try:
            self._progress(info)
        except Exception:  # noqa: BLE001 - the callback is foreign code; measurements go on
            log.exception("progress callback failed; no more progress will be reported")
            self._progress = None


def tokens_for(opts: RequestOptions, index: int, max_tokens: int) -> int:
    """The max tokens request ``index`` is sent with: its own output length, else the phase's."""
    own = opts.workload.requests[index].output_len
    return own if own is not None else max_tokens


async def one_request(client, opts: RequestOptions, index: int, max_tokens: int) -> RequestRecord:
    r = opts.workload.requests[index]
    ids = r.input_ids if opts.api != "chat" else None  # chat takes text (the ids spelt as words)
    return await send(
        client,
        opts.url,
        opts.api,
        r.text if ids is not None else r.prompt_text(),
        max_tokens=max_tokens,
        temperature=opts.temperature,
        ignore_eos=opts.ignore_eos,
        model=opts.model,
        timeout_s=opts.timeout_s,
        input_ids=ids,
        messages=r.messages if opts.api == "chat" else None,
    )


async def single_stream(
    clients: Clients, opts: RequestOptions, *, runs: int, warmup: int, max_tokens: int, notify: Notifier
) -> list[Sent]:
    """``warmup`` then ``runs`` requests, strictly one after another."""
    out: list[Sent] = []
    phases: tuple[tuple[Literal["warmup", "single"], int], ...] = (("warmup", warmup), ("single", runs))
    for phase, count in phases:
        indices = opts.workload.choose(count, opts.seed, phase)
        for seq, idx in enumerate(indices):
            notify(RunProgress(phase, run=seq + 1, of=count))
            n = tokens_for(opts, idx, max_tokens)
            rec = await one_request(clients.slot(0), opts, idx, n)
            out.append(Sent(phase, 1, seq, idx, n, rec))
    return out


@dataclass
class LevelRun:
    """One closed-loop level: the requests that completed, and how the level ended."""

    sent: list[Sent]
    planned: int  # the fixed request count
    stopped_early: bool = False  # the stop rule ended it before the fixed count
    cancelled: int = 0  # requests in flight at the stop, cancelled and not recorded
    precision: Precision = field(default_factory=lambda: Precision(None, None, 0, 0))


async def closed_loop(
    clients: Clients, opts: RequestOptions, *, concurrency: int, requests: int, max_tokens: int, notify: Notifier
) -> list[Sent]:
    """``requests`` requests with exactly ``concurrency`` in flight until the last ones drain.

    C workers pull the next request number from one shared iterator as soon as their previous
    request ends (closed loop): the server always sees C requests, never a burst or a trickle.
    A multi-turn workload's conversation is pulled whole: one worker sends its turns one after
    another (``Workload.units``). A trace's arrival times are not followed here (closed loop; ``sweep.bench.openloop`` follows them).
    """
    run = await closed_loop_until(
        clients, opts, concurrency=concurrency, requests=requests, max_tokens=max_tokens, notify=notify
    )
    return run.sent


async def closed_loop_until(
    clients: Clients,
    opts: RequestOptions,
    *,
    concurrency: int,
    requests: int,
    max_tokens: int,
    notify: Notifier,
    stop: Optional[StopSettings] = None,
    confidence: float = 0.95,
) -> LevelRun:
    """``closed_loop``, ended early by ``stop`` when it is given (see the module docstring); the
    precision of the level's throughput is estimated either way (at ``stop.confidence``, else
    ``confidence``)."""
    indices = opts.workload.choose(requests, opts.seed, f"level-{concurrency}")
    results: list[Optional[Sent]] = [None] * requests
    units = iter(opts.workload.units(indices))  # a conversation's turns: one slot, in order
    monitor = LevelMonitor(
        concurrency,
        requests,
        confidence=stop.confidence if stop else confidence,
        precision_goal=stop.precision if stop else None,
        min_requests=stop.min_requests if stop else None,
    )
    in_flight: dict[int, asyncio.Task] = {}
    cancelled = 0
    done = 0
    notify(LevelProgress(concurrency, done=0, of=requests))

    async def worker(slot: int) -> None:
        nonlocal done, cancelled
        client = clients.slot(slot)
        for unit in units:
            for seq in unit:
                if monitor.decision is not None:
                    return
                monitor.sent(seq, time.perf_counter())
                n = tokens_for(opts, indices[seq], max_tokens)
                task = asyncio.ensure_future(one_request(client, opts, indices[seq], n))
                in_flight[seq] = task
                try:
                    rec = await task
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if monitor.decision is None or (current is not None and current.cancelling()):
                        raise  # cancelled from outside (Ctrl-C, the point's deadline): not ours to swallow
                    cancelled += 1
                    return
                finally:
                    in_flight.pop(seq, None)
                results[seq] = Sent("level", concurrency, seq, indices[seq], n, rec)
                monitor.completed(seq, rec)
                done += 1
                notify(LevelProgress(concurrency, done=done, of=requests))
                if monitor.should_stop():
                    for other in list(in_flight.values()):
                        other.cancel()
                    return

    workers = [asyncio.ensure_future(worker(i)) for i in range(min(concurrency, requests))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for t in [*workers, *in_flight.values()]:
            t.cancel()
        raise
    sent = [s for s in results if s is not None]
    stopped = monitor.decision is not None and len(sent) < requests
    if stopped:
        notify(LevelProgress(concurrency, done=done, of=requests, stopped=True))
    return LevelRun(sent, requests, stopped_early=stopped, cancelled=cancelled, precision=monitor.final())
