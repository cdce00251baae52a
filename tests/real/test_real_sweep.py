"""The whole sweep against real SGLang: ``python -m sweep EXP --local`` (local Ray, a CPU host, the
experiment's own launcher), then the report, as a user runs them."""

from __future__ import annotations

import json
import textwrap

import polars as pl
import psutil
import pytest

from tests.conftest import run_sweep_cli

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(900)]


def test_local_sweep_then_report(real_sglang, tmp_path, write_yaml):
    out = tmp_path / "results"
    exp = write_yaml(
        textwrap.dedent(f"""
        name: real_local
        cluster: {{host_resource: cpu_host, gpus_per_host: 0}}
        server:
          launcher: [{real_sglang.python}, -m, sglang.launch_server]
          model_path: {real_sglang.models / "target"}
          tp_size: 1
          port: 31500
          flags: {{device: cpu, attention-backend: {real_sglang.attention_backend}, disable-overlap-schedule: true,
                  max-total-tokens: 16384, max-running-requests: 8, enable-metrics: true}}
          env: {json.dumps(real_sglang.env)}
          timeouts: {{load_s: 300, capture_s: 300, ready_s: 180, total_s: 420, stall_s: 180, stop_grace_s: 20}}
          reap: {{wait_s: 20}}
          cpu: {{min_free_mem_gib: 1.0}}
        grid:
          axes:
            drafter:
              values:
                none: {{}}
                ngram: {{flags: {{speculative-algorithm: NGRAM, speculative-num-draft-tokens: 8}}}}
        benchmark:
          prompts: coding
          single_stream: {{runs: 1, warmup: 1, max_tokens: 32}}
          concurrency: {{levels: [1, 2], rounds: 1, max_tokens: 16}}
          request_timeout_s: 120
        local: {{hosts: 1}}
        results_dir: {out}
        """)
    )
    before = {p.pid for p in _sglang_processes()}  # another test's or run's servers are not this sweep's
    r = run_sweep_cli(str(exp), "--local", timeout=840)
    points = pl.read_parquet(out / "points" / "*.parquet")
    assert points.height == 2, r.stdout[-3000:]
    base = points.filter(pl.col("baseline")).row(0, named=True)
    ngram = points.filter(~pl.col("baseline")).row(0, named=True)
    assert base["status"] == "ok", (base["failure_phase"], base["failure_reason"])
    if real_sglang.speculates:
        assert r.returncode == 0 and ngram["status"] == "ok", (ngram["failure_phase"], ngram["failure_reason"])
    else:  # SGLang cannot speculate on this CPU: said in pre-flight, recorded, the sweep goes on
        assert r.returncode == 1, (r.stdout[-3000:], r.stderr[-3000:])
        assert ngram["status"] == "failed" and ngram["failure_phase"] == "preflight"
        assert "torch_native" in ngram["failure_reason"]
        assert ngram["ended_at"] - ngram["started_at"] < 60
    assert not points["dry_run"].any()
    assert base["gpu_name"] == "cpu" and base["startup_s"] > 0
    levels = pl.read_parquet(out / "levels" / "*.parquet")
    assert levels.height == (4 if real_sglang.speculates else 2) and (levels["failed"] == 0).all()
    # the benchmark's token count is the server's own, level by level
    assert (levels["metrics_generation_tokens"] == levels["concurrency"] * 16).all()
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["mode"] == "local"

    rep = run_sweep_cli("report", str(out), timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "ngram" in rep.stdout
    assert (out / "report" / "report.md").is_file()
    # nothing of the sweep is left running: no server, no scheduler
    left = [p.info["name"] for p in _sglang_processes() if p.pid not in before]
    assert not left, left


def _sglang_processes() -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] in ("sglang::scheduler", "sglang::detokenizer")
        or "sglang.launch_server" in " ".join(p.info["cmdline"] or [])
    ]
