"""The fake server's startup as seen from outside: phases and log lines, the port, health during the
warmup, the process tree and its ledger, ServerArgs failures, versions, flags it only warns about."""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time

import httpx
import psutil
import pytest

from sweep.core.ledger import LEDGER_ENV_VAR, ledger_read
from sweep.fake.startup import Durations

pytestmark = pytest.mark.slow

TS = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( TP\d+)?\] "


def _probe_health(port: int, seen: list, stop: threading.Event) -> None:
    """Record what /health answers, as fast as it can: 'refused', 503, 200 ..."""
    with httpx.Client(timeout=2.0) as client:
        while not stop.is_set():
            try:
                status = client.get(f"http://127.0.0.1:{port}/health").status_code
            except httpx.TransportError:
                status = "refused"
            if not seen or seen[-1] != status:
                seen.append(status)
            if status == 200:
                return
            time.sleep(0.002)


def test_phases_in_order_port_refused_then_503_then_200(start_fake):
    # startup at 60x: ~6 s in all, the warmup (503 window) ~0.1 s
    server = start_fake("--fake-speed", "50", "--fake-startup-speed", "60", fast=False)
    seen: list = []
    stop = threading.Event()
    probe = threading.Thread(target=_probe_health, args=(server.port, seen, stop), daemon=True)
    probe.start()
    try:
        server.wait_ready(timeout=60)
        probe.join(timeout=10)
    finally:
        stop.set()
    assert seen[0] == "refused" and seen[-1] == 200 and 503 in seen, seen
    assert seen.index("refused") < seen.index(503) < seen.index(200)

    log = server.log()
    order = [
        "server_args=ServerArgs(",
        "Init torch distributed begin.",
        "Load weight begin. avail mem=",
        "Load weight end. elapsed=",
        "KV Cache is allocated. #tokens: ",
        "Capture cuda graph begin. This can take up to several minutes. avail mem=",
        "Capture cuda graph end. Time elapsed: ",
        "max_total_num_tokens=",
        "Uvicorn running on http://127.0.0.1:",
        "The server is fired up and ready to roll!",
    ]
    positions = [log.index(s) for s in order]
    assert positions == sorted(positions)
    for line in log.splitlines():
        if any(s in line for s in order[1:]):
            assert re.match(TS, line), line
    assert "Capture draft" not in log  # no speculation, no drafter
    # relative durations: weights load longest, then graph capture
    stamps = {m.group(2): m.group(1) for m in re.finditer(r"elapsed=([\d.]+) s|Time elapsed: ([\d.]+) s", log)}
    load = float(re.search(r"Load weight end\. elapsed=([\d.]+) s", log).group(1))
    capture = float(re.search(r"Capture cuda graph end\. Time elapsed: ([\d.]+) s", log).group(1))
    assert load > capture > 0.5, stamps


def test_speculative_startup_process_tree_and_ledger(start_fake, fk, tmp_path):
    d = tmp_path / "ledger"
    server = start_fake("--tp-size", "2", *fk.EAGLE3, env={LEDGER_ENV_VAR: str(d)})
    server.wait_ready()
    log = server.log()
    for line in [
        "Max running requests is reset to 48 for speculative decoding.",
        "Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding.",
    ]:
        assert line in log
    for rank in (0, 1):
        assert f"TP{rank}] Capture cuda graph end." in log
        assert f"TP{rank}] Capture draft cuda graph begin." in log
        assert f"TP{rank}] Capture draft extend cuda graph end." in log
    assert log.count("Load weight begin.") == 4  # target + drafter, on each rank
    assert "type=LlamaForCausalLMEagle3" in log

    kids = server.children()
    names = sorted(p.name() for p in kids if p.name().startswith("sglang::"))
    # SGLang's setproctitle titles, whole (psutil reads them from the cmdline); 0.5.10 titles every rank TPn
    assert names == ["sglang::detokenizer", "sglang::scheduler_TP0", "sglang::scheduler_TP1"]
    assert len(kids) == 4  # and multiprocessing's resource tracker, as the real launcher
    for p in kids:  # children inherit the environment (the sweep finds them by marker)
        assert p.environ()[fk.MARKER_ENV] == server.marker
    entries = ledger_read(d)
    assert sorted(e.gpu_index for e in entries) == [0, 1]
    assert {e.pid for e in entries} <= {p.pid for p in kids}
    assert all(e.mem_mib > 70 * 1024 for e in entries)

    server.proc.send_signal(signal.SIGTERM)
    # the real launcher: drain, then kill_process_tree, which SIGKILLs itself last (exit status 137)
    assert server.wait_exit() == -signal.SIGKILL
    assert "Gracefully exiting... Remaining number of requests 0." in server.log()
    psutil.wait_procs(kids, timeout=10)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in kids)
    assert ledger_read(d) == []


def test_cuda_visible_devices_map_ranks_to_gpus(start_fake, tmp_path):
    server = start_fake("--tp-size", "2", "--fake-ledger", str(tmp_path), env={"CUDA_VISIBLE_DEVICES": "4,6"})
    server.wait_ready()
    assert sorted(e.gpu_index for e in ledger_read(tmp_path)) == [4, 6]


