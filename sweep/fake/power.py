"""The fake's stand-in for NVML's power gauge: what its GPUs draw, in the GPU ledger.

The server process runs the scheduler, so it knows every forward it ran (``Engine.excess_j``: the
joules above idle of each forward, from ``model.forward_power_w``). Every ``model.POWER_EVERY_S`` it
writes the mean draw of that interval for each GPU of its ranks (``ledger_power_record``); the host's
``FakeGpus.power`` reads it as ``NvmlProbe.power`` reads NVML. Like NVML's own figure it is an
average over a short recent window, not an instant.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Protocol, Sequence

from sweep.core import ledger_power_record
from sweep.fake import model


class _Busy(Protocol):
    excess_j: float  # per GPU: joules above idle of the forwards so far


def interval_power_w(excess_j: float, seconds: float) -> float:
    """Mean watts of one GPU over ``seconds`` in which its forwards drew ``excess_j`` above idle
    (at most ``model.TDP_W``: an engine catching up on its schedule runs steps back to back)."""
    if seconds <= 0:
        return model.IDLE_W
    return min(model.TDP_W, model.IDLE_W + max(excess_j, 0.0) / seconds)


async def report(engine: _Busy, ledger_dir: Path, gpus: Sequence[int], every_s: float = model.POWER_EVERY_S) -> None:
    """Write the GPUs' draw into the ledger now (idle) and after every ``every_s``, forever."""
    pid = os.getpid()
    ledger_power_record(ledger_dir, pid, {g: model.IDLE_W for g in gpus})
    last_t, last_j = time.perf_counter(), engine.excess_j
    while True:
        await asyncio.sleep(every_s)
        now, joules = time.perf_counter(), engine.excess_j
        watts = interval_power_w(joules - last_j, now - last_t)
        ledger_power_record(ledger_dir, pid, {g: watts for g in gpus})
        last_t, last_j = now, joules
