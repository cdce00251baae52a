"""SLOs: the parser and its errors, goodput per level, the highest concurrency that meets an SLO
(interpolated, or marked beyond / below what was measured), and the best configuration per SLO."""

from __future__ import annotations

import argparse
import math

import polars as pl
import pytest

from sweep.analysis.cli import add_report_arguments, run_report
from sweep.analysis.slo import (
    SLO,
    Limit,
    from_experiment,
    from_settings,
    level_slo,
    parse_limit,
    parse_slo,
    recommendations,
    slo_table,
)
from sweep.core.errors import ConfigError, SLOError
from sweep.core.settings import SLOSettings
from sweep.results import load
from tests.analysis.sweepdir import SweepDir, story_sweep

# --- the syntax ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, metric, pct, value",
    [
        ("ttft_p90<=2s", "ttft", 90, 2.0),
        ("tpot_p99 <= 50ms", "tpot", 99, 0.05),
        ("latency_p50<=1500ms", "latency", 50, 1.5),
        ("tpot_p99.9<=800us", "tpot", 99.9, 0.0008),
        ("tok_s_p10>=20", "tok_s", 10, 20.0),
        ("TOK_S_P5>=12.5tok/s", "tok_s", 5, 12.5),
        ("ttft_p90<2s", "ttft", 90, 2.0),  # < is read as <=
    ],
)
def test_a_limit_parses(text, metric, pct, value):
    limit = parse_limit(text)
    assert (limit.metric, limit.percentile) == (metric, pct)
    assert math.isclose(limit.value, value)
    again = parse_limit(limit.text())  # text() round-trips
    assert again.text() == limit.text() and math.isclose(again.value, limit.value)


@pytest.mark.parametrize(
    "text, culprit",
    [
        ("ttfb_p90<=2s", "unknown metric 'ttfb'"),
        ("ttft_p90>=2s", "ttft is a time"),
        ("tok_s_p10<=20", "tok_s is a speed"),
        ("ttft_p90<=2", "needs a unit"),
        ("ttft_p90<=2h", "unit 'h'"),
        ("tok_s_p10>=20ms", "unit 'ms'"),
        ("ttft_p0<=2s", "percentile p0"),
        ("ttft_p101<=2s", "percentile p101"),
        ("ttft_p90=2s", "'=' is not a limit"),
        ("ttft<=2s", "is not a limit"),
        ("ttft_p90<=0s", "must be positive"),
    ],
)
def test_a_bad_limit_names_the_culprit(text, culprit):
    with pytest.raises(ConfigError) as e:
        parse_limit(text)
    assert culprit in e.value.message and text.split("<")[0].split(">")[0].split("=")[0] in e.value.message


def test_an_slo_with_a_name_and_several_limits():
    slo = parse_slo(" chat: ttft_p90<=2s, tpot_p90<=50ms ")
    assert slo.name == "chat" and [lim.metric for lim in slo.limits] == ["ttft", "tpot"]
    assert slo.text() == "ttft_p90<=2s,tpot_p90<=50ms"
    assert slo.describe() == "90% of requests with TTFT <= 2 s; 90% of requests with TPOT <= 50 ms"
    assert parse_slo("tok_s_p10>=20").name == "tok_s_p10>=20"  # unnamed: named after its limits
    assert parse_slo("tok_s_p10>=20").describe() == "90% of requests with per-user speed >= 20 tok/s"
    for bad, culprit in (
        ("chat:", "has no limit"),
        ("a b: ttft_p90<=2s", "SLO name 'a b'"),
        ("ttft_p90<=2s,ttft_p90<=3s", "ttft_p90 twice"),
    ):
        with pytest.raises(ConfigError, match=culprit):
            parse_slo(bad)


