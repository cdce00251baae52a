"""The report's opening: what to deploy, on one screen, and the policy's own section below it.

``deploy_section`` answers first (a reader who stops there has the answer): per SLO the setup to
run, up to which load and how sure; the speculative policy across load (sweep/analysis/policy.py)
for the groups that matter most (those holding an SLO's pick, then the largest gain), as the config
file to copy (``policy-<slug>.json`` beside report.md), its launch flags, and the plain table where
the sweep's SGLang lacks the flags; phantom speedups (sweep/analysis/phantom.py); and, where the
policy's own server was measured (a confirmation point), how it did per level against the best
single static setup, the envelope and the baseline. ``policy_sections`` holds the evidence: every
policy's tiers, predicted throughput per level and plain table.
"""

from __future__ import annotations

import json

import polars as pl

from sweep.analysis import phantom, render
from sweep.analysis import policy as policy_mod
from sweep.analysis import slo as slo_mod
from sweep.analysis.findings import Findings
from sweep.analysis.frames import natural_key
from sweep.analysis.render import Section

SHOWN = 2  # policies on the first screen; the rest in the Speculative policy section


def _config_name(p: policy_mod.Policy) -> str:
    return f"policy-{p.slug()}.json"


def config_files(policies: list[policy_mod.Policy], f: Findings | None = None) -> dict[str, str]:
    """{file name: SGLang's adaptive config as JSON} for every policy (written beside report.md); with
    the findings, a policy whose revision was measured gets the revision's config (what Deploy names)."""
    out = {}
    for p in policies:
        r = _proven(p, f) if f is not None and p.confirmation_ids else None
        out[_config_name(p)] = (r.policy if r is not None else p).config_json()
    return out


def preferred(f: Findings) -> list[policy_mod.Policy]:
    """The policies of the user's workload where the sweep has one and a built-in one too (else all),
    ordered: those holding an SLO's pick first, then by their largest predicted gain over the baseline."""
    policies = list(f.policies)
    user = {w for w in f.policy_workloads.get("user", [])}
    if user and any(p.workload in user for p in policies):
        policies = [p for p in policies if p.workload in user]
    picks = set(f.slo_table.filter(pl.col("rank") == 1)["point_id"].to_list()) if f.slo_table.height else set()

    def gain(p: policy_mod.Policy) -> float:
        return max(
            (lv.policy_tok_s / lv.baseline_tok_s for lv in p.levels if lv.policy_tok_s and lv.baseline_tok_s),
            default=0.0,
        )

    return sorted(
        policies, key=lambda p: (not (picks & set(p.member_ids + p.confirmation_ids)), -gain(p), natural_key(p.group))
    )


def _steps(cands: tuple[int, ...]) -> str:
    if cands == (0,):
        return "none"
    return "/".join(str(k) for k in cands)


def _range(lo: int, to: int | None) -> str:
    if to is None:
        return f"C>={lo}"
    return f"C={lo}" if lo == to else f"C={lo}-{to}"


def _tiers_text(p: policy_mod.Policy) -> str:
    """'C=1-2 (batches 1-2): steps=3 · C>=8 (batches >= 3): steps=1': per tier its levels, the decode
    batch sizes SGLang routes to it, and its step count (several: SGLang's candidates)."""
    parts = []
    for i, t in enumerate(p.tiers):
        last = i + 1 == len(p.tiers)
        levels = t.levels or (t.lo,)
        where = f"C>={levels[0]}" if last else _range(levels[0], levels[-1])
        steps = "/".join(str(k) for k in t.candidate_steps)
        parts.append(f"{where} ({t.batches_text()}): {p.step_axis}={steps}")
    return " · ".join(parts)


def _plain_text(p: policy_mod.Policy) -> str:
    return " · ".join(
        f"{_range(r['lo'], r['to'])}: " + (f"steps={r['steps']}" if r["steps"] else "no speculation")
        for r in p.plain_table()
    )


def _pct(lo: float | None, hi: float | None) -> str:
    return "no interval" if lo is None or hi is None else f"95% interval {render.bound(lo)} .. {render.bound(hi)}"


