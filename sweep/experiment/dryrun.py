"""Fitting the real plan on a laptop: ``--dry-run`` keeps every point, phase and concurrency level,
and scales only token counts, requests per level and single-stream runs; the fake server runs its
startup much faster and serves at ``dry_run.fake_speed`` times the real system, so the open-loop
levels' rates are sent that many times higher and their seconds (``duration_s``, ``ramp_up_s``, a
trace's ``time_scale``) that many times shorter: the report divides every rate and time back
(sweep/analysis/realspeed.py) and shows the rates the user set. The scale is recorded with every
point and shown in the report. The host judges SLOs at real speed too: the dry run's ``run_context``
tells it the fake speed beside the benchmark settings, not inside them. Pure."""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from sweep.core import BenchSettings, RunContext
from sweep.experiment.config import DryRunConfig, Experiment
from sweep.experiment.grid import BenchScale, merged_bench
from sweep.sglang import serverargs

_FAKE_LAUNCHER_MODULE = "sweep.fake"


def fake_launcher() -> list[str]:
    return [sys.executable, "-m", _FAKE_LAUNCHER_MODULE]


def fake_args(exp: Experiment) -> list[str]:
    """The fake's own options: its speeds, and the SGLang release it speaks: the experiment's
    ``server.sglang_version`` where it names a release the rules know (the fake speaks those), unless
    ``dry_run.fake_args`` sets ``--fake-version`` itself (else the fake's default, 0.5.10)."""
    d = exp.dry_run
    version = _release(exp.server.sglang_version)
    pinned = (
        ["--fake-version", version]
        if version and not any(a == "--fake-version" or a.startswith("--fake-version=") for a in d.fake_args)
        else []
    )
    return [
        "--fake-speed",
        str(d.fake_speed),
        "--fake-startup-speed",
        str(d.fake_startup_speed),
        "--stream-interval",
        str(d.stream_interval),
        *pinned,
        *d.fake_args,
    ]


def _release(version: str | None) -> str | None:
    """The known release whose rules ``version`` follows exactly (a release, or a build named by its
    commit), else None: a guess is not pinned."""
    if not version:
        return None
    release, guess = serverargs.rules_version(version)
    return None if guess else release


def scaled(exp: Experiment) -> tuple[Experiment, dict]:
    """A copy of ``exp`` with the benchmark scaled for a dry run, and the record of the scale. The
    client-side axes' benchmark settings are scaled where the plan merges them (``bench_scaler``)."""
    d = exp.dry_run
    out = copy.deepcopy(exp)
    before = asdict(exp.benchmark)
    b = _scale(out.benchmark, d)
    scale = {
        "fake_speed": d.fake_speed,
        "fake_startup_speed": d.fake_startup_speed,
        "stream_interval": d.stream_interval,
        "max_tokens_scale": d.max_tokens_scale,
        "single_stream": [before["single_stream"]["max_tokens"], b.single_stream.max_tokens],
        "concurrency_max_tokens": [before["concurrency"]["max_tokens"], b.concurrency.max_tokens],
        "rounds": [before["concurrency"]["rounds"], b.concurrency.rounds],
        "single_stream_runs": [before["single_stream"]["runs"], b.single_stream.runs],
        "levels": list(b.concurrency.levels),
    }
    return out, scale


def run_context(exp: Experiment) -> RunContext:
    """What a dry run's points are benchmarked with beside their settings: SLOs judged at real speed,
    a measured second being ``dry_run.fake_speed`` real ones (as the report does,
    sweep.analysis.realspeed), and each level measured ``dry_run.repeats`` times back to back (so that
    its verdicts rest on a level-wide noise measured, not on a floor; the points' ids do not move)."""
    return RunContext(slo_time_scale=float(exp.dry_run.fake_speed), level_repeats=int(exp.dry_run.repeats))


def bench_scaler(exp: Experiment) -> BenchScale:
    """What scales a client-side axis value's benchmark settings (``{concurrency: {max_tokens: 512}}``,
    ``{rates: [4, 8]}``) as ``scaled`` scales the experiment's: its own keys only, each at the dry
    run's scale (merged over the defaults, scaled whole, and its keys picked back), so an axis value
    is measured at the same scale as the experiment it is merged into, not at full size."""
    d = exp.dry_run

    def scale(override: Mapping[str, Any], where: str) -> dict[str, Any]:

        whole = asdict(_scale(merged_bench(BenchSettings(), [override], where), d))
        return _picked(whole, override)

    return scale


def _picked(tree: Mapping[str, Any], keys: Mapping[str, Any]) -> dict[str, Any]:
    """The values of ``tree`` at the keys ``keys`` sets (a mapping recursed into, but a workload whole)."""
    return {
        k: _picked(tree[k], v)
        if isinstance(v, Mapping) and k != "workload" and isinstance(tree.get(k), Mapping)
        else tree.get(k)
        for k, v in keys.items()
    }


def _scale(b: BenchSettings, d: DryRunConfig) -> BenchSettings:
    """``b`` (in place) at the dry run's scale: token counts, rounds, runs; the open loop at the fake's speed."""
    rounds_before = b.concurrency.rounds

    def tokens(n: int) -> int:
        return max(d.min_max_tokens, int(round(n * d.max_tokens_scale)))

    b.single_stream.max_tokens = tokens(b.single_stream.max_tokens)
    b.single_stream.runs = min(b.single_stream.runs, d.single_stream_runs)
    b.single_stream.warmup = min(b.single_stream.warmup, d.single_stream_warmup)
    b.concurrency.max_tokens = tokens(b.concurrency.max_tokens)
    b.concurrency.rounds = min(b.concurrency.rounds, d.rounds)
    if b.concurrency.requests_per_level is not None:
        b.concurrency.requests_per_level = max(
            max(b.concurrency.levels), int(b.concurrency.requests_per_level * d.rounds / max(rounds_before, 1))
        )
    b.request_timeout_s = min(b.request_timeout_s, 120.0)
    # (the host's refinement judges SLOs at real speed, as the report does: ``run_context``)
    if b.workload is not None:  # the workload's own output lengths, scaled as max_tokens are
        b.workload.output_scale = b.workload.output_scale * d.max_tokens_scale
    _open_loop_at_fake_speed(b, float(d.fake_speed))
    return b


def _open_loop_at_fake_speed(b, speed: float) -> None:
    """The open-loop levels of ``b`` (in place) at the fake's speed, as its every other time: each
    rate ``speed`` times higher, the seconds of arrivals and of ramp-up, and a trace replay's gaps,
    ``speed`` times shorter. Counts (requests, max_in_flight) are left alone. (The record of the scale
    needs no more than its ``fake_speed``: the points' Parquet type of it stays as it was.)"""
    b.rates = [float(r) * speed for r in b.rates]
    o = b.open_loop
    if o.duration_s is not None:
        o.duration_s = o.duration_s / speed
    o.ramp_up_s = o.ramp_up_s / speed
    if o.replay and b.workload is not None and b.workload.kind == "trace":
        b.workload.time_scale = b.workload.time_scale / speed