def test_the_experiments_settings_mirror_the_percentile_for_speeds():
    slo = from_settings(SLOSettings(name="chat", percentile=95, ttft_s=1.0, tok_s=30))
    assert slo.limits == (Limit("ttft", 95, 1.0), Limit("tok_s", 5, 30.0))
    assert from_settings(SLOSettings(tpot_s=0.05)).name == "tpot_p90<=50ms"
    with pytest.raises(ConfigError, match="percentile = 0"):
        SLOSettings(percentile=0, ttft_s=1.0)
    with pytest.raises(ConfigError, match="sets no limit"):
        SLOSettings(name="empty")
    with pytest.raises(ConfigError, match="tpot_s = -1"):
        SLOSettings(tpot_s=-1)


# --- the data -----------------------------------------------------------------------------------


def three_levels(tmp_path, **kw) -> SweepDir:
    """One baseline whose per-request tok/s is exactly 100, 90, 80 at C=1, 2, 4 (no jitter)."""
    sd = SweepDir(tmp_path)
    sd.point(
        drafter="none", nccl="default", baseline=True, tok_s=[100], levels={1: 100, 2: 180, 4: 320}, jitter=0.0, **kw
    )
    return sd


def test_the_highest_concurrency_is_interpolated_between_levels(tmp_path):
    tables = load(three_levels(tmp_path).write())
    row = slo_table(tables, [parse_slo("s: tok_s_p10>=85")]).row(0, named=True)
    # 90 at C=2, 80 at C=4: 85 is half way, in log concurrency 2 * sqrt(2)
    assert row["bound"] == "=" and math.isclose(row["c"], 2 * math.sqrt(2), rel_tol=1e-9)
    assert row["c_text"] == "≈2.83" and row["binding"] == "tok_s_p10>=85"
    assert math.isclose(row["tok_s_gpu"], (180 + 320) / 2 / 8)  # output tok/s per GPU there (8 GPUs)
    assert (row["last_met"], row["first_missed"]) == (2, 4)


def test_beyond_and_below_what_was_measured_are_marked(tmp_path):
    tables = load(three_levels(tmp_path).write())
    rows = slo_table(tables, [parse_slo("easy: tok_s_p10>=50"), parse_slo("hard: tok_s_p10>=150")]).to_dicts()
    easy, hard = rows
    assert (easy["bound"], easy["c_text"], easy["tok_s_gpu"]) == (">=", ">=4", 320 / 8)
    assert (hard["bound"], hard["c_text"], hard["tok_s_gpu"]) == ("<", "<1", 0.0)
    recs = recommendations(slo_table(tables, [parse_slo("hard: tok_s_p10>=150")]), [parse_slo("hard: tok_s_p10>=150")])
    assert recs[0]["best"] is None and "not even C=1" in recs[0]["reason"]


def test_goodput_counts_only_the_requests_that_met_the_slo(tmp_path):
    # C=2 sends 4 requests at 90 tok/s; 4 more fail there
    sd = three_levels(tmp_path, lost=[("level", 2, "http 503: busy")] * 4)
    tables = load(sd.write())
    lv = level_slo(tables, [parse_slo("s: tok_s_p10>=85")]).filter(pl.col("concurrency") == 2).row(0, named=True)
    assert lv["requests"] == 8 and lv["attainment"] == 0.5
    assert not lv["met"]  # half the requests failed: p10 is a failure (0 tok/s)
    wall = 100 * 4 / 180  # the level table's wall time of its 4 ok requests
    assert math.isclose(lv["goodput_rps"], 4 / wall) and math.isclose(lv["goodput_tok_s_gpu"], 4 * 100 / wall / 8)
    # failures push the highest concurrency meeting it down to between C=1 and C=2
    row = slo_table(tables, [parse_slo("s: tok_s_p10>=85")]).row(0, named=True)
    assert row["bound"] == "=" and row["last_met"] == 1 and row["first_missed"] == 2


