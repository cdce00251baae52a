"""The fake rejects a malformed flag value as real SGLang's argparse does: ``usage: PROG ...`` then
``PROG: error: MESSAGE`` on stderr, exit code 2, nothing started; PROG is SGLang's own (``sglang serve``
at 0.5.23-era main, ``launch_server.py`` under ``python -m sglang.launch_server`` before it). The host
layer then names the error from the log's tail (stdout and stderr both go to the log)."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import time

import pytest

from sweep.fake import args as fake_args
from sweep.host.server import ServerProcess
from sweep.sglang.logs import find_failure
from tests.conftest import free_port


def real_argparse_error(prog: str, argv: list[str]) -> tuple[int, str]:
    """What CPython's argparse prints for a parser named as SGLang names its own, with the flag typed
    as SGLang types it (``max_running_requests: Optional[int]``)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--model-path")
    parser.add_argument("--max-running-requests", type=int)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        parser.parse_args(argv)
    return int(exit_.value.code or 0), err.getvalue()


@pytest.mark.parametrize("version,prog", [("0.5.10", "launch_server.py"), ("0.5.23", "sglang serve")])
def test_a_bad_int_is_argparses_usage_error(version, prog):
    argv = ["--model-path", "/models/m", "--max-running-requests", "lots"]
    r = subprocess.run(
        [sys.executable, "-m", "sweep.fake", "--fake-version", version, *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.rstrip("\n").split("\n")
    want = f"{prog}: error: argument --max-running-requests: invalid int value: 'lots'"
    assert lines[0].startswith(f"usage: {prog} [-h]") and lines[-1] == want, r.stderr
    code, real = real_argparse_error(prog, argv)
    assert code == 2 and real.rstrip("\n").split("\n")[-1] == want
    assert fake_args.prog_for(version) == prog
    f = find_failure(lines, r.returncode)
    assert f.kind == "bad_argument" and f.reason == want and "takes an integer" in f.fix


def test_the_host_reads_the_argparse_error_from_the_log(tmp_path):
    """ServerProcess sends stderr into the log with stdout; died() names argparse's line."""
    port = free_port()
    server = ServerProcess(
        [
            sys.executable,
            "-m",
            "sweep.fake",
            "--model-path",
            "/models/m",
            "--port",
            str(port),
            "--mem-fraction-static",
            "most",
        ],
        {},
        tmp_path / "server.log",
        port=port,
    )
    server.start()
    try:
        deadline = time.monotonic() + 60
        while server.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.alive()
        failure = server.died("load")
    finally:
        server.stop(2.0)
    assert failure.reason == "launch_server.py: error: argument --mem-fraction-static: invalid float value: 'most'"
    assert failure.fix and "takes a number" in failure.fix


@pytest.mark.parametrize(
    "argv,said",
    [
        (["--dtype", "fp8"], "argument --dtype: invalid choice: 'fp8'"),
        (["--attention-backend", "nope"], "argument --attention-backend: invalid choice"),
        (["--enable-metrics", "2"], "unrecognized arguments: 2"),
        (["--speculative-num-steps", "three"], "invalid int value: 'three'"),
    ],
)
def test_the_fake_refuses_what_sglangs_argparse_refuses(argv, said, capsys):
    with pytest.raises(SystemExit) as exit_:
        fake_args.parse(["--model-path", "/m", *argv])
    assert exit_.value.code == 2 and said in capsys.readouterr().err
