"""The streaming parser for all three APIs, on canned bytes, and the client's error handling
against a tiny real HTTP server on 127.0.0.1 that sends canned (and broken) responses."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from sweep.bench.client import (
    MalformedStream,
    RequestRecord,
    ServerStreamError,
    SSESplitter,
    StreamParser,
    build_payload,
    make_client,
    send,
    send_one,
)


def sse(*objs) -> bytes:
    out = b""
    for o in objs:
        out += b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n"
    return out


GENERATE = sse(
    {
        "text": "He",
        "output_ids": [1, 2],
        "meta_info": {"id": "a", "prompt_tokens": 7, "completion_tokens": 2, "finish_reason": None},
    },
    {"text": "Hello wo", "meta_info": {"id": "a", "prompt_tokens": 7, "completion_tokens": 5, "finish_reason": None}},
    {
        "text": "Hello world",
        "meta_info": {
            "id": "a",
            "prompt_tokens": 7,
            "completion_tokens": 6,
            "finish_reason": {"type": "length", "length": 6},
            "spec_accept_length": 3.0,
            "spec_verify_ct": 2,
            "e2e_latency": 0.25,
            "spec_accept_histogram": [0, 0, 2],
        },
    },
    b"[DONE]",
)

COMPLETIONS_CONTINUOUS = sse(
    {
        "choices": [{"index": 0, "text": "He", "finish_reason": None}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    },
    {
        "choices": [{"index": 0, "text": "llo wo", "finish_reason": None}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
    },
    {
        "choices": [{"index": 0, "text": "rld", "finish_reason": "length"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 6, "total_tokens": 13},
    },
    {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 6, "total_tokens": 13}},
    b"[DONE]",
)

CHAT_FINAL_USAGE_ONLY = sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "He"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "llo wo"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "rld"}, "finish_reason": "length"}]},
    {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}},
    b"[DONE]",
)


def parse(api: str, body: bytes, piece: int) -> StreamParser:
    """Feed ``body`` in ``piece``-byte reads, the i-th read arriving at t = i."""
    splitter, parser = SSESplitter(), StreamParser(api)
    for i in range(0, len(body), piece):
        for p in splitter.feed(body[i : i + piece]):
            parser.feed(p, float(i // piece))
    for p in splitter.flush():
        parser.feed(p, 99.0)
    parser.finish()
    return parser


@pytest.mark.parametrize("piece", [1, 7, 64, 100_000])
def test_generate_counts_tokens_from_meta_info_whatever_the_read_sizes(piece):
    p = parse("generate", GENERATE, piece)
    assert p.done
    assert p.chunk_tokens == [2, 3, 1]  # a chunk carries every token of its step
    assert p.completion_tokens == 6 and p.prompt_tokens == 7
    assert p.finish_reason == "length"
    assert p.accept_length == 3.0 and p.verify_ct == 2 and p.server_latency == 0.25
    assert p.accept_histogram == [0, 0, 2]  # SGLang 0.5.10's name, in the final chunk
    assert p.text == "Hello world"  # cumulative text: the last chunk's
    assert p.exact
    assert p.chunk_times == sorted(p.chunk_times) and p.ttft_s == p.chunk_times[0]


def test_the_first_text_is_timed_apart_from_the_first_token():
    """bench_serving's TTFT is the first chunk with text; a detokenizer may hold the first token's back."""
    meta = {"prompt_tokens": 3, "finish_reason": None}
    p = StreamParser("generate")
    for t, text, n in ((0.0, "", 1), (1.0, "\u00e9t", 2), (2.0, "\u00e9te", 3)):  # one chunk a step
        p.feed(json.dumps({"text": text, "meta_info": {**meta, "completion_tokens": n}}).encode(), t)
    p.feed(b"[DONE]", 2.5)
    assert (p.ttft_s, p.first_text_s) == (0.0, 1.0)
    rec = RequestRecord(start_at=0.0, start_mono=0.0)
    p.fill(rec)
    assert (rec.ttft_s, rec.first_text_s) == (0.0, 1.0)
    chat = parse("chat", CHAT_FINAL_USAGE_ONLY, 100_000)  # the role chunk has no text: the first text is "He"
    assert chat.first_text_s == chat.ttft_s


@pytest.mark.parametrize(
    "meta, histogram",
    [
        ({"spec_correct_drafts_histogram": [1, 4, 2]}, [1, 4, 2]),  # 0.5.23
        ({"spec_correct_drafts_histogram": [1, 4], "spec_accept_histogram": [1, 4]}, [1, 4]),  # the builds between
        ({"spec_accept_length": 1.0}, None),  # nothing verified yet, or no speculation
        ({"spec_accept_histogram": [1, "x"]}, None),  # not the documented shape: left out, not an error
    ],
)
def test_the_accept_histogram_under_each_name(meta, histogram):
    body = sse(
        {
            "text": "a",
            "meta_info": {"prompt_tokens": 1, "completion_tokens": 1, "finish_reason": {"type": "length"}, **meta},
        },
        b"[DONE]",
    )
    p = parse("generate", body, 1000)
    assert p.accept_histogram == histogram
    rec = RequestRecord(start_at=0.0, start_mono=0.0)
    p.fill(rec)
    assert rec.accept_histogram == histogram


def test_splitter_handles_crlf_comments_and_a_missing_final_newline():
    s = SSESplitter()
    out = s.feed(b': keep-alive\r\n\r\ndata: {"a": 1}\r\n\r\nevent: x\ndata: [DO')
    out += s.feed(b"NE]")
    out += s.flush()
    assert out == [b'{"a": 1}', b"[DONE]"]


def test_completions_with_continuous_usage_is_exact():
    p = parse("completions", COMPLETIONS_CONTINUOUS, 13)
    assert p.exact and p.done
    assert p.chunk_tokens == [2, 3, 1] and p.completion_tokens == 6 and p.prompt_tokens == 7
    assert p.text == "Hello world" and p.finish_reason == "length"
    assert p.accept_length is None  # OpenAI routes carry no meta_info


def test_chat_with_only_a_final_usage_spreads_the_exact_total_over_text_chunks():
    p = parse("chat", CHAT_FINAL_USAGE_ONLY, 50)
    assert not p.exact
    assert p.completion_tokens == 7  # the server's total wins over the chunk count
    assert sum(p.chunk_tokens) == 7 and len(p.chunk_tokens) == 3 and max(p.chunk_tokens) - min(p.chunk_tokens) <= 1
    assert p.text == "Hello world" and p.prompt_tokens == 9


def test_openai_without_any_usage_counts_one_token_per_text_chunk():
    body = sse({"choices": [{"delta": {"content": "a"}}]}, {"choices": [{"delta": {"content": "b"}}]}, b"[DONE]")
    p = parse("chat", body, 1000)
    assert p.chunk_tokens == [1, 1] and not p.exact


def test_error_inside_a_stream_and_malformed_payloads_raise_for_the_client_to_record():
    with pytest.raises(ServerStreamError, match="out of memory"):
        parse("generate", sse({"error": {"message": "out of memory", "code": 500}}), 1000)
    with pytest.raises(MalformedStream, match="not JSON"):
        parse("generate", b"data: {oops\n\n", 1000)
    with pytest.raises(MalformedStream, match="meta_info"):
        parse("generate", sse({"text": "x"}), 1000)
    with pytest.raises(MalformedStream, match="backwards"):
        parse("generate", sse({"meta_info": {"completion_tokens": 3}}, {"meta_info": {"completion_tokens": 2}}), 1000)


def test_payloads_ask_for_exact_max_tokens_and_server_counts():
    g = build_payload("generate", "hi", max_tokens=5)
    assert g["sampling_params"] == {"max_new_tokens": 5, "temperature": 0.0, "ignore_eos": True} and g["stream"]
    c = build_payload("completions", "hi", max_tokens=5, model="m")
    assert c["prompt"] == "hi" and c["model"] == "m" and c["ignore_eos"] is True
    assert c["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    ch = build_payload("chat", "hi", max_tokens=5, stream=False)
    assert ch["messages"] == [{"role": "user", "content": "hi"}] and "stream_options" not in ch


# --- the client against canned responses over real HTTP ------------------------------------------


async def _handler(request: web.Request) -> web.StreamResponse:
    mode = request.match_info["mode"]
    if mode == "ok":
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for line in GENERATE.split(b"\n\n"):
            if line:
                await resp.write(line + b"\n\n")
                await asyncio.sleep(0.01)
        return resp
    if mode == "busy":
        return web.json_response({"error": "server overloaded"}, status=503)
    if mode == "hang":
        await asyncio.sleep(3)
    if mode in ("cut", "nodone"):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(GENERATE.split(b"\n\n")[0] + b"\n\n")
        if mode == "cut":
            request.transport.close()  # the server dies mid-stream
            await asyncio.sleep(1)
        return resp
    if mode == "garbage":
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: <html>\n\n")
        return resp
    if mode == "whole":
        return web.json_response(
            {
                "text": "Hello",
                "meta_info": {"prompt_tokens": 3, "completion_tokens": 4, "finish_reason": {"type": "length"}},
            }
        )
    raise AssertionError(mode)


async def _with_stub(fn):
    app = web.Application()
    app.router.add_post("/{mode}/generate", _handler)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        async with make_client(5.0, connections=4) as client:
            return await fn(client, f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()


def test_client_records_success_and_every_kind_of_failure_as_data():
    async def go(client, base):
        out = {}
        for mode in ("ok", "busy", "cut", "nodone", "garbage"):
            out[mode] = await send(client, f"{base}/{mode}", "generate", "p", max_tokens=6, timeout_s=5)
        out["hang"] = await send(client, f"{base}/hang", "generate", "p", max_tokens=6, timeout_s=0.3)
        out["whole"] = await send(client, f"{base}/whole", "generate", "p", max_tokens=4, stream=False)
        out["refused"] = await send(client, "http://127.0.0.1:9", "generate", "p", max_tokens=6)
        return out

    r = asyncio.run(_with_stub(go))
    ok = r["ok"]
    assert ok.ok and ok.error is None and ok.http_status == 200
    assert ok.completion_tokens == 6 and ok.chunk_tokens == [2, 3, 1] and ok.chunks == 3
    assert 0 < ok.ttft_s < ok.latency_s and ok.accept_length == 3.0
    assert ok.chunk_times_s == sorted(ok.chunk_times_s) and ok.chunk_times_s[-1] > ok.chunk_times_s[0]  # spaced chunks
    assert not r["busy"].ok and r["busy"].http_status == 503 and r["busy"].error.startswith("http 503: ")
    assert "overloaded" in r["busy"].error
    assert not r["cut"].ok and r["cut"].error.startswith("disconnect"), r["cut"].error
    assert r["cut"].completion_tokens == 2  # what arrived before the cut is kept
    assert not r["nodone"].ok and r["nodone"].error == "disconnect: stream ended before [DONE]"
    assert not r["garbage"].ok and r["garbage"].error.startswith("malformed: ")
    assert not r["hang"].ok and r["hang"].error == "timeout after 0.3s" and r["hang"].latency_s < 2
    w = r["whole"]
    assert w.ok and w.completion_tokens == 4 and w.ttft_s is None and w.chunk_tokens == [4] and w.text == "Hello"
    assert not r["refused"].ok and r["refused"].error.startswith("connect")


def test_send_one_is_usable_from_synchronous_code():
    rec = send_one("http://127.0.0.1:9", max_tokens=1, timeout_s=2)
    assert not rec.ok and rec.error.startswith("connect")
