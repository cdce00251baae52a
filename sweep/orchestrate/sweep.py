"""``python -m sweep CONFIG`` and ``sweep.run``: the whole sweep, from a validated plan to a results directory.

Three steps: ``prepare`` (picks the results directory, decides which points still need running:
resume; records the experiment, the plan and the invalid points), ``_cluster_session`` (joins the
cluster, or starts simulated hosts for ``--dry-run``, and lets go of it at the end) and ``drive``
(runs the points on Ray and writes each result as it arrives). ``run_sweep`` takes its options as a ``RunOptions`` (or keywords) and returns a ``SweepRun``:
what ran and every recorded point's status. The caller (``sweep.api``, the command line over it)
turns that into a summary and an exit code; Ctrl-C raises ``Interrupted`` (finished points kept).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from rich.console import Console
from rich.markup import escape

from sweep.core import (
    ClusterError,
    ClusterReady,
    ClusterStarting,
    ConfigError,
    Failure,
    HostEvent,
    Interrupted,
    PointFinished,
    PointMeasured,
    PointResult,
    PointStage,
    PointStatus,
    ResultsError,
    RunContext,
    RunKind,
    RunMode,
    ServerFlags,
    SweepEvent,
    SweepPhase,
    SweepStarted,
    kind,
    output_console,
    plural,
    redact_argv,
)
from sweep.experiment import Plan, PlannedPoint, estimate, fake_args, fake_launcher, launches_of
from sweep.experiment import config as config_mod
from sweep.experiment import run_context as dry_run_context
from sweep.host import LaunchPoint, LaunchSpec, Placement
from sweep.orchestrate import baseline_curve, versions
from sweep.orchestrate.progress import SweepProgress
from sweep.orchestrate.signals import StopSignals
from sweep.results import DECISIONS, ResultsDir, as_measured, axis_types, point_row, read_plan, store, sweep_id
from sweep.results import lock as dir_lock
from sweep.search import AdaptiveSearch, GridOrder, Search

if TYPE_CHECKING:  # Ray is imported only once a sweep runs
    from sweep.orchestrate.cluster import Host


@dataclass(frozen=True)
class RunOptions:
    """How to run a plan: the mode, which points (resume: those without a result; ``retry_failed``,
    ``force``, ``only`` label globs), where (``address`` of the cluster, ``results_dir``), and who
    hears of it (``on_event``: the typed events of ``sweep.core.types``; ``live``: the live view or plain
    progress lines on the console)."""

    mode: RunMode = "real"
    force: bool = False
    retry_failed: bool = False
    only: Sequence[str] = ()
    address: str | None = None
    results_dir: str | Path | None = None  # default: results_path(experiment, mode)
    on_event: Callable[[SweepEvent], None] | None = None
    live: bool = True
    # "grid": the experiment's plan; "confirm": the policies' confirmation points after it
    # (sweep/orchestrate/confirm.py), run in grid order into the same directory, the plan's record
    # there extended, not replaced
    part: str = "grid"  # which part of the sweep: the grid, or the confirmation after it


@dataclass
class SweepRun:
    """What ``run_sweep`` did: the points it selected (ids), the record of each point it ran now
    (``results``, in the order they finished, without their tables: those are on disk), and the
    status of every point recorded in the directory afterwards (earlier runs' included)."""

    path: Path
    mode: RunMode
    selected: list[str] = field(default_factory=list)
    results: dict[str, PointResult] = field(default_factory=dict)
    statuses: dict[str, PointStatus] = field(default_factory=dict)

    @property
    def ran(self) -> list[str]:
        return list(self.results)

    @property
    def failed(self) -> list[str]:
        return [pid for pid, s in self.statuses.items() if s == "failed"]


def mode_of(args: argparse.Namespace) -> RunMode:
    """The mode of the command line's flags (``--dry-run``, ``--local``, ``--fake``; none: real)."""
    if args.dry_run:
        return "dry-run"
    if getattr(args, "local", False):
        return "local"
    return "fake" if getattr(args, "fake", False) else "real"


def results_path(exp: config_mod.Experiment, mode: RunMode) -> Path:
    """``results_dir``, else ``results/<name>`` with the mode's suffix: dry-run, local and fake results
    never mix with real ones."""
    return Path(exp.results_dir) if exp.results_dir else Path("results") / f"{exp.name}{kind(mode).suffix}"


def hosts_per_point(exp: config_mod.Experiment) -> int:
    """How many hosts one server spans: tp_size over the GPUs of a host, rounded up (CPU hosts: its
    ``nnodes`` flag)."""
    g = exp.cluster.gpus_per_host
    if config_mod.is_cpu(exp) or g == 0:
        return ServerFlags(exp.server.flags).nnodes
    n = -(-exp.server.tp_size // g)
    if n > 1 and exp.server.tp_size % g:
        raise ClusterError(
            f"server.tp_size={exp.server.tp_size} does not split evenly over hosts of {g} GPUs",
            fix="use a multiple of cluster.gpus_per_host, or a tp_size that fits one host",
        )
    return n


def select(
    plan: Plan, statuses: Mapping[str, str], *, force: bool, retry_failed: bool, only: Sequence[str]
) -> list[PlannedPoint]:
    """The valid points to run now: those with no result yet, failed ones with --retry-failed,
    all with --force; --only keeps labels matching any glob."""
    out = []
    for p in plan.points:
        if p.errors or (only and not any(fnmatch.fnmatchcase(p.label, g) for g in only)):
            continue
        status = statuses.get(p.id)
        if force or status is None or status == "invalid" or (status == "failed" and retry_failed):
            out.append(p)
    return out


def run_context(exp: config_mod.Experiment, run: RunKind) -> RunContext:
    """The run-time inputs the driver gives every point's benchmark beside its settings: a scaled
    run's (a dry run: SLOs judged at real speed), else none."""
    return dry_run_context(exp) if run.scaled else RunContext()


def launch_spec(
    pp: PlannedPoint, exp: config_mod.Experiment, rd: ResultsDir, run: RunKind, sweep_name: str, nnodes: int = 1
) -> LaunchSpec:
    """Point ``pp``'s launch of its own (``launches`` groups them: a launch's server is its first
    point's); ``nnodes``: the hosts one server spans (``hosts_per_point``)."""
    if not run.fake_server:
        launcher, extra = list(exp.server.launcher), []
    else:  # here: this interpreter; on a cluster's hosts: theirs
        launcher = fake_launcher() if run.local_cluster else ["python", "-m", "sweep.fake"]
        extra = fake_args(exp)
    return LaunchSpec(
        sweep=sweep_name,
        launcher=launcher,
        flags=pp.flags,
        launcher_args=extra,
        env=dict(pp.env),
        log_path=str(rd.log_path(pp.id).resolve()),
        points=[LaunchPoint(pp.id, pp.label, pp.bench, run_context(exp, run))],
        timeouts=exp.server.timeouts,
        reap=exp.server.reap,
        paths={
            "model_path": pp.flags.model_path or "",
            "draft model path": pp.flags.draft_model_path or "",
        },
        real_paths=not run.fake_server,
        cpu=exp.server.cpu,
        architecture=exp.server.architecture,
        placement=Placement(nnodes=nnodes),
    )


@dataclass
class Prepared:
    """A sweep ready to run: its results directory opened (the experiment and the plan written, the
    invalid points recorded), the points to run now, and the ``SweepRun`` the drive fills in."""

    plan: Plan
    opts: RunOptions
    rd: ResultsDir
    todo: list[PlannedPoint]
    run: SweepRun
    scale: dict
    nnodes: int  # hosts one server spans
    axes: dict  # the grid's axes and their column types
    lock: dir_lock.DirLock  # the results directory's, held until run_sweep ends

    @property
    def experiment(self) -> config_mod.Experiment:
        return self.plan.experiment

    @property
    def kind(self) -> RunKind:
        return kind(self.opts.mode)

    def emit(self, event: SweepEvent) -> None:
        if self.opts.on_event is not None:
            self.opts.on_event(event)

    def row(self, pp: PlannedPoint, argv: list[str], result: PointResult | None):
        return point_row(
            pp,
            self.experiment.name,
            axes=self.axes,
            argv=argv,
            result=result,
            mode=self.opts.mode,
            bench_scale=self.scale,
        )


# a phase after the grid (sweep/orchestrate/confirm.py, decide): given the prepared sweep (the grid's
# results recorded by now) and the cluster session (started on first call), it runs its points
# (``run_phase``) and returns what ran, or None
Session = Callable[[], "list[Host]"]
Phase = Callable[["Prepared", Session, Console], "SweepRun | None"]


def run_sweep(
    plan: Plan,
    options: RunOptions | None = None,
    *,
    bench_scale: dict | None = None,
    console: Console | None = None,
    run_fn=None,
    after: Sequence[Phase] = (),
    lock: dir_lock.DirLock | None = None,
    **option_overrides,
) -> SweepRun:
    """Run the plan's points that need running (``options``, or its fields as keywords: ``mode``,
    ``force``, ``retry_failed``, ``only``, ``address``, ``results_dir``, ``on_event``, ``live``) and
    return what ran with every recorded status: prepare the results directory, hold the cluster for
    the session, drive the points through it; then each phase of ``after`` in turn, on the same
    directory (its lock held throughout) and cluster session (what they ran joins the ``SweepRun``).
    Raises ``Interrupted`` on Ctrl-C (exit 130), and the ``ClusterError`` / ``ResultsError`` /
    ``ConfigError`` that stop a sweep. ``lock``: the directory's lock, held by the caller (``confirm``
    takes it before it reads anything), who releases it; else taken here, and released at the end."""
    opts = replace(options or RunOptions(), **option_overrides)
    console = console or output_console(highlight=False)
    stop = StopSignals().arm()  # SIGINT and SIGTERM stop it as Ctrl-C does, wherever it was started
    try:
        return _run_sweep(plan, opts, bench_scale or {}, console, run_fn, after, lock, stop)
    finally:
        stop.disarm()


def _run_sweep(
    plan: Plan,
    opts: RunOptions,
    bench_scale: dict,
    console: Console,
    run_fn,
    after: Sequence[Phase],
    lock: dir_lock.DirLock | None,
    stop: StopSignals,
) -> SweepRun:
    sweep = prepare(plan, opts, bench_scale, console, lock)  # holds the directory's lock from here
    stop.arm()  # again: joining the cluster (ray.init) set a SIGTERM handler of Ray's
    try:
        decide = opts.part == "grid" and (bool(sweep.todo) or _wants_decide(sweep))  # after the grid only
        if not sweep.todo and not after and not decide:
            return sweep.run
        with contextlib.ExitStack() as stack:
            started: list[list[Host]] = []

            def session() -> list[Host]:  # the cluster, started once, when a phase first needs it
                if not started:
                    started.append(stack.enter_context(_cluster_session(sweep, console)))
                    stop.arm()  # again: ray.init set a SIGTERM handler of Ray's
                return started[0]

            if sweep.todo:
                drive(sweep, session(), console, run_fn)
            if decide:
                _decide_after_grid(sweep, session(), console, run_fn)
            for phase in after:
                ran = phase(sweep, session, console)
                if ran is not None:
                    sweep.run.results.update(ran.results)
                    sweep.run.statuses.update(ran.statuses)
                    sweep.run.selected += ran.selected
    except (KeyboardInterrupt, Interrupted) as e:  # Ctrl-C, or a point cancelled from outside (Cancelled)
        done = sweep.run.statuses
        why = e.message if isinstance(e, Interrupted) else stop.why()
        raise Interrupted(
            f"{why}: {sum(s == 'ok' for s in done.values())} points ok and "
            f"{sum(s == 'failed' for s in done.values())} failed are kept in {sweep.rd.path}; "
            "running points were cancelled and their servers stopped",
            fix="run the same command again to resume",
        ) from None
    finally:
        if lock is None:
            sweep.lock.release()  # whatever ended the sweep (a kill -9: the kernel drops it)
    return sweep.run


def run_phase(sweep: Prepared, plan: Plan, session: Session, console: Console, *, phase: str, run_fn=None) -> SweepRun:
    """A phase's points (``plan``: its own points, of the sweep's experiment) run as the sweep's own:
    into its directory under the lock it holds, selected as it selects (resume, ``--only``,
    ``--retry-failed``, ``--force``), its invalid ones recorded as such, on its cluster session."""
    sub = _prepare(plan, replace(sweep.opts, part=phase), sweep.scale, console, sweep.rd, sweep.lock)
    if sub.todo:
        drive(sub, session(), console, run_fn)
    return sub.run


def prepare(
    plan: Plan, opts: RunOptions, scale: dict, console: Console, lock: dir_lock.DirLock | None = None
) -> Prepared:
    """The results directory checked, locked (``sweep.results.lock``: one writer; the caller releases
    ``Prepared.lock``) and opened, the points to run now selected (resume), the cluster reached where
    it is not a local one (fails fast, before anything is written), the experiment, the plan and the
    invalid points recorded. ``lock``: the directory's lock where the caller holds it already (and
    releases it)."""
    from sweep.orchestrate import cluster  # lazy: at the top every importer of this module would load ray

    exp, mode = plan.experiment, opts.mode
    rd = ResultsDir(Path(opts.results_dir) if opts.results_dir else results_path(exp, mode), exp.name, mode).check()
    if not kind(mode).local_cluster and select(
        plan, rd.statuses(), force=opts.force, retry_failed=opts.retry_failed, only=opts.only
    ):
        cluster.connect(opts.address)  # fails fast, before anything is written (the lock file included)
    # one writer: a second sweep into it is refused here, before it reads or writes
    held = lock if lock is not None else dir_lock.acquire(rd.path)
    try:
        return _prepare(plan, opts, scale, console, rd, held)
    except BaseException:
        if lock is None:
            held.release()
        raise


def _prepare(
    plan: Plan, opts: RunOptions, scale: dict, console: Console, rd: ResultsDir, held: dir_lock.DirLock
) -> Prepared:
    import ray  # lazy: Ray takes about a second to import; only this path needs it

    from sweep.orchestrate import cluster  # lazy: at the top every importer of this module would load ray

    exp, mode = plan.experiment, opts.mode
    if opts.part == "grid" and (note := held.takeover_note()) is not None:
        console.print(f"[yellow]{escape(note)}[/yellow]")
    rd.check()  # again, under the lock: what a sweep that held it wrote is settled now
    rd.clean_crash_leftovers()  # before anything recorded is read (statuses, versions)
    for f in rd.set_aside:
        console.print(f"[yellow]set aside an unreadable file from an earlier run:[/yellow] {escape(f'{f}.corrupt')}")
    recorded: dict[str, PointStatus] = rd.statuses()  # type: ignore[assignment]
    todo = select(plan, recorded, force=opts.force, retry_failed=opts.retry_failed, only=opts.only)
    _check_versions(plan, opts, rd.path, recorded, todo)  # before anything is said or written
    skipped = len([p for p in plan.points if not p.errors]) - len(todo)
    what = "confirmation " if opts.part == "confirm" else ""
    console.print(
        f"[bold]{escape(exp.name)}[/bold] ({mode}): {plural(len(plan.points), what + 'point')}, {len(todo)} to run"
        + (f", {skipped} already recorded (--retry-failed / --force to rerun)" if skipped else "")
        + f" -> {escape(str(rd.path))}"
    )
    sweep = Prepared(
        plan,
        opts,
        rd,
        todo,
        SweepRun(rd.path, mode, selected=[p.id for p in todo], statuses=recorded),
        scale,
        hosts_per_point(exp),
        axis_types(plan.points, list(exp.grid.axes)),
        held,
    )
    phase: SweepPhase = "confirm" if opts.part == "confirm" else "grid"
    sweep.emit(SweepStarted(exp.name, mode, str(rd.path), len(plan.points), len(todo), skipped, phase))
    if todo and not sweep.kind.local_cluster and not ray.is_initialized():  # none was to run before the lock
        cluster.connect(opts.address)
    if kind(mode).scaled:  # a dry run's figures are written at real speed, what was measured beside them
        rd.speed = float(scale.get("fake_speed") or 1.0)
    if not todo and all(recorded.get(p.id) == "invalid" for p in plan.invalid):
        return sweep  # a resume that runs nothing writes nothing: the record of what ran stays as it is
    rd.open()
    if opts.part == "confirm":  # the grid's experiment and plan stay; the confirmation points join the plan
        rd.write_plan(_with_points(read_plan(rd.path), plan.to_json()))
    else:
        rd.write_experiment(config_mod.to_yaml(exp))
        rd.write_plan(plan.to_json())
    for pp in plan.invalid:  # recorded as data with --skip-invalid (the CLI stopped otherwise)
        rd.write_point(pp.id, sweep.row(pp, pp.argv, None), {})
        sweep.run.statuses[pp.id] = "invalid"
    return sweep


def _check_versions(
    plan: Plan, opts: RunOptions, path: Path, recorded: Mapping[str, PointStatus], todo: Sequence[PlannedPoint]
) -> None:
    """Refuse to keep recorded points measured under another SGLang than the hosts run now
    (``sweep.orchestrate.versions``): those of the plan that this run does not measure again, and
    the baselines its points are compared with (a phase after the grid: its points' baselines)."""
    running_now = {p.id for p in todo}
    scope = {p.id for p in plan.points} | {p.baseline_id for p in plan.points if p.baseline_id}
    kept = [
        pid
        for pid, status in recorded.items()
        if status in ("ok", "failed") and pid not in running_now and pid in scope
    ]
    ran = versions.recorded_versions(path, kept)
    if ran:
        now = versions.running(plan.experiment, kind(opts.mode), opts.address)
        versions.check_reuse(path, ran, now)


@contextlib.contextmanager
def _cluster_session(sweep: Prepared, console: Console) -> Iterator[list[Host]]:
    """The sweep's cluster for as long as it runs: a local one with simulated hosts started (after
    ``local.setup``), or the cluster joined; its hosts checked against what a point needs; shut down
    (a local one) or left at the end, whatever happened."""
    import ray  # lazy: Ray takes about a second to import; only this path needs it

    from sweep.orchestrate import cluster  # lazy: at the top every importer of this module would load ray

    exp, how = sweep.experiment, sweep.kind
    sim = None
    if how.local_cluster and not how.fake_server and exp.local.setup:
        run_setup(exp.local.setup, console)
    if how.local_cluster:
        n = exp.dry_run.hosts if how.fake_server else exp.local.hosts
        sweep.emit(ClusterStarting(local=True, hosts=n))  # some seconds before anything else is heard
        console.print(f"starting a local Ray cluster with {plural(n, 'simulated host')}...")
        sim = cluster.SimulatedCluster(
            n, exp.cluster.host_resource, exp.cluster.gpus_per_host, state_file=sweep.rd.path / ".sim" / "driver.json"
        )
    else:
        sweep.emit(ClusterStarting(local=False, address=sweep.opts.address))
    try:
        hosts = cluster.require_hosts(exp.cluster.host_resource, exp.cluster.gpus_per_host)
        if sweep.nnodes > len(hosts):
            raise ClusterError(
                f"server.tp_size={exp.server.tp_size} needs {sweep.nnodes} hosts of "
                f"{exp.cluster.gpus_per_host} GPUs; the cluster has {len(hosts)}",
                fix="add hosts, or lower server.tp_size" + (" (dry_run.hosts for a dry run)" if sim else ""),
            )
        console.print("hosts: " + ", ".join(f"{escape(h.name)} ({plural(h.gpus, 'GPU')})" for h in hosts))
        sweep.emit(ClusterReady(tuple((h.name, h.gpus) for h in hosts)))
        yield hosts
    finally:
        if sim is not None:
            sim.shutdown()
        elif ray.is_initialized():
            ray.shutdown()


def drive(sweep: Prepared, hosts: list[Host], console: Console, run_fn=None) -> None:
    """Run the points on the hosts, baselines first, and record each result as it arrives: its row
    and tables written (or rescued elsewhere if the directory fails), its record kept in the
    ``SweepRun``, the events told to the live view and the caller. Cancels what runs on the way out
    of an error or Ctrl-C."""
    from sweep.orchestrate.ray_runner import (  # lazy: at the top every importer of this module would load ray
        HostSetup,
        Runner,
    )

    exp, how, rd, opts = sweep.experiment, sweep.kind, sweep.rd, sweep.opts
    sweep_name = sweep_id(rd.path)
    simulated = how.local_cluster
    # the fake server's GPUs live in a ledger on each host (a path that exists on every host)
    ledger_root = Path(tempfile.gettempdir()) / "sweep-fake-gpus" / sweep_name
    # a simulated host's server takes a free port at launch (other sweeps may run on this machine):
    # server.port + its index is only the spec's until then (sweep/host/ports.py)
    setups = {
        h.node_id: HostSetup(
            h,
            exp.server.port + (h.index if simulated else 0),
            str(ledger_root / h.name) if how.fake_server else None,
            exp.cluster.gpus_per_host,
            choose_port=simulated,
        )
        for h in hosts
    }
    specs = {p.id: launch_spec(p, exp, rd, how, sweep_name, sweep.nnodes) for p in sweep.todo}
    planned = {p.id: p for p in sweep.todo}

    def launches(handed: Sequence[PlannedPoint]) -> list[LaunchSpec]:
        """The points handed out together, one spec per server launch (client-side axes share one):
        its first point's server (and log), serving each of its points."""
        points = [planned[p.id] for p in handed]  # the search's points are the plan's
        # each point's run context: what the gate gave it (its baseline's curve) included
        return [
            replace(specs[launch.first.id], points=[specs[q.id].points[0] for q in launch.points])
            for launch in launches_of(points)
        ]

    runner = Runner(
        exp.cluster.host_resource, exp.cluster.gpus_per_host, setups, exp.cluster.max_host_failures, run_fn=run_fn
    )
    progress = SweepProgress(
        len(sweep.todo),
        len(hosts),
        console,
        estimates=estimate.point_estimates(exp, sweep.todo, mode=opts.mode, scale=sweep.scale, hosts=len(hosts)),
    )

    def tell(event: SweepEvent) -> None:
        if opts.live:
            progress.on(event)
        sweep.emit(event)

    def on_event(pid: str, host: str, ev: HostEvent) -> None:
        if isinstance(ev, PointMeasured):  # a point of a shared launch, measured: on disk now
            finished(ev.result, _ran_argv(specs[pid], ev.result))
            return
        tell(PointStage.at(pid, planned[pid].label, host, ev))

    search = baseline_curve.gate(
        searcher(sweep),
        exp,
        sweep.todo,
        specs,  # refine: baselines' curves first
        baseline_curve.recorded_levels(rd.path, sweep.run.statuses),
    )
    slots = max(1, len(hosts) // max(1, sweep.nnodes))  # points that can run at once
    in_flight = 0

    def record(r: PointResult, argv: list[str]) -> None:
        point_table = sweep.row(planned[r.point_id], argv, r)
        try:
            rd.write_point(r.point_id, point_table, r.tables)
        except ResultsError as e:  # nothing measured is lost: keep it elsewhere, then stop
            where = rd.rescue(r.point_id, {**r.tables, "points": point_table})
            raise ResultsError(
                f"{e.message}; the sweep stopped, and point {r.point_id} "
                f"({planned[r.point_id].label}) was saved to {where}",
                fix=e.fix,
            ) from None
        kept = r.without_tables()
        sweep.run.results[r.point_id], sweep.run.statuses[r.point_id] = kept, kept.status
        tell(PointFinished(planned[r.point_id].label, kept))

    def finished(r: PointResult, argv: list[str]) -> None:
        """A point's result, recorded and told to the search once: a point of a shared launch comes
        early (PointMeasured) and again in its launch's result, which then leaves it as it is."""
        if r.point_id in sweep.run.results:  # recorded by this drive already (record() keeps each one there)
            return
        record(r, argv)
        search.record(r.point_id, r.tables if r.status == "ok" else None)

    with progress if opts.live else contextlib.nullcontext():
        try:
            first = launches(search.take(slots))
            in_flight = len(first)
            for out in runner.run(first, on_event):
                for r in out.result.points:  # those measured early (PointMeasured) are kept as recorded
                    r = replace(r, attempts=out.attempts)  # the driver's count of its hosts
                    finished(r, _ran_argv(out.spec, r))
                in_flight -= 1
                for spec in launches(search.take(slots - in_flight)):
                    runner.submit(spec)
                    in_flight += 1
        except BaseException:
            runner.cancel_all()
            raise
        for pid, reason in search.pruned().items():  # the search decided: they need not run
            now = time.time()
            record(
                PointResult(
                    pid,
                    "",
                    "",
                    "pruned",
                    Failure("search", reason, _PRUNED_FIX),
                    started_at=now,
                    ended_at=now,
                    attempts=0,
                ),
                specs[pid].argv,
            )


def _wants_decide(sweep: Prepared) -> bool:
    """Whether ``decide`` has work on a sweep with no point left to run: it is on and has not ended
    its decisions on these results yet (``decisions.parquet``)."""

    return sweep.experiment.decide.enabled and not (sweep.rd.path / DECISIONS).is_file()


def _decide_after_grid(sweep: Prepared, hosts: list[Host], console: Console, run_fn=None) -> None:
    """The ``decide`` phase (``sweep.orchestrate.decide``): the picks within noise measured again."""
    from sweep.orchestrate.decide import decide_phase  # lazy: at the top it makes a circle at import time

    if sweep.experiment.decide.enabled:
        decide_phase(sweep, hosts, console, run_fn)


def _ran_argv(spec: LaunchSpec, result: PointResult) -> list[str]:
    """The server's command line as its host ran it: with the port it used (``result.port``: a
    simulated host chooses it at launch), else as the driver planned it."""
    if result.port is None or result.port == spec.port:
        return spec.argv
    return replace(spec, placement=replace(spec.placement, port=result.port)).argv


_PRUNED_FIX = (
    "to measure it anyway: run again with --only LABEL, or search.strategy=grid (the points already measured are kept)"
)


def searcher(sweep: Prepared) -> Search[PlannedPoint]:
    """The experiment's search over the points to run now: the grid, or the adaptive search told
    what the points already recorded measured (a resumed sweep continues from what it has)."""
    exp = sweep.experiment
    if exp.search.strategy != "adaptive" or sweep.opts.part != "grid":
        return GridOrder(sweep.todo)
    valid = [p for p in sweep.plan.points if not p.errors]
    search = AdaptiveSearch(
        valid,
        sweep.todo,
        tolerance=exp.search.tolerance,
        ttft_limits=[s.ttft_s for s in exp.benchmark.slo if s.ttft_s is not None],
        time_scale=run_context(exp, sweep.kind).time_scale(exp.benchmark.concurrency.slo_time_scale),
    )  # a dry run's: at real speed
    ok = [pid for pid, st in sweep.run.statuses.items() if st == "ok" and pid in search.points]
    if ok:
        tables = {
            # as measured: the search compares them with what the hosts measure now
            name: as_measured(store.table(sweep.rd.path, name)).filter(pl.col("point_id").is_in(ok)).collect()
            for name in ("levels", "requests", "single_stream")
        }
        for pid in ok:
            search.record(pid, tables)
    return search


def _with_points(recorded: dict, more: dict) -> dict:
    """The results' plan.json ``recorded`` with the points of ``more`` (a plan's ``to_json``) added, a
    point already there replaced by its new record."""
    if not recorded:
        return more
    ids = {p.get("id") for p in more.get("points", [])}
    kept = [p for p in recorded.get("points", []) if p.get("id") not in ids]
    return {**recorded, "points": kept + list(more.get("points", []))}


def run_setup(argv: list[str], console: Console) -> None:
    """``local.setup``: run once before a local sweep (e.g. create its models). "python" is this
    interpreter; the sweep package is importable under any interpreter. A failure stops the sweep
    before anything is launched."""

    argv = [sys.executable if a in ("python", "python3") and i == 0 else a for i, a in enumerate(argv)]
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the sweep package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    console.print(f"setup: {escape(' '.join(redact_argv(argv)))}")
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(
            f"local.setup {argv[0]!r} could not run: {e}", fix="fix local.setup in the experiment (an argv list)"
        ) from None
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-8:])
        raise ConfigError(
            f"local.setup failed with exit {out.returncode}:\n{tail}",
            fix="run the command by hand to see why; the sweep launched nothing",
        )
