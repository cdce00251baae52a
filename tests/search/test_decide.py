"""``decide`` without a cluster: decisions read from results directories with known numbers, paired
rounds written as the driver writes them (each round moving both candidates alike, as a host does),
and the rounds planned and ended by the pure rules of sweep/search/decide.py (a decision that
separates, one decided the other way that changes the pick everywhere, one equal within the margin,
one out of budget that changes nothing)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.analysis import findings, noise, repeats
from sweep.core import slo_rule
from sweep.core.record import LaunchResult, PointResult
from sweep.core.settings import SLOSettings
from sweep.orchestrate.decide import charge
from sweep.results import store
from sweep.results.schema import DECISIONS, DECISIONS_SCHEMA, from_rows, repeat_stem
from sweep.search import decide
from tests.analysis.sweepdir import SweepDir

C = 8  # the contested level
SLO = [SLOSettings(name="any", tok_s=1.0)]  # met everywhere: the pick is the best at the top level


def sweep(path: Path, a: float, b: float) -> tuple[SweepDir, str, str]:
    """A baseline far behind and two drafters ``a`` and ``b`` tok/s at C=8 (close: within noise after
    one measurement, the level-wide noise floor of 2 % on each)."""
    sd = SweepDir(path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[50, 50, 50], levels={1: 50, C: 300})
    pa_ = sd.point(
        drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=[80, 80, 80], levels={1: 80, C: a}, jitter=0.01
    )
    pb = sd.point(
        drafter="d2", steps="2", nccl="default", baseline_of=base, tok_s=[70, 70, 70], levels={1: 70, C: b}, jitter=0.01
    )
    sd.write()
    return sd, pa_, pb


def remeasure(
    sd: SweepDir, point_id: str, level: int, value: float, round_: int, index: int, paired: bool = True
) -> None:
    """A re-measurement of one level as the driver writes it: new levels and requests rows with their
    repeat index (and, measured in a paired round, the round), in <table>/<point>~r<round>.parquet
    (the point's own files untouched)."""
    p = next(p for p in sd.points if p.point_id == point_id)
    tables = sd._tables(type(p)(**{**p.__dict__, "levels": {level: value}, "tok_s": [], "lost": []}))
    for name in ("requests", "levels"):
        rows = [dict(r, repeat=index) for r in tables[name] if r.get("phase", "level") == "level"]
        if name == "levels" and paired:
            rows = [dict(r, decide_round=round_) for r in rows]
        pq.write_table(from_rows(rows, name), sd.path / name / f"{repeat_stem(point_id, round_)}.parquet")


def write_decisions(path: Path, tracked: dict[str, decide.Tracked], margin: float) -> None:
    """decisions.parquet as the driver writes it at the end."""
    rows = decide.rows(tracked, decide.counts_of(store.table(path, "levels").collect()), {}, margin)
    pq.write_table(pa.Table.from_pylist(rows, schema=DECISIONS_SCHEMA), path / DECISIONS)


def level_decision(path: Path) -> decide.Decision:
    return decide.evaluate(store.load(path), SLO)[f"level:C={C}"]


# what moves a whole round on the host (both candidates alike): +-10 %, far more than their 4 % apart
DRIFT = [1.10, 0.90, 1.00, 1.05, 0.95, 1.08, 0.93, 1.02]
# what moves one measurement on its own: +-0.4 %, alternating with the round and the candidate
JITTER = 0.004


def run_rounds(
    sd: SweepDir,
    truth: dict[str, float],
    *,
    margin: float,
    max_repeats: int = 8,
    left_s: float = 1e9,
    round_cost_s: float = 10.0,
) -> dict[str, decide.Tracked]:
    """The driver's loop, each round moving both candidates alike (``DRIFT``, the host) and each
    measurement a little on its own (``JITTER``): take on what is within noise, plan a round of paired
    measurements, measure, judge the pairs again, until nothing is open or the plan is empty."""
    tracked = decide.take_on(decide.evaluate(store.load(sd.path), SLO), margin)
    spent, round_ = 0.0, 0
    while any(t.open for t in tracked.values()):
        counts = decide.counts_of(store.table(sd.path, "levels").collect())
        rnd = decide.plan_round(
            tracked,
            round_no=round_ + 1,
            max_rounds=max_repeats - 1,
            left_s=left_s - spent,
            cost={pid: round_cost_s for pid in truth},
            per_level_s={},
        )
        if not rnd.levels:
            break
        round_ += 1
        names = list(truth)
        for order in rnd.sequences:
            for pid in order:
                wobble = 1 + JITTER * (-1) ** (round_ + names.index(pid))  # one side up, the other down, in turn
                for lv in rnd.levels[pid]:
                    remeasure(sd, pid, lv, truth[pid] * DRIFT[round_ - 1] * wobble, round_, counts.get((pid, lv), 1))
        spent += rnd.cost_s
        for key in rnd.decisions:
            tracked[key].rounds += 1
        decide.update(tracked, store.table(sd.path, "levels").collect(), margin)
    decide.close(tracked, "budget")
    return tracked


def test_judge_reads_the_three_endings():
    assert decide.judge(0.01, 0.09, 0.03) == decide.DECIDED
    assert decide.judge(-0.09, -0.01, 0.03) == decide.DECIDED  # the other is ahead: decided too
    assert decide.judge(-0.02, 0.025, 0.03) == decide.EQUAL
    assert decide.judge(-0.04, 0.05, 0.03) is None  # open
    assert decide.judge(None, 0.05, 0.03) is None  # no interval: nothing to decide


def test_a_decision_that_separates(tmp_path):
    """4 % apart: within noise after the grid's one measurement each; the host moves each round by up to
    10 % (both alike), and the pairs' own spread (+-0.8 %), not that, decides it in three rounds. The grid's
    figures stay the grid's: nothing measured in pairs is pooled into them."""
    sd, a, b = sweep(tmp_path, 1000.0, 960.0)
    first = level_decision(tmp_path)
    assert first.points == (a, b) and first.low < 0 < first.high
    tracked = run_rounds(sd, {a: 1000.0, b: 960.0}, margin=0.01)
    t = tracked[f"level:C={C}"]
    assert t.outcome == decide.DECIDED and t.now.low > 0 and t.now.pick.point_id == a, t
    assert t.rounds == t.pairs == 3 and "3 paired rounds" in t.detail  # two pairs' t interval is too wide
    assert t.now.margin == pytest.approx(1000 / 960 - 1, abs=0.005)
    assert tracked["slo:any"].outcome == decide.DECIDED  # the SLO's pick is read from the same level
    raw = store.table(tmp_path, "levels").collect().filter(pl.col("point_id") == a, pl.col("concurrency") == C)
    assert raw.height == t.rounds + 1 and raw["repeat"].fill_null(0).sort().to_list() == list(range(raw.height))
    assert raw["decide_round"].drop_nulls().sort().to_list() == [1, 2, 3]
    grid = (
        repeats.pooled(store.load(tmp_path))["levels"]
        .collect()
        .filter(pl.col("point_id") == a, pl.col("concurrency") == C)
    )
    assert grid.height == 1 and grid["output_throughput"][0] == pytest.approx(1000.0, rel=0.01)  # the grid's alone


def test_the_same_measurements_pooled_would_not_decide(tmp_path):
    """Why pairs: the rounds above, read as repeats pooled with the grid's (their host's drift left in),
    leave the margin's interval across 0 where the pairs decide it."""
    sd, a, b = sweep(tmp_path, 1000.0, 960.0)
    for k in (1, 2):
        for pid, v in ((a, 1000.0), (b, 960.0)):
            remeasure(sd, pid, C, v * DRIFT[k - 1] * (1 + JITTER * (-1) ** k), k, k, paired=False)
    pooled = level_decision(tmp_path)
    assert pooled.low < 0 < pooled.high
    ratios = [math.log(1000 * (1 + JITTER * (-1) ** k) / (960 * (1 + JITTER * (-1) ** k))) for k in (1, 2)]
    assert decide.paired(pooled, ratios).low > 0


def test_a_decision_the_other_way_changes_the_pick_everywhere(tmp_path):
    """The grid had a 1 % ahead of b (within noise); measured in pairs, b is 4 % ahead: decided, the pick
    changes, and every part of the report that compares the two says so (the best at the level, the
    SLO's pick, the pair's verdict), with the pair's margin; the grid's figures stay."""
    sd, a, b = sweep(tmp_path, 1000.0, 990.0)
    tracked = run_rounds(sd, {a: 960.0, b: 1000.0}, margin=0.01)
    t = tracked[f"level:C={C}"]
    assert t.outcome == decide.DECIDED and t.now.pick.point_id == b and "the pick changed" in t.detail, t
    write_decisions(tmp_path, tracked, 0.01)
    f = findings.analyze(store.load(tmp_path), slos=[slo_rule.from_settings(s) for s in SLO])
    best = f.best.filter(pl.col("concurrency") == C).row(0, named=True)
    assert best["point_id"] == b and best["runner_up_id"] == a
    assert best["margin_low"] > 0 and best["margin"] == pytest.approx(1000 / 960 - 1, abs=0.005)
    assert best["value"] == pytest.approx(990.0, rel=0.01)  # the grid's figure, as measured
    pick = f.slo_table.filter(pl.col("rank") == 1).row(0, named=True)
    assert pick["point_id"] == b and pick["margin_low"] > 0
    assert findings.pair_verdict(f, b, a, C) is noise.Verdict.AHEAD
    assert findings.pair_verdict(f, a, b, C) is noise.Verdict.BEHIND


def test_a_decision_against_the_baseline_is_the_concurrency_tables_verdict_too(tmp_path):
    """The best at C=8 against the runner-up that is its own baseline: decided in pairs, the Concurrency
    table's verdict of the drafter against its baseline there is the decision's (one pair, one voice)."""
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[50] * 3, levels={1: 50, C: 1000.0})
    d1 = sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[80] * 3,
        levels={1: 80, C: 1010.0},
        jitter=0.01,
    )
    sd.write()
    before = findings.analyze(store.load(tmp_path))
    row = before.levels.filter((pl.col("point_id") == d1) & (pl.col("concurrency") == C)).row(0, named=True)
    assert row["verdict"] == "within noise"
    tracked = run_rounds(sd, {base: 1000.0, d1: 1060.0}, margin=0.01)
    assert tracked[f"level:C={C}"].outcome == decide.DECIDED
    write_decisions(tmp_path, tracked, 0.01)
    f = findings.analyze(store.load(tmp_path))
    row = f.levels.filter((pl.col("point_id") == d1) & (pl.col("concurrency") == C)).row(0, named=True)
    assert row["verdict"] == "faster" and row["throughput_ratio"] == pytest.approx(1.06, abs=0.01)
    assert row["ci_low"] > 1 and not row["within_noise"]
    assert findings.pair_verdict(f, d1, base, C) is noise.Verdict.AHEAD


