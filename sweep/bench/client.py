"""One client for SGLang's native ``/generate`` and its OpenAI routes, streaming or not.

Why its own parser: under speculative decoding one stream chunk carries every token accepted in a
verify step, so counting one token per chunk (what the scripts this replaces did) undercounts by
the accept length. Tokens are therefore counted from the server's own cumulative counts:

- ``generate``: every chunk's ``meta_info.completion_tokens`` (cumulative) -- **exact**.
  The chunk text is cumulative too (SGLang's default), so only the latest text is kept.
- ``completions`` / ``chat``: the request asks for ``stream_options.continuous_usage_stats``, and
  SGLang then puts the cumulative ``usage`` in every chunk -- **exact**. A server that ignores that
  option only reports the total in the final usage chunk: the total is still exact, but how it
  splits over chunks is unknown, so it is spread evenly over the chunks that carried text
  (``RequestRecord.tokens_exact`` is False, and ITL/TTFT-per-token figures are estimates). A
  server that sends no usage at all leaves one token per text chunk, a lower bound.
- Accept length, verify count and the accept histogram come from ``meta_info`` and so exist only
  on ``generate``; SGLang puts them in the final chunk only (once the request finished), the
  histogram as ``spec_accept_histogram`` (0.5.10) or ``spec_correct_drafts_histogram`` (0.5.23; the
  builds between send both). The OpenAI routes carry them only in ``sglext.spec_tokens_details``,
  and only for a request that asks (``return_spec_tokens_details``, 0.5.23), which these do not.

A server started with ``--api-key`` gets it on every request (``Authorization: Bearer``): the
benchmark is given an ``Endpoint`` (its URL and keys, passed explicitly as httpx passes auth to a
client), and ``Clients``/``make_client``/``send_one`` take ``api_key=``. A server with
``--admin-api-key`` wants that key, not the api key, on its admin routes (``/flush_cache``):
``Endpoint(url, api_key=KEY, admin_key=ADMIN)``.

Errors of one request are data (``ok=False`` plus a short ``error``: ``http 503: ...``,
``timeout after 600s``, ``connect: ...``, ``disconnect: ...``, ``malformed: ...``,
``server error: ...``), never exceptions: one failed request must not stop a level.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import httpx

try:  # orjson parses a stream chunk several times faster; the stdlib is the fallback
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - depends on the environment
    from json import loads as _loads

ROUTES = {"generate": "/generate", "completions": "/v1/completions", "chat": "/v1/chat/completions"}
APIS = tuple(ROUTES)


@dataclass(frozen=True)
class Endpoint:
    """A server the benchmark talks to: its base URL and the keys it wants. ``api_key`` goes on every
    request as ``Authorization: Bearer``; ``admin_key`` (the server's ``--admin-api-key``) on its
    admin routes instead (SGLang's ``AuthLevel.ADMIN_OPTIONAL``, ``/flush_cache`` among them), else
    the api key there too, as SGLang's own warmup sends ``/freeze_gc``. The keys never show in its repr."""

    url: str
    api_key: Optional[str] = field(default=None, repr=False)
    admin_key: Optional[str] = field(default=None, repr=False)

    @classmethod
    def of(cls, server: "Endpoint | str") -> "Endpoint":
        """``server`` as an Endpoint (a bare URL: a server that wants no key)."""
        return server if isinstance(server, Endpoint) else cls(server)

    def admin_headers(self) -> dict[str, str]:
        return auth_headers(self.admin_key or self.api_key)


def auth_headers(key: Optional[str]) -> dict[str, str]:
    """``{"Authorization": "Bearer <key>"}`` for ``key``, or {} without one."""
    return {"Authorization": f"Bearer {key}"} if key else {}


class MalformedStream(Exception):
    """The server sent something that is not the documented stream format."""


class ServerStreamError(Exception):
    """The server reported an error inside a 200 stream (``data: {"error": ...}``)."""


@dataclass
class RequestRecord:
    """What one request measured. Times in seconds; ``*_s`` offsets are from the send."""

    start_at: float  # epoch seconds at send
    start_mono: float  # time.perf_counter() at send (for in-flight accounting)
    latency_s: Optional[float] = None  # send to last byte (to the failure when it failed)
    ttft_s: Optional[float] = None  # send to the first chunk carrying a token (None if not streamed)
    # send to the first chunk whose text is not empty (bench_serving's TTFT); later than ttft_s where
    # the first token's text is held back by the detokenizer (part of a character, a special token)
    first_text_s: Optional[float] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    chunk_times_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    accept_length: Optional[float] = None
    spec_verify_ct: Optional[int] = None
    accept_histogram: Optional[list[int]] = None  # entry k: verify steps that accepted exactly k drafts
    finish_reason: Optional[str] = None
    server_latency_s: Optional[float] = None  # meta_info e2e_latency, the server's own clock
    ok: bool = False
    error: Optional[str] = None
    http_status: Optional[int] = None
    tokens_exact: bool = True  # per-chunk counts came from the server (see module docstring)
    text: str = ""

    @property
    def chunks(self) -> int:
        return len(self.chunk_tokens)

    @property
    def end_mono(self) -> float:
        return self.start_mono + (self.latency_s or 0.0)


def build_payload(
    api: str,
    prompt: str,
    *,
    max_tokens: int,
    temperature: float = 0.0,
    ignore_eos: bool = True,
    model: str = "default",
    stream: bool = True,
    input_ids: Optional[Sequence[int]] = None,
    messages: Optional[Sequence[dict]] = None,
) -> dict[str, Any]:
    """The JSON body of one request for ``api``. ``input_ids``: the prompt as token ids, sent as
    such by ``generate`` (``input_ids``) and ``completions`` (``prompt`` as a list of ids, as the
    OpenAI API and SGLang take it), ignored by ``chat`` (it sends ``prompt``); ``messages``: the chat
    turns ``chat`` sends instead of one user message of ``prompt``."""
    if api == "generate":
        body_in: dict[str, Any] = {"input_ids": list(input_ids)} if input_ids is not None else {"text": prompt}
        return {
            **body_in,
            "stream": stream,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": temperature, "ignore_eos": ignore_eos},
        }
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "ignore_eos": ignore_eos,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    if api == "completions":
        body["prompt"] = list(input_ids) if input_ids is not None else prompt
    elif api == "chat":
        body["messages"] = [dict(m) for m in messages] if messages else [{"role": "user", "content": prompt}]
    else:
        raise ValueError(f"unknown api {api!r}; use one of {', '.join(APIS)}")
    return body


class SSESplitter:
    """Turns the bytes of a ``text/event-stream`` body into its ``data:`` payloads.

    Reads may split a line anywhere; the partial line is kept for the next read. Comments,
    ``event:`` lines and blank separators are dropped (SGLang sends one data line per event).
    """

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        lines = (self._rest + data).split(b"\n") if self._rest else data.split(b"\n")
        self._rest = lines.pop()
        return [line[5:].strip() for line in lines if line.startswith(b"data:")]

    def flush(self) -> list[bytes]:
        rest, self._rest = self._rest, b""
        return [rest[5:].strip()] if rest.startswith(b"data:") else []


def _finish_type(fr: Any) -> Optional[str]:
    if isinstance(fr, dict):
        return fr.get("type")
    return fr if isinstance(fr, str) else None


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


class StreamParser:
    """Accumulates one response's chunks for one API. Pure: payload bytes and times in."""

    def __init__(self, api: str):
        if api not in ROUTES:
            raise ValueError(f"unknown api {api!r}; use one of {', '.join(APIS)}")
        self.api = api
        self.done = False  # "[DONE]" seen
        self.ttft_s: Optional[float] = None
        self.first_text_s: Optional[float] = None
        self.prompt_tokens: Optional[int] = None
        self.completion_tokens = 0
        self.chunk_times: list[float] = []
        self.chunk_tokens: list[int] = []
        self.finish_reason: Optional[str] = None
        self.accept_length: Optional[float] = None
        self.verify_ct: Optional[int] = None
        self.accept_histogram: Optional[list[int]] = None
        self.server_latency: Optional[float] = None
        self.exact = api == "generate"
        self._usage_total: Optional[int] = None
        self._text = ""
        self._pieces: list[str] = []

    # -- one event -------------------------------------------------------------------------
    def feed(self, payload: bytes, t: float) -> None:
        """One ``data:`` payload that arrived ``t`` seconds after the send."""
        if payload == b"[DONE]":
            self.done = True
            return
        obj = self._object(payload)
        if self.api == "generate":
            self._generate(obj, t)
        else:
            self._openai(obj, t)

    def feed_whole(self, body: bytes, t: float) -> None:
        """A non-streaming response body, received whole at ``t``."""
        self.feed(body, t)
        self.ttft_s = self.first_text_s = None  # nothing was streamed: the first token's time is unknown
        self.done = True

    @staticmethod
    def _object(payload: bytes) -> dict:
        try:
            obj = _loads(payload)
        except ValueError as e:
            raise MalformedStream(f"not JSON: {payload[:80]!r}") from e
        if not isinstance(obj, dict):
            raise MalformedStream(f"not a JSON object: {payload[:80]!r}")
        if "error" in obj and obj["error"]:
            raise ServerStreamError(_error_text(obj["error"]))
        return obj

    def _count(self, tokens: int, t: float) -> None:
        if tokens < 0:
            raise MalformedStream(f"token count went backwards by {-tokens}")
        if tokens:
            if self.ttft_s is None:
                self.ttft_s = t
            self.chunk_times.append(t)
            self.chunk_tokens.append(tokens)

    def _generate(self, obj: dict, t: float) -> None:
        meta = obj.get("meta_info")
        if not isinstance(meta, dict) or not isinstance(meta.get("completion_tokens"), int):
            raise MalformedStream("chunk without meta_info.completion_tokens")
        ct = meta["completion_tokens"]
        self._count(ct - self.completion_tokens, t)
        self.completion_tokens = ct
        self.prompt_tokens = meta.get("prompt_tokens", self.prompt_tokens)
        self.finish_reason = _finish_type(meta.get("finish_reason")) or self.finish_reason
        if meta.get("spec_accept_length") is not None:
            self.accept_length = float(meta["spec_accept_length"])
        if meta.get("spec_verify_ct") is not None:
            self.verify_ct = int(meta["spec_verify_ct"])
        hist = meta.get("spec_correct_drafts_histogram", meta.get("spec_accept_histogram"))
        if isinstance(hist, list) and all(isinstance(x, int) for x in hist):
            self.accept_histogram = list(hist)
        if meta.get("e2e_latency") is not None:
            self.server_latency = float(meta["e2e_latency"])
        text = obj.get("text")
        if isinstance(text, str):
            self._text = text
            if text and self.first_text_s is None:
                self.first_text_s = t

    def _openai(self, obj: dict, t: float) -> None:
        usage = obj.get("usage") or None
        ct = usage.get("completion_tokens") if isinstance(usage, dict) else None
        if isinstance(usage, dict) and usage.get("prompt_tokens") is not None:
            self.prompt_tokens = usage["prompt_tokens"]
        choices = obj.get("choices") or []
        if not choices:  # the final usage chunk: the exact total
            if isinstance(ct, int):
                self._usage_total = ct
            return
        choice = choices[0]
        if self.api == "completions":
            piece = choice.get("text") or ""
        else:
            delta = choice.get("delta") or choice.get("message") or {}
            piece = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
        if piece:
            self._pieces.append(piece)
            if self.first_text_s is None:
                self.first_text_s = t
        self.finish_reason = _finish_type(choice.get("finish_reason")) or self.finish_reason
        if isinstance(ct, int):  # continuous usage stats: the server's cumulative count
            self.exact = True
            self._count(ct - self.completion_tokens, t)
            self.completion_tokens = ct
        elif piece:  # no count from the server: one per text chunk, fixed up in finish()
            self._count(1, t)
            self.completion_tokens += 1

    # -- the end -----------------------------------------------------------------------------
    def finish(self) -> None:
        """Reconcile estimated per-chunk counts with the final usage total (OpenAI routes)."""
        total = self._usage_total
        if total is None or total == self.completion_tokens:
            return
        n = len(self.chunk_tokens)
        if not self.exact and n:
            # spread the exact total evenly over the chunks (estimate; see module docstring)
            spread = [(i + 1) * total // n - i * total // n for i in range(n)]
            kept = [(t, k) for t, k in zip(self.chunk_times, spread) if k > 0]
            self.chunk_times = [t for t, _ in kept]
            self.chunk_tokens = [k for _, k in kept]
            self.ttft_s = self.chunk_times[0] if kept else None
        self.completion_tokens = total

    @property
    def text(self) -> str:
        return self._text if self.api == "generate" else "".join(self._pieces)

    def fill(self, rec: RequestRecord) -> None:
        rec.ttft_s = self.ttft_s
        rec.first_text_s = self.first_text_s
        rec.prompt_tokens = self.prompt_tokens
        rec.completion_tokens = self.completion_tokens
        rec.chunk_times_s = self.chunk_times
        rec.chunk_tokens = self.chunk_tokens
        rec.accept_length = self.accept_length
        rec.spec_verify_ct = self.verify_ct
        rec.accept_histogram = self.accept_histogram
        rec.finish_reason = self.finish_reason
        rec.server_latency_s = self.server_latency
        rec.tokens_exact = self.exact
        rec.text = self.text


def _snippet(body: bytes, limit: int = 200) -> str:
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    return text[:limit] + ("..." if len(text) > limit else "")


def make_client(
    timeout_s: float,
    *,
    connections: int = 1,
    ssl_context: Optional[ssl.SSLContext] = None,
    api_key: Optional[str] = None,
) -> httpx.AsyncClient:
    """An AsyncClient with keep-alive and no proxies from the environment.

    ``trust_env=False`` so an ``HTTP_PROXY`` in the environment never sits between the benchmark
    and the server. Idle connections are dropped after 4 s, before uvicorn's 5 s keep-alive
    timeout can close them under a request. The per-request deadline is enforced in ``send``;
    httpx's own timeouts are the same value so a silent socket cannot outlive it. ``api_key``
    goes on every request as ``Authorization: Bearer``.
    """
    return httpx.AsyncClient(
        headers=auth_headers(api_key),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=4.0),
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0)),
        trust_env=False,
        verify=ssl_context if ssl_context is not None else True,
    )