def test_rejected_args_die_at_once_with_a_bare_traceback(start_fake, tmp_path):
    # "at once": while resolving the arguments, as SGLang's ServerArgs does, so before the resolved
    # server_args line, before any startup phase, and before any rank is forked (no rank ever
    # wrote its ledger file: the directory stays empty, dead ranks' files included)
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    server = start_fake(
        "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "4", env={LEDGER_ENV_VAR: str(ledger)}
    )
    assert server.wait_exit() == 1
    log = server.log()
    assert "Traceback (most recent call last):" in log
    assert log.rstrip().endswith("AssertionError")
    assert "sglang/srt/server_args.py" in log
    assert "server_args=ServerArgs(" not in log
    assert "Init torch distributed begin" not in log and "Load weight begin" not in log
    assert list(ledger.iterdir()) == []


def test_value_error_from_server_args(start_fake):
    server = start_fake(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
        "--page-size",
        "16",
        "--attention-backend",
        "triton",
    )
    assert server.wait_exit() == 1
    assert "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable" in server.log()


def test_topk_1_override_is_only_a_warning(start_fake):
    server = start_fake(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/models/d",
        "--speculative-num-steps",
        "1",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "16",
    )
    server.wait_ready()
    log = server.log()
    warning = "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
    assert re.search(r"^" + re.escape(warning) + "$", log, re.M)  # bare: logged before logging is set up
    info = server.get("/server_info").json()
    assert info["speculative_num_draft_tokens"] == 2 and info["max_running_requests"] == 48
    assert "Capture draft cuda graph begin" not in log  # one step: no multi-step draft graph


def test_steps_without_topk_fail_at_argument_resolution(start_fake):
    # the real server (shared/sglang-cpu/transcripts/badargs_summary.txt): a TypeError while ServerArgs
    # resolves, exit 1, before any server_args= line (it was believed to fail minutes in, at the drafter)
    server = start_fake(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/models/d",
        "--speculative-num-steps",
        "3",
    )
    assert server.wait_exit() == 1
    log = server.log()
    assert log.rstrip().endswith("TypeError: '>' not supported between instances of 'NoneType' and 'int'")
    assert "Load weight begin" not in log and "server_args=" not in log


def test_pipeline_parallel_nextn_fails_at_argument_resolution_on_0_5_23(start_fake):
    # real 0.5.23: check_server_args -> check_pipeline_parallel_compat (arg_groups/validation_hook.py)
    server = start_fake(
        "--fake-version",
        "0.5.23",
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--pp-size",
        "2",
    )
    assert server.wait_exit() == 1
    log = server.log()
    assert log.rstrip().endswith(
        "AssertionError: PP + speculative decoding (MTP) is only supported on prefill nodes "
        "(disaggregation-mode=prefill)"
    )
    assert "Load weight begin" not in log and "server_args=" not in log


def test_topk_zero_fails_at_draft_capture(start_fake):
    server = start_fake(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/models/d",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "0",
        "--speculative-num-draft-tokens",
        "4",
    )
    assert server.wait_exit() != 0
    log = server.log()
    assert log.index("Capture draft cuda graph begin.") < log.index("RuntimeError: cannot reshape tensor of 0 elements")


def test_draft_tree_too_small_fails_at_draft_capture(start_fake):
    server = start_fake(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/models/d",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "16",
    )
    assert server.wait_exit() != 0
    log = server.log()
    assert log.index("Capture draft cuda graph begin.") < log.index("RuntimeError: selected index k out of range")


def test_mem_fraction_too_low_is_not_enough_memory(start_fake):
    server = start_fake("--mem-fraction-static", "0.4")
    assert server.wait_exit() != 0
    assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in server.log()


def test_version_0_5_23_wording_and_flags(start_fake, fk):
    server = start_fake("--fake-version", "0.5.23", *fk.EAGLE3, "--cuda-graph-max-bs-decode", "32")
    server.wait_ready()
    log = server.log()
    # num_tokens_per_req: SGLang's wording at the commit of shared/sglang-cpu (0.5.23 era)
    assert "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=3" in log
    assert "Capture draft decode CUDA graph end. elapsed=" in log
    assert "Capture cuda graph begin" not in log
    assert server.get("/server_info").json()["version"] == "0.5.23"


def test_unknown_flags_and_public_host_only_warn(start_fake):
    server = start_fake("--host", "0.0.0.0", "--enable-something-new", "--some-size", "4")
    server.wait_ready()
    log = server.log()
    assert "Unrecognized argument --enable-something-new" in log and "Unrecognized argument --some-size" in log
    assert "--host 0.0.0.0 is not a loopback address" in log
    assert f"Uvicorn running on http://127.0.0.1:{server.port}" in log
    assert server.get("/health").status_code == 200


def test_busy_port_fails_like_uvicorn(start_fake, fk):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        server = start_fake(port=s.getsockname()[1])
        assert server.wait_exit() != 0
        port = s.getsockname()[1]
    # uvicorn's line, as real SGLang prints it, once
    line = f"[Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): address already in use"
    assert line in server.log() and server.log().count("error while attempting to bind") == 1


