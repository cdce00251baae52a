"""Finding and killing what a server left behind: process trees, marked processes, GPU holders.

A process is *ours* when its environment carries this sweep's marker for this host
(``SWEEP_SWEEP`` and ``SWEEP_HOST``, set on every server we launch and inherited by its children), or
when it runs in the session of a server we launched. The session matters because real SGLang names
its children with setproctitle (``sglang::scheduler``, ``sglang::detokenizer``), which overwrites
their ``/proc/<pid>/environ``: the marker cannot be read back from exactly the processes that hold
the GPUs. Every server starts in a session of its own, recorded on the host (``remember``), so its
children are found by session id even after the launcher died. Only ours are killed. A process holding a GPU that is not ours is reported, and killed only when
the experiment allows it (``server.reap.kill_foreign_gpu_processes``). Every kill is recorded with
its reason and how the process was found (``found_by``: ``marker``, ``session`` or ``gpu``).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from sweep.core import atomic, redact_argv, redact_text, redact_tree
from sweep.host.gpu import GpuProbe

MARK_SWEEP = "SWEEP_SWEEP"
_MARK_HOST = "SWEEP_HOST"
_MARK_POINT = "SWEEP_POINT"


@dataclass
class Marker:
    sweep: str
    host: str

    def env(self, point_id: str) -> dict[str, str]:
        return {MARK_SWEEP: self.sweep, _MARK_HOST: self.host, _MARK_POINT: point_id}

    def owns(self, proc: psutil.Process) -> bool:
        try:
            env = proc.environ()
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
            return False
        return env.get(MARK_SWEEP) == self.sweep and env.get(_MARK_HOST) == self.host


@dataclass
class ReapReport:
    killed: list[dict] = field(default_factory=list)  # {pid, name, cmdline, reason[, found_by][, gpu]}
    foreign: list[dict] = field(default_factory=list)  # GPU processes not ours, left alone
    gpu_free: bool = True
    port_free: bool = True
    waited_s: float = 0.0

    def merge(self, other: "ReapReport") -> None:
        self.killed += other.killed
        self.foreign += other.foreign
        self.gpu_free, self.port_free = other.gpu_free, other.port_free
        self.waited_s += other.waited_s

    def as_dict(self, secrets: list[str] | tuple[str, ...] = ()) -> dict:
        """The report for the points table; ``secrets`` (the point's secret values) are hidden
        wherever a command line or reason still has them (secret flags already are: ``_describe``)."""
        return redact_tree(asdict(self), secrets)


def _describe(p: psutil.Process, reason: str) -> dict:
    """pid, name, command line (secrets redacted: ``--api-key X`` and any secret-named flag, and
    ``--flag=X``; see sweep/core/redact.py; then cut to 300 characters) and the reason."""
    try:
        cmdline = redact_text(" ".join(redact_argv(p.cmdline())))
        return {"pid": p.pid, "name": p.name(), "cmdline": cmdline[:300], "reason": reason}
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return {"pid": p.pid, "name": "?", "cmdline": "", "reason": reason}


def tree(pid: int) -> list[psutil.Process]:
    """A process and all its descendants (empty when it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _signal(procs: list[psutil.Process], sig: int, group: int | None) -> None:
    if group is not None:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass
    if group is None or sig == signal.SIGKILL:  # with a group, SIGKILL also those that left it
        for p in procs:
            try:
                p.send_signal(sig)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass


def kill_processes(
    procs: list[psutil.Process],
    grace_s: float,
    reason: str | dict[int, str],
    *,
    group: int | None = None,
    found_by: dict[int, str] | None = None,
) -> list[dict]:
    """SIGTERM, wait up to ``grace_s``, SIGKILL the rest, and wait until every one is gone. With
    ``group``, SIGTERM goes to that process group (a server started in its own group shuts down
    the way it would on Ctrl-C), and SIGKILL to the group and to each process that left it.
    ``reason`` is one for all or one per pid; ``found_by`` (per pid) goes into each entry as it is."""
    procs = [p for p in procs if p.pid != os.getpid()]
    if not procs:
        return []
    described = [_describe(p, reason if isinstance(reason, str) else reason[p.pid]) for p in procs]
    for d in described:
        if found_by and d["pid"] in found_by:
            d["found_by"] = found_by[d["pid"]]
    _signal(procs, signal.SIGTERM, group)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    still: list[psutil.Process] = []
    if alive:
        _signal(alive, signal.SIGKILL, group)
        _, still = psutil.wait_procs(alive, timeout=10)
    alive_pids, still_pids = {p.pid for p in alive}, {p.pid for p in still}
    for d in described:
        if d["pid"] in alive_pids:
            d["reason"] += " (SIGKILL after grace)"
        if d["pid"] in still_pids:
            d["reason"] += " (still alive after SIGKILL)"
    return described


def kill_group(pid: int, grace_s: float, reason: str) -> list[dict]:
    """Stop a server started in its own process group, and its whole tree (children that left the
    group included)."""
    return kill_processes(tree(pid), grace_s, reason, group=pid)


def cache_dir() -> Path:
    """Where a host keeps what the sweep learns about it (``SWEEP_CACHE_DIR``, else ~/.cache/sweep)."""
    return Path(os.environ.get("SWEEP_CACHE_DIR", Path.home() / ".cache" / "sweep"))


def _sessions_file(marker: Marker) -> Path:
    key = hashlib.sha256(json.dumps([marker.sweep, marker.host]).encode()).hexdigest()[:16]
    return cache_dir() / "sessions" / f"{key}.jsonl"


def remember(marker: Marker, session_leader: int) -> None:
    """Record the session of a server just started (its leader's pid is the session id)."""
    try:
        f = _sessions_file(marker)
        f.parent.mkdir(parents=True, exist_ok=True)
        with open(f, "a") as out:
            out.write(json.dumps({"sid": session_leader, "at": time.time()}) + "\n")
    except OSError:
        pass  # a read-only home only loses the orphan search; the marker scan still works


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError, OSError):
        return None


def _remembered(marker: Marker) -> list[dict]:
    """The sessions ``remember`` recorded for this sweep and host ([] when none or unreadable)."""
    try:
        rows = [json.loads(line) for line in _sessions_file(marker).read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []
    return [r for r in rows if isinstance(r, dict) and "sid" in r]


def _forget_empty(marker: Marker, rows: list[dict], alive: set[int]) -> None:
    keep = [r for r in rows if int(r["sid"]) in alive]
    if len(keep) == len(rows):
        return
    try:
        f = _sessions_file(marker)
        atomic.write_text(f, "".join(json.dumps(r) + "\n" for r in keep))
    except OSError:
        pass


def marked(marker: Marker) -> list[psutil.Process]:
    """Live processes of this sweep on this host (never this process, nor its own session): those
    carrying the marker, and every process in the session of one of them or of a remembered server."""
    return [p for p, _, _ in found(marker)]


def found(marker: Marker) -> list[tuple[psutil.Process, str, int | None]]:
    """``marked``'s processes, each with how it was found and its session: ``marker`` (its environment
    carries SWEEP_SWEEP/SWEEP_HOST for this sweep and host), ``session`` (no marker readable, but in
    the session of a marked process or of a server this sweep launched)."""
    me, my_sid = os.getpid(), _sid(os.getpid())
    procs = [p for p in psutil.process_iter() if p.pid != me]
    direct = {p.pid for p in procs if marker.owns(p)}
    rows = _remembered(marker)
    sids = {_sid(pid) for pid in direct} | {int(r["sid"]) for r in rows}
    sids -= {None, my_sid, 0, 1}
    out: list[tuple[psutil.Process, str, int | None]] = []
    live_sids: set[int] = set()
    for p in procs:
        sid = _sid(p.pid) if sids else None
        if sid is not None and sid in sids:  # None was taken out of sids above: the same test, narrowed
            live_sids.add(sid)
        if p.pid in direct:
            out.append((p, "marker", sid))
        elif sid in sids:
            out.append((p, "session", sid))
    _forget_empty(marker, rows, live_sids)
    return out


def bind_error(port: int, host: str = "127.0.0.1") -> OSError | None:
    """Why ``port`` cannot be bound on ``host`` (an IPv4 or IPv6 address), or None when it can:
    ``EADDRINUSE`` (taken), ``EADDRNOTAVAIL`` (not an address of this machine), ..."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e
    return None


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    return bind_error(port, host) is None


def _gpus_free(probe: GpuProbe, threshold_mib: int) -> bool:
    return all(g.mem_used_mib <= threshold_mib for g in probe.gpus())


def reap(
    marker: Marker,
    probe: GpuProbe,
    *,
    port: int | None,
    grace_s: float = 5.0,
    gpu_free_mib: int = 2048,
    kill_foreign: bool = False,
    wait_s: float = 60.0,
    why: str = "left over",
) -> ReapReport:
    """Kill what this sweep left on this host, deal with GPU holders, then wait (bounded) until
    GPU memory is back under ``gpu_free_mib`` on every GPU and ``port`` can be bound."""
    report = ReapReport()
    ours = found(marker)
    if ours:
        reasons = {
            p.pid: f"{why}: carries this sweep's marker"
            if how == "marker"
            else f"{why}: in the session (sid {sid}) of a server this sweep launched; no marker readable"
            for p, how, sid in ours
        }
        report.killed += kill_processes(
            [p for p, _, _ in ours], grace_s, reasons, found_by={p.pid: how for p, how, _ in ours}
        )
    for gp in probe.processes():
        try:
            proc = psutil.Process(gp.pid)
        except psutil.NoSuchProcess:
            continue
        entry = {**_describe(proc, f"holds {gp.mem_mib} MiB on GPU {gp.gpu_index}"), "gpu": gp.gpu_index}
        if marker.owns(proc):
            report.killed += kill_processes(
                [proc],
                grace_s,
                f"{why}: ours (carries the marker), holds {gp.mem_mib} MiB on GPU {gp.gpu_index}",
                found_by={proc.pid: "gpu"},
            )
        elif kill_foreign:
            report.killed += kill_processes(
                [proc],
                grace_s,
                f"not ours, holds {gp.mem_mib} MiB on GPU {gp.gpu_index}; kill_foreign_gpu_processes is on",
                found_by={proc.pid: "gpu"},
            )
        else:
            report.foreign.append(entry)
    # memory held by a process we may not kill will not come back: check it once, don't wait for it
    wait_gpu = not report.foreign
    start = time.monotonic()
    while True:
        report.gpu_free = _gpus_free(probe, gpu_free_mib)
        if not wait_gpu and not report.gpu_free:
            report.port_free = port is None or port_free(port)
            break
        report.port_free = port is None or port_free(port)
        if (report.gpu_free and report.port_free) or time.monotonic() - start >= wait_s:
            break
        time.sleep(0.2)
    report.waited_s = round(time.monotonic() - start, 3)
    return report
