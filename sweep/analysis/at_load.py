"""The answer at one load: ``python -m sweep report DIR --at C=40`` (or ``--rate 3/s``).

The sweep measured each configuration at a few concurrency levels; a user's load is one number,
often between two of them. This reads the measured curves (``Findings.levels``, at the real system's
speed) and says, for that load:

- whether it was measured (a level of the sweep), lies between two measured levels (each
  configuration's figure interpolated linearly in log concurrency, as the SLO boundaries are, and
  said so), or lies outside them (nothing extrapolated: the nearest level measured is named instead);
- the setup with the most output tok/s there, and its runner-up; its 95% interval over the runner-up
  where a level measured it (``best_per_level``), else the intervals at the two levels around it;
- each speculative policy there: what its plain table runs at that load, and the adaptive server's
  tier (keyed by batch size) for the measured level at or below it;
- each SLO's pick and up to which load it meets the SLO (whether this load is within it).

A rate (requests/s, an open-loop arrival rate) is met by a configuration at the concurrency where
its measured request throughput reaches it (Little's law, read off its own curve); every
configuration that keeps up serves the same requests, so the better one is the faster per user there
(per-request output tok/s), and one that does not keep up at any level measured is named as such.
Where the sweep offered that very rate open loop (``benchmark.workload`` arrivals), what each
configuration did there comes first: measured, not read off a curve. Pure: frames in, lines out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import polars as pl

from sweep.analysis import realspeed, render, repeats
from sweep.analysis import slo as slo_mod
from sweep.analysis.deploy import preferred
from sweep.analysis.findings import Findings
from sweep.analysis.frames import Tables
from sweep.core import SLOError


@dataclass(frozen=True)
class _Curve:
    label: str
    levels: list[int]
    values: list[float]


def parse_concurrency(text: str) -> float:
    """``C=40``, ``c=40`` or ``40`` -> 40.0; anything else (or not above 0) is an SLOError (exit 7)."""
    m = re.fullmatch(r"\s*(?:[cC]\s*=\s*)?([0-9]*\.?[0-9]+)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise SLOError(
            f"--at {text!r} is not a concurrency", fix="give it as C=40 (requests in flight), or use --rate 3/s"
        )
    return float(m.group(1))


def parse_rate(text: str) -> float:
    """``3/s``, ``3``, ``180/min``, ``0.5 req/s`` -> requests per second; else an SLOError (exit 7)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(?:req(?:uests)?)?\s*(?:/\s*(s|sec|min|m|h))?\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise SLOError(
            f"--rate {text!r} is not a request rate", fix="give it as 3/s, 180/min or 0.5 (requests per second)"
        )
    per = {"s": 1, "sec": 1, None: 1, "min": 60, "m": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) / per


def _interp(c: float, levels: list[int], values: list[float]) -> tuple[float | None, tuple[int, int] | None]:
    """The value at ``c`` on a measured curve: at a level, that level's; between two, linear in log C
    (with the two levels); outside the levels measured, None."""
    for lv, v in zip(levels, values):
        if lv == c:
            return v, None
    for (c0, v0), (c1, v1) in zip(zip(levels, values), zip(levels[1:], values[1:])):
        if c0 < c < c1:
            frac = (math.log(c) - math.log(c0)) / (math.log(c1) - math.log(c0))
            return v0 + frac * (v1 - v0), (c0, c1)
    return None, None


def _curves(levels: pl.DataFrame, column: str) -> dict[str, list[_Curve]]:
    """workload -> each configuration's measured curve of ``column`` over concurrency (closed loop)."""
    name = "setup" if "setup" in levels.columns else "label"
    rows = (
        levels.filter((pl.col("concurrency") > 0) & pl.col(column).is_not_null())
        .sort("order", "concurrency")
        .group_by(["workload", name], maintain_order=True)
        .agg(pl.col("concurrency"), pl.col(column))
    )
    out: dict[str, list[_Curve]] = {}
    for r in rows.iter_rows(named=True):
        out.setdefault(r["workload"] or "", []).append(_Curve(r[name], list(r["concurrency"]), list(r[column])))
    return out


def _measured_pick(f: Findings, workload: str, c: int) -> str:
    """'at C=30 (measured): X, 1,234 output tok/s, +3% (95% interval -2% .. +8%, within noise) over Y'."""
    b = f.best.filter((pl.col("concurrency") == c) & (pl.col("workload").fill_null("") == workload))
    if b.is_empty():
        return f"C={c}: no pick"
    r = b.row(0, named=True)
    text = (
        f"C={c}: {r['label']}{' (no speculation)' if r['baseline'] else ''}, {render.num(r['value'], 0)} output tok/s"
    )
    if r["runner_up"] is not None and r["margin"] is not None:
        noise = ", within noise" if r["margin_within_noise"] else ""
        text += f", {render.margin(r['margin'], r['margin_low'], r['margin_high'])}{noise} over {r['runner_up']}"
    return text


