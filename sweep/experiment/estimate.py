"""How long a sweep will take, before it starts (``--plan``) and while it runs (the live view's ETA).

One model, pure (the history is passed in; ``load_history`` is the only function that reads):

    point  = startup + benchmark + overhead
    startup: the median ``startup_s`` of earlier points of the same model (and SGLang version, when
             the experiment names one and earlier points ran it), baselines and speculative points
             apart (a drafter adds its own load and graph capture); else DEFAULT_STARTUP_S, or
             CPU_STARTUP_S for a point that runs on the CPU (``device: cpu`` in its flags)
    benchmark = (warmup + runs) * single_stream.max_tokens / single-stream tok/s
              + per level C: requests * max_tokens / (C * per-request tok/s at C) + LEVEL_OVERHEAD_S
    requests at C: the fixed count (rounds x C, or requests_per_level); with a stop rule, the first
             whole wave at which it may stop (max(C, min_requests) requests), assuming the
             throughput is precise by then: a lower bound when the server is noisy
    per-request tok/s at C: measured by earlier points of the same model at that C (median;
             interpolated in log-log between measured levels, the default curve's shape outside
             them); else the default curve, a closed loop that saturates at DEFAULT_CAPACITY_TOK_S
             with half of it reached at C = DEFAULT_HALF_C (the shape of the fake's model of
             Kimi-K2 on TP8, sweep/fake/model.py), DEFAULT_SINGLE_TOK_S at C = 1
    overhead: DEFAULT_OVERHEAD_S (pre-flight, stop, reap)

A dry run divides the defaults' times by its fake's speeds (startup by ``fake_startup_speed``,
serving by ``fake_speed``); history already holds the fake's own numbers. Points go to hosts the
way the runner sends them (baselines first, each to the first free host): the per-host times and
the makespan are what ``--plan`` prints. The ETA re-runs the same schedule on what is left, with
the points' estimates scaled by how long the finished points really took against their estimates.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, cast

from sweep.core import BenchSettings, RunMode, ServerFlags, kind, plural
from sweep.experiment.config import Experiment
from sweep.experiment.plan import Plan

DEFAULT_STARTUP_S = {"baseline": 600.0, "speculative": 780.0}  # a 1T-parameter model on one 8-GPU host
# SGLang's CPU backend (device: cpu): a tiny model, no CUDA graphs to capture; cpu_tiny_spec's servers
# are ready in about 50 s (a drafter's load and its own warmup: about 10 s more) on 2 cores
CPU_STARTUP_S = {"baseline": 50.0, "speculative": 60.0}
DEFAULT_OVERHEAD_S = 30.0
_DEFAULT_SINGLE_TOK_S = 62.0
_DEFAULT_CAPACITY_TOK_S = 750.0
_DEFAULT_HALF_C = 11.0
LEVEL_OVERHEAD_S = 0.5  # flush, /metrics scrapes, /server_info around a level


@dataclass(frozen=True)
class SpeedModel:
    """Per-request tok/s against concurrency."""

    single_tok_s: float = _DEFAULT_SINGLE_TOK_S
    capacity_tok_s: float = _DEFAULT_CAPACITY_TOK_S
    half_c: float = _DEFAULT_HALF_C
    measured: tuple[tuple[int, float], ...] = ()  # (C, per-request tok/s), sorted by C
    source: str = "default"

    def default_at(self, c: float) -> float:
        return self.capacity_tok_s / (c + self.half_c)

    def per_request(self, c: int) -> float:
        if not self.measured:
            return self.default_at(c)
        cs = [m[0] for m in self.measured]
        if c <= cs[0]:
            c0, v0 = self.measured[0]
            return v0 * self.default_at(c) / self.default_at(c0)
        if c >= cs[-1]:
            c1, v1 = self.measured[-1]
            return v1 * self.default_at(c) / self.default_at(c1)
        for (c0, v0), (c1, v1) in zip(self.measured, self.measured[1:]):
            if c0 <= c <= c1:
                f = (math.log(c) - math.log(c0)) / (math.log(c1) - math.log(c0))
                return math.exp(math.log(v0) + f * (math.log(v1) - math.log(v0)))
        return self.default_at(c)  # unreachable

    def scaled(self, speed: float) -> "SpeedModel":
        return SpeedModel(
            self.single_tok_s * speed,
            self.capacity_tok_s * speed,
            self.half_c,
            tuple((c, v * speed) for c, v in self.measured),
            self.source,
        )


@dataclass(frozen=True)
class PriorRuns:
    """What earlier results say about this model: startup per kind, speeds, overhead."""

    startup_s: Mapping[str, float] = field(default_factory=dict)  # "baseline" / "speculative" -> median s
    speed: Optional[SpeedModel] = None
    overhead_s: Optional[float] = None
    points: int = 0
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class _PointEstimate:
    label: str
    baseline: bool
    startup_s: float
    bench_s: float
    overhead_s: float
    startup_from: str  # "history" | "default"
    device: Optional[str] = None  # "cpu" for SGLang's CPU backend; None: a GPU server

    @property
    def total_s(self) -> float:
        return self.startup_s + self.bench_s + self.overhead_s


@dataclass(frozen=True)
class _SweepEstimate:
    points: tuple[_PointEstimate, ...]
    hosts: int
    per_host_s: tuple[float, ...]  # busy seconds of each host in the schedule
    per_host_points: tuple[int, ...]
    makespan_s: float
    speed_from: str
    notes: tuple[str, ...] = ()
    launches: int = 0  # server launches: points of one launch (client-side axes) start one server

    def by_label(self) -> dict[str, float]:
        return {p.label: p.total_s for p in self.points}


def requests_sent(bench: BenchSettings, c: int) -> int:
    """Requests a level is expected to send: its fixed count, or the stop rule's first chance."""
    planned = bench.requests_at(c)
    stop = bench.concurrency.stop
    if stop is None:
        return planned
    need = max(c, stop.min_requests if stop.min_requests is not None else 2)
    waves = math.ceil(need / c)
    return min(planned, waves * c)


