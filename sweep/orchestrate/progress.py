"""The live view of a sweep: one line per host (its point, stage and elapsed time) and a bar for the
sweep (done, failed, remaining, ETA). Plain log lines when the output is not a terminal (CI,
``ray job submit``, a pipe).

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

from sweep.core import HostProgress, PointFinished, PointStage, PointStatus, StartupProgress, SweepEvent
from sweep.experiment import estimate


@dataclass
class _HostLine:
    label: str = "idle"
    stage: str = ""
    since: float = field(default_factory=time.monotonic)
    detail: str = ""


_PLAIN_PROGRESS_EVERY_S = 30.0  # plain output: a host's progress-bar line at most this often per kind


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
        self._last_progress_log: dict[str, tuple[str, float]] = {}  # host:label -> (kind, when logged)
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
            self.host_event(event.host, event.label, event.event)
        elif isinstance(event, PointFinished):
            self.point_finished(
                event.host,
                event.label,
                event.status,
                event.seconds,
                event.reason,
                (event.failure.fix or "") if event.failure else "",
            )

    def host_event(self, host: str, label: str, ev: HostProgress) -> None:
        h = self.hosts.setdefault(host, _HostLine())
        stage = ev.title
        self._started.setdefault(label, time.monotonic())
        if h.label != label:
            h.label, h.since = label, time.monotonic()
        h.stage, h.detail = stage, ev.detail
        key = f"{host}:{label}"
        if self._last_stage.get(key) != stage:
            self._last_stage[key] = stage
            self._log(f"{host}: {label}: {stage}")
        if isinstance(ev, StartupProgress) and ev.progress:
            self._log_progress(key, f"{host}: {label}: {stage} {h.detail}", ev.progress_kind or "")
        self.refresh()

    def _log_progress(self, key: str, text: str, kind: str) -> None:
        """Plain output gets a bar's first update of each kind, then one every PLAIN_PROGRESS_EVERY_S."""
        now = time.monotonic()
        last = self._last_progress_log.get(key)
        if last is None or last[0] != kind or now - last[1] >= _PLAIN_PROGRESS_EVERY_S:
            self._last_progress_log[key] = (kind, now)
            self._log(text)

    def point_finished(
        self, host: str | None, label: str, status: PointStatus, seconds: float, reason: str = "", fix: str = ""
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
        self._log(
            f"{label}: {status} in {seconds:.0f}s"
            + (f" ({reason})" if reason else "")
            + (f" fix: {fix}" if fix else "")
            + f" | {self._summary()}"
        )
        self.refresh()

    def refresh(self) -> None:
        if self._live:
            self._live.update(self._render())
