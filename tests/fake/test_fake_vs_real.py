"""The fake server against what REAL SGLang printed and answered (shared/sglang-cpu/transcripts, a CPU
build newer than 0.5.23; see its README). Structure, not numbers: the order of the distinctive
startup lines, the process tree, the keys of the introspection routes, the /metrics families, the
shape of stream events and chunks, /health before and after the warmup, the shutdown sequences.

The fake imitates its newest supported version here (the one whose wording is the real build's).

Differences the fake keeps on purpose, because it plays a GPU server and the transcripts come from
a CPU one (each is asserted below, so that it stays deliberate):

- CUDA graph capture (:data:`GPU_ONLY`): ``Capture target decode|verify CUDA graph begin/end``,
  ``Capture draft decode|extend CUDA graph begin/end`` and rank 0's ``Capturing batches (bs=...)``
  tqdm bars, between the last ``Memory pool end`` and ``max_total_num_tokens=``. SGLang on CPU
  captures nothing (the CPU graph runner only runs with torch.compile).
- ``available_gpu_mem=`` where the CPU build says ``available_cpu_mem=``; ``cuda graph:`` where it
  says ``cpu graph:`` in the batch lines.
- With tp > 1 the scheduler lines carry ``TP{rank}`` and the schedulers are titled
  ``sglang::scheduler_TP{rank}`` (SGLang's rule; every CPU transcript has tp 1: no prefix, plain
  ``sglang::scheduler``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import psutil
import pytest

from sweep.fake import metrics, progress
from sweep.fake.args import SUPPORTED_VERSIONS, version_tuple

REPO = Path(__file__).resolve().parents[2]
TRANSCRIPTS = REPO.parent / "shared" / "sglang-cpu" / "transcripts"
NEWEST = max(SUPPORTED_VERSIONS, key=version_tuple)
MODEL = "/models/tiny"  # the transcripts' model path (a Llama: LlamaForCausalLM, as the fake guesses)
# the transcripts' flags the fake knows (it binds loopback, has no --device; the drafter's weights
# were random, --speculative-draft-load-format dummy, which is why their drafter loads draw no bar)
COMMON = ("--fake-version", NEWEST, "--enable-metrics", "--max-total-tokens", "32768")
EAGLE3 = (
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "/models/tiny-eagle3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "2",
    "--speculative-num-draft-tokens",
    "4",
)
EAGLE = (
    "--speculative-algorithm",
    "EAGLE",
    "--speculative-draft-model-path",
    "/models/tiny-eagle",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "2",
    "--speculative-num-draft-tokens",
    "4",
)
NGRAM = ("--speculative-algorithm", "NGRAM")
# server args the fake's flag table (args.py) names as older SGLang did: not in the real /server_info
OLDER_FLAG_NAMES = {
    "cuda_graph_bs",
    "enable_ep_moe",
    "speculative_ngram_max_match_window_size",
    "speculative_ngram_min_match_window_size",
    "stream_output",
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not TRANSCRIPTS.is_dir(), reason=f"no real-SGLang transcripts at {TRANSCRIPTS} (shared/sglang-cpu)"
    ),
]

_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?P<rank>(?: [A-Z_]+\d+)*)\] ")
GB = r"-?[\d.]+ GB"
# the distinctive startup lines, in the form both servers print them
EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx))
    for name, rx in (
        ("server_args", r"^server_args=ServerArgs\(model_path="),
        ("dist_begin", r"^Init torch distributed begin\.$"),
        ("dist_end", rf"^Init torch distributed ends\. elapsed=[\d.]+ s, mem usage={GB}$"),
        ("load_begin", rf"^Load weight begin\. avail mem={GB}$"),
        ("load_end", rf"^Load weight end\. elapsed=[\d.]+ s, type=(?P<type>\w+), avail mem={GB}, mem usage={GB}\.$"),
        ("kv_cache", rf"^KV Cache is allocated\. dtype: torch\.bfloat16, #tokens: \d+, K size: {GB}, V size: {GB}$"),
        ("pool_end", rf"^Memory pool end\. avail mem={GB}$"),
        (
            "max_total",
            rf"^max_total_num_tokens=\d+, chunked_prefill_size=\d+, max_prefill_tokens=\d+, "
            rf"max_running_requests=\d+, context_len=\d+, available_(?:cpu|gpu)_mem={GB}$",
        ),
        (
            "engine_timings",
            r"^Engine startup timings \(s\): load_weight=[\d.]+, kv_cache_allocation=[\d.]+, "
            r"scheduler_e2e=[\d.]+, cuda_graph=\{prefill=[\d.]+, decode=[\d.]+, target_verify=[\d.]+, "
            r"draft_prefill=[\d.]+, draft_decode=[\d.]+, draft_extend=[\d.]+\}, tokenizer_e2e=[\d.]+$",
        ),
        ("uvicorn", r"^INFO:     Uvicorn running on http://127\.0\.0\.1:\d+ \(Press CTRL\+C to quit\)$"),
        ("fired_up", r"^The server is fired up and ready to roll!$"),
    )
)
GPU_ONLY: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx))
    for name, rx in (
        (
            "capture_begin",
            rf"^Capture (?:target (?:decode|verify)|draft (?:decode|extend)) CUDA graph begin\. "
            rf"backend=full, num_tokens_per_req=\d+, bs=\[[\d, ]+\], avail mem={GB}$",
        ),
        (
            "capture_end",
            rf"^Capture (?:target (?:decode|verify)|draft (?:decode|extend)) CUDA graph end\. "
            rf"elapsed=[\d.]+ s, mem usage={GB}, avail mem={GB}\.$",
        ),
    )
)
SHUTDOWN: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx))
    for name, rx in (
        ("sigterm", r"^SIGTERM received\. signum=None frame=None\. Draining requests and shutting down\.\.\.$"),
        (
            "child_crashed",
            r"^Subprocess scheduler_0 \(pid=\d+\) crashed with exit code -15\. Triggering SIGQUIT for cleanup\.\.\.$",
        ),
        ("sigquit", r"^SIGQUIT received\. signum=None, frame=None\. It usually means one child failed\.$"),
        ("sleeping", r"^Sleeping 5 seconds before crash diagnostics to let GPU activity settle\.$"),
        ("no_live", r"^No live scheduler processes found; skipping py-spy and CUDA coredump\.$"),
        (
            "draining",
            r"^Gracefully exiting\.\.\. Remaining number of requests \d+\. Remaining requests remaining_rids=\[.*\]\.$",
        ),
        ("kill_tree", r"^kill_process_tree called: parent_pid=(?P<pid>\d+), include_parent=True, pid=(?P=pid)$"),
    )
)
BAR_UPDATE = re.compile(
    r"^(?P<desc>[^:\r]+): +(?P<pct>\d+)% Completed \| (?P<n>\d+)/(?P<total>\d+) "
    r"\[\d\d:\d\d<(?:\d\d:\d\d|\?), +(?:[\d.]+(?:it/s|s/it)|\?it/s)\]$"
)
CAPTURE_UPDATE = re.compile(
    r"^(?:Capturing batches \(bs=(?P<bs>\d+) avail_mem=[\d.]+ GB\): +| *)(?P<pct>\d+)%\|"
    r"[ ▏▎▍▌▋▊▉█]{10}\| (?P<n>\d+)/(?P<total>\d+) \[\d\d:\d\d<(?:\d\d:\d\d|\?), +"
    r"(?:[\d.]+(?:it/s|s/it)|\?it/s)\]$"
)


# --- reading logs (the real transcripts' and the fake's alike) ---


def transcript(name: str) -> str:
    return (TRANSCRIPTS / name).read_bytes().decode("utf-8", "replace")


def records(log: str) -> list[tuple[str, str]]:
    """(rank prefix, message) of each timestamped record; a record glued after an unfinished
    line (nanobind's warnings end without a newline in the transcripts) counts too."""
    out = []
    for line in log.split("\n"):
        for part in re.split(r"(?=\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] )", line):
            m = _PREFIX.match(part)
            if m:
                out.append((m.group("rank").strip(), part[m.end() :].rstrip("\r")))
    return out


def sequence(log: str, events=EVENTS, rank0_only: bool = True) -> list[str]:
    """The events of ``log`` in order; ``load_end`` carries the loaded type (target, drafter)."""
    seq = []
    for rank, message in records(log):
        if rank0_only and rank not in ("", "TP0"):
            continue
        for name, rx in events:
            m = rx.search(message)
            if m:
                seq.append(f"load_end:{m.group('type')}" if name == "load_end" else name)
                break
    return seq


def bars(log: str, pattern: re.Pattern[str] = BAR_UPDATE) -> list[list[re.Match]]:
    """Each tqdm bar of ``log``: the parsed ``\\r``-separated redraws of one line ending in ``\\n``."""
    found = []
    for line in log.split("\n"):
        if not line.startswith("\r"):
            continue
        updates = [pattern.match(u.rstrip(" ")) for u in line.split("\r")[1:]]
        if updates and all(updates):
            found.append(updates)
    return found


def api_samples(name: str) -> dict[str, str]:
    """``===== key: METHOD /path`` sections of an api_samples file -> their raw bodies."""
    out = {}
    for section in re.split(r"^===== ", transcript(name), flags=re.M)[1:]:
        key = section.split(":", 1)[0]
        out[key] = section.split("RAW BODY", 1)[1].split("\n", 1)[1].rstrip("\n")
    return out


def first_json(body: str):
    return json.loads(body.split("\n")[0])


def sse(body: str) -> list[str]:
    return [part[len("data: ") :] for part in body.split("\n\n") if part.startswith("data: ")]


def families(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (sglang:\S+) (\S+)$", text, re.M))


def ptree(name: str) -> tuple[int, list[dict]]:
    """The launcher's pid and its children from a ptree transcript."""
    procs = [
        dict(pid=int(m[0]), ppid=int(m[1]), name=m[2], cmdline=m[3])
        for m in re.findall(r"^pid=(\d+) ppid=(\d+) name='([^']*)' cmdline='(.*)'$", transcript(name), re.M)
    ]
    launcher = next(p for p in procs if "sglang.launch_server" in p["cmdline"])
    return launcher["pid"], [p for p in procs if p["ppid"] == launcher["pid"]]


def role(name: str, cmdline: str) -> str:
    return "resource_tracker" if "multiprocessing.resource_tracker" in cmdline else name


# --- fakes, one per configuration, shared by the module ---


@pytest.fixture(scope="module")
def fakes(module_starter):
    servers = {}

    def get(kind: str):
        if kind not in servers:
            flags = {"baseline": (), "eagle": EAGLE, "eagle3": EAGLE3, "ngram": NGRAM}[kind]
            server = module_starter(*COMMON, *flags, model=MODEL)
            server.wait_ready()
            servers[kind] = server
        return servers[kind]

    return get


def exercise(server) -> None:
    """A few requests, so that every lazily created metric family exists (as in metrics_after)."""
    server.post(
        "/generate",
        json={"text": "hello world the quick", "sampling_params": {"max_new_tokens": 16, "ignore_eos": True}},
    )
    server.post(
        "/generate",
        json={"text": "hello", "stream": True, "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}},
    )


# --- startup ---

REAL_LOGS = {
    "baseline": "startup.log",
    "eagle": "spec_eagle.log",
    "eagle3": "spec_eagle3.log",
    "ngram": "spec_ngram.log",
}


@pytest.mark.parametrize("kind", ["baseline", "eagle", "eagle3", "ngram"])
def test_startup_sequence_matches_the_real_one(fakes, kind):
    real = sequence(transcript(REAL_LOGS[kind]))
    fake_log = fakes(kind).log()
    fake = sequence(fake_log)
    assert fake == real, f"fake:\n{fake}\nreal:\n{real}"
    # the real order, spelled out for EAGLE3: target then drafter load, then both KV caches
    if kind == "eagle3":
        assert real == [
            "server_args",
            "dist_begin",
            "dist_end",
            "load_begin",
            "load_end:LlamaForCausalLM",
            "dist_begin",
            "dist_end",
            "load_begin",
            "load_end:LlamaForCausalLMEagle3",
            "kv_cache",
            "pool_end",
            "kv_cache",
            "pool_end",
            "max_total",
            "engine_timings",
            "uvicorn",
            "fired_up",
        ]
    # GPU-only: the fake captures CUDA graphs after the memory pools, before max_total_num_tokens
    gpu = sequence(fake_log, EVENTS + GPU_ONLY)
    graphs = [e for e in gpu if e.startswith("capture_")]
    assert graphs and not sequence(transcript(REAL_LOGS[kind]), GPU_ONLY)
    assert len(graphs) == {"baseline": 2, "eagle": 6, "eagle3": 6, "ngram": 2}[kind]
    first, last = gpu.index(graphs[0]), len(gpu) - 1 - gpu[::-1].index(graphs[-1])
    assert gpu[first - 1] == "pool_end" and gpu[last + 1] == "max_total"
    assert "available_cpu_mem=" in transcript(REAL_LOGS[kind]) and "available_gpu_mem=" in fake_log


def test_speculative_warnings_are_timestamped_before_server_args(fakes):
    for log in (transcript("spec_eagle3.log"), fakes("eagle3").log()):
        messages = [m for _, m in records(log)]
        reset = next(i for i, m in enumerate(messages) if m.startswith("Max running requests is reset to 48"))
        assert reset < next(i for i, m in enumerate(messages) if m.startswith("server_args="))


def test_weight_loading_bar_as_the_real_one_draws_it(fakes):
    real = bars(transcript("startup.log"))
    fake = bars(fakes("baseline").log())
    assert len(real) == 1 and len(fake) == 1  # the target's; no TP prefix, no timestamp, rank 0
    for bar in (real[0], fake[0]):
        assert bar[0]["desc"] == "Multi-thread loading shards" and bar[0]["n"] == "0"
        assert bar[-1]["n"] == bar[-1]["total"] and bar[-1]["pct"] == "100"
        assert [int(u["n"]) for u in bar] == sorted(int(u["n"]) for u in bar)
    raw = fakes("baseline").log()
    begin = raw.index("Load weight begin.")
    assert raw[raw.index("\n", begin) + 1] == "\r"  # the bar follows the begin line, \r-led, one line


def test_engine_startup_timings_follow_the_fake_phases(fakes):
    log = fakes("eagle3").log()
    line = next(m for _, m in records(log) if m.startswith("Engine startup timings"))
    values = dict(re.findall(r"(\w+)=([\d.]+)", line))
    captured = {
        "target_verify": "Capture target verify",
        "draft_decode": "Capture draft decode",
        "draft_extend": "Capture draft extend",
    }
    for phase, begins in captured.items():
        elapsed = re.search(re.escape(begins) + r" CUDA graph end\. elapsed=([\d.]+) s", log).group(1)
        assert values[phase] == elapsed
    assert values["prefill"] == values["decode"] == values["draft_prefill"] == "0.00"
    loads = [float(x) for x in re.findall(r"Load weight end\. elapsed=([\d.]+) s", log)]
    assert float(values["load_weight"]) == pytest.approx(sum(loads), abs=0.02)


def test_capture_bars_are_gpu_only_and_rank_0_only(start_fake):
    server = start_fake(*COMMON, "--tp-size", "2", model=MODEL)
    server.wait_ready()
    log = server.log()
    capture = bars(log, CAPTURE_UPDATE)
    assert len(capture) == 1 and not bars(transcript("startup.log"), CAPTURE_UPDATE)
    sizes = list(dict.fromkeys(int(u["bs"]) for u in capture[0] if u["bs"]))  # redraws repeat a size
    assert sizes == sorted(set(sizes), reverse=True) and sizes[-1] == 1  # largest first, as SGLang
    assert int(capture[0][-1]["n"]) == int(capture[0][-1]["total"]) == len(sizes)
    assert len(bars(log)) == 1  # one weight bar too: rank 0's
    # tp > 1: the rank prefix (no CPU transcript has it)
    assert re.search(r"^\[[\d\- :]+ TP1\] Load weight begin\.", log, re.M)
    assert sequence(log) == sequence(transcript("startup.log"))


# --- processes ---


@pytest.mark.parametrize("kind, tree", [("baseline", "ptree_baseline.txt"), ("ngram", "ptree_ngram.txt")])
def test_process_tree_matches_the_real_one(fakes, kind, tree):
    _, real_children = ptree(tree)
    server = fakes(kind)
    launcher = psutil.Process(server.proc.pid)
    kids = launcher.children()
    fake = Counter(role(p.name(), " ".join(p.cmdline())) for p in kids)
    assert (
        fake
        == Counter(role(p["name"], p["cmdline"]) for p in real_children)
        == Counter({"sglang::scheduler": 1, "sglang::detokenizer": 1, "resource_tracker": 1})
    )
    assert all(os.getpgid(p.pid) == os.getpgid(launcher.pid) for p in kids)  # one process group


def test_tp_ranks_are_titled_as_sglang_titles_them(start_fake):
    server = start_fake(*COMMON, "--tp-size", "2", model=MODEL)
    server.wait_ready()
    names = sorted(p.name() for p in server.children() if p.name().startswith("sglang::"))
    assert names == ["sglang::detokenizer", "sglang::scheduler_TP0", "sglang::scheduler_TP1"]


# --- introspection routes ---


@pytest.mark.parametrize("kind, sample", [("baseline", "api_samples.txt"), ("eagle3", "api_samples_eagle3.txt")])
def test_server_info_keys(fakes, kind, sample):
    real_samples = api_samples(sample)
    real = first_json(real_samples["server_info"])
    assert real == first_json(real_samples["get_server_info"])
    server = fakes(kind)
    fake = server.get("/server_info").json()
    assert set(fake) == set(server.get("/get_server_info").json())
    real_state, fake_state = real["internal_states"][0], fake["internal_states"][0]
    launcher_keys = set(real) - set(real_state)  # version, status, internal_states, kv_events, ...
    state_keys = set(real_state) - set(real)  # memory_usage, last_gen_throughput, ...
    assert launcher_keys <= set(fake) and state_keys <= set(fake_state)
    assert (set(fake) - set(fake_state)) == launcher_keys
    assert set(fake_state["memory_usage"]) == set(real_state["memory_usage"])
    assert set(fake_state["memory_usage"]["graph"]) == set(real_state["memory_usage"]["graph"])
    assert set(fake["startup_time"]) == set(real["startup_time"])
    assert set(fake_state["startup_time"]) == set(real_state["startup_time"])
    assert set(fake["startup_time"]["cuda_graph"]) == set(real["startup_time"]["cuda_graph"])
    # every server arg the fake reports is a real one, but for older flag names of args.py
    fake_args = set(fake) - launcher_keys
    assert fake_args - set(real) <= OLDER_FLAG_NAMES, sorted(fake_args - set(real))
    for key in (
        "model_path",
        "served_model_name",
        "tp_size",
        "max_running_requests",
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_draft_model_path",
        "enable_metrics",
    ):
        assert key in fake and key in real
    assert fake["status"] == real["status"] == "ready"


def test_accept_length_appears_in_internal_states_once_verified(fakes):
    server = fakes("eagle3")
    server.post("/flush_cache")
    assert "avg_spec_accept_length" not in server.get("/server_info").json()["internal_states"][0]
    exercise(server)
    assert server.get("/server_info").json()["internal_states"][0]["avg_spec_accept_length"] > 0


def test_model_info_and_models_keys(fakes):
    real = api_samples("api_samples.txt")
    server = fakes("baseline")
    for route, key in (("/model_info", "model_info"), ("/get_model_info", "get_model_info")):
        fake, want = server.get(route).json(), first_json(real[key])
        assert list(fake) == list(want)
        assert set(fake["embedding"]) == set(want["embedding"])
        assert fake["model_type"] == want["model_type"] == "llama"
        assert fake["architectures"] == want["architectures"]
    fake, want = server.get("/v1/models").json(), first_json(real["v1_models"])
    assert list(fake) == list(want) and list(fake["data"][0]) == list(want["data"][0])


@pytest.mark.parametrize(
    "kind, sample",
    [("baseline", "api_samples.txt"), ("eagle3", "api_samples_eagle3.txt"), ("ngram", "api_samples_ngram.txt")],
)
def test_metrics_families(fakes, kind, sample):
    server = fakes(kind)
    exercise(server)
    r = server.get("/metrics")
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    real = families(api_samples(sample)["metrics_after"])
    assert families(r.text) == real
    assert set(metrics.family_names(kind != "baseline")) == set(real)


def test_metrics_parse_and_carry_the_real_label_layout(fakes):
    from prometheus_client.parser import text_string_to_metric_families

    server = fakes("eagle3")
    exercise(server)
    got = {f.name: f for f in text_string_to_metric_families(server.get("/metrics").text)}
    running = got["sglang:num_running_reqs"].samples[0].labels
    assert set(running) == {"engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"}
    assert running["model_name"] == MODEL
    assert {s.labels["is_streaming"] for s in got["sglang:generation_tokens"].samples} == {"false", "true"}


# --- requests ---


def _meta_keys(event: str) -> list[str]:
    return list(json.loads(event)["meta_info"])


@pytest.mark.parametrize(
    "kind, sample",
    [("baseline", "api_samples.txt"), ("eagle3", "api_samples_eagle3.txt"), ("ngram", "api_samples_ngram.txt")],
)
def test_generate_shapes(fakes, kind, sample):
    real = api_samples(sample)
    server = fakes(kind)
    body = {
        "text": "hello world the quick",
        "sampling_params": {"max_new_tokens": 16, "ignore_eos": True, "temperature": 0},
    }
    fake = server.post("/generate", json=body).json()
    want = first_json(real["generate_nonstream"])
    assert list(fake) == list(want) and list(fake["meta_info"]) == list(want["meta_info"])

    r = server.post("/generate", json={**body, "stream": True})
    assert r.headers["content-type"].startswith("text/event-stream")
    fake_events, real_events = sse(r.text), sse(real["generate_stream"])
    assert fake_events[-1] == real_events[-1] == "[DONE]"
    assert _meta_keys(fake_events[0]) == _meta_keys(real_events[0])  # the send time: first chunk only
    assert _meta_keys(fake_events[-2]) == _meta_keys(real_events[-2])  # latency, spec figures: last only
    if len(fake_events) > 3 and len(real_events) > 3:
        assert _meta_keys(fake_events[1]) == _meta_keys(real_events[1])
    for events in (fake_events, real_events):
        chunks = [json.loads(e) for e in events[:-1]]
        counts = [c["meta_info"]["completion_tokens"] for c in chunks]
        assert counts[-1] == 16 and counts == sorted(counts)
        assert all(len(c["output_ids"]) == c["meta_info"]["completion_tokens"] for c in chunks)  # cumulative
        assert all(chunks[-1]["text"].startswith(c["text"]) for c in chunks)
        assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])


def _choice_keys(chunk: dict) -> list[list[str]]:
    return [list(c) + (list(c["delta"]) if "delta" in c else []) for c in chunk["choices"]]


@pytest.mark.parametrize("kind, sample", [("baseline", "api_samples.txt"), ("eagle3", "api_samples_eagle3.txt")])
def test_openai_stream_shapes_with_usage(fakes, kind, sample):
    real = api_samples(sample)
    server = fakes(kind)
    options = {"include_usage": True, "continuous_usage_stats": True}
    for route, key, req in (
        ("/v1/completions", "v1_completions_stream_usage", {"prompt": "hello world", "max_tokens": 8}),
        (
            "/v1/chat/completions",
            "v1_chat_stream_usage",
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6},
        ),
    ):
        body = {"model": MODEL, "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": options, **req}
        fake = [json.loads(e) for e in sse(server.post(route, json=body).text)[:-1]]
        want = [json.loads(e) for e in sse(real[key])[:-1]]
        # the usage chunk before [DONE]: choices [], the usage object's keys as the real one's
        assert fake[-1]["choices"] == want[-1]["choices"] == []
        assert list(fake[-1]) == list(want[-1]) and list(fake[-1]["usage"]) == list(want[-1]["usage"])
        assert fake[-1]["usage"]["completion_tokens"] == req["max_tokens"]
        # the other chunks: the same key sets, in the same places (role, content, finish chunks)
        assert list(fake[0]) == list(want[0]) and _choice_keys(fake[0]) == _choice_keys(want[0])
        assert list(fake[-2]) == list(want[-2]) and _choice_keys(fake[-2]) == _choice_keys(want[-2])
        content = [c for c in fake[:-1] if "usage" in c]
        assert content and all(list(c["usage"]) == list(want[1]["usage"]) for c in content)
        assert [c["usage"]["completion_tokens"] for c in content] == sorted(
            c["usage"]["completion_tokens"] for c in content
        )
        assert {tuple(map(tuple, _choice_keys(c))) for c in content} <= {
            tuple(map(tuple, _choice_keys(c))) for c in want[:-1]
        }


