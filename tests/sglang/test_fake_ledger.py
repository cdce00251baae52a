"""The fake GPU ledger: live processes only, dead ones dropped."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sweep.sglang.fake import ledger
from sweep.sglang.fake.ledger import LedgerEntry


def test_record_read_replace_remove(tmp_path):
    d = tmp_path / "ledger"
    assert ledger.read(d) == []
    ledger.record(d, os.getpid(), 3, 1000)
    ledger.record(d, os.getpid(), 3, 70000)  # a later phase holds more
    assert ledger.read(d) == [LedgerEntry(os.getpid(), 3, 70000)]
    ledger.remove(d, os.getpid())
    assert ledger.read(d) == []


@pytest.mark.slow
def test_dead_processes_are_dropped(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ledger.record(tmp_path, child.pid, 0, 5000)
        ledger.record(tmp_path, os.getpid(), 1, 10)
        assert {e.pid for e in ledger.read(tmp_path)} == {child.pid, os.getpid()}
        child.kill()
        child.wait()
        assert ledger.read(tmp_path) == [LedgerEntry(os.getpid(), 1, 10)]
        assert not (tmp_path / f"{child.pid}.json").exists()
    finally:
        child.kill()
        child.wait()


def test_recycled_pid_does_not_inherit_an_entry(tmp_path):
    (tmp_path / f"{os.getpid()}.json").write_text(
        f'{{"pid": {os.getpid()}, "gpu_index": 0, "mem_mib": 9, "start_time": 1.0}}')
    assert ledger.read(tmp_path) == []


def test_ledger_dir_from_flag_or_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(ledger.ENV_VAR, raising=False)
    assert ledger.ledger_dir() is None
    monkeypatch.setenv(ledger.ENV_VAR, str(tmp_path))
    assert ledger.ledger_dir() == tmp_path
    assert ledger.ledger_dir("/elsewhere") == ledger.Path("/elsewhere")
