"""``python -m sweep history [RESULTS_ROOT]``: every results directory under a root, and each
experiment's runs over time, figure by figure, with what changed between them.

``report DIR --vs OTHER`` compares two sweeps; this is its many-runs form, built from the same
``compare_findings`` (the same figures, the same noise intervals), applied to each run against the
runs before it in its series (the median of the repeats: see Reference). A series is the runs of one experiment in one mode (a dry run and a
cluster run of the same experiment are two series: the fake server is not the GPU), ordered by
when their first point started. Four tables, each a polars DataFrame (``History``), the same as
``sweep query``'s views ``runs``, ``picks``, ``history`` and ``changes``:

- ``runs``: one row per results directory: run (its path), name, experiment, mode, created_at,
  started_at, ended_at (epoch seconds), sglang_version (the versions its points ran, joined), planned
  (the points its plan lists), points (written), ok, failed, invalid, pruned (0 where no point has
  that status).
- ``picks``: per run and SLO (the experiment's ``benchmark.slo``, or the ones given), the
  configuration to deploy (rank 1 of the report's SLO table): run, slo, label (null when no
  configuration meets it), baseline, c_text, tok_s_gpu, reason (why there is none), and how sure the
  pick is: runner_up, margin (over it), margin_low / margin_high (its interval), state (decided,
  equal, within noise, budget, only: ``_pick_state``).
- ``history``: per run, configuration (label), figure and level: the run's value, its reference's
  (``previous_value``: the median over ``reference_runs`` earlier runs), their change, the interval of
  the ratio, the run-to-run noise it is judged by (``run_noise``, a relative change, and
  ``noise_from``), the shift every configuration shared there (``shared_shift``, ``shift_spread``;
  null where none) and ``verdict``: ``regression`` / ``improvement`` (the figure
  fell / rose beyond noise: see below), ``shared shift`` (it moved with every configuration, and not
  beyond that shift), ``within noise``, ``no interval`` (a figure
  without one: speedup, accept length, startup), ``new`` / ``gone`` (a label in one of the two
  runs only), ``pending`` (planned in this run, not written yet), null for a series' first run. Figures: tok_s, speedup, accept_length (single stream),
  output_throughput, per_request_tok_s (per level), startup_s, as ``compare_table`` has them.
- ``changes``: what differs between a run and the one before it: every setting of the resolved
  experiment (``experiment.yaml``, as ``server.flags.max-running-requests``), the SGLang versions and
  GPUs its points ran, what the plan resolved for SGLang (``resolved.*``, with how many points), and
  the labels only in one of the two.

Noise. A figure's interval says how much it spreads within a run (its runs, or its level's
requests); between two runs more varies (the machine, its load, the cluster), and only repeated runs
measure that. A run that repeats the one before it (no row in ``changes`` but points added or not
run yet) is a repeat; per figure and level, the largest change between repeats over every
configuration, widened by ``MARGIN``, is the run-to-run noise. A change is flagged when it lies
outside its interval and beyond the run-to-run noise of the series' repeats other than its own pair
(``noise_from`` ``repeats``; where that level has none, the figure's largest at any level). A
repeat with no other is the measurement itself and is not flagged (``this repeat``); a series
without repeats is judged by the intervals alone (``within run``), which the output says.

Reference. A run is compared with the run before it and, where that one repeats the runs before it,
with those too (the earlier runs with the settings the previous run had, at most
``_REFERENCE_RUNS``): each figure's reference is the median of their values (``previous_value``),
its interval that of the run nearest the median, moved by their ratio. With two or more reference
runs, their own scatter of that configuration's figure (largest over smallest, widened by
``MARGIN``) is its run-to-run noise where it is larger than the repeats' (``noise_from``
``reference runs``); with one, the noise above.

Shared shifts. Where (nearly) every configuration's figure at a level moved the same way by a
similar amount between a run and its reference (``shared_shift``: at least ``_SHARED_MIN``
configurations, ``_SHARED_FRACTION`` of them the same way, their scatter at most ``_SHARED_SPREAD`` of
the shift, the shift beyond ``_SHARED_MIN_SHIFT`` and the run-to-run noise), e.g. a new SGLang or a
setting every point shares, the output says so in one line with what changed, and each
configuration is judged by its change relative to the shift (beyond twice the scatter too).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sweep.analysis import achieved, noise, render
from sweep.analysis import slo as slo_mod
from sweep.analysis.compare import compare_findings, figures
from sweep.analysis.findings import Findings, analyze
from sweep.analysis.frames import Tables, points_frame
from sweep.analysis.render import Section
from sweep.core import REDACTED, ResultsError
from sweep.results import decisions, load, read_columns, read_experiment, read_manifest, read_plan, sweep_dirs

_STATUSES = ("ok", "failed", "invalid", "pruned")
FLAGGED = ("tok_s", "output_throughput", "per_request_tok_s")  # the figures with an interval
FIGURE_NAMES = {
    "tok_s": "single-stream tok/s",
    "speedup": "single-stream speedup",
    "accept_length": "accept length",
    "output_throughput": "output tok/s",
    "per_request_tok_s": "per-request tok/s",
    "startup_s": "startup s",
}
_NOT_SETTINGS = ("name", "description", "results_dir", "source")  # experiment keys that say nothing of a run
MARGIN = 1.5  # the run-to-run noise: the repeats' largest change, widened (one repeat says little of the next)
_REFERENCE_RUNS = 5  # a run's reference: the median of at most this many earlier runs with its settings
_SHARED_MIN = 3  # configurations that must have a figure (at a level) for a shift of it to be shared
_SHARED_FRACTION = 0.8  # of them, at least this share moved the shift's way ...
_SHARED_SPREAD = 0.5  # ... by a similar amount: their scatter (MAD) at most this fraction of the shift ...
_SHARED_MIN_SHIFT = 0.02  # ... and the shift at least this large (relative), and beyond the run-to-run noise
VIEWS = ("runs", "picks", "history", "changes")  # also sweep.analysis.query.HISTORY_VIEWS

_RUNS_SCHEMA = {
    "run": pl.String,
    "name": pl.String,
    "experiment": pl.String,
    "mode": pl.String,
    "created_at": pl.Float64,
    "started_at": pl.Float64,
    "ended_at": pl.Float64,
    "sglang_version": pl.String,
    "planned": pl.Int64,
    "points": pl.Int64,
    **{s: pl.Int64 for s in _STATUSES},
}
_PICKS_SCHEMA = {
    "run": pl.String,
    "experiment": pl.String,
    "mode": pl.String,
    "slo": pl.String,
    "workload": pl.String,
    "label": pl.String,
    "setup": pl.String,
    "baseline": pl.Boolean,
    "c_text": pl.String,
    "tok_s_gpu": pl.Float64,
    "reason": pl.String,
    # how sure the pick is (a script gates on these): its runner-up, the margin over it (pick /
    # runner-up - 1) and the margin's interval, and ``state``: decided (ahead beyond noise), equal
    # (within noise and within +-``_EQUAL_MARGIN``), within noise, budget (decide took it on and its
    # budget ran out first), only (no runner-up meets the SLO), null (no pick)
    "runner_up": pl.String,
    "margin": pl.Float64,
    "margin_low": pl.Float64,
    "margin_high": pl.Float64,
    "state": pl.String,
}
_HISTORY_SCHEMA = {
    "experiment": pl.String,
    "mode": pl.String,
    "step": pl.Int64,
    "run": pl.String,
    "previous": pl.String,
    "label": pl.String,
    "figure": pl.String,
    "concurrency": pl.Int64,
    "point_id": pl.String,
    "previous_id": pl.String,
    "value": pl.Float64,
    "previous_value": pl.Float64,
    "change": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "within_noise": pl.Boolean,
    "run_noise": pl.Float64,
    "noise_from": pl.String,
    "reference_runs": pl.Int64,
    "shared_shift": pl.Float64,
    "shift_spread": pl.Float64,
    "verdict": pl.String,
    "order": pl.Int64,
}
_CHANGES_SCHEMA = {
    "experiment": pl.String,
    "mode": pl.String,
    "run": pl.String,
    "previous": pl.String,
    "what": pl.String,
    "before": pl.String,
    "after": pl.String,
    "points": pl.Int64,
}


@dataclass(frozen=True)
class Run:
    """One results directory, loaded through ``sweep.results.load`` and analysed once."""

    path: Path
    experiment: str
    mode: str
    created_at: float | None
    tables: Tables
    findings: Findings
    points: pl.DataFrame = field(repr=False)
    planned_labels: frozenset[str] | None = None  # the labels its plan.json lists (None without one)

    @property
    def planned(self) -> int | None:
        return None if self.planned_labels is None else len(self.planned_labels)

    @property
    def pending(self) -> set[str]:
        """The labels its plan lists and no point row has yet (a sweep still running, or stopped)."""
        written = set(self.points["label"].to_list()) if self.points.height else set()
        return set(self.planned_labels or ()) - written

    @property
    def run(self) -> str:
        return str(self.path)

    @property
    def started_at(self) -> float | None:
        return _number(self.points["started_at"].min()) if self.points.height else None

    @property
    def ended_at(self) -> float | None:
        return _number(self.points["ended_at"].max()) if self.points.height else None

    @property
    def when(self) -> float:
        """What orders the runs of a series: the first point's start, else the directory's creation."""
        return next((t for t in (self.started_at, self.created_at) if t is not None), 0.0)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def identity(directory: str | Path) -> tuple[str, str]:
    """(experiment, mode) of a results directory, from ``sweep.json``; without one (``python -m sweep
    bench --out``, an older sweep) from its points (their experiment, dry-run or real), else its name."""
    d = Path(directory)
    manifest = read_manifest(d) or {}
    if manifest.get("experiment") and manifest.get("mode"):
        return str(manifest["experiment"]), str(manifest["mode"])
    points = read_columns(d, "points", ["experiment", "dry_run"])
    named = sorted({e for e in points["experiment"].to_list() if e})
    dry = bool(points["dry_run"].fill_null(False).any())
    return (
        str(manifest.get("experiment") or ", ".join(named) or d.name),
        str(manifest.get("mode") or ("dry-run" if dry else "real")),
    )


def _load_run(directory: str | Path, *, slos: list | None = None) -> Run:
    """One results directory as a ``Run``: its tables (``load``: old files upgraded), its findings with
    the SLOs given, else the experiment's own, and its ``identity``."""
    d = Path(directory)
    tables = load(d)
    experiment, mode = identity(d)
    created = (read_manifest(d) or {}).get("created_at")
    findings = analyze(tables, slos=slo_mod.from_experiment(d) if slos is None else slos)
    return Run(
        path=d,
        experiment=experiment,
        mode=mode,
        created_at=float(created) if isinstance(created, (int, float)) else None,
        tables=tables,
        findings=findings,
        points=points_frame(tables),
        planned_labels=_plan_labels(d),
    )


