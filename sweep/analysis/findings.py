"""Every table of the report computed once, and the headline sentences drawn from them.

``analyze(tables)`` reads the request table a single time (through ``level_speedups``) and hands
the frames to the report, the plots and ``--vs``; ``headlines`` turns them into the few sentences
a reader wants first (does speculation pay at C=1, where does it stop, what did NCCL tuning do).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import cast

import polars as pl

from sweep.analysis import (
    acceptance,
    decided,
    frontier,
    health,
    noise,
    openloop,
    phantom,
    realspeed,
    render,
    repeats,
    slo_noise,
    speedups,
)
from sweep.analysis import energy as energy_mod
from sweep.analysis import policy as policy_mod
from sweep.analysis import slo as slo_mod
from sweep.analysis.frames import Tables, configurations, natural_key, points_frame
from sweep.core import plural


@dataclass(frozen=True)
class Findings:
    summary: health.SweepSummary
    single: pl.DataFrame  # speedup_table
    levels: pl.DataFrame  # level_speedups
    best: pl.DataFrame  # best_per_level
    crossover: pl.DataFrame
    env: pl.DataFrame  # env_effect
    startup: pl.DataFrame
    failures: pl.DataFrame
    request_failures: pl.DataFrame
    warnings: pl.DataFrame
    acceptance: pl.DataFrame = field(default_factory=lambda: acceptance.empty())  # per drafter point: verdicts
    frontier: pl.DataFrame = field(default_factory=pl.DataFrame)  # frontier.frontier_table
    frontier_by: str | None = None
    slos: list[slo_mod.SLO] = field(default_factory=list)  # the SLOs as given
    speed: realspeed.Speed = field(default_factory=realspeed.Speed)  # a dry run's figures, scaled back
    slo_levels: pl.DataFrame = field(default_factory=pl.DataFrame)  # slo.level_slo
    slo_table: pl.DataFrame = field(default_factory=pl.DataFrame)  # slo.slo_table, with slo_noise.margins
    level_noise: float | None = None  # noise.curve_noise of the levels: a level's run-to-run noise
    # > 0: level_noise was measured from the levels' repeats (their degrees of freedom), not from the curves
    level_noise_repeats: int = 0
    fastest: pl.DataFrame = field(default_factory=pl.DataFrame)  # speedups.fastest_single
    pruned: pl.DataFrame = field(default_factory=pl.DataFrame)  # health.pruned: what the adaptive search skipped
    energy: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=energy_mod.SCHEMA))  # energy.level_energy
    open_levels: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema=openloop.SCHEMA)
    )  # openloop.rate_levels
    open_slo: pl.DataFrame = field(default_factory=pl.DataFrame)  # openloop.rate_slo: goodput per SLO and rate
    policies: policy_mod.Policies = field(default_factory=policy_mod.Policies)  # policy.derive: per step-count group
    policy_workloads: dict[str, list[str]] = field(
        default_factory=dict
    )  # {"user": [frames' workloads run on the user's workload]}
    phantoms: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=phantom.SCHEMA))  # phantom.phantoms
    level_samples: pl.LazyFrame | None = None  # speedups.level_samples: per-request tok/s per point and level
    # THE judgement of every pair compared at a level (speedups.judge_pairs): each level's best against
    # every other configuration of its workload there, and each configuration against its baseline
    pairs: pl.DataFrame = field(default_factory=pl.DataFrame)


def analyze(
    tables: Tables,
    *,
    env_reference: str | None = None,
    slos: list | None = None,
    frontier_by: str | None = None,
    policy_candidates: str = "one",
) -> Findings:
    """All the report's frames for one results directory, a dry run's at real speed
    (:mod:`sweep.analysis.realspeed`). ``slos``: the SLOs to judge by (``sweep.analysis.slo.SLO``);
    ``frontier_by``: the frontier's panels (an axis name, 'all'; default the NCCL profile);
    ``policy_candidates``: the experiment's ``policy.candidates`` (``sweep.analysis.policy.derive``)."""
    ended = tables["decisions"].collect() if "decisions" in tables else None  # decide's, judged in pairs
    verdicts = decided.level_verdicts(ended)
    measured_noise, repeats_df = repeats.repeat_noise(tables["levels"]) if repeats.has_repeats(tables) else (None, 0)
    tables, speed = realspeed.at_real_speed(repeats.pooled(tables))  # a level's repeats: one row (decide's left out)
    slos = list(slos or [])
    open_levels, open_slo = openloop.rate_levels(tables), openloop.rate_slo(tables, slos)
    tables = openloop.closed_loop(tables)  # the concurrency analysis never sees an open-loop level
    single = speedups.speedup_table(tables)
    # a level's run-to-run noise: measured between repeats where they are enough, else from the curves;
    # the levels' own verdicts against their baselines are judged with it too (one noise, one voice)
    measured = noise.MeasuredNoise(measured_noise) if measured_noise is not None else None
    levels = decided.on_levels(speedups.level_speedups(tables, level_noise=measured), verdicts)
    level_noise = measured if measured is not None else noise.curve_noise(levels)
    slo_levels = slo_mod.level_slo(tables, slos)
    slo_table = decided.on_slo(
        slo_noise.margins(
            tables,
            slos,
            decided.rerank_slo(slo_mod.slo_table(tables, slos, slo_levels), ended),
            slo_levels,
            level_noise=level_noise,
        ),
        ended,
    )
    samples = speedups.level_samples(tables)
    conf = configurations(tables)
    policies = policy_mod.derive(
        levels,
        points_frame(tables),
        configurations=conf,
        samples=samples,
        level_noise=level_noise,
        batches=policy_mod.level_batches(tables),  # the batch sizes each level ran: where its tier's key goes
        candidates=policy_candidates,
    )
    best = decided.on_best(speedups.best_per_level(levels, samples=samples, level_noise=level_noise), ended, levels)
    return Findings(
        summary=health.sweep_summary(tables),
        single=single,
        levels=levels,
        best=best,
        crossover=speedups.crossover(levels),
        env=speedups.env_effect(levels, reference=env_reference, single=single),
        startup=health.startup_phases(tables),
        failures=health.failures(tables),
        request_failures=health.request_failures(tables),
        warnings=health.plan_warnings(tables),
        acceptance=_adaptive_acceptance(acceptance.acceptance(tables), points_frame(tables)),
        frontier=_frontier(tables, levels, frontier_by),
        frontier_by=frontier_by,
        slos=slos,
        speed=speed,
        slo_levels=slo_levels,
        slo_table=slo_table,
        level_noise=level_noise,
        level_noise_repeats=repeats_df if measured_noise is not None else 0,
        fastest=speedups.fastest_single(single, speedups.single_samples(tables)),
        pruned=health.pruned(tables),
        energy=energy_mod.level_energy(tables),
        open_levels=open_levels,
        open_slo=open_slo,
        policies=policies,
        policy_workloads={"user": _user_workloads(tables, conf)},
        phantoms=phantom.phantoms(tables, single, levels),
        level_samples=samples,
        pairs=decided.on_pairs(_level_pairs(levels, best, samples, level_noise), verdicts),
    )


