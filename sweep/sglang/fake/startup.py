"""What one scheduler (TP rank) does before it can serve: SGLang's startup phases, their log lines,
their relative durations and the "GPU memory" each one takes, with the faults asked for.

Order (0.5.10 wording; 0.5.23's differs where noted in :data:`WORDING`): init distributed, load the
target's weights, allocate the KV cache, capture the target's CUDA graphs; when speculating, load the
drafter, capture the draft and draft-extend graphs. Then the rank reports ready on its pipe and holds.
Injected failures happen on rank 0 (its traceback, then SIGQUIT to the parent, as SGLang's scheduler
does); hangs stop every rank.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from sweep.sglang.fake import ledger, rules, tracebacks
from sweep.sglang.fake.args import version_tuple
from sweep.sglang.fake.log import Log

GB = 1e9
CONTEXT_GB = 0.79  # CUDA context + NCCL buffers after init
TARGET_GRAPH_GB = 1.62
DRAFT_WEIGHTS_GB = 2.31
DRAFT_GRAPH_GB = 0.35
DRAFT_EXTEND_GRAPH_GB = 0.21
KV_BYTES_PER_TOKEN = 70272  # MLA: 61 layers x 576 x bf16
CUDA_GRAPH_BS = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144,
                 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248, 256, 272, 288, 304, 320,
                 336, 352, 368, 384, 400, 416, 432, 448, 464, 480, 496, 512)


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


# Log wording that changed between versions: name -> (0.5.10, 0.5.23).
WORDING: dict[str, tuple[str, str]] = {
    "kv": ("KV Cache is allocated. #tokens: {tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB",
           "KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB"),
    "target_begin": ("Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB",
                     "Capture target {mode} CUDA graph begin. backend=full, num_tokens_per_bs={tpb}, bs={bs}, "
                     "avail mem={avail:.2f} GB"),
    "target_end": ("Capture cuda graph end. Time elapsed: {t:.2f} s. mem usage={m:.2f} GB. avail mem={avail:.2f} GB.",
                   "Capture target {mode} CUDA graph end. elapsed={t:.2f} s, mem usage={m:.2f} GB, "
                   "avail mem={avail:.2f} GB."),
    "draft_begin": ("Capture draft cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB",
                    "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_bs={topk}, bs={bs}, "
                    "avail mem={avail:.2f} GB"),
    "draft_end": ("Capture draft cuda graph end. Time elapsed: {t:.2f} s. mem usage={m:.2f} GB. avail mem={avail:.2f} GB.",
                  "Capture draft decode CUDA graph end. elapsed={t:.2f} s, mem usage={m:.2f} GB, avail mem={avail:.2f} GB."),
    "extend_begin": ("Capture draft extend cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB",
                     "Capture draft extend CUDA graph begin. backend=full, num_tokens_per_bs={tpb}, bs={bs}, "
                     "avail mem={avail:.2f} GB"),
    "extend_end": ("Capture draft extend cuda graph end. Time elapsed: {t:.2f} s. mem usage={m:.2f} GB. "
                   "avail mem={avail:.2f} GB.",
                   "Capture draft extend CUDA graph end. elapsed={t:.2f} s, mem usage={m:.2f} GB, avail mem={avail:.2f} GB."),
}


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

    @property
    def speculative(self) -> bool:
        return self.args.get("speculative_algorithm") in rules.EAGLE_FAMILY

    @property
    def graphs(self) -> bool:
        return rules.cuda_graph_enabled(self.args)

    def word(self, name: str, **kw: Any) -> str:
        new = version_tuple(self.version) >= (0, 5, 23)
        return WORDING[name][1 if new else 0].format(**kw)

    def graph_bs(self, max_running: int) -> list[int]:
        if self.args.get("cuda_graph_bs"):
            return sorted(int(b) for b in self.args["cuda_graph_bs"] if int(b) <= max_running) or [1]
        cap = min(rules.cuda_graph_max_bs(self.args), max_running)
        return [b for b in CUDA_GRAPH_BS if b <= cap] or [1]


def gpu_index(rank: int, args: dict[str, Any]) -> int:
    """The physical GPU a rank uses: base_gpu_id + rank * gpu_id_step, through CUDA_VISIBLE_DEVICES."""
    per_node = max(1, int(args.get("tp_size") or 1) // max(1, int(args.get("nnodes") or 1)))
    local = rank % per_node  # on a multi-node server each node numbers its GPUs from 0
    logical = int(args.get("base_gpu_id") or 0) + local * int(args.get("gpu_id_step") or 1)
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if logical < len(visible) and visible[logical].isdigit():
        return int(visible[logical])
    return logical


def default_max_running(max_total_tokens: int, context_len: int) -> int:
    """SGLang's default running cap without speculation, from the KV pool size."""
    return min(max(int(max_total_tokens / context_len * 512), 2048), 4096)


