"""Print the fake SGLang server's throughput next to the calibration targets of issue 3.

    python tests/perf/fake_calibration.py [--c250-speed 2] [--c250-tokens 128] [--single-tokens 256]

For each figure it prints the target, the performance model's value at --fake-speed 1, and what a
real fake server measured, with how it was measured:

* single stream: a server at --fake-speed 1 (startup sped up), a few streamed /generate requests one
  at a time; the figure is the decode rate, (completion_tokens - 1) / (latency - time to first token).
* C=250: a full 512-token run at speed 1 would take minutes, so a shorter closed-loop run (250 streamed
  requests of --c250-tokens tokens, 250 in flight) runs at --c250-speed and its throughput is divided
  by that speed; it is printed next to the model's value for that same short run, and the 512-token
  figure of the table comes from the model (which the short run validates).

The benchmark client (aiohttp, parsing every SSE chunk) shares the machine with the server, as a
real benchmark on a 2-core laptop would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import aiohttp
import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sweep.fake import model  # noqa: E402
from tests.perf import record  # noqa: E402

TUNED = dict(model.TUNED_NCCL)
EAGLE3_2 = [
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "/models/kimi-eagle3",
    "--speculative-num-steps",
    "2",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "3",
]
EAGLE3_TREE = [
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "/models/kimi-eagle3",
    "--speculative-num-steps",
    "5",
    "--speculative-eagle-topk",
    "4",
    "--speculative-num-draft-tokens",
    "16",
    "--max-running-requests",
    "256",
]  # uncapped, as the experiments run it
PROMPT = "Write a Python function that merges two sorted lists into one sorted list, with tests. " * 9


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A fake server subprocess for one measurement; the whole tree is killed on exit."""

    def __init__(self, flags: list[str], speed: float, nccl: Optional[dict[str, str]], log_dir: Path):
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
        env.update(nccl or {})
        env["PYTHONPATH"] = f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}"
        self.log_path = log_dir / f"fake-{self.port}.log"
        argv = [
            sys.executable,
            "-m",
            "sweep.fake",
            "--model-path",
            "/models/Kimi-K2-Instruct",
            "--tp-size",
            "8",
            "--port",
            str(self.port),
            "--fake-speed",
            str(speed),
            "--fake-startup-speed",
            "3000",
            *flags,
        ]
        with open(self.log_path, "wb") as fh:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)

    def __enter__(self) -> "Server":
        deadline = time.monotonic() + 60
        while "The server is fired up and ready to roll!" not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fake server did not start:\n{self.log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            kids = []
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for k in kids:
            try:
                k.kill()
            except psutil.NoSuchProcess:
                pass

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/generate"


@dataclass
class Result:
    latency: float
    ttft: float
    tokens: int
    prompt_tokens: int


async def stream_one(session: aiohttp.ClientSession, url: str, max_tokens: int, i: int) -> Result:
    payload = {
        "text": f"[{i}] {PROMPT}",
        "stream": True,
        "sampling_params": {"max_new_tokens": max_tokens, "ignore_eos": True, "temperature": 0},
    }
    t0 = time.perf_counter()
    ttft = None
    last: dict = {}
    async with session.post(url, json=payload) as resp:
        resp.raise_for_status()
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            last = json.loads(line[6:])
            if ttft is None:
                ttft = time.perf_counter() - t0
    meta = last["meta_info"]
    return Result(time.perf_counter() - t0, ttft or 0.0, meta["completion_tokens"], meta["prompt_tokens"])


async def single_stream(url: str, max_tokens: int, runs: int) -> tuple[float, int]:
    """Mean decode rate of ``runs`` requests sent one at a time (after one warmup request)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        await stream_one(session, url, 8, -1)
        rates, prompt = [], 0
        for i in range(runs):
            r = await stream_one(session, url, max_tokens, i)
            rates.append((r.tokens - 1) / (r.latency - r.ttft))
            prompt = r.prompt_tokens
    return sum(rates) / len(rates), prompt


async def closed_loop(url: str, concurrency: int, requests: int, max_tokens: int) -> tuple[float, float, int]:
    """(output tokens/s, wall seconds, prompt tokens) of a closed loop keeping ``concurrency`` in flight."""
    counter = iter(range(requests))
    results: list[Result] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=3600)) as session:

        async def worker() -> None:
            for i in counter:
                results.append(await stream_one(session, url, max_tokens, i))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return sum(r.tokens for r in results) / wall, wall, results[0].prompt_tokens


def row(name: str, target: float, model_value: float, measured: Optional[float], how: str) -> str:
    m = f"{measured:8.1f}" if measured is not None else "       -"
    off = model_value / target - 1
    dev = f"{off * 100:+5.1f}%" + ("!" if abs(off) > model.CALIBRATION_TOLERANCE else " ")
    return f"{name:<44} {target:>7.0f} {model_value:>9.1f} {dev:>8} {m}   {how}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--c250-speed", type=float, default=2.0, help="--fake-speed of the C=250 runs")
    ap.add_argument("--c250-tokens", type=int, default=128, help="max_tokens of the C=250 runs")
    ap.add_argument("--c250-requests", type=int, default=250)
    ap.add_argument("--single-tokens", type=int, default=256, help="max_tokens of the single-stream runs")
    ap.add_argument("--single-runs", type=int, default=2)
    record.add_flag(ap)
    opts = ap.parse_args()
    recorded = []

    tree = model.Spec(5, 4, 16)
    chain = model.Spec(2, 1, 3)
    log_dir = Path(tempfile.mkdtemp(prefix="fake-calibration-"))
    print(f"fake SGLang calibration (server logs in {log_dir})")
    print(
        f"the model claims each figure within {model.CALIBRATION_TOLERANCE:.0%} of its target "
        "(sweep.fake.model.CALIBRATION_TOLERANCE); ! marks one outside it\n"
    )
    print(f"{'figure':<44} {'target':>7} {'model@1x':>9} {'vs tgt':>8} {'measured':>8}   how measured")
    lines = []

    singles = [
        ("baseline, single stream, tuned NCCL", 89, [], TUNED, None),
        ("baseline, single stream, default NCCL", 63, [], {}, None),
        ("EAGLE-3 2 steps topk 1, single stream, tuned", 94, EAGLE3_2, TUNED, chain),
    ]
    for name, target, flags, nccl, spec in singles:
        with Server(flags, 1.0, nccl, log_dir) as server:
            rate, _ = asyncio.run(single_stream(server.url, opts.single_tokens, opts.single_runs))
        how = f"speed 1, {opts.single_runs} x {opts.single_tokens}-token streams, decode rate"
        lines.append(row(name, target, model.single_stream_tok_s(spec, nccl), rate, how))
        print(lines[-1], flush=True)
        recorded.append([name, target, round(model.single_stream_tok_s(spec, nccl), 1), round(rate, 1), how])

    s, n, c = opts.c250_speed, opts.c250_tokens, opts.c250_requests
    loops = [
        ("baseline, C=250, 512 tokens, tuned NCCL", 770, [], None, None),
        ("EAGLE-3 5 steps topk 4 16 draft, C=250, 512", 350, EAGLE3_TREE, tree, 256),
    ]
    for name, target, flags, spec, cap in loops:
        with Server(flags, s, TUNED, log_dir) as server:
            tput, wall, prompt = asyncio.run(closed_loop(server.url, 250, c, n))
        scaled = tput / s
        short_model = model.closed_loop_run(c, 250, n, spec, TUNED, cap, prompt_tokens=prompt).throughput_tok_s
        model_512 = model.closed_loop_throughput_tok_s(250, 512, spec, TUNED, cap, prompt_tokens=prompt)
        how = (
            f"model for 512 tok; measured: {c} x {n}-tok streams at speed {s:g} ({wall:.1f} s), /{s:g} "
            f"= {scaled:.1f} vs model {short_model:.1f} for that run ({(scaled / short_model - 1) * 100:+.1f}%)"
        )
        lines.append(row(name, target, model_512, scaled, how))
        print(lines[-1], flush=True)
        recorded.append([name, target, round(model_512, 1), round(scaled, 1), how])
    columns = ["figure (tok/s)", "target", "model at speed 1", "measured", "how measured"]
    title = f"the fake against the calibration targets (the model within {model.CALIBRATION_TOLERANCE:.0%} of each)"
    sources = ["sweep/fake/model.py", "sweep/fake/engine.py", "sweep/fake/server.py"]
    record.write("fake_calibration", opts, [record.table(title, columns, recorded)], sources)


if __name__ == "__main__":
    main()
