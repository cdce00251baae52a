"""Stopping a level once it has measured enough: the statistics (honest intervals for correlated
batch means), the monitor's view of what is known, and the closed loop that stops, cancels what is
in flight and says so, against a small real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from sweep.bench import stop as st
from sweep.bench.client import Clients, RequestRecord
from sweep.bench.load import Notifier, RequestOptions, closed_loop_until
from sweep.bench.prompts import load_prompts
from sweep.core.errors import ConfigError
from sweep.core.settings import StopSettings
from tests.bench.stream_stub import Streamer, serving


def test_t_quantiles():
    for df, expected in ((1, 12.706), (2, 4.303), (3, 3.182), (7, 2.365), (31, 2.040), (100, 1.984)):
        assert math.isclose(st.t_quantile(0.975, df), expected, rel_tol=2e-3)


def unit_segments(rates: np.ndarray):
    """A stream producing rates[j] tokens during [j, j+1)."""
    a = np.arange(rates.size, dtype=float)
    return (np.array([]), np.array([])), (a, a + 1, rates.astype(float))


def test_token_counts_spread_a_chunk_over_the_time_it_took():
    # one request: first token at 1.0, then 4 tokens arriving at 3.0 (produced over (1, 3])
    spikes, segments = st.stream_of([(np.array([1.0, 3.0]), np.array([1.0, 4.0]))])
    counts = st.token_counts(np.array([0.0, 1.5, 2.0, 4.0]), spikes, segments)
    assert np.allclose(counts, [1 + 1.0, 1.0, 2.0]) and math.isclose(counts.sum(), 5)


def ar1(rng, n: int, rho: float) -> np.ndarray:
    e = np.empty(n)
    x = rng.normal()
    for i in range(n):
        x = rho * x + math.sqrt(1 - rho**2) * rng.normal()
        e[i] = x
    return e


def coverage(rho: float, reps: int = 200, n: int = 1024, seed: int = 7) -> tuple[float, float]:
    """How often the interval holds the true mean rate (100): batch means with merging, and the
    naive interval over 32 batches that ignores their correlation."""
    rng = np.random.default_rng(seed)
    hit = naive = 0
    for _ in range(reps):
        spikes, segments = unit_segments(100 + 5 * ar1(rng, n, rho))
        mean, hw, _ = st.batch_means(spikes, segments, 0.0, float(n), confidence=0.95)
        hit += hw is not None and abs(mean - 100) <= hw * mean
        rates = st.token_counts(np.linspace(0, n, 33), spikes, segments) / (n / 32)
        naive += abs(rates.mean() - 100) <= st.t_quantile(0.975, 31) * rates.std(ddof=1) / math.sqrt(32)
    return hit / reps, naive / reps


def test_intervals_are_honest_for_independent_and_for_correlated_samples():
    independent, _ = coverage(0.0)
    assert 0.9 <= independent <= 0.99
    merged, naive = coverage(0.97)  # correlated over ~65 samples: longer than a naive batch (32)
    assert merged >= 0.86 and naive <= 0.8 and merged > naive + 0.08


def test_a_steady_stream_is_precise_and_a_short_one_has_no_interval():
    spikes, segments = unit_segments(np.full(256, 50.0))
    mean, hw, k = st.batch_means(spikes, segments, 0.0, 256.0, confidence=0.95)
    assert math.isclose(mean, 50) and hw < 1e-9 and k == 32
    # windows may not be narrower than min_width: 256 s at 64 s per window is 4 windows, too few
    assert st.batch_means(spikes, segments, 0.0, 256.0, confidence=0.95, min_width=64)[1:] == (None, 0)


def test_the_spread_over_requests_counts_too():
    spikes, segments = unit_segments(np.full(256, 50.0))
    steady = st.precision(spikes, segments, 0.0, 256.0, [10.0, 10.0, 10.0], confidence=0.95)
    assert steady.within(0.001)
    mixed = st.precision(spikes, segments, 0.0, 256.0, [8.0, 12.0, 10.0, 9.0, 11.0], confidence=0.95)
    assert not mixed.within(0.1) and math.isclose(mixed.half_width, mixed.request_half_width, rel_tol=1e-6)
    assert st.precision(spikes, segments, 0.0, 256.0, [10.0], confidence=0.95).half_width is None


def record(start: float, ttft: float, gap: float, chunks: int, tokens: int = 2) -> RequestRecord:
    times = [ttft + i * gap for i in range(chunks)]
    return RequestRecord(
        start_at=start,
        start_mono=start,
        latency_s=times[-1],
        ttft_s=ttft,
        completion_tokens=tokens * chunks,
        chunk_times_s=times,
        chunk_tokens=[tokens] * chunks,
        ok=True,
    )


def test_the_monitor_knows_the_stream_up_to_the_earliest_request_in_flight():
    m = st.LevelMonitor(2, 10, precision_goal=0.05)
    for seq in (0, 1):
        m.sent(seq, 0.0)
    m.completed(0, record(0.0, 0.1, 0.01, 100))
    assert m.warmup_end is None and not m.should_stop()  # request 1 of the first wave still out
    m.sent(2, 1.1)
    m.completed(1, record(0.0, 0.2, 0.01, 100))
    assert math.isclose(m.warmup_end, 0.2)  # the last first token of the first wave
    assert math.isclose(m.horizon(), 1.1)  # request 2, sent at 1.1, is still in flight
    assert m.should_stop() and m.decision.within(0.05) and m.decision.batches >= 8
    # min_requests above what completed: no stop yet
    m2 = st.LevelMonitor(2, 10, precision_goal=0.05, min_requests=5)
    for seq in (0, 1):
        m2.sent(seq, 0.0)
        m2.completed(seq, record(0.0, 0.1, 0.01, 100))
    assert not m2.should_stop()


def test_stop_settings_are_checked():
    for kw, culprit in (
        ({"precision": 0}, "precision"),
        ({"confidence": 1.0}, "confidence"),
        ({"min_requests": 0}, "min_requests"),
    ):
        with pytest.raises(ConfigError, match=f"stop.{culprit}"):
            StopSettings(**kw)


# --- the closed loop against a real HTTP server ----------------------------------------------------


async def _level(stop: StopSettings | None, requests: int, seen: list):
    server = Streamer(0.004)
    async with serving(server) as url:
        async with Clients(10) as clients:
            opts = RequestOptions(url=url, api="generate", prompts=load_prompts("coding"))
            run = await closed_loop_until(
                clients, opts, concurrency=4, requests=requests, max_tokens=40, notify=Notifier(seen.append), stop=stop
            )
        deadline = time.monotonic() + 10
        while server.in_flight and time.monotonic() < deadline:  # the cancelled streams end server-side
            await asyncio.sleep(0.01)
        return server, run


def test_a_level_stops_once_precise_and_cancels_what_is_in_flight():
    seen: list = []
    # a loose precision: the test is about the mechanics (a busy CI machine jitters the stream)
    server, run = asyncio.run(_level(StopSettings(precision=0.25), 400, seen))
    assert run.stopped_early and len(run.sent) < 400 and run.planned == 400
    assert 0 <= run.cancelled <= 4 and all(s.record.ok for s in run.sent)
    assert len(run.sent) >= 4  # at least the first wave (min_requests = C)
    assert run.precision.within(0.25) and run.precision.rate > 0
    assert server.in_flight == 0  # the cancelled requests were closed, the server stopped serving them
    assert seen[-1].stopped is True and seen[-1].of == 400


def test_without_a_rule_or_with_min_requests_above_the_count_every_request_is_sent():
    for stop in (None, StopSettings(precision=0.25, min_requests=24)):
        server, run = asyncio.run(_level(stop, 24, []))
        assert not run.stopped_early and len(run.sent) == 24 and run.cancelled == 0 and server.served == 24
        # the precision is estimated either way (first wave's ramp excluded, up to the last send)
        assert run.precision.rate is not None


@pytest.mark.slow  # starts the fake SGLang server (~3 s)
def test_the_levels_table_records_how_each_level_ended(fake_sglang):
    from sweep.bench.runner import run
    from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings

    server = fake_sglang("--enable-metrics", speed=20.0)

    def settings(stop):
        return BenchSettings(
            single_stream=SingleStreamSettings(runs=0, warmup=0),
            concurrency=ConcurrencySettings(levels=[1, 8], rounds=6, max_tokens=64, stop=stop),
        )

    fixed = run(server.url, settings(None)).levels.to_pylist()
    assert [(r["planned_requests"], r["requests"], r["stopped_early"], r["stop_cancelled"]) for r in fixed] == [
        (6, 6, False, 0),
        (48, 48, False, 0),
    ]
    assert all(
        r["steady_throughput"] and r["throughput_precision"] is not None and r["precision_batches"] >= 8 for r in fixed
    )
    result = run(server.url, settings(StopSettings(precision=0.5)))  # loose: a busy machine jitters
    stopped = result.levels.to_pylist()
    assert all(r["stopped_early"] and r["requests"] < r["planned_requests"] for r in stopped)
    assert all(r["throughput_precision"] <= 0.5 for r in stopped)
    # the requests table holds what completed, not what was cancelled
    assert result.requests.num_rows == sum(r["requests"] for r in stopped)
    assert all(result.requests.column("ok").to_pylist())
