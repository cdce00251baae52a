"""The GPU ledger: the one format the fake server and the host layer share.

Each fake TP rank writes one small JSON file per pid into a directory (``--fake-ledger DIR`` or
``$SWEEP_FAKE_GPU_LEDGER``); the host's ``FakeGpus`` (sweep.host.gpu) reads it the way its NVML probe
reads NVML's process list. Only live processes count: reading drops the files of dead ones (and of
recycled pids, by process start time), so a SIGKILLed server's memory frees itself exactly as on a
real GPU, while a surviving zombie keeps holding it. It sits in the core because both sides use it:
the fake writes it, the host reads it, and neither imports the other.

Power: the fake's HTTP process (the one that runs its scheduler) also says what each of its GPUs
draws, from its performance model, in ``DIR/power/<pid>.json`` (``ledger_power_record``), every
fraction of a second; ``FakeGpus.power`` reads it (``ledger_power``) the way ``NvmlProbe.power``
reads NVML's power gauge. A dead process's figures go the same way as its memory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import psutil

from sweep.core import atomic

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


def _power_path(directory: PathLike, pid: int) -> Path:
    return Path(directory) / "power" / f"{pid}.json"


def ledger_power_record(directory: PathLike, pid: int, watts: dict[int, float]) -> None:
    """Say that the GPUs ``pid`` runs on draw ``watts`` ({GPU index: watts}, idle draw included)."""
    path = _power_path(directory, pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"pid": pid, "start_time": _start_time(pid), "watts": {str(int(i)): float(w) for i, w in watts.items()}}
    atomic.write_text(path, json.dumps(data))


def ledger_power(directory: PathLike) -> dict[int, float]:
    """{GPU index: watts} that live processes reported (the largest where several name one GPU);
    files of dead processes are deleted on the way."""
    root = Path(directory) / "power"
    if not root.is_dir():
        return {}
    out: dict[int, float] = {}
    for path in sorted(root.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            pid = int(data["pid"])
            watts = {int(i): float(w) for i, w in dict(data["watts"]).items()}
        except (OSError, ValueError, KeyError, TypeError):
            continue
        started = _start_time(pid)
        recorded = data.get("start_time")
        if started is None or (recorded is not None and abs(started - float(recorded)) > 1.0):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            continue
        for i, w in watts.items():
            out[i] = max(out.get(i, 0.0), w)
    return out
