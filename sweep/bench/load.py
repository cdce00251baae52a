"""The two load shapes: single stream (one request at a time) and a closed loop of C in flight.

Both run on the caller's event loop; in-flight slot i always uses ``clients.slot(i)`` (its own
keep-alive connection, see ``client.Clients``). They only send and record. Figures are computed afterwards by ``stats`` from the records, so the hot path does no
more than parse chunks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional


from sweep.bench.client import Clients, RequestRecord, send
from sweep.bench.prompts import PromptSet

log = logging.getLogger(__name__)

Progress = Callable[[dict], None]


@dataclass(frozen=True)
class RequestOptions:
    """What every request of a benchmark shares."""

    url: str
    api: str
    prompts: PromptSet
    seed: int = 0
    temperature: float = 0.0
    ignore_eos: bool = True
    model: str = "default"
    timeout_s: float = 600.0


@dataclass
class Sent:
    """One request as sent (its place in the benchmark) and what it measured."""

    phase: str  # warmup | single | level
    concurrency: int
    seq: int
    prompt_index: int
    max_tokens: int
    record: RequestRecord


class Notifier:
    """Calls the progress callback; a failing callback is logged once and then ignored, so a
    broken live view never aborts a measurement."""

    def __init__(self, progress: Optional[Progress]):
        self._progress = progress

    def __call__(self, info: dict) -> None:
        if self._progress is None:
            return
        try:
            self._progress(info)
        except Exception:  # noqa: BLE001 - the callback is foreign code; measurements go on
            log.exception("progress callback failed; no more progress will be reported")
            self._progress = None


async def _one(client, opts: RequestOptions, prompt_index: int, max_tokens: int) -> RequestRecord:
    return await send(client, opts.url, opts.api, opts.prompts.prompts[prompt_index], max_tokens=max_tokens,
                      temperature=opts.temperature, ignore_eos=opts.ignore_eos, model=opts.model,
                      timeout_s=opts.timeout_s)


async def single_stream(clients: Clients, opts: RequestOptions, *, runs: int, warmup: int,
                        max_tokens: int, notify: Notifier) -> list[Sent]:
    """``warmup`` then ``runs`` requests, strictly one after another."""
    out: list[Sent] = []
    for phase, count in (("warmup", warmup), ("single", runs)):
        indices = opts.prompts.choose(count, opts.seed, phase)
        for seq, idx in enumerate(indices):
            notify({"stage": phase, "run": seq + 1, "of": count})
            rec = await _one(clients.slot(0), opts, idx, max_tokens)
            out.append(Sent(phase, 1, seq, idx, max_tokens, rec))
    return out


async def closed_loop(clients: Clients, opts: RequestOptions, *, concurrency: int, requests: int,
                      max_tokens: int, notify: Notifier) -> list[Sent]:
    """``requests`` requests with exactly ``concurrency`` in flight until the last ones drain.

    C workers pull the next request number from one shared iterator as soon as their previous
    request ends (closed loop): the server always sees C requests, never a burst or a trickle.
    """
    indices = opts.prompts.choose(requests, opts.seed, f"level-{concurrency}")
    results: list[Optional[Sent]] = [None] * requests
    numbers = iter(range(requests))
    done = 0
    notify({"stage": "level", "concurrency": concurrency, "done": 0, "of": requests})

    async def worker(slot: int) -> None:
        nonlocal done
        client = clients.slot(slot)
        for seq in numbers:
            rec = await _one(client, opts, indices[seq], max_tokens)
            results[seq] = Sent("level", concurrency, seq, indices[seq], max_tokens, rec)
            done += 1
            notify({"stage": "level", "concurrency": concurrency, "done": done, "of": requests})

    await asyncio.gather(*(worker(i) for i in range(min(concurrency, requests))))
    return [s for s in results if s is not None]
