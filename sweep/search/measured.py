"""What a measured point tells the adaptive search, per level: its throughput, its per-user speed, its
time to first token, the noise it measured, and how far its drafts got (the share of verify steps
that accepted at least j drafts, for every position j). Pure: read from the point's result tables
(those a host returns, or those a results directory holds for a resumed sweep).

Level ``0`` is the single stream (one request at a time); the others are the closed-loop
concurrency levels. A chain drafter drafts the same tokens whatever its step count, so the point
with the most steps gives the accept length of every shorter chain: ``accept_length(k)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import polars as pl

SINGLE = 0  # the single stream's level key


@dataclass(frozen=True)
class Figures:
    """One level of one point."""

    throughput: float  # output tok/s of the level (the single stream: one request's tok/s)
    speed: float  # per-user tok/s (mean over requests of completion tokens / latency)
    ttft_s: float | None  # median time to first token
    noise: float  # relative half-width of the throughput's interval as measured (0 when unknown)
    reached: tuple[float, ...] = ()  # P(a verify accepted >= j drafts), j = 1.. (empty: no histogram)
    accept: float | None = None  # the accept length measured (tokens per verify), where the server said
    ttft_p99_s: float | None = None  # its 99th percentile

    def accept_length(self, positions: int) -> float | None:
        """Tokens per verify of a chain of ``positions`` drafts, from this level's acceptance
        (None past the positions it measured: a longer chain's later drafts were never seen)."""
        if positions <= 0:
            return 1.0
        if len(self.reached) < positions:
            return None
        return 1.0 + sum(self.reached[:positions])


@dataclass(frozen=True)
class Measured:
    point_id: str
    levels: dict[int, Figures] = field(default_factory=dict)


def reached(histogram: list[int], depth: int | None = None) -> tuple[float, ...]:
    """From SGLang's ``spec_accept_histogram`` summed over requests (entry k: verify steps that
    accepted exactly k drafts): P(accepted >= j) for j = 1..depth (the histogram's length - 1 when
    no depth is given; positions it never reached are 0)."""
    total = sum(histogram)
    if total <= 0:
        return ()
    n = (len(histogram) - 1) if depth is None else depth
    h = list(histogram) + [0] * max(0, n + 1 - len(histogram))
    return tuple(sum(h[j:]) / total for j in range(1, n + 1))


def _rel_half_width(values: list[float]) -> float:
    """1.96 standard errors over the mean, relative: the noise of a mean of these values."""
    vs = [v for v in values if v is not None and math.isfinite(v)]
    if len(vs) < 2:
        return 0.0
    mean = sum(vs) / len(vs)
    if mean <= 0:
        return 0.0
    var = sum((v - mean) ** 2 for v in vs) / (len(vs) - 1)
    return 1.96 * math.sqrt(var / len(vs)) / mean


def _histograms(requests: pl.DataFrame, depth: int | None) -> dict[int, tuple[float, ...]]:
    """Per level (0: the single stream), the acceptance per position of its ok requests."""
    out: dict[int, tuple[float, ...]] = {}
    if requests.is_empty() or "spec_accept_histogram" not in requests.columns:
        return out
    sums: dict[int, list[int]] = {}
    for row in requests.filter(pl.col("ok")).select("phase", "concurrency", "spec_accept_histogram").iter_rows():
        phase, c, hist = row
        if not hist or phase not in ("single", "level"):  # warmup; an open-loop level (phase rate, C 0)
            continue
        level = SINGLE if phase == "single" else int(c or 0)
        acc = sums.setdefault(level, [])
        acc += [0] * (len(hist) - len(acc))
        for k, n in enumerate(hist):
            acc[k] += int(n or 0)
    for level, h in sums.items():
        out[level] = reached(h, depth)
    return out


def from_tables(
    point_id: str, levels: pl.DataFrame, requests: pl.DataFrame, single: pl.DataFrame, depth: int | None = None
) -> Measured:
    """The point's figures per level from its ``levels``, ``requests`` and ``single_stream`` rows
    (other points' rows are left out). ``depth``: the most drafts one verify can accept (its steps)."""
    mine = pl.col("point_id") == point_id
    levels, requests, single = levels.filter(mine), requests.filter(mine), single.filter(mine)
    hist = _histograms(requests, depth)
    out: dict[int, Figures] = {}
    ok_single = single.filter(pl.col("ok") & pl.col("tok_per_s").is_not_null()) if not single.is_empty() else single
    if not ok_single.is_empty():
        tok_s = [float(v) for v in ok_single["tok_per_s"].to_list()]
        ttft = [float(v) for v in ok_single["ttft_s"].drop_nulls().to_list()]
        mean = sum(tok_s) / len(tok_s)
        accepts = [float(v) for v in ok_single["accept_length"].drop_nulls().to_list()]
        out[SINGLE] = Figures(
            mean,
            mean,
            sorted(ttft)[len(ttft) // 2] if ttft else None,
            _rel_half_width(tok_s),
            hist.get(SINGLE, ()),
            sum(accepts) / len(accepts) if accepts else None,
            max(ttft) if ttft else None,
        )
    for row in levels.iter_rows(named=True):
        thr, speed = row.get("output_throughput"), row.get("per_request_tok_s")
        c = int(row.get("concurrency") or 0)
        if not thr or not speed or not row.get("ok") or c <= 0:  # c 0: an open-loop level (no SINGLE's)
            continue
        noise = row.get("throughput_precision")
        if noise is None:  # no stop rule: the spread of the level's per-request speeds
            rs = requests.filter((pl.col("phase") == "level") & (pl.col("concurrency") == c) & pl.col("ok"))
            noise = _rel_half_width(
                [r / lat for r, lat in zip(rs["completion_tokens"].to_list(), rs["latency_s"].to_list()) if lat]
            )
        out[c] = Figures(
            float(thr),
            float(speed),
            row.get("ttft_p50_s"),
            float(noise or 0.0),
            hist.get(c, ()),
            row.get("accept_length_requests"),
            row.get("ttft_p99_s"),
        )
    return Measured(point_id, out)
