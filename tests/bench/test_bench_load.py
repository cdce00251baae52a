"""The closed loop really keeps C requests in flight, against a small real HTTP server on
127.0.0.1 that streams /generate chunks and counts the requests it is serving."""

from __future__ import annotations

import asyncio

from sweep.bench.client import Clients
from sweep.bench.load import Notifier, RequestOptions, closed_loop, single_stream
from sweep.bench.prompts import load_prompts
from sweep.core.events import HostProgress, LevelProgress
from tests.bench.stream_stub import Streamer, serving


def _stub() -> Streamer:
    return Streamer(0.005, meta=lambda ct: {"spec_verify_ct": ct // 2, "spec_accept_length": 2.0})


async def _run(fn):
    stub = _stub()
    async with serving(stub) as url, Clients(10) as clients:
        opts = RequestOptions(url=url, api="generate", prompts=load_prompts("coding"), seed=3)
        return stub, await fn(clients, opts)


def test_closed_loop_keeps_exactly_c_in_flight_and_reports_progress():
    seen: list[HostProgress] = []

    async def go(client, opts):
        return await closed_loop(client, opts, concurrency=12, requests=36, max_tokens=10, notify=Notifier(seen.append))

    stub, sent = asyncio.run(_run(go))
    assert stub.peak == 12 and stub.served == 36
    assert len(stub.client_ports) == 12  # one keep-alive connection per in-flight slot, reused
    assert [s.seq for s in sent] == list(range(36)) and all(s.record.ok for s in sent)
    assert all(s.record.chunk_tokens == [2] * 5 for s in sent)
    assert seen[0] == LevelProgress(concurrency=12, done=0, of=36)
    assert seen[-1] == LevelProgress(concurrency=12, done=36, of=36)
    assert [s.prompt_index for s in sent] == opts_choice(36, "level-12")


def opts_choice(n: int, key: str) -> list[int]:
    return load_prompts("coding").choose(n, 3, key)


def test_single_stream_is_sequential_and_a_broken_progress_callback_is_ignored():
    def broken(info: dict) -> None:
        raise RuntimeError("live view crashed")

    async def go(client, opts):
        return await single_stream(client, opts, runs=3, warmup=1, max_tokens=4, notify=Notifier(broken))

    stub, sent = asyncio.run(_run(go))
    assert stub.peak == 1
    assert [(s.phase, s.seq) for s in sent] == [("warmup", 0), ("single", 0), ("single", 1), ("single", 2)]
    assert all(s.record.ok and s.record.completion_tokens == 4 for s in sent)
