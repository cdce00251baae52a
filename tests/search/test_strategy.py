"""The search seam is one declared protocol (``sweep.search.strategy.Search``): the grid, the adaptive
search and the orchestrator's baseline gate implement it, and the driver holds it by that type."""

from __future__ import annotations

import inspect

from sweep.orchestrate import baseline_curve, sweep
from sweep.search.adaptive import AdaptiveSearch
from sweep.search.grid import GridOrder
from sweep.search.strategy import Search


def test_every_search_declares_the_protocol():
    for cls in (GridOrder, AdaptiveSearch, baseline_curve.BaselineGate):
        assert Search in cls.__mro__, f"{cls.__name__} does not declare the Search protocol"
        for name in ("take", "record", "pruned"):
            assert inspect.signature(getattr(cls, name)).parameters.keys() == (
                inspect.signature(getattr(Search, name)).parameters.keys()
            ), (cls, name)


def test_the_driver_holds_the_search_by_its_protocol():
    assert sweep.searcher.__annotations__["return"] == "Search[PlannedPoint]"
    assert baseline_curve.gate.__annotations__["search"] == "Search[PlannedPoint]"
    assert baseline_curve.gate.__annotations__["return"] == "Search[PlannedPoint]"
    assert baseline_curve.BaselineGate.__init__.__annotations__["inner"] == "Search[PlannedPoint]"


def test_the_grid_hands_out_everything_once_and_prunes_nothing():
    grid: Search[str] = GridOrder(["a", "b", "c"])
    assert grid.take(1) == ["a", "b", "c"] and grid.take(5) == []
    grid.record("a", None)
    assert grid.pruned() == {}
