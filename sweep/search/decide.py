"""Decisions that decide (``decide``): which picks are within noise, what to measure next for them,
and when each ends. Pure: the driver (``sweep.orchestrate.decide``) measures and tells it the figures.

A **decision** is a pick the report makes between two candidates whose margin's interval contains 0:

- an SLO's pick against its runner-up (``slo_noise.margins``): deciding levels, for each candidate,
  the levels its throughput under the SLO is read from (the highest level meeting it, and the first
  missing it where the boundary lies between two);
- a level's best against the second (``speedups.best_per_level``): the level itself;
- a pair a caller asks about (:func:`pair_decision`: two point ids and a level; the policy's tier
  candidates): the same rule as a level's best.

Each round the driver measures every open decision's candidates again at the level each one's figure
is read at, in pairs: the decisions that share a candidate form a block (:func:`blocks`), and a block's
points run back to back on one host, in order on odd rounds and reversed on even ones (A B, then B A).
A decision is judged on its paired rounds alone (:func:`_paired_rounds`: log(pick / other) per round;
``noise.paired_ratio``: their mean and its t interval), never on the grid's figures pooled with them,
which were taken beside other launches. It ends, by :func:`judge`:

- **decided**: the interval excludes 0 (the one ahead is the pick: where that is the other, the pick
  changes; it changes nowhere else);
- **equal**: the interval lies within +-``margin`` (``decide.margin``): either will do;
- **budget**: the budget ran out first: ``decide.budget_s`` / ``budget_share`` of the grid's host
  time (:func:`plan_round` plans whole rounds of whole blocks within what is left), or it took
  ``max_repeats - 1`` rounds; the grid's pick stands. :func:`outlook` says before anything is spent
  how many rounds settling each would take at the noise the grid measured, and the budget that buys them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist

import polars as pl

from sweep.analysis import analyze, noise, realspeed, speedups
from sweep.core import slo_rule

DECIDED, EQUAL, BUDGET = "decided", "equal", "budget"
OUTCOMES = (DECIDED, EQUAL, BUDGET)


@dataclass(frozen=True)
class _Candidate:
    point_id: str
    label: str
    levels: tuple[int, ...]  # its deciding levels (concurrency)
    read: int = 0  # the level its figure is read at (an SLO's: the highest meeting it), measured in pairs

    @property
    def at(self) -> int:
        return self.read or (self.levels[0] if self.levels else 0)


@dataclass(frozen=True)
class Decision:
    """One pick between two candidates: the margin of ``pick`` over ``other`` (pick / other - 1) and its
    interval, as the grid measured them (:func:`evaluate`) or as its paired rounds do (:func:`paired`)."""

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
        """(point, level) of the measurements one more round of this decision takes: each candidate at
        the level its figure is read at."""
        return list(dict.fromkeys((c.point_id, c.at) for c in (self.pick, self.other)))

    def swapped(self) -> Decision:
        """The same decision with the other candidate as the pick (the margin inverted)."""
        inv = lambda x: None if x is None or x <= -1 else 1 / (1 + x) - 1  # noqa: E731
        return replace(
            self, pick=self.other, other=self.pick, margin=inv(self.margin), low=inv(self.high), high=inv(self.low)
        )


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
            read = int(r["last_met"]) if r.get("last_met") is not None else (levels[0] if levels else 0)
            return _Candidate(r["point_id"], r.get("setup") or r["label"], levels, read)

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
                _Candidate(r["point_id"], r["label"], (c,), c),
                _Candidate(r["runner_up_id"], r["runner_up"], (c,), c),
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
        _Candidate(row["point_id"], row["label"], (level,), level),
        _Candidate(row["runner_up_id"], row["runner_up"], (level,), level),
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
    pairs: int = 0  # paired rounds judged (both candidates measured in the same round)

    @property
    def open(self) -> bool:
        return self.outcome is None


def take_on(decisions: Mapping[str, Decision], margin: float) -> dict[str, Tracked]:
    """The decisions within noise: neither decided nor equal already (those need no measurement)."""
    return {k: Tracked(d, d) for k, d in decisions.items() if judge(d.low, d.high, margin) is None}


def _paired_rounds(levels: pl.DataFrame, d: Decision, gpus: Mapping[str, float] | None = None) -> list[float]:
    """log(pick / other) of every paired round of ``d``: ``levels`` is the raw ``levels`` table (every
    measurement), of which the rows with a ``decide_round`` are decide's; a round pairs the two
    candidates' figures at their read levels measured in it (output throughput per GPU, ``gpus``: a
    point's GPU count, 1 where not given; the mean over a launch's back-to-back repeats). The grid's
    figures never enter: they were taken beside other launches, under other load."""
    if levels.is_empty() or "decide_round" not in levels.columns:
        return []
    gpus = gpus or {}
    sides = []
    for c in (d.pick, d.other):
        mine = (
            levels.filter(
                (pl.col("point_id") == c.point_id)
                & (pl.col("concurrency") == c.at)
                & pl.col("decide_round").is_not_null()
                & (pl.col("output_throughput") > 0)
            )
            .group_by("decide_round")
            .agg(v=pl.col("output_throughput").log().mean())
        )
        sides.append({int(r): float(v) - math.log(gpus.get(c.point_id) or 1.0) for r, v in mine.iter_rows()})
    a, b = sides
    return [a[r] - b[r] for r in sorted(a.keys() & b.keys())]


def _comparison(d: Decision) -> frozenset[tuple[str, int]]:
    """What ``d`` compares, whichever way round: (point, level) of each candidate."""
    return frozenset(((d.pick.point_id, d.pick.at), (d.other.point_id, d.other.at)))


def paired(d: Decision, log_ratios: Sequence[float], pooled: tuple[float, int] | None = None) -> Decision:
    """``d`` with its margin and interval from its paired rounds (``noise.paired_ratio``: the mean log
    ratio, the t interval of the pairs' spread, ``pooled`` where given); as it was (the grid's figures)
    under two rounds."""
    judged = noise.paired_ratio(list(log_ratios), pooled=pooled)
    if judged is None:
        return d
    ratio, low, high = judged
    return replace(d, margin=ratio - 1, low=low - 1, high=high - 1)


def update(
    tracked: Mapping[str, Tracked],
    levels: pl.DataFrame,
    margin: float,
    *,
    gpus: Mapping[str, float] | None = None,
) -> None:
    """After a round: each open decision judged on its paired rounds alone (:func:`_paired_rounds`),
    ended where decided (the interval excludes 0) or equal (within +-``margin``). The pick changes only
    where the decision is decided the other way: an open or undecided one keeps the grid's pick.

    The noise of a pair is the spread of every decision's paired log ratios about its own mean, pooled
    (``noise.pooled_spread``): the decisions of one decide phase are measured the same way, on the
    same hosts, in the same rounds, and two or three rounds of one pair alone say little of it (a t
    interval on one degree of freedom is 12.7 SDs wide); the pooled one has as many degrees of freedom
    as the decisions have rounds beyond their first."""
    ratios_of = {key: _paired_rounds(levels, t.first, gpus) for key, t in tracked.items()}
    # each comparison once: an SLO's pick and a level's best may compare the same two at the same levels
    same = {_comparison(t.first): key for key, t in tracked.items()}
    pooled = noise.pooled_spread([ratios_of[key] for key in same.values()])
    for key, t in tracked.items():
        if not t.open:
            continue
        ratios = ratios_of[key]
        t.pairs = len(ratios)
        if len(ratios) < 2:
            continue
        now = paired(t.first, ratios, pooled)
        verdict = judge(now.low, now.high, margin)
        changed = verdict == DECIDED and now.margin is not None and now.margin < 0
        t.now = now.swapped() if changed else now
        if verdict is None:
            continue
        t.outcome = verdict
        t.detail = (
            (
                f"the pick changed: {t.now.pick.label} is ahead of {t.first.pick.label}"
                if changed
                else f"{t.now.pick.label} is ahead"
            )
            + f" ({len(ratios)} paired rounds)"
            if verdict == DECIDED
            else f"within +-{margin:.0%}: either will do ({len(ratios)} paired rounds)"
        )


def counts_of(levels: pl.DataFrame) -> dict[tuple[str, int], int]:
    """Measurements per (point, concurrency) in a raw ``levels`` table (the grid's and every repeat)."""
    if levels.is_empty():
        return {}
    grouped = levels.filter(pl.col("concurrency") > 0).group_by("point_id", "concurrency").agg(n=pl.len())
    return {(str(p), int(c)): int(n) for p, c, n in grouped.iter_rows()}


def blocks(tracked: Mapping[str, Tracked]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The open decisions in blocks that share a candidate (transitively), in order (SLO picks first),
    each as (its decisions' keys, its points in the order they are first named): a block's points are
    measured back to back on one host each round, so that every pair in it is a pair."""
    out: list[tuple[list[str], list[str]]] = []
    for key, t in tracked.items():
        if not t.open:
            continue
        mine = [p for p, _ in t.first.wanted()]
        joined = [b for b in out if set(b[1]) & set(mine)]
        keys: list[str] = []
        points: list[str] = []
        for b in joined:  # in their order: the earliest block's place is the merged one's
            keys, points = [*keys, *b[0]], [*points, *b[1]]
        at = out.index(joined[0]) if joined else len(out)
        out = [b for b in out if b not in joined]
        out.insert(at, ([*keys, key], list(dict.fromkeys([*points, *mine]))))
    return [(tuple(k), tuple(p)) for k, p in out]


@dataclass(frozen=True)
class Round:
    """What one round measures: per point, the levels to measure once more, the decisions it serves,
    the blocks (points in their order this round: forward on odd rounds, reversed on even ones, so
    that over two rounds each pair runs A B B A) and ``cost_s``, the host-seconds it is expected to take."""

    levels: dict[str, tuple[int, ...]] = field(default_factory=dict)
    decisions: tuple[str, ...] = ()
    cost_s: float = 0.0
    sequences: tuple[tuple[str, ...], ...] = ()


def _block_cost(
    tracked: Mapping[str, Tracked], keys: Sequence[str], cost: Mapping[str, float], per_level_s: Mapping
) -> tuple[dict[str, list[int]], float]:
    wanted: dict[str, list[int]] = {}
    for k in keys:
        for p, lv in tracked[k].first.wanted():
            if lv not in wanted.setdefault(p, []):
                wanted[p].append(lv)
    return wanted, sum(cost.get(p, 0.0) for p in wanted) + sum(
        per_level_s.get((p, lv), 0.0) for p, lvs in wanted.items() for lv in lvs
    )


def plan_round(
    tracked: Mapping[str, Tracked],
    *,
    round_no: int,
    max_rounds: int,
    left_s: float,
    cost: Mapping[str, float],
    per_level_s: Mapping[tuple[str, int], float],
) -> Round:
    """The next round (``round_no``, from 1): every block of open decisions (:func:`blocks`), in order,
    gets its candidates' read levels measured once more, back to back, while the round's expected cost
    stays within ``left_s`` (each point's relaunch ``cost[point]``, plus ``per_level_s[(point, level)]``
    per level). A decision that took ``max_rounds`` rounds, or whose block does not fit, ends here
    (budget): an undecided decision leaves the grid's pick."""
    for t in tracked.values():
        if t.open and t.rounds >= max_rounds:
            t.outcome, t.detail = (
                BUDGET,
                f"{t.rounds} paired rounds (decide.max_repeats) and still within noise: the grid's pick stands",
            )
    chosen: dict[str, tuple[int, ...]] = {}
    serving: list[str] = []
    sequences: list[tuple[str, ...]] = []
    spent = 0.0
    for keys, points in blocks(tracked):
        wanted, extra = _block_cost(tracked, keys, cost, per_level_s)
        if spent + extra > left_s:
            for k in keys:
                tracked[k].outcome, tracked[k].detail = (
                    BUDGET,
                    "the time budget ran out (decide.budget_s / budget_share): the grid's pick stands",
                )
            continue
        spent += extra
        serving += keys
        chosen.update({p: tuple(lvs) for p, lvs in wanted.items()})
        sequences.append(points if round_no % 2 else tuple(reversed(points)))
    return Round(chosen, tuple(serving), spent, tuple(sequences))


def rounds_to_settle(d: Decision, margin: float, *, comparisons: int = 1, confidence: float = 0.95) -> int | None:
    """How many paired rounds would settle ``d`` (decided, or equal within +-``margin``), were its margin
    to stay as the grid measured it and the noise of a pair's log ratio to be the grid's (the half-width
    of its interval, over z: the interval of two figures measured once each), pooled over
    ``comparisons`` measured alike (:func:`update`: the t quantile on ``comparisons * (rounds - 1)``
    degrees of freedom); None where the grid gave no interval, or no count up to 64 would."""
    if d.margin is None or d.low is None or d.high is None or d.margin <= -1 or d.low <= -1:
        return None
    if math.isinf(d.high) or math.isinf(d.low):
        return None
    m = abs(math.log1p(d.margin))
    sd = (math.log1p(d.high) - math.log1p(d.low)) / 2 / NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    for n in range(2, 65):
        half = noise.t_quantile(comparisons * (n - 1), confidence) * sd / math.sqrt(n)
        if half < m or m + half <= math.log1p(margin):
            return n
    return None


@dataclass(frozen=True)
class _Outlook:
    """Before any round: per open decision, the paired rounds that would settle it at the noise the grid
    measured (``rounds_to_settle``; None: none would), and what settling every one that can be within
    ``max_rounds`` would cost (host-seconds, whole rounds of whole blocks), against the budget."""

    needed: dict[str, int | None]
    cost_s: float
    budget_s: float
    beyond: tuple[str, ...]  # decisions that ``max_rounds`` cannot settle at the noise measured
    rounds: int = 0  # the rounds that cost

    def lines(self, tracked: Mapping[str, Tracked]) -> list[str]:
        out = []
        if self.cost_s > self.budget_s:
            out.append(
                f"at the noise measured, settling them takes about {self.rounds} paired rounds, "
                f"{self.cost_s:,.0f} host-s, over the budget of {self.budget_s:,.0f}: the budget that would is "
                f"decide.budget_s={math.ceil(self.cost_s)} (and budget_share to match); those it cannot buy end "
                "undecided (budget), the grid's pick standing"
            )
        for key in self.beyond:
            n = self.needed.get(key)
            subject = tracked[key].first.subject
            out.append(
                f"{subject}: no count of paired rounds settles it at the noise measured (its interval is unbounded)"
                if n is None
                else f"{subject}: needs about {n} paired rounds, more than decide.max_repeats allows"
            )
        return out


def outlook(
    tracked: Mapping[str, Tracked],
    *,
    max_rounds: int,
    margin: float,
    budget_s: float,
    cost: Mapping[str, float],
    per_level_s: Mapping[tuple[str, int], float],
) -> _Outlook:
    """The plan before spending (:class:`_Outlook`): each open decision's paired rounds to settle, and
    the cost of the rounds that takes: each block runs as many rounds as its neediest decision (up to
    ``max_rounds``), each round a relaunch of each of its points plus its levels."""
    needed: dict[str, int | None] = {}
    beyond: list[str] = []
    total, most = 0.0, 0
    comparisons = len({_comparison(t.first) for t in tracked.values() if t.open})
    for keys, _ in blocks(tracked):
        n_block = 0
        for key in keys:
            n = rounds_to_settle(tracked[key].first, margin, comparisons=max(1, comparisons))
            needed[key] = n
            if n is None or n > max_rounds:
                beyond.append(key)
                n = max_rounds
            n_block = max(n_block, n)
        _, per_round = _block_cost(tracked, keys, cost, per_level_s)
        total += n_block * per_round
        most = max(most, n_block)
    return _Outlook(needed, total, budget_s, tuple(beyond), most)


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
        levels = sorted({c.at for c in (d.pick, d.other, f.pick, f.other)})  # the levels measured in pairs

        def reps(c: _Candidate) -> int:  # of the level measured in pairs (the grid's included)
            return counts.get((c.point_id, c.at), 1)

        spent = sum(bench_s.get((c.point_id, c.at), 0.0) for c in {d.pick, d.other, f.pick, f.other})
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
                "pick_level": d.pick.at,
                "other_level": d.other.at,
                "pairs": t.pairs,
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
    """Every decision of a results directory's tables (the grid's figures: decide's paired rounds left out), as the report judges
    it: the analysis run over them (``findings.analyze``), its SLO picks (``slo_settings``: the
    experiment's ``benchmark.slo``), its best per level, and the ``pairs`` asked for."""

    f = analyze(tables, slos=[slo_rule.from_settings(s) for s in slo_settings])
    samples = speedups.level_samples(realspeed.scaled(tables)) if pairs else None
    return _assess(f.slo_table, f.best, f.levels, pairs, samples=samples, level_noise=f.level_noise)