def test_an_undecided_decision_leaves_the_grids_pick(tmp_path):
    """Out of budget after one round: nothing judged in pairs, the grid's pick and its interval stand."""
    sd, a, b = sweep(tmp_path, 1000.0, 990.0)
    before = findings.analyze(store.load(tmp_path), slos=[slo_rule.from_settings(s) for s in SLO])
    tracked = run_rounds(sd, {a: 960.0, b: 1000.0}, margin=0.01, left_s=25.0)
    t = tracked[f"level:C={C}"]
    assert t.outcome == decide.BUDGET and t.now.pick.point_id == a, t
    write_decisions(tmp_path, tracked, 0.01)
    after = findings.analyze(store.load(tmp_path), slos=[slo_rule.from_settings(s) for s in SLO])
    cols = ["point_id", "runner_up_id", "value", "margin", "margin_low", "margin_high"]
    assert after.best.select(cols).equals(before.best.select(cols))
    assert after.slo_table.equals(before.slo_table)


def test_a_decision_equal_within_the_margin(tmp_path):
    """0.5 % apart: never decided, but once the interval lies within +-5 %, the two are equal."""
    sd, a, b = sweep(tmp_path, 1000.0, 995.0)
    tracked = run_rounds(sd, {a: 1000.0, b: 995.0}, margin=0.05)
    t = tracked[f"level:C={C}"]
    assert t.outcome == decide.EQUAL, t
    assert -0.05 <= t.now.low < 0 < t.now.high <= 0.05
    assert "either will do" in t.detail


