"""Drafter pre-flight: what SGLang would do with a drafter checkpoint, found in well under a second.

Reads the target's and the drafter's ``config.json`` and only the headers of the drafter's
safetensors files (the 8-byte little-endian length, then the JSON header; never the tensors), and
replays what SGLang (commit 7f8f030, ``srt/models/llama_eagle3.py``, ``llama_eagle.py``,
``kimi_k25_eagle3.py``, ``llama.py``) does with them at load and at the first forward pass:

- ``weights-ignored`` / ``weights-missing`` / ``weight-shape``: the model class's own name mapping
  (``LlamaForCausalLMEagle3.load_weights``: ``midlayer`` -> ``layers.0``, ``d2t``/``t2d`` taken
  apart, q/k/v and gate/up stacked, a bare name tried again under ``model.``). A name that maps to
  no parameter is dropped without a word and the parameter it was meant for keeps its initial
  (uninitialized) values: the server starts and serves with a broken drafter (warning). A shape
  that does not fit is an ``AssertionError`` at load (error).
- ``aux-layers``: the target layers whose hidden states an EAGLE-3 drafter reads
  (``eagle_config.eagle_aux_hidden_state_layer_ids``, shifted the way the target's
  ``set_eagle3_layers_to_capture`` shifts them, or SGLang's default ``[2, n//2, n-3]``). A layer
  the target never reaches, or one listed twice, leaves SGLang with fewer hidden states than the
  drafter's ``fc`` takes: the first forward pass dies, after the whole startup (error).
- ``hidden-size``, ``vocab``, ``draft-vocab``: the drafter against the target it is served with.
- ``algorithm``: the drafter's architecture against ``--speculative-algorithm``.

Each finding has a level (``error``: SGLang would fail, after minutes; ``warning``: it would serve,
badly) and a fix. Pure: no torch, no SGLang; ``python -m sweep check-drafter`` runs it alone.
"""

from __future__ import annotations

import json
import re
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from sweep.core import Check, CheckLevel, ServerFlags, plural

ERROR: Final = "error"
WARNING: Final = "warning"

# bytes per element of each safetensors dtype
_DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit on the JSON header

_EAGLE3_CLASSES = {"LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"}
_EAGLE_CLASSES = {
    "LlamaForCausalLMEagle",
    "MistralForCausalLMEagle",
    "Qwen2ForCausalLMEagle",
    "MistralLarge3ForCausalLMEagle",
}
# target classes whose set_eagle3_layers_to_capture keeps the ids as they are unless the first is 1
# (deepseek_v2.py, glm4_moe_lite.py; Kimi-K2.x wraps a DeepseekV3 language model)
_AS_IS_UNLESS_FIRST_IS_ONE = {
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "KimiK25ForConditionalGeneration",
    "Glm4MoeLiteForCausalLM",
}
_AS_IS_IF_MAX_IS_N = {"GptOssForCausalLM"}  # gpt_oss.py: as they are when max(ids) == n, else +1
# targets whose decoder loop adds ``hidden_states + residual`` with residual None before layer 0
# (llama.py and the models built like it): capturing before layer 0 is a TypeError
LLAMA_LIKE = ("Llama", "Mistral", "Phi3", "Apertus", "Exaone", "Glm4Moe", "Longcat")  # (Qwen2, gpt-oss, Bailing
# check for None: there capturing before layer 0 hands the drafter the embeddings)
ALGORITHMS = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}  # the ones with a drafter checkpoint checked here


class _DrafterFileError(Exception):
    """A file of the checkpoint could not be read (the message says which and why)."""


@dataclass(frozen=True)
class Tensor:
    dtype: str
    shape: tuple[int, ...]
    file: str


@dataclass
class DrafterReport:
    target: str
    drafter: str
    algorithm: str
    architecture: str | None = None
    aux_layers: list[int] | None = None  # 0-based target layers whose output the drafter reads (-1: embeddings)
    aux_source: str = ""  # "config" | "default" | ""
    tensors: int = 0
    findings: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was not checked, and why
    seconds: float = 0.0
    # parameters of the drafter's model class that no weight of the checkpoint reaches: SGLang loads it
    # and serves them uninitialized without a word (a sweep measures it; check-drafter refuses it)
    missing_weights: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Check]:
        return [f for f in self.findings if f.level == ERROR]

    @property
    def warnings(self) -> list[Check]:
        return [f for f in self.findings if f.level == WARNING]

    def add(self, level: CheckLevel, check: str, message: str, fix: str) -> None:
        self.findings.append(Check(level, check, message, fix))

    def summary(self) -> str:
        aux = f", reads target layers {self.aux_layers} ({self.aux_source})" if self.aux_layers is not None else ""
        verdict = (
            f"{plural(len(self.errors), 'error')}, {plural(len(self.warnings), 'warning')}" if self.findings else "ok"
        )
        return (
            f"drafter {self.drafter} ({self.architecture or 'no architecture'}, {self.tensors} tensors) "
            f"for {self.target} under {self.algorithm}{aux}: {verdict} in {self.seconds * 1000:.0f} ms"
            + "".join(f"; {n}" for n in self.notes)
        )


