"""Open-loop levels (``benchmark.rates``, a trace at its own timing): the arrival draw, and the levels
against the fake SGLang server on loopback, with its running cap queueing the rest as SGLang does."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from sweep.analysis import report as report_mod
from sweep.analysis.openloop import closed_loop, rate_levels
from sweep.bench import arrivals, openloop
from sweep.bench.cli import write_out
from sweep.bench.runner import run
from sweep.core import workload_spec
from sweep.core.errors import BenchError
from sweep.core.settings import BenchSettings, ConcurrencySettings, OpenLoopSettings, SingleStreamSettings
from sweep.results import load
from tests.bench.bench_fake_server import REPO

NO_SINGLE = SingleStreamSettings(runs=0, warmup=0)


def test_poisson_arrivals_are_bench_servings_draw_and_follow_the_rate():
    t = arrivals.times(4.0, seed=7, requests=500)
    np.random.seed(7)  # what bench_serving --seed 7 --request-rate 4 sleeps between its sends
    gaps = [np.random.exponential(1 / 4.0) for _ in range(499)]
    assert t[0] == 0.0 and np.allclose(np.diff(t), gaps)
    many = arrivals.times(50.0, seed=0, duration_s=40.0)  # 2000 expected, sd ~45: a fixed seed, so exact
    assert abs(len(many) - 2000) < 5 * 2000**0.5 and max(many) < 40.0
    assert arrivals.times(50.0, seed=0, duration_s=40.0) == many  # seeded: the same draw every time


def test_gamma_burstiness_and_ramp_up_shape_the_arrivals():
    bursty = np.diff(arrivals.times(10.0, seed=1, requests=4000, arrival="gamma", burstiness=0.25))
    regular = np.diff(arrivals.times(10.0, seed=1, requests=4000, arrival="gamma", burstiness=4.0))
    for gaps, cv in ((bursty, 2.0), (regular, 0.5)):  # gamma's coefficient of variation: 1 / sqrt(shape)
        assert abs(gaps.mean() - 0.1) < 0.01 and abs(gaps.std() / gaps.mean() - cv) < 0.15 * cv
    ramped = np.array(arrivals.times(10.0, seed=2, requests=3000, ramp_up_s=20.0))
    # the rate climbs linearly to 10/s over 20 s: 100 expected in the ramp (25 in its first half), then 10/s
    assert 60 < (ramped < 20).sum() < 140 and (ramped < 10).sum() < 45
    assert abs(((ramped >= 20) & (ramped < 120)).sum() - 1000) < 150


def test_a_growing_backlog_is_not_kept_up_and_a_steady_one_is():
    rng = np.random.RandomState(3)
    t = np.cumsum(rng.exponential(0.1, 200)).tolist()  # 10 req/s over ~20 s
    steady = [int(v) for v in rng.poisson(6, 200)]  # hovers around rate x latency
    growing = [int(6 + 0.5 * i + v) for i, v in enumerate(rng.poisson(1, 200))]  # +0.5 per arrival: ~100 over the level
    g_steady, g_growing = openloop.queue_growth(t, steady), openloop.queue_growth(t, growing)
    assert abs(g_steady) < openloop.growth_noise(steady) and openloop.kept_up(g_steady, steady) is True
    assert g_growing == pytest.approx(0.5 * 199, rel=0.05) and openloop.kept_up(g_growing, growing) is False
    # the fill from empty over the first latency (2 s here) is no growth: it is left out of the fit
    filling = [min(i, 20) + v for i, v in enumerate(steady)]
    assert openloop.kept_up(openloop.queue_growth(t, filling, settle=2.5), filling) is True
    assert openloop.queue_growth(t[:9], steady[:9]) is None  # too few to fit: judged by the drain
    assert openloop.kept_up(None, [1, 2, 3], drain=0.5, settle=0.1) is False
    assert openloop.kept_up(None, [1, 2, 3], drain=0.2, settle=0.1) is True


@pytest.mark.parametrize(
    "change, key",
    [
        ({"rates": [0]}, "rates"),
        ({"rates": [2, -1]}, "rates"),
        ({"open_loop": OpenLoopSettings(arrival="uniform")}, "open_loop.arrival"),
        ({"open_loop": OpenLoopSettings(burstiness=0.5)}, "open_loop.burstiness"),  # Poisson has no burstiness
        ({"open_loop": OpenLoopSettings(requests=None)}, "open_loop.requests"),  # no count and no duration
        ({"open_loop": OpenLoopSettings(max_in_flight=0)}, "open_loop.max_in_flight"),
        ({"open_loop": OpenLoopSettings(ramp_up_s=-1)}, "open_loop.ramp_up_s"),
        ({"open_loop": OpenLoopSettings(replay=True)}, "open_loop.replay"),  # not a trace workload
    ],
)
def test_bad_open_loop_settings_are_refused_before_anything_is_sent(change, key):
    settings = BenchSettings(**change)
    assert key in [k for k, _, _ in settings.problems()]
    with pytest.raises(BenchError, match=key.replace(".", r"\.")):
        run("http://127.0.0.1:9", settings)  # nothing listens there: refused before any connection


def test_sweep_bench_rejects_a_bad_rates_list():
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "bench", "--url", "http://127.0.0.1:9", "--rates", "1,x"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "comma-separated list of rates" in proc.stderr


def test_an_overloaded_rate_is_marked_not_kept_up_and_its_queue_shows_in_ttft(fake_sglang, tmp_path):
    server = fake_sglang("--max-running-requests", "2", speed=10.0)  # the rest waits in the server's queue
    settings = BenchSettings(
        single_stream=NO_SINGLE,
        concurrency=ConcurrencySettings(levels=[2], rounds=3, max_tokens=12),
        rates=[12.0, 1000.0],
        open_loop=OpenLoopSettings(requests=30),
    )
    result = run(server.url, settings)
    levels = pl.from_arrow(result.levels)
    closed, low, high = levels.rows(named=True)
    assert closed["arrival"] is None and closed["concurrency"] == 2 and closed["kept_up"] is None
    assert (low["concurrency"], low["offered_rate"], high["offered_rate"]) == (0, 12.0, 1000.0)
    assert low["ok"] == high["ok"] == 30 and low["planned_requests"] == 30
    assert low["kept_up"] is True and high["kept_up"] is False  # 30 in 30 ms: judged by the drain
    assert high["max_in_flight_seen"] > 10  # sent at their times, not when a slot freed up
    assert high["ttft_p50_s"] > 3 * low["ttft_p50_s"]  # TTFT includes the wait in the server's queue
    assert high["achieved_rate"] < 0.5 * high["arrival_rate"]
    req = pl.from_arrow(result.requests).filter(pl.col("phase") == "rate")
    assert req.height == 60 and req["offered_rate"].unique().sort().to_list() == [12.0, 1000.0]
    sched = arrivals.times(12.0, seed=0, requests=30)
    low_req = req.filter(pl.col("offered_rate") == 12.0).sort("seq")
    assert np.allclose(low_req["arrival_s"].to_numpy(), sched)
    sent = low_req["start_at"].to_numpy() - low_req["start_at"][0]
    # at their times (the first send's own connection setup shifts the reference by a little)
    assert (np.abs(sent - np.array(sched)) < 0.3).all()
    # the results directory: the report has the open-loop section, and no C=0 in the concurrency analysis
    out = tmp_path / "bench"
    write_out(str(out), result, url=server.url)
    tables = load(out)
    assert closed_loop(tables)["levels"].collect()["concurrency"].to_list() == [2]
    assert rate_levels(tables)["kept_up"].to_list() == [True, False]
    md = report_mod.build(out, with_plots=False, slos=[]).markdown
    assert "## Open loop: goodput against offered rate" in md and "no <-" in md and "C=0" not in md


def test_max_in_flight_caps_the_sends_and_records_the_wait(fake_sglang):
    server = fake_sglang(speed=10.0)
    settings = BenchSettings(
        single_stream=NO_SINGLE,
        concurrency=ConcurrencySettings(levels=[], max_tokens=12),
        rates=[500.0],
        open_loop=OpenLoopSettings(requests=20, max_in_flight=3),
    )
    result = run(server.url, settings)
    row = result.levels.to_pylist()[0]
    assert row["max_in_flight_seen"] == 3 and row["max_in_flight"] == 3 and row["ok"] == 20
    waits = pl.from_arrow(result.requests)["wait_s"]
    assert waits.max() > 0.05 and row["wait_max_s"] == pytest.approx(waits.max())


def test_a_trace_is_replayed_at_its_own_timing_scaled(fake_sglang, tmp_path):
    server = fake_sglang(speed=20.0)
    trace = tmp_path / "trace.jsonl"
    stamps = [0, 600, 700, 1600, 2400]  # ms; scale 0.5: sent at 0, 0.3, 0.35, 0.8, 1.2 s
    trace.write_text(
        "".join(json.dumps({"timestamp": t, "input_length": 16, "output_length": 4}) + "\n" for t in stamps)
    )
    settings = BenchSettings(
        single_stream=NO_SINGLE,
        concurrency=ConcurrencySettings(levels=[]),
        workload=workload_spec.settings(f"trace:{trace},scale=0.5"),
        open_loop=OpenLoopSettings(replay=True),
    )
    result = run(server.url, settings)
    row = result.levels.to_pylist()[0]
    assert row["arrival"] == "trace" and row["ok"] == 5 and row["offered_rate"] == pytest.approx(4 / 1.2)
    req = pl.from_arrow(result.requests).sort("seq")
    want = np.array(stamps) / 1000 * 0.5
    assert np.allclose(req["arrival_s"].to_numpy(), want)
    sent = req["start_at"].to_numpy() - req["start_at"][0]
    assert (np.abs(sent - want) < 0.3).all()  # at its times (a loaded machine's lateness allowed for) ...
    assert sent[3] - sent[2] > 0.3 and sent[1] - sent[0] > 0.15  # ... not back to back


def test_an_experiment_file_takes_rates_and_refuses_what_cannot_run(tmp_path):
    from sweep.core.errors import ConfigError
    from sweep.experiment import config
    from sweep.experiment.plan import point_id
    from tests.experiments import experiment, write

    plain = config.load(write(tmp_path / "plain.yaml", experiment()))
    rated = config.load(
        write(
            tmp_path / "rated.yaml",
            experiment(
                benchmark={"rates": [1, 2.5], "open_loop": {"arrival": "gamma", "burstiness": 0.5, "duration_s": 30}}
            ),
        )
    )
    assert rated.benchmark.rates == [1, 2.5] and rated.benchmark.open_loop.burstiness == 0.5
    default = config.load(write(tmp_path / "default.yaml", experiment(benchmark={"rates": [], "open_loop": {}})))
    assert point_id(default, {}, {}) == point_id(plain, {}, {}) != point_id(rated, {}, {})  # defaults: same id
    with pytest.raises(ConfigError, match=r"line \d+: benchmark.rates = \[1.0, 0.0\] is out of range"):
        config.load(write(tmp_path / "zero.yaml", experiment(benchmark={"rates": [1, 0]})))
    with pytest.raises(ConfigError, match="search.strategy: adaptive"):
        config.load(
            write(tmp_path / "adaptive.yaml", experiment(benchmark={"rates": [1]}, search={"strategy": "adaptive"}))
        )


def test_a_dry_run_sends_the_rates_at_the_fakes_speed_and_the_report_shows_the_users(tmp_path):
    """The fake serves fake_speed times faster: a rate of 1 req/s is sent as fake_speed req/s (and
    its seconds shortened as much), so that divided back at real speed it is the 1 the user set."""
    from sweep.analysis.realspeed import at_real_speed
    from sweep.experiment import config
    from sweep.experiment.dryrun import scaled
    from tests.experiments import experiment, write

    exp = config.load(
        write(
            tmp_path / "r.yaml",
            experiment(benchmark={"rates": [1, 4, 16], "open_loop": {"duration_s": 30, "ramp_up_s": 10}}),
        )
    )
    out, scale = scaled(exp)
    k = exp.dry_run.fake_speed
    assert k != 1 and out.benchmark.rates == [1 * k, 4 * k, 16 * k] and scale["fake_speed"] == k
    assert (out.benchmark.open_loop.duration_s, out.benchmark.open_loop.ramp_up_s) == (30 / k, 10 / k)
    assert exp.benchmark.rates == [1, 4, 16]  # the experiment itself untouched
    # what the fake measured at those rates, divided back: the user's rates
    points = pl.DataFrame({"point_id": ["p"], "bench_scale": [{"fake_speed": k}]}).lazy()
    levels = pl.DataFrame(
        {"point_id": ["p"] * 3, "concurrency": [0] * 3, "arrival": ["poisson"] * 3, "offered_rate": out.benchmark.rates}
    ).lazy()
    real, _ = at_real_speed({"points": points, "levels": levels})
    assert real["levels"].collect()["offered_rate"].to_list() == pytest.approx([1, 4, 16])


def test_a_dry_run_replays_a_trace_at_the_fakes_speed():
    """A trace's gaps are a time too: a dry run replays them fake_speed times shorter (time_scale)."""
    from sweep.core.settings import WorkloadSettings
    from sweep.experiment.dryrun import _open_loop_at_fake_speed

    b = BenchSettings(
        workload=WorkloadSettings(kind="trace", path="t.jsonl", time_scale=0.5), open_loop=OpenLoopSettings(replay=True)
    )
    _open_loop_at_fake_speed(b, 5.0)
    assert b.workload is not None and b.workload.time_scale == 0.1 and b.rates == []
    plain = BenchSettings(workload=WorkloadSettings(kind="synthetic"))  # no trace: its id-shaping keys untouched
    _open_loop_at_fake_speed(plain, 5.0)
    assert plain.workload is not None and plain.workload.time_scale == 1.0
