"""The fake GPU ledger: live processes only, dead ones dropped."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sweep.core.ledger import LEDGER_ENV_VAR, LedgerEntry, ledger_dir, ledger_read, ledger_record, ledger_remove


def test_record_read_replace_remove(tmp_path):
    d = tmp_path / "ledger"
    assert ledger_read(d) == []
    ledger_record(d, os.getpid(), 3, 1000)
    ledger_record(d, os.getpid(), 3, 70000)  # a later phase holds more
    assert ledger_read(d) == [LedgerEntry(os.getpid(), 3, 70000)]
    ledger_remove(d, os.getpid())
    assert ledger_read(d) == []


@pytest.mark.slow
def test_dead_processes_are_dropped(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ledger_record(tmp_path, child.pid, 0, 5000)
        ledger_record(tmp_path, os.getpid(), 1, 10)
        assert {e.pid for e in ledger_read(tmp_path)} == {child.pid, os.getpid()}
        child.kill()
        child.wait()
        assert ledger_read(tmp_path) == [LedgerEntry(os.getpid(), 1, 10)]
        assert not (tmp_path / f"{child.pid}.json").exists()
    finally:
        child.kill()
        child.wait()


def test_recycled_pid_does_not_inherit_an_entry(tmp_path):
    (tmp_path / f"{os.getpid()}.json").write_text(
        f'{{"pid": {os.getpid()}, "gpu_index": 0, "mem_mib": 9, "start_time": 1.0}}'
    )
    assert ledger_read(tmp_path) == []


def test_ledger_dir_from_flag_or_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(LEDGER_ENV_VAR, raising=False)
    assert ledger_dir() is None
    monkeypatch.setenv(LEDGER_ENV_VAR, str(tmp_path))
    assert ledger_dir() == tmp_path
    assert ledger_dir("/elsewhere") == __import__("pathlib").Path("/elsewhere")


def test_power_of_live_processes_by_gpu_dead_ones_dropped(tmp_path):
    from sweep.core.ledger import ledger_power, ledger_power_record

    assert ledger_power(tmp_path) == {}
    ledger_power_record(tmp_path, os.getpid(), {0: 300.0, 1: 310.5})
    assert ledger_power(tmp_path) == {0: 300.0, 1: 310.5}
    assert ledger_read(tmp_path) == []  # power files are no memory entries
    stale = tmp_path / "power" / "1.json"  # a recycled pid (its start time is not the recorded one)
    stale.write_text('{"pid": 1, "start_time": 1.0, "watts": {"0": 700.0, "2": 700.0}}')
    assert ledger_power(tmp_path) == {0: 300.0, 1: 310.5}
    assert not stale.exists()