def _level_pairs(
    levels: pl.DataFrame, best: pl.DataFrame, samples: pl.LazyFrame | None, level_noise: float | None
) -> pl.DataFrame:
    """Every pair the report compares at a level, judged once (``speedups.judge_pairs``): each level's
    best (``best``) against every other configuration of its workload there, and each configuration
    against its baseline (as ``levels`` has it). Columns: workload, concurrency, point_id, other_id,
    label, other_label, ratio, ci_low, ci_high, verdict (``noise.Verdict``, of point against other)."""
    if levels.is_empty():
        return pl.DataFrame()
    w = pl.col("workload").fill_null("") if "workload" in levels.columns else pl.lit("")
    cols = levels.select("point_id", "concurrency", "baseline_id", "setup", "output_throughput", _w=w)
    picked = best.select(
        "concurrency",
        _w=pl.col("workload").fill_null("") if "workload" in best.columns else pl.lit(""),
        _pick="point_id",
    )
    wanted = pl.concat(
        [
            cols.join(picked, on=["_w", "concurrency"], how="inner")
            .filter(pl.col("point_id") != pl.col("_pick"))
            .select("_w", "concurrency", point_id="_pick", other_id="point_id"),
            cols.filter(
                pl.col("baseline_id").is_not_null()
                & (pl.col("point_id") != pl.col("baseline_id"))
                & pl.col("output_throughput").is_not_null()
            ).select("_w", "concurrency", "point_id", other_id="baseline_id"),
        ]
    ).unique(maintain_order=True)
    if not wanted.height:
        return pl.DataFrame()
    judged = speedups.judge_pairs(levels, wanted.select("point_id", "other_id", "concurrency"), samples, level_noise)
    names = cols.select("point_id", "concurrency", "_w", _label="setup")
    return (
        wanted.join(judged, on=["point_id", "other_id", "concurrency"], how="left")
        .join(names.drop("_w"), on=["point_id", "concurrency"], how="left")
        .join(
            names.drop("_w").rename({"point_id": "other_id", "_label": "_other"}),
            on=["other_id", "concurrency"],
            how="left",
        )
        .unique(["_w", "concurrency", "point_id", "other_id"], maintain_order=True)
        .select(
            workload="_w",
            concurrency="concurrency",
            point_id="point_id",
            other_id="other_id",
            label="_label",
            other_label="_other",
            ratio="ratio",
            ci_low="ci_low",
            ci_high="ci_high",
            verdict="verdict",
        )
    )


