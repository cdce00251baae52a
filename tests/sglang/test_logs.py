from sweep.sglang import logs

TS = "[2026-11-29 10:00:00 TP0] "


def test_events_in_both_versions():
    assert logs.event_of(TS + "Load weight begin. avail mem=78.5 GB") == "load_begin"
    assert logs.event_of(TS + "Load weight end. elapsed=312.4 s, type=DeepseekV3ForCausalLM") == "load_end"
    assert logs.event_of(TS + "KV Cache is allocated. #tokens: 812000, K size: 20 GB, V size: 20 GB") == "kv_cache"
    assert logs.event_of(TS + "Capture cuda graph begin. This can take up to several minutes. avail mem=30 GB") == "capture_begin"
    assert logs.event_of(TS + "Capture cuda graph end. Time elapsed: 95.1 s. mem usage=3 GB. avail mem=27 GB.") == "capture_end"
    assert logs.event_of(TS + "Capture target verify CUDA graph begin. avail mem=30 GB") == "capture_begin"
    assert logs.event_of(TS + "Capture target decode CUDA graph end. Time elapsed: 9 s.") == "capture_end"
    assert logs.event_of(TS + "Capture draft cuda graph begin. This can take up to several minutes.") == "draft_capture_begin"
    assert logs.event_of(TS + "Capture draft extend cuda graph end. Time elapsed: 3 s.") == "draft_capture_end"
    assert logs.event_of(TS + "Capture draft decode CUDA graph end. Time elapsed: 3 s.") == "draft_capture_end"
    assert logs.event_of("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)") == "http_up"
    assert logs.event_of(TS + "The server is fired up and ready to roll!") == "fired_up"
    assert logs.event_of(TS + "Decode batch, #running-req: 3") is None


def test_failure_oom_wins_over_traceback():
    tail = [TS + "Capture cuda graph begin.", "Traceback (most recent call last):", '  File "x.py", line 1',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79 GiB",
            TS + "Received sigquit from a child process. It usually means the child failed."]
    f = logs.find_failure(tail, 1)
    assert f.kind == "oom" and f.reason.startswith("torch.OutOfMemoryError: CUDA out of memory") and "mem-fraction" in f.fix


def test_failure_exception_line():
    tail = [TS + "Scheduler hit an exception: Traceback (most recent call last):", '  File "server_args.py"',
            "    assert self.speculative_num_steps is not None", "AssertionError"]
    f = logs.find_failure(tail, 1)
    assert f.kind == "exception" and f.reason == "AssertionError"
    tail = ["Traceback (most recent call last):", "ValueError: topk > 1 with page size > 1 needs fa3 or flashinfer"]
    assert logs.find_failure(tail).reason.startswith("ValueError: topk > 1")


def test_failure_scheduler_died_and_plain_exit():
    assert logs.find_failure([TS + "Rank 3 scheduler died during initialization (exit code: -9)"]).kind == "scheduler_died"
    f = logs.find_failure(["nothing useful"], -9)
    assert f.kind == "exited" and "signal 9" in f.reason


def test_not_enough_memory_and_missing_model():
    assert logs.find_failure([TS + "Not enough memory. Please try to increase --mem-fraction-static."]).kind == "not_enough_memory"
    line = "OSError: /models/x is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'"
    assert logs.find_failure([line]).kind == "model_not_found"


def test_decode_stats():
    s = logs.decode_stats(TS + "Decode batch, #running-req: 48, #token: 9000, token usage: 0.10, accept len: 2.41, "
                               "accept rate: 0.70, cuda graph: True, gen throughput (token/s): 812.5, #queue-req: 2")
    assert s == {"running": 48, "tokens": 9000, "accept_length": 2.41, "gen_throughput": 812.5, "queued": 2}


def test_rank_of():
    assert logs.rank_of("[2026-11-29 10:00:00 TP3] Load weight end.") == "TP3"
    assert logs.rank_of("[2026-11-29 10:00:00 DP1 TP12 EP4] KV Cache") == "TP12"
    assert logs.rank_of("[2026-11-29 10:00:00] Uvicorn running") is None
