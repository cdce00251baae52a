"""One server launch on one host: pre-flight, reap, launch, wait through the phases, benchmark each
of its points in turn, stop, reap. The unit of work a Ray task runs; it imports no Ray.

``run_launch`` never raises past itself except for a bug: it returns a ``LaunchResult``
(``sweep.core.record``) with one ``PointResult`` per point of the launch, each failure in it with its
``Failure`` (the phase it happened in, the reason from the server's log where there is one, the fix)
and the tail of the log. What was measured before a failure is kept.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from sweep.bench import POWER_EVERY_S, Recorder
from sweep.bench import only as only_gpus
from sweep.bench import run as run_bench
from sweep.core import (
    BenchSettings,
    Check,
    FailurePhase,
    HostEvent,
    HostProgress,
    LaunchResult,
    NodeJoined,
    PointFailure,
    PointMeasured,
    PointResult,
    PowerSamples,
    RunContext,
    ServerFlags,
    StartupProgress,
    StepStarted,
    SweepError,
    plural,
    redact,
)
from sweep.core import write_text as atomic_write_text
from sweep.experiment import CpuConfig, ReapConfig, Timeouts
from sweep.host import cpu as cpu_host
from sweep.host import ports, reaper
from sweep.host import preflight as pf
from sweep.host.gpu import GpuProbe
from sweep.host.server import ServerProcess
from sweep.results import LEVELS
from sweep.sglang import (
    AdaptiveLog,
    adaptive,
    drafter,
    find_failure,
    flag_args,
    flag_value,
    flags_in_argv,
    with_node_flags,
)

OnProgress = Callable[[HostEvent], None]


@dataclass(frozen=True)
class LaunchPoint:
    """One point of a server launch, as its benchmark runs it: its id and label, the user's benchmark
    settings (axes merged in) and the run-time inputs the driver supplies beside them (``context``).
    The points of one launch differ in these alone (client-side axes)."""

    point_id: str
    label: str
    bench: BenchSettings
    context: RunContext = field(default_factory=RunContext)


@dataclass(frozen=True)
class Placement:
    """Where the orchestrator runs a launch's server, supplied at run time beside the flags the plan
    gave it, never written into them: the port it serves on (None: the flags' own ``port``), the
    hosts the server spans (``nnodes``: server.tp_size over a host's GPUs, the orchestrator's
    reckoning, not a flag's) and, for a server over several hosts, this node's flags (``nnodes``,
    ``node_rank``, ``dist_init_addr``; ``dist_init_addr`` None: not placed on its hosts yet, or one
    host: the flags' own node flags, if any, kept)."""

    port: int | None = None
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: str | None = None

    def over(self, flags: ServerFlags) -> ServerFlags:
        """``flags`` as the server runs with them here: the port, and any node flags an earlier
        attempt set replaced by this node's."""
        out = flags
        if self.dist_init_addr is not None:
            out = with_node_flags(out, self.nnodes, self.node_rank, self.dist_init_addr)
        return out.merged({"port": self.port}) if self.port is not None else out


@dataclass
class LaunchSpec:
    """Everything a host needs to run one server launch (picklable: it travels to the Ray task): the
    server, and the points it serves in turn (``points``, at least one; client-side axes). The
    server's flags are the one source of what it runs: its argv is built from them at launch, and the
    checks read them by name (its device, its tensor parallelism, the CPU flags it needs); where the
    server runs (its port, the hosts it spans, its node flags) is the runner's ``placement``, laid
    over them (``server_flags``), never written into them or into an argv."""

    sweep: str  # names the sweep in the process marker
    launcher: list[str]  # what runs the server (``python -m sglang.launch_server``; the fake's)
    flags: ServerFlags  # every flag of the server (sweep.core.flags), port and node flags included
    env: dict[str, str]
    log_path: str  # the launch's log: results/logs/<key>.log (<key>~r<round>.log in decide's rounds)
    points: list[LaunchPoint]  # the points it serves, in the order they run
    timeouts: Timeouts = field(default_factory=Timeouts)
    reap: ReapConfig = field(default_factory=ReapConfig)
    paths: dict[str, str] = field(default_factory=dict)  # {"model": ..., "drafter": ...} to check
    real_paths: bool = True  # False on simulated hosts: path checks are reported as skipped
    bind_host: str = "127.0.0.1"  # where the benchmark reaches the server
    cpu: CpuConfig = field(default_factory=CpuConfig)
    launcher_args: list[str] = field(default_factory=list)  # the launcher's own options, after the flags (the fake's)
    architecture: str | None = None  # the experiment's server.architecture, where the host has no config.json
    check_rules: bool = (
        True  # SGLang's argument rules checked again here (tests of the engine's own errors turn it off)
    )
    # a simulated host (a local cluster): the port is chosen free right before each launch, and the
    # launch repeated on another where another process took it during the startup (sweep.host.ports);
    # a real host's port is the flags' one
    choose_port: bool = False
    placement: Placement = field(default_factory=Placement)  # where it runs: the runner's, at run time

    def __post_init__(self) -> None:
        self.flags = ServerFlags(self.flags)  # built once, also from a plain map (typed here, not by the caller)
        if not self.points:
            raise ValueError("a launch serves at least one point: LaunchSpec(points=[LaunchPoint(...)])")

    @property
    def key(self) -> str:
        """The launch's first point's id, kept so that its names are what they were: its process
        marker, the result made for the launch as a whole (``LaunchResult.shared``), the driver's
        bookkeeping of it (progress without a point of its own)."""
        return self.points[0].point_id

    @property
    def point_ids(self) -> list[str]:
        return [p.point_id for p in self.points]

    @property
    def server_flags(self) -> ServerFlags:
        """The flags the server runs with: ``flags`` with the ``placement`` laid over them."""
        return self.placement.over(self.flags)

    @property
    def device(self) -> str:
        """SGLang's --device (the flags'): cpu hosts are checked for memory and CPU flags, not GPUs."""
        return self.flags.device

    @property
    def tp_size(self) -> int:
        """The server's tensor parallelism (the flags' --tp-size), over every host it spans."""
        return self.flags.tp

    @property
    def nnodes(self) -> int:
        """The hosts one server spans: the runner's (``placement``: tp_size over a host's GPUs)."""
        return self.placement.nnodes

    @property
    def cpu_flags_needed(self) -> list[str]:
        """The CPU flags the server needs (its attention backend's, and server.cpu.required_flags)."""
        return cpu_host.required_flags(self.flags, self.cpu.required_flags)

    @property
    def argv(self) -> list[str]:
        """The server's command line: the launcher, its flags, the launcher's own options."""
        return [*self.launcher, *flag_args(self.server_flags), *self.launcher_args]

    @property
    def port(self) -> int:
        return int(self.server_flags["port"])

    def flag(self, name: str, *aliases: str) -> str | None:
        """A flag's value as the argv shows it (None when not set): ``spec.flag("api-key")``."""
        return flag_value(self.server_flags, name, *aliases)

    @property
    def secrets(self) -> list[str]:
        """What its log and records must not show: the values of its secret-named flags and env."""
        return redact.secret_values(self.launcher_args, self.env, self.server_flags)

    @property
    def local_gpus(self) -> int:
        return max(1, self.tp_size // self.nnodes)


@dataclass
class HostContext:
    name: str
    probe: GpuProbe
    node_id: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. the fake GPU ledger of a simulated host


@dataclass
class _Preflight(pf.PreflightReport):
    drafter_aux_layers: list[int] | None = None
    drafter_checks: list[Check] = field(default_factory=list)


def _reap(spec: LaunchSpec, host: HostContext, why: str, server: ServerProcess | None = None) -> reaper.ReapReport:
    """Reap, and wait for the server's port to be free: the port it ran on, else the flags' one (none
    on a simulated host before its launch: the port is chosen then)."""
    port = server.port if server is not None else None if spec.choose_port else spec.port
    return reaper.reap(
        reaper.Marker(spec.sweep, host.name),
        host.probe,
        port=port,
        grace_s=min(spec.timeouts.stop_grace_s, 10.0),
        gpu_free_mib=spec.reap.gpu_mem_free_mib,
        kill_foreign=spec.reap.kill_foreign_gpu_processes,
        wait_s=spec.reap.wait_s,
        why=why,
    )


def _preflight(
    spec: LaunchSpec, host: HostContext, report: _Preflight, reaped: reaper.ReapReport, *, serves_http: bool
) -> None:
    """Cheap checks first; then reap (a crashed earlier run must not poison this one); then the
    checks that the reaping can change: GPUs free, the port free."""
    if spec.device == "cpu":  # the CPU's flags first (instant), then the kernels before --help imports them
        cpu_host.check_cpu_flags(spec.cpu_flags_needed, report.checks)
    report.sglang_version = pf.sglang_version(spec.launcher, launcher_args=spec.launcher_args)
    if spec.device == "cpu":
        engine = (
            cpu_host.check_kernels(spec.launcher[0], spec.env, report.checks, pf.HELP_TIMEOUT_S)
            if spec.cpu.check_kernels
            else None
        )
        cpu_host.check_speculation(
            spec.flag("speculative-algorithm"),
            spec.flag("attention-backend") or cpu_host.DEFAULT_ATTENTION_BACKEND,
            engine,
            report.checks,
        )
        cpu_host.check_nodes(int(spec.flag("nnodes") or 1), engine, report.checks)
    pf.check_flags(
        [*spec.server_flags, *flags_in_argv(spec.launcher_args)],
        spec.launcher,
        report.sglang_version,
        host.name,
        launcher_args=spec.launcher_args,
    )
    pf.check_paths(spec.paths, spec.real_paths, report)
    if spec.real_paths:
        _check_drafter(spec, report)
    reaped.merge(_reap(spec, host, "before launch"))
    if spec.device == "cpu":
        cpu_host.check_memory(spec.cpu.min_free_mem_gib, report.checks)
        report.gpu_name, report.gpu_count = "cpu", 0
    else:
        pf.check_gpus(host.probe, spec.local_gpus, spec.reap.gpu_mem_free_mib, report)
    if spec.check_rules:
        first = spec.points[0].bench  # its first point's benchmark (the points differ in theirs alone)
        pf.check_rules(spec.server_flags, first, report, spec.architecture, spec.env)
    if serves_http:
        if not spec.choose_port:  # a simulated host's is chosen at launch (_Attempt.serve)
            pf.check_port(spec.port, spec.bind_host, report, wait_s=max(0.0, spec.reap.wait_s - reaped.waited_s))
        pf.check_dist_init(
            spec.flag("dist-init-addr"), int(spec.flag("node-rank") or 0), host.name, report
        )  # node rank 0 of a server over several hosts


def _check_drafter(spec: LaunchSpec, report: _Preflight) -> None:
    """The drafter's weight names, aux layers and sizes against the target (headers only: milliseconds)."""

    found = drafter.check_flags(spec.server_flags)
    if found is None:  # no drafter, or its folders are not here (a hub id)
        return
    report.drafter_aux_layers, report.drafter_checks = found.aux_layers, list(found.findings)
    report.checks += [replace(f, message=f"drafter: {f.message}") for f in found.warnings]
    if found.errors:
        first = found.errors[0]
        more = f" (and {plural(len(found.errors) - 1, 'more drafter error')})" if len(found.errors) > 1 else ""
        raise PointFailure("preflight", f"drafter {found.drafter}: [{first.rule}] {first.message}{more}", fix=first.fix)
    report.checks.append(Check("warning" if found.findings else "ok", "", found.summary()))


ADAPTIVE_CONFIG = adaptive.CONFIG_FLAG


def _adaptive_config_path(log_path: Path) -> Path:
    """Where the host writes a point's adaptive config given as a mapping: beside its log (the point's own
    space on the host), ``<log name>.adaptive-config.json``."""
    return log_path.with_name(f"{log_path.stem}.adaptive-config.json")


def _launch_argv(spec: LaunchSpec, log_path: Path) -> list[str]:
    """The server's argv at launch: ``spec.argv``, but a ``speculative-adaptive-config`` given as the config
    itself (a mapping, SGLang's JSON shape) is written to a JSON file first (sorted keys; see
    ``_adaptive_config_path``) and that path passed, as SGLang reads the flag as a path."""
    cfg = spec.server_flags.get(ADAPTIVE_CONFIG)
    if not isinstance(cfg, Mapping):
        return spec.argv
    path = _adaptive_config_path(log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(adaptive.as_json(cfg), sort_keys=True, indent=1) + "\n")
    return [*spec.launcher, *flag_args({**spec.server_flags, ADAPTIVE_CONFIG: str(path)}), *spec.launcher_args]


def _launch(spec: LaunchSpec, host: HostContext, log_path: Path) -> ServerProcess:
    """The point's server, started and remembered by the reaper; stopped when its ``with`` ends."""
    marker = reaper.Marker(spec.sweep, host.name)
    env = {**spec.env, **host.extra_env, **marker.env(spec.key)}
    server = ServerProcess(
        _launch_argv(spec, log_path),
        env,
        log_path,
        port=spec.port,
        host=spec.bind_host,
        secrets=spec.secrets,
        api_key=spec.flag("api-key"),
        admin_api_key=spec.flag("admin-api-key"),
        grace_s=spec.timeouts.stop_grace_s,
    )
    server.start()
    if server.proc is not None:
        reaper.remember(marker, server.proc.pid)  # its own session: found again even if it is orphaned
    return server


class _Attempt:
    """One attempt at a point on this host, driven with ``with``: whatever ends the block, leaving it
    stops the server (whole tree), reaps, and fills in what every result carries; a failure becomes
    data in ``result`` (the launch's record, split into its points' at the end). ``run_launch`` and
    ``run_follower`` are its two bodies.

    ``node_rank`` None: the point's own server (node 0), where a bug is recorded too (never lost);
    else a follower node of a server over several hosts, whose failures name the node."""

    def __init__(self, spec: LaunchSpec, host: HostContext, progress: OnProgress | None, node_rank: int | None = None):
        self.spec, self.host, self.node_rank = spec, host, node_rank
        self.emit: OnProgress = progress or (lambda e: None)
        self.result = PointResult(spec.key, host.name, host.node_id, "failed", started_at=time.time())
        self.report = _Preflight()
        self.reaped = reaper.ReapReport()
        self.server: ServerProcess | None = None
        self.phase: FailurePhase = "preflight"
        self.port_taken: int | None = None  # a port another process took while the server started

    def __enter__(self) -> "_Attempt":
        return self

    def preflight(self) -> None:
        _preflight(self.spec, self.host, self.report, self.reaped, serves_http=self.node_rank is None)

    def launch(self, log_path: Path) -> ServerProcess:
        self.server = _launch(self.spec, self.host, log_path)
        return self.server

    def serve(self, log_path: Path, emit: OnProgress) -> ServerProcess:
        """Launch the point's server and wait until it is ready; its startup phases go to the result
        whatever happens. On a simulated host (``choose_port``) the port is chosen free right before
        the launch, and a server that lost it to another process during its startup (uvicorn's bind
        error: ``port_in_use``) is relaunched on another, up to ``ports.PORT_RETRIES`` times, each
        loss a warning among the checks. The port used is the spec's from then on (the after-point
        reap, the result's ``port``)."""
        tried: list[int] = []
        while True:
            if self.spec.choose_port:
                port = ports.free_port(self.spec.bind_host, avoid=[*tried, *_dist_port(self.spec)])
                self.spec = replace(self.spec, placement=replace(self.spec.placement, port=port))
                self.report.checks.append(Check.ok(f"port {port} chosen free at launch (simulated host)"))
            server = self.launch(log_path)
            try:
                server.wait_ready(self.spec.timeouts, emit)
                return server
            except PointFailure:
                if not self._port_lost(server, tried):
                    raise
            finally:
                self.result.phases = server.startup.durations()
                self.result.startup_progress = server.startup.progress_records()
                if self.spec.server_flags.adaptive:  # what the server made of it, from its log
                    self.result.adaptive = server.adaptive.running
                    self.result.adaptive_disabled_reason = server.adaptive.disabled

    def _port_lost(self, server: ServerProcess, tried: list[int]) -> bool:
        """True when ``server`` died because its port was taken during its startup and another try
        is left: it is stopped (its whole tree), the loss recorded, and the port kept out of the next."""
        if not self.spec.choose_port or server.alive() or server.proc is None:
            return False
        why = find_failure(server.log.tail, server.proc.returncode)
        if why.kind != "port_in_use":
            return False
        self.port_taken = server.port  # another process's now: the reaping after the point does not wait for it
        if len(tried) >= ports.PORT_RETRIES:
            return False
        tried.append(server.port)
        self.reaped.killed += [
            {**k, "reason": f"{k['reason']} (its port {server.port} was taken)"} for k in server.stop(server.grace_s)
        ]
        self.server = None
        self.report.checks.append(
            Check.warning(
                f"port {server.port} was taken by another process while the server started ({why.reason}); "
                f"relaunched on another port (try {len(tried) + 1} of {ports.PORT_RETRIES + 1})",
                fix="another sweep or server on this machine: nothing to do unless it keeps happening",
                rule="port-taken",
            )
        )
        return True

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None, tb: object) -> bool:
        res = self.result
        if self.node_rank is not None:
            if isinstance(e, PointFailure):
                res.fail(e.phase, f"node {self.node_rank} on {self.host.name}: {e.reason}", e.fix)
            handled = isinstance(e, PointFailure)
        else:
            if isinstance(e, PointFailure):
                res.failure = e.failure
            elif isinstance(e, SweepError):  # e.g. the benchmark could not reach the server at all
                res.fail(self.phase, e.message, e.fix)
            elif isinstance(e, Exception):  # a bug: still recorded, never lost
                res.fail(self.phase, f"internal error: {type(e).__name__}: {e}")
                res.log_tail = "".join(traceback.format_exception(e))[-2000:]
            handled = isinstance(e, Exception)
            self.emit(StepStarted("stop"))
        reap_after = self.node_rank is not None or self.phase != "preflight" or bool(self.reaped.killed)
        _finish(
            res,
            self.server,
            self.spec,
            self.host,
            self.report,
            self.reaped,
            reap_after=reap_after,
            port_taken=self.port_taken,
        )
        return handled


def _finish(
    res: PointResult,
    server: ServerProcess | None,
    spec: LaunchSpec,
    host: HostContext,
    report: _Preflight,
    reaped: reaper.ReapReport,
    *,
    reap_after: bool,
    port_taken: int | None = None,
) -> None:
    """Stop the server (whole tree), reap, and fill in what every result carries."""
    if server is not None:
        reaped.killed += server.stop(server.grace_s)
        res.log_tail = (res.log_tail + "\n" if res.log_tail else "") + server.log.tail_text()
        res.port = server.port
    if reap_after:
        ours = server if server is not None and server.port != port_taken else None
        reaped.merge(_reap(spec, host, "after the point", ours))
    res.sglang_version, res.gpu_name, res.gpu_count = report.sglang_version, report.gpu_name, report.gpu_count
    res.checks = report.checks
    res.drafter_aux_layers, res.drafter_checks = report.drafter_aux_layers, report.drafter_checks
    # secrets: the log pump hid them in the log (so in log_tail and reasons from it) and the reaper
    # in command lines; these catch what any other path may still carry (sweep/core/redact.py)
    secrets = spec.secrets
    res.reaped = reaped.as_dict(secrets)
    if secrets:
        if res.failure:
            fix = res.failure.fix
            res.failure = replace(
                res.failure,
                reason=redact.redact_text(res.failure.reason, secrets),
                fix=redact.redact_text(fix, secrets) if fix else fix,
            )
        res.log_tail = redact.redact_text(res.log_tail, secrets)
    res.ended_at = time.time()


def run_launch(spec: LaunchSpec, host: HostContext, progress: OnProgress | None = None) -> LaunchResult:
    """Run one server launch start to finish: its points (``spec.points``) in turn on the same server
    (each benchmark flushes the cache first). The result holds one record per point, saying what
    happened, whatever happened. A benchmark failure of one point, the server still up and more
    points in the launch, fails that one alone; a server that dies fails the rest with its failure."""

    subs = spec.points
    ids = [s.point_id for s in subs]
    parts: dict[str, PointResult] = {}  # what each one's benchmark measured, as far as it went
    with _Attempt(spec, host, progress) as at:
        res, emit = at.result, at.emit
        emit(StepStarted("preflight"))
        at.preflight()
        at.phase = "load"
        emit(StartupProgress("load"))
        server = at.serve(Path(spec.log_path), emit)  # phases and startup progress in res, whatever happens
        at.phase = "benchmark"
        # the server's --api-key, as Authorization: Bearer on every request (its --admin-api-key on /flush_cache)
        # the GPUs' watts while each level runs (NVML; the fake's ledger); none on a CPU host
        # (timestamped too: a server over several hosts sums every node's, sweep.bench.power.with_nodes);
        # this host's GPUs: the placed flags' (their nnodes the placement's), not the plan's
        power = Recorder(only_gpus(host.probe.power, *spec.server_flags.node_gpus)) if spec.device != "cpu" else None
        try:
            for sub in subs:
                pid = sub.point_id
                part = parts[pid] = PointResult(pid, host.name, host.node_id, "failed", started_at=time.time())
                tell: Callable[[HostProgress], None] = emit if pid == spec.key else _as_point(emit, pid)
                tell(StepStarted("benchmark"))
                try:
                    bench = run_bench(
                        server.endpoint,
                        sub.bench,
                        point_id=pid,
                        progress=tell,
                        power=power,
                        window=server.adaptive_mark,  # the log read up to each level's bounds
                        context=sub.context,
                    )
                except SweepError as e:
                    if len(subs) == 1 or not server.alive():
                        raise
                    part.fail("benchmark", e.message, e.fix)  # this one alone: the server is still up
                    part.ended_at = time.time()
                    if pid != ids[-1]:
                        emit(PointMeasured(_measured(at, ids, part, power)))
                    continue
                part.requests, part.single_stream = bench.requests, bench.single_stream
                part.levels = _with_adaptive(bench.levels, server.adaptive, bench.windows)
                part.metrics, part.ended_at = bench.metrics, time.time()
                if not server.alive():
                    raise server.died("benchmark")
                part.status = "ok"
                if pid != ids[-1]:  # measured: the driver records it now (the last comes with the launch)
                    emit(PointMeasured(_measured(at, ids, part, power)))
        finally:  # every sub-point's levels lie in the one series (each level keeps its own window)
            res.power_series = power.take() if power is not None else []
        res.status = "ok"
    return LaunchResult(_points(at.result, ids, parts))


def _with_adaptive(levels: Any, log: AdaptiveLog, windows: list[tuple[Any, Any]]) -> Any:
    """The levels table with each level's adaptive-speculation columns (``AdaptiveLog.level`` between the
    marks taken as it began and ended, ``windows``); unchanged for a server that does not run adaptive
    speculation (the columns stay null)."""
    if levels is None or not log.running or levels.num_rows == 0 or len(windows) != levels.num_rows:
        return levels
    import pyarrow as pa  # lazy: pyarrow is slow to import; only this path needs it

    rows = [log.level(begin, end) for begin, end in windows]
    for name in ("adaptive_switches", "adaptive_steps", "adaptive_steps_final"):
        column = pa.array([r[name] for r in rows], type=LEVELS.field(name).type)
        i = levels.schema.get_field_index(name)
        levels = levels.set_column(i, name, column) if i >= 0 else levels.append_column(name, column)
    return levels


def _dist_port(spec: LaunchSpec) -> list[int]:
    """The --dist-init-addr port of a server over several hosts (the leader binds it too), else none."""
    port = (spec.flag("dist-init-addr") or "").rpartition(":")[2]
    return [int(port)] if port.isdigit() else []


def _as_point(emit: OnProgress, point_id: str) -> Callable[[HostProgress], None]:
    return lambda ev: emit(replace(ev, sub_point=point_id))


def _points(launch: PointResult, ids: list[str], parts: dict[str, PointResult]) -> list[PointResult]:
    """The launch's record as one result per point: each with what its benchmark measured and its own
    status (a benchmark failure of its own, else ok, else the launch's failure where it never finished);
    the startup and the host's record shared, the startup's phases on the first point only (one launch)."""
    return [_one(launch, ids, i, parts.get(pid)) for i, pid in enumerate(ids)]


def _one(launch: PointResult, ids: list[str], i: int, part: PointResult | None) -> PointResult:
    """Point ``ids[i]`` of the launch: what its benchmark measured (``part``) on the launch's record."""
    r = replace(launch, point_id=ids[i])
    if part is not None:
        r.requests, r.single_stream, r.levels, r.metrics = part.requests, part.single_stream, part.levels, part.metrics
        if part.status == "ok":
            r.status, r.failure = "ok", None
        elif part.failure is not None:
            r.status, r.failure = "failed", part.failure
        if len(ids) > 1 and i < len(ids) - 1:
            r.ended_at = part.ended_at or r.ended_at
    if i > 0:
        r.phases, r.startup_progress = {}, []
        r.started_at = part.started_at if part is not None else r.ended_at
    return r


def _measured(at: _Attempt, ids: list[str], part: PointResult, power: Recorder | None) -> PointResult:
    """A point of the launch the moment its benchmark ends, as ``_points`` will give it at the launch's
    end: the host's record so far (pre-flight, reaping before the launch), the startup's phases on the
    first point, and the GPU power samples up to now (a copy: the launch keeps recording)."""
    report, secrets = at.report, at.spec.secrets
    launch = replace(
        at.result,
        sglang_version=report.sglang_version,
        gpu_name=report.gpu_name,
        gpu_count=report.gpu_count,
        checks=list(report.checks),
        drafter_aux_layers=report.drafter_aux_layers,
        drafter_checks=list(report.drafter_checks),
        reaped=at.reaped.as_dict(secrets),
        power_series=power.snapshot() if power is not None else [],
        port=at.server.port if at.server is not None else None,
    )  # the port it serves on
    r = _one(launch, ids, ids.index(part.point_id), part)
    if secrets and r.failure is not None:  # as _finish hides them in a launch's failure
        fix = r.failure.fix
        r.failure = replace(
            r.failure,
            reason=redact.redact_text(r.failure.reason, secrets),
            fix=redact.redact_text(fix, secrets) if fix else fix,
        )
    return r


def run_follower(
    spec: LaunchSpec, host: HostContext, node_rank: int, progress: OnProgress | None = None
) -> PointResult:
    """Node ``node_rank`` > 0 of a server that spans several hosts: pre-flight, reap, launch its ranks,
    and keep them up until the point ends (the orchestrator cancels this call: leaving the attempt
    stops and reaps) or they die (a failed result, with the reason from this node's log). Meanwhile
    it samples this host's GPU power every ``POWER_EVERY_S`` and posts the samples as ``power``
    events every ``_POWER_POST_S`` (and as it leaves): node 0's levels sum them (``with_nodes``)."""
    with _Attempt(spec, host, progress, node_rank=node_rank) as at:
        at.preflight()  # only node rank 0 listens
        at.emit(NodeJoined(node_rank))
        server = at.launch(Path(spec.log_path).with_suffix(f".node{node_rank}.log"))
        power = Recorder(only_gpus(host.probe.power, *spec.server_flags.node_gpus)) if spec.device != "cpu" else None
        sampled = posted = time.monotonic()
        try:
            while server.alive():
                server.poll_log()
                now = time.monotonic()
                if power is not None and now - sampled >= POWER_EVERY_S:
                    power.sample()
                    sampled = now
                if power is not None and now - posted >= _POWER_POST_S:
                    _post_power(at.emit, node_rank, power)
                    posted = now
                time.sleep(0.2)
        finally:
            if power is not None:
                _post_power(at.emit, node_rank, power)
        raise server.died(server.startup.phase)
    return at.result


_POWER_POST_S = 1.0  # how often a follower sends its power samples to the driver


def _post_power(emit: OnProgress, node_rank: int, power: Recorder) -> None:
    samples = power.take()
    if samples:
        emit(PowerSamples(node_rank, tuple(samples)))
