"""The events of a sweep, in order: one ``SweepStarted`` per phase (``phase``: the grid, then the
confirmation of the policies where ``policy.confirm`` asks for it); ``ClusterStarting`` as the
cluster is started or joined (a local one takes seconds), ``ClusterReady`` with its hosts; then, as
the points go, ``PointStage`` (a host's ``PointProgress`` with its point and host) and
``PointFinished`` (a point's record is on disk).
A host's ``PointMeasured`` (a point of a shared launch measured early) reaches the driver alone,
which records it and tells ``PointFinished``.
What ``sweep.run(progress=callback)`` receives and the live view draws. Frozen dataclasses,
picklable: a host's ``PointProgress`` crosses from its Ray task to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sweep.core.record import Failure, PointResult
from sweep.core.types import PointStatus, RunMode, Stage

SweepPhase = Literal["grid", "confirm"]
"""A part of a sweep: the experiment's grid, or the confirmation of its policies after it (their own
servers measured as more points of the sweep: ``policy.confirm``, ``python -m sweep confirm``)."""


@dataclass(frozen=True)
class SweepStarted:
    """A phase of the sweep knows what it will run: ``to_run`` of its ``points`` (``recorded``
    already have a result). ``phase``: ``grid`` (the experiment's points), ``confirm`` (the
    policies' own servers, after the grid; its ``points`` count the confirmation points only)."""

    experiment: str
    mode: RunMode
    path: str
    points: int
    to_run: int
    recorded: int
    phase: SweepPhase = "grid"


@dataclass(frozen=True)
class ClusterStarting:
    """The cluster is being started (``local``: a local Ray cluster of ``hosts`` simulated hosts, some
    seconds) or joined (``address``: the one given, None: the one ``ray start`` left on this machine),
    before any point can run."""

    local: bool
    hosts: int | None = None  # a local cluster's simulated hosts
    address: str | None = None


@dataclass(frozen=True)
class ClusterReady:
    """The cluster is up and its hosts checked: their names, each with its GPUs (``(name, gpus)``)."""

    hosts: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PointProgress:
    """What a host says of the point it runs, as it goes: one small event per kind of stage, each a
    ``PointProgress`` (``HostProgress`` is their union): the task began (``TaskStarted``), a step of
    the point began (``StepStarted``), the server's startup (``StartupProgress``, with its progress
    bar), a benchmark run (``RunProgress``) or concurrency level (``LevelProgress``), a follower node
    of a server over several hosts (``NodeJoined``), a host lost under the point (``Retrying``, the
    driver's) and a follower's GPU power samples (``PowerSamples``, a transport: kept, shown nowhere).
    The host's point, the benchmark and the driver make these; the driver adds the point and the host
    (``PointStage``). Picklable: they cross from a host's task to the driver. ``sub_point``: another
    point of the task's server launch (client-side axes) the event is about; None: the task's."""

    stage: Stage
    sub_point: str | None = field(default=None, kw_only=True)

    @property
    def title(self) -> str:
        """The stage as the live view and the progress log say it (``node 2``, ``host lost, retrying
        (attempt 2)``), else the stage."""
        return self.stage

    @property
    def detail(self) -> str:
        """What the live view shows beside the stage: the bar's summary, the run, the level's requests."""
        return ""


@dataclass(frozen=True)
class TaskStarted(PointProgress):
    """The point's task began on a host: ``node_id``, the Ray node it runs on (the driver watches it)."""

    stage: Literal["start"] = field(default="start", init=False)
    node_id: str | None = None


@dataclass(frozen=True)
class StepStarted(PointProgress):
    """A step of the point began: its pre-flight checks, its benchmark, its server's stop."""

    stage: Literal["preflight", "benchmark", "stop"]


@dataclass(frozen=True)
class StartupProgress(PointProgress):
    """The server's startup: the phase it is in (``load`` as it launches), the seconds since its
    launch and, where SGLang draws a progress bar, the bar's summary (``progress``: "load 27/64
    shards, 5.1 s/it, ETA 02:30") and kind (``progress_kind``: load | capture | ..., one bar each)."""

    stage: Literal["load", "capture", "ready"]
    elapsed_s: float | None = None
    progress: str | None = None
    progress_kind: str | None = None

    @property
    def detail(self) -> str:
        if not self.progress:
            return ""
        text = self.progress
        return text[len(self.stage) + 1 :] if text.startswith(self.stage + " ") else text  # stage shown beside


@dataclass(frozen=True)
class RunProgress(PointProgress):
    """A run of the benchmark's warmup or single stream began: ``run`` (1-based) of ``of``."""

    stage: Literal["warmup", "single"]
    run: int
    of: int

    @property
    def detail(self) -> str:
        return f"run {self.run}/{self.of}" if self.stage == "single" else ""


@dataclass(frozen=True)
class LevelProgress(PointProgress):
    """A concurrency level: ``done`` of its ``of`` requests finished; ``stopped``: it ended early,
    having measured enough; ``rate``: an open-loop level's offered rate, requests/s (concurrency 0)."""

    stage: Literal["level"] = field(default="level", init=False)
    concurrency: int
    done: int
    of: int
    stopped: bool = False
    rate: float | None = None

    @property
    def detail(self) -> str:
        return f"C={self.concurrency} {self.done}/{self.of}" + (" (measured enough: stopped)" if self.stopped else "")


@dataclass(frozen=True)
class NodeJoined(PointProgress):
    """A follower node of a server that spans hosts: ``node_rank``, which node it is."""

    stage: Literal["node"] = field(default="node", init=False)
    node_rank: int

    @property
    def title(self) -> str:
        return f"node {self.node_rank}"


@dataclass(frozen=True)
class Retrying(PointProgress):
    """The driver's: the host was lost under the point, which runs again as ``attempt`` on another
    host (2 after its first host was lost)."""

    stage: Literal["retry"] = field(default="retry", init=False)
    attempt: int

    @property
    def title(self) -> str:
        return f"host lost, retrying (attempt {self.attempt})"


@dataclass(frozen=True)
class PowerSamples(PointProgress):
    """A follower node's batch of GPU power samples (``sweep.bench.power``: time, watts, GPU), which
    the driver keeps for the point (node 0's levels sum every node's) and shows nowhere."""

    stage: Literal["power"] = field(default="power", init=False)
    node_rank: int
    samples: tuple[tuple[float, float, int], ...]


HostProgress = (
    TaskStarted | StepStarted | StartupProgress | RunProgress | LevelProgress | NodeJoined | Retrying | PowerSamples
)
"""A host's progress on a point: one small event per kind of stage (each a ``PointProgress``)."""


@dataclass(frozen=True, kw_only=True)
class PointStage(PointProgress):
    """A host's progress event (``event``) with the point it is about and the host it came from:
    what ``sweep.run(progress=...)`` and the live view receive. Its stage, title and detail are the
    event's; the event's own fields read through (``stage.concurrency`` of a ``LevelProgress``)."""

    stage: Stage = field(init=False)
    sub_point: str | None = field(default=None, init=False)
    point_id: str
    label: str
    host: str
    event: HostProgress

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", self.event.stage)
        object.__setattr__(self, "sub_point", self.event.sub_point)

    @classmethod
    def at(cls, point_id: str, label: str, host: str, progress: HostProgress) -> PointStage:
        return cls(point_id=point_id, label=label, host=host, event=progress)

    @property
    def title(self) -> str:
        return self.event.title

    @property
    def detail(self) -> str:
        return self.event.detail

    def __getattr__(self, name: str) -> object:
        """The event's own fields (``concurrency``, ``node_rank``, ``progress``...), read through."""
        if name.startswith("__") or name == "event":  # pickle asks before ``event`` is set
            raise AttributeError(name)
        return getattr(self.event, name)


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


HostEvent = HostProgress | PointMeasured
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


SweepEvent = SweepStarted | ClusterStarting | ClusterReady | PointStage | PointFinished
"""What ``sweep.run(progress=callback)`` receives, in order: ``SweepStarted`` (its ``phase``),
``ClusterStarting`` and ``ClusterReady`` (once a sweep, when its first phase with points to run starts
the cluster), then ``PointStage`` and ``PointFinished`` events as the points go; a confirmation phase
(``policy.confirm``) then has its own ``SweepStarted`` (``phase="confirm"``) and points."""
