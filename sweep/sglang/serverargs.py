"""What SGLang's argument resolution does to a server's speculative flags, per version, target and GPU.

One pure model, used by the plan's rule checker (``sweep.sglang.rules``) and by the fake server
(``sweep.fake.rules``), and checked against real SGLang by
``tests/real/test_rules_differential.py`` (``ServerArgs`` of 0.5.10 and 0.5.23 and the CPU build at
commit 7f8f030, with the hardware probes answering for an H200, B200, A100 or no GPU).

``resolve(flags, Context(...))`` walks what ``launch_server`` runs before it starts a scheduler
(``prepare_server_args``: argparse and ``ServerArgs.__post_init__``; ``resolve_once`` in newer
releases; ``check_server_args``), in SGLang's order, for the part that speculation touches:

1. argparse: the algorithm's spelling (0.5.10 takes only upper case; newer releases upper-case it);
2. the attention backend, chosen *before* any speculative check when none is given: on Hopper fa3
   (for MHA targets such as Llama only without a tree: topk given > 1 or page size > 1 picks
   flashinfer), on Blackwell trtllm_mha for MHA chains and trtllm_mla for DeepSeek-V3, else
   flashinfer (MHA) or triton (MLA); backends that need their own page size set it (flashmla 64,
   trtllm_mla 32/64, trtllm_mha 16/32/64, cutlass_mla 128);
3. EAGLE / EAGLE3 / STANDALONE (NEXTN is EAGLE): the 48-request cap, the target as its own drafter
   for DeepSeek-V3-family targets, the automatic (steps, topk, draft tokens) per architecture, the
   bare ``AssertionError`` for topk or draft tokens without steps, the silent draft tokens = steps+1
   with topk 1, the ``TypeError`` of steps without topk, topk > 1 with paged KV only on flashinfer /
   fa3 (0.5.23 also triton) *as resolved*;
4. NGRAM: topk from its BFS breadth (10), 12 draft tokens, (0.5.23) steps = draft // topk, the
   same paged-KV check (flashinfer only), CUDA only in 0.5.10;
5. ``check_server_args``: speculation with pipeline parallelism (0.5.10: none; 0.5.23: EAGLE / NEXTN
   only, and only on a prefill node unless the server's env sets SGLANG_ENABLE_PP_SPEC=1, which in
   turn refuses adaptive speculation that stays on).

Adaptive speculation (``--speculative-adaptive``, ``--speculative-adaptive-config``: 0.5.23 and the
CPU build; 0.5.10's argparse refuses them) runs between 2. and 3., after NEXTN became EAGLE:
``_maybe_disable_adaptive`` (each of ``adaptive_unsupported_reason``'s conditions: a warning, and
static speculation from there on, the automatic steps included), then
``_init_adaptive_speculative_params`` (the config loaded, ``sweep.sglang.adaptive``, its refusals
raised; topk 1; the steps given, else the middle candidate; the steps checked against the
candidates' union; draft tokens = steps + 1). HiSparse (0.5.23) refuses it after; on CPU it dies
building a decode CUDA graph per step count unless the decode graph is off (``later``). The
outcome says whether the server stays adaptive, its candidates per tier and its knobs.

Failures SGLang only meets after the arguments (at model load, CUDA-graph capture or the first
request) are returned apart, as ``later``: the plan reports them, the fake raises them there.
Where the verdict needs what is not known here (the GPU, the target's architecture), ``resolve``
tries every candidate and says which unknown it depends on; the host's pre-flight knows both.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from sweep.core import ServerFlags, speculation
from sweep.sglang import adaptive as ad

# --- versions ---

KNOWN_VERSIONS = ("0.5.10", "0.5.23")
NEWEST = KNOWN_VERSIONS[-1]
# development builds whose rules are a release's (measured by the differential test)
KNOWN_BUILDS = speculation.KNOWN_BUILDS  # builds named by commit -> their release (sweep/core/speculation.py)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def rules_version(version: Optional[str]) -> tuple[str, Optional[str]]:
    """The known version whose rules apply to ``version``, and a note when that is a guess."""
    if not version or version == "unknown":
        return NEWEST, f"SGLang version unknown: checked against {NEWEST}, the newest this tool knows"
    for commit, release in KNOWN_BUILDS.items():
        if commit in version:
            return release, None
    if version in KNOWN_VERSIONS:
        return version, None
    v = version_tuple(version)
    if not v or not any(v):  # 0.0.0.dev0+g<commit>: a development build
        return NEWEST, f"SGLang {version} is a build this tool does not know: checked against {NEWEST}"
    older = [k for k in KNOWN_VERSIONS if version_tuple(k) <= v]
    best = older[-1] if older else KNOWN_VERSIONS[0]
    return best, f"SGLang {version}: checked against the rules of {best}"


def at_least(version: str, release: str) -> bool:
    return version_tuple(rules_version(version)[0]) >= version_tuple(release)


# --- GPUs ---


@dataclass(frozen=True)
class _GpuKind:
    name: str
    sm: int  # compute capability x 10; 0 for no GPU (device cpu)
    mem_gib: float = 0.0

    @property
    def generation(self) -> str:
        return {
            0: "cpu",
            80: "Ampere",
            86: "Ampere",
            89: "Ada",
            90: "Hopper",
            100: "Blackwell",
            103: "Blackwell",
            120: "Blackwell (SM120)",
        }.get(self.sm, f"SM{self.sm}")


GPUS = {
    g.name.lower(): g
    for g in (
        _GpuKind("H200", 90, 141),
        _GpuKind("H100", 90, 80),
        _GpuKind("H20", 90, 96),
        _GpuKind("H800", 90, 80),
        _GpuKind("GH200", 90, 96),
        _GpuKind("B200", 100, 180),
        _GpuKind("GB200", 100, 186),
        _GpuKind("B300", 103, 288),
        _GpuKind("GB300", 103, 288),
        _GpuKind("RTX PRO 6000", 120, 96),
        _GpuKind("A100", 80, 80),
        _GpuKind("A800", 80, 80),
        _GpuKind("A10", 86, 24),
        _GpuKind("L40S", 89, 48),
        _GpuKind("L4", 89, 24),
        _GpuKind("cpu", 0),
    )
}
_GENERATIONS = {
    "hopper": _GpuKind("Hopper", 90),
    "blackwell": _GpuKind("Blackwell", 100),
    "ampere": _GpuKind("Ampere", 80),
    "ada": _GpuKind("Ada", 89),
    "cpu": GPUS["cpu"],
    "sm90": _GpuKind("SM90", 90),
    "sm100": _GpuKind("SM100", 100),
    "sm80": _GpuKind("SM80", 80),
}
# what an unknown GPU could be, for the verdicts that depend on it
_CANDIDATE_GPUS = (GPUS["h200"], GPUS["b200"], GPUS["a100"])


def gpu_info(name: Optional[str]) -> Optional[_GpuKind]:
    """``H200``, ``NVIDIA H200``, ``hopper``, ``sm90``, ``cpu`` -> a GpuKind; None for unknown or unset."""
    if not name:
        return None
    key = str(name).strip().lower().replace("nvidia ", "").replace("-", " ")
    if key in _GENERATIONS:
        return _GENERATIONS[key]
    for known in sorted(GPUS, key=len, reverse=True):
        if key == known or key.startswith(known + " ") or key.startswith(known):
            return GPUS[known]
    return None


# --- architectures ---

LLAMA_LIKE_AUTO = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")  # auto (5, 4, 8)
_MLA_ARCHITECTURES = (
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "KimiK25ForConditionalGeneration",
    "MistralLarge3ForCausalLM",
    "GlmMoeDsaForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "KimiVLForConditionalGeneration",
)
# targets whose checkpoint carries its MTP drafter: no draft path -> the target's own
_MTP_SELF_DRAFT = (
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLM",
    "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "GlmMoeDsaForCausalLM",
    "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
)
_MTP_SELF_DRAFT_0523 = (
    "DeepseekV4ForCausalLM",
    "HYV3ForCausalLM",
    "HYV4ForCausalLM",
    "Qwen4ExpForConditionalGeneration",
)
# trtllm_mla is DeepSeek-V3's default on Blackwell when no backend is given
_BLACKWELL_TRTLLM_MLA = ("DeepseekV3ForCausalLM",)
# candidates for an unknown target: one MHA (Llama), one MLA + MTP (DeepSeek-V3), one other MHA
_CANDIDATE_ARCHITECTURES = ("LlamaForCausalLM", "DeepseekV3ForCausalLM", "Qwen3MoeForCausalLM")


def _mtp_self_draft(architecture: str, version: str) -> bool:
    extra = _MTP_SELF_DRAFT_0523 if at_least(version, "0.5.23") else ()
    return architecture in _MTP_SELF_DRAFT + extra


def _is_mla(architecture: str) -> bool:
    return architecture in _MLA_ARCHITECTURES


def auto_params(algorithm: str, architecture: str) -> tuple[int, int, int]:
    """SGLang's auto_choose_speculative_params: (steps, topk, draft tokens)."""
    if algorithm != "STANDALONE" and architecture in LLAMA_LIKE_AUTO:
        return 5, 4, 8
    return 3, 1, 4


