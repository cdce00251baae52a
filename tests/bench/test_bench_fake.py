"""The benchmark against the fake SGLang server, checked against the fake's own performance model
(``sweep.fake.model``): accept length within 2 %, tok/s and throughput the requests' own arithmetic
and never faster than the model (how close they come is tests/perf/bench_vs_model.py's figure); and
the server's /metrics as the levels' metrics_* columns and the metrics table."""

from __future__ import annotations

import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from sweep.bench.runner import run
from sweep.core.events import HostProgress, LevelProgress, RunProgress
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.fake import model
from tests.bench.bench_fake_server import REPO, kill_tree

pytestmark = pytest.mark.slow

ACCEPT_RATE = 0.7
SPEC = model.Spec(steps=3, topk=1, draft_tokens=4, accept_rate=ACCEPT_RATE)
SPEC_ARGS = (
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "fake/eagle3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--fake-accept-rate",
    str(ACCEPT_RATE),
    "--enable-metrics",
)
# Fast enough for a ~10 s test, slow enough that a decode step (4-26 ms here) dwarfs the event-loop
# overheads of a loaded 2-core machine. 256-token requests: a closed loop's later waves arrive
# staggered, and a request that misses its wave's prefill slips one decode step (~1% of 101 steps)
# against the model's lock-step waves.
SPEED = 8.0
SINGLE_TOKENS, LEVEL_TOKENS = 128, 256
# the /metrics tests scrape often, so that these seconds-long levels get several scrapes; the fake
# renders /metrics in its scheduler's process (real SGLang: in the tokenizer manager's), so scraping
# that often slows it by a few %: the throughput test keeps the default period (first scrape at 1 s)
METRICS_EVERY_S = 0.2


def settings(**kw) -> BenchSettings:
    s = BenchSettings(
        single_stream=SingleStreamSettings(runs=2, warmup=1, max_tokens=SINGLE_TOKENS),
        concurrency=ConcurrencySettings(levels=[4, 16], rounds=2, max_tokens=LEVEL_TOKENS),
    )
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def close(measured: float, expected: float, tol: float) -> bool:
    return abs(measured - expected) <= tol * expected


def single_stream_expected(runs: list[dict]) -> tuple[float, float]:
    """The model's single-stream figures for these runs: end-to-end tok/s (prefill + decode time) and
    the decode rate (tokens after the first over the time after the first)."""
    seconds = (
        sum(
            model.prefill_time_s(r["prompt_tokens"], None)
            + model.decode_steps(SINGLE_TOKENS, SPEC) * model.step_time_s(1, SPEC, None)
            for r in runs
        )
        / SPEED
    )
    return len(runs) * SINGLE_TOKENS / seconds, model.single_stream_tok_s(SPEC, None, SPEED)


def level_expected(requests: list[dict], c: int) -> float:
    """The model's output throughput of a closed loop of 2C requests at concurrency C, with the
    levels' mean prompt."""
    prompts = [r["prompt_tokens"] for r in requests if r["phase"] == "level"]
    run = model.closed_loop_run(
        2 * c, c, LEVEL_TOKENS, SPEC, None, None, SPEED, prompt_tokens=round(sum(prompts) / len(prompts))
    )
    return run.throughput_tok_s