# --- reading ------------------------------------------------------------------------------------


def read_header(path: str | Path) -> dict[str, Tensor]:
    """The tensors of one safetensors file (name -> dtype, shape) from its header alone."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise _DrafterFileError(f"{p} is not a safetensors file: {len(raw)} bytes")
            (n,) = struct.unpack("<Q", raw)
            if n > _MAX_HEADER:
                raise _DrafterFileError(f"{p} is not a safetensors file: header length {n}")
            text = f.read(n)
    except OSError as e:
        raise _DrafterFileError(f"cannot read {p}: {e.strerror or e}") from e
    if len(text) < n:
        raise _DrafterFileError(f"{p} is truncated: header of {n} bytes, {len(text)} there")
    try:
        header = json.loads(text)
    except ValueError as e:
        raise _DrafterFileError(f"{p} has an unreadable safetensors header: {e}") from e
    if not isinstance(header, dict):
        raise _DrafterFileError(f"{p} has an unreadable safetensors header")
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        out[name] = Tensor(str(info.get("dtype")), tuple(int(x) for x in info.get("shape", ())), p.name)
    return out


def read_config(folder: str | Path) -> dict:
    f = Path(folder) / "config.json"
    try:
        cfg = json.loads(f.read_text())
    except OSError as e:
        raise _DrafterFileError(f"cannot read {f}: {e.strerror or e}") from e
    except ValueError as e:
        raise _DrafterFileError(f"{f} is not valid JSON: {e}") from e
    if not isinstance(cfg, dict):
        raise _DrafterFileError(f"{f} is not a JSON object")
    return cfg


def _read_checkpoint(folder: str | Path, report: DrafterReport) -> dict[str, Tensor] | None:
    """Every tensor of the checkpoint in ``folder`` (its index's shards where there is one, as
    SGLang picks them); None when it has no safetensors at all. Missing shards are errors."""
    d = Path(folder)
    index = d / "model.safetensors.index.json"
    tensors: dict[str, Tensor] = {}
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise _DrafterFileError(f"{index} is unreadable: {e}") from e
        shards = sorted(set(weight_map.values()))
        missing = [s for s in shards if not (d / s).is_file()]
        if missing:
            report.add(
                ERROR,
                "shards",
                f"{index.name} names {plural(len(missing), 'shard file')} not in {d}: "
                f"{', '.join(missing[:5])}: SGLang stops at load (RuntimeError: ... references shard "
                "file(s) missing)",
                "copy the missing shards (an interrupted download?)",
            )
        for s in shards:
            if s not in missing:
                tensors.update(read_header(d / s))
        return tensors
    files = sorted(d.glob("*.safetensors"))
    if not files:
        return None
    for f in files:
        tensors.update(read_header(f))
    return tensors


def _text_config(cfg: dict) -> dict:
    """The language model's part of a config (multimodal wrappers keep it in text_config)."""
    for key in ("text_config", "language_config", "llm_config"):
        sub = cfg.get(key)
        if isinstance(sub, dict) and sub.get("hidden_size"):
            return {**sub, "architectures": cfg.get("architectures")}
    return cfg


def _arch(cfg: dict) -> str | None:
    archs = cfg.get("architectures")
    return archs[0] if isinstance(archs, list) and archs else None


def _eagle_config(cfg: dict) -> dict:
    e = cfg.get("eagle_config")
    return e if isinstance(e, dict) else {}


# --- SGLang's model classes: parameters and name mapping ------------------------------------------


@dataclass
class _Param:
    shape: tuple[int, ...]
    shards: dict | None = None  # stacked parameters: shard id -> the shape of that shard's weight
    required: bool = True  # False: SGLang fills it from the target (embeddings, a shared lm_head)
    why_optional: str = ""
    # the dim SGLang's tensor-parallel loader narrows the checkpoint's weight along (0: q/k/v, gate/up;
    # 1: o_proj, down_proj): a weight larger there is cut to size without a word, a smaller one fails
    # narrow() on GPU (the CPU backend pads it with zeros); every other dim must match (AssertionError).
    # None: the whole shape must match (nn.Linear, RMSNorm, embeddings, lm_head).
    split: int | None = None


