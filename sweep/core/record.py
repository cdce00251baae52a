"""One point's record, owned by its lifecycle: the host's ``run_launch`` makes one per point of the
server launch it ran (whatever happened), gathered in a ``LaunchResult``; the driver adds the attempts
and writes the ``points`` row from each, ``PointFinished`` carries it to
the live view and to ``sweep.run(progress=...)``, and ``sweep.SweepResult`` keeps it (without the
measured tables, which are on disk). A failure is one value, ``Failure``: where, why, and how to fix
it where the sweep knows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sweep.core.checks import Check
from sweep.core.types import FailurePhase, PointStatus

if TYPE_CHECKING:
    import pyarrow as pa

TABLES = ("requests", "single_stream", "levels", "metrics")  # what a point measured, besides its row


@dataclass(frozen=True)
class Failure:
    """Why a point failed: the phase (``points.failure_phase``), the reason (from the server's log
    where there is one) and the fix, where the sweep knows one."""

    phase: FailurePhase
    reason: str
    fix: str | None = None

    def __str__(self) -> str:
        return f"{self.phase}: {self.reason}"


class FailureParts:
    """A ``failure`` read through as the points table's columns name its parts (``failure_phase``,
    ``failure_reason``, ``failure_fix``): for the point's record and the API's view of a point."""

    failure: Failure | None

    @property
    def failure_phase(self) -> FailurePhase | None:
        return self.failure.phase if self.failure else None

    @property
    def failure_reason(self) -> str | None:
        return self.failure.reason if self.failure else None

    @property
    def failure_fix(self) -> str | None:
        """How to fix it, where the sweep knows."""
        return self.failure.fix if self.failure else None


@dataclass
class PointResult(FailureParts):
    """What happened to one point on its host, from pre-flight to the last reap, and what it measured."""

    point_id: str
    host: str
    node_id: str
    status: PointStatus  # ok | failed (invalid points never reach a host)
    failure: Failure | None = None
    log_tail: str = ""
    phases: dict[str, float | None] = field(default_factory=dict)
    startup_progress: list[dict] = field(default_factory=list)  # last progress-bar update of each kind
    sglang_version: str = "unknown"
    gpu_name: str = ""
    gpu_count: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    checks: list[Check] = field(default_factory=list)  # the pre-flight's checks (ok, skipped, warning)
    drafter_aux_layers: list[int] | None = None  # target layers the EAGLE-3 drafter reads (sweep/sglang/drafter.py)
    drafter_checks: list[Check] = field(default_factory=list)  # the drafter pre-flight's findings
    reaped: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1  # the driver's count: a point whose host was lost runs again
    port: int | None = None  # the port its server ran on (a simulated host's is chosen at launch); None: never launched
    # adaptive speculation, from the server's log (points.adaptive, points.adaptive_disabled_reason): None
    # where the point did not ask for it
    adaptive: bool | None = None
    adaptive_disabled_reason: str | None = None
    requests: pa.Table | None = None
    single_stream: pa.Table | None = None
    levels: pa.Table | None = None
    metrics: pa.Table | None = None  # the raw /metrics of each level (sweep.results.schema.METRICS)
    # this host's GPU power samples (unix time, watts summed, GPUs) while the levels ran: what the driver
    # folds the other nodes' into for a server over several hosts (sweep.bench.power.with_nodes); not written
    power_series: list[tuple[float, float, int]] = field(default_factory=list)

    def fail(self, phase: FailurePhase, reason: str, fix: str | None = None) -> None:
        self.status, self.failure = "failed", Failure(phase, reason, fix)

    @property
    def seconds(self) -> float:
        return self.ended_at - self.started_at

    @property
    def tables(self) -> dict[str, pa.Table | None]:
        return {name: getattr(self, name) for name in TABLES}

    def without_tables(self) -> PointResult:
        """The record to keep in memory once its tables are on disk."""
        return replace(self, requests=None, single_stream=None, levels=None, metrics=None, power_series=[])


@dataclass
class LaunchResult:
    """What one server launch did: one record per point it served, in the launch's order (client-side
    axes: points that differ only in their benchmark share a launch). The first point's record carries
    the startup's phases (one startup); each carries the host's record (pre-flight, reaping, port)."""

    points: list[PointResult]

    @property
    def seconds(self) -> float:
        """The launch's host time: from its start (its first point's) to its end (its last point's),
        its pre-flight, startup, every point's benchmark and its stop included."""
        if not self.points:
            return 0.0
        return max(r.ended_at for r in self.points) - min(r.started_at for r in self.points)

    @classmethod
    def shared(cls, result: PointResult, point_ids: list[str]) -> LaunchResult:
        """A launch whose one ``result`` (made for its first point: a lost host, a follower's death, a
        bug) stands for each of ``point_ids``: the same outcome under each id, without measurements,
        the startup's phases on the first only."""
        more = [
            replace(
                result,
                point_id=pid,
                requests=None,
                single_stream=None,
                levels=None,
                metrics=None,
                phases={},
                startup_progress=[],
            )
            for pid in point_ids[1:]
        ]
        return cls([replace(result, point_id=point_ids[0]) if point_ids else result, *more])
