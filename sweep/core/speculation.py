"""The speculation model every room shares: which SGLang has adaptive speculation, its flags' names,
how SGLang routes a decode batch to an adaptive tier (CUDA-graph padding, then the closest lower
key), and what a group of step counts is. Pure; the one place each of these facts is written
(``tests/test_speculation_owner.py`` keeps it so).

- **The version gate** (``has_adaptive``): ``--speculative-adaptive`` came in SGLang ``SINCE``
  (0.5.23; 0.5.10's argparse lacks it); builds named by commit (``KNOWN_BUILDS``: the CPU build
  ``7f8f030``, a 0.5.23-era tree) have it too.
- **The flags** (``ADAPTIVE_FLAG``, ``CONFIG_FLAG``, ``STEP_FLAGS``): SGLang's spellings, as ``--help``
  writes them without dashes.
- **Routing** (``padded``, ``route_key``, ``decode_graph_bs``): ``AdaptiveSpeculativeParams._route``
  pads a batch size up to the next decode CUDA-graph batch size (itself above the largest; none
  without graphs), then takes the largest tier key at or below it (the smallest key below the
  smallest). A speculative server captures ``_generate_decode_cuda_graph_batch_sizes``'s speculative
  list (1-8, 10-32 by 2, 40-64 by 4, 72-256 by 8, then by 16), unless ``--cuda-graph-bs`` names them.
- **Step groups** (``step_group_key``): points that differ only in their step count (a chain drafter,
  topk 1, with every other setting equal) are one group, keyed by the other axes' values; the step
  axis is the axis of role ``steps``, else the one axis whose values alone tell apart points of
  different step counts (``step_axis_of``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, TypeVar

ADAPTIVE_FLAG = "speculative-adaptive"
CONFIG_FLAG = "speculative-adaptive-config"
STEP_FLAGS = ("speculative-num-steps", "speculative-num-draft-tokens", "speculative-eagle-topk")
SINCE = "0.5.23"  # the first release with --speculative-adaptive (0.5.10 has none)
CPU_BUILD = "7f8f030"
KNOWN_BUILDS = {CPU_BUILD: SINCE}  # builds named by commit -> the release their tree is (for the rules)
STEPS_ROLE = "steps"
CONFIRM_VALUE = "adaptive"  # a policy's own server: its step axis's value ("adaptive-r2" for a revision)
_ORDERED_ROLES = ("steps", "topk", "draft_tokens")  # the axes the points of a speculative family differ in
_NOT_STEP_ROLES = ("drafter", "env", "benchmark")  # axes that never carry the step count


def has_adaptive(version: Optional[str]) -> Optional[bool]:
    """Whether SGLang ``version`` has ``--speculative-adaptive`` (None: unknown version). A build
    named by commit ("7f8f030", "0.0.0.dev0+g7f8f030") has what its release has."""
    if not version:
        return None
    for commit, release in KNOWN_BUILDS.items():
        if commit in version:
            version = release
            break
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        return None
    return tuple(int(x) for x in m.groups()) >= tuple(int(x) for x in SINCE.split("."))


def decode_graph_bs(max_bs: int, *, speculative: bool = True, given: Optional[Sequence[int]] = None) -> list[int]:
    """The decode CUDA-graph batch sizes SGLang captures up to ``max_bs`` (``given``: --cuda-graph-bs)."""
    if given:
        return sorted({int(b) for b in given if int(b) <= max_bs}) or [1]
    if speculative:
        bs = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, max_bs + 1, 16)]
    else:
        bs = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    bs = [b for b in bs if b <= max_bs]
    if max_bs not in bs:
        bs.append(max_bs)
    return bs


def padded(batch: int, graph_bs: Optional[Sequence[int]]) -> int:
    """``_pad_to_cuda_graph_bs``: the smallest graph batch size >= ``batch`` (itself above the largest,
    or without graphs)."""
    if not graph_bs:
        return batch
    i = bisect.bisect_left(graph_bs, batch)
    return graph_bs[i] if i < len(graph_bs) else batch


def route_key(batch: int, keys: Sequence[int], graph_bs: Optional[Sequence[int]] = None) -> int:
    """The tier key SGLang routes a decode batch of ``batch`` requests to (``keys`` sorted)."""
    i = bisect.bisect_right(keys, padded(batch, graph_bs)) - 1
    return keys[max(0, i)]


def served(keys: Sequence[int], graph_bs: Optional[Sequence[int]], top: int) -> dict[int, tuple[int, Optional[int]]]:
    """{key: (first, last)} the raw batch sizes (1..``top``) each tier serves; the last tier's last is None (and above)."""
    out: dict[int, list[int]] = {}
    for b in range(1, max(top, 1) + 1):
        out.setdefault(route_key(b, keys, graph_bs), []).append(b)
    spans: dict[int, tuple[int, Optional[int]]] = {k: (v[0], v[-1]) for k, v in out.items()}
    last = max(keys)
    if last in spans:
        spans[last] = (spans[last][0], None)
    return spans


T = TypeVar("T")


def step_axis_of(
    item: T,
    items: Sequence[T],
    *,
    roles: Callable[[T], Mapping[str, Any]],
    params: Callable[[T], Mapping[str, Any]],
    steps: Callable[[T], Optional[int]],
) -> Optional[str]:
    """The step axis of ``item`` among ``items``: its axis of role ``steps``, else the first axis (not a
    drafter's, an env's or a workload's) whose value alone tells it apart from an item of a different
    step count that shares every other axis (a bundle setting steps and draft tokens)."""
    mine = roles(item)
    found = next((a for a, r in mine.items() if r == STEPS_ROLE), None)
    if found is not None:
        return found
    p = params(item)
    for a in p:
        if mine.get(a) in _NOT_STEP_ROLES or p[a] is None:
            continue
        rest = {b: v for b, v in p.items() if b != a}
        if any(
            q is not item and {b: v for b, v in params(q).items() if b != a} == rest and steps(q) != steps(item)
            for q in items
        ):
            return a
    return None


def step_group_key(params: Mapping[str, Any], step_axis: str) -> tuple:
    """A step group's key: the step axis and every other axis's value (as text, sorted)."""
    return (step_axis, tuple(sorted((a, str(v)) for a, v in params.items() if a != step_axis and v is not None)))


def shared_axes(params: Mapping[str, Any], roles: Mapping[str, Any]) -> tuple:
    """What the points of one speculative family share (the adaptive search's group): every axis value
    but the ordered ones (steps, topk, draft tokens), sorted."""
    return tuple(sorted((a, v) for a, v in params.items() if roles.get(a) not in _ORDERED_ROLES))


def confirm_value(revision: int = 1) -> str:
    """The step axis's value of a policy's confirmation point: 'adaptive', 'adaptive-r2' for its revision."""
    return CONFIRM_VALUE if revision <= 1 else f"{CONFIRM_VALUE}-r{revision}"


def is_confirm_value(value: Any) -> bool:
    """Whether an axis value marks a policy's confirmation point ('adaptive', 'adaptive-r2', ...)."""
    return re.fullmatch(rf"{CONFIRM_VALUE}(-r\d+)?", str(value)) is not None
