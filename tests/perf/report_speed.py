"""How long the report takes on a big sweep, against plain pandas computing the same table.

Writes a synthetic results directory (the store's layout: one Parquet file per point and table)
with about one million request rows, then times, in one run and on the same files:

- polars ``level_speedups`` (every point x level against its baseline, with the noise interval
  computed from the request rows: the table that reads the million rows),
- a plain pandas implementation of that same table (read, filter, group, merge, delta-method
  interval), checked to give the same numbers,
- polars ``speedup_table`` (single stream, bootstrap intervals),
- the whole report: every table, Markdown, and with / without the PNG plots (and report.html's charts),
- report.html's plotly charts alone, from the report's frames.

Each figure is the best of ``--repeat`` runs (the machine may be shared). Request rows carry no
per-chunk arrival lists (null), which nothing here reads.

    python tests/perf/report_speed.py [--rows 1000000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sweep.results.schema import TABLES, check  # noqa: E402
from tests.perf import record  # noqa: E402

LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
DRAFTERS = ["d1", "d2", "d3", "d4"]
STEPS = ["1", "2", "3", "4"]
PROFILES = ["default", "tuned"]
RUNS = 5


def _table(columns: dict[str, object], n: int, name: str) -> pa.Table:
    """A table of ``name``'s schema from the given columns, every other column null."""
    schema = TABLES[name]
    arrays = {f.name: pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type) for f in schema}
    extra = {k: pa.array(v, pa.string()) for k, v in columns.items() if k.startswith("axis_")}
    return check(pa.table({**arrays, **extra}), name)


def _write(directory: Path, name: str, pid: str, table: pa.Table) -> None:
    folder = directory / name
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / f"{pid}.parquet")


def build(directory: Path, rows: int, seed: int = 0) -> dict:
    """Write the synthetic sweep; returns its size."""
    rng = np.random.default_rng(seed)
    points = []
    for profile in PROFILES:
        points.append({"drafter": "none", "steps": None, "nccl": profile})
        points += [{"drafter": d, "steps": s, "nccl": profile} for d in DRAFTERS for s in STEPS]
    rounds = math.ceil(rows / (len(points) * sum(LEVELS)))
    ids = {}
    counts = {"points": 0, "requests": 0, "levels": 0, "single_stream": 0}
    for p in points:
        label = ",".join(f"{k}={v}" for k, v in p.items() if v is not None)
        pid = hashlib.sha1(label.encode()).hexdigest()[:12]
        ids[label] = pid
        base = p["drafter"] == "none"
        steps = 0 if base else int(p["steps"])
        lift = 1.2 if p["nccl"] == "tuned" else 1.0
        base_id = None if base else ids[f"drafter=none,nccl={p['nccl']}"]
        _write(
            directory,
            "points",
            pid,
            _table(
                {
                    "point_id": [pid],
                    "label": [label],
                    "experiment": ["perf"],
                    "baseline": [base],
                    "baseline_id": [base_id],
                    "param_roles": [{"drafter": "drafter", "steps": "steps", "nccl": "env"}],
                    "status": ["ok"],
                    "errors": [[]],
                    "warnings": [[]],
                    "dry_run": [True],
                    "bench_scale": [None],
                    "load_s": [60.0],
                    "capture_s": [30.0],
                    "startup_s": [100.0],
                    **{f"axis_{k}": [v] for k, v in p.items()},
                },
                1,
                "points",
            ),
        )
        single = (50 + 12 * steps) * lift * rng.normal(1, 0.02, RUNS)
        _write(
            directory,
            "single_stream",
            pid,
            _table(
                {
                    "point_id": [pid] * RUNS,
                    "run": list(range(RUNS)),
                    "completion_tokens": [512] * RUNS,
                    "latency_s": list(512 / single),
                    "tok_per_s": list(single),
                    "ok": [True] * RUNS,
                },
                RUNS,
                "single_stream",
            ),
        )
        conc = np.repeat(LEVELS, [rounds * c for c in LEVELS])
        n = conc.size
        per_request = (50 + 12 * steps) * lift / (1 + conc * (0.02 + 0.01 * steps)) * rng.normal(1, 0.05, n)
        latency = 512 / per_request
        _write(
            directory,
            "requests",
            pid,
            _table(
                {
                    "point_id": np.full(n, pid),
                    "phase": np.full(n, "level"),
                    "concurrency": conc,
                    "seq": np.arange(n),
                    "completion_tokens": np.full(n, 512),
                    "latency_s": latency,
                    "ttft_s": np.full(n, 0.05),
                    "ok": np.ones(n, bool),
                },
                n,
                "requests",
            ),
        )
        level_rows = []
        for c in LEVELS:
            mask = conc == c
            wall = latency[mask].sum() / c
            level_rows.append(
                {
                    "concurrency": c,
                    "requests": int(mask.sum()),
                    "output_throughput": 512 * mask.sum() / wall,
                    "per_request_tok_s": float((512 / latency[mask]).mean()),
                }
            )
        _write(
            directory,
            "levels",
            pid,
            _table(
                {"point_id": [pid] * len(LEVELS), **{k: [r[k] for r in level_rows] for k in level_rows[0]}},
                len(LEVELS),
                "levels",
            ),
        )
        counts["points"] += 1
        counts["requests"] += n
        counts["levels"] += len(LEVELS)
        counts["single_stream"] += RUNS
    return counts


