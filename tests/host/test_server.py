"""The host layer's log following: any byte is activity, tqdm bars become progress, a silent server
is cut as a hang. Real subprocesses (tiny ``python -c`` scripts, not the fake server) for the
stall tests; the startup timings from real SGLang's log lines (shared/sglang-cpu/transcripts)."""

from __future__ import annotations

import contextlib
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from sweep.core.errors import PointFailure
from sweep.core.events import HostProgress
from sweep.experiment.config import Timeouts
from sweep.host.server import TAIL_LINES, LogFollower, ServerProcess, Startup
from sweep.results.schema import ENGINE_COLUMNS
from sweep.sglang.logs import Progress, engine_timings, event_of, rank_of
from tests.conftest import free_port

# --- real lines (transcripts/spec_eagle.log, 0.5.23-era SGLang on CPU, EAGLE with a drafter) ----
BAR = (
    "\rMulti-thread loading shards:   0% Completed | 0/1 [00:00<?, ?it/s]"
    "\rMulti-thread loading shards: 100% Completed | 1/1 [00:00<00:00, 282.35it/s]"
)
SPEC_EAGLE = [
    "[2026-12-01 07:27:07] Load weight begin. avail mem=21.21 GB",
    BAR,
    "[2026-12-01 07:27:07] Load weight end. elapsed=0.04 s, type=LlamaForCausalLM, avail mem=21.21 GB, mem usage=0.01 GB.",
    "[2026-12-01 07:27:07] Cannot detect CUDA architecture.",
    "[2026-12-01 07:27:07] Using draft model load_format: 'dummy'",
    "[2026-12-01 07:27:07] Load weight begin. avail mem=21.21 GB",
    "[2026-12-01 07:27:08] Load weight end. elapsed=0.04 s, type=LlamaForCausalLMEagle, avail mem=21.21 GB, mem usage=0.00 GB.",
    "[2026-12-01 07:27:08] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 32768, K size: 0.02 GB, V size: 0.02 GB",
    "[2026-12-01 07:27:08] Memory pool end. avail mem=21.19 GB",
    "[2026-12-01 07:27:08] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 32768, K size: 0.01 GB, V size: 0.01 GB",
    "[2026-12-01 07:27:08] Memory pool end. avail mem=21.18 GB",
    "[2026-12-01 07:27:08] Engine startup timings (s): load_weight=0.08, kv_cache_allocation=0.53, scheduler_e2e=2.19, "
    "cuda_graph={prefill=0.00, decode=0.00, target_verify=0.00, draft_prefill=0.00, draft_decode=0.00, "
    "draft_extend=0.00}, tokenizer_e2e=20.51",
    "[2026-12-01 07:27:08] INFO:     Uvicorn running on http://127.0.0.1:31000 (Press CTRL+C to quit)",
    "[2026-12-01 07:27:36] The server is fired up and ready to roll!",
]


def feed(startup: Startup, lines_at: list[tuple[float, str]]) -> Startup:
    for t, line in lines_at:
        timings = engine_timings(line)
        if timings:
            startup.engine = timings
        ev = event_of(line)
        if ev:
            startup.see(ev, t, rank_of(line))
    return startup


def test_durations_of_a_real_speculative_cpu_startup():
    """0.5.23: target and drafter load before either KV cache; two KV caches; no graphs on CPU."""
    times = [1.0, 2.0, 10.0, 10.1, 10.2, 10.3, 14.0, 15.0, 15.1, 15.5, 15.6, 16.0, 17.0, 45.0]
    s = feed(Startup(), list(zip(times, SPEC_EAGLE)))
    assert [e for e, _ in s.order] == ["load_begin", "load_end", "load_begin", "load_end"] + ["kv_cache"] * 4 + [
        "http_up",
        "fired_up",
    ]
    s.ready = 46.0
    d = s.durations()
    assert d["load_s"] == 14.0  # the drafter's load too (the old code stopped at the target's: 10 s)
    assert d["kv_cache_s"] == pytest.approx(1.6)  # both KV caches, not the drafter's load
    assert d["capture_s"] is None and d["draft_capture_s"] is None  # CPU: no graphs
    assert d["http_s"] == pytest.approx(1.4)  # from the last KV-cache line (was null without graphs)
    assert d["ready_s"] == 29.0 and d["startup_s"] == 46.0
    assert d["engine_load_weight_s"] == 0.08 and d["engine_kv_cache_allocation_s"] == 0.53
    assert d["engine_scheduler_e2e_s"] == 2.19 and d["engine_tokenizer_e2e_s"] == 20.51
    assert d["engine_cuda_graph_target_verify_s"] == 0.0
    assert set(ENGINE_COLUMNS) <= set(d)


