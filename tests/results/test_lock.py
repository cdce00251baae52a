"""One writer per results directory (sweep.results.lock): a real lock held by a real other process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from sweep.core.errors import ResultsError
from sweep.results import load, lock
from sweep.results.schema import from_rows
from sweep.results.writer import ResultsDir
from tests.conftest import REPO
from tests.waiting import wait_until

HOLDER = """
import sys
from sweep.results import lock
held = lock.acquire(sys.argv[1], argv=["python", "-m", "sweep", "exp.yaml", "--dry-run"])
print("held", flush=True)
sys.stdin.read()  # until the test closes stdin
held.release()
print("released", flush=True)
"""


def _holder(directory) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _end(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait(timeout=30)


def test_a_held_directory_is_refused_at_once_naming_the_holder(tmp_path):
    p = _holder(tmp_path / "res")
    try:
        with pytest.raises(ResultsError) as e:
            lock.acquire(tmp_path / "res")
        msg = str(e.value)
        assert e.value.exit_code == 5
        assert f"pid {p.pid} on {socket.gethostname()}" in msg and "python -m sweep exp.yaml --dry-run" in msg
        assert "started 20" in msg and "another results_dir" in msg and f"kill -INT {p.pid}" in msg
    finally:
        _end(p)


def test_the_lock_is_released_when_its_holder_ends_and_the_next_takes_it_quietly(tmp_path):
    p = _holder(tmp_path)
    assert p.stdin is not None and p.stdout is not None
    p.stdin.close()
    assert p.stdout.readline().strip() == "released"
    p.wait(timeout=30)
    held = lock.acquire(tmp_path)
    try:
        assert held.took_over is None and held.takeover_note() is None  # a clean end leaves no record
        with pytest.raises(ResultsError):  # and this one is held in turn (another open file of this process too)
            lock.acquire(tmp_path)
    finally:
        held.release()
    held.release()  # idempotent
    with lock.acquire(tmp_path) as again:
        assert again.took_over is None


def test_a_lock_left_by_a_killed_sweep_is_taken_over_with_a_line_saying_whose(tmp_path):
    p = _holder(tmp_path)
    os.kill(p.pid, signal.SIGKILL)  # no release: the kernel drops the flock, the record stays
    p.wait(timeout=30)
    assert json.loads(lock.lock_path(tmp_path).read_text())["pid"] == p.pid
    held = lock.acquire(tmp_path)
    try:
        assert held.took_over is not None and held.took_over["pid"] == p.pid
        note = held.takeover_note()
        assert note is not None and f"pid {p.pid}" in note and "that process is gone" in note
        assert json.loads(lock.lock_path(tmp_path).read_text())["pid"] == os.getpid()  # the record is ours now
    finally:
        held.release()


def test_a_stale_lock_from_another_machine_says_so(tmp_path):
    lock.lock_path(tmp_path).write_text(
        json.dumps({"pid": 1, "host": "gpu-node-7", "started_at": 0.0, "argv": ["python", "-m", "sweep", "x.yaml"]})
    )
    with lock.acquire(tmp_path) as held:
        note = held.takeover_note()
        assert note is not None and "pid 1 on gpu-node-7" in note and "another machine" in note


def test_readers_neither_take_the_lock_nor_mind_it(tmp_path):
    rd = ResultsDir(tmp_path, "e", "dry-run").open()
    rd.write_table("points", "p1", from_rows([{"point_id": "p1", "status": "ok"}], "points"))
    p = _holder(tmp_path)
    try:
        assert load(tmp_path)["points"].collect()["point_id"].to_list() == ["p1"]
        assert rd.check() is rd and rd.statuses() == {"p1": "ok"}
        out = subprocess.run(
            [sys.executable, "-m", "sweep", "query", str(tmp_path), "select point_id from points"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0 and "p1" in out.stdout, out.stderr
        assert p.poll() is None  # the holder is untouched, and still holds it
        wait_until(lambda: json.loads(lock.lock_path(tmp_path).read_text()).get("pid") == p.pid, 5, "holder's record")
    finally:
        _end(p)


def test_a_directory_holding_only_a_lock_is_still_a_new_one(tmp_path):
    with lock.acquire(tmp_path / "new"):
        pass
    assert ResultsDir(tmp_path / "new", "e", "dry-run").check()  # a sweep that died before it wrote anything
