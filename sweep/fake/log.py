"""Log lines in SGLang's format, written the way several processes can share one file.

SGLang configures ``logging`` with ``[%(asctime)s{prefix}] %(message)s`` on stderr, the prefix naming
the scheduler's rank (:func:`rank_prefix`); uvicorn adds ``INFO:     `` and writes access lines to
stdout; tracebacks come out bare (and, in 0.5.10, the warnings ServerArgs logs before logging is
configured). Each record goes out in one ``os.write`` so lines of the parent and its children never
interleave mid-line (tqdm bars, see :mod:`progress`, are the exception, as in SGLang).
"""

from __future__ import annotations

import os
import time

STDOUT, STDERR = 1, 2


def timestamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def rank_prefix(rank: int, tp_size: int, real_wording: bool) -> str:
    """A scheduler's log prefix. The real server (shared/sglang-cpu, newer than 0.5.23) adds ``TP{rank}``
    only when tp > 1 (``[2026-12-01 07:20:59] Load weight begin.``); 0.5.10 always did (`` TP0``)."""
    return f" TP{rank}" if tp_size > 1 or not real_wording else ""


def write_stderr(text: str) -> None:
    """Raw text on stderr (a tqdm redraw: no newline, no timestamp)."""
    _write(STDERR, text)


def _write(fd: int, text: str) -> None:
    data = text.encode("utf-8", "replace")
    try:
        while data:
            n = os.write(fd, data)
            data = data[n:]
    except OSError:
        pass  # the reader went away (closed pipe): a server keeps running without its log


class Log:
    """One process's logger. ``prefix`` is SGLang's rank tag, e.g. ``" TP0"``."""

    def __init__(self, prefix: str = ""):
        self.prefix = prefix

    def info(self, message: str) -> None:
        _write(STDERR, f"[{timestamp()}{self.prefix}] {message}\n")

    warning = info  # SGLang's format carries no level name
    error = info

    @staticmethod
    def bare(text: str) -> None:
        """Text as Python prints it: tracebacks, and warnings logged before logging is configured."""
        _write(STDERR, text if text.endswith("\n") else text + "\n")

    @staticmethod
    def uvicorn(message: str, level: str = "INFO") -> None:
        _write(STDERR, f"[{timestamp()}] {level + ':':<9} {message}\n")

    @staticmethod
    def access(client: str, method: str, path: str, status: int, reason: str) -> None:
        _write(STDOUT, f'[{timestamp()}] INFO:     {client} - "{method} {path} HTTP/1.1" {status} {reason}\n')
