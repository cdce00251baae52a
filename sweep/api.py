"""The sweep from Python: ``sweep.run(experiment, mode=...)`` returns a ``SweepResult``.

In the spirit of Ray Tune's ``Tuner.fit()`` and its ``ResultGrid``: every point with its status and,
for a failed one, the phase and reason (failures are data, not exceptions); the results tables as
polars LazyFrames; the best configuration at each concurrency level; the summary and the report::

    import polars as pl
    import sweep

    result = sweep.run("experiments/k26_eagle.yaml", mode="dry-run", overrides=["dry_run.hosts=2"])
    print(result.summary())
    result.best.select("concurrency", "label", "value")
    result.tables["levels"].filter(pl.col("concurrency") == 1).collect()

With ``policy.confirm`` in the experiment, ``run`` goes on after the grid: the speculative policies
are derived from what it measured and each chosen one runs on its own server as more points of the
sweep (``SweepResult.confirmation``); ``confirm(DIR)`` does that on a results directory already there.

The modes are the command line's: ``plan`` (``--plan``: nothing launched), ``dry-run``, ``local``,
``fake`` and ``cluster`` (no flag). The command line (``sweep/cli.py``) is a thin shell over this
module: it prints what this returns and maps it to an exit code. What stops a sweep as a whole is
raised, as there: ``ConfigError`` (a bad file or override), ``PlanError`` (points that break
SGLang's rules, unless ``skip_invalid``), ``ClusterError``, ``ResultsError``, ``Interrupted`` (Ctrl-C;
finished points are kept).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast, get_args

from sweep.core import (
    ConfigError,
    Failure,
    FailureParts,
    Mode,
    PointResult,
    PointState,
    PointStatus,
    ResultsError,
    RunMode,
    SweepEvent,
    kind,
    run_mode,
)
from sweep.experiment import config as config_mod

if TYPE_CHECKING:
    import polars as pl
    from rich.console import Console

    from sweep.analysis import Findings, History
    from sweep.analysis import policy as analysis_policy
    from sweep.experiment import ConfirmPlan, Plan
    from sweep.results import lock as dir_lock
    from sweep.sglang import DrafterReport


__all__ = ["BestAt", "PointRecord", "Summary", "SweepResult", "confirm", "history", "plan_for", "run"]


@dataclass(frozen=True)
class PointRecord(FailureParts):
    """One point of the sweep as it stands: planned, recorded ok, failed (its ``failure``: phase,
    reason, fix), invalid (the rule it breaks, phase ``plan``). A point this call ran keeps its record
    (``result``: the host's ``PointResult`` without its tables); an earlier run's is read from the
    points table."""

    point_id: str
    label: str
    status: PointState
    params: dict[str, str] = field(default_factory=dict)  # its value of each grid axis
    baseline: bool = False
    baseline_id: str | None = None  # the matched baseline of a speculative point
    failure: Failure | None = None
    ran: bool = False  # run by this call (not an earlier run's result)
    in_plan: bool = True  # False: recorded by an earlier run of an experiment since changed
    result: PointResult | None = field(default=None, repr=False, compare=False)  # ran: its record


@dataclass(frozen=True)
class BestAt:
    """The best configuration at one concurrency level, against its baseline."""

    concurrency: int
    label: str
    value: float  # output tok/s
    baseline: bool  # the winner is a baseline
    speedup: float | None  # the winner against its own baseline
    runner_up: str | None = None  # the next best at that level
    margin: float | None = None  # value / runner-up's - 1
    margin_low: float | None = None  # the margin's 95% interval (best_per_level)
    margin_high: float | None = None
    margin_within_noise: bool | None = None  # the interval contains 0: the runner-up is as good
    workload: str = ""  # the client-side benchmark axes ("workload=code"); a pick is made within one
    verdict: str | None = None  # of ``speedup``: faster | slower | within noise (noise.judged)

    def vs_runner_up(self) -> str:
        """'+3% (95% interval -6% .. +13%) over X', or 'within noise of X (...)'; '-' without one."""
        from sweep.analysis import render  # lazy: `import sweep` and the command line load a room only when it is used

        if self.runner_up is None or self.margin is None:
            return "-"
        margin = render.margin(self.margin, self.margin_low, self.margin_high)
        return (
            f"within noise of {self.runner_up} ({margin})"
            if self.margin_within_noise
            else f"{margin} over {self.runner_up}"
        )


@dataclass(frozen=True)
class Summary:
    """The end-of-sweep summary: what to deploy (``deploy``: the report's Deploy section, a line per
    SLO's pick and per speculative policy, with the policy's launch flags and its plain table), the
    speculative policies themselves (``policies``: ``sweep.analysis.policy.Policy``, each with its
    tiers, ``config_json()`` for SGLang's ``--speculative-adaptive-config``, ``launch_flags()``,
    ``plain_table()``; ``SweepResult.policies`` has their notes too), the headlines, and the best
    configuration at C=1 and at saturation (the lowest and highest levels measured), per workload
    where the results hold several (a pick is made within one workload, never across two).
    ``error``: why there is none (the report says more)."""

    path: Path
    headlines: list[str] = field(default_factory=list)
    best: list[BestAt] = field(default_factory=list)
    error: str | None = None
    deploy: list[str] = field(default_factory=list)
    policies: list[analysis_policy.Policy] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.error:
            return [f"(no summary: {self.error})"]
        out = (["Deploy:", *self.deploy, "Summary:"] if self.deploy else []) + [f"- {line}" for line in self.headlines]
        for b in self.best:
            vs = (
                ""
                if b.baseline or b.speedup is None
                else f", {b.speedup:.2f}x" + (f" ({b.verdict})" if b.verdict else "") + " vs its baseline"
            )
            where = f"{b.workload}, C={b.concurrency}" if b.workload else f"C={b.concurrency}"
            out.append(
                f"best at {where}: {b.label}{' (a baseline)' if b.baseline else ''}, {b.value:.1f} output "
                f"tok/s{vs}" + ("" if b.runner_up is None else f", {b.vs_runner_up()}")
            )
        return out + [f"full report: python -m sweep report {self.path}"]

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass
class SweepResult:
    """What a sweep (or its plan) came to. ``points``: every point of the plan, with its status
    (``ok``, ``failed``, ``invalid``, ``pending``: no result yet) and failure; ``tables``: the results
    directory's tables as polars LazyFrames; ``best``: the best configuration per concurrency level;
    ``summary()`` and ``report()``: the end-of-sweep summary and the full report's text."""

    experiment: config_mod.Experiment
    mode: Mode
    path: Path  # the results directory (for a plan: where the run would write)
    plan: Plan
    points: list[PointRecord]
    ran: list[str] = field(default_factory=list)  # ids of the points this call ran
    scale: dict = field(default_factory=dict)  # the dry run's (or fake's) benchmark scale
    drafter_checks: dict[str, DrafterReport] = field(default_factory=dict)  # plan: drafters readable here
    run_mode: RunMode = "real"  # the results directory's mode (for a plan: the run's it plans)
    # the confirmation phase (policy.confirm, ``confirm``): its points (in ``points`` too, their
    # params' step axis ``adaptive``), the policy each runs, notes on what was not confirmed
    confirmation: ConfirmPlan | None = None
    _findings: Findings | None = field(default=None, repr=False, compare=False)

    # --- the points ---------------------------------------------------------------------------
    def by_status(self, *status: PointState) -> list[PointRecord]:
        return [p for p in self.points if p.status in status]

    @property
    def failed(self) -> list[PointRecord]:
        """Points whose recorded result is a failure (its phase and reason in the record)."""
        return self.by_status("failed")

    @property
    def invalid(self) -> list[PointRecord]:
        """Points that break SGLang's rules (never launched)."""
        return self.by_status("invalid")

    @property
    def ok(self) -> bool:
        """A plan: every point valid and no drafter error. A run: no recorded point failed (the
        command line's exit 0)."""
        if self.mode == "plan":
            return (
                not self.invalid
                and not any(r.errors for r in self.drafter_checks.values())
                and not self.plan.confirm_errors
            )
        return not self.failed

    def point(self, label_or_id: str) -> PointRecord:
        for p in self.points:
            if label_or_id in (p.point_id, p.label):
                return p
        raise KeyError(label_or_id)

    @property
    def points_frame(self) -> pl.DataFrame:
        """The points as a polars DataFrame: point_id, label, status, failure_phase, failure_reason,
        failure_fix, baseline, baseline_id, ran, and one ``axis_<name>`` column per grid axis (a
        numeric axis as numbers, as in the points table)."""
        import polars as pl  # lazy: polars is slow to import; only this path needs it
        import pyarrow as pa  # lazy: pyarrow is slow to import; only this path needs it

        from sweep.results import (  # lazy: `import sweep` and the command line load a room only when it is used
            axis_type,
            axis_value,
        )

        axes = list(self.experiment.grid.axes)
        kinds = {a: axis_type(p.params.get(a) for p in self.points) for a in axes}  # as the points table has them
        rows = [
            {
                "point_id": p.point_id,
                "label": p.label,
                "status": p.status,
                "failure_phase": p.failure_phase,
                "failure_reason": p.failure_reason,
                "failure_fix": p.failure_fix,
                "baseline": p.baseline,
                "baseline_id": p.baseline_id,
                "ran": p.ran,
                **{f"axis_{a}": axis_value(p.params.get(a), kinds[a]) for a in axes},
            }
            for p in self.points
        ]
        # pl.from_arrow of an Array is a Series (polars types it DataFrame | Series: a Table gives a DataFrame)
        dtypes = {a: cast(pl.Series, pl.from_arrow(pa.array([], kinds[a]))).dtype for a in axes}
        schema: dict[str, pl.DataType | type[pl.DataType]] = {
            "point_id": pl.String,
            "label": pl.String,
            "status": pl.String,
            "failure_phase": pl.String,
            "failure_reason": pl.String,
            "failure_fix": pl.String,
            "baseline": pl.Boolean,
            "baseline_id": pl.String,
            "ran": pl.Boolean,
            **{f"axis_{a}": dtypes[a] for a in axes},
        }
        return pl.DataFrame(rows, schema=schema)

    # --- the measurements ---------------------------------------------------------------------
    @property
    def tables(self) -> dict[str, pl.LazyFrame]:
        """``{"points", "single_stream", "levels", "requests", "metrics", "decisions"}`` as polars
        LazyFrames (``sweep.results.load``; read afresh on each access; ``decisions``: how ``decide``
        ended each pick it measured again). A directory not written yet (a plan) gives empty frames
        with every column."""
        from sweep.results import load  # lazy: `import sweep` and the command line load a room only when it is used

        if self.path.is_dir():
            return load(self.path)
        import polars as pl  # lazy: polars is slow to import; only this path needs it

        from sweep.results import (  # lazy: `import sweep` and the command line load a room only when it is used
            DECISIONS_SCHEMA,
            TABLES,
        )

        # pl.from_arrow of a Table is a DataFrame (polars types it DataFrame | Series)
        return {
            name: pl.LazyFrame(schema=cast(pl.DataFrame, pl.from_arrow(schema.empty_table())).schema)
            for name, schema in {**TABLES, "decisions": DECISIONS_SCHEMA}.items()
        }

    def findings(self) -> Findings:
        """Every frame of the report (``sweep.analysis.analyze``: speedups, levels, best, crossover,
        the SLO picks by the experiment's ``benchmark.slo``, the policies, failures...; a dry run's
        at the real system's speed, as the report shows them). Computed once per result."""
        from sweep.analysis import (  # lazy: `import sweep` and the command line load a room only when it is used
            analyze,
            slo,
        )

        if self._findings is None:
            self._findings = analyze(self.tables, slos=slo.from_experiment(self.path))
        return self._findings

    @property
    def best(self) -> pl.DataFrame:
        """The best configuration (baselines included) at each concurrency level of each workload, as
        the report and the summary give it (``sweep.analysis.best_per_level``: workload, concurrency,
        label (the setup, without the workload), baseline,
        value = output tok/s, speedup over its baseline, verdict, runner_up, margin...); empty while
        no level is measured."""
        if not self.path.is_dir():
            from sweep.analysis import (
                best_per_level,  # lazy: `import sweep` and the command line load a room only when it is used
            )

            return best_per_level(self.tables)  # no level yet: the empty frame, every column
        return self.findings().best

    def summary(self) -> Summary:
        """The end-of-sweep summary (what the command line prints after a run)."""
        import polars as pl  # lazy: polars is slow to import; only this path needs it

        from sweep.analysis import (  # lazy: `import sweep` and the command line load a room only when it is used
            deploy,
            headlines,
        )

        if not self.path.is_dir():
            return Summary(self.path, error="nothing recorded yet")
        try:
            f = self.findings()
            lines = headlines(f)
            answer = deploy.deploy_section(f).paragraphs
        except Exception as e:  # noqa: BLE001 - everything is on disk already; the report says more
            return Summary(self.path, error=f"{type(e).__name__}: {e}")
        best: list[BestAt] = []
        for (workload,), mine in f.best.group_by("workload", maintain_order=True):
            levels = mine["concurrency"].unique().sort()
            for c in sorted({levels[0], levels[-1]}):
                b = mine.filter(pl.col("concurrency") == c).row(0, named=True)
                best.append(
                    BestAt(
                        int(c),
                        b["label"],
                        float(b["value"]),
                        bool(b["baseline"]),
                        None if b["speedup"] is None else float(b["speedup"]),
                        b["runner_up"],
                        b["margin"],
                        b["margin_low"],
                        b["margin_high"],
                        b["margin_within_noise"],
                        str(workload or ""),
                        b["verdict"],
                    )
                )
        return Summary(self.path, lines, best, deploy=list(answer), policies=list(f.policies))

    @property
    def policies(self) -> analysis_policy.Policies:
        """The speculative policies across load (``sweep.analysis.policy``: per group of points that
        differ only in their step count, the best step count per concurrency tier, SGLang's adaptive
        config, the break-even), as the report's Deploy and Speculative policy sections give them;
        ``.notes``: the groups that got none, and why. Empty while nothing is measured."""
        from sweep.analysis import policy  # lazy: `import sweep` and the command line load a room only when it is used

        if not self.path.is_dir():
            return policy.Policies()
        return self.findings().policies

    def report(
        self,
        *,
        write: bool = False,
        plots: bool | None = None,
        out_dir: str | Path | None = None,
        slos: Sequence[str] | None = None,
    ) -> str:
        """The report as Markdown (``python -m sweep report DIR``'s sections). ``write``: also write
        ``report.md`` and ``report.html`` into ``out_dir`` (default DIR/report), with the PNG plots and
        the page's charts unless ``plots=False``;
        ``slos``: judge by these (``'chat: ttft_p90<=2s,tpot_p90<=50ms'``) instead of the experiment's."""
        from sweep.analysis import (
            report as report_mod,  # lazy: `import sweep` and the command line load a room only when it is used
        )
        from sweep.core import (
            ResultsError,  # lazy: `import sweep` and the command line load a room only when it is used
            parse_slo,  # lazy: `import sweep` and the command line load a room only when it is used
        )

        if not self.path.is_dir():
            raise ResultsError(
                f"nothing recorded in {self.path} yet (a {self.mode} result)",
                fix="run the sweep first: sweep.run(experiment, mode='dry-run')",
            )
        out = Path(out_dir) if out_dir else self.path / "report"
        with_plots = write if plots is None else plots
        judged = None if slos is None else [parse_slo(s) for s in slos]
        if write:  # whole (built beside out and swapped in), as the command line's report
            return report_mod.publish(self.path, out_dir, with_plots=with_plots, slos=judged).report.markdown
        built = report_mod.build(self.path, out_dir=out, with_plots=with_plots, slos=judged)
        return built.markdown

    def __repr__(self) -> str:
        counts = {s: len(self.by_status(s)) for s in get_args(PointState)}
        said = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        return f"SweepResult({self.experiment.name!r}, mode={self.mode!r}, {said}, path={str(self.path)!r})"


def _experiment(experiment: str | Path | config_mod.Experiment, overrides: Sequence[str]) -> config_mod.Experiment:
    if isinstance(experiment, config_mod.Experiment):
        if overrides:
            raise ConfigError(
                "overrides apply to an experiment file, not to a loaded Experiment",
                fix="pass the file's path with overrides=[...], or change the Experiment's fields",
            )
        return experiment
    return config_mod.load(experiment, list(overrides))


def _check_mode(mode: str) -> None:
    if mode not in get_args(Mode):
        raise ConfigError(f"unknown mode {mode!r}", fix=f"use one of {', '.join(get_args(Mode))}")


def plan_for(
    experiment: str | Path | config_mod.Experiment,
    mode: Mode = "cluster",
    overrides: Sequence[str] = (),
    *,
    results_dir: str | Path | None = None,
    drafter_checks: bool = True,
) -> SweepResult:
    """The plan of a run in ``mode`` (a dry run's is scaled), launching nothing: a ``SweepResult``
    whose points are ``pending`` or ``invalid`` (with the rule in ``failure_reason``). ``drafter_checks``:
    check the drafters whose files are readable here (as ``--plan`` does)."""
    from sweep.experiment import (
        plan as planning,  # lazy: `import sweep` and the command line load a room only when it is used
    )
    from sweep.orchestrate import (
        results_path,  # lazy: `import sweep` and the command line load a room only when it is used
    )
    from sweep.results import ResultsDir  # lazy: `import sweep` and the command line load a room only when it is used

    _check_mode(mode)
    target: Mode = "cluster" if mode == "plan" else mode
    exp = _experiment(experiment, overrides)
    scale: dict = {}
    bench_scale = None
    if kind(target).scaled:
        from sweep.experiment import (  # lazy: `import sweep` and the command line load a room only when it is used
            bench_scaler,
            scaled,
        )

        exp, scale = scaled(exp)
        bench_scale = bench_scaler(exp)
    from sweep.bench import (
        check_experiment,  # lazy: `import sweep` and the command line load a room only when it is used
    )

    check_experiment(exp.benchmark, exp.server.model_path, exp.server.flags)  # a bad workload file: nothing runs
    plan = planning.build(exp, bench_scale, files_here=kind(target).local_cluster)  # a local run's files are here
    for bench in {repr(p.bench): p.bench for p in plan.points if p.bench is not exp.benchmark}.values():
        check_experiment(bench, exp.server.model_path, exp.server.flags)  # the client-side axes' workloads too
    checks = {}
    if drafter_checks:
        from sweep.sglang import drafter  # lazy: `import sweep` and the command line load a room only when it is used

        checks = {
            p.id: r for p in plan.points if (r := drafter.check_flags(p.flags)) is not None
        }  # files readable here
    path = Path(results_dir) if results_dir else results_path(exp, run_mode(target))
    default = not results_dir and not exp.results_dir  # results/<name> may create results/; a given one no parent
    ResultsDir(
        path, exp.name, run_mode(target), create_parents=default
    ).check()  # what the run would refuse, refused now
    points = [
        PointRecord(
            p.id,
            p.label,
            "invalid" if p.errors else "pending",
            dict(p.params),
            p.baseline,
            p.baseline_id,
            Failure("plan", "; ".join(p.errors)) if p.errors else None,
        )
        for p in plan.points
    ]
    return SweepResult(exp, "plan", path, plan, points, scale=scale, drafter_checks=checks, run_mode=run_mode(target))


def _recorded(path: Path, skip: Sequence[str] = ()) -> dict[str, tuple[str, PointStatus, Failure | None]]:
    """``{point_id: (label, status, failure)}`` of the points recorded in ``path`` by earlier runs
    (``skip``: those this call ran, whose records it has)."""
    import polars as pl  # lazy: polars is slow to import; only this path needs it

    from sweep.results import load  # lazy: `import sweep` and the command line load a room only when it is used

    if not path.is_dir():
        return {}
    cols = ["point_id", "label", "status", "failure_phase", "failure_reason", "failure_fix"]
    frame = load(path)["points"].select(cols).filter(~pl.col("point_id").is_in(list(skip))).collect()
    return {
        r["point_id"]: (
            r["label"],
            r["status"],
            None
            if r["status"] == "ok" or r["failure_phase"] is None
            else Failure(r["failure_phase"], r["failure_reason"] or "", r["failure_fix"]),
        )
        for r in frame.iter_rows(named=True)
    }


def run(
    experiment: str | Path | config_mod.Experiment,
    mode: Mode = "cluster",
    overrides: Sequence[str] = (),
    progress: bool | Callable[[SweepEvent], None] = True,
    *,
    force: bool = False,
    retry_failed: bool = False,
    only: Sequence[str] = (),
    skip_invalid: bool = False,
    address: str | None = None,
    results_dir: str | Path | None = None,
    console: Console | None = None,
) -> SweepResult:
    """Run the sweep of ``experiment`` (an experiment file, or a loaded ``sweep.experiment.config.Experiment``)
    in ``mode`` and return what it came to; see ``SweepResult``.

    - ``mode``: ``plan`` (nothing launched), ``dry-run``, ``local``, ``fake``, ``cluster``.
    - ``overrides``: ``key=value`` strings, as on the command line (``benchmark.single_stream.runs=3``).
    - ``progress``: ``True`` the live view (a terminal) or timestamped lines on the console; ``False``
      nothing printed; a function: it gets every event (``sweep.core.events``: ``SweepStarted``,
      ``PointStage``, whose ``event`` is one of a host's small progress events, ``HostProgress``:
      ``LevelProgress``, ``StartupProgress``..., and ``PointFinished``) and nothing is printed unless a
      ``console`` is given (then the progress too, as ``True`` prints it there).
    - ``force``, ``retry_failed``, ``only`` (label globs), ``skip_invalid``, ``address``: the command
      line's ``--force``, ``--retry-failed``, ``--only``, ``--skip-invalid``, ``--address``.
    - ``results_dir``: where the results go (default ``results/<name>`` plus ``-dryrun`` etc.).

    The same call again resumes: points with a result are kept (``ran`` says what this call ran).
    """
    _check_mode(mode)
    if mode == "plan":
        return plan_for(experiment, "cluster", overrides, results_dir=results_dir)
    planned = plan_for(experiment, mode, overrides, results_dir=results_dir, drafter_checks=False)
    planned.plan.require_valid(skip_invalid=skip_invalid)
    from rich.console import Console  # lazy: rich is imported only where output is drawn

    from sweep.orchestrate import (  # lazy: `import sweep` and the command line load a room only when it is used
        RunOptions,
        run_sweep,
    )

    on_event = progress if callable(progress) else None
    console_given = console is not None
    if console is None:
        console = Console(highlight=False) if progress is True else Console(quiet=True)
    rm: RunMode = run_mode(mode)
    opts = RunOptions(
        mode=rm,
        force=force,
        retry_failed=retry_failed,
        only=tuple(only),
        address=address,
        results_dir=planned.path,
        on_event=on_event,
        live=progress is True or (callable(progress) and console_given),
    )
    after = []
    if planned.experiment.policy.confirm:  # after the grid: the policies' own servers
        from sweep.analysis import (
            to_confirm,  # lazy: `import sweep` and the command line load a room only when it is used
        )
        from sweep.orchestrate import (
            confirm as confirm_mod,  # lazy: `import sweep` and the command line load a room only when it is used
        )

        after.append(confirm_mod.Phase(to_confirm))
    done = run_sweep(planned.plan, opts, bench_scale=planned.scale, console=console, after=after)
    confirmation = after[0].planned if after else None
    return _with_records(
        replace(planned, mode=mode, path=done.path, ran=done.ran, confirmation=confirmation), done.results
    )


def _with_records(result: SweepResult, results: dict[str, PointResult]) -> SweepResult:
    """``result`` with each point's status as it stands: its record where this call ran it
    (``results``), else the recorded one; the confirmation points after the plan's; and an earlier
    run's points that the plan no longer has (``in_plan`` False)."""
    earlier = _recorded(result.path, skip=list(results))
    planned = list(result.points)
    if result.confirmation is not None:
        planned += [
            PointRecord(
                p.id,
                p.label,
                "invalid" if p.errors else "pending",
                dict(p.params),
                False,
                p.baseline_id,
                Failure("plan", "; ".join(p.errors)) if p.errors else None,
            )
            for p in result.confirmation.points
        ]
    points: list[PointRecord] = []
    for p in planned:
        if (r := results.get(p.point_id)) is not None:  # run now: its record
            points.append(replace(p, status=r.status, failure=r.failure, ran=True, result=r))
        elif p.point_id in earlier:
            _, status, failure = earlier[p.point_id]
            points.append(replace(p, status=status, failure=failure))
        else:
            points.append(p)
    in_plan = {p.point_id for p in planned}
    for pid, (label, status, failure) in earlier.items():  # an earlier run's points that this plan no longer has
        if pid not in in_plan:
            points.append(PointRecord(pid, label, status, failure=failure, in_plan=False))
    return replace(result, points=points)


def confirm(
    directory: str | Path,
    progress: bool | Callable[[SweepEvent], None] = True,
    *,
    force: bool = False,
    retry_failed: bool = False,
    only: Sequence[str] = (),
    address: str | None = None,
    console: Console | None = None,
) -> SweepResult:
    """``python -m sweep confirm DIR``: the confirmation phase (``policy.confirm``) on a results
    directory a sweep wrote: the policies derived from its grid, each chosen one's server launched and
    benchmarked over the group's levels and workloads as ordinary points of that sweep, in that
    directory, in its mode (a dry run's with the fake server). The same call again resumes (a recorded
    confirmation point is not run again; ``retry_failed``, ``force``, ``only`` as for ``run``).
    Returns the sweep's ``SweepResult``: every recorded point, and ``confirmation``. The directory's
    lock is taken before anything is read or decided (a running sweep: refused, its holder named)."""
    from sweep.results import (  # lazy: `import sweep` and the command line load a room only when it is used
        check_sweep_dir,
        experiment_path,
        read_manifest,
    )
    from sweep.results import (
        lock as dir_lock,
    )  # lazy: `import sweep` and the command line load a room only when it is used

    path = Path(directory)
    check_sweep_dir(path)
    manifest = read_manifest(path) or {}
    recorded = manifest.get("mode")
    if recorded not in get_args(RunMode) or not experiment_path(path).is_file():
        raise ResultsError(
            f"{path} holds no sweep's experiment and mode ({experiment_path(path).name} and the manifest): "
            "there is no grid to derive a policy from",
            fix="confirm a directory a sweep wrote (python -m sweep EXP.yaml wrote it); "
            "a bench --out directory has no grid",
        )
    held = dir_lock.acquire(path)  # before anything is read, decided or said: a running sweep's holder is named
    try:
        return _confirm_locked(
            path, cast(RunMode, recorded), held, progress, force, retry_failed, tuple(only), address, console
        )
    finally:
        held.release()


def _confirm_locked(
    path: Path,
    rm: RunMode,
    held: dir_lock.DirLock,
    progress: bool | Callable[[SweepEvent], None],
    force: bool,
    retry_failed: bool,
    only: tuple[str, ...],
    address: str | None,
    console: Console | None,
) -> SweepResult:
    """``confirm`` on the directory ``path`` (its mode ``rm``) whose lock it holds (``held``)."""
    from sweep.analysis import to_confirm  # lazy: `import sweep` and the command line load a room only when it is used
    from sweep.orchestrate import (
        RunOptions,  # lazy: `import sweep` and the command line load a room only when it is used
    )
    from sweep.orchestrate import (
        confirm as confirm_mod,  # lazy: `import sweep` and the command line load a room only when it is used
    )
    from sweep.results import (
        experiment_path,
    )  # lazy: `import sweep` and the command line load a room only when it is used

    exp = config_mod.load(experiment_path(path))
    from sweep.core import REDACTED  # lazy: `import sweep` and the command line load a room only when it is used

    if REDACTED in experiment_path(path).read_text():
        raise ConfigError(
            f"{experiment_path(path)} had secrets redacted when it was written, so its servers "
            "cannot be launched from it",
            fix="run the experiment file itself with policy.confirm=true (python -m sweep EXP.yaml "
            "policy.confirm=true ...): it resumes, and only the confirmation runs",
        )
    mode: Mode = "cluster" if rm == "real" else rm
    planned = _stored_plan(exp, mode, path)
    console_given = console is not None
    if console is None:
        from rich.console import Console  # lazy: rich is imported only where output is drawn

        console = Console(highlight=False) if progress is True else Console(quiet=True)
    opts = RunOptions(
        mode=rm,
        force=force,
        retry_failed=retry_failed,
        only=only,
        address=address,
        results_dir=path,
        on_event=progress if callable(progress) else None,
        live=progress is True or (callable(progress) and console_given),
    )
    confirmation, done = confirm_mod.run(
        planned.plan, opts, to_confirm, bench_scale=planned.scale, console=console, lock=held
    )
    results = dict(done.results) if done is not None else {}
    return _with_records(replace(planned, mode=mode, ran=list(results), confirmation=confirmation), results)


def _stored_plan(exp: config_mod.Experiment, mode: Mode, path: Path) -> SweepResult:
    """The plan of the experiment a results directory recorded, as its sweep planned it: a dry run's
    recorded experiment is already at the dry run's scale (only the client-side axes' settings are
    scaled where they merge), and the scale is the one its points recorded."""
    import polars as pl  # lazy: polars is slow to import; only this path needs it

    from sweep.experiment import (
        plan as planning,  # lazy: `import sweep` and the command line load a room only when it is used
    )
    from sweep.results import load  # lazy: `import sweep` and the command line load a room only when it is used

    bench_scale = None
    scale: dict = {}
    if kind(mode).scaled:
        from sweep.experiment import (
            bench_scaler,  # lazy: `import sweep` and the command line load a room only when it is used
        )

        bench_scale = bench_scaler(exp)
        rows = load(path)["points"].filter(pl.col("bench_scale").is_not_null()).select("bench_scale").head(1).collect()
        scale = dict(rows["bench_scale"][0]) if rows.height else {}
    plan = planning.build(exp, bench_scale, files_here=kind(mode).local_cluster)  # a local run's files are here
    points = [
        PointRecord(
            p.id,
            p.label,
            "invalid" if p.errors else "pending",
            dict(p.params),
            p.baseline,
            p.baseline_id,
            Failure("plan", "; ".join(p.errors)) if p.errors else None,
        )
        for p in plan.points
    ]
    return SweepResult(exp, mode, path, plan, points, scale=scale, run_mode=run_mode(mode))


def history(
    roots: str | Path | Sequence[str | Path] = "results",
    *,
    experiment: str | None = None,
    slos: Sequence[str] | None = None,
    min_change: float = 0.0,
) -> History:
    """``python -m sweep history``: every results directory under ``roots`` (a folder of them, such as
    ``results``, or results directories), and for each experiment's runs over time each configuration's
    figures run by run, regressions and improvements beyond noise, and the settings that changed.
    Returns a ``sweep.analysis.history.History``: ``runs``, ``picks``, ``history`` and ``changes`` as
    polars DataFrames (``regressions()``, ``improvements()``; ``str()``: the Markdown the command prints).
    ``experiment``: its runs only; ``slos``: pick by these (``'chat: ttft_p90<=2s,tpot_p90<=50ms'``)
    instead of each experiment's; ``min_change``: flag only changes at least this large (0.05: 5 %)."""
    from sweep.analysis import (
        history as history_mod,  # lazy: `import sweep` and the command line load a room only when it is used
    )
    from sweep.core import parse_slo  # lazy: `import sweep` and the command line load a room only when it is used

    given = [roots] if isinstance(roots, (str, Path)) else list(roots)
    return history_mod.build(
        given, experiment=experiment, min_change=min_change, slos=None if slos is None else [parse_slo(s) for s in slos]
    )
