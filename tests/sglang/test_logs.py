from pathlib import Path

import pytest

from sweep.sglang import logs

TS = "[2026-11-29 10:00:00 TP0] "


def test_events_in_both_versions():
    assert logs.event_of(TS + "Load weight begin. avail mem=78.5 GB") == "load_begin"
    assert logs.event_of(TS + "Load weight end. elapsed=312.4 s, type=DeepseekV3ForCausalLM") == "load_end"
    assert logs.event_of(TS + "KV Cache is allocated. #tokens: 812000, K size: 20 GB, V size: 20 GB") == "kv_cache"
    assert (
        logs.event_of(TS + "Capture cuda graph begin. This can take up to several minutes. avail mem=30 GB")
        == "capture_begin"
    )
    assert (
        logs.event_of(TS + "Capture cuda graph end. Time elapsed: 95.1 s. mem usage=3 GB. avail mem=27 GB.")
        == "capture_end"
    )
    assert logs.event_of(TS + "Capture target verify CUDA graph begin. avail mem=30 GB") == "capture_begin"
    assert logs.event_of(TS + "Capture target decode CUDA graph end. Time elapsed: 9 s.") == "capture_end"
    assert (
        logs.event_of(TS + "Capture draft cuda graph begin. This can take up to several minutes.")
        == "draft_capture_begin"
    )
    assert logs.event_of(TS + "Capture draft extend cuda graph end. Time elapsed: 3 s.") == "draft_capture_end"
    assert logs.event_of(TS + "Capture draft decode CUDA graph end. Time elapsed: 3 s.") == "draft_capture_end"
    assert logs.event_of("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)") == "http_up"
    assert logs.event_of(TS + "The server is fired up and ready to roll!") == "fired_up"
    assert logs.event_of(TS + "Decode batch, #running-req: 3") is None


def test_failure_oom_wins_over_traceback():
    tail = [
        TS + "Capture cuda graph begin.",
        "Traceback (most recent call last):",
        '  File "x.py", line 1',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79 GiB",
        TS + "Received sigquit from a child process. It usually means the child failed.",
    ]
    f = logs.find_failure(tail, 1)
    assert (
        f.kind == "oom"
        and f.reason.startswith("torch.OutOfMemoryError: CUDA out of memory")
        and "mem-fraction" in f.fix
    )


def test_failure_exception_line():
    tail = [
        TS + "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "server_args.py"',
        "    assert self.speculative_num_steps is not None",
        "AssertionError",
    ]
    f = logs.find_failure(tail, 1)
    assert f.kind == "exception" and f.reason == "AssertionError"
    tail = ["Traceback (most recent call last):", "ValueError: topk > 1 with page size > 1 needs fa3 or flashinfer"]
    assert logs.find_failure(tail).reason.startswith("ValueError: topk > 1")


def test_failure_skips_the_resource_trackers_shutdown_traceback():
    """CI's real server: the scheduler's error, then multiprocessing's resource tracker complaining
    about a shared-memory segment as the tree went down. The scheduler's error is the reason."""
    tail = [
        TS + "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/layers/attention/attention_registry.py", line 215, in attn_backend_wrapper',
        "    raise ValueError(error_template.format(backend_type=backend_type))",
        "ValueError: EAGLE is not supported in decode attention backend torch_native",
        "",
        TS + "Received sigquit from a child process. It usually means the child failed.",
        "Traceback (most recent call last):",
        '  File "<string>", line 1, in <module>',
        '  File "/usr/lib/python3.11/multiprocessing/resource_tracker.py", line 239, in main',
        "    cache[rtype].remove(name)",
        "KeyError: '/mp-j2v7nacx'",
    ]
    assert (
        logs.find_failure(tail, 1).reason
        == "ValueError: EAGLE is not supported in decode attention backend torch_native"
    )
    assert logs.exception_lines(tail) == ["ValueError: EAGLE is not supported in decode attention backend torch_native"]
    # the same KeyError from the server's own code is an error like any other
    own = [
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/managers/scheduler.py", line 9, in f',
        "KeyError: 'layers.0'",
    ]
    assert logs.find_failure(tail + own).reason == "KeyError: 'layers.0'"


def test_failure_scheduler_died_and_plain_exit():
    assert (
        logs.find_failure([TS + "Rank 3 scheduler died during initialization (exit code: -9)"]).kind == "scheduler_died"
    )
    f = logs.find_failure(["nothing useful"], -9)
    assert f.kind == "killed" and "SIGKILL" in f.reason and "OOM killer" in f.fix
    f = logs.find_failure(["nothing useful"], 1)
    assert f.kind == "exited" and f.reason == "server exited with exit code 1 and no error in its log"