def read_config(model_path: Optional[str]) -> Optional[dict[str, Any]]:
    """The model's ``config.json`` as a dict, or None where there is none to read (the only I/O here)."""
    if not model_path:
        return None
    try:
        with open(os.path.join(str(model_path), "config.json")) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def config_architecture(config: Optional[Mapping[str, Any]]) -> Optional[str]:
    archs = (config or {}).get("architectures") or []
    return str(archs[0]) if isinstance(archs, list) and archs else None


# --- algorithms ---

ALGORITHMS_0510 = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
_ALGORITHMS_0523 = ALGORITHMS_0510 + ("DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")  # after NEXTN -> EAGLE
SPEC_RUNNING_CAP = 48
_NGRAM_BFS_BREADTH = 10
_NGRAM_DRAFT_TOKENS = 12


def _paged_tree_backends(version: str) -> tuple[str, ...]:
    return ("flashinfer", "fa3", "triton") if at_least(version, "0.5.23") else ("flashinfer", "fa3")


# --- the resolution ---


@dataclass(frozen=True)
class Context:
    """What the verdict depends on besides the flags. None: unknown (every candidate is tried)."""

    version: Optional[str] = NEWEST
    architecture: Optional[str] = None  # the target's HF architecture (config.json architectures[0])
    gpu: Optional[str] = None  # a name (H200), a generation (hopper) or cpu
    target_config: Optional[Mapping[str, Any]] = field(default=None, hash=False, compare=False)
    draft_config: Optional[Mapping[str, Any]] = field(default=None, hash=False, compare=False)
    # the server's environment, for the few variables SGLang's argument checks read (SGLANG_ENABLE_PP_SPEC)
    env: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    # whether the files a flag names are read here as the server will read them (the host's pre-flight;
    # the plan of a run whose hosts are this machine): a file missing here is SGLang's error, not a note
    files_here: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class _RuleFailure:
    rule: str  # the plan's rule name
    exception: str  # what SGLang raises, ``ValueError: ...`` (the traceback's last line)
    fix: str
    what: str = ""  # what is wrong, in words (else the exception says it)
    stage: str = "args"  # args (before anything starts) | load | draft_init | draft_load | draft_capture | serve
    source: str = "raise ValueError("  # the line that raises, for the fake's traceback

    @property
    def message(self) -> str:
        return self.exception

    @property
    def stage_words(self) -> str:
        return _STAGE_WORDS.get(self.stage, self.stage)


_STAGE_WORDS = {
    "args": "while checking its arguments",
    "load": "at model load",
    "draft_init": "while starting the drafter",
    "draft_load": "when it loads the drafter",
    "draft_capture": "in the drafter's CUDA-graph capture",
    "serve": "on the first request",
}


@dataclass(frozen=True)
class _Adjustment:
    rule: str
    message: str


