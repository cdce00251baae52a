"""The GPU tier: the host layer against a real NVIDIA GPU (NVML, nvidia-smi, real GPU memory holders).
Every test skips with the reason where there is no GPU: no ``nvidia-smi``, no ``pynvml``, NVML that
does not start, or (for the holders) neither torch with CUDA nor libcuda. Run it with
``tests/gpu/run_gpu_tier.sh`` (or ``python -m pytest -m gpu tests/gpu -v``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from sweep.host import reaper

pytestmark = pytest.mark.gpu

SMI_QUERY = ["nvidia-smi", "--query-gpu=index,name,memory.used,memory.total", "--format=csv,noheader,nounits"]


def _why_no_gpu() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi on PATH: no NVIDIA GPU here"
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return "nvidia-ml-py (pynvml) is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() < 1:
            return "NVML sees no GPU"
    except Exception as e:  # noqa: BLE001 - NVMLError_DriverNotLoaded, ...
        return f"NVML failed to start: {type(e).__name__}: {e}"
    return None


@pytest.fixture(scope="session")
def nvidia():
    why = _why_no_gpu()
    if why:
        pytest.skip(why)
    from sweep.host.gpu import real_probe

    return real_probe()


def smi() -> list[tuple[int, str, int, int]]:
    out = subprocess.run(SMI_QUERY, capture_output=True, text=True, timeout=30, check=True).stdout
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    return [(int(r[0]), r[1], int(r[2]), int(r[3])) for r in rows]


def smi_power(index: int) -> float:
    out = subprocess.run(
        ["nvidia-smi", "-i", str(index), "--query-gpu=power.draw", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return float(out.strip().splitlines()[0])


# A process that takes GPU memory and holds it: torch where it has CUDA, else cuMemAlloc through libcuda.
HOLD = r"""
import os, signal, sys, time
mib, ignore_term = int(sys.argv[1]), sys.argv[2] == "1"
if ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
try:
    import torch
    assert torch.cuda.is_available()
    x = torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
except Exception:
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
    assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(mib * 2**20)) == 0
print("holding", flush=True)
time.sleep(float(os.environ.get("HOLD_S", "600")))
"""


def _why_no_allocator() -> str | None:
    try:
        import torch  # type: ignore[import-not-found]

        if torch.cuda.is_available():
            return None
    except ImportError:
        pass
    import ctypes.util

    if ctypes.util.find_library("cuda") is None:
        return "neither torch with CUDA nor libcuda here: nothing can hold GPU memory"
    return None


@pytest.fixture
def holder(nvidia):
    """``start(mib, env, ignore_term=False, new_session=True)`` -> a process holding ``mib`` MiB on GPU 0
    (killed at teardown if still alive)."""
    why = _why_no_allocator()
    if why:
        pytest.skip(why)
    started: list[subprocess.Popen] = []

    def start(
        mib: int,
        env: dict[str, str],
        *,
        ignore_term: bool = False,
        new_session: bool = True,
        argv_prefix: tuple[str, ...] = (),
    ) -> subprocess.Popen:
        p = subprocess.Popen(
            [*argv_prefix, sys.executable, "-c", HOLD, str(mib), "1" if ignore_term else "0"],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=new_session,
        )
        started.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "holding", "the holder never took its memory"
        return p

    yield start
    for p in started:
        for c in reaper.tree(p.pid):
            c.kill()
        p.kill()
        p.wait(timeout=10)


def wait_gpu_visible(probe, pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(gp.pid == pid for gp in probe.processes()):
            return
        time.sleep(0.2)
    raise AssertionError(f"pid {pid} never showed in NVML's process list")


@pytest.fixture
def marker(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    return reaper.Marker(f"gpu-tier-{uuid.uuid4().hex[:8]}", "gpu-host")


def alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


__all__ = ["HOLD", "alive", "smi", "smi_power", "wait_gpu_visible", "os"]