def test_not_enough_memory_and_missing_model():
    assert (
        logs.find_failure([TS + "Not enough memory. Please try to increase --mem-fraction-static."]).kind
        == "not_enough_memory"
    )
    line = "OSError: /models/x is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'"
    assert logs.find_failure([line]).kind == "model_not_found"


def test_decode_stats():
    s = logs.decode_stats(
        TS + "Decode batch, #running-req: 48, #token: 9000, token usage: 0.10, accept len: 2.41, "
        "accept rate: 0.70, cuda graph: True, gen throughput (token/s): 812.5, #queue-req: 2"
    )
    assert s == {"running": 48, "tokens": 9000, "accept_length": 2.41, "gen_throughput": 812.5, "queued": 2}


def test_rank_of():
    assert logs.rank_of("[2026-11-29 10:00:00 TP3] Load weight end.") == "TP3"
    assert logs.rank_of("[2026-11-29 10:00:00 DP1 TP12 EP4] KV Cache") == "TP12"
    assert logs.rank_of("[2026-11-29 10:00:00] Uvicorn running") is None


# --- against real SGLang's own lines (shared/sglang-cpu/transcripts, 0.5.23-era main on CPU; the
# GPU wordings from its source at the same commit) ------------------------------------------------
REAL_BASELINE = [  # startup.log, the startup lines in order
    "[2026-12-01 07:20:58] Init torch distributed begin.",
    "[2026-12-01 07:20:59] Load weight begin. avail mem=21.35 GB",
    "\rMulti-thread loading shards:   0% Completed | 0/1 [00:00<?, ?it/s]"
    "\rMulti-thread loading shards: 100% Completed | 1/1 [00:00<00:00, 559.32it/s]",
    "[2026-12-01 07:20:59] Load weight end. elapsed=0.03 s, type=LlamaForCausalLM, avail mem=21.35 GB, mem usage=0.00 GB.",
    "[2026-12-01 07:20:59] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 32768, K size: 0.02 GB, V size: 0.02 GB",
    "[2026-12-01 07:20:59] Memory pool end. avail mem=21.28 GB",
    "[2026-12-01 07:20:59] Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
    "(e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).",
    "[2026-12-01 07:20:59] max_total_num_tokens=32768, chunked_prefill_size=2048, max_prefill_tokens=16384, "
    "max_running_requests=4096, context_len=2048, available_cpu_mem=21.28 GB",
    "[2026-12-01 07:20:59] Engine startup timings (s): load_weight=0.03, kv_cache_allocation=0.03, scheduler_e2e=1.04, "
    "cuda_graph={prefill=0.00, decode=0.00, target_verify=0.00, draft_prefill=0.00, draft_decode=0.00, "
    "draft_extend=0.00}, tokenizer_e2e=9.79",
    "[2026-12-01 07:20:59] INFO:     Uvicorn running on http://127.0.0.1:31000 (Press CTRL+C to quit)",
    "[2026-12-01 07:21:01] The server is fired up and ready to roll!",
]
REAL_EAGLE3_DRAFTER = [  # spec_eagle3.log, after the target's Load weight end
    "[2026-12-01 07:28:40] Using draft model load_format: 'dummy'",
    "[2026-12-01 07:28:40] Init torch distributed begin.",
    "[2026-12-01 07:28:40] Load weight begin. avail mem=21.37 GB",
    "[2026-12-01 07:28:40] Load weight end. elapsed=0.04 s, type=LlamaForCausalLMEagle3, avail mem=21.37 GB, mem usage=0.00 GB.",
    "[2026-12-01 07:28:40] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 32768, K size: 0.02 GB, V size: 0.02 GB",
    "[2026-12-01 07:28:40] Memory pool end. avail mem=21.33 GB",
    "[2026-12-01 07:28:40] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 32768, K size: 0.01 GB, V size: 0.01 GB",
    "[2026-12-01 07:28:40] Memory pool end. avail mem=21.32 GB",
]


def events(lines):
    return [e for e in (logs.event_of(line) for line in lines) if e]


def test_real_startup_events_baseline_cpu():
    """No capture on CPU; the KV cache is two lines; the bar line is no event."""
    assert events(REAL_BASELINE) == ["load_begin", "load_end", "kv_cache", "kv_cache", "http_up", "fired_up"]
    assert logs.rank_of(REAL_BASELINE[1]) is None  # tp 1: no rank in the prefix


def test_real_drafter_loads_before_both_kv_caches():
    """0.5.23: the drafter's own Load weight begin/end, then two KV caches (target, drafter)."""
    assert events(REAL_EAGLE3_DRAFTER) == ["load_begin", "load_end"] + ["kv_cache"] * 4


