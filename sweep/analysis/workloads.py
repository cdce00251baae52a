"""Acceptance and speedup per workload: each configuration's figures side by side across the
workloads the results hold (coding against chat, say). Pure.

A point's workload is what its requests record (the requests table's ``workload`` column, the
name the benchmark gave it: ``sharegpt:FILE``, ``synthetic:in=...``, a prompt set). Its
configuration is its grid axes without any axis that chooses the workload (a client-side axis: its
recorded role ``benchmark``), else its label: so points that differ only in workload, whether by a
grid axis or by separate experiments written to one directory, line up as one configuration. A
point written before client-side axes (no ``launch_id``: its roles have no ``benchmark``) has its
workload axis known by its name instead, ``workload`` or ``prompts`` (``_chooses_workload``).

Figures per point: the accept length (tokens per verify step), the server's where it was measured
(``/server_info`` after a flush, else ``/metrics``), else the requests' (tokens over verify steps),
the median over the concurrency levels, else the single-stream runs'; the single-stream speedup
over its own baseline (the baseline measured on the same workload); and the output-throughput
ratio to that baseline at the highest concurrency level both measured.
"""

from __future__ import annotations

import re
from typing import Optional

import polars as pl

from sweep.analysis.frames import BENCHMARK, Tables, as_dict, axes_of, configurations, points_frame

SERVER_FIRST = ("accept_length_server", "metrics_spec_accept_length", "accept_length_metrics", "accept_length_requests")
# the name of an axis that chose the workload in a directory written before the role benchmark (and launch ids)
_CHOOSES_WORKLOAD = re.compile(r"workload|prompts", re.IGNORECASE)
SCHEMA: dict[str, type[pl.DataType]] = {
    "configuration": pl.String,
    "workload": pl.String,
    "point_id": pl.String,
    "label": pl.String,
    "accept_length": pl.Float64,
    "accept_source": pl.String,
    "speedup": pl.Float64,
    "throughput_ratio": pl.Float64,
    "concurrency": pl.Int64,
    "order": pl.Int64,
}


def short(name: Optional[str]) -> Optional[str]:
    """A workload's name with its files' directories dropped (``sharegpt:/data/coding.json`` ->
    ``sharegpt:coding.json``)."""
    return None if name is None else re.sub(r"[^:,=()]*/", "", name)


def point_workloads(tables: Tables) -> dict[str, str]:
    """{point_id: the workload its requests name} (the most frequent, for a point that ran several)."""
    req = tables.get("requests")
    if req is None or "workload" not in req.collect_schema().names():
        return {}
    counts = (
        req.select("point_id", "workload")
        .drop_nulls()
        .group_by("point_id", "workload")
        .len()
        .sort(["point_id", "len", "workload"], descending=[False, True, False])
        .collect()
    )
    return {r["point_id"]: r["workload"] for r in counts.unique("point_id", keep="first").iter_rows(named=True)}


def _chooses_workload(row: dict, axis: str) -> bool:
    """Whether a points row's ``axis`` chooses its workload: its recorded role ``benchmark``; in a
    directory written before that role (and launch ids, which came with it), its name."""
    if as_dict(row.get("param_roles")).get(axis) == BENCHMARK:
        return True
    return row.get("launch_id") is None and _CHOOSES_WORKLOAD.search(axis) is not None


def _configuration(row: dict) -> str:
    axes = {a: v for a, v in axes_of(row).items() if not _chooses_workload(row, a) and v is not None}
    return " ".join(f"{a}={v}" for a, v in axes.items()) or (row.get("label") or row["point_id"])


def _median(values: list) -> Optional[float]:
    vals = sorted(v for v in values if v is not None and v > 0)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def _accept(tables: Tables) -> dict[str, tuple[Optional[float], Optional[str]]]:
    """{point_id: (accept length, where it came from)}."""
    out: dict[str, tuple[Optional[float], Optional[str]]] = {}
    levels = tables["levels"].collect() if "levels" in tables else pl.DataFrame()
    cols = [c for c in SERVER_FIRST if c in levels.columns]
    for (pid,), g in levels.group_by("point_id") if levels.height and cols else []:
        for c in cols:
            if (m := _median(g[c].to_list())) is not None:
                out[pid] = (m, "server" if c != "accept_length_requests" else "requests")
                break
    single = tables["single_stream"].collect() if "single_stream" in tables else pl.DataFrame()
    if single.height and "accept_length" in single.columns:
        for (pid,), g in single.group_by("point_id"):
            if pid not in out and (m := _median(g["accept_length"].to_list())) is not None:
                out[pid] = (m, "requests")
    return out


def by_workload(tables: Tables, single: pl.DataFrame, levels: pl.DataFrame) -> pl.DataFrame:
    """One row per speculative point, keyed on (configuration, workload) (``SCHEMA``); empty unless
    the results hold more than one workload. ``single``/``levels``: ``speedups.speedup_table`` and
    ``level_speedups`` of the same tables."""
    named = point_workloads(tables)
    if len(set(named.values())) < 2:
        return pl.DataFrame(schema=SCHEMA)
    points = {r["point_id"]: r for r in points_frame(tables).iter_rows(named=True)}
    order = {r["point_id"]: r["order"] for r in configurations(tables).iter_rows(named=True)}
    accept = _accept(tables)
    speed = {r["point_id"]: r["speedup"] for r in single.iter_rows(named=True)} if single.height else {}
    top: dict[str, tuple[int, float]] = {}
    for r in levels.filter(pl.col("throughput_ratio").is_not_null()).iter_rows(named=True) if levels.height else []:
        if r["point_id"] not in top or r["concurrency"] > top[r["point_id"]][0]:
            top[r["point_id"]] = (r["concurrency"], r["throughput_ratio"])
    rows = []
    for pid, p in points.items():
        if p.get("baseline") or pid not in named:
            continue
        length, source = accept.get(pid, (None, None))
        c, ratio = top.get(pid, (None, None))
        if length is None and speed.get(pid) is None and ratio is None:
            continue
        rows.append(
            {
                "configuration": _configuration(p),
                "workload": short(named[pid]),
                "point_id": pid,
                "label": p.get("label"),
                "accept_length": length,
                "accept_source": source,
                "speedup": speed.get(pid),
                "throughput_ratio": ratio,
                "concurrency": c,
                "order": order.get(pid),
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA).sort(["order", "workload"], nulls_last=True)


def lines(frame: pl.DataFrame) -> list[str]:
    """One line per configuration measured on several workloads: ``k26_100k steps=2: coding accept
    3.10, speedup 1.80x; chat accept 2.20, speedup 1.20x``."""
    out = []
    for (config,), g in frame.group_by("configuration", maintain_order=True):
        if g["workload"].n_unique() < 2:
            continue
        parts = []
        for r in g.iter_rows(named=True):
            acc = "-" if r["accept_length"] is None else f"{r['accept_length']:.2f}"
            sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
            tail = "" if r["throughput_ratio"] is None else f", {r['throughput_ratio']:.2f}x at C={r['concurrency']}"
            parts.append(f"{r['workload']} accept {acc}, speedup {sp}{tail}")
        out.append(f"{config}: " + "; ".join(parts))
    return out
