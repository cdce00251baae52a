"""``python -m sweep.fake``: the fake server's launch, in SGLang's order.

Parse flags -> ServerArgs rules (a rejected argv dies here, traceback, exit 1) -> ``server_args=`` line
-> fork the TP ranks and the detokenizer (and multiprocessing's resource tracker) -> wait for every
rank's ready message (a rank failing sends SIGQUIT: the parent logs it, ``kill_process_tree`` kills
the tree and itself) -> ``Engine startup timings`` -> HTTP server, warmup, serve until SIGTERM (the
shutdown sequence is :func:`server.serve`'s).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import ipaddress
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any, Optional, Sequence

from sweep.core import ledger_dir, ledger_remove, speculation
from sweep.fake import args as fake_args
from sweep.fake import model, procs, rules, startup, tracebacks
from sweep.fake.log import Log, rank_prefix

_LOOPBACK = "127.0.0.1"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def accept_rate(resolved: rules.Resolved, ns: argparse.Namespace) -> float:
    """The drafter's acceptance: the longest --fake-accept-map key found in its path (``ngram`` for
    NGRAM), else --fake-accept-rate, else the model's default."""
    a = resolved.args
    ngram = a.get("speculative_algorithm") == "NGRAM"
    key = "ngram" if ngram else str(a.get("speculative_draft_model_path") or "")
    matches = sorted(
        ((len(k), v) for k, v in (ns.fake_accept_map or {}).items() if k.lower() in key.lower()), reverse=True
    )
    if matches:
        return matches[0][1]
    if ns.fake_accept_rate is not None:
        return ns.fake_accept_rate
    return model.DEFAULT_NGRAM_ACCEPT_RATE if ngram else model.DEFAULT_ACCEPT_RATE


def speculative_config(resolved: rules.Resolved, ns: argparse.Namespace) -> Optional[model.Spec]:
    a = resolved.args
    if not a.get("speculative_algorithm") or resolved.deferred is not None:
        return None  # a deferred failure ends the startup before anything is served
    steps = int(a["speculative_num_steps"])
    if resolved.adaptive_config is not None and steps == 0:  # adaptive from 0 steps: the drafter's rate is what counts
        return model.Spec(1, 1, 2, accept_rate(resolved, ns))
    return model.Spec(
        steps,
        int(a["speculative_eagle_topk"]),
        int(a["speculative_num_draft_tokens"]),
        accept_rate(resolved, ns),
        ngram=a["speculative_algorithm"] == "NGRAM",
    )


@dataclass(frozen=True)
class Serving:
    """How a fake launched with some argv serves, for computing the figures it should produce."""

    spec: Optional[model.Spec]
    max_running: Optional[int]  # None: no cap from the flags (the KV pool's own, thousands, applies)
    speed: float


def serving_for(argv: Sequence[str]) -> Serving:
    """The speculative config, running cap and speed a fake started with ``argv`` will serve with
    (SGLang's rules applied), e.g. ``model.closed_loop_throughput_tok_s(C, T, s.spec, env, s.max_running, s.speed)``."""
    parsed = fake_args.parse(argv)
    resolved = rules.resolve(parsed.ns, parsed.version)
    cap = resolved.args.get("max_running_requests")
    return Serving(speculative_config(resolved, parsed.ns), int(cap) if cap else None, parsed.ns.fake_speed)


def nccl_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}


def wait_ready(children: list[procs.Child], log: Log) -> Optional[list[dict[str, Any]]]:
    """Each rank's ready message, or None after logging which rank died first (like SGLang)."""
    pending = {c.ready_fd: c for c in children if c.ready_fd is not None}
    buffers: dict[int, bytes] = {fd: b"" for fd in pending}
    ready: dict[int, dict[str, Any]] = {}
    while pending:
        readable, _, _ = select.select(list(pending), [], [])
        for fd in readable:
            data = os.read(fd, 65536)
            child = pending[fd]
            if data:
                buffers[fd] += data
                if b"\n" in buffers[fd]:
                    ready[child.rank] = json.loads(buffers[fd].split(b"\n", 1)[0])
                    os.close(fd)
                    del pending[fd]
                continue
            code = child.exitcode = procs.exit_code(child.pid)
            log.error(f"Rank {child.rank} scheduler died during initialization (exit code: {code})")
            return None
    return [ready[r] for r in sorted(ready)]


