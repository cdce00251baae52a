"""The fake's power draw: its model (sweep/fake/model.py), and what a running fake writes into the GPU
ledger for the host's FakeGpus to read, as NVML's power gauge is read on a real host."""

from __future__ import annotations

import threading

import httpx
import pytest

from sweep.core.ledger import ledger_power
from sweep.fake import model
from sweep.fake.power import interval_power_w
from sweep.host.gpu import FakeGpus
from tests.waiting import wait_until


def test_forward_power_rises_with_the_tokens_of_a_forward_from_idle_to_tdp():
    watts = [model.forward_power_w(n) for n in (0, 1, 4, 48, 250, 16384)]
    assert watts[0] == model.IDLE_W
    assert all(a < b for a, b in zip(watts, watts[1:]))
    assert model.IDLE_W < watts[1] < 0.6 * model.TDP_W  # a lone decode reads weights: well under TDP
    assert 0.9 * model.TDP_W < watts[-1] <= model.TDP_W


def test_interval_power_is_idle_plus_the_busy_share_and_capped_at_tdp():
    assert interval_power_w(0.0, 1.0) == model.IDLE_W
    assert interval_power_w(50.0, 0.5) == pytest.approx(model.IDLE_W + 100.0)
    assert interval_power_w(1e6, 0.25) == model.TDP_W  # steps run back to back: never above the board limit
    assert interval_power_w(5.0, 0.0) == model.IDLE_W


@pytest.mark.slow
def test_a_running_fake_reports_its_gpus_power_in_the_ledger(start_fake, fk, tmp_path):
    ledger = tmp_path / "ledger"
    fp = start_fake(
        "--tp-size", "2", "--fake-ledger", str(ledger), "--fake-speed", "20", "--fake-startup-speed", "3000"
    )
    fp.wait_ready()
    gpus = FakeGpus(ledger, count=4)
    # idle: the ranks' GPUs report the idle draw, the others (no server on them) the probe's idle figure
    wait_until(lambda: ledger_power(ledger) == {0: model.IDLE_W, 1: model.IDLE_W}, 10, "the idle draw of GPUs 0 and 1")
    assert gpus.power() == [model.IDLE_W] * 4

    body = {"text": "hello", "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}}

    def send() -> None:
        try:
            fp.post("/generate", json=body, timeout=60)
        except httpx.HTTPError:
            pass  # the test stops the server mid-request

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    lone = model.forward_power_w(1)  # one request decoding back to back: its forwards' draw
    busy = wait_until(
        lambda: (w := gpus.power()) and w[0] > 0.9 * lone and w, 15, "GPU 0 drawing a lone decode's power"
    )
    # every TP rank's GPU the same; not above the model's figure (beyond the one step an interval can
    # count that began before it: under 1 % at this speed)
    assert busy[0] == busy[1] <= 1.02 * lone
    assert busy[2:] == [model.IDLE_W] * 2
    fp.stop()
    sender.join(timeout=10)
    # a dead server reports nothing (its file is dropped), as its memory frees itself
    wait_until(lambda: ledger_power(ledger) == {}, 10, "the dead server's power entry dropped")
    assert not list((ledger / "power").glob("*.json"))
