"""The live view of a sweep: one line per host (its point, stage and elapsed time) and a bar for the
sweep (done, failed, remaining, ETA). Plain log lines when the output is not a terminal (CI,
``ray job submit``, a pipe), three per point: its start on a host; its benchmark's, with how long
the server took to come up (``benchmark, server up in 12s (load 8s, capture 4s)``); its end with
what it measured (``drafter=d1: ok in 41s on gpu-1 (single stream, C=1, 2, 4)``); and while it
runs, a line at most every ``_PLAIN_EVERY_S`` saying where it is (``load 27/64 shards``, ``level
C=30 120/200``: a level always with its C).

The ETA is ``sweep.experiment.estimate``'s model, the one ``--plan`` prints: given each point's estimate
(``estimates``: label -> seconds), the points still to run are scheduled on the hosts after the
running ones finish, every estimate scaled by how long the finished points took against theirs.
Without estimates it is the mean duration of the finished points times those left, over the hosts.

It takes the typed events of ``sweep.core.types`` (``on(event)``: ``PointStage``, ``PointFinished``), or
a host's ``PointProgress`` with its host and point (``host_event``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from sweep.core import (
    HostProgress,
    LevelProgress,
    PointFinished,
    PointStage,
    PointStatus,
    RunProgress,
    StartupProgress,
    StepStarted,
    SweepEvent,
    TaskStarted,
)
from sweep.experiment import estimate


@dataclass
class _HostLine:
    label: str = "idle"
    stage: str = ""
    since: float = field(default_factory=time.monotonic)
    detail: str = ""


_PLAIN_EVERY_S = 30.0  # plain output: a running point's progress line at most this often
_QUIET_STAGES = frozenset(  # plain output: stages said in the point's last line, not one line each
    ("preflight", "load", "capture", "ready", "benchmark", "warmup", "single", "level", "stop", "power")
)


@dataclass
class _Plain:
    """What plain output keeps of a running point (its launch on a host) to say in few lines."""

    last_line: float  # when a line about it was last printed
    stage_since: dict[str, float] = field(default_factory=dict)  # stage -> when it began
    startup_s: float | None = None  # launch to ready
    phases: str = ""  # ' (load 8s, capture 4s)'
    single_runs: int = 0
    levels: dict[str, list[str]] = field(default_factory=dict)  # point id ('' the launch's) -> "C=1", ...
    stopped: dict[str, list[str]] = field(default_factory=dict)  # the levels its stop rule ended early


class SweepProgress:
    def __init__(
        self, total: int, hosts: int, console: Console | None = None, estimates: Mapping[str, float] | None = None
    ):
        self.console = console or Console(stderr=False)
        self.estimates = dict(estimates or {})
        self._started: dict[str, float] = {}  # label -> when it was first seen on a host
        self._finished: list[tuple[float, float]] = []  # (estimated, actual) seconds
        self.live_mode = self.console.is_terminal
        self.total = total
        self.hosts_n = max(hosts, 1)
        self.done = self.failed = self.pruned = 0  # pruned: decided by the adaptive search, never run
        self.durations: list[float] = []
        self.hosts: dict[str, _HostLine] = {}
        self._bar = Progress(
            TextColumn("[bold]sweep"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[summary]}"),
            TimeElapsedColumn(),
            console=self.console,
        )
        self._task = self._bar.add_task("sweep", total=total, summary="")
        self._live: Live | None = None
        self._last_stage: dict[str, str] = {}
        self._plain: dict[str, _Plain] = {}  # host:label -> what plain output keeps of it
        self._done_labels: list[tuple[str, float]] = []

    def __enter__(self) -> SweepProgress:
        if self.live_mode:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._live.update(self._render())
            self._live.__exit__(*exc)

    def eta_s(self) -> float | None:
        remaining = self.total - self.done - self.failed - self.pruned
        if remaining <= 0:
            return None
        if self.estimates:
            now = time.monotonic()
            finished = {label for label, _ in self._done_labels}
            running = [
                (self.estimates.get(label, 0.0), now - t) for label, t in self._started.items() if label not in finished
            ]
            pending = [v for label, v in self.estimates.items() if label not in self._started and label not in finished]
            return estimate.eta_s(pending, running, self.hosts_n, calibration=estimate.calibration(self._finished))
        if not self.durations:
            return None
        return sum(self.durations) / len(self.durations) * remaining / self.hosts_n

    def _summary(self) -> str:
        eta = self.eta_s()
        rem = self.total - self.done - self.failed - self.pruned
        return (
            f"{self.done} ok, {self.failed} failed, "
            + (f"{self.pruned} pruned, " if self.pruned else "")
            + f"{rem} to go"
            + (f", ETA {int(eta // 60)}m{int(eta % 60):02d}s" if eta is not None else "")
        )

    def _render(self) -> Group:
        t = Table(box=None, pad_edge=False, show_header=True, header_style="dim")
        for c in ("host", "point", "stage", "elapsed"):
            t.add_column(c)
        now = time.monotonic()
        for name in sorted(self.hosts):
            h = self.hosts[name]
            # as Text: a label, a host name or a progress line may hold brackets ([abc] reads as markup)
            t.add_row(
                Text(name),
                Text(h.label),
                Text(f"{h.stage} {h.detail}".strip()),
                f"{now - h.since:5.0f}s" if h.stage else "",
            )
        self._bar.update(self._task, completed=self.done + self.failed + self.pruned, summary=self._summary())
        return Group(t, self._bar)

    def _log(self, text: str) -> None:
        if not self.live_mode:
            # plain text: a failure reason may hold brackets rich would read as markup ([/__w/pytorch/...])
            self.console.print(f"[{time.strftime('%H:%M:%S')}] {text}", markup=False, highlight=False, soft_wrap=True)

    def on(self, event: SweepEvent) -> None:
        """One typed event: a host's stage, or a finished point (others are not drawn)."""
        if isinstance(event, PointStage):
            self.host_event(event.host, event.label, event.event, point_id=event.point_id)
        elif isinstance(event, PointFinished):
            self.point_finished(
                event.host,
                event.label,
                event.status,
                event.seconds,
                event.reason,
                (event.failure.fix or "") if event.failure else "",
                point_id=event.point_id,
            )

    def host_event(self, host: str, label: str, ev: HostProgress, *, point_id: str = "") -> None:
        h = self.hosts.setdefault(host, _HostLine())
        stage = ev.title
        self._started.setdefault(label, time.monotonic())
        if h.label != label:
            h.label, h.since = label, time.monotonic()
        h.stage, h.detail = stage, ev.detail
        if not self.live_mode:
            self._plain_event(f"{host}:{label}", f"{host}: {label}", ev, point_id)
        self.refresh()

    def _plain_event(self, key: str, who: str, ev: HostProgress, point_id: str) -> None:
        """Plain output: a line for what a person must hear at once (the point started, its server up
        and its benchmark begun, a node joined, a host lost), and otherwise a line on where the point
        is at most every _PLAIN_EVERY_S; what it measured waits for its end (``point_finished``)."""
        now = time.monotonic()
        new_stage = self._last_stage.get(key) != ev.title
        self._last_stage[key] = ev.title
        if isinstance(ev, TaskStarted) or key not in self._plain:
            self._plain[key] = _Plain(last_line=now)
        st = self._plain[key]
        if new_stage:
            st.stage_since.setdefault(ev.stage, now)
        sub = ev.sub_point or point_id
        if isinstance(ev, RunProgress) and ev.stage == "single":
            st.single_runs = max(st.single_runs, ev.of)
        if isinstance(ev, LevelProgress):
            where = f"C={ev.concurrency}" if ev.rate is None else f"{ev.rate:g} req/s"
            seen = st.levels.setdefault(sub, [])
            if where not in seen:
                seen.append(where)
            if ev.stopped and where not in st.stopped.setdefault(sub, []):
                st.stopped[sub].append(where)
        if isinstance(ev, StartupProgress) and ev.stage == "ready" and new_stage:
            began = st.stage_since.get("load", st.stage_since.get("start", now))
            st.startup_s = now - began
            st.phases = _phases(st.stage_since, now)
            return
        if isinstance(ev, StepStarted) and ev.stage == "benchmark" and new_stage:  # the server is up
            up = f", server up in {_secs(st.startup_s)}{st.phases}" if st.startup_s is not None else ""
            self._log(f"{who}: benchmark{up}")
            st.last_line = now
        elif new_stage and ev.stage not in _QUIET_STAGES:  # start, a node joined, a host lost
            self._log(f"{who}: {ev.title}")
            st.last_line = now
        elif now - st.last_line >= _PLAIN_EVERY_S:  # a heartbeat: where it is now
            since = st.stage_since.get(ev.stage)
            long = since is not None and now - since >= 1 and ev.stage in ("load", "capture")
            for_s = f" (for {_secs(now - since)})" if long and since is not None else ""
            self._log(f"{who}: {ev.title} {ev.detail}".rstrip() + for_s)
            st.last_line = now

    def _measured(self, host: str | None, label: str, point_id: str) -> str:
        """'single stream, C=1, 2, 4': what plain output kept of the point's run."""
        st = self._plain.get(f"{host}:{label}") if host else None
        if st is None:  # a point of a shared launch: the launch's state holds it
            st = next((s for s in self._plain.values() if point_id and point_id in s.levels), None)
        if st is None:
            return ""
        parts = []
        levels = st.levels.get(point_id, [])
        measured = (["single stream"] if st.single_runs else []) + (_levels_text(levels) if levels else [])
        if measured:
            parts.append(", ".join(measured))
        stopped = st.stopped.get(point_id) or []
        if stopped:
            parts.append(f"stopped early (measured enough) at {', '.join(stopped)}")
        return "; ".join(parts)

    def point_finished(
        self,
        host: str | None,
        label: str,
        status: PointStatus,
        seconds: float,
        reason: str = "",
        fix: str = "",
        *,
        point_id: str = "",
    ) -> None:
        if status == "pruned":  # never ran: it teaches the ETA nothing
            self.pruned += 1
            self._done_labels.append((label, 0.0))  # not pending any more
            self._log(f"{label}: pruned ({reason}) | {self._summary()}")
            self.refresh()
            return
        if status == "ok":
            self.done += 1
        else:
            self.failed += 1
        self.durations.append(seconds)
        self._done_labels.append((label, seconds))
        if label in self.estimates:
            self._finished.append((self.estimates[label], seconds))
        if host and host in self.hosts and self.hosts[host].label == label:
            self.hosts[host] = _HostLine()
        measured = "" if self.live_mode else self._measured(host, label, point_id)
        self._log(
            f"{label}: {status} in {seconds:.0f}s"
            + (f" on {host}" if host else "")
            + (f" ({measured})" if measured else "")
            + (f" ({reason})" if reason else "")
            + (f" fix: {fix}" if fix else "")
            + f" | {self._summary()}"
        )
        self.refresh()

    def refresh(self) -> None:
        if self._live:
            self._live.update(self._render())


def _secs(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f}s" if s < 120 else f"{int(s // 60)}m{int(s % 60):02d}s"


def _phases(since: Mapping[str, float], now: float) -> str:
    """' (load 8m10s, capture 1m02s)': how long each startup phase took, from when each began."""
    order = [k for k in ("load", "capture") if k in since]
    ends = [since.get(k) for k in order[1:]] + [since.get("ready", now)]
    parts = [f"{k} {_secs((end or now) - since[k])}" for k, end in zip(order, ends)]
    return f" ({', '.join(parts)})" if parts else ""


def _levels_text(levels: list[str]) -> list[str]:
    """['C=1, 2, 4'] for closed-loop levels, ['0.5, 1 req/s'] for open-loop rates."""
    cs = [lv[2:] for lv in levels if lv.startswith("C=")]
    rates = [lv.removesuffix(" req/s") for lv in levels if lv.endswith(" req/s")]
    return ([f"C={', '.join(cs)}"] if cs else []) + ([f"{', '.join(rates)} req/s"] if rates else [])
