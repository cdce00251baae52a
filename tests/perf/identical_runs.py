"""Two identical dry runs either name the same setup for every SLO, or both reports say on that line
that the pick is within noise of the runner-up (issue 23: a pick that flips between identical runs
is noise presented as a finding).

The experiment is two setups that are the same server (they differ only in an environment variable
the fake ignores), so which of them a run picks is pure noise. A statistical property, not a test:
a 95 % interval misses now and then (about one SLO line in twenty), so it prints what each run's
line says and whether the pair holds, as often as asked.

    python tests/perf/identical_runs.py [--pairs 3]

About 100 s per pair on 2 shared cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import polars as pl  # noqa: E402

import sweep  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.experiments import experiment, write  # noqa: E402

TWINS = {"values": {"a": {"env": {"SWEEP_TEST_TWIN": "a"}}, "b": {"env": {"SWEEP_TEST_TWIN": "b"}}}}


def run(tmp: Path, name: str) -> sweep.SweepResult:
    exp = experiment(
        name="twins",
        server={"port": free_port()},
        grid={"axes": {"twin": TWINS}},
        benchmark={"single_stream": {"runs": 2}, "concurrency": {"levels": [1, 2, 4, 8, 16], "rounds": 1}},
        dry_run={"hosts": 2},
    )
    path = write(tmp / f"{name}.yaml", exp, results_dir=tmp / f"twins-{name}-{os.getpid()}")
    result = sweep.run(path, mode="dry-run", progress=False)
    assert result.ok, [(p.label, p.failure_reason) for p in result.failed]
    return result


def slo_lines(markdown: str) -> dict[str, str]:
    summary = markdown.split("## Summary")[1].split("\n## ")[0]
    return {line.split()[2]: line for line in summary.splitlines() if line.startswith("- SLO ")}


def pair(tmp: Path, i: int) -> bool:
    first, second = run(tmp, f"first{i}"), run(tmp, f"second{i}")
    # SLOs judged the same way on both: a per-user speed near the one at C=4 (where the curves are
    # steep, so the crossing is interpolated), and one every level meets (the throughput at the top)
    levels = first.findings().levels
    at4 = levels.filter(pl.col("concurrency") == 4)["per_request_tok_s"].median()
    slos = [f"per_user: tok_s_p10>={at4:.4g}", "loose: tpot_p90<=10s"]
    lines = [slo_lines(r.report(slos=slos)) for r in (first, second)]
    ok = True
    for name in ("per_user", "loose"):
        a, b = lines[0].get(name, ""), lines[1].get(name, "")
        pick_a, pick_b = (
            line.split(": deploy ")[1].split(" ")[0].rstrip(",") if ": deploy " in line else None for line in (a, b)
        )
        holds = pick_a == pick_b or ("is within noise of" in a and "is within noise of" in b)
        ok &= holds
        print(f"pair {i} {name}: {'holds' if holds else 'DOES NOT HOLD'}\n  first:  {a}\n  second: {b}")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        held = sum(pair(Path(tmp), i) for i in range(args.pairs))
    print(f"\n{held} of {args.pairs} pairs of identical runs agree or both say within noise")


if __name__ == "__main__":
    main()
