"""``python -m sweep bench`` as a person pipes it: readable tables in an 80-column-less pipe, and
``--runs 0`` skipping the single stream and its warmup."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from sweep.bench import cli
from sweep.bench.report import levels_table
from sweep.core.console import PIPE_WIDTH, output_console
from tests.bench.bench_fake_server import REPO

LEVEL_HEADERS = ("ok/total", "tok/s/req", "TTFT p50", "TPOT p50", "ITL p99", "achieved C", "accept srv", "accept req")


def _parse(*argv: str):
    import argparse

    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return p.parse_args(["--url", "http://127.0.0.1:1", *argv])


def test_runs_0_skips_the_warmup_unless_one_is_asked_for():
    assert cli.settings_from_args(_parse("--runs", "0")).single_stream.warmup == 0
    assert cli.settings_from_args(_parse("--runs", "0", "--warmup", "1")).single_stream.warmup == 1
    assert cli.settings_from_args(_parse("--runs", "3")).single_stream.warmup == 2  # the default stays


def test_a_console_that_is_not_a_terminal_is_wide_enough_for_every_table(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    buf = io.StringIO()
    console = output_console(file=buf)
    assert not console.is_terminal and console.width == PIPE_WIDTH
    from sweep.results.schema import from_rows

    console.print(
        levels_table(
            from_rows(
                [
                    {
                        "concurrency": 250,
                        "requests": 500,
                        "ok": 500,
                        "failed": 0,
                        "output_throughput": 12345.6,
                        "latency_p99_s": 20.1,
                    }
                ],
                "levels",
            )
        )
    )
    header = next(line for line in buf.getvalue().splitlines() if "ok/total" in line)
    assert all(h in header for h in LEVEL_HEADERS) and "…" not in buf.getvalue()
    monkeypatch.setenv("COLUMNS", "100")  # the user's own width wins
    assert output_console(file=io.StringIO()).width == 100


@pytest.mark.slow
def test_piped_output_keeps_every_column_and_runs_0_sends_no_warmup(fake_sglang, tmp_path):
    server = fake_sglang(speed=20.0)
    out = tmp_path / "bench"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep",
            "bench",
            "--url",
            server.url,
            "--runs",
            "0",
            "--levels",
            "1,2",
            "--max-tokens",
            "8",
            "--rounds",
            "1",
            "--out",
            str(out),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = next(line for line in proc.stdout.splitlines() if "ok/total" in line)
    assert all(h in header for h in LEVEL_HEADERS), proc.stdout
    assert "…" not in proc.stdout and "Single stream" not in proc.stdout
    phases = pq.read_table(out / "requests.parquet").column("phase").to_pylist()
    assert phases and set(phases) == {"level"}  # no warmup, no single-stream request was sent


def test_the_settings_name_every_route_the_client_has():
    from sweep.bench.client import ROUTES
    from sweep.core.settings import API_NAMES

    assert tuple(ROUTES) == API_NAMES
