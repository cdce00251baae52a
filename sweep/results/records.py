"""The ``points`` row of a finished (or invalid) point: plan + result + sweep context. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

import pyarrow as pa

from sweep.core import PointResult, ResultsError, RunMode, ServerFlags, __version__, lines, redact
from sweep.core import kind as run_kind
from sweep.results.schema import AXIS_PREFIX, BENCH_SCALE, REAPED, RESOLVED, axis_type, axis_value, from_rows

if TYPE_CHECKING:  # a row's planned point: the plan's own class, named here only (results sits below the plan)
    from sweep.experiment import PlannedPoint


def redact_argv(argv: list[str]) -> list[str]:
    """``--api-key X`` -> ``--api-key <redacted>`` (and ``--api-key=X``, and any flag with a secret name,
    see sweep/core/redact.py); the secret values found are hidden wherever else the argv has them."""
    return redact.redact_argv(argv, redact.secret_values(argv))


Axes = Union[Sequence[str], Mapping[str, pa.DataType]]


def axis_types(points: Iterable[PlannedPoint], axes: Sequence[str]) -> dict[str, pa.DataType]:
    """``{axis: column type}`` from the values of every point of the plan (``schema.axis_type``): int64
    where all of an axis's values are integers, float64 where all are numbers, else string. Pass it
    as ``point_row(axes=...)`` for every point of a sweep, so that all its files agree."""
    points = list(points)
    return {a: axis_type(p.params.get(a) for p in points) for a in axes}


def point_row(
    pp: PlannedPoint,
    experiment: str,
    *,
    axes: Axes,
    argv: list[str],
    result: PointResult | None,
    mode: RunMode,
    bench_scale: dict,
) -> pa.Table:
    """One row; every axis of the experiment is a column, in the grid's order (null where it collapsed
    for a baseline): the only place the axis values are kept. ``axes``: the axis names (every one
    stored as text) or ``axis_types`` of the plan (numeric axes stored as numbers). Nested values keep
    their Arrow types (sweep/results/schema.py): roles and env as maps, ``reaped``, ``bench_scale``
    and ``resolved`` (the plan's resolution of SGLang's arguments) as structs."""
    types = dict(axes) if isinstance(axes, Mapping) else {a: pa.string() for a in axes}
    row: dict[str, Any] = {
        "point_id": pp.id,
        "label": pp.label,
        "experiment": experiment,
        "baseline": pp.baseline,
        "baseline_id": pp.baseline_id,
        "launch_id": pp.launch_id or None,
        "bench_key": pp.bench_key,
        "param_roles": dict(pp.roles),
        "argv": redact_argv(argv),
        "flags": _flags_value(pp.flags, argv, result.port if result else None),
        "env": dict(sorted(redact.redact_env(pp.env).items())),
        "errors": list(pp.errors),
        "warnings": list(pp.warnings),
        "attempts": result.attempts if result else 0,
        "dry_run": run_kind(mode).scaled,
        "bench_scale": struct_value(bench_scale, BENCH_SCALE),
        "sweep_version": __version__,
        "resolved": struct_value(pp.resolved, RESOLVED),
        **{f"{AXIS_PREFIX}{axis}": axis_value(_name(pp.params.get(axis)), kind) for axis, kind in types.items()},
    }
    if result is None:  # invalid: never launched
        row.update(status="invalid", failure_phase="plan", failure_reason="; ".join(pp.errors))
    else:
        failure = result.failure
        row.update(
            status=result.status,
            failure_phase=failure.phase if failure else None,
            failure_reason=failure.reason if failure else None,
            failure_fix=failure.fix if failure else None,
            log_tail=result.log_tail[-4000:] if result.log_tail else None,
            host=result.host,
            node_id=result.node_id,
            gpu_name=result.gpu_name,
            gpu_count=result.gpu_count,
            # a pruned point never reached a host: no version rather than the probe's "unknown"
            sglang_version=None if result.status == "pruned" else result.sglang_version,
            started_at=result.started_at,
            ended_at=result.ended_at,
            reaped=struct_value(result.reaped, REAPED),
            startup_progress=list(result.startup_progress),
            drafter_aux_layers=result.drafter_aux_layers,
            drafter_checks=lines(result.drafter_checks),
            preflight_checks=lines(result.checks),
            adaptive=result.adaptive,
            adaptive_disabled_reason=result.adaptive_disabled_reason,
            **result.phases,
        )  # the sweep's phase timings and SGLang's engine_*_s
    return from_rows([row], "points", {f"{AXIS_PREFIX}{a}": kind for a, kind in types.items()})


def benchmark_row(
    *,
    label: str,
    sglang_version: str | None,
    started_at: float | None,
    ended_at: float | None,
    argv: list[str] | None = None,
    gpu_count: int | None = None,
    flags: Mapping[str, str] | None = None,
) -> pa.Table:
    """The ``points`` row of a benchmark run on its own (``python -m sweep bench --out``): point_id
    "" like its tables' rows, experiment ``bench``, status ok (failed requests are rows of the
    requests table), baseline unknown (null): no grid, no plan. ``argv``: the server's parallelism
    as flags (from its ``/server_info``) and ``flags`` the same as the flags column holds them,
    ``gpu_count`` the GPUs it is known to use (0: a CPU server), so that per-GPU figures are counted
    as a sweep's are."""
    row = {
        "point_id": "",
        "label": label,
        "experiment": "bench",
        "status": "ok",
        "attempts": 1,
        "sglang_version": sglang_version,
        "started_at": started_at,
        "ended_at": ended_at,
        "dry_run": False,
        "sweep_version": __version__,
        "argv": argv or None,
        "gpu_count": gpu_count,
        "flags": dict(flags) if flags else None,
    }
    return from_rows([row], "points")