@dataclass
class RuleOutcome:
    """SGLang's verdict on one server's speculative flags, and the values it runs with."""

    verdict: str  # ok | adjusted | error
    steps: Optional[int] = None
    topk: Optional[int] = None
    draft_tokens: Optional[int] = None
    max_running_requests: Optional[int] = None
    algorithm: Optional[str] = None
    attention_backend: Optional[str] = None
    page_size: Optional[int] = None
    draft_model_path: Optional[str] = None
    error: Optional[_RuleFailure] = None  # what SGLang raises while resolving the arguments
    later: Optional[_RuleFailure] = None  # what it raises after them (load, capture, first request)
    adjustments: list[_Adjustment] = field(default_factory=list)  # what it changes silently
    warnings: list[str] = field(default_factory=list)  # what SGLang logs while resolving (its wording)
    depends_on: list[str] = field(default_factory=list)  # unknowns that change the verdict: gpu, architecture
    alternatives: dict[str, str] = field(default_factory=dict)
    backend_given: bool = (
        False  # --attention-backend given (else SGLang chose it)  # "B200/DeepseekV3ForCausalLM" -> its verdict
    )
    notes: list[str] = field(default_factory=list)  # what was assumed
    version: str = NEWEST
    architecture: Optional[str] = None
    gpu: Optional[str] = None
    # adaptive speculation (--speculative-adaptive, 0.5.23 and the CPU build): steps / draft_tokens above are what
    # the server starts with; these say whether it adapts and between which step counts
    adaptive_requested: bool = False  # --speculative-adaptive given
    adaptive: bool = False  # the server runs adaptive: requested, supported, its config loaded (else static)
    adaptive_disabled_reason: Optional[str] = None  # SGLang's reason when it falls back to static
    candidate_steps: tuple[int, ...] = ()  # the union of every tier's candidates (sizes the runtime buffers)
    adaptive_tiers: dict[int, tuple[int, ...]] = field(default_factory=dict)  # batch-size key -> its candidates
    adaptive_knobs: dict[int, dict[str, Any]] = field(
        default_factory=dict
    )  # batch-size key -> EMA knobs, defaults filled
    adaptive_config: Optional[str] = None  # where the config comes from: a path, "mapping", or "default" (SGLang's)
    max_draft_tokens: Optional[int] = (
        None  # what the KV and CUDA-graph sizes follow: largest candidate + 1 when adaptive
    )

    @property
    def final(self) -> tuple[Optional[int], Optional[int], Optional[int], Optional[int]]:
        return self.steps, self.topk, self.draft_tokens, self.max_running_requests

    def summary(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "steps": self.steps,
            "topk": self.topk,
            "draft_tokens": self.draft_tokens,
            "max_running_requests": self.max_running_requests,
            "algorithm": self.algorithm,
            "attention_backend": self.attention_backend,
            "page_size": self.page_size,
            "error": self.error.exception if self.error else None,
            "later": f"{self.later.stage}: {self.later.exception}" if self.later else None,
            "depends_on": list(self.depends_on),
            "version": self.version,
            "architecture": self.architecture,
            "gpu": self.gpu,
            "adaptive": self.adaptive if self.adaptive_requested else None,
            "candidate_steps": list(self.candidate_steps) if self.adaptive else None,
            "adaptive_disabled_reason": self.adaptive_disabled_reason,
            "max_draft_tokens": self.max_draft_tokens,
        }


class _Raise(Exception):
    def __init__(self, failure: _RuleFailure):
        self.failure = failure


def _int(flags: Mapping[str, Any], name: str) -> Optional[int]:
    v = flags.get(name)
    if v is None or v is False:
        return None
    if v is True:
        return 1
    try:
        return int(v)
    except (TypeError, ValueError):
        raise _Raise(
            _RuleFailure(
                "bad-value",
                f"argument --{name}: invalid int value: '{v}'",
                f"give --{name} an integer",
                source="argparse",
            )
        ) from None


def _type_error_none() -> _RuleFailure:
    return _RuleFailure(
        "steps-without-topk",
        "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
        "add speculative-eagle-topk (1 for a chain drafter)",
        source="if self.speculative_eagle_topk > 1:",
        what="--speculative-num-steps given without --speculative-eagle-topk",
    )


def resolve(flags: Mapping[str, Any], ctx: Context = Context()) -> RuleOutcome:
    """SGLang's verdict on ``flags`` (names without dashes, as the sweep spells them) in ``ctx``.

    With the GPU or the architecture unknown, every candidate is resolved; the outcome is the first
    candidate's (Hopper; the architecture's most common case) and ``depends_on`` names what changes
    the verdict or the final values between candidates."""
    version, vnote = rules_version(ctx.version)
    known = gpu_info(ctx.gpu)
    gpus = [known] if known else None
    if ServerFlags(flags).is_cpu:
        gpus = [GPUS["cpu"]]
    archs = [ctx.architecture] if ctx.architecture else None
    outcomes: list[tuple[str, str, RuleOutcome]] = []
    for gpu in gpus or _CANDIDATE_GPUS:
        for arch in archs or _CANDIDATE_ARCHITECTURES:
            outcomes.append((gpu.name, arch, _resolve_one(flags, version, arch, gpu, ctx)))
    out = outcomes[0][2]
    key = lambda o: (o.verdict, o.final, o.later is not None)  # noqa: E731
    if len(outcomes) > 1:
        out.alternatives = {f"{g}/{a}": _brief(o) for g, a, o in outcomes}
    if gpus is None:
        out.gpu = None
        if any(len({key(o) for g, a, o in outcomes if a == arch}) > 1 for arch in {a for _, a, _ in outcomes}):
            out.depends_on.append("gpu")
        out.notes.append(f"GPU unknown: assumed {outcomes[0][0]} (Hopper)")
    if archs is None:
        out.architecture = None
        if any(len({key(o) for g, a, o in outcomes if g == gpu}) > 1 for gpu in {g for g, _, _ in outcomes}):
            out.depends_on.append("architecture")
        out.notes.append(f"target architecture unknown: assumed {outcomes[0][1]}")
    if vnote:
        out.notes.append(vnote)
    return out


def _brief(o: RuleOutcome) -> str:
    if o.error:
        return f"error ({o.error.exception.split(':')[0]})"
    text = f"{o.verdict} (steps {o.steps}, topk {o.topk}, draft tokens {o.draft_tokens})" if o.algorithm else o.verdict
    return text + (f", fails {o.later.stage_words}" if o.later else "")


def _resolve_one(flags: Mapping[str, Any], version: str, arch: str, gpu: _GpuKind, ctx: Context) -> RuleOutcome:
    out = RuleOutcome("ok", version=version, architecture=arch, gpu=gpu.name)
    try:
        _pipeline(flags, version, arch, gpu, ctx, out)
    except _Raise as exc:
        out.error = exc.failure
        out.verdict = "error"
        return out
    given = (
        _int(flags, "speculative-num-steps"),
        _int(flags, "speculative-eagle-topk"),
        _int(flags, "speculative-num-draft-tokens"),
        _int(flags, "max-running-requests"),
    )
    if out.algorithm and out.final != given:
        out.verdict = "adjusted"
    return out