def _dims(cfg: dict) -> dict:
    h = int(cfg["hidden_size"])
    heads = int(cfg.get("num_attention_heads") or 1)
    return {
        "h": h,
        "heads": heads,
        "kv": int(cfg.get("num_key_value_heads") or heads),
        "hd": int(cfg.get("head_dim") or h // heads),
        "inter": int(cfg.get("intermediate_size") or 4 * h),
        "vocab": int(cfg.get("vocab_size") or 0),
        "layers": int(cfg.get("num_hidden_layers") or 1),
    }


def _aux_count(cfg: dict) -> int:
    """How many target hidden states the EAGLE-3 fc takes (llama_eagle3.LlamaModel's resolution)."""
    if cfg.get("num_aux_hidden_states") is not None:
        return int(cfg["num_aux_hidden_states"])
    ids = _eagle_config(cfg).get("eagle_aux_hidden_state_layer_ids")
    return len(ids) if ids else 3


def _decoder_layer(params: dict, prefix: str, d: dict, in_dim: int, *, norms: tuple[str, ...], o_bias: bool) -> None:
    q, kv = d["heads"] * d["hd"], d["kv"] * d["hd"]
    params[f"{prefix}.self_attn.qkv_proj.weight"] = _Param(
        (q + 2 * kv, in_dim), {"q": (q, in_dim), "k": (kv, in_dim), "v": (kv, in_dim)}, split=0
    )
    params[f"{prefix}.self_attn.o_proj.weight"] = _Param((d["h"], q), split=1)
    if o_bias:
        params[f"{prefix}.self_attn.o_proj.bias"] = _Param((d["h"],))
    params[f"{prefix}.mlp.gate_up_proj.weight"] = _Param(
        (2 * d["inter"], d["h"]), {0: (d["inter"], d["h"]), 1: (d["inter"], d["h"])}, split=0
    )
    params[f"{prefix}.mlp.down_proj.weight"] = _Param((d["h"], d["inter"]), split=1)
    for n in norms:
        params[f"{prefix}.{n}.weight"] = _Param((d["h"],))


def _eagle3_params(cfg: dict) -> dict[str, _Param]:
    """The parameters of SGLang's LlamaForCausalLMEagle3 built from this config, with their shapes."""
    d = _dims(cfg)
    e = _eagle_config(cfg)
    h, t_h = d["h"], int(cfg.get("target_hidden_size") or d["h"])
    n_aux = _aux_count(cfg)
    shared_embed = cfg.get("target_hidden_size") is None or cfg.get("target_hidden_size") == h
    p: dict[str, _Param] = {
        "model.embed_tokens.weight": _Param(
            (d["vocab"], h), required=not shared_embed, why_optional="SGLang gives the drafter the target's embeddings"
        ),
        "model.fc.weight": _Param((h, t_h * n_aux)),
        "model.norm.weight": _Param((h,)),
    }
    if cfg.get("bias"):
        p["model.fc.bias"] = _Param((h,))
    if e.get("norm_before_fc", cfg.get("norm_before_fc", False)):
        p["model.input_norm.weight"] = _Param((t_h * n_aux,))
    if cfg.get("fc_norm") or cfg.get("use_aux_norm"):
        for i in range(n_aux):
            p[f"model.fc_norm.{i}.weight"] = _Param((t_h,))
    o_bias = bool(cfg.get("attention_bias") or cfg.get("bias"))
    for i in range(d["layers"]):
        _decoder_layer(
            p,
            f"model.layers.{i}",
            d,
            2 * h if i == 0 else h,
            o_bias=o_bias,
            norms=("input_layernorm", "post_attention_layernorm", "hidden_norm"),
        )
    if not cfg.get("tie_word_embeddings"):
        from_target = cfg.get("draft_vocab_size") is None
        p["lm_head.weight"] = _Param(
            (int(cfg.get("draft_vocab_size") or d["vocab"]), h),
            required=not from_target,
            why_optional="no draft_vocab_size: SGLang uses the target's lm_head",
        )
    return p


_EAGLE3_LEGACY = {
    "midlayer": "layers.0",
    "aux_norm_low": "fc_norm.0",
    "aux_norm_mid": "fc_norm.1",
    "aux_norm_high": "fc_norm.2",
}
_STACKED = [
    (".qkv_proj", ".q_proj", "q"),
    (".qkv_proj", ".k_proj", "k"),
    (".qkv_proj", ".v_proj", "v"),
    (".gate_up_proj", ".gate_proj", 0),
    (".gate_up_proj", ".up_proj", 1),
]


def _eagle3_map(name: str, params: dict) -> tuple[str | None, object]:
    """Where LlamaForCausalLMEagle3.load_weights puts a checkpoint tensor: (parameter, shard id),
    ("d2t"/"t2d", None) for the vocabulary maps, (None, None) where it drops it without a word."""
    for legacy, new in _EAGLE3_LEGACY.items():
        if legacy in name:
            name = name.replace(legacy, new)
    if "d2t" in name:
        return "d2t", None
    if "t2d" in name:
        return "t2d", None
    for param_name, weight_name, shard in _STACKED:
        if weight_name not in name:
            continue
        name = name.replace(weight_name, param_name)
        target = name if name in params else f"model.{name}"
        return (target, shard) if target in params else (None, None)
    target = name if name in params else f"model.{name}"
    return (target, None) if target in params else (None, None)


def _eagle_params(cfg: dict) -> dict[str, _Param]:
    """SGLang's LlamaForCausalLMEagle (EAGLE-1/2): layer 0 without input_layernorm, fc(2h -> h) with a bias,
    the target's embeddings and lm_head."""
    d = _dims(cfg)
    h = d["h"]
    p: dict[str, _Param] = {
        "model.embed_tokens.weight": _Param(
            (d["vocab"], h), required=False, why_optional="SGLang gives the drafter the target's embeddings"
        ),
        "model.fc.weight": _Param((h, 2 * h)),
        "model.fc.bias": _Param((h,)),
    }
    o_bias = bool(cfg.get("attention_bias") or cfg.get("bias"))
    for i in range(d["layers"]):
        _decoder_layer(
            p,
            f"model.layers.{i}",
            d,
            h,
            o_bias=o_bias,
            norms=("post_attention_layernorm",) if i == 0 else ("input_layernorm", "post_attention_layernorm"),
        )
    return p


def _eagle_map(name: str, params: dict) -> tuple[str | None, object]:
    """LlamaForCausalLMEagle.load_weights: lm_head skipped, the rest under ``model.`` through
    LlamaForCausalLM's loader (which logs 'Parameter ... not found in params_dict' for the rest)."""
    if "lm_head" in name:
        return "lm_head", None
    name = "model." + name
    if "rotary_emb.inv_freq" in name:
        return "skip", None
    for param_name, weight_name, shard in _STACKED:
        if weight_name in name:
            name = name.replace(weight_name, param_name)
            return (name, shard) if name in params else (None, None)
    return (name, None) if name in params else (None, None)


_CLASSES = {
    "LlamaForCausalLMEagle3": (_eagle3_params, _eagle3_map),
    "LlamaForCausalLMEagle": (_eagle_params, _eagle_map),
}


# --- the checks ---------------------------------------------------------------------------------


def _fmt(names: list[str], n: int = 4) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def _shape_issue(got: tuple, want: tuple, split: int | None) -> str | None:
    """None when SGLang loads a weight of shape ``got`` into a parameter of shape ``want``; else
    mismatch (an AssertionError), short (narrow() fails on GPU) or cut (truncated without a word)."""
    if got == want:
        return None
    if split is None or len(got) != len(want) or any(g != w for i, (g, w) in enumerate(zip(got, want)) if i != split):
        return "mismatch"
    return "cut" if got[split] > want[split] else "short"


def _strip_prefix(names: list[str], params: dict, mapper) -> str | None:
    """A prefix (``module.``, ``_orig_mod.``, ``model.model.`` ...) whose removal makes every one of
    ``names`` load."""
    found = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts)):
            rest = ".".join(parts[i:])
            if mapper(rest, params)[0] is not None:
                found.add(".".join(parts[:i]) + ".")
                break
        else:
            return None
    return found.pop() if len(found) == 1 else None


