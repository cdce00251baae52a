"""/metrics -> the levels' metrics_* columns and the metrics table, on real SGLang output
(tests/bench/data: two scrapes of an EAGLE-3 server and one of a baseline), and the sampler."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import httpx
import pytest

from sweep.bench import level_metrics as lm
from sweep.bench import server_metrics as sm
from sweep.results.schema import LEVELS, from_rows

DATA = Path(__file__).parent / "data"
BEFORE = (DATA / "metrics_eagle3_before.txt").read_text()
AFTER = (DATA / "metrics_eagle3_after.txt").read_text()
BASELINE = (DATA / "metrics_baseline_after.txt").read_text()
RANK0 = 'engine_type="unified",model_name="/models/tiny",moe_ep_rank="0",pp_rank="0",tp_rank="0"'


def scrape(text: str) -> lm.Scrape:
    return lm.index(sm.samples_of(text))


def sample_line(text: str, name: str) -> str:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(name + "{")]
    return line


def with_series(text: str, name: str, series: dict[str, float]) -> str:
    """``text`` with the one series of gauge ``name`` replaced by ``{extra labels: value}``."""
    rank0 = 'tp_rank="0"'
    lines = [f"sglang:{name}{{{RANK0.replace(rank0, labels)}}} {value}" for labels, value in series.items()]
    return text.replace(sample_line(text, f"sglang:{name}"), "\n".join(lines))


def test_the_real_scrapes_parse_with_sglang_names_and_types():
    samples = {s.name: s for s in sm.samples_of(AFTER)}
    assert samples["sglang:generation_tokens_total"].kind == "counter"
    assert samples["sglang:generation_tokens_total"].family == "sglang:generation_tokens"
    assert samples["sglang:num_running_reqs"].kind == "gauge"
    assert samples["sglang:time_to_first_token_seconds_bucket"].kind == "histogram"
    assert math.isnan(samples["sglang:fwd_occupancy"].value)  # SGLang's "no sample yet"
    assert sm.samples_of("this is not prometheus {") is None and sm.samples_of(None) is None


def test_level_columns_from_two_real_scrapes():
    # values read off the two texts by hand: counters summed over is_streaming, after - before
    cols = lm.columns(scrape(BEFORE), [scrape(AFTER)], scrape(AFTER))
    assert cols["metrics_scrapes"] == 1
    assert cols["metrics_generation_tokens"] == (80 + 34) - 8
    assert cols["metrics_prompt_tokens"] == (42 + 26) - 24
    assert cols["metrics_requests"] == (6 + 4) - 1
    assert cols["accept_length_metrics"] == pytest.approx(106 / (104 - 7))  # tokens / verify calls
    # prefill_effective_tokens_total: device_hit 0 -> 6, input 27 -> 65
    assert cols["metrics_cache_hit_rate"] == pytest.approx(6 / (6 + 38))
    assert cols["metrics_spec_accept_length"] == 1.0 and cols["metrics_spec_accept_rate"] == 0.0
    assert cols["metrics_running_reqs"] == 0.0 and cols["metrics_queue_reqs"] == 0.0
    assert cols["metrics_token_usage"] == 0.0 and cols["metrics_gen_throughput"] == 0.0
    assert set(cols) <= set(LEVELS.names)
    from_rows([{"point_id": "p", "concurrency": 1, **cols}], "levels")  # fits the schema


def test_a_baseline_has_no_accept_length_and_a_missing_metric_is_null():
    cols = lm.columns(scrape(BEFORE), [scrape(BASELINE)], scrape(BASELINE))
    # no speculation: the accept-length gauge reads 0 and there is no verify-call counter
    assert cols["metrics_spec_accept_length"] is None and cols["metrics_spec_accept_rate"] is None
    assert cols["accept_length_metrics"] is None
    bare = scrape("# TYPE other_thing gauge\nother_thing 1.0\n")
    cols = lm.columns(bare, [bare], bare)
    assert cols["metrics_scrapes"] == 1
    assert all(v is None for k, v in cols.items() if k != "metrics_scrapes"), cols
    assert lm.columns(None, [], None) == {"metrics_scrapes": None}
    assert lm.rows("p", 1, None, [], scrape(AFTER)) == []
    # a counter that went backwards (the server restarted between the scrapes) is unknown, not negative
    assert lm.columns(scrape(AFTER), [], scrape(BEFORE))["metrics_generation_tokens"] is None


def test_gauges_are_the_mean_over_the_scrapes_during_the_level_not_the_idle_value_after():
    busy = [scrape(with_series(AFTER, "num_running_reqs", {'tp_rank="0"': n})) for n in (48, 40, 8)]
    cols = lm.columns(scrape(BEFORE), busy, scrape(AFTER))
    assert cols["metrics_scrapes"] == 3
    assert cols["metrics_running_reqs"] == pytest.approx(32.0) and cols["metrics_running_reqs_max"] == 48
    assert lm.columns(scrape(BEFORE), [], scrape(AFTER))["metrics_running_reqs"] is None  # no scrape within


def test_ranks_one_series_per_dp_rank_counts_summed_ratios_averaged():
    text = with_series(
        AFTER,
        "num_running_reqs",
        {
            'dp_rank="0",tp_rank="0"': 30,
            'dp_rank="0",tp_rank="1"': 30,  # tp 1 repeats tp 0
            'dp_rank="1",tp_rank="4"': 18,
            'dp_rank="1",tp_rank="5"': 18,
        },
    )
    text = with_series(
        text,
        "num_queue_reqs",
        {'priority="",tp_rank="0"': 7, 'priority="1",tp_rank="0"': 5, 'priority="2",tp_rank="0"': 2},
    )
    text = with_series(
        text,
        "spec_accept_length",
        {'dp_rank="0",tp_rank="0"': 3.0, 'dp_rank="0",tp_rank="1"': 3.0, 'dp_rank="1",tp_rank="4"': 2.0},
    )
    text = with_series(text, "token_usage", {'dp_rank="0",tp_rank="0"': 0.5, 'dp_rank="1",tp_rank="4"': 0.25})
    cols = lm.columns(scrape(BEFORE), [scrape(text)], scrape(AFTER))
    assert cols["metrics_running_reqs"] == 30 + 18
    assert cols["metrics_queue_reqs"] == 7  # the total (priority=""), not its per-priority breakdown too
    assert cols["metrics_spec_accept_length"] == pytest.approx(2.5)  # DP ranks, not TP ranks, averaged
    assert cols["metrics_token_usage"] == pytest.approx(0.375)


def test_metrics_rows_keep_every_sample_before_during_and_after():
    b, a = scrape(BEFORE), scrape(AFTER)
    rows = lm.rows("p1", 8, b, [a], a)
    assert len(rows) == len(set(b) | set(a))
    by = {(r["name"], r["labels"]): r for r in rows}
    gen = by[("sglang:generation_tokens_total", 'engine_type="unified",is_streaming="true",model_name="/models/tiny"')]
    assert (gen["before"], gen["after"], gen["delta"], gen["during_mean"]) == (None, 34.0, 34.0, None)
    running = by[("sglang:num_running_reqs", RANK0)]
    assert running["kind"] == "gauge" and running["delta"] is None and running["during_max"] == 0.0
    buckets = [r for r in rows if r["name"] == "sglang:time_to_first_token_seconds_bucket"]
    assert buckets and all(r["delta"] is not None and 'le="' in r["labels"] for r in buckets)
    assert all(r["point_id"] == "p1" and r["concurrency"] == 8 for r in rows)
    table = from_rows(rows, "metrics")
    assert table.num_rows == len(rows)


def _mock_client(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://server")


def test_sampler_thins_out_a_long_level_evenly_and_keeps_the_latest():
    async def main() -> tuple[list[str], int]:
        calls = 0
        enough = asyncio.Event()

        async def handler(request: httpx.Request) -> httpx.Response:
            nonlocal calls
            calls += 1
            if calls == 11:
                enough.set()
            return httpx.Response(200, text=f"# TYPE g gauge\ng {calls}\n")

        async with _mock_client(handler) as client:
            sampler = sm.Sampler(client, "http://server", every_s=0.001, keep=4)
            await asyncio.wait_for(enough.wait(), 30)
            texts = await sampler.stop()
            return texts, calls

    texts, calls = asyncio.run(main())
    numbers = [int(t.split()[-1]) for t in texts]
    assert calls >= 11 and 2 <= len(numbers) <= 4, numbers
    assert numbers == sorted(numbers) and numbers[-1] >= 11 - 1  # the latest scrape (or the one before)


def test_sampler_stop_drops_a_scrape_that_hangs():
    async def main() -> list[str]:
        hanging = asyncio.Event()
        never = asyncio.Event()
        calls = 0

        async def handler(request: httpx.Request) -> httpx.Response:
            nonlocal calls
            calls += 1
            if calls > 1:  # the first scrape answers, the second never does
                hanging.set()
                await never.wait()
            return httpx.Response(200, text="# TYPE g gauge\ng 1\n")

        async with _mock_client(handler) as client:
            sampler = sm.Sampler(client, "http://server", every_s=0.001)
            await asyncio.wait_for(hanging.wait(), 30)
            return await asyncio.wait_for(sampler.stop(wait_s=0.05), 30)

    assert asyncio.run(main()) == ["# TYPE g gauge\ng 1\n"]