class Clients:
    """The benchmark's HTTP clients, all on one event loop: one per in-flight request slot, each
    holding one keep-alive connection, and one for side requests (server_info, metrics, flush).

    Why not one pooled client for everything: httpx's connection pool rescans every connection it
    holds at each request start and end (O(connections) per request, about 1 ms at 250 in flight),
    and at the end of a closed-loop wave those scans run back to back and hold up the reading of
    the other responses. Measured by tests/perf/bench_client.py (C=250, --fake-speed 10): one
    shared pool took 2.5x the CPU per chunk, and its mean latency was 4.2% above the server's own
    e2e latency; one connection per slot, 0.5%. Slots are created on first use and kept across
    levels; all share one SSL context (building one costs ~15 ms).
    """

    def __init__(self, timeout_s: float, api_key: Optional[str] = None):
        self.timeout_s = timeout_s
        self.api_key = api_key
        self._ssl = httpx.create_ssl_context()
        self._slots: list[httpx.AsyncClient] = []
        self.side = make_client(timeout_s, connections=4, ssl_context=self._ssl, api_key=self.api_key)

    def slot(self, i: int) -> httpx.AsyncClient:
        """The client of in-flight slot ``i`` (0-based)."""
        while len(self._slots) <= i:
            self._slots.append(make_client(self.timeout_s, ssl_context=self._ssl, api_key=self.api_key))
        return self._slots[i]

    async def aclose(self) -> None:
        await asyncio.gather(self.side.aclose(), *(c.aclose() for c in self._slots), return_exceptions=True)

    async def __aenter__(self) -> "Clients":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def send(
    client: httpx.AsyncClient,
    url: str,
    api: str,
    prompt: str,
    *,
    max_tokens: int,
    temperature: float = 0.0,
    ignore_eos: bool = True,
    model: str = "default",
    stream: bool = True,
    timeout_s: float = 600.0,
    input_ids: Optional[Sequence[int]] = None,
    messages: Optional[Sequence[dict]] = None,
) -> RequestRecord:
    """Send one request to the server at ``url`` (``http://host:port``) and measure it.

    Times start when the request's body has been written to its connection (httpcore's ``trace``
    extension), i.e. when the server can start on it, not when this coroutine began: at C=250 the
    client interleaves the writes of a burst of sends (a request's body went out ~400 ms after its
    headers in a 250-request wave), and a level's first wave opens its TCP connections; neither is
    the server's latency. Latency ends at the response's last byte. A request that fails before it
    is sent is timed from the call.

    Never raises for anything the server or network does: the record says what happened.
    ``input_ids`` and ``messages``: as in ``build_payload``.
    """
    payload = build_payload(
        api,
        prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        ignore_eos=ignore_eos,
        model=model,
        stream=stream,
        input_ids=input_ids,
        messages=messages,
    )
    parser = StreamParser(api)
    clock = time.perf_counter
    rec = RequestRecord(start_at=time.time(), start_mono=clock())
    t0 = rec.start_mono
    on_wire: list[float] = []

    async def trace(event: str, info: dict) -> None:
        if event.endswith("send_request_body.complete"):
            on_wire.append(clock())

    error: Optional[str] = None
    last_byte: Optional[float] = None  # the response's last data, before the connection's release
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream(
                "POST", url.rstrip("/") + ROUTES[api], json=payload, extensions={"trace": trace}
            ) as resp:
                if on_wire:  # time from the moment the request went on the wire (see docstring)
                    rec.start_at += on_wire[-1] - t0
                    rec.start_mono = t0 = on_wire[-1]
                rec.http_status = resp.status_code
                if resp.status_code != 200:
                    error = f"http {resp.status_code}: {_snippet(await resp.aread())}"
                elif stream:
                    splitter = SSESplitter()
                    async for data in resp.aiter_bytes():
                        last_byte = t = clock() - t0
                        for p in splitter.feed(data):
                            parser.feed(p, t)
                    for p in splitter.flush():
                        parser.feed(p, last_byte or 0.0)
                    if not parser.done:
                        error = "disconnect: stream ended before [DONE]"
                else:
                    body = await resp.aread()
                    last_byte = clock() - t0
                    parser.feed_whole(body, last_byte)
        parser.finish()
    except TimeoutError:
        error = f"timeout after {timeout_s:g}s"
    except httpx.TimeoutException as e:
        error = f"timeout: {type(e).__name__}"
    except httpx.ConnectError as e:
        error = f"connect: {e or type(e).__name__}"
    except httpx.TransportError as e:  # server died or closed mid-response
        error = f"disconnect: {e or type(e).__name__}"
    except MalformedStream as e:
        error = f"malformed: {e}"
    except ServerStreamError as e:
        error = f"server error: {e}"
    except httpx.HTTPError as e:
        error = f"{type(e).__name__}: {e}"
    rec.latency_s = last_byte if error is None and last_byte is not None else clock() - t0
    parser.fill(rec)
    rec.ok = error is None
    rec.error = error
    return rec


def send_one(
    url: str,
    prompt: str = "Say hello.",
    *,
    api: str = "generate",
    max_tokens: int = 8,
    stream: bool = False,
    timeout_s: float = 60.0,
    temperature: float = 0.0,
    ignore_eos: bool = False,
    model: str = "default",
    api_key: Optional[str] = None,
) -> RequestRecord:
    """One request on its own (e.g. the host's "ready" generate), from synchronous code; ``api_key``
    as in ``make_client``.

    Creates and closes its own client; must not be called from inside a running event loop
    (use ``send`` there).
    """

    async def go() -> RequestRecord:
        async with make_client(timeout_s, api_key=api_key) as client:
            return await send(
                client,
                url,
                api,
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                ignore_eos=ignore_eos,
                model=model,
                stream=stream,
                timeout_s=timeout_s,
            )

    return asyncio.run(go())
