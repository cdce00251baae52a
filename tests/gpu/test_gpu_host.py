"""The host layer against a real NVIDIA GPU, as it was once checked by hand on an H200: the NVML probe
against nvidia-smi; a foreign GPU holder refused in pre-flight, then killed with
kill_foreign_gpu_processes; escaped holders of both kinds reaped with GPU memory back; the levels'
power columns against nvidia-smi over the same windows, through ``python -m sweep bench --power``.
Each prints its figures (``-s`` or ``-rP`` shows them; run_gpu_tier.sh does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from sweep.core.errors import PointFailure
from sweep.host import reaper
from sweep.host.preflight import PreflightReport, check_gpus
from tests.conftest import REPO, free_port
from tests.gpu.conftest import HOLD, alive, smi, smi_power, wait_gpu_visible

pytestmark = pytest.mark.gpu
HOLD_MIB = 1024


def test_nvml_probe_matches_nvidia_smi(nvidia):
    probe = [(g.index, g.name, g.mem_used_mib, g.mem_total_mib) for g in nvidia.gpus()]
    theirs = smi()
    print("\nNVML probe :", probe, "\nnvidia-smi :", theirs)
    assert [(i, n, t) for i, n, _, t in probe] == [(i, n, t) for i, n, _, t in theirs if i in {p[0] for p in probe}]
    for (_, _, mine, _), (_, _, smis, _) in zip(probe, theirs):
        assert abs(mine - smis) <= 64, (probe, theirs)  # read a moment apart; the same gauge


def test_foreign_holder_refused_in_preflight_then_killed_when_allowed(nvidia, holder, marker):
    before = max(g.mem_used_mib for g in nvidia.gpus())
    free_mib = before + HOLD_MIB // 2
    p = holder(HOLD_MIB, dict(os.environ))  # no marker: foreign
    wait_gpu_visible(nvidia, p.pid)
    with pytest.raises(PointFailure) as refused:
        check_gpus(nvidia, 1, free_mib, PreflightReport())
    print("\npre-flight:", refused.value.reason)
    assert str(p.pid) in refused.value.reason and refused.value.phase == "preflight"
    spared = reaper.reap(marker, nvidia, port=None, grace_s=2, gpu_free_mib=free_mib, wait_s=5)
    assert alive(p.pid) and [f["pid"] for f in spared.foreign] == [p.pid] and not spared.gpu_free
    rep = reaper.reap(marker, nvidia, port=None, grace_s=2, gpu_free_mib=free_mib, wait_s=30, kill_foreign=True)
    print("reaped:", json.dumps(rep.killed))
    (entry,) = [k for k in rep.killed if k["pid"] == p.pid]
    assert entry["found_by"] == "gpu" and "kill_foreign_gpu_processes is on" in entry["reason"]
    assert rep.gpu_free and not alive(p.pid)
    check_gpus(nvidia, 1, free_mib, PreflightReport())  # free again


# The launcher of a server that leaves two GPU holders ignoring SIGTERM, then exits: one orphaned in
# the server's session and its own process group, its environment without the marker (as SGLang's
# setproctitle'd children); one in a new session, the marker in its environment.
LAUNCHER = r"""
import json, os, subprocess, sys
hold, mib = sys.argv[1], sys.argv[2]
bare = {k: v for k, v in os.environ.items() if not k.startswith("SWEEP_")}
a = subprocess.Popen([sys.executable, "-c", hold, mib, "1"], env=bare, stdout=subprocess.PIPE, text=True,
                     process_group=0)
b = subprocess.Popen([sys.executable, "-c", hold, mib, "1"], stdout=subprocess.PIPE, text=True,
                     start_new_session=True)
assert a.stdout.readline().strip() == "holding" and b.stdout.readline().strip() == "holding"
print(json.dumps({"session_orphan": a.pid, "marked_escapee": b.pid}), flush=True)
"""


def test_escaped_holders_of_both_kinds_are_reaped(nvidia, holder, marker):
    before = max(g.mem_used_mib for g in nvidia.gpus())
    threshold = before + HOLD_MIB // 2
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, HOLD, str(HOLD_MIB)],
        env={**os.environ, **marker.env("gpu-point")},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    reaper.remember(marker, launcher.pid)
    pids = json.loads(launcher.stdout.readline())
    launcher.wait(timeout=30)  # gone: both holders are orphans now
    try:
        for pid in pids.values():
            wait_gpu_visible(nvidia, pid)
        assert os.getsid(pids["session_orphan"]) == launcher.pid and os.getpgid(pids["session_orphan"]) != launcher.pid
        assert os.getsid(pids["marked_escapee"]) == pids["marked_escapee"]
        rep = reaper.reap(marker, nvidia, port=None, grace_s=2, gpu_free_mib=threshold, wait_s=60)
        how = {k["pid"]: k["found_by"] for k in rep.killed}
        print("\nreaped:", json.dumps(rep.killed), "\nGPU memory after:", smi())
        assert how.get(pids["session_orphan"]) == "session" and how.get(pids["marked_escapee"]) == "marker", how
        assert all("SIGKILL after grace" in k["reason"] for k in rep.killed if k["pid"] in pids.values())
        assert rep.gpu_free and not any(alive(p) for p in pids.values())
        assert max(used for _, _, used, _ in smi()) <= threshold
    finally:
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, 9)


def test_bench_power_columns_match_nvidia_smi_over_the_same_windows(nvidia, tmp_path):
    """``python -m sweep bench --power nvml:0`` against a running (fake) server while a GPU works,
    nvidia-smi sampled alongside; each level's power_mean_w against nvidia-smi's mean over that level's
    window (level_started_at .. level_ended_at)."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweep.fake",
            "--model-path",
            "/models/m",
            "--port",
            str(port),
            "--fake-speed",
            "5",
            "--fake-startup-speed",
            "1000",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.time(), smi_power(0)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        sampler.start()
        out = tmp_path / "bench"
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "sweep",
                "bench",
                "--url",
                f"http://127.0.0.1:{port}",
                "--power",
                "nvml:0",
                "--levels",
                "1,4",
                "--rounds",
                "8",
                "--max-tokens",
                "64",
                "--runs",
                "0",
                "--out",
                str(out),
                "--quiet",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        stop.set()
        if sampler.is_alive():
            sampler.join(5)
        reaper.kill_group(server.pid, 2, "test cleanup")
    import polars as pl

    levels = pl.read_parquet(out / "levels.parquet").to_dicts()
    for row in levels:
        window = [w for t, w in samples if row["level_started_at"] <= t <= row["level_ended_at"]]
        smi_mean = sum(window) / len(window) if window else None
        print(
            f"\nC={row['concurrency']}: power_mean_w {row['power_mean_w']:.1f} W "
            f"({row['power_samples']} samples) vs nvidia-smi {smi_mean} W ({len(window)} samples)"
        )
        assert row["power_mean_w"] is not None and row["power_samples"] > 0 and row["power_gpus"] == 1
        if smi_mean is not None and len(window) >= 3:
            assert abs(row["power_mean_w"] - smi_mean) <= max(15.0, 0.1 * smi_mean), (row, smi_mean)
