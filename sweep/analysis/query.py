"""``python -m sweep query DIR "SQL"``: SQL over a results directory, through polars.

The tables are ``points``, ``single_stream``, ``levels``, ``requests`` and ``metrics`` (the
server's raw Prometheus samples around each level; columns: see sweep/results/schema.py). The report's building blocks are there too, as ``speedup``,
``level_speedups``, ``best_per_level`` and ``crossover``; each is computed only when the query
names it. Everything stays lazy, so a query over a million request rows reads only the columns
and rows it needs.

A dry run is queried in the report's unit: its times and rates at real speed (the fake's divided back,
``realspeed.at_real_speed``), what the fake measured beside them in ``<column>_measured`` columns, and
a line on stderr saying so.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from sweep.analysis import realspeed, speedups
from sweep.analysis.frames import Tables
from sweep.core.errors import QueryError, UnknownFormatError
from sweep.results import load

VIEWS: dict[str, Callable[[Tables], pl.DataFrame]] = {
    "speedup": speedups.speedup_table,
    "level_speedups": speedups.level_speedups,
    "best_per_level": speedups.best_per_level,
    "crossover": speedups.crossover,
}
FORMATS = ("table", "csv", "json", "parquet")


def run_sql(tables: Tables, sql: str) -> pl.DataFrame:
    """Run ``sql`` over the tables (and the views it names), a dry run's at real speed as in the report;
    raise QueryError (exit 7) on a bad query."""
    return _run(realspeed.scaled(tables), sql)


def _run(tables: Tables, sql: str) -> pl.DataFrame:
    context = pl.SQLContext(frames=dict(tables))
    for name, view in VIEWS.items():
        if re.search(rf"\b{name}\b", sql, re.IGNORECASE):
            context.register(name, view(tables).lazy())
    try:
        return context.execute(sql).collect()
    except pl.exceptions.PolarsError as e:
        names = ", ".join([*tables, *VIEWS])
        raise QueryError(f"the query failed: {str(e).strip().splitlines()[0]}",
                         fix=f"tables are {names}; list a table's columns with "
                             "\"SELECT * FROM points LIMIT 1\"") from e


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """Nested columns (lists, structs) as JSON text, for CSV, which cannot hold them."""
    nested = [c for c, t in frame.schema.items() if t.is_nested()]
    return frame.with_columns(
        pl.struct(v=pl.col(c)).struct.json_encode().str.json_path_match("$.v").alias(c) for c in nested)


def write(frame: pl.DataFrame, fmt: str, out: BinaryIO, *, max_rows: int = 100) -> None:
    """Write the result in ``fmt`` (table | csv | json | parquet) to a binary stream."""
    if fmt == "table":
        # a terminal's width where there is one; a pipe or a file has none, and gets the whole table
        tty = getattr(out, "isatty", lambda: False)()
        width: dict[str, Any] = {} if tty or os.environ.get("COLUMNS") else {"tbl_width_chars": 65_535}
        with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=80, **width):
            out.write(f"{frame}\n".encode())
    elif fmt == "csv":
        _flat(frame).write_csv(out)
    elif fmt == "json":
        out.write(frame.write_json().encode() + b"\n")
    elif fmt == "parquet":
        frame.write_parquet(out)
    else:
        raise UnknownFormatError(f"unknown output format {fmt!r}", fix=f"use one of {', '.join(FORMATS)}")


def query(directory: str | Path, sql: str, fmt: str = "table", output: str | Path | None = None,
          *, max_rows: int = 100) -> pl.DataFrame:
    """Run ``sql`` on a results directory and write the result to ``output`` (default stdout)."""
    tables, speed = realspeed.at_real_speed(load(directory))
    frame = _run(tables, sql)
    if speed.scaled:  # stderr: the result on stdout stays clean CSV, JSON or Parquet
        print(speed.query_note(), file=sys.stderr, flush=True)
    if output is not None:
        with open(output, "wb") as fh:
            write(frame, fmt, fh, max_rows=max_rows)
        return frame
    if fmt == "parquet" and sys.stdout.isatty():
        raise UnknownFormatError("parquet output is binary and stdout is a terminal",
                         fix="pass --output FILE.parquet, or redirect stdout to a file")
    write(frame, fmt, sys.stdout.buffer, max_rows=max_rows)
    sys.stdout.buffer.flush()
    return frame
