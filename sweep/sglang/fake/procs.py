"""The fake server's process tree: one scheduler child per TP rank plus a detokenizer, as SGLang has.

Children are forked before the event loop starts (no threads yet, so forking is safe) and inherit
the parent's environment, so the sweep finds them by its env marker. Normally they die with the
parent: ``PR_SET_PDEATHSIG`` (SGLang's schedulers watch their parent too) plus a ``getppid`` poll as a
fallback. With ``--fake-zombie`` they ignore SIGTERM, do not watch the parent and outlive it, each for
``--fake-zombie-lifetime`` seconds after being orphaned, so a forgotten one never lives forever.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Optional

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
POLL_S = 0.5


@dataclass(frozen=True)
class Lifecycle:
    """How children live and die."""

    parent_pid: int
    zombie: bool = False
    zombie_lifetime_s: float = 600.0


@dataclass
class Child:
    pid: int
    role: str  # "scheduler" | "detokenizer"
    rank: int
    ready_fd: Optional[int]  # parent's read end of the child's ready pipe (schedulers only)


def _prctl(option: int, arg: int | bytes) -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False  # not Linux: the getppid poll still ends orphans


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    return _prctl(PR_SET_PDEATHSIG, int(sig))


def set_process_name(name: str) -> None:
    """The kernel's short name (15 bytes), as setproctitle sets it for SGLang's children."""
    _prctl(PR_SET_NAME, name.encode()[:15])


def idle(life: Lifecycle, on_exit: Callable[[], None] = lambda: None) -> None:
    """Hold on (and hold the "GPU memory") until the parent dies, or for a zombie, until its
    lifetime after being orphaned runs out. Never returns."""
    orphaned_at: Optional[float] = None
    while True:
        time.sleep(POLL_S)
        if os.getppid() == life.parent_pid:
            continue
        if not life.zombie:
            break
        orphaned_at = orphaned_at or time.monotonic()
        if time.monotonic() - orphaned_at >= life.zombie_lifetime_s:
            break
    on_exit()
    os._exit(0)


def _become_child(name: str, life: Lifecycle) -> None:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if life.zombie else signal.SIG_DFL)
    if not life.zombie:
        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != life.parent_pid:  # the parent died before prctl took effect
            os._exit(0)
    set_process_name(name)


def fork_child(role: str, rank: int, name: str, life: Lifecycle, body: Callable[[Optional[int]], None],
               with_pipe: bool) -> Child:
    """Fork a child running ``body(ready_write_fd)``. ``body`` must not return normally unless the
    child should exit 0; an exception exits 1 after printing its traceback."""
    r, w = os.pipe() if with_pipe else (None, None)
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            if r is not None:
                os.close(r)
            _become_child(name, life)
            body(w)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - a child must never return into the parent's code
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    if w is not None:
        os.close(w)
    return Child(pid, role, rank, r)


def exit_code(pid: int, block: bool = True) -> Optional[int]:
    """The child's exit status as subprocess reports it (negative: killed by that signal)."""
    try:
        done, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return None
    if done == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def reap(children: list[Child]) -> None:
    """Collect children that already exited, so none lingers as <defunct>."""
    for c in children:
        exit_code(c.pid, block=False)


def kill_children(children: list[Child], life: Lifecycle) -> None:
    """SGLang's cleanup: SIGKILL the whole tree and wait. A zombie-mode server leaves its children."""
    if life.zombie:
        return
    for c in children:
        try:
            os.kill(c.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for c in children:
        exit_code(c.pid)


def kill_self() -> None:
    """SGLang's kill_process_tree(include_parent=True) ends with SIGKILL to itself."""
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)  # never reached