def test_openai_plain_stream_and_whole_completion(fakes):
    real = api_samples("api_samples.txt")
    server = fakes("baseline")
    body = {"model": MODEL, "prompt": "hello world", "max_tokens": 4, "temperature": 0, "ignore_eos": True}
    fake = server.post("/v1/completions", json=body).json()
    want = first_json(real["v1_completions_nonstream"])
    assert list(fake) == list(want) and list(fake["usage"]) == list(want["usage"])
    assert list(fake["choices"][0]) == list(want["choices"][0])
    events = sse(server.post("/v1/completions", json={**body, "stream": True}).text)
    want_events = sse(real["v1_completions_stream_plain"])
    assert events[-1] == want_events[-1] == "[DONE]"
    for e in events[:-1]:
        assert list(json.loads(e)) == list(json.loads(want_events[0])) and json.loads(e)["usage"] is None


# --- /health ---


def test_health_503_with_an_empty_body_until_the_warmup_then_200(start_fake):
    # startup at 120x: ~3 s in all, the warmup (the 503 window) 50 ms
    server = start_fake(*COMMON, "--fake-speed", "50", "--fake-startup-speed", "120", fast=False, model=MODEL)
    seen: list = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=5.0) as client:
            while not stop.is_set():
                try:
                    r = client.get(f"{server.base}/health")
                except httpx.TransportError:
                    continue
                seen.append((r.status_code, r.content))
                if r.status_code == 200:
                    return

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        server.wait_ready(timeout=60)
        thread.join(timeout=20)
    finally:
        stop.set()
    statuses = [s for s, _ in seen]
    assert statuses[0] == 503 and statuses[-1] == 200 and set(statuses) == {503, 200}
    assert all(body == b"" for _, body in seen)
    server.wait_for_log(r'"GET /health HTTP/1\.1" 200 OK')  # the access line follows the answer
    # in both logs: /health answered 503 before "fired up", 200 after
    for log in (transcript("startup.log"), server.log()):
        messages = [m for _, m in records(log)]
        ready = messages.index("The server is fired up and ready to roll!")
        health = [(i, m.rsplit('" ', 1)[1]) for i, m in enumerate(messages) if '"GET /health HTTP/1.1"' in m]
        assert {s for i, s in health if i < ready} == {"503 Service Unavailable"}
        assert {s for i, s in health if i > ready} == {"200 OK"}


