"""The server's port on a host (sweep/host/ports.py): a simulated host's chosen free at launch, and
relaunched on another when another process takes it during the startup; a real host's, when taken,
named with its holder in pre-flight. Real sockets, real fake servers, real ``net_connections``."""

import os
import socket
import subprocess
import sys
import textwrap
import uuid
from dataclasses import replace

import pytest

from sweep.experiment.config import ReapConfig
from sweep.host import ports, reaper
from sweep.host.point import Placement, run_launch
from tests.host.test_point import SWEEP, make_spec  # SWEEP: the specs' marker, which the host fixture checks
from tests.waiting import wait_until

assert SWEEP  # the host fixture reads it from this module (tests/host/conftest.py)


def test_free_port_is_free_and_avoids_what_it_is_told():
    port = ports.free_port()
    assert reaper.port_free(port)
    with socket.socket() as s:  # and bindable by a server
        s.bind(("127.0.0.1", port))
        s.listen()
        assert ports.free_port() != port  # a bound port is never the kernel's choice
    for _ in range(20):
        assert ports.free_port(avoid=[port]) != port


def test_holders_name_the_listener_and_its_sweep(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        found = ports.holders(port)
        assert [(h.pid, h.sweep) for h in found] == [(os.getpid(), None)] and found[0].name
    marked = _listener({reaper.MARK_SWEEP: "other-sweep"}, tmp_path)
    try:
        (h,) = ports.holders(marked.port)
        assert (h.pid, h.sweep) == (marked.proc.pid, "other-sweep")
        assert "a server of sweep 'other-sweep'" in h.describe() and f"pid {marked.proc.pid}" in h.describe()
    finally:
        marked.stop()


class _Listener:
    def __init__(self, proc: subprocess.Popen, port: int):
        self.proc, self.port = proc, port

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _listener(env: dict[str, str], tmp_path, hold_s: float = 600) -> _Listener:
    """Another process listening on a free loopback port for ``hold_s`` seconds, with ``env``."""
    ready = tmp_path / f"port-{uuid.uuid4().hex[:6]}"
    code = textwrap.dedent(f"""
        import socket, time
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        open({str(ready)!r}, "w").write(str(s.getsockname()[1]))
        time.sleep({hold_s})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env})
    port = wait_until(lambda: ready.is_file() and ready.read_text(), 20, "the listener tells its port")
    return _Listener(proc, int(port))


@pytest.mark.slow
def test_real_host_preflight_names_the_holder_and_another_sweeps_marker(tmp_path, host):
    other = _listener({reaper.MARK_SWEEP: "k26-other"}, tmp_path)
    try:
        spec = make_spec(tmp_path, flags={"port": other.port})
        [r] = run_launch(replace(spec, reap=ReapConfig(wait_s=1)), host).points
    finally:
        other.stop()
    assert r.status == "failed" and r.failure_phase == "preflight"
    assert f"port {other.port} on 127.0.0.1 is in use" in r.failure_reason
    assert f"pid {other.proc.pid} (python" in r.failure_reason
    assert "a server of sweep 'k26-other' (SWEEP_SWEEP in its environment)" in r.failure_reason
    assert "another sweep runs on this host" in r.failure.fix and "server.port" in r.failure.fix
    assert r.port is None  # never launched


@pytest.mark.slow
def test_real_host_preflight_names_a_process_that_is_no_sweeps(tmp_path, host):
    spec = make_spec(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", spec.port))
        s.listen()
        [r] = run_launch(replace(spec, reap=ReapConfig(wait_s=0.5)), host).points
    assert r.status == "failed" and r.failure_phase == "preflight" and f"port {spec.port}" in r.failure_reason
    assert f"pid {os.getpid()} (" in r.failure_reason and "not a sweep's server (no sweep marker)" in r.failure_reason
    assert f"kill {os.getpid()}" in r.failure.fix


@pytest.mark.slow
def test_real_host_preflight_waits_for_the_port(tmp_path, host):
    """A port let go within server.reap.wait_s: the point runs on it."""
    other = _listener({}, tmp_path, hold_s=2)
    spec = make_spec(tmp_path, flags={"port": other.port})
    [r] = run_launch(replace(spec, reap=ReapConfig(wait_s=30)), host).points
    other.proc.wait()
    assert r.status == "ok", (r.failure_phase, r.failure_reason)
    assert r.port == other.port and f"ok: port {other.port} free" in [c.line() for c in r.checks]


@pytest.mark.slow
def test_simulated_host_chooses_a_free_port_at_launch(tmp_path, host):
    """The flags' port is held by another process: a simulated host never waits for it nor fails
    on it; its server runs on a port chosen free at launch, and the result says which."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        held = s.getsockname()[1]
        spec = replace(make_spec(tmp_path, flags={"port": held}), choose_port=True, reap=ReapConfig(wait_s=30))
        [r] = run_launch(spec, host).points
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-2000:])
    assert r.port not in (None, held) and reaper.port_free(r.port)
    assert f"ok: port {r.port} chosen free at launch (simulated host)" in [c.line() for c in r.checks]
    assert r.reaped["waited_s"] < 5  # not the flags' port waited for (wait_s 30)


