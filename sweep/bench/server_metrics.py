"""What the server says about itself: ``/server_info``, ``/flush_cache`` and Prometheus ``/metrics``.

All of it is best effort: a server that lacks an endpoint (an older SGLang, a plain OpenAI server,
``--enable-metrics`` not given) yields ``None`` / ``False`` / ``{}``, never an exception, because the
benchmark's own measurements do not depend on it. Only ``probe`` raises, when the server cannot be
reached at all.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sweep.errors import BenchError

INFO_ROUTES = ("/server_info", "/get_server_info")  # new name first, then the pre-0.5 one
MONOTONIC_TYPES = {"counter", "histogram", "summary", "gaugehistogram"}
SIDE_TIMEOUT_S = 30.0  # side requests must not wait as long as a generation may


async def probe(client: httpx.AsyncClient, url: str) -> Optional[dict]:
    """``/server_info`` of a reachable server (None if it has no such route).

    Raises BenchError when nothing answers at ``url``: that is the one failure that stops a
    benchmark before it starts.
    """
    try:
        return await _server_info(client, url)
    except httpx.TransportError as e:
        raise BenchError(f"cannot reach the server at {url}: {type(e).__name__}: {e}",
                         fix="check --url (http://HOST:PORT of a running SGLang server) and that "
                             "the server finished starting (GET /health answers 200)") from e


async def _server_info(client: httpx.AsyncClient, url: str) -> Optional[dict]:
    for route in INFO_ROUTES:
        resp = await client.get(url.rstrip("/") + route, timeout=SIDE_TIMEOUT_S)
        if resp.status_code == 200:
            try:
                info = resp.json()
            except ValueError:
                return None
            return info if isinstance(info, dict) else None
    return None


async def server_info(client: httpx.AsyncClient, url: str) -> Optional[dict]:
    """``/server_info`` (fallback ``/get_server_info``), or None if unavailable for any reason."""
    try:
        return await _server_info(client, url)
    except httpx.HTTPError:
        return None


def accept_length_of(info: Optional[dict]) -> Optional[float]:
    """The server's average accept length since its last flush, or None without speculation.

    SGLang reports it per DP rank in ``internal_states[*].avg_spec_accept_length``; older versions
    put it at the top level. Ranks are averaged; a value <= 0 means "nothing verified yet".
    """
    if not info:
        return None
    states = info.get("internal_states")
    values = []
    if isinstance(states, list):
        values = [s.get("avg_spec_accept_length") for s in states if isinstance(s, dict)]
    if not any(isinstance(v, (int, float)) for v in values):
        values = [info.get("avg_spec_accept_length")]
    nums = [float(v) for v in values if isinstance(v, (int, float)) and v > 0]
    return sum(nums) / len(nums) if nums else None


def model_name_of(info: Optional[dict]) -> str:
    """The model name OpenAI routes expect (``served_model_name``, else the path)."""
    if info:
        for key in ("served_model_name", "model_path"):
            if isinstance(info.get(key), str) and info[key]:
                return info[key]
    return "default"


async def flush_cache(client: httpx.AsyncClient, url: str, *, tries: int = 3, wait_s: float = 0.5) -> bool:
    """POST ``/flush_cache``; True when the server flushed (which also resets its accept length).

    SGLang answers 400 while requests are still running (e.g. ones our client timed out on that
    the server is still finishing): retried a few times, then reported as not flushed.
    """
    for attempt in range(tries):
        try:
            resp = await client.post(url.rstrip("/") + "/flush_cache", timeout=SIDE_TIMEOUT_S)
        except httpx.HTTPError:
            return False
        if resp.status_code == 200:
            return True
        if resp.status_code != 400:
            return False
        if attempt + 1 < tries:
            await asyncio.sleep(wait_s)
    return False


def parse_prometheus(text: str) -> dict[str, tuple[str, float]]:
    """Prometheus text -> ``{'name{label="v",...}': (family type, value)}``."""
    out: dict[str, tuple[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = (family.type, float(s.value))
    return out


async def scrape(client: httpx.AsyncClient, url: str) -> Optional[dict[str, tuple[str, float]]]:
    """The server's ``/metrics`` parsed, or None (no metrics enabled, unreachable, unparsable)."""
    try:
        resp = await client.get(url.rstrip("/") + "/metrics", timeout=SIDE_TIMEOUT_S)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    try:
        return parse_prometheus(resp.text)
    except ValueError:
        return None


def metric_deltas(before: Optional[dict], after: Optional[dict]) -> dict[str, Any]:
    """What changed over a level: ``{"delta": {...}, "gauge": {...}}``, ``{}`` without metrics.

    Counters, histogram buckets/sums/counts and summaries are differenced (after - before; a
    sample missing before counts from 0). Gauges (running requests, accept length...) are a
    state, not an amount, so their value after the level is kept.
    """
    if not before or not after:
        return {}
    delta: dict[str, float] = {}
    gauge: dict[str, float] = {}
    for key, (kind, value) in after.items():
        if kind in MONOTONIC_TYPES:
            delta[key] = value - before.get(key, (kind, 0.0))[1]
        else:
            gauge[key] = value
    return {"delta": delta, "gauge": gauge}


def deltas_json(before: Optional[dict], after: Optional[dict]) -> str:
    return json.dumps(metric_deltas(before, after), sort_keys=True)
