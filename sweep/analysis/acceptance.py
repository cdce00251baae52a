"""Acceptance that says "broken": per speculative point with a drafter, how much of what it drafts
the target accepts, per draft position where that can be known, and a verdict.

What SGLang reports: ``spec_accept_length`` (tokens per verify step, the bonus token included) in
``/metrics``, ``/server_info`` and every response's ``meta_info``; ``spec_accept_rate`` (accepted /
proposed drafts) in ``/metrics`` and ``meta_info``; and only in each response's ``meta_info`` the
per-position story, ``spec_accept_histogram`` (entry k: verify steps that accepted exactly k
drafts; ``spec_correct_drafts_histogram`` since 0.5.23). The levels table keeps the first two
(``accept_length_*``, ``metrics_spec_accept_*``); the requests table keeps each request's histogram
(``spec_accept_histogram``: /generate only, null on the OpenAI routes), and summed over a point's
requests it gives the per-position rates.

The first position's accept rate ``p1`` comes from that histogram, else from the same drafter's
steps=1 point (its accepted drafts per verify *are* p1). A chain of ``s`` steps whose positions
accept like the first would reach ``1 + p1 + p1^2 + ... + p1^s`` tokens per verify: far below
that (under half the predicted gain) is ``low``; an accept rate under 5 % is ``broken``. Both name
the likely causes (sweep/sglang/drafter.py's checks, and what the pre-flight found for that point).
"""

from __future__ import annotations

import polars as pl

from sweep.analysis.frames import Tables, configurations, points_frame
from sweep.core import ServerFlags, plural
from sweep.results import server_flags

NEAR_ZERO = 0.05  # accept rate (accepted / proposed drafts) under which a drafter is "broken"
FAR_BELOW = 0.5  # accepted drafts per verify under this share of the first position's prediction: "low"
_DRAFTER_ALGORITHMS = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}

_CAUSES = (
    "weights SGLang did not load (layers.0.* vs midlayer.*, a module./_orig_mod. prefix: dropped without "
    "a word, left uninitialized), the wrong target layers (eagle_aux_hidden_state_layer_ids, or SGLang's "
    "default when absent), a drafter trained for another target (hidden size, vocabulary, d2t/t2d), or an "
    "EAGLE-3 drafter under EAGLE; `python -m sweep check-drafter TARGET DRAFTER` checks all of them"
)


def spec_shape(flags: ServerFlags, resolved: dict | None = None) -> dict:
    """algorithm, steps, topk, draft_tokens and draft positions per verify of a point (positions:
    drafts proposed per verify step: steps for a chain, draft tokens - 1 for a tree): from the plan's
    resolution of SGLang's arguments (the points table's ``resolved``), else (a results directory
    written before it was recorded) from the server's flags as given."""
    algorithm: str | None
    if resolved and resolved.get("algorithm"):
        algorithm, steps, topk = str(resolved["algorithm"]).upper(), resolved.get("steps"), resolved.get("topk")
        tokens = resolved.get("draft_tokens")
    else:
        algorithm, steps, topk, tokens = flags.algorithm, flags.steps, flags.topk, flags.draft_tokens
    positions: int | None
    if topk in (None, 1) and steps is not None:
        positions = steps  # topk 1: SGLang makes draft tokens steps + 1
    else:
        positions = tokens - 1 if tokens else None
    return {
        "algorithm": algorithm,
        "steps": steps,
        "topk": topk or 1,
        "draft_tokens": tokens,
        "positions": positions,
        "drafter_path": flags.draft_model_path,
    }


def position_rates(histogram: list[int] | None, depth: int | None = None) -> list[float | None]:
    """Accept rate at each draft position from SGLang's ``spec_accept_histogram`` (entry k: verify
    steps that accepted exactly k drafts): position k's rate is how many verifies got at least k
    of those that got at least k-1. SGLang's histogram ends at the most drafts one verify accepted;
    with ``depth`` (the most it can accept) the positions past that end are there too, at 0."""
    h = [int(x or 0) for x in (histogram or [])]
    if not h or sum(h) == 0:
        return []
    if depth is not None and len(h) < depth + 1:
        h += [0] * (depth + 1 - len(h))
    reached = [sum(h[k:]) for k in range(len(h))]
    return [reached[k] / reached[k - 1] if reached[k - 1] else None for k in range(1, len(h))]


