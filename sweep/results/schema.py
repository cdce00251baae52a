"""The only definition of the result tables' column names and types.

Every writer builds its rows against these schemas and ``check`` rejects a table that does not
match, so a reader (polars, DuckDB, pandas, the report) can rely on them. Times are seconds
(float64); ``*_at`` columns are Unix epoch seconds. Every row carries ``point_id`` (empty string
when the benchmark runs on its own, outside a sweep).

Tables:
- ``requests``: one row per request sent (warmup, single stream and every concurrency level).
- ``single_stream``: one row per single-stream run (warmups excluded).
- ``levels``: one row per concurrency level.
- ``points``: one row per grid point, written by the sweep (plus one ``axis_<name>`` string column
  per grid axis, holding the value's name; those vary per experiment and are checked by prefix).
"""

from __future__ import annotations

import pyarrow as pa

from sweep.errors import ResultsError

REQUESTS = pa.schema(
    [
        ("point_id", pa.string()),
        ("phase", pa.string()),  # warmup | single | level
        ("concurrency", pa.int32()),  # 1 for warmup and single stream
        ("seq", pa.int32()),  # index of the request within its phase/level
        ("prompt_set", pa.string()),
        ("prompt_index", pa.int32()),
        ("api", pa.string()),  # generate | completions | chat
        ("max_tokens", pa.int32()),
        ("start_at", pa.float64()),  # epoch seconds when the request was sent
        ("ttft_s", pa.float64()),  # time to the first chunk carrying a token; null on failure
        ("latency_s", pa.float64()),  # time to the last byte of the response
        ("prompt_tokens", pa.int32()),  # as counted by the server
        ("completion_tokens", pa.int32()),  # as counted by the server
        ("chunks", pa.int32()),  # stream chunks that carried tokens
        ("tpot_s", pa.float64()),  # (latency - ttft) / (completion_tokens - 1)
        ("itl_p50_s", pa.float64()),  # inter-token latency, a k-token chunk's gap spread over k
        ("itl_p99_s", pa.float64()),
        ("chunk_times_s", pa.list_(pa.float64())),  # arrival of each token chunk, from start
        ("chunk_tokens", pa.list_(pa.int32())),  # tokens carried by each chunk
        ("accept_length", pa.float64()),  # meta_info spec_accept_length; null without speculation
        ("spec_verify_ct", pa.int32()),
        ("finish_reason", pa.string()),
        ("ok", pa.bool_()),
        ("error", pa.string()),  # null when ok: "http 503: ...", "timeout", "disconnect", ...
        ("http_status", pa.int32()),
    ]
)

SINGLE_STREAM = pa.schema(
    [
        ("point_id", pa.string()),
        ("run", pa.int32()),
        ("max_tokens", pa.int32()),
        ("prompt_index", pa.int32()),
        ("prompt_tokens", pa.int32()),
        ("completion_tokens", pa.int32()),
        ("latency_s", pa.float64()),
        ("ttft_s", pa.float64()),
        ("tok_per_s", pa.float64()),  # completion_tokens / latency_s
        ("accept_length", pa.float64()),
        ("ok", pa.bool_()),
        ("error", pa.string()),
    ]
)

LEVELS = pa.schema(
    [
        ("point_id", pa.string()),
        ("concurrency", pa.int32()),
        ("max_tokens", pa.int32()),
        ("requests", pa.int32()),
        ("ok", pa.int32()),
        ("failed", pa.int32()),
        ("wall_s", pa.float64()),  # first send to last completion of the level
        ("output_throughput", pa.float64()),  # completion tokens of ok requests / wall_s
        ("request_throughput", pa.float64()),  # ok requests / wall_s
        ("per_request_tok_s", pa.float64()),  # mean over ok requests of completion_tokens / latency
        ("latency_mean_s", pa.float64()),
        ("latency_p50_s", pa.float64()),
        ("latency_p90_s", pa.float64()),
        ("latency_p99_s", pa.float64()),
        ("ttft_p50_s", pa.float64()),
        ("ttft_p99_s", pa.float64()),
        ("tpot_p50_s", pa.float64()),
        ("tpot_p99_s", pa.float64()),
        ("itl_p50_s", pa.float64()),
        ("itl_p99_s", pa.float64()),
        ("achieved_concurrency", pa.float64()),  # time-weighted requests in flight
        ("accept_length_server", pa.float64()),  # /server_info after a flush; null if unknown
        ("accept_length_requests", pa.float64()),  # from the requests: tokens / verify steps, summed
        ("flushed", pa.bool_()),  # the server's counters were reset before the level
        ("server_metrics", pa.string()),  # JSON: Prometheus deltas over the level, {} if none
    ]
)

