"""Reading a server's argv: the one place a flag's value is taken from it. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def argv_value(argv: Iterable[Any] | None, flag: str) -> str | None:
    """The value of ``--flag`` in an argv (``--flag X`` or ``--flag=X``; the last one wins, as in
    argparse), or None."""
    argv = [str(a) for a in argv or ()]
    found = None
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif a.startswith(flag + "="):
            found = a.split("=", 1)[1]
    return found