def _depth(shape: dict) -> int | None:
    """The most drafts one verify can accept: the chain's (or tree's) depth."""
    if shape["steps"] is None:
        return shape["positions"]
    return min(shape["steps"], shape["positions"]) if shape["positions"] else shape["steps"]


def chain_prediction(p1: float | None, positions: int | None) -> float | None:
    """Tokens per verify of a chain of ``positions`` drafts that each accept like the first."""
    if p1 is None or not positions:
        return None
    return 1 + sum(p1**k for k in range(1, positions + 1))


def _median(values) -> float | None:
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    m = len(vals) // 2
    return vals[m] if len(vals) % 2 else (vals[m - 1] + vals[m]) / 2


def _histograms(tables: Tables) -> dict[str, list[int]]:
    """Per point, the sum of its requests' ``spec_accept_histogram`` (where the requests table has one)."""
    requests = tables["requests"]
    if "spec_accept_histogram" not in requests.collect_schema().names():
        return {}
    out: dict[str, list[int]] = {}
    rows = (
        requests.filter(pl.col("ok").fill_null(False) & (pl.col("phase") != "warmup"))
        .select("point_id", "spec_accept_histogram")
        .collect()
    )
    for pid, hist in rows.iter_rows():
        acc = out.setdefault(pid, [])
        for k, v in enumerate(hist or []):
            if k >= len(acc):
                acc.append(0)
            acc[k] += int(v or 0)
    return out


def acceptance(tables: Tables) -> pl.DataFrame:
    """One row per speculative point with a drafter: its acceptance and a verdict.

    Columns: point_id, label, drafter, status, algorithm, steps, topk, positions, accept_length
    (tokens per verify: the levels' median, else the single-stream runs'), accept_from (which: levels |
    single stream), accepted (drafts per
    verify: accept_length - 1), accept_rate (the server's, else accepted / positions),
    position_rates (per draft position, from the server's histogram; empty without one), first_rate
    and first_source (histogram | steps=1 point), predicted_length (1 + p1 + ... + p1^positions,
    chains only), vs_predicted (accepted / predicted gain), verdict (broken | low | ok; null when
    nothing was measured), aux_layers and drafter_checks (the pre-flight's), causes.
    """
    points = points_frame(tables)
    conf = configurations(tables).select("point_id", "label", "drafter", "profile", "group", "workload", "order")
    if not points.height:
        return empty()
    cols = set(points.columns)
    levels = tables["levels"].collect()
    single = tables["single_stream"].collect()
    hists = _histograms(tables)
    lengths = {}
    for pid, g in levels.group_by("point_id"):
        pid = pid[0]
        per_level = (
            g.select(
                pl.coalesce(
                    *[
                        c
                        for c in (
                            "accept_length_requests",
                            "accept_length_metrics",
                            "accept_length_server",
                            "metrics_spec_accept_length",
                        )
                        if c in g.columns
                    ]
                )
            )
            .to_series()
            .to_list()
        )
        accept_rates = g["metrics_spec_accept_rate"].to_list() if "metrics_spec_accept_rate" in g.columns else []
        lengths[pid] = (_median(per_level), _median(accept_rates))
    single_len = {pid[0]: _median(g["accept_length"].to_list()) for pid, g in single.group_by("point_id")}
    meta = {r["point_id"]: r for r in conf.iter_rows(named=True)}
    rows = []
    for p in points.iter_rows(named=True):
        shape = spec_shape(server_flags(p), p.get("resolved"))
        if p.get("baseline") or shape["algorithm"] not in _DRAFTER_ALGORITHMS:
            continue
        length, rate = lengths.get(p["point_id"], (None, None))
        source = "levels" if length is not None else "single stream"
        length = length if length is not None else single_len.get(p["point_id"])
        accepted = None if length is None else max(length - 1, 0.0)
        if rate is None and accepted is not None and shape["positions"]:
            rate = accepted / shape["positions"]
        m = meta.get(p["point_id"], {})
        rows.append(
            {
                "point_id": p["point_id"],
                "label": p["label"],
                "drafter": m.get("drafter"),
                "profile": m.get("profile"),
                "group": m.get("group"),
                "workload": m.get("workload"),
                "order": m.get("order"),
                "status": p["status"],
                **{k: shape[k] for k in ("algorithm", "steps", "topk", "positions")},
                "accept_length": length,
                "accept_from": None if length is None else source,
                "accepted": accepted,
                "accept_rate": rate,
                "position_rates": position_rates(hists.get(p["point_id"]), _depth(shape)),
                "aux_layers": p.get("drafter_aux_layers") if "drafter_aux_layers" in cols else None,
                "drafter_checks": list(p.get("drafter_checks") or []) if "drafter_checks" in cols else [],
            }
        )
    if not rows:
        return empty()
    # the first position: the histogram's, else the same drafter's steps=1 chain (same profile, group, workload)
    firsts = {
        (r["drafter"], r["profile"], r["group"], r["workload"], r["algorithm"]): r["accepted"]
        for r in rows
        if r["steps"] == 1 and r["topk"] == 1 and r["accepted"] is not None
    }
    for r in rows:
        rates = [x for x in r["position_rates"] if x is not None]
        if rates:
            r["first_rate"], r["first_source"] = rates[0], "histogram"
        else:
            p1 = firsts.get((r["drafter"], r["profile"], r["group"], r["workload"], r["algorithm"]))
            r["first_rate"], r["first_source"] = (min(p1, 1.0), "steps=1 point") if p1 is not None else (None, None)
        chain = r["topk"] == 1
        r["predicted_length"] = chain_prediction(r["first_rate"], r["positions"]) if chain else None
        gain = None if r["predicted_length"] is None else r["predicted_length"] - 1
        r["vs_predicted"] = r["accepted"] / gain if gain and r["accepted"] is not None else None
        r["verdict"], r["causes"] = _verdict(r)
    frame = pl.DataFrame(
        rows, schema=SCHEMA | {"profile": pl.String, "group": pl.String, "order": pl.Int64}, strict=False
    )
    return frame.sort("order", nulls_last=True).select(list(SCHEMA))


SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "point_id": pl.String,
    "label": pl.String,
    "drafter": pl.String,
    "status": pl.String,
    "algorithm": pl.String,
    "steps": pl.Int64,
    "topk": pl.Int64,
    "positions": pl.Int64,
    "accept_length": pl.Float64,
    "accept_from": pl.String,
    "accepted": pl.Float64,
    "accept_rate": pl.Float64,
    "position_rates": pl.List(pl.Float64),
    "first_rate": pl.Float64,
    "first_source": pl.String,
    "predicted_length": pl.Float64,
    "vs_predicted": pl.Float64,
    "verdict": pl.String,
    "aux_layers": pl.List(pl.Int64),
    "drafter_checks": pl.List(pl.String),
    "causes": pl.String,
}


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def _verdict(r: dict) -> tuple[str | None, str | None]:
    if r["accepted"] is None:
        return None, None
    said = [c for c in r["drafter_checks"] if c.startswith(("warning", "error"))]
    why = (f"the pre-flight warned: {'; '.join(said)}; other likely causes: " if said else "likely causes: ") + _CAUSES
    if r["aux_layers"] is not None:
        why += f" (this drafter reads target layers {list(r['aux_layers'])})"
    if r["accept_rate"] is not None and r["accept_rate"] < NEAR_ZERO:
        return "broken", why
    if r["vs_predicted"] is not None and r["vs_predicted"] < FAR_BELOW:
        return "low", why
    return "ok", None


def flagged_lines(frame: pl.DataFrame) -> list[str]:
    """One sentence per broken or low point: what was measured against what, and the likely causes."""
    out = []
    for r in frame.filter(pl.col("verdict").is_in(["broken", "low"])).iter_rows(named=True):
        rate = f"accept rate {r['accept_rate']:.0%}" if r["accept_rate"] is not None else "accept rate unknown"
        what = (
            f"{r['label']}: {rate} over {plural(r['positions'], 'draft position')}, accept length "
            f"{r['accept_length']:.2f}"
        )
        if r["verdict"] == "broken":
            what += ": acceptance near zero, a broken drafter"
        else:
            what += (
                f", {r['vs_predicted']:.0%} of the gain its first position predicts ("
                f"{r['first_rate']:.0%} at position 1, from its {r['first_source']}: "
                f"{r['predicted_length']:.2f} expected)"
            )
        out.append(f"{what}; {r['causes']}.")
    return out
