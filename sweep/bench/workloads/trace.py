"""A request trace: JSON Lines, one request per line, replayed in the order of its arrival times.

Each line: ``timestamp`` (milliseconds, as Mooncake's traces) or ``timestamp_s`` (seconds);
``input_length`` (or ``input_len``) and ``output_length`` (or ``output_len``) in tokens; optionally
``hash_ids`` (Mooncake: the ids of the prompt's 512-token blocks, so requests that share leading
blocks share that prefix) or ``group`` (a prefix-group id: requests of a group share their first
``prefix_length`` tokens, default all of the shorter one's). Other keys are ignored.

Arrival times are kept per request (``arrival_s``: from the first request, times ``time_scale``)
and recorded in the requests table; the closed-loop levels send the trace's requests in that order
but at their own pace (C in flight), not at those times; ``benchmark.open_loop.replay`` adds one
open-loop level that sends each at its time (``sweep.bench.runner.open_levels``).
"""

from __future__ import annotations

from typing import Any

from sweep.bench.workloads import Request, Workload, tokens
from sweep.bench.workloads.files import at, bad, read_text, records
from sweep.core import WorkloadSettings

_BLOCK = 512  # tokens per hash id in Mooncake's traces
EXAMPLE = '{"timestamp": 0, "input_length": 512, "output_length": 64, "hash_ids": [0]}'


def _int(obj: dict, keys: tuple[str, ...], source: str, line: int, *, required: bool = True, low: int = 1) -> Any:
    key = next((k for k in keys if k in obj), None)
    if key is None:
        if required:
            raise bad(source, line, f"no {' or '.join(map(repr, keys))}", fix=f"every line as in {EXAMPLE}")
        return None
    v = obj[key]
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        raise bad(source, line, f"{key} = {v!r} is not a whole number >= {low}", fix=f"e.g. {EXAMPLE}")
    return v


def _ids(obj: dict, n_in: int, source: str, line: int, i: int) -> tuple[tuple[int, ...], Any]:
    """The prompt's ids and its group: Mooncake blocks, a prefix group, or its own."""
    own = tokens.draw_ids(f"trace/{i}", n_in)
    hashes = obj.get("hash_ids")
    if hashes is not None:
        if not isinstance(hashes, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hashes):
            raise bad(source, line, "hash_ids is not a list of integers", fix=f"e.g. {EXAMPLE}")
        ids = tuple(t for h in hashes for t in tokens.draw_ids(f"block/{h}", _BLOCK))[:n_in]
        return ids + own[len(ids) :], (hashes[0] if hashes else None)
    group = _int(obj, ("group",), source, line, required=False, low=0)
    if group is None:
        return own, None
    shared = _int(obj, ("prefix_length", "prefix_len"), source, line, required=False, low=0)
    shared = n_in if shared is None else shared
    if shared > n_in:
        raise bad(
            source,
            line,
            f"prefix_length {shared} is longer than the input ({n_in})",
            fix="a prefix of at most input_length tokens",
        )
    return tokens.draw_ids(f"group/{group}", shared) + own[shared:], group


def load(w: WorkloadSettings) -> Workload:
    text = read_text(w.path, "trace")
    rows = []
    for i, (line, obj) in enumerate(records(text, w.path, EXAMPLE)):
        if not isinstance(obj, dict):
            raise bad(w.path, line, f"a {type(obj).__name__}, not a request object", fix=f"e.g. {EXAMPLE}")
        if "timestamp_s" in obj:
            t = obj["timestamp_s"]
            seconds = t
        else:
            t = obj.get("timestamp")
            seconds = t / 1000 if isinstance(t, (int, float)) and not isinstance(t, bool) else None
        if seconds is None or isinstance(t, bool) or not isinstance(t, (int, float)) or seconds < 0:
            raise bad(w.path, line, f"no timestamp (ms) or timestamp_s >= 0 (got {t!r})", fix=f"e.g. {EXAMPLE}")
        n_in = _int(obj, ("input_length", "input_len"), w.path, line)
        n_out = _int(obj, ("output_length", "output_len"), w.path, line)
        ids, group = _ids(obj, n_in, w.path, line, i)
        rows.append((float(seconds), line, ids, n_in, n_out, group))
    if not rows:
        raise bad(w.path, None, "no requests", fix=f"one request per line, e.g. {EXAMPLE}")
    rows.sort(key=lambda r: r[0])  # stable: ties keep the file's order
    t0 = rows[0][0]
    out = tuple(
        Request(
            input_ids=ids,
            input_len=n_in,
            output_len=n_out,
            group=group,
            arrival_s=(t - t0) * w.time_scale,
            origin=f"workload file {w.path}, {at(line)}",
        )
        for t, line, ids, n_in, n_out, group in rows
    )
    return Workload(f"trace:{w.path}" + (f",scale={w.time_scale:g}" if w.time_scale != 1 else ""), out, order="file")
