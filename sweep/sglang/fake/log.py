"""Log lines in SGLang's format, written the way several processes can share one file.

SGLang configures ``logging`` with ``[%(asctime)s{prefix}] %(message)s`` (prefix `` TP0`` in the
scheduler of rank 0) on stderr; uvicorn adds ``INFO:     `` and writes access lines to stdout;
tracebacks and the warnings ServerArgs logs before logging is configured come out bare. Each record
goes out in one ``os.write`` so lines of the parent and its children never interleave mid-line.
"""

from __future__ import annotations

import os
import time

STDOUT, STDERR = 1, 2


def timestamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


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