def test_figures_agree_with_the_fake_model(fake_sglang):
    server = fake_sglang(*SPEC_ARGS, speed=SPEED)
    seen: list[HostProgress] = []
    result = run(server.url, settings(), point_id="p1", progress=seen.append)

    req = result.requests.to_pylist()
    assert all(r["ok"] for r in req), [r["error"] for r in req if not r["ok"]][:3]
    assert all(r["completion_tokens"] == r["max_tokens"] for r in req)  # ignore_eos: exactly max tokens
    assert all(r["point_id"] == "p1" for r in req)
    # speculation: chunks carry several tokens, and the parser counted every one
    assert max(max(r["chunk_tokens"]) for r in req) > 1
    assert all(sum(r["chunk_tokens"]) == r["completion_tokens"] for r in req)
    assert RunProgress("single", run=2, of=2) in seen
    assert LevelProgress(concurrency=16, done=32, of=32) in seen

    # the accept histogram of each request (meta_info's): one entry per verify step, accepting at most
    # the chain's steps, and as many accepted drafts as the accept length says
    for r in req:
        hist = r["spec_accept_histogram"]
        assert hist and len(hist) <= SPEC.steps + 1 and sum(hist) == r["spec_verify_ct"], (hist, r["spec_verify_ct"])
        # accepted drafts + one token per verify = the tokens after prefill's first (the last verify may be cut
        # at max_tokens)
        tokens = sum(k * n for k, n in enumerate(hist)) + sum(hist)
        assert 0 <= tokens - (r["completion_tokens"] - 1) <= SPEC.steps, (hist, r["completion_tokens"])
    drafts = sum(k * n for r in req for k, n in enumerate(r["spec_accept_histogram"]))
    verifies = sum(sum(r["spec_accept_histogram"]) for r in req)
    assert close(1 + drafts / verifies, model.expected_accept_length(SPEC), 0.02)

    # single stream, over its runs: the summary is the runs' own arithmetic (tokens over seconds), and
    # no faster than the model's prefill + decode time: the fake sleeps at least that long. How close it
    # comes (within 3 % on an idle machine) is a figure of tests/perf/bench_vs_model.py, not a test: a
    # loaded machine only makes it slower.
    ss = result.single_stream.to_pylist()
    assert len(ss) == 2 and all(r["ok"] for r in ss)
    summary = result.single_summary
    assert summary["completion_tokens"] == sum(r["completion_tokens"] for r in ss) == 2 * SINGLE_TOKENS
    assert summary["seconds"] == pytest.approx(sum(r["latency_s"] for r in ss), rel=1e-9)
    assert summary["tok_per_s"] == pytest.approx(summary["completion_tokens"] / summary["seconds"], rel=1e-9)
    expected_tok_s, expected_decode = single_stream_expected(ss)
    assert summary["tok_per_s"] <= 1.03 * expected_tok_s, (summary, expected_tok_s)
    decode_rate = sum(r["completion_tokens"] - 1 for r in ss) / sum(r["latency_s"] - r["ttft_s"] for r in ss)
    assert decode_rate <= 1.03 * expected_decode, (decode_rate, expected_decode)

    # each level: output throughput is the level's tokens over its wall time (first send to last end),
    # and no faster than the model's closed loop of the same requests
    expected_accept = model.expected_accept_length(SPEC)
    for lv in result.levels.to_pylist():
        c = lv["concurrency"]
        level_req = [r for r in req if r["phase"] == "level" and r["concurrency"] == c]
        assert (lv["requests"], lv["ok"], lv["failed"]) == (2 * c, 2 * c, 0)
        assert lv["output_throughput"] == pytest.approx(2 * c * LEVEL_TOKENS / lv["wall_s"], rel=1e-9)
        expected = level_expected(req, c)
        assert lv["output_throughput"] <= 1.03 * expected, (c, lv["output_throughput"], expected)
        assert lv["flushed"] is True
        assert close(lv["accept_length_server"], expected_accept, 0.02), lv["accept_length_server"]
        assert close(lv["accept_length_requests"], expected_accept, 0.02), lv["accept_length_requests"]
        # achieved concurrency is the requests' own arithmetic (their busy time over the level's wall, every
        # request inside the window), never above C; how close to C it comes is a figure of
        # tests/perf/bench_vs_model.py (a loaded machine widens the gaps between a request and the next)
        busy = sum(r["latency_s"] for r in level_req)
        assert lv["achieved_concurrency"] == pytest.approx(busy / lv["wall_s"], rel=0.02)
        assert 0.5 * c <= lv["achieved_concurrency"] <= c + 1e-9
        assert lv["ttft_p50_s"] < lv["latency_p50_s"] and lv["tpot_p50_s"] > 0 and lv["itl_p50_s"] > 0
        # the server's own counts over the level (exact)
        assert lv["metrics_generation_tokens"] == 2 * c * LEVEL_TOKENS
        assert lv["metrics_requests"] == 2 * c
        assert lv["metrics_prompt_tokens"] == sum(r["prompt_tokens"] for r in level_req)
        # the fake's prefix cache: a prompt repeated within the level (flushed before) hits it, in part
        assert 0.0 < lv["metrics_cache_hit_rate"] < 1.0 or (c == 1 and lv["metrics_cache_hit_rate"] == 0.0)
        assert lv["accept_length_metrics"] is None or close(lv["accept_length_metrics"], expected_accept, 0.02)
        assert lv["metrics_scrapes"] is not None
        rows = [m for m in result.metrics.to_pylist() if m["concurrency"] == c]
        assert rows and all(m["point_id"] == "p1" for m in rows)
        gen = [m for m in rows if m["name"] == "sglang:generation_tokens_total"]
        assert sum(m["delta"] for m in gen) == 2 * c * LEVEL_TOKENS
        assert any(m["kind"] == "histogram" and m["name"].endswith("_bucket") for m in rows)


