"""sweep: find the best speculative-decoding setup for an SGLang server.

From Python: ``sweep.run(experiment, mode=...)`` returns a ``sweep.SweepResult`` (see ``sweep.api``);
``sweep.history("results")`` the history of the runs there; ``sweep.confirm(DIR)`` the policies of a
results directory proven on their own servers (``python -m sweep confirm DIR``).
All are imported on first use, so that ``import sweep`` stays cheap: the fake server and the hosts'
processes import this package and need neither Ray nor the analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweep.core import __version__

__all__ = ["SweepResult", "__version__", "confirm", "history", "run"]

if TYPE_CHECKING:
    from sweep.api import SweepResult, confirm, history, run

_API = ("run", "history", "confirm", "SweepResult")


def __getattr__(name: str) -> Any:
    if name in _API:
        from sweep import api  # lazy: `import sweep` and the command line load a room only when it is used

        return getattr(api, name)
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
