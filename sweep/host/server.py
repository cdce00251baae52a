"""One SGLang server process: launch it, follow its log through the startup phases, stop it.

Launch: an argv list (never a shell), the point's env plus the sweep's marker, stdout and stderr to
the point's log file, in a session of its own (so stop can signal its whole group) and leashed to
the launching process (``die_with_parent``), so that a killed Ray worker takes its server along.

Waiting: the log is read as it grows and each startup event is timed; the process is polled every
``POLL_S`` so a dead server is noticed within a second and explained from its log, never waited
out. A hang is a log that stops growing for ``stall_s``, or a phase past its limit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx

from sweep.config import Timeouts
from sweep.errors import PointFailure
from sweep.host import reaper
from sweep.sglang.logs import event_of, find_failure, rank_of

POLL_S = 0.1
TAIL_LINES = 60


class LogFollower:
    """Reads complete new lines from a growing log file."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = 0
        self._partial = b""
        self.tail: list[str] = []

    def read(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        if not data:
            return []
        self._offset += len(data)
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        lines = [c.decode("utf-8", "replace").rstrip("\r") for c in complete]
        self.tail = (self.tail + lines)[-TAIL_LINES:]
        return lines

    def tail_text(self) -> str:
        rest = [self._partial.decode("utf-8", "replace")] if self._partial else []
        return "\n".join(self.tail + rest)


@dataclass
class Startup:
    """When each startup event was seen (seconds since launch). Events can repeat: the drafter
    loads its weights and captures its graphs after the target."""

    events: dict[str, list[float]] = field(default_factory=dict)
    ready: float | None = None
    by_rank: dict[str, set[str]] = field(default_factory=dict)  # events seen per TP rank

    def see(self, event: str, t: float, rank: str | None = None) -> None:
        self.events.setdefault(event, []).append(t)
        if rank is not None:
            self.by_rank.setdefault(rank, set()).add(event)

    def first(self, event: str) -> float | None:
        return self.events[event][0] if event in self.events else None

    def last(self, event: str) -> float | None:
        return self.events[event][-1] if event in self.events else None

    @property
    def phase(self) -> str:
        """load (weights), capture (KV cache, CUDA graphs, drafter), ready (HTTP up, warmup).

        The server is only as far as its slowest rank: a rank that dies allocating its KV cache
        while another already captures graphs failed in ``load``."""
        if "http_up" in self.events:
            return "ready"
        past_load = {"kv_cache", "capture_begin", "capture_end"}
        if self.by_rank:
            return "capture" if all(past_load & seen for seen in self.by_rank.values()) else "load"
        return "capture" if past_load & set(self.events) else "load"

    def phase_started(self) -> float:
        if self.phase == "ready":
            return self.first("http_up") or 0.0
        if self.phase == "capture":
            return min(t for t in (self.first("kv_cache"), self.first("capture_begin"), self.first("capture_end"))
                       if t is not None)
        return 0.0

    def durations(self) -> dict[str, float | None]:
        """Phase durations in seconds, for the points table (None for a phase not seen)."""

        def span(start: float | None, end: float | None) -> float | None:
            return round(end - start, 3) if start is not None and end is not None else None

        graphs_end = self.last("draft_capture_end") or self.first("capture_end")
        return {
            "load_s": span(0.0, self.first("load_end")),
            "kv_cache_s": span(self.first("load_end"), self.first("kv_cache")),
            "capture_s": span(self.first("capture_begin"), self.first("capture_end")),
            "draft_capture_s": span(self.first("capture_end"), self.last("draft_capture_end")),  # drafter load included
            "http_s": span(graphs_end, self.first("http_up")),
            "ready_s": span(self.first("http_up"), self.ready),
            "startup_s": span(0.0, self.ready),
        }


class ServerProcess:
    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, *, port: int,
                 host: str = "127.0.0.1"):
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = Path(log_path)
        self.port = port
        self.host = host
        self.proc: subprocess.Popen | None = None
        self.started: float = 0.0
        self.log = LogFollower(self.log_path)
        self.startup = Startup()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        leash = [sys.executable, "-m", "sweep.host.die_with_parent", str(os.getpid()), "--"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                leash + self.argv, env={**os.environ, **self.env}, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died(self, phase: str) -> PointFailure:
        """The failure of a server that exited, explained from its log."""
        time.sleep(0.05)  # let the last lines reach the file
        self.log.read()
        f = find_failure(self.log.tail, self.proc.returncode if self.proc else None)
        return PointFailure(phase, f"{f.reason}", fix=f.fix)

    def poll_log(self, progress: Callable[[dict], None] | None = None) -> bool:
        """Read the new log lines and time the startup events in them; True when a line arrived."""
        now = self.elapsed()
        lines = self.log.read()
        for line in lines:
            ev = event_of(line)
            if ev:
                before = self.startup.phase
                self.startup.see(ev, now, rank_of(line))
                if progress and self.startup.phase != before:
                    progress({"stage": self.startup.phase, "elapsed_s": round(now, 1)})
        return bool(lines)

    def wait_ready(self, timeouts: Timeouts, progress: Callable[[dict], None] | None = None,
                   ready_prompt: str = "Say hello.") -> Startup:
        """Block until the server is ready (``/health`` 200 and one generate answered); raise
        PointFailure with the phase and the reason when it dies or hangs."""
        assert self.proc is not None, "start() first"
        last_line_at = 0.0
        next_http_try = 0.0
        with httpx.Client(timeout=httpx.Timeout(10.0, connect=1.0)) as client:
            while True:
                now = self.elapsed()
                if self.poll_log(progress):
                    last_line_at = now
                phase = self.startup.phase
                if self.proc.poll() is not None:
                    raise self.died(phase)
                limit = {"load": timeouts.load_s, "capture": timeouts.capture_s, "ready": timeouts.ready_s}[phase]
                if now - self.startup.phase_started() > limit:
                    raise PointFailure(phase, f"hang: still in {phase} after {limit:.0f} s (limit server.timeouts.{phase}_s); "
                                              f"last log line: {self.log.tail[-1] if self.log.tail else '(none)'}",
                                       fix=f"raise server.timeouts.{phase}_s if this phase is just slow")
                if now > timeouts.total_s:
                    raise PointFailure(phase, f"hang: not ready after {timeouts.total_s:.0f} s (server.timeouts.total_s)")
                if now - last_line_at > timeouts.stall_s and phase != "ready":
                    raise PointFailure(phase, f"hang: no log output for {timeouts.stall_s:.0f} s in {phase} "
                                              f"(server.timeouts.stall_s); last log line: "
                                              f"{self.log.tail[-1] if self.log.tail else '(none)'}",
                                       fix="look at the log for a stuck rank; raise stall_s if capture is just slow")
                if (phase == "ready" or now >= next_http_try) and self._ready(client, ready_prompt):
                    if "http_up" not in self.startup.events:
                        self.startup.see("http_up", now)
                    self.startup.ready = self.elapsed()
                    return self.startup
                if phase != "ready":
                    next_http_try = now + 2.0  # the port only listens once uvicorn starts
                time.sleep(POLL_S)

    def _ready(self, client: httpx.Client, prompt: str) -> bool:
        """``/health`` answers 200 and one real generate request is answered."""
        from sweep.bench.client import send_one

        try:
            if client.get(f"{self.url}/health").status_code != 200:
                return False
        except httpx.HTTPError:
            return False
        return send_one(self.url, prompt, api="generate", max_tokens=8, timeout_s=10.0).ok

    def stop(self, grace_s: float) -> list[dict]:
        """SIGTERM the group, SIGKILL after the grace period, wait until the whole tree is gone."""
        if self.proc is None:
            return []
        killed = reaper.kill_group(self.proc.pid, grace_s, "stopped after the point")
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return killed
