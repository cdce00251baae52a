"""``python -m sweep query DIR "SQL"``: SQL over a results directory, through polars.

The tables are ``points``, ``single_stream``, ``levels``, ``requests`` and ``metrics`` (the
server's raw Prometheus samples around each level; columns: see sweep/results/schema.py). The report's building blocks are there too, as ``speedup``,
``level_speedups``, ``best_per_level`` and ``crossover``; each is computed only when the query
names it. Everything stays lazy, so a query over a million request rows reads only the columns
and rows it needs.

Over several directories (``query DIR DIR ... "SQL"``) every table and view is the union of each
directory's, with a first column ``results_dir`` naming the directory it came from (``single_stream``
has a ``run`` of its own: the run's number), and the history views
compare them (``sweep.analysis.history``): ``runs`` (one row per directory), ``picks`` (the
configuration to deploy per SLO, with its margin, interval and decision state), ``history`` (each figure run by run, with its change and verdict
against the previous run of its experiment) and ``changes`` (the settings that differ between
consecutive runs), whose ``run`` is that ``results_dir``. The history views are there for one
directory too (one run, nothing compared).

A dry run is queried in the report's unit: its times and rates at real speed (the fake's divided back,
``realspeed.at_real_speed``), what the fake measured beside them in ``<column>_measured`` columns, and
a line on stderr saying so.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from sweep.analysis import history, openloop, realspeed, speedups
from sweep.analysis.frames import Tables
from sweep.core import OutputError, QueryError, UnknownFormatError, atomic
from sweep.results import load


def _closed(view: Callable[[Tables], pl.DataFrame]) -> Callable[[Tables], pl.DataFrame]:
    """``view`` over the concurrency levels only (open-loop levels have no concurrency)."""
    return lambda tables: view(openloop.closed_loop(tables))


VIEWS: dict[str, Callable[[Tables], pl.DataFrame]] = {
    "speedup": _closed(speedups.speedup_table),
    "level_speedups": _closed(speedups.level_speedups),
    "best_per_level": _closed(speedups.best_per_level),
    "crossover": _closed(speedups.crossover),
    "rate_levels": openloop.rate_levels,  # the open-loop levels, per point and offered rate
}
FORMATS = ("table", "csv", "json", "ndjson", "parquet", "markdown")
_SUFFIXES = {
    ".txt": "table",
    ".csv": "csv",
    ".json": "json",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".md": "markdown",
}
"""The format an output file's suffix says (``--output x.parquet`` writes Parquet)."""


def output_format(fmt: str | None, output: str | Path | None) -> str:
    """The format to write: ``fmt`` where given, else the one ``output``'s suffix says, else table.
    An unknown ``fmt``, an unknown suffix with no ``fmt``, or a ``fmt`` the suffix contradicts is an
    UnknownFormatError (exit 7), raised before the query runs."""
    known = ", ".join(FORMATS)
    if fmt is not None and fmt not in FORMATS:
        raise UnknownFormatError(f"unknown output format {fmt!r}", fix=f"use one of {known}")
    suffix = Path(output).suffix.lower() if output is not None else ""
    by_suffix = _SUFFIXES.get(suffix)
    suffixes = ", ".join(f"{s} ({f})" for s, f in _SUFFIXES.items())
    if fmt is None:
        if suffix and by_suffix is None:
            raise UnknownFormatError(
                f"--output {output}: no output format is named {suffix}",
                fix=f"name the file {suffixes}, or pass --format ({known})",
            )
        return by_suffix or "table"
    if by_suffix is not None and by_suffix != fmt:
        raise UnknownFormatError(
            f"--format {fmt} but --output {output} says {by_suffix} ({suffix})",
            fix=f"drop --format (the suffix decides), or name the file for {fmt}: "
            + ", ".join(s for s, f in _SUFFIXES.items() if f == fmt),
        )
    return fmt


def run_sql(tables: Tables, sql: str) -> pl.DataFrame:
    """Run ``sql`` over the tables (and the views it names), a dry run's at real speed as in the report;
    raise QueryError (exit 7) on a bad query."""
    return _run(realspeed.scaled(tables), sql)


HISTORY_VIEWS = ("runs", "picks", "history", "changes")  # sweep.analysis.history.VIEWS
_RESULTS_DIR = "results_dir"  # over several directories: the column naming each row's directory


def _named(name: str, sql: str) -> bool:
    """Whether ``sql`` names the view: the history's (words that are column names too: ``runs``) only
    where a table goes, after FROM or JOIN (``FROM points p, runs r`` too)."""
    if name in HISTORY_VIEWS:
        tables = rf"\b(from|join)\s+(\w+(\s+(as\s+)?\w+)?\s*,\s*)*{name}\b"
        return re.search(tables, sql, re.IGNORECASE) is not None
    return re.search(rf"\b{name}\b", sql, re.IGNORECASE) is not None


_Views = dict[str, Callable[[], pl.DataFrame]]
"""A view's name and what builds it (only when a query names it)."""


def _run(tables: Tables, sql: str, views: _Views | None = None) -> pl.DataFrame:
    """``sql`` over ``tables`` and the views it names: the report's over ``tables`` unless ``views``
    gives each view's own builder (several directories, the history)."""
    views = {name: partial(view, tables) for name, view in VIEWS.items()} if views is None else views
    context = pl.SQLContext(frames=dict(tables))
    for name, build in views.items():
        if _named(name, sql):
            context.register(name, build().lazy())
    try:
        return context.execute(sql).collect()
    except pl.exceptions.PolarsError as e:
        names = ", ".join([*tables, *views])
        raise QueryError(
            f"the query failed: {str(e).strip().splitlines()[0]}",
            fix=f'tables are {names}; list a table\'s columns with "SELECT * FROM points LIMIT 1"',
        ) from e


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """Nested columns (lists, structs) as JSON text, for CSV, which cannot hold them."""
    nested = [c for c, t in frame.schema.items() if t.is_nested()]
    return frame.with_columns(
        pl.struct(v=pl.col(c)).struct.json_encode().str.json_path_match("$.v").alias(c) for c in nested
    )


