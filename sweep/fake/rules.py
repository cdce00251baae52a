"""SGLang's ServerArgs semantics, as SGLang applies them at startup (not the sweep's plan linter).

``resolve`` does what ``ServerArgs.__post_init__`` (and ``resolve_once``, ``check_server_args``) do to
the speculative arguments, through the model the plan uses too (``sweep.sglang.serverargs``, checked
against real SGLang by tests/real/test_rules_differential.py): per version (``--fake-version``), per
target architecture (its config.json, as SGLang reads it) and per GPU (``--fake-gpu``, H200 unless
told; ``--device cpu``): the same bare ``AssertionError`` and ``ValueError`` messages, the same
warnings and silent overrides, the attention backend SGLang picks, the auto-chosen defaults, the
48-request cap. Failures SGLang only meets later (steps 0, a draft tree too small for its tokens, a
drafter that is no EAGLE-3 drafter) are returned as a :class:`Deferred` for the startup to raise there.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from sweep.core import ServerFlags
from sweep.fake import tracebacks
from sweep.fake.args import DEFAULT_GPU
from sweep.sglang import adaptive as ad
from sweep.sglang import serverargs

LLAMA_LIKE = serverargs.LLAMA_LIKE_AUTO
EAGLE_FAMILY = serverargs.EAGLE_FAMILY
SPEC_RUNNING_CAP = serverargs.SPEC_RUNNING_CAP
_DEFAULT_MEM_FRACTION_STATIC = 0.88  # what SGLang picks on a ~140 GB GPU
_DEFAULT_CHUNKED_PREFILL_SIZE = 8192
_DEFAULT_CUDA_GRAPH_MAX_BS = 256
DEFAULT_CONTEXT_LENGTH = 131072

# name substring (lower case) -> architecture, for model paths with no config.json to read
_NAME_HINTS = (
    ("deepseek", "DeepseekV3ForCausalLM"),
    ("kimi", "DeepseekV3ForCausalLM"),  # Kimi K2 ships the DeepSeek-V3 architecture
    ("glm", "Glm4MoeForCausalLM"),
    ("qwen", "Qwen3MoeForCausalLM"),
    ("mistral", "MistralForCausalLM"),
    ("grok", "Grok1ForCausalLM"),
    ("llama", "LlamaForCausalLM"),
)


class ArgsRejected(Exception):
    """ServerArgs raised: ``exception`` is the traceback's last line, ``source`` the line that raised."""

    def __init__(self, exception: str, source: str):
        self.exception = exception
        self.source = source
        super().__init__(exception)


@dataclass(frozen=True)
class Deferred:
    """A failure SGLang hits later in startup: ``where`` names the phase (see tracebacks.INIT_STACKS)."""

    where: str
    exception: str


@dataclass
class Resolved:
    args: dict[str, Any]  # every server arg after SGLang's adjustments (for the log and /server_info)
    warnings: list[str] = field(default_factory=list)
    architecture: str = "LlamaForCausalLM"
    deferred: Optional[Deferred] = None
    adaptive_config: Optional[ad.Config] = None  # --speculative-adaptive in force: the config SGLang loaded
    adaptive_disabled: Optional[str] = None  # --speculative-adaptive given, and why SGLang fell back to static

    @property
    def speculative(self) -> bool:
        return bool(self.args.get("speculative_algorithm"))


def architecture(model_path: str, override: Optional[str] = None) -> str:
    """The target's HF architecture: its config.json where there is one (as SGLang reads it), else
    --fake-architecture, else a guess from the path's name (a fake model needs no files)."""
    arch = serverargs.config_architecture(serverargs.read_config(model_path))
    if arch:
        return arch
    if override:
        return override
    lower = model_path.lower()
    for hint, arch in _NAME_HINTS:
        if hint in lower:
            return arch
    return "LlamaForCausalLM"


def _auto_speculative_params(algorithm: str, arch: str) -> tuple[int, int, int]:
    """SGLang's auto_choose_speculative_params: (steps, topk, draft tokens)."""
    return serverargs.auto_params(algorithm, arch)


def cuda_graph_enabled(args: dict[str, Any]) -> bool:
    return not args.get("disable_cuda_graph") and args.get("cuda_graph_backend_decode") != "disabled"


def cuda_graph_max_bs(args: dict[str, Any]) -> int:
    for key in ("cuda_graph_max_bs", "cuda_graph_max_bs_decode"):
        if args.get(key):
            return int(args[key])
    if args.get("cuda_graph_bs"):
        return max(int(b) for b in args["cuda_graph_bs"])
    return _DEFAULT_CUDA_GRAPH_MAX_BS


