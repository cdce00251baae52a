"""The fake server's HTTP side (aiohttp, in the scheduler's event loop): SGLang's routes, status codes,
response shapes and uvicorn's log lines, from "Uvicorn running on" through the warmup to shutdown.

Routes: ``/generate``, ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``, ``/health``,
``/health_generate``, ``/model_info`` (``/get_model_info``), ``/server_info`` (``/get_server_info``),
``/flush_cache``, and ``/metrics`` with ``--enable-metrics``. Until the warmup request has gone through,
the health routes answer 503; then the log says ``The server is fired up and ready to roll!``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterator, Optional

import aiohttp
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from sweep.sglang.fake import model, openai_api, text, tracebacks
from sweep.sglang.fake.engine import Engine, Req
from sweep.sglang.fake.log import Log

SAMPLING_KEYS = frozenset(
    "max_new_tokens min_new_tokens temperature top_p top_k min_p frequency_penalty presence_penalty "
    "repetition_penalty stop stop_token_ids ignore_eos skip_special_tokens spaces_between_special_tokens "
    "no_stop_trim n json_schema regex ebnf structural_tag custom_params stream_interval logit_bias "
    "sampling_seed".split())
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's SamplingParams default
WARMUP_PROMPT = "The capital city of France is"


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def json_response(obj: Any, status: int = 200) -> web.Response:
    return web.Response(text=dumps(obj), status=status, content_type="application/json")


class UvicornAccessLogger(AbstractAccessLogger):
    """``INFO:     127.0.0.1:PORT - "POST /generate HTTP/1.1" 200 OK`` on stdout, as uvicorn logs."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:  # noqa: A002
        peer = request.transport.get_extra_info("peername") if request.transport else None
        client = f"{peer[0]}:{peer[1]}" if peer else "-"
        Log.access(client, request.method, request.path_qs, response.status, response.reason or "")