def test_the_story_strict_slo_picks_a_drafter_and_a_loose_one_the_baseline(tmp_path):
    tables = load(story_sweep(tmp_path / "s", dry_run=False).write())
    slos = [parse_slo("strict: tok_s_p10>=40"), parse_slo("loose: tpot_p90<=100ms")]
    table = slo_table(tables, slos)
    strict, loose = recommendations(table, slos)
    assert strict["best"]["label"] == "drafter=k26_300k,steps=2,nccl=tuned" and not strict["best"]["baseline"]
    assert strict["best"]["vs_baseline"] > 0.5 and strict["runner_up"]["label"] == "drafter=k26_300k,steps=3,nccl=tuned"
    assert math.isclose(strict["best"]["margin"], strict["best"]["tok_s_gpu"] / strict["runner_up"]["tok_s_gpu"] - 1)
    assert loose["best"]["label"] == "drafter=none,nccl=tuned" and loose["best"]["baseline"]
    # every speculative point is behind its baseline under the loose SLO
    spec = table.filter((pl.col("slo") == "loose") & ~pl.col("baseline"))
    assert spec.height == 12 and (spec["vs_baseline"] < 0).all()


def test_a_dry_run_is_judged_at_real_speed(tmp_path):
    """The fake served 5x faster: its figures are divided back (500 tok/s -> 100) before any SLO."""
    sd = SweepDir(tmp_path, dry_run=True, bench_scale={"fake_speed": 5.0})
    sd.point(drafter="none", nccl="default", baseline=True, tok_s=[500], levels={1: 500, 2: 900, 4: 1600}, jitter=0.0)
    directory = sd.write()
    assert run_report(report_args(str(directory), "--slo", "s: tok_s_p10>=85", "--no-plots", "--quiet")) == 0
    md = (directory / "report" / "report.md").read_text()
    # per user at real speed: 100 (C=1), 90 (C=2), 80 (C=4) tok/s: 85 is met half way between 2 and 4
    assert "up to C≈2.83" in md and "DRY RUN at 5x" in md and "Applied as" not in md
    single = md.split("## Single stream")[1].split("##")[0]
    assert "100.0" in single and "500.0" not in single


def test_an_interpolated_reach_reads_as_interpolated_not_measured(tmp_path):
    """'up to C≈2.83, 90 tok/s per GPU' read as measured, where no level was run at C=2.83: the answer
    names the two measured levels it lies between, and the throughput there carries its '≈'."""
    sd = SweepDir(tmp_path)
    sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100], levels={1: 100, 2: 180, 4: 320}, jitter=0.0)
    directory = sd.write()
    assert run_report(report_args(str(directory), "--slo", "s: tok_s_p10>=85", "--no-plots", "--quiet")) == 0
    md = (directory / "report" / "report.md").read_text()
    deploy = md.split("## Deploy")[1].split("\n## ")[0]
    assert "up to C≈2.83 (interpolated between the measured levels C=2 and C=4), ≈" in deploy, deploy
    summary = md.split("## Summary")[1].split("\n## ")[0]
    assert "up to C≈2.83 (interpolated between the measured levels C=2 and C=4): ≈" in summary, summary


