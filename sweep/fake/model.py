"""The fake server's performance model: how long a forward pass takes, and how many tokens it yields.

Pure functions, so the server and the benchmark tests compute the very same figures. Every time is in
seconds at ``--fake-speed 1``; the server divides by its speed factor.

The model stands for one 8-GPU tensor-parallel host serving a large MoE model (Kimi-K2-like: 384
experts, 8 active per token), calibrated to the published shape of the real system:

==============================================  ==========  ==============
figure (single stream = decode rate at batch 1)  target      model
==============================================  ==========  ==============
baseline, single stream, tuned NCCL              89 tok/s    89.0
baseline, single stream, default NCCL            63 tok/s    63.0
EAGLE-3 (2 steps, topk 1), single stream         94 tok/s    94.0
baseline, C=250 closed loop, 512 tokens          770 tok/s   ~770
EAGLE-3 (5 steps, topk 4, 16 draft), C=250       350 tok/s   ~314 (-10%)
==============================================  ==========  ==============

and to the real findings: at C=1 two steps (94) beat one (88.6), three (92.3), five (82.1) and
sixteen (42.1); a chain drafter that is ahead at C=1 is behind its baseline from C~5 and at
saturation (2 steps: 0.86x at C=250); tuned NCCL lifts every curve, most at low concurrency
(1.41x at C=1, 1.01x at C=250). The tree lands 10% under its target because the same curve must
also keep chain drafters behind at saturation.

Each model figure of the table is within :data:`CALIBRATION_TOLERANCE` (15%) of its target, and no
closer is claimed; ``tests/fake/test_fake_model.py`` holds the model to that constant.
(``tests/perf/fake_calibration.py`` prints these next to what the server really does.)

Decode step (one forward of the running batch; with speculation, one verify round)::

    n      = batch * verify_tokens            # verify_tokens = num_draft_tokens, or 1 without speculation
    target = T_FIXED + max(T_EXPERT * experts(n), T_TOKEN * n^T_TOKEN_EXPONENT) + allreduce(n, nccl)
    draft  = D_EXTEND + (steps - 1) * D_STEP + steps * D_TOKEN * batch * topk   # EAGLE; 0 for NGRAM
    experts(n) = E * (1 - (1 - k/E)^n)        # distinct experts whose weights the step must read

The target is a roofline: a small batch is bound by reading expert weights (verifying 3 tokens
instead of 1 reads ~3x the experts, which a good drafter's accepted tokens pay for), a large batch
by compute, which grows with every verified token, so speculation that wins at C=1 loses at
saturation. The exponent below 1 stands for grouped expert GEMMs growing more efficient as each
expert gets more tokens (which is why a 16-token tree still reaches ~314 tok/s at C=250). The draft
round is one extend forward over the accepted tokens plus one decode forward per further step.

All-reduce: ``allreduce(n) = latency + AR_TOKEN * n``. The latency goes from ``_AR_LATENCY_DEFAULT``
(stock NCCL) down to ``_AR_LATENCY_TUNED`` as the server's environment matches the tuned settings
(:data:`TUNED_NCCL`). Partial settings count by weight (:data:`NCCL_WEIGHTS`, summing to 1): each
variable set exactly to its tuned value earns its weight, anything else (unset, or another value)
earns nothing. So ``NCCL_PROTO=LL`` alone recovers 40% of the gap.

Acceptance: ``p`` is the per-token chain acceptance of the drafter (``--fake-accept-rate``, or by
draft-model path with ``--fake-accept-map``). A tree (topk > 1) accepts more per depth::

    b      = min(topk, (num_draft_tokens - 1) / steps)     # branching the draft budget allows
    p_eff  = p + (1 - p) * TREE_GAIN * (1 - 1/b)
    depth  = min(steps, num_draft_tokens - 1)
    accept_length = 1 + p_eff + p_eff^2 + ... + p_eff^depth  # tokens per request per verify step

so a deeper tree with the same budget reaches every depth it shares with a shallower one no more
often (``b`` shrinks once the steps outgrow the budget), as real SGLang's trees do: it verifies the
top ``num_draft_tokens - 1`` candidates by cumulative score, and a deeper tree's candidates include
a shallower one's (the adaptive search's tree bound rests on this; ``tests/fake`` holds the model to it).

Each request turns that mean into whole tokens with an error-diffusion accumulator (:class:`Acceptor`),
so over any run its measured accept length equals the model's value to within one token.

Adaptive speculation (``--speculative-adaptive``, sweep/fake/adaptive.py): each decode step runs with
the step count SGLang's controller holds for its batch's size tier, as a chain of that depth (topk 1,
``steps + 1`` draft tokens: its time and its acceptance above); 0 steps is a plain decode plus the
drafter's extend (SGLang keeps the draft KV warm at step 0: ``step_time_s(zero_step=True)``), so an
adaptive server held at 0 is slower than the no-speculation server. Each request's
:class:`Acceptor` keeps one accumulator per depth, so a step count that changes keeps its rates exact.

Prefill: a request's prompt is processed in prefill forwards of at most ``max_prefill_tokens``
tokens (SGLang's budget, 16384 by default), each costing ``P_FIXED + P_TOKEN * tokens + allreduce``;
the prefill yields the request's first token. SGLang runs waiting prefills before decoding.

Without CUDA graphs (``--disable-cuda-graph``, or a batch above ``cuda_graph_max_bs``) every step
pays ``_EAGER_OVERHEAD`` more, for kernel launches.

Power (watts per GPU; every TP rank's GPU draws the same): a GPU draws ``IDLE_W`` with nothing
running, and during a forward over ``n`` tokens (a decode step's ``batch * verify_tokens``, a prefill
chunk's prompt tokens)::

    forward_power(n) = IDLE_W + (TDP_W - IDLE_W) * (ACTIVE_FLOOR + (1 - ACTIVE_FLOOR) * n / (n + N_HALF))

so a lone decode, bound by reading weights, draws ~370 W and a saturated batch near ``TDP_W``
(an H200's 700 W), the shape of published H100/H200 inference traces. The server reports the mean
over each ``POWER_EVERY_S`` of wall time: ``IDLE_W`` plus the forwards' excess over idle times their
share of that time (at any ``--fake-speed`` the same watts, as forwards and gaps shrink together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

# How closely the model reproduces its calibration targets (the module docstring's table), relative:
# every "model" figure there is within this of its "target" (the tree, the farthest, lands 14% under).
CALIBRATION_TOLERANCE = 0.15

# --- target model (seconds) ---
_NUM_EXPERTS = 384
_EXPERTS_PER_TOKEN = 8
_T_FIXED = 7.20004e-3  # attention, dense layers, sampling: paid once per forward
_T_EXPERT = 0.3e-3  # reading one expert's weights (all layers, all ranks in parallel)
_T_TOKEN = 2.82695e-3  # compute of the forward: T_TOKEN * n^T_TOKEN_EXPONENT for n tokens
_T_TOKEN_EXPONENT = 0.85
_EAGER_OVERHEAD = 6.0e-3  # kernel-launch cost of a step that runs without a CUDA graph

# --- all-reduce (seconds) ---
_AR_LATENCY_TUNED = 1.2e-3
_AR_LATENCY_DEFAULT = _AR_LATENCY_TUNED + (1 / 63 - 1 / 89)  # the 89 vs 63 tok/s single-stream gap
_AR_TOKEN = 0.009e-3  # bandwidth term, the same for both settings

TUNED_NCCL: Mapping[str, str] = {
    "NCCL_PROTO": "LL",
    "NCCL_ALGO": "Ring",
    "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MAX_NCHANNELS": "16",
    "NCCL_BUFFSIZE": "16777216",
    "NCCL_NTHREADS": "512",
}
NCCL_WEIGHTS: Mapping[str, float] = {
    "NCCL_PROTO": 0.40,  # the low-latency protocol is most of the win for small messages
    "NCCL_ALGO": 0.15,
    "NCCL_NTHREADS": 0.15,
    "NCCL_P2P_LEVEL": 0.10,
    "NCCL_MAX_NCHANNELS": 0.10,
    "NCCL_BUFFSIZE": 0.10,
}

# --- drafter (seconds) ---
_D_EXTEND = 5.65857e-3  # the draft extend forward after each verify (the first draft step)
_D_STEP = 2.0e-3  # each further EAGLE draft forward (one small layer + head)
_D_TOKEN = 0.01e-3  # per drafted token in those forwards

# --- acceptance ---
DEFAULT_ACCEPT_RATE = 0.7  # per-token chain acceptance of a drafter nobody configured
DEFAULT_NGRAM_ACCEPT_RATE = 0.35  # n-gram lookup guesses far worse than a trained drafter
_TREE_GAIN = 0.8

# --- power (watts per GPU) ---
IDLE_W = 75.0  # memory held, nothing running (the host's FakeGpus shows this on a GPU nobody reports on)
TDP_W = 700.0  # an H200 SXM's board power limit
_ACTIVE_FLOOR = 0.45  # share of the idle..TDP span any forward draws (clocks up, weights streamed)
_N_HALF = 32  # tokens per forward at which the compute share is half its most
POWER_EVERY_S = 0.25  # how often the server reports its GPUs' power (wall seconds)

# --- prefill (seconds) ---
_P_FIXED = 20e-3
_P_TOKEN = 0.05e-3
DEFAULT_MAX_PREFILL_TOKENS = 16384
DEFAULT_PROMPT_TOKENS = 200  # what the closed-loop formulas assume when not told


@dataclass(frozen=True)
class Spec:
    """A speculative configuration as the scheduler runs it (after SGLang's rules applied)."""

    steps: int
    topk: int
    draft_tokens: int
    accept_rate: float = DEFAULT_ACCEPT_RATE
    ngram: bool = False  # NGRAM drafts by lookup: no drafter forward

    def __post_init__(self) -> None:
        if self.steps < 1 or self.topk < 1 or self.draft_tokens < 1:
            raise ValueError(f"speculative steps/topk/draft tokens must be >= 1, got {self}")
        if not 0.0 <= self.accept_rate <= 1.0:
            raise ValueError(f"accept rate must be within [0, 1], got {self.accept_rate}")


def nccl_tuning(nccl_env: Optional[Mapping[str, str]]) -> float:
    """How much of the tuned all-reduce latency saving an environment earns, 0..1 (see module doc)."""
    if not nccl_env:
        return 0.0
    score = 0.0
    for name, tuned in TUNED_NCCL.items():
        value = str(nccl_env.get(name, "")).strip()
        if value.upper() == tuned.upper():
            score += NCCL_WEIGHTS[name]
    return min(score, 1.0)


def allreduce_s(tokens: int, nccl_env: Optional[Mapping[str, str]]) -> float:
    """All-reduce time of one forward over ``tokens`` tokens (every layer's reductions together)."""
    latency = _AR_LATENCY_DEFAULT - (_AR_LATENCY_DEFAULT - _AR_LATENCY_TUNED) * nccl_tuning(nccl_env)
    return latency + _AR_TOKEN * tokens


def _experts_touched(tokens: int) -> float:
    """Expected distinct experts a forward over ``tokens`` tokens reads (uniform routing)."""
    return _NUM_EXPERTS * (1.0 - (1.0 - _EXPERTS_PER_TOKEN / _NUM_EXPERTS) ** max(tokens, 0))


def verify_tokens(spec: Optional[Spec]) -> int:
    """Tokens the target processes per request per decode step."""
    return spec.draft_tokens if spec else 1


def step_time_s(
    batch: int,
    spec: Optional[Spec],
    nccl_env: Optional[Mapping[str, str]],
    *,
    cuda_graph: bool = True,
    zero_step: bool = False,
) -> float:
    """Time of one decode step (one verify round with speculation) over ``batch`` running requests.
    ``zero_step``: an adaptive server's step 0 (``spec`` None): SGLang verifies one token per request
    (a plain decode) and still runs the drafter's extend after it (``eagle_worker_v2``: "_draft_extend
    below still runs, keeping draft KV warm"), so the step pays ``_D_EXTEND`` more than the
    no-speculation server's."""
    if batch <= 0:
        return 0.0
    n = batch * verify_tokens(spec)
    t = _T_FIXED + max(_T_EXPERT * _experts_touched(n), _T_TOKEN * n**_T_TOKEN_EXPONENT) + allreduce_s(n, nccl_env)
    if spec and not spec.ngram:
        t += _D_EXTEND + (spec.steps - 1) * _D_STEP + spec.steps * _D_TOKEN * batch * spec.topk
    elif zero_step and spec is None:
        t += _D_EXTEND
    if not cuda_graph:
        t += _EAGER_OVERHEAD
    return t


def forward_power_w(tokens: int) -> float:
    """Watts one GPU draws during a forward over ``tokens`` tokens (see the module docstring)."""
    if tokens <= 0:
        return IDLE_W
    return IDLE_W + (TDP_W - IDLE_W) * (_ACTIVE_FLOOR + (1.0 - _ACTIVE_FLOOR) * tokens / (tokens + _N_HALF))


def prefill_time_s(tokens: int, nccl_env: Optional[Mapping[str, str]]) -> float:
    """Time of one prefill forward over ``tokens`` prompt tokens (one chunk, <= max_prefill_tokens)."""
    return _P_FIXED + _P_TOKEN * tokens + allreduce_s(tokens, nccl_env)


def effective_accept_rate(spec: Spec) -> float:
    """Per-depth acceptance after the tree bonus (= the chain rate for topk 1)."""
    p = spec.accept_rate
    if spec.topk <= 1 or spec.ngram:
        return p
    branching = min(float(spec.topk), max(1.0, (spec.draft_tokens - 1) / spec.steps))
    return p + (1.0 - p) * _TREE_GAIN * (1.0 - 1.0 / branching)


def max_accepted(spec: Spec) -> int:
    """Most draft tokens one verify step can accept (the depth of the draft)."""
    return max(0, min(spec.steps, spec.draft_tokens - 1)) if not spec.ngram else max(0, spec.draft_tokens - 1)


def expected_accept_length(spec: Optional[Spec]) -> float:
    """Mean tokens per request per decode step: 1 + expected accepted draft tokens (1 without spec)."""
    if spec is None:
        return 1.0
    p = effective_accept_rate(spec)
    return sum(p**i for i in range(max_accepted(spec) + 1))


_tokens_per_step = expected_accept_length  # the name the scheduler reads it by


def expected_accept_rate(spec: Optional[Spec]) -> float:
    """SGLang's ``accept rate``: accepted draft tokens over the drafted depth, per step."""
    if spec is None or max_accepted(spec) == 0:
        return 0.0
    return (expected_accept_length(spec) - 1.0) / max_accepted(spec)


class Acceptor:
    """Whole accepted-token counts per step that accept like a real chain, position by position.

    The model's drafter accepts each draft position with probability ``p`` once the one before it
    was accepted (``expected_accept_length`` = sum of p^k). Error diffusion per position, without
    randomness: position k keeps an accumulator that gains ``p`` each time a step reaches k, and is
    accepted when it holds a whole token. So among the steps that reach position k, the share that
    accepts it tends to exactly ``p`` (the per-position rates SGLang's accept histogram shows), and
    the running mean of accepted tokens to the model's, within one token per position in total.
    """

    __slots__ = ("_p", "_acc", "_depth")

    def __init__(self, spec: Optional[Spec]):
        depth = max_accepted(spec) if spec else 0
        self._p = effective_accept_rate(spec) if spec else 0.0
        self._depth = depth
        self._acc = [0.5] * depth  # 0.5: round to nearest, from the first step on

    def next(self, depth: Optional[int] = None) -> int:
        """Draft tokens accepted in the next step (the step yields this + 1 tokens); ``depth``: the draft's
        depth this step, where it changes from step to step (adaptive speculation; default the spec's)."""
        depth = self._depth if depth is None else depth
        while len(self._acc) < depth:
            self._acc.append(0.5)
        k = 0
        for k_acc in range(depth):
            self._acc[k_acc] += self._p
            if self._acc[k_acc] < 1.0:
                break
            self._acc[k_acc] -= 1.0
            k += 1
        return k


def decode_steps(max_tokens: int, spec: Optional[Spec]) -> int:
    """Decode steps a request needs for ``max_tokens`` output tokens (its first comes from prefill)."""
    acceptor = Acceptor(spec)
    produced, steps = 1, 0
    while produced < max_tokens:
        produced += 1 + acceptor.next()
        steps += 1
    return steps


def prefill_chunks(requests: int, prompt_tokens: int, budget: int = DEFAULT_MAX_PREFILL_TOKENS) -> list[int]:
    """Token counts of the prefill forwards for ``requests`` equal prompts arriving together,
    admitted as SGLang does: whole requests while they fit the budget, always at least one."""
    chunks: list[int] = []
    left = requests
    per_chunk = max(1, budget // max(prompt_tokens, 1))
    while left > 0:
        k = min(per_chunk, left)
        chunks.append(k * prompt_tokens)
        left -= k
    return chunks


def single_stream_tok_s(spec: Optional[Spec], nccl_env: Optional[Mapping[str, str]], speed: float = 1.0) -> float:
    """Decode rate of one request alone: accept length / step time (prefill excluded)."""
    return expected_accept_length(spec) / step_time_s(1, spec, nccl_env) * speed


@dataclass(frozen=True)
class _ClosedLoopRun:
    """What a closed-loop benchmark of ``requests`` requests at ``concurrency`` takes, per the model."""

    requests: int
    wave_size: int  # requests running together (min of concurrency and the running cap)
    duration_s: float
    output_tokens: int

    @property
    def throughput_tok_s(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else 0.0


def _wave_time_s(
    size: int,
    max_tokens: int,
    spec: Optional[Spec],
    nccl_env: Optional[Mapping[str, str]],
    prompt_tokens: int,
    max_prefill_tokens: int,
    cuda_graph_max_bs: Optional[int],
) -> float:
    prefill = sum(prefill_time_s(t, nccl_env) for t in prefill_chunks(size, prompt_tokens, max_prefill_tokens))
    graph = cuda_graph_max_bs is None or size <= cuda_graph_max_bs
    return prefill + decode_steps(max_tokens, spec) * step_time_s(size, spec, nccl_env, cuda_graph=graph)


def closed_loop_run(
    requests: int,
    concurrency: int,
    max_tokens: int,
    spec: Optional[Spec],
    nccl_env: Optional[Mapping[str, str]],
    max_running: Optional[int],
    speed: float = 1.0,
    *,
    prompt_tokens: int = DEFAULT_PROMPT_TOKENS,
    max_prefill_tokens: int = DEFAULT_MAX_PREFILL_TOKENS,
    cuda_graph_max_bs: Optional[int] = None,
) -> _ClosedLoopRun:
    """A closed loop (each finished request replaced at once) with every request ``max_tokens`` long
    (ignore_eos) and ``prompt_tokens`` of prompt. Requests then run in lock-step waves of
    ``min(concurrency, max_running)``, the last wave holding what is left over."""
    cap = concurrency if max_running is None else max(1, min(concurrency, max_running))
    full, rest = divmod(requests, cap)
    duration = full * _wave_time_s(
        cap, max_tokens, spec, nccl_env, prompt_tokens, max_prefill_tokens, cuda_graph_max_bs
    )
    if rest:
        duration += _wave_time_s(rest, max_tokens, spec, nccl_env, prompt_tokens, max_prefill_tokens, cuda_graph_max_bs)
    return _ClosedLoopRun(requests, cap, duration / speed, requests * max_tokens)


def closed_loop_throughput_tok_s(
    concurrency: int,
    max_tokens: int,
    spec: Optional[Spec],
    nccl_env: Optional[Mapping[str, str]],
    max_running: Optional[int],
    speed: float = 1.0,
    *,
    prompt_tokens: int = DEFAULT_PROMPT_TOKENS,
    max_prefill_tokens: int = DEFAULT_MAX_PREFILL_TOKENS,
    cuda_graph_max_bs: Optional[int] = None,
) -> float:
    """Steady-state output throughput of a closed loop at ``concurrency`` (whole waves only); the
    running cap (48 with speculation unless --max-running-requests) queues the rest."""
    wave = concurrency if max_running is None else max(1, min(concurrency, max_running))
    return closed_loop_run(
        wave,
        concurrency,
        max_tokens,
        spec,
        nccl_env,
        max_running,
        speed,
        prompt_tokens=prompt_tokens,
        max_prefill_tokens=max_prefill_tokens,
        cuda_graph_max_bs=cuda_graph_max_bs,
    ).throughput_tok_s
