"""An argv read back in the tests, apart from the code that writes it (the package reads an argv back
only to upgrade an old results directory: ``sweep.core.argv.flags_of_argv``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def argv_value(argv: Iterable[Any] | None, flag: str, *aliases: str) -> str | None:
    """The value of ``--flag`` (or of one of its aliases) in an argv: ``--flag X`` or ``--flag=X``;
    the last one wins, as in argparse. None when it is not there."""
    argv = [str(a) for a in argv or ()]
    names = (flag, *aliases)
    found = None
    for i, a in enumerate(argv):
        key, eq, value = a.partition("=")
        if key in names:
            if eq:
                found = value
            elif i + 1 < len(argv):
                found = argv[i + 1]
    return found
