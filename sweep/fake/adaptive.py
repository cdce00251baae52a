"""SGLang's adaptive speculative decoding (``--speculative-adaptive``), as the fake runs it. Pure.

A faithful copy of ``sglang/srt/speculative/adaptive_spec_params.py`` (0.5.23; the CPU build's is the
same rule with ``[1, 3, 7]`` for batch size 1 in its default config) and of the controller around it
(``adaptive_runtime_state.py``, ``eagle_worker_v2.py``):

- the config, as SGLang's loader reads it (``sweep.sglang.adaptive.load``, which refuses what it refuses):
  batch-size tiers, each with its ``candidate_steps`` (``0`` = no speculation in that tier) and its knobs
  ``ema_alpha`` (0.2), ``update_interval`` (5), ``warmup_batches`` (10), ``down_hysteresis`` (-0.25),
  ``up_hysteresis`` (0.0), ``ceiling_coeff`` (0);
- a batch goes to the tier of the closest lower key (the smallest key below the smallest), after its
  size is padded up to the next CUDA-graph batch size where the graphs are captured
  (``_pad_to_cuda_graph_bs``: a batch of 3 with graphs for 1, 2, 4, 8 routes as 4; a batch above the
  largest graph routes as itself);
- each tier (:class:`StepSlot`) keeps its own step count and an EMA of the accepted draft tokens per
  request, and moves it only after ``warmup_batches`` and then every ``update_interval`` of its
  batches: down while the EMA is at or below the next lower candidate's threshold
  (``prev - 0.5 + down_hysteresis``; ``0.5 + down_hysteresis`` to reach a 0 floor), else up while it
  is above ``current - 0.5 + up_hysteresis``; ``ceiling_coeff`` caps a non-rising target at
  ``ceil(ema * coeff)``; from 0 steps it probes the smallest positive candidate (the EMA, which does
  not move at 0 steps, restarts at that step's neutral ``steps - 1`` if it was negative);
- the worker (:class:`Controller`) switches its runtime state to the tier's step count before each
  decode batch and to a tier's new step count after its verify, logging SGLang's lines;
- step 0 is not "no speculation": the worker still runs the drafter's extend after each verify (a
  trivial one-token verify, then ``_draft_extend_for_decode``, keeping the draft KV warm;
  ``eagle_worker_v2.py``), so a batch at step 0 pays the target's plain decode *and* the draft extend
  (sweep/fake/model.py ``step_time_s(..., zero_step=True)``); its verify still counts toward the
  tier's update interval (the EMA stands still), so every ``update_interval`` batches after the
  warm-up a tier at 0 probes its next candidate.

SGLang's log lines (``log_info_on_rank0``), exact: :func:`initialized_line`, :func:`built_line`,
:func:`updated_line`, :func:`switch_line`.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from sweep.fake import model
from sweep.sglang import Config


# --- SGLang's log lines ---
def _initialized_line(steps: int, candidates: list[int]) -> str:
    return f"AdaptiveSpeculativeParams initialized: steps={steps}, candidate_steps={candidates}"


def built_line(steps: int, elapsed_s: float, mem_gb: float) -> str:
    return f"Built adaptive runtime state steps={steps}: elapsed={elapsed_s:.2f}s, mem={mem_gb:.2f}GB"


def _updated_line(old: int, new: int, ema: float) -> str:
    return f"Adaptive spec params updated: steps {old} -> {new} (ema_accept_len={ema:.2f})"


def _switch_line(old: int, new: int) -> str:
    return f"Switch adaptive runtime state: steps {old} -> {new}, draft_tokens {old + 1} -> {new + 1}"


@dataclass
class StepSlot:
    """``AdaptiveStepSlot``: one batch-size tier's step count and EMA of accepted drafts per request."""

    candidate_steps: list[int]
    current_steps: int
    ema_accept_len: float
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    down_hysteresis: float = -0.25
    up_hysteresis: float = 0.0
    ceiling_coeff: float = 0
    batch_count: int = 0
    log: Callable[[str], None] = field(default=lambda line: None, repr=False, compare=False)

    @classmethod
    def create(
        cls, initial_steps: int, cfg: Mapping[str, Any], log: Callable[[str], None] = lambda line: None
    ) -> "StepSlot":
        cands = sorted(set(cfg["candidate_steps"]))
        current = initial_steps if initial_steps in cands else cands[len(cands) // 2]
        return cls(
            cands,
            current,
            float(current - 1),
            ema_alpha=cfg.get("ema_alpha", 0.2),
            update_interval=cfg.get("update_interval", 5),
            warmup_batches=cfg.get("warmup_batches", 10),
            down_hysteresis=cfg.get("down_hysteresis", -0.25),
            up_hysteresis=cfg.get("up_hysteresis", 0.0),
            ceiling_coeff=cfg.get("ceiling_coeff", 0),
            log=log,
        )

    def update(self, accepted_per_req: list[int]) -> bool:
        """One verify's accepted draft tokens per request; True when the step count changed."""
        if not accepted_per_req:
            return False
        if self.current_steps > 0:
            batch_avg = sum(accepted_per_req) / len(accepted_per_req)
            self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * batch_avg
        self.batch_count += 1
        if self.batch_count <= self.warmup_batches:
            return False
        if (self.batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute()

    def _recompute(self) -> bool:
        old = self.current_steps
        idx = self.candidate_steps.index(old)
        old_idx = idx
        if old == 0:  # probe the smallest positive step after a zero-step interval
            idx = min(idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old, target)
        while idx > 0:
            prev = self.candidate_steps[idx - 1]
            drop = (0.5 if prev == 0 else prev - 0.5) + self.down_hysteresis
            if self.ema_accept_len <= drop:
                idx -= 1
            else:
                break
        if not idx < old_idx:
            while idx < len(self.candidate_steps) - 1:
                if self.ema_accept_len > self.candidate_steps[idx] - 0.5 + self.up_hysteresis:
                    idx += 1
                else:
                    break
        target = self.candidate_steps[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if ceiling < target <= old:
                while idx > 0 and self.candidate_steps[idx] > ceiling:
                    idx -= 1
                target = self.candidate_steps[idx]
        return self._apply(old, target)

    def _apply(self, old: int, target: int) -> bool:
        if target != old:
            self.current_steps = target
            self.log(_updated_line(old, target, self.ema_accept_len))
            return True
        return False


class Params:
    """``AdaptiveSpeculativeParams``: routes a batch size (padded to the CUDA-graph batch sizes, where
    set) to its tier."""

    def __init__(
        self, initial_steps: int, config: Config, log: Callable[[str], None] = lambda line: None, announce: bool = True
    ):
        """``config``: as SGLang loaded it; ``announce``: log SGLang's ``initialized`` line now (as its
        constructor does)."""
        self.cuda_graph_bs: Optional[list[int]] = None
        self.keys = sorted(config.tiers)
        self.slots = {
            bs: StepSlot.create(
                initial_steps, {**config.knobs.get(bs, {}), "candidate_steps": list(config.tiers[bs])}, log
            )
            for bs in self.keys
        }
        if announce:
            log(self.initialized())

    def initialized(self) -> str:
        """SGLang's ``AdaptiveSpeculativeParams initialized`` line (the first tier's steps and candidates)."""
        first = self.slots[self.keys[0]]
        return _initialized_line(first.current_steps, first.candidate_steps)

    @property
    def candidate_steps(self) -> list[int]:
        return sorted({s for slot in self.slots.values() for s in slot.candidate_steps})

    def set_cuda_graph_bs(self, cuda_graph_bs: Optional[Sequence[int]]) -> None:
        """The decode CUDA-graph batch sizes (None: graphs disabled; ``init_states`` sets them)."""
        self.cuda_graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else None

    def padded(self, batch_size: int) -> int:
        """``_pad_to_cuda_graph_bs``: the smallest graph batch size >= the batch (itself above the largest)."""
        if self.cuda_graph_bs is None:
            return batch_size
        idx = bisect.bisect_left(self.cuda_graph_bs, batch_size)
        return self.cuda_graph_bs[idx] if idx < len(self.cuda_graph_bs) else batch_size

    def key_for(self, batch_size: int) -> int:
        """The tier key a batch routes to: the closest lower key of its padded size (the smallest key below it)."""
        idx = bisect.bisect_right(self.keys, self.padded(batch_size)) - 1
        return self.keys[max(0, idx)]

    def route(self, batch_size: int) -> StepSlot:
        return self.slots[self.key_for(batch_size)]

    def steps_for_batch(self, batch_size: int) -> int:
        return self.route(batch_size).current_steps

    def on_verify_complete(self, accepted_per_req: list[int], batch_size: int) -> Optional[int]:
        slot = self.route(batch_size)
        return slot.current_steps if slot.update(accepted_per_req) else None


class Controller:
    """``AdaptiveController`` with the worker's step count: :meth:`before_batch` (``activate_step_by_batch``)
    and :meth:`after_verify` (``on_verify_complete``) switch it, logging ``Switch adaptive runtime state``."""

    def __init__(
        self,
        initial_steps: int,
        config: Config,
        log: Callable[[str], None] = lambda line: None,
        announce: bool = True,
        cuda_graph_bs: Optional[Sequence[int]] = None,
    ):
        """``cuda_graph_bs``: the decode graphs' batch sizes (``init_states``; None: graphs disabled)."""
        self.log = log
        self.params = Params(initial_steps, config, log, announce)
        self.params.set_cuda_graph_bs(cuda_graph_bs)
        self.steps = initial_steps
        self.switches = 0
        self.batches: dict[int, int] = {}  # tier key -> decode batches routed there (what a level ran)

    def _activate(self, steps: int) -> None:
        if steps != self.steps:
            self.log(_switch_line(self.steps, steps))
            self.steps = steps
            self.switches += 1

    def before_batch(self, batch_size: int) -> int:
        """The step count the batch runs with."""
        key = self.params.key_for(batch_size)
        self.batches[key] = self.batches.get(key, 0) + 1
        self._activate(self.params.slots[key].current_steps)
        return self.steps

    def after_verify(self, accepted_per_req: list[int], batch_size: int) -> None:
        new = self.params.on_verify_complete(accepted_per_req, batch_size)
        if new is not None:
            self._activate(new)


def closed_loop_tok_s(
    config: Optional[Config],
    concurrency: int,
    *,
    steps: int,
    accept_rate: float,
    max_tokens: int = 512,
    waves: int = 2,
    nccl_env: Optional[Mapping[str, Any]] = None,
    cuda_graph_bs: Optional[Sequence[int]] = None,
    prompt_tokens: int = model.DEFAULT_PROMPT_TOKENS,
) -> float:
    """What the fake's model says a closed loop of ``concurrency`` (``waves`` lock-step waves of
    ``max_tokens`` each) serves in output tok/s: with ``config`` an adaptive server launched at
    ``steps`` (its controller over every decode step: routing with padding, the EMA, step 0 with its
    draft extend), without it a static chain of ``steps`` (0: the no-speculation server). The truth a
    policy is checked against (tests); the server runs the same pieces step by step."""
    ctl = Controller(steps, config, cuda_graph_bs=cuda_graph_bs) if config is not None else None
    specs: dict[int, Optional[model.Spec]] = {0: None}

    def spec_of(k: int) -> Optional[model.Spec]:
        if k not in specs:
            specs[k] = model.Spec(k, 1, k + 1, accept_rate)
        return specs[k]

    top = max([steps, *(config.candidate_steps if config is not None else ())])
    total_s, tokens = 0.0, 0
    for _ in range(waves):
        acceptors = [model.Acceptor(spec_of(top) if top else None) for _ in range(concurrency)]
        produced = [1] * concurrency
        total_s += sum(model.prefill_time_s(t, nccl_env) for t in model.prefill_chunks(concurrency, prompt_tokens))
        running = list(range(concurrency))
        while running:
            n = len(running)
            k = ctl.before_batch(n) if ctl is not None else steps
            spec = spec_of(k) if k else None
            total_s += model.step_time_s(n, spec, nccl_env, zero_step=ctl is not None and k == 0)
            accepted = []
            for i in running:
                a = acceptors[i].next(k)
                accepted.append(a)
                produced[i] = min(max_tokens, produced[i] + 1 + a)
            if ctl is not None:
                ctl.after_verify(accepted, n)
            running = [i for i in running if produced[i] < max_tokens]
        tokens += concurrency * max_tokens
    return tokens / total_s
