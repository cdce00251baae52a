"""Results: the Parquet tables a sweep writes, and how to read them back.

``sweep.results.load(DIR)`` returns ``{"points", "single_stream", "levels", "requests", "metrics"}``
as polars LazyFrames.
"""

from sweep.results.store import load

__all__ = ["load"]
