"""Decisions that decide (``decide``): which picks are within noise, what to measure next for them,
and when each ends. Pure: the driver (``sweep.orchestrate.decide``) measures and tells it the figures.

A **decision** is a pick the report makes between two candidates whose margin's interval contains 0:

- an SLO's pick against its runner-up (``slo_noise.margins``): deciding levels, for each candidate,
  the levels its throughput under the SLO is read from (the highest level meeting it, and the first
  missing it where the boundary lies between two);
- a level's best against the second (``speedups.best_per_level``): the level itself;
- a pair a caller asks about (:func:`pair_decision`: two point ids and a level; the policy's tier
  candidates): the same rule as a level's best.

Each round the driver measures every open decision's deciding levels once more (both candidates, a
relaunch each, or one launch for points of the same launch) and recomputes the analysis over all the
measurements pooled (``sweep.analysis.repeats``): the margin's interval narrows as the repeats
average the level-wide noise out. A decision ends, by :func:`judge`:

- **decided**: the interval excludes 0 (the one ahead now is the pick, which may have changed);
- **equal**: the interval lies within +-``margin`` (``decide.margin``): either will do;
- **budget**: the budget ran out first: ``decide.budget_s`` / ``budget_share`` of the grid's host
  time (:func:`plan_round` keeps a round within what is left), or a candidate's level was measured
  ``max_repeats`` times.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import polars as pl

from sweep.analysis import analyze, realspeed, speedups
from sweep.core import slo_rule

DECIDED, EQUAL, BUDGET = "decided", "equal", "budget"
OUTCOMES = (DECIDED, EQUAL, BUDGET)


@dataclass(frozen=True)
class _Candidate:
    point_id: str
    label: str
    levels: tuple[int, ...]  # its deciding levels (concurrency)


@dataclass(frozen=True)
class Decision:
    """One pick between two candidates, as the analysis sees it now: the margin of ``pick`` over
    ``other`` (pick / other - 1, from every measurement pooled) and its interval."""

    key: str  # what is being decided, stable while the candidates change: slo:NAME@W, level:C=N@W, pair:A|B@C=N
    kind: str  # slo | level | pair
    subject: str  # in words
    workload: str
    pick: _Candidate
    other: _Candidate
    margin: float | None
    low: float | None
    high: float | None

    @property
    def points(self) -> tuple[str, str]:
        return self.pick.point_id, self.other.point_id

    def wanted(self) -> list[tuple[str, int]]:
        """(point, level) of the measurements one more round of this decision takes."""
        return [(c.point_id, lv) for c in (self.pick, self.other) for lv in c.levels]


def judge(low: float | None, high: float | None, margin: float) -> str | None:
    """How the interval [low, high] of a margin (pick / other - 1) ends a decision: ``decided`` when it
    excludes 0, ``equal`` when it lies within +-``margin``, None while it is open (or has no interval)."""
    if (
        low is None
        or high is None
        or (isinstance(low, float) and math.isnan(low))
        or (isinstance(high, float) and math.isnan(high))
    ):
        return None
    if low > 0 or high < 0:
        return DECIDED
    if low >= -margin and high <= margin:
        return EQUAL
    return None


def _suffix(workload: str) -> str:
    return f"@{workload}" if workload else ""


def _slo_decisions(slo_table: pl.DataFrame) -> list[Decision]:
    """Each SLO's pick against its runner-up, per workload, where both meet the SLO somewhere and the
    margin has an interval (``slo_noise.margins``'s ``margin_low``/``margin_high``)."""
    out: list[Decision] = []
    if slo_table.is_empty() or "margin_low" not in slo_table.columns:
        return out
    for (slo, workload), g in slo_table.group_by("slo", "workload", maintain_order=True):
        g = g.sort("rank")
        if g.height < 2 or not g["tok_s_gpu"][0] or not g["tok_s_gpu"][1]:
            continue
        best, runner = g.row(0, named=True), g.row(1, named=True)
        if best.get("margin_low") is None or best.get("margin_high") is None:
            continue

        def cand(r: dict) -> _Candidate:
            levels = tuple(sorted({int(c) for c in (r.get("last_met"), r.get("first_missed")) if c is not None}))
            return _Candidate(r["point_id"], r.get("setup") or r["label"], levels)

        out.append(
            Decision(
                f"slo:{slo}{_suffix(str(workload or ''))}",
                "slo",
                f"SLO {slo}",
                str(workload or ""),
                cand(best),
                cand(runner),
                best.get("margin"),
                best["margin_low"],
                best["margin_high"],
            )
        )
    return out


def _level_decisions(best: pl.DataFrame) -> list[Decision]:
    """Each level's best against the second (``speedups.best_per_level``), where the margin has an
    interval."""
    out: list[Decision] = []
    if best.is_empty() or "margin_low" not in best.columns:
        return out
    for r in best.iter_rows(named=True):
        if r.get("runner_up_id") is None or r.get("margin_low") is None or r.get("margin_high") is None:
            continue
        c, w = int(r["concurrency"]), str(r.get("workload") or "")
        out.append(
            Decision(
                f"level:C={c}{_suffix(w)}",
                "level",
                f"the best at C={c}",
                w,
                _Candidate(r["point_id"], r["label"], (c,)),
                _Candidate(r["runner_up_id"], r["runner_up"], (c,)),
                r.get("margin"),
                r["margin_low"],
                r["margin_high"],
            )
        )
    return out


def pair_key(a: str, b: str, level: int) -> str:
    first, second = sorted((a, b))
    return f"pair:{first}|{second}@C={level}"


def pair_decision(
    levels: pl.DataFrame,
    a: str,
    b: str,
    level: int,
    *,
    samples: pl.LazyFrame | None,
    level_noise: float | None,
    subject: str | None = None,
) -> Decision | None:
    """The hook for a decision between two given points at one level (a policy tier's candidates):
    ``levels`` is ``speedups.level_speedups`` (``Findings.levels``), ``samples`` its per-request
    samples (``speedups.level_samples``); the margin and its interval by the rule of a level's best
    (``speedups.best_per_level`` on the two). None where either was not measured at that level."""
    two = levels.filter(pl.col("point_id").is_in([a, b]) & (pl.col("concurrency") == level))
    if two.select("point_id").n_unique() < 2:
        return None
    two = two.with_columns(workload=pl.lit(""))  # one comparison, whatever workloads the points are of
    row = speedups.best_per_level(two, samples=samples, level_noise=level_noise).row(0, named=True)
    return Decision(
        pair_key(a, b, level),
        "pair",
        subject or f"{row['label']} or {row['runner_up']} at C={level}",
        "",
        _Candidate(row["point_id"], row["label"], (level,)),
        _Candidate(row["runner_up_id"], row["runner_up"], (level,)),
        row.get("margin"),
        row.get("margin_low"),
        row.get("margin_high"),
    )


def _assess(
    slo_table: pl.DataFrame,
    best: pl.DataFrame,
    levels: pl.DataFrame | None = None,
    pairs: Iterable[tuple[str, str, int]] = (),
    *,
    samples: pl.LazyFrame | None = None,
    level_noise: float | None = None,
) -> dict[str, Decision]:
    """Every decision the analysis has an interval for, by key: the SLO picks first, then each level's
    best, then the ``pairs`` asked for (point, point, level)."""
    found = [*_slo_decisions(slo_table), *_level_decisions(best)]
    if levels is not None:
        found += [
            d
            for a, b, c in pairs
            if (d := pair_decision(levels, a, b, c, samples=samples, level_noise=level_noise)) is not None
        ]
    return {d.key: d for d in found}


@dataclass
class Tracked:
    """A decision ``decide`` took on: as it was first (within noise), as it is now, and how it ended."""

    first: Decision
    now: Decision
    outcome: str | None = None
    detail: str = ""
    rounds: int = 0

    @property
    def open(self) -> bool:
        return self.outcome is None


def take_on(decisions: Mapping[str, Decision], margin: float) -> dict[str, Tracked]:
    """The decisions within noise: neither decided nor equal already (those need no measurement)."""
    return {k: Tracked(d, d) for k, d in decisions.items() if judge(d.low, d.high, margin) is None}


def update(tracked: Mapping[str, Tracked], decisions: Mapping[str, Decision], margin: float) -> None:
    """After a round: each open decision as the analysis sees it now, ended where it is decided or
    equal. A decision the analysis no longer has an interval for (a candidate failed on its relaunch)
    keeps its last figures."""
    for key, t in tracked.items():
        if not t.open or key not in decisions:
            continue
        t.now = decisions[key]
        verdict = judge(t.now.low, t.now.high, margin)
        if verdict is not None:
            t.outcome = verdict
            changed = t.now.pick.point_id != t.first.pick.point_id
            t.detail = (
                (
                    f"the pick changed: {t.now.pick.label} is ahead of {t.first.pick.label}"
                    if changed
                    else f"{t.now.pick.label} is ahead"
                )
                if verdict == DECIDED
                else f"within +-{margin:.0%}: either will do"
            )


def counts_of(levels: pl.DataFrame) -> dict[tuple[str, int], int]:
    """Measurements per (point, concurrency) in a raw ``levels`` table (the grid's and every repeat)."""
    if levels.is_empty():
        return {}
    grouped = levels.filter(pl.col("concurrency") > 0).group_by("point_id", "concurrency").agg(n=pl.len())
    return {(str(p), int(c)): int(n) for p, c, n in grouped.iter_rows()}


@dataclass(frozen=True)
class Round:
    """What one round measures: per point, the levels to measure once more (in order), and the
    decisions it serves; ``cost_s`` the host-seconds it is expected to take."""

    levels: dict[str, tuple[int, ...]] = field(default_factory=dict)
    decisions: tuple[str, ...] = ()
    cost_s: float = 0.0


def plan_round(
    tracked: Mapping[str, Tracked],
    counts: Mapping[tuple[str, int], int],
    *,
    max_repeats: int,
    left_s: float,
    cost: Mapping[str, float],
    per_level_s: Mapping[tuple[str, int], float],
) -> Round:
    """The next round: each open decision, in order (SLO picks first), gets its candidates' deciding
    levels measured once more, while the round's expected cost stays within ``left_s`` (a point's
    relaunch ``cost[point]`` once, plus ``per_level_s[(point, level)]`` per level). A decision whose
    candidate level was measured ``max_repeats`` times, or that does not fit, ends here (budget)."""
    chosen: dict[str, list[int]] = {}
    serving: list[str] = []
    spent = 0.0
    for key, t in tracked.items():
        if not t.open:
            continue
        wanted = t.now.wanted()
        full = [(p, lv) for p, lv in wanted if counts.get((p, lv), 1) >= max_repeats]
        if full:
            t.outcome, t.detail = BUDGET, f"measured {max_repeats} times (decide.max_repeats) and still within noise"
            continue
        extra = sum(cost.get(p, 0.0) for p in {p for p, _ in wanted} if p not in chosen) + sum(
            per_level_s.get((p, lv), 0.0) for p, lv in wanted if lv not in chosen.get(p, [])
        )
        if spent + extra > left_s:
            t.outcome, t.detail = BUDGET, "the time budget ran out (decide.budget_s / budget_share)"
            continue
        spent += extra
        serving.append(key)
        for p, lv in wanted:
            if lv not in chosen.setdefault(p, []):
                chosen[p].append(lv)
    return Round({p: tuple(sorted(lvs)) for p, lvs in chosen.items()}, tuple(serving), spent)


def measurements_to_decide(d: Decision, measured: int) -> int | None:
    """How many measurements of each candidate's deciding levels (the first included) would make the
    interval of ``d``'s margin exclude 0, were the margin to stay as it is and the interval to narrow
    as 1/sqrt(measurements) (the level-wide noise averaging out, as the pooled figures do); ``measured``:
    how many it has now. None where the margin is 0 or there is no interval (no measurement decides it)."""
    if d.margin is None or d.low is None or d.high is None or d.margin <= -1 or d.low <= -1:
        return None
    if d.low > 0 or d.high < 0:  # decided already
        return measured
    if math.isinf(d.high) or math.isinf(d.low):
        return None
    m = abs(math.log1p(d.margin))
    half = (math.log1p(d.high) - math.log1p(d.low)) / 2
    if m <= 0:
        return None
    if half < m:
        return measured
    return max(measured, math.ceil(measured * (half / m) ** 2 + 1e-9))


@dataclass(frozen=True)
class _Outlook:
    """Before any round: per open decision, the measurements that would decide it at the noise measured
    (``measurements_to_decide``; None: none would), and what deciding every one that can be decided
    within ``max_repeats`` would cost (host-seconds, whole rounds), against the budget."""

    needed: dict[str, int | None]
    cost_s: float
    budget_s: float
    beyond: tuple[str, ...]  # decisions that ``max_repeats`` cannot decide at the noise measured

    def lines(self, tracked: Mapping[str, Tracked]) -> list[str]:
        out = []
        if self.cost_s > self.budget_s:
            out.append(
                f"at the noise measured, deciding them takes about {self.cost_s:,.0f} host-s, over the budget of "
                f"{self.budget_s:,.0f}: the budget that would is decide.budget_s={math.ceil(self.cost_s)} "
                "(and budget_share to match); those it cannot buy end undecided (budget), the grid's pick standing"
            )
        for key in self.beyond:
            n = self.needed.get(key)
            subject = tracked[key].first.subject
            out.append(
                f"{subject}: no measurement count decides it (its margin is 0 or unbounded)"
                if n is None
                else f"{subject}: needs about {n} measurements of each level, more than decide.max_repeats"
            )
        return out


def outlook(
    tracked: Mapping[str, Tracked],
    counts: Mapping[tuple[str, int], int],
    *,
    max_repeats: int,
    budget_s: float,
    cost: Mapping[str, float],
    per_level_s: Mapping[tuple[str, int], float],
) -> _Outlook:
    """The plan before spending (:class:`_Outlook`): each open decision's measurements to decide, and the
    cost of the rounds that takes (each round: a relaunch of each candidate plus its deciding levels)."""
    needed: dict[str, int | None] = {}
    beyond: list[str] = []
    total = 0.0
    for key, t in tracked.items():
        if not t.open:
            continue
        wanted = t.now.wanted()
        have = min((counts.get(w, 1) for w in wanted), default=1)
        n = measurements_to_decide(t.now, have)
        needed[key] = n
        if n is None or n > max_repeats:
            beyond.append(key)
            continue
        per_round = sum(cost.get(p, 0.0) for p in {p for p, _ in wanted}) + sum(per_level_s.get(w, 0.0) for w in wanted)
        total += (n - have) * per_round
    return _Outlook(needed, total, budget_s, tuple(beyond))


def close(tracked: Mapping[str, Tracked], why: str) -> None:
    """End every decision still open (the budget: the sweep stopped deciding)."""
    for t in tracked.values():
        if t.open:
            t.outcome, t.detail = BUDGET, why


def rows(
    tracked: Mapping[str, Tracked],
    counts: Mapping[tuple[str, int], int],
    bench_s: Mapping[tuple[str, int], float],
    margin: float,
) -> list[dict]:
    """The decisions table's rows (``sweep.results.schema.DECISIONS_SCHEMA``)."""
    out = []
    for key, t in tracked.items():
        d, f = t.now, t.first
        levels = sorted({lv for c in (d.pick, d.other, f.pick, f.other) for lv in c.levels})

        def reps(c: _Candidate) -> int:
            return min((counts.get((c.point_id, lv), 1) for lv in c.levels), default=1)

        spent = sum(bench_s.get((c.point_id, lv), 0.0) for c in {d.pick, d.other, f.pick, f.other} for lv in c.levels)
        first = _as_pair(f, d.pick.point_id, d.other.point_id)  # the first figures of the pair named, or none
        out.append(
            {
                "decision": key,
                "kind": d.kind,
                "subject": d.subject,
                "workload": d.workload,
                "pick_id": d.pick.point_id,
                "pick_label": d.pick.label,
                "other_id": d.other.point_id,
                "other_label": d.other.label,
                "levels": levels,
                "margin_first": first[0],
                "low_first": first[1],
                "high_first": first[2],
                "margin": d.margin,
                "low": d.low,
                "high": d.high,
                "outcome": t.outcome or BUDGET,
                "detail": t.detail,
                "repeats_pick": reps(d.pick),
                "repeats_other": reps(d.other),
                "rounds": t.rounds,
                "bench_s": spent,
                "practical_margin": margin,
            }
        )
    return out


def _as_pair(d: Decision, pick: str, other: str) -> tuple[float | None, float | None, float | None]:
    """``d``'s margin and interval as the margin of ``pick`` over ``other``: as they are where ``d`` is
    of that pick and other, inverted (1 / (1 + x) - 1, the bounds swapped) where it is of the two the
    other way round, none where ``d`` is of another pair (the runner-up changed since)."""
    if (d.pick.point_id, d.other.point_id) == (pick, other):
        return d.margin, d.low, d.high
    if (d.pick.point_id, d.other.point_id) != (other, pick):
        return None, None, None

    def inv(x: float | None) -> float | None:
        return None if x is None or x <= -1 else 1 / (1 + x) - 1

    return inv(d.margin), inv(d.high), inv(d.low)


def restricted(bench, levels: Sequence[int]):
    """A point's benchmark settings measuring only ``levels`` (closed loop, in that order): no single
    stream (its warmup kept: a fresh server's first requests are slow), no refinement, no open loop."""
    return replace(
        bench,
        single_stream=replace(bench.single_stream, runs=0),
        concurrency=replace(bench.concurrency, levels=list(levels), refine=False, auto=False),
        rates=[],
        open_loop=replace(bench.open_loop, replay=False),
    )


def evaluate(
    tables: Mapping[str, pl.LazyFrame], slo_settings: Sequence = (), pairs: Sequence[tuple[str, str, int]] = ()
) -> dict[str, Decision]:
    """Every decision of a results directory's tables (every measurement pooled), as the report judges
    it: the analysis run over them (``findings.analyze``), its SLO picks (``slo_settings``: the
    experiment's ``benchmark.slo``), its best per level, and the ``pairs`` asked for."""

    f = analyze(tables, slos=[slo_rule.from_settings(s) for s in slo_settings])
    samples = speedups.level_samples(realspeed.scaled(tables)) if pairs else None
    return _assess(f.slo_table, f.best, f.levels, pairs, samples=samples, level_noise=f.level_noise)