def _plan_labels(directory: Path) -> frozenset[str] | None:
    points = read_plan(directory).get("points")
    if not isinstance(points, list):
        return None
    labels = [str(p["label"]) for p in points if isinstance(p, dict) and p.get("label")]
    if any(REDACTED in label for label in labels):  # an older plan.json hid client-side axis values (bench_key)
        return None  # its labels are not the points': the plan is not known
    return frozenset(labels)


def _load_runs(roots: Iterable[str | Path], *, experiment: str | None = None, slos: list | None = None) -> list[Run]:
    """Every results directory under ``roots`` (each a results directory or a folder of them), of
    ``experiment`` only when given; a ResultsError when there is none."""
    paths = [Path(r) for r in roots]
    for root in paths:
        if not root.exists():
            raise ResultsError(
                f"{str(root)!r} does not exist",
                fix="pass the folder the sweeps write into (results/ by default) or results directories",
            )
    dirs = sweep_dirs(paths)
    if not dirs:
        raise ResultsError(
            f"no results directory under {', '.join(map(str, paths))}",
            fix="pass the folder the sweeps write into (results/ by default), e.g. python -m sweep history results",
        )
    if experiment is not None:
        names = {d: identity(d)[0] for d in dirs}
        dirs = [d for d in dirs if names[d] == experiment]
        if not dirs:
            raise ResultsError(
                f"no run of experiment {experiment!r} under {', '.join(map(str, paths))}",
                fix=f"the experiments there: {', '.join(sorted(set(names.values())))}",
            )
    return [_load_run(d, slos=slos) for d in dirs]


