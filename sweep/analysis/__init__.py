"""Reading a sweep's results: the report's building blocks as polars frames, SQL, comparisons.

Depends on ``sweep.results`` only (plus polars, numpy, matplotlib, plotly, rich). Every function takes the
tables of ``sweep.results.load(DIR)``::

    from sweep.results import load
    from sweep.analysis import speedup_table, best_per_level, crossover

    tables = load("results/k26_eagle-dryrun")
    speedup_table(tables).filter(pl.col("verdict") == "faster")   # single-stream speedups
    best_per_level(tables)                                         # winner at each concurrency
    crossover(tables)                                              # where speculation stops paying

Many runs of the same experiment: ``sweep.analysis.history.build(["results"])`` (``sweep.history``),
each run against the one before it (``compare_findings``), with what changed and the run-to-run noise.

The report itself (``sweep.analysis.report``) and the plots import matplotlib; this package's
top level does not.
"""

from sweep.analysis.acceptance import position_rates
from sweep.analysis.compare import compare_table
from sweep.analysis.confirmation import to_confirm
from sweep.analysis.findings import Findings, analyze, headlines
from sweep.analysis.frames import configurations
from sweep.analysis.health import failures, plan_warnings, request_failures, startup_phases, sweep_summary
from sweep.analysis.history import History
from sweep.analysis.query import run_sql
from sweep.analysis.speedups import (
    best_per_level,
    crossover,
    env_effect,
    level_speedups,
    single_stream_summary,
    speedup_table,
)

# cli, deploy, history, noise, policy, realspeed, render, report, slo, speedups: modules other rooms use
# as namespaces, imported on first use

__all__ = [
    "Findings",
    "History",
    "analyze",
    "best_per_level",
    "cli",
    "compare_table",
    "configurations",
    "crossover",
    "deploy",
    "env_effect",
    "failures",
    "headlines",
    "history",
    "level_speedups",
    "noise",
    "plan_warnings",
    "policy",
    "position_rates",
    "realspeed",
    "render",
    "report",
    "request_failures",
    "run_sql",
    "single_stream_summary",
    "slo",
    "speedup_table",
    "speedups",
    "startup_phases",
    "sweep_summary",
    "to_confirm",
]