def _pipeline(flags: Mapping[str, Any], version: str, arch: str, gpu: _GpuKind, ctx: Context, out: RuleOutcome) -> None:
    new = at_least(version, "0.5.23")
    # 1. argparse
    raw_algo = flags.get("speculative-algorithm")
    algo = str(raw_algo) if raw_algo not in (None, False, "") else None
    if algo is not None:
        if not new and algo not in ALGORITHMS_0510:
            choices = ", ".join(f"'{a}'" for a in ALGORITHMS_0510)
            raise _Raise(
                _RuleFailure(
                    "unknown-algorithm",
                    f"argument --speculative-algorithm: invalid choice: '{algo}' (choose from {choices})",
                    f"use {algo.upper()}"
                    if algo.upper() in ALGORITHMS_0510
                    else "pick one of EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM",
                    source="argparse",
                )
            )
        if new:
            algo = algo.upper()
            if algo not in _ALGORITHMS_0523:
                raise _Raise(
                    _RuleFailure(
                        "unknown-algorithm",
                        f"ValueError: Unknown speculative algorithm name: {algo}",
                        "pick one of EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM",
                    )
                )
    if not new and _adaptive_given(flags):
        if rules_version(ctx.version)[1] is None:  # a version whose flags are known: 0.5.10 has none
            raise _Raise(_adaptive_unrecognized(flags, version))
        out.depends_on.append("adaptive-version")  # between 0.5.10 (none) and 0.5.23 (both): the host's --help knows
        out.notes.append(
            f"SGLang {ctx.version} may lack --{ad.FLAG} (0.5.10 has none, {ad.SINCE} has it): the host's "
            "pre-flight checks its flags against --help; adaptive speculation is not modelled here"
        )
    steps, topk = _int(flags, "speculative-num-steps"), _int(flags, "speculative-eagle-topk")
    draft, cap = _int(flags, "speculative-num-draft-tokens"), _int(flags, "max-running-requests")
    page = _int(flags, "page-size")
    pp = _int(flags, "pp-size") or _int(flags, "pipeline-parallel-size") or 1
    dp = _int(flags, "dp-size") or _int(flags, "data-parallel-size") or 1
    dp_attention = bool(flags.get("enable-dp-attention")) and dp > 1
    draft_path = flags.get("speculative-draft-model-path") or None
    device = "cpu" if gpu.sm == 0 else "cuda"

    # 2. the attention backend (before any speculative check) and the page size it needs
    backend = flags.get("attention-backend") or None
    decode_backend = flags.get("decode-attention-backend") or None
    prefill_backend = flags.get("prefill-attention-backend") or None
    if prefill_backend and prefill_backend == decode_backend:
        backend = prefill_backend
    given_backend = backend is not None or decode_backend is not None or prefill_backend is not None
    if backend is None:
        backend = _default_backend(arch, gpu, algo, topk, page, given_backend)
        out.warnings.append(f"Attention backend not specified. Use {backend} backend by default.")
    backends = {b for b in (backend, decode_backend, prefill_backend) if b}
    if "flashmla" in (backend, decode_backend):
        page = _forced_page(out, page, 64, "FlashMLA only supports a page_size of 64, change page_size to 64.")
    if "cutlass_mla" in (backend, decode_backend):
        page = _forced_page(out, page, 128, "Cutlass MLA only supports a page_size of 128, change page_size to 128.")
    if "trtllm_mla" in (backend, decode_backend):
        if gpu.sm not in (100, 103, 120):
            raise _Raise(
                _RuleFailure(
                    "backend-gpu",
                    "ValueError: TRTLLM MLA backend is only supported on Blackwell GPUs "
                    "(SM100/SM12x). Please use a different backend.",
                    "use fa3 (Hopper) or flashinfer",
                )
            )
        if page not in (32, 64):
            page = _forced_page(
                out,
                page,
                64,
                f"TensorRT-LLM MLA only supports page_size of 32 or 64, changing page_size from {page} to 64.",
            )
    if "trtllm_mha" in backends:
        prefill = prefill_backend or backend
        if prefill == "trtllm_mha" and (gpu.sm not in (100, 103) if not new else gpu.sm not in (90, 100, 103, 120)):
            where = "Blackwell GPUs (SM100)" if not new else "Hopper (SM90), Blackwell (SM100), or SM120 GPUs"
            raise _Raise(
                _RuleFailure(
                    "backend-gpu",
                    f"ValueError: TRTLLM MHA backend for prefill is only supported on "
                    f"{where}. Please use a different prefill backend.",
                    "use attention-backend fa3 or flashinfer on this GPU",
                )
            )
        if page not in (16, 32, 64):
            page = _forced_page(
                out,
                page,
                64,
                f"TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size from {page} to 64.",
            )
    page = page or 1
    out.attention_backend, out.page_size, out.backend_given = backend, page, given_backend
    out.algorithm = algo

    # 3./4. speculative decoding
    if algo == "NEXTN":
        algo = out.algorithm = "EAGLE"
    if algo is not None and new and flags.get(ad.FLAG):
        steps, topk, draft = _adaptive(out, flags, ctx, algo, steps, topk, draft, dp_attention)
    if algo in EAGLE_FAMILY:
        out.draft_model_path = draft_path
        _eagle_family(
            out,
            version,
            arch,
            gpu,
            ctx,
            algo,
            steps,
            topk,
            draft,
            cap,
            page,
            backends,
            dp_attention,
            flags.get("model-path"),
        )
    elif algo == "NGRAM":
        _ngram(
            out,
            new,
            device,
            steps,
            topk,
            draft,
            cap,
            page,
            backend,
            dp_attention,
            _int(flags, "speculative-ngram-max-bfs-breadth"),
        )
    elif algo is not None:  # 0.5.23's DFLASH, DSPARK, UNO, FROZEN_KV_MTP: not modelled here
        out.steps, out.topk, out.draft_tokens, out.max_running_requests = steps, topk, draft, cap
        out.depends_on.append("algorithm")
        out.notes.append(f"{algo}'s own rules are not modelled here: the host's SGLang checks them")
    else:
        out.steps, out.topk, out.draft_tokens, out.max_running_requests = steps, topk, draft, cap

    if out.adaptive:
        _adaptive_after(out, flags, ctx, gpu)
    if out.max_draft_tokens is None:
        out.max_draft_tokens = out.draft_tokens
    if algo is not None and (flags.get("enable-lora") or flags.get("lora-paths")):
        _lora(out, ctx, algo, new)

    # 5. check_server_args
    if algo is not None and pp > 1:
        if not new:
            raise _Raise(
                _RuleFailure(
                    "spec-with-pipeline-parallel",
                    "AssertionError: Pipeline parallelism is not compatible "
                    "with overlap schedule, speculative decoding, mixed chunked prefill.",
                    "drop pp-size, or run without speculation",
                    source="assert (",
                )
            )
        _pipeline_parallel_0523(flags, ctx, algo, dp_attention, out.adaptive)


def _adaptive_given(flags: Mapping[str, Any]) -> bool:
    return any(flags.get(n) not in (None, False) for n in (ad.FLAG, ad.CONFIG_FLAG))


def _adaptive_unrecognized(flags: Mapping[str, Any], version: str) -> _RuleFailure:
    """0.5.10's argparse: no adaptive flags (``sglang serve: error: unrecognized arguments: ...``)."""
    words = []
    for name in (ad.FLAG, ad.CONFIG_FLAG):
        value = flags.get(name)
        if value in (None, False):
            continue
        words.append(
            f"--{name}"
            if value is True
            else f"--{name} {value if isinstance(value, str) else '<the config file the host writes>'}"
        )
    return _RuleFailure(
        "unknown-flag",
        "unrecognized arguments: " + " ".join(words),
        f"run SGLang {ad.SINCE} or newer, which has them (server.sglang_version), or drop them and deploy "
        "the policy's plain table (one static setup per load range)",
        source="argparse",
        what=f"SGLang {version} has no adaptive speculation (--{ad.FLAG} came in {ad.SINCE})",
    )


