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

from sweep.fake import adaptive, metrics, model, text
from sweep.fake.cache import PrefixCache
from sweep.fake.log import Log
from sweep.sglang import Config

_MAX_CATCH_UP_S = 0.25  # a loop that fell further behind than this restarts its clock instead of bursting


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
    real_wording: bool = False  # the 0.5.23 prefill log line (``#pending-token``, graph, input throughput)
    # --speculative-adaptive in force: SGLang's config (loaded); each decode batch then runs with its tier's
    # step count (sweep/fake/adaptive.py), ``spec`` being the launch's (its steps the starting ones)
    adaptive: Optional[Config] = None
    adaptive_start: Optional[int] = None  # the step count it starts with (default spec.steps)
    # the decode CUDA-graph batch sizes the server captured (None: graphs disabled): SGLang pads a batch to
    # them before routing it to an adaptive tier
    cuda_graph_bs: Optional[tuple[int, ...]] = None


class Req:
    """One generation request's state. The HTTP handler waits on ``event`` and reads ``marks``:
    the cumulative token count at the end of each step since it last looked."""

    __slots__ = (
        "rid",
        "prompt_tokens",
        "max_new_tokens",
        "stop_len",
        "seed",
        "created",
        "acceptor",
        "produced",
        "verify_ct",
        "accepted",
        "marks",
        "finished",
        "finish_reason",
        "first_token_at",
        "finished_at",
        "event",
        "external",
        "streaming",
        "accept_hist",
        "received_ts",
        "entry_time",
        "prefilled_time",
        "last_token_at",
        "log_metrics",
        "ids",
        "cached",
        "proposed",
    )

    def __init__(
        self,
        rid: str,
        prompt_tokens: int,
        max_new_tokens: int,
        stop_len: int,
        seed: int,
        spec: Optional[model.Spec],
        external: bool = True,
        streaming: bool = False,
        log_metrics: bool = True,
        ids: tuple[int, ...] = (),
    ):
        self.rid = rid
        self.ids = ids  # the prompt as token ids (the prefix cache's key: sweep/fake/cache.py)
        self.cached = 0  # of its prompt tokens, those the prefix cache held at its prefill
        self.prompt_tokens = prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.stop_len = stop_len  # tokens until the model's EOS (>= max_new_tokens when EOS is ignored)
        self.seed = seed
        self.created = time.perf_counter()
        self.acceptor = model.Acceptor(spec)
        self.produced = 0
        self.verify_ct = 0
        self.accepted = 0  # draft tokens accepted (before truncation at the end)
        self.proposed = 0  # draft tokens proposed: num_draft_tokens - 1 per verify (it changes under adaptive)
        self.marks: list[int] = []
        self.finished = False
        self.finish_reason: Optional[str] = None  # length | stop | abort
        self.first_token_at: Optional[float] = None
        self.finished_at: Optional[float] = None
        self.event = asyncio.Event()
        self.external = external  # False for the server's own warmup / health probes
        self.streaming = streaming  # the is_streaming label of its metrics
        self.log_metrics = log_metrics  # False for health checks: no request metrics (SGLang's log_metrics)
        self.accept_hist: list[int] = []  # verify steps by draft tokens accepted (0, 1, 2...)
        self.received_ts = time.time()  # wall clock, for meta_info's *_ts / *_time fields
        self.entry_time: Optional[float] = None
        self.prefilled_time: Optional[float] = None
        self.last_token_at: Optional[float] = None

    @property
    def limit(self) -> int:
        return min(self.max_new_tokens, self.stop_len)

    def take_marks(self) -> list[int]:
        marks, self.marks = self.marks, []
        self.event.clear()
        return marks


Histogram = metrics.Histogram
_SINK = {"prompt": 0, "generation": 0, "requests": 0}  # where a health check's counts go
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0)
_ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
_LENGTH_BUCKETS = (
    100,
    300,
    500,
    700,
    1000,
    1500,
    2000,
    3000,
    4000,
    5000,
    6000,
    7000,
    8000,
    9000,
    10000,
    12000,
    15000,
    20000,
    30000,
    40000,
    50000,
    60000,
    70000,
    80000,
    90000,
    100000,
    150000,
    200000,
    300000,
    400000,
    500000,
    600000,
    700000,
    800000,
    900000,
    1000000,
)


