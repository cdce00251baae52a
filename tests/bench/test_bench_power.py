"""The benchmark's power sampling (sweep/bench/power.py): the levels' power and energy columns from
the samples, the meter during a level, and null columns (never zero) without a power source."""

from __future__ import annotations

import asyncio
import time

import pytest

from sweep.bench.power import COLUMNS, Meter, Recorder, columns, node_columns, with_nodes
from sweep.bench.runner import run
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.host.gpu import NoGpus
from tests.bench.bench_fake_server import start_fake


def test_columns_from_samples():
    got = columns([600.0, 900.0, 750.0], 8, 2.0, 300)
    assert got == {
        "power_mean_w": 750.0,
        "power_peak_w": 900.0,
        "energy_j": 1500.0,
        "energy_per_token_j": 5.0,
        "power_samples": 3,
        "power_gpus": 8,
        "power_nodes": 1,
    }


def test_no_samples_no_wall_no_tokens_are_nulls_never_zeros():
    assert columns([], 0, 2.0, 300) == dict.fromkeys(COLUMNS)
    assert columns([500.0], 4, None, 300)["energy_j"] is None
    no_tokens = columns([500.0], 4, 2.0, 0)
    assert no_tokens["energy_j"] == 1000.0 and no_tokens["energy_per_token_j"] is None


def test_meter_sums_the_gpus_of_each_sample_and_skips_failed_readings():
    calls = []

    def source():
        calls.append(time.monotonic())
        if len(calls) == 2:
            raise RuntimeError("NVMLError_GpuIsLost")  # one failed reading: a missing sample
        if len(calls) == 3:
            return None
        return [100.0, 250.0]

    async def level() -> tuple[list[float], int]:
        meter = Meter(source, every_s=0.01)
        deadline = time.monotonic() + 10
        while len(calls) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return await meter.stop()

    samples, gpus = asyncio.run(level())
    assert len(calls) >= 6  # the last one as the level ends
    assert samples == [350.0] * (len(calls) - 2) and gpus == 2


def test_meter_of_a_level_shorter_than_the_first_sample_still_reads_once():
    async def level() -> tuple[list[float], int]:
        meter = Meter(lambda: [42.0], every_s=60.0)
        return await meter.stop()

    assert asyncio.run(level()) == ([42.0], 1)


@pytest.mark.slow
def test_without_a_power_source_the_energy_columns_are_null(tmp_path):
    """``sweep bench`` (no source) and a host without one (a CPU host's NoGpus): null, not 0."""
    server = start_fake(tmp_path, speed=20.0)
    try:
        s = BenchSettings(
            single_stream=SingleStreamSettings(runs=0, warmup=0, max_tokens=8),
            server_metrics=False,
            concurrency=ConcurrencySettings(levels=[2], rounds=1, max_tokens=8),
        )
        for power in (None, NoGpus().power):
            levels = run(server.url, s, power=power).levels.to_pylist()
            assert len(levels) == 1 and levels[0]["ok"] == 2
            assert {k: levels[0][k] for k in COLUMNS} == dict.fromkeys(COLUMNS)
    finally:
        server.kill()


# --- a server over several hosts: every node's samples folded into node 0's levels (pure)

LEVEL = {"level_started_at": 100.0, "level_ended_at": 104.0, "wall_s": 4.0, "output_throughput": 250.0}


def test_every_node_summed_over_the_level_window_peak_where_samples_align():
    node0 = [(99.0, 9999.0, 8), (100.5, 800.0, 8), (101.5, 1000.0, 8), (104.1, 900.0, 8)]  # 99.0: before it
    node1 = [(100.6, 600.0, 8), (101.4, 700.0, 8), (103.0, 650.0, 8), (110.0, 5000.0, 8)]  # 110: after it
    got = node_columns(LEVEL, node0, {1: node1}, nnodes=2)
    assert got["power_mean_w"] == pytest.approx(900.0 + 650.0)  # each node's mean over the window, summed
    assert got["energy_j"] == pytest.approx(1550.0 * 4.0)
    assert got["energy_per_token_j"] == pytest.approx(1550.0 * 4.0 / 1000)  # 250 tok/s x 4 s
    # node 0 at 100.5 + node 1's nearest (100.6) = 1400; at 101.5 + 101.4 = 1700; at 104.1: 103.0 is
    # over one sampling period away, so that sample has no partner
    assert got["power_peak_w"] == pytest.approx(1700.0)
    assert (got["power_gpus"], got["power_nodes"], got["power_samples"]) == (16, 2, 6)


def test_a_node_without_samples_leaves_the_totals_null_and_says_how_many_nodes_had_some():
    node0 = [(101.0, 800.0, 8)]
    got = node_columns(LEVEL, node0, {1: [(101.0, 600.0, 8)]}, nnodes=3)  # node 2 sent nothing
    assert got == {**dict.fromkeys(COLUMNS), "power_nodes": 2}
    short = {**LEVEL, "level_started_at": 100.0, "level_ended_at": 100.1, "wall_s": 0.1}
    before = node_columns(short, [(100.1, 800.0, 8)], {1: [(99.6, 600.0, 8), (98.0, 9.0, 8)]}, nnodes=2)
    assert before["power_mean_w"] == 1400.0  # shorter than a sampling period: node 1's sample 0.4 s before counts
    no_partner = node_columns(LEVEL, node0, {1: [(103.5, 600.0, 8)]}, nnodes=2)
    assert no_partner["power_mean_w"] == 1400.0 and no_partner["power_peak_w"] is None  # no aligned pair