def _adaptive(
    out: RuleOutcome,
    flags: Mapping[str, Any],
    ctx: Context,
    algo: str,
    steps: Optional[int],
    topk: Optional[int],
    draft: Optional[int],
    dp_attention: bool,
) -> tuple[Optional[int], Optional[int], Optional[int]]:
    """handle_speculative_decoding's adaptive step (arg_groups/speculative_hook.py, after the algorithm's alias is
    resolved and before the algorithm's own handling): ``_maybe_disable_adaptive`` (SGLang's reason, a warning, and
    static speculation from there on), then ``_init_adaptive_speculative_params``: the config loaded (its refusals
    raise here), topk None -> 1, steps None -> the middle of the candidates' union, steps outside the union refused,
    draft tokens = steps + 1 whatever was given. The (steps, topk, draft tokens) that follow."""
    out.adaptive_requested = True
    reason = ad.unsupported_reason(
        algorithm=algo,
        topk=topk,
        dp_attention=dp_attention,
        multi_layer=bool(flags.get("enable-multi-layer-eagle")),
        two_batch_overlap=bool(flags.get("enable-two-batch-overlap")),
        pdmux=bool(flags.get("enable-pdmux")),
        version=ctx.version,
    )
    if reason is not None:
        out.adaptive_disabled_reason = reason
        out.warnings.append(ad.disabled_warning(reason))
        return steps, topk, draft
    config = _adaptive_config(out, flags.get(ad.CONFIG_FLAG), ctx)
    out.adaptive = True
    if topk is None:
        topk = 1
    if config is None:  # a path this machine cannot read: the host's pre-flight reads it
        return steps, topk, steps + 1 if steps is not None else None
    union = config.candidate_steps
    out.candidate_steps, out.adaptive_tiers, out.adaptive_knobs = union, dict(config.tiers), dict(config.knobs)
    out.max_draft_tokens = max(union) + 1
    if steps is None:
        steps = config.initial_steps(None)
        out.adjustments.append(
            _Adjustment(
                "adaptive-initial-steps",
                f"no --speculative-num-steps: adaptive SGLang "
                f"starts at steps {steps}, the middle of the candidates {list(union)}",
            )
        )
    if steps not in union:
        raise _Raise(
            _RuleFailure(
                "adaptive-steps-not-candidate",
                f"ValueError: --speculative-num-steps={steps} is not in the adaptive config candidate_steps "
                f"{list(union)}. Pass one of those values.",
                f"set speculative-num-steps to one of {list(union)} (the policy's launch flags use the "
                "largest), or leave it out",
            )
        )
    if draft is not None and draft != steps + 1:
        out.adjustments.append(
            _Adjustment(
                "adaptive-draft-tokens-overridden",
                f"--speculative-num-draft-tokens {draft} with adaptive speculation: SGLang "
                f"silently uses steps+1 = {steps + 1} (and steps+1 of each step count it "
                "switches to)",
            )
        )
    return steps, topk, steps + 1


def _adaptive_config(out: RuleOutcome, value: Any, ctx: Context) -> Optional[ad.Config]:
    """The config SGLang loads: its own default, a mapping (as the file the host writes), or a path read here; None
    for a path this machine cannot read (a note, not a verdict). Raises SGLang's refusals."""
    try:
        if value in (None, False, ""):
            out.adaptive_config = "default"
            return ad.load(ad.default_config(ctx.version))
        if isinstance(value, Mapping):
            out.adaptive_config = "mapping"
            return ad.load(ad.as_json(value))
        out.adaptive_config = path = str(value)
        try:
            raw = ad.read(path)
        except OSError as exc:
            if ctx.files_here:  # read where the server reads it: SGLang's ServerArgs opens it before anything loads
                raise _Raise(
                    _RuleFailure(
                        "adaptive-config-missing",
                        f"{type(exc).__name__}: {exc}",
                        f"fix speculative-adaptive-config: {path} is not a readable file where the server runs; "
                        "give the path of a JSON file of batch-size tiers, or the config itself as a mapping",
                        what="the adaptive config file cannot be read",
                        source="with open(cfg_path) as f:",
                    )
                ) from None
            out.depends_on.append("adaptive-config")
            out.notes.append(
                f"the adaptive config {path} cannot be read here ({type(exc).__name__}: {exc}): the host "
                "reads it at pre-flight, as SGLang will"
            )
            return None
        return ad.load(raw)
    except ValueError as exc:  # SGLang's own refusals, and json's (JSONDecodeError is a ValueError)
        name = type(exc).__name__
        what = (
            "the adaptive config is not JSON"
            if name == "JSONDecodeError"
            else "SGLang's adaptive config loader refuses the config"
        )
        raise _Raise(_RuleFailure("adaptive-config-refused", f"{name}: {exc}", _CONFIG_FIX, what=what)) from None
    except (AttributeError, TypeError) as exc:  # not an object, or a tier that is not one
        raise _Raise(
            _RuleFailure(
                "adaptive-config-refused",
                f"{type(exc).__name__}: {exc}",
                _CONFIG_FIX,
                what="the adaptive config is not an object of batch-size tiers",
                source="for key, entry in cfg.items():",
            )
        ) from None


_CONFIG_FIX = (
    'give speculative-adaptive-config an object of batch-size tiers, e.g. {"1": {"candidate_steps": [1, 3]}, '
    '"32": {"candidate_steps": [0]}} (integer-string keys; candidate_steps a non-empty list of '
    "non-negative integers; 0 = no drafting)"
)


def _decode_graph_disabled(flags: Mapping[str, Any]) -> bool:
    """Whether the decode phase's CUDA graph is off (ServerArgs._resolve_cuda_graph_config of the CPU build: the JSON
    of --cuda-graph-config wins over --cuda-graph-backend-decode, which wins over --disable-decode-cuda-graph and
    --disable-cuda-graph)."""
    raw = flags.get("cuda-graph-config")
    if raw not in (None, False, ""):
        try:
            cfg = json.loads(raw) if isinstance(raw, str) else raw
            backend = ((cfg or {}).get("decode") or {}).get("backend")
        except (ValueError, AttributeError):
            backend = None
        if backend is not None:
            return str(backend) == "disabled"
    chosen = flags.get("cuda-graph-backend-decode")
    if chosen not in (None, False, ""):
        return str(chosen) == "disabled"
    return bool(flags.get("disable-decode-cuda-graph") or flags.get("disable-cuda-graph"))


