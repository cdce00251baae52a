"""SGLang's ServerArgs semantics, as SGLang applies them at startup (not the sweep's plan linter).

``resolve`` does what ``ServerArgs.__post_init__`` does to the speculative arguments, in SGLang's
order (shared/sglang-surface.md, "Speculative-argument rules"): the same bare ``AssertionError`` and
``ValueError`` messages, the same warnings and silent overrides, the same auto-chosen defaults, the
48-request cap. Failures SGLang only meets minutes later (topk missing, a draft tree too small for
its tokens, no drafter path) are returned as a :class:`Deferred` for the startup to raise there.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from sweep.sglang.fake.args import version_tuple

LLAMA_LIKE = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
MTP_ARCHITECTURES = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "Glm4MoeForCausalLM",
                     "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
SPEC_RUNNING_CAP = 48
DEFAULT_MEM_FRACTION_STATIC = 0.88  # what SGLang picks on a ~140 GB GPU
DEFAULT_CHUNKED_PREFILL_SIZE = 8192
DEFAULT_CUDA_GRAPH_MAX_BS = 256
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

    @property
    def speculative(self) -> bool:
        return bool(self.args.get("speculative_algorithm"))


def architecture(model_path: str, override: Optional[str] = None) -> str:
    """The target's HF architecture: the override, else config.json, else a guess from its name."""
    if override:
        return override
    config = os.path.join(model_path, "config.json")
    try:
        with open(config) as fh:
            arch = json.load(fh).get("architectures") or []
        if arch:
            return str(arch[0])
    except (OSError, ValueError, AttributeError):
        pass
    lower = model_path.lower()
    for hint, arch in _NAME_HINTS:
        if hint in lower:
            return arch
    return "LlamaForCausalLM"


def auto_speculative_params(algorithm: str, arch: str) -> tuple[int, int, int]:
    """SGLang's auto_choose_speculative_params: (steps, topk, draft tokens)."""
    if algorithm != "STANDALONE" and arch in LLAMA_LIKE:
        return 5, 4, 8
    return 3, 1, 4


def _draft_tree_capacity(steps: int, topk: int) -> int:
    return topk + (steps - 1) * topk * topk


def cuda_graph_enabled(args: dict[str, Any]) -> bool:
    return not args.get("disable_cuda_graph") and args.get("cuda_graph_backend_decode", "full") != "disabled"


def cuda_graph_max_bs(args: dict[str, Any]) -> int:
    for key in ("cuda_graph_max_bs", "cuda_graph_max_bs_decode"):
        if args.get(key):
            return int(args[key])
    if args.get("cuda_graph_bs"):
        return max(int(b) for b in args["cuda_graph_bs"])
    return DEFAULT_CUDA_GRAPH_MAX_BS


def resolve(ns: argparse.Namespace, version: str, warn: Optional[Callable[[str], None]] = None) -> Resolved:
    """Apply ServerArgs' post-init to parsed flags. Raises :class:`ArgsRejected` like SGLang does.
    ``warn`` sees each warning as SGLang logs it (before a later check may raise)."""
    a = {k: v for k, v in vars(ns).items() if not k.startswith("fake_")}
    out = Resolved(a, architecture=architecture(a["model_path"], getattr(ns, "fake_architecture", None)))

    def note(message: str) -> None:
        out.warnings.append(message)
        if warn:
            warn(message)

    return _resolve(a, out, note, version)


def _resolve(a: dict[str, Any], out: Resolved, warn: Callable[[str], None], version: str) -> Resolved:
    a.setdefault("served_model_name", None)
    a["served_model_name"] = a["served_model_name"] or a["model_path"]
    a["tokenizer_path"] = a.get("tokenizer_path") or a["model_path"]
    if a.get("mem_fraction_static") is None:
        a["mem_fraction_static"] = DEFAULT_MEM_FRACTION_STATIC
    if a.get("chunked_prefill_size") is None:
        a["chunked_prefill_size"] = DEFAULT_CHUNKED_PREFILL_SIZE
    if a.get("attention_backend") is None:
        a["attention_backend"] = "fa3"  # Hopper's default
    a.setdefault("disable_overlap_schedule", False)

    algo = a.get("speculative_algorithm")
    if algo == "NEXTN":
        a["speculative_algorithm"] = algo = "EAGLE"
    if algo and a.get("pp_size", 1) > 1:
        raise ArgsRejected("ValueError: Currently speculative decoding does not support pipeline parallelism.",
                           "raise ValueError(")
    if algo in EAGLE_FAMILY:
        _eagle_family(a, out, warn, version)
    elif algo == "NGRAM":
        _ngram(a, warn)
    return out


