"""The fake server's process tree, as real SGLang's (shared/sglang-cpu/transcripts/ptree_*.txt): one
scheduler child per TP rank, a detokenizer and multiprocessing's ``resource_tracker``, all children
of the launcher and in its process group. psutil's ``name()`` of the children is SGLang's
setproctitle title: ``sglang::scheduler`` (``sglang::scheduler_TP0``... when tp > 1) and
``sglang::detokenizer``; the title is written over the process's argv area, as setproctitle does.

Children are forked before the event loop starts (no threads yet, so forking is safe) and inherit
the parent's environment, so the sweep finds them by its env marker. Normally they die with the
parent: ``PR_SET_PDEATHSIG`` (SGLang's schedulers watch their parent too) plus a ``getppid`` poll as a
fallback. With ``--fake-zombie`` they ignore SIGTERM, do not watch the parent and outlive it, each for
``--fake-zombie-lifetime`` seconds after being orphaned, so a forgotten one never lives forever.

:class:`Tree` is the launcher's view of them: SGLang's subprocess watchdog (which child died, with
which exit code) and ``kill_process_tree`` (SIGKILL every child, then the launcher itself).
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
from multiprocessing import resource_tracker
from typing import Callable, Optional

PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
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
    exitcode: Optional[int] = None  # once reaped: as subprocess reports it (negative: killed by that signal)

    @property
    def name(self) -> str:
        """The name SGLang's subprocess watchdog gives it: ``scheduler_0``..., ``detokenizer``."""
        return f"scheduler_{self.rank}" if self.role == "scheduler" else self.role

    def poll(self) -> Optional[int]:
        """Its exit code if it has exited (reaping it), else None."""
        if self.exitcode is None:
            self.exitcode = exit_code(self.pid, block=False)
        return self.exitcode


def _prctl(option: int, arg: int | bytes) -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False  # not Linux: the getppid poll still ends orphans


def _set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    return _prctl(PR_SET_PDEATHSIG, int(sig))


def _argv_area() -> Optional[tuple[int, int]]:
    """Start and end address of this process's argv strings (fields 48-49 of /proc/self/stat)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rindex(b")") + 2 :].split()  # fields from the 3rd on
        start, end = int(fields[45]), int(fields[46])
    except (OSError, ValueError, IndexError):
        return None
    return (start, end) if 0 < start < end else None


def _set_process_name(name: str) -> None:
    """What setproctitle does for SGLang's children: the kernel's short name (15 bytes) and the argv
    area overwritten with the title (NUL-padded), so ``/proc/PID/cmdline`` is the title and psutil's
    ``name()`` the whole title, e.g. ``sglang::detokenizer`` (not its 15-byte ``sglang::detoken``).
    Python keeps its own copy of argv, so overwriting the original strings is safe."""
    _prctl(_PR_SET_NAME, name.encode()[:15])
    area = _argv_area()
    if area is None:
        return
    size = area[1] - area[0]
    title = name.encode()[: size - 1]
    try:
        ctypes.memmove(area[0], title + b"\0" * (size - len(title)), size)
    except (OSError, ValueError, TypeError):
        pass  # only the short name then


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
        _set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != life.parent_pid:  # the parent died before prctl took effect
            os._exit(0)
    _set_process_name(name)


def fork_child(
    role: str, rank: int, name: str, life: Lifecycle, body: Callable[[Optional[int]], None], with_pipe: bool
) -> Child:
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
        except BaseException:  # a child must never return into the parent's code
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
        c.poll()


def kill_children(children: list[Child], life: Lifecycle) -> None:
    """SGLang's cleanup: SIGKILL the whole tree and wait. A zombie-mode server leaves its children."""
    if life.zombie:
        return
    for c in children:
        if c.exitcode is not None:
            continue
        try:
            os.kill(c.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for c in children:
        if c.exitcode is None:
            c.exitcode = exit_code(c.pid)


def start_resource_tracker() -> Optional[int]:
    """multiprocessing's resource tracker, which every real SGLang launcher has as a child
    (``python -B -c from multiprocessing.resource_tracker import main;main(8)``). Start it after the
    ranks are forked, so that no rank holds its pipe: it exits when the launcher dies."""
    try:
        resource_tracker.ensure_running()
        return getattr(resource_tracker._resource_tracker, "_pid", None)  # private: no public accessor
    except Exception:  # cosmetic: a fake without one still serves
        return None


@dataclass
class Tree:
    """The launcher's children, as SGLang's launcher watches and kills them."""

    children: list[Child]
    life: Lifecycle
    tracker_pid: Optional[int] = None

    def crashed(self) -> Optional[Child]:
        """SGLang's SubprocessWatchdog check: the first child (schedulers, then the detokenizer) that
        exited with a non-zero code, or None."""
        for c in self.children:
            code = c.poll()
            if code is not None and code != 0:
                return c
        return None

    def live_schedulers(self) -> bool:
        return any(c.role == "scheduler" and c.poll() is None for c in self.children)

    def kill_schedulers(self) -> None:
        """The schedulers are gone (a scheduler crash ends its process): kill them, unless zombies."""
        if not self.life.zombie:
            kill_children([c for c in self.children if c.role == "scheduler"], self.life)

    def kill(self) -> None:
        """SIGKILL every child (the zombie-mode ranks excepted) and wait for them."""
        kill_children(self.children, self.life)
        if self.tracker_pid is not None:
            try:
                os.kill(self.tracker_pid, signal.SIGKILL)
                os.waitpid(self.tracker_pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass

    def kill_process_tree(self, log: Callable[[str], None]) -> None:
        """SGLang's ``kill_process_tree(os.getpid(), include_parent=True)``: its log line, every child
        SIGKILLed, then the launcher itself (exit status 137, -9 to subprocess). Never returns."""
        pid = os.getpid()
        log(f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}")
        self.kill()
        kill_self()


def kill_self() -> None:
    """SGLang's kill_process_tree(include_parent=True) ends with SIGKILL to itself."""
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)  # never reached
