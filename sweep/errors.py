"""One exception tree for the whole project.

Every error a user can cause carries a message that names the culprit and says how to fix it.
``SweepError.exit_code`` is what the command line exits with (documented in the README).
"""

from __future__ import annotations


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


class PointFailure(SweepError):
    """A grid point failed on its host. Raised inside the host layer, recorded as data there.

    ``phase`` is where it failed: preflight, launch, load, capture, ready, benchmark, stop.
    """

    def __init__(self, phase: str, reason: str, *, fix: str | None = None):
        self.phase = phase
        self.reason = reason
        super().__init__(f"[{phase}] {reason}", fix=fix)


class Interrupted(SweepError):
    """The user pressed Ctrl-C; finished points are kept."""

    exit_code = 130