def test_gauges_are_read_while_the_level_runs(fake_sglang):
    server = fake_sglang(*SPEC_ARGS, speed=SPEED)
    s = settings()
    s.single_stream = SingleStreamSettings(runs=0, warmup=0)
    s.concurrency = ConcurrencySettings(levels=[8], rounds=3, max_tokens=LEVEL_TOKENS)
    result = run(server.url, s, metrics_every_s=METRICS_EVERY_S)
    (lv,) = result.levels.to_pylist()
    c = 8
    assert lv["ok"] == 3 * c and lv["metrics_scrapes"] >= 3, lv
    assert lv["metrics_running_reqs_max"] == c and 0.5 * c <= lv["metrics_running_reqs"] <= c, lv
    assert lv["metrics_queue_reqs"] < 0.5 * c  # under the fake's cap of 48: nothing waits for long
    expected_accept = model.expected_accept_length(SPEC)
    assert close(lv["metrics_spec_accept_length"], expected_accept, 0.1), lv["metrics_spec_accept_length"]
    assert 0.5 * lv["output_throughput"] <= lv["metrics_gen_throughput"] <= 1.5 * lv["output_throughput"], lv
    assert 0 <= lv["metrics_token_usage"] < 1
    (running,) = [m for m in result.metrics.to_pylist() if m["name"] == "sglang:num_running_reqs"]
    # during the level it ran C; the scrape after the level reads the server idle
    assert running["during_max"] == c and running["after"] == 0 and running["delta"] is None


def test_a_running_cap_shows_as_running_requests_at_the_cap_and_the_rest_queued(fake_sglang):
    server = fake_sglang(*SPEC_ARGS, "--max-running-requests", "4", speed=SPEED)
    s = settings()
    s.single_stream = SingleStreamSettings(runs=0, warmup=0)
    s.concurrency = ConcurrencySettings(levels=[12], rounds=1, max_tokens=128)
    (lv,) = run(server.url, s, metrics_every_s=METRICS_EVERY_S).levels.to_pylist()
    assert lv["ok"] == 12 and lv["achieved_concurrency"] > 6  # the client kept 12 in flight...
    assert lv["metrics_running_reqs_max"] == 4  # ...the server ran 4 at a time, the rest waited
    assert lv["metrics_queue_reqs"] >= 2, lv