def series(runs: Sequence[Run]) -> list[list[Run]]:
    """The runs grouped by (experiment, mode), each group in time order, groups by their first run."""
    groups: dict[tuple[str, str], list[Run]] = {}
    for r in sorted(runs, key=lambda r: (r.when, r.run)):
        groups.setdefault((r.experiment, r.mode), []).append(r)
    return list(groups.values())


# --- the tables -----------------------------------------------------------------------------
def _runs_table(runs: Sequence[Run]) -> pl.DataFrame:
    rows = []
    for r in runs:
        status = r.points["status"].to_list() if r.points.height else []
        versions = sorted({v for v in r.points["sglang_version"].to_list() if v}) if r.points.height else []
        rows.append(
            {
                "run": r.run,
                "name": r.path.name,
                "experiment": r.experiment,
                "mode": r.mode,
                "created_at": r.created_at,
                "started_at": r.started_at,
                "ended_at": r.ended_at,
                "sglang_version": ", ".join(versions) or None,
                "planned": r.planned,
                "points": len(status),
                **{s: status.count(s) for s in _STATUSES},
            }
        )
    return pl.DataFrame(rows, schema=_RUNS_SCHEMA)


def _picks_table(runs: Sequence[Run]) -> pl.DataFrame:
    """One row per run, SLO and workload (the client-side benchmark axes, "" without any): a pick is
    made within one workload; ``label`` is the point's, ``setup`` the same without the workload."""
    rows = []
    for r in runs:
        ended = decisions(r.path)
        budget_ended = (
            {k: True for k in ended.filter(pl.col("outcome") == "budget")["decision"].to_list()} if ended.height else {}
        )
        for rec in slo_mod.recommendations(r.findings.slo_table, r.findings.slos):
            best = rec["best"] or {}
            rows.append(
                {
                    "run": r.run,
                    "experiment": r.experiment,
                    "mode": r.mode,
                    "slo": rec["slo"].name,
                    "workload": rec.get("workload") or "",
                    "label": best.get("label"),
                    "setup": best.get("setup"),
                    "baseline": best.get("baseline"),
                    "c_text": best.get("c_text"),
                    "tok_s_gpu": best.get("tok_s_gpu"),
                    "reason": rec["reason"],
                    **_pick_state(rec, budget_ended.get(f"slo:{rec['slo'].name}" + _at(rec.get("workload")))),
                }
            )
    return pl.DataFrame(rows, schema=_PICKS_SCHEMA)