def pandas_level_speedups(directory: Path):
    """The same table as ``level_speedups``, in plain pandas (delta-method interval for means,
    which is what polars uses at these sample sizes)."""
    import pandas as pd

    points = pd.read_parquet(directory / "points", columns=["point_id", "label", "baseline", "baseline_id"])
    levels = pd.read_parquet(
        directory / "levels", columns=["point_id", "concurrency", "output_throughput", "per_request_tok_s"]
    )
    req = pd.read_parquet(
        directory / "requests", columns=["point_id", "phase", "concurrency", "ok", "completion_tokens", "latency_s"]
    )
    req = req[(req["phase"] == "level") & req["ok"] & (req["latency_s"] > 0)]
    req = req.assign(value=req["completion_tokens"] / req["latency_s"])
    stats = req.groupby(["point_id", "concurrency"])["value"].agg(["count", "mean", "std"]).reset_index()
    frame = points.merge(levels, on="point_id").merge(stats, on=["point_id", "concurrency"], how="left")
    base = frame[["point_id", "concurrency", "output_throughput", "per_request_tok_s", "count", "mean", "std"]]
    base = base.rename(columns={c: f"base_{c}" for c in base.columns if c != "concurrency"})
    frame = frame.merge(
        base, left_on=["baseline_id", "concurrency"], right_on=["base_point_id", "concurrency"], how="left"
    )
    frame["throughput_ratio"] = frame["output_throughput"] / frame["base_output_throughput"]
    frame["per_request_ratio"] = frame["per_request_tok_s"] / frame["base_per_request_tok_s"]
    ratio = frame["mean"] / frame["base_mean"]
    se = np.sqrt(
        frame["std"] ** 2 / (frame["count"] * frame["mean"] ** 2)
        + frame["base_std"] ** 2 / (frame["base_count"] * frame["base_mean"] ** 2)
    )
    frame["ci_low"] = ratio * np.exp(-1.959964 * se)
    frame["ci_high"] = ratio * np.exp(1.959964 * se)
    frame["within_noise"] = (frame["ci_low"] <= 1) & (frame["ci_high"] >= 1)
    return frame.sort_values(["label", "concurrency"]).reset_index(drop=True)