def _adaptive_after(out: RuleOutcome, flags: Mapping[str, Any], ctx: Context, gpu: _GpuKind) -> None:
    """What adaptive speculation meets after its own step: the HiSparse hook (0.5.23, not the CPU build) refuses it;
    on CPU, building its runtime states captures a decode graph per step count (eagle_worker_v2
    build_adaptive_runtime_state: DecodeCudaGraphRunner unless the decode graph backend is disabled), which the CPU
    attention backends do not implement (base_attn_backend.init_cuda_graph_state raises NotImplementedError).
    Measured on the CPU build (tiny target, EAGLE3, candidates [1, 3]): with none of the flags it dies so;
    --disable-cuda-graph, --disable-decode-cuda-graph and --cuda-graph-backend-decode disabled each let it start."""
    if flags.get("enable-hisparse") and not (ctx.version and ad.CPU_BUILD in ctx.version):
        raise _Raise(
            _RuleFailure(
                "adaptive-hisparse",
                "ValueError: HiSparse speculative decoding uses statically sized swap "
                "state; --speculative-adaptive is not supported.",
                "drop speculative-adaptive (or enable-hisparse)",
            )
        )
    if gpu.sm == 0 and out.later is None and not _decode_graph_disabled(flags):
        out.later = _RuleFailure(
            "adaptive-cuda-graph-cpu",
            "NotImplementedError",
            "add disable-cuda-graph: true (or disable-decode-cuda-graph: true, or "
            "cuda-graph-backend-decode: disabled) to the point's flags",
            stage="draft_capture",
            source="raise NotImplementedError()",
            what="adaptive speculation on CPU builds a decode CUDA graph per step count "
            "(build_adaptive_runtime_state), which no CPU attention backend implements",
        )


def _lora(out: RuleOutcome, ctx: Context, algo: str, new: bool) -> None:
    """LoRA with speculation: 0.5.10 and the CPU build take NGRAM only (ServerArgs' LoRA checks); 0.5.23 takes EAGLE /
    EAGLE3 (NEXTN is EAGLE), NGRAM, DFLASH and DSPARK, and refuses adaptive speculation that stays on
    (arg_groups/lora_hook.py check_lora_speculative_compatibility)."""
    if not new or (ctx.version and ad.CPU_BUILD in ctx.version):
        if algo != "NGRAM":
            raise _Raise(
                _RuleFailure(
                    "lora-speculative",
                    "ValueError: Currently LoRA is only compatible with NGRAM speculative decoding.",
                    "drop enable-lora / lora-paths, or speculate with NGRAM",
                )
            )
        return
    if algo not in ("NGRAM", "EAGLE", "EAGLE3", "DFLASH", "DSPARK"):
        raise _Raise(
            _RuleFailure(
                "lora-speculative",
                "ValueError: LoRA is only compatible with NGRAM, EAGLE, NEXTN, EAGLE3, "
                f"DFLASH, or DSPARK speculative decoding, not {algo}.",
                "drop enable-lora / lora-paths, or use EAGLE / EAGLE3 / NGRAM",
            )
        )
    if out.adaptive:
        raise _Raise(
            _RuleFailure(
                "adaptive-lora",
                "ValueError: LoRA with EAGLE/NEXTN/EAGLE3 speculative decoding does not "
                "support --speculative-adaptive: the draft is built from a static ServerArgs snapshot, and "
                "the runtime-state swap does not rebuild LoRA cuda-graph metadata.",
                "drop speculative-adaptive (or LoRA)",
            )
        )


def _env_true(value: Any) -> bool:
    """SGLang's EnvBool: true, 1, yes, y (any case)."""
    return str(value or "").strip().lower() in ("true", "1", "yes", "y")


def _pipeline_parallel_0523(
    flags: Mapping[str, Any], ctx: Context, algo: str, dp_attention: bool, adaptive: bool
) -> None:
    """0.5.23's check_pipeline_parallel_compat (srt/arg_groups/validation_hook.py:119, the prefill-only assertion at
    :161), from check_server_args (:197):
    speculation with pp > 1 is EAGLE (NEXTN) only, and only on a prefill node of a disaggregated
    deployment unless SGLANG_ENABLE_PP_SPEC=1 (its experimental aggregated PP speculation)."""
    mode = str(flags.get("disaggregation-mode") or "null")
    pp_spec = _env_true(ctx.env.get("SGLANG_ENABLE_PP_SPEC"))
    if algo == "DSPARK":
        if mode != "prefill":
            raise _Raise(
                _RuleFailure(
                    "spec-with-pipeline-parallel",
                    "AssertionError: Pipeline parallel DSPARK requires disaggregation-mode=prefill",
                    "drop pp-size, or run DSPARK on a prefill node",
                    source='assert cfg.disaggregation_mode == "prefill", (',
                )
            )
        if pp_spec:
            raise _Raise(
                _RuleFailure(
                    "spec-with-pipeline-parallel",
                    "AssertionError: SGLANG_ENABLE_PP_SPEC does not support DSPARK PD prefill",
                    "unset SGLANG_ENABLE_PP_SPEC",
                    source="assert not envs.SGLANG_ENABLE_PP_SPEC.get(), (",
                )
            )
        return
    if algo != "EAGLE" or flags.get("enable-multi-layer-eagle"):
        raise _Raise(
            _RuleFailure(
                "spec-with-pipeline-parallel",
                "AssertionError: Pipeline parallelism currently only "
                "supports EAGLE (non-multi-layer) speculative decoding",
                "drop pp-size, or use EAGLE / NEXTN (without enable-multi-layer-eagle)",
                source="assert (",
            )
        )
    if pp_spec:
        for bad, exception, fix in (
            (
                mode != "null",
                "SGLANG_ENABLE_PP_SPEC is not compatible with --disaggregation-mode",
                "drop disaggregation-mode, or unset SGLANG_ENABLE_PP_SPEC",
            ),
            (
                adaptive,
                "SGLANG_ENABLE_PP_SPEC is not compatible with --speculative-adaptive",
                "drop speculative-adaptive (or SGLANG_ENABLE_PP_SPEC)",
            ),
            (
                dp_attention,
                "SGLANG_ENABLE_PP_SPEC is not compatible with attention DP (--attn-dp-size)",
                "drop enable-dp-attention",
            ),
        ):
            if bad:
                raise _Raise(
                    _RuleFailure("spec-with-pipeline-parallel", f"AssertionError: {exception}", fix, source="assert (")
                )
        return
    if mode != "prefill":
        raise _Raise(
            _RuleFailure(
                "pp-spec-prefill-only",
                "AssertionError: PP + speculative decoding (MTP) is only supported "
                "on prefill nodes (disaggregation-mode=prefill)",
                "drop pp-size (use tp-size for the same GPUs), or run this server as a prefill node "
                "(disaggregation-mode prefill), or set SGLANG_ENABLE_PP_SPEC=1 in the server's env "
                "(SGLang's experimental aggregated PP speculation)",
                what=f"{str(flags.get('speculative-algorithm')).upper()} with pp-size "
                f"{flags.get('pp-size') or flags.get('pipeline-parallel-size')} on "
                + ("a server that is not disaggregated" if mode == "null" else f"a {mode} node"),
                source='assert cfg.disaggregation_mode == "prefill", (',
            )
        )


