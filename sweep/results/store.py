"""Reading a results directory back (writing lives beside it, in ``writer.py``).

Layout of a results directory::

    DIR/
      experiment.yaml          the resolved experiment
      plan.json                the plan (same object as ``--plan --json``)
      points/<point_id>.parquet         one file per point, per table
      single_stream/<point_id>.parquet
      levels/<point_id>.parquet
      requests/<point_id>.parquet
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


def table_files(directory: str | Path, table: str) -> list[Path]:
    """The finished Parquet files of one table (half-written temporaries are ignored)."""
    folder = Path(directory) / table
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.parquet") if p.is_file())


def load(directory: str | Path) -> dict[str, pl.LazyFrame]:
    """The tables of a results directory as polars LazyFrames, keyed by table name.

    A table with no file yet (a sweep still running, or no point got that far) is an empty frame
    with the right schema, so queries over partial sweeps work.
    """
    d = Path(directory)
    if not d.is_dir():
        raise ResultsError(f"results directory {str(d)!r} does not exist",
                           fix="pass the directory a sweep wrote, e.g. results/k26_eagle-dryrun")
    out: dict[str, pl.LazyFrame] = {}
    for name, schema in TABLES.items():
        files = table_files(d, name)
        if files:
            # points files of one sweep share their axis_* columns; diagonal concat also reads
            # directories whose experiment gained an axis between runs
            out[name] = (pl.concat([pl.scan_parquet(f) for f in files], how="diagonal_relaxed")
                         if name == "points" else pl.scan_parquet(files))
        else:
            out[name] = pl.LazyFrame(schema=pl.from_arrow(schema.empty_table()).schema)
    return out
