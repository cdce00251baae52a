"""`report DIR --vs OTHER`: the same labels side by side, with the change and its noise."""

from __future__ import annotations

import argparse
import re

import polars as pl
import pytest

from sweep.analysis import compare_table
from sweep.analysis.cli import add_report_arguments, run_report
from sweep.results import load
from tests.analysis.sweepdir import SweepDir


def sweep(path, d1_tok_s, d1_levels, *, extra: str | None = None, d2_status: str = "ok"):
    sd = SweepDir(path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 101, 99], levels={1: 100, 16: 1200})
    sd.point(drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=d1_tok_s, levels=d1_levels)
    sd.point(drafter="d2", steps="2", nccl="default", baseline_of=base, tok_s=[110, 111, 109], status=d2_status)
    if extra:
        sd.point(drafter=extra, steps="1", nccl="default", baseline_of=base, tok_s=[120, 121, 119])
    return sd.write()


@pytest.fixture
def pair(tmp_path):
    today = sweep(tmp_path / "today", [150, 151, 149], {1: 150, 16: 1320}, extra="d3")
    last_week = sweep(tmp_path / "last_week", [120, 121, 119], {1: 120, 16: 1200}, d2_status="failed")
    return today, last_week


def test_compare_table(pair):
    today, last_week = pair
    table = compare_table(load(today), load(last_week))
    row = lambda label, figure, c=None: table.filter(  # noqa: E731
        (pl.col("label") == label)
        & (pl.col("figure") == figure)
        & (pl.col("concurrency").is_null() if c is None else pl.col("concurrency") == c)
    ).row(0, named=True)
    d1 = row("drafter=d1,steps=2,nccl=default", "tok_s")
    assert (d1["this"], d1["other"]) == (150, 120) and d1["change"] == pytest.approx(0.25)
    assert d1["within_noise"] is False
    base = row("drafter=none,nccl=default", "tok_s")
    assert base["change"] == pytest.approx(0) and base["within_noise"] is True
    level = row("drafter=d1,steps=2,nccl=default", "output_throughput", 16)
    assert level["change"] == pytest.approx(0.1) and level["within_noise"] is False
    assert row("drafter=d1,steps=2,nccl=default", "speedup")["change"] == pytest.approx(0.25)
    only_here = row("drafter=d3,steps=1,nccl=default", "tok_s")
    assert only_here["other"] is None and only_here["change"] is None


def test_vs_in_the_report(pair, capsys):
    today, last_week = pair
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    run_report(parser.parse_args([str(today), "--vs", str(last_week), "--no-plots", "--quiet"]))
    md = (today / "report" / "report.md").read_text()
    assert f"## Compared with {last_week}" in md
    assert "2 in both" not in md and "3 in both, 1 only here, 0 only there" in md
    assert "Only here: drafter=d3,steps=1,nccl=default" in md
    assert "Status changed: drafter=d2,steps=2,nccl=default: failed -> ok" in md
    assert re.search(r"\| drafter=d1,steps=2,nccl=default +\| 150\.0 +\| 120\.0 +\| \+25\.0% ", md)
    assert re.search(r"\| drafter=none,nccl=default +\| ~\+0\.0% +\| ~\+0\.0% +\|", md)
    assert re.search(r"\| drafter=d1,steps=2,nccl=default +\| \+25\.0% +\| \+10\.0% +\|", md)


def test_a_throughput_change_is_judged_around_itself(tmp_path):
    """The same throughput at C=16 while each request is 15 % slower: '+0.0%' is no change beyond noise (the
    per-request interval, about [0.84, 0.86] widened by the level-wide noise, is applied around the
    throughput's own change); the per-request change is beyond it."""

    def one(path, per_request):
        sd = SweepDir(path)
        sd.point(
            drafter="none",
            nccl="default",
            baseline=True,
            tok_s=[100, 101, 99],
            levels={1: 100, 16: 1200},
            per_request=per_request,
        )
        return load(sd.write())

    table = compare_table(one(tmp_path / "a", {16: 75 * 0.85}), one(tmp_path / "b", None))
    row = table.filter((pl.col("figure") == "output_throughput") & (pl.col("concurrency") == 16)).row(0, named=True)
    assert row["change"] == pytest.approx(0) and row["within_noise"] is True
    assert row["ci_low"] < 1 < row["ci_high"]
    per_request = table.filter((pl.col("figure") == "per_request_tok_s") & (pl.col("concurrency") == 16)).row(
        0, named=True
    )
    assert per_request["change"] == pytest.approx(-0.15) and per_request["within_noise"] is False