def _startup_plan(parsed: fake_args.Parsed, resolved: rules.Resolved) -> startup.StartupPlan:
    ns = parsed.ns
    return startup.StartupPlan(
        args=resolved.args,
        architecture=resolved.architecture,
        version=parsed.version,
        speed=ns.fake_startup_speed or ns.fake_speed,
        weights_gb=ns.fake_weights_gb,
        gpu_mem_gb=ns.fake_gpu_mem_gb,
        fail_at=ns.fake_fail_at if ns.fake_fail_at in ("load", "capture") else None,
        hang_at=ns.fake_hang_at,
        check_paths=ns.fake_check_paths,
        deferred=resolved.deferred,
        ledger_dir=ledger_dir(ns.fake_ledger),
        context_len=ns.context_length or rules.DEFAULT_CONTEXT_LENGTH,
        adaptive=resolved.adaptive_config if resolved.deferred is None else None,
    )


def _node_ranks(tp_size: int, nnodes: int, node_rank: int) -> range:
    """The TP ranks this node runs: a multi-node server splits them evenly, node by node."""
    per_node = max(1, tp_size // max(1, nnodes))
    return range(node_rank * per_node, (node_rank + 1) * per_node)


def _launch_children(
    plan: startup.StartupPlan, life: procs.Lifecycle, ranks: range, detokenizer: bool = True
) -> list[procs.Child]:
    """Fork one scheduler per TP rank of this node (each walks the startup) and the detokenizer."""
    # the ranks meet around rank 0's bars (a node without rank 0 draws none)
    plan.sync = startup.RankSync(ranks) if len(ranks) > 1 and ranks[0] == 0 else None

    def hold() -> None:
        """A rank's life after startup (or in a hang): hold on; drop its ledger entry when it exits."""

        def forget() -> None:
            if plan.ledger_dir is not None:
                ledger_remove(plan.ledger_dir, os.getpid())

        procs.idle(life, on_exit=forget)

    def title(rank: int) -> str:  # SGLang's setproctitle: "sglang::scheduler" + the log prefix, "_" for " "
        return "sglang::scheduler" + rank_prefix(rank, plan.tp_size, plan.real_wording).replace(" ", "_")

    children = [
        procs.fork_child(
            "scheduler",
            rank,
            title(rank),
            life,
            functools.partial(startup.run_rank, plan, rank, life.parent_pid, hang=hold),
            with_pipe=True,
        )
        for rank in ranks
    ]
    if detokenizer:
        children.append(
            procs.fork_child(
                "detokenizer", 0, "sglang::detokenizer", life, lambda fd: procs.idle(life), with_pipe=False
            )
        )
    return children


def serve(
    parsed: fake_args.Parsed,
    resolved: rules.Resolved,
    plan: startup.StartupPlan,
    host: str,
    ready: dict[str, Any],
    tree: procs.Tree,
    tokenizer_e2e: float,
) -> int:
    """Run the HTTP server and the scheduler in one event loop until SIGTERM (or a crash)."""
    from sweep.fake import engine, server  # aiohttp only once serving

    ns = parsed.ns
    spec = speculative_config(resolved, ns)
    max_running = int(ready["max_running_requests"])
    eng = engine.Engine(
        engine.EngineConfig(
            spec=spec,
            nccl_env=nccl_env(),
            speed=ns.fake_speed,
            max_running=max_running,
            max_prefill_tokens=int(ns.max_prefill_tokens),
            max_total_tokens=int(ready["max_total_num_tokens"]),
            cuda_graph_max_bs=max(plan.graph_bs(max_running)) if plan.graphs else None,
            # SGLang's adaptive routing pads to the speculative server's decode graphs (its own list)
            cuda_graph_bs=tuple(
                speculation.decode_graph_bs(
                    max(plan.graph_bs(max_running)), speculative=True, given=resolved.args.get("cuda_graph_bs")
                )
            )
            if plan.graphs
            else None,
            decode_log_interval=int(ns.decode_log_interval),
            stream_interval=max(1, int(ns.stream_interval)),
            real_wording=plan.real_wording,
            adaptive=plan.adaptive if spec is not None else None,
            adaptive_start=int(resolved.args["speculative_num_steps"]) if plan.adaptive is not None else None,
        ),
        Log(rank_prefix(0, plan.tp_size, plan.real_wording)),
    )
    cfg = server.FakeServerConfig(
        host=host,
        port=int(ns.port),
        served_model_name=resolved.args["served_model_name"],
        model_path=ns.model_path,
        architecture=resolved.architecture,
        version=parsed.version,
        server_args=resolved.args,
        context_len=plan.context_len,
        spec=spec,
        enable_metrics=bool(ns.enable_metrics),
        incremental=bool(ns.incremental_streaming_output),
        stream_output=bool(ns.stream_output),
        api_key=ns.api_key,
        admin_api_key=ns.admin_api_key,
        warmup_s=plan.durations.warmup / plan.speed,
        fail_at_serve=ns.fake_fail_at == "serve",
        crash_after_requests=ns.fake_crash_after_requests,
        startup_speed=plan.speed,
        speed=ns.fake_speed,
        rank_prefix=rank_prefix(0, plan.tp_size, plan.real_wording),
        startup_time={**ready.get("timings", {}), "tokenizer_e2e": tokenizer_e2e},
        memory_usage=ready.get("memory_usage", {}),
        ledger_dir=plan.ledger_dir,
        gpus=tuple(startup.gpu_index(r, resolved.args) for r in _node_ranks(int(ns.tp_size), int(ns.nnodes or 1), 0)),
    )
    return asyncio.run(server.serve(cfg, eng, tree))


def follow(children: list[procs.Child], life: procs.Lifecycle, log: Log, node_rank: int) -> int:
    """A node of rank > 0: its schedulers are up; wait for SIGTERM (or a rank's failure, SIGQUIT)."""
    log.info(f"Node {node_rank} is ready; node 0 serves the HTTP API.")

    def on_term(signum: int, frame: FrameType | None) -> None:
        procs.kill_children(children, life)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    while True:
        signal.pause()


def main(argv: Optional[Sequence[str]] = None) -> int:
    launched = time.monotonic()
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--fake-print-version" in argv:  # how pre-flight asks which SGLang this fake imitates
        print(fake_args.pick_version(argv))
        return 0
    parsed = fake_args.parse(argv)
    ns = parsed.ns
    log = Log()
    real = startup.real_wording(parsed.version)
    for flag in parsed.unknown:
        log.warning(f"Unrecognized argument {flag}: not used by this fake SGLang server, ignored.")
    host = ns.host
    if not _is_loopback(host):
        log.warning(f"--host {host} is not a loopback address; this fake server binds {_LOOPBACK} only.")
        host = _LOOPBACK

    try:
        # 0.5.10 logged these before logging was set up (bare); the real build timestamps them
        resolved = rules.resolve(ns, parsed.version, warn=log.warning if real else Log.bare)
    except rules.ArgsRejected as exc:
        Log.bare(tracebacks.server_args_error(exc.exception, exc.source))
        return 1
    resolved.args["host"] = host
    log.info("server_args=" + rules.server_args_repr(resolved.args))

    plan = _startup_plan(parsed, resolved)
    life = procs.Lifecycle(os.getpid(), ns.fake_zombie, ns.fake_zombie_lifetime)
    tree = procs.Tree([], life)

    def on_sigquit(signum: int, frame: FrameType | None) -> None:  # SGLang's launch-phase handler
        log.error("Received sigquit from a child process. It usually means the child failed.")
        tree.kill_process_tree(log.info)

    signal.signal(signal.SIGQUIT, on_sigquit)  # before forking: a rank may fail at once
    node_rank = int(ns.node_rank or 0)
    tree.children.extend(
        _launch_children(
            plan, life, _node_ranks(int(ns.tp_size), int(ns.nnodes or 1), node_rank), detokenizer=node_rank == 0
        )
    )
    tree.tracker_pid = procs.start_resource_tracker()  # after the fork: no rank holds its pipe
    ready = wait_ready(tree.children, log)
    if ready is None:
        tree.kill()
        return 1
    if node_rank > 0:  # SGLang's other nodes run their ranks and no HTTP server, until stopped
        return follow(tree.children, life, log, node_rank)
    tokenizer_e2e = time.monotonic() - launched
    if real and "timings" in ready[0]:
        log.info(startup.engine_timings_line(ready[0]["timings"], tokenizer_e2e))
    code = serve(parsed, resolved, plan, host, ready[0], tree, tokenizer_e2e)
    tree.kill()
    return code
