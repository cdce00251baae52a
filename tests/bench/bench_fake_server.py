"""Start the fake SGLang server (``python -m sweep.fake``) on a free loopback port, wait for
``/health`` 200, and kill its whole process tree. Used by the bench tests and tests/perf/bench_client.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant; the caller reaps its own child (Popen.wait)."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    procs = root.children(recursive=True) + [root]
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    # wait until each is gone or a zombie (holding no port or memory): orphaned grandchildren are
    # reaped by this machine's init only every second or two
    deadline = time.monotonic() + 10
    for p in procs:
        while time.monotonic() < deadline:
            try:
                if p.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.01)


@dataclass
class FakeServer:
    url: str
    proc: subprocess.Popen
    log: Path
    args: tuple[str, ...]

    def kill(self) -> None:
        kill_tree(self.proc.pid)
        self.proc.wait(timeout=10)

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""


def start_fake(log_dir: Path, *args: str, speed: float = 1.0, timeout_s: float = 60.0) -> FakeServer:
    port = free_port()
    log = log_dir / f"fake-{port}.log"
    argv = [
        sys.executable,
        "-m",
        "sweep.fake",
        "--model-path",
        "fake/Kimi-K2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--fake-speed",
        str(speed),
        "--fake-startup-speed",
        "10000",
        *args,
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    server = FakeServer(f"http://127.0.0.1:{port}", proc, log, tuple(args))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"fake server exited with {proc.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(server.url + "/health", timeout=1.0, trust_env=False).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"fake server not healthy after {timeout_s}s:\n{server.log_tail()}")
