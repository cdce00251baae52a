"""The confirmation phase: the policy proven on a server, not only derived.

After the grid (``policy.confirm`` in the experiment) or on an existing results directory
(``python -m sweep confirm DIR``): the speculative policies are derived from what the grid measured
(``sweep.analysis.policy.derive``: one per group of points that differ only in their step count),
the ones to confirm are chosen (the group that holds each SLO's pick; without an SLO, the group whose
step counts are the best at most levels; once each), and each becomes one ordinary point of the
sweep (``sweep.experiment.plan.confirmation_point``: a member's flags with its static chain replaced
by the policy's launch flags, the step axis valued ``adaptive``, the same baseline, levels and
workload). Those points then run as any other: resumed (a recorded one is not run again), selected by
``--only``, a failure recorded as data. Confirmation points never feed the policies they confirm:
they are left out of the tables the policies are derived from, so the same grid derives the same
policies, the same confirmation point ids, and a rerun finds them recorded.

``decide`` (the re-measurement of undecided picks) is another phase after the grid; each is a small
function of its own here, run one after the other by ``sweep.api``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from sweep.experiment.plan import Plan, PlannedPoint, confirmation_point, target_of

if TYPE_CHECKING:
    from rich.console import Console

    from sweep.orchestrate.sweep import Prepared, RunOptions, Session, SweepRun


@dataclass(frozen=True)
class Chosen:
    """A policy to confirm and why (the SLOs whose pick is in its group, or "best at N of M levels")."""

    policy: Any  # sweep.analysis.policy.Policy
    why: tuple[str, ...]


@dataclass
class ConfirmPlan:
    """What the confirmation phase runs: its points (valid or not: an invalid one is recorded as
    such), the policies they confirm (by point id) and notes on what is not confirmed, and why."""

    points: list[PlannedPoint] = field(default_factory=list)
    chosen: dict[str, Chosen] = field(default_factory=dict)  # point id -> the policy it runs
    notes: list[str] = field(default_factory=list)


def _without_confirmations(tables: dict[str, pl.LazyFrame]) -> dict[str, pl.LazyFrame]:
    """The tables without the confirmation points (a policy is derived from the grid alone)."""
    from sweep.analysis.policy import is_confirmation

    points = tables["points"].collect()
    drop = [r["point_id"] for r in points.iter_rows(named=True) if is_confirmation(r)]
    if not drop:
        return tables
    return {name: frame.filter(~pl.col("point_id").is_in(drop)) for name, frame in tables.items()}


def derive(path: str | Path, slos: list | None = None) -> tuple[list, Any]:
    """The policies of a results directory's grid, and its findings (the SLO picks, the best per
    level): ``slos`` as given, else the experiment's ``benchmark.slo``."""
    from sweep.analysis import analyze, policy, realspeed
    from sweep.analysis.slo import from_experiment
    from sweep.results import load

    tables = _without_confirmations(load(path))
    f = analyze(tables, slos=from_experiment(path) if slos is None else slos)
    found = getattr(f, "policies", None)  # the report's own, where the findings carry them
    if found is None:
        real, _ = realspeed.at_real_speed(tables)
        found = policy.from_tables(real, level_noise=f.level_noise)
    return found, f


def choose(policies: list, findings: Any) -> tuple[list[Chosen], list[str]]:
    """The policies to confirm: the group of each SLO's pick (per workload), once each; without an
    SLO (or no pick in any group), per workload the group whose step counts are the best at the most
    levels. And notes on the picks no policy holds (a baseline: the answer is no speculation; a
    drafter with one step count)."""
    member = {pid: i for i, p in enumerate(policies) for pid in (*p.member_ids, *getattr(p, "confirmation_ids", ()))}
    why: dict[int, list[str]] = {}
    notes: list[str] = []
    table = findings.slo_table
    picks = (table.filter((pl.col("rank") == 1) & (pl.col("tok_s_gpu") > 0)) if not table.is_empty() else table)
    for r in picks.iter_rows(named=True) if not picks.is_empty() else ():
        where = f"SLO {r['slo']}" + (f" ({r['workload']})" if r.get("workload") else "")
        i = member.get(r["point_id"])
        if i is None:
            notes.append(f"{where}: its pick {r['label']} is "
                         + ("a baseline: the answer is no speculation, no policy to confirm" if r["baseline"]
                            else "in no group of step counts: no policy to confirm"))
            continue
        why.setdefault(i, []).append(where)
    if not why:  # no SLO, or none picked a policy's point: the best group of each workload
        best = findings.best
        by_workload: dict[str, dict[int, int]] = {}
        levels: dict[str, int] = {}
        for r in best.iter_rows(named=True) if not best.is_empty() else ():
            w = r.get("workload") or ""
            levels[w] = levels.get(w, 0) + 1
            i = member.get(r["point_id"])
            if i is not None:
                by_workload.setdefault(w, {})[i] = by_workload.setdefault(w, {}).get(i, 0) + 1
        for w, counts in by_workload.items():
            i = max(counts, key=lambda k: (counts[k], -k))
            why.setdefault(i, []).append(f"best at {counts[i]} of {levels[w]} levels" + (f" ({w})" if w else ""))
    return [Chosen(policies[i], tuple(w)) for i, w in sorted(why.items())], notes


