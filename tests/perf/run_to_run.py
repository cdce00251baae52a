"""How much the reference experiment's figures and picks move between identical dry runs.

The dry run's figures are the fake server's, measured on this machine: the fake serves its
performance model in real time, so a busy CPU, a slow event loop or another process moves every
figure a little, and a pick between two setups within noise of each other can change from run to
run. This script runs the same dry run N times and prints, side by side:

- per figure (single-stream median tok/s per configuration, output tok/s per configuration and
  level), the spread over the runs (largest over smallest, minus 1): median and largest per kind and
  level, with the configuration that moved most;
- the summary's lines (the picks) of each run, and how many are the same in every run.

    python tests/perf/run_to_run.py [--runs 2] [--experiment experiments/k26_eagle.yaml] [--keep DIR]

About 3-4 minutes per run of the reference experiment on 2 cores. docs/measured.md and
docs/reference-dryrun.md quote what it printed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf import record  # noqa: E402


def dry_run(experiment: str, out: Path) -> str:
    """One dry run into ``out`` and its report; the report's Markdown."""
    env = {**os.environ, "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "sweep", experiment, "--dry-run", f"results_dir={out}"]
    subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        [sys.executable, "-m", "sweep", "report", str(out), "--no-plots"],
        cwd=REPO,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    md = out / "report" / "report.md"
    return md.read_text()


def figures(out: Path, run: int) -> pl.DataFrame:
    """(run, kind, level, label, value): single-stream median tok/s and output tok/s per level."""
    points = pl.read_parquet(out / "points" / "*.parquet").filter(pl.col("status") == "ok").select("point_id", "label")
    single = (
        pl.read_parquet(out / "single_stream" / "*.parquet")
        .filter(pl.col("ok"))
        .group_by("point_id")
        .agg(pl.col("tok_per_s").median().alias("value"))
        .with_columns(kind=pl.lit("single stream tok/s"), level=pl.lit(1, pl.Int64))
    )
    levels = (
        pl.read_parquet(out / "levels" / "*.parquet")
        .filter(pl.col("concurrency") > 0)
        .select(
            "point_id", pl.col("concurrency").cast(pl.Int64).alias("level"), pl.col("output_throughput").alias("value")
        )
        .with_columns(kind=pl.lit("output tok/s"))
    )
    both = pl.concat(
        [single.select("point_id", "kind", "level", "value"), levels.select("point_id", "kind", "level", "value")]
    )
    return both.join(points, on="point_id").with_columns(run=pl.lit(run)).drop("point_id")


def summary_lines(markdown: str) -> list[str]:
    summary = markdown.split("## Summary", 1)[1].split("\n## ", 1)[0]
    return [line for line in summary.splitlines() if line.startswith("- ")]


def decision(line: str) -> tuple[str, str, str]:
    """What a summary line decides, as (its subject, the decision, a detail): the setup it names first
    after 'deploy'/'fastest is'/'best there is', 'no decision' (the detail: how many are within noise of the pick, the pick included),
    the span of 'stops paying', or for any other line its count ('3 of 9') as the detail."""
    text = line[2:]
    head, _, rest = text.partition(": ")
    if len(head) > 50:  # a sentence, not a subject: its first words are
        head, rest = " ".join([w for w in text.split() if not any(c.isdigit() for c in w)][:4]), text
    if "no decision" in rest:
        m = re.search(r"within noise of (.+?)(?: and (\d+) more)?(?:;| \(|$)", rest)
        n = (len(m.group(1).split(", drafter=")) + int(m.group(2) or 0) + 1) if m else 2
        return head, "no decision", f"{n} within noise"
    if m := re.search(r"stops paying ((?:from|between|at) C=\d+(?: (?:to|and) C=\d+)?)", rest):
        return head, m.group(1), ""
    if m := re.search(r"(?:deploy|fastest is|best there is|best is)\s+(\S+)", rest):
        return head, m.group(1).rstrip(".,;"), ""
    count = re.search(r"\d+ of \d+", rest)
    return head, "said", count.group(0) if count else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--experiment", default="experiments/k26_eagle.yaml")
    ap.add_argument("--keep", type=Path, help="keep the results directories under this folder")
    ap.add_argument("--reuse", action="store_true", help="with --keep: report on the runs already there, run none")
    record.add_flag(ap)
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="sweep-run-to-run-"))
    root.mkdir(parents=True, exist_ok=True)
    frames, picks = [], []
    for i in range(args.runs):
        out = root / f"run{i}"
        md = (out / "report" / "report.md").read_text() if args.reuse else dry_run(args.experiment, out)
        frames.append(figures(out, i))
        picks.append({h: (d, x) for h, d, x in map(decision, summary_lines(md))})
        print(f"run {i}: {out}", flush=True)
    spread = (
        pl.concat(frames)
        .group_by("kind", "level", "label")
        .agg((pl.col("value").max() / pl.col("value").min() - 1).alias("spread"), pl.len().alias("runs"))
        .filter(pl.col("runs") == args.runs)
    )
    by_level = (
        spread.sort("spread", descending=True)
        .group_by("kind", "level", maintain_order=True)
        .agg(
            pl.col("spread").median().alias("median"),
            pl.col("spread").max().alias("largest"),
            pl.col("label").first().alias("moved most"),
            pl.len().alias("configurations"),
        )
        .sort("kind", "level")
    )
    print(
        f"\n{args.runs} identical dry runs of {args.experiment}: each figure's spread over the runs (largest / smallest - 1)"
    )
    with pl.Config(tbl_rows=100, tbl_width_chars=200, fmt_str_lengths=60, tbl_hide_dataframe_shape=True):
        print(
            by_level.with_columns(pl.col("median", "largest").mul(100).round(1)).rename(
                {"median": "median %", "largest": "largest %"}
            )
        )
    overall = spread.group_by("kind").agg(
        pl.col("spread").median().alias("median"), pl.col("spread").max().alias("largest")
    )
    for row in overall.sort("kind").iter_rows(named=True):
        print(f"{row['kind']}: median spread {100 * row['median']:.1f} %, largest {100 * row['largest']:.1f} %")
    heads = list(dict.fromkeys(h for p in picks for h in p))
    decided = [h for h in heads if len({p.get(h, ("(no such line)", ""))[0] for p in picks}) == 1]
    exact = [h for h in decided if len({p.get(h) for p in picks}) == 1]
    print(
        f"\nsummary lines: {len(decided)} of {len(heads)} decide the same in every run ({len(exact)} with the "
        "same detail too: how many are within noise of the pick, a count); a line missing from a run differs"
    )
    for h in heads:
        mark = "same" if h in exact else "same decision" if h in decided else "DIFFERS"
        shown = [(lambda d, x: f"{d} ({x})" if x else d)(*p[h]) if h in p else "(no such line)" for p in picks]
        print(f"  [{mark}] {h}: " + "  |  ".join(shown))
    spreads = [
        [r["kind"], f"{100 * r['median']:.1f} %", f"{100 * r['largest']:.1f} %"]
        for r in overall.sort("kind").iter_rows(named=True)
    ]
    lines = [
        [h, "same" if h in exact else "same decision" if h in decided else "differs", " / ".join(map(str, shown))]
        for h in heads
        for shown in [[p[h][0] if h in p else "(no such line)" for p in picks]]
    ]
    tables = [
        record.table(f"each figure's spread over {args.runs} runs", ["figure", "median spread", "largest"], spreads),
        record.table(
            f"the summary's lines: {len(decided)} of {len(heads)} decide the same in every run",
            ["line", "over the runs", "each run's decision"],
            lines,
        ),
    ]
    sources = ["sweep/fake/model.py", "sweep/fake/engine.py", "sweep/bench/load.py", "sweep/analysis/noise.py"]
    record.write("run_to_run", args, tables, sources + ["sweep/analysis/findings.py"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