def _check_weights(cfg: dict, tensors: dict[str, Tensor], arch: str, report: DrafterReport) -> None:
    if arch not in _CLASSES:
        if arch == "Eagle3DeepseekV2ForCausalLM":
            _check_mla_names(tensors, report)
        else:
            report.notes.append(f"weight names not checked: sweep/sglang/drafter.py does not model {arch}'s loader")
        return
    make, mapper = _CLASSES[arch]
    try:
        params = make(cfg)
    except (KeyError, TypeError, ValueError) as e:
        report.add(
            ERROR,
            "config",
            f"config.json lacks what {arch} is built from ({e})",
            "save the drafter's config with hidden_size, num_attention_heads, intermediate_size, vocab_size",
        )
        return
    loaded: dict[str, set] = {}
    ignored: list[str] = []
    bad_shape: dict[str, list[str]] = {"mismatch": [], "short": [], "cut": []}
    for name, t in sorted(tensors.items()):
        target, shard = mapper(name, params)
        if target in ("d2t", "t2d", "lm_head", "skip"):
            continue
        if target is None:
            ignored.append(name)
            continue
        p = params[target]
        want = p.shards[shard] if p.shards is not None and shard is not None else p.shape
        issue = _shape_issue(tuple(t.shape), tuple(want), p.split)
        if issue:
            bad_shape[issue].append(f"{name} {list(t.shape)} into {target} (wants {list(want)})")
        loaded.setdefault(target, set()).add(shard)
    fix = (
        "this checkpoint was made for another configuration: fix config.json (hidden_size, heads, head_dim, "
        "intermediate_size, draft_vocab_size, eagle_aux_hidden_state_layer_ids) or re-export the weights"
    )
    shape_issues: tuple[tuple[str, str, CheckLevel], ...] = (
        ("mismatch", "SGLang stops at load (AssertionError: ... shape ...)", ERROR),
        (
            "short",
            "SGLang stops at load on GPU (narrow() past the end: RuntimeError; its CPU backend pads "
            "the weight with zeros instead)",
            ERROR,
        ),
        ("cut", "SGLang keeps the first rows/columns it needs and drops the rest without a word", WARNING),
    )
    for issue, then, level in shape_issues:
        lines = bad_shape[issue]
        if lines:
            report.add(
                level,
                "weight-shape",
                f"{plural(len(lines), 'weight')} of the wrong shape for {arch}: {lines[0]}"
                + (f"; and {len(lines) - 1} more" if len(lines) > 1 else "")
                + f": {then}",
                fix,
            )
    missing = []
    for pname, p in params.items():
        got = loaded.get(pname, set())
        need = set(p.shards) if p.shards is not None else {None}
        if p.required and not need <= got:
            lacking = sorted(str(s) for s in need - got) if p.shards is not None else []
            missing.append(pname + (f" (shards {','.join(lacking)})" if lacking else ""))
    if ignored:
        prefix = _strip_prefix(ignored, params, mapper)
        fix = (
            f"strip the prefix {prefix!r} from every key (a training wrapper's)"
            if prefix
            else f"rename them to {arch}'s names (midlayer.* or layers.0.*, fc, norm, lm_head, d2t, t2d)"
        )
        report.add(
            WARNING,
            "weights-ignored",
            f"{len(ignored)} of {len(tensors)} weights map to no parameter of {arch} and are dropped "
            f"without a message: {_fmt(ignored)}",
            fix,
        )
    report.missing_weights = missing
    if missing:
        report.add(
            WARNING,
            "weights-missing",
            f"{plural(len(missing), 'parameter')} of {arch} get no weight and keep their initial "
            f"(uninitialized) values; SGLang loads and serves without a word, acceptance near zero: "
            f"{_fmt(missing)}",
            "rename the checkpoint's keys to what SGLang loads (see weights-ignored), or add the missing tensors",
        )


