"""A server with ``--api-key`` (issue 14, item 10) on one host, and the secrets a point's host side
writes: the server's log (SGLang prints ``api_key='...'`` in its ``server_args=`` line), the log tail
and reasons in the points table, the ``reaped`` command lines.

Real subprocesses: the fake server (which guards its routes as SGLang does) and tiny ``python -c``
writers for the log pump; real HTTP on loopback."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from dataclasses import asdict

import pytest

from sweep.core.errors import PointFailure
from sweep.core.redact import REDACTED
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.experiment.config import ReapConfig, Timeouts
from sweep.host import reaper
from sweep.host.point import LaunchPoint, LaunchSpec, run_launch
from sweep.host.server import LogFollower, ServerProcess
from tests.conftest import free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

FAKE = [sys.executable, "-m", "sweep.fake"]
KEY, HF = "sk-test-key-0123456789", "hf_test_token_abcdef"
ADMIN = "sk-admin-key-9876543210"
TINY = BenchSettings(
    prompts="coding",
    server_metrics=True,
    single_stream=SingleStreamSettings(runs=1, warmup=1, max_tokens=16),
    concurrency=ConcurrencySettings(levels=[1, 4], rounds=1, max_tokens=16),
)
SWEEP = f"test-key-{uuid.uuid4().hex[:6]}"
READY_S = 30.0
# the refused-key tests wait for readiness up to an hour, past the test's own timeout (pytest-timeout,
# 300 s): only a point that fails at the 401 itself, not one that waits for ready_s, can pass them
REFUSED_READY_S = 3600.0


def make_spec(tmp_path, flags=None, launcher=FAKE, env=None, ready_s: float = READY_S) -> LaunchSpec:
    flags = {"model-path": "/models/m", "tp-size": 2, "port": free_port(), **(flags or {})}
    return LaunchSpec(
        SWEEP,
        launcher,
        flags,
        dict(env or {}),
        str(tmp_path / "server.log"),
        [LaunchPoint("p" + uuid.uuid4().hex[:8], "label", TINY)],
        Timeouts(stall_s=20, load_s=30, capture_s=30, ready_s=ready_s, total_s=max(60.0, ready_s * 2), stop_grace_s=2),
        ReapConfig(wait_s=5),
        real_paths=False,
        launcher_args=["--fake-speed", "20", "--fake-startup-speed", "400"],
    )


def wrapper(tmp_path, *extra: str):
    """A launcher script that starts the fake with flags of its own (as a site's serve.sh may)."""
    script = tmp_path / "serve.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, sys
        os.execv(sys.executable, [sys.executable, "-m", "sweep.fake", *sys.argv[1:], *{list(extra)!r}])
    """)
    )
    return [sys.executable, str(script)]


def leaks(obj) -> list[str]:
    text = json.dumps(obj, default=str)
    return [s for s in (KEY, HF) if s in text]


def test_key_protected_server_benchmarked_with_the_key(tmp_path, host):
    spec = make_spec(tmp_path, {"api-key": KEY, "enable-metrics": True}, env={"HF_TOKEN": HF})
    [r] = run_launch(spec, host).points
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-2000:])
    # every request of the benchmark went through (the key sent as Authorization: Bearer)
    assert all(r.requests.column("ok").to_pylist()) and r.requests.num_rows >= 6
    assert r.levels.num_rows == 2 and r.metrics is not None and r.metrics.num_rows > 0  # /metrics: open, as in SGLang
    # the server log: the server printed its key in server_args=, the log has it hidden
    log = open(spec.log_path, "rb").read().decode()
    assert KEY not in log and HF not in log
    assert f"api_key='{REDACTED}'" in log and "The server is fired up and ready to roll!" in log
    # the access log shows every route answered: no 401 anywhere
    assert " 401 " not in log and '"POST /generate HTTP/1.1" 200' in log
    # the points table's host-side columns: log tail, reaped command lines, checks
    assert not leaks({"tail": r.log_tail, "reaped": r.reaped, "checks": r.checks, "reason": r.failure_reason})
    cmdlines = [k["cmdline"] for k in r.reaped["killed"]]
    assert any(f"--api-key {REDACTED}" in c for c in cmdlines), cmdlines  # the server's own line, redacted
    # the phases were timed from the pumped log as from a direct one
    assert r.phases["load_s"] is not None and r.phases["ready_s"] is not None


def test_admin_key_server_is_flushed_with_its_admin_key(tmp_path, host):
    """With ``--admin-api-key`` SGLang's /flush_cache wants that key and refuses the api key: the
    benchmark sends it there, so every level starts flushed, and the log hides it."""
    spec = make_spec(tmp_path, {"api-key": KEY, "admin-api-key": ADMIN})
    [r] = run_launch(spec, host).points
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-2000:])
    assert r.levels.column("flushed").to_pylist() == [True, True]
    log = open(spec.log_path, "rb").read().decode()
    assert ADMIN not in log and f"admin_api_key='{REDACTED}'" in log
    assert '"POST /flush_cache HTTP/1.1" 200' in log and " 401 " not in log
    assert ADMIN not in json.dumps({"tail": r.log_tail, "reaped": r.reaped}, default=str)


def test_flush_refused_fails_the_point_before_measuring(tmp_path, host):
    """A launcher that sets an admin key of its own: /flush_cache answers 401 to what the sweep
    sends, and the point fails at once saying so (every level would be unflushed)."""
    spec = make_spec(tmp_path, {"api-key": KEY}, launcher=wrapper(tmp_path, "--admin-api-key", "sk-admin-own"))
    [r] = run_launch(spec, host).points
    assert r.status == "failed" and r.failure_phase == "benchmark", (r.failure_phase, r.failure_reason)
    assert "401 to POST /flush_cache" in r.failure_reason and "--admin-api-key" in r.failure_fix
    assert r.requests is None or r.requests.num_rows == 0


def test_wrong_key_fails_at_once_with_the_reason(tmp_path, host):
    # the launcher script sets its own key (argparse: the last --api-key wins); the sweep sends KEY
    spec = make_spec(
        tmp_path,
        {"api-key": KEY},
        launcher=wrapper(tmp_path, "--api-key", "sk-the-servers-own-key"),
        ready_s=REFUSED_READY_S,
    )
    [r] = run_launch(spec, host).points
    assert r.status == "failed" and r.failure_phase == "ready", (r.failure_phase, r.failure_reason)
    assert "401 Unauthorized" in r.failure_reason and "POST /generate" in r.failure_reason
    assert "set server.flags.api-key to the key the server expects" in r.failure_reason
    assert "hang" not in r.failure_reason
    assert KEY not in r.failure_reason + r.log_tail


def test_server_wants_a_key_the_sweep_does_not_have(tmp_path, host):
    spec = make_spec(
        tmp_path, launcher=wrapper(tmp_path, "--api-key", "sk-the-servers-own-key"), ready_s=REFUSED_READY_S
    )
    [r] = run_launch(spec, host).points
    assert r.status == "failed" and r.failure_phase == "ready"
    assert "401 Unauthorized" in r.failure_reason and "without a key" in r.failure_reason


# --- the log pump: secrets hidden as the lines arrive, every other byte as it came --------------------

WRITER = textwrap.dedent("""
    import os, sys, time
    w = lambda b: (os.write(1, b), time.sleep(0.03))
    w(b"[t] server_args=ServerArgs(model_path='/m', api_key='%(key)s', port=1)\\n")
    w(b"\\rLoading shards:   0%% Completed | 0/2 [00:00<?, ?it/s]")
    w(b"\\rLoading shards:  50%% Completed | 1/2 [00:01<00:01, 1.00s/it]")
    w(b"\\rLoading shards: 100%% Completed | 2/2 [00:02<00:00, 1.00s/it]\\n")
    w(b"token in two writes: %(a)s")        # a secret cut by the writer itself
    w(b"%(b)s and HF %(hf)s\\n")
    w(b"caf\\xc3\\xa9 \\xff raw bytes\\n")
    w(b"last words, no newline %(key)s")
    sys.exit(3)
""") % {"key": KEY, "a": KEY[:7], "b": KEY[7:], "hf": HF}


def test_log_pump_hides_secrets_and_keeps_the_rest(tmp_path):
    log = tmp_path / "server.log"
    sp = ServerProcess(
        [sys.executable, "-c", WRITER, "--api-key", KEY], {"HF_TOKEN": HF}, log, port=free_port(), api_key=KEY
    )
    assert set(sp.secrets) == {KEY, HF} and sp.api_key == KEY  # secrets by default from the argv and env
    sp.start()
    sp.proc.wait(timeout=20)
    err = sp.died("load")  # reads what the server wrote last, through the pump
    assert isinstance(err, PointFailure)
    data = log.read_bytes()
    assert KEY.encode() not in data and HF.encode() not in data and KEY[:7].encode() not in data
    assert f"api_key='{REDACTED}'".encode() in data
    assert b"\rLoading shards:  50% Completed | 1/2 [00:01<00:01, 1.00s/it]" in data  # bars as drawn
    assert f"token in two writes: {REDACTED} and HF {REDACTED}\n".encode() in data
    assert b"caf\xc3\xa9 \xff raw bytes\n" in data  # not UTF-8: kept byte for byte
    assert data.endswith(f"last words, no newline {REDACTED}".encode())  # the held line written at the end
    follower = LogFollower(log)
    got = follower.read()
    assert any(getattr(p, "n", None) == 2 for p in got.progress)  # the bar is still parsed
    assert "last words" in follower.tail_text()
    sp.close_log()


def test_no_secrets_no_pump(tmp_path):
    sp = ServerProcess(
        [sys.executable, "-c", "print('hi')"], {"NCCL_ALGO": "Ring"}, tmp_path / "l.log", port=free_port()
    )
    sp.start()
    sp.proc.wait(timeout=20)
    assert sp._pump is None and sp.secrets == [] and sp.api_key is None


def test_reaper_redacts_command_lines(tmp_path):
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--api-key", KEY, f"--hf-token={HF}"])
    try:
        child = __import__("psutil").Process(proc.pid)
        wait_until(lambda: "--api-key" in child.cmdline(), 10, "the child's command line to be readable")
        killed = reaper.kill_processes([child], 2.0, "test")
    finally:
        proc.kill()
        proc.wait()
    assert killed and not leaks(killed)
    assert f"--api-key {REDACTED} --hf-token={REDACTED}" in killed[0]["cmdline"]
    report = reaper.ReapReport(killed=[{**killed[0], "cmdline": f"x {HF}"}])
    assert not leaks(report.as_dict([HF])) and leaks(asdict(report))  # the point's values, anywhere