def _slo_line(rec: slo_mod.Recommendation) -> str:
    slo = rec["slo"]
    head = f"SLO {slo.name}" + (f" [{rec['workload']}]" if rec.get("workload") else "")
    if rec["best"] is None:
        return f"- {head}: {rec['reason']}."
    b, r = rec["best"], rec["runner_up"]
    name = b.get("setup") or b["label"]
    where = slo_mod.reach_text(b, every="at every level")  # an interpolated boundary said to be one
    text = (
        f"- {head}: {name}{' (no speculation)' if b['baseline'] else ''}, {where}, "
        f"{slo_mod.at_reach(b)}{b['tok_s_gpu']:,.0f} tok/s per {b['per']}"
    )
    if r is not None and r["tok_s_gpu"]:
        sure = "no decision: within noise of" if b.get("margin_within_noise") else "ahead of"
        text += (
            f"; {sure} {r.get('setup') or r['label']} ({render.percent(b['margin'])}, "
            f"{_pct(b.get('margin_low'), b.get('margin_high'))})"
        )
    return text + "."


def _predicted(p: policy_mod.Policy) -> str:
    """The policy's gain over its best static setup, where it is largest."""
    best = None
    for lv in p.levels:
        if lv.policy_tok_s and lv.static_tok_s:
            g = lv.policy_tok_s / lv.static_tok_s - 1
            if best is None or g > best[0]:
                best = (g, lv.concurrency)
    if best is None or p.static_steps is None:
        return ""
    static = _static_text(p)
    if best[0] <= 0.005:
        return f" Predicted: no gain over the best static {static}."
    multi = any(len(t.candidate_steps) > 1 for t in p.tiers)
    return (
        f" Predicted: up to {best[0]:+.0%} over the best static {static} at C={best[1]}"
        + (" (an upper bound)" if multi else "")
        + "."
    )


def _static_text(p: policy_mod.Policy) -> str:
    """The best single static setup of a policy's group, after 'the best static': 'steps=3', or
    'setup (no speculation)' (the baseline)."""
    return "setup (no speculation)" if p.static_steps == 0 else f"{p.step_axis}={p.static_steps}"


def _off_text(p: policy_mod.Policy) -> str:
    """The break-even as the plain table's story: above it the no-speculation server, which no adaptive
    server can match (its step 0 still drafts)."""
    if p.break_even is None:
        return (
            " Speculation pays at every level measured."
            if p.levels and 0 not in p.levels[-1].candidate_steps
            else " No break-even measured."
        )
    be = p.break_even
    plain = p.plain_table()
    if plain and plain[-1]["steps"] == 0:
        top = p.levels[-1] if p.levels else None
        spec = {k: v for k, v in (top.tok_s if top else {}).items() if k}
        figures = ""
        if top is not None and spec and top.baseline_tok_s:
            k = max(spec, key=lambda s: spec[s])
            figures = (
                f" (C={top.concurrency}: {top.baseline_tok_s:,.0f} tok/s without speculation against "
                f"{spec[k]:,.0f} of {p.step_axis}={k})"
            )
        return (
            f" Break-even: {be.text()}: there a non-speculative server{figures} (an adaptive one cannot switch "
            "off: its step 0 still drafts)."
        )
    # the baseline never ahead beyond noise, and speculation still the faster measured at the top: one story
    return (
        f" Above C={be.low} speculation is within noise of no speculation (to C={be.top}): the table keeps the "
        "faster measured; a non-speculative server serves as well there."
    )


def _policy_lines(p: policy_mod.Policy, f: Findings, *, predicted: bool = True) -> list[str]:
    """A policy in a few lines: one adaptive server's tiers (with the batch sizes each serves), its
    file and flags, and the plain table (one server per load range) with the break-even."""
    where = f" [{p.workload}]" if p.workload else ""
    mode = (
        " (several candidates per tier, as policy.candidates asks: SGLang picks among them by acceptance, not by speed)"
        if p.candidates == "within_noise"
        else ""
    )
    lines = [
        f"- Policy {p.group}{where}: one adaptive server, {_tiers_text(p)}{mode}."
        + (_predicted(p) if predicted else "")
    ]
    flags = {**p.launch_flags(), policy_mod.CONFIG_FLAG: _config_name(p)}
    lines.append(f"  Run: `{policy_mod.flags_text(flags)}` (the file is beside report.md).")
    need = policy_mod.needs_text(p.sglang_version)
    if need:
        lines.append(f"  {need[0].upper() + need[1:]}: {_plain_text(p)}.{_off_text(p)}")
    else:
        lines.append(f"  Plain table (one server per load range): {_plain_text(p)}.{_off_text(p)}")
    return lines


def _confirmation_table(p: policy_mod.Policy, f: Findings) -> pl.DataFrame:
    return policy_mod.confirmation(p, f.levels, samples=f.level_samples, level_noise=f.level_noise)


