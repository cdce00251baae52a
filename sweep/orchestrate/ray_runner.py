"""Running server launches on Ray: one task per launch (its points benchmarked in turn on its server),
each owning one whole host through the host resource.

- The driver submits every launch at once (baselines first) and takes results as they come: one
  ``LaunchResult`` per launch, one record per point in it.
- A task runs ``sweep.host.point.run_launch`` on whichever host Ray gives it; the host's identity
  (name, port, simulated GPUs) is looked up by node id.
- Tasks are never retried by Ray (``max_retries=0``): the driver resubmits a point whose host died
  under it (bounded by ``cluster.max_host_failures``) and knows its attempt count. A point that failed
  on its own (crash, hang) is a result like any other.
- The server a task starts is leashed to that task's worker process: if the worker dies, so does
  the server.
- Ctrl-C: running tasks are cancelled (their ``finally`` stops the server), then force-killed after
  a grace period (the leash kills the server then); finished points are already on disk.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, cast

import ray
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

from sweep.bench import POWER_EVERY_S, with_nodes
from sweep.core import (
    Cancelled,
    Failure,
    FailurePhase,
    HostEvent,
    LaunchResult,
    PointMeasured,
    PointResult,
    PowerSamples,
    Retrying,
    TaskStarted,
)
from sweep.host import FakeGpus, HostContext, LaunchSpec, free_port, real_probe, run_follower
from sweep.orchestrate.cluster import Host, node_names

if TYPE_CHECKING:
    from ray.actor import ActorClass

_RunFn = Callable[[LaunchSpec, HostContext, Callable[[HostEvent], None]], LaunchResult]
# (point id, host, what it said): its progress, or a point of a shared launch measured (PointMeasured)
_OnEvent = Callable[[str, str, HostEvent], None]
# what a pending Ray reference is: a one-host point, a placement group being reserved, the leader
# (node rank 0) or a follower of a point that spans hosts
_PendingKind = Literal["point", "group-ready", "leader", "follower"]


@dataclass(frozen=True)
class HostSetup:
    """How a task sets itself up on a host: its name, the port its server uses, and for simulated
    hosts the fake GPU ledger (also handed to the fake server through its env). ``choose_port``: a
    simulated host, whose server's port is chosen free at launch (``LaunchSpec.choose_port``);
    ``port`` is then only the spec's until the launch."""

    host: Host
    port: int
    ledger_dir: str | None = None
    gpus: int = 8
    choose_port: bool = False

    def context(self) -> HostContext:

        if self.ledger_dir:
            return HostContext(
                self.host.name,
                FakeGpus(self.ledger_dir, count=self.gpus),
                self.host.node_id,
                {"SWEEP_FAKE_GPU_LEDGER": self.ledger_dir},
            )
        return HostContext(self.host.name, real_probe(), self.host.node_id)


@ray.remote(num_cpus=0)
class _ProgressBoard:
    """Where tasks post what they are doing (point id, host, task id, ``PointProgress``) and each point
    of a shared launch as it is measured (``PointMeasured``); the driver reads it to draw the live
    view, to know which task runs where, and to record those points at once."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, HostEvent]] = []

    def post(self, point_id: str, host: str, task_id: str, event: HostEvent) -> None:
        self.events.append((point_id, host, task_id, event))

    def drain(self) -> list[tuple[str, str, str, HostEvent]]:
        out, self.events = self.events, []
        return out


def _on_host(spec: LaunchSpec, setups: dict[str, HostSetup], board: Any) -> tuple[LaunchSpec, HostContext, Callable]:
    """This host's identity, the spec adapted to it (port, interpreter), and a progress poster."""
    node = ray.get_runtime_context().get_node_id()
    setup = setups.get(node)
    if setup is None:  # a host that joined after the sweep started (or rejoined with a new node id)
        setup = _late_setup(node, spec, setups)
    launcher = list(spec.launcher)
    if launcher and launcher[0] in ("python", "python3"):  # the host's own interpreter (its venv)
        launcher[0] = sys.executable
    spec = replace(
        spec, placement=replace(spec.placement, port=setup.port), launcher=launcher, choose_port=setup.choose_port
    )
    ctx = setup.context()
    task_id = ray.get_runtime_context().get_task_id()  # tells the driver which task (of a group) posts

    def progress(ev: HostEvent) -> None:
        pid = ev.point_id if isinstance(ev, PointMeasured) else ev.sub_point or spec.key
        board.post.remote(pid, ctx.name, task_id, ev)

    return spec, ctx, progress


