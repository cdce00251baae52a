"""What the sweep works out at run time for one point's benchmark, kept beside the user's settings
(``sweep.core.settings.BenchSettings``), never inside them: the user's settings are what the
experiment file says, and a point's id is made of them alone.

The driver supplies it: a dry run's time scale (its fake speed, so the host judges SLOs at real speed
as the report does) and, with ``concurrency.refine``, the matched baseline's throughput per level
(``sweep.orchestrate.baseline_curve``). The host hands it to the benchmark (``sweep.bench.runner``).
Frozen and small: it travels in a Ray task's payload.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunContext:
    """A point's run-time inputs: ``slo_time_scale`` (what a measured second is in real seconds when
    judging SLOs: a dry run's fake speed; None: the settings' own ``concurrency.slo_time_scale``) and
    ``baseline_curve`` (the baseline's output throughput per level, ``((C, tok/s), ...)`` ascending C,
    at the same speed as this point; empty: none to cross) and ``level_repeats`` (a dry run's least
    measurements per level)."""

    slo_time_scale: float | None = None
    baseline_curve: tuple[tuple[float, float], ...] = ()
    # a dry run's measurements of each level (``dry_run.repeats``): at least this many, back to back,
    # whatever ``benchmark.repeats`` says (0: the settings' own); the scale of a run, not a setting
    level_repeats: int = 0

    def repeats(self, own: int) -> int:
        """How many times each level is measured: the settings' ``repeats``, at least this context's."""
        return max(own, self.level_repeats)

    def time_scale(self, own: float) -> float:
        """The time scale SLOs are judged at: this context's, else the settings' own (``own``)."""
        return own if self.slo_time_scale is None else self.slo_time_scale


NO_CONTEXT = RunContext()  # a benchmark run by hand (``sweep bench``): the settings alone