_EQUAL_MARGIN = 0.03
"""Two candidates whose margin's whole interval lies within +-this are equal for any practical
purpose (decide's default ``decide.margin``)."""


def _at(workload: str | None) -> str:
    return f"@{workload}" if workload else ""


def _pick_state(rec: Mapping[str, Any], budget: bool | None = None) -> dict[str, Any]:
    """An SLO pick's runner-up, margin, its interval and decision state (``_PICKS_SCHEMA``), from one
    ``slo.recommendations`` entry; ``budget``: decide took this pick on and ended it on its budget."""
    best, runner = rec.get("best"), rec.get("runner_up")
    if best is None:
        return {"runner_up": None, "margin": None, "margin_low": None, "margin_high": None, "state": None}
    if runner is None or not runner.get("tok_s_gpu"):
        return {"runner_up": None, "margin": None, "margin_low": None, "margin_high": None, "state": "only"}
    low, high = best.get("margin_low"), best.get("margin_high")
    verdict = noise.pair_verdict(
        1 + best["margin"] if best.get("margin") is not None else None,
        None if low is None else 1 + low,
        None if high is None else 1 + high,
        equal_within=_EQUAL_MARGIN,
    )
    state = {
        noise.Verdict.AHEAD: "decided",
        noise.Verdict.BEHIND: "decided",
        noise.Verdict.EQUAL: "equal",
        noise.Verdict.WITHIN_NOISE: "budget" if budget else "within noise",
    }.get(verdict)
    return {
        "runner_up": runner.get("setup") or runner.get("label"),
        "margin": best.get("margin"),
        "margin_low": low,
        "margin_high": high,
        "state": state,
    }


def verdict(min_change: float = 0.0) -> pl.Expr:
    """regression | improvement | shared shift | within noise | no interval | new | gone | pending, over
    the columns of the ``history`` table. A change is flagged when it lies beyond both noises: its
    interval (the run's own, ``within_noise``) and the run-to-run noise the repeats measured
    (``run_noise``, where there is one); a repeat that is the only one measures that noise and is not
    judged by it. Where every configuration's figure moved together (``shared_shift``), each is judged
    relative to that shift, and beyond twice the configurations' scatter around it (``shift_spread``):
    ``shared shift`` where it moved beyond noise only with the others.
    ``min_change``: a change smaller than this (relative) is never flagged."""
    shift = pl.col("shared_shift")
    f = 1 + shift.fill_null(0.0)

    def beyond(ratio: pl.Expr, change: pl.Expr, within: pl.Expr) -> pl.Expr:
        inside_runs = pl.col("run_noise").is_not_null() & (ratio.log().abs() <= (1 + pl.col("run_noise")).log())
        return within.not_() & ~inside_runs & (pl.col("noise_from") != "this repeat") & (change.abs() >= min_change)

    raw = pl.col("value") / pl.col("previous_value")
    own_change = (1 + pl.col("change")) / f - 1
    own_within = (
        pl.when(shift.is_null())
        .then(pl.col("within_noise"))
        .otherwise((pl.col("ci_low") / f <= 1) & (pl.col("ci_high") / f >= 1))
    )
    apart = (raw / f).log().abs() > 2 * (1 + pl.col("shift_spread").fill_null(0.0)).log()
    own = beyond(raw / f, own_change, own_within) & apart
    return (
        pl.when(pl.col("verdict").is_not_null())
        .then(pl.col("verdict"))
        .when(pl.col("step") == 0)
        .then(None)
        .when(pl.col("value").is_null() & pl.col("previous_value").is_not_null())
        .then(pl.lit("gone"))
        .when(pl.col("previous_value").is_null() & pl.col("value").is_not_null())
        .then(pl.lit("new"))
        .when(pl.col("change").is_null())
        .then(None)
        .when(pl.col("within_noise").is_null())
        .then(pl.lit("no interval"))
        .when(own & (own_change < 0))
        .then(pl.lit("regression"))
        .when(own & (own_change > 0))
        .then(pl.lit("improvement"))
        .when(shift.is_not_null() & beyond(raw, pl.col("change"), pl.col("within_noise")))
        .then(pl.lit("shared shift"))
        .otherwise(pl.lit("within noise"))
    )


