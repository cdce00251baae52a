"""Faults on demand: fail, hang, crash mid-serve, leave zombies, missing model paths, dead ranks."""

from __future__ import annotations

import os
import re
import signal
import time

import httpx
import psutil
import pytest

from sweep.host.gpu import ledger_read

pytestmark = pytest.mark.slow

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."  # during startup
# once serving, the real launcher's running-phase handler (shared/sglang-cpu/transcripts/badargs_summary.txt)
RUNNING_SIGQUIT_LINE = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."


def _died_soon_after(server, pattern: str) -> None:
    """The server logs ``pattern`` and is gone within a fraction of a second (generous bound here)."""
    server.wait_for_log(pattern)
    seen = time.monotonic()
    assert server.wait_exit(timeout=10) != 0
    assert time.monotonic() - seen < 3.0


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _alive(pids)


def test_fail_at_load_not_enough_memory(start_fake):
    server = start_fake("--tp-size", "2", "--fake-fail-at", "load")
    _died_soon_after(server, re.escape(SIGQUIT_LINE))
    log = server.log()
    assert "Load weight end." in log
    assert re.search(r"TP0\] Scheduler hit an exception: Traceback \(most recent call last\):", log)
    assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in log
    assert "TP0] Capture cuda graph begin" not in log  # rank 1 may get there before the tree is killed


def test_fail_at_capture_cuda_oom(start_fake, fk, tmp_path):
    server = start_fake(*fk.EAGLE3, "--fake-fail-at", "capture", "--fake-ledger", str(tmp_path))
    _died_soon_after(server, re.escape(SIGQUIT_LINE))
    log = server.log()
    assert log.index("Capture cuda graph begin.") < log.index("Scheduler hit an exception")
    assert "torch.OutOfMemoryError: CUDA out of memory." in log
    assert "Exception: Capture cuda graph failed: CUDA out of memory." in log
    assert "TP0] Capture cuda graph end" not in log
    assert _wait_gone([c.pid for c in server.children()]) == []
    assert ledger_read(tmp_path) == []  # killed with the tree: its "GPU memory" is free again


def test_fail_at_serve_on_first_request(start_fake):
    server = start_fake("--fake-fail-at", "serve")
    server.wait_ready()  # the warmup request does not trip it
    with pytest.raises(httpx.TransportError):
        server.post("/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 4}}, timeout=10)
    assert server.wait_exit() != 0
    log = server.log()
    assert "TP0] Scheduler hit an exception: Traceback" in log
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in log
    assert log.index("Scheduler hit an exception") < log.index(RUNNING_SIGQUIT_LINE)
    assert log.index(RUNNING_SIGQUIT_LINE) < log.index("Sleeping 5 seconds before crash diagnostics")
    assert log.index("No live scheduler processes found") < log.index("kill_process_tree called: parent_pid=")


def test_crash_after_n_requests(start_fake):
    server = start_fake("--fake-crash-after-requests", "2")
    server.wait_ready()
    for _ in range(2):
        r = server.post("/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 4}})
        assert r.status_code == 200
    _died_soon_after(server, re.escape(RUNNING_SIGQUIT_LINE))
    assert "Scheduler hit an exception" in server.log()


@pytest.mark.parametrize("phase, last_line, next_line", [
    ("load", "Load weight begin.", "Load weight end."),
    ("capture", "Capture cuda graph begin.", "Capture cuda graph end."),
])
def test_hang_stops_logging_and_never_serves(start_fake, phase, last_line, next_line):
    server = start_fake("--tp-size", "2", "--fake-hang-at", phase)
    server.wait_for_log(re.escape(last_line))
    time.sleep(1.0)  # 1 s at 3000x is 50 minutes of a real startup
    log = server.log()
    assert next_line not in log and "Uvicorn running" not in log
    assert server.proc.poll() is None
    with pytest.raises(httpx.ConnectError):
        server.get("/health", timeout=2)


def test_rank_killed_during_startup(start_fake):
    server = start_fake("--tp-size", "2", "--fake-hang-at", "load")
    server.wait_for_log("TP1\\] Load weight begin")
    schedulers = [p for p in server.children() if p.name().startswith("sglang::sched")]
    assert len(schedulers) == 2
    schedulers[-1].kill()
    assert server.wait_exit() == 1
    assert re.search(r"Rank \d scheduler died during initialization \(exit code: -9\)", server.log())
    assert _wait_gone([c.pid for c in schedulers]) == []


def test_parent_killed_children_follow(start_fake, tmp_path):
    server = start_fake("--tp-size", "2", "--fake-ledger", str(tmp_path))
    server.wait_ready()
    kids = [c.pid for c in server.children()]
    # two ranks, the detokenizer and multiprocessing's resource tracker, as the real launcher has
    assert len(kids) == 4 and len(ledger_read(tmp_path)) == 2
    server.proc.kill()  # SIGKILL: no cleanup code runs in the parent
    server.proc.wait()
    assert _wait_gone(kids) == []
    assert ledger_read(tmp_path) == []


def test_zombie_children_ignore_sigterm_and_outlive_the_parent(start_fake, tmp_path):
    server = start_fake("--tp-size", "2", "--fake-zombie", "--fake-ledger", str(tmp_path))
    server.wait_ready()
    kids = [c.pid for c in server.children() if c.name().startswith("sglang::")]  # the resource tracker is no zombie
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait_exit() == -signal.SIGKILL  # SGLang's kill_process_tree ends with SIGKILL to itself
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    time.sleep(1.5)  # past the children's parent-watch poll
    assert sorted(_alive(kids)) == sorted(kids)
    held = ledger_read(tmp_path)
    assert len(held) == 2 and all(e.mem_mib > 0 for e in held)  # still holding "GPU memory"
    # (the fixture SIGKILLs them by marker)


def test_zombie_lifetime_ends_them(start_fake, tmp_path):
    server = start_fake("--fake-zombie", "--fake-zombie-lifetime", "1", "--fake-ledger", str(tmp_path))
    server.wait_ready()
    kids = [c.pid for c in server.children()]
    server.proc.kill()
    server.proc.wait()
    time.sleep(0.6)
    assert _alive(kids)
    assert _wait_gone(kids, timeout=10) == []
    assert ledger_read(tmp_path) == []


def test_missing_model_path_fails_at_load(start_fake, tmp_path):
    server = start_fake("--fake-check-paths", model=str(tmp_path / "no-such-model"))
    _died_soon_after(server, re.escape(SIGQUIT_LINE))
    log = server.log()
    assert log.index("Load weight begin.") < log.index("Scheduler hit an exception")
    assert f"OSError: {tmp_path / 'no-such-model'} is not a local folder and is not a valid model identifier" in log


def test_missing_draft_path_fails_at_draft_load(start_fake, tmp_path):
    server = start_fake("--fake-check-paths", "--speculative-algorithm", "EAGLE3",
                        "--speculative-draft-model-path", str(tmp_path / "no-drafter"),
                        "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", model=str(tmp_path))
    _died_soon_after(server, re.escape(SIGQUIT_LINE))
    log = server.log()
    assert log.index("Capture cuda graph end.") < log.index("is not a local folder")
    assert log.count("Load weight begin.") == 2


def test_paths_are_not_checked_by_default(start_fake):
    server = start_fake(model="/definitely/not/here")
    server.wait_ready()
