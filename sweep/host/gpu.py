"""What a host's GPUs hold: through NVML on a real host, through the GPU ledger in dry runs.

Both probes answer the same two questions the host layer asks: which GPUs are there (name, memory
total and used), and which processes hold memory on them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol, Union

import psutil

from sweep.core import atomic


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    mem_total_mib: int
    mem_used_mib: int


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu_index: int
    mem_mib: int


class GpuProbe(Protocol):
    def gpus(self) -> list[Gpu]: ...

    def processes(self) -> list[GpuProcess]: ...


class NoGpus:
    """A host with no GPU visible (no NVML): reported, so pre-flight can fail with a reason, which
    keeps what NVML itself said (``real_probe``)."""

    reason = "no GPU found: NVML is not available (install nvidia-ml-py and the NVIDIA driver)"

    def __init__(self, reason: str | None = None) -> None:
        if reason is not None:
            self.reason = reason

    def gpus(self) -> list[Gpu]:
        return []

    def processes(self) -> list[GpuProcess]:
        return []


class NvmlProbe:
    """Real GPUs through NVML (``nvidia-ml-py``, in the ``gpu`` extra)."""

    def __init__(self) -> None:
        import pynvml  # type: ignore[import-not-found]

        self._nv = pynvml
        pynvml.nvmlInit()

    def _handles(self):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        count = self._nv.nvmlDeviceGetCount()
        indices: range | list[int] = range(count)
        if visible and all(v.strip().isdigit() for v in visible.split(",")):
            indices = [int(v) for v in visible.split(",") if int(v) < count]
        return [(i, self._nv.nvmlDeviceGetHandleByIndex(i)) for i in indices]

    def gpus(self) -> list[Gpu]:
        out = []
        for i, h in self._handles():
            mem = self._nv.nvmlDeviceGetMemoryInfo(h)
            name = self._nv.nvmlDeviceGetName(h)
            out.append(Gpu(i, name.decode() if isinstance(name, bytes) else name,
                           mem.total // 2**20, mem.used // 2**20))
        return out

    def processes(self) -> list[GpuProcess]:
        out = []
        for i, h in self._handles():
            for p in self._nv.nvmlDeviceGetComputeRunningProcesses(h):
                out.append(GpuProcess(p.pid, i, (p.usedGpuMemory or 0) // 2**20))
        return out


class FakeGpus:
    """Simulated GPUs of a dry-run host: memory used is what live processes recorded in the fake
    server's ledger (below)."""

    def __init__(self, ledger_dir: str | Path, count: int = 8, name: str = "NVIDIA H200 (simulated)",
                 mem_total_mib: int = 143_771, baseline_used_mib: int = 500):
        self.ledger_dir = Path(ledger_dir)
        self.count = count
        self.name = name
        self.mem_total_mib = mem_total_mib
        self.baseline_used_mib = baseline_used_mib  # what an idle driver shows

    def processes(self) -> list[GpuProcess]:
        if not self.ledger_dir.is_dir():
            return []
        return [GpuProcess(e.pid, e.gpu_index, e.mem_mib) for e in ledger_read(self.ledger_dir)]

    def gpus(self) -> list[Gpu]:
        used = [self.baseline_used_mib] * self.count
        for p in self.processes():
            if 0 <= p.gpu_index < self.count:
                used[p.gpu_index] += p.mem_mib
        return [Gpu(i, self.name, self.mem_total_mib, used[i]) for i in range(self.count)]



# --- The GPU ledger: the one format the fake server and the host layer share ------------------------
# Each fake TP rank writes one small JSON file per pid into a directory (``--fake-ledger DIR`` or
# ``$SWEEP_FAKE_GPU_LEDGER``); FakeGpus reads it the way NvmlProbe reads NVML's process list. Only
# live processes count: reading drops the files of dead ones (and of recycled pids, by process start
# time), so a SIGKILLed server's memory frees itself exactly as on a real GPU, while a surviving
# zombie keeps holding it. This module owns the format; the fake (sweep.fake) only calls it.

LEDGER_ENV_VAR = "SWEEP_FAKE_GPU_LEDGER"
PathLike = Union[str, os.PathLike]

@dataclass(frozen=True)
class LedgerEntry:
    pid: int
    gpu_index: int
    mem_mib: int


def ledger_dir(cli_value: Optional[str] = None) -> Optional[Path]:
    """Where the ledger lives: the flag's value, else the environment variable, else None."""
    value = cli_value or os.environ.get(LEDGER_ENV_VAR)
    return Path(value) if value else None


def _entry_path(directory: PathLike, pid: int) -> Path:
    return Path(directory) / f"{pid}.json"


def _start_time(pid: int) -> Optional[float]:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None  # exited, only not reaped yet: a real GPU has freed its memory
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def ledger_record(directory: PathLike, pid: int, gpu_index: int, mem_mib: int) -> None:
    """Say that ``pid`` holds ``mem_mib`` MiB on GPU ``gpu_index`` (replacing what it said before)."""
    path = _entry_path(directory, pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"pid": pid, "gpu_index": int(gpu_index), "mem_mib": int(mem_mib), "start_time": _start_time(pid)}
    atomic.write_text(path, json.dumps(data))  # a reader never sees half an entry


def ledger_remove(directory: PathLike, pid: int) -> None:
    try:
        _entry_path(directory, pid).unlink()
    except FileNotFoundError:
        pass


def ledger_read(directory: PathLike) -> list[LedgerEntry]:
    """Entries of live processes, by pid; files of dead processes are deleted on the way."""
    root = Path(directory)
    if not root.is_dir():
        return []
    entries: list[LedgerEntry] = []
    for path in sorted(root.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            pid = int(data["pid"])
            entry = LedgerEntry(pid, int(data["gpu_index"]), int(data["mem_mib"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # vanished or foreign file: not ours to judge
        started = _start_time(pid)
        recorded = data.get("start_time")
        if started is None or (recorded is not None and abs(started - float(recorded)) > 1.0):
            ledger_remove(root, pid)
            continue
        entries.append(entry)
    return sorted(entries, key=lambda e: e.pid)


def real_probe() -> GpuProbe:
    """NVML where it works, else a probe that reports no GPU with NVML's own words (pre-flight then
    says why: ``NVMLError_DriverNotLoaded: Driver Not Loaded`` is not ``nvidia-ml-py`` missing)."""
    try:
        return NvmlProbe()
    except ImportError as e:  # nvidia-ml-py (pynvml) is not installed
        return NoGpus(f"no GPU found: NVML is not available ({e}; install nvidia-ml-py, the gpu extra)")
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound, _DriverNotLoaded, _NoPermission...
        said = str(e).strip() or "no message"
        return NoGpus(f"no GPU found: NVML failed to start: {type(e).__name__}: {said} "
                      "(check the NVIDIA driver: nvidia-smi on this host)")
