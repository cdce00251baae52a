"""One SGLang server process: launch it, follow its log through the startup phases, stop it.

Launch: an argv list (never a shell), the point's env plus the sweep's marker, stdout and stderr to
the point's log file, in a session of its own (so stop can signal its whole group) and leashed to
the launching process (``die_with_parent``), so that a killed Ray worker takes its server along.
A point with secrets (``--api-key``, a secret-named env variable: sweep/core/redact.py) writes its log
through a ``_LogPump`` that hides them as the lines arrive (SGLang prints ``api_key='...'`` in its
``server_args=`` line); other points' output goes to the file directly.

Waiting: the log is read as it grows and each startup event is timed; the process is polled every
``POLL_S`` so a dead server is noticed within a second and explained from its log, never waited
out. Ready is ``/health`` 200 and one generate answered, both sent with the point's API key
(``Authorization: Bearer``, as SGLang's own warmup does); a 401 or 403 fails the point at once.
Progress bars (tqdm's ``\\r`` updates while weights load and graphs are captured) are parsed as
they are drawn and reported as progress events. A hang is a log that gains not one byte for
``stall_s`` (a bar's update counts), or a phase past its limit.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

import httpx

from sweep.bench import Endpoint, auth_headers, send_one
from sweep.core import FailurePhase, HostProgress, PointFailure, StartupProgress, redact
from sweep.experiment import Timeouts
from sweep.host import ports, reaper
from sweep.results import ENGINE_COLUMNS, engine_column
from sweep.sglang import (
    AdaptiveLog,
    EngineTimings,
    Progress,
    engine_timings,
    event_of,
    find_failure,
    rank_of,
    split_progress,
)

POLL_S = 0.1
TAIL_LINES = 60
_PARTIAL_MAX = 64 * 1024  # bytes kept of a line that never ends (no newline and no \r)
_PROGRESS_EVERY_S = 1.0  # at most one progress event a second (each is a message to the driver)

_StartupPhase = Literal["load", "capture", "ready"]
"""The startup phase a server is in (``Startup.phase``): a ``Stage`` of its point, and the
``FailurePhase`` of a failure in it."""


@dataclass
class _LogRead:
    """What one read of the log brought, in order: complete log lines (``str``, bar updates taken
    out) and progress-bar updates (``Progress``); and how many bytes arrived (any byte is a sign of
    life)."""

    items: list[Progress | str] = field(default_factory=list)
    nbytes: int = 0

    @property
    def lines(self) -> list[str]:
        return [i for i in self.items if isinstance(i, str)]

    @property
    def progress(self) -> list[Progress]:
        return [i for i in self.items if isinstance(i, Progress)]


class LogFollower:
    """Reads a growing log file: complete lines for the startup events, and tqdm's ``\\r`` updates
    (which have no newline until the bar closes) as they come. The tail kept for failures holds
    each bar's last update only, never the thousands before it."""

    def __init__(self, path: Path, offset: int = 0):
        """``offset``: where this server's part of the file begins (the earlier runs' lines before it)."""
        self.path = path
        self._offset = offset
        self._partial = b""
        self._last_bar = ""  # raw text of the last update reported (a bar still drawing is seen once)
        self._tail_bar: dict[str, str] = {}  # kind -> the update of that bar now in the tail
        self.tail: list[str] = []

    def read(self) -> _LogRead:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return _LogRead()
        if not data:
            return _LogRead()
        self._offset += len(data)
        out = _LogRead(nbytes=len(data))
        *complete, rest = (self._partial + data).split(b"\n")
        for c in complete:
            self._take(split_progress(c.decode("utf-8", "replace").rstrip("\r")), out, line_ends=True)
        if b"\r" in rest:  # a bar still drawing: its finished updates now, the one being drawn kept
            head, _, rest = rest.rpartition(b"\r")
            self._take(split_progress(head.decode("utf-8", "replace") + "\r"), out, line_ends=False)
            rest = b"\r" + rest
            drawn = split_progress(rest.decode("utf-8", "replace"))
            if drawn and isinstance(drawn[0], Progress) and drawn[0].raw != self._last_bar:
                out.items.append(drawn[0])
                self._last_bar = drawn[0].raw
        self._partial = rest[-_PARTIAL_MAX:]
        return out

    def _take(self, pieces: list[Progress | str], out: _LogRead, *, line_ends: bool) -> None:
        bar: Progress | None = None
        for piece in pieces:
            if isinstance(piece, Progress):
                if piece.raw != self._last_bar:
                    out.items.append(piece)
                    self._last_bar = piece.raw
                bar = piece
                continue
            if bar is not None:  # text after a bar: that bar's last update goes to the tail first
                self._keep_bar(bar)
                bar = None
            out.items.append(piece)
            self._keep(piece)
        if bar is not None and line_ends:  # the bar closed with its newline
            self._keep_bar(bar)

    def _keep(self, line: str) -> None:
        self.tail.append(line)
        if len(self.tail) > TAIL_LINES:
            del self.tail[:-TAIL_LINES]

    def _keep_bar(self, bar: Progress) -> None:
        """A bar's update replaces its earlier one in the tail (other ranks' lines between updates
        would otherwise leave one copy of the bar per line)."""
        before = self._tail_bar.get(bar.kind)
        if before is not None and before in self.tail:
            del self.tail[len(self.tail) - 1 - self.tail[::-1].index(before)]
        self._tail_bar[bar.kind] = bar.raw
        self._keep(bar.raw)

    def tail_text(self) -> str:
        """The last lines, then the bar still drawing (its last update) or the line still being written."""
        rest = (
            [p.raw if isinstance(p, Progress) else p for p in split_progress(self._partial.decode("utf-8", "replace"))][
                -1:
            ]
            if self._partial
            else []
        )
        return "\n".join(self.tail + [r for r in rest if r.strip()])