def test_capture_wordings_of_the_real_source():
    gpu = {  # model_runner_components/cuda_graph_setup.py, speculative/eagle_worker_v2.py, frozen_kv_mtp_worker_v2.py
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4], avail mem=30.00 GB": "capture_begin",
        "Capture target verify CUDA graph end. elapsed=28.80 s, mem usage=2.10 GB, avail mem=27.90 GB.": "capture_end",
        "Capture target prefill CUDA graph begin. backend=full, num_tokens=[512, 1024], avail mem=30.00 GB": "capture_begin",
        "Capture target decode CPU graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=20.00 GB": "capture_begin",
        "Capture draft prefill CUDA graph end. elapsed=1.00 s, mem usage=0.10 GB, avail mem=27.00 GB.": "draft_capture_end",
        "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=2, bs=[1, 2], avail mem=27.00 GB": "draft_capture_begin",
        "Capture draft extend CUDA graph end. elapsed=3.00 s, mem usage=0.20 GB, avail mem=26.00 GB.": "draft_capture_end",
        "Capture draft verify CUDA graph begin. backend=full, num_tokens_per_req=4, bs=[1], avail mem=27.00 GB": "draft_capture_begin",
        "Capture Frozen-KV MTP draft cuda graph begin.": "draft_capture_begin",
        "Capture cuda graph bs [1, 2, 4, 8]": None,  # 0.5.10's list of sizes: no event
        "Exception: Capture cuda graph failed: CUDA out of memory.": None,  # a failure, not an end
    }
    for line, want in gpu.items():
        assert logs.event_of(TS + line) == want, line


def test_real_tqdm_bar_of_the_weight_load():
    bars = logs.split_progress(REAL_BASELINE[2])
    assert len(bars) == 2 and all(isinstance(b, logs.Progress) for b in bars)
    first, last = bars
    assert (first.kind, first.desc, first.n, first.total, first.rate, first.eta_s) == (
        "load",
        "Multi-thread loading shards",
        0,
        1,
        None,
        None,
    )
    assert (last.n, last.total, last.rate, last.eta_s, last.elapsed_s, last.done) == (1, 1, 559.32, 0.0, 0.0, True)
    assert last.raw == "Multi-thread loading shards: 100% Completed | 1/1 [00:00<00:00, 559.32it/s]"
    assert last.summary() == "load 1/1 shards, 559 it/s"


def test_gpu_bars_load_and_capture():
    load, rest = logs.parse_progress(
        "Loading safetensors checkpoint shards:  42% Completed | 27/64 [02:10<02:30, 5.1s/it]"
    )
    assert rest == "" and (load.kind, load.n, load.total, load.elapsed_s, load.eta_s) == ("load", 27, 64, 130.0, 150.0)
    assert load.rate == pytest.approx(1 / 5.1) and load.summary() == "load 27/64 shards, 5.1 s/it, ETA 02:30"
    cap, _ = logs.parse_progress(
        "Capturing batches (bs=256 avail_mem=20.51 GB):   3%|▎         | 1/36 [00:01<00:45,  1.3s/it]"
    )
    assert (cap.kind, cap.n, cap.total, cap.values) == ("capture", 1, 36, {"bs": 256, "avail_mem": 20.51})
    assert cap.summary() == "capture 1/36 batch sizes (bs=256, 20.51 GB free), 1.3 s/it, ETA 00:45"
    pre, _ = logs.parse_progress(
        "Capturing num tokens (num_tokens=8192 avail_mem=20.51 GB):  10%|█         | 2/20 [00:04<00:36,  2.0s/it]"
    )
    assert pre.kind == "capture" and pre.unit == "token counts"
    unnamed, _ = logs.parse_progress("  0%|          | 0/36 [00:00<?, ?it/s]")  # before SGLang names the bar
    assert (unnamed.kind, unnamed.desc, unnamed.n, unnamed.total) == ("other", "", 0, 36)
    other, _ = logs.parse_progress("Compiling num tokens (num_tokens=512): 27it [1:02:10, 5.10s/it]")  # no total
    assert (other.kind, other.n, other.total, other.elapsed_s) == ("other", 27, None, 3730.0)
    assert logs.parse_progress(REAL_BASELINE[3]) is None  # a log line is no bar


