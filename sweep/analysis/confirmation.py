"""Which speculative policies to prove on a server (``policy.confirm``, ``python -m sweep confirm DIR``).

The policies come from the grid alone (``sweep.analysis.policy``; the confirmation points already
recorded are left out of the tables they are derived from, so the same grid gives the same policies,
hence the same confirmation points, and a rerun finds them recorded). The ones confirmed: the group
that holds each SLO's pick (per workload), once each; where no SLO picked a point of any group (no
SLO, or the picks are baselines or drafters with one step count), per workload the group whose step
counts are the best at the most levels; and where no such best is in a policy's group either, the
best of the policies derived (ahead of the others at the most levels). A pick that is a baseline means "no speculation": nothing to
confirm, and the notes say so.

A confirmation that revises: where a chosen policy's own server was measured and fell short
(``policy.settle``: short of the best static setup, or of the envelope where it is a step count,
beyond noise; or below the envelope at most levels together), its revision is what to confirm next
(``<step axis>=adaptive-r2``...), up to the experiment's ``policy.revise`` rounds; a policy whose last
round was measured is done (the report's Deploy section names the winner by measurement).

Pure over the results tables (``sweep.results.load``); the points themselves are built by the plan
(``sweep.experiment.plan.confirmation_points``) and run by ``sweep.orchestrate.confirm``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from sweep.analysis import policy, realspeed, speedups
from sweep.analysis.findings import analyze
from sweep.analysis.policy import is_confirmation
from sweep.analysis.slo import from_experiment
from sweep.results import load, read_experiment

if TYPE_CHECKING:  # for the annotations only: policy and findings import the analysis this module is part of
    from sweep.analysis.findings import Findings
    from sweep.analysis.policy import Policy


@dataclass(frozen=True)
class Chosen:
    """A policy to confirm (``sweep.analysis.policy.Policy``) and why: the SLOs whose pick is in its
    group, or "best at N of M levels"."""

    policy: Policy
    why: tuple[str, ...]


def _without_confirmations(tables: dict[str, pl.LazyFrame]) -> dict[str, pl.LazyFrame]:
    """The tables without the confirmation points (a policy is derived from the grid alone)."""

    points = tables["points"].collect()
    drop = [r["point_id"] for r in points.iter_rows(named=True) if is_confirmation(r)]
    if not drop:
        return tables
    return {
        name: frame.filter(~pl.col("point_id").is_in(drop)) if "point_id" in frame.collect_schema().names() else frame
        for name, frame in tables.items()
    }


def derive(tables: dict[str, pl.LazyFrame], slos: list, candidates: str = "one") -> tuple[list, Findings]:
    """The policies of the grid in ``tables`` (confirmation points left out) and its findings (the
    SLO picks, the best per level), judged by ``slos``; ``candidates``: ``policy.candidates``."""

    tables = _without_confirmations(tables)
    f = analyze(tables, slos=slos, policy_candidates=candidates)
    found = getattr(f, "policies", None)  # the report's own, where the findings carry them
    if found is None:
        real, _ = realspeed.at_real_speed(tables)
        found = policy.from_tables(real, level_noise=f.level_noise, candidates=candidates)
    return found, f


def _with_confirmations(policies: list, tables: dict[str, pl.LazyFrame]) -> list:
    """The grid's policies with the confirmation points recorded for their groups (ids and configs)."""
    points = tables["points"].collect()
    groups, _ = policy.groups(points)
    by = {(policy.group_name(g), g.step_axis): g for g in groups}
    out = []
    for p in policies:
        g = by.get((p.group, p.step_axis))
        if g is None or not g.confirmations:
            out.append(p)
            continue
        out.append(replace(p, confirmation_ids=tuple(g.confirmations), confirmation_configs=dict(g.configs)))
    return out


def _settled(tables: dict[str, pl.LazyFrame], policies: list, level_noise: float | None, rounds: int) -> list[list]:
    """Per policy, its confirmation rounds as recorded in ``tables`` (``policy.settle``, at most ``rounds``
    revisions), the figures at real speed as the report reads them."""
    real, _ = realspeed.at_real_speed(tables)
    levels = speedups.level_speedups(real, level_noise=level_noise)
    samples = speedups.level_samples(real)
    return [
        policy.settle(p, levels, samples=samples, level_noise=level_noise, rounds=rounds)
        for p in _with_confirmations(policies, tables)
    ]


