"""Is the benchmark client ever the bottleneck, and does it count what the server counts?

Starts the fake SGLang server at high speed (speculative, so chunks carry several tokens; running
cap raised so C requests really run together), then in one run, side by side:

- ``sweep /generate`` and ``sweep /v1/completions``: this project's client (one event loop, one
  httpx.AsyncClient with one keep-alive connection per in-flight slot), a closed loop at C; and
  the same on one shared pooled AsyncClient, the design not taken (its pool bookkeeping is
  O(connections) per request);
- ``openai + threads``: the reference the project replaces -- the ``openai`` client in a thread
  pool of C workers, streaming /v1/completions and counting one token per chunk.

For each it prints chunks/s sustained, client CPU seconds per 1,000 chunks (process CPU time of
this process, threads included), output tok/s as the client measured it, and the gaps to the
server's own figures: tokens (client count vs the server's ``generation_tokens_total`` delta) and
time (client's mean request latency vs the server's ``e2e_request_latency_seconds`` mean over the
same requests, from ``/metrics``). It also prints what the fake's model says the server should do.

    python tests/perf/bench_client.py [--concurrency 250] [--requests 500] [--max-tokens 256] [--speed 40]

At the default --fake-speed 40 on a 2-core machine the client and the server together saturate
the CPUs: that run shows the chunk rate and CPU cost under stress. For the token/time gaps, run
--speed 10 as well, where neither is saturated and the gap is the client's own error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from sweep.bench import server_metrics as sm  # noqa: E402
from sweep.bench.client import Clients, make_client  # noqa: E402
from sweep.bench.load import Notifier, RequestOptions, closed_loop  # noqa: E402
from sweep.bench.prompts import load_prompts  # noqa: E402
from sweep.fake import model  # noqa: E402
from tests.bench.bench_fake_server import start_fake  # noqa: E402

ACCEPT_RATE = 0.7
SPEC = model.Spec(steps=3, topk=1, draft_tokens=4, accept_rate=ACCEPT_RATE)


def server_args(concurrency: int) -> tuple[str, ...]:
    return (
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "fake/eagle3",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--fake-accept-rate",
        str(ACCEPT_RATE),
        "--enable-metrics",
        "--max-running-requests",
        str(concurrency),
    )


def server_counts(metrics: dict | None) -> tuple[float, float, float]:
    """(generation tokens, e2e latency sum, e2e latency count) from a parsed /metrics."""
    tokens = lat_sum = lat_count = 0.0
    for key, (_, value) in (metrics or {}).items():
        name = key.split("{", 1)[0]
        if name == "sglang:generation_tokens_total":
            tokens += value
        elif name == "sglang:e2e_request_latency_seconds_sum":
            lat_sum += value
        elif name == "sglang:e2e_request_latency_seconds_count":
            lat_count += value
    return tokens, lat_sum, lat_count


async def scrape(url: str) -> dict | None:
    async with make_client(30) as c:
        return await sm.scrape(c, url)


def measure(label: str, url: str, server_pid: int, body) -> dict:
    """Run ``body()`` -> (chunks, tokens, latencies) and collect client CPU, wall, server deltas."""
    before = asyncio.run(scrape(url))
    server = psutil.Process(server_pid)
    s_cpu0 = sum(server.cpu_times()[:2])
    cpu0, wall0 = time.process_time(), time.perf_counter()
    chunks, tokens, latencies, failed = body()
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    s_cpu = sum(server.cpu_times()[:2]) - s_cpu0
    after = asyncio.run(scrape(url))
    t0, s0, n0 = server_counts(before)
    t1, s1, n1 = server_counts(after)
    srv_tokens, srv_lat = t1 - t0, ((s1 - s0) / (n1 - n0) if n1 > n0 else None)
    mean_lat = sum(latencies) / len(latencies) if latencies else None
    return {
        "client": label,
        "requests": len(latencies),
        "failed": failed,
        "wall_s": wall,
        "chunks": chunks,
        "chunks_per_s": chunks / wall,
        "cpu_s_per_1k_chunks": 1000 * cpu / chunks if chunks else None,
        "client_cpu_util": cpu / wall,
        "server_cpu_util": s_cpu / wall,
        "tok_per_s_client": tokens / wall,
        "tok_per_s_server": srv_tokens / wall,
        "token_gap": (tokens - srv_tokens) / srv_tokens if srv_tokens else None,
        "latency_gap": (mean_lat - srv_lat) / srv_lat if (mean_lat and srv_lat) else None,
    }


class SharedPool:
    """``Clients``' interface over one pooled AsyncClient for every slot: the design the project
    did not take (see ``sweep.bench.client.Clients``), kept here to show why."""

    def __init__(self, concurrency: int, timeout_s: float):
        self.side = self._shared = make_client(timeout_s, connections=concurrency + 4)

    def slot(self, i: int) -> httpx.AsyncClient:
        return self._shared

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self._shared.aclose()


def ours(url: str, api: str, concurrency: int, requests: int, max_tokens: int, shared_pool: bool = False):
    """This project's closed loop (``shared_pool``: on one pooled client instead of one per slot)."""

    async def go():
        clients = SharedPool(concurrency, 600) if shared_pool else Clients(600)
        async with clients:
            info = await sm.server_info(clients.side, url)
            opts = RequestOptions(url=url, api=api, prompts=load_prompts("coding"), model=sm.model_name_of(info))
            return await closed_loop(
                clients, opts, concurrency=concurrency, requests=requests, max_tokens=max_tokens, notify=Notifier(None)
            )

    def body():
        sent = asyncio.run(go())
        ok = [s.record for s in sent if s.record.ok]
        return (
            sum(r.chunks for r in ok),
            sum(r.completion_tokens or 0 for r in ok),
            [r.latency_s for r in ok],
            len(sent) - len(ok),
        )

    return body


