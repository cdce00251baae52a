"""The fake server's HTTP side (aiohttp, in the scheduler's event loop): SGLang's routes, status codes,
response shapes and uvicorn's log lines, from "Uvicorn running on" through the warmup to shutdown.
Shapes are the real server's (shared/sglang-cpu/transcripts/api_samples*.txt; checked by
tests/fake/test_fake_vs_real.py).

Routes: ``/generate``, ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``, ``/health``,
``/health_generate``, ``/model_info`` (``/get_model_info``), ``/server_info`` (``/get_server_info``),
``/flush_cache``, ``/freeze_gc``, and ``/metrics`` with ``--enable-metrics``. With ``--api-key`` every
route but ``/health*`` and ``/metrics*`` (0.5.23: ``/ready*`` too) and ``OPTIONS`` wants
``Authorization: Bearer <key>`` (the scheme in any case), and answers 401 ``{"error":"Unauthorized"}``
without it, as SGLang's middleware (``sglang/srt/utils/auth.py``) does; with ``--admin-api-key`` the
admin routes (``/flush_cache``, ``/freeze_gc``) want that key instead. Until the warmup request
has gone through, the health routes answer 503 with an empty body; then the log says ``The server is
fired up and ready to roll!``. From 0.5.23 ``/health`` runs a one-token generation as
``/health_generate`` does (the answer comes after SGLang's one-second poll, scaled by the speed).

Shutdown (:func:`serve`), as the real launcher does it:

- SIGTERM: ``SIGTERM received. signum=None frame=None. Draining requests and shutting down...``.
  Sent to the whole group (what the sweep's host does), the schedulers die of it too: the subprocess
  watchdog (a poll every second) logs ``Subprocess scheduler_0 (pid=...) crashed with exit code -15.
  Triggering SIGQUIT for cleanup...`` and the SIGQUIT path below runs. Sent to the launcher alone,
  the drain watchdog (every five seconds) logs ``Gracefully exiting... Remaining number of requests
  N. ...`` until none is left, then ``kill_process_tree``. Real SGLang's drain watchdog ticks every
  5 s from startup, so a group SIGTERM that lands just before a tick takes this graceful path instead
  of the crash path (seen once in CI); the fake, counting from the signal, always takes the crash
  path. The host's stop treats both alike: it waits for the group to end.
- SIGQUIT (a crashed scheduler): ``SIGQUIT received. signum=None, frame=None. It usually means one
  child failed.``, ``Sleeping 5 seconds before crash diagnostics to let GPU activity settle.``, the
  sleep, ``No live scheduler processes found; skipping py-spy and CUDA coredump.``, then
  ``kill_process_tree``: every child SIGKILLed and the launcher itself (exit status 137, -9).

All these waits are the real ones divided by the startup speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator, Optional

import aiohttp
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from sweep.fake import metrics, model, openai_api, power, procs, text, tracebacks
from sweep.fake.engine import Engine, Req
from sweep.fake.log import Log
from sweep.fake.startup import GRAPH_PHASES, real_wording

_SAMPLING_KEYS = frozenset(
    "max_new_tokens min_new_tokens temperature top_p top_k min_p frequency_penalty presence_penalty "
    "repetition_penalty stop stop_token_ids ignore_eos skip_special_tokens spaces_between_special_tokens "
    "no_stop_trim n json_schema regex ebnf structural_tag custom_params stream_interval logit_bias "
    "sampling_seed".split()
)
_DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's SamplingParams default
_WARMUP_PROMPT = "The capital city of France is"
_HEALTH_CHECK_TIMEOUT_S = 20.0  # SGLang's HEALTH_CHECK_TIMEOUT
_WATCHDOG_INTERVAL_S = 1.0  # SGLang's SubprocessWatchdog poll
_DRAIN_INTERVAL_S = 5.0  # SGLang's sigterm_watchdog poll
CRASH_DIAGNOSTICS_S = 5.0  # "Sleeping 5 seconds before crash diagnostics"
_MIN_POLL_S = 0.02  # the fastest the fake polls, whatever its speed
# /model_info's "embedding" block, as the real server answers it for a generation model
_MODEL_INFO_EMBEDDING = {
    "family": "none",
    "task": "none",
    "execution": "none",
    "attention": "none",
    "pooling": "model_defined",
    "normalize": False,
    "postprocessor": "none",
    "tokenizer_special_tokens": "model_default",
    "supports_dimensions": False,
    "supports_token_embeddings": False,
    "supports_multimodal": False,
    "requires_embedding_flag": False,
    "auto_enable_embedding": False,
    "bcg_eligibility": "disabled",
    "safe_disable_kv_cache": False,
    "safe_disable_radix_cache": False,
    "safe_disable_chunked_prefill": False,
    "enabled": False,
    "matryoshka_dimensions": [],
    "bcg": {
        "prefill_backend": "disabled",
        "enabled": False,
        "capture_token_budget": 2048,
        "capture_batch_sizes": [
            4,
            8,
            12,
            16,
            20,
            24,
            28,
            32,
            48,
            64,
            80,
            96,
            112,
            128,
            144,
            160,
            176,
            192,
            208,
            224,
            240,
            256,
            288,
            320,
            352,
            384,
            416,
            448,
            480,
            512,
            576,
            640,
            704,
            768,
            832,
            896,
            960,
            1024,
            1280,
            1536,
            1792,
            2048,
        ],
    },
    "cache": {"kv_cache_disabled": False, "radix_cache_disabled": False, "chunked_prefill_disabled": False},
}
# the scheduler's internal state keys beside its server args (``internal_states[i]``)
_INTERNAL_STATE_EXTRAS = {
    "_resolved_overrides": [],
    "grpc_worker_threads": 4,
    "_quantization_explicitly_unset": False,
    "_cuda_graph_config_locked": [],
    "_declarations_materialized": True,
    "_mx_config_cache": {},
}
# model_type of the HF configs of the architectures the fake meets (else derived from the name)
_MODEL_TYPES = {
    "LlamaForCausalLM": "llama",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Glm4MoeForCausalLM": "glm4_moe",
    "MistralForCausalLM": "mistral",
    "Grok1ForCausalLM": "grok-1",
    "KimiK25ForConditionalGeneration": "kimi_k25",
}


def dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def json_response(obj: object, status: int = 200) -> web.Response:
    return web.Response(text=dumps(obj), status=status, content_type="application/json")


# The routes of the fake that SGLang marks ``AuthLevel.ADMIN_OPTIONAL`` (``@auth_level`` in
# sglang/srt/entrypoints/http_server.py, 0.5.10 and 0.5.23 alike).
_ADMIN_OPTIONAL_ROUTES = frozenset({"/flush_cache", "/freeze_gc"})


def _route_key(path: str, api_key: Optional[str], admin_api_key: Optional[str]) -> Optional[str]:
    """The key a route wants: an admin route the admin key where there is one, else the api key."""
    return (admin_api_key or api_key) if path in _ADMIN_OPTIONAL_ROUTES else api_key


def bearer(key: Optional[str]) -> dict[str, str]:
    """``Authorization: Bearer <key>`` as a header dict, {} without a key."""
    return {"Authorization": f"Bearer {key}"} if key else {}


def authorized(
    method: str,
    path: str,
    authorization: Optional[str],
    api_key: Optional[str],
    version: str,
    admin_api_key: Optional[str] = None,
) -> bool:
    """SGLang's ``decide_request_auth`` for the fake's routes. OPTIONS and the probe routes
    (``/health*``, ``/metrics*``; from 0.5.23 ``/ready*``) always pass. An admin route
    (``_ADMIN_OPTIONAL_ROUTES``) wants the ``--admin-api-key`` when one is set (the ``--api-key`` is
    then refused there), else the ``--api-key``; any other path, known or not, wants the
    ``--api-key``. A key is ``Authorization: Bearer <key>`` (scheme in any case, compared in constant
    time); no key configured: everything passes."""
    if method == "OPTIONS":
        return True
    open_prefixes = ("/health", "/metrics", "/ready") if real_wording(version) else ("/health", "/metrics")
    if path.startswith(open_prefixes):
        return True
    want = _route_key(path, api_key, admin_api_key)
    if not want:
        return True
    parts = (authorization or "").split(" ", 1)
    return len(parts) == 2 and parts[0].lower() == "bearer" and hmac.compare_digest(parts[1].encode(), want.encode())


class _UvicornAccessLogger(AbstractAccessLogger):
    """``INFO:     127.0.0.1:PORT - "POST /generate HTTP/1.1" 200 OK`` on stdout, as uvicorn logs."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        client = f"{peer[0]}:{peer[1]}" if peer else "-"
        Log.access(client, request.method, request.path_qs, response.status, response.reason or "")