def _vs(v: float | None, lo: float | None, hi: float | None) -> str:
    """'+22% (+14..+30)': a margin and its 95% interval in percent, '~' in front when within noise."""
    if v is None:
        return render.MISSING
    if lo is None or hi is None:
        return render.percent(v)
    mark = render.NOISE_MARK if lo <= 0 <= hi else ""
    return f"{mark}{render.percent(v)} ({render.bound(lo).removesuffix('%')}..{render.bound(hi).removesuffix('%')})"


def _mark(v: float | None, lo: float | None, hi: float | None) -> str:
    """'~-1%': a margin, '~' in front when its interval contains 0 (the interval is in the Speculative
    policy section's table)."""
    return _vs(v, lo, hi).split(" (")[0]


def _confirmation_rows(table: pl.DataFrame, p: policy_mod.Policy, *, intervals: bool = False) -> pl.DataFrame:
    """The confirmation as the report shows it: per level, the policy's measured output tok/s, the
    best single static setup's, the envelope's (the group's best there, named) and the baseline's, with
    the policy's margin over each (95% interval; '~' within noise, SHORT: below the envelope beyond it)."""
    static = "static"
    return table.select(
        C="concurrency",
        policy=render.cell(lambda v: render.num(v, 0), "policy_tok_s"),
        **{
            static: render.cell(lambda v: render.num(v, 0), "static_tok_s"),
            "vs static": render.cell(_vs if intervals else _mark, "vs_static", "vs_static_low", "vs_static_high"),
            "envelope": render.cell(
                lambda v, lab: render.MISSING if v is None else f"{render.num(v, 0)} {lab}",
                "envelope_tok_s",
                "envelope_label",
            ),
            "vs envelope": render.cell(
                lambda v, lo, hi, short: _vs(v, lo, hi) + (" SHORT" if short else ""),
                "vs_envelope",
                "vs_envelope_low",
                "vs_envelope_high",
                "short",
            ),
            "baseline": render.cell(lambda v: render.num(v, 0), "baseline_tok_s"),
            "vs baseline": render.cell(
                _vs if intervals else _mark, "vs_baseline", "vs_baseline_low", "vs_baseline_high"
            ),
        },
    )


def _confirmation_line(p: policy_mod.Policy, table: pl.DataFrame) -> str:
    """Where the policy's own server falls short of the envelope beyond noise, in one sentence."""
    short = table.filter(pl.col("short"))
    static = (
        ""
        if p.static_steps is None
        else ", against the best static " + (_static_text(p) if p.static_steps == 0 else f"setup {_static_text(p)}")
    )
    head = f"The policy's own server, {p.label()}, measured (output tok/s{static})"
    tail = " ('~': within noise; 95% intervals; the group's best at each level is the envelope)."
    if not short.height:
        return head + ": within noise of the envelope or above it at every level measured" + tail
    where = ", ".join(f"C={r['concurrency']} ({render.percent(r['vs_envelope'])})" for r in short.iter_rows(named=True))
    return head + f": short of the envelope beyond noise at {where}" + tail


def rounds(p: policy_mod.Policy, f: Findings) -> list[policy_mod.ConfirmationRound]:
    """The policy's confirmation rounds as recorded (``policy.settle``: its own server, the revisions)."""
    return policy_mod.settle(p, f.levels, samples=f.level_samples, level_noise=f.level_noise)


def _proven(p: policy_mod.Policy, f: Findings) -> policy_mod.ConfirmationRound | None:
    """The last measured round of the policy's confirmations (None: none measured)."""
    return next((r for r in reversed(rounds(p, f)) if not r.table.is_empty()), None)


def _levels_text(cs, table: pl.DataFrame, column: str) -> str:
    at = {r["concurrency"]: r for r in table.iter_rows(named=True)}
    return ", ".join(f"C={c} ({render.percent(at[c][column])})" for c in cs if c in at)


def _shortfall(p: policy_mod.Policy, r: policy_mod.ConfirmationRound) -> str:
    """Why the policy's own server lost, measured: the levels short of the best static setup and of the
    envelope beyond noise, and the levels together."""
    v, t = r.verdict, r.table
    if v is None:
        return ""
    parts = []
    if v.short_static:
        parts.append(
            f"below the best static {_static_text(p)} beyond noise at " + _levels_text(v.short_static, t, "vs_static")
        )
    if v.short:
        parts.append("below the envelope beyond noise at " + _levels_text(v.short, t, "vs_envelope"))
    if v.together and not v.short:
        parts.append(
            f"below the envelope by more than 1 % at {v.below} of {v.levels} levels (within noise at each, "
            "a shortfall together)"
        )
    elif v.together_static and not v.short_static:
        parts.append(f"below the best static setup at {v.below_static} of {v.levels} levels (a shortfall together)")
    return "; ".join(parts)


