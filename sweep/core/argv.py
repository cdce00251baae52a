"""Reading a server's argv back: the one place a flag's value is taken from a command line. Pure.

The sweep keeps a server's flags typed (``sweep.core.flags.ServerFlags``) and in the points table's
``flags`` column; an argv is read back only where a results directory was written before that
column (``sweep.results.store`` fills it from the argv, once, as it is read).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sweep.core.flags import TRUE


def flags_of_argv(argv: Iterable[Any] | None) -> dict[str, str]:
    """``{name: value}`` of every ``--name`` in an argv, as the points table's ``flags`` column holds
    them: ``--name X`` or ``--name=X`` (several values up to the next ``--``: joined by spaces), a
    bare ``--name`` ``"true"``; of a flag given twice the last wins (and its place), as in argparse.
    What comes before the first ``--`` (the launcher) is no flag."""
    argv = [str(a) for a in argv or ()]
    out: dict[str, str] = {}
    for i, a in enumerate(argv):
        if not a.startswith("--") or a == "--":
            continue
        name, eq, value = a[2:].partition("=")
        if not eq:
            values = []
            for b in argv[i + 1 :]:
                if b.startswith("--"):
                    break
                values.append(b)
            value = " ".join(values) if values else TRUE
        out.pop(name, None)
        out[name] = value
    return out