def references(runs: Sequence[Run], repeated: set[str]) -> list[list[Run]]:
    """For each run of one series (in order), the runs its figures are compared with: the run before
    it and, where that one repeats the run before it, those repeats back to the last change (the
    earlier runs with the settings the previous run had; at most ``_REFERENCE_RUNS``, the latest)."""
    out: list[list[Run]] = []
    for i in range(len(runs)):
        chain: list[Run] = []
        j = i - 1
        while j >= 0 and len(chain) < _REFERENCE_RUNS:
            chain.append(runs[j])
            if runs[j].run not in repeated:
                break
            j -= 1
        out.append(chain[::-1])
    return out


KEYS = ["label", "figure", "concurrency"]


def _against(run: Run, refs: Sequence[Run]) -> pl.DataFrame:
    """``compare_findings`` of ``run`` against the median of its reference runs, figure by figure:
    ``other`` is the median of their values, ``other_id`` and the interval those of the run whose
    value lies nearest it (the interval moved by their ratio: it is of this / that run), ``_n`` how
    many of them have the figure and ``_scatter`` the log of their largest over their smallest."""
    tables = [
        compare_findings(run.findings, ref.findings, run.tables, ref.tables).with_columns(_ref=pl.lit(k))
        for k, ref in enumerate(refs)
    ]
    every = pl.concat(tables, how="vertical_relaxed")  # a figure null in one run: its column typed Null there
    stats = (
        every.filter(pl.col("other").is_not_null())
        .group_by(KEYS)
        .agg(
            _median=pl.col("other").median(),
            _n=pl.col("other").count(),
            _scatter=pl.when(pl.col("other").min() > 0).then((pl.col("other").max() / pl.col("other").min()).log()),
        )
    )
    chosen = (
        every.join(stats, on=KEYS, how="left", nulls_equal=True)
        .with_columns(_d=(pl.col("other") - pl.col("_median")).abs())
        .sort([*KEYS, "_d", "_ref"], descending=[False, False, False, False, True], nulls_last=True)
        .unique(subset=KEYS, keep="first", maintain_order=True)
    )
    moved = pl.when(pl.col("_median") > 0).then(pl.col("other") / pl.col("_median")).otherwise(1.0)
    return (
        chosen.with_columns(
            ci_low=pl.col("ci_low") * moved, ci_high=pl.col("ci_high") * moved, other=pl.coalesce("_median", "other")
        )
        .with_columns(change=pl.col("this") / pl.col("other") - 1)
        .with_columns(within_noise=noise.within_noise())
        .drop("_median", "_d", "_ref")
    )


def _pair(run: Run, refs: Sequence[Run], step: int) -> pl.DataFrame:
    """One run's figures against its reference runs (``_against``; the run before it alone:
    ``compare_findings``); the first run's alone. ``verdict`` is set only for a label planned in this
    run and not written yet (``pending``)."""
    order = dict(run.findings.single.select("label", "order").iter_rows())
    previous = refs[-1] if refs else None
    if previous is None:
        table = (
            figures(run.findings)
            .rename({"point_id": "this_id", "value": "this"})
            .with_columns(
                other_id=pl.lit(None, pl.String),
                other=pl.lit(None, pl.Float64),
                change=pl.lit(None, pl.Float64),
                ci_low=pl.lit(None, pl.Float64),
                ci_high=pl.lit(None, pl.Float64),
                within_noise=pl.lit(None, pl.Boolean),
                _n=pl.lit(None, pl.UInt32),
                _scatter=pl.lit(None, pl.Float64),
            )
        )
    elif len(refs) == 1:
        table = compare_findings(run.findings, previous.findings, run.tables, previous.tables).with_columns(
            _n=pl.when(pl.col("other").is_not_null()).then(pl.lit(1, pl.UInt32)), _scatter=pl.lit(None, pl.Float64)
        )
    else:
        table = _against(run, refs)
    pending = pl.col("label").is_in(sorted(run.pending)) & pl.col("this").is_null()
    return table.select(
        experiment=pl.lit(run.experiment),
        mode=pl.lit(run.mode),
        step=pl.lit(step, pl.Int64),
        run=pl.lit(run.run),
        previous=pl.lit(previous.run if previous else None, pl.String),
        label="label",
        figure="figure",
        concurrency=pl.col("concurrency").cast(pl.Int64),
        point_id="this_id",
        previous_id="other_id",
        value="this",
        previous_value="other",
        change="change",
        ci_low="ci_low",
        ci_high="ci_high",
        within_noise="within_noise",
        run_noise=pl.lit(None, pl.Float64),
        noise_from=pl.lit(None, pl.String),
        reference_runs=pl.col("_n").cast(pl.Int64),
        shared_shift=pl.lit(None, pl.Float64),
        shift_spread=pl.lit(None, pl.Float64),
        verdict=pl.when(pending).then(pl.lit("pending")).otherwise(pl.lit(None, pl.String)),
        order=pl.col("label").replace_strict(order, default=None, return_dtype=pl.Int64),
        _scatter=pl.col("_scatter"),
    ).cast({**_HISTORY_SCHEMA, "_scatter": pl.Float64})  # type: ignore[dict-item]


