"""The fake's HTTP API, through clients nobody here wrote (openai, curl) and plain HTTP."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time

import openai
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(module_starter):
    server = module_starter("--enable-metrics")
    server.wait_ready()
    return server


@pytest.fixture(scope="module")
def spec(module_starter):
    server = module_starter(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/models/drafter",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--fake-accept-rate",
        "0.8",
    )
    server.wait_ready()
    return server


def gen(server, text="Write a quicksort in Python.", stream=False, **sampling):
    sampling.setdefault("max_new_tokens", 16)
    return server.post("/generate", json={"text": text, "sampling_params": sampling, "stream": stream})


# --- /generate ---


def test_generate_non_streaming(base):
    r = gen(base, max_new_tokens=24, ignore_eos=True, temperature=0)
    assert r.status_code == 200
    body = r.json()
    meta = body["meta_info"]
    assert len(body["output_ids"]) == meta["completion_tokens"] == 24
    assert body["text"] and meta["finish_reason"] == {"type": "length", "length": 24}
    assert meta["prompt_tokens"] > 0 and meta["e2e_latency"] > 0 and meta["cached_tokens"] == 0
    assert "spec_verify_ct" not in meta
    assert gen(base, max_new_tokens=24, ignore_eos=True).json()["text"] == body["text"]  # deterministic


def test_generate_stops_at_eos_unless_ignored(base):
    meta = gen(base, max_new_tokens=2000).json()["meta_info"]
    assert meta["finish_reason"]["type"] == "stop" and meta["completion_tokens"] < 2000


def test_generate_streaming_cumulative_chunks(base, fk):
    r = gen(base, stream=True, max_new_tokens=10, ignore_eos=True)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = fk.sse_events(r.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == list(range(1, 11))  # one token per step
    for a, b in zip(chunks, chunks[1:]):
        assert b["text"].startswith(a["text"])  # cumulative text
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"


def test_speculative_chunks_carry_several_tokens(spec, fk):
    r = gen(spec, stream=True, max_new_tokens=64, ignore_eos=True)
    chunks = [json.loads(e) for e in fk.sse_events(r.text)[:-1]]
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts[-1] == 64 and max(b - a for a, b in zip(counts, counts[1:])) > 1
    meta = chunks[-1]["meta_info"]
    assert meta["spec_verify_ct"] == len(chunks) - 1  # one chunk per verify step, after the prefill's
    assert meta["spec_accept_length"] == pytest.approx(64 / meta["spec_verify_ct"])
    assert 0 < meta["spec_accept_rate"] <= 1


def test_curl_generate(base):
    url = f"{base.base}/generate"
    payload = json.dumps({"text": "Hello", "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}})
    out = subprocess.run(
        ["curl", "-sS", "--fail", url, "-H", "Content-Type: application/json", "-d", payload],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["meta_info"]["completion_tokens"] == 5
    stream = json.dumps({"text": "Hello", "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}, "stream": True})
    out = subprocess.run(["curl", "-sS", "-N", "--fail", url, "-d", stream], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.rstrip().endswith("data: [DONE]")


def test_generate_batch_of_texts(base):
    r = base.post("/generate", json={"text": ["a", "b"], "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}})
    assert [x["meta_info"]["completion_tokens"] for x in r.json()] == [3, 3]


# --- OpenAI API, through the openai client ---


@pytest.fixture(scope="module")
def client(base):
    with openai.OpenAI(base_url=f"{base.base}/v1", api_key="EMPTY", max_retries=0, timeout=30) as c:
        yield c


def test_openai_completions(client):
    r = client.completions.create(model="m", prompt="def fib(n):", max_tokens=12, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.choices[0].text
    assert r.usage.completion_tokens == 12 and r.usage.total_tokens == r.usage.prompt_tokens + 12


def test_openai_completions_streaming(client):
    stream = client.completions.create(
        model="m",
        prompt="def fib(n):",
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text and chunks[-1].usage.completion_tokens == 12
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_openai_chat(client):
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Say hi"}], max_tokens=8, extra_body={"ignore_eos": True}
    )
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content
    assert r.usage.completion_tokens == 8


def test_openai_chat_streaming(client):
    stream = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Say hi"}],
        max_tokens=8,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_openai_errors_are_error_objects(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="m", prompt="x", max_tokens=8, temperature=-1)
    assert "temperature must be non-negative" in str(info.value)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[], max_tokens=8)


def test_models_and_model_info(base):
    models = base.get("/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == "/models/Llama-3.1-8B-Instruct"
    for path in ("/model_info", "/get_model_info"):
        info = base.get(path).json()
        assert info["model_path"] == "/models/Llama-3.1-8B-Instruct" and info["is_generation"] is True


# --- server info, flush, metrics ---


def test_server_info_accept_length_and_flush(spec):
    assert spec.post("/flush_cache").status_code == 200
    info = spec.get("/server_info").json()
    assert info["version"] == "0.5.10" and info["speculative_num_steps"] == 3
    assert "avg_spec_accept_length" not in info["internal_states"][0]  # reset by the flush
    gen(spec, max_new_tokens=200, ignore_eos=True)
    state = spec.get("/get_server_info").json()["internal_states"][0]
    from sweep.fake import model

    expected = model.expected_accept_length(model.Spec(3, 1, 4, accept_rate=0.8))
    assert state["avg_spec_accept_length"] == pytest.approx(expected, rel=0.02)
    assert spec.get("/flush_cache").status_code == 200
    assert "avg_spec_accept_length" not in spec.get("/server_info").json()["internal_states"][0]


def test_flush_cache_refused_while_requests_run(base):
    done = threading.Event()
    worker = threading.Thread(target=lambda: (gen(base, max_new_tokens=6000, ignore_eos=True), done.set()))
    worker.start()
    try:
        deadline = time.monotonic() + 20
        # real SGLang's label layout: engine_type, model_name, and the reporting rank's moe_ep/pp/tp ranks
        running = re.compile(
            r'^sglang:num_running_reqs\{[^}]*model_name="/models/Llama-3\.1-8B-Instruct"[^}]*\} 1\.0$', re.M
        )
        while not running.search(base.get("/metrics").text):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        r = base.post("/flush_cache")
        assert r.status_code == 400 and r.text.startswith("Cache flushed.")
    finally:
        worker.join(timeout=60)
    assert done.is_set()
    assert base.post("/flush_cache").status_code == 200
    assert "Cache not flushed because there are pending requests." in base.log()


def test_metrics(base, spec):
    gen(base, max_new_tokens=4)
    text = base.get("/metrics").text
    for name in (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:generation_tokens_total",
        "sglang:prompt_tokens_total",
        "sglang:spec_accept_length",
        "sglang:time_to_first_token_seconds_bucket",
        "sglang:e2e_request_latency_seconds_count",
    ):
        assert name in text
    assert spec.get("/metrics").status_code == 404  # only with --enable-metrics


def test_health_generate(base):
    assert base.get("/health").status_code == 200
    assert base.get("/health_generate").status_code == 200


# --- malformed requests get SGLang's errors and never crash the server ---


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        (b"{not json", 422, "JSON decode error"),
        (b"[1, 2]", 422, "dictionary"),
        (
            json.dumps({"sampling_params": {}}).encode(),
            400,
            "Either text, input_ids or input_embeds should be provided.",
        ),
        (
            json.dumps({"text": "x", "sampling_params": {"temperature": -1}}).encode(),
            400,
            "temperature must be non-negative",
        ),
        (json.dumps({"text": "x", "sampling_params": {"top_p": 0}}).encode(), 400, "top_p must be in (0, 1]"),
        (
            json.dumps({"text": "x", "sampling_params": {"max_new_tokens": -1}}).encode(),
            400,
            "max_new_tokens must be at least 0",
        ),
        (
            json.dumps({"text": "x", "sampling_params": {"max_new_tokens": "many"}}).encode(),
            400,
            "Invalid sampling_params",
        ),
        (
            json.dumps({"text": "x", "sampling_params": {"bogus": 1}}).encode(),
            400,
            "unexpected keyword argument 'bogus'",
        ),
        (
            json.dumps({"text": "x", "sampling_params": {"max_new_tokens": 10**7}}).encode(),
            400,
            "exceeds the model's maximum context length",
        ),
        (json.dumps({"text": 5}).encode(), 400, "text must be a string"),
    ],
)
def test_malformed_generate(base, body, status, fragment):
    r = base.post("/generate", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == status and fragment in r.text


def test_unknown_routes_and_methods(base):
    assert base.get("/nope").status_code == 404 and base.get("/nope").json() == {"detail": "Not Found"}
    assert base.get("/generate").status_code == 405
    assert base.post("/v1/completions", content=b"{").json()["object"] == "error"
    assert base.get("/health").status_code == 200  # still serving after all of the above


def test_zero_new_tokens(base):
    meta = gen(base, max_new_tokens=0).json()["meta_info"]
    assert meta["completion_tokens"] == 0 and meta["finish_reason"]["type"] == "length"


def test_incremental_streaming_output(start_fake, fk):
    server = start_fake("--incremental-streaming-output")
    server.wait_ready()
    chunks = [
        json.loads(e) for e in fk.sse_events(gen(server, stream=True, max_new_tokens=6, ignore_eos=True).text)[:-1]
    ]
    whole = gen(server, max_new_tokens=6, ignore_eos=True).json()["text"]
    assert "".join(c["text"] for c in chunks) == whole
