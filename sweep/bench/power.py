"""The GPUs' power while a level runs, and the level's energy columns.

The benchmark reads no GPU itself: whoever runs it hands it a ``PowerSource``, a function that
returns the watts each GPU draws now, or None when there is no figure (the host layer passes its
probe's ``power``: NVML on a GPU host, the fake's GPU ledger on a simulated one; ``python -m sweep
bench`` passes none). ``Meter`` calls it at ``every_s`` / 2, then every ``every_s``, and once more as
the level ends (so even a level shorter than the first sample has one), each call in a thread so a
slow driver never holds up the event loop that times the requests. Each sample is the sum over the
GPUs; ``columns`` turns the samples into the ``levels`` columns: mean and peak watts, energy = mean
watts x the level's wall time, and energy per output token. Without samples every column is null
(never zero: no figure is not no power).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Optional

PowerSource = Callable[[], Optional[Sequence[float]]]
POWER_EVERY_S = 0.5  # NVML's own figure is an average over about a second
COLUMNS = ("power_mean_w", "power_peak_w", "energy_j", "energy_per_token_j", "power_samples", "power_gpus")


def _read(source: PowerSource) -> Optional[list[float]]:
    try:
        watts = source()
    except Exception:  # noqa: BLE001 - a power reading that fails is a missing sample, not a failed level
        return None
    return [float(w) for w in watts] if watts else None


class Meter:
    """Samples ``source`` while a level runs (see the module docstring); ``stop`` returns the samples
    (total watts over the GPUs, each) and how many GPUs the last one summed."""

    def __init__(self, source: PowerSource, every_s: float = POWER_EVERY_S):
        self.source = source
        self.samples: list[float] = []
        self.gpus = 0
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(max(every_s, 0.001)))

    async def _sample(self) -> None:
        watts = await asyncio.to_thread(_read, self.source)
        if watts is not None:
            self.samples.append(sum(watts))
            self.gpus = len(watts)

    async def _run(self, every_s: float) -> None:
        wait = every_s / 2
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), wait)
                return
            except asyncio.TimeoutError:
                await self._sample()
            wait = every_s

    async def stop(self, wait_s: float = 2.0) -> tuple[list[float], int]:
        self._stop.set()
        try:
            await asyncio.wait_for(self._task, wait_s)
        except asyncio.TimeoutError:
            pass
        await self._sample()  # the level's end
        return self.samples, self.gpus


def columns(samples: Sequence[float], gpus: int, wall_s: Optional[float], output_tokens: int) -> dict:
    """The ``levels`` power and energy columns from a level's samples (all null without any)."""
    if not samples:
        return dict.fromkeys(COLUMNS)
    mean = sum(samples) / len(samples)
    energy = mean * wall_s if wall_s is not None and wall_s > 0 else None
    return {"power_mean_w": mean, "power_peak_w": max(samples), "energy_j": energy,
            "energy_per_token_j": energy / output_tokens if energy is not None and output_tokens > 0 else None,
            "power_samples": len(samples), "power_gpus": gpus}