def repeats(changes: pl.DataFrame, runs: Sequence[Run]) -> set[str]:
    """The runs that repeat the run before them: nothing recorded differs (settings, SGLang, GPU,
    what the plan resolved; points added or not run yet do not count)."""
    changed = set(changes.filter(~pl.col("what").str.starts_with("points only"))["run"].to_list())
    return {r.run for s in series(runs) for r in s[1:] if r.run not in changed}


def _run_noise(history: pl.DataFrame, repeated: set[str]) -> dict[tuple, tuple[float | None, str]]:
    """Per (experiment, mode, figure, concurrency, run): the run-to-run noise to judge that run's
    change by, as a relative change, and where it comes from: ``repeats`` (the largest change of
    that figure at that level, over every configuration, between the *other* repeated runs of the
    series, times ``MARGIN``; every level of the figure where that level has none), ``this repeat``
    (a repeat with no other to judge it by: it is the measurement) or ``within run`` (the series has
    no repeat: the intervals alone)."""
    keys = ["experiment", "mode", "figure", "concurrency", "run"]
    judged = history.filter((pl.col("step") > 0) & pl.col("figure").is_in(FLAGGED)).select(keys).unique()
    samples = history.filter(
        pl.col("run").is_in(sorted(repeated))
        & pl.col("figure").is_in(FLAGGED)
        & (pl.col("value") > 0)
        & (pl.col("previous_value") > 0)
    ).with_columns(lr=(pl.col("value") / pl.col("previous_value")).log().abs())
    at_level = {tuple(k): m for *k, m in samples.group_by(keys).agg(pl.col("lr").max()).iter_rows()}
    any_level: dict[tuple, float] = {}
    for (e, mode, fig, _c, run), m in at_level.items():
        any_level[(e, mode, fig, run)] = max(m, any_level.get((e, mode, fig, run), 0.0))
    out: dict[tuple, tuple[float | None, str]] = {}
    for e, mode, fig, c, run in judged.iter_rows():
        others = [
            m
            for (e2, mode2, fig2, c2, r2), m in at_level.items()
            if (e2, mode2, fig2, c2) == (e, mode, fig, c) and r2 != run
        ]
        if not others:
            others = [
                m for (e2, mode2, fig2, r2), m in any_level.items() if (e2, mode2, fig2) == (e, mode, fig) and r2 != run
            ]
        if others:
            out[(e, mode, fig, c, run)] = (math.exp(MARGIN * max(others)) - 1, "repeats")
        else:
            out[(e, mode, fig, c, run)] = (None, "this repeat" if run in repeated else "within run")
    return out


def shared_shift(log_changes: Sequence[float], run_noise: float | None = None) -> tuple[float, float] | None:
    """(shift, scatter), both relative changes, when (nearly) every configuration's figure moved the
    same way by a similar amount (``SHARED_*``): the median of their log changes and its MAD (scaled
    to a standard deviation); None otherwise. Pure."""
    n = len(log_changes)
    if n < _SHARED_MIN:
        return None
    m = statistics.median(log_changes)
    spread = 1.4826 * statistics.median(abs(x - m) for x in log_changes)
    same_way = sum(1 for x in log_changes if x * m > 0) / n
    floor = max(math.log1p(_SHARED_MIN_SHIFT), math.log1p(run_noise) if run_noise else 0.0)
    if same_way >= _SHARED_FRACTION and abs(m) >= floor and spread <= _SHARED_SPREAD * abs(m):
        return math.expm1(m), math.expm1(spread)
    return None


_SHIFT_KEYS = ["experiment", "mode", "run", "figure", "concurrency"]


