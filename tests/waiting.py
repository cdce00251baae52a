"""Waiting in tests without timed asserts (the project's rule: a test waits for a condition with a
deadline; it never sleeps a fixed time and then asserts; speed targets live in tests/perf/).

- :func:`wait_until` for something that must happen: it returns as soon as the condition holds,
  and the deadline only bounds how long a broken build makes the test wait. A deadline is never
  the claim, so make it generous.
- :func:`holds_for` for something that must NOT happen ("the hung server never serves", "a zombie
  outlives its parent"). Nothing positive marks the moment such a property is proved, so it is
  watched over a window and the test fails the moment it breaks. Use it only where there is no
  positive event to wait for instead, and say at the call site why the window is as long as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.02


def wait_until(cond: Callable[[], T], timeout: float, what: str, interval: float = POLL_S) -> T:
    """Poll ``cond`` until it returns something truthy and return that; AssertionError naming
    ``what`` when ``timeout`` seconds pass first. ``cond`` is tried once more at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        out = cond()
        if out:
            return out
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(interval)


def holds_for(cond: Callable[[], object], seconds: float, what: str, interval: float = POLL_S) -> None:
    """Check ``cond`` continuously for ``seconds`` (at least once, and once more at the end);
    AssertionError naming ``what`` the first time it is falsy."""
    start = time.monotonic()
    end = start + max(0.0, seconds)
    while True:
        if not cond():
            raise AssertionError(f"stopped holding after {time.monotonic() - start:.2f} s: {what}")
        now = time.monotonic()
        if now >= end:
            return
        time.sleep(min(interval, end - now))