def _off_wins(r: policy_mod.ConfirmationRound) -> str:
    """Where the no-speculation server beats everything an adaptive server runs, with the figures."""
    at = {x["concurrency"]: x for x in r.table.iter_rows(named=True)}
    cs = [c for c in (r.verdict.off_wins if r.verdict is not None else ()) if c in at]
    if not cs:
        return ""
    figures = ", ".join(f"C={c}: {at[c]['baseline_tok_s']:,.0f} against {at[c]['policy_tok_s']:,.0f}" for c in cs)
    return f" The no-speculation server beats any adaptive server at {figures} tok/s: run it there."


def _winner_line(p: policy_mod.Policy, r: policy_mod.ConfirmationRound) -> str:
    """The Deploy section's first line: the winner by measurement among the policy's own server, the
    best static setup and the plain table; a policy that lost is never offered first."""
    v = r.verdict
    q = r.policy
    if v is None:  # not measured: no winner to name
        return ""
    rev = f", {'; '.join(q.revised)}" if q.revision > 1 else ""
    if v.winner == "policy":
        return (
            f"Deploy: the speculative policy {q.label()} ({_config_name(p)}): its own server measured within noise "
            f"of the best the grid measured, or above it, at every level ({v.levels} levels{rev})."
        )
    static = (
        f"{p.baseline_label or 'the baseline'} (no speculation)"
        if p.static_steps == 0
        else (p.labels.get(p.static_steps) if p.static_steps else None)
    )
    why = _shortfall(q, r)
    if v.winner == "static" and static:
        return (
            f"Deploy: the best static setup {static}: the policy's own server {q.label()} fell short ({why}); "
            f"the static setup is within noise of the best measured at every level."
        )
    static_too = (
        f"; the best static {static} is short too at " + ", ".join(f"C={c}" for c in v.static_short)
        if static and v.static_short
        else ""
    )
    return (
        f"Deploy: the plain table, one server per load range: {_plain_text(p)}. The policy's own server "
        f"{q.label()} fell short ({why}){static_too}.{_off_wins(r)}"
    )


def _pick_policy(rec: slo_mod.Recommendation, f: Findings) -> str:
    """Each SLO's pick with the policy of its own group, or why its group has none."""
    b = rec.get("best")
    if b is None:
        return ""
    p = next((q for q in f.policies if b["point_id"] in (*q.member_ids, *q.confirmation_ids)), None)
    if p is not None:
        return f" Its group's policy: {p.group}" + (f" [{p.workload}]" if p.workload else "") + "."
    if b["baseline"]:
        return " No speculation: no policy."
    label = b.get("label") or ""
    pairs = set(label.split(","))
    for n in f.policies.notes:
        group = n.split(":", 1)[0]
        if group and set(group.split(",")) <= pairs:
            return f" Its group has no policy ({n.split(': ', 1)[-1]})."
    return " Its group has no policy (its drafter was measured at one step count)."


