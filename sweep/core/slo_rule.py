"""An SLO, its grammar and its verdict on one concurrency level: the one type (``SLO``: a name and
its ``Limit``s), parser (``parse_slo``: ``[NAME:] LIMIT[,LIMIT...]``, as ``report --slo`` takes it;
``from_settings``: the experiment's ``benchmark.slo`` entry, ``sweep.core.settings.SLOSettings``) and
rule that the host's refinement (``sweep.bench.refine``) and the report (``sweep.analysis.slo``) use.

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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from sweep.core.errors import ConfigError

if TYPE_CHECKING:
    from sweep.core.settings import SLOSettings


@dataclass(frozen=True)
class _Metric:
    name: str
    title: str
    upper: bool  # a limit is an upper bound (times) or a lower bound (speeds)
    unit: str  # "s" or "tok/s"


METRICS = {
    "ttft": _Metric("ttft", "TTFT", True, "s"),
    "tpot": _Metric("tpot", "TPOT", True, "s"),
    "latency": _Metric("latency", "latency", True, "s"),
    "tok_s": _Metric("tok_s", "per-user speed", False, "tok/s"),
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


def limits_of(s: SLOSettings) -> tuple[Limit, ...]:
    """The limits of an ``SLOSettings`` (its percentile applies to every limit; tok/s at the mirrored
    percentile, so that ``percentile`` % of requests are at least that fast)."""
    out = []
    for metric, value in (("ttft", s.ttft_s), ("tpot", s.tpot_s), ("tok_s", s.tok_s)):
        if value is not None:
            pct = s.percentile if METRICS[metric].upper else 100 - s.percentile
            out.append(Limit(metric, pct, float(value)))
    return tuple(out)


# --- an SLO: its limits, named; the command line's grammar and the experiment's section -------


_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_SPEED_UNITS = {"": 1.0, "tok/s": 1.0, "tps": 1.0}


@dataclass(frozen=True)
class SLO:
    """A service-level objective: its name and its limits, all of which a level must meet (the one
    type, however it was given: ``parse_slo`` from text, ``from_settings`` from the experiment)."""

    name: str
    limits: tuple[Limit, ...]

    def text(self) -> str:
        return ",".join(limit.text() for limit in self.limits)

    def describe(self) -> str:
        return "; ".join(limit.describe() for limit in self.limits)


_LIMIT_RE = re.compile(
    r"^(?P<metric>[a-z_]+?)_p(?P<pct>\d+(?:\.\d+)?)\s*(?P<op><=|>=|<|>|=)\s*"
    r"(?P<value>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)\s*(?P<unit>[a-zµ/]*)$"
)


def parse_limit(text: str, *, where: str = "--slo") -> Limit:
    """One limit, e.g. ``ttft_p90<=2s`` (see the module docstring)."""
    raw = text.strip()
    m = _LIMIT_RE.match(raw.lower())
    if not m:
        raise ConfigError(
            f"{where}: {raw!r} is not a limit",
            fix="write METRIC_pPCT<=VALUE (or >= for tok_s), e.g. ttft_p90<=2s, tpot_p90<=50ms, "
            f"tok_s_p10>=20; metrics: {', '.join(METRICS)}",
        )
    name, op, unit = m["metric"], m["op"], m["unit"]
    if name not in METRICS:
        raise ConfigError(f"{where}: {raw!r}: unknown metric {name!r}", fix=f"use one of {', '.join(METRICS)}")
    metric = METRICS[name]
    pct = float(m["pct"])
    if not 0 < pct <= 100:
        raise ConfigError(f"{where}: {raw!r}: percentile p{m['pct']} is out of range", fix="use p1 to p100, e.g. p90")
    if op == "=":
        raise ConfigError(f"{where}: {raw!r}: '=' is not a limit", fix=f"use {'<=' if metric.upper else '>='}")
    if metric.upper != op.startswith("<"):
        want = "<=" if metric.upper else ">="
        kind = "a time: its limit is an upper bound" if metric.upper else "a speed: its limit is a lower bound"
        raise ConfigError(
            f"{where}: {raw!r}: {name} is {kind}", fix=f"write {name}_p{m['pct']}{want}{m['value']}{unit}"
        )
    units = _TIME_UNITS if metric.upper else _SPEED_UNITS
    if metric.upper and not unit:
        raise ConfigError(
            f"{where}: {raw!r}: {name} needs a unit", fix=f"e.g. {name}_p{m['pct']}<={m['value']}s or ...ms"
        )
    if unit not in units:
        raise ConfigError(
            f"{where}: {raw!r}: unit {unit!r} of {name} is not {' or '.join(repr(u) for u in units if u)}",
            fix="times in s, ms or us (e.g. 50ms); speeds in tok/s or no unit",
        )
    value = float(m["value"]) * units[unit]
    if value <= 0:
        raise ConfigError(f"{where}: {raw!r}: the limit must be positive", fix="e.g. ttft_p90<=2s")
    return Limit(name, pct, value)


def parse_slo(text: str, *, where: str = "--slo") -> SLO:
    """``[NAME:] LIMIT[,LIMIT...]`` -> SLO; the name defaults to the limits as written."""
    body = text.strip()
    name = ""
    if ":" in body:
        name, body = (part.strip() for part in body.split(":", 1))
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
            raise ConfigError(
                f"{where}: SLO name {name!r} must be letters, digits, '_', '-', '.' or '+'",
                fix="e.g. --slo 'chat: ttft_p90<=2s,tpot_p90<=50ms'",
            )
    parts = [p for p in (x.strip() for x in body.split(",")) if p]
    if not parts:
        raise ConfigError(f"{where}: {text!r} has no limit", fix="e.g. --slo 'ttft_p90<=2s,tpot_p90<=50ms'")
    limits = tuple(parse_limit(p, where=where) for p in parts)
    seen = [(limit.metric, limit.percentile) for limit in limits]
    dupes = sorted({f"{m}_p{p:g}" for m, p in seen if seen.count((m, p)) > 1})
    if dupes:
        raise ConfigError(f"{where}: {text!r} limits {', '.join(dupes)} twice", fix="give each limit once")
    slo = SLO(name, limits)
    return slo if name else SLO(slo.text(), limits)


def from_settings(s) -> SLO:
    """An ``SLOSettings`` of the experiment -> SLO (its percentile applies to every limit; tok/s
    at the mirrored percentile, so that ``percentile`` % of requests are at least that fast)."""
    limits = limits_of(s)
    slo = SLO(s.name, tuple(limits))
    return slo if s.name else SLO(slo.text(), slo.limits)


def holds(limit: Limit, value: float | None) -> bool:
    """Whether a level whose percentile value of ``limit``'s metric is ``value`` meets it (None:
    undefined for every request of the level, which breaks no limit)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return value <= limit.value if limit.upper else value >= limit.value


def _request_value(metric: str, row: Mapping[str, Any], time_scale: float = 1.0) -> Optional[float]:
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
    return [quantile((_request_value(lim.metric, r, time_scale) for r in rows), lim.percentile / 100) for lim in limits]


def meets(limits: Sequence[Limit], values: Sequence[Optional[float]]) -> bool:
    """A level meets an SLO when every limit holds at its percentile value."""
    return all(holds(lim, v) for lim, v in zip(limits, values))


def level_meets(limits: Sequence[Limit], rows: Sequence[Mapping[str, Any]], time_scale: float = 1.0) -> bool:
    """Whether one level's requests (requests-table rows) meet the SLO of ``limits``."""
    return meets(limits, level_values(limits, rows, time_scale))
