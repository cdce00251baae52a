"""While a sweep runs, SIGINT and SIGTERM raise KeyboardInterrupt in its main thread (the path that
cancels the running points and stops their servers, exit 130), even where SIGINT was ignored at
start (a sweep started with ``&`` from a script) and after Ray set a SIGTERM handler of its own;
afterwards the process has its handlers back. The whole sweep stopped so: test_sweep_e2e.py."""

from __future__ import annotations

import signal

import pytest

from sweep.orchestrate.signals import StopSignals


@pytest.fixture
def handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_an_ignored_sigint_stops_the_sweep_and_is_ignored_again_after(handlers):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a job started with & from a script inherits it
    stop = StopSignals().arm()
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
    assert stop.received == "SIGINT" and stop.why() == "interrupted"
    stop.disarm()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_sigterm_stops_it_as_ctrl_c_does_after_ray_set_its_own_handler(handlers):
    def rays(signum, frame):  # ray.init's: sys.exit, no cleanup of the sweep's
        raise SystemExit(signum)

    before = signal.getsignal(signal.SIGTERM)
    stop = StopSignals().arm()
    signal.signal(signal.SIGTERM, rays)  # joining the cluster
    stop.arm()
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGTERM)
    assert stop.why() == "stopped by SIGTERM"
    stop.disarm()
    assert signal.getsignal(signal.SIGTERM) is before  # the handler before the sweep, not Ray's