def write(frame: pl.DataFrame, fmt: str, out: BinaryIO, *, max_rows: int = 100) -> None:
    """Write the result in ``fmt`` (one of FORMATS) to a binary stream."""
    if fmt in ("table", "markdown"):
        # a terminal's width where there is one; a pipe or a file has none, and gets the whole table
        tty = getattr(out, "isatty", lambda: False)()
        width: dict[str, Any] = {} if tty or os.environ.get("COLUMNS") else {"tbl_width_chars": 65_535}
        style: dict[str, Any] = (
            {"tbl_formatting": "MARKDOWN", "tbl_hide_column_data_types": True, "tbl_hide_dataframe_shape": True}
            if fmt == "markdown"
            else {}
        )
        with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=80, **width, **style):
            out.write(f"{frame}\n".encode())
    elif fmt == "csv":
        _flat(frame).write_csv(out)
    elif fmt == "json":
        out.write(frame.write_json().encode() + b"\n")
    elif fmt == "ndjson":
        frame.write_ndjson(out)
    elif fmt == "parquet":
        frame.write_parquet(out)
    else:
        raise UnknownFormatError(f"unknown output format {fmt!r}", fix=f"use one of {', '.join(FORMATS)}")


def _write_file(frame: pl.DataFrame, fmt: str, output: str | Path, *, max_rows: int = 100) -> None:
    """``write`` to the file ``output``, whole or not at all (a temporary beside it, renamed); a
    folder that cannot be written is an OutputError (exit 7) naming it."""
    try:
        with atomic.atomic_path(output) as tmp, open(tmp, "wb") as fh:
            write(frame, fmt, fh, max_rows=max_rows)
    except OSError as e:
        raise cannot_write(Path(output), e) from None


def cannot_write(path: Path, e: OSError) -> OutputError:
    """The OutputError of a file the analysis cannot write at ``path``."""
    why = e.strerror or type(e).__name__
    return OutputError(
        f"cannot write {path}: {why}",
        fix=f"write it somewhere you can: another path (the folder {path.parent} must exist and be writable)",
    )


def _with_run(frames: Sequence[tuple[str, pl.LazyFrame]]) -> pl.LazyFrame:
    """The frames of several directories as one, a first column ``results_dir`` naming each one's directory."""
    return pl.concat([f.select(pl.lit(run).alias(_RESULTS_DIR), pl.all()) for run, f in frames], how="diagonal_relaxed")


def _per_run(view: Callable[[Tables], pl.DataFrame], scaled: Sequence[tuple[str, Tables]]) -> pl.DataFrame:
    return _with_run([(run, view(t).lazy()) for run, t in scaled]).collect()


def _history_views(directories: Sequence[str | Path]) -> _Views:
    """The history's tables (``sweep.analysis.history``) over ``directories``, built once, when named."""

    built: list[history.History] = []

    def table(name: str) -> pl.DataFrame:
        if not built:
            built.append(history.build(directories))
        return getattr(built[0], name)

    return {name: partial(table, name) for name in history.VIEWS}


def several(directories: Sequence[str | Path]) -> tuple[Tables, _Views, list[realspeed.Speed]]:
    """The tables of several results directories (each at real speed), every one with a first column
    ``results_dir``; the views, the report's built per directory, the history's over them all; and the speeds
    of the directories."""
    scaled = [(str(d), *realspeed.at_real_speed(load(d))) for d in directories]
    tables = {name: _with_run([(run, t[name]) for run, t, _ in scaled]) for name in scaled[0][1]}
    runs = [(run, t) for run, t, _ in scaled]
    views: _Views = {name: partial(_per_run, view, runs) for name, view in VIEWS.items()}
    return tables, {**views, **_history_views(directories)}, [speed for _, _, speed in scaled]


def query(
    directory: str | Path | Sequence[str | Path],
    sql: str,
    fmt: str | None = None,
    output: str | Path | None = None,
    *,
    max_rows: int = 100,
) -> pl.DataFrame:
    """Run ``sql`` on a results directory (or several: see the module docstring) and write the result
    to ``output`` (default stdout) in ``fmt`` (default: what ``output``'s suffix says, else table)."""
    fmt = output_format(fmt, output)
    if isinstance(directory, (str, Path)):
        tables, speed = realspeed.at_real_speed(load(directory))
        views: _Views = {name: partial(view, tables) for name, view in VIEWS.items()}
        views.update(_history_views([directory]))
        frame, speeds = _run(tables, sql, views), [speed]
    else:
        many, views, speeds = several(directory)
        frame = _run(many, sql, views)
    for note in dict.fromkeys(s.query_note() for s in speeds if s.scaled):  # stderr: the result on stdout
        print(note, file=sys.stderr, flush=True)  # stays clean CSV, JSON or Parquet
    if output is not None:
        _write_file(frame, fmt, output, max_rows=max_rows)
        return frame
    if fmt == "parquet" and sys.stdout.isatty():
        raise UnknownFormatError(
            "parquet output is binary and stdout is a terminal",
            fix="pass --output FILE.parquet, or redirect stdout to a file",
        )
    write(frame, fmt, sys.stdout.buffer, max_rows=max_rows)
    sys.stdout.buffer.flush()
    return frame
