"""The figures' definitions, on hand-made records."""

from __future__ import annotations

import pytest

from sweep.bench import stats
from sweep.bench.client import RequestRecord


def rec(
    start: float,
    latency: float,
    tokens: int,
    *,
    ttft: float = 0.1,
    ok: bool = True,
    times: list[float] | None = None,
    chunk_tokens: list[int] | None = None,
    accept: float | None = None,
    verify: int | None = None,
) -> RequestRecord:
    return RequestRecord(
        start_at=1e9 + start,
        start_mono=start,
        latency_s=latency,
        ttft_s=ttft,
        completion_tokens=tokens,
        chunk_times_s=times or [],
        chunk_tokens=chunk_tokens or [],
        accept_length=accept,
        spec_verify_ct=verify,
        ok=ok,
        error=None if ok else "x",
    )


def test_itl_spreads_a_multi_token_chunk_over_its_tokens():
    itl = stats.itl_values([0.1, 0.3, 0.4], [1, 4, 1])
    assert itl.tolist() == pytest.approx([0.05, 0.05, 0.05, 0.05, 0.1])
    assert stats.itl_values([0.1], [3]).size == 0


def test_tpot_is_the_time_after_the_first_token_per_remaining_token():
    assert stats.tpot(1.1, 0.1, 11) == pytest.approx(0.1)
    assert stats.tpot(1.0, 0.1, 1) is None and stats.tpot(1.0, None, 5) is None


def test_quantile_matches_numpys_linear_interpolation():
    assert stats.quantile([1, 2, 3, 4], 50) == 2.5
    assert stats.quantile([], 50) is None


def test_achieved_concurrency_is_time_weighted():
    # two requests overlapping for half the window, one alone for the rest
    assert stats.achieved_concurrency([(0, 2), (1, 2)], 0, 2) == pytest.approx(1.5)
    # a request sticking out of the window only counts inside it
    assert stats.achieved_concurrency([(-1, 1)], 0, 2) == pytest.approx(0.5)


def test_accept_length_is_tokens_over_verify_steps_like_the_server():
    rs = [
        rec(0, 1, 100, verify=50, accept=2.0),
        rec(0, 1, 100, verify=25, accept=4.0),
        rec(0, 1, 100, verify=10, accept=10.0, ok=False),
    ]
    assert stats.accept_length(rs) == pytest.approx(200 / 75)
    rs = [rec(0, 1, 100, accept=2.0), rec(0, 1, 300, accept=4.0)]  # no verify counts: token-weighted
    assert stats.accept_length(rs) == pytest.approx(3.5)
    assert stats.accept_length([rec(0, 1, 10)]) is None


def test_level_figures_count_failures_and_use_ok_requests_for_speed():
    rs = [
        rec(0.0, 2.0, 100, times=[0.1, 1.0, 2.0], chunk_tokens=[1, 49, 50]),
        rec(0.0, 1.0, 100),
        rec(1.0, 1.0, 0, ok=False),
    ]
    f = stats.level_figures(rs)
    assert (f["requests"], f["ok"], f["failed"]) == (3, 2, 1)
    assert f["wall_s"] == pytest.approx(2.0)
    assert f["output_throughput"] == pytest.approx(100.0)  # 200 ok tokens / 2 s
    assert f["request_throughput"] == pytest.approx(1.0)
    assert f["per_request_tok_s"] == pytest.approx((50 + 100) / 2)
    assert f["latency_mean_s"] == pytest.approx(1.5)
    assert f["achieved_concurrency"] == pytest.approx(2.0)  # (2 + 1 + 1) s in flight / 2 s
    # ITL pooled over requests: 49 gaps of 0.9/49 s and 50 of 1.0/50 s -> the median is 0.02
    assert f["itl_p50_s"] == pytest.approx(0.02) and f["itl_p99_s"] == pytest.approx(0.02)
    assert f["tpot_p50_s"] is not None and f["ttft_p50_s"] == pytest.approx(0.1)


def test_empty_level_has_no_figures_but_does_not_fail():
    f = stats.level_figures([])
    assert f["requests"] == 0 and f["output_throughput"] is None and f["achieved_concurrency"] is None


def test_single_overall_is_total_tokens_over_total_time():
    s = stats.single_overall([rec(0, 2.0, 100), rec(0, 1.0, 100), rec(0, 1.0, 0, ok=False)])
    assert s["tok_per_s"] == pytest.approx(200 / 3) and (s["ok"], s["runs"]) == (2, 3)
