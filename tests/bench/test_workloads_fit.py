"""Lengths on the served model's tokenizer (``sweep.bench.workloads.fit``): against the fake's
``/v1/tokenize`` on loopback, and against servers that count otherwise or have no such route
(an ``httpx.MockTransport`` standing in for a foreign server, not for our code)."""

from __future__ import annotations

import asyncio
import json

import httpx

from sweep.bench import workloads
from sweep.bench.workloads import Request, Workload, fit, tokens
from sweep.core import workload_spec


def _synthetic(spec: str = "synthetic:in=uniform(20,60),out=4,requests=5") -> Workload:
    from sweep.core.settings import BenchSettings

    return workloads.load(BenchSettings(workload=workload_spec.settings(spec)))


def _fit(transport: httpx.MockTransport, w: Workload, api: str = "chat", scale: float = 1.0) -> Workload:
    async def go() -> Workload:
        async with httpx.AsyncClient(transport=transport) as client:
            return await fit.fit(client, "http://server", w, api, scale)

    return asyncio.run(go())


def _tokenizer(words_per_token: int, calls: list):
    """A server whose tokenizer makes one token of every ``words_per_token`` words (rounded up)."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body)
        counts = [-(-len(p.split()) // words_per_token) for p in body["prompt"]]
        return httpx.Response(200, json={"tokens": [[0] * c for c in counts], "count": counts, "max_model_len": 4096})

    return httpx.MockTransport(handle)


def test_text_prompts_come_to_their_drawn_length_on_a_tokenizer_that_counts_otherwise():
    w = _synthetic()
    calls: list = []
    out = _fit(_tokenizer(2, calls), w)
    for before, after in zip(w.requests, out.requests):
        assert after.lengths_exact is True and after.input_len == before.input_len
        assert -(-len(after.text.split()) // 2) == after.input_len  # the server's count of the text sent
        assert after.prompt_text() == after.text
    assert calls and all(c["add_special_tokens"] is False for c in calls) and len(calls) <= fit.ROUNDS
    assert _fit(_tokenizer(2, []), w, api="generate").requests == tuple(  # ids go as ids: nothing to fit
        r.__class__(**{**r.__dict__, "lengths_exact": True}) for r in w.requests
    )


def test_without_a_tokenize_route_the_lengths_stay_estimates_and_say_so(caplog):
    w = _synthetic()
    out = _fit(httpx.MockTransport(lambda r: httpx.Response(404, json={"detail": "Not Found"})), w)
    assert all(r.lengths_exact is False and r.text == "" for r in out.requests)
    assert "keep estimated lengths" in caplog.text and "no count from /v1/tokenize" in caplog.text


def test_sharegpt_answers_are_counted_once_each_and_scaled():
    w = Workload(
        "sharegpt:x",
        (
            Request(text="q1", answer="one two three four five", output_len=6),
            Request(text="q2", answer="one two three four five", output_len=6),
            Request(text="q3"),
        ),
    )
    calls: list = []
    out = _fit(_tokenizer(1, calls), w, api="generate", scale=2.0)
    assert [r.output_len for r in out.requests] == [10, 10, None]
    assert [r.lengths_exact for r in out.requests] == [True, True, None]
    assert calls == [{"prompt": ["one two three four five"], "add_special_tokens": False}]


def test_the_fakes_tokenize_route_answers_as_sglangs_and_fits_chat_text(fake_sglang):
    server = fake_sglang(speed=50.0)
    one = httpx.post(server.url + "/v1/tokenize", json={"prompt": "abcdefgh!"}, timeout=10).json()
    assert set(one) == {"tokens", "count", "max_model_len"} and one["count"] == 3 == len(one["tokens"])
    many = httpx.post(server.url + "/tokenize", json={"prompt": ["abcd", "abcdefgh"]}, timeout=10).json()
    assert many["count"] == [1, 2] and [len(t) for t in many["tokens"]] == [1, 2]
    assert httpx.post(server.url + "/v1/tokenize", json={}, timeout=10).status_code == 422

    async def go() -> Workload:
        async with httpx.AsyncClient() as client:
            return await fit.fit(client, server.url, _synthetic(), "chat")

    out = asyncio.run(go())
    counts = httpx.post(server.url + "/v1/tokenize", json={"prompt": [r.text for r in out.requests]}, timeout=10).json()
    assert counts["count"] == [r.input_len for r in out.requests] and all(r.lengths_exact for r in out.requests)
    assert tokens.ids_text(out.requests[0].input_ids or ()) == out.requests[0].text  # the fake: one word, one token
