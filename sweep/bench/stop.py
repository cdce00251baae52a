"""When a closed-loop level has measured enough: the precision of its output throughput, as pure
functions of what its completed requests recorded (no I/O, no clocks).

The quantity is the level's steady output throughput: tokens delivered per second while all C
requests are in flight. Two things make it uncertain, and both are counted:

- **Over time** (the server's speed drifting, steps of uneven cost, requests finishing in waves).
  The token stream of the completed requests (every chunk's arrival and token count) is cut into
  consecutive time windows, after the warm-up and up to the *horizon* (the earliest send of a
  request still in flight: before it every token belongs to a completed request, so the stream
  there is fully known). Each window's tokens / width is one batch mean. Neighbouring windows are
  correlated (the same requests run through both), which would make a naive interval too narrow:
  batches are merged pairwise while the lag-1 autocorrelation of the batch means is significant
  (the classic batch-means test), the standard error of what remains is widened by the AR(1)
  factor sqrt((1 + r) / (1 - r)) of the lag-1 correlation r still left, and the interval is
  Student's t; with fewer than ``_MIN_BATCHES`` batches left there is no interval. (Checked by
  tests/bench/test_stop.py: 95 % intervals hold the true rate about 95 % of the time for
  independent windows and about 90 % for windows correlated over twice their width, where the
  naive interval holds it 75 % of the time.)
- **Over requests** (prompts differ: a drafter accepts more on one than another). Each completed
  request's own decode speed (tokens after the first / time after the first) is one sample; the
  relative standard error of their mean is the spread a different draw of prompts would give.

The relative half-widths of the two intervals are added in quadrature: the estimate is only called
precise when both sources are small. The warm-up is the first wave's ramp: everything before the
last first token of the level's first C requests (connection set-up, the burst of C prefills).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Optional, Sequence

import numpy as np

_INITIAL_BATCHES = 32  # time windows the known stream is cut into before merging
_MIN_BATCHES = 8  # fewer than this after merging: no interval
_CHUNKS_PER_BATCH = 2  # a window spans at least this many chunk intervals of one request


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (exact for 1 and 2 degrees of freedom, Abramowitz & Stegun 26.7.5
    above: within 0.3 % of the exact value from 3 degrees of freedom on)."""
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@dataclass(frozen=True)
class Precision:
    """What the stop rule knows about a level's throughput at one moment."""

    rate: Optional[float]  # steady output tok/s (batch mean over the windows), None without data
    half_width: Optional[float]  # relative half-width of its interval; None: too little to tell
    batches: int  # time windows left after merging (0: none)
    requests: int  # completed requests whose decode speed entered the estimate
    time_half_width: Optional[float] = None  # the two parts of half_width
    request_half_width: Optional[float] = None

    def within(self, precision: float) -> bool:
        return self.half_width is not None and self.half_width <= precision


def _lag1(values: np.ndarray) -> float:
    """Lag-1 autocorrelation of a series (0 for a constant one)."""
    d = values - values.mean()
    denom = float(d @ d)
    return float(d[1:] @ d[:-1]) / denom if denom > 0 else 0.0