def shifts_of(history: pl.DataFrame) -> pl.DataFrame:
    """Per run, figure and level, the shift every configuration shared (``shared_shift``) and its
    scatter (``shift_spread``): rows only where there is one."""
    rows = history.filter(
        (pl.col("step") > 0) & pl.col("figure").is_in(FLAGGED) & (pl.col("value") > 0) & (pl.col("previous_value") > 0)
    ).with_columns(_lr=(pl.col("value") / pl.col("previous_value")).log())
    found = []
    for *key, lrs, noise_ in rows.group_by(_SHIFT_KEYS).agg(pl.col("_lr"), pl.col("run_noise").max()).iter_rows():
        shift = shared_shift(lrs, noise_)
        if shift is not None:
            found.append((*key, *shift))
    schema = {**{k: _HISTORY_SCHEMA[k] for k in _SHIFT_KEYS}, "shared_shift": pl.Float64, "shift_spread": pl.Float64}
    return pl.DataFrame(found, orient="row", schema=schema)


def _history_table(
    runs: Sequence[Run], *, min_change: float = 0.0, changes: pl.DataFrame | None = None
) -> pl.DataFrame:
    repeated = repeats(_changes_table(runs) if changes is None else changes, runs)
    parts = [_pair(r, refs, i) for s in series(runs) for i, (r, refs) in enumerate(zip(s, references(s, repeated)))]
    if not parts:
        return pl.DataFrame(schema={**_HISTORY_SCHEMA, **achieved.HISTORY_COLUMNS})
    table = pl.concat(parts)
    noise_ = _run_noise(table, repeated)
    if noise_:
        keys = ["experiment", "mode", "figure", "concurrency", "run"]
        found = pl.DataFrame(
            [(*k, v, src) for k, (v, src) in noise_.items()],
            orient="row",
            schema={**{k: _HISTORY_SCHEMA[k] for k in keys}, "_noise": pl.Float64, "_from": pl.String},
        )
        table = (
            table.join(found, on=keys, how="left", nulls_equal=True)
            .with_columns(run_noise=pl.col("_noise"), noise_from=pl.col("_from"))
            .drop("_noise", "_from")
        )
    # two or more reference runs: their own scatter of this figure, where it is the larger noise
    scattered = (pl.col("reference_runs") >= 2) & pl.col("_scatter").is_not_null() & pl.col("figure").is_in(FLAGGED)
    from_scatter = (MARGIN * pl.col("_scatter")).exp() - 1
    larger = scattered & (pl.col("run_noise").is_null() | (from_scatter > pl.col("run_noise")))
    table = table.with_columns(
        run_noise=pl.when(larger).then(from_scatter).otherwise(pl.col("run_noise")),
        noise_from=pl.when(larger).then(pl.lit("reference runs")).otherwise(pl.col("noise_from")),
    )
    shifts = shifts_of(table)
    if shifts.height:
        table = table.drop("shared_shift", "shift_spread").join(shifts, on=_SHIFT_KEYS, how="left", nulls_equal=True)
    table = table.with_columns(verdict=verdict(min_change))
    return achieved.history_verdicts(table, achieved.runs_levels(runs)).select(
        [*_HISTORY_SCHEMA, *achieved.HISTORY_COLUMNS]
    )


def _flat(data: Any, prefix: str = "") -> dict[str, str]:
    """A nested mapping as {dotted.key: value as text}; lists and scalars are leaves."""
    if isinstance(data, dict) and data:
        out: dict[str, str] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    if not prefix:
        return {}
    text = data if isinstance(data, str) else json.dumps(data, sort_keys=True, default=str)
    return {prefix[:-1]: text}


def settings(directory: str | Path) -> dict[str, str]:
    """The run's resolved experiment (``experiment.yaml``) as {dotted key: value}, less its name,
    description, results directory and source (the file it was read from)."""
    exp = {k: v for k, v in read_experiment(directory).items() if k not in _NOT_SETTINGS}
    return _flat(exp)


def _resolved(points: pl.DataFrame) -> dict[str, dict[str, str]]:
    """{label: {resolved.field: value}} of each point (what the plan resolved for SGLang)."""
    if "resolved" not in points.columns:
        return {}
    out = {}
    for r in points.select("label", "resolved").iter_rows(named=True):
        resolved = {k: v for k, v in (r["resolved"] or {}).items() if k != "version"}
        out[r["label"]] = {k: v for k, v in _flat(resolved, "resolved.").items()}
    return out


_PLACEMENT_FLAGS = frozenset({"host", "port", "dist-init-addr", "nccl-port", "node-rank"})  # where, not what


def _servers(points: pl.DataFrame) -> dict[str, dict[str, str]]:
    """{label: {flags.NAME / env.NAME: value}}: what each point's server ran with (a policy's adaptive
    config, inlined in its flags, included), less where it ran (host, ports)."""
    out: dict[str, dict[str, str]] = {}
    have = set(points.columns)
    for r in points.iter_rows(named=True):
        mine: dict[str, str] = {}
        for column in ("flags", "env"):
            if column not in have:
                continue
            value = r.get(column) or {}
            items = value.items() if isinstance(value, dict) else ((e["key"], e["value"]) for e in value)
            mine.update({f"{column}.{k}": str(v) for k, v in items if k not in _PLACEMENT_FLAGS})
        out[r["label"]] = mine
    return out


