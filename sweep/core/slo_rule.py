"""The SLO verdict of one concurrency level: the one rule the host's refinement
(``sweep.bench.refine``) and the report (``sweep.analysis.slo``) both use.

A limit holds at a level when the ``percentile``-th value of its metric over the level's requests
is within it (times at most, speeds at least). A failed request takes the worst value (``FAILED``
seconds, 0 tok/s); an ok request whose metric is undefined (TPOT of a one-token answer) is left out
of the percentile; a limit whose metric is undefined for every request holds. Percentiles
interpolate linearly between the two nearest ranks (polars' and numpy's ``linear``).

``time_scale`` converts what was measured to real speed before it is judged: a dry run's fake
serves ``dry_run.fake_speed`` times faster than the system it models, so its times are multiplied
and its speeds divided by that factor, as the report does (``sweep.analysis.realspeed``). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    upper: bool  # a limit is an upper bound (times) or a lower bound (speeds)
    unit: str  # "s" or "tok/s"


METRICS = {
    "ttft": Metric("ttft", "TTFT", True, "s"),
    "tpot": Metric("tpot", "TPOT", True, "s"),
    "latency": Metric("latency", "latency", True, "s"),
    "tok_s": Metric("tok_s", "per-user speed", False, "tok/s"),
}
FAILED = 1e18  # the time a failed request "took" (finite: percentiles interpolate through it)


def failed_value(value: float | None) -> bool:
    return value is not None and value >= FAILED / 10


def amount(value: float, unit: str, compact: bool = False) -> str:
    if unit == "s":
        if value < 1:
            text, u = f"{value * 1000:.4g}", "ms"
        else:
            text, u = f"{value:.4g}", "s"
    else:
        text, u = f"{value:.4g}", "tok/s"
    if compact:
        return text + ("" if u == "tok/s" else u)
    return f"{text} {u}"


@dataclass(frozen=True)
class Limit:
    metric: str  # a key of METRICS
    percentile: float  # 0 < p <= 100
    value: float  # seconds, or tok/s

    @property
    def upper(self) -> bool:
        return METRICS[self.metric].upper

    def text(self) -> str:
        """In the command-line syntax: ``tpot_p90<=50ms``."""
        op = "<=" if self.upper else ">="
        return f"{self.metric}_p{self.percentile:g}{op}{amount(self.value, METRICS[self.metric].unit, compact=True)}"

    def describe(self) -> str:
        """In words: ``90% of requests with TPOT <= 50 ms``."""
        m = METRICS[self.metric]
        share = self.percentile if self.upper else 100 - self.percentile
        op = "<=" if self.upper else ">="
        return f"{share:g}% of requests with {m.title} {op} {amount(self.value, m.unit)}"


def limits_of(s: Any) -> tuple[Limit, ...]:
    """The limits of an ``SLOSettings`` (its percentile applies to every limit; tok/s at the mirrored
    percentile, so that ``percentile`` % of requests are at least that fast)."""
    out = []
    for metric, value in (("ttft", s.ttft_s), ("tpot", s.tpot_s), ("tok_s", s.tok_s)):
        if value is not None:
            pct = s.percentile if METRICS[metric].upper else 100 - s.percentile
            out.append(Limit(metric, pct, float(value)))
    return tuple(out)


def holds(limit: Limit, value: float | None) -> bool:
    """Whether a level whose percentile value of ``limit``'s metric is ``value`` meets it (None:
    undefined for every request of the level, which breaks no limit)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return value <= limit.value if limit.upper else value >= limit.value


def request_value(metric: str, row: Mapping[str, Any], time_scale: float = 1.0) -> Optional[float]:
    """One request's value of ``metric`` (a requests-table row: ok, ttft_s, tpot_s, latency_s,
    completion_tokens) at real speed; see the module docstring for failed and undefined ones."""
    if not row.get("ok"):
        return 0.0 if metric == "tok_s" else FAILED
    if metric == "tok_s":
        tokens, latency = row.get("completion_tokens"), row.get("latency_s")
        raw = None if tokens is None or not latency else tokens / (latency * time_scale)
    else:
        value = row.get({"ttft": "ttft_s", "tpot": "tpot_s", "latency": "latency_s"}[metric])
        raw = None if value is None else value * time_scale
    return raw if raw is not None and math.isfinite(raw) else None


def quantile(values: Iterable[Optional[float]], q: float) -> Optional[float]:
    """The ``q`` quantile (0..1) of the values that are not None, interpolated linearly."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def level_values(
    limits: Sequence[Limit], rows: Sequence[Mapping[str, Any]], time_scale: float = 1.0
) -> list[Optional[float]]:
    """Each limit's percentile value over one level's requests, at real speed."""
    return [quantile((request_value(lim.metric, r, time_scale) for r in rows), lim.percentile / 100) for lim in limits]


def meets(limits: Sequence[Limit], values: Sequence[Optional[float]]) -> bool:
    """A level meets an SLO when every limit holds at its percentile value."""
    return all(holds(lim, v) for lim, v in zip(limits, values))


def level_meets(limits: Sequence[Limit], rows: Sequence[Mapping[str, Any]], time_scale: float = 1.0) -> bool:
    """Whether one level's requests (requests-table rows) meet the SLO of ``limits``."""
    return meets(limits, level_values(limits, rows, time_scale))
