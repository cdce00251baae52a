"""The host the point tests run on: a HostContext with a fake GPU ledger of its own and a cache in the
test's tmp dir. After each test no process with the test module's marker (its ``SWEEP`` id) is left:
checked, then killed, then failed on."""

from __future__ import annotations

import uuid

import pytest

from sweep.host import reaper
from sweep.host.gpu import FakeGpus
from sweep.host.point import HostContext


@pytest.fixture
def host(tmp_path, monkeypatch, request):
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    ctx = HostContext(f"host-{uuid.uuid4().hex[:6]}", FakeGpus(ledger), "node", {"SWEEP_FAKE_GPU_LEDGER": str(ledger)})
    yield ctx
    left = reaper.marked(reaper.Marker(request.module.SWEEP, ctx.name))
    for p in left:
        p.kill()
    assert not left, f"processes left behind: {[p.pid for p in left]}"
