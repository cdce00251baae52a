"""Results: the Parquet tables a sweep writes, and how to read them back.

``sweep.results.load(DIR)`` returns ``{"points", "single_stream", "levels", "requests", "metrics"}``
as polars LazyFrames.
"""

from sweep.results.meta import LOGS, experiment_path, experiment_slos, read_experiment, read_manifest, read_plan
from sweep.results.records import axis_types, point_row, server_flags
from sweep.results.schema import (
    AXIS_PREFIX,
    DECISIONS,
    DECISIONS_SCHEMA,
    ENGINE_COLUMNS,
    FAKE_SPEED_DIVIDED,
    LEVELS,
    MEASURED,
    METRICS,
    SCALED_RATES,
    SCALED_TIME_LISTS,
    SCALED_TIMES,
    TABLES,
    axis_type,
    axis_value,
    engine_column,
    from_rows,
)
from sweep.results.speed import as_measured
from sweep.results.store import FLAGS, check_sweep_dir, decisions, load, read_columns, sweep_dirs
from sweep.results.writer import ResultsDir, check_benchmark_dir, sweep_id, write_tables

# lock, records, store, writer: modules other rooms use as namespaces, imported on first use

__all__ = [
    "AXIS_PREFIX",
    "FAKE_SPEED_DIVIDED",
    "MEASURED",
    "SCALED_RATES",
    "SCALED_TIMES",
    "SCALED_TIME_LISTS",
    "DECISIONS",
    "DECISIONS_SCHEMA",
    "ENGINE_COLUMNS",
    "FLAGS",
    "LEVELS",
    "LOGS",
    "METRICS",
    "ResultsDir",
    "TABLES",
    "as_measured",
    "axis_type",
    "axis_types",
    "axis_value",
    "check_benchmark_dir",
    "check_sweep_dir",
    "decisions",
    "engine_column",
    "experiment_path",
    "experiment_slos",
    "from_rows",
    "load",
    "lock",
    "point_row",
    "read_columns",
    "read_experiment",
    "read_manifest",
    "read_plan",
    "records",
    "server_flags",
    "store",
    "sweep_dirs",
    "sweep_id",
    "write_tables",
    "writer",
]
