"""SGLang's own start-up of a server's scheduler (the target, the drafter, their memory pools and
attention backends) for many cases in one process of an SGLang install: what the server does with a
checkpoint before it serves, without an HTTP server, a tokenizer process or a warmup request.

Run by the python of an SGLang install (stdlib + sglang only), never imported by the project:

    SGLANG_PYTHON tests/real/sglang_scheduler_init.py [PARALLEL] < cases.jsonl > outcomes.jsonl

Each input line is ``{"id", "argv", "log"}`` (the argv of ``launch_server`` without the launcher; the
file the case's output goes to). SGLang is imported once, then each case runs in a child forked from
this process, so its global state (the published server args, torch.distributed, the loaded models)
dies with it. The child runs what ``launch_server`` runs up to the scheduler (``prepare_server_args``,
``configure_logger``, ``_set_envs_and_config``, ``check_server_args``, ``PortArgs``) and then SGLang's
``run_scheduler_process`` itself, which builds the ``Scheduler`` (target worker, speculative worker
with the drafter, memory pools) and hands back its init info: at that point the child logs ``READY``
and exits. A case that fails logs SGLang's own traceback ("Scheduler hit an exception: ...") as a
server would. Each output line is ``{"id", "rc", "seconds"}`` (rc 0: initialized).

The first line out is ``{"ready": true}`` once SGLang is imported, or ``{"ready": false, "why"}``
where this install's scheduler entry point is not the one this script knows (the caller then starts
real servers instead).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

READY = "The scheduler is initialized (tests/real/sglang_scheduler_init.py): the server would warm up and serve now"


class _Initialized(BaseException):
    """Raised from the init-info pipe: past SGLang's ``except Exception``, before its event loop."""


class _InitPipe:
    def send(self, info) -> None:
        print(READY, flush=True)
        raise _Initialized


def _case(argv: list[str], log: str) -> int:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from sglang.srt.entrypoints.engine import _set_envs_and_config
    from sglang.srt.managers.scheduler import run_scheduler_process
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import PortArgs, prepare_server_args
    from sglang.srt.utils import configure_logger

    try:
        load_plugins()
        server_args = prepare_server_args(argv)
        configure_logger(server_args)
        _set_envs_and_config(server_args)
        server_args.check_server_args()
        port_args = PortArgs.init_new(server_args)
        print(f"server_args={server_args!r}", flush=True)
        # gpu_id, tp_rank, attn_cp_rank, moe_dp_rank, moe_ep_rank, pp_rank, dp_rank: one CPU rank
        run_scheduler_process(server_args, port_args, 0, 0, 0, 0, 0, 0, None, _InitPipe())
    except _Initialized:
        return 0
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    return 1  # run_scheduler_process logged the scheduler's exception and returned


def main() -> int:
    parallel = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    # a failing scheduler sends SIGQUIT to its parent, which is this process here (a server's launcher
    # would shut down): the other cases go on
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        import inspect

        from sglang.srt.entrypoints.engine import _set_envs_and_config  # noqa: F401
        from sglang.srt.managers.scheduler import run_scheduler_process
        from sglang.srt.plugins import load_plugins  # noqa: F401
        from sglang.srt.server_args import PortArgs, prepare_server_args  # noqa: F401
        from sglang.srt.utils import configure_logger  # noqa: F401

        params = list(inspect.signature(run_scheduler_process).parameters)
        expected = ["server_args", "port_args", "gpu_id", "tp_rank", "attn_cp_rank", "moe_dp_rank"]
        if params[: len(expected)] != expected or "pipe_writer" not in params:
            raise ImportError(f"run_scheduler_process{tuple(params)} is not the one this script knows")
    except Exception as exc:  # noqa: BLE001  (any reason the caller should start servers instead)
        print(json.dumps({"ready": False, "why": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 0
    print(json.dumps({"ready": True}), flush=True)

    cases = [json.loads(line) for line in sys.stdin if line.strip()]
    running: dict[int, tuple[dict, float]] = {}
    while cases or running:
        while cases and len(running) < parallel:
            case = cases.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.setsid()  # its own group: whatever the scheduler starts goes with it
                os._exit(_case(case["argv"], case["log"]))
            running[pid] = (case, time.monotonic())
        pid, status = os.wait()
        if pid in running:
            case, t0 = running.pop(pid)
            with_children_gone(pid)
            rc = os.waitstatus_to_exitcode(status)
            print(json.dumps({"id": case["id"], "rc": rc, "seconds": round(time.monotonic() - t0, 2)}), flush=True)
    return 0


def with_children_gone(pid: int) -> None:
    """Kill what a case left in its process group (a child it forked is in the case's group)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    sys.exit(main())
