"""``concurrency.refine`` against the fake SGLang server: a running cap of 4 makes TTFT jump past
C=4 (the fifth request waits for a whole answer), so an SLO on TTFT has its boundary between 4 and
5; from the levels [1, 16] refinement must find it, and the report, reading the same directory,
must put the highest concurrency meeting it in the same bracket."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from sweep.analysis.slo import from_settings, level_slo, slo_table
from sweep.bench.runner import run
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings, SLOSettings
from sweep.results import load
from tests.analysis.sweepdir import SweepDir

pytestmark = pytest.mark.slow

SPEED = 20.0
SCALE = 2.0  # what a measured second is in real seconds (a dry run's fake_speed): the limit is judged at x2
# at speed 20 with 64-token answers, p90 TTFT is ~0.02 s up to C=4 and ~0.06 s at C=5 (one waits a whole
# answer): 0.035 s measured, 0.07 s at the real speed the rule converts to
LIMIT_S = 0.035 * SCALE


def test_refinement_adds_levels_at_the_slo_boundary_and_the_report_agrees(fake_sglang, tmp_path):
    server = fake_sglang("--max-running-requests", "4", speed=SPEED)
    sd = SweepDir(tmp_path / "out", dry_run=True, bench_scale={"fake_speed": SCALE})
    pid = sd.point(baseline=True, drafter="none", nccl="default")
    slo = SLOSettings(name="fast", percentile=90, ttft_s=LIMIT_S)
    s = BenchSettings(
        single_stream=SingleStreamSettings(runs=0, warmup=0),
        server_metrics=False,
        slo=[slo],
        concurrency=ConcurrencySettings(
            levels=[1, 16], rounds=1, max_tokens=64, refine=True, refine_max=4, slo_time_scale=SCALE
        ),
    )
    result = run(server.url, s, point_id=pid)
    levels = result.levels.to_pylist()
    assert [(r["concurrency"], r["refined"]) for r in levels] == [
        (1, False),
        (16, False),
        (4, True),
        (8, True),
        (6, True),
        (5, True),
    ]  # bisection: 4 met; 8, 6, 5 missed
    requests = result.requests.to_pylist()
    assert {r["concurrency"] for r in requests} == {1, 16, 4, 8, 6, 5}  # refined levels' rows like any level's
    assert sum(r["concurrency"] == 5 for r in requests) == 5

    out = sd.write()
    for name in ("requests", "levels"):
        (out / name).mkdir(exist_ok=True)
        pq.write_table(getattr(result, name), out / name / f"{pid}.parquet")
    tables = load(out)
    fast = from_settings(slo)
    per_level = level_slo(tables, [fast])
    met = dict(zip(per_level["concurrency"], per_level["met"]))
    assert met == {1: True, 4: True, 5: False, 6: False, 8: False, 16: False}
    row = slo_table(tables, [fast], per_level).row(0, named=True)
    assert (row["last_met"], row["first_missed"]) == (4, 5) and 4 <= row["c"] <= 5
    assert row["boundary"] == "between C=4 and C=5, found by bisection"
