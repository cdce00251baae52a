"""The speculative policy against the best static setup and the baseline, per level, on real SGLang.

Runs a real local sweep of ``experiments/cpu_tiny_spec.yaml`` (real SGLang on this machine's CPU: the
tiny Llama target, the baseline and the trained one-layer EAGLE-3 drafter at 1, 2 and 3 steps) with
``policy.confirm`` on, so that after the grid the policy derived from it (``sweep.analysis.policy``)
is served by SGLang's own adaptive speculation as one more point; then prints, per level, what that
server measured beside the group's best single static setup, the envelope (the best the group
measured at that level) and the baseline, with the 95 % intervals the report gives, and what the
server ran (its step counts and switches, read from SGLang's log).

    source ~/.cache/sweep-sglang-cpu/env.sh        # the CPU SGLang install (cluster/sglang-cpu-x86)
    python tests/perf/policy_real.py [--levels 1,2,4,8,16] [--keep DIR]

About 5 minutes on 2 cores (the avx512-bf16 path; the emulated AVX2 path takes about twice that).
One run: the figures move from run to run (a level is measured once; see the report's Method).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sweep.analysis import deploy, findings  # noqa: E402
from sweep.results import store  # noqa: E402


def _pct(v, lo, hi) -> str:
    if v is None:
        return "-"
    inner = f" ({lo * 100:+.0f}..{hi * 100:+.0f})" if lo is not None and hi is not None else ""
    return f"{v * 100:+.0f}%{inner}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,2,4,8,16")
    ap.add_argument("--keep", help="the results directory to write (default: a temporary one)")
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
        "benchmark.concurrency.rounds=4",
        "benchmark.concurrency.max_tokens=64",
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
    for p in f.policies:
        print(
            f"\npolicy {p.group}: {p.config()}  ({p.break_even.text() if p.break_even else 'no break-even measured'})"
        )
        t = deploy.confirmation_table(p, f)
        if t.is_empty():
            print("  (no confirmation measured for this policy)")
            continue
        ran = {}
        for cid in p.confirmation_ids:
            for lv in levels.filter(pl.col("point_id") == cid).iter_rows(named=True):
                ran[lv["concurrency"]] = (lv.get("adaptive_steps"), lv.get("adaptive_switches"))
        print(
            f"  {'C':>3}  {'policy':>8}  {'static':>8} {'':9}  {'envelope':>8} {'':9}  {'baseline':>8}"
            f"  {'policy vs envelope':>20}  {'vs static':>16}  {'vs baseline':>16}  steps run (switches)"
        )
        for row in t.iter_rows(named=True):
            steps, sw = ran.get(row["concurrency"], (None, None))
            print(
                f"  {row['concurrency']:>3}  {row['policy_tok_s']:8.1f}  {row['static_tok_s'] or 0:8.1f} "
                f"{row['static_label'] or '':9}  {row['envelope_tok_s'] or 0:8.1f} {row['envelope_label'] or '':9}  "
                f"{row['baseline_tok_s'] or 0:8.1f}  "
                f"{_pct(row['vs_envelope'], row['vs_envelope_low'], row['vs_envelope_high']):>20}"
                f"{' SHORT' if row['short'] else '':6}"
                f"{_pct(row['vs_static'], row['vs_static_low'], row['vs_static_high']):>16}  "
                f"{_pct(row['vs_baseline'], row['vs_baseline_low'], row['vs_baseline_high']):>16}  {steps} ({sw})"
            )
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
