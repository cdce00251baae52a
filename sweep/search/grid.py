"""``search.strategy: grid``: every point of the plan, handed out at once in the plan's order
(baselines first), as the sweep has always run them."""

from __future__ import annotations

from collections.abc import Sequence

from sweep.search.strategy import P, Search, Tables


class GridOrder(Search[P]):
    """The ``Search`` that decides nothing: every point at once, in the plan's order."""

    def __init__(self, todo: Sequence[P]):
        self._left = list(todo)

    def take(self, n: int) -> list[P]:
        """Every point not yet handed out (Ray queues what the hosts cannot take yet)."""
        out, self._left = self._left, []
        return out

    def record(self, point_id: str, tables: Tables | None) -> None:
        """The grid decides nothing from what a point measured."""

    def pruned(self) -> dict[str, str]:
        return {}
