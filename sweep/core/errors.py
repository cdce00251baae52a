"""One exception tree for the whole project.

Every error a user can cause carries a message that names the culprit and says how to fix it.
``SweepError.exit_code`` is what the command line exits with (documented in docs/index.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweep.core.record import Failure

if TYPE_CHECKING:
    from sweep.core.record import Failure
    from sweep.core.types import FailurePhase


BUG_EXIT_CODE = 70
"""What the command line exits with on an exception that is none of these (EX_SOFTWARE: a bug in the
sweep, not in its input); 1 stays "a point failed". ``sweep/cli.py`` prints one line and keeps the
traceback in a file."""


class SweepError(Exception):
    """Base of every error the sweep raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, fix: str | None = None):
        self.message = message
        self.fix = fix
        super().__init__(message if not fix else f"{message}\n  fix: {fix}")


class ConfigError(SweepError):
    """The experiment file or an override is wrong (unknown key, wrong type, bad YAML...)."""

    exit_code = 2


class PlanError(SweepError):
    """One or more grid points break SGLang's rules; nothing was launched."""

    exit_code = 3


class ClusterError(SweepError):
    """No Ray cluster to join, or no host advertises the configured host resource."""

    exit_code = 4


class ResultsError(SweepError):
    """The results directory cannot be used (another experiment's, unwritable, corrupt)."""

    exit_code = 5


class BenchError(SweepError):
    """The benchmark cannot start: server unreachable, or it does not speak SGLang's API."""

    exit_code = 6


class AnalysisError(SweepError):
    """The analysis cannot answer what was asked (``query``, ``report``, ``sweep.analysis``): its own
    exit code, so that 1 keeps meaning "a point failed"."""

    exit_code = 7


class QueryError(AnalysisError):
    """An SQL query over a results directory that polars cannot run (a typo, an unknown table or column)."""


class UnknownMetricError(AnalysisError):
    """A metric the analysis does not know (``best_per_level(metric=...)``, ``level_speedups``)."""


class SLOError(AnalysisError):
    """An SLO given to the report (``report --slo``) that is not a limit, or names one twice. In the
    experiment file (``benchmark.slo``) the same mistake is bad config, a ConfigError (exit 2)."""


class UnknownFormatError(AnalysisError):
    """An output format ``query`` cannot write (or cannot write there: Parquet to a terminal)."""


class OutputError(AnalysisError):
    """A file the analysis was asked to write (``report --out``, ``query --output``, ``history --out``)
    that cannot be written there: a read-only folder, a missing one, a file in the way."""


class PointFailure(SweepError):
    """A grid point failed on its host. Raised inside the host layer, recorded as data there.

    ``phase`` is where it failed (``sweep.core.types.FailurePhase``): preflight, load, capture, ready,
    benchmark on the host; ``reason`` says why, from the server's log where there is one.
    """

    def __init__(self, phase: FailurePhase, reason: str, *, fix: str | None = None):
        self.phase = phase
        self.reason = reason
        super().__init__(f"[{phase}] {reason}", fix=fix)

    @property
    def failure(self) -> Failure:
        """As the point's record keeps it."""

        return Failure(self.phase, self.reason, self.fix)


class Interrupted(SweepError):
    """The user pressed Ctrl-C; finished points are kept."""

    exit_code = 130


class Cancelled(Interrupted):
    """A running point was cancelled from outside the sweep (``ray cancel``, ``ray job stop``): the
    sweep stops as on Ctrl-C, finished points are kept."""
