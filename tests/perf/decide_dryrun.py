"""decide on the reference dry run, against the fake's speed model (the known truth of a dry run).

Runs ``python -m sweep experiments/k26_eagle.yaml --dry-run decide.enabled=true`` (defaults: the
budget is a quarter of the grid's host time, at most 3 paired rounds), then prints each decision: how
it ended, the grid's margin and interval, the pairs' margin and interval, and the margin the fake's
model gives the same two at the same levels (``tests/analysis/model_truth.py``); and whether each
decided or equal one agrees with the model (decided: the same one ahead; equal: the model's margin
within the practical margin).

    python tests/perf/decide_dryrun.py [--keep DIR] [--record [NOTE]] [OVERRIDE ...]

Several minutes on 2 idle cores (the grid, then the rounds). One run: the figures move from run to
run with the machine's load.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sweep.results import decisions  # noqa: E402
from tests.analysis.model_truth import model_levels  # noqa: E402
from tests.perf import record  # noqa: E402


def _pct(v) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", help="the results directory to write (default: a temporary one)")
    ap.add_argument("overrides", nargs="*", help="more experiment overrides, e.g. decide.max_repeats=5")
    record.add_flag(ap)
    args = ap.parse_args()
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="decide-dryrun-")) / "k26"
    cmd = [
        sys.executable,
        "-m",
        "sweep",
        "experiments/k26_eagle.yaml",
        "--dry-run",
        "decide.enabled=true",
        f"results_dir={out}",
        *args.overrides,
    ]
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    said = [line for line in r.stdout.splitlines() if line.startswith("decide:")]
    print("\n".join(said))
    if r.returncode not in (0, 1):
        print(r.stdout[-3000:], r.stderr[-3000:], file=sys.stderr)
        return r.returncode
    d = decisions(out)
    truth = {(p, c): v for p, c, v in model_levels(out).select("point_id", "concurrency", "model_tok_s").iter_rows()}
    rows = []
    agree = {"decided": [0, 0], "equal": [0, 0]}
    print(f"\n{'decision':<34} {'ended':<8} {'pairs':>5}  {'grid':>30}  {'paired':>30}  {'model':>7}  agrees")
    for x in d.iter_rows(named=True):
        a, b = truth.get((x["pick_id"], x["pick_level"])), truth.get((x["other_id"], x["other_level"]))
        model = a / b - 1 if a and b else None
        ok = None
        if model is not None and x["outcome"] == "decided":
            ok = (model > 0) == (x["margin"] > 0)
        elif model is not None and x["outcome"] == "equal":
            ok = abs(model) <= x["practical_margin"]
        if ok is not None:
            agree[x["outcome"]][0] += int(ok)
            agree[x["outcome"]][1] += 1
        grid = f"{_pct(x['margin_first'])} ({_pct(x['low_first'])} .. {_pct(x['high_first'])})"
        paired = f"{_pct(x['margin'])} ({_pct(x['low'])} .. {_pct(x['high'])})"
        subject = x["subject"] + (f"@{x['workload']}" if x["workload"] else "")
        agrees = "-" if ok is None else ("yes" if ok else "NO")
        print(
            f"{subject:<34} {x['outcome']:<8} {x['pairs'] or 0:>5}  {grid:>30}  {paired:>30}  {_pct(model):>7}  {agrees}"
        )
        rows.append(
            [
                subject,
                x["outcome"],
                f"{x['pick_label']} vs {x['other_label']}",
                x["pairs"] or 0,
                grid,
                paired,
                _pct(model),
                agrees,
            ]
        )
    settled = sum(x in ("decided", "equal") for x in d["outcome"].to_list())
    spent = next((m.group(0) for line in said if (m := re.search(r"[\d,.]+ host-s in \d+ rounds?", line))), "")
    budget = next((m.group(1) for line in said if (m := re.search(r"budget ([\d,.]+) host-s", line))), "")
    total = (
        f"{settled} of {d.height} settled ({(d['outcome'] == 'decided').sum()} decided, "
        f"{(d['outcome'] == 'equal').sum()} equal); {spent} of a budget of {budget} host-s; "
        f"agreeing with the model: decided {agree['decided'][0]} of {agree['decided'][1]}, "
        f"equal {agree['equal'][0]} of {agree['equal'][1]}"
    )
    print(f"\n{total}\nresults: {out}")
    if rows:
        record.write(
            "decide_dryrun",
            args,
            [
                record.table(
                    f"the reference dry run with decide.enabled=true: {total}",
                    ["decision", "ended", "pick vs other", "pairs", "grid", "paired", "model", "agrees"],
                    rows,
                )
            ],
            ["sweep/search/decide.py", "sweep/orchestrate/decide.py", "sweep/analysis/decided.py"],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
