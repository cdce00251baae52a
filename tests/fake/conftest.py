"""Fixtures for the fake SGLang server's tests: start it as a real subprocess on a free loopback port,
follow its log, and kill everything it started (children and zombies included) afterwards.

Every process a test starts carries an env marker; teardown SIGKILLs each process that has it, so
even children that outlive their parent (``--fake-zombie``) never survive a test.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Iterator, Optional

import httpx
import psutil
import pytest

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
MARKER_ENV = "SWEEP_FAKE_TEST_MARKER"
# startup in ~0.2 s, serving 50x faster than a real host: a 32-token request takes well under a second
FAST = ("--fake-speed", "50", "--fake-startup-speed", "3000")
EAGLE3 = (
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "/models/eagle3-drafter",
    "--speculative-num-steps",
    "2",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "3",
)


def marked_processes(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARKER_ENV) == marker:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def kill_marked(marker: str) -> None:
    for proc in marked_processes(marker):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


@dataclass
class FakeProc:
    proc: subprocess.Popen
    port: int
    log_path: Path
    marker: str
    args: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        """The log as written: tqdm's carriage returns kept (no newline translation)."""
        return self.log_path.read_bytes().decode("utf-8", "replace")

    def wait_for_log(self, pattern: str, timeout: float = 15.0) -> re.Match:
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern, re.M)
        while time.monotonic() < deadline:
            m = rx.search(self.log())
            if m:
                return m
            if self.proc.poll() is not None:
                m = rx.search(self.log())
                if m:
                    return m
                raise AssertionError(
                    f"server exited ({self.proc.returncode}) before /{pattern}/:\n{self.log()[-3000:]}"
                )
            time.sleep(0.02)
        raise AssertionError(f"no /{pattern}/ within {timeout}s:\n{self.log()[-3000:]}")

    def wait_ready(self, timeout: float = 15.0) -> None:
        self.wait_for_log(r"The server is fired up and ready to roll!", timeout)

    def wait_exit(self, timeout: float = 15.0) -> int:
        return self.proc.wait(timeout=timeout)

    def children(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.base + path, timeout=kw.pop("timeout", 30.0), **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return httpx.post(self.base + path, timeout=kw.pop("timeout", 30.0), **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


Starter = Callable[..., FakeProc]


def _start(
    directory: Path,
    markers: list[str],
    args: tuple[str, ...] | list[str],
    *,
    fast: bool = True,
    env: Optional[dict[str, str]] = None,
    port: Optional[int] = None,
    model: str = "/models/Llama-3.1-8B-Instruct",
    new_session: bool = False,
) -> FakeProc:
    marker = uuid.uuid4().hex
    markers.append(marker)
    port = port or free_port()
    argv = [
        sys.executable,
        "-m",
        "sweep.fake",
        "--model-path",
        model,
        "--port",
        str(port),
        *(FAST if fast else ()),
        *args,
    ]
    full_env = {
        **os.environ,
        MARKER_ENV: marker,
        "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        **(env or {}),
    }
    log_path = directory / f"fake-{port}.log"
    with open(log_path, "wb") as fh:
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=full_env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=new_session,
        )
    return FakeProc(proc, port, log_path, marker, argv)


@contextlib.contextmanager
def _starter(directory: Path) -> Iterator[Starter]:
    """A ``start(*flags, fast=True, env=None, model=..., new_session=False)`` whose servers are killed
    (tree and zombies) on exit. ``new_session``: the server leads its own process group, so a test
    can signal the group as the sweep's host does."""
    markers: list[str] = []
    procs: list[FakeProc] = []

    def start(*args: str, **kw) -> FakeProc:
        fp = _start(directory, markers, list(args), **kw)
        procs.append(fp)
        return fp

    try:
        yield start
    finally:
        for fp in procs:
            if fp.proc.poll() is None:
                fp.proc.kill()
                fp.proc.wait()
        for marker in markers:
            kill_marked(marker)


@pytest.fixture
def start_fake(tmp_path: Path) -> Iterator[Starter]:
    """``start_fake(*flags, fast=True, env=None)`` -> a running FakeProc, killed (tree and zombies) after."""
    with _starter(tmp_path) as start:
        yield start


@pytest.fixture(scope="module")
def module_starter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Starter]:
    """The same, shared by a test module (one server for many endpoint tests)."""
    with _starter(tmp_path_factory.mktemp("fake")) as start:
        yield start


def sse_events(body: str) -> list[str]:
    """The ``data:`` payloads of a server-sent-events body, in order."""
    return [line[len("data: ") :] for line in body.split("\n\n") if line.startswith("data: ")]


@pytest.fixture(scope="session")
def fk() -> SimpleNamespace:
    """Helpers for test modules (conftest modules are not importable by name)."""
    return SimpleNamespace(
        FAST=FAST,
        EAGLE3=EAGLE3,
        sse_events=sse_events,
        free_port=free_port,
        marked_processes=marked_processes,
        MARKER_ENV=MARKER_ENV,
    )
