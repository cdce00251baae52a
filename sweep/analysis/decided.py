"""What ``decide`` settled, in every frame of the report that makes the same comparison.

``decide`` (sweep/search/decide.py) judges a pick within noise on paired rounds of its own, never
pooled with the grid's figures (``repeats.grid_only``). Where a decision ended **decided** or
**equal** (``decisions.parquet``), its paired ratio and interval are THE judgement of that pair: the
frames that compare the same two configurations read it, so that no part of the report gives the pair
another verdict, and a pick changes only where a decision was decided the other way:

- an SLO's pick (``slo_table``): :func:`rerank_slo` before its margins are computed (the decided pick
  is rank 1), :func:`on_slo` after (its margin over the other is the decision's);
- a level's best (``best``): :func:`on_best` (the decided pick is the best, its margin the decision's);
- a pair at a level (``levels`` against a baseline, ``pairs``): :func:`on_levels`, :func:`on_pairs`.

A decision that ran out of budget changes nothing: the grid's figures and verdicts stand. Pure.
"""

from __future__ import annotations

from typing import cast

import polars as pl

from sweep.analysis import noise
from sweep.results import DECISIONS_SCHEMA

_SETTLED = ("decided", "equal")


def settled(decisions: pl.DataFrame | None) -> pl.DataFrame:
    """The decisions that ended decided or equal, with their ratio (pick / other) and its interval."""
    if decisions is None:  # no decisions table at all: an empty one, in its schema
        decisions = cast(pl.DataFrame, pl.from_arrow(DECISIONS_SCHEMA.empty_table()))
    return decisions.filter(
        pl.col("outcome").is_in(_SETTLED) & pl.col("low").is_not_null() & pl.col("high").is_not_null()
    ).select(
        "decision",
        "kind",
        pl.col("workload").fill_null(""),
        "pick_id",
        "other_id",
        "outcome",
        ratio=1 + pl.col("margin"),
        low=1 + pl.col("low"),
        high=1 + pl.col("high"),
    )


def _level_of(key: str) -> int | None:
    """The level of a level or pair decision's key (``level:C=8@w``, ``pair:a|b@C=8``)."""
    if key.startswith("level:C="):
        return int(key[len("level:C=") :].split("@")[0])
    if key.startswith("pair:") and "@C=" in key:
        return int(key.rsplit("@C=", 1)[1])
    return None


def level_verdicts(decisions: pl.DataFrame | None) -> pl.DataFrame:
    """Each settled decision of two configurations at one level (a level's best, a pair), in both
    orientations: point_id, other_id, concurrency, ratio (point / other), ci_low, ci_high, verdict
    (``noise.Verdict``; equal within the decision's margin where it ended equal)."""
    rows = []
    for r in settled(decisions).iter_rows(named=True):
        c = _level_of(r["decision"])
        if c is None:
            continue
        verdict = noise.Verdict.EQUAL if r["outcome"] == "equal" else noise.Verdict.AHEAD
        if verdict is noise.Verdict.AHEAD and r["high"] < 1:
            verdict = noise.Verdict.BEHIND
        rows.append((r["pick_id"], r["other_id"], c, r["ratio"], r["low"], r["high"], verdict.value))
        rows.append(
            (r["other_id"], r["pick_id"], c, 1 / r["ratio"], 1 / r["high"], 1 / r["low"], verdict.flipped().value)
        )
    return pl.DataFrame(
        rows,
        schema={
            "point_id": pl.String,
            "other_id": pl.String,
            "concurrency": pl.Int64,
            "ratio": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "verdict": pl.String,
        },
        orient="row",
    ).unique(["point_id", "other_id", "concurrency"], keep="last")


_OLD = {
    noise.Verdict.AHEAD.value: "faster",
    noise.Verdict.BEHIND.value: "slower",
    noise.Verdict.EQUAL.value: "within noise",
    noise.Verdict.WITHIN_NOISE.value: "within noise",
}