def _forced_page(out: RuleOutcome, page: Optional[int], to: int, message: str) -> int:
    if (page or 1) != to:
        out.adjustments.append(_Adjustment("page-size-forced", message))
    out.warnings.append(message)
    return to


def _default_backend(
    arch: str, gpu: _GpuKind, algo: Optional[str], topk: Optional[int], page: Optional[int], any_given: bool
) -> str:
    if gpu.sm == 0:
        return "intel_amx"  # SGLang's CPU backend; torch_native on a CPU without AMX (the same verdicts)
    chain_or_none = topk is None or (topk == 1 and page in (None, 1))
    if arch in _BLACKWELL_TRTLLM_MLA and gpu.sm in (100, 103) and not any_given:
        return "trtllm_mla"
    if _is_mla(arch):
        return "fa3" if gpu.sm == 90 else "flashinfer" if gpu.sm in (100, 103) else "triton"
    if gpu.sm == 90 and chain_or_none:
        return "fa3"
    if gpu.sm in (100, 103) and chain_or_none and (algo is None or topk is not None):
        return "trtllm_mha"
    return "flashinfer"


def _eagle_family(
    out: RuleOutcome,
    version: str,
    arch: str,
    gpu: _GpuKind,
    ctx: Context,
    algo: str,
    steps: Optional[int],
    topk: Optional[int],
    draft: Optional[int],
    cap: Optional[int],
    page: int,
    backends: set[str],
    dp_attention: bool,
    model_path: Any,
) -> None:
    if algo == "STANDALONE" and dp_attention:
        raise _Raise(
            _RuleFailure(
                "dp-attention-unsupported",
                "ValueError: Currently standalone speculative decoding does not support dp attention.",
                "drop enable-dp-attention for this drafter",
            )
        )
    cap = _running_cap(out, cap)
    if out.adaptive and steps is None:  # the config could not be read here: its steps are the host's to check
        out.topk, out.max_running_requests = topk, cap
        return
    self_draft = _mtp_self_draft(arch, version)
    if self_draft and out.draft_model_path is None:
        out.draft_model_path = str(model_path) if model_path else None
    elif self_draft and arch not in ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration"):
        out.warnings.append("DeepSeek MTP does not require setting speculative_draft_model_path.")
    if steps is None:
        if topk is not None or draft is not None:
            given = " and ".join(
                n
                for n, v in (("--speculative-eagle-topk", topk), ("--speculative-num-draft-tokens", draft))
                if v is not None
            )
            raise _Raise(
                _RuleFailure(
                    "topk-or-draft-without-steps",
                    "AssertionError",
                    "give speculative-num-steps too, or none of the three (SGLang then picks them: "
                    f"{auto_params(algo, arch)} for {arch})",
                    source="assert (",
                    what=f"{given} given without --speculative-num-steps",
                )
            )
        steps, topk, draft = auto_params(algo, arch)
        out.adjustments.append(
            _Adjustment(
                "auto-speculative-params",
                f"no steps, topk or draft tokens given: SGLang picks ({steps}, {topk}, {draft}) for {algo} on {arch}",
            )
        )
    out.max_running_requests = cap
    if "trtllm_mha" in backends:
        if topk is None:
            raise _Raise(_type_error_none())
        if topk > 1:
            raise _Raise(
                _RuleFailure(
                    "topk-trtllm-mha",
                    "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding.",
                    "use topk 1, or attention-backend fa3/flashinfer",
                )
            )
    if topk == 1 and draft != steps + 1:
        out.adjustments.append(
            _Adjustment(
                "topk1-draft-tokens-overridden",
                f"topk=1 with {draft if draft is not None else 'no'} draft tokens: SGLang "
                f"silently uses steps+1 = {steps + 1}",
            )
        )
        out.warnings.append(
            "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
        )
        draft = steps + 1
    out.steps, out.topk, out.draft_tokens = steps, topk, draft
    if topk is None:
        raise _Raise(_type_error_none())
    ok = _paged_tree_backends(version)
    if topk > 1 and page > 1 and out.attention_backend not in ok:
        chosen = (
            str(out.attention_backend)
            if out.backend_given
            else f"{out.attention_backend} (SGLang's choice on {gpu.name} for {arch}: none given)"
        )
        raise _Raise(
            _RuleFailure(
                "topk-page-size-backend",
                "ValueError: speculative_eagle_topk > 1 with page_size > 1 is only supported on "
                f"{ok}; got attention_backend={out.attention_backend!r}"
                if at_least(version, "0.5.23")
                else "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable and produces "
                "incorrect results for paged attention backends. This combination is only supported for "
                "the 'flashinfer' backend.",
                f"set attention-backend to one of {', '.join(ok)}, or page-size 1",
                what=f"topk={topk} with page size {page} on attention backend {chosen}",
            )
        )
    _later_eagle(out, version, arch, ctx, algo, steps, topk, draft, model_path)