def pair_verdict(f: Findings, a: str, b: str, concurrency: int) -> noise.Verdict:
    """The one verdict of point ``a`` against point ``b`` at a level, as every part of the report says it
    (``Findings.pairs``; flipped where the pair was judged the other way round); unknown where the
    report compares them nowhere."""
    if f.pairs.is_empty():
        return noise.Verdict.UNKNOWN
    at = f.pairs.filter(pl.col("concurrency") == concurrency)
    row = at.filter((pl.col("point_id") == a) & (pl.col("other_id") == b))
    if row.height:
        return noise.Verdict.of(row["verdict"][0])
    row = at.filter((pl.col("point_id") == b) & (pl.col("other_id") == a))
    return noise.Verdict.of(row["verdict"][0]).flipped() if row.height else noise.Verdict.UNKNOWN


def _adaptive_acceptance(frame: pl.DataFrame, points: pl.DataFrame) -> pl.DataFrame:
    """An adaptive server (a policy's confirmation point) switches its step count with the load: no
    chain of its launch's steps predicts its accept length, so it is judged 'broken' (an accept rate
    near zero) but never 'low' against that prediction."""
    adaptive = [r["point_id"] for r in points.iter_rows(named=True) if policy_mod.is_confirmation(r)]
    if not adaptive or not frame.height:
        return frame
    mine = pl.col("point_id").is_in(adaptive)
    return frame.with_columns(
        predicted_length=pl.when(mine).then(None).otherwise("predicted_length"),
        vs_predicted=pl.when(mine).then(None).otherwise("vs_predicted"),
        verdict=pl.when(mine & (pl.col("verdict") == "low")).then(pl.lit("ok")).otherwise("verdict"),
        causes=pl.when(mine & (pl.col("verdict") == "low")).then(None).otherwise("causes"),
    )