@pytest.mark.parametrize("limit", ["time", "rounds"])
def test_a_decision_that_runs_out_of_budget(tmp_path, limit):
    """Too close to call with the margin asked: the budget (time, or rounds) ends it, the grid's pick
    standing, with the measurements it got kept."""
    sd, a, b = sweep(tmp_path, 1000.0, 997.0)
    budget = {"left_s": 25.0, "round_cost_s": 10.0} if limit == "time" else {"max_repeats": 3}
    tracked = run_rounds(sd, {a: 1000.0, b: 997.0}, margin=0.001, **budget)
    t = tracked[f"level:C={C}"]
    assert t.outcome == decide.BUDGET and t.now.pick.point_id == a, t
    assert ("time budget" if limit == "time" else "max_repeats") in t.detail and "grid's pick stands" in t.detail
    counts = decide.counts_of(store.table(tmp_path, "levels").collect())
    assert counts[(a, C)] == (2 if limit == "time" else 3)  # time: 2 launches of 10 s fit in 25 s, one round
    rows = decide.rows(tracked, counts, {}, 0.001)
    assert {r["outcome"] for r in rows} == {decide.BUDGET}


def test_decisions_that_share_a_candidate_run_in_one_block_reversed_every_other_round():
    """Two decisions naming b: one block, its points back to back on one host, A B C then C B A; a
    decision of its own is a block of its own."""
    Cd = decide._Candidate

    def dec(key: str, pick: str, other: str) -> decide.Decision:
        return decide.Decision(
            key, "level", key, "", Cd(pick, pick, (8,), 8), Cd(other, other, (8,), 8), 0.02, -0.05, 0.09
        )

    tracked = {
        k: decide.Tracked(d, d)
        for k, d in (("x", dec("x", "a", "b")), ("y", dec("y", "c", "d")), ("z", dec("z", "b", "e")))
    }
    assert decide.blocks(tracked) == [(("x", "z"), ("a", "b", "e")), (("y",), ("c", "d"))]
    kw = dict(max_rounds=3, left_s=1e9, cost={}, per_level_s={})
    assert decide.plan_round(tracked, round_no=1, **kw).sequences == (("a", "b", "e"), ("c", "d"))
    assert decide.plan_round(tracked, round_no=2, **kw).sequences == (("e", "b", "a"), ("d", "c"))