def _later_eagle(
    out: RuleOutcome,
    version: str,
    arch: str,
    ctx: Context,
    algo: str,
    steps: int,
    topk: int,
    draft: Optional[int],
    model_path: Any,
) -> None:
    """Failures past the arguments: SGLang accepts these, then dies at load, capture or the first request."""
    if steps < 1 and not out.adaptive:  # adaptive: steps 0 is its no-drafting tier, which the worker serves
        out.later = _RuleFailure(
            "steps-zero",
            "RuntimeError: the drafter runs no step",
            "use speculative-num-steps >= 1",
            stage="draft_capture",
            what=f"speculative-num-steps {steps}: SGLang's argument checks let it pass",
        )
        return
    if topk < 1:
        # No version checks it (0.5.10 and 0.5.23 alike: only topk == 1 and topk > 1 are looked at). The
        # drafter's draft step takes the top 0 tokens; steps >= 2 then reshape that empty tensor to
        # (-1, topk, topk) (srt/speculative/spec_utils.py:491 in 0.5.10, :448 in 0.5.23); one step ends
        # at organize_draft_results' torch.topk(scores, draft tokens - 1) over no scores
        # (srt/speculative/eagle_utils.py:27 / :110); a negative topk at fast_topk's torch.topk
        # (srt/utils/common.py:2656 / :3947).
        reshape = topk == 0 and steps >= 2
        out.later = _RuleFailure(
            "topk-below-one",
            "RuntimeError: cannot reshape tensor of 0 elements into shape [-1, 0, 0] because the "
            "unspecified dimension size -1 can be any value and is ambiguous"
            if reshape
            else "RuntimeError: selected index k out of range",
            "use speculative-eagle-topk >= 1 (1 for a chain drafter, e.g. 4 for a tree)",
            stage="draft_capture",
            source="topk_p.view(-1, topk, topk)" if reshape else "return torch.topk(values, topk, dim=dim)",
            what=f"--speculative-eagle-topk {topk} (the drafter needs at least one candidate "
            "token per step; no SGLang version checks it)",
        )
        return
    if topk > 1 and draft is None:
        out.later = _RuleFailure(
            "tree-without-draft-tokens",
            "TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'",
            "set speculative-num-draft-tokens for a tree drafter",
            stage="draft_capture",
            what=f"topk={topk} without --speculative-num-draft-tokens",
        )
        return
    if draft is not None and topk > 1:
        capacity = topk + (steps - 1) * topk * topk
        if draft - 1 > capacity:
            out.later = _RuleFailure(
                "draft-tree-too-small",
                "RuntimeError: selected index k out of range",
                f"lower speculative-num-draft-tokens to <= {capacity + 1} or raise steps/topk",
                stage="draft_capture",
                what=f"{draft} draft tokens do not fit a tree of steps={steps}, topk={topk} (at most "
                f"{capacity + 1}: num_draft_tokens - 1 <= topk + (steps-1)*topk^2)",
            )
            return
        if draft < 2:
            # seen on a live server (real tier, CPU 7f8f030, steps 3, topk 4, 1 draft token: "... existing
            # size (4) at non-singleton dimension 1.  Target sizes: [1, 1].  Tensor sizes: [4]"); the
            # sizes follow the tree, so only the words are kept
            out.later = _RuleFailure(
                "draft-tokens-too-few",
                "RuntimeError: The expanded size of the tensor (1) must match the existing size",
                "use at least 2",
                stage="draft_capture",
                what=f"{draft} draft token (a tree of topk {topk} verifies at least 2)",
            )
            return
    drafter_arch = config_architecture(ctx.draft_config) if ctx.draft_config is not None else None
    if out.draft_model_path is None:
        # no draft path, and a target without its own MTP layers: the drafter loads the target's path
        if algo == "EAGLE3":
            out.later = _RuleFailure(
                "draft-model-missing",
                "AttributeError: the drafter defines no hot_token_id",
                "add speculative-draft-model-path (an EAGLE-3 drafter)",
                stage="draft_load",
                what=f"EAGLE3 without --speculative-draft-model-path loads the target ({arch}) "
                "as its drafter, which is no EAGLE-3 drafter",
            )
        else:
            out.adjustments.append(
                _Adjustment(
                    "drafter-is-target",
                    f"no --speculative-draft-model-path: {algo} loads the target ({arch}) as its own drafter",
                )
            )
        return
    if model_path and out.draft_model_path == str(model_path) and drafter_arch is None:
        drafter_arch = arch if algo == "EAGLE3" else None
    if algo == "EAGLE3" and drafter_arch and "eagle3" not in drafter_arch.lower():
        out.later = _RuleFailure(
            "drafter-not-eagle3",
            "AttributeError: the drafter defines no hot_token_id",
            "use an EAGLE-3 drafter, or the algorithm that fits this one",
            stage="draft_load",
            what=f"the EAGLE3 drafter's architecture is {drafter_arch}, not an EAGLE-3 one",
        )
        return
    if algo == "EAGLE" and arch.startswith("Deepseek") and _mtp_self_draft(arch, version):
        config = ctx.draft_config if ctx.draft_config is not None else ctx.target_config
        layers = (config or {}).get("num_nextn_predict_layers")
        if layers is not None and int(layers) != 1:
            out.later = _RuleFailure(
                "nextn-layers",
                "AssertionError: Only 1 nextn layer is supported",
                "use a NextN drafter with exactly one MTP layer",
                stage="draft_load",
                what=f"the DeepSeek NextN drafter has num_nextn_predict_layers={layers}",
            )


def _running_cap(out: RuleOutcome, cap: Optional[int]) -> int:
    """Speculation without --max-running-requests: SGLang caps running requests at 48, and says so."""
    if cap is not None:
        return cap
    out.adjustments.append(
        _Adjustment("spec-running-cap", "Max running requests is reset to 48 for speculative decoding.")
    )
    out.warnings.append(
        "Max running requests is reset to 48 for speculative decoding. You can override this "
        "by explicitly setting --max-running-requests."
    )
    return SPEC_RUNNING_CAP


def _ngram(
    out: RuleOutcome,
    new: bool,
    device: str,
    steps: Optional[int],
    topk: Optional[int],
    draft: Optional[int],
    cap: Optional[int],
    page: int,
    backend: Optional[str],
    dp_attention: bool,
    breadth: Optional[int],
) -> None:
    if not new and device != "cuda":
        raise _Raise(
            _RuleFailure(
                "ngram-device",
                "ValueError: Ngram speculative decoding only supports CUDA device.",
                "NGRAM needs SGLang 0.5.23 or newer on CPU",
            )
        )
    cap = _running_cap(out, cap)
    new_topk = breadth if breadth is not None else _NGRAM_BFS_BREADTH
    if topk is not None and topk != new_topk:
        out.adjustments.append(
            _Adjustment(
                "ngram-topk-overridden",
                f"NGRAM sets topk to its BFS breadth {new_topk} (--speculative-eagle-topk {topk} is ignored)",
            )
        )
    topk = new_topk
    if draft is None:
        draft = _NGRAM_DRAFT_TOKENS
        out.warnings.append(
            "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
            "You can override this by explicitly setting --speculative-num-draft-tokens."
        )
    if steps is None and new:
        steps = draft // topk
    out.steps, out.topk, out.draft_tokens, out.max_running_requests = steps, topk, draft, cap
    if topk > 1 and page > 1 and backend != "flashinfer":
        raise _Raise(
            _RuleFailure(
                "topk-page-size-backend",
                f"ValueError: speculative_eagle_topk({topk}) > 1 with page_size({page}) > 1 is unstable "
                "and produces incorrect results for paged attention backends. This combination is only "
                "supported for the 'flashinfer' backend.",
                "set attention-backend flashinfer, or page-size 1",
                what=f"NGRAM sets topk={topk} itself; with page size {page} that needs flashinfer, "
                f"and the backend is {backend}",
            )
        )
    if dp_attention:
        raise _Raise(
            _RuleFailure(
                "dp-attention-unsupported",
                "ValueError: Currently ngram speculative decoding does not support dp attention.",
                "drop enable-dp-attention for NGRAM",
            )
        )
