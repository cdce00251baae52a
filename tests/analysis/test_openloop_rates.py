"""Open-loop rows are matched on their rate's key, never on the raw float: a dry run's rates divided
back to real speed (5.0 / 5) and rebuilt from an integer key need not be the same double."""

from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq

from sweep.analysis import openloop
from sweep.analysis import report as report_mod
from sweep.analysis import slo as slo_mod
from sweep.analysis.findings import analyze
from sweep.results import load
from sweep.results.schema import from_rows
from tests.analysis.sweepdir import SweepDir

SPEED = 5.0
SENT = [1.0, 4.0, 16.0]  # what the fake was sent, fake_speed times the user's 0.2, 0.8, 3.2


def _dry_run_with_rates(path):
    sd = SweepDir(path, dry_run=True, bench_scale={"fake_speed": SPEED})
    pid = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100})
    sd.write()
    levels = [
        dict(
            point_id=pid,
            concurrency=0,
            max_tokens=100,
            requests=10,
            ok=10,
            failed=0,
            wall_s=10 / r,
            output_throughput=100 * r,
            offered_rate=r,
            arrival="poisson",
            achieved_rate=r,
            kept_up=True,
        )
        for r in SENT
    ]
    requests = [
        dict(
            point_id=pid,
            phase="rate",
            concurrency=0,
            seq=i,
            offered_rate=r,
            completion_tokens=100,
            latency_s=1.0,
            ttft_s=0.05,
            tpot_s=0.01,
            ok=True,
        )
        for r in SENT
        for i in range(10)
    ]
    pq.write_table(from_rows(levels, "levels"), path / "levels" / "open.parquet")
    pq.write_table(from_rows(requests, "requests"), path / "requests" / "open.parquet")
    return path


def test_open_loop_goodput_is_found_for_every_rate_of_a_dry_run(tmp_path):
    tables = load(_dry_run_with_rates(tmp_path / "d"))
    slos = [slo_mod.parse_slo("ttft_p90<=2s")]
    shown = openloop.rate_levels(tables)["offered_rate"].to_list()
    assert shown == [r / SPEED for r in SENT]
    good = openloop.rate_slo(tables, slos)
    assert good["offered_rate"].to_list() == shown  # the levels' own rates, not floats rebuilt from keys
    f = analyze(tables, slos=slos)
    table = report_mod.open_loop_sections(f)[0].table
    cells = table[[c for c in table.columns if c.startswith("goodput")][0]].to_list()
    assert len(cells) == 3 and all(c.endswith("(100%)") for c in cells), cells


def test_join_on_rate_matches_a_rate_computed_two_ways():
    left = pl.DataFrame({"point_id": ["p", "p"], "offered_rate": [0.2, 3.2]})
    right = pl.DataFrame({"point_id": ["p", "p"], "offered_rate": [200000 * 1e-6, 3.1999999999999997], "g": [1, 2]})
    assert right["offered_rate"].to_list() != left["offered_rate"].to_list()
    joined = openloop.join_on_rate(left, right)
    assert joined["g"].to_list() == [1, 2] and joined["offered_rate"].to_list() == [0.2, 3.2]
