"""A results directory has one writer, and nothing finished is lost, in a shared launch too: whole
sweeps through the command line on local Ray with the fake server.

- two sweeps into one directory: the second is refused at once (exit 5, the holder named), the first
  runs on untouched;
- a server launch shared by two points (a client-side axis): Ctrl-C, or kill -9 of the driver, after
  the first point's files exist and before the second's; the rerun keeps the first point's files as
  they are and runs the second alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from sweep.results.lock import lock_path
from tests.conftest import REPO, free_port, run_sweep_cli
from tests.experiments import experiment, write
from tests.orchestrate.test_sweep_e2e import our_processes
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.scenario]  # the scenario tier: python -m pytest -m scenario

TABLES = ("points", "levels", "requests", "single_stream")


def _experiment(tmp_path: Path, tokens: tuple[int, int] = (24, 160)) -> Path:
    """One server, two points on it (max_tokens is client-side): the second is slow enough
    (fake_speed, its tokens) that the driver is reliably caught between the two."""
    exp = experiment(
        name="lost",
        server={"port": free_port()},
        grid={"axes": {"max_tokens": {"key": "benchmark.concurrency.max_tokens", "values": list(tokens)}}},
        benchmark={
            "single_stream": {"runs": 1, "warmup": 0, "max_tokens": 16},
            "concurrency": {"levels": [1, 2], "rounds": 1, "max_tokens": 32},
        },
        dry_run={"hosts": 1, "fake_speed": 2},
    )
    return write(tmp_path / "lost.yaml", exp, results_dir=tmp_path / "res")


def _start(exp: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sweep", str(exp), "--dry-run"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _points(res: Path) -> pl.DataFrame:
    return pl.read_parquet(str(res / "points" / "*.parquet"))


def _files(res: Path, pid: str) -> dict[str, tuple[int, bytes]]:
    """A point's files: (mtime in ns, content) of each."""
    out = {}
    for t in TABLES:
        f = res / t / f"{pid}.parquet"
        if f.exists():
            out[t] = (f.stat().st_mtime_ns, f.read_bytes())
    return out


def _kill_group(proc: subprocess.Popen) -> None:
    try:  # whatever Ray left in the driver's process group
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_second_sweep_into_a_held_directory_is_refused_and_the_first_runs_on(tmp_path):
    exp = _experiment(tmp_path, tokens=(24, 48))
    res = tmp_path / "res"
    first = _start(exp)
    try:

        def held() -> bool:
            assert first.poll() is None, first.communicate()
            try:
                return json.loads(lock_path(res).read_text() or "{}").get("pid") == first.pid
            except (OSError, ValueError):
                return False

        wait_until(held, 60, "the first sweep holds the directory")
        second = run_sweep_cli(str(exp), "--dry-run", timeout=60)
        assert second.returncode == 5, second.stdout[-2000:] + second.stderr[-2000:]
        assert f"pid {first.pid} on " in second.stderr and "being written by another sweep" in second.stderr
        assert "lost.yaml --dry-run" in second.stderr and "another results_dir" in second.stderr
        assert "to run" not in second.stdout  # refused before it read or planned anything
        out, err = first.communicate(timeout=180)
    finally:
        _kill_group(first)
    assert first.returncode == 0, out[-3000:] + err[-3000:]
    pts = _points(res)
    assert pts.height == 2 and (pts["status"] == "ok").all(), pts.select("label", "status", "failure_reason").rows()
    assert pts["attempts"].to_list() == [1, 1]
    assert not our_processes(res)
    assert lock_path(res).read_text() == ""  # released: the next sweep takes it quietly
    again = run_sweep_cli(str(exp), "--dry-run", timeout=60)
    assert again.returncode == 0 and "0 to run" in again.stdout and "took over" not in again.stdout


def _stopped_between_the_two_points(tmp_path: Path, stop) -> tuple[Path, str, dict]:
    """Run the sweep, wait for its first point's files, stop the driver with ``stop`` before the
    second point's; the first point's id and files."""
    exp = _experiment(tmp_path)
    res = tmp_path / "res"
    proc = _start(exp)
    try:

        def first_point() -> list[Path]:
            assert proc.poll() is None, proc.communicate()
            return list((res / "points").glob("*.parquet"))

        done = wait_until(first_point, 120, "the launch's first point recorded")
        stop(proc)
    finally:
        _kill_group(proc)
    assert len(done) == 1
    pts = _points(res)
    assert pts.height == 1 and pts["status"].to_list() == ["ok"], pts.rows()  # the second never finished
    assert pts["axis_max_tokens"].to_list() == [24] and pts["startup_s"].drop_nulls().len() == 1
    pid = pts["point_id"][0]
    files = _files(res, pid)
    assert set(files) == set(TABLES), files.keys()
    levels = pl.read_parquet(res / "levels" / f"{pid}.parquet")
    assert levels.height == 2 and levels["power_mean_w"].drop_nulls().len() == 2  # its power, measured early
    return exp, pid, files


def _rerun_runs_only_the_second(tmp_path: Path, exp: Path, pid: str, files: dict) -> str:
    res = tmp_path / "res"
    r = run_sweep_cli(str(exp), "--dry-run", timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "1 to run, 1 already recorded" in r.stdout
    assert _files(res, pid) == files, "the finished point was written again"
    pts = _points(res)
    assert pts.height == 2 and (pts["status"] == "ok").all()
    assert sorted(pts["axis_max_tokens"].to_list()) == [24, 160]
    assert not our_processes(res)
    return r.stdout


def test_ctrl_c_between_two_points_of_a_launch_keeps_the_first(tmp_path):
    def ctrl_c(proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 130, out[-2000:] + err[-2000:]
        assert "1 points ok" in err

    exp, pid, files = _stopped_between_the_two_points(tmp_path, ctrl_c)
    assert not our_processes(tmp_path / "res"), "Ctrl-C left a server running"
    assert "took over" not in _rerun_runs_only_the_second(tmp_path, exp, pid, files)  # released on Ctrl-C


def test_driver_killed_between_two_points_of_a_launch_keeps_the_first(tmp_path):
    def kill_9(proc: subprocess.Popen) -> None:
        proc.kill()  # no cleanup runs in the driver
        proc.wait()

    exp, pid, files = _stopped_between_the_two_points(tmp_path, kill_9)
    out = _rerun_runs_only_the_second(tmp_path, exp, pid, files)
    assert "took over the lock" in out and "that process is gone" in out  # the kernel dropped it; its record said whose