def _overridden(frame: pl.DataFrame, verdicts: pl.DataFrame, other: str, ratio: str, spelling=None) -> pl.DataFrame:
    """``frame``'s rows of a pair (point_id, ``other``, concurrency) that a settled decision compared:
    its ratio (into the column ``ratio``), interval and verdict (through ``spelling`` where given);
    ``_hit`` marks those rows."""
    verdict = pl.col("verdict")
    found = verdicts.select(
        "point_id",
        pl.col("other_id").alias(other),
        concurrency=pl.col("concurrency").cast(frame.schema["concurrency"]),
        _r="ratio",
        _lo="ci_low",
        _hi="ci_high",
        _v=verdict if spelling is None else verdict.replace_strict(spelling, default="within noise"),
    )
    hit = pl.col("_r").is_not_null()
    return (
        frame.join(found, on=["point_id", other, "concurrency"], how="left")
        .with_columns(
            pl.when(hit).then("_r").otherwise(ratio).alias(ratio),
            ci_low=pl.when(hit).then("_lo").otherwise("ci_low"),
            ci_high=pl.when(hit).then("_hi").otherwise("ci_high"),
            verdict=pl.when(hit).then("_v").otherwise("verdict"),
            _hit=hit,
        )
        .drop("_r", "_lo", "_hi", "_v")
    )


def on_levels(levels: pl.DataFrame, verdicts: pl.DataFrame) -> pl.DataFrame:
    """``speedups.level_speedups``' rows against their baseline where a settled decision compared the
    same two at that level: its ratio, interval and verdict (in the levels' spelling)."""
    if levels.is_empty() or verdicts.is_empty() or "baseline_id" not in levels.columns:
        return levels
    return (
        _overridden(levels, verdicts, "baseline_id", "throughput_ratio", _OLD)
        .with_columns(within_noise=pl.when("_hit").then(pl.col("verdict") == "within noise").otherwise("within_noise"))
        .drop("_hit")
    )


def on_pairs(pairs: pl.DataFrame, verdicts: pl.DataFrame) -> pl.DataFrame:
    """``Findings.pairs`` where a settled decision compared the same two at that level: its figures."""
    if pairs.is_empty() or verdicts.is_empty():
        return pairs
    return _overridden(pairs, verdicts, "other_id", "ratio").drop("_hit")


def on_best(best: pl.DataFrame, decisions: pl.DataFrame | None, levels: pl.DataFrame) -> pl.DataFrame:
    """``speedups.best_per_level`` with each settled level decision's pick as the best (its runner-up the
    other) and the decision's margin and interval; the new best's speedup and verdict against its
    baseline from ``levels`` (as overridden by :func:`on_levels`)."""
    done = settled(decisions).filter(pl.col("kind") == "level")
    if best.is_empty() or done.is_empty():
        return best
    w = "workload" in best.columns
    rows = best.to_dicts()
    by_point = {(r["point_id"], r["concurrency"]): r for r in levels.iter_rows(named=True)} if levels.height else {}
    for d in done.iter_rows(named=True):
        c = _level_of(d["decision"])
        for r in rows:
            if r["concurrency"] != c or (w and (r.get("workload") or "") != d["workload"]):
                continue
            if {r["point_id"], r["runner_up_id"]} != {d["pick_id"], d["other_id"]}:
                continue
            if r["point_id"] != d["pick_id"]:  # decided the other way: the runner-up is the best
                r["point_id"], r["runner_up_id"] = r["runner_up_id"], r["point_id"]
                r["label"], r["runner_up"] = r["runner_up"], r["label"]
                r["value"], r["runner_up_value"] = r["runner_up_value"], r["value"]
                mine = by_point.get((r["point_id"], c), {})
                r["baseline"] = mine.get("baseline", r.get("baseline"))
                r["speedup"] = mine.get("throughput_ratio")
                r["verdict"] = mine.get("verdict")
            r["margin"], r["margin_low"], r["margin_high"] = d["ratio"] - 1, d["low"] - 1, d["high"] - 1
            r["margin_within_noise"] = d["outcome"] == "equal"
    return pl.DataFrame(rows, schema=best.schema)