def test_a_server_without_metrics_gives_null_columns_and_no_metrics_rows(fake_sglang):
    server = fake_sglang(*(a for a in SPEC_ARGS if a != "--enable-metrics"), speed=20.0)
    s = settings()
    s.single_stream = SingleStreamSettings(runs=0, warmup=0)
    s.concurrency = ConcurrencySettings(levels=[2], rounds=1, max_tokens=16)
    result = run(server.url, s, metrics_every_s=METRICS_EVERY_S)
    (lv,) = result.levels.to_pylist()
    assert lv["ok"] == 2 and result.metrics.num_rows == 0
    assert all(v is None for k, v in lv.items() if k.startswith("metrics_") or k == "accept_length_metrics"), lv


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_openai_routes_count_every_token_of_a_multi_token_chunk(fake_sglang, api):
    server = fake_sglang(*SPEC_ARGS, speed=20.0)
    s = settings(api=api)
    s.single_stream = SingleStreamSettings(runs=1, warmup=0, max_tokens=32)
    s.concurrency = ConcurrencySettings(levels=[4], rounds=1, max_tokens=32)
    req = run(server.url, s).requests.to_pylist()
    assert all(r["ok"] and r["api"] == api for r in req), [r["error"] for r in req]
    assert all(r["completion_tokens"] == 32 and sum(r["chunk_tokens"]) == 32 for r in req)
    assert max(max(r["chunk_tokens"]) for r in req) > 1  # counted from usage, not one per chunk
    assert all(r["chunks"] < 32 for r in req)
    assert all(r["spec_accept_histogram"] is None for r in req)  # meta_info is /generate's only


def test_a_server_killed_mid_level_gives_failures_not_an_exception(fake_sglang):
    server = fake_sglang(*SPEC_ARGS, speed=SPEED)
    s = settings(flush_between_levels=True)
    s.single_stream = SingleStreamSettings(runs=0, warmup=0)
    s.concurrency = ConcurrencySettings(levels=[8, 4], rounds=3, max_tokens=64)

    def progress(info: dict) -> None:
        if info.stage == "level" and info.concurrency == 8 and info.done == 4:
            kill_tree(server.proc.pid)  # the server dies with requests in flight

    result = run(server.url, s, progress=progress)
    first, second = result.levels.to_pylist()
    assert first["requests"] == 24 and first["ok"] >= 4 and first["failed"] > 0
    assert first["ok"] + first["failed"] == 24
    assert second["ok"] == 0 and second["failed"] == 12 and second["flushed"] is False
    errors = {r["error"].split(":")[0] for r in result.requests.to_pylist() if not r["ok"]}
    assert errors <= {"disconnect", "connect"}, errors


def test_command_line_prints_tables_and_writes_parquet(fake_sglang, tmp_path):
    server = fake_sglang(*SPEC_ARGS, speed=20.0)
    out = tmp_path / "bench"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep",
            "bench",
            "--url",
            server.url,
            "--runs",
            "2",
            "--warmup",
            "0",
            "--single-max-tokens",
            "16",
            "--levels",
            "1,4",
            "--max-tokens",
            "16",
            "--prompts",
            "encyclopedic",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Single stream" in proc.stdout and "Concurrency levels" in proc.stdout
    assert "Server /metrics per level" in proc.stdout
    assert pq.read_table(out / "requests.parquet").num_rows == 2 + 2 * 1 + 2 * 4
    assert pq.read_table(out / "single_stream.parquet").num_rows == 2
    levels = pq.read_table(out / "levels.parquet").to_pylist()
    assert [lv["concurrency"] for lv in levels] == [1, 4]
    assert all(r["prompt_set"] == "encyclopedic" for r in pq.read_table(out / "requests.parquet").to_pylist())
    metrics = pq.read_table(out / "metrics.parquet").to_pylist()
    assert {m["concurrency"] for m in metrics} == {1, 4}
    assert (
        sum(m["delta"] for m in metrics if m["concurrency"] == 4 and m["name"] == "sglang:generation_tokens_total")
        == 2 * 4 * 16
    )

    server.kill()
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "bench", "--url", server.url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 6 and "cannot reach the server" in proc.stderr