def test_split_progress_keeps_log_text_glued_to_a_bar():
    line = (
        "\rCapturing batches (bs=8 avail_mem=20.51 GB):  50%|#####     | 1/2 [00:01<00:01,  1.3s/it]"
        "[2026-11-29 10:00:00 TP3] Capture cuda graph end. Time elapsed: 3 s."
    )
    bar, text = logs.split_progress(line)
    assert isinstance(bar, logs.Progress) and bar.n == 1
    assert text == "[2026-11-29 10:00:00 TP3] Capture cuda graph end. Time elapsed: 3 s."
    assert logs.split_progress(REAL_BASELINE[1]) == [REAL_BASELINE[1]]  # no \r: the line itself
    assert (
        logs.split_progress(
            "\x1b[A\rLoading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01, 1.00s/it]\x1b[B"
        )[0].n
        == 1
    )  # tqdm's cursor moves for a nested bar are dropped


def test_real_engine_startup_timings():
    t = logs.engine_timings(REAL_BASELINE[8])
    assert (t.load_weight, t.kv_cache_allocation, t.scheduler_e2e, t.tokenizer_e2e) == (0.03, 0.03, 1.04, 9.79)
    assert t.cuda_graph == dict.fromkeys(
        ["prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend"], 0.0
    )
    assert t.flat()["cuda_graph.target_verify"] == 0.0 and t.other is None
    eagle = logs.engine_timings(
        "[2026-12-01 07:27:08] Engine startup timings (s): load_weight=0.08, "
        "kv_cache_allocation=0.53, scheduler_e2e=2.19, cuda_graph={prefill=0.00, decode=0.00, "
        "target_verify=0.00, draft_prefill=0.00, draft_decode=0.00, draft_extend=0.00}, "
        "tokenizer_e2e=20.51"
    )
    assert eagle.load_weight == 0.08 and eagle.tokenizer_e2e == 20.51  # target + drafter weights
    later = logs.engine_timings(
        TS + "Engine startup timings (s): load_weight=312.40, kv_cache_allocation=4.00, "
        "scheduler_e2e=420.00, cuda_graph={decode=95.10, new_phase=1.00}, tokenizer_e2e=431.20, "
        "warmup=3.00"
    )
    assert later.cuda_graph == {"decode": 95.1, "new_phase": 1.0} and later.other == {"warmup": 3.0}
    assert logs.engine_timings(REAL_BASELINE[7]) is None


TRANSCRIPTS = Path(__file__).resolve().parents[3] / "shared" / "sglang-cpu" / "transcripts"


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="no shared/sglang-cpu/transcripts here")
@pytest.mark.parametrize(
    "name,drafter",
    [("startup.log", False), ("spec_ngram.log", False), ("spec_eagle.log", True), ("spec_eagle3.log", True)],
)
def test_whole_real_transcripts(name, drafter):
    """Every real log: its events in order, one bar, one timings line, no false failure signature."""
    lines = (TRANSCRIPTS / name).read_bytes().decode().split("\n")
    pieces = [p for line in lines for p in logs.split_progress(line)]
    text = [p for p in pieces if isinstance(p, str)]
    loads = ["load_begin", "load_end"] * (2 if drafter else 1)
    assert events(text)[: len(loads) + 2 * (2 if drafter else 1) + 2] == (
        loads + ["kv_cache", "kv_cache"] * (2 if drafter else 1) + ["http_up", "fired_up"]
    )
    bars = [p for p in pieces if isinstance(p, logs.Progress)]
    assert [(b.kind, b.n, b.total) for b in bars] == [("load", 0, 1), ("load", 1, 1)]
    assert sum(logs.engine_timings(t) is not None for t in text) == 1


def test_failure_of_a_native_crash():
    """Real SGLang on CPU with topk 0: the warmup's first draft step dies of SIGFPE; Python's
    faulthandler prints it (two processes interleaved), then the launcher names the child."""
    tail = [
        TS + "Prefill batch, #new-seq: 1, #new-token: 16, #cached-token: 0, cpu graph: False",
        "Fatal Python error: Fatal Python error: Floating point exceptionFloating point exception",
        "",
        "Thread 0x00007f8bbebe36c0 (most recent call first):",
        '  File "/x/sglang/srt/layers/logits_processor.py", line 737 in _compute_lm',
        TS + "Subprocess scheduler_0 (pid=14030) crashed with exit code -8. Triggering SIGQUIT for cleanup...",
        TS + "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
    ]
    f = logs.find_failure(tail, 137)
    assert f.kind == "fatal_signal"
    assert f.reason == "Fatal Python error: Floating point exception (scheduler_0 crashed with exit code -8)"
    assert "topk 0" in f.fix
    # a traceback's exception still wins; the group's own SIGTERM (-15) names no child
    assert logs.find_failure(["Traceback (most recent call last):", "ValueError: x", *tail]).kind == "exception"
    sigterm = [tail[1], TS + "Subprocess scheduler_0 (pid=1) crashed with exit code -15. Triggering SIGQUIT"]
    assert logs.find_failure(sigterm).reason == "Fatal Python error: Floating point exception"


