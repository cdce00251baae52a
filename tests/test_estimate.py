"""The cost model: benchmark seconds from token counts, levels and the stop rule; startup from
earlier results; the per-host schedule ``--plan`` prints; and the live view's ETA on the same model."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from rich.console import Console

from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings, StopSettings
from sweep.experiment import config
from sweep.experiment import estimate as e
from sweep.experiment import plan as planning
from sweep.orchestrate.progress import SweepProgress

sys.path.insert(0, str(Path(__file__).parent / "analysis"))
from sweepdir import SweepDir  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def bench(**kw) -> BenchSettings:
    return BenchSettings(
        single_stream=SingleStreamSettings(runs=3, warmup=1, max_tokens=100),
        concurrency=ConcurrencySettings(levels=[1, 10], rounds=2, max_tokens=50, **kw),
    )


def test_benchmark_seconds_from_tokens_levels_and_speeds():
    speed = e.SpeedModel(single_tok_s=50, measured=((1, 50.0), (10, 20.0)))
    # single: 4 runs x 100 tokens at 50 tok/s; C=1: 2 requests x 50 tokens at 50 tok/s;
    # C=10: 20 requests x 50 tokens over 10 in flight at 20 tok/s each
    expected = 4 * 100 / 50 + 2 * 50 / 50 + 20 * 50 / (10 * 20) + 2 * e.LEVEL_OVERHEAD_S
    assert math.isclose(e.bench_seconds(bench(), speed), expected)
    # benchmark.repeats: every level measured that many times (the single stream once)
    again = bench()
    again.repeats = 3
    levels = expected - 4 * 100 / 50
    assert math.isclose(e.bench_seconds(again, speed), 4 * 100 / 50 + 3 * levels)
    # the stop rule at its first chance: one wave at C=10, still 2 requests at C=1 (a spread needs 2)
    stopped = bench(stop=StopSettings())
    assert (e.requests_sent(stopped, 1), e.requests_sent(stopped, 10)) == (2, 10)
    assert e.requests_sent(bench(stop=StopSettings(min_requests=15)), 10) == 20
    assert math.isclose(e.bench_seconds(stopped, speed), expected - 10 * 50 / (10 * 20))


def test_open_loop_levels_count_their_arrivals_and_a_drain():
    speed = e.SpeedModel(single_tok_s=50, measured=((1, 50.0), (10, 20.0)))
    rated = bench()
    rated.rates = [2.0, 4.0]  # 100 requests each (open_loop's default): 50 s and 25 s of arrivals
    drain = 50 / 50 + e.LEVEL_OVERHEAD_S  # the last request alone at C=1's speed
    assert math.isclose(e.bench_seconds(rated, speed) - e.bench_seconds(bench(), speed), 50 + 25 + 2 * drain)
    rated.open_loop.duration_s = 10.0  # the duration ends the 2 req/s level first, not the 4 req/s one's 25 s
    assert math.isclose(e.rate_level_s(rated, 2.0, speed), 10 + drain)
    assert math.isclose(e.rate_level_s(rated, 20.0, speed), 5 + drain)


def test_speeds_interpolate_between_measured_levels_and_follow_the_default_shape_outside():
    m = e.SpeedModel(measured=((2, 40.0), (8, 10.0)))
    assert math.isclose(m.per_request(4), 20.0)  # log-log half way
    d = e.SpeedModel()
    assert math.isclose(m.per_request(16), 10.0 * d.default_at(16) / d.default_at(8))
    assert math.isclose(d.per_request(1), d.capacity_tok_s / (1 + d.half_c))


def test_list_scheduling_and_the_eta():
    busy, count, makespan = e.schedule([10, 10, 10, 30], hosts=2)
    assert makespan == 40 and sorted(count) == [2, 2] and sorted(busy) == [20, 40]
    assert e.schedule([10, 10, 10], hosts=4, span=2)[2] == 20  # servers two hosts wide: 2 at a time
    # one running point with 5 s left of 10; then 3 of 10 s on 2 hosts
    assert e.eta_s([10, 10, 10], [(10, 5)], 2) == 20
    assert e.eta_s([10, 10, 10], [(10, 5)], 2, calibration=2.0) == 40  # 15 left; 20 s each: 0-20-40 and 15-35
    assert e.calibration([(10, 20), (10, 20)]) == 2.0 and e.calibration([(10, 1000)]) == 5.0
    assert e.eta_s([], [], 3) == 0


def write_history(root: Path) -> Path:
    sd = SweepDir(root / "old-dryrun", dry_run=True)
    argv = ["python", "--model-path", "/models/m"]
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100, 8: 400}, argv=argv)
    sd.point(drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=[150], levels={1: 150, 8: 300}, argv=argv)
    sd.point(
        drafter="none", nccl="x", baseline=True, tok_s=[1], levels={1: 1}, argv=["python", "--model-path", "/other"]
    )
    return sd.write()


def test_history_of_the_same_model_gives_startup_and_speeds(tmp_path):
    write_history(tmp_path)
    h = e.load_history([tmp_path], model_path="/models/m", dry_run=True)
    assert h.points == 2 and h.startup_s == {"baseline": 125.0, "speculative": 145.0}  # SweepDir's startups
    assert h.speed.measured == ((1, 125.0), (8, 43.75))  # medians of per-request tok/s (100/150; 50/37.5)
    assert h.overhead_s is None  # SweepDir's requests carry no send times: no bench span to subtract
    assert e.load_history([tmp_path], model_path="/models/m", dry_run=False).points == 0  # not a dry run
    assert e.load_history([tmp_path / "nothing"], model_path="/models/m", dry_run=True).points == 0
    est = e.estimate_sweep([("b", True), ("s", False)], bench(), hosts=1, history=h)
    assert [p.startup_s for p in est.points] == [125.0, 145.0] and {p.startup_from for p in est.points} == {"history"}
    assert est.points[0].overhead_s == e.DEFAULT_OVERHEAD_S
    assert math.isclose(est.points[0].bench_s, e.bench_seconds(bench(), h.speed))
    default = e.estimate_sweep([("b", True), ("s", False)], bench(), hosts=1, startup_factor=300)
    assert [p.startup_s for p in default.points] == [
        e.DEFAULT_STARTUP_S["baseline"] / 300,
        e.DEFAULT_STARTUP_S["speculative"] / 300,
    ]
    assert any("no earlier results" in n for n in default.notes)


def test_plan_prints_the_time_per_host(tmp_path, capsys):
    write_history(tmp_path)
    exp_file = tmp_path / "exp.yaml"
    exp_file.write_text(
        (REPO / "experiments" / "k26_eagle.yaml").read_text().replace("/models/Kimi-K2.6-INT4", "/models/m")
        + f"results_dir: {tmp_path / 'new'}\n"
    )
    from sweep.cli import main

    assert main([str(exp_file), "--plan", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "estimate: 18 points" in out and "startup from 2 earlier points (old-dryrun)" in out
    assert "host 3: 6 points" in out and "whole sweep on 3 hosts" in out
    exp = config.load(exp_file)
    lines = e.plan_lines(planning.build(exp), mode="real")
    assert "startup: default" in lines[0] and lines[-1].endswith("divide by its hosts")


def test_the_live_eta_uses_the_estimates_and_learns_from_finished_points():
    est = {"a": 100.0, "b": 100.0, "c": 100.0, "d": 100.0}
    p = SweepProgress(4, 2, Console(file=open("/dev/null", "w")), estimates=est)
    assert p.eta_s() == 200  # 4 points of 100 s on 2 hosts
    p.point_finished(None, "a", "ok", 200.0)  # took twice its estimate
    p.point_finished(None, "b", "ok", 200.0)
    assert p.eta_s() == pytest.approx(200.0)  # c and d, 200 s each, side by side
    plain = SweepProgress(4, 2, Console(file=open("/dev/null", "w")))
    plain.point_finished(None, "a", "ok", 30.0)
    assert plain.eta_s() == 45.0  # without estimates: the mean of the finished, over the hosts


def test_a_cpu_point_is_estimated_with_a_cpu_servers_startup(tmp_path):
    """cpu_tiny_spec's --plan said 1h32m: 10 minutes of GPU startup per point, where a tiny CPU server
    starts in about a minute (SGLang's CPU backend captures no CUDA graphs)."""
    exp = config.load(REPO / "experiments" / "cpu_tiny_spec.yaml", [f"results_dir={tmp_path / 'new'}"])
    lines = e.plan_lines(planning.build(exp), mode="local")
    assert "startup 50s (baseline) / 1m00s (speculative)" in lines[0], lines
    assert "default for a CPU server 50 s (baseline) / 60 s (speculative)" in "\n".join(lines)
    est = e.estimate_sweep([("b", True, "cpu"), ("s", False, "cpu"), ("g", False, None)], bench(), hosts=1)
    assert [p.startup_s for p in est.points] == [
        e.CPU_STARTUP_S["baseline"],
        e.CPU_STARTUP_S["speculative"],
        e.DEFAULT_STARTUP_S["speculative"],
    ]
    assert 40 <= e.CPU_STARTUP_S["baseline"] <= e.CPU_STARTUP_S["speculative"] <= 90
    whole = next(line for line in lines if "whole sweep" in line)
    assert "h" not in whole.split(":")[-1]  # minutes, not 1h32m


def test_a_dry_runs_default_startup_note_names_both_figures():
    """'default 600 s (baseline) / 780 s (speculative) / 300' read as a third kind of point: the real
    figures, then the dry run's, with what divides them."""
    est = e.estimate_sweep([("b", True), ("s", False)], bench(), hosts=1, startup_factor=300)
    (note,) = [n for n in est.notes if n.startswith("startup:")]
    base, spec = e.DEFAULT_STARTUP_S["baseline"], e.DEFAULT_STARTUP_S["speculative"]
    assert note == (
        f"startup: no earlier results of this model, default {base:.0f} s (baseline) / {spec:.0f} s (speculative) "
        f"at the real system's speed; {base / 300:.2g} s / {spec / 300:.2g} s here, the fake starting 300x faster "
        "(dry_run.fake_startup_speed)"
    )
    assert [p.startup_s for p in est.points] == [base / 300, spec / 300]


def test_the_estimate_counts_in_the_right_number(tmp_path):
    exp_file = tmp_path / "exp.yaml"
    exp_file.write_text(
        "name: one\nserver: {model_path: /m, tp_size: 8}\n"
        "grid: {axes: {drafter: {values: {none: {}}}}}\n"
        f"results_dir: {tmp_path / 'new'}\n"
    )
    lines = e.plan_lines(planning.build(config.load(exp_file)), mode="real", hosts=1)
    assert lines[0].startswith("estimate: 1 point, ") and any(line.startswith("  host 1: 1 point, ") for line in lines)
    assert any(line.startswith("  whole sweep on 1 host:") for line in lines)
    h = e.PriorRuns(startup_s={"baseline": 10.0}, points=1, sources=("results/old",))
    assert (
        "startup from 1 earlier point (old)"
        in e.describe(e.estimate_sweep([("b", True)], bench(), hosts=1, history=h), h)[0]
    )


def test_open_loop_levels_in_the_history_are_no_point_of_the_speed_curve(tmp_path):
    """A ``benchmark.rates`` level is stored with concurrency 0: learning from it took log(0) (a
    ValueError in every later --plan and --dry-run beside it)."""
    import pyarrow.parquet as pq

    from sweep.results.schema import from_rows

    d = write_history(tmp_path)
    base = next((d / "levels").glob("*.parquet")).stem
    pq.write_table(
        from_rows(
            [
                dict(
                    point_id=base,
                    concurrency=0,
                    arrival="poisson",
                    offered_rate=4.0,
                    max_tokens=100,
                    requests=30,
                    ok=30,
                    failed=0,
                    wall_s=10.0,
                    output_throughput=300.0,
                    per_request_tok_s=90.0,
                )
            ],
            "levels",
        ),
        d / "levels" / f"{base}-rate.parquet",
    )
    h = e.load_history([tmp_path], model_path="/models/m", dry_run=True)
    assert h.speed.measured == ((1, 125.0), (8, 43.75))  # as without the open-loop row
    assert e.bench_seconds(bench(), h.speed) > 0
