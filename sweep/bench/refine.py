"""Which concurrency levels to add so that the levels find the boundary (``concurrency.refine``).

After the given (or ``levels: auto``) levels, the benchmark asks :func:`next_levels` what to run
next, runs those, and asks again, until nothing is left to bisect or ``refine_max`` levels were
added. Two kinds of bracket are bisected, at the geometric middle of two adjacent measured levels:

- an **SLO boundary**: walking the levels upwards from the lowest that meets an SLO, the last that
  meets it and the next one, which does not (the bracket the report's "highest concurrency
  meeting it" interpolates in: ``sweep.analysis.slo.highest_meeting``); the verdicts come from
  ``sweep.core.slo_rule``, the rule the report judges by;
- a **crossover with the baseline**: two adjacent levels where the output throughput minus the
  baseline's (interpolated linearly in log concurrency, inside the baseline's measured range only)
  changes sign.

A bracket is done when ``hi / lo <= ratio`` or ``hi - lo <= 1``. Each round bisects every open
bracket once (so one SLO does not take every added level). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

_DEFAULT_MAX_RUNNING = 256  # ``levels: auto`` on a server that does not say its max_running_requests


@dataclass(frozen=True)
class MeasuredLevel:
    """One level measured so far: its SLO verdicts (SLO name -> met) and output throughput (tok/s)."""

    concurrency: int
    met: Mapping[str, bool] = field(default_factory=dict)
    throughput: Optional[float] = None


def auto_levels(start: Sequence[int], max_running: Optional[int]) -> list[int]:
    """The coarse start of ``levels: auto``: ``start`` (AUTO_LEVELS) up to the server's
    ``max_running_requests`` (more cannot run at once), with that cap itself as the last level
    when it lies inside the range. Unknown cap: ``start`` as it is."""
    if not isinstance(max_running, int) or isinstance(max_running, bool) or max_running < 1:
        return sorted(set(start))
    kept = sorted({c for c in start if c <= max_running})
    if max_running < max(start) and max_running not in kept:
        kept.append(max_running)
    return kept or [max_running]


def middle(lo: int, hi: int, ratio: float) -> Optional[int]:
    """The level between ``lo`` and ``hi`` to run next (their geometric mean, rounded, strictly
    inside), or None when the bracket is resolved (``hi / lo <= ratio`` or ``hi - lo <= 1``)."""
    if hi - lo <= 1 or hi / lo <= ratio:
        return None
    return min(hi - 1, max(lo + 1, round(math.sqrt(lo * hi))))


def slo_bracket(levels: Sequence[MeasuredLevel], name: str) -> Optional[tuple[int, int]]:
    """(last level meeting SLO ``name``, the next one, which misses it), walking upwards from the
    lowest level that meets it; None when none meets it or every level from there on does."""
    rows = sorted((m for m in levels if name in m.met), key=lambda m: m.concurrency)
    first = next((i for i, m in enumerate(rows) if m.met[name]), None)
    if first is None:
        return None
    last = first
    while last + 1 < len(rows) and rows[last + 1].met[name]:
        last += 1
    return (rows[last].concurrency, rows[last + 1].concurrency) if last + 1 < len(rows) else None


def interpolate(curve: Sequence[tuple[float, float]], c: float) -> Optional[float]:
    """The curve's value at ``c``, linear in log concurrency; None outside its range."""
    pts = sorted((float(x), float(y)) for x, y in curve if x and x > 0 and y is not None)
    if not pts or not pts[0][0] <= c <= pts[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= c <= x1:
            if x1 == x0:
                return y0
            f = (math.log(c) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + f * (y1 - y0)
    return pts[0][1]  # a curve of one point, at that point


def crossover_brackets(
    levels: Sequence[MeasuredLevel], baseline: Sequence[tuple[float, float]]
) -> list[tuple[int, int]]:
    """Adjacent measured levels between which throughput minus the baseline's changes sign."""
    diffs = []
    for m in sorted(levels, key=lambda m: m.concurrency):
        base = interpolate(baseline, m.concurrency)
        if m.throughput is not None and base is not None:
            diffs.append((m.concurrency, m.throughput - base))
    return [(c0, c1) for (c0, d0), (c1, d1) in zip(diffs, diffs[1:]) if d0 * d1 < 0]


def next_levels(
    levels: Sequence[MeasuredLevel],
    slos: Iterable[str] = (),
    *,
    baseline: Sequence[tuple[float, float]] = (),
    ratio: float = 1.2,
) -> list[int]:
    """The levels to run next (one per open bracket: SLO boundaries in ``slos`` order, then
    crossovers with ``baseline``, in that order, so a cap on added levels keeps the first), none
    already measured; [] when done."""
    seen = {m.concurrency for m in levels}
    brackets = [b for b in (slo_bracket(levels, name) for name in slos) if b is not None]
    if baseline:
        brackets += crossover_brackets(levels, baseline)
    out: list[int] = []
    for lo, hi in brackets:
        c = middle(lo, hi, ratio)
        if c is not None and c not in seen and c not in out:
            out.append(c)
    return out


def max_running_of(info: Optional[Mapping]) -> Optional[int]:
    """The requests the server runs at once, from its ``/server_info``: the schedulers'
    ``effective_max_running_requests_per_dp`` summed over DP ranks, else its
    ``max_running_requests`` argument; None when it says neither."""
    if not info:
        return None
    states = info.get("internal_states")
    per = (
        [s.get("effective_max_running_requests_per_dp") for s in states if isinstance(s, dict)]
        if isinstance(states, list)
        else []
    )
    nums = [int(v) for v in per if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if nums:
        return sum(nums)
    value = info.get("max_running_requests")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