def test_an_error_torch_compile_met_is_given_as_the_error_itself():
    """Real SGLang on a Zen 3 with topk 0: the draft step runs under torch.compile, and dynamo's own
    exception line hides the real one on its next line (before: the point's reason read
    "torch._dynamo.exc.TorchRuntimeError: RuntimeError when making fake tensor call")."""
    tail = [
        "Traceback (most recent call last):",
        '  File "/x/torch/_dynamo/exc.py", line 723, in unimplemented',
        "    raise Unsupported(",
        "torch._dynamo.exc.TorchRuntimeError: RuntimeError when making fake tensor call",
        "  Explanation: Dynamo failed to run FX node with fake tensors: call_method view(*(FakeTensor(..., "
        "size=(0, 0)), -1, s53, s53), **{}): got RuntimeError('cannot reshape tensor of 0 elements into shape "
        "[-1, s53, s53] because the unspecified dimension size -1 can be any value and is ambiguous')",
        "  Hint: Your code may result in an error when running in eager.",
    ]
    f = logs.find_failure(tail)
    assert f.reason == (
        "RuntimeError: cannot reshape tensor of 0 elements into shape [-1, s53, s53] because the "
        "unspecified dimension size -1 can be any value and is ambiguous (while torch.compile traced it)"
    )
    # a dynamo exception without the explanation stays as it is
    assert logs.find_failure(tail[:4]).reason == tail[3]


def test_failure_port_in_use_names_the_bind_error():
    tail = [
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
        "INFO:     Waiting for application shutdown.",
    ]
    f = logs.find_failure(tail, 1)
    assert f.kind == "port_in_use" and "('127.0.0.1', 30000)" in f.reason and "address already in use" in f.reason
    assert "port" in f.fix