def check_sampling(params: Any) -> tuple[int, bool]:
    """SamplingParams' checks, with SGLang's messages. Returns (max_new_tokens, ignore_eos)."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ValueError(f"sampling_params must be a dict, got {type(params).__name__}")
    for key in params:
        if key not in SAMPLING_KEYS:
            raise ValueError(f"SamplingParams.__init__() got an unexpected keyword argument '{key}'")
    try:
        max_new = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        max_new = DEFAULT_MAX_NEW_TOKENS if max_new is None else int(max_new)
        temperature = float(params.get("temperature", 1.0))
        top_p = float(params.get("top_p", 1.0))
        top_k = int(params.get("top_k", -1))
        min_p = float(params.get("min_p", 0.0))
        min_new = int(params.get("min_new_tokens", 0))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Invalid sampling_params: {exc}") from None
    if temperature < 0.0:
        raise ValueError(f"temperature must be non-negative, got {temperature}.")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}.")
    if not 0.0 <= min_p <= 1.0:
        raise ValueError(f"min_p must be in [0, 1], got {min_p}.")
    if top_k < 1 and top_k != -1:
        raise ValueError(f"top_k must be -1 (disable), or at least 1, got {top_k}.")
    if max_new < 0:
        raise ValueError(f"max_new_tokens must be at least 0, got {max_new}.")
    if not 0 <= min_new <= max_new:
        raise ValueError(f"min_new_tokens must be in [0, max_new_tokens({max_new})], got {min_new}.")
    return max_new, bool(params.get("ignore_eos", False))


@dataclass
class ServerConfig:
    host: str
    port: int
    served_model_name: str
    model_path: str
    architecture: str
    version: str
    server_args: dict[str, Any]
    context_len: int
    spec: Optional[model.Spec]
    enable_metrics: bool = False
    incremental: bool = False  # --incremental-streaming-output: chunk text is only the new text
    stream_output: bool = False  # --stream-output: chunk output_ids are only the new ids
    api_key: Optional[str] = None
    warmup_s: float = 6.0  # already divided by the startup speed
    fail_at_serve: bool = False
    crash_after_requests: Optional[int] = None


class FakeServer:
    def __init__(self, cfg: ServerConfig, engine: Engine, on_crash: Callable[[], None]):
        self.cfg = cfg
        self.engine = engine
        self.on_crash = on_crash  # logs nothing: kills the tree and this process
        self.ready = False  # the warmup went through; health answers 200
        self.finished_external = 0
        self._crashing = False
        self.log = Log()
        self.tp0 = Log(" TP0")
        engine.on_finished = self._request_finished
        engine.on_batch = self._batch_starting
        self.depth = model.max_accepted(cfg.spec) if cfg.spec else 0

    # --- faults ---
    def crash(self) -> None:
        """The scheduler dies mid-serve: its traceback, the parent's SIGQUIT line, the tree killed."""
        if self._crashing:
            return
        self._crashing = True
        self.tp0.error("Scheduler hit an exception: "
                       + tracebacks.scheduler_exception("serve", tracebacks.ILLEGAL_ACCESS))
        self.log.error("Received sigquit from a child process. It usually means the child failed.")
        self.on_crash()

    def _batch_starting(self, batch: list[Req]) -> None:
        if self.cfg.fail_at_serve and any(r.external for r in batch):
            self.crash()

    def _request_finished(self, req: Req) -> None:
        limit = self.cfg.crash_after_requests
        if limit is None or not req.external:
            return
        self.finished_external += 1
        if self.finished_external >= limit:
            # let the N-th response reach its client before the process dies
            asyncio.get_running_loop().call_later(0.05, self.crash)

    # --- app ---
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health_generate)
        r.add_post("/generate", self.generate)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat_completions)
        r.add_get("/v1/models", self.models)
        for path in ("/model_info", "/get_model_info"):
            r.add_get(path, self.model_info)
        for path in ("/server_info", "/get_server_info"):
            r.add_get(path, self.server_info)
        r.add_route("GET", "/flush_cache", self.flush_cache)
        r.add_route("POST", "/flush_cache", self.flush_cache)
        if self.cfg.enable_metrics:
            r.add_get("/metrics", self.metrics)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        key = self.cfg.api_key
        if key and not request.path.startswith(("/health", "/metrics")):
            if request.headers.get("Authorization", "") != f"Bearer {key}":
                return json_response({"error": "Unauthorized"}, 401)
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return json_response({"detail": "Not Found"}, 404)
        except web.HTTPMethodNotAllowed:
            return json_response({"detail": "Method Not Allowed"}, 405)

    # --- health ---
    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready else 503)

    async def health_generate(self, request: web.Request) -> web.Response:
        if not self.ready:
            return web.Response(status=503)
        req = self._new_req(WARMUP_PROMPT, 1, ignore_eos=True, external=False)
        self.engine.submit(req)
        try:
            await asyncio.wait_for(self._wait(req), timeout=20.0)
        except asyncio.TimeoutError:
            self.engine.abort(req)
            return web.Response(status=503)
        return web.Response(status=200)

    # --- requests ---
    def _new_req(self, prompt: text.PromptLike, max_new: Optional[int], ignore_eos: bool,
                 external: Optional[bool] = None) -> Req:
        n = text.prompt_tokens(prompt)
        ctx = self.cfg.context_len
        if n >= ctx:
            raise ValueError(f"The input ({n} tokens) is longer than the model's context length ({ctx} tokens).")
        if max_new is None:
            max_new = ctx - n
        if n + max_new > ctx:
            raise ValueError(
                f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You requested "
                f"a total of {n + max_new} tokens: {n} tokens from the input messages and {max_new} tokens for "
                "the completion. Please reduce the number of tokens in the input messages or the completion to "
                "fit within the limit.")
        seed = text.seed_of(prompt)
        stop_len = max_new if ignore_eos else text.natural_length(seed)
        return Req(openai_api.new_id(), n, max_new, stop_len, seed, self.cfg.spec,
                   external=self.ready if external is None else external)

    @staticmethod
    async def _wait(req: Req) -> None:
        while not req.finished:
            await req.event.wait()
            req.event.clear()

    @staticmethod
    async def follow(req: Req) -> AsyncIterator[tuple[int, bool]]:
        """(tokens so far, is_last) per step, as the scheduler produces them."""
        while True:
            await req.event.wait()
            done = req.finished
            marks = req.take_marks()
            for i, mark in enumerate(marks):
                last = done and i == len(marks) - 1
                yield mark, last
                if last:
                    return
            if done:
                yield req.produced, True
                return

    def _finish_reason(self, req: Req) -> Optional[dict[str, Any]]:
        if req.finish_reason == "length":
            return {"type": "length", "length": req.max_new_tokens}
        if req.finish_reason == "stop":
            return {"type": "stop", "matched": text.EOS_TOKEN_ID}
        if req.finish_reason == "abort":
            return {"type": "abort", "message": "Abort before prefill" if not req.produced else "Abort in waiting queue"}
        return None

    def _meta(self, req: Req, tokens: int, final: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"id": req.rid, "finish_reason": self._finish_reason(req) if final else None,
                                "prompt_tokens": req.prompt_tokens, "weight_version": "default",
                                "completion_tokens": tokens, "cached_tokens": 0}
        if final and req.finished_at is not None:
            meta["e2e_latency"] = req.finished_at - req.created
        if self.cfg.spec:
            verify_ct = req.verify_ct
            meta["spec_verify_ct"] = verify_ct
            if verify_ct > 0:
                accepted = max(tokens - 1 - verify_ct, 0)
                meta["spec_accept_length"] = tokens / verify_ct
                meta["spec_accept_rate"] = accepted / (verify_ct * self.depth) if self.depth else 0.0
                meta["spec_accept_token_num"] = accepted
                meta["spec_draft_token_num"] = verify_ct * self.depth
        return meta

    def _result(self, req: Req) -> dict[str, Any]:
        n = req.produced
        return {"text": text.token_text(req.seed, 0, n), "output_ids": text.token_ids(req.seed, 0, n),
                "meta_info": self._meta(req, n, True)}

    def _generate_reqs(self, body: dict[str, Any]) -> tuple[list[Req], bool]:
        max_new, ignore_eos = check_sampling(body.get("sampling_params"))
        prompt = body.get("text")
        if prompt is None:
            prompt = body.get("input_ids")
        if prompt is None:
            raise ValueError("Either text, input_ids or input_embeds should be provided.")
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
            return [self._new_req(prompt, max_new, ignore_eos)], False
        if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
            return [self._new_req(p, max_new, ignore_eos) for p in prompt], True
        raise ValueError("text must be a string or a list of strings; input_ids a list of ints or of lists of ints.")

    async def _read_json(self, request: web.Request) -> Any:
        try:
            return await request.json(loads=json.loads)
        except (ValueError, UnicodeDecodeError) as exc:
            raise web.HTTPUnprocessableEntity(
                text=dumps({"detail": [{"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error",
                                        "input": {}, "ctx": {"error": str(exc)}}]}),
                content_type="application/json") from None

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_json(request)
        if not isinstance(body, dict):
            return json_response({"detail": [{"type": "dict_type", "loc": ["body"],
                                              "msg": "Input should be a valid dictionary"}]}, 422)
        try:
            reqs, batch = self._generate_reqs(body)
            if batch and body.get("stream"):
                raise ValueError("Streaming a batch of prompts is not supported by the fake server; send one prompt.")
        except ValueError as exc:
            return json_response({"error": {"message": str(exc)}}, 400)
        for req in reqs:
            self.engine.submit(req)
        if body.get("stream"):
            return await self._stream_generate(request, reqs[0])
        await asyncio.gather(*(self._wait(r) for r in reqs))
        results = [self._result(r) for r in reqs]
        return json_response(results if batch else results[0])

    @contextlib.contextmanager
    def _abort_on_disconnect(self, req: Req) -> Iterator[None]:
        """The client went away mid-stream: SGLang aborts the request."""
        try:
            yield
        except ConnectionResetError:
            self.engine.abort(req)
        except asyncio.CancelledError:
            self.engine.abort(req)
            raise

    async def _open_stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream",
                                                       "Cache-Control": "no-cache"})
        await resp.prepare(request)
        return resp

    async def _stream_generate(self, request: web.Request, req: Req) -> web.StreamResponse:
        resp = await self._open_stream(request)
        emitted, so_far, ids = 0, "", []
        with self._abort_on_disconnect(req):
            async for tokens, last in self.follow(req):
                delta = text.token_text(req.seed, emitted, tokens)
                new_ids = text.token_ids(req.seed, emitted, tokens)
                so_far += delta
                ids.extend(new_ids)
                emitted = tokens
                chunk = {"text": delta if self.cfg.incremental else so_far,
                         "output_ids": new_ids if self.cfg.stream_output else ids,
                         "meta_info": self._meta(req, tokens, last)}
                await resp.write(f"data: {dumps(chunk)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
        return resp

    # --- OpenAI routes ---
    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=True)

    async def _openai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json(loads=json.loads)
        except (ValueError, UnicodeDecodeError) as exc:
            return json_response(openai_api.error_body(f"JSON decode error: {exc}"), 400)
        try:
            o = openai_api.parse(body, chat, self.cfg.served_model_name)
            check_sampling(o.sampling)
            reqs = [self._new_req(p, o.max_tokens, o.ignore_eos) for p in o.prompts]
        except ValueError as exc:
            return json_response(openai_api.error_body(str(exc)), 400)
        for req in reqs:
            self.engine.submit(req)
        if o.stream:
            return await self._stream_openai(request, reqs[0], o)
        await asyncio.gather(*(self._wait(r) for r in reqs))
        choices = [(text.token_text(r.seed, 0, r.produced), r.finish_reason or "length") for r in reqs]
        return json_response(openai_api.completion(
            reqs[0].rid, o.model, choices, sum(r.prompt_tokens for r in reqs), sum(r.produced for r in reqs), chat))

    async def _stream_openai(self, request: web.Request, req: Req, o: openai_api.OpenAIRequest) -> web.StreamResponse:
        resp = await self._open_stream(request)
        created = int(time.time())
        emitted = 0
        first = o.chat
        with self._abort_on_disconnect(req):
            if first:
                await resp.write(f"data: {dumps(openai_api.chunk(req.rid, o.model, created, '', None, True, role=True))}\n\n".encode())
            async for tokens, last in self.follow(req):
                delta = text.token_text(req.seed, emitted, tokens)
                emitted = tokens
                finish = (req.finish_reason or "length") if last else None
                if delta or finish:
                    body = openai_api.chunk(req.rid, o.model, created, delta, finish, o.chat)
                    await resp.write(f"data: {dumps(body)}\n\n".encode())
            if o.include_usage:
                body = openai_api.usage_chunk(req.rid, o.model, created, req.prompt_tokens, req.produced, o.chat)
                await resp.write(f"data: {dumps(body)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
        return resp

    async def models(self, request: web.Request) -> web.Response:
        return json_response({"object": "list", "data": [
            {"id": self.cfg.served_model_name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
             "root": self.cfg.model_path, "parent": None, "max_model_len": self.cfg.context_len}]})

    # --- introspection ---
    async def model_info(self, request: web.Request) -> web.Response:
        return json_response({"model_path": self.cfg.model_path, "tokenizer_path": self.cfg.server_args.get("tokenizer_path"),
                              "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
                              "has_image_understanding": False, "has_audio_understanding": False,
                              "model_type": self.cfg.architecture, "architectures": [self.cfg.architecture]})

    async def server_info(self, request: web.Request) -> web.Response:
        return json_response({**self.cfg.server_args, "max_total_num_tokens": self.engine.cfg.max_total_tokens,
                              "internal_states": [self.engine.internal_state()], "version": self.cfg.version})

    async def flush_cache(self, request: web.Request) -> web.Response:
        ok = self.engine.flush()
        return web.Response(status=200 if ok else 400, text=(
            "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n"))

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.engine.metrics_text(self.cfg.served_model_name),
                            content_type="text/plain", charset="utf-8")

    # --- lifecycle ---
    async def warmup(self) -> None:
        """SGLang's warmup: wait, ask /get_model_info, run one short /generate, then declare ready."""
        await asyncio.sleep(self.cfg.warmup_s)
        base = f"http://{self.cfg.host}:{self.cfg.port}"
        headers = {"Authorization": f"Bearer {self.cfg.api_key}"} if self.cfg.api_key else {}
        async with aiohttp.ClientSession(headers=headers) as session:
            async with session.get(f"{base}/get_model_info") as r:
                r.raise_for_status()
            payload = {"text": WARMUP_PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            async with session.post(f"{base}/generate", json=payload) as r:
                r.raise_for_status()
                await r.read()
        self.ready = True
        self.log.info("The server is fired up and ready to roll!")


async def serve(cfg: ServerConfig, engine: Engine, on_crash: Callable[[], None],
                reap: Callable[[], None]) -> int:
    """Run until SIGTERM/SIGINT (exit 0) or until the port cannot be bound (exit 1)."""
    loop = asyncio.get_running_loop()
    server = FakeServer(cfg, engine, on_crash)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    pid = os.getpid()
    Log.uvicorn(f"Started server process [{pid}]")
    Log.uvicorn("Waiting for application startup.")
    Log.uvicorn("Application startup complete.")
    runner = web.AppRunner(server.app(), access_log_class=UvicornAccessLogger, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, reuse_address=True, backlog=2048)
    try:
        await site.start()
    except OSError as exc:
        Log.uvicorn(f"[Errno {exc.errno}] error while attempting to bind on address ('{cfg.host}', {cfg.port}): "
                    f"{(exc.strerror or str(exc)).lower()}", level="ERROR")
        return 1
    Log.uvicorn(f"Uvicorn running on http://{cfg.host}:{cfg.port} (Press CTRL+C to quit)")
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(_reaper(reap))]

    async def warm() -> None:
        try:
            await server.warmup()
        except Exception as exc:  # noqa: BLE001 - SGLang kills itself when its warmup fails
            server.log.error(f"Initialization failed. warmup error: {exc!r}")
            on_crash()

    tasks.append(asyncio.create_task(warm()))
    await stop.wait()
    Log.uvicorn("Shutting down")
    Log.uvicorn("Waiting for application shutdown.")
    Log.uvicorn("Application shutdown complete.")
    Log.uvicorn(f"Finished server process [{pid}]")
    for t in tasks:
        t.cancel()
    return 0


async def _reaper(reap: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(1.0)
        reap()