def test_tables_without_repeats_are_read_as_before(tmp_path):
    sweep(tmp_path, 1000.0, 960.0)
    tables = store.load(tmp_path)
    assert repeats.pooled(tables)["levels"] is tables["levels"]


def test_the_pair_hook_takes_two_points_and_a_level(tmp_path):
    """A policy tier's candidates: any two points at one level, by the rule of a level's best."""
    sd, a, b = sweep(tmp_path, 1000.0, 960.0)
    base = sd.points[0].point_id
    found = decide.evaluate(store.load(tmp_path), SLO, pairs=[(b, base, C)])
    d = found[decide.pair_key(b, base, C)]
    assert d.kind == "pair" and d.points == (b, base) and d.low > 0  # 960 against 300: decided already


def test_the_repeats_measure_the_level_wide_noise_themselves(tmp_path):
    """Levels measured again show what moves a level as a whole: their pooled spread (log throughput,
    between the repeats of each level) is the level noise, once there are enough of them (repeats
    written before decide measured in pairs, or the grid's own: no ``decide_round``)."""
    sd, a, b = sweep(tmp_path, 1000.0, 960.0)
    assert repeats.repeat_noise(store.table(tmp_path, "levels"))[0] is None  # nothing measured twice
    for k, (va, vb) in enumerate([(1100.0, 1056.0), (900.0, 864.0), (1000.0, 960.0), (1050.0, 1008.0)], 1):
        for i, (lv, fa, fb) in enumerate(((1, 80 / 1000, 70 / 960), (C, 1.0, 1.0))):  # each level as the grid's, moved
            remeasure(sd, a, lv, va * fa, 2 * k + i, k, paired=False)  # a file per level here
            remeasure(sd, b, lv, vb * fb, 2 * k + i, k, paired=False)
    sigma, df = repeats.repeat_noise(store.table(tmp_path, "levels"))
    assert df == 16 and sigma == pytest.approx(0.0746, abs=0.001)  # the SD of log([1, 1.1, 0.9, 1, 1.05])
    # it is the noise every verdict uses: a and b moved together (4 % apart each time), and the
    # pooled margin's interval is centred on 4 % and as wide as that noise makes it
    d = level_decision(tmp_path)
    assert d.margin == pytest.approx(0.04, abs=0.005)
    half = 1.96 * 0.0746 * (2 / 5) ** 0.5
    assert (d.high - d.low) / 2 == pytest.approx(half, rel=0.25)


