"""Typed state that crosses the layers: what a point's status and failure phase can be, the modes a
sweep runs in, and the progress events a host's point sends up to the driver's live view and to
``sweep.run(progress=...)``.

Plain ``Literal``s and frozen dataclasses, no dependencies: every layer may import this module.
``get_args`` of a ``Literal`` gives its values at run time (``POINT_STATUSES``, ``FAILURE_PHASES``...).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal, get_args

PointStatus = Literal["ok", "failed", "invalid"]
"""A recorded point (``points.status``): ``ok``; ``failed`` (on its host: crash, hang, pre-flight...);
``invalid`` (breaks SGLang's rules; recorded with ``--skip-invalid``, never launched)."""

PointState = Literal["ok", "failed", "invalid", "pending"]
"""A point as ``sweep.run`` reports it: its recorded status, or ``pending`` (planned, no result yet:
a plan, or a point ``only=`` left out)."""

PlanStatus = Literal["ok", "invalid"]
"""A planned point (``PlannedPoint.status``, ``--plan --json``): valid, or breaking SGLang's rules."""

FailurePhase = Literal["plan", "preflight", "load", "capture", "ready", "benchmark", "host", "internal"]
"""Where a point failed (``points.failure_phase``): ``plan`` (an invalid point), ``preflight`` (the
host's checks, seconds), ``load`` / ``capture`` / ``ready`` (the server's startup phases; launching
counts as ``load``), ``benchmark``, ``host`` (its host was lost, no retries left), ``internal`` (a bug,
still recorded)."""

Mode = Literal["plan", "dry-run", "local", "fake", "cluster"]
"""``sweep.run``'s modes: ``plan`` (launch nothing), ``dry-run`` (local Ray, simulated hosts, the fake
server), ``local`` (local Ray, the real launcher), ``fake`` (the fake server on the cluster's hosts),
``cluster`` (the real sweep on the Ray cluster)."""

RunMode = Literal["real", "dry-run", "local", "fake"]
"""The mode a results directory records (``sweep.json``; ``real`` is ``cluster``): modes never mix."""

Stage = Literal["start", "preflight", "load", "capture", "ready", "benchmark", "warmup", "single", "level",
                "stop", "node", "retry"]
"""What a host is doing with a point: ``start`` (the task began), the point's own steps (``preflight``,
``load``, ``capture``, ``ready``, ``benchmark``, ``stop``), the benchmark's (``warmup``, ``single``,
``level``), ``node`` (a follower node of a server that spans hosts) and ``retry`` (the driver's: the
host was lost under the point, which runs again as ``attempt`` on another host)."""

POINT_STATUSES: tuple[str, ...] = get_args(PointStatus)
POINT_STATES: tuple[str, ...] = get_args(PointState)
FAILURE_PHASES: tuple[str, ...] = get_args(FailurePhase)
MODES: tuple[str, ...] = get_args(Mode)
STAGES: tuple[str, ...] = get_args(Stage)


def run_mode(mode: Mode) -> RunMode:
    """The results directory's mode for a run mode (``cluster`` is recorded as ``real``)."""
    return "real" if mode == "cluster" else mode  # type: ignore[return-value]


@dataclass(frozen=True)
class RunKind:
    """What a run mode means, as data: every place that used to test mode strings reads one of these.

    ``fake_server``: points launch the fake SGLang server, not the experiment's launcher (model and
    drafter paths are not checked on the host); ``local_cluster``: a Ray cluster started here with
    simulated hosts, not a cluster joined; ``scaled``: the benchmark is scaled to the fake's speed and
    the points are recorded as ``dry_run`` (the analysis scales them back); ``suffix``: of the default
    results directory ``results/<name><suffix>``, so that no two modes share one."""

    mode: RunMode
    fake_server: bool
    local_cluster: bool
    scaled: bool
    suffix: str


KINDS: dict[RunMode, RunKind] = {k.mode: k for k in (
    RunKind("real", fake_server=False, local_cluster=False, scaled=False, suffix=""),
    RunKind("dry-run", fake_server=True, local_cluster=True, scaled=True, suffix="-dryrun"),
    RunKind("local", fake_server=False, local_cluster=True, scaled=False, suffix="-local"),
    RunKind("fake", fake_server=True, local_cluster=False, scaled=True, suffix="-fake"),
)}


def kind(mode: Mode | RunMode) -> RunKind:
    """The kind of a run mode (``cluster`` and ``plan`` plan or run a ``real`` sweep)."""
    return KINDS[run_mode("cluster" if mode == "plan" else mode)]  # type: ignore[arg-type]


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
    node_rank: int | None = None  # node: which node of a server that spans hosts
    attempt: int | None = None  # retry: the attempt the point runs as next (2 after its first host was lost)
    node_id: str | None = None  # start: the Ray node the task runs on (the driver watches it)

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
            return text[len(self.stage) + 1:] if text.startswith(self.stage + " ") else text  # stage shown beside
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
    def of(cls, point_id: str, label: str, host: str, progress: PointProgress) -> PointStage:
        return cls(point_id=point_id, label=label, host=host,
                   **{f.name: getattr(progress, f.name) for f in fields(PointProgress)})


@dataclass(frozen=True)
class PointFinished:
    """A point's result is on disk."""

    point_id: str
    label: str
    host: str | None
    status: PointStatus
    seconds: float
    attempts: int = 1
    failure_phase: FailurePhase | None = None
    failure_reason: str | None = None
    failure_fix: str | None = None  # how to fix it, where the sweep knows

    @property
    def reason(self) -> str:
        """``phase: reason`` of a failed point, '' for an ok one."""
        return "" if self.status == "ok" else f"{self.failure_phase}: {self.failure_reason}"


SweepEvent = SweepStarted | PointStage | PointFinished
"""What ``sweep.run(progress=callback)`` receives, in order: one ``SweepStarted``, then ``PointStage``
and ``PointFinished`` events as the points go."""
