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


def config_files(policies: list[policy_mod.Policy]) -> dict[str, str]:
    """{file name: SGLang's adaptive config as JSON} for every policy (written beside report.md)."""
    return {_config_name(p): p.config_json() for p in policies}


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
    """'C=1-4: 3 (2/3) · C=5-29: 2 (1/2/3) · C>=70: none': per tier its best and the candidates."""
    parts = []
    for i, t in enumerate(p.tiers):
        to = p.tiers[i + 1].lo - 1 if i + 1 < len(p.tiers) else None
        best = "none" if t.best_steps == 0 else str(t.best_steps)
        cands = "" if len(t.candidate_steps) == 1 else f" ({_steps(t.candidate_steps)})"
        parts.append(f"{_range(t.lo, to)}: {best}{cands}")
    return " · ".join(parts)


def _plain_text(p: policy_mod.Policy) -> str:
    return " · ".join(
        f"{_range(r['lo'], r['to'])}: " + (f"steps={r['steps']}" if r["steps"] else "no speculation")
        for r in p.plain_table()
    )


def _pct(lo: float | None, hi: float | None) -> str:
    return "no interval" if lo is None or hi is None else f"95% interval {render.percent(lo)} .. {render.percent(hi)}"


def _slo_line(rec: slo_mod.Recommendation) -> str:
    slo = rec["slo"]
    head = f"SLO {slo.name}" + (f" [{rec['workload']}]" if rec.get("workload") else "")
    if rec["best"] is None:
        return f"- {head}: {rec['reason']}."
    b, r = rec["best"], rec["runner_up"]
    name = b.get("setup") or b["label"]
    where = f"up to C{b['c_text']}" if b["bound"] == "=" else f"at every level (C{b['c_text']})"
    text = f"- {head}: {name}{' (no speculation)' if b['baseline'] else ''}, {where}, {b['tok_s_gpu']:,.0f} tok/s per {b['per']}"
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
    if best is None or not p.static_steps:
        return ""
    static = f"{p.step_axis}={p.static_steps}"
    if best[0] <= 0.005:
        return f" Predicted: no gain over the best static {static}."
    multi = any(len(t.candidate_steps) > 1 for t in p.tiers)
    return (
        f" Predicted: up to {best[0]:+.0%} over the best static {static} at C={best[1]}"
        + (" (an upper bound)" if multi else "")
        + "."
    )


def _policy_lines(p: policy_mod.Policy, f: Findings, *, predicted: bool = True) -> list[str]:
    """A policy in a few lines: its tiers, the break-even (and, with ``predicted``, its gain over the
    best static setup), the file and flags, the plain table."""
    where = f" [{p.workload}]" if p.workload else ""
    be = (
        p.break_even.text()
        if p.break_even
        else (
            "speculation pays at every level measured"
            if p.levels and 0 not in p.levels[-1].candidate_steps
            else "no break-even measured"
        )
    )
    lines = [f"- Policy {p.group}{where}: steps {_tiers_text(p)}; {be}." + (_predicted(p) if predicted else "")]
    flags = {**p.launch_flags(), policy_mod.CONFIG_FLAG: _config_name(p)}
    lines.append(f"  Run: `{policy_mod.flags_text(flags)}` (the file is beside report.md).")
    need = policy_mod.needs_text(p.sglang_version)
    if need:
        lines.append(f"  {need[0].upper() + need[1:]}: {_plain_text(p)}.")
    else:
        lines.append(f"  Without adaptive speculation (plain table): {_plain_text(p)}.")
    return lines


def confirmation_table(p: policy_mod.Policy, f: Findings) -> pl.DataFrame:
    return policy_mod.confirmation(p, f.levels, samples=f.level_samples, level_noise=f.level_noise)


def _vs(v: float | None, lo: float | None, hi: float | None) -> str:
    """'+22% (+14..+30)': a margin and its 95% interval in percent, '~' in front when within noise."""
    if v is None:
        return render.MISSING
    if lo is None or hi is None:
        return render.percent(v)
    mark = render.NOISE_MARK if lo <= 0 <= hi else ""
    return f"{mark}{render.percent(v)} ({lo * 100:+.0f}..{hi * 100:+.0f})"


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
    static = f", against the best static setup {p.step_axis}={p.static_steps}" if p.static_steps else ""
    head = f"The policy's own server, {p.label()}, measured (output tok/s{static})"
    tail = " ('~': within noise; 95% intervals; the group's best at each level is the envelope)."
    if not short.height:
        return head + ": within noise of the envelope or above it at every level measured" + tail
    where = ", ".join(f"C={r['concurrency']} ({render.percent(r['vs_envelope'])})" for r in short.iter_rows(named=True))
    return head + f": short of the envelope beyond noise at {where}" + tail


def deploy_section(f: Findings) -> Section:
    """What to run, up to which load, how sure: the report's first screen."""
    lines: list[str] = []
    if f.slos and f.slo_table.height:
        lines += [_slo_line(rec) for rec in slo_mod.recommendations(f.slo_table, f.slos)]
    ranked = preferred(f)
    # the policy whose own server was measured (a confirmation point) comes with its table per level:
    # then it alone is shown here, to keep the answer on one screen
    table, confirmed = None, None
    for p in ranked[:SHOWN]:
        t = confirmation_table(p, f) if p.confirmation_ids else None
        if t is not None and t.height:
            table, confirmed = t, p
            break
    shown = [confirmed] if confirmed is not None else ranked[:SHOWN]
    for p in shown:
        lines += _policy_lines(p, f, predicted=False)
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
            "Steps by load: the best step count from each C, in brackets those within noise of it "
            "(SGLang's candidate_steps; none: no speculation). Evidence below; noise: see Method."
        )
    if confirmed is not None and table is not None:
        lines.append(_confirmation_line(confirmed, table))
        return Section("Deploy", lines, _confirmation_rows(table, confirmed))
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
        "level the best step count by output throughput, and the candidates within noise of it (the report's rule "
        "for two levels' figures, see Method); 0 (no speculation) where the matched baseline wins or is within "
        "noise of the best. Tiers start where the candidates change (SGLang routes a batch size to the closest "
        "lower key of its adaptive config); the break-even is the concurrency above which no step count beats "
        "the baseline: the last level one is ahead beyond noise, the first from which the baseline is ahead of "
        "every step count beyond noise, and where the best ratio crosses 1 between them (log C). 'policy' is "
        "the best candidate's measured figure: where a tier has several, an upper bound of what SGLang's EMA "
        "rule (it follows the acceptance, not the throughput) picks. Trees (topk > 1) are left out: SGLang's "
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
                "best steps": "none" if lv.best_steps == 0 else str(lv.best_steps),
                "candidates": _steps(lv.candidate_steps),
                "policy tok/s": render.num(lv.policy_tok_s, 0),
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
            t = confirmation_table(p, f)
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
