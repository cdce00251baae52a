"""The vocabulary that crosses the layers: what a point's status, state and failure phase can be, the
stages a host reports, the modes a sweep runs in (as strings, and as ``RunKind`` data), and ``JSON``
(a value as JSON holds it). A point's record is ``sweep.core.record``; the events of a sweep are
``sweep.core.events``.

Plain ``Literal``s and frozen dataclasses, no dependencies: every layer may import this module.
``get_args`` of a ``Literal`` gives its values at run time (``POINT_STATUSES``, ``FAILURE_PHASES``...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias, Union, get_args

JSON: TypeAlias = Union[None, bool, int, float, str, list["JSON"], dict[str, "JSON"]]
"""A value as JSON holds it (``json.loads`` gives one, ``json.dumps`` takes one): what plan.json,
sweep.json, an adaptive config or an HTTP body is, where no narrower type says more."""

PointStatus = Literal["ok", "failed", "invalid", "pruned"]
"""A recorded point (``points.status``): ``ok``; ``failed`` (on its host: crash, hang, pre-flight...);
``invalid`` (breaks SGLang's rules; recorded with ``--skip-invalid``, never launched); ``pruned``
(the adaptive search decided it cannot win, from what other points measured: never launched, the
reason in ``failure_reason``, phase ``search``)."""

PointState = Literal[PointStatus, "pending"]
"""A point as ``sweep.run`` reports it: its recorded status, or ``pending`` (planned, no result yet:
a plan, or a point ``only=`` left out). ``PointStatus`` and one value more: the same vocabulary."""

PlanStatus = Literal["ok", "invalid"]
"""A planned point (``PlannedPoint.status``, ``--plan --json``): valid, or breaking SGLang's rules; the
two values of ``PointStatus`` a plan can give (``test_errors_and_types`` checks they are its)."""

FailurePhase = Literal["plan", "search", "preflight", "load", "capture", "ready", "benchmark", "host", "internal"]
"""Where a point failed (``points.failure_phase``): ``plan`` (an invalid point), ``search`` (a pruned
point: why the adaptive search did not run it), ``preflight`` (the
host's checks, seconds), ``load`` / ``capture`` / ``ready`` (the server's startup phases; launching
counts as ``load``), ``benchmark``, ``host`` (its host was lost, no retries left), ``internal`` (a bug,
still recorded)."""

Launched = Literal["dry-run", "local", "fake"]
"""The modes that launch something other than the real sweep on the cluster, spelt alike by
``sweep.run`` and the results directory: ``dry-run`` (local Ray, simulated hosts, the fake server),
``local`` (local Ray, the real launcher), ``fake`` (the fake server on the cluster's hosts)."""

Mode = Literal["plan", Launched, "cluster"]
"""What the user asks ``sweep.run`` (and the command line) to do: ``plan`` (launch nothing), the
``Launched`` ones, ``cluster`` (the real sweep on the Ray cluster). A request, read at the API's door
only: below it every layer reads the kind of run, ``RunMode``."""

RunMode = Literal["real", Launched]
"""Which kind of run a results directory holds, as ``sweep.json`` stores it (``real`` is the real
sweep, asked for as ``cluster``; a plan records the run it plans): what the events, the records, the
estimate and the orchestration read. Two ideas, not two spellings of one: a ``Mode`` may launch
nothing (``plan``), a ``RunMode`` is always a run; ``run_mode`` is the one mapping, ``kind`` reads
either."""

Stage = Literal[
    "start",
    "preflight",
    "load",
    "capture",
    "ready",
    "benchmark",
    "warmup",
    "single",
    "level",
    "stop",
    "node",
    "retry",
    "power",
]
"""What a host is doing with a point: ``start`` (the task began), the point's own steps (``preflight``,
``load``, ``capture``, ``ready``, ``benchmark``, ``stop``), the benchmark's (``warmup``, ``single``,
``level``), ``node`` (a follower node of a server that spans hosts), ``retry`` (the driver's: the
host was lost under the point, which runs again as ``attempt`` on another host) and ``power`` (a
follower's batch of GPU power samples, which the driver keeps for the point and shows nowhere)."""

POINT_STATUSES: tuple[str, ...] = get_args(PointStatus)
_POINT_STATES: tuple[str, ...] = get_args(PointState)
FAILURE_PHASES: tuple[str, ...] = get_args(FailurePhase)
_MODES: tuple[str, ...] = get_args(Mode)
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


KINDS: dict[RunMode, RunKind] = {
    k.mode: k
    for k in (
        RunKind("real", fake_server=False, local_cluster=False, scaled=False, suffix=""),
        RunKind("dry-run", fake_server=True, local_cluster=True, scaled=True, suffix="-dryrun"),
        RunKind("local", fake_server=False, local_cluster=True, scaled=False, suffix="-local"),
        RunKind("fake", fake_server=True, local_cluster=False, scaled=True, suffix="-fake"),
    )
}


def kind(mode: Mode | RunMode) -> RunKind:
    """The kind of a run mode (``cluster`` and ``plan`` plan or run a ``real`` sweep)."""
    return KINDS[run_mode("cluster" if mode == "plan" else mode)]  # type: ignore[arg-type]
