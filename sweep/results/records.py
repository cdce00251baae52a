"""The ``points`` row of a finished (or invalid) point: plan + result + sweep context. Pure."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from sweep import __version__
from sweep.results.schema import AXIS_PREFIX, from_rows

if TYPE_CHECKING:  # only the shapes: results sits below the layers that make these
    from sweep.host.point import PointResult
    from sweep.plan import PlannedPoint

SECRET = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
REDACTED = "<redacted>"


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (REDACTED if SECRET.search(k) else v) for k, v in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    """``--api-key X`` -> ``--api-key <redacted>`` (and ``--api-key=X``)."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif a.startswith("--") and SECRET.search(a.split("=", 1)[0]):
            if "=" in a:
                out.append(a.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(a)
                hide_next = True
        else:
            out.append(a)
    return out


def point_row(pp: PlannedPoint, experiment: str, *, axes: list[str], argv: list[str],
              result: PointResult | None, attempts: int, mode: str, bench_scale: dict) -> pa.Table:
    """One row; every axis of the experiment is a column (null where it collapsed for a baseline)."""
    row: dict[str, Any] = {
        "point_id": pp.id, "label": pp.label, "experiment": experiment, "baseline": pp.baseline,
        "baseline_id": pp.baseline_id, "params": json.dumps(pp.params), "param_roles": json.dumps(pp.roles),
        "argv": redact_argv(argv), "env": json.dumps(redact_env(pp.env), sort_keys=True),
        "errors": pp.errors, "warnings": pp.warnings, "attempts": attempts,
        "dry_run": mode in ("dry-run", "fake"), "bench_scale": json.dumps(bench_scale), "sweep_version": __version__,
        **{f"{AXIS_PREFIX}{axis}": pp.params.get(axis) for axis in axes},
    }
    if result is None:  # invalid: never launched
        row.update(status="invalid", failure_phase="plan", failure_reason="; ".join(pp.errors))
    else:
        row.update(status=result.status, failure_phase=result.failure_phase, failure_reason=result.failure_reason,
                   log_tail=result.log_tail[-4000:] if result.log_tail else None, host=result.host,
                   node_id=result.node_id, gpu_name=result.gpu_name, gpu_count=result.gpu_count,
                   sglang_version=result.sglang_version, started_at=result.started_at, ended_at=result.ended_at,
                   reaped=json.dumps(result.reaped), startup_progress=list(result.startup_progress),
                   drafter_aux_layers=result.drafter_aux_layers, drafter_checks=list(result.drafter_checks),
                   preflight_checks=list(result.checks),
                   **result.phases)  # the sweep's phase timings and SGLang's engine_*_s
    return from_rows([row], "points")