def _eagle_family(a: dict[str, Any], out: Resolved, warn: Callable[[str], None], version: str) -> None:
    algo = a["speculative_algorithm"]
    if algo == "STANDALONE" and a.get("enable_dp_attention"):
        raise ArgsRejected("ValueError: Currently standalone speculative decoding does not support dp attention.",
                           "raise ValueError(")
    if a.get("max_running_requests") is None:
        a["max_running_requests"] = SPEC_RUNNING_CAP
        warn("Max running requests is reset to 48 for speculative decoding. You can override this by "
             "explicitly setting --max-running-requests.")
    a["disable_overlap_schedule"] = True
    warn("Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding.")
    if a.get("enable_mixed_chunk"):
        a["enable_mixed_chunk"] = False
        warn("Mixed chunked prefill is disabled because of using eagle speculative decoding.")
    if out.architecture in MTP_ARCHITECTURES:
        if a.get("speculative_draft_model_path") is None:
            a["speculative_draft_model_path"] = a["model_path"]
        else:
            warn("DeepSeek MTP does not require setting speculative_draft_model_path.")

    steps, topk, draft = (a.get("speculative_num_steps"), a.get("speculative_eagle_topk"),
                          a.get("speculative_num_draft_tokens"))
    if steps is None:
        if not (topk is None and draft is None):
            raise ArgsRejected("AssertionError", "assert (")
        steps, topk, draft = auto_speculative_params(algo, out.architecture)
        a["speculative_num_steps"], a["speculative_eagle_topk"], a["speculative_num_draft_tokens"] = steps, topk, draft

    backends = {a.get("attention_backend"), a.get("decode_attention_backend"), a.get("prefill_attention_backend")}
    if "trtllm_mha" in backends:
        if topk is None:
            raise ArgsRejected("TypeError: '>' not supported between instances of 'NoneType' and 'int'",
                               "if self.speculative_eagle_topk > 1:")
        if topk > 1:
            raise ArgsRejected("ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding.",
                               "raise ValueError(")

    if topk == 1 and draft != steps + 1:
        warn("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")
        a["speculative_num_draft_tokens"] = draft = steps + 1

    if topk is None:
        # per sglang-surface.md rule 2: not caught here; the drafter trips over it minutes later
        out.deferred = Deferred("draft_init", "TypeError: '>' not supported between instances of 'NoneType' and 'int'")
        return
    paged_ok = ("flashinfer", "fa3", "triton") if version_tuple(version) >= (0, 5, 23) else ("flashinfer", "fa3")
    if topk > 1 and a.get("page_size", 1) > 1 and a.get("attention_backend") not in paged_ok:
        raise ArgsRejected(
            "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results "
            f"for paged attention backends. This combination is only supported for the {' or '.join(map(repr, paged_ok))} "
            "backend.", "raise ValueError(")
    if draft is None:
        out.deferred = Deferred("draft_capture", "TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'")
    elif draft - 1 > _draft_tree_capacity(steps, topk):
        out.deferred = Deferred("draft_capture", "RuntimeError: selected index k out of range")
    elif a.get("speculative_draft_model_path") is None:
        out.deferred = Deferred("draft_load", "TypeError: expected str, bytes or os.PathLike object, not NoneType")


def _ngram(a: dict[str, Any], warn: Callable[[str], None]) -> None:
    if a.get("max_running_requests") is None:
        a["max_running_requests"] = SPEC_RUNNING_CAP
        warn("Max running requests is reset to 48 for speculative decoding. You can override this by "
             "explicitly setting --max-running-requests.")
    a["disable_overlap_schedule"] = True
    a["enable_mixed_chunk"] = False
    a["speculative_eagle_topk"] = a.get("speculative_ngram_max_bfs_breadth") or 10
    if a.get("speculative_num_draft_tokens") is None:
        a["speculative_num_draft_tokens"] = a.get("speculative_ngram_max_match_window_size") or 12
    if a.get("speculative_num_steps") is None:
        a["speculative_num_steps"] = a["speculative_num_draft_tokens"] - 1
    warn("The overlap scheduler and mixed chunked prefill are disabled because of using ngram speculative decoding.")
    topk = a["speculative_eagle_topk"]
    if topk > 1 and a.get("page_size", 1) > 1 and a.get("attention_backend") != "flashinfer":
        raise ArgsRejected(
            f"ValueError: speculative_eagle_topk({topk}) > 1 with page_size({a['page_size']}) > 1 is unstable and "
            "produces incorrect results for paged attention backends. This combination is only supported for "
            "the 'flashinfer' backend.", "raise ValueError(")
    if a.get("enable_dp_attention"):
        raise ArgsRejected("ValueError: Currently ngram speculative decoding does not support dp attention.",
                           "raise ValueError(")


def server_args_repr(args: dict[str, Any]) -> str:
    """``ServerArgs(model_path='...', ...)`` as SGLang logs it at startup."""
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
