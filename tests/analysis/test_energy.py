"""Energy per token and tok/s per kW in the analysis (sweep/analysis/energy.py): at real speed for a
dry run, in the frontier, the SLO tables and the report's energy section; null and said so where
the hosts measured no power; old results without the columns still load."""

from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq
import pytest

from sweep.analysis import energy, report
from sweep.analysis.slo import parse_slo
from sweep.results import load
from tests.analysis.sweepdir import SweepDir

WATTS = {1: 3000.0, 8: 4800.0}


def _dir(tmp_path, *, power=True, scale=None):
    sd = SweepDir(tmp_path, dry_run=scale is not None, bench_scale=scale)
    base = sd.point(
        drafter="none",
        nccl="default",
        baseline=True,
        tok_s=[90, 90],
        levels={1: 90, 8: 600},
        jitter=0.0,
        power=WATTS if power else None,
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[120, 120],
        levels={1: 120, 8: 540},
        jitter=0.0,
        power={1: 3300.0, 8: 5000.0} if power else None,
    )
    return sd.write()


def test_joules_per_token_and_tokens_per_second_per_kw(tmp_path):
    frame = energy.level_energy(load(_dir(tmp_path))).sort("point_id", "concurrency")
    assert energy.measured(frame)
    for row in frame.to_dicts():
        assert row["tok_s_kw"] == pytest.approx(1000.0 / row["j_per_token"])  # one figure, two ways
    base = frame.filter(pl.col("power_mean_w") == 3000.0).row(0, named=True)
    assert base["j_per_token"] == pytest.approx(3000.0 / 90) and base["tok_s_kw"] == pytest.approx(30.0)


def test_a_dry_runs_energy_is_at_real_speed_its_watts_as_measured(tmp_path):
    """The fake served 5x faster: the same watts for a fifth of the time; at real speed, 5x the
    energy per token and a fifth of the tok/s per kW."""
    real = energy.level_energy(load(_dir(tmp_path / "real"))).sort("point_id", "concurrency")
    dry = energy.level_energy(load(_dir(tmp_path / "dry", scale={"fake_speed": 5.0}))).sort("point_id", "concurrency")
    assert dry["power_mean_w"].to_list() == real["power_mean_w"].to_list()
    assert dry["j_per_token"].to_list() == pytest.approx((real["j_per_token"] * 5).to_list())
    assert dry["tok_s_kw"].to_list() == pytest.approx((real["tok_s_kw"] / 5).to_list())


def test_the_report_shows_energy_per_token_in_its_section_the_frontier_and_the_slo_table(tmp_path):
    md = report.build(_dir(tmp_path), with_plots=False, slos=[parse_slo("ttft_p50<=1s")]).markdown
    section = md.split("## Energy per token", 1)[1].split("\n## ", 1)[0]
    assert f"{3000.0 / 90:.2f} J (30.0)" in section  # the baseline at C=1: 33.33 J per token, 30 tok/s per kW
    assert energy.NO_POWER not in md
    frontier = md.split("## Throughput-interactivity frontier", 1)[1].split("\n## ", 1)[0]
    assert "tok/s per kW" in frontier and "J/token" in frontier
    assert "tok/s per kW at the last level meeting it" in md


def test_without_power_the_columns_are_null_and_the_report_says_so(tmp_path):
    tables = load(_dir(tmp_path, power=False))
    frame = energy.level_energy(tables)
    assert frame.height == 4 and not energy.measured(frame)
    assert frame["j_per_token"].null_count() == 4 and frame["tok_s_kw"].null_count() == 4  # null, never 0
    md = report.build(tmp_path, with_plots=False).markdown
    section = md.split("## Energy per token", 1)[1].split("\n## ", 1)[0]
    assert energy.NO_POWER.lower() in section.lower()
    assert "tok/s per kW" not in md and " J (" not in md


def test_results_written_before_the_energy_columns_still_load(tmp_path):
    d = _dir(tmp_path, power=False)
    for path in (d / "levels").glob("*.parquet"):  # as an older sweep wrote them: no power columns at all
        t = pq.read_table(path)
        pq.write_table(t.drop_columns([c for c in t.column_names if c.startswith(("power_", "energy_"))]), path)
    assert "power_mean_w" not in pq.read_table(next((d / "levels").glob("*.parquet"))).column_names
    levels = load(d)["levels"].collect()
    assert levels.schema["power_mean_w"] == pl.Float64 and levels.schema["power_samples"] == pl.Int32
    assert levels["energy_per_token_j"].null_count() == levels.height
    assert energy.NO_POWER.lower() in report.build(d, with_plots=False).markdown.lower()


def test_power_summed_over_other_gpus_than_the_servers_is_named(tmp_path):
    """Results measured when power summed the host's 8 GPUs for a TP=4 server: the report says their
    energy is not the server's; a TP=8 server's 8 are its own."""
    sd = SweepDir(tmp_path)
    sd.point(
        drafter="none",
        nccl="default",
        baseline=True,
        tok_s=[90, 90],
        levels={1: 90},
        jitter=0.0,
        power={1: 3000.0},
        argv=["python", "-m", "sglang.launch_server", "--tp-size", "4"],
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        tok_s=[90, 90],
        levels={1: 90},
        jitter=0.0,
        power={1: 3000.0},
        argv=["python", "-m", "sglang.launch_server", "--tp-size", "8"],
    )
    tables = load(sd.write())
    other = energy.other_gpus(tables, energy.level_energy(tables))
    assert other.to_dicts() == [{"label": "drafter=none,nccl=default", "power_gpus": 8, "gpus": 4}]
    md = report.build(tmp_path, with_plots=False).markdown
    section = md.split("## Energy per token", 1)[1].split("\n## ", 1)[0]
    assert "summed over the GPUs the server uses" in section
    assert (
        "drafter=none,nccl=default (8 GPUs summed, the server uses 4)" in section
        and "d1" not in section.split("WARNING")[1].split(".")[0]
    )