def best_of(repeat: int, fn):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="request rows to generate")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="write the sweep there and keep it")
    record.add_flag(parser)
    args = parser.parse_args()

    import polars as pl

    from sweep.analysis import analyze, level_speedups, report, speedup_table
    from sweep.results import load

    directory = args.keep or Path(tempfile.mkdtemp(prefix="report-speed-"))
    try:
        start = time.perf_counter()
        counts = build(directory, args.rows)
        size = sum(f.stat().st_size for f in directory.rglob("*.parquet"))
        print(
            f"synthetic sweep: {counts['points']} points, {counts['requests']:,} request rows, "
            f"{counts['levels']} levels, {size / 2**20:.0f} MiB of Parquet, written in "
            f"{time.perf_counter() - start:.1f} s ({directory})"
        )

        t_pl, polars_table = best_of(args.repeat, lambda: level_speedups(load(directory)))
        t_pd, pandas_table = best_of(args.repeat, lambda: pandas_level_speedups(directory))
        t_ss, _ = best_of(args.repeat, lambda: speedup_table(load(directory)))
        t_md, _ = best_of(args.repeat, lambda: report.build(directory, with_plots=False))
        t_all, built = best_of(1, lambda: report.build(directory, out_dir=directory / "report"))
        findings = analyze(load(directory))
        t_charts, fragments = best_of(args.repeat, lambda: report.html_charts(findings))

        mine = polars_table.sort("label", "concurrency")
        # below 30 requests a side polars bootstraps the interval; compare where both use the
        # delta method (every level at the default size)
        same_method = ((pandas_table["count"] >= 30) & (pandas_table["base_count"] >= 30)).to_numpy()
        diffs = {
            c: float(
                np.nanmax(
                    np.abs(mine[c].to_numpy().astype(float) - pandas_table[c].to_numpy().astype(float))[same_method]
                )
            )
            for c in ("throughput_ratio", "per_request_ratio", "ci_low", "ci_high")
        }
        same_marks = (
            np.array(mine["within_noise"].fill_null(False).to_list())[same_method]
            == pandas_table["within_noise"].fillna(False).to_numpy()[same_method]
        ).all()
        rows = [
            ("level speedup table (reads the request rows)", "polars", t_pl),
            ("level speedup table (reads the request rows)", "pandas", t_pd),
            ("single-stream speedup table (bootstrap)", "polars", t_ss),
            ("whole report, tables + markdown, no plots", "polars", t_md),
            (f"whole report with {len(built.images)} plots", "polars", t_all),
            (f"report.html's {len(fragments)} charts alone (plotly)", "plotly", t_charts),
        ]
        print(f"\n{'what':<48} {'how':<8} {'seconds':>8}")
        for what, how, t in rows:
            print(f"{what:<48} {how:<8} {t:>8.2f}")
        print(f"\npolars / pandas on the level speedup table: {t_pl / t_pd:.2f}x the time ({t_pd / t_pl:.1f}x faster)")
        print(
            f"same numbers on {same_method.sum()} of {same_method.size} rows compared: max |difference| "
            f"{max(diffs.values()):.2e} over {', '.join(diffs)}; same noise marks: {bool(same_marks)}"
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of this process (generation included): {peak:.0f} MiB; polars {pl.__version__}")
        title = (
            f"{counts['requests']:,} request rows, {counts['points']} points; best of {args.repeat}; "
            f"polars {pl.__version__}, peak RSS {peak:.0f} MiB"
        )
        table = record.table(title, ["what", "how", "seconds"], [[w, h, round(t, 2)] for w, h, t in rows])
        checked = record.table(
            "polars against pandas on the level speedup table",
            ["rows compared", "largest difference", "same noise marks"],
            [[f"{same_method.sum()} of {same_method.size}", f"{max(diffs.values()):.2e}", str(bool(same_marks))]],
        )
        sources = ["sweep/analysis/speedups.py", "sweep/analysis/report.py", "sweep/analysis/charts.py"]
        record.write("report_speed", args, [table, checked], sources)
        return 0 if same_marks and max(diffs.values()) < 1e-6 else 1
    finally:
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