class _LogPump(threading.Thread):
    """Copies a server's output (stdout and stderr, one pipe) into its log file with its secrets
    hidden (``redact.redact_text``: the known values, and ``api_key='...'``-like assignments),
    every other byte as it came. Complete lines (``\\n``, and a progress bar's ``\\r`` updates) are
    written at once; the line still being written is held until it ends or the pipe has been quiet
    for ``HOLD_S`` (a secret is never cut in two by a read), then written as it is, so the log's
    growth -- the sign of life the hang detection watches -- lags by at most that."""

    HOLD_S = 0.1
    CHUNK = 1 << 16

    def __init__(self, fd: int, log_path: Path, secrets: list[str]):
        super().__init__(name=f"log-pump {log_path.name}", daemon=True)
        self.fd = fd
        self.out = open(log_path, "ab", buffering=0)
        self.secrets = list(secrets)
        self._pending = b""
        self._stopping = threading.Event()
        self._stop_at = float("inf")  # close(): drain until then, even if a leftover child keeps writing
        self._quiet = threading.Condition()
        self._quiet_seq = 0  # counts the quiet moments (nothing to read, nothing held back)

    def _write(self, data: bytes) -> None:
        if not data:
            return
        try:
            text = redact.redact_text(data.decode("utf-8", "surrogateescape"), self.secrets)
        except Exception as e:  # noqa: BLE001 - never write what could not be redacted, never stop reading
            text = f"[sweep: {len(data)} bytes of server output dropped, redaction failed: {type(e).__name__}]\n"
        self.out.write(text.encode("utf-8", "surrogateescape"))

    def _feed(self, data: bytes) -> None:
        buf = self._pending + data
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
        if len(buf) - cut > _PARTIAL_MAX:  # a line that never ends: written as it is
            cut = len(buf)
        self._write(buf[:cut])
        self._pending = buf[cut:]

    def _flush_pending(self) -> None:
        self._write(self._pending)
        self._pending = b""

    def run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.fd], [], [], self.HOLD_S)
                if ready:
                    data = os.read(self.fd, self.CHUNK)
                    if not data:  # every writer is gone
                        break
                    self._feed(data)
                    if time.monotonic() < self._stop_at:
                        continue
                    break
                self._flush_pending()
                with self._quiet:
                    self._quiet_seq += 1
                    self._quiet.notify_all()
                if self._stopping.is_set():
                    break
        except OSError:
            pass
        finally:
            try:
                self._flush_pending()
            finally:
                self.out.close()
                with self._quiet:
                    self._quiet_seq += 1
                    self._quiet.notify_all()

    def settle(self, timeout: float = 1.0) -> None:
        """Wait (bounded) until what the server wrote so far is in the file."""
        with self._quiet:
            seq = self._quiet_seq
            self._quiet.wait_for(lambda: self._quiet_seq > seq or not self.is_alive(), timeout)

    def close(self, timeout: float = 2.0) -> None:
        """Write what is left and stop (children that outlived the server may keep the pipe open)."""
        self._stop_at = time.monotonic() + timeout / 2
        self._stopping.set()
        self.join(timeout)