def bench_seconds(bench: BenchSettings, speed: SpeedModel) -> float:
    """Seconds of one point's benchmark (single stream and every level) under ``speed``."""
    ss = bench.single_stream
    total = (ss.runs + ss.warmup) * ss.max_tokens / speed.single_tok_s if ss.runs + ss.warmup else 0.0
    tokens = bench.concurrency.max_tokens

    def level_s(c: int) -> float:
        return requests_sent(bench, c) * tokens / (c * speed.per_request(c)) + LEVEL_OVERHEAD_S

    levels = sorted(bench.concurrency.levels)
    total += max(1, getattr(bench, "repeats", 1)) * sum(level_s(c) for c in levels)  # each level, repeats times
    if bench.concurrency.refine and levels:  # at most refine_max more, counted at the middle level's cost
        total += bench.concurrency.refine_max * level_s(levels[len(levels) // 2])
    return total + sum(rate_level_s(bench, r, speed) for r in getattr(bench, "rates", None) or [])


def rate_level_s(bench: BenchSettings, rate: float, speed: SpeedModel) -> float:
    """Seconds of one open-loop level: its arrivals (``open_loop.requests`` at ``rate``, or its
    ``duration_s``, whichever ends first) and the drain of the last request (one request's latency
    alone: a server that keeps up; one that does not takes longer)."""
    o = bench.open_loop
    spans = [s for s in (o.requests / rate if o.requests is not None else None, o.duration_s) if s is not None]
    return min(spans) + bench.concurrency.max_tokens / speed.per_request(1) + LEVEL_OVERHEAD_S


def schedule(durations: Sequence[float], hosts: int, span: int = 1) -> tuple[list[float], list[int], float]:
    """List scheduling in the given order: each point to the first free host(s) (``span`` hosts
    per point, for servers wider than a host). Returns busy seconds and points per host, and the
    makespan."""
    slots = max(1, hosts // max(span, 1))
    heap = [(0.0, i) for i in range(slots)]
    busy = [0.0] * slots
    count = [0] * slots
    for d in durations:
        free, i = heapq.heappop(heap)
        busy[i] += d
        count[i] += 1
        heapq.heappush(heap, (free + d, i))
    return busy, count, max((t for t, _ in heap), default=0.0)


def _default_startup_s(kind: str, device: Optional[str] = None) -> float:
    """The default startup of a point of ``kind`` (baseline / speculative) on ``device``."""
    return (CPU_STARTUP_S if device == "cpu" else DEFAULT_STARTUP_S)[kind]


def _point_device(flags: Mapping) -> Optional[str]:
    """``"cpu"`` for a server on SGLang's CPU backend (``ServerFlags.is_cpu``), else None (a GPU)."""
    return "cpu" if ServerFlags(flags).is_cpu else None


def estimate_sweep(
    points: Iterable[tuple],
    bench: BenchSettings,
    *,
    hosts: int,
    history: PriorRuns | None = None,
    speed_factor: float = 1.0,
    startup_factor: float = 1.0,
    span: int = 1,
) -> _SweepEstimate:
    """The sweep's estimate. ``points``: (label, baseline), (label, baseline, device) or (label,
    baseline, device, launch id, the point's own BenchSettings or None) in the order they will run
    (baselines first; device "cpu" for SGLang's CPU backend, its own default startup; the points of
    one launch id share one server: one startup, and one host in the schedule); ``bench``: the
    experiment's BenchSettings; ``speed_factor`` / ``startup_factor``: how
    much faster than the defaults the servers run (a dry run's fake speeds), applied to the
    defaults only."""
    history = history or PriorRuns()
    notes = []
    speed = history.speed or SpeedModel().scaled(speed_factor)
    speed_from = history.speed.source if history.speed else "default"
    bench_s = bench_seconds(bench, speed)
    overhead = history.overhead_s if history.overhead_s is not None else DEFAULT_OVERHEAD_S / startup_factor
    out = []
    launch_s: dict[str, float] = {}  # launch -> seconds on its host, in the order they start
    for label, baseline, *rest in points:
        device = rest[0] if rest else None
        launch = str(rest[1]) if len(rest) > 1 and rest[1] else label
        own = rest[2] if len(rest) > 2 and rest[2] is not None else None
        kind = "baseline" if baseline else "speculative"
        seconds = bench_seconds(own, speed) if own is not None else bench_s
        if launch in launch_s:  # the launch's server is up already: only the benchmark
            out.append(_PointEstimate(label, baseline, 0.0, seconds, 0.0, "launch", device))
            launch_s[launch] += seconds
            continue
        if kind in history.startup_s:
            startup, src = history.startup_s[kind], "history"
        elif history.startup_s:  # only the other kind measured: better than the default
            startup, src = next(iter(history.startup_s.values())), "history"
        else:
            startup, src = _default_startup_s(kind, device) / startup_factor, "default"
        out.append(_PointEstimate(label, baseline, startup, seconds, overhead, src, device))
        launch_s[launch] = out[-1].total_s
    if not history.startup_s:
        for device in dict.fromkeys(p.device for p in out):
            defaults = CPU_STARTUP_S if device == "cpu" else DEFAULT_STARTUP_S
            notes.append(
                f"startup: no earlier results of this model, default{' for a CPU server' if device else ''} "
                f"{defaults['baseline']:.0f} s (baseline) / {defaults['speculative']:.0f} s (speculative)"
                + (  # a dry run's fake starts that much faster: both figures, each named
                    f" at the real system's speed; {defaults['baseline'] / startup_factor:.2g} s / "
                    f"{defaults['speculative'] / startup_factor:.2g} s here, the fake starting "
                    f"{startup_factor:g}x faster (dry_run.fake_startup_speed)"
                    if startup_factor != 1
                    else ""
                )
            )
    if bench.concurrency.stop is not None:
        notes.append("levels with the stop rule counted at its first chance (one wave, or min_requests)")
    busy, count, makespan = schedule(list(launch_s.values()), hosts, span)
    return _SweepEstimate(
        tuple(out),
        max(1, hosts // max(span, 1)),
        tuple(busy),
        tuple(count),
        makespan,
        speed_from,
        tuple(notes),
        len(launch_s),
    )


def eta_s(
    remaining: Sequence[float], running: Sequence[tuple[float, float]], hosts: int, *, calibration: float = 1.0
) -> float:
    """Seconds until the sweep ends: ``running`` (estimate, elapsed) points finish first on their
    hosts, then ``remaining`` estimates are scheduled on the first free host. Estimates are
    multiplied by ``calibration`` (actual / estimated of the finished points)."""
    hosts = max(1, hosts)
    free = sorted(max(0.0, est * calibration - elapsed) for est, elapsed in running)[:hosts]
    free += [0.0] * (hosts - len(free))
    heapq.heapify(free)
    for d in remaining:
        t = heapq.heappop(free)
        heapq.heappush(free, t + d * calibration)
    return max(free) if remaining or running else 0.0


def calibration(finished: Sequence[tuple[float, float]]) -> float:
    """How long finished points took against their estimates: sum(actual) / sum(estimated), kept
    within [0.2, 5] (a point that failed in seconds says little about the next)."""
    est = sum(e for e, _ in finished)
    act = sum(a for _, a in finished)
    if est <= 0 or act <= 0:
        return 1.0
    return min(5.0, max(0.2, act / est))


def fmt_s(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


# --- reading earlier results (the only I/O) ---------------------------------------------------


def load_history(
    roots: Iterable[Path], *, model_path: str, dry_run: bool, sglang_version: Optional[str] = None
) -> PriorRuns:
    """Earlier results of the same model from the results directories under ``roots`` (each a
    folder of results directories, or one itself): ok points whose argv names ``model_path``,
    of the same kind (dry run or not), preferring ``sglang_version`` when some match it."""
    import polars as pl  # lazy: polars is slow to import; only this path needs it

    from sweep.results import (
        store,  # lazy: at the top every importer of this module would load numpy and polars and pyarrow
    )

    frames = []
    for d in store.sweep_dirs(roots):
        try:
            pts = store.read_columns(
                d,
                "points",
                [
                    "point_id",
                    "status",
                    "baseline",
                    "argv",
                    "dry_run",
                    "sglang_version",
                    "startup_s",
                    "started_at",
                    "ended_at",
                ],
            )
        except Exception:  # noqa: BLE001 - an unreadable earlier directory is no history, not an error
            continue
        if pts.height:
            frames.append(pts.with_columns(dir=pl.lit(str(d))))
    if not frames:
        return PriorRuns()
    pts = pl.concat(frames, how="diagonal_relaxed").filter(
        (pl.col("status") == "ok")
        & (pl.col("dry_run").fill_null(False) == dry_run)
        & pl.col("argv").list.contains(str(model_path))
    )
    if sglang_version and pts.filter(pl.col("sglang_version") == sglang_version).height:
        pts = pts.filter(pl.col("sglang_version") == sglang_version)
    if pts.is_empty():
        return PriorRuns()
    startup = {
        ("baseline" if b else "speculative"): float(v)
        for b, v in pts.group_by("baseline").agg(pl.col("startup_s").median()).iter_rows()
        if v is not None
    }
    levels: list[pl.DataFrame] = []
    singles: list[pl.DataFrame] = []
    spans: list[pl.DataFrame] = []
    for d, ids in pts.group_by("dir").agg(pl.col("point_id")).iter_rows():
        for table, bucket, cols in (
            ("levels", levels, ["point_id", "concurrency", "per_request_tok_s"]),
            ("single_stream", singles, ["point_id", "tok_per_s", "ok"]),
            ("requests", spans, ["point_id", "start_at", "latency_s"]),
        ):
            try:
                # as measured: a dry run's estimate is of the fake's own times (its files hold real speed)
                bucket.append(store.read_columns(d, table, cols, point_ids=ids, measured=dry_run))
            except Exception:  # noqa: BLE001 - an unreadable table is no history
                continue
    speed = None
    if levels:
        # concurrency levels only: an open-loop level (``benchmark.rates``) is stored with concurrency 0,
        # and its per-request speed is no point of the closed-loop curve (nor has a log)
        lv = pl.concat(levels, how="diagonal_relaxed").filter(
            (pl.col("per_request_tok_s") > 0) & (pl.col("concurrency") > 0)
        )
        measured = tuple(
            (int(c), float(v))
            for c, v in lv.group_by("concurrency")
            .agg(pl.col("per_request_tok_s").median())
            .sort("concurrency")
            .iter_rows()
        )
        single: float | None = None
        if singles:
            ss = pl.concat(singles, how="diagonal_relaxed").filter(pl.col("ok").fill_null(False))
            # the median of a Float64 column: a float, None where it holds no value
            single = cast(Optional[float], ss["tok_per_s"].median()) if ss.height else None
        if measured:
            base = SpeedModel()
            speed = SpeedModel(
                float(single) if single else measured[0][1],
                base.capacity_tok_s,
                base.half_c,
                measured,
                plural(pts.height, "earlier point"),
            )
    overhead = None
    if spans:
        bench = (
            pl.concat(spans, how="diagonal_relaxed")
            .group_by("point_id")
            .agg(bench_s=(pl.col("start_at") + pl.col("latency_s")).max() - pl.col("start_at").min())
        )
        rest = (
            pts.join(bench, on="point_id", how="inner")
            .select(o=pl.col("ended_at") - pl.col("started_at") - pl.col("startup_s") - pl.col("bench_s"))
            .filter(pl.col("o").is_not_null())["o"]
        )
        if rest.len():
            overhead = max(0.0, float(cast(float, rest.median())))  # of a Float64 column with rows, nulls dropped
    return PriorRuns(startup, speed, overhead, pts.height, tuple(sorted(set(pts["dir"].to_list()))))


def describe(est: _SweepEstimate, history: PriorRuns) -> list[str]:
    """The estimate as lines for ``--plan``."""
    n = len(est.points)
    if not n:
        return []
    bench = est.points[0].bench_s
    base = [p for p in est.points if p.baseline and p.startup_from != "launch"]
    spec = [p for p in est.points if not p.baseline and p.startup_from != "launch"]
    shared = est.launches and est.launches != n
    unit = "launch" if shared else "point"
    src = (
        f"startup from {plural(history.points, 'earlier point')} ({', '.join(Path(s).name for s in history.sources)})"
        if history.points
        else "startup: default"
    )
    launches = f" in {plural(est.launches, 'server launch', 'server launches')}" if shared else ""
    lines = [
        f"estimate: {plural(n, 'point')}{launches}, {fmt_s(sum(p.total_s for p in est.points))} of host time; per point "
        f"benchmark {fmt_s(bench)}, startup {fmt_s(base[0].startup_s) if base else '-'} (baseline) / "
        f"{fmt_s(spec[0].startup_s) if spec else '-'} (speculative), overhead {fmt_s(est.points[0].overhead_s)}; "
        f"{src}; speeds {'from ' + est.speed_from if est.speed_from != 'default' else 'default curve'}"
    ]
    for i, (busy, count) in enumerate(zip(est.per_host_s, est.per_host_points)):
        lines.append(f"  host {i + 1}: {plural(count, unit, 'launches' if shared else None)}, {fmt_s(busy)}")
    lines.append(f"  whole sweep on {plural(est.hosts, 'host')}: {fmt_s(est.makespan_s)}")
    lines += [f"  note: {note}" for note in est.notes]
    return lines


def _for_experiment(
    exp: Experiment, points, *, mode: RunMode, scale: Mapping | None, hosts: int
) -> tuple[_SweepEstimate, PriorRuns]:
    scale = dict(scale or {})
    root = Path(exp.results_dir).parent if exp.results_dir else Path("results")
    history = load_history(
        [root],
        model_path=str(exp.server.model_path),
        dry_run=kind(mode).scaled,
        sglang_version=exp.server.sglang_version,
    )
    g = exp.cluster.gpus_per_host
    span = max(1, -(-exp.server.tp_size // g)) if g else 1
    est = estimate_sweep(
        [
            (
                p.label,
                p.baseline,
                _point_device(p.flags),
                getattr(p, "launch_id", "") or p.label,
                getattr(p, "bench", None),
            )
            for p in points
        ],
        exp.benchmark,
        hosts=hosts * span,
        history=history,
        speed_factor=float(scale.get("fake_speed", 1.0)),
        startup_factor=float(scale.get("fake_startup_speed", 1.0)),
        span=span,
    )
    return est, history


def point_estimates(
    exp: Experiment, points, *, mode: RunMode, scale: Mapping | None = None, hosts: int = 1
) -> dict[str, float]:
    """label -> estimated seconds of each of ``points`` (PlannedPoints): the live view's ETA model
    (``SweepProgress(..., estimates=...)``)."""
    est, _ = _for_experiment(exp, points, mode=mode, scale=scale, hosts=hosts)
    return est.by_label()


def plan_lines(plan: Plan, *, mode: RunMode, scale: Mapping | None = None, hosts: Optional[int] = None) -> list[str]:
    """What ``--plan`` prints about the sweep's cost: ``describe`` of the estimate for the plan's
    valid points, with the history found beside the experiment's results directory. ``mode``:
    real | dry-run | local | fake; ``hosts``: how many there will be (default: the dry run's or
    the local run's count, else 1, said so)."""
    exp = plan.experiment
    how = kind(mode)  # a local cluster knows its hosts; a joined one is not known yet
    known = (exp.dry_run.hosts if how.fake_server else exp.local.hosts) if how.local_cluster else None
    est, history = _for_experiment(
        exp, [p for p in plan.points if not p.errors], mode=mode, scale=scale, hosts=hosts or known or 1
    )
    lines = describe(est, history)
    if not hosts and not known and lines:
        lines.append("  note: the cluster's size is not known before it is joined; divide by its hosts")
    return lines
