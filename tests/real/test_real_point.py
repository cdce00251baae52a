"""One point on a CPU host against real SGLang, start to finish, and the ways a real server fails:
each recorded with the real reason and phase, and nothing left running afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from sweep.core.checks import lines
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.experiment.config import CpuConfig, ReapConfig, Timeouts
from sweep.host import reaper
from sweep.host.gpu import NoGpus
from sweep.host.point import HostContext, LaunchPoint, LaunchSpec, run_launch
from tests.conftest import free_port
from tests.waiting import wait_until

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(900)]

SWEEP = f"real-{uuid.uuid4().hex[:6]}"
BENCH = BenchSettings(
    prompts="coding",
    single_stream=SingleStreamSettings(runs=1, warmup=1, max_tokens=24),
    concurrency=ConcurrencySettings(levels=[1, 2], rounds=1, max_tokens=16),
    request_timeout_s=120,
)
TIMEOUTS = Timeouts(load_s=300, capture_s=300, ready_s=180, total_s=420, stall_s=180, stop_grace_s=20)


@pytest.fixture
def host():
    ctx = HostContext(f"cpu-{uuid.uuid4().hex[:6]}", NoGpus(), "node")
    yield ctx
    left = reaper.marked(reaper.Marker(SWEEP, ctx.name))
    for p in left:
        p.kill()
    assert not left, f"processes left behind: {[(p.pid, p.name()) for p in left]}"


def spec_for(
    real, tmp_path, flags: dict | None = None, bench: BenchSettings = BENCH, paths: dict | None = None
) -> LaunchSpec:
    """A point of the real server: its base flags and ``flags`` ({name: value})."""
    return LaunchSpec(
        SWEEP,
        real.launcher,
        {**real.base_flag_map(free_port()), **(flags or {})},  # device cpu, its attention backend
        dict(real.env),
        str(tmp_path / "server.log"),
        [LaunchPoint("p" + uuid.uuid4().hex[:8], "label", bench)],
        TIMEOUTS,
        ReapConfig(wait_s=20),
        paths=paths or {"model_path": str(real.models / "target")},
        cpu=CpuConfig(min_free_mem_gib=1.0),
        check_rules=False,
    )  # these tests meet the engine's own checks, not the sweep's rules


def test_baseline_start_to_finish(real_sglang, tmp_path, host):
    spec = spec_for(real_sglang, tmp_path)
    stages = []
    [r] = run_launch(spec, host, lambda e: stages.append(e.stage)).points
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-3000:])
    # every startup event the real log prints is timed; CPU servers capture no CUDA graphs
    for k in ("load_s", "kv_cache_s", "http_s", "ready_s", "startup_s"):
        assert r.phases[k] is not None and r.phases[k] >= 0, (k, r.phases)
    assert r.phases["capture_s"] is None
    # SGLang's own "Engine startup timings (s): ..." line, recorded beside the sweep's timings
    assert r.phases["engine_load_weight_s"] is not None and r.phases["engine_scheduler_e2e_s"] > 0
    assert r.phases["engine_cuda_graph_decode_s"] == 0.0  # CPU: no graphs
    assert r.phases["engine_tokenizer_e2e_s"] <= r.phases["startup_s"]
    # the real weight-loading bar ("Multi-thread loading shards: 100% Completed | 1/1") was seen
    assert any(p["kind"] == "load" and p["n"] == p["total"] == 1 for p in r.startup_progress), r.startup_progress
    assert r.phases["startup_s"] >= r.phases["load_s"]
    assert r.gpu_name == "cpu" and r.gpu_count == 0
    assert any(c.startswith("ok: CPU kernels load") for c in lines(r.checks)), lines(r.checks)
    assert any("memory free" in c for c in lines(r.checks)), lines(r.checks)
    assert r.levels.num_rows == 2 and r.single_stream.num_rows == 1
    assert stages[:2] == ["preflight", "load"] and "benchmark" in stages
    assert r.reaped["port_free"]
    assert reaper.port_free(spec.port)


@pytest.fixture
def no_speculation_check(monkeypatch):
    """Let a speculative server launch on a CPU without AMX, to see what real SGLang does there."""
    from sweep.host import cpu

    monkeypatch.setattr(cpu, "check_speculation", lambda *a, **k: None)


def test_topk_without_steps_dies_with_a_bare_assertion(real_sglang, tmp_path, host, no_speculation_check):
    spec = spec_for(
        real_sglang,
        tmp_path,
        {
            "speculative-algorithm": "EAGLE3",
            "speculative-draft-model-path": str(real_sglang.models / "eagle3"),
            "speculative-eagle-topk": 4,
        },
    )
    [r] = run_launch(spec, host).points
    assert r.status == "failed" and r.failure_phase == "load", (r.failure_phase, r.failure_reason)
    assert "AssertionError" in r.failure_reason
    # at once: while SGLang resolves its arguments in the launcher, before it prints them
    # (server_args=...), starts a scheduler or loads a weight; no startup phase was timed
    log = Path(spec.log_path).read_text(errors="replace")
    assert "server_args=" not in log and "Load weight begin" not in log, log[-3000:]
    assert r.phases["load_s"] is None and r.phases["startup_s"] is None


def test_speculation_without_amx(real_sglang, tmp_path, host, monkeypatch):
    """What SGLang as shipped does with a speculative server where it sees no AMX (torch_native, not
    taught speculation by the installer), and how fast the sweep says so."""
    if real_sglang.speculates:
        pytest.skip("this install serves speculative decoding (installed by cluster/sglang-cpu-x86/install.sh)")
    spec = spec_for(real_sglang, tmp_path, {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 8})
    t0 = time.monotonic()
    [r] = run_launch(spec, host).points
    caught_in = time.monotonic() - t0
    assert r.status == "failed" and r.failure_phase == "preflight", (r.failure_phase, r.failure_reason)
    assert "torch_native" in r.failure_reason
    from sweep.host import cpu

    monkeypatch.setattr(cpu, "check_speculation", lambda *a, **k: None)
    t0 = time.monotonic()
    [r] = run_launch(spec, host).points
    died_in = time.monotonic() - t0
    assert r.status == "failed", r.failure_reason
    assert "NoneType" in r.failure_reason and "shape" in r.failure_reason, (r.failure_reason, r.log_tail[-2000:])
    print(f"speculation without AMX: pre-flight says so in {caught_in:.1f} s; the server dies after {died_in:.1f} s")


def test_missing_drafter_is_caught_in_preflight(real_sglang, tmp_path, host, no_speculation_check):
    missing = str(tmp_path / "no-such-drafter")
    spec = spec_for(
        real_sglang,
        tmp_path,
        {
            "speculative-algorithm": "EAGLE3",
            "speculative-draft-model-path": missing,
            "speculative-num-steps": 2,
            "speculative-eagle-topk": 1,
            "speculative-num-draft-tokens": 3,
        },
        paths={"model_path": str(real_sglang.models / "target"), "draft model path": missing},
    )
    [r] = run_launch(spec, host).points
    assert r.status == "failed" and r.failure_phase == "preflight"
    assert missing in r.failure_reason and "does not exist" in r.failure_reason


def test_missing_drafter_unchecked_fails_with_the_servers_reason(real_sglang, tmp_path, host, no_speculation_check):
    """Without the path check (a path only the server resolves), the real server's own error is kept."""
    missing = str(tmp_path / "no-such-drafter")
    spec = spec_for(
        real_sglang,
        tmp_path,
        {
            "speculative-algorithm": "EAGLE3",
            "speculative-draft-model-path": missing,
            "speculative-num-steps": 2,
            "speculative-eagle-topk": 1,
            "speculative-num-draft-tokens": 3,
        },
    )
    [r] = run_launch(spec, host).points
    assert r.status == "failed" and r.failure_phase == "load", (r.failure_phase, r.failure_reason)
    assert r.failure_reason and "exit code" not in r.failure_reason, r.log_tail[-3000:]