def choose(policies: list[Policy], findings: Findings) -> tuple[list[Chosen], list[str]]:
    """The policies to confirm (see the module docstring), and notes on the picks no policy holds."""
    member = {pid: i for i, p in enumerate(policies) for pid in (*p.member_ids, *getattr(p, "confirmation_ids", ()))}
    why: dict[int, list[str]] = {}
    notes: list[str] = []
    table = findings.slo_table
    picks = table.filter((pl.col("rank") == 1) & (pl.col("tok_s_gpu") > 0)) if not table.is_empty() else table
    for r in picks.iter_rows(named=True) if not picks.is_empty() else ():
        where = f"SLO {r['slo']}" + (f" ({r['workload']})" if r.get("workload") else "")
        i = member.get(r["point_id"])
        if i is None:
            notes.append(
                f"{where}: its pick {r['label']} is "
                + (
                    "a baseline: the answer is no speculation, no policy to confirm"
                    if r["baseline"]
                    else "in no policy's group (its group got none, or it is its drafter's only step "
                    "count): no policy to confirm"
                )
            )
            continue
        why.setdefault(i, []).append(where)
    if not why:  # no SLO, or none picked a policy's point: the best group of each workload
        best = findings.best
        counts: dict[str, dict[int, int]] = {}
        levels: dict[str, int] = {}
        for r in best.iter_rows(named=True) if not best.is_empty() else ():
            w = r.get("workload") or ""
            levels[w] = levels.get(w, 0) + 1
            i = member.get(r["point_id"])
            if i is not None:
                mine = counts.setdefault(w, {})
                mine[i] = mine.get(i, 0) + 1
        for w, mine in counts.items():
            i = max(mine, key=lambda k: (mine[k], -k))
            why.setdefault(i, []).append(f"best at {mine[i]} of {levels[w]} levels" + (f" ({w})" if w else ""))
    if not why and policies:  # no pick in any policy's group: the best of the policies there are
        for i, (won, total) in _best_policies(policies).items():
            why.setdefault(i, []).append(
                f"the best policy derived: ahead of the other policies at {won} of {total} "
                "levels (no pick of an SLO or of a level is in a policy's group)"
            )
    return [Chosen(policies[i], tuple(w)) for i, w in sorted(why.items())], notes


def _best_policies(policies: list) -> dict[int, tuple[int, int]]:
    """Per workload, the policy whose figure (``Level.policy_tok_s``) is the highest of the policies'
    at the most levels (a tie: the higher mean): {index: (levels won, levels)}."""
    by_workload: dict[str, list[int]] = {}
    for i, p in enumerate(policies):
        by_workload.setdefault(getattr(p, "workload", "") or "", []).append(i)
    out: dict[int, tuple[int, int]] = {}
    for members in by_workload.values():
        at: dict[int, dict[int, float]] = {}
        for i in members:
            for lv in getattr(policies[i], "levels", ()):
                if lv.policy_tok_s is not None:
                    at.setdefault(lv.concurrency, {})[i] = lv.policy_tok_s
        if not at:  # nothing measured to rank them by
            continue
        won = {i: 0 for i in members}
        for figures in at.values():
            won[max(figures, key=lambda k: figures[k])] += 1

        def mean(i: int) -> float:
            values = [lv.policy_tok_s for lv in getattr(policies[i], "levels", ()) if lv.policy_tok_s is not None]
            return sum(values) / len(values) if values else 0.0

        best = max(members, key=lambda i: (won[i], mean(i), -i))
        out[best] = (won[best], len(at))
    return out


def to_confirm(path: str | Path) -> tuple[list[Chosen], list[str], dict[str, str]]:
    """For the results directory ``path``: the policies to confirm, notes (the groups that got no
    policy, the picks no policy holds), and the recorded label of every point id (a plan rebuilt from
    the directory finds a group's members by it)."""

    tables = load(path)
    candidates, rounds = settings(path)
    policies, findings = derive(tables, from_experiment(path), candidates)
    chosen, notes = choose(policies, findings)
    notes = list(getattr(policies, "notes", [])) + notes
    chosen, more = _next_rounds(chosen, tables, policies, findings.level_noise, rounds)
    notes += more
    if not policies:
        notes.append("no policy: no group of step counts was measured, or the baseline wins at every level")
    labels = {
        r["point_id"]: r["label"] for r in tables["points"].select("point_id", "label").collect().iter_rows(named=True)
    }
    return chosen, notes, labels


def settings(path: str | Path) -> tuple[str, int]:
    """The experiment's ``policy.candidates`` and ``policy.revise`` (defaults where not given or unreadable)."""
    experiment = read_experiment(path)
    section = experiment.get("policy")
    section = section if isinstance(section, dict) else {}
    try:
        rounds = int(section.get("revise", 2))
    except (TypeError, ValueError):
        rounds = 2
    return policy.candidates_of(experiment), max(0, rounds)


def _next_rounds(
    chosen: list[Chosen], tables: dict[str, pl.LazyFrame], policies: list, level_noise: float | None, rounds: int
) -> tuple[list[Chosen], list[str]]:
    """Each chosen policy replaced by the round to confirm next: itself where its own server was never
    measured, its revision where that one fell short (``policy.settle``); none where its last round was
    measured (the notes say how it did)."""
    if not chosen:
        return chosen, []
    index = {id(p): i for i, p in enumerate(policies)}
    all_rounds = _settled(tables, list(policies), level_noise, rounds)
    out, notes = [], []
    for c in chosen:
        i = index.get(id(c.policy))
        if i is None:
            out.append(c)
            continue
        last = all_rounds[i][-1]
        if last.table.is_empty():
            why = c.why if last.policy.revision <= 1 else (*c.why, *last.policy.revised[-1:])
            out.append(Chosen(last.policy, tuple(why)))
            continue
        v = last.verdict
        notes.append(
            f"{c.policy.group}: confirmed ({len(all_rounds[i])} round{'s' if len(all_rounds[i]) > 1 else ''}): "
            + (
                "within noise of the best measured at every level"
                if v.winner == "policy"
                else f"short; the answer by measurement is the {'best static setup' if v.winner == 'static' else 'plain table'}"
                + (" (revisions spent)" if last.policy.revision > rounds else "")
            )
        )
    return out, notes
