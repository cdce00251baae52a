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

A server over several hosts: the benchmark runs on node 0 and samples node 0's GPUs only; each
other node samples its own GPUs for as long as its ranks run (``Recorder``: timestamped samples,
``Series``) and sends them to the driver, which folds them into the levels (``with_nodes``: each
level's window is its ``level_started_at``..``level_ended_at``). Per level, the mean is the sum over
nodes of each node's mean over the window, the energy that sum x the wall time, the peak the largest
sum of node 0's samples and each other node's sample nearest in time (within one sampling period);
where no node 0 sample has every node's partner that close, the peak is null. (A level shorter than
a sampling period may hold no sample of another node: that node's samples from one period before
the window count then.) A node without a sample in the window leaves every summed column null (a partial sum is not the whole), and
``power_nodes`` says how many nodes the figures cover (1 for a one-host server).
Node clocks are compared as they are (``time.time()``): hosts must keep NTP time, as Ray's own
timeline assumes.
"""

from __future__ import annotations

import asyncio
import bisect
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import pyarrow as pa

PowerSource = Callable[[], Optional[Sequence[float]]]
POWER_EVERY_S = 0.5  # NVML's own figure is an average over about a second
COLUMNS = (
    "power_mean_w",
    "power_peak_w",
    "energy_j",
    "energy_per_token_j",
    "power_samples",
    "power_gpus",
    "power_nodes",
)
Sample = tuple[float, float, int]  # (time.time(), watts summed over the GPUs, GPUs summed)
Series = list[Sample]


def only(source: PowerSource, first: int, count: int) -> PowerSource:
    """``source`` over the GPUs the server uses, ``first`` .. ``first + count - 1`` of its list (SGLang
    places a server's ranks on consecutive GPUs from ``--base-gpu-id``; ``sweep.core.flags.ServerFlags.node_gpus``):
    a TP=4 server on an 8-GPU host is measured on its 4, not the host's 8 (the other 4 idle, or
    another process's). None where the host lists fewer GPUs than that (no figure rather than a part)."""

    def read() -> Optional[Sequence[float]]:
        watts = source()
        if watts is None or len(watts) < first + count:
            return None
        return list(watts)[first : first + count]

    return read


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


def _energy_columns(mean: float, peak: Optional[float], wall_s: Optional[float], output_tokens: int) -> dict:
    energy = mean * wall_s if wall_s is not None and wall_s > 0 else None
    return {
        "power_mean_w": mean,
        "power_peak_w": peak,
        "energy_j": energy,
        "energy_per_token_j": energy / output_tokens if energy is not None and output_tokens > 0 else None,
    }


def columns(samples: Sequence[float], gpus: int, wall_s: Optional[float], output_tokens: int) -> dict:
    """The ``levels`` power and energy columns from a level's samples (all null without any)."""
    if not samples:
        return dict.fromkeys(COLUMNS)
    return {
        **_energy_columns(sum(samples) / len(samples), max(samples), wall_s, output_tokens),
        "power_samples": len(samples),
        "power_gpus": gpus,
        "power_nodes": 1,
    }


class Recorder:
    """A ``PowerSource`` that keeps a timestamped copy of every reading it passes on (``series``);
    ``sample()`` reads once more. Safe to call from the Meter's threads."""

    def __init__(self, source: PowerSource, clock: Callable[[], float] = time.time):
        self.source, self.clock = source, clock
        self.series: Series = []
        self._lock = threading.Lock()

    def __call__(self) -> Optional[Sequence[float]]:
        watts = _read(self.source)
        if watts is not None:
            with self._lock:
                self.series.append((self.clock(), sum(watts), len(watts)))
        return watts

    def sample(self) -> None:
        self()

    def snapshot(self) -> Series:
        """A copy of the samples so far, left in place (a point of a launch posted before it ends)."""
        with self._lock:
            return list(self.series)

    def take(self) -> Series:
        """The samples since the last ``take`` (a follower sends them in batches)."""
        with self._lock:
            out, self.series = self.series, []
        return out


def _within(series: Series, start: float, end: float) -> Series:
    return [s for s in series if start <= s[0] <= end]


def _nearest(series: Series, times: list[float], t: float, tolerance_s: float) -> Optional[Sample]:
    i = bisect.bisect_left(times, t)
    near = [series[j] for j in (i - 1, i) if 0 <= j < len(series)]
    best = min(near, key=lambda s: abs(s[0] - t), default=None)
    return best if best is not None and abs(best[0] - t) <= tolerance_s else None


def node_columns(
    row: Mapping[str, Any],
    node0: Series,
    others: Mapping[int, Series],
    nnodes: int,
    output_tokens: Optional[int] = None,
    every_s: float = POWER_EVERY_S,
) -> dict:
    """The power columns of one level of a server over ``nnodes`` hosts (see the module docstring):
    ``row`` is the level as node 0 measured it (its window and wall time), ``node0`` node 0's samples,
    ``others`` {node rank: samples} of the other nodes. Pure."""
    start, end = row.get("level_started_at"), row.get("level_ended_at")
    if start is None or end is None:
        return {c: row.get(c) for c in COLUMNS}
    tokens = output_tokens if output_tokens is not None else _tokens_of(row)
    end_tol = end + every_s  # the Meter's last sample is taken as the level ends, a moment after
    nodes = {0: _within(sorted(node0), start, end_tol)}
    for r in range(1, nnodes):  # a level shorter than a sampling period: the samples one period around it
        mine = sorted(others.get(r, []))
        nodes[r] = _within(mine, start, end_tol) or _within(mine, start - every_s, end_tol)
    have = [r for r, ss in nodes.items() if ss]
    if len(have) < nnodes:  # a node without a figure: no total (how many nodes had one is kept)
        return {**dict.fromkeys(COLUMNS), "power_nodes": len(have)}
    mean = sum(sum(s[1] for s in ss) / len(ss) for ss in nodes.values())
    times = {r: [s[0] for s in ss] for r, ss in nodes.items()}
    peaks = []
    for t, w, _ in nodes[0]:
        partners = [_nearest(nodes[r], times[r], t, every_s) for r in range(1, nnodes)]
        if all(p is not None for p in partners):
            peaks.append(w + sum(p[1] for p in partners if p is not None))
    return {
        **_energy_columns(mean, max(peaks, default=None), row.get("wall_s"), tokens),
        "power_samples": sum(len(ss) for ss in nodes.values()),
        "power_gpus": sum(ss[-1][2] for ss in nodes.values()),
        "power_nodes": nnodes,
    }


def _tokens_of(row: Mapping[str, Any]) -> int:
    """A level's output tokens (of its ok requests): ``output_throughput`` x ``wall_s``."""
    rate, wall = row.get("output_throughput"), row.get("wall_s")
    return round(rate * wall) if rate is not None and wall is not None else 0


def with_nodes(
    levels: pa.Table | None, node0: Series, others: Mapping[int, Series], nnodes: int, every_s: float = POWER_EVERY_S
) -> pa.Table | None:
    """A ``levels`` Arrow table with its power columns over every node (``node_columns`` per row)."""
    import pyarrow as pa  # lazy: pyarrow is slow to import; only this path needs it

    if levels is None or levels.num_rows == 0 or nnodes <= 1:
        return levels
    rows = levels.to_pylist()
    for row in rows:
        row.update(node_columns(row, node0, others, nnodes, every_s=every_s))
    return pa.Table.from_pylist(rows, schema=levels.schema)
