"""The server's port on a host: chosen free at launch on a simulated host, and on a real host, when
it is taken, who holds it.

Simulated hosts (``--dry-run``, ``--local``) share one machine with each other and with any other
sweep running there, so a fixed number (``server.port`` + the host's index) is a race: pre-flight
finds it free, another sweep's server binds it while this one starts, and this one dies with
uvicorn's ``address already in use``. There the port is the kernel's choice of a free ephemeral
port, taken right before the launch (``free_port``), and a launch that lost it anyway is relaunched
on another (``sweep.host.point``). The kernel's choice starts at a random place in its range, so two
sweeps rarely draw the same port, where a scan from ``server.port`` upward would give both the
same first candidate, and every collision costs a whole server startup.

A real host's port is the host's (``server.port``): when it is taken, pre-flight names the process
that holds it (``holders``), and whether that is another sweep's server (its marker).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from sweep.host import reaper

PORT_RETRIES = 3  # relaunches of a server whose port was taken during its startup (simulated hosts)


def free_port(host: str = "127.0.0.1", avoid: Iterable[int] = ()) -> int:
    """A port nothing is bound to on ``host`` right now, as the kernel picks one (its ephemeral
    range, from a random place), never one of ``avoid`` (ports already tried, the dist-init port)."""
    avoid = set(avoid)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(100):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port
    raise OSError(f"no free port on {host} outside {sorted(avoid)[:10]} after 100 tries")


@dataclass(frozen=True)
class _Holder:
    """A process listening on (or bound to) a port: its pid (None where this user may not see it),
    name, and the sweep whose marker it carries (``SWEEP_SWEEP``; None: not a sweep's server)."""

    pid: int | None
    name: str
    sweep: str | None = None

    def describe(self) -> str:
        if self.pid is None:
            return "a process this user cannot see (another user's)"
        who = f"pid {self.pid} ({self.name})"
        return who + (
            f", a server of sweep {self.sweep!r} ({reaper.MARK_SWEEP} in its environment)"
            if self.sweep
            else ", not a sweep's server (no sweep marker)"
        )


def holders(port: int) -> list[_Holder]:
    """The processes bound to TCP ``port`` on any address, listeners first (psutil's
    ``net_connections``: every pid where this user may read them, others' as pid None)."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return []
    found: dict[int | None, tuple[bool, _Holder]] = {}
    for c in conns:
        if not c.laddr or c.laddr.port != port:
            continue
        listening = c.status == psutil.CONN_LISTEN
        if c.pid in found and found[c.pid][0]:
            continue
        found[c.pid] = (listening, _holder(c.pid))
    return [h for _, h in sorted(found.values(), key=lambda lh: not lh[0])]


def _holder(pid: int | None) -> _Holder:
    if pid is None:
        return _Holder(None, "?")
    try:
        proc = psutil.Process(pid)
        name = proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return _Holder(pid, "?")
    try:
        sweep = proc.environ().get(reaper.MARK_SWEEP)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        sweep = None
    return _Holder(pid, name, sweep or None)
