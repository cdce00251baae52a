"""What the server says about itself: ``/server_info``, ``/flush_cache`` and Prometheus ``/metrics``.

All of it is best effort: a server that lacks an endpoint (an older SGLang, a plain OpenAI server,
``--enable-metrics`` not given) yields ``None`` / ``False`` / ``{}``, never an exception, because the
benchmark's own measurements do not depend on it. Only ``probe`` raises, when the server cannot be
reached at all.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple, Optional

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sweep.core import BenchError

_INFO_ROUTES = ("/server_info", "/get_server_info")  # new name first, then the pre-0.5 one
_SIDE_TIMEOUT_S = 30.0  # side requests must not wait as long as a generation may


async def probe(client: httpx.AsyncClient, url: str) -> Optional[dict]:
    """``/server_info`` of a reachable server (None if it has no such route).

    Raises BenchError when nothing answers at ``url``: that is the one failure that stops a
    benchmark before it starts.
    """
    try:
        return await _server_info(client, url)
    except httpx.TransportError as e:
        raise BenchError(
            f"cannot reach the server at {url}: {type(e).__name__}: {e}",
            fix="check --url (http://HOST:PORT of a running SGLang server) and that "
            "the server finished starting (GET /health answers 200)",
        ) from e


async def _server_info(client: httpx.AsyncClient, url: str) -> Optional[dict]:
    for route in _INFO_ROUTES:
        resp = await client.get(url.rstrip("/") + route, timeout=_SIDE_TIMEOUT_S)
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


async def flush_cache(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Optional[dict[str, str]] = None,
    tries: int = 3,
    wait_s: float = 0.5,
) -> bool:
    """POST ``/flush_cache``; True when the server flushed (which also resets its accept length).

    SGLang answers 400 while requests are still running (e.g. ones our client timed out on that
    the server is still finishing): retried a few times, then reported as not flushed. It is an
    admin route: with ``--admin-api-key`` it wants that key (``headers``: ``Endpoint.admin_headers``); a 401 or
    403 raises BenchError, since no level could be flushed.
    """
    for attempt in range(tries):
        try:
            resp = await client.post(url.rstrip("/") + "/flush_cache", timeout=_SIDE_TIMEOUT_S, headers=headers)
        except httpx.HTTPError:
            return False
        if resp.status_code == 200:
            return True
        if resp.status_code in (401, 403):  # before anything is measured: every level would be unflushed
            raise BenchError(
                f"the server at {url} answered {resp.status_code} to POST /flush_cache, which "
                "resets its cache and accept-length average before each level: it wants its admin key",
                fix="give the server's --admin-api-key (sweep bench: --admin-api-key KEY or "
                "$SGLANG_ADMIN_API_KEY), or do not flush (sweep bench --no-flush; "
                "benchmark.flush_between_levels: false)",
            )
        if resp.status_code != 400:
            return False
        if attempt + 1 < tries:
            await asyncio.sleep(wait_s)
    return False


class Sample(NamedTuple):
    """One Prometheus sample: ``name{labels} value`` of a family of type ``kind``."""

    name: str  # the sample's name, e.g. sglang:time_to_first_token_seconds_bucket
    labels: tuple[tuple[str, str], ...]  # sorted by label name
    family: str  # the family's name, e.g. sglang:time_to_first_token_seconds
    kind: str  # counter | gauge | histogram | summary | gaugehistogram | info | stateset | unknown
    value: float

    @property
    def labels_text(self) -> str:
        """``le="0.1",model_name="m"``, as in the exposition format ("" without labels)."""
        return ",".join(f'{k}="{_escape(v)}"' for k, v in self.labels)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _parse_samples(text: str) -> list[Sample]:
    """Prometheus exposition text -> its samples (ValueError if it is not that format)."""
    return [
        Sample(s.name, tuple(sorted(s.labels.items())), family.name, family.type, float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def _keyed(samples: list[Sample]) -> dict[str, tuple[str, float]]:
    return {f"{s.name}{{{s.labels_text}}}" if s.labels else s.name: (s.kind, s.value) for s in samples}


def _parse_prometheus(text: str) -> dict[str, tuple[str, float]]:
    """Prometheus text -> ``{'name{label="v",...}': (family type, value)}``."""
    return _keyed(_parse_samples(text))


async def scrape_text(client: httpx.AsyncClient, url: str) -> Optional[str]:
    """The server's ``/metrics`` text, or None (no metrics enabled, unreachable)."""
    try:
        resp = await client.get(url.rstrip("/") + "/metrics", timeout=_SIDE_TIMEOUT_S)
    except httpx.HTTPError:
        return None
    return resp.text if resp.status_code == 200 else None


def samples_of(text: Optional[str]) -> Optional[list[Sample]]:
    """``_parse_samples``, None for no text or text that does not parse."""
    if text is None:
        return None
    try:
        return _parse_samples(text)
    except ValueError:
        return None


async def scrape(client: httpx.AsyncClient, url: str) -> Optional[dict[str, tuple[str, float]]]:
    """The server's ``/metrics`` parsed by ``_parse_prometheus``, or None (no metrics, unparsable)."""
    samples = samples_of(await scrape_text(client, url))
    return None if samples is None else _keyed(samples)


class Sampler:
    """Scrapes ``/metrics`` while a level runs: at ``every_s`` / 2, then every ``every_s``.

    Only the text is kept; parsing (about 30 ms for SGLang's 70 KB) waits until the level is over,
    so the event loop that times the requests does no more than one HTTP read per scrape. Past
    ``keep`` scrapes every other one is dropped and the period doubles, so a long level stays
    evenly sampled with at most ``keep`` scrapes.
    """

    def __init__(self, client: httpx.AsyncClient, url: str, every_s: float, keep: int = 32):
        self.texts: list[str] = []
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(client, url, max(every_s, 0.001), max(2, keep)))

    async def _run(self, client: httpx.AsyncClient, url: str, every_s: float, keep: int) -> None:
        wait = every_s / 2
        while not await self._stopped_within(wait):
            text = await scrape_text(client, url)
            if text is not None:
                self.texts.append(text)
            if len(self.texts) >= keep:
                self.texts = self.texts[::-2][::-1]  # the latest, and every other one before it
                every_s *= 2
            wait = every_s

    async def _stopped_within(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
            return True
        except asyncio.TimeoutError:
            return False

    async def stop(self, wait_s: float = 2.0) -> list[str]:
        """Stop sampling (a scrape still in flight after ``wait_s`` is dropped); the texts taken."""
        self._stop.set()
        try:
            await asyncio.wait_for(self._task, wait_s)
        except asyncio.TimeoutError:
            pass
        return self.texts