def _late_setup(node: str, spec: LaunchSpec, setups: dict[str, HostSetup]) -> HostSetup:
    """A host the driver did not know when the sweep started (a host restarted mid-sweep comes back
    with a new node id): named as the cluster names it, so a rejoined host keeps its name, with the
    sweep's port, its GPU count and, for the fake server, a GPU ledger beside the other hosts'."""

    name = node_names(ray.nodes()).get(node, node[:12])
    like = next(iter(setups.values()), None)
    ledger = str(Path(like.ledger_dir).parent / name) if like is not None and like.ledger_dir else None
    gpus = like.gpus if like is not None else 8
    return HostSetup(
        Host(node, name, -1, gpus), spec.port, ledger, gpus, like.choose_port if like is not None else False
    )


def _run_on_host(spec: LaunchSpec, setups: dict[str, HostSetup], board: Any, run_fn: _RunFn | None) -> LaunchResult:
    spec, ctx, progress = _on_host(spec, setups, board)
    progress(TaskStarted(ctx.node_id))
    if run_fn is None:
        from sweep.host import run_launch  # imported where it runs

        run_fn = run_launch
    return run_fn(spec, ctx, progress)


def _new_board() -> Any:
    """The progress board the tasks post to, on the driver's node."""
    board = cast("ActorClass[_ProgressBoard]", _ProgressBoard)  # what @ray.remote made it (mypy keeps the class)
    return board.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    ).remote()


def _run_in_order_on_host(
    specs: list[LaunchSpec], setups: dict[str, HostSetup], board: Any, run_fn: _RunFn | None
) -> list[LaunchResult]:
    """Launches back to back on the one host this task holds (``decide``'s paired rounds): nothing else
    runs there between them."""
    return [_run_on_host(spec, setups, board, run_fn) for spec in specs]


def _follow_on_host(spec: LaunchSpec, setups: dict[str, HostSetup], board: Any, node_rank: int) -> PointResult:

    spec, ctx, progress = _on_host(spec, setups, board)
    progress(TaskStarted(ctx.node_id))  # the driver fails it if its node is declared dead
    return run_follower(spec, ctx, node_rank, progress)


@dataclass
class Outcome:
    """What the driver learns of a launch: its points' results, or a host failure that used up its
    retries (then each of its points failed with it)."""

    spec: LaunchSpec
    result: LaunchResult
    attempts: int


@dataclass
class Group:
    """A point whose server spans several hosts: a placement group of one bundle per host, the
    leader (node rank 0: serves and benchmarks) and the followers (the other node ranks)."""

    pg: Any
    leader: Any = None
    followers: list = field(default_factory=list)
    failure: PointResult | None = None  # a follower's server died first
    host_lost: bool = False


@dataclass
class _Pending:
    kind: _PendingKind
    spec: LaunchSpec
    attempt: int
    t0: float
    group: Group | None = None
    rank: int = 0

    def the_group(self) -> Group:
        """The group of a group's reference (``group-ready``, ``leader``, ``follower``)."""
        # those are made with their group (_submit, _start_group); only a "point" has none
        assert self.group is not None, f"a {self.kind!r} reference without its group"
        return self.group


