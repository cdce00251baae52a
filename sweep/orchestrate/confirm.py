"""The confirmation phase: the policy proven on a server, not only derived.

After the grid (``policy.confirm`` in the experiment: ``run_sweep(..., after=[Phase(choose)])``) or
on an existing results directory (``python -m sweep confirm DIR``: ``run``): the policies to confirm
are chosen from what the grid recorded (``choose``: ``sweep.analysis.confirmation.to_confirm``, handed
in by ``sweep.api``: orchestration never reads the analysis itself), each becomes one ordinary point
of the sweep (``sweep.experiment.plan.confirmation_points``: a member's flags with its static chain
replaced by the policy's launch flags, the step axis valued ``adaptive``, the same baseline, levels
and workload), and those points run as any other: resumed (a recorded one is not run again),
selected by ``--only``, an invalid one recorded as invalid, a failure recorded as data.

``decide`` (the re-measurement of undecided picks) is another phase after the grid, beside this one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from sweep.core import PlanError
from sweep.experiment import ConfirmPlan, Plan, PlannedPoint, confirm_probes, confirmation_points
from sweep.orchestrate.sweep import run_phase, run_sweep
from sweep.results import lock as dir_lock

if TYPE_CHECKING:
    from rich.console import Console

    from sweep.orchestrate.sweep import Prepared, RunOptions, Session, SweepRun

# a results directory -> (the policies to confirm, notes, {point id: label}): analysis.confirmation.to_confirm
_Chooser = Callable[[Path], "tuple[list[Any], list[str], dict[str, str]]"]


def _plan_confirmation(plan: Plan, path: Path, choose: _Chooser) -> ConfirmPlan:
    """The confirmation points of the grid ``plan`` recorded in ``path``."""
    chosen, notes, labels = choose(path)
    cp = confirmation_points(plan, chosen, labels)
    cp.notes = notes + cp.notes
    return cp


def announce(cp: ConfirmPlan, console: Console) -> None:
    for note in cp.notes:
        console.print(escape(f"confirm: {note}"), soft_wrap=True)
    if not cp.points:
        console.print("confirm: no policy to confirm", soft_wrap=True)
    for pp in cp.points:
        c = cp.chosen[pp.id]
        console.print(
            escape(f"confirm: {pp.label} [{pp.id}] runs the policy of {c.policy.group} ({'; '.join(c.why)})"),
            soft_wrap=True,
        )


_MAX_ROUNDS = 11  # a bound beside the experiment's own (policy.revise, at most 10): one round, then revisions


def _merged(plans: list[ConfirmPlan]) -> ConfirmPlan:
    """Every round's confirmation plan as one (its points, the policies they run, the notes)."""
    out = ConfirmPlan()
    for cp in plans:
        out.notes += [n for n in cp.notes if n not in out.notes]
        for pp in cp.points:
            if pp.id not in out.chosen:
                out.points.append(pp)
                out.chosen[pp.id] = cp.chosen[pp.id]
    return out


class Phase:
    """The confirmation as a phase after the grid, on the grid's directory, lock and cluster session:
    rounds until nothing new is to confirm (a confirmation that fell short gives a revision to confirm
    next, up to the experiment's ``policy.revise``). ``planned``: its confirmation plan (every round's
    points), once it ran."""

    def __init__(self, choose: _Chooser) -> None:
        self.choose = choose
        self.planned: ConfirmPlan | None = None

    def __call__(self, sweep: Prepared, session: Session, console: Console) -> SweepRun | None:
        self.planned, done = _rounds(
            lambda: _plan_confirmation(sweep.plan, sweep.rd.path, self.choose),
            lambda fresh: run_phase(sweep, Plan(sweep.plan.experiment, fresh, []), session, console, phase="confirm"),
            console,
        )
        return done


def _rounds(
    plan_round: Callable[[], ConfirmPlan],
    run_points: Callable[[list[PlannedPoint]], SweepRun | None],
    console: Console,
) -> tuple[ConfirmPlan, SweepRun | None]:
    """Confirmation rounds until nothing new is to confirm: each round's plan (``plan_round``, read
    from what the earlier rounds recorded: a confirmation that fell short gives its revision, up to
    ``policy.revise``) announced, and its points not yet run run (``run_points``). Returns every
    round's plan as one and what the last round ran."""
    plans: list[ConfirmPlan] = []
    done: SweepRun | None = None
    seen: set[str] = set()
    for _ in range(_MAX_ROUNDS):
        cp = plan_round()
        fresh = [pp for pp in cp.points if pp.id not in seen]
        if plans and not fresh:  # nothing new: every round's point ran (or failed: not again)
            break
        plans.append(cp)
        announce(cp, console)
        if not fresh:
            break
        seen.update(pp.id for pp in fresh)
        done = run_points(fresh)
    return _merged(plans), done


def _refuse_invalid(path: Path, probes: list[PlannedPoint], points: list[PlannedPoint]) -> None:
    """Refuse (``PlanError``, exit 3, as a sweep with ``policy.confirm`` refuses its plan) where the
    launch a step group's policy could ask for (``probes``: the plan's check) or a chosen policy's
    own point (``points``) breaks SGLang's rules: nothing launched, nothing written."""
    bad = [f"  {p.label} [policy launch]: {e}" for p in probes for e in p.errors]
    bad += [f"  {p.label} [{p.id}]: {e}" for p in points for e in p.errors]
    if bad:
        raise PlanError(
            f"confirm {path}: the policy's server would fail in SGLang; nothing was launched or written:\n"
            + "\n".join(dict.fromkeys(bad)),
            fix="confirm needs the SGLang the rules above name (--speculative-adaptive: 0.5.23): measure the "
            "grid under it (server.sglang_version=0.5.23, results_dir=... a new directory) with "
            "policy.confirm=true; without it, the report still writes the policy (python -m sweep report DIR)",
        )


def run(
    plan: Plan,
    opts: RunOptions,
    choose: _Chooser,
    *,
    bench_scale: dict,
    console: Console,
    lock: dir_lock.DirLock | None = None,
) -> tuple[ConfirmPlan, SweepRun | None]:
    """The confirmation phase alone on the results directory ``opts.results_dir`` whose grid ``plan``
    is, under its lock (``lock``, held by the caller; else taken here, before anything is read or
    said: a running sweep's holder is named), its launches checked by SGLang's rules as a sweep's
    plan is (``_refuse_invalid``). Returns the confirmation plan and what ran (None when there was
    nothing to confirm)."""

    path = Path(opts.results_dir) if opts.results_dir else None
    if path is None or not path.is_dir():
        return ConfirmPlan(notes=["nothing recorded yet"]), None
    held = lock if lock is not None else dir_lock.acquire(path)
    try:
        _refuse_invalid(path, confirm_probes(plan.experiment, plan.points), [])

        def plan_round() -> ConfirmPlan:
            cp = _plan_confirmation(plan, path, choose)
            _refuse_invalid(path, [], cp.points)
            return cp

        def run_points(fresh: list[PlannedPoint]) -> SweepRun | None:
            return run_sweep(
                Plan(plan.experiment, fresh, []),
                replace(opts, part="confirm"),
                bench_scale=bench_scale,
                console=console,
                lock=held,
            )

        return _rounds(plan_round, run_points, console)
    finally:
        if lock is None:
            held.release()