def resolve(ns: argparse.Namespace, version: str, warn: Optional[Callable[[str], None]] = None) -> Resolved:
    """Apply ServerArgs' post-init to parsed flags. Raises :class:`ArgsRejected` like SGLang does.
    ``warn`` sees each warning as SGLang logs it (before a later check may raise)."""
    a = {k: v for k, v in vars(ns).items() if not k.startswith("fake_")}
    out = Resolved(a, architecture=architecture(a["model_path"], getattr(ns, "fake_architecture", None)))

    def note(message: str) -> None:
        out.warnings.append(message)
        if warn:
            warn(message)

    gpu = "cpu" if ServerFlags(_flags(a)).is_cpu else getattr(ns, "fake_gpu", None) or DEFAULT_GPU
    return _resolve(a, out, note, version, gpu)


def _flags(a: dict[str, Any]) -> dict[str, Any]:
    """The parsed args as the sweep spells flags (what serverargs.resolve reads)."""
    return {k.replace("_", "-"): v for k, v in a.items() if v is not None and v is not False}


def _resolve(a: dict[str, Any], out: Resolved, warn: Callable[[str], None], version: str, gpu: str) -> Resolved:
    a.setdefault("served_model_name", None)
    a["served_model_name"] = a["served_model_name"] or a["model_path"]
    a["tokenizer_path"] = a.get("tokenizer_path") or a["model_path"]
    if a.get("mem_fraction_static") is None:
        a["mem_fraction_static"] = _DEFAULT_MEM_FRACTION_STATIC
    if a.get("chunked_prefill_size") is None:
        a["chunked_prefill_size"] = _DEFAULT_CHUNKED_PREFILL_SIZE
    a.setdefault("disable_overlap_schedule", False)

    draft_path = a.get("speculative_draft_model_path")
    ctx = serverargs.Context(
        version=version,
        architecture=out.architecture,
        gpu=gpu,
        target_config=serverargs.read_config(a["model_path"]),
        draft_config=serverargs.read_config(draft_path) if draft_path else None,
        env=dict(os.environ),
    )
    o = serverargs.resolve(_flags(a), ctx)
    for message in o.warnings:
        warn(message)
    if o.error is not None:
        raise ArgsRejected(
            o.error.exception
            if ":" in o.error.exception or o.error.exception.endswith("Error")
            else f"ValueError: {o.error.exception}",
            o.error.source,
        )
    a["attention_backend"], a["page_size"] = o.attention_backend, o.page_size
    if not o.algorithm:
        return out
    a["speculative_algorithm"] = o.algorithm
    if o.adaptive_requested:  # SGLang turns the switch off where it falls back to static speculation
        a["speculative_adaptive"] = o.adaptive
    a["speculative_num_steps"], a["speculative_eagle_topk"] = o.steps, o.topk
    a["speculative_num_draft_tokens"], a["max_running_requests"] = o.draft_tokens, o.max_running_requests
    a["speculative_draft_model_path"] = o.draft_model_path
    a["disable_overlap_schedule"] = True
    if a.get("enable_mixed_chunk"):
        a["enable_mixed_chunk"] = False
        warn("Mixed chunked prefill is disabled because of using eagle speculative decoding.")
    if o.algorithm == "NGRAM":
        # SGLang 0.5.10 leaves steps unset for NGRAM and 0.5.23 makes it draft // topk (0 below 10 draft
        # tokens); the fake's scheduler model counts at least one step (a known difference, see
        # tests/real/test_rules_differential.py)
        if not a["speculative_num_steps"] or a["speculative_num_steps"] < 1:
            a["speculative_num_steps"] = 1
        warn(
            "The overlap scheduler and mixed chunked prefill are disabled because of using ngram speculative decoding."
        )
    else:
        warn("Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding.")
    if o.adaptive_requested:
        _adaptive(a, out, o)
    if o.later is not None:
        stage = (
            "adaptive_capture"
            if o.later.rule == "adaptive-cuda-graph-cpu"  # the runtime states, after the graphs
            else o.later.stage
            if o.later.stage in tracebacks.INIT_STACKS
            else "draft_capture"
        )
        out.deferred = Deferred(stage, o.later.exception)
    return out


def _adaptive(a: dict[str, Any], out: Resolved, o: serverargs.RuleOutcome) -> None:
    """What SGLang made of ``--speculative-adaptive`` (``serverargs``: its fallback, with the warning already
    logged, or the config it loaded and the steps it starts with). The config the plan could not read
    (a path) is read here, the server's own machine, failing as SGLang's ``open`` / ``json.load`` do."""
    a["speculative_adaptive"] = o.adaptive
    if not o.adaptive:
        out.adaptive_disabled = o.adaptive_disabled_reason
        return
    config = ad.Config(dict(o.adaptive_tiers), dict(o.adaptive_knobs)) if o.adaptive_tiers else None
    if config is None:
        try:
            config = ad.load(ad.read(str(a.get("speculative_adaptive_config"))))
        except OSError as exc:
            raise ArgsRejected(f"{type(exc).__name__}: {exc}", "with open(cfg_path) as f:") from None
        except ValueError as exc:
            raise ArgsRejected(f"{type(exc).__name__}: {exc}", "raise ValueError(") from None
    out.adaptive_config = config


def server_args_repr(args: dict[str, Any]) -> str:
    """``ServerArgs(model_path='...', ...)`` as SGLang logs it at startup."""
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
