"""A dry run's tables at real speed, as they are written, and back to what the fake measured.

The fake serves ``dry_run.fake_speed`` times faster than the system it models. A dry run writes every
time and rate at real speed under its own name, and what the fake measured beside it as
``<column>_measured`` (the columns: ``SCALED_*`` in sweep/results/schema.py), so that a reader of the
files (DuckDB, polars, ``sweep query``) sees one figure under one name. The driver's own decisions
that compare with what a host measures now (the baseline's curve for refinement, the adaptive
search, ``decide``'s time budget) read the measured values back (``as_measured``). Pure.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from sweep.results.schema import MEASURED, SCALED_RATES, SCALED_TIME_LISTS, SCALED_TIMES


def _times_list(column: pa.ChunkedArray, k: float) -> pa.ChunkedArray:
    chunks = []
    for ch in column.chunks:
        offsets = pc.subtract(ch.offsets, ch.offsets[0])
        chunks.append(type(ch).from_arrays(offsets, pc.multiply(ch.flatten(), k), mask=ch.is_null()))
    return pa.chunked_array(chunks, type=column.type)


def to_real_speed(name: str, table: pa.Table, speed: float) -> pa.Table:
    """``table`` (of the table ``name``, as a host measured it on a fake ``speed`` times faster) with
    its times multiplied and its rates divided by ``speed``, each measured column kept beside as
    ``<column>_measured``; unchanged at speed 1 or for a table with no such columns."""
    if speed == 1.0:
        return table
    have = set(table.column_names)
    scale = [(c, lambda col: pc.multiply(col, speed)) for c in SCALED_TIMES.get(name, ())]
    scale += [(c, lambda col: pc.divide(col, speed)) for c in SCALED_RATES.get(name, ())]
    scale += [(c, lambda col: _times_list(col, speed)) for c in SCALED_TIME_LISTS.get(name, ())]
    for c, f in scale:
        if c not in have:
            continue
        measured = table[c]
        if c + MEASURED in have:
            table = table.drop_columns([c + MEASURED])
        table = table.append_column(pa.field(c + MEASURED, measured.type), measured)
        table = table.set_column(table.column_names.index(c), table.schema.field(c), f(measured).cast(measured.type))
    return table


def as_measured(frame: pl.LazyFrame) -> pl.LazyFrame:
    """``frame`` with each scaled column holding what the fake measured (its ``<column>_measured``
    where written, else the column itself: a real run's, or a dry run's written before)."""
    names = frame.collect_schema().names()
    back = [pl.coalesce(pl.col(c + MEASURED), pl.col(c)).alias(c) for c in names if c + MEASURED in names]
    return frame.with_columns(back) if back else frame