def points_for(plan: Plan, chosen: list[Chosen], labels: dict[str, str] | None = None) -> ConfirmPlan:
    """The confirmation point of each chosen policy (pure): built on a member of its group found in
    ``plan`` by id, else by label (``labels``: the recorded label of each member id, for a plan rebuilt
    from a results directory, whose ids can differ where a secret was redacted)."""
    exp = plan.experiment
    by_id = {p.id: p for p in plan.points}
    by_label = {p.label: p for p in plan.points}
    target, _ = target_of(exp, [p.flags for p in plan.points])
    out = ConfirmPlan()
    for c in chosen:
        pol = c.policy
        found = [by_id.get(i) or by_label.get((labels or {}).get(i, "")) for i in pol.member_ids]
        members = [m for m in found if m is not None]
        if not members:
            out.notes.append(f"{pol.group}: none of its points is in the experiment's plan any more: not confirmed")
            continue
        pp = confirmation_point(exp, members[0], pol.step_axis, pol.launch_flags(), target)
        if pp.id in out.chosen:
            continue
        out.points.append(pp)
        out.chosen[pp.id] = c
    return out


def plan_confirmation(plan: Plan, path: str | Path) -> ConfirmPlan:
    """The confirmation points of the grid recorded in ``path`` (policies derived, chosen, built)."""
    from sweep.results import load

    policies, findings = derive(path)
    chosen, notes = choose(policies, findings)
    labels = {r["point_id"]: r["label"] for r in load(path)["points"].select("point_id", "label").collect().iter_rows(named=True)}
    cp = points_for(plan, chosen, labels)
    cp.notes = list(getattr(policies, "notes", [])) + notes + cp.notes
    if not policies:
        cp.notes.append("no policy: no group of step counts measured, or the baseline wins at every level")
    return cp


def _announce(cp: ConfirmPlan, console: Console) -> None:
    from rich.markup import escape

    for note in cp.notes:
        console.print(escape(f"confirm: {note}"), soft_wrap=True)
    if not cp.points:
        console.print("confirm: no policy to confirm", soft_wrap=True)
    for pp in cp.points:
        c = cp.chosen[pp.id]
        console.print(escape(f"confirm: {pp.label} [{pp.id}] runs the policy of {c.policy.group} ({'; '.join(c.why)})"),
                      soft_wrap=True)


class Phase:
    """The confirmation as a phase after the grid (``run_sweep(..., after=[Phase()])``): on the grid's
    directory, lock and cluster session. ``planned``: its confirmation plan, once it ran."""

    def __init__(self) -> None:
        self.planned: ConfirmPlan | None = None

    def __call__(self, sweep: Prepared, session: Session, console: Console) -> SweepRun | None:
        from sweep.orchestrate.sweep import run_phase

        self.planned = cp = plan_confirmation(sweep.plan, sweep.rd.path)
        _announce(cp, console)
        if not cp.points:
            return None
        return run_phase(sweep, Plan(sweep.plan.experiment, cp.points, []), session, console, phase="confirm")


def run(plan: Plan, opts: RunOptions, *, bench_scale: dict, console: Console) -> tuple[ConfirmPlan, SweepRun | None]:
    """The confirmation phase alone (``python -m sweep confirm DIR``) on the results directory
    ``opts.results_dir`` whose grid ``plan`` is: its points planned from what the grid recorded there
    and run as ordinary points of that sweep (resume, ``--only``, failures as data). Returns the
    confirmation plan and what ran (None when there was nothing to confirm)."""
    from dataclasses import replace

    from sweep.orchestrate.sweep import run_sweep

    path = Path(opts.results_dir) if opts.results_dir else None
    if path is None or not path.is_dir():
        return ConfirmPlan(notes=["nothing recorded yet"]), None
    cp = plan_confirmation(plan, path)
    _announce(cp, console)
    if not cp.points:
        return cp, None
    done = run_sweep(Plan(plan.experiment, cp.points, []), replace(opts, phase="confirm"), bench_scale=bench_scale,
                     console=console)
    return cp, done