# --- every fatal line real SGLang (and its web server, and argparse) prints that the project has seen:
# (where it comes from, the log's last lines, the exit code, the kind, a substring of the reason, of the fix).
# "transcripts" = shared/sglang-cpu/transcripts (badargs_summary.txt: real SGLang 7f8f030 on CPU, each case's
# tail as printed); "source" = SGLang 7f8f030's source (shared/sglang-cpu/sglang-src-7f8f030-python.tar.gz);
# CPython's argparse / asyncio where the line is theirs.
_USAGE = [
    "usage: sglang serve [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]",
    "                    [--max-running-requests MAX_RUNNING_REQUESTS]",
    "                    [--speculative-algorithm SPECULATIVE_ALGORITHM]",
]
_ASSERT_TAIL = [  # badargs_summary.txt, case aba24d: EAGLE with topk and no num-steps, exit 1
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "<string>", line 478, in __init__',
    '  File "<site-packages>/sglang/srt/server_args.py", line 3618, in __post_init__',
    "    self._run_resolution_pipeline()",
    '  File "<site-packages>/sglang/srt/server_args.py", line 3775, in _run_resolution_pipeline',
    "    handle_speculative_decoding(self)",
    '  File "<site-packages>/sglang/srt/arg_groups/speculative_hook.py", line 144, in handle_speculative_decoding',
    "    algo.handle_server_args(server_args)",
    '  File "<site-packages>/sglang/srt/speculative/spec_info.py", line 224, in handle_server_args',
    "    _handle_eagle_family(server_args)",
    '  File "<site-packages>/sglang/srt/arg_groups/speculative_hook.py", line 612, in _handle_eagle_family',
    "    and server_args.speculative_num_draft_tokens is None",
    "        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "AssertionError",
]
REAL_FATAL = [
    (
        "uvicorn/asyncio, port taken",
        [
            "INFO:     Waiting for application startup.",
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
        ],
        1,
        "port_in_use",
        "('127.0.0.1', 30000): address already in use",
        "server.port",
    ),
    (
        "asyncio create_server, address not here",
        [
            "ERROR:    [Errno 99] error while attempting to bind on address ('10.0.0.9', 30000): cannot assign requested address"
        ],
        1,
        "bind_failed",
        "cannot assign requested address",
        "server.host",
    ),
    (
        "argparse, sglang serve (server_args.prepare_server_args)",
        [*_USAGE, "sglang serve: error: argument --max-running-requests: invalid int value: 'lots'"],
        2,
        "bad_argument",
        "argument --max-running-requests: invalid int value: 'lots'",
        "--max-running-requests takes an integer",
    ),
    (
        "argparse, python -m sglang.launch_server (prog from argv[0]), usage scrolled out of the tail",
        [
            "                    [--enable-metrics] [--decode-log-interval DECODE_LOG_INTERVAL]",
            "launch_server.py: error: argument --mem-fraction-static: invalid float value: 'most'",
        ],
        2,
        "bad_argument",
        "launch_server.py: error: argument --mem-fraction-static",
        "takes a number",
    ),
    (
        "argparse, a choice",
        [
            *_USAGE,
            "__main__.py: error: argument --tool-call-parser: invalid choice: 'nope' "
            "(choose from 'auto', 'llama3', 'qwen25')",
        ],
        2,
        "bad_argument",
        "invalid choice: 'nope'",
        "takes one of 'auto', 'llama3', 'qwen25'",
    ),
    (
        "argparse, an unknown flag",
        [*_USAGE, "sglang serve: error: unrecognized arguments: --cuda-graph-max-bs 64"],
        2,
        "bad_argument",
        "unrecognized arguments: --cuda-graph-max-bs 64",
        "no flag --cuda-graph-max-bs 64",
    ),
    (
        "argparse, a value after a switch",
        [*_USAGE, "sglang serve: error: unrecognized arguments: 2"],
        2,
        "bad_argument",
        "unrecognized arguments: 2",
        "follows a flag that takes no value",
    ),
    (
        "argparse, a missing value",
        [*_USAGE, "sglang serve: error: argument --speculative-algorithm: expected one argument"],
        2,
        "bad_argument",
        "expected one argument",
        "give --speculative-algorithm its value",
    ),
    (
        "source: arg_groups/argparse_actions.py DeprecatedAction, parser.error(its own words)",
        [*_USAGE, "sglang serve: error: --enable-flashinfer-mla is removed; use --attention-backend flashinfer"],
        2,
        "bad_argument",
        "--enable-flashinfer-mla is removed",
        "correct the server args",
    ),
    (
        "transcripts: NGRAM's JIT kernel build (badargs 56e112, exit 137)",
        [
            "<site-packages>/sglang/kernels/jit/csrc/ngram_corpus/result.h:15:8: note: candidate is: "
            "‘void sglang::ngram::Result::truncate(int)’",
            "<site-packages>/sglang/kernels/jit/csrc/ngram_corpus/result.h:12:3: error: no declaration matches "
            "‘void sglang::ngram::Result::truncate(size_t)’",
            "ninja: build stopped: subcommand failed.",
            "",
            "stderr:",
            "",
            "[2026-12-01 07:22:20] Received sigquit from a child process. It usually means the child failed.",
            "[2026-12-01 07:22:20] kill_process_tree called: parent_pid=20184, include_parent=True, pid=20184",
        ],
        137,
        "jit_build_failed",
        "result.h:12:3: error: no declaration matches",
        "compiler",
    ),
    (
        "torch",
        [
            "Traceback (most recent call last):",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "2.00 GiB. GPU 0 has a total capacity of 139.81 GiB",
        ],
        1,
        "oom",
        "CUDA out of memory",
        "mem-fraction",
    ),
    (
        "source: model_executor/pool_configurator.py",
        [
            TS + "Scheduler hit an exception: Traceback (most recent call last):",
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        ],
        1,
        "not_enough_memory",
        "Not enough memory",
        "raise mem-fraction-static",
    ),
    (
        "source: model_executor/runner/decode_cuda_graph_runner.py",
        ["Exception: Capture cuda graph failed: CUDA error: out of memory"],
        1,
        "capture_failed",
        "Capture cuda graph failed",
        "cuda-graph-max-bs",
    ),
    (
        "transcripts: a drafter folder without weights (badargs case3, exit 137)",
        [
            '  File "<site-packages>/sglang/srt/model_loader/loader.py", line 562, in _prepare_weights',
            "    raise RuntimeError(",
            "RuntimeError: Cannot find any model weights with `/models/tiny-eagle`",
            "",
            "[2026-12-01 07:34:23] Received sigquit from a child process. It usually means the child failed.",
            "[2026-12-01 07:34:23] kill_process_tree called: parent_pid=30774, include_parent=True, pid=30774",
        ],
        137,
        "model_not_found",
        "Cannot find any model weights with `/models/tiny-eagle`",
        "load-format dummy",
    ),
    (
        "huggingface_hub",
        [
            "OSError: /models/x is not a local folder and is not a valid model identifier listed on "
            "'https://huggingface.co/models'"
        ],
        1,
        "model_not_found",
        "is not a local folder",
        "model_path",
    ),
    (
        "source: entrypoints/engine.py _scheduler_died_error",
        [
            "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), "
            "a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."
        ],
        1,
        "scheduler_died",
        "Rank 0 scheduler died during initialization (exit code: -9)",
        "OOM killer",
    ),
    (
        "source: utils/watchdog.py",
        [
            TS + "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
            "",
            "[2026-11-29 10:05:05] Received sigquit from a child process. It usually means the child failed.",
        ],
        137,
        "watchdog_timeout",
        "Scheduler watchdog timeout (self.watchdog_timeout=300",
        "watchdog-timeout",
    ),
    (
        "transcripts: a bare assert in argument resolution (badargs aba24d, exit 1)",
        _ASSERT_TAIL,
        1,
        "exception",
        "AssertionError at speculative_hook.py:612 in _handle_eagle_family: "
        "`and server_args.speculative_num_draft_tokens is None`",
        "--speculative-num-draft-tokens",
    ),
    (
        "transcripts: an unknown algorithm (badargs case4, exit 1)",
        [
            '  File "<site-packages>/sglang/srt/server_args.py", line 3775, in _run_resolution_pipeline',
            "    handle_speculative_decoding(self)",
            '  File "<site-packages>/sglang/srt/speculative/spec_info.py", line 61, in from_string',
            '    raise ValueError(f"Unknown speculative algorithm name: {name}")',
            "ValueError: Unknown speculative algorithm name: FOO",
        ],
        1,
        "exception",
        "ValueError: Unknown speculative algorithm name: FOO",
        "spec_info.py:61 in from_string",
    ),
    (
        "transcripts: EAGLE3 without topk (badargs case2, exit 1)",
        [
            '  File "<site-packages>/sglang/srt/arg_groups/speculative_hook.py", line 691, in _handle_eagle_family',
            "    server_args.speculative_eagle_topk > 1",
            "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
        ],
        1,
        "exception",
        "TypeError: '>' not supported",
        "--speculative-eagle-topk",
    ),
    (
        "transcripts: draft tokens < topk, the warmup's crash (badargs case6, exit 137)",
        [
            "    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~^^^^^^^^",
            "RuntimeError: The expanded size of the tensor (2) must match the existing size (4) at non-singleton "
            "dimension 1.  Target sizes: [1, 2].  Tensor sizes: [4]",
            "",
            "[2026-12-01 07:39:02] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
            "[2026-12-01 07:39:07] kill_process_tree called: parent_pid=3344, include_parent=True, pid=3344",
        ],
        137,
        "exception",
        "RuntimeError: The expanded size of the tensor (2)",
        "traceback",
    ),
    (
        "real SGLang on CPU, topk 0 (tests/real)",
        [
            "Fatal Python error: Floating point exception",
            "",
            TS + "Subprocess scheduler_0 (pid=14030) crashed with exit code -8. Triggering SIGQUIT for cleanup...",
        ],
        137,
        "fatal_signal",
        "Floating point exception (scheduler_0 crashed with exit code -8)",
        "native",
    ),
    (
        "source: utils/watchdog.py SubprocessWatchdog, a child SIGKILLed",
        [
            TS + "Subprocess scheduler_0 (pid=4242) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
            TS + "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        ],
        137,
        "child_crashed",
        "scheduler_0 (pid=4242) crashed with exit code -9 (SIGKILL)",
        "OOM killer",
    ),
    (
        "source: entrypoints/engine.py launch_phase_sigquit_handler, the child's error scrolled out",
        [
            "[2026-12-01 07:34:23] Received sigquit from a child process. It usually means the child failed.",
            "[2026-12-01 07:34:23] kill_process_tree called: parent_pid=30774, include_parent=True, pid=30774",
        ],
        137,
        "child_failed",
        "Received sigquit from a child process",
        "whole point's log",
    ),
    (
        "transcripts: stopped from outside by `timeout` (badargs case5)",
        [
            "[2026-12-01 07:37:31] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
            "[2026-12-01 07:37:32] Subprocess scheduler_0 (pid=31947) crashed with exit code -15. Triggering SIGQUIT for cleanup...",
            "[2026-12-01 07:37:32] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
            "[2026-12-01 07:37:37] kill_process_tree called: parent_pid=31291, include_parent=True, pid=31291",
        ],
        137,
        "terminated",
        "got SIGTERM",
        "outside the sweep",
    ),
    (
        "the OOM killer: SIGKILL, nothing logged",
        [TS + "Load weight begin. avail mem=78.5 GB"],
        -9,
        "killed",
        "killed with SIGKILL (exit code -9)",
        "OOM killer",
    ),
    (
        "the same through a shell: 128 + 9",
        [TS + "Load weight begin. avail mem=78.5 GB"],
        137,
        "killed",
        "killed with SIGKILL (exit code 137)",
        "dmesg",
    ),
    (
        "nothing at all",
        [TS + "Load weight begin. avail mem=78.5 GB"],
        1,
        "exited",
        "server exited with exit code 1 and no error in its log",
        "killed from outside",
    ),
]


@pytest.mark.parametrize("source,tail,code,kind,reason,fix", REAL_FATAL, ids=[r[0] for r in REAL_FATAL])
def test_real_fatal_lines(source, tail, code, kind, reason, fix):
    f = logs.find_failure(tail, code)
    assert (f.kind, reason in f.reason, fix in f.fix) == (kind, True, True), (f, source)


# --- adaptive speculation (SGLang's wording: adaptive_spec_params.py, eagle_worker_v2.py, speculative_hook.py)


def test_adaptive_lines_are_read_in_sglang_s_wording():
    from sweep.sglang.logs import AdaptiveLine, adaptive_line

    assert adaptive_line(
        "[2026-12-05 03:20:41 TP0] AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]"
    ) == AdaptiveLine("initialized", 3, candidates=(1, 3, 5, 7))
    assert adaptive_line("Built adaptive runtime state steps=0: elapsed=0.01s, mem=0.56GB") == AdaptiveLine("built", 0)
    assert adaptive_line("Adaptive spec params updated: steps 1 -> 0 (ema_accept_len=-0.07)") == AdaptiveLine(
        "updated", 0, 1, ema=-0.07
    )
    assert adaptive_line(
        "[2026-12-05 03:20:42] Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2"
    ) == AdaptiveLine("switch", 1, 3)
    assert adaptive_line(
        "[2026-12-05 03:20:40] speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 "
        "is supported). Falling back to static speculative params."
    ) == AdaptiveLine("disabled", reason="speculative_eagle_topk=4 (only topk=1 is supported)")
    assert adaptive_line("Decode batch, #running-req: 5, accept len: 1.70") is None
    assert adaptive_line("enable_adaptive_dispatch_to_encoder=False") is None


def test_a_level_s_switches_are_those_between_its_marks():
    from sweep.sglang.logs import AdaptiveLog

    log = AdaptiveLog()
    log.see("AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3]")
    begin_1 = log.mark()  # C=1: nothing switches
    end_1 = begin_4 = log.mark()
    for line in (
        "Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2",
        "Adaptive spec params updated: steps 1 -> 0 (ema_accept_len=0.07)",
        "Switch adaptive runtime state: steps 1 -> 0, draft_tokens 2 -> 1",
        "Switch adaptive runtime state: steps 0 -> 3, draft_tokens 1 -> 4",
        "Switch adaptive runtime state: steps 3 -> 0, draft_tokens 4 -> 1",
    ):
        log.see(line)
    end_4 = log.mark()
    assert log.running and log.level(begin_1, end_1) == {
        "adaptive_switches": 0,
        "adaptive_steps": [3],
        "adaptive_steps_final": 3,
    }
    assert log.level(begin_4, end_4) == {"adaptive_switches": 4, "adaptive_steps": [3, 1, 0], "adaptive_steps_final": 0}
    assert log.level(end_4, end_4)["adaptive_steps"] == [0]  # the next level starts where this one ended
    static = AdaptiveLog()
    static.see(
        "speculative_adaptive disabled: attention DP is not supported (adaptive tier decisions are not "
        "synchronized across DP ranks). Falling back to static speculative params."
    )
    assert not static.running and static.disabled.startswith("attention DP is not supported")
    assert static.level(0, 0) == {"adaptive_switches": None, "adaptive_steps": None, "adaptive_steps_final": None}


# real SGLang (the CPU build, 7f8f030, --disable-cuda-graph, the tiny EAGLE-3 drafter; config {"1": [1, 3], "4": [1]}),
# 2026-12-05: its tier 1 dropped to 1 step at C=1 (the drafter accepted little)
REAL_ADAPTIVE = """\
[2026-12-05 03:53:16] AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3]
[2026-12-05 03:53:18] Built adaptive runtime state steps=1: elapsed=0.03s, mem=0.00GB
[2026-12-05 03:53:20] Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=0.07)
[2026-12-05 03:53:20] Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2
[2026-12-05 03:53:21] Decode batch, #running-req: 1, #token: 42, token usage: 0.00, accept len: 1.10, accept rate: 0.10, \
cpu graph: False, gen throughput (token/s): 0.26, #queue-req: 0
"""


def test_real_sglang_s_adaptive_lines_are_read():
    from sweep.sglang.logs import AdaptiveLog

    log = AdaptiveLog()
    for line in REAL_ADAPTIVE.splitlines():
        log.see(line)
    assert (log.start_steps, log.candidates, log.built, log.switches) == (3, (1, 3), [1], [(3, 1)])
    assert log.level(0, log.mark()) == {"adaptive_switches": 1, "adaptive_steps": [3, 1], "adaptive_steps_final": 1}
