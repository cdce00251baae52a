"""The events of a sweep, in order: one ``SweepStarted``; then, as the points go, ``PointStage`` (a
host's ``PointProgress`` with its point and host) and ``PointFinished`` (a point's record is on disk).
A host's ``PointMeasured`` (a point of a shared launch measured early) reaches the driver alone,
which records it and tells ``PointFinished``.
What ``sweep.run(progress=callback)`` receives and the live view draws. Frozen dataclasses,
picklable: a host's ``PointProgress`` crosses from its Ray task to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sweep.core.record import Failure, PointResult
from sweep.core.types import PointStatus, RunMode, Stage


@dataclass(frozen=True)
class SweepStarted:
    """The sweep knows what it will run: ``to_run`` of ``points`` (``recorded`` already have a result)."""

    experiment: str
    mode: RunMode
    path: str
    points: int
    to_run: int
    recorded: int


@dataclass(frozen=True)
class PointProgress:
    """What a host says of the point it runs, as it goes: the stage, and where the stage has details,
    those (a startup progress bar; the single-stream run; the concurrency level and its requests
    done; the node of a server over several hosts; the attempt after a host was lost). The host's
    point, the benchmark and the driver make these; the driver adds the point and the host
    (``PointStage``). Picklable: they cross from a host's task to the driver."""

    stage: Stage
    elapsed_s: float | None = None  # since the server's launch (startup stages)
    progress: str | None = None  # a startup progress bar's summary: "load 27/64 shards, 5.1 s/it, ETA 02:30"
    progress_kind: str | None = None  # load | capture | ... (one bar per kind)
    run: int | None = None  # single / warmup: this run (1-based) ...
    of: int | None = None  # ... of these; level: requests of the level
    concurrency: int | None = None  # level: its concurrency
    done: int | None = None  # level: requests finished
    stopped: bool = False  # level: ended early, having measured enough
    rate: float | None = None  # level: an open-loop level's offered rate, requests/s (concurrency 0)
    node_rank: int | None = None  # node: which node of a server that spans hosts
    attempt: int | None = None  # retry: the attempt the point runs as next (2 after its first host was lost)
    node_id: str | None = None  # start: the Ray node the task runs on (the driver watches it)
    power: tuple[tuple[float, float, int], ...] = ()  # power: a follower node's GPU samples (sweep.bench.power)
    sub_point: str | None = (
        None  # another point of the task's server launch (client-side axes) it is about; None: the task's
    )

    @property
    def title(self) -> str:
        """The stage as the live view and the progress log say it: ``node 2``,
        ``host lost, retrying (attempt 2)``, else the stage."""
        if self.stage == "node" and self.node_rank is not None:
            return f"node {self.node_rank}"
        if self.stage == "retry" and self.attempt is not None:
            return f"host lost, retrying (attempt {self.attempt})"
        return self.stage

    @property
    def detail(self) -> str:
        """What the live view shows beside the stage: the bar's summary, the run, the level's requests."""
        if self.progress:  # a startup progress bar: "load 27/64 shards, 5.1 s/it, ETA 02:30"
            text = self.progress
            return text[len(self.stage) + 1 :] if text.startswith(self.stage + " ") else text  # stage shown beside
        if self.stage == "single" and self.run is not None:
            return f"run {self.run}/{self.of if self.of is not None else '?'}"
        if self.stage == "level" and self.concurrency is not None:
            done = f" {self.done}/{self.of}" if self.done is not None and self.of is not None else ""
            return f"C={self.concurrency}{done}" + (" (measured enough: stopped)" if self.stopped else "")
        return ""


@dataclass(frozen=True, kw_only=True)
class PointStage(PointProgress):
    """A host's ``PointProgress`` with the point it is about and the host it came from: what
    ``sweep.run(progress=...)`` and the live view receive."""

    point_id: str
    label: str
    host: str

    @classmethod
    def at(cls, point_id: str, label: str, host: str, progress: PointProgress) -> PointStage:
        return cls(
            point_id=point_id,
            label=label,
            host=host,
            **{f.name: getattr(progress, f.name) for f in fields(PointProgress)},
        )


@dataclass(frozen=True)
class PointMeasured:
    """A host's word that one point of a shared server launch (client-side axes) is measured, sent
    as its benchmark ends, before the launch's other points run: its whole result, tables included
    (the startup's phases on the launch's first point; the GPU power samples up to its end). The
    driver records it at once, so a Ctrl-C, a killed driver or a host lost later in the launch keeps
    it; the launch's final result does not record it again. The launch's last point comes with
    that final result only. Crosses from the host's task to the driver through the progress board."""

    result: PointResult

    @property
    def point_id(self) -> str:
        return self.result.point_id


HostEvent = PointProgress | PointMeasured
"""What a host's point task tells the driver as it goes: its progress, and each point measured."""


@dataclass(frozen=True)
class PointFinished:
    """A point's record is on disk: the record itself (``result``, without its measured tables) and
    the point's label; its id, host, status, duration, attempts and failure read through."""

    label: str
    result: PointResult

    @property
    def point_id(self) -> str:
        return self.result.point_id

    @property
    def host(self) -> str | None:
        return self.result.host or None

    @property
    def status(self) -> PointStatus:
        return self.result.status

    @property
    def seconds(self) -> float:
        return self.result.seconds

    @property
    def attempts(self) -> int:
        return self.result.attempts

    @property
    def failure(self) -> Failure | None:
        return self.result.failure

    @property
    def reason(self) -> str:
        """``phase: reason`` of a failed point, '' for an ok one."""
        return str(self.failure) if self.failure else ""


SweepEvent = SweepStarted | PointStage | PointFinished
"""What ``sweep.run(progress=callback)`` receives, in order: one ``SweepStarted``, then ``PointStage``
and ``PointFinished`` events as the points go."""
