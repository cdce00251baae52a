"""SIGINT and SIGTERM stop a sweep as Ctrl-C does, wherever it was started.

A sweep started with ``&`` from a script that is not interactive inherits SIGINT ignored (the shell's
doing, so that Ctrl-C at the terminal reaches only the foreground job), and Python then leaves it
ignored: ``kill -INT <pid>`` would do nothing. ``ray.init`` sets its own SIGTERM handler in the
driver, which exits at once (``sys.exit``): no point cancelled, no server stopped, no summary. While a
sweep runs, both signals raise ``KeyboardInterrupt`` in the main thread, the one path that cancels
the running points, stops their servers, keeps the finished ones and exits 130 (``run_sweep``).
``arm`` again after anything that may have set a handler of its own (``ray.init``); ``disarm`` puts
back what the process had before (an API caller's own handlers).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """The handlers of one sweep: ``received`` names the signal that stopped it (None: none did)."""

    def __init__(self) -> None:
        self.received: str | None = None
        self._saved: dict[int, Any] = {}

    def arm(self) -> StopSignals:
        """Install the handlers (the main thread only: Python allows no other), keeping the first
        handlers they replace for ``disarm``."""
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                before = signal.signal(sig, self._stop)
                self._saved.setdefault(sig, before)
        return self

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.received = signal.Signals(signum).name
        # Python's own Ctrl-C handler: SIGTERM (and a SIGINT that a shell's & had ignored) take the
        # path Ctrl-C takes, not one of this module's making
        signal.default_int_handler(signum, frame)

    def disarm(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig, before in self._saved.items():
                signal.signal(sig, before if before is not None else signal.SIG_DFL)
        self._saved.clear()

    def why(self) -> str:
        """What stopped the sweep, for the message: ``interrupted`` (Ctrl-C, SIGINT) or ``stopped by SIGTERM``."""
        return "stopped by SIGTERM" if self.received == "SIGTERM" else "interrupted"
