"""With ``concurrency.refine``, a speculative point waits for its baseline and gets the baseline's
throughput per level in its spec (``sweep.orchestrate.baseline_curve``); without it, nothing changes."""

from __future__ import annotations

import pyarrow as pa

from sweep.core.settings import BenchSettings, ConcurrencySettings
from sweep.experiment.plan import PlannedPoint
from sweep.host.point import LaunchPoint, LaunchSpec
from sweep.orchestrate.baseline_curve import BaselineGate, curve_of, gate
from sweep.search.grid import GridOrder


def _point(pid: str, baseline_id: str | None = None) -> PlannedPoint:
    return PlannedPoint(
        id=pid,
        label=pid,
        params={},
        roles={},
        baseline=baseline_id is None,
        flags={},
        env={},
        launcher=[],
        baseline_id=baseline_id,
    )


def _spec(pid: str, bench: BenchSettings) -> LaunchSpec:
    return LaunchSpec(sweep="s", launcher=[], flags={}, env={}, log_path="", points=[LaunchPoint(pid, pid, bench)])


def _levels(pid: str, curve: dict[int, float]) -> dict:
    return {
        "levels": pa.table(
            {"point_id": [pid] * len(curve), "concurrency": list(curve), "output_throughput": list(curve.values())}
        )
    }


def test_speculative_points_wait_for_their_baseline_and_carry_its_curve():
    bench = BenchSettings(concurrency=ConcurrencySettings(levels=[1, 16], refine=True))
    todo = [_point("base"), _point("spec1", "base"), _point("spec2", "old"), _point("spec3", "base")]
    specs = {p.id: _spec(p.id, bench) for p in todo}
    search = BaselineGate(
        GridOrder(todo),
        todo,
        specs,
        earlier=lambda pid: _levels(pid, {1: 10.0, 4: 30.0})["levels"] if pid == "old" else None,
    )
    first = [p.id for p in search.take(2)]
    assert first == ["base", "spec2"]  # spec2's baseline was recorded by an earlier run
    assert specs["spec2"].points[0].context.baseline_curve == ((1.0, 10.0), (4.0, 30.0))
    assert search.take(2) == []  # spec1 and spec3 wait for "base"
    search.record("spec2", None)
    search.record("base", _levels("base", {16: 800.0, 1: 50.0}))
    assert [p.id for p in search.take(5)] == ["spec1", "spec3"]
    assert specs["spec1"].points[0].context.baseline_curve == ((1.0, 50.0), (16.0, 800.0))
    assert all(s.points[0].bench is bench for s in specs.values())  # the user's settings are left alone
    assert bench == BenchSettings(concurrency=ConcurrencySettings(levels=[1, 16], refine=True))


def test_a_failed_baseline_releases_its_points_without_a_curve():
    bench = BenchSettings(concurrency=ConcurrencySettings(refine=True))
    todo = [_point("base"), _point("spec", "base")]
    specs = {p.id: _spec(p.id, bench) for p in todo}
    search = BaselineGate(GridOrder(todo), todo, specs, earlier=lambda pid: None)
    assert [p.id for p in search.take(4)] == ["base"]
    search.record("base", None)
    assert [p.id for p in search.take(4)] == ["spec"] and specs["spec"].points[0].context.baseline_curve == ()


def test_without_refine_the_search_is_the_grid_as_before():
    todo = [_point("base"), _point("spec", "base")]
    grid = GridOrder(todo)
    assert gate(grid, type("E", (), {"benchmark": BenchSettings()})(), todo, {}, lambda pid: None) is grid
    assert curve_of(None) == []