def _user_workloads(tables: Tables, conf: pl.DataFrame) -> list[str]:
    """The frames' workloads (client-side axes as ``axis=value``) whose points ran the user's workload
    (not a built-in prompt set), where the results also hold a built-in one; [] otherwise."""
    named = phantom.workloads.point_workloads(tables)
    if not any(phantom.is_builtin(w) for w in named.values()):
        return []
    return sorted(
        {
            r["workload"] or ""
            for r in conf.iter_rows(named=True)
            if r["point_id"] in named and not phantom.is_builtin(named[r["point_id"]])
        },
        key=natural_key,
    )


def _frontier(tables: Tables, levels: pl.DataFrame, by: str | None) -> pl.DataFrame:
    """``frontier.frontier_table`` within each workload (its panels led by the workload's name): a
    frontier ranks setups, and two workloads are two traffic mixes, never two setups."""
    names = (
        sorted({w for w in levels["workload"].to_list() if w}, key=natural_key) if "workload" in levels.columns else []
    )
    if len(names) < 2:
        return frontier.frontier_table(tables, levels, by=by)
    parts = [
        frontier.frontier_table(tables, levels.filter(pl.col("workload") == w), by=by).with_columns(
            panel=pl.concat_str([pl.lit(w), pl.col("panel")], separator=" ").str.strip_chars()
        )
        for w in names
    ]
    return pl.concat(parts, how="vertical_relaxed")


def _x(value: float) -> str:
    return f"{value:.2f}x"


def _span(levels: pl.Series, *, at: bool = False) -> str:
    """'from C=64' (or 'at C=64'), 'from C=8 to C=64' (by configuration) for a set of levels."""
    # polars types a column's min and max as any Python literal; these columns hold numbers
    lo, hi = cast("float | None", levels.min()), cast("float | None", levels.max())
    if at:
        return f"C={lo}" if lo == hi else f"between C={lo} and C={hi}"
    return f"from C={lo}" if lo == hi else f"from C={lo} to C={hi}, by configuration"


def _per(value: float, per: str) -> str:
    return f"{value:,.0f} output tok/s per {per}"


def slo_headlines(f: Findings) -> list[str]:
    """One sentence per SLO: the setup to deploy, where it holds, and its margins."""
    lines = []
    for rec in slo_mod.recommendations(f.slo_table, f.slos):
        slo = rec["slo"]
        head = f"SLO {slo.name} ({slo.describe()})"
        if rec["best"] is None:
            lines.append(f"{head}: {rec['reason']}.")
            continue
        b, r = rec["best"], rec["runner_up"]
        where = slo_mod.reach_text(b)  # an interpolated boundary said to be one
        tied = b.get("margin_within_noise") and r is not None and r["tok_s_gpu"]
        if tied and r is not None:  # (tied has a runner-up: said again for the type checker)
            same = _slo_within_noise(f.slo_table, slo.name, b.get("workload") or "") or [r["label"]]
            text = (
                f"{head}: {_within_noise_of(b['label'] + (' (a baseline)' if b['baseline'] else ''), same, '')}; "
                f"{where}: {slo_mod.at_reach(b)}{_per(b['tok_s_gpu'], b['per'])}"
            )
        else:
            text = (
                f"{head}: deploy {b['label']}"
                + (" (a baseline)" if b["baseline"] else "")
                + f", {where}: {slo_mod.at_reach(b)}{_per(b['tok_s_gpu'], b['per'])}"
            )
        if r is not None and r["tok_s_gpu"]:
            text += (
                f", {render.margin(b['margin'], b.get('margin_low'), b.get('margin_high'))} over the "
                f"runner-up {r['label']} ({_per(r['tok_s_gpu'], r['per'])})"
            )
            if tied:
                text += ";"
        elif r is not None:
            text += ", the only configuration that meets it"
        if not b["baseline"]:
            if b["vs_baseline"] is not None:
                vs = render.margin(
                    b["vs_baseline"],
                    b.get("vs_baseline_low"),
                    b.get("vs_baseline_high"),
                    within_noise=b.get("vs_baseline_within_noise"),
                )
                text += f"{'' if text.endswith(';') else ','} {vs} over its baseline {b['baseline_label']}"
            elif b["baseline_label"]:
                text = text.removesuffix(";") + f"; its baseline {b['baseline_label']} meets it at no level"
        text = text.removesuffix(";")
        lines.append(text + ".")
    return lines