def test_durations_of_the_0_5_10_order_and_gpu_graphs():
    """0.5.10: target load, KV cache, target graphs, then the drafter's load and graphs; TP ranks."""
    lines = [
        (1, "[t TP0] Load weight begin. avail mem=78 GB"),
        (1, "[t TP1] Load weight begin. avail mem=78 GB"),
        (20, "[t TP0] Load weight end. elapsed=19 s"),
        (21, "[t TP1] Load weight end. elapsed=20 s"),
        (24, "[t TP0] KV Cache is allocated. #tokens: 9000, K size: 20 GB, V size: 20 GB"),
        (24, "[t TP1] KV Cache is allocated. #tokens: 9000, K size: 20 GB, V size: 20 GB"),
        (25, "[t TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=30 GB"),
        (25, "[t TP1] Capture cuda graph begin. This can take up to several minutes. avail mem=30 GB"),
        (60, "[t TP0] Capture cuda graph end. Time elapsed: 35 s. mem usage=3 GB. avail mem=27 GB."),
        (61, "[t TP1] Capture cuda graph end. Time elapsed: 36 s. mem usage=3 GB. avail mem=27 GB."),
        (62, "[t TP0] Load weight begin. avail mem=27 GB"),
        (70, "[t TP0] Load weight end. elapsed=8 s"),
        (71, "[t TP0] Capture draft cuda graph begin. This can take up to several minutes."),
        (80, "[t TP0] Capture draft cuda graph end. Time elapsed: 9 s."),
        (81, "[t TP0] Capture draft extend cuda graph begin."),
        (90, "[t TP0] Capture draft extend cuda graph end."),
        (92, "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)"),
    ]
    s = feed(Startup(), lines)
    s.ready = 95
    d = s.durations()
    assert d["load_s"] == 21 and d["kv_cache_s"] == 3  # slowest rank; the drafter's load is not here
    assert d["capture_s"] == 36 and d["draft_capture_s"] == 29 and d["http_s"] == 2 and d["ready_s"] == 3
    assert all(d[c] is None for c in ENGINE_COLUMNS)  # 0.5.10 prints no engine timings