def token_counts(
    edges: np.ndarray, spikes: tuple[np.ndarray, np.ndarray], segments: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> np.ndarray:
    """Tokens delivered in each window between consecutive ``edges``.

    A chunk of k tokens that arrived at t, the previous chunk of its request at t', was produced
    over (t', t]: its tokens are spread evenly over that interval (``segments``: start, end,
    tokens), so a stream that delivers every few decode steps, or many requests in lockstep, is
    not seen as bursts. A request's first chunk (its prefill's token) counts at its arrival
    (``spikes``: time, tokens).
    """
    counts = np.histogram(spikes[0], bins=edges, weights=spikes[1])[0] if spikes[0].size else np.zeros(edges.size - 1)
    a, b, k = segments
    if a.size:
        rate = k / (b - a)
        t = np.concatenate([a, b])
        order = np.argsort(t, kind="stable")
        t = t[order]
        total = np.cumsum(np.concatenate([rate, -rate])[order])  # the summed rate on [t[i], t[i+1])
        cum = np.concatenate([[0.0], np.cumsum(total[:-1] * np.diff(t))])  # tokens produced by t[i]
        counts = counts + np.diff(np.interp(edges, t, cum))
    return counts


def batch_means(
    spikes: tuple[np.ndarray, np.ndarray],
    segments: tuple[np.ndarray, np.ndarray, np.ndarray],
    start: float,
    end: float,
    *,
    confidence: float,
    min_width: float = 0.0,
    initial: int = _INITIAL_BATCHES,
    minimum: int = _MIN_BATCHES,
) -> tuple[Optional[float], Optional[float], int]:
    """(mean rate, relative half-width, batches) of the token stream over ``[start, end)``.

    The window is cut into ``initial`` batches (fewer when a batch would be narrower than
    ``min_width``), merged pairwise while the lag-1 autocorrelation of the batch means exceeds its
    one-sided bound at ``confidence`` (z / sqrt(k)); (rate, None, k) when fewer than ``minimum``
    remain; (None, None, 0) for an empty window.
    """
    span = end - start
    if span <= 0 or (spikes[0].size == 0 and segments[0].size == 0):
        return None, None, 0
    k = initial if min_width <= 0 else min(initial, int(span // min_width))
    if k < minimum:
        rate = float(token_counts(np.array([start, end]), spikes, segments)[0]) / span
        return (rate if rate > 0 else None), None, 0
    # k is a power-of-two multiple of the minimum, so that every merge halves it exactly
    k = minimum * 2 ** int(math.log2(k / minimum))
    rates = token_counts(np.linspace(start, end, k + 1), spikes, segments) / (span / k)
    z = NormalDist().inv_cdf(confidence)
    while rates.size >= 2 * minimum and _lag1(rates) > z / math.sqrt(rates.size):
        rates = rates.reshape(-1, 2).mean(axis=1)
    mean = float(rates.mean())
    if mean <= 0:
        return None, None, int(rates.size)
    se = float(rates.std(ddof=1)) / math.sqrt(rates.size)
    rho = min(max(_lag1(rates), 0.0), 0.9)  # what correlation is left: the AR(1) variance factor
    se *= math.sqrt((1 + rho) / (1 - rho))
    return mean, t_quantile((1 + confidence) / 2, rates.size - 1) * se / mean, int(rates.size)


def _request_spread(speeds: Sequence[float], *, confidence: float) -> Optional[float]:
    """Relative half-width of the mean of per-request decode speeds (None under 2 requests)."""
    s = np.asarray([v for v in speeds if v is not None and v > 0], dtype=float)
    if s.size < 2:
        return None
    return t_quantile((1 + confidence) / 2, s.size - 1) * float(s.std(ddof=1)) / math.sqrt(s.size) / float(s.mean())


def _decode_speed(
    completion_tokens: Optional[int], latency_s: Optional[float], ttft_s: Optional[float]
) -> Optional[float]:
    """A request's decode speed: tokens after the first over the time after the first."""
    if not completion_tokens or completion_tokens < 2 or latency_s is None or ttft_s is None:
        return None
    decode = latency_s - ttft_s
    return (completion_tokens - 1) / decode if decode > 0 else None


def precision(
    spikes: tuple[np.ndarray, np.ndarray],
    segments: tuple[np.ndarray, np.ndarray, np.ndarray],
    start: float,
    end: float,
    speeds: Sequence[float],
    *,
    confidence: float,
    chunk_gap_s: float = 0.0,
) -> Precision:
    """The level's throughput estimate over ``[start, end)`` (see the module docstring and
    ``token_counts`` for ``spikes`` and ``segments``). ``chunk_gap_s``: the typical time between
    two chunks of one request; windows are at least ``_CHUNKS_PER_BATCH`` of them wide."""
    rate, time_hw, k = batch_means(
        spikes, segments, start, end, confidence=confidence, min_width=_CHUNKS_PER_BATCH * chunk_gap_s
    )
    req_hw = _request_spread(speeds, confidence=confidence)
    n = sum(1 for v in speeds if v is not None and v > 0)
    hw = math.hypot(time_hw, req_hw) if time_hw is not None and req_hw is not None else None
    return Precision(rate, hw, k, n, time_hw, req_hw)


def stream_of(parts: Sequence[tuple[np.ndarray, np.ndarray]]):
    """Requests' (chunk times, chunk tokens) -> the ``spikes`` and ``segments`` of ``token_counts``."""
    first_t = np.array([t[0] for t, _ in parts], dtype=float)
    first_k = np.array([k[0] for _, k in parts], dtype=float)
    a = np.concatenate([t[:-1] for t, _ in parts])
    b = np.concatenate([t[1:] for t, _ in parts])
    k = np.concatenate([k[1:] for _, k in parts])
    keep = b > a  # two chunks at the same instant: the later one's tokens count as a spike
    spikes = (np.concatenate([first_t, b[~keep]]), np.concatenate([first_k, k[~keep]]))
    return spikes, (a[keep], b[keep], k[keep])


class LevelMonitor:
    """Follows one closed-loop level as its requests are sent and complete, and says when the
    rule is met. The load generator calls ``sent`` and ``completed``; ``estimate`` is pure over
    what it was told. Times are ``time.perf_counter()`` seconds (the records' ``start_mono``)."""

    def __init__(
        self,
        concurrency: int,
        planned: int,
        *,
        confidence: float = 0.95,
        precision_goal: Optional[float] = None,
        min_requests: Optional[int] = None,
    ):
        self.concurrency = concurrency
        self.planned = planned
        self.confidence = confidence
        self.goal = precision_goal
        first_wave = min(concurrency, planned)
        self.min_requests = min_requests if min_requests is not None else max(first_wave, 2)
        self._first_wave = first_wave
        self._in_flight: dict[int, float] = {}  # seq -> send time
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []  # per request: chunk times, tokens
        self._speeds: list[float] = []
        self._gaps: list[float] = []
        self._first_tokens: dict[int, float] = {}  # seq < C -> time of its first token
        self._cache: Optional[tuple] = None
        self.completed_n = 0
        self.last_send = 0.0
        self.last_end = 0.0
        self._checked_horizon = -math.inf
        self.decision: Optional[Precision] = None  # the estimate that stopped the level

    def sent(self, seq: int, at: float) -> None:
        self._in_flight[seq] = at
        self.last_send = max(self.last_send, at)

    def completed(self, seq: int, rec) -> None:
        """``rec``: the request's ``RequestRecord`` (failed ones count as completed, add no tokens)."""
        self._in_flight.pop(seq, None)
        self.completed_n += 1
        self.last_end = max(self.last_end, rec.end_mono)
        if seq < self._first_wave:
            ttft = rec.ttft_s if rec.ok and rec.ttft_s is not None else rec.latency_s or 0.0
            self._first_tokens[seq] = rec.start_mono + ttft
        if not rec.ok or not rec.chunk_times_s:
            return
        times = rec.start_mono + np.asarray(rec.chunk_times_s, dtype=float)
        self._parts.append((times, np.asarray(rec.chunk_tokens, dtype=float)))
        self._cache = None
        if times.size >= 2:
            self._gaps.append(float(np.median(np.diff(times))))
        speed = _decode_speed(rec.completion_tokens, rec.latency_s, rec.ttft_s)
        if speed is not None:
            self._speeds.append(speed)

    @property
    def warmup_end(self) -> Optional[float]:
        """The last first token of the first wave; None until every first-wave request is done."""
        if len(self._first_tokens) < self._first_wave:
            return None
        return max(self._first_tokens.values())

    def horizon(self) -> float:
        """Until when the token stream is fully known: the earliest send still in flight."""
        return min(self._in_flight.values()) if self._in_flight else self.last_end

    def estimate(self, end: Optional[float] = None) -> Precision:
        """The estimate over [warm-up end, ``end``] (default: the horizon)."""
        start = self.warmup_end
        end = self.horizon() if end is None else end
        if start is None or not self._parts:
            return Precision(None, None, 0, len(self._speeds))
        if self._cache is None:
            self._cache = stream_of(self._parts)
        spikes, segments = self._cache
        gap = float(np.median(self._gaps)) if self._gaps else 0.0
        return precision(spikes, segments, start, end, self._speeds, confidence=self.confidence, chunk_gap_s=gap)

    def should_stop(self) -> bool:
        """True once the rule is met (and remembered in ``decision``). Recomputes only when the
        horizon has moved by a twentieth of the measured span since the last look."""
        if self.goal is None or self.decision is not None:
            return self.decision is not None
        if self.completed_n < self.min_requests or self.completed_n >= self.planned:
            return False
        start, horizon = self.warmup_end, self.horizon()
        if start is None or horizon <= start:
            return False
        if horizon - self._checked_horizon < (horizon - start) / 20:
            return False
        self._checked_horizon = horizon
        est = self.estimate(horizon)
        if est.within(self.goal):
            self.decision = est
            return True
        return False

    def final(self) -> Precision:
        """After the level: the decision that stopped it, else the estimate over everything
        measured at full concurrency (up to the last send: after it the loop drains)."""
        if self.decision is not None:
            return self.decision
        return self.estimate(min(self.last_send, self.last_end) if self.completed_n else None)