# --- shutdown ---


def _shutdown(log: str) -> list[str]:
    start = log.rfind("\n", 0, log.index("SIGTERM received.")) + 1
    return sequence(log[start:], SHUTDOWN, rank0_only=False)


def test_sigterm_to_the_group_is_the_real_crash_sequence(start_fake):
    speed = 20.0
    server = start_fake(*COMMON, "--fake-startup-speed", str(speed), model=MODEL, new_session=True)
    server.wait_ready(timeout=60)
    kids = server.children()
    os.killpg(server.proc.pid, signal.SIGTERM)  # as the sweep's host stops a server
    code = server.wait_exit(timeout=30)
    real = _shutdown(transcript("startup.log"))
    assert real == ["sigterm", "child_crashed", "sigquit", "sleeping", "no_live", "kill_tree"]
    assert _shutdown(server.log()) == real
    assert code == -signal.SIGKILL  # exit status 137: kill_process_tree SIGKILLs the launcher itself
    _, alive = psutil.wait_procs(kids, timeout=10)
    assert not alive
    # how long it sleeps between "sleeping" and "no_live" is the next test's; the whole shutdown's
    # duration is a figure tests/perf/failure_timings.py prints


def _stamp(log: str, message_start: str) -> float:
    m = re.search(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] " + re.escape(message_start), log, re.M)
    assert m, message_start
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))