def _slo_within_noise(table: pl.DataFrame, slo: str, workload: str) -> list[str]:
    """The configurations within noise of an SLO's pick (each by its own judgement against the pick,
    ``slo_noise.margins``' ``vs_pick_*``), best first."""
    if "vs_pick_within_noise" not in table.columns:
        return []
    return (
        table.filter(
            (pl.col("slo") == slo) & (pl.col("workload") == workload) & pl.col("vs_pick_within_noise").fill_null(False)
        )
        .sort("rank")["label"]
        .to_list()
    )


def workloads(f: Findings) -> list[str]:
    """The workloads the findings hold (the client-side benchmark axes as ``axis=value``; [""] without any)."""
    found = [
        w
        for w in (f.single["workload"].unique(maintain_order=True).to_list() if "workload" in f.single.columns else [])
        if w is not None
    ]
    return sorted(found, key=natural_key) or [""]


def within(f: Findings, workload: str) -> Findings:
    """``f`` narrowed to one workload, every label the setup's (the label without the workload): what
    one workload's verdicts and picks are made from."""
    if "workload" not in f.single.columns:
        return f
    mine = f.single.filter(pl.col("workload") == workload)
    ids = mine["point_id"].implode()
    names = dict(zip(f.single["label"], f.single["setup"]))

    def narrow(frame: pl.DataFrame) -> pl.DataFrame:
        if "workload" in frame.columns:
            frame = frame.filter(pl.col("workload") == workload)
        elif "point_id" in frame.columns and frame.height:
            frame = frame.filter(pl.col("point_id").is_in(ids))
        return frame.with_columns(
            [
                pl.col(c).replace(names)
                for c in ("label", "baseline_label", "runner_up")
                if c in frame.columns and frame.schema[c] == pl.String
            ]
        )

    return replace(
        f,
        single=narrow(f.single),
        levels=narrow(f.levels),
        best=narrow(f.best),
        crossover=narrow(f.crossover),
        acceptance=narrow(f.acceptance),
        fastest=narrow(f.fastest),
        slo_table=narrow(f.slo_table),
        env=f.env.clear(),
    )


def headlines(f: Findings) -> list[str]:
    """The sweep's story in a few sentences (empty when nothing has been measured yet): per workload
    where the results hold several (each line then starts with ``workload=...:``), since two workloads
    are two traffic mixes on one server, never two setups to choose between."""
    names = workloads(f)
    lines = [f"{w}: {line}" if w else line for w in names for line in _headlines(within(f, w))]
    for (profile, reference), g in f.env.group_by(["profile", "reference"], maintain_order=True):
        if g["geomean_ratio"].drop_nulls().len():
            lines.append(_profile_line(profile, reference, g))
    if lines and f.level_noise is None and f.levels.height:  # the verdicts above assumed it: say so
        lines.append(f"Verdicts at a level: {noise.describe_level_noise(None)} (see Method).")
    return lines


def _within_noise_of(pick: str, others: list[str], what: str) -> str:
    """'no decision there: PICK measured highest, within noise of A, B': a claim about each pair (the pick and
    one other), none about two others between themselves (they may be apart beyond noise)."""
    shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
    return f"no decision{what}: {pick} measured highest, within noise of {shown}"


