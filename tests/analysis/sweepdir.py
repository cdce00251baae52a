"""Build results directories with known numbers, in the layout of sweep/results/store.py.

    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100, 100],
                    levels={1: 100, 64: 3000})
    sd.point(drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=[150, 150, 150],
             levels={1: 150, 64: 2400})
    sd.write()

Each level sends ``2 * C`` requests of 100 tokens whose per-request tok/s spread evenly over
``throughput / C * (1 +- jitter)``, so the level's mean per-request tok/s is ``throughput / C``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from sweep.results.meta import EXPERIMENT
from sweep.results.records import struct_value
from sweep.results.schema import BENCH_SCALE, MANIFEST, from_rows

ROLES = {"drafter": "drafter", "steps": "steps", "nccl": "env"}
TOKENS = 100
RUNNING_CAP = 48  # the metrics table's num_running_reqs: min(C, 48), as with speculation's default cap


@dataclass
class Point:
    point_id: str
    label: str
    params: dict
    baseline: bool
    baseline_id: str | None
    status: str
    tok_s: list[float]
    levels: dict[int, float]
    jitter: float
    accept_length: float | None
    written: bool
    lost: list[tuple[str, int, str]]
    extra: dict = field(default_factory=dict)
    per_request: dict[int, float] = field(
        default_factory=dict
    )  # a level's mean per-request tok/s, if not throughput / C
    power: dict[int, float] = field(default_factory=dict)  # a level's mean watts (the energy columns; none: null)
    workload: str | None = None  # the requests' workload column (null: as results before workloads)


def spread(center: float, n: int, jitter: float) -> list[float]:
    """n values evenly spread over center * [1 - jitter, 1 + jitter] (mean exactly center)."""
    if n == 1:
        return [center]
    return [center * (1 - jitter + 2 * jitter * i / (n - 1)) for i in range(n)]


def _power(watts: float | None, wall_s: float, tokens: int) -> dict:
    if watts is None:
        return {}
    return {
        "power_mean_w": watts,
        "power_peak_w": watts * 1.1,
        "energy_j": watts * wall_s,
        "energy_per_token_j": watts * wall_s / tokens,
        "power_samples": 4,
        "power_gpus": 8,
    }


class SweepDir:
    def __init__(
        self,
        path: Path,
        *,
        roles: dict | None = None,
        experiment: str = "test",
        dry_run: bool = False,
        bench_scale: dict | None = None,
        started_at: float = 1000.0,
        manifest: dict | None = None,
        settings: dict | None = None,
    ):
        """``started_at``: when its points started (each ran 1000 s); ``manifest``: a ``sweep.json`` to
        write ({"mode": "dry-run", ...}, the experiment added); ``settings``: an ``experiment.yaml`` to write."""
        self.path = Path(path)
        self.started_at = started_at
        self.manifest = manifest
        self.settings = settings
        self.roles = roles or dict(ROLES)
        self.experiment = experiment
        self.dry_run = dry_run
        self.bench_scale = bench_scale or None
        self.points: list[Point] = []

    def point(
        self,
        *,
        baseline: bool = False,
        baseline_of: str | None = None,
        status: str = "ok",
        tok_s: list[float] = (),
        levels: dict[int, float] | None = None,
        jitter: float = 0.02,
        accept_length: float | None = None,
        written: bool = True,
        lost: list[tuple[str, int, str]] = (),
        per_request: dict[int, float] | None = None,
        power: dict[int, float] | None = None,
        requests_workload: str | None = None,
        **params: str | None,
    ) -> str:
        """Add a point; returns its id. Keyword arguments named after an axis are its params;
        others (failure_reason, warnings...) go to its point row. ``lost`` adds failed requests
        as (phase, concurrency, error). ``per_request`` sets a level's mean per-request tok/s apart from
        its throughput (a server that queues: the two ratios to a baseline part); ``requests_workload`` the name its
        requests record (an axis of that name: set it in ``roles``); ``power`` a level's mean
        watts (peak 10 % above; energy = watts x wall time). ``written=False`` keeps it out of the directory (a point
        not run yet)."""
        extra = {k: params.pop(k) for k in list(params) if k not in self.roles}
        label = ",".join(f"{k}={v}" for k, v in params.items() if v is not None)
        pid = hashlib.sha1(label.encode()).hexdigest()[:12]
        self.points.append(
            Point(
                pid,
                label,
                params,
                baseline,
                baseline_of,
                status,
                list(tok_s),
                dict(levels or {}),
                jitter,
                accept_length,
                written,
                list(lost),
                extra,
                dict(per_request or {}),
                dict(power or {}),
                requests_workload,
            )
        )
        return pid

    def _point_row(self, p: Point) -> dict:
        row = {
            "point_id": p.point_id,
            "label": p.label,
            "experiment": self.experiment,
            "baseline": p.baseline,
            "baseline_id": p.baseline_id,
            "param_roles": {a: self.roles[a] for a in p.params},
            "argv": ["python"],
            "env": {},
            "status": p.status,
            "errors": [],
            "warnings": [],
            "host": "host-a",
            "gpu_name": "H200",
            "gpu_count": 8,
            "sglang_version": "0.5.10",
            "load_s": 60.0,
            "kv_cache_s": 5.0,
            "capture_s": 30.0,
            "draft_capture_s": None if p.baseline else 20.0,
            "http_s": 2.0,
            "ready_s": 3.0,
            "startup_s": 125.0 if p.baseline else 145.0,
            "started_at": self.started_at,
            "ended_at": self.started_at + 1000.0,
            "attempts": 1,
            "reaped": None,
            "dry_run": self.dry_run,
            "bench_scale": struct_value(self.bench_scale, BENCH_SCALE),
            "sweep_version": "0.1.0",
            **{f"axis_{a}": v for a, v in p.params.items()},
        }
        row.update(p.extra)
        return row

    def _tables(self, p: Point) -> dict[str, list[dict]]:
        ids: dict = {"point_id": p.point_id}
        req_ids = {**ids, "workload": p.workload} if p.workload is not None else ids
        single = [
            dict(
                ids,
                run=i,
                max_tokens=TOKENS,
                prompt_index=i,
                prompt_tokens=50,
                completion_tokens=TOKENS,
                latency_s=TOKENS / v,
                ttft_s=0.05,
                tok_per_s=v,
                accept_length=p.accept_length,
                ok=True,
            )
            for i, v in enumerate(p.tok_s)
        ]
        requests = [
            dict(
                req_ids,
                phase="single",
                concurrency=1,
                seq=i,
                completion_tokens=TOKENS,
                latency_s=TOKENS / v,
                ttft_s=0.05,
                ok=True,
            )
            for i, v in enumerate(p.tok_s)
        ]
        levels, metrics = [], []
        for c, throughput in sorted(p.levels.items()):
            rates = spread(p.per_request.get(c, throughput / c), 2 * c, p.jitter)
            requests += [
                dict(
                    req_ids,
                    phase="level",
                    concurrency=c,
                    seq=i,
                    completion_tokens=TOKENS,
                    latency_s=TOKENS / v,
                    ttft_s=0.05,
                    tpot_s=(TOKENS / v - 0.05) / (TOKENS - 1),
                    ok=True,
                )
                for i, v in enumerate(rates)
            ]
            levels.append(
                dict(
                    ids,
                    concurrency=c,
                    max_tokens=TOKENS,
                    requests=len(rates),
                    ok=len(rates),
                    failed=0,
                    wall_s=TOKENS * len(rates) / throughput,
                    output_throughput=throughput,
                    request_throughput=throughput / TOKENS,  # every request TOKENS long
                    per_request_tok_s=sum(rates) / len(rates),
                    accept_length_server=p.accept_length,
                    flushed=True,
                    metrics_scrapes=3,
                    metrics_generation_tokens=TOKENS * len(rates),
                    metrics_running_reqs_max=float(min(c, RUNNING_CAP)),
                    metrics_spec_accept_length=p.accept_length,
                    **_power(p.power.get(c), TOKENS * len(rates) / throughput, TOKENS * len(rates)),
                )
            )
            metrics += [
                dict(
                    ids,
                    concurrency=c,
                    name="sglang:generation_tokens_total",
                    labels='model_name="m"',
                    family="sglang:generation_tokens",
                    kind="counter",
                    before=0.0,
                    after=float(TOKENS * len(rates)),
                    delta=float(TOKENS * len(rates)),
                ),
                dict(
                    ids,
                    concurrency=c,
                    name="sglang:num_running_reqs",
                    labels='model_name="m",tp_rank="0"',
                    family="sglang:num_running_reqs",
                    kind="gauge",
                    before=0.0,
                    after=0.0,
                    during_mean=float(min(c, RUNNING_CAP)),
                    during_max=float(min(c, RUNNING_CAP)),
                ),
            ]
        requests += [
            dict(ids, phase=phase, concurrency=c, seq=1000 + i, ok=False, error=error, latency_s=1.0)
            for i, (phase, c, error) in enumerate(p.lost)
        ]
        return {"single_stream": single, "requests": requests, "levels": levels, "metrics": metrics}

    def write_as_sweep(self, speed: float) -> Path:
        """Write every point marked ``written`` as a sweep's writer does (``ResultsDir.write_point``),
        a dry run's at the fake's ``speed``: its files at real speed, what was measured beside."""
        from sweep.results import ResultsDir, from_rows

        rd = ResultsDir(self.path, self.experiment, "dry-run")
        rd.speed = speed
        for name in ("points", "single_stream", "levels", "requests", "metrics"):
            (self.path / name).mkdir(parents=True, exist_ok=True)
        for p in self.points:
            if p.written:
                tables = {n: from_rows(rows, n) for n, rows in self._tables(p).items() if rows}
                rd.write_point(p.point_id, from_rows([self._point_row(p)], "points"), tables)
        return self.write_manifest()

    def write_manifest(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        if self.manifest is not None:
            (self.path / MANIFEST).write_text(json.dumps({"experiment": self.experiment, **self.manifest}))
        return self.path

    def write(self) -> Path:
        """Write every point marked ``written`` (one Parquet file per point and table)."""
        for p in self.points:
            if not p.written:
                continue
            tables = {"points": [self._point_row(p)], **self._tables(p)}
            for name, rows in tables.items():
                if not rows:
                    continue
                folder = self.path / name
                folder.mkdir(parents=True, exist_ok=True)
                pq.write_table(from_rows(rows, name), folder / f"{p.point_id}.parquet")
        self.path.mkdir(parents=True, exist_ok=True)
        if self.manifest is not None:
            (self.path / MANIFEST).write_text(json.dumps({"experiment": self.experiment, **self.manifest}))
        if self.settings is not None:
            (self.path / EXPERIMENT).write_text(yaml.safe_dump({"name": self.experiment, **self.settings}))
        return self.path


def story_sweep(
    path: Path, *, levels: tuple[int, ...] = (1, 2, 5, 10, 30, 70, 100, 250), dry_run: bool = True
) -> SweepDir:
    """A sweep shaped like the real system (and the fake server's model): speculation ahead at
    C=1, behind at saturation, the tuned NCCL profile faster everywhere.

    A decode step costs ``fixed + per_seq * batch`` ms (fixed shrinks with tuned NCCL, per_seq grows
    with the draft tokens verified) and yields ``accept`` tokens per request; speculation caps the
    running batch at 48 (SGLang's default), so higher levels queue.
    """
    sd = SweepDir(path, dry_run=dry_run, bench_scale={"single_stream_runs": [5, 3]} if dry_run else None)
    drafters = {"k26_100k": 0.7, "k26_300k": 0.8}  # acceptance per draft step

    def speed(c: int, fixed: float, per_seq: float, accept: float, cap: int = 1 << 30) -> float:
        """Per-request tok/s at concurrency c; above ``cap`` running requests the rest queue."""
        batch = min(c, cap)
        return 1000 * accept / (fixed + per_seq * batch) * batch / c

    for nccl, fixed in (("default", 22.0), ("tuned", 17.0)):
        runs = [0.98, 1.0, 1.02]
        base_one = speed(1, fixed, 0.9, 1.0)
        base = sd.point(
            drafter="none",
            nccl=nccl,
            baseline=True,
            tok_s=[base_one * r for r in runs],
            levels={c: speed(c, fixed, 0.9, 1.0) * c for c in levels},
        )
        for drafter, acc in drafters.items():
            for steps in (1, 2, 3):
                accept = 1 + sum(acc**k for k in range(1, steps + 1))
                step_fixed, per_seq = fixed * (1.15 + 0.12 * steps), 0.9 * (1 + 0.9 * steps)
                one = speed(1, step_fixed, per_seq, accept)
                sd.point(
                    drafter=drafter,
                    steps=str(steps),
                    nccl=nccl,
                    baseline_of=base,
                    tok_s=[one * r for r in runs],
                    accept_length=accept,
                    levels={c: speed(c, step_fixed, per_seq, accept, 48) * c for c in levels},
                )
    sd.point(
        drafter="k26_300k",
        steps="5",
        nccl="default",
        status="invalid",
        errors=["draft tree cannot hold 8 draft tokens with topk=1"],
        failure_phase="plan",
        failure_reason="invalid speculative arguments",
    )
    sd.point(
        drafter="k26_300k",
        steps="4",
        nccl="tuned",
        status="failed",
        failure_phase="capture",
        failure_reason="torch.OutOfMemoryError: CUDA out of memory while capturing draft graphs",
        warnings=["topk=1: num-draft-tokens forced to steps + 1"],
    )
    return sd
