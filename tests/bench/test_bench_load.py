"""The closed loop really keeps C requests in flight, against a small real HTTP server on
127.0.0.1 that streams /generate chunks and counts the requests it is serving."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from sweep.bench.client import Clients
from sweep.bench.load import Notifier, RequestOptions, closed_loop, single_stream
from sweep.bench.prompts import load_prompts


class Stub:
    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.served = 0
        self.client_ports: set[int] = set()

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = body["sampling_params"]["max_new_tokens"]
        self.client_ports.add(request.transport.get_extra_info("peername")[1])
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for ct in range(2, n + 1, 2):  # two tokens per chunk
                await asyncio.sleep(0.005)
                meta = {"completion_tokens": ct, "prompt_tokens": 5, "spec_verify_ct": ct // 2,
                        "spec_accept_length": 2.0}
                await resp.write(b"data: " + json.dumps({"text": "x" * ct, "meta_info": meta}).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            self.served += 1
            return resp
        finally:
            self.in_flight -= 1


async def _run(fn):
    stub = Stub()
    app = web.Application()
    app.router.add_post("/generate", stub.generate)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    try:
        async with Clients(10) as clients:
            opts = RequestOptions(url=url, api="generate", prompts=load_prompts("coding"), seed=3)
            return stub, await fn(clients, opts)
    finally:
        await runner.cleanup()


def test_closed_loop_keeps_exactly_c_in_flight_and_reports_progress():
    seen: list[dict] = []

    async def go(client, opts):
        return await closed_loop(client, opts, concurrency=12, requests=36, max_tokens=10, notify=Notifier(seen.append))

    stub, sent = asyncio.run(_run(go))
    assert stub.peak == 12 and stub.served == 36
    assert len(stub.client_ports) == 12  # one keep-alive connection per in-flight slot, reused
    assert [s.seq for s in sent] == list(range(36)) and all(s.record.ok for s in sent)
    assert all(s.record.chunk_tokens == [2] * 5 for s in sent)
    assert seen[0] == {"stage": "level", "concurrency": 12, "done": 0, "of": 36}
    assert seen[-1] == {"stage": "level", "concurrency": 12, "done": 36, "of": 36}
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
