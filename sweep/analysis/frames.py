"""What each grid point *is*: its configuration, NCCL profile and matched baseline.

Every other analysis table hangs on this one. The point table keeps the grid as one ``axis_<name>``
column per axis (the value's name; a number for a numeric axis) and ``param_roles`` ({axis: role}, in the grid's order); here
they become plain columns, so that "one panel per NCCL profile" or "drafter x steps" are a
``group_by`` away:

- ``drafter``  value of the drafter axis (the baseline's own name, e.g. "none", for baselines)
- ``spec``     the speculative shape: steps/topk/draft_tokens axes as ``axis=value`` pairs
- ``profile``  the env (NCCL) axes as ``axis=value`` pairs; "" when the grid has no env axis
- ``group``    every other axis (model, tp, ...) as ``axis=value`` pairs
- ``config``   the label without the env axes: the same configuration under every NCCL profile
- ``workload`` the client-side axes that set only benchmark settings (role ``benchmark``: the workload,
               max_tokens...) as ``axis=value`` pairs; "" when the grid has none. Two workloads are two
               traffic mixes on one server, never two setups: every pick is made within one workload
- ``setup``    the label without those axes: what one deploys (the same setup on every workload)
- ``order``    a natural sort order (steps=2 before steps=10, baselines first in their panel)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import polars as pl

from sweep.results import AXIS_PREFIX as AXIS

Tables = Mapping[str, pl.LazyFrame]

DRAFTER = "drafter"
_SPEC_ROLES = ("steps", "topk", "draft_tokens")
ENV = "env"
BENCHMARK = "benchmark"

_POINT_COLUMNS = ["point_id", "label", "status", "baseline", "baseline_id"]


def natural_key(text: str | None) -> tuple:
    """Sort key that orders embedded numbers by value ("steps=2" < "steps=10")."""
    parts = re.split(r"(\d+(?:\.\d+)?)", text or "")
    return tuple((0, float(p), "") if i % 2 else (1, 0.0, p) for i, p in enumerate(parts))


def points_frame(tables: Tables) -> pl.DataFrame:
    """The point table, one row per point id (the last written wins if a point was rewritten)."""
    return tables["points"].collect().unique("point_id", keep="last", maintain_order=True)


def as_dict(value) -> dict:
    """A map column's value (``param_roles``, ``env``) as a dict: polars 2 gives a dict, polars 1 a list
    of ``{"key", "value"}`` structs; {} for null."""
    if not value:
        return {}
    if isinstance(value, dict):
        return value
    return {e["key"]: e["value"] for e in value}


def axes_of(row: dict) -> dict[str, str | int | float | None]:
    """``{axis: value}`` of one points row (a name, or a number for a numeric axis), in the grid's order: the axes ``param_roles`` names,
    then any other ``axis_*`` column; null where the axis collapsed (a baseline)."""
    names = list(as_dict(row.get("param_roles")))
    names += [k[len(AXIS) :] for k in row if k.startswith(AXIS) and k[len(AXIS) :] not in names]
    return {a: row.get(f"{AXIS}{a}") for a in names}


def _pairs(params: dict, axes: list[str]) -> str:
    return ",".join(f"{a}={params[a]}" for a in axes if params.get(a) is not None)


def _describe(row: dict) -> dict:
    """Split one point's axis values into drafter / spec / profile / group / config strings."""
    params = axes_of(row)
    roles = as_dict(row.get("param_roles"))
    axes = list(params)

    def by_role(*wanted: str) -> list[str]:
        return [a for a in axes if roles.get(a, "other") in wanted]

    drafters = [str(params[a]) for a in by_role(DRAFTER) if params.get(a) is not None]
    return {
        "point_id": row["point_id"],
        "drafter": ",".join(drafters) or None,
        "spec": _pairs(params, by_role(*_SPEC_ROLES)),
        "profile": _pairs(params, by_role(ENV)),
        "group": _pairs(params, by_role("other")),
        "config": _pairs(params, [a for a in axes if roles.get(a) != ENV]) or (row["label"] or ""),
        "workload": _pairs(params, by_role(BENCHMARK)),
        "setup": (_pairs(params, [a for a in axes if roles.get(a) != BENCHMARK]) or (row["label"] or ""))
        if by_role(BENCHMARK)
        else (row["label"] or ""),
    }


def configurations(tables: Tables) -> pl.DataFrame:
    """One row per point: identity, status, the matched baseline, and the parsed grid columns.

    Columns: point_id, label, status, baseline, baseline_id, baseline_label, baseline_status,
    drafter, spec, profile, group, config, workload, setup, order, plus the point's ``axis_*`` columns.
    ``baseline_label`` is null when the plan matched no baseline, or the baseline has not been
    written yet (a partial sweep); ``baseline_status`` then tells which.
    """
    points = points_frame(tables)
    axis_cols = [c for c in points.columns if c.startswith("axis_")]
    schema = {
        "point_id": pl.String,
        "drafter": pl.String,
        "spec": pl.String,
        "profile": pl.String,
        "group": pl.String,
        "config": pl.String,
        "workload": pl.String,
        "setup": pl.String,
    }
    described = pl.DataFrame([_describe(r) for r in points.iter_rows(named=True)], schema=schema)
    frame = points.select(_POINT_COLUMNS + axis_cols).join(described, on="point_id", how="left")
    base = frame.select(baseline_id="point_id", baseline_label="label", baseline_status="status")
    frame = frame.join(base, on="baseline_id", how="left")
    ranked = sorted(frame.iter_rows(named=True), key=_sort_key)
    order = {r["point_id"]: rank for rank, r in enumerate(ranked)}
    frame = frame.with_columns(order=pl.col("point_id").replace_strict(order, return_dtype=pl.Int64))
    return frame.sort("order").select(
        _POINT_COLUMNS
        + [
            "baseline_label",
            "baseline_status",
            "drafter",
            "spec",
            "profile",
            "group",
            "config",
            "workload",
            "setup",
            "order",
        ]
        + axis_cols
    )


def _sort_key(row: dict) -> tuple:
    return (
        natural_key(row["workload"]),
        natural_key(row["group"]),
        natural_key(row["profile"]),
        not row["baseline"],
        natural_key(row["drafter"]),
        natural_key(row["spec"]),
        natural_key(row["label"]),
    )


def note_expr() -> pl.Expr:
    """Why a speculative point has no speedup against its baseline, in words (null if it has one
    or is a baseline). Reads the status and baseline_* columns of ``configurations``."""
    return (
        pl.when(pl.col("baseline"))
        .then(None)
        .when(pl.col("status") != "ok")
        .then(pl.lit("point ") + pl.col("status"))
        .when(pl.col("baseline_id").is_null())
        .then(pl.lit("no matching baseline in the plan"))
        .when(pl.col("baseline_status").is_null())
        .then(pl.lit("baseline not written yet"))
        .when(pl.col("baseline_status") != "ok")
        .then(pl.lit("baseline ") + pl.col("baseline_status"))
        .otherwise(None)
    )
