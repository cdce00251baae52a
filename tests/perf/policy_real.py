"""The speculative policy against the best static setup and the baseline, per level, on real SGLang.

Runs a real local sweep of ``experiments/cpu_tiny_spec.yaml`` (real SGLang on this machine's CPU: the
tiny Llama target, the baseline and the trained one-layer EAGLE-3 drafter at 1, 2 and 3 steps) with
``policy.confirm`` on, so that after the grid the policy derived from it (``sweep.analysis.policy``)
is served by SGLang's own adaptive speculation as one more point; then prints, per level, what that
server measured beside the group's best single static setup, the envelope (the best the group
measured at that level) and the baseline, with the 95 % intervals the report gives, and what the
server ran (its step counts and switches, read from SGLang's log).

    source ~/.cache/sweep-sglang-cpu/env.sh        # the CPU SGLang install (cluster/sglang-cpu-x86)
    python tests/perf/policy_real.py [--levels 1,4,8,16] [--rounds 8] [--max-tokens 128] [--keep DIR] [--record [NOTE]]

The confirmation revises (``policy.revise``): where the policy's own server falls short of the best
static setup beyond noise, its revision runs too (``spec=adaptive-r2``); every round is printed with its
verdict, and the Deploy section's first line (the winner by measurement). Levels of 8 rounds of 128
tokens: the previous run's 4 rounds of 64 lasted under a second, and steps=2 read 0.77x at C=4 between
steps=1 at 1.13x and steps=3 at 1.03x. ``--record`` writes ``docs/measured/policy_real.json`` with the
previous run's figures (issue 43, before one step count per tier) beside this one's, and every setup
of the grid per level with the spread of its repeats (``--repeats``, 2 by default: each level measured
twice back to back, so that the record says whether the levels were long enough to judge by); where
the grid finds no step count ahead of its baseline, there is no policy to serve, and the record says
what Deploy names instead.

About 5 minutes on 2 idle cores with the short levels (the avx512-bf16 path; the emulated AVX2 path
takes about twice that); the default longer levels take several times that. One run: the figures move
from run to run (a level is measured once; see the report's Method).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sweep.analysis import deploy, findings  # noqa: E402
from sweep.analysis import policy as policy_mod  # noqa: E402
from sweep.results import store  # noqa: E402
from tests.perf import record  # noqa: E402

# the previous run (issue 43, the landed code before one step count per tier), as the issue reports it
_PREVIOUS = [
    ["policy", '{"1": [2, 3], "4": [0], "8": [2, 3], "16": [0, 1, 2]}'],
    ["vs the envelope", "short at every level, -18 % to -43 %"],
    ["vs the best static setup", "short at C=1, 8 and 16"],
    ["switches per level", "7 to 23"],
    ["Deploy", "gave the policy's Run: line though the confirmation said SHORT"],
    ["levels", "4 rounds of 64 tokens (under a second each)"],
]


def _pct(v, lo, hi) -> str:
    if v is None:
        return "-"
    inner = f" ({lo * 100:+.0f}..{hi * 100:+.0f})" if lo is not None and hi is not None else ""
    return f"{v * 100:+.0f}%{inner}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--rounds", type=int, default=8, help="requests per level: rounds x C")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="each level measured this many times back to back (benchmark.repeats): their agreement says "
        "whether the levels are long enough to judge by",
    )
    ap.add_argument("--keep", help="the results directory to write (default: a temporary one)")
    record.add_flag(ap)
    args = ap.parse_args()
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="policy-real-"))
    cmd = [
        sys.executable,
        "-m",
        "sweep",
        "experiments/cpu_tiny_spec.yaml",
        "--local",
        "--only",
        "drafter=none*",
        "--only",
        "drafter=eagle3,spec=steps*",
        "--only",
        "*spec=adaptive*",
        f"benchmark.concurrency.levels=[{args.levels}]",
        # the experiment's levels (1 round of 32 tokens) last 40-300 ms on this model: noise, not figures
        f"benchmark.concurrency.rounds={args.rounds}",
        f"benchmark.concurrency.max_tokens={args.max_tokens}",
        f"benchmark.repeats={args.repeats}",
        "policy.confirm=true",
        f"results_dir={out}",
    ]
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    print(r.stdout[-1500:])
    if r.returncode not in (0, 1):
        print(r.stderr[-3000:], file=sys.stderr)
        return r.returncode
    tables = store.load(out)
    f = findings.analyze(tables)
    levels = pl.read_parquet(out / "levels" / "*.parquet")
    recorded: list[list] = []
    deploy_line = next(iter(deploy.deploy_section(f).paragraphs), "")
    print(f"\n{deploy_line}")
    # the same setup measured twice, back to back: whether a level is long enough to judge by
    twice = (
        levels.filter(pl.col("concurrency") > 0)
        .group_by("point_id", "concurrency")
        .agg(n=pl.len(), spread=pl.col("output_throughput").max() / pl.col("output_throughput").min() - 1)
        .filter(pl.col("n") > 1)
        .join(f.levels.select("point_id", "concurrency", "setup").unique(), on=["point_id", "concurrency"])
        .sort("setup", "concurrency")
    )
    agreement = (
        f"the same setup measured {args.repeats} times back to back: largest spread "
        f"{twice['spread'].max() * 100:.1f} %, median {twice['spread'].median() * 100:.1f} % "
        f"({twice.height} levels)"
        if twice.height
        else "each level measured once"
    )
    print(agreement)
    static = [
        [
            r["setup"],
            r["concurrency"],
            round(r["output_throughput"], 1),
            "-" if r["throughput_ratio"] is None else f"{r['throughput_ratio']:.2f}x",
            r["verdict"] or "(baseline)",
            next(
                (f"{x * 100:.1f} %" for p, c, x in twice.select("point_id", "concurrency", "spread").iter_rows()
                 if p == r["point_id"] and c == r["concurrency"]),
                "-",
            ),
        ]
        for r in f.levels.filter(pl.col("concurrency") > 0).sort("concurrency", "setup").iter_rows(named=True)
    ]  # fmt: skip
    print(f"\n{'setup':<28} {'C':>3} {'tok/s':>8} {'vs base':>8} {'verdict':<14} repeats' spread")
    for row in static:
        print(f"{row[0]:<28} {row[1]:>3} {row[2]:>8} {row[3]:>8} {row[4]:<14} {row[5]}")
    for p in f.policies:
        print(
            f"\npolicy {p.group}: {p.config()}  ({p.break_even.text() if p.break_even else 'no break-even measured'})"
        )
        rounds = deploy.rounds(p, f)
        for rnd in rounds:
            t, q = rnd.table, rnd.policy
            print(
                f"  round {q.revision}: {q.label()} {q.config()}" + (f"  ({'; '.join(q.revised)})" if q.revised else "")
            )
            if t.is_empty():
                print("  (not measured)")
                continue
            v = rnd.verdict
            print(
                f"  verdict: {v.winner}; short of the envelope at {list(v.short)}, of the static at "
                f"{list(v.short_static)}; below the envelope at {v.below} of {v.levels} levels"
                f"{' (a shortfall together)' if v.together else ''}"
            )
            cid = policy_mod.confirmation_id(q, {c: True for c in q.confirmation_ids})
            ran = {}
            for lv in levels.filter(pl.col("point_id") == (cid or "")).iter_rows(named=True):
                ran[lv["concurrency"]] = (lv.get("adaptive_steps"), lv.get("adaptive_switches"))
            print(
                f"  {'C':>3}  {'policy':>8}  {'static':>8} {'':9}  {'envelope':>8} {'':9}  {'baseline':>8}"
                f"  {'policy vs envelope':>20}  {'vs static':>16}  {'vs baseline':>16}  steps run (switches)"
            )
            for row in t.iter_rows(named=True):
                steps, sw = ran.get(row["concurrency"], (None, None))
                vs_env = _pct(row["vs_envelope"], row["vs_envelope_low"], row["vs_envelope_high"])
                vs_static = _pct(row["vs_static"], row["vs_static_low"], row["vs_static_high"])
                vs_base = _pct(row["vs_baseline"], row["vs_baseline_low"], row["vs_baseline_high"])
                print(
                    f"  {row['concurrency']:>3}  {row['policy_tok_s']:8.1f}  {row['static_tok_s'] or 0:8.1f} "
                    f"{row['static_label'] or '':9}  {row['envelope_tok_s'] or 0:8.1f} {row['envelope_label'] or '':9}  "
                    f"{row['baseline_tok_s'] or 0:8.1f}  {vs_env:>20}{' SHORT' if row['short'] else '':6}"
                    f"{vs_static:>16}  {vs_base:>16}  {steps} ({sw})"
                )
                recorded.append(
                    [
                        q.revision,
                        json.dumps(q.config(), separators=(",", ":")),
                        row["concurrency"],
                        round(row["policy_tok_s"], 1),
                        f"{round(row['static_tok_s'] or 0, 1)} {row['static_label'] or ''}",
                        f"{round(row['envelope_tok_s'] or 0, 1)} {row['envelope_label'] or ''}",
                        round(row["baseline_tok_s"] or 0, 1),
                        vs_env + (" SHORT" if row["short"] else ""),
                        vs_static,
                        f"{steps} ({sw})",
                    ]
                )
    if args.record is not None:
        record.write(
            "policy_real",
            args,
            [
                record.table(
                    f"this run, every setup of the grid: levels {args.levels}, {args.rounds} rounds of "
                    f"{args.max_tokens} tokens, {agreement}; {deploy_line}",
                    ["setup", "C", "output tok/s", "vs its baseline", "verdict", "repeats' spread"],
                    static,
                ),
                *(
                    []
                    if not recorded
                    else [
                        record.table(
                            f"the policy's own server: levels {args.levels}, {args.rounds} rounds of "
                            f"{args.max_tokens} tokens",
                            [
                                "round",
                                "config",
                                "C",
                                "policy",
                                "static",
                                "envelope",
                                "baseline",
                                "vs envelope",
                                "vs static",
                                "steps run (switches)",
                            ],
                            recorded,
                        )
                    ]
                ),
                record.table(
                    "previous run (issue 43, before this change; copied from the issue by hand)", ["", ""], _PREVIOUS
                ),
            ],
            ["sweep/analysis/policy.py", "sweep/analysis/deploy.py", "sweep/core/speculation.py"],
        )
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
