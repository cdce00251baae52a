"""The fake scheduler: a real continuous-batching loop whose forward passes take the model's time.

One asyncio task, in the same loop as the HTTP server (no threads, no IPC: at C=250 the benchmark
client shares the machine's cores). Each iteration either prefills waiting requests (SGLang runs
prefill first, within ``max_prefill_tokens``, never beyond the running cap) or runs one decode step
over the running batch, giving each request ``1 + accepted`` tokens. Steps are scheduled against a
monotonic deadline (``next += step``), so event-loop overhead does not add up into the timing.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from sweep.sglang.fake import model
from sweep.sglang.fake.log import Log

MAX_CATCH_UP_S = 0.25  # a loop that fell further behind than this restarts its clock instead of bursting


@dataclass
class EngineConfig:
    spec: Optional[model.Spec]
    nccl_env: Mapping[str, str]
    speed: float = 1.0
    max_running: int = 4096
    max_prefill_tokens: int = model.DEFAULT_MAX_PREFILL_TOKENS
    max_total_tokens: int = 1_000_000
    cuda_graph_max_bs: Optional[int] = 256  # None: CUDA graphs disabled
    decode_log_interval: int = 40
    stream_interval: int = 1


class Req:
    """One generation request's state. The HTTP handler waits on ``event`` and reads ``marks``:
    the cumulative token count at the end of each step since it last looked."""

    __slots__ = ("rid", "prompt_tokens", "max_new_tokens", "stop_len", "seed", "created", "acceptor",
                 "produced", "verify_ct", "accepted", "marks", "finished", "finish_reason", "first_token_at",
                 "finished_at", "event", "external")

    def __init__(self, rid: str, prompt_tokens: int, max_new_tokens: int, stop_len: int, seed: int,
                 spec: Optional[model.Spec], external: bool = True):
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.stop_len = stop_len  # tokens until the model's EOS (>= max_new_tokens when EOS is ignored)
        self.seed = seed
        self.created = time.perf_counter()
        self.acceptor = model.Acceptor(spec)
        self.produced = 0
        self.verify_ct = 0
        self.accepted = 0  # draft tokens accepted (before truncation at the end)
        self.marks: list[int] = []
        self.finished = False
        self.finish_reason: Optional[str] = None  # length | stop | abort
        self.first_token_at: Optional[float] = None
        self.finished_at: Optional[float] = None
        self.event = asyncio.Event()
        self.external = external  # False for the server's own warmup / health probes

    @property
    def limit(self) -> int:
        return min(self.max_new_tokens, self.stop_len)

    def take_marks(self) -> list[int]:
        marks, self.marks = self.marks, []
        self.event.clear()
        return marks


class Histogram:
    """A Prometheus histogram (cumulative buckets, sum, count) for the /metrics text."""

    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.total += value
        self.n += 1
        for i, b in enumerate(self.buckets):
            if value <= b:
                self.counts[i] += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = [f"# TYPE {name} histogram"]
        for b, c in zip(self.buckets, self.counts):
            out.append(f'{name}_bucket{{{labels},le="{b}"}} {float(c)}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(self.n)}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {float(self.n)}")
        return out


_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0)


@dataclass
class Stats:
    """Counters the server reports: lifetime, since /flush_cache, and since the last decode log."""

    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    requests_total: int = 0
    spec_tokens: int = 0  # sum over request-steps of (1 + accepted), since flush
    spec_steps: int = 0  # request-steps (verify rounds x requests), since flush
    interval_tokens: int = 0
    interval_spec_tokens: int = 0
    interval_spec_steps: int = 0
    interval_start: float = field(default_factory=time.perf_counter)
    last_gen_throughput: float = 0.0
    last_accept_length: float = 0.0
    last_accept_rate: float = 0.0
    ttft: Histogram = field(default_factory=lambda: Histogram(_LATENCY_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(_LATENCY_BUCKETS))


class Engine:
    def __init__(self, cfg: EngineConfig, log: Log, on_finished: Optional[Callable[[Req], None]] = None,
                 on_batch: Optional[Callable[[list[Req]], None]] = None):
        self.cfg = cfg
        self.log = log  # the rank-0 scheduler's logger (prefix " TP0")
        self.on_finished = on_finished  # called for each finished request (crash-after-N counting)
        self.on_batch = on_batch  # called before each prefill (fail-at-serve)
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.stats = Stats()
        self._wake = asyncio.Event()
        self._decode_steps = 0
        self._depth = model.max_accepted(cfg.spec) if cfg.spec else 0

    # --- requests ---
    def submit(self, req: Req) -> None:
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: Req) -> None:
        """Drop a request whose client went away (SGLang aborts it too)."""
        if req.finished:
            return
        try:
            self.waiting.remove(req)
        except ValueError:
            pass
        if req in self.running:
            self.running.remove(req)
        self._finish(req, "abort")

    def busy(self) -> bool:
        return bool(self.running or self.waiting)

    def flush(self) -> bool:
        """/flush_cache: refused while requests run; resets the accept-length averages."""
        if self.busy():
            self.log.info(f"Cache not flushed because there are pending requests. #queue-req: {len(self.waiting)}, "
                          f"#running-req: {len(self.running)}")
            return False
        self.stats.spec_tokens = self.stats.spec_steps = 0
        self.log.info("Cache flushed successfully!")
        return True

    # --- the loop ---
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        speed = self.cfg.speed
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
            if self.waiting and len(self.running) < self.cfg.max_running:
                batch, tokens = self._admit()
                if self.on_batch:
                    self.on_batch(batch)
                deadline = await self._sleep_until(loop, deadline + model.prefill_time_s(tokens, self.cfg.nccl_env) / speed)
                self._log_prefill(batch, tokens)
                self._after_prefill(batch)
            else:
                n = len(self.running)
                graph = self.cfg.cuda_graph_max_bs is not None and n <= self.cfg.cuda_graph_max_bs
                step = model.step_time_s(n, self.cfg.spec, self.cfg.nccl_env, cuda_graph=graph) / speed
                deadline = await self._sleep_until(loop, deadline + step)
                self._decode_step(graph)

    @staticmethod
    async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> float:
        now = loop.time()
        if deadline > now:
            await asyncio.sleep(deadline - now)
            return deadline
        await asyncio.sleep(0)  # behind schedule: run back to back, but let the handlers write
        return deadline if now - deadline < MAX_CATCH_UP_S else now

    def _admit(self) -> tuple[list[Req], int]:
        batch: list[Req] = []
        tokens = 0
        room = self.cfg.max_running - len(self.running)
        while self.waiting and len(batch) < room:
            req = self.waiting[0]
            if batch and tokens + req.prompt_tokens > self.cfg.max_prefill_tokens:
                break
            self.waiting.popleft()
            batch.append(req)
            tokens += req.prompt_tokens
        return batch, tokens

    def _after_prefill(self, batch: list[Req]) -> None:
        now = time.perf_counter()
        for req in batch:
            if req.finished:  # aborted meanwhile
                continue
            self.stats.prompt_tokens_total += req.prompt_tokens
            req.first_token_at = now
            self.stats.ttft.observe(now - req.created)
            if req.limit <= 0:
                self._finish(req, "length" if req.max_new_tokens <= req.stop_len else "stop")
                continue
            req.produced = 1  # the prefill samples the first token
            self.stats.generation_tokens_total += 1
            self.stats.interval_tokens += 1
            req.marks.append(1)
            if req.produced >= req.limit:
                self._finish(req, self._reason(req))
            else:
                self.running.append(req)
                req.event.set()

    def _decode_step(self, graph: bool) -> None:
        stats = self.stats
        interval = self.cfg.stream_interval
        still: list[Req] = []
        for req in self.running:
            if req.finished:
                continue
            a = req.acceptor.next()
            req.verify_ct += 1
            req.accepted += a
            got = min(1 + a, req.limit - req.produced)
            req.produced += got
            stats.generation_tokens_total += got
            stats.interval_tokens += got
            stats.spec_tokens += 1 + a
            stats.spec_steps += 1
            stats.interval_spec_tokens += 1 + a
            stats.interval_spec_steps += 1
            if req.produced >= req.limit:
                req.marks.append(req.produced)
                self._finish(req, self._reason(req))
            else:
                if req.verify_ct % interval == 0:
                    req.marks.append(req.produced)
                    req.event.set()
                still.append(req)
        running_before = len(self.running)
        self.running = still
        self._decode_steps += 1
        if self._decode_steps % max(1, self.cfg.decode_log_interval) == 0:
            self._log_decode(running_before, graph)

    @staticmethod
    def _reason(req: Req) -> str:
        return "length" if req.produced >= req.max_new_tokens else "stop"

    def _finish(self, req: Req, reason: str) -> None:
        req.finished = True
        req.finish_reason = reason
        req.finished_at = time.perf_counter()
        if reason != "abort":
            self.stats.requests_total += 1
            self.stats.e2e.observe(req.finished_at - req.created)
        req.event.set()
        if self.on_finished and reason != "abort":
            self.on_finished(req)

    # --- what the server reports ---
    def token_usage(self) -> float:
        used = sum(r.prompt_tokens + r.produced for r in self.running)
        return used / max(self.cfg.max_total_tokens, 1)

    def avg_spec_accept_length(self) -> Optional[float]:
        s = self.stats
        return s.spec_tokens / s.spec_steps if self.cfg.spec and s.spec_steps else None

    def _log_prefill(self, batch: list[Req], tokens: int) -> None:
        self.log.info(f"Prefill batch, #new-seq: {len(batch)}, #new-token: {tokens}, #cached-token: 0, "
                      f"token usage: {self.token_usage():.2f}, #running-req: {len(self.running)}, "
                      f"#queue-req: {len(self.waiting)}")

    def _log_decode(self, running: int, graph: bool) -> None:
        s = self.stats
        now = time.perf_counter()
        s.last_gen_throughput = s.interval_tokens / max(now - s.interval_start, 1e-9)
        tokens = sum(r.prompt_tokens + r.produced for r in self.running)
        msg = (f"Decode batch, #running-req: {running}, #token: {tokens}, "
               f"token usage: {tokens / max(self.cfg.max_total_tokens, 1):.2f}, ")
        if self.cfg.spec:
            s.last_accept_length = s.interval_spec_tokens / max(s.interval_spec_steps, 1)
            s.last_accept_rate = (s.last_accept_length - 1) / self._depth if self._depth else 0.0
            msg += f"accept len: {s.last_accept_length:.2f}, accept rate: {s.last_accept_rate:.2f}, "
        msg += (f"cuda graph: {graph}, gen throughput (token/s): {s.last_gen_throughput:.2f}, "
                f"#queue-req: {len(self.waiting)}")
        self.log.info(msg)
        s.interval_tokens = s.interval_spec_tokens = s.interval_spec_steps = 0
        s.interval_start = now

    def internal_state(self) -> dict:
        state: dict = {"last_gen_throughput": self.stats.last_gen_throughput,
                       "effective_max_running_requests_per_dp": self.cfg.max_running,
                       "memory_usage": {"token_capacity": self.cfg.max_total_tokens}}
        avg = self.avg_spec_accept_length()
        if avg is not None:
            state["avg_spec_accept_length"] = avg
        return state

    def metrics_text(self, model_name: str) -> str:
        """Prometheus exposition text with SGLang's metric names."""
        s = self.stats
        labels = f'model_name="{model_name}"'
        lines: list[str] = []

        def gauge(name: str, value: float, help_: str) -> None:
            lines.extend([f"# HELP sglang:{name} {help_}", f"# TYPE sglang:{name} gauge",
                          f"sglang:{name}{{{labels}}} {float(value)}"])

        def counter(name: str, value: float, help_: str) -> None:
            lines.extend([f"# HELP sglang:{name}_total {help_}", f"# TYPE sglang:{name}_total counter",
                          f"sglang:{name}_total{{{labels}}} {float(value)}"])

        gauge("num_running_reqs", len(self.running), "The number of running requests.")
        gauge("num_used_tokens", sum(r.prompt_tokens + r.produced for r in self.running), "The number of used tokens.")
        gauge("token_usage", self.token_usage(), "The token usage.")
        gauge("gen_throughput", s.last_gen_throughput, "The generation throughput (token/s).")
        gauge("num_queue_reqs", len(self.waiting), "The number of requests in the waiting queue.")
        gauge("cache_hit_rate", 0.0, "The prefix cache hit rate.")
        gauge("spec_accept_length", s.last_accept_length, "The average acceptance length of speculative decoding.")
        gauge("spec_accept_rate", s.last_accept_rate, "The average acceptance rate of speculative decoding.")
        counter("prompt_tokens", s.prompt_tokens_total, "Number of prefill tokens processed.")
        counter("generation_tokens", s.generation_tokens_total, "Number of generation tokens processed.")
        counter("num_requests", s.requests_total, "Number of requests processed.")
        counter("cached_tokens", 0, "Number of cached prompt tokens.")
        lines.append("# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.")
        lines.extend(s.ttft.lines("sglang:time_to_first_token_seconds", labels))
        lines.append("# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds")
        lines.extend(s.e2e.lines("sglang:e2e_request_latency_seconds", labels))
        return "\n".join(lines) + "\n"