def _distinct(points: pl.DataFrame, column: str) -> str:
    values = sorted({v for v in points[column].to_list() if v}) if column in points.columns else []
    return ", ".join(values) or render.MISSING


def _changes_between(run: Run, previous: Run) -> list[dict[str, Any]]:
    """What differs between two runs (rows of the ``changes`` table, without the run columns)."""
    rows: list[dict[str, Any]] = []
    before, after = settings(previous.path), settings(run.path)
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            rows.append({"what": key, "before": before.get(key), "after": after.get(key), "points": None})
    for column, what in (("sglang_version", "SGLang version"), ("gpu_name", "GPU")):
        a, b = _distinct(previous.points, column), _distinct(run.points, column)
        if render.MISSING not in (a, b) and a != b:  # unknown on one side (no point written yet): no change
            rows.append({"what": what, "before": a, "after": b, "points": None})
    counted: dict[tuple[str, str | None, str | None], int] = {}
    # what the plan resolved, and what each server ran with (a policy's config is a change too)
    for old, new in (
        (_resolved(previous.points), _resolved(run.points)),
        (_servers(previous.points), _servers(run.points)),
    ):
        for label in sorted(set(old) & set(new)):
            for key in sorted(set(old[label]) | set(new[label])):
                x, y = old[label].get(key), new[label].get(key)
                if x != y:
                    counted[(key, x, y)] = counted.get((key, x, y), 0) + 1
    rows += [{"what": key, "before": x, "after": y, "points": n} for (key, x, y), n in counted.items()]
    labels_a = set(previous.points["label"].to_list()) if previous.points.height else set()
    labels_b = set(run.points["label"].to_list()) if run.points.height else set()
    if labels_b - labels_a:
        rows.append(
            {
                "what": "points only in this run",
                "before": None,
                "after": ", ".join(sorted(labels_b - labels_a)),
                "points": len(labels_b - labels_a),
            }
        )
    gone = labels_a - labels_b - run.pending  # not yet written is not gone
    if gone:
        rows.append(
            {
                "what": "points only in the previous run",
                "before": ", ".join(sorted(gone)),
                "after": None,
                "points": len(gone),
            }
        )
    return rows


def _changes_table(runs: Sequence[Run]) -> pl.DataFrame:
    rows = [
        {"experiment": r.experiment, "mode": r.mode, "run": r.run, "previous": s[i - 1].run, **c}
        for s in series(runs)
        for i, r in enumerate(s)
        if i
        for c in _changes_between(r, s[i - 1])
    ]
    return pl.DataFrame(rows, schema=_CHANGES_SCHEMA)


@dataclass
class History:
    """The history of the runs under a root: the four tables (see the module docstring), and
    ``sections()`` / ``markdown()`` / ``str()`` as ``python -m sweep history`` prints them."""

    roots: list[Path]
    runs: pl.DataFrame
    picks: pl.DataFrame
    history: pl.DataFrame
    changes: pl.DataFrame
    min_change: float = 0.0

    def tables(self) -> dict[str, pl.DataFrame]:
        return {name: getattr(self, name) for name in VIEWS}

    def regressions(self) -> pl.DataFrame:
        return self.history.filter(pl.col("verdict") == "regression")

    def improvements(self) -> pl.DataFrame:
        return self.history.filter(pl.col("verdict") == "improvement")

    def sections(self) -> list[Section]:
        from sweep.analysis.history_text import sections  # the words, apart from the tables

        return sections(self)

    def markdown(self) -> str:
        return render.markdown(self.sections())

    def __str__(self) -> str:
        return self.markdown()


def build(
    roots: Iterable[str | Path] = ("results",),
    *,
    experiment: str | None = None,
    slos: list | None = None,
    min_change: float = 0.0,
    runs: Sequence[Run] | None = None,
) -> History:
    """The ``History`` of every results directory under ``roots`` (of one experiment when given);
    ``slos``: the SLOs to pick by (default each run's experiment's ``benchmark.slo``); ``runs``:
    already loaded ones (``_load_runs``)."""
    paths = [Path(r) for r in roots]
    runs = list(runs) if runs is not None else _load_runs(paths, experiment=experiment, slos=slos)
    changes = _changes_table(runs)
    return History(
        roots=paths,
        runs=_runs_table(runs),
        picks=_picks_table(runs),
        history=_history_table(runs, min_change=min_change, changes=changes),
        changes=changes,
        min_change=min_change,
    )