def deploy_section(f: Findings) -> Section:
    """What to run, up to which load, how sure: the report's first screen. Where a policy's own server
    was measured, the first line names the winner by measurement (``_winner_line``)."""
    lines: list[str] = []
    ranked = preferred(f)
    # the policy whose own server was measured (a confirmation point) comes with its table per level:
    # then it alone is shown here, to keep the answer on one screen
    proven, confirmed = None, None
    for p in ranked[:SHOWN]:
        r = _proven(p, f) if p.confirmation_ids else None
        if r is not None:
            proven, confirmed = r, p
            break
    if proven is not None and confirmed is not None:
        lines.append(_winner_line(confirmed, proven))
    if f.slos and f.slo_table.height:
        lines += [_slo_line(rec) + _pick_policy(rec, f) for rec in slo_mod.recommendations(f.slo_table, f.slos)]
    shown = [proven.policy] if proven is not None else ranked[:SHOWN]
    for p in shown:
        lines += _policy_lines(p, f, predicted=False)
    if proven is not None and confirmed is not None:
        pending = rounds(confirmed, f)[-1]
        if pending.table.is_empty() and pending.policy.revision > proven.policy.revision:
            lines.append(
                f"- Revision {pending.policy.revision} derived, not yet confirmed ({'; '.join(pending.policy.revised[-1:])}):"
                " python -m sweep confirm DIR runs it."
            )
    more = len(f.policies) - len(shown)
    if more > 0:
        lines.append(f"- {more} more {'policy' if more == 1 else 'policies'} under 'Speculative policy' below.")
    if not f.policies and not f.policies.notes and f.levels.height:
        lines.append("- No speculative policy: no group of points differing only in their step count was measured.")
    flagged = phantom.lines(f.phantoms)
    lines += [f"- {x}" for x in flagged[:2]]
    if len(flagged) > 2:
        lines.append(f"- {len(flagged) - 2} more phantom speedups under 'Speculative policy'.")
    if f.policies:
        lines.append(
            "Steps by load: one step count per tier, the fastest (fewer steps in a 1 % tie); never 0 (SGLang's "
            "step 0 still drafts). Evidence below; noise: see Method."
        )
    if proven is not None and confirmed is not None:
        lines.append(_confirmation_line(proven.policy, proven.table))
        return Section("Deploy", lines, _confirmation_rows(proven.table, proven.policy))
    if not lines and f.levels.is_empty():
        lines.append("Nothing measured yet: no point has finished its benchmark.")
    elif not lines:  # measured, but no SLO to answer and no step group ahead of its baseline beyond noise
        lines.append(
            "No SLO given (benchmark.slo, or report --slo) and no speculative policy: no step count is "
            "ahead of its baseline beyond noise at any level; the picks per level are in Summary below."
        )
    return Section("Deploy", lines)


def policy_sections(f: Findings) -> list[Section]:
    """Every policy: how it was derived, its predicted throughput per level beside the best static
    setup's and the baseline's, and the groups that got none."""
    if not f.policies and not f.policies.notes:
        return []
    text = [
        "Per group of points that differ only in their step count (a drafter with its other settings): at each "
        "level the best option by output throughput, and the candidates within noise of it (the report's rule "
        f"for two levels' figures, see Method). One step count per tier: {policy_mod.CHOICE_RULE}; never 0 from "
        "the baseline's figure (inside an adaptive server 0 is SGLang's step 0, which still runs the drafter's "
        "extend: not the no-speculation server). Tiers are keyed where SGLang routes a decode batch (padded to "
        "its CUDA-graph batch size, then the largest key at or below it), from the batch sizes the levels ran. "
        "The break-even is the concurrency above which no step count beats the baseline: the last level one is "
        "ahead beyond noise, the first from which the baseline is ahead of every step count beyond noise, and "
        "where the best ratio crosses 1 between them (log C); above it the plain table's non-speculative server "
        "is the answer. 'policy' is the choice's measured static figure. Trees (topk > 1) are left out: SGLang's "
        "adaptive speculation runs topk 1 only."
    ]
    text += [f"- {n}" for n in f.policies.notes]
    text += [f"- {x}" for x in phantom.lines(f.phantoms)]
    out = [Section("Speculative policy", text)]
    for p in f.policies:
        lines = _policy_lines(p, f) + [f"  Config {_config_name(p)}: {json.dumps(p.config(), separators=(',', ':'))}"]
        lines += [f"  Note: {n}" for n in p.notes]
        rows = [
            {
                "C": lv.concurrency,
                "best": "none" if lv.best_steps == 0 else str(lv.best_steps),
                "within noise": _steps(lv.candidate_steps),
                "choice": str(lv.choice),
                "running": render.num(lv.batch, 1) if lv.batch is not None else render.MISSING,
                "choice tok/s": render.num(lv.policy_tok_s, 0),
                "best static tok/s": render.num(lv.static_tok_s, 0),
                "baseline tok/s": render.num(lv.baseline_tok_s, 0),
                **{("none" if k == 0 else f"steps={k}"): render.num(v, 0) for k, v in sorted(lv.tok_s.items())},
            }
            for lv in p.levels
        ]
        table = pl.DataFrame(rows) if rows else None
        out.append(
            Section(
                f"Policy {p.group}" + (f" [{p.workload}]" if p.workload else ""),
                [x.removeprefix("- ") for x in lines],
                table,
                level=3,
            )
        )
        if p.confirmation_ids:
            t = _confirmation_table(p, f)
            if t.height:
                out.append(
                    Section(
                        f"Confirmation of {p.label()}",
                        [_confirmation_line(p, t)],
                        _confirmation_rows(t, p, intervals=True),
                        level=3,
                    )
                )
    return out
