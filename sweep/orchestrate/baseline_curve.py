"""Crossover refinement's input: a speculative point's baseline curve (``RunContext.baseline_curve``).

With ``benchmark.concurrency.refine`` on, a point with a matched baseline (the plan's ``baseline_id``,
as the analysis matches them) bisects where its throughput crosses the baseline's
(``sweep.bench.refine``); for that its spec's run context (``sweep.core.run_context``, beside the
user's benchmark settings, never inside them) must carry the baseline's output throughput per level.
To make that deterministic, :class:`BaselineGate` wraps the search: a point whose baseline is still to
run (or running) is held back until that baseline's result is recorded, then handed out with the
curve in its spec; a baseline recorded by an earlier run of the directory gives its curve from the
results on disk. A baseline that failed, or left no levels, releases its points without a curve
(they still refine SLO boundaries). Baselines come first in the grid's order, so on a cluster the
wait costs only the slots the held points could have taken meanwhile; if nothing is running and
only held points are left (an adaptive search that has not handed the baseline out), they go
without a curve rather than wait forever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import replace
from typing import Any, Optional

from sweep.experiment import Experiment, PlannedPoint
from sweep.host import LaunchSpec
from sweep.results import as_measured, store
from sweep.search import Search, Tables


def curve_of(levels: Any) -> list[list[float]]:
    """``[[C, output tok/s], ...]`` of one point's levels table (Arrow or polars), ascending C; the
    levels with no throughput are left out."""
    if levels is None:
        return []
    rows = levels.to_pylist() if hasattr(levels, "to_pylist") else levels.to_dicts()
    out = {
        int(r["concurrency"]): float(r["output_throughput"])
        for r in rows
        if r.get("concurrency") and r.get("output_throughput") is not None and r.get("output_throughput") > 0
    }
    return [[float(c), out[c]] for c in sorted(out)]


def _with_curve(spec: LaunchSpec, curve: list[list[float]]) -> LaunchSpec:
    """``spec`` (a point's own: ``specs``) whose points' run context carries ``curve`` as their
    baseline's (their benchmark settings, the user's, left as they are)."""
    given = tuple((float(c), float(t)) for c, t in curve)
    return replace(spec, points=[replace(p, context=replace(p.context, baseline_curve=given)) for p in spec.points])


class BaselineGate(Search[PlannedPoint]):
    """A search (``take``/``record``/``pruned``) whose speculative points wait for their baselines'
    curves; ``specs`` (point id -> LaunchSpec) is updated in place as curves arrive. ``earlier``:
    a baseline id recorded before this run -> its levels table (or None when it has none)."""

    def __init__(
        self,
        inner: Search[PlannedPoint],
        todo: list[PlannedPoint],
        specs: MutableMapping[str, LaunchSpec],
        earlier: Callable[[str], Optional[Any]],
    ):
        self.inner, self.specs = inner, specs
        self._baseline = {p.id: p.baseline_id for p in todo if not p.baseline and p.baseline_id}
        self._pending = {p.id for p in todo if p.baseline}  # baselines this run measures
        self._curves: dict[str, list[list[float]]] = {}
        for bid in set(self._baseline.values()) - self._pending:
            self._curves[bid] = curve_of(earlier(bid))
        self._held: list[PlannedPoint] = []
        self._running = 0

    def _ready(self, p: PlannedPoint) -> bool:
        bid = self._baseline.get(p.id)
        return bid is None or bid not in self._pending

    def _release(self, p: PlannedPoint) -> PlannedPoint:
        bid = self._baseline.get(p.id)
        if bid is not None and self._curves.get(bid):
            self.specs[p.id] = _with_curve(self.specs[p.id], self._curves[bid])
        return p

    def take(self, n: int) -> list[PlannedPoint]:
        out = [p for p in self._held if self._ready(p)][: max(n, 0)]
        self._held = [p for p in self._held if p not in out]
        while len(out) < n:
            more = self.inner.take(n - len(out))
            if not more:
                break
            for p in more:
                (out if self._ready(p) else self._held).append(p)
        if not out and self._held and self._running == 0:  # nothing will record a baseline: go without
            out, self._held = self._held[: max(n, 1)], self._held[max(n, 1) :]
            self._pending -= {self._baseline[p.id] for p in out}
        self._running += len(out)
        return [self._release(p) for p in out]

    def record(self, point_id: str, tables: Optional[Tables]) -> None:
        self._running -= 1
        if point_id in self._pending:
            self._pending.discard(point_id)
            self._curves[point_id] = curve_of((tables or {}).get("levels"))
        self.inner.record(point_id, tables)

    def pruned(self) -> dict[str, str]:
        return self.inner.pruned()


def gate(
    search: Search[PlannedPoint],
    exp: Experiment,
    todo: list[PlannedPoint],
    specs: MutableMapping[str, LaunchSpec],
    earlier: Callable[[str], Optional[Any]],
) -> Search[PlannedPoint]:
    """``search`` as it is without ``concurrency.refine``; with it, behind a :class:`BaselineGate`."""
    return BaselineGate(search, todo, specs, earlier) if exp.benchmark.concurrency.refine else search


def recorded_levels(directory: Any, statuses: Mapping[str, str]) -> Callable[[str], Optional[Any]]:
    """``earlier`` for :class:`BaselineGate`: a point's levels table from the results directory,
    where an earlier run recorded it ok; None otherwise."""
    import polars as pl  # lazy: polars is slow to import; only this path needs it

    def levels(point_id: str) -> Optional[Any]:
        if statuses.get(point_id) != "ok":
            return None
        # as measured: the host compares the curve with what it measures now (a dry run's files: real speed)
        return as_measured(store.table(directory, "levels")).filter(pl.col("point_id") == point_id).collect()

    return levels