def test_with_nodes_rewrites_the_levels_table_and_leaves_one_host_servers_alone():
    import pyarrow as pa

    from sweep.results.schema import LEVELS

    table = pa.Table.from_pylist([{**LEVEL, "concurrency": 1, "power_mean_w": 800.0, "power_nodes": 1}], schema=LEVELS)
    assert with_nodes(table, [], {}, nnodes=1) is table
    both = with_nodes(table, [(101.0, 800.0, 8)], {1: [(101.2, 600.0, 8)]}, nnodes=2)
    assert both.schema == table.schema
    assert both.to_pylist()[0]["power_mean_w"] == 1400.0 and both.to_pylist()[0]["power_gpus"] == 16


def test_recorder_keeps_timestamped_readings_and_hands_them_over_once():
    clock = iter([1.0, 2.0])
    rec = Recorder(lambda: [300.0, 200.0], clock=lambda: next(clock))
    assert rec() == [300.0, 200.0]
    rec.sample()
    assert rec.take() == [(1.0, 500.0, 2), (2.0, 500.0, 2)] and rec.take() == []
    assert Recorder(lambda: None)() is None


# --- python -m sweep bench --power SOURCE


def _bench_args(*argv: str):
    import argparse

    from sweep.bench import cli

    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return p.parse_args(["--url", "http://127.0.0.1:1", *argv])


def test_power_flag_forms_and_sources_refused_before_the_benchmark(tmp_path, capsys):
    from sweep.core.errors import ConfigError
    from sweep.host.gpu import power_source

    assert _bench_args("--power", "nvml:0,1").power == "nvml:0,1" and _bench_args().power is None
    for bad in ("nvml:a", "ledger:", "rapl"):
        with pytest.raises(SystemExit):
            _bench_args("--power", bad)
    assert "not a power source" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="no GPU ledger") as e:
        power_source(f"ledger:{tmp_path / 'nowhere'}")
    assert e.value.fix
    with pytest.raises(ConfigError, match="--power nvml") as e:  # this CPU machine: NVML absent or failing
        power_source("nvml")
    assert "nvidia-ml-py" in (e.value.fix or "")


@pytest.mark.slow
def test_bench_power_ledger_fills_the_levels_power_columns(tmp_path):
    from sweep.bench import cli
    from sweep.host.gpu import power_source
    from sweep.results import load

    ledger = tmp_path / "ledger"
    ledger.mkdir()
    server = start_fake(tmp_path, "--fake-ledger", str(ledger), "--tp-size", "2", speed=20.0)
    try:
        args = _bench_args(
            "--runs",
            "0",
            "--levels",
            "4",
            "--rounds",
            "2",
            "--max-tokens",
            "16",
            "--no-server-metrics",
            "--quiet",
            "--power",
            f"ledger:{ledger}",
            "--out",
            str(tmp_path / "out"),
        )
        args.url = server.url
        assert cli.run_cli(args, power=power_source(args.power)) == 0
    finally:
        server.kill()
    [level] = load(tmp_path / "out")["levels"].collect().to_dicts()
    assert level["power_gpus"] == 8 and level["power_nodes"] == 1 and level["power_samples"] >= 1
    assert level["power_mean_w"] >= 8 * 75.0 and level["energy_per_token_j"] > 0


def test_power_is_read_on_the_gpus_the_server_uses_not_the_hosts():
    """A TP=4 server on an 8-GPU host: its 4 GPUs (from --base-gpu-id), not the 8 summed."""
    from sweep.bench.power import only
    from sweep.core.argv import flags_of_argv
    from sweep.core.flags import ServerFlags

    def node_gpus(argv: list[str]) -> tuple[int, int]:  # the flags column of that argv
        return ServerFlags(flags_of_argv(argv)).node_gpus

    host = lambda: [300.0, 310.0, 320.0, 330.0, 75.0, 75.0, 75.0, 75.0]  # noqa: E731
    assert node_gpus(["--tp-size", "4"]) == (0, 4)
    assert node_gpus(["--tp-size", "4", "--base-gpu-id", "4"]) == (4, 4)
    assert node_gpus(["--tp-size", "2", "--dp-size", "2", "--pp-size", "2"]) == (0, 8)
    assert node_gpus(["--tp-size", "16", "--nnodes", "2"]) == (0, 8)
    assert node_gpus(["--tp-size", "8", "--dp-size", "8", "--enable-dp-attention"]) == (0, 8)
    assert only(host, *node_gpus(["--tp-size", "4"]))() == [300.0, 310.0, 320.0, 330.0]
    assert only(host, 4, 4)() == [75.0] * 4
    assert only(host, 6, 4)() is None  # fewer GPUs listed than the server's: no figure, not a part
