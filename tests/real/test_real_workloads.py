"""What the new workloads need of a server, on real SGLang (CPU backend, the tiny model) and on the
fake side by side: they must agree, and where they do not, real SGLang is right.

- ``/generate`` with ``input_ids``: the prompt tokens reported are the ids sent;
- a conversation's second turn (the first turn's ids, its answer, a new question) reports
  ``meta_info.cached_tokens`` covering the first turn: the prefix cache as a chat uses it;
- ``/v1/tokenize`` (``sweep.bench.workloads.fit``'s route): the response's shape and counts.

The tiny model's tokenizer says ``model_max_length`` 1e30 (what transformers writes when a model
sets none), and SGLang's ``/v1/tokenize`` answers that with a 500 (orjson: "Integer exceeds 64-bit
range", seen on this install); the benchmark then keeps its estimates. So the server here serves a
copy of the model whose tokenizer says 4096, as a served model's does.
"""

from __future__ import annotations

import json
import shutil

import httpx
import pytest

from tests.bench.bench_fake_server import start_fake
from tests.real.servers import flush, live_server

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(600)]

QUESTION = "Write a short function that adds two numbers and explain what it does, step by step."
FOLLOW_UP = " Now do the same for three numbers, please."


def _post(url: str, route: str, body: dict) -> dict:
    r = httpx.post(url + route, json=body, timeout=180)
    assert r.status_code == 200, (route, r.status_code, r.text[:500])
    return r.json()


def _generate(url: str, ids: list[int], n: int) -> dict:
    return _post(
        url,
        "/generate",
        {"input_ids": ids, "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}},
    )


def _observe(url: str) -> dict:
    """What a server says to the three checks (its own token ids: each tokenizer its own)."""
    one = _post(url, "/v1/tokenize", {"prompt": QUESTION, "add_special_tokens": False})
    many = _post(url, "/v1/tokenize", {"prompt": [QUESTION, FOLLOW_UP], "add_special_tokens": False})
    flush(url)
    first_ids = one["tokens"]
    first = _generate(url, first_ids, 8)
    second_ids = first_ids + list(first["output_ids"]) + many["tokens"][1]
    second = _generate(url, second_ids, 4)
    return {
        "tokenize_keys": sorted(one),
        "count": one["count"],
        "tokens": len(one["tokens"]),
        "counts": many["count"],
        "max_model_len": one["max_model_len"],
        "sent": len(first_ids),
        "first_prompt": first["meta_info"]["prompt_tokens"],
        "first_cached": first["meta_info"]["cached_tokens"],
        "answer": len(first["output_ids"]),
        "second_sent": len(second_ids),
        "second_prompt": second["meta_info"]["prompt_tokens"],
        "second_cached": second["meta_info"]["cached_tokens"],
    }


def test_input_ids_prefix_cache_and_tokenize_agree_with_the_fake(real_sglang, tmp_path):
    fake = start_fake(tmp_path, speed=50.0)
    try:
        fake_seen = _observe(fake.url)
    finally:
        fake.kill()
    model = tmp_path / "model"  # the tiny model, its tokenizer's model_max_length bounded (see the docstring)
    shutil.copytree(real_sglang.models / "target", model)
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**cfg, "model_max_length": 4096}))
    with live_server(real_sglang, tmp_path / "server.log", "--model-path", str(model), timeout_s=300) as srv:
        real_seen = _observe(srv.url)
    for seen in (real_seen, fake_seen):  # each on its own tokenizer, the same relations
        assert seen["tokenize_keys"] == ["count", "max_model_len", "tokens"], seen
        assert seen["count"] == seen["tokens"] == seen["counts"][0] and isinstance(seen["counts"], list), seen
        assert seen["first_prompt"] == seen["sent"] and seen["second_prompt"] == seen["second_sent"], seen
        assert seen["first_cached"] == 0, seen  # flushed before
        # the second turn hits the first turn's prompt and its answer but the last token (no KV for it yet)
        assert seen["second_cached"] == seen["sent"] + seen["answer"] - 1, (real_seen, fake_seen)
