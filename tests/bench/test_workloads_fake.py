"""Workloads end to end against the fake SGLang server on loopback: ``python -m sweep bench
--workload sharegpt-multiturn:FILE --out DIR`` as a person runs it, and the lengths workloads
through ``sweep.bench.runner.run`` on each route (ids on /generate and /v1/completions, text on chat)."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import polars as pl
import pytest

from sweep.bench.runner import run
from sweep.core import workload_spec
from sweep.core.errors import ConfigError
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.results import load
from tests.bench.bench_fake_server import REPO
from tests.bench.test_workloads import CHAT

COLUMNS = ["workload", "input_len_given", "output_len_given", "conversation", "turn", "prefix_group", "arrival_s"]


def test_sweep_bench_with_a_sharegpt_file_records_each_conversation_and_turn(fake_sglang, tmp_path):
    server = fake_sglang(speed=50.0)
    data = tmp_path / "chat.json"
    data.write_text(json.dumps(CHAT))
    out = tmp_path / "bench"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep",
            "bench",
            "--url",
            server.url,
            "--workload",
            f"sharegpt-multiturn:{data},answer_lengths",
            "--runs",
            "0",
            "--levels",
            "2",
            "--requests-per-level",
            "6",
            "--max-tokens",
            "7",
            "--api",
            "chat",
            "--out",
            str(out),
            "--quiet",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    req = load(out)["requests"].collect().sort("start_at")
    assert set(COLUMNS) <= set(req.columns) and req.height == 6 and req["ok"].all()
    assert req["workload"].unique().to_list() == [f"sharegpt-multiturn:{data}"]
    assert set(zip(req["conversation"], req["turn"])) == {(0, 0), (0, 1), (1, 0)}
    # the dataset's answer lengths are the max tokens (9 and 2; "Maybe." answers turn 1), the server's counts the real
    want = {(0, 0): 9, (0, 1): 2, (1, 0): 2}
    assert all(
        r["output_len_given"] == want[(r["conversation"], r["turn"])] == r["max_tokens"] == r["completion_tokens"]
        for r in req.iter_rows(named=True)
    )
    # turn 1 carries the conversation so far: more prompt tokens than turn 0, and it went after turn 0's answer
    first = req.filter((pl.col("conversation") == 0) & (pl.col("turn") == 0)).row(0, named=True)
    second = req.filter((pl.col("conversation") == 0) & (pl.col("turn") == 1)).rows(named=True)
    assert all(s["prompt_tokens"] > first["prompt_tokens"] for s in second)
    for s in second:
        before = req.filter((pl.col("conversation") == 0) & (pl.col("turn") == 0) & (pl.col("seq") == s["seq"] - 1))
        assert before.height == 1 and before["start_at"][0] + before["latency_s"][0] <= s["start_at"]
    assert req["input_len_given"].null_count() == 6 and req["prefix_group"].null_count() == 6  # text: not given
    assert req["lengths_exact"].all()  # the answers counted on the server's tokenizer (/v1/tokenize)


def test_synthetic_and_shared_prefix_lengths_reach_the_server_on_every_route(fake_sglang):
    server = fake_sglang(speed=50.0)
    for spec in (
        "synthetic:in=uniform(20,60),out=uniform(3,6),requests=6",
        "shared-prefix:groups=2,prefix=32,questions=2,in=8,out=4",
    ):
        for api in ("generate", "completions", "chat"):
            settings = BenchSettings(
                api=api,
                server_metrics=False,
                workload=workload_spec.settings(spec),
                single_stream=SingleStreamSettings(runs=1, warmup=0, max_tokens=9),
                concurrency=ConcurrencySettings(levels=[2], requests_per_level=4, max_tokens=9),
            )
            req = pl.from_arrow(run(server.url, settings).requests)
            assert req["ok"].all() and req.height == 5, (spec, api, req["error"].to_list())
            assert (req["max_tokens"] == req["output_len_given"]).all() and (
                req["completion_tokens"] == req["max_tokens"]
            ).all()
            assert req["lengths_exact"].all()  # ids as ids, or chat text fitted on the server's /v1/tokenize
            if api == "chat":  # text, one word a token, plus the chat template's tokens
                assert (req["prompt_tokens"] > req["input_len_given"]).all(), (spec, req["prompt_tokens"].to_list())
            else:  # the ids themselves: the server counts exactly the given length
                assert (req["prompt_tokens"] == req["input_len_given"]).all(), (spec, api)
            if spec.startswith("shared"):
                assert set(req["prefix_group"]) <= {0, 1} and (req["input_len_given"] == 40).all()


def test_inputs_past_the_servers_input_cap_fail_before_the_first_request(fake_sglang):
    server = fake_sglang("--context-length", "256", "--enable-metrics", speed=50.0)  # max_req_input_len 250
    settings = BenchSettings(
        server_metrics=False,
        workload=workload_spec.settings("synthetic:in=uniform(200,300),requests=4"),
        single_stream=SingleStreamSettings(runs=1, warmup=0, max_tokens=4),
        concurrency=ConcurrencySettings(levels=[]),
    )
    with pytest.raises(
        ConfigError,
        match=r"synthetic request \d: \d+ input tokens exceed the context of 250 tokens "
        r"\(the server's max_req_input_len at http://127.0.0.1:\d+\)",
    ):
        run(server.url, settings)
    counts = [
        line
        for line in httpx.get(server.url + "/metrics", trust_env=False).text.splitlines()
        if line.startswith("sglang:num_requests_total") and 'is_streaming="true"' in line
    ]
    assert len(counts) == 1 and counts[0].endswith(" 0.0"), counts  # no benchmark request (they stream) was sent
