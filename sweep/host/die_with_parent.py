"""``python -m sweep.host.die_with_parent PPID -- ARGV...``: exec ARGV so that it is killed when the
process that launched it dies.

The server runs in a session of its own (so that stopping it can signal its whole process group
without touching the launcher), which takes it out of the group Ray kills with a dead worker.
PR_SET_PDEATHSIG puts it back on a leash: Linux sends SIGKILL when the launching thread dies, however
it dies (a forced ``ray.cancel``, ``kill -9``). The setting survives ``exec``; doing it here rather
than in a ``preexec_fn`` keeps ``subprocess`` fork-safe in a threaded Ray worker. Its children
(SGLang's scheduler processes) watch their own parent, and the reaper catches any that don't.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: python -m sweep.host.die_with_parent PPID -- ARGV...")
    expected_parent = int(sys.argv[1])
    argv = sys.argv[3:]
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != expected_parent:  # the launcher died before the leash was on
            sys.exit(1)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
