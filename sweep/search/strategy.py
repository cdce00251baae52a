"""The search as the driver holds it: one declared protocol, ``Search``, that every way of choosing
the points to run implements: ``GridOrder`` (``search.strategy: grid``), ``AdaptiveSearch``
(``search.strategy: adaptive``), and the orchestrator's ``BaselineGate``, which wraps either.

The driver asks for points (``take``) as its hosts free up, tells the search what each point
measured (``record``: its tables, or None when it failed), and, when nothing is left to hand out,
asks which points the search decided need not run (``pruned``). Pure: no I/O, no Ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

P = TypeVar("P")

Tables = Mapping[str, "pl.DataFrame | pa.Table | None"]
"""What a point measured, as the driver tells the search: ``levels``, ``requests``, ``single_stream``
(the Arrow tables a host returns, or polars frames read back from the results directory)."""


class Search(Protocol[P]):
    """Which points of the plan run, and when: handed out in batches, told what each measured."""

    def take(self, n: int) -> list[P]:
        """Up to ``n`` points to run now, each handed out once (fewer, or none, when the search waits
        for what the points running will measure, or has nothing left)."""
        ...

    def record(self, point_id: str, tables: Tables | None) -> None:
        """A point handed out has finished: what it measured (None: it failed)."""
        ...

    def pruned(self) -> dict[str, str]:
        """The points the search decided need not run: point id -> why."""
        ...