def _check_sampling(params: Any) -> tuple[int, bool]:
    """SamplingParams' checks, with SGLang's messages. Returns (max_new_tokens, ignore_eos)."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ValueError(f"sampling_params must be a dict, got {type(params).__name__}")
    for key in params:
        if key not in _SAMPLING_KEYS:
            raise ValueError(f"SamplingParams.__init__() got an unexpected keyword argument '{key}'")
    try:
        max_new = params.get("max_new_tokens", _DEFAULT_MAX_NEW_TOKENS)
        max_new = _DEFAULT_MAX_NEW_TOKENS if max_new is None else int(max_new)
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
class FakeServerConfig:
    """What the fake server was started with: its command line, parsed (``sweep.fake.main``); not the
    experiment's ``server`` section (``sweep.experiment.config.ServerConfig``)."""

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
    admin_api_key: Optional[str] = None  # --admin-api-key: the admin routes want it instead of api_key
    warmup_s: float = 6.0  # already divided by the startup speed
    fail_at_serve: bool = False
    crash_after_requests: Optional[int] = None
    startup_speed: float = 1.0  # divides the launcher's own waits (watchdogs, crash diagnostics)
    speed: float = 1.0  # divides the health check's poll
    rank_prefix: str = " TP0"  # the rank-0 scheduler's log prefix
    startup_time: dict[str, Any] = field(default_factory=dict)  # rank 0's phase timings + tokenizer_e2e
    memory_usage: dict[str, Any] = field(default_factory=dict)  # rank 0's memory_usage block
    ledger_dir: Optional[Path] = None  # the GPU ledger: the GPUs' power goes there too (sweep/fake/power.py)
    gpus: tuple[int, ...] = ()  # the GPUs of this node's ranks

    @property
    def real_wording(self) -> bool:
        return real_wording(self.version)