def _where(c: float, levels: list[int], around: tuple[int, int] | None) -> str:
    if c in levels:
        return f"C={c:g} was measured"
    if around is not None:
        return (
            f"C={c:g} was not measured: it lies between the measured levels C={around[0]} and C={around[1]}, "
            "so each figure at it is interpolated (linearly in log concurrency) from those two"
        )
    if c < levels[0]:
        return f"C={c:g} is below the lowest level measured (C={levels[0]}): nothing is extrapolated"
    return f"C={c:g} is beyond the highest level measured (C={levels[-1]}): nothing is extrapolated"


def _policy_lines(f: Findings, c: float, workload: str) -> list[str]:
    """Per policy: what its plain table runs at ``c`` (concurrency ranges), and the adaptive server's
    tier that serves the batches of the measured level at or below ``c`` (tiers are keyed by batch
    size, not by concurrency)."""
    out = []
    for p in preferred(f):
        plain = p.plain_table()
        if (p.workload or "") != workload or not plain:
            continue
        row = next((r for r in reversed(plain) if r["lo"] <= c), None)
        if row is None:
            out.append(f"- Policy {p.group}: its plain table starts at C={plain[0]['lo']}, above C={c:g}.")
            continue
        span = f"C>={row['lo']}" if row["to"] is None else f"C={row['lo']}-{row['to']}"
        runs = "no speculation" if row["steps"] == 0 else f"{p.step_axis}={row['steps']}"
        beyond = f"; measured up to C={p.levels[-1].concurrency}" if p.levels and c > p.levels[-1].concurrency else ""
        text = f"- Policy {p.group}: at C={c:g} its plain table runs {runs} (its range {span}{beyond})"
        level = max((lv for t in p.tiers for lv in t.levels if lv <= c), default=None)
        tier = next((t for t in p.tiers if level in t.levels), None)
        if tier is not None:
            steps = "/".join(str(k) for k in tier.candidate_steps)
            text += f"; its adaptive server serves C={level}'s {tier.batches_text()} with {p.step_axis} {steps}"
        out.append(text + ".")
    return out


def _slo_lines(f: Findings, c: float, workload: str) -> list[str]:
    if not f.slos or not f.slo_table.height:
        return []
    out = []
    for rec in slo_mod.recommendations(f.slo_table, f.slos):
        if (rec.get("workload") or "") != workload:
            continue
        b = rec["best"]
        if b is None:
            out.append(f"- SLO {rec['slo'].name}: {rec['reason']}.")
            continue
        name = b.get("setup") or b["label"]
        if b["bound"] == "=":
            holds = "within its reach" if c <= b["c"] else "beyond its reach"
            out.append(f"- SLO {rec['slo'].name}: {name} meets it {slo_mod.reach_text(b)}; C={c:g} is {holds}.")
        else:
            out.append(f"- SLO {rec['slo'].name}: {name} meets it at every level measured (C{b['c_text']}).")
    return out


def at_concurrency(f: Findings, c: float) -> list[str]:
    """What to run at concurrency ``c``, per workload (see the module's doc)."""
    curves = _curves(f.levels, "output_throughput")
    if not curves:
        return ["Nothing measured yet: no point has finished its benchmark."]
    out: list[str] = []
    for workload, mine in curves.items():
        head = f"[{workload}] " if workload else ""
        levels = sorted({lv for cv in mine for lv in cv.levels})
        at = {cv.label: _interp(c, cv.levels, cv.values) for cv in mine}
        ranked = sorted(((v, lab) for lab, (v, _) in at.items() if v is not None), reverse=True)
        around = next((a for v, a in at.values() if a is not None), None)
        out.append(f"{head}{_where(c, levels, around)}.")
        if not ranked:
            nearest = levels[0] if c < levels[0] else levels[-1]
            out.append(f"- Nearest measured: {_measured_pick(f, workload, nearest)}.")
        elif c in levels:
            out.append(f"- Best: {_measured_pick(f, workload, int(c))}.")
        else:
            (v, best), rest = ranked[0], ranked[1:]
            runner = (
                f"; runner-up {rest[0][1]} ≈ {render.num(rest[0][0], 0)} ({v / rest[0][0] - 1:+.0%})" if rest else ""
            )
            out.append(f"- Best, interpolated: {best} ≈ {render.num(v, 0)} output tok/s{runner}.")
            if around is not None:
                out.append(
                    f"- How sure, at the measured levels around it: {_measured_pick(f, workload, around[0])}; "
                    f"{_measured_pick(f, workload, around[1])}."
                )
            missing = sorted(lab for lab, (val, _) in at.items() if val is None)
            if missing:
                out.append(f"- Not measured on both sides of C={c:g}: {', '.join(missing)}.")
        out += _policy_lines(f, c, workload) + _slo_lines(f, c, workload)
    return out


