"""The ``decide`` phase of a sweep, after the grid: the picks within noise measured again, in pairs,
until each is decided, equal, or out of budget (the rules: ``sweep.search.decide``).

Each round, the open decisions that share a candidate form a block, and each block's points are
relaunched back to back on one host (one Ray task holds it for all of them), measuring only the
levels their figures are read at, in the block's order on odd rounds and the reverse on even ones:
over two rounds a pair runs A B B A, so that what drifts on the host cancels. Each measurement is
written as a repeat of its level with its round (``ResultsDir.write_repeat``: new ``levels`` and
``requests`` rows, ``decide_round`` set, never over the first); a decision is judged on the log ratios
of its pairs alone, never pooled with the grid's figures (taken beside other launches). The report's
picks change only where a decision is decided. At the end ``decisions.parquet`` says how each one
ended, and the report shows it.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa
from rich.console import Console
from rich.markup import escape

from sweep.core import LaunchResult, plural
from sweep.experiment import launches_of
from sweep.host import LaunchPoint, LaunchSpec
from sweep.orchestrate.sweep import launch_spec
from sweep.results import DECISIONS_SCHEMA, as_measured, store, sweep_id
from sweep.search import decide

if TYPE_CHECKING:
    from sweep.orchestrate.cluster import Host
    from sweep.orchestrate.sweep import Prepared


def decide_phase(
    sweep: Prepared, hosts: list[Host], console: Console, run_fn=None, pairs: Sequence[tuple[str, str, int]] = ()
) -> list[dict]:
    """Run ``decide`` on the sweep's results (``sweep.core.settings.DecideSettings``; nothing when it is off):
    rounds of re-measurement while decisions are open and the budget lasts; ``decisions.parquet``
    written; one line per decision on the console. ``pairs``: more decisions to take on, (point,
    point, level) each (a policy tier's candidates). Returns the decisions' rows."""
    exp, rd = sweep.experiment, sweep.rd
    s = exp.decide
    if not s.enabled:
        return []
    slos = list(exp.benchmark.slo)
    tracked = decide.take_on(decide.evaluate(store.load(rd.path), slos, pairs), s.margin)
    points = store.table(rd.path, "points").collect().unique("point_id", keep="last")
    grid_s = float(
        points.filter(pl.col("status") == "ok")
        .select((pl.col("ended_at") - pl.col("started_at")).clip(lower_bound=0).sum())
        .item()
        or 0.0
    )
    budget = min(s.budget_s if s.budget_s is not None else math.inf, s.budget_share * grid_s)
    console.print(
        f"decide: {plural(len(tracked), 'pick')} within noise to decide, budget "
        f"{budget:,.0f} host-s ({s.budget_share:g} of the grid's {grid_s:,.0f}"
        + (f", at most {s.budget_s:g}" if s.budget_s is not None else "")
        + ")"
    )
    spent, round_no = 0.0, 0
    overheads: list[float] = []
    startup = {pid: float(v or 0.0) for pid, v in points.select("point_id", "startup_s").iter_rows()}
    gpus = (
        {pid: float(g or 1) for pid, g in points.select("point_id", "gpus").iter_rows()}
        if "gpus" in points.columns
        else {}
    )
    planned = {p.id: p for p in sweep.plan.points if not p.errors}
    specs = _specs(sweep)
    max_rounds = s.max_repeats - 1  # measurements of a level, the grid's included
    runner = None
    told = False
    while any(t.open for t in tracked.values()):
        raw = as_measured(store.table(rd.path, "levels")).collect()  # host seconds
        counts = decide.counts_of(raw)
        walls = {
            (str(p), int(c)): float(w or 0.0)
            for p, c, w in raw.filter(pl.col("concurrency") > 0)
            .group_by("point_id", "concurrency")
            .agg(pl.col("wall_s").mean())
            .iter_rows()
        }
        # a launch: its startup, plus what the last rounds' launches took beyond startup and levels
        # (pre-flight, warmup, reaps; 2 s before any was seen); a level: its back-to-back repeats
        reps = max(1, exp.benchmark.repeats)
        walls = {k: v * reps for k, v in walls.items()}
        cost = {pid: startup.get(pid, 0.0) + (sum(overheads) / len(overheads) if overheads else 2.0) for pid in planned}
        if not told:  # before anything is spent: what settling them takes at the noise measured
            told = True
            ahead = decide.outlook(
                tracked, max_rounds=max_rounds, margin=s.margin, budget_s=budget, cost=cost, per_level_s=walls
            )
            for line in ahead.lines(tracked):
                console.print(f"decide: {escape(line)}")
        rnd = decide.plan_round(
            tracked, round_no=round_no + 1, max_rounds=max_rounds, left_s=budget - spent, cost=cost, per_level_s=walls
        )
        if not rnd.levels:
            break
        round_no += 1
        if runner is None:
            runner = _runner(sweep, hosts, run_fn)
        sequences = [_launches(seq, rnd, planned, specs, round_no) for seq in rnd.sequences]
        console.print(
            f"decide: round {round_no}: {plural(len(rnd.decisions), 'decision')}, "
            f"{plural(sum(len(v) for v in rnd.levels.values()), 'level')} of "
            f"{plural(len(rnd.levels), 'point')} measured again, back to back on one host per block "
            f"({plural(sum(map(len, sequences)), 'launch', 'launches')} in {plural(len(sequences), 'block')}, "
            f"{'in order' if round_no % 2 else 'in reverse order'})"
        )
        failed: dict[str, str] = {}
        try:
            for _, results in _in_order(runner, sequences):
                for result in results:
                    cost_s, overhead_s = charge(result, startup)
                    spent += cost_s
                    overheads.append(overhead_s)
                    for r in result.points:
                        if r.status != "ok" or r.levels is None or r.levels.num_rows == 0:
                            failed[r.point_id] = str(r.failure or "no level measured")
                            continue
                        rd.write_repeat(r.point_id, round_no, _stamped(r, counts, round_no))
        except BaseException:
            runner.cancel_all()
            raise
        for key in rnd.decisions:
            tracked[key].rounds += 1
        decide.update(tracked, store.table(rd.path, "levels").collect(), s.margin, gpus=gpus)
        for t in tracked.values():
            if t.open and failed.keys() & set(t.now.points):
                pid = next(p for p in t.now.points if p in failed)
                t.outcome, t.detail = (
                    decide.BUDGET,
                    f"re-measuring {planned[pid].label} failed: {failed[pid]}; the grid's pick stands",
                )
    decide.close(tracked, "the time budget ran out (decide.budget_s / budget_share)")
    raw = as_measured(store.table(rd.path, "levels")).collect()  # host seconds
    bench_s = {
        (str(p), int(c)): float(w or 0.0)
        for p, c, w in raw.filter(pl.col("decide_round").is_not_null())
        .group_by("point_id", "concurrency")
        .agg(pl.col("wall_s").sum())
        .iter_rows()
    }
    rows = decide.rows(tracked, decide.counts_of(raw), bench_s, s.margin)
    rd.write_decisions(pa.Table.from_pylist(rows, schema=DECISIONS_SCHEMA) if rows else DECISIONS_SCHEMA.empty_table())
    ended = {o: sum(r["outcome"] == o for r in rows) for o in decide.OUTCOMES}
    console.print(
        f"decide: {ended['decided']} decided, {ended['equal']} equal within +-{s.margin:.0%}, "
        f"{ended['budget']} undecided (budget); {spent:,.0f} host-s in {plural(round_no, 'round')}, "
        f"{sum(bench_s.values()):,.1f} s of benchmark levels measured again"
    )
    for r in rows:
        console.print(
            f"  {escape(r['subject'])}: {r['outcome']}: {escape(r['pick_label'])} vs "
            f"{escape(r['other_label'])} {_pct(r['margin'])} [{_pct(r['low'])} .. {_pct(r['high'])}]"
            + (f" ({escape(r['detail'])})" if r["detail"] else "")
        )
    return rows


def _pct(v: float | None) -> str:
    return "-" if v is None else ("inf" if math.isinf(v) else f"{v:+.1%}")


def _stamped(r, counts: dict[tuple[str, int], int], round_no: int) -> dict[str, pa.Table]:
    """A paired round's levels and requests, each level's rows with its repeat index (the measurements
    of it so far, the grid's from 0, then its back-to-back repeats in this launch in turn) and, on the
    levels, the round (``decide_round``: judged in pairs, never pooled with the grid's)."""
    levels = pl.DataFrame(pl.from_arrow(r.levels))
    index = {int(c): counts.get((r.point_id, int(c)), 1) for c in levels["concurrency"].to_list()}
    top = max(index.values(), default=1)
    rep = lambda c: (  # noqa: E731
        pl.col(c).cast(pl.Int64).replace_strict(index, default=top) + pl.col("repeat").fill_null(0).cast(pl.Int64)
    ).cast(pl.Int32)
    out = {"levels": levels.with_columns(repeat=rep("concurrency"), decide_round=pl.lit(round_no, pl.Int32)).to_arrow()}
    if r.requests is not None:
        req = pl.DataFrame(pl.from_arrow(r.requests))
        out["requests"] = req.with_columns(
            repeat=pl.when(pl.col("phase") == "level").then(rep("concurrency")).otherwise(pl.lit(top, pl.Int32))
        ).to_arrow()
    return out


def charge(launch: LaunchResult, startup: Mapping[str, float]) -> tuple[float, float]:
    """What a round's launch costs the budget, and its overhead: its host time (``LaunchResult.seconds``:
    the startup and every one of its points' benchmarks, not its first point's alone), and that time
    beyond its server's startup (the first point's ``startup``, as recorded by the grid) and the levels
    measured (pre-flight, warmups, reaps: what the next rounds' ``cost`` adds to a launch)."""
    measured = sum(
        float(w or 0.0) for r in launch.points if r.levels is not None for w in r.levels.column("wall_s").to_pylist()
    )
    spent = max(0.0, launch.seconds)
    return spent, max(0.0, spent - measured - startup.get(launch.points[0].point_id, 0.0))


def _specs(sweep: Prepared) -> dict[str, LaunchSpec]:

    how = sweep.kind
    name = sweep_id(sweep.rd.path)
    return {
        p.id: launch_spec(p, sweep.experiment, sweep.rd, how, name, sweep.nnodes)
        for p in sweep.plan.points
        if not p.errors
    }


def _launches(
    order: Sequence[str], rnd: decide.Round, planned: dict, specs: dict[str, LaunchSpec], round_no: int
) -> list[LaunchSpec]:
    """One block's launches this round, in ``order``: points of one launch share it, each measuring
    only its levels (in-launch repeats as the grid measured them)."""
    out = []
    for launch in launches_of([planned[pid] for pid in order]):

        def point(pid: str) -> LaunchPoint:  # its levels only
            [p] = specs[pid].points
            return replace(p, bench=decide.restricted(p.bench, rnd.levels[pid]))

        lead = launch.first.id
        log = Path(specs[lead].log_path)
        out.append(
            replace(
                specs[lead],
                points=[point(q.id) for q in launch.points],
                log_path=str(log.with_name(f"{log.stem}~r{round_no}.log")),
            )
        )
    return out


def _in_order(runner, sequences: list[list[LaunchSpec]]):
    """Each block's launches back to back on one host (``Runner.run_in_order``); a block with a server
    over several hosts cannot be held on one: its launches run one after the other, wherever Ray puts
    them (still in their order, nothing of theirs between them)."""
    single = [i for i, seq in enumerate(sequences) if all(spec.nnodes <= 1 for spec in seq)]
    if single:
        for j, results in runner.run_in_order([sequences[i] for i in single]):
            yield single[j], results
    for i, seq in enumerate(sequences):
        if i in single:
            continue
        results = []
        for spec in seq:
            results += [out.result for out in runner.run([spec], lambda *_: None)]
        yield i, results


def _runner(sweep: Prepared, hosts: list[Host], run_fn):
    from sweep.orchestrate.ray_runner import (  # lazy: at the top every importer of this module would load ray
        HostSetup,
        Runner,
    )

    exp, how = sweep.experiment, sweep.kind
    ledger_root = Path(tempfile.gettempdir()) / "sweep-fake-gpus" / sweep_id(sweep.rd.path)
    setups = {
        h.node_id: HostSetup(
            h,
            exp.server.port + (h.index if how.local_cluster else 0),
            str(ledger_root / h.name) if how.fake_server else None,
            exp.cluster.gpus_per_host,
            choose_port=how.local_cluster,
        )
        for h in hosts
    }
    return Runner(
        exp.cluster.host_resource, exp.cluster.gpus_per_host, setups, exp.cluster.max_host_failures, run_fn=run_fn
    )