class RankFailed(Exception):
    """Raised after a rank logged its exception and signalled the parent: the child exits 1."""


class Rank:
    """One TP rank's startup. ``run`` returns the ready message (or raises RankFailed / hangs)."""

    def __init__(self, plan: StartupPlan, rank: int, parent_pid: int, hang: Callable[[], None]):
        self.plan = plan
        self.rank = rank
        self.parent_pid = parent_pid
        self.hang = hang  # callable that never returns (the child's idle loop)
        self.log = Log(f" TP{rank}")
        self.used_gb = 0.0
        self.gpu = gpu_index(rank, plan.args)

    # --- helpers ---
    @property
    def avail(self) -> float:
        return self.plan.gpu_mem_gb - self.used_gb

    def hold(self, gb: float) -> None:
        self.used_gb += gb
        if self.plan.ledger_dir is not None:
            ledger.record(self.plan.ledger_dir, os.getpid(), self.gpu, round(self.used_gb * 1024))

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
        raise RankFailed(exception)

    def _maybe_hang(self, phase: str) -> None:
        if self.plan.hang_at == phase:
            self.hang()

    # --- the phases ---
    def run(self) -> dict[str, Any]:
        p, d, a = self.plan, self.plan.durations, self.plan.args
        self.log.info("Init torch distributed begin.")
        t = self.pause(d.init)
        self.hold(CONTEXT_GB)
        self.log.info(f"Init torch distributed ends. elapsed={t:.2f} s, mem usage={CONTEXT_GB:.2f} GB")

        self.log.info(f"Load weight begin. avail mem={self.avail:.2f} GB")
        self._maybe_hang("load")
        if p.check_paths and not os.path.exists(a["model_path"]):
            self.fail("load", tracebacks.missing_model_error(a["model_path"]))
        t = self.pause(d.weights)
        self.hold(p.weights_gb)
        self.log.info(f"Load weight end. elapsed={t:.2f} s, type={p.architecture}, dtype=torch.bfloat16, "
                      f"avail mem={self.avail:.2f} GB, mem usage={p.weights_gb:.2f} GB.")

        self.pause(d.kv)
        tokens = self._kv_tokens()
        if p.fail_at == "load" or tokens <= 0:
            self.fail("kv", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
            tokens = max(tokens, 1)  # ranks other than 0 carry on until the parent kills them
        kv_gb = tokens * KV_BYTES_PER_TOKEN / GB
        self.hold(kv_gb)
        self.log.info(p.word("kv", tokens=tokens, k=kv_gb / 2, v=kv_gb / 2))
        self.log.info(f"Memory pool end. avail mem={self.avail:.2f} GB")

        max_running = int(a.get("max_running_requests") or default_max_running(tokens, p.context_len))
        if p.graphs:
            self._capture_target(max_running)
        if p.speculative:
            self._drafter(max_running)
        elif p.deferred is not None:
            self.fail(p.deferred.where, p.deferred.exception)
        if self.rank == 0:
            self.log.info(f"max_total_num_tokens={tokens}, chunked_prefill_size={a.get('chunked_prefill_size')}, "
                          f"max_prefill_tokens={a.get('max_prefill_tokens')}, max_running_requests={max_running}, "
                          f"context_len={p.context_len}, available_gpu_mem={self.avail:.2f} GB")
        return {"rank": self.rank, "max_total_num_tokens": tokens, "max_running_requests": max_running,
                "available_gpu_mem": round(self.avail, 2), "used_gb": round(self.used_gb, 2)}

    def _kv_tokens(self) -> int:
        a = self.plan.args
        rest_gb = self.avail - self.plan.gpu_mem_gb * (1 - float(a["mem_fraction_static"]))
        tokens = int(rest_gb * GB / KV_BYTES_PER_TOKEN)
        if a.get("max_total_tokens"):
            tokens = min(tokens, int(a["max_total_tokens"]))
        return tokens

    def _capture_target(self, max_running: int) -> None:
        p, a = self.plan, self.plan.args
        bs = p.graph_bs(max_running)
        mode = "verify" if p.speculative else "decode"
        tpb = (a.get("speculative_num_draft_tokens") or 1) if p.speculative else 1
        self.log.info(p.word("target_begin", avail=self.avail, mode=mode, tpb=tpb, bs=bs))
        if self.rank == 0 and version_tuple(p.version) < (0, 5, 23):
            self.log.info(f"Capture cuda graph bs {bs}")
        self._maybe_hang("capture")
        if p.fail_at == "capture":
            self.pause(p.durations.capture * 0.4)
            free = max(self.avail - 0.6, 0.1)
            oom = tracebacks.CUDA_OOM.format(gpu=self.gpu, total=p.gpu_mem_gb, free=free,
                                             used=p.gpu_mem_gb - free, alloc=self.used_gb - 1.5)
            message = oom.split(": ", 1)[1]
            self.fail("capture", f"Exception: Capture cuda graph failed: {message}\n{tracebacks.CAPTURE_FAILED_HINT}",
                      cause=oom)
        t = self.pause(p.durations.capture)
        self.hold(TARGET_GRAPH_GB)
        self.log.info(p.word("target_end", t=t, m=TARGET_GRAPH_GB, avail=self.avail, mode=mode))

    def _drafter(self, max_running: int) -> None:
        p, d, a = self.plan, self.plan.durations, self.plan.args
        deferred = p.deferred
        if deferred and deferred.where == "draft_init":
            self.fail("draft_init", deferred.exception)
        self.log.info(f"Load weight begin. avail mem={self.avail:.2f} GB")
        draft_path = a.get("speculative_draft_model_path")
        if deferred and deferred.where == "draft_load":
            self.fail("draft_load", deferred.exception)
        if p.check_paths and draft_path and not os.path.exists(draft_path):
            self.fail("draft_load", tracebacks.missing_model_error(draft_path))
        t = self.pause(d.draft_weights)
        self.hold(DRAFT_WEIGHTS_GB)
        self.log.info(f"Load weight end. elapsed={t:.2f} s, type={self._draft_architecture()}, dtype=torch.bfloat16, "
                      f"avail mem={self.avail:.2f} GB, mem usage={DRAFT_WEIGHTS_GB:.2f} GB.")
        tree_too_small = deferred is not None and deferred.where == "draft_capture"
        if not p.graphs:
            if tree_too_small:
                self.fail("draft_capture", deferred.exception)
            return
        bs = p.graph_bs(max_running)
        topk = int(a.get("speculative_eagle_topk") or 1)
        if int(a.get("speculative_num_steps") or 1) > 1:
            self.log.info(p.word("draft_begin", avail=self.avail, topk=topk, bs=bs))
            if tree_too_small:
                self.fail("draft_capture", deferred.exception)
            t = self.pause(d.draft_capture)
            self.hold(DRAFT_GRAPH_GB)
            self.log.info(p.word("draft_end", t=t, m=DRAFT_GRAPH_GB, avail=self.avail))
        self.log.info(p.word("extend_begin", avail=self.avail, tpb=a.get("speculative_num_draft_tokens"), bs=bs))
        if tree_too_small:
            self.fail("draft_capture", deferred.exception)
        t = self.pause(d.draft_extend_capture)
        self.hold(DRAFT_EXTEND_GRAPH_GB)
        self.log.info(p.word("extend_end", t=t, m=DRAFT_EXTEND_GRAPH_GB, avail=self.avail))

    def _draft_architecture(self) -> str:
        a = self.plan.args
        if a.get("speculative_draft_model_path") == a.get("model_path"):
            return self.plan.architecture.replace("ForCausalLM", "ForCausalLMNextN")
        return {"EAGLE3": "LlamaForCausalLMEagle3", "EAGLE": "LlamaForCausalLMEagle"}.get(
            a.get("speculative_algorithm"), rules.architecture(a.get("speculative_draft_model_path") or ""))


def run_rank(plan: StartupPlan, rank: int, parent_pid: int, ready_fd: Optional[int],
             hang: Callable[[], None]) -> None:
    """A scheduler child's body: walk the startup, report ready, then hold (via ``hang``)."""
    try:
        ready = Rank(plan, rank, parent_pid, hang).run()
    except RankFailed:
        raise SystemExit(1)
    if ready_fd is not None:
        try:
            os.write(ready_fd, (json.dumps(ready) + "\n").encode())
            os.close(ready_fd)
        except OSError:
            pass  # the parent is gone (zombie mode): hold anyway
    hang()