def reference(url: str, concurrency: int, requests: int, max_tokens: int):
    """The scripts this project replaces: openai client, thread pool, one token per chunk."""
    import openai

    prompts = load_prompts("coding").prompts
    client = openai.OpenAI(
        base_url=url + "/v1", api_key="none", max_retries=0, http_client=openai.DefaultHttpxClient(trust_env=False)
    )
    lock = threading.Lock()
    counter = iter(range(requests))

    def one(i: int) -> tuple[int, float] | None:
        t0 = time.perf_counter()
        try:
            stream = client.completions.create(
                model="default",
                prompt=prompts[i % len(prompts)],
                max_tokens=max_tokens,
                temperature=0,
                stream=True,
                extra_body={"ignore_eos": True},
            )
            n = sum(1 for c in stream if c.choices and c.choices[0].text)
        except openai.OpenAIError:
            return None
        return n, time.perf_counter() - t0

    def worker() -> list:
        out = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return out
            out.append(one(i))

    def body():
        with ThreadPoolExecutor(concurrency) as pool:
            results = [r for f in [pool.submit(worker) for _ in range(concurrency)] for r in f.result()]
        ok = [r for r in results if r]
        chunks = sum(n for n, _ in ok)
        return chunks, chunks, [t for _, t in ok], len(results) - len(ok)  # one token per chunk

    return body


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, default=250)
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--speed", type=float, default=40.0, help="the fake's --fake-speed")
    p.add_argument(
        "--no-shared-pool",
        dest="shared_pool",
        action="store_false",
        help="skip the row that runs this client on one shared connection pool",
    )
    a = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        server = start_fake(Path(tmp), *server_args(a.concurrency), speed=a.speed)
        try:
            expected = model.closed_loop_run(
                a.requests, a.concurrency, a.max_tokens, SPEC, None, a.concurrency, a.speed
            )
            print(
                f"fake server: EAGLE3 3/1/4, accept rate {ACCEPT_RATE} (accept length "
                f"{model.expected_accept_length(SPEC):.3f}), --fake-speed {a.speed:g}; C={a.concurrency}, "
                f"{a.requests} requests x {a.max_tokens} tokens"
            )
            print(
                f"model: {expected.throughput_tok_s:,.0f} tok/s output, {expected.duration_s:.2f} s "
                f"(prompt tokens assumed {model.DEFAULT_PROMPT_TOKENS})\n"
            )
            rows = [
                measure(
                    "sweep /generate",
                    server.url,
                    server.proc.pid,
                    ours(server.url, "generate", a.concurrency, a.requests, a.max_tokens),
                ),
                measure(
                    "sweep /v1/completions",
                    server.url,
                    server.proc.pid,
                    ours(server.url, "completions", a.concurrency, a.requests, a.max_tokens),
                ),
            ]
            if a.shared_pool:
                rows.append(
                    measure(
                        "sweep /generate, one shared pool",
                        server.url,
                        server.proc.pid,
                        ours(server.url, "generate", a.concurrency, a.requests, a.max_tokens, shared_pool=True),
                    )
                )
            rows += [
                measure(
                    "openai + threads",
                    server.url,
                    server.proc.pid,
                    reference(server.url, a.concurrency, a.requests, a.max_tokens),
                ),
            ]
        finally:
            server.kill()

    def pct(x):
        return "-" if x is None else f"{100 * x:+.2f}%"

    cols = [
        "client",
        "ok/sent",
        "wall s",
        "chunks/s",
        "CPU s/1k chunks",
        "client CPU",
        "server CPU",
        "tok/s (client)",
        "tok/s (server)",
        "token gap",
        "latency gap",
    ]
    print(" | ".join(cols))
    for r in rows:
        print(
            " | ".join(
                [
                    r["client"],
                    f"{r['requests']}/{r['requests'] + r['failed']}",
                    f"{r['wall_s']:.2f}",
                    f"{r['chunks_per_s']:,.0f}",
                    f"{r['cpu_s_per_1k_chunks']:.3f}" if r["cpu_s_per_1k_chunks"] else "-",
                    f"{100 * r['client_cpu_util']:.0f}%",
                    f"{100 * r['server_cpu_util']:.0f}%",
                    f"{r['tok_per_s_client']:,.0f}",
                    f"{r['tok_per_s_server']:,.0f}",
                    pct(r["token_gap"]),
                    pct(r["latency_gap"]),
                ]
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