def model_type(architecture: str) -> str:
    """The HF ``model_type`` of an architecture (``LlamaForCausalLM`` -> ``llama``)."""
    if architecture in _MODEL_TYPES:
        return _MODEL_TYPES[architecture]
    stem = architecture
    for suffix in ("ForCausalLM", "ForConditionalGeneration"):
        stem = stem.removesuffix(suffix)
    out = ""
    for i, ch in enumerate(stem):
        out += ("_" if ch.isupper() and i and not stem[i - 1].isupper() else "") + ch.lower()
    return out or "llama"


class FakeServer:
    def __init__(self, cfg: FakeServerConfig, engine: Engine, tree: Optional[procs.Tree] = None):
        self.cfg = cfg
        self.engine = engine
        self.tree = tree  # the launcher's children (None in tests that run a server in-process)
        self.ready = False  # the warmup went through; health answers 200
        self.gracefully_exit = False  # SIGTERM seen: draining
        self.finished_external = 0
        self._crashing = False
        self.log = Log()
        self.tp0 = Log(cfg.rank_prefix)
        self.http_requests: dict[tuple[str, str], int] = {}
        self.http_responses: dict[tuple[str, str, str], int] = {}
        self.http_active: dict[tuple[str, str], int] = {}
        self.routes: set[str] = set()
        self.started = time.time()
        engine.on_finished = self._request_finished
        engine.on_batch = self._batch_starting
        self.depth = model.max_accepted(cfg.spec) if cfg.spec else 0

    @property
    def poll_s(self) -> float:
        """The launcher's watchdog poll (SGLang: 1 s), at the startup speed."""
        return max(_WATCHDOG_INTERVAL_S / self.cfg.startup_speed, _MIN_POLL_S)

    # --- faults ---
    def crash(self) -> None:
        """The scheduler dies mid-serve: its traceback; the scheduler processes end and SIGQUIT the
        launcher, whose handler runs SGLang's crash path (diagnostics sleep, kill_process_tree)."""
        if self._crashing:
            return
        self._crashing = True
        self.tp0.error(
            "Scheduler hit an exception: " + tracebacks.scheduler_exception("serve", tracebacks.ILLEGAL_ACCESS)
        )
        if self.tree is not None:
            self.tree.kill_schedulers()
        os.kill(os.getpid(), signal.SIGQUIT)

    def on_sigquit(self) -> None:
        """SGLang's running-phase SIGQUIT handler (tokenizer manager). Never returns."""
        self.log.error("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
        self.log.info("Sleeping 5 seconds before crash diagnostics to let GPU activity settle.")
        time.sleep(CRASH_DIAGNOSTICS_S / self.cfg.startup_speed)  # blocking, as SGLang's handler
        if self.tree is None or not self.tree.live_schedulers():
            self.log.info("No live scheduler processes found; skipping py-spy and CUDA coredump.")
        self.kill_process_tree()

    def kill_process_tree(self) -> None:
        if self.tree is not None:
            self.tree.kill_process_tree(self.log.info)
        procs.kill_self()

    def on_sigterm(self) -> None:
        if self.gracefully_exit:
            return
        self.log.warning("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.gracefully_exit = True
        asyncio.get_running_loop().create_task(self.drain())

    def check_children(self) -> bool:
        """SGLang's SubprocessWatchdog: a child that died triggers SIGQUIT. True once triggered."""
        dead = self.tree.crashed() if self.tree is not None else None
        if dead is None:
            return False
        self.log.error(
            f"Subprocess {dead.name} (pid={dead.pid}) crashed with exit code {dead.exitcode}. "
            "Triggering SIGQUIT for cleanup..."
        )
        os.kill(os.getpid(), signal.SIGQUIT)
        return True

    async def watchdog(self) -> None:
        while not self.check_children():
            await asyncio.sleep(self.poll_s)

    async def drain(self) -> None:
        """SGLang's sigterm_watchdog: wait for the running requests, then kill the tree."""
        while True:
            await asyncio.sleep(_DRAIN_INTERVAL_S * self.poll_s)
            if self.check_children():  # the schedulers died too (SIGTERM to the group)
                return
            rids = [r.rid for r in [*self.engine.running, *self.engine.waiting] if r.external and not r.finished]
            self.log.info(
                f"Gracefully exiting... Remaining number of requests {len(rids)}. "
                f"Remaining requests remaining_rids={rids!r}."
            )
            if not rids:
                break
        self.kill_process_tree()

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
        for path in ("/v1/tokenize", "/tokenize"):
            r.add_post(path, self.tokenize)
        for path in ("/model_info", "/get_model_info"):
            r.add_get(path, self.model_info)
        for path in ("/server_info", "/get_server_info"):
            r.add_get(path, self.server_info)
        r.add_route("GET", "/flush_cache", self.flush_cache)
        r.add_route("POST", "/flush_cache", self.flush_cache)
        r.add_post("/freeze_gc", self.freeze_gc)
        if self.cfg.enable_metrics:
            r.add_get("/metrics", self.metrics)
        self.routes = {res.canonical for res in r.resources()}
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        key = (request.path, request.method)
        counted = request.path in self.routes
        if counted:
            self.http_requests[key] = self.http_requests.get(key, 0) + 1
            self.http_active[key] = self.http_active.get(key, 0) + 1
        status = 500
        try:
            resp = await self._handle(request, handler)
            status = resp.status
            return resp
        finally:
            if counted:
                self.http_active[key] -= 1
                rkey = (request.path, request.method, str(status))
                self.http_responses[rkey] = self.http_responses.get(rkey, 0) + 1

    async def _handle(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        if not authorized(
            request.method,
            request.path,
            request.headers.get("Authorization"),
            self.cfg.api_key,
            self.cfg.version,
            self.cfg.admin_api_key,
        ):
            return json_response({"error": "Unauthorized"}, 401)
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return json_response({"detail": "Not Found"}, 404)
        except web.HTTPMethodNotAllowed:
            return json_response({"detail": "Method Not Allowed"}, 405)

    # --- health ---
    async def health(self, request: web.Request) -> web.Response:
        # 0.5.10's /health answered at once; the real build's runs the health generation too
        return await self._health(generate=self.cfg.real_wording)

    async def health_generate(self, request: web.Request) -> web.Response:
        return await self._health(generate=True)

    async def _health(self, generate: bool) -> web.Response:
        """SGLang's health_generate: 503 while starting or shutting down; else one token generated
        (``input_ids=[0]``), 200 as soon as the scheduler has answered anything since the check began,
        looked at every second (scaled by the speed), 503 after 20 s without."""
        if self.gracefully_exit:
            self.log.info("Health check request received during shutdown. Returning 503.")
            return web.Response(status=503)
        if not self.ready:
            return web.Response(status=503)
        if not generate:
            return web.Response(status=200)
        tic = time.perf_counter()
        req = self._new_req([0], 1, ignore_eos=True, external=False, log_metrics=False)
        self.engine.submit(req)
        while time.perf_counter() < tic + _HEALTH_CHECK_TIMEOUT_S:
            await asyncio.sleep(max(1.0 / self.cfg.speed, 0.001))
            if self.engine.last_output_at > tic:
                self.engine.abort(req)
                return web.Response(status=200)
        self.engine.abort(req)
        return web.Response(status=503)

    # --- requests ---
    def _new_req(
        self,
        prompt: text.PromptLike,
        max_new: Optional[int],
        ignore_eos: bool,
        external: Optional[bool] = None,
        streaming: bool = False,
        log_metrics: bool = True,
    ) -> Req:
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
                "fit within the limit."
            )
        seed = text.seed_of(prompt)
        stop_len = max_new if ignore_eos else text.natural_length(seed)
        return Req(
            openai_api.new_id(),
            n,
            max_new,
            stop_len,
            seed,
            self.cfg.spec,
            external=self.ready if external is None else external,
            streaming=streaming,
            log_metrics=log_metrics,
            ids=text.prompt_ids(prompt),
        )

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
            return {
                "type": "abort",
                "message": "Abort before prefill" if not req.produced else "Abort in waiting queue",
            }
        return None

    def _spec_meta(self, req: Req, tokens: int) -> dict[str, Any]:
        """SGLang's per-request speculative figures (final chunk only, once something was verified):
        proposed = verify_ct x (num_draft_tokens - 1); accept length = completion_tokens / verify_ct."""
        verify_ct = req.verify_ct
        if not self.cfg.spec or verify_ct <= 0:
            return {}
        proposed = req.proposed  # verify_ct x (num_draft_tokens - 1), each verify's own under adaptive speculation
        if proposed <= 0:
            return {}
        correct = req.accepted
        out: dict[str, Any] = {
            "spec_accept_rate": correct / proposed,
            "spec_accept_length": tokens / verify_ct,
            "spec_num_correct_drafts": correct,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": verify_ct,
            "spec_accepted_drafts": correct,
            "spec_proposed_drafts": proposed,
        }
        if req.accept_hist:
            out["spec_correct_drafts_histogram"] = list(req.accept_hist)
            out["spec_accept_histogram"] = list(req.accept_hist)
        return out

    def _meta(self, req: Req, tokens: int, final: bool, first: bool = False, stream: bool = False) -> dict[str, Any]:
        """``meta_info`` in the real server's key order: the common part in every chunk, the send time
        in a stream's first chunk, latency, speculative figures and timestamps in the final one."""
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": self._finish_reason(req) if final else None,
            "prompt_tokens": req.prompt_tokens,
            "weight_version": "default",
            "num_retractions": 0,
            "forward_entry_time": req.entry_time,
            "prefill_finished_time": req.prefilled_time,
            "queue_time": (req.first_token_at or req.created) - req.created,
            "reasoning_tokens": 0,
            "completion_tokens": tokens,
            "cached_tokens": req.cached,
            "cached_tokens_details": {"device": req.cached, "host": 0},
            "dp_rank": None,
        }
        now = time.time()
        if not final:
            if first:
                meta["response_sent_to_client_ts"] = now
            return meta
        e2e = (req.finished_at or time.perf_counter()) - req.created
        meta["e2e_latency"] = e2e
        meta.update(self._spec_meta(req, tokens))
        decode_s = (req.finished_at or 0.0) - (req.first_token_at or 0.0)
        timestamps = {
            "request_received_ts": req.received_ts,
            "api_server_dispatch_finish_ts": req.received_ts,
            "request_finished_ts": req.received_ts + e2e,
        }
        throughput = {"decode_throughput": (tokens - 1) / decode_s if decode_s > 0 and tokens > 1 else 0.0}
        if stream:
            meta.update({**timestamps, "response_sent_to_client_ts": now})
            meta["request_finished_ts"] = meta.pop("request_finished_ts")
            meta.update(throughput)
        else:
            meta.update({**timestamps, **throughput, "response_sent_to_client_ts": now})
        return meta

    def _result(self, req: Req) -> dict[str, Any]:
        n = req.produced
        return {
            "text": text.token_text(req.seed, 0, n),
            "output_ids": text.token_ids(req.seed, 0, n),
            "meta_info": self._meta(req, n, True),
        }

    def _generate_reqs(self, body: dict[str, Any]) -> tuple[list[Req], bool]:
        max_new, ignore_eos = _check_sampling(body.get("sampling_params"))
        prompt = body.get("text")
        if prompt is None:
            prompt = body.get("input_ids")
        if prompt is None:
            raise ValueError("Either text, input_ids or input_embeds should be provided.")
        streaming = bool(body.get("stream"))
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
            return [self._new_req(prompt, max_new, ignore_eos, streaming=streaming)], False
        if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
            return [self._new_req(p, max_new, ignore_eos, streaming=streaming) for p in prompt], True
        raise ValueError("text must be a string or a list of strings; input_ids a list of ints or of lists of ints.")

    async def _read_json(self, request: web.Request) -> Any:
        try:
            return await request.json(loads=json.loads)
        except (ValueError, UnicodeDecodeError) as exc:
            raise web.HTTPUnprocessableEntity(
                text=dumps(
                    {
                        "detail": [
                            {
                                "type": "json_invalid",
                                "loc": ["body", 0],
                                "msg": "JSON decode error",
                                "input": {},
                                "ctx": {"error": str(exc)},
                            }
                        ]
                    }
                ),
                content_type="application/json",
            ) from None

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_json(request)
        if not isinstance(body, dict):
            return json_response(
                {"detail": [{"type": "dict_type", "loc": ["body"], "msg": "Input should be a valid dictionary"}]}, 422
            )
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
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        return resp

    async def _stream_generate(self, request: web.Request, req: Req) -> web.StreamResponse:
        resp = await self._open_stream(request)
        emitted, so_far, ids = 0, "", []
        first = True
        with self._abort_on_disconnect(req):
            async for tokens, last in self.follow(req):
                delta = text.token_text(req.seed, emitted, tokens)
                new_ids = text.token_ids(req.seed, emitted, tokens)
                so_far += delta
                ids.extend(new_ids)
                emitted = tokens
                chunk = {
                    "text": delta if self.cfg.incremental else so_far,
                    "output_ids": new_ids if self.cfg.stream_output else list(ids),
                    "meta_info": self._meta(req, tokens, last, first=first, stream=True),
                }
                first = False
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
            _check_sampling(o.sampling)
            reqs = [self._new_req(p, o.max_tokens, o.ignore_eos, streaming=o.stream) for p in o.prompts]
        except ValueError as exc:
            return json_response(openai_api.error_body(str(exc)), 400)
        for req in reqs:
            self.engine.submit(req)
        if o.stream:
            return await self._stream_openai(request, reqs[0], o)
        await asyncio.gather(*(self._wait(r) for r in reqs))
        choices = [(text.token_text(r.seed, 0, r.produced), r.finish_reason or "length") for r in reqs]
        return json_response(
            openai_api.completion(
                reqs[0].rid, o.model, choices, sum(r.prompt_tokens for r in reqs), sum(r.produced for r in reqs), chat
            )
        )

    async def _stream_openai(self, request: web.Request, req: Req, o: openai_api.OpenAIRequest) -> web.StreamResponse:
        """SGLang's OpenAI stream: one chunk per step (``usage`` in each with continuous_usage_stats);
        chat opens with the role chunk and closes with a finish chunk of its own, completions carry
        the finish reason on the last text chunk; with include_usage a ``choices: []`` usage chunk,
        then ``[DONE]``."""
        resp = await self._open_stream(request)
        created = int(time.time())
        emitted = 0
        with self._abort_on_disconnect(req):
            if o.chat:
                await resp.write(
                    f"data: {dumps(openai_api.chunk(req.rid, o.model, created, '', None, True, role=True))}\n\n".encode()
                )
            async for tokens, last in self.follow(req):
                delta = text.token_text(req.seed, emitted, tokens)
                emitted = tokens
                usage = openai_api.usage(req.prompt_tokens, tokens) if o.continuous_usage else None
                finish = (req.finish_reason or "length") if last else None
                if o.chat:
                    if tokens:
                        body = openai_api.chunk(req.rid, o.model, created, delta, None, True, usage=usage)
                        await resp.write(f"data: {dumps(body)}\n\n".encode())
                    if finish:
                        body = openai_api.chunk(req.rid, o.model, created, None, finish, True)
                        await resp.write(f"data: {dumps(body)}\n\n".encode())
                else:
                    body = openai_api.chunk(req.rid, o.model, created, delta, finish, False, usage=usage)
                    await resp.write(f"data: {dumps(body)}\n\n".encode())
            if o.include_usage:
                body = openai_api.usage_chunk(req.rid, o.model, created, req.prompt_tokens, req.produced, o.chat)
                await resp.write(f"data: {dumps(body)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
        return resp

    async def models(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.cfg.served_model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": self.cfg.model_path,
                        "parent": None,
                        "max_model_len": self.cfg.context_len,
                    }
                ],
            }
        )

    # --- introspection ---
    async def model_info(self, request: web.Request) -> web.Response:
        a = self.cfg.server_args
        return json_response(
            {
                "model_path": self.cfg.model_path,
                "served_model_name": self.cfg.served_model_name,
                "tokenizer_path": a.get("tokenizer_path"),
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "load_format": a.get("load_format", "auto"),
                "reasoning_parser": a.get("reasoning_parser"),
                "tool_call_parser": a.get("tool_call_parser"),
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": model_type(self.cfg.architecture),
                "architectures": [self.cfg.architecture],
                "embedding": _MODEL_INFO_EMBEDDING,
            }
        )

    def _startup_time(self, with_tokenizer: bool) -> dict[str, Any]:
        st = self.cfg.startup_time
        out: dict[str, Any] = {k: st.get(k, 0.0) for k in ("load_weight", "kv_cache_allocation", "scheduler_e2e")}
        out["cuda_graph"] = {phase: st.get("cuda_graph", {}).get(phase, 0.0) for phase in GRAPH_PHASES}
        if with_tokenizer:
            out["tokenizer_e2e"] = st.get("tokenizer_e2e", 0.0)
        return out

    async def server_info(self, request: web.Request) -> web.Response:
        """Flat server args, then the launcher's figures and ``internal_states`` (per DP rank: the
        scheduler's copy of the args, its memory, startup time and live state), as the real server."""
        args = self.cfg.server_args
        state = {
            **args,
            **_INTERNAL_STATE_EXTRAS,
            "last_gen_throughput": self.engine.stats.last_gen_throughput,
            "memory_usage": {**self.cfg.memory_usage, "token_capacity": self.engine.cfg.max_total_tokens},
            "startup_time": self._startup_time(False),
            **self.engine.internal_state(),
        }
        return json_response(
            {
                **args,
                "custom_sigquit_handler": None,
                "startup_time": self._startup_time(True),
                "max_total_num_tokens": self.engine.cfg.max_total_tokens,
                "max_req_input_len": self.cfg.context_len - 6,
                "status": "ready" if self.ready else "starting",
                "internal_states": [state],
                "version": self.cfg.version,
                "kv_events": None,
            }
        )

    async def tokenize(self, request: web.Request) -> web.Response:
        """SGLang's ``/v1/tokenize`` (and ``/tokenize``): ``{"prompt": str | [str]}`` to ``{"tokens",
        "count", "max_model_len"}``, on the fake's tokenizer (``text.prompt_ids``)."""
        body = await self._read_json(request)
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if isinstance(prompt, str):
            ids: Any = list(text.prompt_ids(prompt))
            count: Any = len(ids)
        elif isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            ids = [list(text.prompt_ids(p)) for p in prompt]
            count = [len(i) for i in ids]
        else:
            return json_response(
                {
                    "detail": [
                        {
                            "type": "missing" if prompt is None else "string_type",
                            "loc": ["body", "prompt"],
                            "msg": "Field required" if prompt is None else "Input should be a valid string",
                            "input": body,
                        }
                    ]
                },
                422,
            )
        return json_response({"tokens": ids, "count": count, "max_model_len": self.cfg.context_len})

    async def flush_cache(self, request: web.Request) -> web.Response:
        ok = self.engine.flush()
        return web.Response(
            status=200 if ok else 400,
            text=(
                "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
                "requests, the operation will not be performed.)\n"
            ),
        )

    async def freeze_gc(self, request: web.Request) -> web.Response:
        """The warmup's last call: each process freezes its garbage collector."""
        for who in ("Scheduler", "Tokenizer Manager"):
            (self.tp0 if who == "Scheduler" else self.log).info(
                f"Freezing GC in {who} process. gen0: 0->0, gen1: 0->0, gen2: 0->0"
            )
        return web.Response(status=200)

    async def metrics(self, request: web.Request) -> web.Response:
        values = self.engine.metric_values()
        st = self._startup_time(True)
        values["startup_time_seconds"] = metrics.series("phase", {k: v for k, v in st.items() if k != "cuda_graph"})
        values["startup_cuda_graph_time_seconds"] = metrics.series("phase", st["cuda_graph"])
        mem = self.cfg.memory_usage
        values["weight_memory_usage_gb"] = float(mem.get("weight", 0.0))
        values["kv_cache_memory_usage_gb"] = float(mem.get("kvcache", 0.0))
        values["startup_available_gpu_memory_gb"] = float(mem.get("startup_available", 0.0))
        values["graph_memory_usage_gb"] = metrics.series(
            "phase", {p: mem.get("graph", {}).get(p, 0.0) for p in GRAPH_PHASES}
        )
        values["context_len"] = float(self.cfg.context_len)
        cpu = os.times()
        values["process_cpu_seconds_total"] = metrics.series(
            "component", {"detokenizer": 0.0, "tokenizer": cpu.user + cpu.system}
        )
        values["http_requests_total"] = [
            ({"endpoint": p, "method": m}, float(n)) for (p, m), n in self.http_requests.items()
        ]
        values["http_responses_total"] = [
            ({"endpoint": p, "method": m, "status_code": c}, float(n)) for (p, m, c), n in self.http_responses.items()
        ]
        values["http_requests_active"] = [
            ({"endpoint": p, "method": m}, float(n)) for (p, m), n in self.http_active.items()
        ]
        text_ = metrics.render(self.cfg.served_model_name, values, self.cfg.spec is not None, os.getpid())
        resp = web.Response(body=text_.encode(), status=200)
        resp.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
        return resp

    # --- lifecycle ---
    async def warmup(self) -> None:
        """SGLang's warmup: ask /model_info (0.5.10: /get_model_info), run one short /generate (the
        first forward is slow), POST /freeze_gc (0.5.23), then declare ready."""
        base = f"http://{self.cfg.host}:{self.cfg.port}"
        async with aiohttp.ClientSession(headers=bearer(self.cfg.api_key)) as session:
            info = "/model_info" if self.cfg.real_wording else "/get_model_info"
            async with session.get(f"{base}{info}") as r:
                r.raise_for_status()
            await asyncio.sleep(self.cfg.warmup_s)
            payload = {"text": _WARMUP_PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            async with session.post(f"{base}/generate", json=payload) as r:
                r.raise_for_status()
                await r.read()
            if self.cfg.real_wording:  # with the admin key if there is one, as SGLang's warmup does
                auth = bearer(_route_key("/freeze_gc", self.cfg.api_key, self.cfg.admin_api_key))
                async with session.post(f"{base}/freeze_gc", headers=auth) as r:
                    r.raise_for_status()
        self.ready = True
        self.log.info("The server is fired up and ready to roll!")


async def serve(cfg: FakeServerConfig, engine: Engine, tree: Optional[procs.Tree] = None) -> int:
    """Serve until the launcher kills itself (SIGTERM, a crash: see the module doc); returns 1 only
    when the port cannot be bound."""
    loop = asyncio.get_running_loop()
    server = FakeServer(cfg, engine, tree)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.on_sigterm)
    loop.add_signal_handler(signal.SIGQUIT, server.on_sigquit)  # the running-phase handler
    pid = os.getpid()
    Log.uvicorn(f"Started server process [{pid}]")
    Log.uvicorn("Waiting for application startup.")
    Log.uvicorn("Application startup complete.")
    runner = web.AppRunner(server.app(), access_log_class=_UvicornAccessLogger, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, reuse_address=True, backlog=2048)
    try:
        await site.start()
    except OSError as exc:
        # uvicorn logs asyncio's OSError as it is: "[Errno 98] error while attempting to bind on address
        # ('127.0.0.1', 30000): address already in use" (its strerror already says the address)
        said = (
            str(exc)
            if "error while attempting to bind" in str(exc)
            else (
                f"[Errno {exc.errno}] error while attempting to bind on address ('{cfg.host}', {cfg.port}): "
                f"{(exc.strerror or str(exc)).lower()}"
            )
        )
        Log.uvicorn(said, level="ERROR")
        return 1
    Log.uvicorn(f"Uvicorn running on http://{cfg.host}:{cfg.port} (Press CTRL+C to quit)")
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(server.watchdog())]
    if cfg.ledger_dir is not None and cfg.gpus:
        tasks.append(asyncio.create_task(power.report(engine, cfg.ledger_dir, cfg.gpus)))

    async def warm() -> None:
        try:
            await server.warmup()
        except Exception as exc:  # SGLang kills itself when its warmup fails
            server.log.error(f"Initialization failed. warmup error: {exc!r}")
            server.kill_process_tree()

    tasks.append(asyncio.create_task(warm()))
    await asyncio.Event().wait()  # forever: the launcher ends by killing itself
    return 0
