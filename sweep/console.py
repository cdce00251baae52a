"""Consoles for what a person reads. On a terminal, rich takes the terminal's width; in a pipe or a
file it would fold every table to 80 columns (a 16-column table collapses to ``2…``), so there the
width is wide enough for the widest table the sweep prints, and a ``COLUMNS`` the user set wins."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

PIPE_WIDTH = 240  # the levels table of ``sweep bench`` needs 175 at most


def output_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    console = Console(stderr=stderr, **kwargs)
    if console.is_terminal or "width" in kwargs or os.environ.get("COLUMNS"):
        return console
    return Console(stderr=stderr, width=PIPE_WIDTH, **kwargs)