def test_crash_diagnostics_sleep_is_the_real_one_over_the_startup_speed(monkeypatch, capfd):
    """The SIGQUIT handler sleeps between "Sleeping 5 seconds..." and "No live scheduler...": the real
    launcher the 5 s its log says (its own timestamps, whole seconds, are that far apart), the fake
    the same divided by its startup speed. The handler runs in-process here, the sleep and the
    tree's kill recorded instead of done, each with the log written before it."""
    from types import SimpleNamespace

    from sweep.fake import server as fake_server
    from sweep.fake.engine import Engine, EngineConfig
    from sweep.fake.log import Log

    real = transcript("startup.log")
    said = int(re.search(r"Sleeping (\d+) seconds before crash diagnostics", real).group(1))
    assert _stamp(real, "No live scheduler") - _stamp(real, "Sleeping ") >= said

    speed = 20.0
    cfg = fake_server.FakeServerConfig(
        host="127.0.0.1",
        port=0,
        served_model_name=MODEL,
        model_path=MODEL,
        architecture="LlamaForCausalLM",
        version=NEWEST,
        server_args={},
        context_len=32768,
        spec=None,
        startup_speed=speed,
    )
    fake = fake_server.FakeServer(cfg, Engine(EngineConfig(spec=None, nccl_env={}), Log()))
    done: list[tuple[str, object, str]] = []
    sleep = lambda s: done.append(("sleep", s, capfd.readouterr().err))  # noqa: E731
    monkeypatch.setattr(fake_server, "time", SimpleNamespace(sleep=sleep))
    monkeypatch.setattr(fake, "kill_process_tree", lambda: done.append(("kill", None, capfd.readouterr().err)))
    fake.on_sigquit()
    assert [(what, arg) for what, arg, _ in done] == [("sleep", pytest.approx(said / speed)), ("kill", None)]
    before_sleep, before_kill = done[0][2], done[1][2]
    assert _shutdown_lines(before_sleep) == ["sigquit", "sleeping"]
    assert _shutdown_lines(before_kill) == ["no_live"]