def report_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_report_recomputes_from_parquet_for_any_slo_given(tmp_path):
    directory = story_sweep(tmp_path / "s", dry_run=False).write()
    (directory / "experiment.yaml").write_text(
        "name: s\nbenchmark:\n  slo:\n  - {name: strict, percentile: 90, ttft_s: null, tpot_s: null, tok_s: 40.0}\n"
    )
    assert [s.name for s in from_experiment(directory)] == ["strict"]
    assert run_report(report_args(str(directory), "--no-plots", "--quiet")) == 0  # the experiment's SLO
    md = (directory / "report" / "report.md").read_text()
    summary = md.split("## Summary")[1].split("##")[0]
    assert (
        "- SLO strict (90% of requests with per-user speed >= 40 tok/s): no decision: drafter=k26_300k,steps=2,"
        "nccl=tuned measured highest, within noise of drafter=k26_300k,steps=3,nccl=tuned, drafter=k26_300k,steps=1,"
        "nccl=tuned; up to C"
    ) in summary
    assert (
        "over the runner-up drafter=k26_300k,steps=3,nccl=tuned" in summary
        and "over its baseline drafter=none,nccl=tuned" in summary
    )
    assert "### Goodput under strict" in md
    run_report(report_args(str(directory), "--slo", "loose: tpot_p90<=100ms", "--no-plots", "--quiet"))
    md = (directory / "report" / "report.md").read_text()
    assert (
        "- SLO loose (90% of requests with TPOT <= 100 ms): no decision: drafter=none,nccl=tuned (a baseline) "
        "measured highest, within noise of drafter=none,nccl=default; up to C"
    ) in md  # only those judged within noise of the pick, each by its own interval (issue 44)
    assert "SLO strict" not in md  # --slo replaces the experiment's
    with pytest.raises(SLOError, match="'x' more than once"):
        run_report(report_args(str(directory), "--slo", "x: tpot_p90<=1s", "--slo", "x: ttft_p90<=1s", "--quiet"))
    with pytest.raises(SLOError, match="unknown metric 'tbt'"):
        run_report(report_args(str(directory), "--slo", "tbt_p90<=1s", "--quiet"))


def test_no_slo_says_how_to_give_one(tmp_path):
    directory = three_levels(tmp_path).write()
    run_report(report_args(str(directory), "--no-plots", "--quiet"))
    assert "No SLO given: set benchmark.slo" in (directory / "report" / "report.md").read_text()


def test_an_slo_object_is_plain_data():
    slo = SLO("a", (Limit("ttft", 90, 2.0),))
    assert slo.text() == "ttft_p90<=2s"


def test_an_slo_is_one_type_however_it_is_given():
    """The command line's grammar and the experiment's ``benchmark.slo`` give the same type, which
    the host's refinement and the report both judge by (``sweep.core.slo_rule``)."""
    from sweep.analysis import slo as analysis_slo
    from sweep.core import slo_rule

    given = slo_rule.parse_slo("chat: ttft_p90<=2s,tok_s_p10>=20")
    written = slo_rule.from_settings(SLOSettings(name="chat", percentile=90, ttft_s=2.0, tok_s=20.0))
    assert type(given) is type(written) is slo_rule.SLO is analysis_slo.SLO
    assert given == written and given.text() == "ttft_p90<=2s,tok_s_p10>=20"
    assert analysis_slo.parse_slo is slo_rule.parse_slo and analysis_slo.from_settings is slo_rule.from_settings


def test_the_records_the_analysis_passes_on_are_typed(tmp_path):
    """What crosses functions in the analysis has its keys declared: the reach of an SLO along one
    configuration's levels (a dataclass), each SLO's pick and the report's header facts (dicts whose
    keys a type checker sees); the values are those the report has always shown."""
    from sweep.analysis.health import SweepSummary, sweep_summary
    from sweep.analysis.slo import Reach, Recommendation, highest_meeting

    tables = load(three_levels(tmp_path).write())
    slos = [parse_slo("easy: tok_s_p10>=50"), parse_slo("hard: tok_s_p10>=150")]
    assert highest_meeting(slos[0], []) == Reach()
    levels = level_slo(tables, slos[:1]).to_dicts()
    reach = highest_meeting(slos[0], levels)
    assert isinstance(reach, Reach) and (reach.bound, reach.c, reach.last_met) == (">=", 4.0, 4)
    recs = recommendations(slo_table(tables, slos), slos)
    assert [set(r) for r in recs] == [Recommendation.__required_keys__] * 2
    assert recs[0]["best"] is not None and recs[0]["workload"] == "" and recs[1]["best"] is None
    summary = sweep_summary(tables)
    assert set(summary) == SweepSummary.__required_keys__ and summary["points"] == 1
