"""The benchmark's figures, as pure functions of request records (no I/O, no clocks).

Definitions (the same as SGLang's ``bench_serving``, so numbers compare with it):

- TTFT: send to the first chunk that carries a token.
- TPOT: ``(latency - ttft) / (completion_tokens - 1)``; undefined for one token or no TTFT.
- ITL: the gap between two token-carrying chunks, spread evenly over the k tokens of the later
  chunk (k values of gap/k), so a speculative step that delivers 4 tokens at once counts as 4
  short latencies, not one long one. The first chunk's tokens have no ITL (that is TTFT).
- Output throughput: completion tokens of the ok requests over the level's wall time (first send
  to last completion, failed requests included in the window).
- Achieved concurrency: requests in flight, time-weighted over the wall time
  (= sum of request durations / wall time), so a level the server capped or that ran dry shows.
- Accept length of a group of requests: total tokens / total verify steps (what the server's own
  ``avg_spec_accept_length`` computes); when a server reports no verify counts, the token-weighted
  mean of the per-request values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional

import numpy as np

from sweep.bench.client import RequestRecord


def quantile(values: Sequence[float] | np.ndarray, q: float) -> Optional[float]:
    """The q-th percentile (0-100, linear interpolation like numpy/bench_serving); None if empty."""
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def mean(values: Sequence[float]) -> Optional[float]:
    return float(np.mean(values)) if len(values) else None


def itl_values(chunk_times: Sequence[float], chunk_tokens: Sequence[int]) -> np.ndarray:
    """Inter-token latencies of one request: each chunk's gap spread over its tokens."""
    if len(chunk_times) < 2:
        return np.empty(0)
    times = np.asarray(chunk_times, dtype=float)
    tokens = np.asarray(chunk_tokens[1:], dtype=np.int64)
    gaps = np.diff(times) / tokens
    return np.repeat(gaps, tokens)


def tpot(latency_s: Optional[float], ttft_s: Optional[float], completion_tokens: Optional[int]) -> Optional[float]:
    """Time per output token after the first; None when it is undefined."""
    if latency_s is None or ttft_s is None or not completion_tokens or completion_tokens < 2:
        return None
    return (latency_s - ttft_s) / (completion_tokens - 1)


def tok_per_s(completion_tokens: Optional[int], latency_s: Optional[float]) -> Optional[float]:
    if not completion_tokens or not latency_s or latency_s <= 0:
        return None
    return completion_tokens / latency_s


def achieved_concurrency(intervals: Iterable[tuple[float, float]], start: float, end: float) -> Optional[float]:
    """Time-weighted mean of requests in flight over ``[start, end]``.

    The integral of the in-flight count over the window is the sum of each request's time inside
    it, so no event sweep is needed.
    """
    wall = end - start
    if wall <= 0:
        return None
    busy = sum(max(0.0, min(e, end) - max(s, start)) for s, e in intervals)
    return busy / wall


def accept_length(records: Iterable[RequestRecord]) -> Optional[float]:
    """Accept length over ok requests: tokens / verify steps, else token-weighted mean."""
    tokens = steps = 0
    weighted = weight = 0.0
    for r in records:
        if not r.ok or not r.completion_tokens:
            continue
        if r.spec_verify_ct:
            tokens += r.completion_tokens
            steps += r.spec_verify_ct
        if r.accept_length is not None:
            weighted += r.accept_length * r.completion_tokens
            weight += r.completion_tokens
    if steps:
        return tokens / steps
    return weighted / weight if weight else None


def request_figures(r: RequestRecord) -> dict:
    """The derived per-request columns of the ``requests`` table."""
    itl = itl_values(r.chunk_times_s, r.chunk_tokens)
    return {
        "tpot_s": tpot(r.latency_s, r.ttft_s, r.completion_tokens) if r.ok else None,
        "itl_p50_s": quantile(itl, 50),
        "itl_p99_s": quantile(itl, 99),
    }


def single_overall(records: Sequence[RequestRecord]) -> dict:
    """Single-stream figures over all measured runs: tokens / seconds of the ok runs."""
    ok = [r for r in records if r.ok and r.latency_s]
    tokens = sum(r.completion_tokens or 0 for r in ok)
    seconds = sum(r.latency_s or 0.0 for r in ok)
    return {
        "runs": len(records),
        "ok": len(ok),
        "completion_tokens": tokens,
        "seconds": seconds,
        "tok_per_s": tokens / seconds if seconds > 0 else None,
        "accept_length": accept_length(ok),
    }


def level_figures(records: Sequence[RequestRecord]) -> dict:
    """Figures of one concurrency level (the ``levels`` columns that depend on requests only)."""
    ok = [r for r in records if r.ok]
    out: dict = {"requests": len(records), "ok": len(ok), "failed": len(records) - len(ok)}
    if records:
        start = min(r.start_mono for r in records)
        end = max(r.end_mono for r in records)
        wall = end - start
    else:
        start = end = wall = 0.0
    out["wall_s"] = wall if records else None
    tokens = sum(r.completion_tokens or 0 for r in ok)
    out["output_throughput"] = tokens / wall if wall > 0 else None
    out["request_throughput"] = len(ok) / wall if wall > 0 else None
    per_req = [x for r in ok if (x := tok_per_s(r.completion_tokens, r.latency_s)) is not None]
    out["per_request_tok_s"] = mean(per_req)
    lat = [r.latency_s for r in ok if r.latency_s is not None]
    out["latency_mean_s"] = mean(lat)
    out["latency_p50_s"] = quantile(lat, 50)
    out["latency_p90_s"] = quantile(lat, 90)
    out["latency_p99_s"] = quantile(lat, 99)
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    out["ttft_p50_s"] = quantile(ttft, 50)
    out["ttft_p99_s"] = quantile(ttft, 99)
    tp = [x for r in ok if (x := tpot(r.latency_s, r.ttft_s, r.completion_tokens)) is not None]
    out["tpot_p50_s"] = quantile(tp, 50)
    out["tpot_p99_s"] = quantile(tp, 99)
    itls = [itl_values(r.chunk_times_s, r.chunk_tokens) for r in ok]
    itl = np.concatenate(itls) if itls else np.empty(0)
    out["itl_p50_s"] = quantile(itl, 50)
    out["itl_p99_s"] = quantile(itl, 99)
    out["achieved_concurrency"] = (
        achieved_concurrency(((r.start_mono, r.end_mono) for r in records), start, end) if records else None
    )
    out["accept_length_requests"] = accept_length(ok)
    return out