def test_scheduler_killed_mid_benchmark(real_sglang, tmp_path, host):
    bench = BenchSettings(
        prompts="coding",
        single_stream=SingleStreamSettings(runs=0, warmup=0),
        concurrency=ConcurrencySettings(levels=[2], rounds=40, max_tokens=64),
        request_timeout_s=60,
    )
    spec = spec_for(real_sglang, tmp_path, bench=bench)
    killed = []

    def kill_scheduler(ev: dict) -> None:
        if ev.stage == "benchmark" and not killed:
            threading.Thread(
                target=_kill_scheduler_soon, args=(host.name, Path(spec.log_path), killed), daemon=True
            ).start()

    [r] = run_launch(spec, host, kill_scheduler).points
    assert killed, "the scheduler was never killed while benchmark requests ran (see the thread's error)"
    assert r.status == "failed" and r.failure_phase == "benchmark", (r.failure_phase, r.failure_reason)
    assert r.failure_reason
    assert reaper.port_free(spec.port)


def _prefills(log_path: Path) -> int:
    return log_path.read_text(errors="replace").count("Prefill batch")


def _kill_scheduler_soon(host_name: str, log_path: Path, killed: list) -> None:
    """SIGKILL the point's scheduler once a benchmark request is under way (the scheduler has logged
    a prefill since the benchmark began). Its environ no longer shows the marker (setproctitle), so
    it is found the way the reaper finds it: by the server's session."""

    def scheduler() -> psutil.Process | None:
        for p in reaper.marked(reaper.Marker(SWEEP, host_name)):
            try:
                if p.name() == "sglang::scheduler":
                    return p
            except psutil.NoSuchProcess:
                continue
        return None

    before = _prefills(log_path)  # the readiness check's own request is among these
    victim = wait_until(scheduler, 60, "the point's scheduler process", interval=0.2)
    wait_until(lambda: _prefills(log_path) > before, 60, "a benchmark request reaches the scheduler", interval=0.1)
    os.kill(victim.pid, signal.SIGKILL)
    killed.append(victim.pid)
