"""What a point's rows tell the adaptive search: open-loop levels (``benchmark.rates``, stored with
concurrency 0) are neither a concurrency level nor the single stream (level key 0)."""

from __future__ import annotations

import polars as pl

from sweep.search.measured import SINGLE, from_tables


def test_open_loop_rows_leave_the_single_stream_and_the_levels_alone():
    levels = pl.DataFrame(
        [
            dict(
                point_id="p",
                concurrency=8,
                ok=8,
                output_throughput=400.0,
                per_request_tok_s=50.0,
                throughput_precision=0.01,
                arrival=None,
            ),
            dict(
                point_id="p",
                concurrency=0,
                ok=30,
                output_throughput=900.0,
                per_request_tok_s=30.0,
                throughput_precision=0.2,
                arrival="poisson",
            ),
        ]
    )
    requests = pl.DataFrame(
        [
            dict(
                point_id="p",
                phase="single",
                concurrency=1,
                ok=True,
                spec_accept_histogram=[0, 4],
                completion_tokens=100,
                latency_s=1.0,
            ),
            dict(
                point_id="p",
                phase="level",
                concurrency=8,
                ok=True,
                spec_accept_histogram=[4, 0],
                completion_tokens=100,
                latency_s=2.0,
            ),
            dict(
                point_id="p",
                phase="rate",
                concurrency=0,
                ok=True,
                spec_accept_histogram=[9, 0],
                completion_tokens=100,
                latency_s=3.0,
            ),
        ]
    )
    single = pl.DataFrame([dict(point_id="p", ok=True, tok_per_s=100.0, ttft_s=0.1, accept_length=2.0)])
    m = from_tables("p", levels, requests, single, depth=1)
    assert sorted(m.levels) == [SINGLE, 8]
    assert m.levels[SINGLE].throughput == 100.0 and m.levels[SINGLE].reached == (1.0,)  # the single stream's own
    assert m.levels[8].throughput == 400.0 and m.levels[8].reached == (0.0,)