def _flags_value(flags: ServerFlags, argv: Sequence[str], port: int | None = None) -> dict[str, str]:
    """The ``flags`` column's value of a point: its flags as the argv shows them (``ServerFlags.text``),
    with the port its host ran it on where the result says (a simulated host chooses it), secrets
    redacted as in its argv."""
    typed = ServerFlags(flags)
    if port is not None:
        typed = typed.merged({"port": port})
    return redact.redact_tree(typed.text(), redact.secret_values(argv, None, flags))


def server_flags(row: Mapping[str, Any]) -> ServerFlags:
    """The typed flags of a points row, from its ``flags`` column (what ``sweep.results.load`` reads:
    filled from the argv in a directory written before the column); none where it is null."""
    value = row.get("flags")
    if not value:
        return ServerFlags()
    if isinstance(value, Mapping):
        return ServerFlags(value)
    return ServerFlags({e["key"]: e["value"] for e in value})  # a map as a list of {key, value}


def _name(value: Any) -> str | None:
    """An axis value as the column holds it: its name (a string), null where the axis collapsed."""
    return None if value is None else str(value)


def struct_value(value: Mapping[str, Any] | None, kind: pa.DataType) -> dict | None:
    """``value`` as a row value of the struct type ``kind``: null when empty; a key the type does not
    declare is an error (Arrow would drop it without a word; the type in schema.py needs the field)."""
    if not value:
        return None
    row = dict(value)
    _check_keys(row, kind, "")
    return row


def _check_keys(value: Any, kind: pa.DataType, where: str) -> None:
    if isinstance(kind, pa.StructType) and isinstance(value, dict):
        fields = {kind.field(i).name: kind.field(i).type for i in range(kind.num_fields)}
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise ResultsError(
                f"points column {where or 'value'} has fields {unknown} its type does not declare",
                fix="this is a bug: add them to the struct in sweep/results/schema.py",
            )
        for k, v in value.items():
            _check_keys(v, fields[k], f"{where}.{k}" if where else k)
    elif isinstance(kind, pa.ListType) and isinstance(value, (list, tuple)):
        for v in value:
            _check_keys(v, kind.value_type, f"{where}[]")