_MLA_PREFIXES = ("midlayer.", "fc.", "fc_norm.", "norm.", "lm_head.", "embed_tokens.", "input_norm.")


def _check_mla_names(tensors: dict[str, Tensor], report: DrafterReport) -> None:
    """Eagle3DeepseekV2ForCausalLM maps ``layers.0.`` -> ``midlayer.`` and logs 'Eagle3 MLA: skipping
    unexpected weight' for what matches none of its modules; names only (its MLA shapes are not modelled)."""
    odd = []
    for name in tensors:
        if name in ("d2t", "t2d") or name.endswith((".d2t", ".t2d")):
            continue
        mapped = re.sub(r"^layers\.0\.", "midlayer.", name)
        if not mapped.startswith(_MLA_PREFIXES):
            odd.append(name)
    if odd:
        report.add(
            WARNING,
            "weights-ignored",
            f"{len(odd)} weights match no module of Eagle3DeepseekV2ForCausalLM "
            f"(SGLang logs 'skipping unexpected weight' and leaves those parameters uninitialized): {_fmt(odd)}",
            "rename them to midlayer.* / layers.0.*, fc, norm, lm_head",
        )
    if not any(re.sub(r"^layers\.0\.", "midlayer.", n).startswith("midlayer.") for n in tensors):
        report.missing_weights = ["midlayer.* (the decoder layer)"]
        report.add(
            WARNING,
            "weights-missing",
            "no decoder-layer weights (midlayer.* or layers.0.*): the drafter's layer keeps its initial values",
            "export the drafter's decoder layer as midlayer.* or layers.0.*",
        )


