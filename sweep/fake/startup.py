"""What one scheduler (TP rank) does before it can serve: SGLang's startup phases, their log lines,
their relative durations and the "GPU memory" each one takes, with the faults asked for.

Two orders, as the two SGLang generations the fake imitates run them:

- 0.5.23 (:data:`REAL_WORDING` on; the real build in shared/sglang-cpu, whose transcripts
  tests/fake/test_fake_vs_real.py compares with): init distributed, load the target's weights;
  when speculating the drafter's init distributed and weights; the target's KV cache and memory pool,
  then the drafter's; then (GPU only) the target's CUDA graphs, the draft decode and draft extend
  graphs. No ``TP0`` prefix when tp is 1.
- 0.5.10: init distributed, the target's weights, KV cache and CUDA graphs; then the drafter's weights
  and its draft and draft-extend graphs.

Rank 0 draws SGLang's tqdm bars (:mod:`progress`): weight loading, one update per checkpoint shard
(:meth:`StartupPlan.shards`), and each CUDA graph capture, one update per batch size, at the pace of
the phase's duration. The CUDA graph lines and bars are GPU-only: the CPU transcripts have none.
The rank's ready message carries its phase timings for the launcher's ``Engine startup timings``.

Injected failures happen on rank 0 (its traceback, then SIGQUIT to the parent, as SGLang's scheduler
does); hangs stop every rank.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from sweep.core import ledger_record
from sweep.fake import adaptive, progress, rules, tracebacks
from sweep.fake.args import version_tuple
from sweep.fake.log import Log, rank_prefix
from sweep.sglang import adaptive as ad

GB = 1e9
_CONTEXT_GB = 0.79  # CUDA context + NCCL buffers after init
_TARGET_GRAPH_GB = 1.62
_DRAFT_WEIGHTS_GB = 2.31
_DRAFT_GRAPH_GB = 0.35
_DRAFT_EXTEND_GRAPH_GB = 0.21
_KV_BYTES_PER_TOKEN = 70272  # MLA: 61 layers x 576 x bf16
_DRAFT_KV_SHARE = 1 / 61  # the drafter's KV cache: one layer against the target's 61
_SHARD_GB = 5.0  # checkpoint shard size (Hugging Face's default max_shard_size)
_MAX_SHARDS = 64  # the big targets (Kimi K2: 64 shards)
_SYNC_TIMEOUT_S = 5.0  # the longest a rank waits for another at a bar phase (see RankSync)
_REAL_WORDING = (0, 5, 23)  # from this version on: the real build's wording and order (module doc)
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
_CUDA_GRAPH_BS = (
    1,
    2,
    4,
    8,
    12,
    16,
    24,
    32,
    40,
    48,
    56,
    64,
    72,
    80,
    88,
    96,
    104,
    112,
    120,
    128,
    136,
    144,
    152,
    160,
    168,
    176,
    184,
    192,
    200,
    208,
    216,
    224,
    232,
    240,
    248,
    256,
    272,
    288,
    304,
    320,
    336,
    352,
    368,
    384,
    400,
    416,
    432,
    448,
    464,
    480,
    496,
    512,
)


@dataclass(frozen=True)
class Durations:
    """Seconds at speed 1, shaped like a large MoE on 8 GPUs (weights minutes, capture 1-3 minutes)."""

    init: float = 8.0
    weights: float = 240.0
    kv: float = 3.0
    capture: float = 110.0
    draft_weights: float = 20.0
    draft_capture: float = 40.0
    draft_extend_capture: float = 15.0
    warmup: float = 6.0  # after uvicorn starts: /health answers 503 meanwhile

    def total(self, speculative: bool, graphs: bool = True) -> float:
        t = self.init + self.weights + self.kv + (self.capture if graphs else 0.0) + self.warmup
        if speculative:
            t += self.draft_weights + ((self.draft_capture + self.draft_extend_capture) if graphs else 0.0)
        return t


# Log wording that changed between versions: name -> (0.5.10, 0.5.23 = the real build's).
_WORDING: dict[str, tuple[str, str]] = {
    "load_end": (
        "Load weight end. elapsed={t:.2f} s, type={arch}, dtype=torch.bfloat16, avail mem={avail:.2f} GB, "
        "mem usage={m:.2f} GB.",
        "Load weight end. elapsed={t:.2f} s, type={arch}, avail mem={avail:.2f} GB, mem usage={m:.2f} GB.",
    ),
    "weights_bar": ("Loading safetensors checkpoint shards", "Multi-thread loading shards"),
    "kv": (
        "KV Cache is allocated. #tokens: {tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB",
    ),
    "target_begin": (
        "Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB",
        "Capture target {mode} CUDA graph begin. backend=full, num_tokens_per_req={tpb}, bs={bs}, "
        "avail mem={avail:.2f} GB",
    ),
    "target_end": (
        "Capture cuda graph end. Time elapsed: {t:.2f} s. mem usage={m:.2f} GB. avail mem={avail:.2f} GB.",
        "Capture target {mode} CUDA graph end. elapsed={t:.2f} s, mem usage={m:.2f} GB, avail mem={avail:.2f} GB.",
    ),
    "draft_begin": (
        "Capture draft cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB",
        "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req={tpb}, bs={bs}, "
        "avail mem={avail:.2f} GB",
    ),
    "draft_end": (
        "Capture draft cuda graph end. Time elapsed: {t:.2f} s. mem usage={m:.2f} GB. avail mem={avail:.2f} GB.",
        "Capture draft decode CUDA graph end. elapsed={t:.2f} s, mem usage={m:.2f} GB, avail mem={avail:.2f} GB.",
    ),
    "extend_begin": (
        "Capture draft extend cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB",
        "Capture draft extend CUDA graph begin. backend=full, num_tokens_per_req={tpb}, bs={bs}, "
        "avail mem={avail:.2f} GB",
    ),
    "extend_end": (
        "Capture draft extend cuda graph end. Time elapsed: {t:.2f} s. mem usage={m:.2f} GB. avail mem={avail:.2f} GB.",
        "Capture draft extend CUDA graph end. elapsed={t:.2f} s, mem usage={m:.2f} GB, avail mem={avail:.2f} GB.",
    ),
}


def real_wording(version: str) -> bool:
    """Whether ``version`` speaks like the real build in shared/sglang-cpu (0.5.23 on)."""
    return version_tuple(version) >= _REAL_WORDING


def engine_timings_line(timings: dict[str, Any], tokenizer_e2e: float) -> str:
    """The launcher's line once every rank is ready, in SGLang's format (entrypoints/engine.py)."""
    graphs = ", ".join(f"{phase}={timings['cuda_graph'].get(phase, 0.0):.2f}" for phase in GRAPH_PHASES)
    return (
        f"Engine startup timings (s): load_weight={timings['load_weight']:.2f}, "
        f"kv_cache_allocation={timings['kv_cache_allocation']:.2f}, scheduler_e2e={timings['scheduler_e2e']:.2f}, "
        f"cuda_graph={{{graphs}}}, tokenizer_e2e={tokenizer_e2e:.2f}"
    )


@dataclass
class StartupPlan:
    """Everything a rank needs to walk its startup (built in the parent, read after fork)."""

    args: dict[str, Any]
    architecture: str
    version: str = "0.5.10"
    speed: float = 1.0
    durations: Durations = field(default_factory=Durations)
    weights_gb: float = 72.5
    gpu_mem_gb: float = 139.81
    fail_at: Optional[str] = None  # load | capture (serve is the engine's)
    hang_at: Optional[str] = None  # load | capture
    check_paths: bool = False
    deferred: Optional[rules.Deferred] = None
    ledger_dir: Optional[Path] = None
    context_len: int = rules.DEFAULT_CONTEXT_LENGTH
    sync: Optional[RankSync] = None  # with tp > 1 on this node: the ranks' meeting points around bars
    adaptive: Optional[ad.Config] = None  # --speculative-adaptive in force: the config SGLang loaded

    @property
    def speculative(self) -> bool:
        """Speculation with a drafter model (the EAGLE family; NGRAM drafts without one)."""
        return self.args.get("speculative_algorithm") in rules.EAGLE_FAMILY

    @property
    def verifies(self) -> bool:
        """Any speculation: the target's graphs are verify graphs (``target_verify``)."""
        return bool(self.args.get("speculative_algorithm"))

    @property
    def graphs(self) -> bool:
        return rules.cuda_graph_enabled(self.args)

    @property
    def real_wording(self) -> bool:
        return real_wording(self.version)

    @property
    def tp_size(self) -> int:
        return int(self.args.get("tp_size") or 1)

    def word(self, name: str, **kw: Any) -> str:
        return _WORDING[name][1 if self.real_wording else 0].format(**kw)

    def graph_bs(self, max_running: int) -> list[int]:
        if self.args.get("cuda_graph_bs"):
            return sorted(int(b) for b in self.args["cuda_graph_bs"] if int(b) <= max_running) or [1]
        cap = min(rules.cuda_graph_max_bs(self.args), max_running)
        return [b for b in _CUDA_GRAPH_BS if b <= cap] or [1]

    def shards(self) -> int:
        """Checkpoint shards of the target: its whole size (every rank's share) in 5 GB files, at
        most 64 (a 580 GB target has 64, an 8B model 4)."""
        total_gb = self.weights_gb * self.tp_size
        return max(1, min(_MAX_SHARDS, -(-int(total_gb * 1000) // int(_SHARD_GB * 1000))))


class RankSync:
    """Pipes between rank 0 and the other ranks of a node, made before the fork: each other rank
    tells rank 0 it has arrived at a bar phase (its begin line is out); rank 0 tells them its bar is
    closed. Waits time out (``_SYNC_TIMEOUT_S``): a rank that died or hung is the parent's business."""

    def __init__(self, ranks: range):
        self.up = {r: os.pipe() for r in ranks if r != 0}
        self.down = {r: os.pipe() for r in ranks if r != 0}

    def arrive(self, rank: int) -> None:
        _send(self.up[rank][1])

    def wait_arrivals(self, timeout: float) -> None:
        for read, _ in self.up.values():
            _receive(read, timeout)

    def release(self) -> None:
        for _, write in self.down.values():
            _send(write)

    def wait_released(self, rank: int, timeout: float) -> None:
        _receive(self.down[rank][0], timeout)


def _send(fd: int) -> None:
    try:
        os.write(fd, b"x")
    except OSError:
        pass


def _receive(fd: int, timeout: float) -> None:
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        if ready:
            os.read(fd, 1)
    except OSError:
        pass


def gpu_index(rank: int, args: dict[str, Any]) -> int:
    """The physical GPU a rank uses: base_gpu_id + rank * gpu_id_step, through CUDA_VISIBLE_DEVICES."""
    per_node = max(1, int(args.get("tp_size") or 1) // max(1, int(args.get("nnodes") or 1)))
    local = rank % per_node  # on a multi-node server each node numbers its GPUs from 0
    logical = int(args.get("base_gpu_id") or 0) + local * int(args.get("gpu_id_step") or 1)
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if logical < len(visible) and visible[logical].isdigit():
        return int(visible[logical])
    return logical


def _default_max_running(max_total_tokens: int, context_len: int) -> int:
    """SGLang's default running cap without speculation, from the KV pool size."""
    return min(max(int(max_total_tokens / context_len * 512), 2048), 4096)


class _RankFailed(Exception):
    """Raised after a rank logged its exception and signalled the parent: the child exits 1."""


class Rank:
    """One TP rank's startup. ``run`` returns the ready message (or raises RankFailed / hangs)."""

    def __init__(self, plan: StartupPlan, rank: int, parent_pid: int, hang: Callable[[], None]):
        self.plan = plan
        self.rank = rank
        self.parent_pid = parent_pid
        self.hang = hang  # callable that never returns (the child's idle loop)
        self.log = Log(rank_prefix(rank, plan.tp_size, plan.real_wording))
        self.used_gb = 0.0
        self.gpu = gpu_index(rank, plan.args)
        self.graph_s = {phase: 0.0 for phase in GRAPH_PHASES}
        self.graph_gb = {phase: 0.0 for phase in GRAPH_PHASES}
        self.weights_used_gb = 0.0
        self.kv_used_gb = 0.0

    # --- helpers ---
    @property
    def avail(self) -> float:
        return self.plan.gpu_mem_gb - self.used_gb

    def hold(self, gb: float) -> None:
        self.used_gb += gb
        if self.plan.ledger_dir is not None:
            ledger_record(self.plan.ledger_dir, os.getpid(), self.gpu, round(self.used_gb * 1024))

    def pause(self, seconds: float) -> float:
        """Sleep a phase's scaled duration; returns the wall seconds it took."""
        t0 = time.monotonic()
        time.sleep(seconds / self.plan.speed)
        return time.monotonic() - t0

    def fail(self, where: str, exception: str, cause: Optional[str] = None) -> None:
        if self.rank != 0:
            return  # rank 0 speaks for all: the parent kills the others on its SIGQUIT
        self.log.error("Scheduler hit an exception: " + tracebacks.scheduler_exception(where, exception, cause))
        try:
            os.kill(self.parent_pid, signal.SIGQUIT)
        except ProcessLookupError:
            pass
        raise _RankFailed(exception)

    def _maybe_hang(self, phase: str) -> None:
        if self.plan.hang_at == phase:
            self.hang()

    def _bar_phase(
        self,
        seconds: float,
        items: list[Any],
        bar: Optional[Callable[[], progress.Bar]],
        before_item: Optional[Callable[[progress.Bar, int, Any], None]] = None,
        stop_at: Optional[float] = None,
    ) -> float:
        """Sleep ``seconds`` (scaled) over ``items``; rank 0 draws ``bar()`` meanwhile, one update per
        item, as SGLang's tqdm does. With tp > 1 the ranks meet at :class:`RankSync` around it (TP
        ranks are bound by their collectives anyway): rank 0 draws once every rank's begin line is
        out, the others log their end lines once its bar is closed, so no line lands inside the bar
        (in real SGLang one can). ``stop_at`` (a fraction) returns early with the bar left open, as
        a failing capture leaves its tqdm. Returns the wall seconds taken."""
        t0 = time.monotonic()
        sync = self.plan.sync if bar is not None else None
        if self.rank != 0 or bar is None:
            if sync is not None:
                sync.arrive(self.rank)
            self.pause(seconds * (stop_at if stop_at is not None else 1.0))
            if sync is not None and stop_at is None:
                sync.wait_released(self.rank, seconds / self.plan.speed + _SYNC_TIMEOUT_S)
            return time.monotonic() - t0
        if sync is not None:
            sync.wait_arrivals(_SYNC_TIMEOUT_S)
        b = bar()
        per_item = seconds / max(len(items), 1)
        for i, item in enumerate(items):
            if stop_at is not None and i >= int(len(items) * stop_at):
                return time.monotonic() - t0  # left open: an exception ends the line
            if before_item:
                before_item(b, i, item)
            self.pause(per_item)
            b.update()
        b.close()
        if sync is not None:
            sync.release()
        return time.monotonic() - t0

    def _load_weights(self, seconds: float, shards: int, load_format: Optional[str]) -> float:
        """Weight loading; rank 0's bar counts the checkpoint shards (none with dummy weights)."""
        fmt = progress.SGLANG_BAR_FORMAT
        desc = self.plan.word("weights_bar")
        bar = None if load_format == "dummy" else (lambda: progress.Bar(shards, desc, fmt=fmt))
        return self._bar_phase(seconds, list(range(shards)), bar)

    # --- the phases ---
    def run(self) -> dict[str, Any]:
        p, d, a = self.plan, self.plan.durations, self.plan.args
        t_start = time.monotonic()
        self.log.info("Init torch distributed begin.")
        t = self.pause(d.init)
        self.hold(_CONTEXT_GB)
        self.log.info(f"Init torch distributed ends. elapsed={t:.2f} s, mem usage={_CONTEXT_GB:.2f} GB")

        load_s = self._load_target()
        if p.real_wording and p.speculative:  # the drafter loads before either KV cache
            load_s += self._load_drafter()

        t0 = time.monotonic()
        self.pause(d.kv)
        tokens = self._kv_tokens()
        if p.fail_at == "load" or tokens <= 0:
            self.fail("kv", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
            tokens = max(tokens, 1)  # ranks other than 0 carry on until the parent kills them
        self._kv_pool(tokens, tokens * _KV_BYTES_PER_TOKEN / GB)
        if p.real_wording and p.speculative:
            self._kv_pool(tokens, tokens * _KV_BYTES_PER_TOKEN * _DRAFT_KV_SHARE / GB)
        kv_s = time.monotonic() - t0

        max_running = int(a.get("max_running_requests") or _default_max_running(tokens, p.context_len))
        if p.graphs:
            self._capture_target(max_running)
        if p.speculative:
            if not p.real_wording:
                load_s += self._load_drafter()
            self._draft_graphs(max_running)
            if p.deferred is not None and p.deferred.where == "adaptive_capture":
                self.fail("adaptive_capture", p.deferred.exception)
            if p.adaptive is not None:
                self._build_adaptive_states()
        elif p.deferred is not None:
            self.fail(p.deferred.where, p.deferred.exception)
        if self.rank == 0:
            self.log.info(
                f"max_total_num_tokens={tokens}, chunked_prefill_size={a.get('chunked_prefill_size')}, "
                f"max_prefill_tokens={a.get('max_prefill_tokens')}, max_running_requests={max_running}, "
                f"context_len={p.context_len}, available_gpu_mem={self.avail:.2f} GB"
            )
        timings = {
            "load_weight": load_s,
            "kv_cache_allocation": kv_s,
            "scheduler_e2e": time.monotonic() - t_start,
            "cuda_graph": dict(self.graph_s),
        }
        memory = {
            "weight": round(self.weights_used_gb, 3),
            "kvcache": round(self.kv_used_gb, 3),
            "startup_available": round(self.avail, 3),
            "token_capacity": tokens,
            "token_capacity_swa": None,
            "graph": {k: round(v, 3) for k, v in self.graph_gb.items()},
        }
        return {
            "rank": self.rank,
            "max_total_num_tokens": tokens,
            "max_running_requests": max_running,
            "available_gpu_mem": round(self.avail, 2),
            "used_gb": round(self.used_gb, 2),
            "timings": timings,
            "memory_usage": memory,
        }

    def _load_target(self) -> float:
        p, a = self.plan, self.plan.args
        self.log.info(f"Load weight begin. avail mem={self.avail:.2f} GB")
        self._maybe_hang("load")
        if p.check_paths and not os.path.exists(a["model_path"]):
            self.fail("load", tracebacks.missing_model_error(a["model_path"]))
        t = self._load_weights(p.durations.weights, p.shards(), a.get("load_format"))
        self.hold(p.weights_gb)
        self.weights_used_gb += p.weights_gb
        self.log.info(p.word("load_end", t=t, arch=p.architecture, avail=self.avail, m=p.weights_gb))
        return t

    def _kv_pool(self, tokens: int, kv_gb: float) -> None:
        self.hold(kv_gb)
        self.kv_used_gb += kv_gb
        self.log.info(self.plan.word("kv", tokens=tokens, k=kv_gb / 2, v=kv_gb / 2))
        self.log.info(f"Memory pool end. avail mem={self.avail:.2f} GB")

    def _kv_tokens(self) -> int:
        a = self.plan.args
        rest_gb = self.avail - self.plan.gpu_mem_gb * (1 - float(a["mem_fraction_static"]))
        tokens = int(rest_gb * GB / _KV_BYTES_PER_TOKEN)
        if a.get("max_total_tokens"):
            tokens = min(tokens, int(a["max_total_tokens"]))
        return tokens

    def _capture(
        self,
        begin: str,
        end: str,
        phase: str,
        seconds: float,
        graph_gb: float,
        bs: list[int],
        all_ranks: bool,
        stop_at: Optional[float] = None,
        **words: Any,
    ) -> float:
        """One CUDA graph capture: its begin line, rank 0's ``Capturing batches`` bar over the batch
        sizes (largest first, as SGLang captures them), its end line. GPU-only: SGLang on CPU
        captures nothing (the transcripts have none of these lines)."""
        p = self.plan
        speak = all_ranks or self.rank == 0
        avail0 = self.avail
        if speak:
            self.log.info(p.word(begin, avail=avail0, bs=bs, **words))
        if begin == "target_begin" and self.rank == 0 and not p.real_wording:
            self.log.info(f"Capture cuda graph bs {bs}")
        if begin == "target_begin":
            self._maybe_hang("capture")
        order = list(reversed(bs))

        def describe(bar: progress.Bar, i: int, size: int) -> None:
            bar.set_description(f"Capturing batches (bs={size} avail_mem={avail0 - graph_gb * i / len(order):.2f} GB)")

        t = self._bar_phase(seconds, order, lambda: progress.Bar(len(order)), describe, stop_at=stop_at)
        if stop_at is not None:
            return t
        self.hold(graph_gb)
        self.graph_s[phase] = t
        self.graph_gb[phase] = graph_gb
        if speak:
            self.log.info(p.word(end, t=t, m=graph_gb, avail=self.avail, **words))
        return t

    def _capture_target(self, max_running: int) -> None:
        p, a = self.plan, self.plan.args
        bs = p.graph_bs(max_running)
        mode = "verify" if p.verifies else "decode"
        tpb = (a.get("speculative_num_draft_tokens") or 1) if p.verifies else 1
        phase = "target_verify" if p.verifies else "decode"
        if p.fail_at == "capture":
            self._capture(
                "target_begin",
                "target_end",
                phase,
                p.durations.capture,
                _TARGET_GRAPH_GB,
                bs,
                True,
                stop_at=0.4,
                mode=mode,
                tpb=tpb,
            )
            free = max(self.avail - 0.6, 0.1)
            oom = tracebacks.CUDA_OOM.format(
                gpu=self.gpu, total=p.gpu_mem_gb, free=free, used=p.gpu_mem_gb - free, alloc=self.used_gb - 1.5
            )
            message = oom.split(": ", 1)[1]
            self.fail(
                "capture",
                f"Exception: Capture cuda graph failed: {message}\n{tracebacks.CAPTURE_FAILED_HINT}",
                cause=oom,
            )
        self._capture(
            "target_begin", "target_end", phase, p.durations.capture, _TARGET_GRAPH_GB, bs, True, mode=mode, tpb=tpb
        )

    def _load_drafter(self) -> float:
        p, d, a = self.plan, self.plan.durations, self.plan.args
        deferred = p.deferred
        if deferred and deferred.where == "draft_init":
            self.fail("draft_init", deferred.exception)
        if p.real_wording:  # the draft worker sets up its own (already initialised) process group
            t = self.pause(d.init * 0.01)
            self.log.info("Init torch distributed begin.")
            self.log.info(f"Init torch distributed ends. elapsed={t:.2f} s, mem usage=0.00 GB")
        self.log.info(f"Load weight begin. avail mem={self.avail:.2f} GB")
        draft_path = a.get("speculative_draft_model_path")
        if deferred and deferred.where == "draft_load":
            self.fail("draft_load", deferred.exception)
        if p.check_paths and draft_path and not os.path.exists(draft_path):
            self.fail("draft_load", tracebacks.missing_model_error(draft_path))
        t = self._load_weights(d.draft_weights, 1, a.get("speculative_draft_load_format") or a.get("load_format"))
        self.hold(_DRAFT_WEIGHTS_GB)
        self.weights_used_gb += _DRAFT_WEIGHTS_GB
        self.log.info(p.word("load_end", t=t, arch=self._draft_architecture(), avail=self.avail, m=_DRAFT_WEIGHTS_GB))
        if p.adaptive is not None and self.rank == 0:  # EAGLEWorkerV2.__init__ makes its AdaptiveController
            self.log.info(self._adaptive().initialized())
        return t

    def _adaptive(self) -> adaptive.Params:
        assert self.plan.adaptive is not None, "called for an adaptive server only"
        return adaptive.Params(int(self.plan.args["speculative_num_steps"]), self.plan.adaptive, announce=False)

    def _build_adaptive_states(self) -> None:
        """``init_cuda_graphs`` under adaptive speculation: a runtime state (attention backends, and with
        graphs the drafter's and the target's verify graphs) per candidate step count but the starting one,
        each logged by rank 0 (``Built adaptive runtime state steps=...``)."""
        p = self.plan
        start = int(p.args["speculative_num_steps"])
        for steps in self._adaptive().candidate_steps:
            if steps == start:
                continue
            before = self.avail
            t = self.pause((p.durations.draft_capture + p.durations.draft_extend_capture) / 2 if p.graphs else 0.01)
            if p.graphs:
                self.hold(_DRAFT_GRAPH_GB + _DRAFT_EXTEND_GRAPH_GB)
            if self.rank == 0:
                self.log.info(adaptive.built_line(steps, t, before - self.avail))

    def _draft_graphs(self, max_running: int) -> None:
        p, d, a = self.plan, self.plan.durations, self.plan.args
        deferred = p.deferred
        tree_too_small = deferred if deferred is not None and deferred.where == "draft_capture" else None
        if not p.graphs:
            if tree_too_small:
                self.fail("draft_capture", tree_too_small.exception)
            return
        bs = p.graph_bs(max_running)
        topk = int(a.get("speculative_eagle_topk") or 1)
        all_ranks = not p.real_wording  # 0.5.23 logs the draft captures on rank 0 only
        if int(a.get("speculative_num_steps") or 1) > 1:
            if tree_too_small:
                if all_ranks or self.rank == 0:
                    self.log.info(p.word("draft_begin", avail=self.avail, tpb=topk, bs=bs))
                self.fail("draft_capture", tree_too_small.exception)
            self._capture(
                "draft_begin", "draft_end", "draft_decode", d.draft_capture, _DRAFT_GRAPH_GB, bs, all_ranks, tpb=topk
            )
        if tree_too_small:
            if all_ranks or self.rank == 0:
                self.log.info(
                    p.word("extend_begin", avail=self.avail, tpb=a.get("speculative_num_draft_tokens"), bs=bs)
                )
            self.fail("draft_capture", tree_too_small.exception)
        self._capture(
            "extend_begin",
            "extend_end",
            "draft_extend",
            d.draft_extend_capture,
            _DRAFT_EXTEND_GRAPH_GB,
            bs,
            all_ranks,
            tpb=a.get("speculative_num_draft_tokens"),
        )

    def _draft_architecture(self) -> str:
        a = self.plan.args
        if a.get("speculative_draft_model_path") == a.get("model_path"):
            return self.plan.architecture.replace("ForCausalLM", "ForCausalLMNextN")
        return {"EAGLE3": "LlamaForCausalLMEagle3", "EAGLE": "LlamaForCausalLMEagle"}.get(
            a.get("speculative_algorithm") or "", rules.architecture(a.get("speculative_draft_model_path") or "")
        )


def run_rank(plan: StartupPlan, rank: int, parent_pid: int, ready_fd: Optional[int], hang: Callable[[], None]) -> None:
    """A scheduler child's body: walk the startup, report ready, then hold (via ``hang``)."""
    try:
        ready = Rank(plan, rank, parent_pid, hang).run()
    except _RankFailed:
        raise SystemExit(1) from None
    if ready_fd is not None:
        try:
            os.write(ready_fd, (json.dumps(ready) + "\n").encode())
            os.close(ready_fd)
        except OSError:
            pass  # the parent is gone (zombie mode): hold anyway
    hang()
