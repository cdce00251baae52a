"""A small real HTTP server on 127.0.0.1 for the load tests: ``/generate`` streams two tokens a chunk
as SGLang's SSE does (``data: {...}`` lines, then ``data: [DONE]``) and counts what it serves."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from aiohttp import web


class Streamer:
    """``/generate``: two tokens every ``delay_s``; ``meta(ct)`` adds to each chunk's meta_info.
    Counts the requests in flight (and their peak), those served, and the clients' ports."""

    def __init__(self, delay_s: float, meta: Callable[[int], dict] = lambda ct: {}) -> None:
        self.delay_s, self.meta = delay_s, meta
        self.in_flight = self.peak = self.served = 0
        self.client_ports: set[int] = set()

    async def generate(self, request: web.Request) -> web.StreamResponse:
        n = (await request.json())["sampling_params"]["max_new_tokens"]
        self.client_ports.add(request.transport.get_extra_info("peername")[1])
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for ct in range(2, n + 1, 2):
                await asyncio.sleep(self.delay_s)
                meta = {"completion_tokens": ct, "prompt_tokens": 5, **self.meta(ct)}
                await resp.write(b"data: " + json.dumps({"text": "x" * ct, "meta_info": meta}).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            self.served += 1
            return resp
        finally:
            self.in_flight -= 1


@asynccontextmanager
async def serving(streamer: Streamer) -> AsyncIterator[str]:
    """Serve ``streamer`` on a free loopback port; yields its base URL."""
    app = web.Application()
    app.router.add_post("/generate", streamer.generate)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # noqa: SLF001 - port 0's pick
    finally:
        await runner.cleanup()