def capture_indices(target_cfg: dict, ids: list[int] | None) -> list[int]:
    """SGLang's ``layers_to_capture`` for this target: the hidden state entering each of these layers
    (the output of the layer before) is what the drafter reads. Llama and most others shift the
    config's ids by one; DeepSeek-V2/V3 (Kimi-K2.x) and GLM-4-MoE-Lite only when the first id is 1;
    gpt-oss unless max(ids) is the layer count. ``ids`` None: SGLang's default."""
    tc = _text_config(target_cfg)
    n = int(tc.get("num_hidden_layers") or 0)
    arch = _arch(target_cfg) or ""
    if ids is None:
        return [2, n // 2, n - 3]
    if arch in _AS_IS_UNLESS_FIRST_IS_ONE:
        return [i + 1 for i in ids] if ids and ids[0] == 1 else list(ids)
    if arch in _AS_IS_IF_MAX_IS_N:
        return list(ids) if ids and max(ids) == n else [i + 1 for i in ids]
    return [i + 1 for i in ids]


def _id_meaning(target_cfg: dict, n: int) -> str:
    arch = _arch(target_cfg) or ""
    if arch in _AS_IS_UNLESS_FIRST_IS_ONE:
        return (
            f"on {arch} an id k is the input of layer k (valid 1..{n - 1}), except that a list starting "
            "with 1 is shifted by one"
        )
    return f"on {arch or 'this target'} an id k is the output of layer k (valid 0..{n - 2})"


def _check_aux_layers(target_cfg: dict, cfg: dict, report: DrafterReport) -> None:
    e = cfg.get("eagle_config")
    if isinstance(e, dict) and e.get("use_aux_hidden_state") is False:
        return
    ids = e.get("eagle_aux_hidden_state_layer_ids") if isinstance(e, dict) else None
    if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) for i in ids)):
        report.add(
            ERROR,
            "aux-layers",
            f"eagle_aux_hidden_state_layer_ids is {ids!r}, not a list of integers",
            "list the target layers the drafter was trained on, e.g. [1, 29, 57]",
        )
        return
    if ids is None and cfg.get("eagle_aux_hidden_state_layer_ids") is not None:
        report.add(
            WARNING,
            "aux-layers",
            "eagle_aux_hidden_state_layer_ids is at the top level of config.json, "
            "where SGLang's target does not read it: it captures its default layers instead",
            'move it into eagle_config: {"eagle_aux_hidden_state_layer_ids": [...]}',
        )
    tc = _text_config(target_cfg)
    n = int(tc.get("num_hidden_layers") or 0)
    if not n:
        return
    capture = capture_indices(target_cfg, ids)
    report.aux_layers = [c - 1 for c in capture]
    report.aux_source = "config" if ids is not None else "default"
    where = (
        f"eagle_aux_hidden_state_layer_ids {ids}"
        if ids is not None
        else f"SGLang's default (no eagle_aux_hidden_state_layer_ids): capture [2, n//2, n-3] = {capture}"
    )
    arch = _arch(target_cfg) or "the target"
    never = [c for c in capture if not 0 <= c < n]
    dupes = sorted({c for c in capture if capture.count(c) > 1})
    fc_takes = _aux_count(cfg)
    if never or dupes:
        what = []
        if never:
            what.append(f"layer input(s) {never} that a {n}-layer target never reaches (it has inputs 0..{n - 1})")
        if dupes:
            what.append(f"layer input(s) {dupes} twice (captured once)")
        report.add(
            ERROR,
            "aux-layers",
            f"{where} make {arch} capture {capture}: {' and '.join(what)}, so it hands the drafter "
            f"{len(set(c for c in capture if 0 <= c < n))} hidden states where its fc takes {fc_takes}: "
            "SGLang loads, then dies at the first forward pass of both models (a shape error), after the "
            "whole startup",
            f"list {fc_takes} distinct target layers the drafter was trained on; {_id_meaning(target_cfg, n)}",
        )
        return
    if 0 in capture:
        if arch.startswith(LLAMA_LIKE) and arch not in _AS_IS_UNLESS_FIRST_IS_ONE:
            report.add(
                ERROR,
                "aux-layers",
                f"{where} make {arch} capture the input of layer 0 (the embeddings), where its decoder loop "
                "adds a residual that is still None: TypeError at the first forward pass, after the whole "
                "startup",
                f"list the layers training used; {_id_meaning(target_cfg, n)}",
            )
            return
        report.add(
            WARNING,
            "aux-layers",
            f"{where} make {arch} capture the input of layer 0: the drafter reads the "
            "token embeddings there, rarely what it was trained on",
            f"list the layers training used; {_id_meaning(target_cfg, n)}",
        )
    if ids is not None and list(ids) != sorted(ids):
        report.add(
            WARNING,
            "aux-layers",
            f"{where} are not in increasing order: SGLang concatenates the captured hidden states in layer "
            f"order {sorted(report.aux_layers)}, not in the config's order, so fc sees them permuted",
            "list them in increasing order, as training concatenated them (re-check the training config)",
        )
    if ids is not None and len(ids) != fc_takes:
        report.add(
            WARNING,
            "aux-layers",
            f"{len(ids)} layer ids but num_aux_hidden_states={fc_takes}",
            "make num_aux_hidden_states match the layer ids, or drop it",
        )