@dataclass
class _Stats:
    """Counters the server reports: lifetime, since /flush_cache, and since the last decode log."""

    prompt_tokens_total: int = 0
    cached_tokens_total: int = 0  # prompt tokens the prefix cache held (not prefilled)
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
    spec_verify_calls: int = 0  # request-verifies, lifetime (sglang:spec_verify_calls_total)
    decode_passes: int = 0
    decode_graph_passes: int = 0
    prefill_passes: int = 0
    by_streaming: dict = field(
        default_factory=lambda: {k: {"prompt": 0, "generation": 0, "requests": 0} for k in ("false", "true")}
    )
    ttft: dict = field(default_factory=lambda: {k: Histogram(_LATENCY_BUCKETS) for k in ("false", "true")})
    e2e: dict = field(default_factory=lambda: {k: Histogram(_LATENCY_BUCKETS) for k in ("false", "true")})
    itl: Histogram = field(default_factory=lambda: Histogram(_ITL_BUCKETS))
    queue_time: Histogram = field(default_factory=lambda: Histogram(_LATENCY_BUCKETS))
    prompt_hist: Histogram = field(default_factory=lambda: Histogram(_LENGTH_BUCKETS))
    generation_hist: Histogram = field(default_factory=lambda: Histogram(_LENGTH_BUCKETS))


