"""Reading a results directory back (writing lives beside it, in ``writer.py``).

Layout of a results directory::

    DIR/
      experiment.yaml          the resolved experiment
      plan.json                the plan (same object as ``--plan --json``)
      points/<point_id>.parquet         one file per point, per table
      single_stream/<point_id>.parquet
      levels/<point_id>.parquet
      requests/<point_id>.parquet
      metrics/<point_id>.parquet       the server's raw /metrics around each level
      logs/<point_id>.log      the server's log

Each table is a folder of Parquet files with the same schema, so ``pl.scan_parquet(DIR/levels/*.parquet)``,
DuckDB's ``read_parquet('DIR/levels/*.parquet')`` and ``pandas.read_parquet(DIR/levels)`` all read it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sweep.errors import ResultsError
from sweep.results.schema import TABLES

TMP_SUFFIX = ".tmp"
# tables read file by file, so that files of an older schema still read (points: the axis_* columns
# also vary with the experiment)
DRIFTING = ("points", "levels")


def table_files(directory: str | Path, table: str) -> list[Path]:
    """The finished Parquet files of one table (half-written temporaries are ignored)."""
    folder = Path(directory) / table
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.parquet") if p.is_file())


def load(directory: str | Path) -> dict[str, pl.LazyFrame]:
    """The tables of a results directory as polars LazyFrames, keyed by table name.

    A table with no file yet (a sweep still running, or no point got that far) is an empty frame
    with the right schema, so queries over partial sweeps work. ``points`` and ``levels`` (one
    small file per point) also read files written by an older version: columns they lack are
    null, columns since dropped are kept (a resumed sweep mixes both).
    """
    d = Path(directory)
    if not d.is_dir():
        raise ResultsError(f"results directory {str(d)!r} does not exist",
                           fix="pass the directory a sweep wrote, e.g. results/k26_eagle-dryrun")
    out: dict[str, pl.LazyFrame] = {}
    for name, schema in TABLES.items():
        files = table_files(d, name)
        if files:
            if name in DRIFTING:
                frame = pl.concat([pl.scan_parquet(f) for f in files], how="diagonal_relaxed")
                out[name] = _with_every_column(frame, schema)
            else:
                out[name] = pl.scan_parquet(files)
        else:
            out[name] = pl.LazyFrame(schema=pl.from_arrow(schema.empty_table()).schema)
    return out


def _with_every_column(frame: pl.LazyFrame, schema) -> pl.LazyFrame:
    """``frame`` plus, as nulls of the right type, the schema's columns its files lack."""
    have = set(frame.collect_schema().names())
    types = pl.from_arrow(schema.empty_table()).schema
    missing = [pl.lit(None, dtype=types[n]).alias(n) for n in schema.names if n not in have]
    return frame.with_columns(missing) if missing else frame