def _vocab_map(tensors: dict[str, Tensor] | None, which: str) -> Tensor | None:
    """The d2t or t2d tensor, found the way load_weights finds it (any name containing it)."""
    for name, t in sorted((tensors or {}).items()):
        if which in name:
            return t
    return None


def _check_sizes(
    target_cfg: dict, cfg: dict, tensors: dict[str, Tensor] | None, arch: str, eagle3: bool, report: DrafterReport
) -> None:
    tc = _text_config(target_cfg)
    t_h, t_v = tc.get("hidden_size"), tc.get("vocab_size")
    h = cfg.get("hidden_size")
    if t_h and h and report.algorithm != "STANDALONE":  # a standalone drafter is a whole model of its own width
        reads = cfg["target_hidden_size"] if eagle3 and cfg.get("target_hidden_size") is not None else h
        if int(reads) != int(t_h):
            src = "target_hidden_size" if reads is not h else "hidden_size"
            report.add(
                ERROR,
                "hidden-size",
                f"the drafter reads target hidden states of size {reads} ({src}), the target's are {t_h}: "
                "it was trained for another target; SGLang loads it, then the first forward pass "
                "dies on the shape, after the whole startup",
                "serve it with the target it was trained for, or train one for this target",
            )
    if not t_v:
        return
    t_v = int(t_v)
    t2d = _vocab_map(tensors, "t2d")
    trained = t2d.shape[0] if t2d is not None and t2d.shape else cfg.get("vocab_size")
    if trained and int(trained) != t_v:
        src = "t2d has" if t2d is not None else "its config.json vocab_size is"
        vocab_level: CheckLevel = ERROR if int(trained) > t_v else WARNING
        then = (
            "its draft tokens can be ids the target does not have: the first verify step fails on them "
            "(an index out of range), after the whole startup"
            if vocab_level == ERROR
            else "its token ids mean other tokens here: it serves, accepting next to nothing"
        )
        report.add(
            vocab_level,
            "vocab",
            f"the drafter was trained for a vocabulary of {trained} ({src} {trained}), the target has {t_v}: {then}",
            "serve it with the target (and tokenizer) it was trained for",
        )
    if not eagle3:
        return
    dv = cfg.get("draft_vocab_size")
    d2t = _vocab_map(tensors, "d2t")
    if dv is not None and int(dv) > t_v:
        report.add(
            ERROR,
            "draft-vocab",
            f"draft_vocab_size {dv} is larger than the target's vocabulary {t_v}",
            "set draft_vocab_size to the drafter's lm_head rows (at most the target's vocabulary)",
        )
    if d2t is not None and dv is not None and d2t.shape and d2t.shape[0] != int(dv):
        short = d2t.shape[0] < int(dv)
        report.add(
            ERROR if short else WARNING,
            "draft-vocab",
            f"d2t maps {d2t.shape[0]} draft ids, draft_vocab_size is {dv}: "
            + (
                "a draft token beyond the map fails the first draft step (index out of range), after the whole startup"
                if short
                else "the extra entries are never used"
            ),
            "re-export d2t (draft id -> target id offsets) with one entry per draft token",
        )
    if d2t is None and dv is not None and int(dv) < t_v and not cfg.get("tie_word_embeddings"):
        report.add(
            WARNING,
            "draft-vocab",
            f"draft_vocab_size {dv} < the target's {t_v} and no d2t tensor: SGLang takes "
            "draft ids as target ids, so nearly every draft token is wrong",
            "add the d2t map the training library saved (draft id -> target id offsets)",
        )