@dataclass
class Startup:
    """When each startup event was seen (seconds since launch). Events repeat: a speculative server
    loads two models and allocates two KV caches, and each TP rank logs its own lines."""

    events: dict[str, list[float]] = field(default_factory=dict)
    order: list[tuple[str, float]] = field(default_factory=list)  # every event, as it came
    ready: float | None = None
    by_rank: dict[str, set[str]] = field(default_factory=dict)  # events seen per TP rank
    progress: dict[str, tuple[float, Progress]] = field(default_factory=dict)  # kind -> (seen at, last update)
    engine: EngineTimings | None = None  # SGLang's own "Engine startup timings (s): ..." (0.5.23-era)

    def see(self, event: str, t: float, rank: str | None = None) -> None:
        self.events.setdefault(event, []).append(t)
        self.order.append((event, t))
        if rank is not None:
            self.by_rank.setdefault(rank, set()).add(event)

    def see_progress(self, p: Progress, t: float) -> bool:
        """Keep the last update of each kind; False for a bar's unnamed first frame (no news)."""
        if not p.desc and p.n == 0:
            return False
        self.progress[p.kind] = (t, p)
        return True

    def first(self, event: str) -> float | None:
        return self.events[event][0] if event in self.events else None

    def last(self, event: str) -> float | None:
        return self.events[event][-1] if event in self.events else None

    @property
    def phase(self) -> _StartupPhase:
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
            return min(
                t
                for t in (self.first("kv_cache"), self.first("capture_begin"), self.first("capture_end"))
                if t is not None
            )
        return 0.0

    def last_progress(self) -> str:
        """The latest progress update of any kind, as a summary ('' when none)."""
        if not self.progress:
            return ""
        return max(self.progress.values(), key=lambda tp: tp[0])[1].summary()

    def progress_records(self) -> list[dict]:
        """The last update of each kind, for the points table (``startup_progress``)."""
        return [
            {
                "kind": p.kind,
                "desc": p.desc,
                "n": p.n,
                "total": p.total,
                "elapsed_s": p.elapsed_s,
                "eta_s": p.eta_s,
                "rate": p.rate,
                "seen_s": round(t, 3),
                "summary": p.summary(),
            }
            for t, p in sorted(self.progress.values(), key=lambda tp: tp[0])
        ]

    def durations(self) -> dict[str, float | None]:
        """Phase durations in seconds, for the points table (None for a phase not seen), and SGLang's
        own startup timings where it printed them (``engine_*_s``, see ENGINE_TIMINGS).

        Order-aware, because versions differ: 0.5.23 loads target and drafter, then allocates both
        KV caches, then captures the target's graphs and the drafter's; 0.5.10 loads the drafter
        after the target's graphs (its load then counts in ``draft_capture_s``). A server without
        graphs (CPU) has no capture: ``http_s`` runs from its KV cache."""

        def span(start: float | None, end: float | None) -> float | None:
            return round(end - start, 3) if start is not None and end is not None else None

        kv_at = self.first("kv_cache")
        loads = [t for ev, t in self.order if ev == "load_end" and (kv_at is None or t <= kv_at)]
        kv_end = None  # the end of the first run of KV-cache lines (target and, 0.5.23, drafter)
        for ev, t in self.order:
            if ev == "kv_cache":
                kv_end = t
            elif kv_end is not None:  # graphs begin, or (0.5.10) the drafter's load
                break
        up = self.first("http_up")
        before_http = [t for ev, t in self.order if ev not in ("http_up", "fired_up") and (up is None or t <= up)]
        capture_end = self.last("capture_end")
        engine = {
            engine_column(k): v
            for k, v in (self.engine.flat() if self.engine else {}).items()
            if engine_column(k) in ENGINE_COLUMNS
        }
        return {
            "load_s": span(0.0, loads[-1] if loads else None),
            "kv_cache_s": span(loads[-1] if loads else None, kv_end),
            "capture_s": span(self.first("capture_begin"), capture_end),
            "draft_capture_s": span(
                capture_end if capture_end is not None else kv_end, self.last("draft_capture_end")
            ),  # 0.5.10: drafter load included
            "http_s": span(before_http[-1] if before_http and up is not None else None, up),
            "ready_s": span(up, self.ready),
            "startup_s": span(0.0, self.ready),
            **{c: engine.get(c) for c in ENGINE_COLUMNS},
        }