def test_api_key_guards_everything_but_health(start_fake):
    server = start_fake("--api-key", "sk-test")
    server.wait_ready()
    assert server.get("/v1/models").status_code == 401
    assert server.get("/health").status_code == 200
    ok = server.get("/v1/models", headers={"Authorization": "Bearer sk-test"})
    assert ok.status_code == 200 and json.loads(ok.text)["data"][0]["id"] == "/models/Llama-3.1-8B-Instruct"


# --- tqdm bars and the engine timings (issue 12: as real SGLang's rank 0 draws them) ---

BAR = re.compile(
    r"^(?P<desc>[^:\r]+): +(?P<pct>\d+)% Completed \| (?P<n>\d+)/(?P<total>\d+) "
    r"\[(?P<elapsed>\d\d:\d\d)<(?:\d\d:\d\d|\?), +(?:[\d.]+(?:it/s|s/it)|\?it/s)\] *$"
)


def _bar_lines(log: str) -> list[list[str]]:
    return [line.split("\r")[1:] for line in log.split("\n") if line.startswith("\r")]


def test_weight_bar_counts_shards_at_the_phase_s_pace(start_fake):
    # 20 GB of weights: 4 shards of 5 GB; at 160x the load takes 1.5 s, 0.375 s a shard (> tqdm's 0.1 s)
    server = start_fake(
        "--fake-version",
        "0.5.23",
        "--fake-weights-gb",
        "20",
        "--fake-speed",
        "50",
        "--fake-startup-speed",
        "160",
        fast=False,
    )
    server.wait_ready(timeout=60)
    log = server.log()
    (bar,) = [b for b in _bar_lines(log) if "shards" in b[0]]
    updates = [BAR.match(u) for u in bar]
    assert all(updates), bar
    assert [int(u["n"]) for u in updates] == [0, 1, 2, 3, 4, 4]  # each shard, then the closing redraw
    assert {u["total"] for u in updates} == {"4"} and updates[0]["desc"] == "Multi-thread loading shards"
    # the phase slept its whole share (sleeps never end early; how much longer a busy machine makes
    # it is no property of the fake), and the closing redraw's elapsed is the load's as logged
    load = float(re.search(r"Load weight end\. elapsed=([\d.]+) s", log).group(1))
    assert load >= Durations().weights / 160 and updates[-1]["elapsed"] == f"00:{int(load):02d}"
    assert "\n" not in log[log.index("\rMulti-thread") : log.index("Load weight end.")].rstrip("\n[0123456789-: ]")


def test_shards_from_the_model_size():
    from sweep.fake.startup import StartupPlan

    def shards(weights_gb: float, tp: int) -> int:
        return StartupPlan(args={"tp_size": tp}, architecture="X", weights_gb=weights_gb).shards()

    assert shards(72.5, 8) == 64  # a 580 GB target: the big ones ship 64 shards
    assert shards(16, 1) == 4 and shards(141, 1) == 29 and shards(0.01, 1) == 1


def test_0_5_10_bars_and_no_engine_timings(start_fake):
    server = start_fake("--tp-size", "2", "--cuda-graph-max-bs", "16")
    server.wait_ready()
    log = server.log()
    bars = _bar_lines(log)
    assert len(bars) == 2  # rank 0 only: its weights and its graphs
    assert bars[0][0].startswith("Loading safetensors checkpoint shards:   0% Completed | 0/29 ")
    bs = json.loads(re.search(r"TP0\] Capture cuda graph bs (\[[\d, ]+\])", log).group(1))
    sizes = list(dict.fromkeys(int(m) for m in re.findall(r"Capturing batches \(bs=(\d+) ", "\r".join(bars[1]))))
    assert sizes == sorted(bs, reverse=True) and bars[1][-1].split("| ")[1].startswith(f"{len(bs)}/{len(bs)} ")
    assert "Engine startup timings" not in log  # 0.5.10 predates the line


def test_engine_timings_line_carries_the_capture_times(start_fake):
    server = start_fake("--fake-version", "0.5.23")
    server.wait_ready()
    log = server.log()
    m = re.search(
        r"^\[[^\]]+\] Engine startup timings \(s\): load_weight=([\d.]+), kv_cache_allocation=[\d.]+, "
        r"scheduler_e2e=([\d.]+), cuda_graph=\{prefill=0\.00, decode=([\d.]+), target_verify=0\.00, "
        r"draft_prefill=0\.00, draft_decode=0\.00, draft_extend=0\.00\}, tokenizer_e2e=([\d.]+)$",
        log,
        re.M,
    )
    assert m, log[-3000:]
    assert m.group(3) == re.search(r"Capture target decode CUDA graph end\. elapsed=([\d.]+) s", log).group(1)
    assert m.group(1) == re.search(r"Load weight end\. elapsed=([\d.]+) s", log).group(1)
    assert float(m.group(4)) >= float(m.group(2))
    assert log.index("Engine startup timings") < log.index("Uvicorn running on")