def _check_algorithm(arch: str | None, algorithm: str, report: DrafterReport) -> bool:
    """False when the class does not fit the algorithm so badly that the rest means nothing."""
    if arch is None:
        report.add(
            ERROR,
            "algorithm",
            "the drafter's config.json names no architectures",
            'add "architectures": ["LlamaForCausalLMEagle3"] (or the class it was trained as)',
        )
        return False
    if algorithm == "EAGLE3" and arch in _EAGLE_CLASSES:
        report.add(
            ERROR,
            "algorithm",
            f"{arch} is an EAGLE (1/2) drafter, the algorithm is EAGLE3: SGLang loads it, "
            f"then stops while setting up the drafter (AttributeError: '{arch}' object has no attribute "
            "'hot_token_id'), after the target and drafter are loaded",
            "use --speculative-algorithm EAGLE for it, or an EAGLE-3 drafter",
        )
        return False
    if algorithm == "EAGLE" and arch in _EAGLE3_CLASSES:
        report.add(
            WARNING,
            "algorithm",
            f"{arch} is an EAGLE-3 drafter, the algorithm is EAGLE: SGLang serves it "
            "without the target's auxiliary hidden states (its fc is never used) and with the target's "
            "lm_head instead of its own: acceptance near zero",
            "use --speculative-algorithm EAGLE3",
        )
        return False
    if algorithm == "EAGLE3" and arch not in _EAGLE3_CLASSES:
        report.add(
            WARNING,
            "algorithm",
            f"{arch} is not an EAGLE-3 drafter class known here ({', '.join(sorted(_EAGLE3_CLASSES))})",
            "check that SGLang has an EAGLE-3 class of that name",
        )
        return False
    if algorithm == "STANDALONE" and (arch in _EAGLE_CLASSES or arch in _EAGLE3_CLASSES):
        report.add(
            ERROR,
            "algorithm",
            f"{arch} is an EAGLE drafter head, STANDALONE runs a whole small model",
            "use --speculative-algorithm EAGLE/EAGLE3 for it, or a small model of the target's family",
        )
        return False
    return True


def check(target: str | Path, drafter: str | Path, algorithm: str = "EAGLE3") -> DrafterReport:
    """Every check above on one target/drafter pair; unreadable files are findings, never exceptions."""
    t0 = time.perf_counter()
    algorithm = (algorithm or "EAGLE3").upper()
    algorithm = "EAGLE" if algorithm == "NEXTN" else algorithm
    report = DrafterReport(str(target), str(drafter), algorithm)
    try:
        _check(Path(target), Path(drafter), algorithm, report)
    except _DrafterFileError as e:
        report.add(ERROR, "files", str(e), "fix or re-download the checkpoint")
    report.seconds = time.perf_counter() - t0
    return report


def _check(target: Path, drafter: Path, algorithm: str, report: DrafterReport) -> None:
    cfg = read_config(drafter)
    target_cfg = read_config(target)
    arch = report.architecture = _arch(cfg)
    tensors = _read_checkpoint(drafter, report)
    if tensors is None:
        if any(drafter.glob("*.bin")) or any(drafter.glob("*.pt")):
            report.notes.append(f"weight names not checked: {drafter} has no safetensors (only .bin/.pt)")
        else:
            report.add(
                ERROR,
                "files",
                f"{drafter} has no weight files: SGLang stops at load",
                "point --speculative-draft-model-path at the folder with the drafter's *.safetensors",
            )
    else:
        report.tensors = len(tensors)
    fits = _check_algorithm(arch, algorithm, report)
    eagle3 = arch in _EAGLE3_CLASSES and algorithm == "EAGLE3"
    if eagle3:
        _check_aux_layers(target_cfg, cfg, report)
    _check_sizes(target_cfg, cfg, tensors, arch or "", eagle3, report)
    if tensors is not None and arch is not None and fits and not any(f.rule == "shards" for f in report.findings):
        _check_weights(cfg, tensors, arch, report)


def from_flags(flags: ServerFlags) -> tuple[str, str, str] | None:
    """(target, drafter, algorithm) of a server's flags ({name: value}; ``ServerFlags``), or None when
    it has no drafter to check."""
    typed = ServerFlags(flags)
    target, drafter, algorithm = typed.model_path, typed.draft_model_path, typed.algorithm or ""
    if not drafter or not target or ("EAGLE" if algorithm == "NEXTN" else algorithm) not in ALGORITHMS:
        return None
    return target, drafter, algorithm


def check_flags(flags: ServerFlags) -> DrafterReport | None:
    """The checks for a server's flags when they name a drafter and both folders are here; else None."""
    found = from_flags(flags)
    if found is None:
        return None
    target, drafter, algorithm = found
    if not (Path(target).expanduser() / "config.json").is_file() or not Path(drafter).expanduser().is_dir():
        return None
    return check(Path(target).expanduser(), Path(drafter).expanduser(), algorithm)
