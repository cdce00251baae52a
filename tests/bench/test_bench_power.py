"""The benchmark's power sampling (sweep/bench/power.py): the levels' power and energy columns from
the samples, the meter during a level, and null columns (never zero) without a power source."""

from __future__ import annotations

import asyncio
import time

import pytest

from sweep.bench.power import COLUMNS, Meter, columns
from sweep.bench.runner import run
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.host.gpu import NoGpus

from tests.bench.bench_fake_server import start_fake


def test_columns_from_samples():
    got = columns([600.0, 900.0, 750.0], 8, 2.0, 300)
    assert got == {"power_mean_w": 750.0, "power_peak_w": 900.0, "energy_j": 1500.0, "energy_per_token_j": 5.0,
                   "power_samples": 3, "power_gpus": 8}


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
        s = BenchSettings(single_stream=SingleStreamSettings(runs=0, warmup=0, max_tokens=8), server_metrics=False,
                          concurrency=ConcurrencySettings(levels=[2], rounds=1, max_tokens=8))
        for power in (None, NoGpus().power):
            levels = run(server.url, s, power=power).levels.to_pylist()
            assert len(levels) == 1 and levels[0]["ok"] == 2
            assert {k: levels[0][k] for k in COLUMNS} == dict.fromkeys(COLUMNS)
    finally:
        server.kill()