@dataclass
class Runner:
    resource: str
    gpus_per_host: int
    setups: dict[str, HostSetup]
    max_host_failures: int = 2
    run_fn: _RunFn | None = None  # tests and benchmarks swap in a stand-in for run_launch
    # A new worker process per point (max_calls=1) costs a worker start per point (0.6-1.6 s on
    # 2 cores, tests/perf/scheduling.py); run_launch keeps no state between points, so workers are reused.
    fresh_workers: bool = False
    cancel_grace_s: float = 45.0
    dist_port_offset: int = 1000  # multi-host servers: --dist-init-addr port = the leader's port + this
    _task: Any = None
    _follower: Any = None
    _opts: dict = field(default_factory=dict)
    _board: Any = None
    _pending: dict[Any, _Pending] = field(default_factory=dict)
    _where: dict[str, str] = field(default_factory=dict)  # point id -> host it last reported from
    node_check_s: float = 1.0  # how often the driver looks for nodes the cluster declared dead
    _task_node: dict[str, str] = field(default_factory=dict)  # task id -> node id it reported from
    _nodes_checked: float = 0.0
    _on_event: Any = None
    _stopping: set = field(default_factory=set)  # tasks that said they are stopping their server
    # point id -> {node rank: GPU power samples} its followers posted (a server over several hosts)
    _power: dict[str, dict[int, list]] = field(default_factory=dict)
    _measured: set = field(default_factory=set)  # points of shared launches handed on as measured (PointMeasured)
    # such points of a server over several hosts, held until the other nodes' power samples cover their
    # end: (launch's point id, nodes, host, the event)
    _held: list[tuple[str, int, str, PointMeasured]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._opts = dict(num_cpus=0, num_gpus=self.gpus_per_host, resources={self.resource: 1}, max_retries=0)
        self._task = ray.remote(max_calls=1 if self.fresh_workers else 0)(_run_on_host)
        self._follower = ray.remote(_follow_on_host)

    def _on(self, fn: Any, name: str, bundle: tuple[Any, int] | None = None) -> Any:
        """``fn`` with the host's resources, optionally on one bundle of a placement group."""
        extra = {}
        if bundle is not None:
            extra["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=bundle[0], placement_group_bundle_index=bundle[1]
            )
        return fn.options(name=name, **self._opts, **extra)

    def _submit(self, spec: LaunchSpec, attempt: int) -> None:
        t0 = time.monotonic()
        if spec.nnodes <= 1:
            ref = self._on(self._task, "sweep-point").remote(spec, self.setups, self._board, self.run_fn)
            self._pending[ref] = _Pending("point", spec, attempt, t0)
            return
        bundle = {self.resource: 1, "GPU": self.gpus_per_host}
        pg = placement_group([dict(bundle) for _ in range(spec.nnodes)], strategy="STRICT_SPREAD")
        self._pending[pg.ready()] = _Pending("group-ready", spec, attempt, t0, Group(pg))

    def _start_group(self, p: _Pending) -> None:
        """The hosts are held: start the leader and the followers, each on its bundle's host."""
        g = p.the_group()
        self._power[p.spec.key] = {}  # a retry's followers start afresh
        nodes = placement_group_table(g.pg)["bundles_to_node_id"]
        leader_node = nodes[0]
        ip = next((n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == leader_node), "127.0.0.1")
        setup = self.setups.get(leader_node)
        if setup.choose_port if setup else any(s.choose_port for s in self.setups.values()):
            # simulated hosts share this machine with other sweeps: the leader's HTTP port is chosen
            # at its launch (and kept off this one), so the dist port cannot follow from it; it is
            # chosen free here, where the leader runs, just before the group starts
            dist = f"{ip}:{free_port(ip)}"
        else:  # a real host's: the leader's port + the offset (docs/running.md: <port+1000>)
            dist = f"{ip}:{(setup.port if setup else p.spec.port) + self.dist_port_offset}"

        def rank_spec(r: int) -> LaunchSpec:  # a retry: new hosts, new IP
            return replace(p.spec, placement=replace(p.spec.placement, node_rank=r, dist_init_addr=dist))

        g.leader = self._on(self._task, "sweep-point", (g.pg, 0)).remote(
            rank_spec(0), self.setups, self._board, self.run_fn
        )
        self._pending[g.leader] = _Pending("leader", rank_spec(0), p.attempt, p.t0, g)
        for r in range(1, p.spec.nnodes):
            ref = self._on(self._follower, "sweep-point-node", (g.pg, r)).remote(
                rank_spec(r), self.setups, self._board, r
            )
            g.followers.append(ref)
            self._pending[ref] = _Pending("follower", p.spec, p.attempt, p.t0, g, r)

    def run(self, specs: list[LaunchSpec], on_event: _OnEvent) -> Iterator[Outcome]:
        """Submit every point and yield outcomes as they finish. ``on_event(point_id, host, event)``
        receives the tasks' progress."""
        self._board = _new_board()
        self._on_event = on_event
        for spec in specs:
            self._submit(spec, 1)
        while self._pending:
            ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=0.25)
            self._pump(on_event)
            yield from self._lost_with_their_nodes()
            for ref in ready:
                p = self._pending.pop(ref)
                outcome = self._handle(ref, p)
                if outcome is not None:
                    yield outcome
        self._pump(on_event)

    def submit(self, spec: LaunchSpec) -> None:
        """One more point, while ``run`` goes (from the loop over its outcomes): the adaptive
        search hands points out as it learns."""
        self._submit(spec, 1)

    def _handle(self, ref: Any, p: _Pending) -> Outcome | None:
        if p.kind == "point":
            return self._collect(ref, p.spec, p.attempt, p.t0)
        if p.kind == "group-ready":
            self._start_group(p)
            return None
        g = p.the_group()  # a leader's or a follower's
        if p.kind == "follower":
            if g.leader not in self._pending:
                return None  # the point is over; this is the follower we cancelled
            if g.leader.task_id().hex() in self._stopping:
                # the leader is stopping its server at the end of the point: a real follower dies with
                # it (its peer is gone); the leader's own result decides the point
                return None
            try:
                result: PointResult = ray.get(ref)
                g.failure = result  # its server died while the leader still ran
            except ray.exceptions.TaskCancelledError:
                return None
            except ray.exceptions.RayError:
                g.host_lost = True
            ray.cancel(g.leader, force=False)  # the leader's cleanup stops its server
            return None
        # the leader is done: stop the followers, release the hosts
        self._stop_group(g)
        self._pump(self._on_event)  # the followers' last power samples
        self._release_held(self._on_event, end_of=p.spec.key)
        samples = self._power.pop(p.spec.key, {})
        if g.failure is not None:
            return Outcome(p.spec, LaunchResult.shared(g.failure, p.spec.point_ids), p.attempt)
        if g.host_lost:
            return self._retry_or_fail(p.spec, p.attempt, p.t0, "a host of the group")
        outcome = self._collect(ref, p.spec, p.attempt, p.t0)
        if outcome is not None:  # every node's GPUs in the levels (of each point of the launch)
            for res in outcome.result.points:
                if res.levels is not None:
                    res.levels = with_nodes(res.levels, res.power_series, samples, p.spec.nnodes)
        return outcome

    def _stop_group(self, g: Group) -> None:
        live = [f for f in g.followers if f in self._pending]
        for f in live:
            ray.cancel(f, force=False)
        if live:
            ray.wait(live, num_returns=len(live), timeout=self.cancel_grace_s)
        for f in live:
            self._pending.pop(f, None)
        remove_placement_group(g.pg)

    def _pump(self, on_event: _OnEvent) -> None:
        try:
            events = ray.get(self._board.drain.remote(), timeout=5)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError):
            return
        for pid, host, task_id, ev in events:
            if isinstance(ev, PointMeasured):
                self._measured_point(host, task_id, ev, on_event)
                continue
            if isinstance(ev, PowerSamples):  # a follower's GPU samples: kept for its point, shown nowhere
                if pid in self._power:
                    self._power[pid].setdefault(ev.node_rank, []).extend(ev.samples)
                continue
            self._where[pid] = host
            if isinstance(ev, TaskStarted) and ev.node_id is not None:
                self._task_node[task_id] = ev.node_id
            if ev.stage == "stop":
                self._stopping.add(task_id)
            on_event(pid, host, ev)
        if self._held:
            self._release_held(on_event)

    def _measured_point(self, host: str, task_id: str, ev: PointMeasured, on_event: _OnEvent) -> None:
        """A point of a shared launch measured before its launch ended: handed on at once with the
        task's attempt count; on a server over several hosts, once the other nodes' power samples
        cover its end (their levels' power is every node's, as the launch's final result has it)."""
        p = next((p for ref, p in self._pending.items() if ref.task_id().hex() == task_id), None)
        ev = PointMeasured(replace(ev.result, attempts=p.attempt if p is not None else 1))
        if p is not None and p.spec.nnodes > 1:
            self._held.append((p.spec.key, p.spec.nnodes, host, ev))
            return
        self._measured.add(ev.point_id)
        on_event(ev.point_id, host, ev)

    def _release_held(self, on_event: _OnEvent, end_of: str | None = None) -> None:
        """Hand on the held points whose end the other nodes' samples cover, and every one of launch
        ``end_of`` (it ended, or its host was lost: what samples there are is all there will be)."""
        keep = []
        for launch, nnodes, host, ev in self._held:
            r, others = ev.result, self._power.get(launch, {})
            covered = all(
                others.get(k) and max(s[0] for s in others[k]) >= r.ended_at + POWER_EVERY_S for k in range(1, nnodes)
            )
            if not covered and launch != end_of:
                keep.append((launch, nnodes, host, ev))
                continue
            self._measured.add(ev.point_id)
            on_event(
                ev.point_id,
                host,
                PointMeasured(replace(r, levels=with_nodes(r.levels, r.power_series, others, nnodes))),
            )
        self._held = keep

    def _unmeasured(self, spec: LaunchSpec) -> LaunchSpec:
        """A launch to run again without its points already measured (they are recorded)."""
        left = [s for s in spec.points if s.point_id not in self._measured] or spec.points
        key = left[0].point_id  # its names follow its first point left
        log_path = (
            spec.log_path if key == spec.key else str(Path(spec.log_path).with_name(f"{key}.log"))
        )  # results/logs/<point id>.log
        return replace(spec, points=left, log_path=log_path)

    def _lost_with_their_nodes(self) -> list[Outcome]:
        """Tasks on nodes the cluster has declared dead. A host cut off from the network is declared
        dead by the GCS (health checks), yet the call to its worker never returns: no reset comes
        over a dead link, and Ray fails the task only when gRPC gives up on the connection, many
        minutes later. Such a task is treated here as the host loss it is; a late reply is ignored."""
        now = time.monotonic()
        if not self._task_node or now - self._nodes_checked < self.node_check_s:
            return []
        self._nodes_checked = now
        try:
            dead = {n["NodeID"] for n in ray.nodes() if not n.get("Alive")}
        except Exception:  # noqa: BLE001 - the GCS busy or restarting: look again later
            return []
        out = []
        for ref, p in list(self._pending.items()):
            node = self._task_node.get(ref.task_id().hex())
            if node is None or node not in dead or ref not in self._pending or p.kind == "group-ready":
                continue
            self._pending.pop(ref)
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - nothing to reach there
                pass
            host = next((s.host.name for s in self.setups.values() if s.host.node_id == node), node[:12])
            if p.kind == "follower":
                g = p.the_group()
                if g.leader.task_id().hex() in self._stopping:
                    continue  # the point is ending anyway: the leader's result decides it
                g.host_lost = True
                if g.leader in self._pending:
                    ray.cancel(g.leader, force=False)  # the leader's cleanup stops its server
                continue
            if p.kind == "leader":
                self._stop_group(p.the_group())
            outcome = self._retry_or_fail(p.spec, p.attempt, p.t0, f"{host} (declared dead by the cluster)")
            if outcome is not None:
                out.append(outcome)
        return out

    def _retry_or_fail(self, spec: LaunchSpec, attempt: int, t0: float, host: str) -> Outcome | None:
        reason = f"host {host} lost during attempt {attempt}"
        if self._held and self._on_event is not None:
            self._release_held(self._on_event, end_of=spec.key)
        if attempt <= self.max_host_failures:
            spec = self._unmeasured(spec)  # the launch's points measured before the loss are recorded
            self._submit(spec, attempt + 1)
            if self._on_event is not None:  # said where the point was: the live view and the log show it
                self._on_event(spec.key, self._where.get(spec.key, host), Retrying(attempt + 1))
            return None
        return Outcome(
            spec,
            _failed(
                spec,
                host,
                "host",
                reason + " (no retries left: cluster.max_host_failures)",
                t0,
                fix="check that host (ray status; its raylet log), or raise "
                "cluster.max_host_failures to run the point on another host",
            ),
            attempt,
        )

    def _collect(self, ref: Any, spec: LaunchSpec, attempt: int, t0: float) -> Outcome | None:
        try:
            launch: LaunchResult = ray.get(ref)
            return Outcome(spec, launch, attempt)
        except ray.exceptions.TaskCancelledError:  # not by this driver: it cancels only on its way out
            raise Cancelled(
                f"point {spec.points[0].label} was cancelled outside the sweep (ray cancel, ray job stop)",
                fix="run the same command again to resume",
            ) from None
        except ray.exceptions.RayTaskError as e:  # run_launch raised: a bug, still recorded
            return Outcome(
                spec,
                _failed(
                    spec,
                    self._where.get(spec.key),
                    "internal",
                    f"internal error: {str(e).strip().splitlines()[-1]}",
                    t0,
                    fix="a bug in sweep: report it with the driver's output and the point's log",
                ),
                attempt,
            )
        except ray.exceptions.RayError as e:  # the worker or its node died under the point
            return self._retry_or_fail(spec, attempt, t0, f"{self._where.get(spec.key, '?')} ({type(e).__name__})")

    def run_in_order(self, sequences: list[list[LaunchSpec]]) -> Iterator[tuple[int, list[LaunchResult]]]:
        """Each sequence of one-host launches as one task holding one host for all of them, back to back
        in their order (``decide``'s paired rounds); the sequences side by side on the hosts there are.
        Yields (the sequence's index, its results) as each ends; a sequence whose task died yields each
        of its launches failed (a result like any other: nothing raises here but Ctrl-C)."""
        if self._board is None:
            self._board = _new_board()
        task = ray.remote(max_calls=1 if self.fresh_workers else 0)(_run_in_order_on_host)
        t0 = time.monotonic()
        refs = {
            task.options(name="sweep-pairs", **self._opts).remote(seq, self.setups, self._board, self.run_fn): i
            for i, seq in enumerate(sequences)
        }
        for ref in refs:
            self._pending[ref] = _Pending("point", sequences[refs[ref]][0], 1, t0)  # cancel_all reaches it
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=0.5)
            self._board.drain.remote()  # their progress is not shown: a round's line says what runs
            for ref in ready:
                self._pending.pop(ref, None)
                i = refs[ref]
                try:
                    yield i, ray.get(ref)
                except ray.exceptions.RayError as e:  # the worker or its node died under the sequence
                    yield (
                        i,
                        [
                            _failed(spec, None, "host", f"its host was lost ({type(e).__name__})", t0)
                            for spec in sequences[i]
                        ],
                    )

    def cancel_all(self) -> None:
        """Cancel running points: politely first (their cleanup stops the servers), then by force."""
        refs = [r for r, p in self._pending.items() if p.kind != "group-ready"]
        for ref in refs:
            ray.cancel(ref, force=False)
        deadline = time.monotonic() + self.cancel_grace_s
        remaining = refs
        while remaining and time.monotonic() < deadline:
            _, remaining = ray.wait(remaining, num_returns=len(remaining), timeout=0.5)
        for ref in remaining:
            ray.cancel(ref, force=True)
        groups = {id(p.group): p.group for p in self._pending.values() if p.group is not None}
        for g in groups.values():
            remove_placement_group(g.pg)
        self._pending.clear()


def _failed(
    spec: LaunchSpec, host: str | None, phase: FailurePhase, reason: str, t0: float, fix: str | None = None
) -> LaunchResult:
    """The launch failed as a whole (no host left to run it, a bug): each of its points with it."""
    now = time.time()
    failed = PointResult(
        spec.key,
        host or "",
        "",
        "failed",
        Failure(phase, reason, fix),
        started_at=now - (time.monotonic() - t0),
        ended_at=now,
    )
    return LaunchResult.shared(failed, spec.point_ids)
