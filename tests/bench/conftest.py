"""The ``fake_sglang`` fixture: fake SGLang servers that are always killed (whole tree) at teardown."""

from __future__ import annotations

import pytest

from tests.bench.bench_fake_server import FakeServer, start_fake


@pytest.fixture
def fake_sglang(tmp_path):
    """``fake_sglang(*args, speed=S)`` -> a healthy FakeServer; all are killed at teardown."""
    started: list[FakeServer] = []

    def _start(*args: str, speed: float = 1.0) -> FakeServer:
        s = start_fake(tmp_path, *args, speed=speed)
        started.append(s)
        return s

    try:
        yield _start
    finally:
        for s in started:
            s.kill()
