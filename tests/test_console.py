"""Consoles in a pipe (sweep/core/console.py): lines never wrapped, tables wide enough, a width the user
chose kept; and counts with their noun in the right number."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from sweep.core.console import PIPE_WIDTH, fit_to_pipe, output_console, plural

LABEL = "drafter=k26_100k,steps=3,nccl=tuned"


def test_a_piped_console_wraps_no_line_and_tables_get_room(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    buf = io.StringIO()
    console = output_console(file=buf, highlight=False)
    line = "best at C=1: " + ", ".join([LABEL] * 12)  # far wider than PIPE_WIDTH
    console.print(line)
    t = Table()
    for c in range(14):
        t.add_column(f"column {c}")
    t.add_row(*[LABEL[:14]] * 14)
    console.print(t)
    out = buf.getvalue().splitlines()
    assert out[0] == line
    assert "…" not in buf.getvalue() and any(LABEL[:14] in row for row in out[1:])


def test_fit_to_pipe_widens_a_plain_console_only(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert fit_to_pipe(Console(file=io.StringIO())).width == PIPE_WIDTH
    assert fit_to_pipe(Console(file=io.StringIO(), width=100)).width == 100  # a width given wins
    monkeypatch.setenv("TERM", "xterm")  # rich holds a "dumb" terminal (TERM=dumb, as CI may have) to 80 columns
    assert fit_to_pipe(Console(file=io.StringIO(), force_terminal=True, width=90)).width == 90
    monkeypatch.setenv("COLUMNS", "120")  # the user's own width wins
    assert fit_to_pipe(Console(file=io.StringIO())).width == 120


def test_plural():
    assert [plural(n, "baseline") for n in (0, 1, 2)] == ["0 baselines", "1 baseline", "2 baselines"]
    assert plural(1, "error") == "1 error" and plural(3, "warning") == "3 warnings"
    assert plural(1, "axis", "axes") == "1 axis" and plural(2, "axis", "axes") == "2 axes"