def request_rates(tables: Tables) -> pl.DataFrame:
    """point_id, concurrency, request_throughput (requests/s, at the real system's speed as the
    findings are; a level's repeats pooled as there): what ``at_rate`` reads a rate off."""
    real, _ = realspeed.at_real_speed(repeats.pooled(tables))
    return (
        real["levels"]
        .filter(pl.col("concurrency") > 0)
        .select("point_id", "concurrency", "request_throughput")
        .collect()
        .unique(["point_id", "concurrency"], keep="last")
    )


def at_rate(f: Findings, rates: pl.DataFrame, rate: float) -> list[str]:
    """What to run at ``rate`` requests/s, per workload (see the module's doc); ``rates``: the
    levels' request throughput (``request_rates``)."""
    levels = f.levels.join(
        rates.with_columns(pl.col("concurrency").cast(f.levels.schema["concurrency"])),
        on=["point_id", "concurrency"],
        how="left",
    )
    thr = _curves(levels, "request_throughput")
    speed = _curves(levels, "per_request_tok_s")
    if not thr:
        return ["Nothing measured yet: no point has finished its benchmark."]
    out: list[str] = _open_loop_lines(f, rate)
    for workload, mine in thr.items():
        head = f"[{workload}] " if workload else ""
        speeds = {cv.label: cv for cv in speed.get(workload, [])}
        rows: list[tuple[float, str, tuple[int, int] | None, float, bool]] = []
        short = []
        for cv in mine:
            top = max(cv.values)
            if top < rate:
                short.append(f"{cv.label} (at most {top:.2f} req/s, at C={cv.levels[cv.values.index(top)]})")
                continue
            curve = speeds.get(cv.label)
            if curve is None:
                continue
            if rate <= cv.values[0]:  # its lowest level serves more already: the nearest level measured
                rows.append((curve.values[0], cv.label, None, float(cv.levels[0]), True))
                continue
            i = next(i for i in range(1, len(cv.values)) if cv.values[i] >= rate)
            (c0, r0), (c1, r1) = (cv.levels[i - 1], cv.values[i - 1]), (cv.levels[i], cv.values[i])
            if r1 == rate:
                c, between = float(c1), None
            else:  # the concurrency where it reaches the rate, linear in log C between the two levels
                frac = (rate - r0) / (r1 - r0)
                c, between = math.exp(math.log(c0) + frac * (math.log(c1) - math.log(c0))), (c0, c1)
            s = _interp(c, curve.levels, curve.values)[0]
            if s is not None:
                rows.append((s, cv.label, between, c, False))
        out.append(
            f"{head}At {rate:g} requests/s: each configuration at the concurrency where its measured request "
            "throughput reaches the rate (closed-loop levels; between two levels, interpolated in log C), "
            "the faster per user first:"
        )
        ranked = sorted(rows, key=lambda r: -r[0])
        for s, label, between, c, below in ranked[:_SHOWN]:
            if below:
                where = f"below its lowest level (C={c:g} serves more): at least its per-user speed there"
            elif between is None:
                where = f"at C={c:g}, measured"
            else:
                where = f"at C≈{c:.3g}, between the measured levels C={between[0]} and C={between[1]} (interpolated)"
            out.append(f"- {label}: {render.num(s, 1)} tok/s per user, {where}.")
        if len(ranked) > _SHOWN:
            out.append(f"- {len(ranked) - _SHOWN} more that keep up, slower per user.")
        if ranked:
            how = "interpolated between levels" if any(r[2] for r in ranked[:2]) else "each from one level"
            out.append(
                f"- Best: {ranked[0][1]}: every configuration listed keeps up with the rate, so the faster per "
                f"user wins (no interval: the figures are {how})."
            )
        if short:
            out.append(f"- Cannot keep up at any level measured: {', '.join(short)}.")
    return out


_SHOWN = 5  # configurations listed at a rate


def _open_loop_lines(f: Findings, rate: float) -> list[str]:
    """Where the sweep offered this very rate open loop (benchmark.workload arrivals), what each
    configuration did there: measured, not read off a curve."""
    if f.open_levels.is_empty():
        return []
    at = f.open_levels.filter((pl.col("offered_rate") - rate).abs() <= 1e-6 * rate)
    if at.is_empty():
        offered = sorted(set(f.open_levels["offered_rate"].drop_nulls().to_list()))
        return [f"Open-loop rates measured: {', '.join(f'{r:g}' for r in offered)} req/s; {rate:g} is not one of them."]
    out = [f"Measured open loop at {rate:g} requests/s:"]
    for r in at.sort(pl.col("kept_up").not_(), "tpot_p50_s").iter_rows(named=True):
        kept = "kept up" if r["kept_up"] else "fell behind (its queue grew)"
        tpot = "-" if r["tpot_p50_s"] is None else f"{r['tpot_p50_s'] * 1000:.0f} ms"
        out.append(f"- {r['label']}: {kept}, TPOT p50 {tpot}, {render.num(r['output_throughput'], 0)} output tok/s.")
    return out