def test_a_dry_run_against_a_real_run_compares_at_real_speed(tmp_path):
    """The fake at 5x measured 500 tok/s where the real system does 100: no change, within noise (the
    intervals from the dry run's samples at real speed too, not 5x)."""

    def one(path, factor):
        sd = SweepDir(path, dry_run=factor is not None, bench_scale={"fake_speed": factor} if factor else None)
        k = factor or 1
        sd.point(
            drafter="none",
            nccl="default",
            baseline=True,
            tok_s=[100 * k, 101 * k, 99 * k],
            levels={1: 100 * k, 16: 1200 * k},
        )
        return load(sd.write())

    table = compare_table(one(tmp_path / "dry", 5.0), one(tmp_path / "real", None))
    for figure, c in (("tok_s", None), ("per_request_tok_s", 16), ("output_throughput", 16)):
        row = table.filter((pl.col("figure") == figure) & (pl.col("concurrency").eq_missing(c))).row(0, named=True)
        assert row["change"] == pytest.approx(0, abs=1e-9) and row["within_noise"] is True, figure


def _served(path, model: str, tp: int, gpu: str = "H200"):
    sd = SweepDir(path)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", model, "--tp-size", str(tp)]
    base = sd.point(
        drafter="none", nccl="default", baseline=True, tok_s=[100, 101, 99], levels={1: 100}, argv=argv, gpu_name=gpu
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[150, 151, 149],
        levels={1: 150},
        argv=argv + ["--speculative-algorithm", "EAGLE3"],
        gpu_name=gpu,
    )
    return sd.write()


def test_vs_warns_where_the_two_sweeps_serve_different_servers(tmp_path):
    """``drafter=none`` here and there match by label; of another model or TP size they are other servers."""
    from sweep.analysis.compare import server_differences

    k26_tp8 = load(_served(tmp_path / "a", "/models/Kimi-K2.6", 8))
    assert server_differences(k26_tp8, load(_served(tmp_path / "b", "/models/Kimi-K2.6", 8))) == []
    glm_tp4 = _served(tmp_path / "c", "/models/GLM-5", 4, gpu="B200")
    warnings = server_differences(k26_tp8, load(glm_tp4))
    assert len(warnings) == 3, warnings
    assert "model: /models/Kimi-K2.6 here, /models/GLM-5 there" in warnings[0]
    assert "GPUs per server: 8 here, 4 there" in warnings[1]
    assert "GPU: H200 here, B200 there" in warnings[2]
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    run_report(parser.parse_args([str(tmp_path / "a"), "--vs", str(glm_tp4), "--no-plots", "--quiet"]))
    md = (tmp_path / "a" / "report" / "report.md").read_text()
    assert "Warning: the two sweeps differ in model" in md and "are different servers" in md


def test_a_level_change_between_two_runs_is_judged_with_the_level_wide_noise(tmp_path):
    """3 % less throughput at C=16, each request 3 % slower, on requests that spread 1 %: beyond the
    requests' interval, but a level is measured once, so the level-wide noise (unknown here: 2 levels, the
    floor) puts it within noise, as every verdict at a level; history flags nothing from it."""

    def one(path, k):
        sd = SweepDir(path)
        sd.point(
            drafter="none",
            nccl="default",
            baseline=True,
            tok_s=[100, 101, 99],
            levels={1: 100, 16: 1200 * k},
            jitter=0.01,
        )
        return load(sd.write())

    table = compare_table(one(tmp_path / "a", 0.97), one(tmp_path / "b", 1.0))
    for figure in ("output_throughput", "per_request_tok_s"):
        row = table.filter((pl.col("figure") == figure) & (pl.col("concurrency") == 16)).row(0, named=True)
        assert row["change"] == pytest.approx(-0.03) and row["within_noise"] is True, row
