"""Options -> settings, settings checks, tables and the Parquet files, without a server."""

from __future__ import annotations

import argparse
import asyncio
import io

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from sweep.bench import cli, report
from sweep.bench.client import RequestRecord
from sweep.bench.load import Sent
from sweep.bench.prompts import load_prompts
from sweep.bench.runner import BenchResult, check_settings, check_url, request_row, run_benchmark, single_row
from sweep.bench.workloads import Workload
from sweep.core.errors import BenchError
from sweep.core.settings import BenchSettings
from sweep.results.schema import from_rows


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return p.parse_args(argv)


def test_options_override_only_what_was_given():
    s = cli.settings_from_args(
        parse(
            "--url",
            "http://x:1",
            "--runs",
            "3",
            "--levels",
            "1,8, 64",
            "--max-tokens",
            "32",
            "--api",
            "chat",
            "--no-flush",
        )
    )
    d = BenchSettings()
    assert s.single_stream.runs == 3 and s.single_stream.warmup == d.single_stream.warmup
    assert s.concurrency.levels == [1, 8, 64] and s.concurrency.max_tokens == 32
    assert s.api == "chat" and not s.flush_between_levels and s.server_metrics and s.ignore_eos
    assert cli.settings_from_args(parse("--url", "u", "--levels", "none")).concurrency.levels == []
    with pytest.raises(SystemExit):
        parse("--url", "u", "--levels", "1,x")


def test_bad_settings_and_urls_are_named():
    s = BenchSettings()
    s.concurrency.levels = [4, 0]
    with pytest.raises(BenchError, match="concurrency.levels"):
        check_settings(s)
    s = BenchSettings(api="grpc")
    with pytest.raises(BenchError, match="api") as e:
        check_settings(s)
    assert "generate" in e.value.fix
    with pytest.raises(BenchError, match="not an http"):
        check_url("127.0.0.1:30000")
    assert check_url("http://127.0.0.1:30000/") == "http://127.0.0.1:30000"


def test_unreachable_server_raises_bench_error_before_anything_runs():
    with pytest.raises(BenchError, match="cannot reach the server at http://127.0.0.1:9") as e:
        asyncio.run(run_benchmark("http://127.0.0.1:9", BenchSettings()))
    assert e.value.exit_code == 6 and "--url" in e.value.fix


def _result() -> BenchResult:
    prompts = Workload.from_prompts(load_prompts("coding"))
    good = RequestRecord(
        start_at=1.7e9,
        start_mono=0.0,
        latency_s=1.0,
        ttft_s=0.1,
        prompt_tokens=20,
        completion_tokens=10,
        chunk_times_s=[0.1, 0.5, 1.0],
        chunk_tokens=[1, 5, 4],
        accept_length=3.3,
        spec_verify_ct=3,
        accept_histogram=[0, 1, 2],
        finish_reason="length",
        ok=True,
        http_status=200,
    )
    bad = RequestRecord(
        start_at=1.7e9, start_mono=0.0, latency_s=0.2, ok=False, error="http 503: busy", http_status=503
    )
    sent = [Sent("single", 1, 0, 3, 10, good), Sent("level", 4, 0, 5, 10, bad)]
    level = {
        "point_id": "",
        "concurrency": 4,
        "max_tokens": 10,
        "requests": 1,
        "ok": 0,
        "failed": 1,
        "wall_s": 0.2,
        "flushed": False,
    }
    return BenchResult(
        requests=from_rows([request_row("", prompts, "generate", s) for s in sent], "requests"),
        single_stream=from_rows([single_row("", sent[0])], "single_stream"),
        levels=from_rows([level], "levels"),
        single_summary={
            "runs": 1,
            "ok": 1,
            "completion_tokens": 10,
            "seconds": 1.0,
            "tok_per_s": 10.0,
            "accept_length": 3.3,
        },
    )


def test_tables_print_runs_levels_and_errors():
    buf = io.StringIO()
    report.print_report(_result(), Console(file=buf, width=200))
    out = buf.getvalue()
    assert "Single stream" in out and "Concurrency levels" in out and "Failed requests" in out
    assert "http 503" in out and "0/1" in out and "3.30" in out
    assert "Server /metrics" not in out  # no level had metrics
    # the accept histogram [0, 1, 2]: position 1 always, position 2 in 2 of 3 verifies
    assert "Accept rate per draft position" in out
    line = next(x for x in out.splitlines() if "single" in x and "100%" in x)
    assert line.replace("│", " ").split() == ["single", "3", "2.67", "100%", "67%"]


def test_no_acceptance_table_without_histograms():
    result = _result()
    rows = result.requests.to_pylist()
    assert report.acceptance_table(from_rows([{**r, "spec_accept_histogram": None} for r in rows], "requests")) is None


def test_server_metrics_table_shows_what_the_server_said():
    level = {
        "point_id": "",
        "concurrency": 64,
        "requests": 128,
        "ok": 128,
        "failed": 0,
        "metrics_scrapes": 9,
        "metrics_running_reqs": 47.5,
        "metrics_running_reqs_max": 48,
        "metrics_queue_reqs": 16.25,
        "metrics_spec_accept_length": 2.71,
        "accept_length_metrics": 2.69,
        "metrics_generation_tokens": 65536,
    }
    table = report.server_metrics_table(from_rows([level], "levels"))
    buf = io.StringIO()
    Console(file=buf, width=250).print(table)
    out = buf.getvalue()
    assert "64" in out and "47.5" in out and "48" in out and "16.2" in out and "2.71" in out and "65,536" in out
    assert report.server_metrics_table(from_rows([{"concurrency": 1}], "levels")) is None


def test_write_is_atomic_and_readable_by_the_store(tmp_path):
    paths = _result().write(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "levels.parquet",
        "metrics.parquet",
        "requests.parquet",
        "single_stream.parquet",
    ]
    req = pq.read_table(paths["requests"]).to_pylist()
    assert req[0]["chunk_tokens"] == [1, 5, 4] and req[0]["tpot_s"] == pytest.approx(0.1)
    assert req[1]["ok"] is False and req[1]["ttft_s"] is None
    assert pq.read_table(paths["single_stream"]).column("tok_per_s").to_pylist() == [10.0]


def test_a_level_short_of_its_concurrency_is_flagged():
    """C=70 that kept 31 in flight measured another load: the table says so, with the margin."""
    rows = [
        {"point_id": "", "concurrency": c, "requests": 2 * c, "ok": 2 * c, "failed": 0, "achieved_concurrency": a}
        for c, a in ((8, 7.8), (70, 31.0))
    ]
    buf = io.StringIO()
    Console(file=buf, width=250).print(report.levels_table(from_rows(rows, "levels")))
    out = buf.getvalue()
    assert "31.0 (44%) short" in out and "7.8 (" not in out and "fewer than 80% of C" in out and "(C=70)" in out