def rerank_slo(table: pl.DataFrame, decisions: pl.DataFrame | None) -> pl.DataFrame:
    """``slo.slo_table`` with each SLO decided the other way ranked so: the decision's pick first, the
    grid's pick second (before ``slo_noise.margins``, which then measures the new pick's margins)."""
    done = settled(decisions).filter((pl.col("kind") == "slo") & (pl.col("outcome") == "decided"))
    if table.is_empty() or done.is_empty():
        return table
    out = table
    for d in done.iter_rows(named=True):
        mine = _slo_rows(out, d)
        if mine.is_empty():
            continue
        first = mine.sort("rank").row(0, named=True)
        if first["point_id"] == d["pick_id"]:
            continue
        pick = mine.filter(pl.col("point_id") == d["pick_id"])
        if pick.is_empty():
            continue
        old, new = int(first["rank"]), int(pick["rank"][0])
        sel = _slo_sel(out, d)
        out = out.with_columns(
            rank=pl.when(sel & (pl.col("point_id") == d["pick_id"]))
            .then(pl.lit(old, out.schema["rank"]))
            .when(sel & (pl.col("point_id") == first["point_id"]))
            .then(pl.lit(new, out.schema["rank"]))
            .otherwise("rank")
        )
        # the group's rows in rank order, in the places its rows had (the other SLOs' rows stay put)
        at = out.with_row_index("_i").filter(sel)["_i"].to_list()
        order = out.with_row_index("_i").filter(sel).sort("rank")["_i"].to_list()
        places = list(range(out.height))
        for i, j in zip(at, order):
            places[i] = j
        out = out[places]
    return out


def on_slo(table: pl.DataFrame, decisions: pl.DataFrame | None) -> pl.DataFrame:
    """``slo_noise.margins``' table with each settled SLO decision's margin and interval on its pick's row
    (over the other) and on the other's row (``vs_pick_*``)."""
    done = settled(decisions).filter(pl.col("kind") == "slo")
    if table.is_empty() or done.is_empty() or "margin_low" not in table.columns:
        return table
    out = table
    for d in done.iter_rows(named=True):
        sel = _slo_sel(out, d)
        equal = d["outcome"] == "equal"
        pick, other = sel & (pl.col("point_id") == d["pick_id"]), sel & (pl.col("point_id") == d["other_id"])
        out = out.with_columns(
            margin=pl.when(pick).then(pl.lit(d["ratio"] - 1)).otherwise("margin"),
            margin_low=pl.when(pick).then(pl.lit(d["low"] - 1)).otherwise("margin_low"),
            margin_high=pl.when(pick).then(pl.lit(d["high"] - 1)).otherwise("margin_high"),
            margin_within_noise=pl.when(pick).then(pl.lit(equal)).otherwise("margin_within_noise"),
            vs_pick_low=pl.when(other).then(pl.lit(d["low"] - 1)).otherwise("vs_pick_low"),
            vs_pick_high=pl.when(other).then(pl.lit(d["high"] - 1)).otherwise("vs_pick_high"),
            vs_pick_within_noise=pl.when(other).then(pl.lit(equal)).otherwise("vs_pick_within_noise"),
        )
    return out


def _slo_name(d: dict) -> str:
    return d["decision"][len("slo:") :].split("@")[0]


def _slo_sel(table: pl.DataFrame, d: dict) -> pl.Expr:
    sel = pl.col("slo") == _slo_name(d)
    if "workload" in table.columns:
        sel = sel & (pl.col("workload").fill_null("") == d["workload"])
    return sel


def _slo_rows(table: pl.DataFrame, d: dict) -> pl.DataFrame:
    return table.filter(_slo_sel(table, d))
