"""Real SGLang servers for the real tier: started in their own process group with the log in a file,
asked greedily through /generate, and killed with everything they started."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from sweep.bench.client import build_payload
from sweep.host import reaper
from tests.conftest import free_port
from tests.waiting import wait_until

READY = "The server is fired up and ready to roll"


@dataclass
class Live:
    proc: subprocess.Popen
    url: str
    port: int
    log: Path
    ready_s: float

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _launch(real, log: Path, flags) -> tuple[subprocess.Popen, str, int]:
    """A real server with ``real``'s base flags and these, on a free port, in its own process group,
    its output in ``log``: (process, URL, port)."""
    port = free_port()
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            [*real.launcher, *real.base_flags(port), *flags],
            env={**os.environ, **real.env},
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )
    return proc, f"http://127.0.0.1:{port}", port


@contextlib.contextmanager
def live_server(real, log: Path, *flags: str, timeout_s: float = 420):
    """A real server with ``real``'s base flags and these; yields once /health answers 200, or raises
    with the log's tail if the server died first. Again on another port where it lost a race for one
    (servers run side by side; SGLang picks its internal ports near the HTTP port)."""
    for attempt in range(3):
        proc, url, port = _launch(real, log, flags)
        t0 = time.monotonic()
        try:
            wait_until(
                lambda proc=proc, url=url: proc.poll() is not None or _healthy(url),
                timeout_s,
                "the server is ready",
                interval=0.5,
            )
            if proc.poll() is not None:
                text = log.read_text(errors="replace")
                if re.search(r"EADDRINUSE|Address already in use", text) and attempt < 2:
                    continue
                raise AssertionError(f"the server exited ({proc.returncode}): {text[-4000:]}")
            yield Live(proc, url, port, log, time.monotonic() - t0)
            return
        finally:
            if proc.poll() is None:
                reaper.kill_group(proc.pid, 20, "test teardown")


def generate(url: str, prompt: str, max_tokens: int, timeout_s: float = 180) -> dict:
    """One greedy /generate, not streamed, exactly as the benchmark builds it: the whole response."""
    body = build_payload("generate", prompt, max_tokens=max_tokens, stream=False)
    r = httpx.post(f"{url}/generate", json=body, timeout=timeout_s)
    r.raise_for_status()
    return r.json()


def flush(url: str) -> None:
    httpx.post(f"{url}/flush_cache", timeout=30).raise_for_status()


def dies(real, log: Path, *flags: str, timeout_s: float = 420) -> tuple[str, str]:
    """A real server that should not come up: (its last exception line, shutdown noise aside, or ""
    if it came up after all; the log). Its process group is killed either way."""
    from sweep.sglang.logs import exception_lines

    proc, url, _ = _launch(real, log, flags)
    try:
        wait_until(lambda: proc.poll() is not None or _healthy(url), timeout_s, "the server exits", interval=0.5)
        if proc.poll() is None:  # it came up
            return "", log.read_text(errors="replace")
        try:
            proc.wait(timeout=30)  # SGLang kills its own tree after a traceback; the log is complete then
        except subprocess.TimeoutExpired:
            pass
    finally:
        if proc.poll() is None:
            reaper.kill_group(proc.pid, 20, "test teardown")
    text = log.read_text(errors="replace")
    exc = exception_lines(text.splitlines())
    return (exc[-1] if exc else ""), text


class SharedServers:
    """Real servers that several tests only read from (requests, the cache flushed first by each test,
    metrics read as deltas), started once per module (the shared_servers fixture): a server start is 40-90 s on 2 cores, more on an
    AVX2 machine. ``get`` starts one for these flags on this install at its first use and keeps it until
    ``close`` (the module's end), at most ``keep`` at a time (the oldest stopped first). A kept server
    is paused (SIGSTOP to its process group) while another test runs: an idle CPU SGLang scheduler
    polls, and took a quarter to half of a core here while it waited."""

    def __init__(self, root: Path, keep: int = 2):
        self.root, self.keep = root, keep
        self._live: dict[tuple, tuple[contextlib.ExitStack, Live]] = {}

    def get(self, real, *flags: str) -> Live:
        key = (real.python, flags)
        self.pause()
        if key in self._live and self._live[key][1].proc.poll() is None:
            self._live[key] = self._live.pop(key)  # the newest now
            srv = self._live[key][1]
            _signal_group(srv.proc, signal.SIGCONT)
            return srv
        self._stop(key)
        while len(self._live) >= self.keep:
            self._stop(next(iter(self._live)))
        stack = contextlib.ExitStack()
        log = self.root / f"shared{len(list(self.root.glob('shared*.log')))}.log"
        srv = stack.enter_context(live_server(real, log, *flags))
        self._live[key] = (stack, srv)
        return srv

    def pause(self) -> None:
        """Pause every kept server (the next ``get`` of one resumes it)."""
        for _, srv in self._live.values():
            _signal_group(srv.proc, signal.SIGSTOP)

    def _stop(self, key: tuple) -> None:
        stack, srv = self._live.pop(key, (None, None))
        if stack is not None and srv is not None:
            _signal_group(srv.proc, signal.SIGCONT)  # a paused server drains on SIGTERM as it would
            stack.close()

    def close(self) -> None:
        for key in list(self._live):
            self._stop(key)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """``sig`` to a server's process group (``_launch`` starts each in a session of its own)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