def write(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_follower_any_byte_is_activity_and_bars_are_parsed_as_drawn(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    f = LogFollower(log)
    write(log, b"[t] Load weight begin. avail mem=78 GB\n")
    got = f.read()
    assert got.lines == ["[t] Load weight begin. avail mem=78 GB"] and got.nbytes > 0
    write(log, b"\rLoading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]")
    got = f.read()
    assert got.lines == [] and got.nbytes > 0  # no line, but alive
    assert [p.n for p in got.progress] == [0] and got.progress[0].kind == "load"
    assert f.read().nbytes == 0 and f.read().progress == []  # the bar being drawn is reported once
    write(log, b"\rLoading safetensors checkpoint shards:  42% Completed | 27/64 [02:10<02:30, 5.1s/it]")
    write(log, b"\rLoading safetensors checkpoint shards:  43% Compl")  # an update cut mid-write
    got = f.read()
    assert [p.n for p in got.progress] == [27] and got.progress[0].summary() == "load 27/64 shards, 5.1 s/it, ETA 02:30"
    write(log, b"eted | 28/64 [02:15<02:25, 5.1s/it]\n[t] Load weight end. elapsed=312 s\n")
    got = f.read()
    assert [p.n for p in got.progress] == [28] and got.lines == ["[t] Load weight end. elapsed=312 s"]
    assert f.tail == [
        "[t] Load weight begin. avail mem=78 GB",
        "Loading safetensors checkpoint shards:  43% Completed | 28/64 [02:15<02:25, 5.1s/it]",
        "[t] Load weight end. elapsed=312 s",
    ]


def test_tail_keeps_only_the_last_update_of_a_bar(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    f = LogFollower(log)
    lines = [f"[t TP{r}] Capture cuda graph begin." for r in range(4)]
    write(log, ("\n".join(lines) + "\n").encode())
    f.read()
    for i in range(5000):  # thousands of updates, read in bursts
        write(
            log,
            f"\rCapturing batches (bs={5000 - i} avail_mem=20.51 GB):  {i // 50:2d}%|▎ | {i}/5000 "
            f"[00:01<00:45,  1.3s/it]".encode(),
        )
        if i % 700 == 0:
            f.read()
    f.read()
    text = f.tail_text()
    assert text.count("Capturing batches") == 1 and "4999/5000" in text and len(text) < 1000
    write(log, b"\n[t TP0] Capture cuda graph end.\n")
    f.read()
    assert f.tail[-2:] == [f.tail[-2], "[t TP0] Capture cuda graph end."] and "4999/5000" in f.tail[-2]
    assert sum("Capturing" in line for line in f.tail) == 1 and len(f.tail) <= TAIL_LINES


def test_a_log_line_written_while_a_bar_draws_is_still_an_event(tmp_path):
    """Rank 0 draws the bar; another rank logs meanwhile: its line follows the bar's update."""
    log = tmp_path / "server.log"
    log.write_bytes(
        b"\rCapturing batches (bs=8 avail_mem=20.51 GB):  50%|#####     | 1/2 [00:01<00:01,  1.3s/it]"
        b"[2026-11-29 10:00:00 TP3] Capture cuda graph end. Time elapsed: 3 s.\n"
    )
    got = LogFollower(log).read()
    assert got.lines == ["[2026-11-29 10:00:00 TP3] Capture cuda graph end. Time elapsed: 3 s."]
    assert event_of(got.lines[0]) == "capture_end" and rank_of(got.lines[0]) == "TP3"
    assert got.progress[0].kind == "capture" and got.progress[0].values == {"bs": 8, "avail_mem": 20.51}


def test_other_ranks_lines_between_bar_updates_leave_one_copy_of_the_bar(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(
        b"".join(
            b"\rCapturing batches (bs=%d avail_mem=20.51 GB):  %d%%|# | %d/20 [00:01<00:01,  1.3s/it]"
            b"[2026-11-29 10:00:00 TP3] line %d\n" % (20 - i, i * 5, i, i)
            for i in range(20)
        )
    )
    f = LogFollower(log)
    got = f.read()
    assert len(got.lines) == 20 and len(got.progress) == 20
    bars = [line for line in f.tail if line.startswith("Capturing")]
    assert bars == ["Capturing batches (bs=1 avail_mem=20.51 GB):  95%|# | 19/20 [00:01<00:01,  1.3s/it]"]
    assert f.tail[-2:] == [bars[0], "[2026-11-29 10:00:00 TP3] line 19"]


# --- real subprocesses --------------------------------------------------------------------------
# A stand-in server: a load line, then ``bar_s`` seconds of tqdm-style \r updates with no newline,
# then (unless it hangs) the next startup lines and a tiny HTTP server that answers /health and
# /generate. ``hang_after_bar`` stops all output after the bar's first updates.
SERVER = textwrap.dedent(r"""
    import json, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port, bar_s, hang = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "hang"
    print("[2026-12-01 07:20:59] Load weight begin. avail mem=21.35 GB", flush=True)
    t0, n = time.monotonic(), 0
    while time.monotonic() - t0 < bar_s:
        el = time.monotonic() - t0
        sys.stderr.write("\rLoading safetensors checkpoint shards: %3d%% Completed | %d/64 [00:%02d<00:30, 0.1s/it]"
                         % (n * 100 // 64, n, el))
        sys.stderr.flush()
        n = min(n + 1, 63)
        if hang and n >= 3:
            time.sleep(3600)
        time.sleep(0.1)
    sys.stderr.write("\n")
    if hang:
        time.sleep(3600)
    print("[2026-12-01 07:21:10] Load weight end. elapsed=10.00 s, type=LlamaForCausalLM", flush=True)
    print("[2026-12-01 07:21:10] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 32768", flush=True)

    class H(BaseHTTPRequestHandler):
        def _send(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        def do_GET(self):
            self._send({})
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._send({"text": "hi", "output_ids": [1], "meta_info": {"prompt_tokens": 3, "completion_tokens": 1,
                        "finish_reason": {"type": "length"}}})
        def log_message(self, *a):
            pass

    httpd = HTTPServer(("127.0.0.1", port), H)
    print(f"[2026-12-01 07:21:11] INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)",
          flush=True)
    httpd.serve_forever()
""")


def launch(tmp_path: Path, bar_s: float, mode: str = "serve") -> ServerProcess:
    port = free_port()
    server = ServerProcess(
        [sys.executable, "-c", SERVER, str(port), str(bar_s), mode], {}, tmp_path / "server.log", port=port
    )
    server.start()
    return server


@pytest.fixture
def servers():
    started: list[ServerProcess] = []
    yield started
    for s in started:
        pids = [p.pid for p in psutil.Process(s.proc.pid).children(recursive=True)] if s.alive() else []
        s.stop(2.0)
        assert not s.alive() and not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)


STALL = 1.5  # seconds; counted from the child's first line (its interpreters' start before it is not a stall)


@pytest.mark.slow
def test_progress_bar_longer_than_stall_s_is_not_a_hang(tmp_path, servers):
    """Only \\r updates (no newline) for 3x stall_s: alive all along, then it serves."""
    server = launch(tmp_path, bar_s=3 * STALL)
    servers.append(server)
    events: list[HostProgress] = []
    startup = server.wait_ready(Timeouts(stall_s=STALL, load_s=30, capture_s=30, ready_s=30, total_s=60), events.append)
    assert startup.ready is not None
    shown = [e for e in events if e.progress]
    assert shown and all(e.stage == "load" and e.progress_kind == "load" for e in shown)
    assert shown[-1].progress.startswith("load ") and "/64 shards" in shown[-1].progress
    # the case really happened: between the load's two lines, as the host timed them, only the bar
    # drew, for longer than stall_s (the stand-in draws for 3x stall_s)
    assert [ev for ev, _ in startup.order][:2] == ["load_begin", "load_end"]
    assert startup.first("load_end") - startup.first("load_begin") > STALL
    assert len(shown) <= 3 * STALL + 3  # throttled to about one a second, not ten
    (rec,) = startup.progress_records()
    assert rec["kind"] == "load" and rec["total"] == 64 and rec["n"] >= 20 and rec["rate"] == pytest.approx(10)
    assert server.log.tail_text().count("Loading safetensors") == 1


@pytest.mark.slow
def test_the_silence_before_the_first_line_is_the_import_not_a_hang(tmp_path, servers):
    """Nothing at all for 2x stall_s (an interpreter importing torch and SGLang on a loaded machine),
    then one line and silence: cut as a stall counted from that line, not from the launch."""
    port = free_port()
    script = (
        f"import time; time.sleep({2 * STALL}); "
        "print('[2026-12-01 07:20:59] Load weight begin. avail mem=21.35 GB', flush=True); time.sleep(3600)"
    )
    server = ServerProcess([sys.executable, "-c", script], {}, tmp_path / "server.log", port=port)
    server.start()
    servers.append(server)
    with pytest.raises(PointFailure) as e:
        server.wait_ready(Timeouts(stall_s=STALL, load_s=30, capture_s=30, ready_s=30, total_s=60))
    assert e.value.reason.startswith(f"hang: no log output for {STALL:.0f} s in load")
    assert "last log line: [2026-12-01 07:20:59] Load weight begin" in e.value.reason  # it waited for the word
    assert server.elapsed() > 2 * STALL + STALL


@pytest.mark.slow
def test_no_output_at_all_is_cut_as_a_hang(tmp_path, servers):
    """One line, then silence: cut after stall_s in load, with the stall as the reason."""
    port = free_port()
    script = "import time; print('[2026-12-01 07:20:59] Load weight begin. avail mem=21.35 GB', flush=True); time.sleep(3600)"
    server = ServerProcess([sys.executable, "-c", script], {}, tmp_path / "server.log", port=port)
    server.start()
    servers.append(server)
    with pytest.raises(PointFailure) as e:
        server.wait_ready(Timeouts(stall_s=STALL, load_s=30, capture_s=30, ready_s=30, total_s=60))
    assert e.value.phase == "load"
    # the stall detector cut it, not load_s or total_s (their reasons: "still in load after 30 s
    # (limit server.timeouts.load_s)", "not ready after 60 s"), and cut it alive: it did not die
    assert e.value.reason.startswith(f"hang: no log output for {STALL:.0f} s in load (server.timeouts.stall_s); ")
    assert server.alive()
    assert "last log line: [2026-12-01 07:20:59] Load weight begin" in e.value.reason


@pytest.mark.slow
def test_a_bar_that_stops_drawing_is_cut_and_says_how_far_it_got(tmp_path, servers):
    server = launch(tmp_path, bar_s=60, mode="hang")
    servers.append(server)
    with pytest.raises(PointFailure) as e:
        server.wait_ready(Timeouts(stall_s=STALL, load_s=30, capture_s=30, ready_s=30, total_s=60))
    assert e.value.phase == "load" and "server.timeouts.stall_s" in e.value.reason
    assert "last progress: load 2/64 shards" in e.value.reason
    assert "last log line: Loading safetensors checkpoint shards:   3% Completed | 2/64" in e.value.reason
    assert isinstance(server.startup.progress["load"][1], Progress)


@pytest.mark.slow
@pytest.mark.parametrize("ends", ["normally", "raising"])
def test_with_starts_the_server_and_leaving_stops_its_whole_tree(tmp_path, ends):
    """A server and a child of its own (as SGLang's ranks are): both gone once the ``with`` is left,
    however it is left, and what was killed is kept in ``killed``."""
    script = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)']);"
        " print('up', flush=True); time.sleep(3600)"
    )
    server = ServerProcess([sys.executable, "-c", script], {}, tmp_path / "server.log", port=free_port(), grace_s=2.0)
    tree: list[int] = []
    with pytest.raises(RuntimeError) if ends == "raising" else contextlib.nullcontext():
        with server as s:
            assert s is server and s.alive()
            deadline = time.monotonic() + 30
            while len(tree) < 2 and time.monotonic() < deadline:  # the server (exec'd by its leash), its child
                tree = [server.proc.pid, *(p.pid for p in psutil.Process(server.proc.pid).children(recursive=True))]
            assert len(tree) == 2, tree
            if ends == "raising":
                raise RuntimeError("the block failed")
    assert not server.alive()
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in tree)
    assert server.killed, "what stopping it killed is kept"
