"""The files of a results directory beside its tables: where they are, and reading them back.

    DIR/sweep.json         the manifest: experiment and mode (``schema.MANIFEST``; written by ``ResultsDir``)
    DIR/experiment.yaml    the resolved experiment (``ResultsDir.write_experiment``)
    DIR/plan.json          the plan, the same object as ``--plan --json`` (``ResultsDir.write_plan``)
    DIR/logs/<point_id>.log  each point's server log (``ResultsDir.log_path``)

The readers never raise for a file that is absent or unreadable: a directory written by
``python -m sweep bench --out`` has none of them, a sweep still starting may not have them yet, and
the report works on whatever is there. Only the manifest, which decides whether a run may write
into the directory, is an error when it does not read (``read_manifest``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from sweep.core import ResultsError
from sweep.results.schema import MANIFEST

EXPERIMENT = "experiment.yaml"
PLAN = "plan.json"
LOGS = "logs"


def manifest_path(directory: str | Path) -> Path:
    return Path(directory) / MANIFEST


def experiment_path(directory: str | Path) -> Path:
    return Path(directory) / EXPERIMENT


def plan_path(directory: str | Path) -> Path:
    return Path(directory) / PLAN


def log_path(directory: str | Path, point_id: str) -> Path:
    return Path(directory) / LOGS / f"{point_id}.log"


def read_manifest(directory: str | Path) -> Optional[dict]:
    """``sweep.json`` as a dict, None when there is none; a ResultsError when it does not read."""
    path = manifest_path(directory)
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ResultsError(
            f"{path} is unreadable ({e})", fix="restore it, or point results_dir=... at a new directory"
        ) from None
    if not isinstance(meta, dict):
        raise ResultsError(
            f"{path} is not a JSON object ({type(meta).__name__})",
            fix="restore it, or point results_dir=... at a new directory",
        )
    return meta


def read_plan(directory: str | Path) -> dict:
    """``plan.json`` ({experiment, points: [{id, label, ...}], warnings}), or {} when it is absent,
    unreadable or not an object."""
    try:
        plan = json.loads(plan_path(directory).read_text())
    except (OSError, ValueError):
        return {}
    return plan if isinstance(plan, dict) else {}


def read_experiment(directory: str | Path) -> dict:
    """``experiment.yaml`` as plain data (``${...}`` references left as text), or {} when it is
    absent, unreadable or not a mapping."""
    import yaml  # lazy: PyYAML is imported only where YAML is written

    try:
        exp = yaml.safe_load(experiment_path(directory).read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    return exp if isinstance(exp, dict) else {}


def experiment_slos(directory: str | Path) -> list[dict[str, Any]]:
    """The ``benchmark.slo`` entries of the directory's experiment.yaml, each a mapping as written
    (``name``, ``percentile``, ``ttft_s``, ``tpot_s``, ``tok_s``); [] when there are none. Entries
    that are not mappings are left out; checking the values is the reader's."""
    bench = read_experiment(directory).get("benchmark")
    items = bench.get("slo") if isinstance(bench, dict) else None
    return [dict(item) for item in items if isinstance(item, dict)] if isinstance(items, list) else []
