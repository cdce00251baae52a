"""One writer per results directory: the sweep holds ``.sweep.lock`` there while it runs.

``fcntl.flock`` on the file, taken without waiting: a second sweep into a held directory is refused at
once (a ``ResultsError``, exit 5) with the holder named from the small JSON record the holder writes
into the file (pid, host, start time, command line). The kernel drops the lock when its process dies,
so a sweep killed with ``kill -9`` leaves a record and no lock: the next sweep takes it over and says
whose it was. On a clean end the record is emptied (the file stays: removing it would let a sweep that
opened the old file and one that made a new one both hold "the" lock). Readers (``report``, ``query``,
``history``) never look at it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sweep.core import ResultsError, redact_argv

LOCK = ".sweep.lock"


def lock_path(directory: str | Path) -> Path:
    return Path(directory) / LOCK


def _holder_text(rec: dict[str, Any]) -> str:
    started = rec.get("started_at")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    cmd = " ".join(str(a) for a in rec.get("argv") or []) or "?"
    return f"pid {rec.get('pid', '?')} on {rec.get('host', '?')}, started {when}: {cmd}"


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def _read(f: IO[str]) -> dict[str, Any] | None:
    f.seek(0)
    try:
        rec = json.loads(f.read() or "null")
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


@dataclass
class DirLock:
    """The held lock of one results directory; ``release`` (idempotent) empties the record and unlocks.
    ``took_over``: the record a dead sweep left, None when the lock was free."""

    path: Path
    file: IO[str] | None
    took_over: dict[str, Any] | None = None

    def release(self) -> None:
        f, self.file = self.file, None
        if f is None:
            return
        try:
            f.seek(0)
            f.truncate()
            f.flush()
        except OSError:
            pass  # the lock goes with the close anyway
        finally:
            f.close()  # closing the descriptor drops the flock

    def __enter__(self) -> "DirLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def takeover_note(self) -> str | None:
        """The line saying whose stale lock was taken over (None when there was none)."""
        rec = self.took_over
        if rec is None:
            return None
        here = rec.get("host") == socket.gethostname()
        why = (
            "that process is gone"
            if here and not _alive(rec.get("pid"))
            else "it no longer holds the lock"
            if here
            else "it ran on another machine and no longer holds the lock"
        )
        return f"took over the lock of {self.path.parent} left by an earlier sweep ({_holder_text(rec)}); {why}"


def acquire(directory: str | Path, argv: list[str] | None = None) -> DirLock:
    """Hold ``directory``'s lock (the directory made if need be) or raise ``ResultsError`` naming the
    sweep that holds it. Never waits."""
    path = lock_path(directory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+", encoding="utf-8")  # never truncates: a holder's record stays readable
    except OSError as e:
        raise ResultsError(
            f"cannot lock the results directory {path.parent}: {e.strerror or e}",
            fix="fix its permissions, or give this run another results_dir=...",
        ) from None
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        rec = _read(f)
        f.close()
        who = _holder_text(rec) if rec else "a sweep that is still starting (no record yet)"
        elsewhere = rec is not None and rec.get("host") != socket.gethostname()
        raise ResultsError(
            f"results directory {path.parent} is being written by another sweep ({who}); "
            "two sweeps into one directory would run the same points and kill each other's servers",
            fix=(
                "wait for that sweep to end"
                + (
                    " (or stop it on its host)"
                    if elsewhere
                    else f" (or stop it: kill -INT {rec.get('pid')})"
                    if rec
                    else ""
                )
                + ", or give this run another results_dir=..."
            ),
        ) from None
    except OSError as e:
        f.close()
        raise ResultsError(
            f"cannot lock the results directory {path.parent}: {e.strerror or e}",
            fix="put the results on a filesystem that supports flock, or give this run another results_dir=...",
        ) from None
    stale = _read(f)
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": time.time(),
        "argv": redact_argv(list(sys.argv if argv is None else argv)),
    }
    try:
        f.seek(0)
        f.truncate()
        f.write(json.dumps(record))
        f.flush()
    except OSError as e:
        f.close()
        raise ResultsError(
            f"cannot write the lock of the results directory {path.parent}: {e.strerror or e}",
            fix="free disk space or fix permissions",
        ) from None
    return DirLock(path, f, stale)
