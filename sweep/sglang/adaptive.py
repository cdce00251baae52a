"""SGLang's adaptive speculation config (``--speculative-adaptive-config``), as its loader reads it.

``--speculative-adaptive`` (SGLang 0.5.23 and the CPU build 7f8f030; 0.5.10's argparse does not know
it) switches the drafter's step count at run time, per batch-size tier, by an EMA of the accepted
drafts (``sglang/srt/speculative/adaptive_spec_params.py``). Its config is a JSON object whose
integer-string keys are batch-size tiers (``{"1": {"candidate_steps": [1, 3]}, "32":
{"candidate_steps": [0]}}``; 0 means no drafting in that tier); the other top-level keys, and a
tier's own, are the EMA's knobs. This module is that loader (``_load_adaptive_config``), refusing
what SGLang refuses with its own exception text, and SGLang's reasons for falling back to static
speculation (``adaptive_unsupported_reason``), per version. Pure, except ``read`` (one JSON file).

The sweep lets a point give the config as a mapping (the host writes it to a JSON file just before
launch) or as a path; a mapping is read here as that file will be (``json`` round trip: keys become
strings, as SGLang sees them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from sweep.core import JSON, json_text, speculation

FLAG = speculation.ADAPTIVE_FLAG  # the names and the version gate: sweep/core/speculation.py
CONFIG_FLAG = speculation.CONFIG_FLAG
SINCE = speculation.SINCE  # the first release with the flags (0.5.10 has none)

# the EMA's knobs and their defaults (AdaptiveStepSlot.__init__)
_KNOBS: dict[str, float] = {
    "ema_alpha": 0.2,
    "update_interval": 5,
    "warmup_batches": 10,
    "down_hysteresis": -0.25,
    "up_hysteresis": 0.0,
    "ceiling_coeff": 0,
}


def _tier(steps: list[int], down: float) -> dict[str, Any]:
    return {"candidate_steps": steps, "up_hysteresis": 0.0, "down_hysteresis": down, "ceiling_coeff": 0}


# DEFAULT_ADAPTIVE_CONFIG: 0.5.23's, and the CPU build's (its first tier lacks 5)
_DEFAULT_0523: dict[str, dict[str, Any]] = {
    "1": _tier([1, 3, 5, 7], -0.25),
    "8": _tier([0, 1, 3], 0.0),
    "32": _tier([0, 1], 0.0),
    "64": _tier([0], 0.0),
}
_DEFAULT_7F8F030: dict[str, dict[str, Any]] = {**_DEFAULT_0523, "1": _tier([1, 3, 7], -0.25)}
CPU_BUILD = speculation.CPU_BUILD


def default_config(version: Optional[str]) -> dict[str, dict[str, Any]]:
    """SGLang's own config (no ``--speculative-adaptive-config``) for that version string."""
    return _DEFAULT_7F8F030 if version and CPU_BUILD in version else _DEFAULT_0523


@dataclass(frozen=True)
class Config:
    """A config as SGLang's loader accepted it."""

    tiers: dict[int, tuple[int, ...]]  # batch-size key -> its candidate steps, sorted and distinct (a slot's)
    knobs: dict[int, dict[str, Any]] = field(default_factory=dict)  # batch-size key -> the knobs it runs with

    @property
    def candidate_steps(self) -> tuple[int, ...]:
        """The union of the tiers' candidates (resolve_candidate_steps_from_config): sizes the buffers."""
        return tuple(sorted({s for c in self.tiers.values() for s in c}))

    def initial_steps(self, given: Optional[int]) -> int:
        """The steps the server starts with: the given ones, else the union's middle candidate."""
        union = self.candidate_steps
        return union[len(union) // 2] if given is None else given


def load(raw: Any) -> Config:
    """``_load_adaptive_config`` on a parsed JSON value: raises what SGLang raises (ValueError with its
    text; AttributeError for a value that is no object)."""
    bs_entries: dict[int, dict] = {}
    for key, entry in raw.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps")
        if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
            raise ValueError(f"BS {key}: candidate_steps must be a list of non-negative ints, got {steps!r}")
        bs_entries[int(key)] = entry
    if not bs_entries:
        raise ValueError(
            "speculative_adaptive_config must contain at least one integer-string "
            'BS key, e.g. {"1": {"candidate_steps": [1,3,7]}}. '
            f"Got keys: {list(raw.keys())}"
        )
    tiers, knobs = {}, {}
    for bs, entry in sorted(bs_entries.items()):
        merged = {**raw, **entry}
        tiers[bs] = tuple(int(s) for s in sorted(set(entry["candidate_steps"])))
        knobs[bs] = {k: merged.get(k, d) for k, d in _KNOBS.items()}
    return Config(tiers, knobs)


def _config_text(value: Mapping[str, Any]) -> str:
    """A mapping flag value as JSON text, keys sorted (the argv's value; what the host's file holds)."""
    return json_text(value)


def as_json(value: Mapping[str, Any]) -> JSON:
    """A mapping flag value as SGLang will read the file the host writes: through JSON (keys as text)."""
    return json.loads(_config_text(value))


def read(path: str) -> JSON:
    """The parsed JSON of a config file, raising what SGLang's ``open`` / ``json.load`` raise."""
    with open(path) as fh:
        return json.load(fh)


def unsupported_reason(
    *,
    algorithm: Optional[str],
    topk: Optional[int],
    dp_attention: bool,
    multi_layer: bool,
    two_batch_overlap: bool,
    pdmux: bool,
    version: Optional[str],
) -> Optional[str]:
    """``adaptive_unsupported_reason``: why SGLang falls back to static speculation, in its words (the
    algorithm as resolved: NEXTN is EAGLE by then). 0.5.23 also asks the platform for its own worker
    (``get_platform_worker_cls``), which only an out-of-tree platform plugin has: None on CUDA and CPU."""
    cpu_build = bool(version and CPU_BUILD in version)
    if algorithm not in ("EAGLE", "EAGLE3"):
        return f"speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"
    if topk is not None and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if dp_attention:
        return (
            "enable_dp_attention=True is not supported " if cpu_build else "attention DP is not supported "
        ) + "(adaptive tier decisions are not synchronized across DP ranks)"
    if multi_layer:
        return "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"
    if two_batch_overlap:
        return (
            "enable_two_batch_overlap=True is not supported "
            "(adaptive state swap would discard the TboAttnBackend wrapper)"
        )
    if pdmux:
        return "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"
    return None


def disabled_warning(reason: str) -> str:
    """What SGLang logs when it falls back (a warning)."""
    return f"speculative_adaptive disabled: {reason}. Falling back to static speculative params."


# the fix for each of SGLang's reasons (by its first words)
_REASON_FIXES = (
    (
        "speculative_algorithm=",
        "use speculative-algorithm EAGLE or EAGLE3 (NEXTN is EAGLE), or drop speculative-adaptive",
    ),
    ("speculative_eagle_topk=", "use speculative-eagle-topk 1 (a chain), or drop speculative-adaptive"),
    ("attention DP", "drop enable-dp-attention, or drop speculative-adaptive"),
    ("enable_dp_attention", "drop enable-dp-attention, or drop speculative-adaptive"),
    ("enable_multi_layer_eagle", "drop enable-multi-layer-eagle, or drop speculative-adaptive"),
    ("enable_two_batch_overlap", "drop enable-two-batch-overlap, or drop speculative-adaptive"),
    ("enable_pdmux", "drop enable-pdmux, or drop speculative-adaptive"),
)


def reason_fix(reason: str) -> str:
    return next((fix for start, fix in _REASON_FIXES if reason.startswith(start)), "drop speculative-adaptive")