def _headlines(f: Findings) -> list[str]:
    lines: list[str] = slo_headlines(f) if not f.slo_table.is_empty() else []
    spec = f.single.filter(pl.col("speedup").is_not_null())
    if spec.height:
        # the best is the fastest (the tok/s one deploys for), baselines included; its ratio beside it
        top = (
            f.single.filter(pl.col("tok_s").is_not_null())
            .sort(["tok_s", "order"], descending=[True, False])
            .row(0, named=True)
        )
        ahead = spec.filter(pl.col("verdict") == "faster").height
        best = (
            f"the fastest is {top['label']} (a baseline) at {top['tok_s']:.1f} tok/s"
            if top["baseline"]
            else f"the fastest is {top['label']} at {top['tok_s']:.1f} tok/s"
            + (
                f", {_x(top['speedup'])} over {top['baseline_label']} ({top['verdict']})"
                if top["speedup"] is not None
                else ""
            )
        )
        if f.fastest.height and f.fastest["margin_within_noise"][0]:  # no pick: the two named, neither chosen
            r = f.fastest.row(0, named=True)
            best = (
                f"no decision on the fastest: {best.removeprefix('the fastest is ')} and {r['runner_up']} at "
                f"{r['runner_up_tok_s']:.1f} tok/s are within noise of each other: "
                f"{render.margin(r['margin'], r['margin_low'], r['margin_high'], digits=1)}"
            )
        lines.append(
            f"Single stream: {ahead} of {plural(spec.height, 'speculative configuration')} "
            f"{'is' if spec.height == 1 else 'are'} faster than {'its' if spec.height == 1 else 'their'} "
            f"baseline beyond noise; {best}."
        )
    measured = f.levels.filter(~pl.col("baseline") & pl.col("throughput_ratio").is_not_null())
    if measured.height:
        top_c = cast(int, measured["concurrency"].max())
        at_top = measured.filter(pl.col("concurrency") == top_c)
        behind = at_top.filter(pl.col("verdict") == "slower").height
        best_there = f.best.filter(pl.col("concurrency") == top_c)
        who = ""
        if best_there.height:
            b = best_there.row(0, named=True)
            if b["runner_up"] is not None and b["margin_within_noise"]:
                margin = render.margin(b["margin"], b["margin_low"], b["margin_high"])
                tied = _tied(f, top_c, b)
                who = f"; {_within_noise_of(b['label'], tied, ' there')} ({margin} over {b['runner_up']})"
            else:
                who = f"; the best there is {b['label']}" + (" (a baseline)" if b["baseline"] else "")
                if b["runner_up"] is not None:
                    margin = render.margin(b["margin"], b["margin_low"], b["margin_high"])
                    who += f", {margin} over the runner-up {b['runner_up']}"
        lines.append(
            f"At the highest concurrency measured (C={top_c}), {behind} of "
            f"{plural(at_top.height, 'speculative configuration')} {'is' if at_top.height == 1 else 'are'} "
            f"slower than {'its' if at_top.height == 1 else 'their'} baseline beyond noise{who}."
        )
    crossed = f.crossover.filter(
        pl.col("ahead_up_to").is_not_null() & pl.col("crossover").is_not_null() & ~pl.col("mixed")
    )
    if crossed.height:
        one = crossed.height == 1
        lines.append(
            f"Speculation stops paying {_span(crossed['crossover'])} ({crossed.height} "
            f"{'configuration that was' if one else 'configurations that were'} ahead of "
            f"{'its' if one else 'their'} baseline beyond noise at lower concurrency "
            f"{'falls' if one else 'fall'} behind it there)."
        )
    mixed = f.crossover.filter(pl.col("mixed"))
    if mixed.height:
        behind_at = measured.filter(
            (pl.col("verdict") == "slower") & pl.col("point_id").is_in(mixed["point_id"].implode())
        )
        one = mixed.height == 1
        lines.append(
            f"{plural(mixed.height, 'configuration')} {'is' if one else 'are'} mixed: behind "
            f"{'its' if one else 'their'} baseline beyond noise at some levels "
            f"({_span(behind_at['concurrency'], at=True)}) and ahead of it at a higher one (see Where "
            "speculation stops paying)."
        )
    broken = f.acceptance.filter(pl.col("verdict").is_in(["broken", "low"]))
    if broken.height:
        lines.append(
            f"{plural(broken.height, 'speculative point')} {'accepts' if broken.height == 1 else 'accept'} far less than a working drafter would "
            f"({', '.join(broken['label'].head(3))}{' ...' if broken.height > 3 else ''}): see Drafter "
            "acceptance for the likely causes."
        )
    return lines