def test_a_re_measurement_runs_only_its_levels():
    from sweep.core.settings import BenchSettings

    s = decide.restricted(BenchSettings(rates=[1.0]), [30, 5])
    assert s.concurrency.levels == [30, 5] and not s.concurrency.refine and not s.concurrency.auto
    assert s.single_stream.runs == 0 and s.single_stream.warmup == BenchSettings().single_stream.warmup
    assert s.rates == [] and not s.open_loop.replay and s.problems() == []


def test_a_relaunch_is_charged_its_whole_host_time_not_its_first_points():
    """A round's launch of two points (a client-side axis): the budget is charged from its start to its
    last point's end, and its overhead is that beyond its startup and the levels it measured."""

    def point(pid: str, start: float, end: float, walls: list[float]) -> PointResult:
        return PointResult(pid, "h", "n", "ok", started_at=start, ended_at=end, levels=pa.table({"wall_s": walls}))

    # the first point: the launch's start (pre-flight, a 5 s startup) to its benchmark's end; the second after it
    launch = LaunchResult([point("a", 100.0, 130.0, [10.0, 10.0]), point("b", 130.0, 170.0, [30.0])])
    assert launch.seconds == 70.0
    assert charge(launch, {"a": 5.0, "b": 5.0}) == (70.0, 15.0)  # 70 - 50 s of levels - 5 s of startup
    assert charge(LaunchResult([point("a", 100.0, 130.0, [10.0, 10.0])]), {"a": 5.0}) == (30.0, 5.0)