class Engine:
    def __init__(
        self,
        cfg: EngineConfig,
        log: Log,
        on_finished: Optional[Callable[[Req], None]] = None,
        on_batch: Optional[Callable[[list[Req]], None]] = None,
    ):
        self.cfg = cfg
        self.log = log  # the rank-0 scheduler's logger (prefix " TP0")
        self.on_finished = on_finished  # called for each finished request (crash-after-N counting)
        self.on_batch = on_batch  # called before each prefill (fail-at-serve)
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.stats = _Stats()
        self._wake = asyncio.Event()
        self._decode_steps = 0
        self.last_output_at = 0.0  # perf_counter of the last step that produced tokens (health checks)
        self._depth = model.max_accepted(cfg.spec) if cfg.spec else 0
        # adaptive speculation: SGLang's controller (its "initialized" line is the startup's, not logged here)
        start = cfg.adaptive_start if cfg.adaptive_start is not None else cfg.spec.steps if cfg.spec else 0
        self.adaptive = (
            adaptive.Controller(start, cfg.adaptive, self.log.info, announce=False, cuda_graph_bs=cfg.cuda_graph_bs)
            if cfg.adaptive is not None and cfg.spec is not None
            else None
        )
        self._specs: dict[int, Optional[model.Spec]] = {}
        self.cache = PrefixCache(cfg.max_total_tokens)
        self.excess_j = 0.0  # per GPU: joules above idle of every forward so far (sweep/fake/power.py)

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
            self.log.info(
                f"Cache not flushed because there are pending requests. #queue-req: {len(self.waiting)}, "
                f"#running-req: {len(self.running)}"
            )
            return False
        self.stats.spec_tokens = self.stats.spec_steps = 0
        self.cache.clear()
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
                t0 = time.perf_counter()
                for req in batch:
                    req.entry_time = time.time()
                    self.stats.queue_time.observe(t0 - req.created)
                took = model.prefill_time_s(tokens, self.cfg.nccl_env) / speed
                deadline = await self._sleep_until(loop, deadline + took)
                self.excess_j += (model.forward_power_w(tokens) - model.IDLE_W) * took
                self._log_prefill(batch, tokens, time.perf_counter() - t0)
                self._after_prefill(batch)
            else:
                n = len(self.running)
                graph = self.cfg.cuda_graph_max_bs is not None and n <= self.cfg.cuda_graph_max_bs
                spec = self.spec_now(n)
                zero = self.adaptive is not None and spec is None  # SGLang's step 0: the draft extend still runs
                step = model.step_time_s(n, spec, self.cfg.nccl_env, cuda_graph=graph, zero_step=zero) / speed
                deadline = await self._sleep_until(loop, deadline + step)
                self.excess_j += (model.forward_power_w(n * model.verify_tokens(spec)) - model.IDLE_W) * step
                self._decode_step(graph, spec)

    @staticmethod
    async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> float:
        now = loop.time()
        if deadline > now:
            await asyncio.sleep(deadline - now)
            return deadline
        await asyncio.sleep(0)  # behind schedule: run back to back, but let the handlers write
        return deadline if now - deadline < _MAX_CATCH_UP_S else now

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
            req.cached = min(self.cache.match(req.ids), req.prompt_tokens - 1) if req.ids else 0
            tokens += req.prompt_tokens - req.cached
        return batch, tokens

    def _after_prefill(self, batch: list[Req]) -> None:
        now = self.last_output_at = time.perf_counter()
        stats = self.stats
        stats.prefill_passes += 1
        for req in batch:
            if req.finished:  # aborted meanwhile
                continue
            kind = stats.by_streaming["true" if req.streaming else "false"] if req.log_metrics else _SINK.copy()
            stats.prompt_tokens_total += req.prompt_tokens
            stats.cached_tokens_total += req.cached
            kind["prompt"] += req.prompt_tokens
            req.first_token_at = req.last_token_at = now
            req.prefilled_time = time.time()
            if req.log_metrics:
                stats.prompt_hist.observe(req.prompt_tokens)
                stats.ttft["true" if req.streaming else "false"].observe(now - req.created)
            if req.limit <= 0:
                self._finish(req, "length" if req.max_new_tokens <= req.stop_len else "stop")
                continue
            req.produced = 1  # the prefill samples the first token
            stats.generation_tokens_total += 1
            kind["generation"] += 1
            stats.interval_tokens += 1
            req.marks.append(1)
            if req.produced >= req.limit:
                self._finish(req, self._reason(req))
            else:
                self.running.append(req)
                req.event.set()

    def spec_now(self, batch: int) -> Optional[model.Spec]:
        """The speculative config the next decode step over ``batch`` requests runs with: the launch's, or
        under adaptive speculation its tier's step count (``activate_step_by_batch``; a chain of that depth,
        topk 1, steps + 1 draft tokens; 0 steps: a plain decode)."""
        if self.adaptive is None:
            return self.cfg.spec
        steps = self.adaptive.before_batch(batch)
        if steps not in self._specs:
            base = self.cfg.spec
            self._specs[steps] = (
                model.Spec(steps, 1, steps + 1, base.accept_rate, ngram=base.ngram)
                if steps > 0 and base is not None
                else None
            )
        return self._specs[steps]

    def _decode_step(self, graph: bool, spec: Optional[model.Spec] = None) -> None:
        spec = self.cfg.spec if spec is None and self.adaptive is None else spec
        stats = self.stats
        interval = self.cfg.stream_interval
        still: list[Req] = []
        now = self.last_output_at = time.perf_counter()
        stats.decode_passes += 1
        stats.decode_graph_passes += int(graph)
        depth = model.max_accepted(spec) if spec else 0
        proposed = max(spec.draft_tokens - 1, 0) if spec else 0
        verified: list[int] = []  # accepted drafts per request, for the adaptive controller
        for req in self.running:
            if req.finished:
                continue
            a = req.acceptor.next(depth)
            verified.append(a)
            req.verify_ct += 1
            req.accepted += a
            req.proposed += proposed
            if self.cfg.spec:
                stats.spec_verify_calls += 1  # per request, as the real counter (the sum of spec_verify_ct)
                while len(req.accept_hist) <= a:
                    req.accept_hist.append(0)
                req.accept_hist[a] += 1
            got = min(1 + a, req.limit - req.produced)
            req.produced += got
            if req.log_metrics:
                if req.last_token_at is not None and got:
                    stats.itl.observe((now - req.last_token_at) / got)
                stats.by_streaming["true" if req.streaming else "false"]["generation"] += got
            req.last_token_at = now
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
        if self.adaptive is not None:  # on_verify_complete: the tier's EMA, and a switch where it moves
            self.adaptive.after_verify(verified, running_before)
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
            if req.log_metrics:
                kind = "true" if req.streaming else "false"
                self.stats.by_streaming[kind]["requests"] += 1
                self.stats.e2e[kind].observe(req.finished_at - req.created)
                self.stats.generation_hist.observe(req.produced)
        if reason != "abort" and req.ids:  # its prompt and output but the last token (no KV yet)
            self.cache.insert(req.ids + tuple(text.token_ids(req.seed, 0, max(req.produced - 1, 0))))
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

    def proposed_per_verify(self) -> int:
        """Draft tokens each verify proposes, as SGLang counts them: num_draft_tokens - 1 (under adaptive
        speculation, the last step's)."""
        if self.adaptive is not None:
            return self.adaptive.steps
        return max(self.cfg.spec.draft_tokens - 1, 0) if self.cfg.spec else 0

    def _log_prefill(self, batch: list[Req], tokens: int, elapsed: float) -> None:
        msg = (
            f"Prefill batch, #new-seq: {len(batch)}, #new-token: {tokens}, "
            f"#cached-token: {sum(r.cached for r in batch)}, "
            f"token usage: {self.token_usage():.2f}, #running-req: {len(self.running)}, "
            f"#queue-req: {len(self.waiting)}"
        )
        if self.cfg.real_wording:  # GPU wording of the CPU transcripts' "cpu graph: False"
            msg += (
                f", #pending-token: 0, cuda graph: False, input throughput (token/s): {tokens / max(elapsed, 1e-9):.2f}"
            )
        self.log.info(msg)

    def _log_decode(self, running: int, graph: bool) -> None:
        s = self.stats
        now = time.perf_counter()
        s.last_gen_throughput = s.interval_tokens / max(now - s.interval_start, 1e-9)
        tokens = sum(r.prompt_tokens + r.produced for r in self.running)
        msg = (
            f"Decode batch, #running-req: {running}, #token: {tokens}, "
            f"token usage: {tokens / max(self.cfg.max_total_tokens, 1):.2f}, "
        )
        if self.cfg.spec:
            s.last_accept_length = s.interval_spec_tokens / max(s.interval_spec_steps, 1)
            proposed = self.proposed_per_verify()  # accepted drafts / proposed drafts, as SGLang
            s.last_accept_rate = (s.last_accept_length - 1) / proposed if proposed else 0.0
            msg += f"accept len: {s.last_accept_length:.2f}, accept rate: {s.last_accept_rate:.2f}, "
        msg += (
            f"cuda graph: {graph}, gen throughput (token/s): {s.last_gen_throughput:.2f}, "
            f"#queue-req: {len(self.waiting)}"
        )
        self.log.info(msg)
        s.interval_tokens = s.interval_spec_tokens = s.interval_spec_steps = 0
        s.interval_start = now

    def internal_state(self) -> dict:
        """The scheduler's part of ``internal_states[i]`` (the server adds its args and memory)."""
        state: dict = {
            "last_gen_throughput": self.stats.last_gen_throughput,
            "effective_max_running_requests_per_dp": self.cfg.max_running,
        }
        avg = self.avg_spec_accept_length()
        if avg is not None:
            state["avg_spec_accept_length"] = avg
        return state

    def metric_values(self) -> dict:
        """Values of the /metrics families the fake models (see :mod:`metrics`)."""
        s = self.stats
        used = sum(r.prompt_tokens + r.produced for r in self.running)
        total = max(self.cfg.max_total_tokens, 1)
        streaming = ("false", "true")
        values: dict = {
            "num_running_reqs": float(len(self.running)),
            "num_queue_reqs": float(len(self.waiting)),
            "num_used_tokens": float(used),
            "kv_used_tokens": float(used),
            "kv_available_tokens": float(max(self.cfg.max_total_tokens - used, 0)),
            "token_usage": used / total,
            "full_token_usage": used / total,
            "gen_throughput": s.last_gen_throughput,
            "max_total_num_tokens": float(self.cfg.max_total_tokens),
            "num_pages": float(self.cfg.max_total_tokens),
            "page_size": 1.0,
            "decode_sum_seq_lens": float(used),
            "utilization": min(len(self.running) / max(self.cfg.max_running, 1), 1.0),
            "is_cuda_graph": float(
                self.cfg.cuda_graph_max_bs is not None and 0 < len(self.running) <= self.cfg.cuda_graph_max_bs
            ),
            "spec_accept_length": s.last_accept_length,
            "spec_accept_rate": s.last_accept_rate,
            "spec_num_steps": float(
                self.adaptive.steps if self.adaptive is not None else self.cfg.spec.steps if self.cfg.spec else 0
            ),
            "spec_num_draft_tokens": float(
                self.adaptive.steps + 1
                if self.adaptive is not None
                else self.cfg.spec.draft_tokens
                if self.cfg.spec
                else 0
            ),
            "prompt_tokens_total": metrics.series("is_streaming", {k: s.by_streaming[k]["prompt"] for k in streaming}),
            "generation_tokens_total": metrics.series(
                "is_streaming", {k: s.by_streaming[k]["generation"] for k in streaming}
            ),
            "num_requests_total": metrics.series("is_streaming", {k: s.by_streaming[k]["requests"] for k in streaming}),
            "cached_tokens_total": metrics.series("cache_source", {"device": float(s.cached_tokens_total)}),
            "prefill_effective_tokens_total": metrics.series(
                "mode",
                {
                    "input": s.prompt_tokens_total - s.cached_tokens_total,
                    "device_hit": float(s.cached_tokens_total),
                    "host_hit": 0.0,
                    "storage_hit": 0.0,
                },
            ),
            "realtime_tokens_total": metrics.series(
                "mode",
                {
                    "prefill_compute": s.prompt_tokens_total - s.cached_tokens_total,
                    "decode": s.generation_tokens_total,
                    "prefill_cache": float(s.cached_tokens_total),
                },
            ),
            "cuda_graph_passes_total": metrics.series(
                "mode",
                {
                    "prefill_none": s.prefill_passes,
                    "decode_none": s.decode_passes - s.decode_graph_passes,
                    "decode_cuda_graph": s.decode_graph_passes,
                },
            ),
            "time_to_first_token_seconds": [({"is_streaming": k}, s.ttft[k]) for k in streaming if s.ttft[k].n],
            "e2e_request_latency_seconds": [({"is_streaming": k}, s.e2e[k]) for k in streaming if s.e2e[k].n],
            "inter_token_latency_seconds": [({}, s.itl)] if s.itl.n else [],
            "queue_time_seconds": [({}, s.queue_time)],
            "prompt_tokens_histogram": [({}, s.prompt_hist)],
            "uncached_prompt_tokens_histogram": [({}, s.prompt_hist)],
            "generation_tokens_histogram": [({}, s.generation_hist)],
        }
        if self.cfg.spec:
            values["spec_verify_calls_total"] = float(s.spec_verify_calls)
        return values
