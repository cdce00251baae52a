"""What a host's GPUs hold: through NVML on a real host, through the GPU ledger in dry runs.

Both probes answer the same three questions the host layer asks: which GPUs are there (name, memory
total and used), which processes hold memory on them, and what each draws now (watts, for the
benchmark's energy columns; None where the host has no power source: no NVML, or a GPU whose
driver reports no power).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from sweep.core import ConfigError, ledger_power, ledger_read


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

    def power(self) -> list[float] | None:
        """Watts each GPU of ``gpus()`` draws now (idle draw included); None: no power source."""
        ...


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

    def power(self) -> list[float] | None:
        return None


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
            out.append(
                Gpu(i, name.decode() if isinstance(name, bytes) else name, mem.total // 2**20, mem.used // 2**20)
            )
        return out

    def processes(self) -> list[GpuProcess]:
        out = []
        for i, h in self._handles():
            for p in self._nv.nvmlDeviceGetComputeRunningProcesses(h):
                out.append(GpuProcess(p.pid, i, (p.usedGpuMemory or 0) // 2**20))
        return out

    def power(self) -> list[float] | None:
        """NVML's power gauge (``nvmlDeviceGetPowerUsage``, milliwatts; on recent GPUs an average over
        the last second or so) of each GPU; None when the driver reports none (NVMLError_NotSupported)."""
        try:
            return [self._nv.nvmlDeviceGetPowerUsage(h) / 1000.0 for _, h in self._handles()]
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported, _GpuIsLost...: no figure, not a failure
            return None


class FakeGpus:
    """Simulated GPUs of a dry-run host: memory used is what live processes recorded in the fake
    server's ledger (sweep.core.ledger); power is what the fake server reports there from its
    performance model, ``idle_power_w`` on a GPU no live server reports on (the fake's own idle
    figure, ``sweep.fake.model.IDLE_W``)."""

    def __init__(
        self,
        ledger_dir: str | Path,
        count: int = 8,
        name: str = "NVIDIA H200 (simulated)",
        mem_total_mib: int = 143_771,
        baseline_used_mib: int = 500,
        idle_power_w: float = 75.0,
    ):
        self.ledger_dir = Path(ledger_dir)
        self.count = count
        self.name = name
        self.mem_total_mib = mem_total_mib
        self.baseline_used_mib = baseline_used_mib  # what an idle driver shows
        self.idle_power_w = idle_power_w

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

    def power(self) -> list[float] | None:
        reported = ledger_power(self.ledger_dir)
        return [reported.get(i, self.idle_power_w) for i in range(self.count)]


def real_probe() -> GpuProbe:
    """NVML where it works, else a probe that reports no GPU with NVML's own words (pre-flight then
    says why: ``NVMLError_DriverNotLoaded: Driver Not Loaded`` is not ``nvidia-ml-py`` missing)."""
    try:
        return NvmlProbe()
    except ImportError as e:  # nvidia-ml-py (pynvml) is not installed
        return NoGpus(f"no GPU found: NVML is not available ({e}; install nvidia-ml-py, the gpu extra)")
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound, _DriverNotLoaded, _NoPermission...
        said = str(e).strip() or "no message"
        return NoGpus(
            f"no GPU found: NVML failed to start: {type(e).__name__}: {said} "
            "(check the NVIDIA driver: nvidia-smi on this host)"
        )


def power_source(text: str | None) -> Callable[[], list[float] | None] | None:
    """The ``PowerSource`` ``--power`` names (None without it): NVML's gauge of this machine's GPUs
    (``nvml:0,1``: those indices only), or the fake's GPU ledger (``ledger:DIR``). Refused before
    the benchmark starts where it gives no figure."""
    if text is None:
        return None
    kind, _, rest = text.partition(":")
    if kind == "ledger":
        if not Path(rest).is_dir():
            raise ConfigError(
                f"--power {text}: no GPU ledger at {rest}",
                fix="pass the directory the fake server writes (its --fake-ledger or $SWEEP_FAKE_GPU_LEDGER)",
            )
        ledger = FakeGpus(rest)
        return ledger.power
    probe = real_probe()
    reason = getattr(probe, "reason", None)
    if reason is not None:
        raise ConfigError(
            f"--power {text}: {reason}",
            fix="run on a host with NVIDIA GPUs and nvidia-ml-py (pip install nvidia-ml-py), or drop --power",
        )
    indices = [int(x) for x in rest.split(",")] if rest else None
    known = [g.index for g in probe.gpus()]
    if indices is not None and not set(indices) <= set(known):
        raise ConfigError(
            f"--power {text}: no GPU {sorted(set(indices) - set(known))} here (GPUs {known})",
            fix=f"choose among {','.join(map(str, known))}",
        )
    if probe.power() is None:
        raise ConfigError(
            f"--power {text}: the driver reports no power for these GPUs (NVMLError_NotSupported)",
            fix="drop --power; nvidia-smi -q -d POWER shows what the driver reports",
        )
    if indices is None:
        return probe.power

    def chosen() -> list[float] | None:
        watts = probe.power()
        return None if watts is None else [w for g, w in zip(known, watts) if g in indices]

    return chosen
