"""Reading a results directory back (writing lives beside it, in ``writer.py``).

Layout of a results directory::

    DIR/
      sweep.json               the manifest: experiment and mode (``meta.read_manifest``)
      experiment.yaml          the resolved experiment (``meta.read_experiment``)
      plan.json                the plan (same object as ``--plan --json``; ``meta.read_plan``)
      points/<point_id>.parquet         one file per point, per table
      single_stream/<point_id>.parquet
      levels/<point_id>.parquet
      requests/<point_id>.parquet
      metrics/<point_id>.parquet       the server's raw /metrics around each level
      logs/<point_id>.log      the server's log

``python -m sweep bench --out DIR`` writes each table as ``<table>/bench.parquet`` (point_id "")
beside its flat ``DIR/<table>.parquet`` files, and no manifest, plan or experiment.

Each table is a folder of Parquet files with the same schema, so ``pl.scan_parquet(DIR/levels/*.parquet)``,
DuckDB's ``read_parquet('DIR/levels/*.parquet')`` and ``pandas.read_parquet(DIR/levels)`` all read it.

Files an older version wrote (a resumed sweep mixes both) read through ``load``: columns they lack
are null, the ``points`` columns once stored as JSON text (``params``, ``param_roles``,
``env``, ``reaped``, ``bench_scale``) are converted to today's types as they are read (one small
file per point: a JSON parse per value), and an ``axis_*`` column stored as text whose every value
is a number reads as numbers (``schema.axis_type``), as today's writer stores it. A points file
written before the ``flags`` column gets it from its ``argv`` (``with_flags``: the only reader of an
argv), so the analysis reads a server's flags from that column alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional, cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from sweep.core import ResultsError, flags_of_argv, plural
from sweep.results.meta import read_manifest
from sweep.results.schema import (
    AXIS_PREFIX,
    DECISIONS,
    DECISIONS_SCHEMA,
    MANIFEST,
    POINTS,
    TABLES,
    axis_type,
    dry_run_fields,
)
from sweep.results.speed import as_measured

# tables read file by file, so that files of an older schema still read (points: the axis_* columns
# also vary with the experiment)
_DRIFTING = ("points", "levels")
# points columns that versions before the typed columns wrote as JSON text; ``params`` ({axis: value})
# is gone: the axis values live in the axis_* columns only
_LEGACY_JSON = ("param_roles", "env", "reaped", "bench_scale")
_LEGACY_PARAMS = "params"
FLAGS = "flags"  # points column: the server's flags; files before it have their argv read once (with_flags)


def table_files(directory: str | Path, table: str) -> list[Path]:
    """The finished Parquet files of one table (half-written temporaries are ignored)."""
    folder = Path(directory) / table
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.parquet") if p.is_file())


def _is_sweep_dir(d: Path) -> bool:
    """Whether ``d`` is a directory a sweep (or ``bench --out``) wrote: its ``sweep.json``, or tables."""
    return (d / MANIFEST).is_file() or any(table_files(d, name) for name in TABLES)


def sweep_dirs(roots: Iterable[str | Path]) -> list[Path]:
    """The results directories under ``roots``, each a results directory itself or a folder of them
    (``results/``: the ones directly inside it, by name), once each, in the order found."""
    out: list[Path] = []
    for root in map(Path, roots):
        if _is_sweep_dir(root):
            out.append(root)
        elif root.is_dir():
            out += sorted(d for d in root.iterdir() if d.is_dir() and _is_sweep_dir(d))
    return list(dict.fromkeys(out))


def check_sweep_dir(d: Path) -> None:
    """Raise a ResultsError unless ``d`` is a directory a sweep wrote (its ``sweep.json``, or tables):
    a file, a missing path, or a folder of sweeps (``results/``) or an empty one, each with its fix."""
    example = "pass the directory a sweep wrote, e.g. results/k26_eagle-dryrun"
    if d.is_file():
        raise ResultsError(f"{str(d)!r} is a file, not a results directory", fix=example)
    if not d.is_dir():
        raise ResultsError(f"results directory {str(d)!r} does not exist", fix=example)
    if _is_sweep_dir(d):
        return
    sweeps = sorted(str(c) for c in d.iterdir() if (c / MANIFEST).is_file())
    where = (
        (f"it holds {plural(len(sweeps), 'sweep')}: " + ", ".join(sweeps[:6]) + (", ..." if len(sweeps) > 6 else ""))
        if sweeps
        else "it is empty"
        if not any(d.iterdir())
        else "nothing in it was written by a sweep"
    )
    raise ResultsError(
        f"{str(d)!r} is not a sweep's results directory (no {MANIFEST}, no tables): {where}",
        fix=f"pass one of them, e.g. {sweeps[0]}" if sweeps else example,
    )


def load(directory: str | Path) -> dict[str, pl.LazyFrame]:
    """The tables of a results directory as polars LazyFrames, keyed by table name.

    ``decisions`` (one file, ``decide``'s) comes with them: empty where decide did not run.
    A table with no file yet (a sweep still running, or no point got that far) is an empty frame
    with the right schema, so queries over partial sweeps work. ``points`` and ``levels`` (one
    small file per point) also read files written by an older version: columns they lack are
    null, columns since dropped are kept (a resumed sweep mixes both).
    """
    d = Path(directory)
    check_sweep_dir(d)
    return {**{name: table(d, name) for name in TABLES}, "decisions": decisions(d).lazy()}


def table(directory: str | Path, name: str) -> pl.LazyFrame:
    """One table of a results directory, as ``load`` reads it (no check that it is one: a folder
    without the table gives the empty frame)."""
    schema = TABLES[name]
    files = table_files(directory, name)
    if not files:
        return pl.LazyFrame(schema=_frame(schema.empty_table()).schema)
    if name not in _DRIFTING:
        dry = dry_run_fields(name)
        if dry and (read_manifest(Path(directory)) or {}).get("mode") == "dry-run":  # what was measured too
            schema = pa.schema([*schema, *dry.values()])
        return _scan_all(files, schema)
    scan = _points_file if name == "points" else pl.scan_parquet
    frame = pl.concat([scan(f) for f in files], how="diagonal_relaxed")
    if name == "points":  # one small row per point: read at once, its flags filled where written before them
        frame = with_flags(_numeric_axes(frame).collect()).lazy()
    return _with_every_column(frame, schema)


def read_columns(
    directory: str | Path,
    name: str,
    columns: Sequence[str],
    *,
    point_ids: Optional[Iterable[str]] = None,
    measured: bool = False,
) -> pl.DataFrame:
    """The ``columns`` of one table, read as ``load`` reads them (an older file's missing columns
    null, points of the JSON era upgraded), of the points in ``point_ids`` when given; ``measured``:
    a dry run's times and rates as the fake measured them (``speed.as_measured``), not at real speed."""
    frame = as_measured(table(directory, name)) if measured else table(directory, name)
    if point_ids is not None:
        frame = frame.filter(pl.col("point_id").is_in(list(point_ids)))
    return frame.select(columns).collect()


def _numeric_axes(frame: pl.LazyFrame) -> pl.LazyFrame:
    """``frame`` with each text ``axis_*`` column whose every value is a number cast to int64 or
    float64: points files of an older writer (every axis as text), or of two writers mixed (text and
    numbers concatenate as text). The axis columns are small: one value per point."""
    schema = frame.collect_schema()
    text = [c for c, t in schema.items() if c.startswith(AXIS_PREFIX) and t == pl.String]
    if not text:
        return frame
    values = frame.select(text).collect()
    kinds = {c: axis_type(values[c].to_list()) for c in text}
    casts = [
        pl.col(c).cast(pl.Int64 if str(k) == "int64" else pl.Float64) for c, k in kinds.items() if str(k) != "string"
    ]
    return frame.with_columns(casts) if casts else frame


def _with_every_column(frame: pl.LazyFrame, schema) -> pl.LazyFrame:
    """``frame`` plus, as nulls of the right type, the schema's columns its files lack."""
    have = set(frame.collect_schema().names())
    types = _frame(schema.empty_table()).schema
    missing = [pl.lit(None, dtype=types[n]).alias(n) for n in schema.names if n not in have]
    return frame.with_columns(missing) if missing else frame


def _scan_all(files: list[Path], schema: pa.Schema) -> pl.LazyFrame:
    """One lazy scan of a large table's files (requests, metrics...), in the schema of today: a file of
    an older version lacks a column (e.g. requests' spec_accept_histogram): null there."""
    types = _frame(schema.empty_table()).schema
    try:
        return pl.scan_parquet(files, schema=types, missing_columns="insert", extra_columns="ignore")
    except TypeError:  # a polars without these options: the files must agree
        return pl.scan_parquet(files)


def _frame(table: pa.Table) -> pl.DataFrame:
    """``pl.from_arrow`` of a Table, which is a DataFrame (polars types the result ``DataFrame | Series``:
    an Array gives a Series)."""
    return cast(pl.DataFrame, pl.from_arrow(table))


def _points_file(path: Path) -> pl.LazyFrame:
    """One points file; one written before the typed columns is converted (see ``upgrade_points``)."""
    have = pl.read_parquet_schema(path)
    if _LEGACY_PARAMS not in have and not any(have.get(c) == pl.String for c in _LEGACY_JSON):
        return pl.scan_parquet(path)
    try:
        table = upgrade_points(pq.read_table(path))
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise ResultsError(
            f"{path} was written by an older version and its JSON columns do not convert: {e}",
            fix="move that file aside (its point runs again when the sweep is resumed), or "
            "rerun the sweep into a new results_dir",
        ) from None
    return _frame(table).lazy()


def with_flags(points: pl.DataFrame) -> pl.DataFrame:
    """A points frame with its ``flags`` column filled from the ``argv`` of each row written before the
    column (null there, or absent: ``sweep.core.argv.flags_of_argv``): the one place an argv is read
    back, so that the analysis reads every directory's flags from the column. A frame with nothing
    to fill is returned as it is."""
    if "argv" not in points.columns:
        return points
    argvs = points.get_column("argv").to_list()
    have = points.get_column(FLAGS).to_list() if FLAGS in points.columns else [None] * points.height
    if FLAGS in points.columns and all(f is not None or a is None for f, a in zip(have, argvs)):
        return points
    values = [f if f is not None or a is None else flags_of_argv(a) for f, a in zip(have, argvs)]
    column = _frame(pa.table({FLAGS: pa.array(values, POINTS.field(FLAGS).type)})).get_column(FLAGS)
    return points.with_columns(column)


def upgrade_points(table: pa.Table) -> pa.Table:
    """A points table of the JSON-text era in today's types: ``params`` becomes the axis_* columns it
    lacks (then goes), and each JSON column its map or struct (``{}`` -> null for the structs)."""
    if _LEGACY_PARAMS in table.column_names:
        params = [_json(v) or {} for v in table.column(_LEGACY_PARAMS).to_pylist()]
        axes = list(dict.fromkeys(a for p in params for a in p))
        for axis in axes:
            if f"{AXIS_PREFIX}{axis}" not in table.column_names:
                values = [None if p.get(axis) is None else str(p[axis]) for p in params]
                table = table.append_column(f"{AXIS_PREFIX}{axis}", pa.array(values, pa.string()))
        table = table.drop_columns([_LEGACY_PARAMS])
    for name in _LEGACY_JSON:
        if name not in table.column_names or not pa.types.is_string(table.schema.field(name).type):
            continue
        kind = POINTS.field(name).type
        values = [_fit(_json(v), kind) for v in table.column(name).to_pylist()]
        table = table.set_column(table.column_names.index(name), name, pa.array(values, kind))
    return table


def _json(text: str | None) -> Any:
    if not text:
        return None
    return json.loads(text)


def _fit(value: Any, kind: pa.DataType) -> Any:
    """A parsed JSON value in the shape of ``kind``: maps keep every key (values as text), structs only
    the fields they declare (an empty object: null)."""
    if value is None:
        return None
    if isinstance(kind, pa.MapType):
        return {str(k): None if v is None else str(v) for k, v in dict(value).items()}
    if isinstance(kind, pa.StructType):
        if not value:
            return None
        fields = {kind.field(i).name: kind.field(i).type for i in range(kind.num_fields)}
        return {k: _fit(v, fields[k]) for k, v in dict(value).items() if k in fields}
    if isinstance(kind, pa.ListType):
        return [_fit(v, kind.value_type) for v in value]
    return value


def decisions(directory: str | Path) -> pl.DataFrame:
    """How each decision ``decide`` took on ended (``decisions.parquet``); empty, in its schema, where
    decide did not run; a file written before a column existed has it null."""

    path = Path(directory) / DECISIONS
    if not path.is_file():
        return _frame(DECISIONS_SCHEMA.empty_table())
    frame = _frame(pq.read_table(path))
    types = _frame(DECISIONS_SCHEMA.empty_table()).schema
    return frame.with_columns(
        [pl.lit(None, types[n]).alias(n) for n in DECISIONS_SCHEMA.names if n not in frame.columns]
    )