def test_the_first_figures_are_of_the_pair_named():
    """'first' is the margin of the pick over the other named in the row: inverted where the first
    look had the two the other way round, none where it was of another pair (issue 44)."""
    C = decide._Candidate

    def dec(pick: str, other: str, m: float, lo: float, hi: float) -> decide.Decision:
        return decide.Decision(
            "level:C=8", "level", "the best at C=8", "", C(pick, pick, (8,)), C(other, other, (8,)), m, lo, hi
        )

    flipped = decide.Tracked(dec("a", "b", 0.10, -0.05, 0.25), dec("b", "a", 0.02, 0.01, 0.03), decide.DECIDED)
    other = decide.Tracked(dec("a", "c", 0.10, -0.05, 0.25), dec("a", "b", 0.02, 0.01, 0.03), decide.DECIDED)
    same = decide.Tracked(dec("a", "b", 0.10, -0.05, 0.25), dec("a", "b", 0.02, 0.01, 0.03), decide.DECIDED)
    rows = {r["pick_id"] + r["other_id"] + str(i): r for i, r in enumerate(decide.rows({"x": flipped}, {}, {}, 0.03))}
    (r,) = rows.values()
    assert r["margin_first"] == pytest.approx(1 / 1.1 - 1)
    assert r["low_first"] == pytest.approx(1 / 1.25 - 1) and r["high_first"] == pytest.approx(1 / 0.95 - 1)
    (r,) = decide.rows({"x": other}, {}, {}, 0.03)
    assert r["margin_first"] is None and r["low_first"] is None
    (r,) = decide.rows({"x": same}, {}, {}, 0.03)
    assert (r["margin_first"], r["low_first"], r["high_first"]) == (0.10, -0.05, 0.25)


def test_the_plan_says_before_spending_what_deciding_takes():
    """A margin of +5 % with the grid's interval of about +-10 %: a pair's log ratio has an SD of about
    5 %, and the t interval of its mean clears 5 % after 7 paired rounds; the outlook says so, and the
    budget that buys them (issue 44)."""
    Cd = decide._Candidate
    d = decide.Decision(
        "level:C=8", "level", "the best at C=8", "", Cd("a", "a", (8,), 8), Cd("b", "b", (8,), 8), 0.05, -0.05, 0.155
    )
    assert decide.rounds_to_settle(d, 0.01) == 7
    assert decide.rounds_to_settle(replace(d, margin=0.0, low=-0.01, high=0.01), 0.03) == 3  # equal soon
    assert decide.rounds_to_settle(replace(d, high=math.inf), 0.03) is None
    tracked = {"k": decide.Tracked(d, d)}
    cost = {"a": 100.0, "b": 100.0}
    levels = {("a", 8): 5.0, ("b", 8): 5.0}
    o = decide.outlook(tracked, max_rounds=8, margin=0.01, budget_s=300.0, cost=cost, per_level_s=levels)
    assert o.needed == {"k": 7} and o.cost_s == pytest.approx(7 * 210.0) and not o.beyond
    (line,) = o.lines(tracked)
    assert "7 paired rounds" in line and "over the budget of 300" in line and "decide.budget_s=1470" in line
    o = decide.outlook(tracked, max_rounds=3, margin=0.01, budget_s=1e9, cost=cost, per_level_s=levels)
    assert o.beyond == ("k",) and "more than decide.max_repeats" in o.lines(tracked)[0]


def test_the_noise_of_a_pair_is_pooled_over_the_decisions_measured_alike():
    """Two rounds of one pair alone: a t interval on 1 degree of freedom (12.7 SDs wide) decides nothing
    short of a huge margin; the same two rounds judged with the spread pooled over four comparisons
    measured the same way (4 degrees of freedom) decide +3 %. A comparison counted twice (an SLO's pick
    and a level's best of the same two at the same level) adds no degree of freedom."""
    mine = [math.log(1.03) + 0.004, math.log(1.03) - 0.004]
    others = [[0.01 + 0.005, 0.01 - 0.005], [-0.02 + 0.003, -0.02 - 0.003], [0.0 + 0.004, 0.0 - 0.004]]
    alone = noise.paired_ratio(mine)
    assert alone[1] < 1 < alone[2]  # within noise on its own
    sd, df = noise.pooled_spread([mine, *others])
    assert df == 4 and sd == pytest.approx(((2 * 0.004**2 + 2 * 0.005**2 + 2 * 0.003**2 + 2 * 0.004**2) / 4) ** 0.5)
    pooled = noise.paired_ratio(mine, pooled=(sd, df))
    assert pooled[1] > 1 and pooled[0] == pytest.approx(alone[0])
    assert noise.pooled_spread([mine]) == (pytest.approx(0.004 * 2**0.5), 1)
    assert noise.pooled_spread([[0.1]]) is None