POINTS = pa.schema(
    [
        ("point_id", pa.string()),
        ("label", pa.string()),
        ("experiment", pa.string()),
        ("baseline", pa.bool_()),  # a no-speculation point
        ("baseline_id", pa.string()),  # the baseline this point is compared with (null if none)
        ("params", pa.string()),  # JSON {axis: value name}
        ("param_roles", pa.string()),  # JSON {axis: role}; roles: drafter steps topk draft_tokens env other
        ("argv", pa.list_(pa.string())),
        ("env", pa.string()),  # JSON of the server's extra env, secrets redacted
        ("status", pa.string()),  # ok | failed | invalid
        ("failure_phase", pa.string()),
        ("failure_reason", pa.string()),
        ("errors", pa.list_(pa.string())),  # plan errors (invalid points)
        ("warnings", pa.list_(pa.string())),  # plan warnings
        ("log_tail", pa.string()),
        ("host", pa.string()),
        ("node_id", pa.string()),
        ("gpu_name", pa.string()),
        ("gpu_count", pa.int32()),
        ("sglang_version", pa.string()),
        ("load_s", pa.float64()),  # weights loaded (target and drafter)
        ("kv_cache_s", pa.float64()),
        ("capture_s", pa.float64()),  # target CUDA graph capture
        ("draft_capture_s", pa.float64()),
        ("http_s", pa.float64()),  # from graphs captured to HTTP listening
        ("ready_s", pa.float64()),  # from HTTP listening to ready (warmup generate answered)
        ("startup_s", pa.float64()),  # launch to ready
        ("started_at", pa.float64()),
        ("ended_at", pa.float64()),
        ("attempts", pa.int32()),
        ("reaped", pa.string()),  # JSON: what the reaper killed or reported, and why
        ("dry_run", pa.bool_()),
        ("bench_scale", pa.string()),  # JSON: how a dry run scaled the benchmark ({} if unscaled)
        ("sweep_version", pa.string()),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "points": POINTS,
    "single_stream": SINGLE_STREAM,
    "levels": LEVELS,
    "requests": REQUESTS,
}

AXIS_PREFIX = "axis_"


def check(table: pa.Table, name: str) -> pa.Table:
    """Return ``table`` cast to the schema of ``name``; raise ResultsError if it does not fit.

    Columns must be exactly the schema's (in any order); ``points`` may add ``axis_*`` strings.
    """
    schema = TABLES[name]
    expected = set(schema.names)
    got = set(table.column_names)
    extra = got - expected
    if name == "points":
        extra = {c for c in extra if not c.startswith(AXIS_PREFIX)}
    missing = expected - got
    if missing or extra:
        raise ResultsError(
            f"table {name!r} does not match its schema: missing {sorted(missing)}, unexpected {sorted(extra)}",
            fix="this is a bug in the writer; sweep/results/schema.py is the definition",
        )
    fields = [schema.field(c) for c in schema.names]
    if name == "points":
        fields += [pa.field(c, pa.string()) for c in table.column_names if c.startswith(AXIS_PREFIX)]
    target = pa.schema(fields)
    try:
        return table.select(target.names).cast(target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        raise ResultsError(f"table {name!r} has a column of the wrong type: {e}",
                           fix="this is a bug in the writer; sweep/results/schema.py is the definition") from e


def from_rows(rows: list[dict], name: str) -> pa.Table:
    """Build a checked table from a list of row dicts (missing keys become nulls)."""
    schema = TABLES[name]
    names = list(schema.names)
    if name == "points" and rows:
        names += sorted({k for r in rows for k in r if k.startswith(AXIS_PREFIX)})
    cols = {n: [r.get(n) for r in rows] for n in names}
    fields = [schema.field(n) if n in schema.names else pa.field(n, pa.string()) for n in names]
    return check(pa.table(cols, schema=pa.schema(fields)), name)
