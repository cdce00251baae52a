"""Consoles for what a person reads. On a terminal, rich takes the terminal's width; in a pipe or a
file it would fold every line and table to 80 columns (a label split as ``nccl=t`` / ``uned``, a
16-column table collapsed to ``2…``), so there lines are not wrapped at all and tables get a width
wide enough for the widest the sweep prints; a ``COLUMNS`` the user set, or a width given, wins.

Text is printed as it is: an id, label, reason or path goes through ``rich.markup.escape`` (or as a
``Text``) wherever a line has markup, since ``[deadbeef0123]`` reads as a tag and vanishes. Counts
with a noun go through ``plural``."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

PIPE_WIDTH = 240  # the levels table of ``sweep bench`` needs 175 at most


def _piped(console: Console, width_given: bool) -> bool:
    return not (console.is_terminal or width_given or os.environ.get("COLUMNS"))


def output_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A Console for stdout (or stderr); in a pipe or a file: PIPE_WIDTH wide and lines unwrapped."""
    console = Console(stderr=stderr, **kwargs)
    if not _piped(console, "width" in kwargs):
        return console
    kwargs.setdefault("soft_wrap", True)
    return Console(stderr=stderr, width=PIPE_WIDTH, **kwargs)


def fit_to_pipe(console: Console) -> Console:
    """``console`` itself, made PIPE_WIDTH wide where it writes to a pipe or a file and nobody chose its
    width (``Console(width=...)``, ``COLUMNS``): for the callers handed a plain ``Console()``. Lines it
    prints should pass ``soft_wrap=True`` to stay whole at any width."""
    if _piped(console, getattr(console, "_width", None) is not None):
        console.width = PIPE_WIDTH
    return console


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` in the right number: ``1 baseline``, ``2 baselines``, ``0 errors``; ``many``:
    the plural when it is not ``word + 's'`` (``plural(n, "GPU host", ...)`` needs none)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