def _tied(f: Findings, c: int, b: dict) -> list[str]:
    """The configurations at one level within noise of the pick there (their own judgement against it,
    ``Findings.pairs``), best first; the pick's runner-up where none is recorded."""
    workload = b.get("workload") or ""
    mine = (
        f.pairs.filter(
            (pl.col("concurrency") == c)
            & (pl.col("workload") == workload)
            & (pl.col("point_id") == b["point_id"])
            & (pl.col("verdict") == noise.Verdict.WITHIN_NOISE.value)
        )
        .join(
            f.levels.select(other_id="point_id", concurrency="concurrency", _v="output_throughput"),
            on=["other_id", "concurrency"],
            how="left",
        )
        .sort("_v", descending=True)
        if not f.pairs.is_empty()
        else pl.DataFrame({"other_label": []}, schema={"other_label": pl.String})
    )
    names = mine["other_label"].to_list()
    return names or [b["runner_up"]]


def _range(values: pl.Series) -> str:
    values = values.drop_nulls()
    lo, hi = cast(float, values.min()), cast(float, values.max())  # never empty here
    return _x(lo) if f"{lo:.2f}" == f"{hi:.2f}" else f"{_x(lo)} to {_x(hi)}"


def _profile_line(profile: str, reference: str, g: pl.DataFrame) -> str:
    """How a profile moved every curve: at every level (all ratios above 1) or not, and the shape of
    the shift, single stream, lowest and highest level, so that a lift that fades with load (NCCL
    tuning: all-reduce latency matters most to small batches) reads as such."""
    lifted = g.filter(pl.col("min_ratio") > 1).height
    not_lifted = g.filter(pl.col("min_ratio") <= 1)["min_ratio"]
    if lifted == g.height:
        verb = "lifts every curve"
    elif lifted == 0:  # "lifts 0 of 9 curves at every level: ... 1.05x to 1.40x" read as a contradiction
        one = g.height == 1
        verb = (
            f"{'does not lift the curve' if one else 'lifts no curve'} at every level ({'it is' if one else 'each is'} "
            f"at or below 1.00x at one level or more, lowest {_range(not_lifted)})"
        )
    else:
        verb = (
            f"lifts {lifted} of {plural(g.height, 'curve')} at every level (the other {not_lifted.len()} "
            f"{'is' if not_lifted.len() == 1 else 'are'} at or below 1.00x at one level or more, lowest "
            f"{_range(not_lifted)})"
        )
    parts = []
    if g["single_stream_ratio"].drop_nulls().len():
        parts.append(f"single stream {_range(g['single_stream_ratio'])}")
    low, high = g["ratio_min_level"].drop_nulls(), g["ratio_max_level"].drop_nulls()
    if low.len() and high.len() and (g["levels"].fill_null(0) > 1).any():
        parts.append(f"output throughput {_range(low)} at the lowest level and {_range(high)} at the highest")
        low_mid, high_mid = cast(float, low.median()), cast(float, high.median())
        if low_mid > high_mid * 1.05:
            parts.append("the lift fades with load")
        elif high_mid > low_mid * 1.05:
            parts.append("the lift grows with load")
    shape = f": {', '.join(parts)}" if parts else ""
    return (
        f"{profile} against {reference} {verb}{shape} (geometric mean over levels "
        f"{_range(g['geomean_ratio'])}, per configuration)."
    )
