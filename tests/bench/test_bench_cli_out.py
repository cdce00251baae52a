"""``python -m sweep bench --out DIR``: the flat Parquet files it always wrote, and DIR as a results
directory that ``sweep.results.load``, ``python -m sweep query`` and ``report`` read."""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import polars as pl
import pytest

from sweep.bench import cli
from sweep.core.errors import ResultsError
from sweep.results import load
from sweep.results.writer import ResultsDir
from tests.bench.bench_fake_server import REPO
from tests.bench.test_bench_cli_report import _result

FLAT = ["levels.parquet", "metrics.parquet", "requests.parquet", "single_stream.parquet"]


def sweep(*argv: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "sweep", *argv], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def query_csv(directory, sql: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(sweep("query", str(directory), sql, "--format", "csv").stdout)))


def test_out_is_a_results_directory_that_loads_and_is_queried(tmp_path):
    out = tmp_path / "bench"
    paths = cli.write_out(str(out), _result(), url="http://user:secret@127.0.0.1:30000")
    assert sorted(p.name for p in paths.values()) == FLAT  # the files it always wrote, returned for the message
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == FLAT
    tables = {name: frame.collect() for name, frame in load(out).items()}
    assert {name: t.height for name, t in tables.items()} == {
        "points": 1,
        "single_stream": 1,
        "levels": 1,
        "requests": 2,
        "metrics": 0,
        "decisions": 0,  # decide's: none here
    }
    for name in ("requests", "single_stream", "levels"):  # the same rows as the flat files
        assert tables[name].equals(pl.read_parquet(out / f"{name}.parquet")), name
    point = tables["points"].row(0, named=True)
    assert point["point_id"] == "" and point["status"] == "ok" and point["experiment"] == "bench"
    assert point["label"] == "bench 127.0.0.1:30000"  # no credentials of the URL
    assert point["started_at"] == 1.7e9 and point["ended_at"] == pytest.approx(1.7e9 + 1.0)  # first send, last answer
    rows = query_csv(out, "SELECT p.label, l.concurrency, l.failed FROM levels l JOIN points p USING (point_id)")
    assert rows == [{"label": "bench 127.0.0.1:30000", "concurrency": "4", "failed": "1"}]
    sweep("report", str(out), "--no-plots", "--quiet")
    md = (out / "report" / "report.md").read_text()
    assert "Points written: 1 (1 ok)" in md and "| bench 127.0.0.1:30000 |" in md  # its single stream
    # a rerun into the same directory replaces the run, as the flat files always were
    cli.write_out(str(out), _result(), url="http://127.0.0.1:30000")
    assert load(out)["requests"].collect().height == 2


def test_out_refuses_a_sweeps_directory_before_anything_is_written(tmp_path):
    rd = ResultsDir(tmp_path / "sweep", "k26", "real").open()
    before = sorted(p.name for p in rd.path.rglob("*"))
    from sweep.results.writer import check_benchmark_dir

    with pytest.raises(ResultsError, match="holds the results of the sweep 'k26'") as e:
        check_benchmark_dir(rd.path)
    assert "--out" in e.value.fix
    with pytest.raises(ResultsError, match="'k26'"):
        cli.write_out(str(rd.path), _result(), url="http://127.0.0.1:1")
    assert sorted(p.name for p in rd.path.rglob("*")) == before
    # the command refuses it before the benchmark: exit 5 (results), not 6 (no server at port 9)
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "bench", "--url", "http://127.0.0.1:9", "--out", str(rd.path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 5 and "holds the results of the sweep 'k26'" in proc.stdout + proc.stderr, proc.stderr


@pytest.mark.slow
def test_bench_out_against_a_server_is_queried_like_a_sweep(fake_sglang, tmp_path):
    server = fake_sglang(speed=20.0)
    out = tmp_path / "bench"
    sweep(
        "bench",
        "--url",
        server.url,
        "--runs",
        "1",
        "--warmup",
        "0",
        "--single-max-tokens",
        "8",
        "--levels",
        "1,2",
        "--max-tokens",
        "8",
        "--rounds",
        "1",
        "--quiet",
        "--out",
        str(out),
    )
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == FLAT
    levels = load(out)["levels"].collect()
    assert sorted(levels["concurrency"].to_list()) == [1, 2]
    assert levels.equals(pl.read_parquet(out / "levels.parquet"))
    rows = query_csv(out, "SELECT concurrency, requests, failed FROM levels ORDER BY concurrency")
    assert rows == [
        {"concurrency": "1", "requests": "1", "failed": "0"},
        {"concurrency": "2", "requests": "2", "failed": "0"},
    ]
    assert query_csv(out, "SELECT status, experiment FROM points") == [{"status": "ok", "experiment": "bench"}]


def test_a_bench_directory_counts_per_gpu_by_the_servers_parallelism(tmp_path):
    """The server said tp_size 8 in its /server_info: its per-GPU figures are per GPU of those 8, not
    '(per host)' as for a CPU server."""
    from dataclasses import replace

    from sweep.analysis.slo import gpus_frame

    assert cli.server_argv({"tp_size": 8, "dp_size": 1, "device": "cuda"}) == (
        ["--tp-size", "8", "--dp-size", "1", "--device", "cuda"],
        8,
    )
    assert cli.server_argv({"tp_size": 1, "device": "cpu"})[1] == 0 and cli.server_argv({})[1] is None
    out = tmp_path / "bench"
    cli.write_out(
        str(out),
        replace(_result(), server_info={"version": "0.5.10", "tp_size": 8, "device": "cuda"}),
        url="http://127.0.0.1:30000",
    )
    gpus = gpus_frame(load(out)).row(0, named=True)
    assert (gpus["gpus"], gpus["per"], gpus["gpus_from"]) == (8.0, "GPU", "argv")
