"""The OpenAI-compatible side of the API: reading ``/v1/completions`` and ``/v1/chat/completions``
bodies and building their responses and stream chunks in SGLang's shapes (the real server's, from
shared/sglang-cpu/transcripts/api_samples*.txt). Pure: no I/O."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Optional, Union

from sweep.fake import text

Prompt = Union[str, list]


@dataclass
class OpenAIRequest:
    prompts: list[Prompt]  # one per choice group (completions may batch prompts; chat has one)
    max_tokens: Optional[int]
    ignore_eos: bool
    stream: bool
    include_usage: bool
    model: str
    chat: bool
    sampling: dict[str, Any]
    continuous_usage: bool = False  # stream_options.continuous_usage_stats: usage in every chunk


def error_body(message: str, code: int = 400, type_: str = "BadRequestError") -> dict[str, Any]:
    return {"object": "error", "message": message, "type": type_, "param": None, "code": code}


def _prompts(raw: Any) -> list[Prompt]:
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw:
        if all(isinstance(x, int) for x in raw):
            return [raw]
        if all(isinstance(x, str) for x in raw) or all(isinstance(x, list) for x in raw):
            return list(raw)
    raise ValueError(
        "prompt must be a string, a list of strings, a list of token ids or a list of lists of "
        f"token ids, got {type(raw).__name__}"
    )


def parse(body: Any, chat: bool, served_model: str) -> OpenAIRequest:
    """Validate a request body; ValueError carries the message the client gets (HTTP 400)."""
    if not isinstance(body, dict):
        raise ValueError("Input should be a valid dictionary or object to extract fields from")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ValueError("messages: Field required (a non-empty list of {role, content} objects)")
        prompts: list[Prompt] = [text.chat_prompt(messages)]
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        if "prompt" not in body:
            raise ValueError("prompt: Field required")
        prompts = _prompts(body["prompt"])
        max_tokens = body.get("max_tokens", 16)
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0):
        raise ValueError(f"max_tokens must be a non-negative integer, got {max_tokens!r}.")
    n = body.get("n", 1)
    if n not in (None, 1):
        raise ValueError(f"n={n} is not supported by the fake server; use n=1.")
    sampling = {k: body[k] for k in ("temperature", "top_p", "top_k", "min_p") if body.get(k) is not None}
    stream = bool(body.get("stream", False))
    if stream and len(prompts) > 1:
        raise ValueError("Streaming a batch of prompts is not supported by the fake server; send one prompt.")
    options = body.get("stream_options") or {}
    options = options if isinstance(options, dict) else {}
    return OpenAIRequest(
        prompts,
        max_tokens,
        bool(body.get("ignore_eos", False)),
        stream,
        bool(options.get("include_usage")),
        str(body.get("model") or served_model),
        chat,
        sampling,
        continuous_usage=bool(options.get("continuous_usage_stats")),
    )


def new_id() -> str:
    return uuid.uuid4().hex


def usage(prompt_tokens: int, completion_tokens: int, details: bool = True) -> dict[str, Any]:
    """SGLang's usage object (the completions stream's final usage chunk has no prompt_tokens_details)."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if details:
        out["prompt_tokens_details"] = None
    out["reasoning_tokens"] = 0
    return out


def completion(
    rid: str, model: str, choices: list[tuple[str, str]], prompt_tokens: int, completion_tokens: int, chat: bool
) -> dict[str, Any]:
    """A whole (non-streamed) response; ``choices`` = [(text, finish_reason), ...]."""
    if chat:
        items = [
            {
                "index": i,
                "message": {"role": "assistant", "content": t, "reasoning_content": None, "tool_calls": None},
                "logprobs": None,
                "finish_reason": f,
                "matched_stop": _matched(f),
            }
            for i, (t, f) in enumerate(choices)
        ]
        obj = "chat.completion"
    else:
        items = [
            {"index": i, "text": t, "logprobs": None, "finish_reason": f, "matched_stop": _matched(f)}
            for i, (t, f) in enumerate(choices)
        ]
        obj = "text_completion"
    return {
        "id": rid,
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "choices": items,
        "usage": usage(prompt_tokens, completion_tokens),
        "metadata": {"weight_version": "default"},
    }


def _matched(finish_reason: Optional[str]) -> Optional[int]:
    return text.EOS_TOKEN_ID if finish_reason == "stop" else None


def chunk(
    rid: str,
    model: str,
    created: int,
    delta: Optional[str],
    finish_reason: Optional[str],
    chat: bool,
    role: bool = False,
    usage: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """One stream chunk, as SGLang sends it. Chat: the first chunk carries ``delta.role`` and empty
    content, content chunks ``delta.content``, the finish chunk an empty delta; ``usage`` only when
    given (continuous usage stats), else no such key. Completions: ``text`` is the new text,
    ``usage`` is null unless given."""
    if chat:
        d: dict[str, Any] = {"reasoning_content": None}
        if role:
            d.update(role="assistant", content="")
        elif delta is not None:
            d["content"] = delta
        choice = {
            "index": 0,
            "delta": d,
            "logprobs": None,
            "finish_reason": finish_reason,
            "matched_stop": _matched(finish_reason),
        }
        out: dict[str, Any] = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
        }
        if usage is not None:
            out["usage"] = usage
        return out
    choice = {
        "index": 0,
        "text": delta or "",
        "logprobs": None,
        "finish_reason": finish_reason,
        "matched_stop": _matched(finish_reason),
    }
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage,
    }


def usage_chunk(
    rid: str, model: str, created: int, prompt_tokens: int, completion_tokens: int, chat: bool
) -> dict[str, Any]:
    """The ``choices: []`` chunk before ``[DONE]`` (stream_options.include_usage)."""
    return {
        "id": rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage(prompt_tokens, completion_tokens, details=chat),
    }