NEIGHBOUR = """
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def _ok(self):
        body = json.dumps({"text": "not yours", "meta_info": {"completion_tokens": 1}}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = _ok
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("listening", flush=True)
s.serve_forever()
"""


class Neighbour:
    """Another sweep's server on a port: a process carrying another sweep's marker that listens there
    and answers every request 200 (as a ready server would)."""

    def __init__(self, port: int):
        self.port = port
        self.proc = subprocess.Popen(
            [sys.executable, "-c", NEIGHBOUR, str(port)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **reaper.Marker("another-sweep", "h").env("q")},
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "listening"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def _taken_after_the_pick(monkeypatch, times: int) -> list[Neighbour]:
    """Another sweep's server taking the port during the startup, as two sweeps on one machine did:
    each of the first ``times`` ports the launch picks is taken right after the pick (before the fake
    binds it, at the end of its startup) by a neighbour that answers as if ready."""
    real, held = ports.free_port, []

    def pick(host: str = "127.0.0.1", avoid=()) -> int:
        port = real(host, avoid)
        if len(held) < times:
            held.append(Neighbour(port))
        return port

    monkeypatch.setattr(ports, "free_port", pick)
    return held


@pytest.mark.slow
def test_port_taken_during_startup_relaunched_on_another(tmp_path, host, monkeypatch):
    held = _taken_after_the_pick(monkeypatch, 1)
    spec = replace(make_spec(tmp_path), choose_port=True)
    try:
        [r] = run_launch(spec, host).points
        lost = held[0].port
    finally:
        for s in held:
            s.close()
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-2000:])
    assert r.port not in (None, lost)
    lines = [c.line() for c in r.checks]
    warning = next(x for x in lines if x.startswith("warning: [port-taken]"))
    assert f"port {lost} was taken by another process while the server started" in warning
    assert "address already in use" in warning and "try 2 of 4" in warning
    assert (
        lines.index(f"ok: port {lost} chosen free at launch (simulated host)")
        < lines.index(warning)
        < lines.index(f"ok: port {r.port} chosen free at launch (simulated host)")
    )
    log = open(spec.log_path).read()
    assert f"('127.0.0.1', {lost}): address already in use" in log and "the lines above are an earlier run's" in log
    assert f"Uvicorn running on http://127.0.0.1:{r.port}" in log
    assert r.phases["startup_s"] is not None and r.levels.num_rows == 2
    assert reaper.port_free(r.port) and host.probe.processes() == []


@pytest.mark.slow
def test_port_retries_are_bounded(tmp_path, host, monkeypatch):
    held = _taken_after_the_pick(monkeypatch, ports.PORT_RETRIES + 1)
    spec = replace(make_spec(tmp_path), choose_port=True)
    try:
        [r] = run_launch(spec, host).points
        taken = [n.port for n in held]
    finally:
        for s in held:
            s.close()
    assert len(taken) == ports.PORT_RETRIES + 1  # launched 4 times, then gave up
    assert r.status == "failed" and "address already in use" in r.failure_reason
    assert "another process took the server's port" in r.failure.fix  # sweep/sglang/logs.py's port_in_use
    assert sum(c.rule == "port-taken" for c in r.checks) == ports.PORT_RETRIES
    assert r.port == taken[-1]
    assert host.probe.processes() == []


@pytest.mark.slow
def test_simulated_host_still_checks_the_dist_init_port(tmp_path, host):
    """Node rank 0 of a server over several hosts: its HTTP port is chosen at launch, its rendezvous
    port (the driver's choice) is still checked in pre-flight."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        held = s.getsockname()[1]
        flags = {"nnodes": 2, "node-rank": 0, "dist-init-addr": f"127.0.0.1:{held}"}
        [r] = run_launch(
            replace(make_spec(tmp_path, flags=flags), choose_port=True, placement=Placement(nnodes=2)), host
        ).points
    assert r.status == "failed" and r.failure_phase == "preflight"
    assert f"--dist-init-addr port {held} is in use" in r.failure_reason and r.port is None