def _shutdown_lines(log: str) -> list[str]:
    return sequence(log, SHUTDOWN, rank0_only=False)


def test_sigterm_to_the_launcher_alone_drains_then_kills_the_tree(start_fake):
    server = start_fake(*COMMON, *EAGLE3, model=MODEL)
    server.wait_ready()
    kids = server.children()
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait_exit(timeout=30) == -signal.SIGKILL
    assert _shutdown(server.log()) == _shutdown(transcript("spec_eagle3.log")) == ["sigterm", "draining", "kill_tree"]
    _, alive = psutil.wait_procs(kids, timeout=10)
    assert not alive


# --- the bar format against the transcript's bytes ---


def test_bar_text_is_tqdm_s():
    first, last = re.findall(r"\r([^\r\n]*)", transcript("startup.log").split("Load weight begin.", 1)[1])[:2]
    fmt = progress.SGLANG_BAR_FORMAT
    assert progress.render("Multi-thread loading shards", 0, 1, 0.0, fmt) == first
    rate = float(re.search(r"([\d.]+)it/s\]$", last).group(1))
    assert progress.render("Multi-thread loading shards", 1, 1, 1 / rate, fmt) == last
    assert (
        progress.render("Capturing batches (bs=256 avail_mem=20.51 GB)", 1, 36, 1.3, progress.DEFAULT_BAR_FORMAT)
        == "Capturing batches (bs=256 avail_mem=20.51 GB):   3%|▎         | 1/36 [00:01<00:45,  1.30s/it]"
    )
    assert (
        progress.render("Loading safetensors checkpoint shards", 27, 64, 140.0, fmt)
        == "Loading safetensors checkpoint shards:  42% Completed | 27/64 [02:20<03:11,  5.19s/it]"
    )
