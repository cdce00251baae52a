"""Reaping kills what carries this sweep's marker for this host, and never anything else."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from sweep.host import reaper
from sweep.host.gpu import FakeGpus

SLEEPER = [
    sys.executable,
    "-c",
    "import time, subprocess, sys; "
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)",
]


def spawn(env_extra):
    p = subprocess.Popen(SLEEPER, env={**os.environ, **env_extra}, start_new_session=True)
    # wait until the child exists so the tree is complete (a loaded machine takes seconds to start Python)
    deadline = time.monotonic() + 60
    while not psutil.Process(p.pid).children():
        assert time.monotonic() < deadline, "the sleeper's child did not start within 60 s"
        psutil.wait_procs([], timeout=0.05)
    return p


@pytest.fixture
def marker():
    return reaper.Marker(f"test-{uuid.uuid4().hex[:8]}", "host-a")


def test_reap_kills_ours_and_spares_others(marker, tmp_path):
    ours = spawn(marker.env("p1"))
    other_host = spawn(reaper.Marker(marker.sweep, "host-b").env("p2"))
    other_sweep = spawn(reaper.Marker("another-sweep", "host-a").env("p3"))
    unmarked = spawn({})
    ours_tree = [ours.pid] + [c.pid for c in psutil.Process(ours.pid).children()]
    try:
        rep = reaper.reap(marker, FakeGpus(tmp_path / "none"), port=None, grace_s=2, wait_s=1)
        ours.wait(timeout=5)
        assert {k["pid"] for k in rep.killed} == set(ours_tree)
        assert all(
            k["found_by"] == "marker" and k["reason"] == "left over: carries this sweep's marker" for k in rep.killed
        )
        assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in ours_tree)
        for p in (other_host, other_sweep, unmarked):
            assert p.poll() is None, "reaping touched a process that is not ours"
    finally:
        for p in (ours, other_host, other_sweep, unmarked):
            for c in reaper.tree(p.pid):
                c.kill()
            p.wait(timeout=5)


def test_kill_group_escalates_to_sigkill():
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert p.stdout.readline().strip() == b"ready"
    killed = reaper.kill_group(p.pid, 0.5, "stop")
    assert not psutil.pid_exists(p.pid) or psutil.Process(p.pid).status() == psutil.STATUS_ZOMBIE
    assert "SIGKILL after grace" in killed[0]["reason"]
    p.wait(timeout=5)


def test_port_free():
    import errno
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    assert not reaper.port_free(port)
    assert reaper.bind_error(port).errno == errno.EADDRINUSE
    s.close()
    assert reaper.port_free(port) and reaper.bind_error(port) is None
    assert reaper.bind_error(port, "192.0.2.1").errno == errno.EADDRNOTAVAIL  # TEST-NET-1: not this machine's


# A server launcher whose child loses the marker from its environment, as SGLang's scheduler does
# (setproctitle overwrites /proc/<pid>/environ), and is then orphaned when the launcher is killed.
RETITLED = [
    sys.executable,
    "-c",
    "import os, subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], env={'PATH': os.environ['PATH']}); "
    "time.sleep(60)",
]


def test_a_child_without_the_marker_is_found_by_its_session(marker, tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    launcher = subprocess.Popen(RETITLED, env={**os.environ, **marker.env("p1")}, start_new_session=True)
    reaper.remember(marker, launcher.pid)
    unrelated = spawn({})  # a session of its own, never remembered
    try:
        child = None
        for _ in range(200):  # until the child exists and has exec'd with its own environment
            kids = psutil.Process(launcher.pid).children()
            if kids and "SWEEP_SWEEP" not in kids[0].environ():
                child = kids[0]
                break
            psutil.wait_procs([], timeout=0.05)
        assert child is not None, "the child never ran without the marker"
        assert {p.pid for p in reaper.marked(marker)} == {launcher.pid, child.pid}
        launcher.kill()
        launcher.wait()  # the child is an orphan now: no process with the marker is left
        assert [p.pid for p in reaper.marked(marker)] == [child.pid]
        rep = reaper.reap(marker, FakeGpus(tmp_path / "none"), port=None, grace_s=2, wait_s=1)
        (entry,) = [k for k in rep.killed if k["pid"] == child.pid]
        assert entry["found_by"] == "session" and "marker" not in entry["reason"].replace("no marker", "")
        assert f"in the session (sid {launcher.pid}) of a server this sweep launched" in entry["reason"]
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
        assert reaper.marked(marker) == []
        assert psutil.Process(unrelated.pid).is_running()
    finally:
        for p in (launcher, unrelated):
            reaper.kill_group(p.pid, 1, "test cleanup")


def test_each_kill_says_how_it_was_found(marker, tmp_path, monkeypatch):
    """The launcher (marker) and its retitled child (session only) reaped together: each entry its own
    way; an ours GPU holder and a foreign one (kill_foreign on) say ``gpu``."""
    from sweep.host.gpu import GpuProcess

    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    launcher = subprocess.Popen(RETITLED, env={**os.environ, **marker.env("p1")}, start_new_session=True)
    reaper.remember(marker, launcher.pid)
    foreign = spawn({})
    try:
        for _ in range(200):
            kids = psutil.Process(launcher.pid).children()
            if kids and "SWEEP_SWEEP" not in kids[0].environ():
                break
            psutil.wait_procs([], timeout=0.05)
        child = psutil.Process(launcher.pid).children()[0]
        rep = reaper.reap(marker, FakeGpus(tmp_path / "none"), port=None, grace_s=2, wait_s=1)
        how = {k["pid"]: k["found_by"] for k in rep.killed}
        assert how == {launcher.pid: "marker", child.pid: "session"}
        assert psutil.Process(foreign.pid).is_running()

        class Holding(FakeGpus):  # the foreign process holds GPU 0
            def processes(self):
                return [GpuProcess(pid=foreign.pid, gpu_index=0, mem_mib=4096)]

        rep = reaper.reap(marker, Holding(tmp_path / "none"), port=None, grace_s=2, wait_s=0, kill_foreign=True)
        (entry,) = [k for k in rep.killed if k["pid"] == foreign.pid]
        assert entry["found_by"] == "gpu"
        assert entry["reason"].startswith("not ours, holds 4096 MiB on GPU 0; kill_foreign_gpu_processes is on")
    finally:
        for p in (launcher, foreign):
            reaper.kill_group(p.pid, 1, "test cleanup")
            with contextlib.suppress(ProcessLookupError):  # the foreign one's child, orphaned by its kill
                os.killpg(p.pid, signal.SIGKILL)


def test_a_sweep_into_another_directory_is_never_reaped(tmp_path, monkeypatch):
    """The marker is the results directory's (``sweep_id``): two sweeps on one host into two directories,
    even directories of the same name, reap only their own servers, remembered sessions included."""
    from sweep.results.writer import sweep_id

    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    mine, theirs = (reaper.Marker(sweep_id(tmp_path / d / "res"), "host-a") for d in ("a", "b"))
    assert mine.sweep != theirs.sweep and mine.sweep.startswith("res-")
    ours, other = spawn(mine.env("p1")), spawn(theirs.env("p1"))  # the same point, the same host
    reaper.remember(mine, ours.pid)
    reaper.remember(theirs, other.pid)
    other_tree = [other.pid] + [c.pid for c in psutil.Process(other.pid).children()]
    try:
        rep = reaper.reap(mine, FakeGpus(tmp_path / "none"), port=None, grace_s=2, wait_s=1)
        ours.wait(timeout=5)
        killed = {k["pid"] for k in rep.killed}
        assert ours.pid in killed and not killed & set(other_tree)
        assert all(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in other_tree)
        assert {p.pid for p in reaper.marked(theirs)} == set(other_tree)
    finally:
        for p in (ours, other):
            reaper.kill_group(p.pid, 1, "test cleanup")
            p.wait(timeout=5)
