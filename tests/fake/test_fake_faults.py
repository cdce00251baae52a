"""Faults on demand: fail, hang, crash mid-serve, leave zombies, missing model paths, dead ranks."""

from __future__ import annotations

import os
import re
import signal
import time

import httpx
import psutil
import pytest

from sweep.core.ledger import ledger_read
from sweep.fake import procs
from tests.waiting import holds_for, wait_until

pytestmark = pytest.mark.slow

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."  # during startup
# once serving, the real launcher's running-phase handler (shared/sglang-cpu/transcripts/badargs_summary.txt)
RUNNING_SIGQUIT_LINE = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."


KILL_TREE_LINE = "kill_process_tree called: parent_pid="


def _ended_by_its_fault_handler(server, pattern: str) -> None:
    """The server logs ``pattern`` and its SIGQUIT handler ends it there: SGLang's kill_process_tree
    (logged after ``pattern``) SIGKILLs the children and then the launcher itself, so the exit
    status is the launcher's own SIGKILL, not an exit of its own or a kill from outside."""
    server.wait_for_log(pattern)
    assert server.wait_exit(timeout=10) == -signal.SIGKILL
    log = server.log()
    assert re.search(pattern, log).start() < log.index(KILL_TREE_LINE), log[-3000:]


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
    """The pids still alive once all have gone, or once ``timeout`` has passed."""
    try:
        wait_until(lambda: not _alive(pids), timeout, "processes gone", interval=0.05)
    except AssertionError:
        pass
    return _alive(pids)


def test_fail_at_load_not_enough_memory(start_fake):
    server = start_fake("--tp-size", "2", "--fake-fail-at", "load")
    _ended_by_its_fault_handler(server, re.escape(SIGQUIT_LINE))
    log = server.log()
    assert "Load weight end." in log
    assert re.search(r"TP0\] Scheduler hit an exception: Traceback \(most recent call last\):", log)
    assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in log
    assert "TP0] Capture cuda graph begin" not in log  # rank 1 may get there before the tree is killed


def test_fail_at_capture_cuda_oom(start_fake, fk, tmp_path):
    server = start_fake(*fk.EAGLE3, "--fake-fail-at", "capture", "--fake-ledger", str(tmp_path))
    _ended_by_its_fault_handler(server, re.escape(SIGQUIT_LINE))
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
    _ended_by_its_fault_handler(server, re.escape(RUNNING_SIGQUIT_LINE))
    assert "Scheduler hit an exception" in server.log()


@pytest.mark.parametrize(
    "phase, last_line, next_line",
    [
        ("load", "Load weight begin.", "Load weight end."),
        ("capture", "Capture cuda graph begin.", "Capture cuda graph end."),
    ],
)
def test_hang_stops_logging_and_never_serves(start_fake, phase, last_line, next_line):
    server = start_fake("--tp-size", "2", "--fake-hang-at", phase)
    server.wait_for_log(re.escape(last_line))

    def still_hung() -> bool:
        log = server.log()
        assert next_line not in log and "Uvicorn running" not in log, log[-2000:]
        assert server.proc.poll() is None, f"the hung server exited ({server.proc.returncode})"
        with pytest.raises(httpx.ConnectError):
            server.get("/health", timeout=2)
        return True

    # "never" has no moment that proves it: watched for 1 s, which at --fake-startup-speed 3000 is
    # 50 minutes of a real startup (the whole startup without the hang takes ~0.2 s)
    holds_for(still_hung, 1.0, f"a server hung in {phase} never moves on, never serves", interval=0.05)


def test_rank_killed_during_startup(start_fake):
    server = start_fake("--tp-size", "2", "--fake-hang-at", "load")
    server.wait_for_log("TP1\\] Load weight begin")

    # each rank titles itself when it starts; on a busy machine one may log before the other is titled
    def schedulers_titled():
        found = [p for p in server.children() if p.name().startswith("sglang::sched")]
        return found if len(found) == 2 else None

    schedulers = wait_until(schedulers_titled, 10, "both ranks titled sglang::scheduler_TPn")
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
    # orphaned: the launcher is gone and they were handed to another parent
    wait_until(lambda: all(psutil.Process(pid).ppid() != server.proc.pid for pid in kids), 10, "children reparented")
    for pid in kids:
        os.kill(pid, signal.SIGTERM)

    def all_alive_and_holding() -> bool:
        held = ledger_read(tmp_path)  # still holding their "GPU memory"
        return sorted(_alive(kids)) == sorted(kids) and len(held) == 2 and all(e.mem_mib > 0 for e in held)

    # surviving is a "never": a child that watched its parent (or took the SIGTERM) would be gone
    # within one parent-watch poll (procs.POLL_S); watched for three of them
    holds_for(all_alive_and_holding, 3 * procs.POLL_S, "zombie ranks ignore SIGTERM and outlive the launcher")
    # (the fixture SIGKILLs them by marker)


def test_zombie_lifetime_ends_them(start_fake, tmp_path):
    lifetime = 1.0
    server = start_fake("--fake-zombie", "--fake-zombie-lifetime", str(lifetime), "--fake-ledger", str(tmp_path))
    server.wait_ready()
    kids = [c.pid for c in server.children()]
    ranks = [c.pid for c in server.children() if c.name().startswith("sglang::")]  # the resource tracker is no zombie
    server.proc.kill()
    server.proc.wait()
    orphaned = time.monotonic()
    # each counts its lifetime from its first parent-watch poll after the launcher died, so all of
    # them live at least ``lifetime`` from here: watched until half of it has passed (however late
    # this line runs, the window ends before any of them may go)
    holds_for(
        lambda: sorted(_alive(ranks)) == sorted(ranks) and len(ledger_read(tmp_path)) == 1,
        orphaned + lifetime / 2 - time.monotonic(),
        "orphaned zombies live out their lifetime",
    )
    assert _wait_gone(kids, timeout=10) == []
    assert ledger_read(tmp_path) == []


def test_missing_model_path_fails_at_load(start_fake, tmp_path):
    server = start_fake("--fake-check-paths", model=str(tmp_path / "no-such-model"))
    _ended_by_its_fault_handler(server, re.escape(SIGQUIT_LINE))
    log = server.log()
    assert log.index("Load weight begin.") < log.index("Scheduler hit an exception")
    assert f"OSError: {tmp_path / 'no-such-model'} is not a local folder and is not a valid model identifier" in log


def test_missing_draft_path_fails_at_draft_load(start_fake, tmp_path):
    server = start_fake(
        "--fake-check-paths",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        str(tmp_path / "no-drafter"),
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "1",
        model=str(tmp_path),
    )
    _ended_by_its_fault_handler(server, re.escape(SIGQUIT_LINE))
    log = server.log()
    assert log.index("Capture cuda graph end.") < log.index("is not a local folder")
    assert log.count("Load weight begin.") == 2


def test_paths_are_not_checked_by_default(start_fake):
    server = start_fake(model="/definitely/not/here")
    server.wait_ready()