class ServerProcess:
    """One server's process tree and its log, driven with ``with``: entering starts it, leaving stops
    the whole tree (SIGTERM, SIGKILL after ``grace_s``) however the block ends; what was killed is in
    ``killed`` afterwards.

        with ServerProcess(argv, env, log, port=port) as server:
            server.wait_ready(timeouts)
            bench.run(server.endpoint, settings)
    """

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        *,
        port: int,
        host: str = "127.0.0.1",
        secrets: list[str] | None = None,
        api_key: str | None = None,
        admin_api_key: str | None = None,
        grace_s: float = 30.0,
    ):
        """``secrets``: what the log must not show (default: the values of the argv's secret flags
        and the env's secret names); ``api_key``: what readiness and the benchmark send (the server's
        --api-key), ``admin_api_key``: what the benchmark's /flush_cache sends (its --admin-api-key);
        ``grace_s``: how long leaving the ``with`` waits after SIGTERM before SIGKILL."""
        self.argv = list(argv)
        self.env = dict(env)
        self.secrets = redact.secret_values(argv, env) if secrets is None else list(secrets)
        self.api_key, self.admin_api_key = api_key, admin_api_key
        self._pump: _LogPump | None = None
        self.log_path = Path(log_path)
        self.port = port
        self.host = host
        self.proc: subprocess.Popen | None = None
        self.started: float = 0.0
        self.log = LogFollower(self.log_path)
        self.startup = Startup()
        self._progress_pending: tuple[Progress, _StartupPhase] | None = None  # (update, its phase) not reported yet
        self._progress_sent = float("-inf")
        self._progress_kind = ""
        self.grace_s = grace_s
        self.killed: list[dict] = []  # what stopping it killed (reaper.kill_group's records), every stop
        self.adaptive = AdaptiveLog()  # what its log says of adaptive speculation
        self._log_lock = threading.Lock()  # one reader of the log at a time

    def __enter__(self) -> "ServerProcess":
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(self.grace_s)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def endpoint(self) -> Endpoint:
        """Where the benchmark reaches it: its URL, its --api-key, and its --admin-api-key for /flush_cache."""
        return Endpoint(self.url, api_key=self.api_key, admin_key=self.admin_api_key)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._mark_earlier_runs()
        leash = [sys.executable, "-m", "sweep.host.die_with_parent", str(os.getpid()), "--"]
        if self.secrets:  # through the pump, which hides them (see LogPump)
            self.proc = subprocess.Popen(
                leash + self.argv,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
            assert self.proc.stdout is not None
            self._pump = _LogPump(self.proc.stdout.fileno(), self.log_path, self.secrets)
            self._pump.start()
        else:
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    leash + self.argv,
                    env={**os.environ, **self.env},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
        self.started = time.monotonic()

    def _mark_earlier_runs(self) -> None:
        """A point run again (--retry-failed, --force, a retry after its host was lost) appends to the
        log of its earlier runs, which is kept: a marker line goes between, and this server's log is
        read from there on, so its phases, tail and failure reason are its own."""
        if not self.log_path.is_file() or not self.log_path.stat().st_size:
            return  # a first run: read from the start (the LogFollower of __init__)
        with open(self.log_path, "ab") as log:
            log.write(
                (
                    f"\n[{time.strftime('%Y-%m-%d %H:%M:%S')}] [sweep] the server is started again; "
                    "the lines above are an earlier run's\n"
                ).encode()
            )
            self.log = LogFollower(self.log_path, offset=log.tell())

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died(self, phase: FailurePhase) -> PointFailure:
        """The failure of a server that exited, explained from its log."""
        time.sleep(0.05)  # let the last lines reach the file
        if self._pump is not None:
            self._pump.settle(1.0)
        with self._log_lock:
            self.log.read()
        f = find_failure(self.log.tail, self.proc.returncode if self.proc else None)
        return PointFailure(phase, f"{f.reason}", fix=f.fix)

    def poll_log(self, progress: Callable[[HostProgress], None] | None = None) -> bool:
        """Read what the log gained: time the startup events, keep SGLang's startup timings, follow
        the progress bars (reported at most every PROGRESS_EVERY_S; a new kind, a finished bar, or
        the last update before a phase change at once). True when any byte arrived: a bar's ``\\r``
        update is as much a sign of life as a line."""
        with self._log_lock:
            return self._poll_log(progress)

    def _poll_log(self, progress: Callable[[HostProgress], None] | None) -> bool:
        now = self.elapsed()
        got = self.log.read()
        for item in got.items:
            if not isinstance(item, Progress) and self.adaptive.see(item) is not None:
                continue
            if isinstance(item, Progress):
                if self.startup.see_progress(item, now):
                    self._progress_pending = (item, self.startup.phase)
                    if item.done:  # a finished bar is news at once
                        self._progress_sent = float("-inf")
                continue
            timings = engine_timings(item)
            if timings is not None:
                self.startup.engine = timings
            ev = event_of(item)
            if ev:
                before = self.startup.phase
                self.startup.see(ev, now, rank_of(item))
                if self.startup.phase != before:
                    self._send_progress(progress, now, force=True)
                    if progress:
                        progress(StartupProgress(self.startup.phase, elapsed_s=round(now, 1)))
        self._send_progress(progress, now)
        return got.nbytes > 0

    def adaptive_mark(self) -> int:
        """Read the log as far as the server has written it; the adaptive switches seen so far (a
        benchmark level's bound: ``AdaptiveLog.level``). SGLang writes each line whole as it logs it;
        through the pump (a point with secrets) a complete line reaches the file at once too."""
        self.poll_log()
        return self.adaptive.mark()

    def _send_progress(self, progress: Callable[[HostProgress], None] | None, now: float, force: bool = False) -> None:
        if self._progress_pending is None:
            return
        p, stage = self._progress_pending
        if force or now - self._progress_sent >= _PROGRESS_EVERY_S or p.kind != self._progress_kind:
            self._progress_pending, self._progress_sent, self._progress_kind = None, now, p.kind
            if progress:
                progress(StartupProgress(stage, elapsed_s=round(now, 1), progress=p.summary(), progress_kind=p.kind))

    def last_output(self) -> str:
        """The last thing the log says (a bar's last update counts), for hang reasons."""
        text = self.log.tail_text().rstrip()
        return text.rsplit("\n", 1)[-1] if text else "(none)"

    def _hang_context(self) -> str:
        last = self.startup.last_progress()
        return f"last log line: {self.last_output()}" + (f"; last progress: {last}" if last else "")

    def wait_ready(
        self,
        timeouts: Timeouts,
        progress: Callable[[HostProgress], None] | None = None,
        ready_prompt: str = "Say hello.",
    ) -> Startup:
        """Block until the server is ready (``/health`` 200 and one generate answered); raise
        PointFailure with the phase and the reason when it dies or hangs. A hang is no output at
        all (not one byte: a progress bar's update counts) for ``stall_s`` once the server has said
        its first word, or a phase past its limit. The silence before the first word is the
        interpreter importing (SGLang and torch: seconds, a minute from a cold disk, longer on a
        loaded machine), bounded by ``load_s`` and ``total_s``, not taken for a stuck rank."""
        assert self.proc is not None, "start() first"
        last_output_at: float | None = None
        next_http_try = 0.0
        with httpx.Client(timeout=httpx.Timeout(10.0, connect=1.0), headers=auth_headers(self.api_key)) as client:
            while True:
                now = self.elapsed()
                if self.poll_log(progress):
                    last_output_at = now
                phase = self.startup.phase
                if self.proc.poll() is not None:
                    raise self.died(phase)
                limit = {"load": timeouts.load_s, "capture": timeouts.capture_s, "ready": timeouts.ready_s}[phase]
                if now - self.startup.phase_started() > limit:
                    raise PointFailure(
                        phase,
                        f"hang: still in {phase} after {limit:.0f} s (limit server.timeouts.{phase}_s); "
                        f"{self._hang_context()}",
                        fix=f"raise server.timeouts.{phase}_s if this phase is just slow",
                    )
                if now > timeouts.total_s:
                    raise PointFailure(
                        phase,
                        f"hang: not ready after {timeouts.total_s:.0f} s (server.timeouts.total_s)",
                        fix="raise server.timeouts.total_s if startup is just slow (a large model, a cold disk)",
                    )
                if last_output_at is not None and now - last_output_at > timeouts.stall_s and phase != "ready":
                    raise PointFailure(
                        phase,
                        f"hang: no log output for {timeouts.stall_s:.0f} s in {phase} "
                        f"(server.timeouts.stall_s); {self._hang_context()}",
                        fix="look at the log for a stuck rank; raise stall_s if one step "
                        "(a shard, a batch size) can take longer than that",
                    )
                if (phase == "ready" or now >= next_http_try) and self._ready(client, ready_prompt):
                    if "http_up" not in self.startup.events:
                        self.startup.see("http_up", now)
                    self.startup.ready = self.elapsed()
                    return self.startup
                if phase != "ready":
                    next_http_try = now + 2.0  # the port only listens once uvicorn starts
                time.sleep(POLL_S)

    def _ready(self, client: httpx.Client, prompt: str) -> bool:
        """``/health`` answers 200 and one real generate request is answered, both with the API key
        (SGLang leaves ``/health`` open and guards ``/generate``). A 401 or 403 raises at once: the
        server will never take our requests, and waiting ``ready_s`` for it would only call it a hang."""
        if self._a_neighbour_listens():
            return False
        try:
            health = client.get(f"{self.url}/health")
        except httpx.HTTPError:
            return False
        if health.status_code in (401, 403):
            raise self._unauthorized("GET /health", health.status_code, health.text)
        if health.status_code != 200:
            return False
        rec = send_one(self.url, prompt, api="generate", max_tokens=8, timeout_s=10.0, api_key=self.api_key)
        if rec.http_status in (401, 403):
            raise self._unauthorized("POST /generate", rec.http_status, rec.error or "")
        return rec.ok

    def _a_neighbour_listens(self) -> bool:
        """Another server of a sweep (one carrying a sweep marker, outside this server's process tree)
        listens on this server's port: whatever answers there is not this server, however ready it
        says it is (two sweeps on one machine; this one dies of the port taken, and is told so)."""
        if self.proc is None:
            return False
        mine = {p.pid for p in reaper.tree(self.proc.pid)}
        return any(h.pid is not None and h.pid not in mine and h.sweep is not None for h in ports.holders(self.port))

    def _unauthorized(self, request: str, status: int, body: str) -> PointFailure:
        what = "401 Unauthorized" if status == 401 else "403 Forbidden"
        sent = (
            "with the key the sweep sends (server.flags.api-key, as Authorization: Bearer): it expects another"
            if self.api_key
            else "without a key (the point sets no server.flags.api-key): it wants one"
        )
        said = redact.redact_text(" ".join(body.split())[:120], self.secrets)
        return PointFailure(
            "ready",
            f"the server answered {what} to {request} {sent} ({said}); set "
            "server.flags.api-key to the key the server expects",
            fix="a launcher script or config file that sets its own API key must agree with server.flags.api-key",
        )

    def stop(self, grace_s: float) -> list[dict]:
        """SIGTERM the group, SIGKILL after the grace period, wait until the whole tree is gone."""
        if self.proc is None:
            return []
        killed = reaper.kill_group(self.proc.pid, grace_s, "stopped after the point")
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.close_log()
        self.killed += killed
        return killed

    def close_log(self) -> None:
        """Stop the log pump (if any) once what the server wrote is in the file."""
        if self._pump is None:
            return
        self._pump.close()
        if not self._pump.is_alive() and self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
