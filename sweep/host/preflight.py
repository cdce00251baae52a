"""Pre-flight on the host, in seconds, before ten minutes of weight loading: SGLang's version, every
flag of the server known to that version, model and drafter paths, GPUs and their free memory, the port.

The same checks run against the fake server in dry runs (it answers ``--help`` and reports a
version); paths that exist only on real hosts are then reported as skipped, not failed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sweep.core import Check, PointFailure, ServerFlags, atomic
from sweep.host import ports, reaper
from sweep.host.gpu import Gpu, GpuProbe
from sweep.sglang import rules, serverargs

HELP_TIMEOUT_S = 120.0  # the real launcher imports torch before printing --help


@dataclass
class PreflightReport:
    sglang_version: str = "unknown"
    gpu_name: str = ""
    gpu_count: int = 0
    checks: list[Check] = field(default_factory=list)  # ok, skipped and warning checks (sweep.core.checks)


_cache_dir = reaper.cache_dir


def _version_probe(launcher: list[str], launcher_args: Sequence[str] = ()) -> list[str] | None:
    """How to ask the launcher's package for its version: ``python -m sglang...`` -> ``python -c ...``;
    the fake answers on its own command line (``--fake-print-version``, honouring the
    ``--fake-version`` of its own options)."""
    if len(launcher) >= 3 and launcher[1] == "-m":
        pkg = launcher[2].split(".")[0]
        if pkg == "sglang":
            return [launcher[0], "-c", "import sglang; print(sglang.__version__)"]
        if launcher[2] == "sweep.fake":
            own = list(launcher_args)
            pinned = own[own.index("--fake-version") :][:2] if "--fake-version" in own else []
            return [*launcher, *pinned, "--fake-print-version"]
    return None


def sglang_version(launcher: list[str], timeout: float = 60.0, launcher_args: Sequence[str] = ()) -> str:
    cmd = _version_probe(launcher, launcher_args)
    if cmd is None:
        return "unknown"
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PointFailure(
            "preflight",
            f"cannot run {cmd[0]!r} to read the SGLang version: {e}",
            fix="install sglang on the host (pip install 'sweep[gpu]') or fix server.launcher",
        ) from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise PointFailure(
            "preflight",
            f"SGLang is not importable with {cmd[0]}: {last}",
            fix="install sglang in the interpreter server.launcher names",
        )
    return out.stdout.strip().splitlines()[-1]


def _accepted_flags(launcher: list[str], version: str, host: str, launcher_args: Sequence[str] = ()) -> set[str]:
    """The flags the launcher's ``--help`` lists, cached per host, launcher (with its own options) and version."""
    key = hashlib.sha256(
        json.dumps([host, launcher, version, *([list(launcher_args)] if launcher_args else [])]).encode()
    ).hexdigest()[:16]
    cache = _cache_dir() / "help" / f"{key}.json"
    if cache.is_file():
        try:
            return set(json.loads(cache.read_text()))
        except (OSError, ValueError):
            pass
    try:
        out = subprocess.run(
            [*launcher, *launcher_args, "--help"], capture_output=True, text=True, timeout=HELP_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PointFailure(
            "preflight", f"{' '.join(launcher)} --help failed: {e}", fix="check server.launcher on this host"
        ) from None
    flags = set(re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9_-]*)", out.stdout + out.stderr))
    if out.returncode != 0 or not flags:
        raise PointFailure(
            "preflight",
            f"{' '.join(launcher)} --help listed no flags (exit {out.returncode})",
            fix="check that server.launcher starts an SGLang server",
        )
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(cache, json.dumps(sorted(flags)))
    except OSError:
        pass  # a read-only home only costs the next point another --help
    return flags


def check_flags(
    names: Sequence[str], launcher: list[str], version: str, host: str, launcher_args: Sequence[str] = ()
) -> None:
    """Every flag name the server gets (no dashes) is one its launcher's ``--help`` lists (asked with the
    launcher's own options: the fake's ``--fake-version`` names the SGLang whose flags it takes)."""
    known = _accepted_flags(launcher, version, host, launcher_args)
    unknown = [f for f in names if f not in known and f.replace("_", "-") not in known]
    if unknown:
        raise PointFailure(
            "preflight",
            f"SGLang {version} on {host} does not accept {', '.join('--' + f for f in unknown)}",
            fix="remove or rename the flag (SGLang renames flags between versions, "
            "e.g. --cuda-graph-max-bs became --cuda-graph-max-bs-decode in 0.5.23)",
        )


def check_paths(paths: dict[str, str], real: bool, report: PreflightReport) -> None:
    for what, path in paths.items():
        if not path:
            continue
        if not real:
            report.checks.append(Check.skipped(f"{what} {path} (simulated host)"))
        elif os.path.exists(path):
            report.checks.append(Check.ok(f"{what} {path}"))
        elif not path.startswith(("/", ".", "~")) and path.count("/") == 1:
            report.checks.append(Check.skipped(f"{what} {path} looks like a Hugging Face id"))
        else:
            raise PointFailure(
                "preflight",
                f"{what} {path} does not exist on this host",
                fix=f"copy the checkpoint to {path} on every host, or fix the path in the experiment",
            )


def check_gpus(probe: GpuProbe, tp_size: int, free_mib: int, report: PreflightReport) -> list[Gpu]:
    gpus = probe.gpus()
    if len(gpus) < tp_size:
        why = getattr(probe, "reason", "")
        raise PointFailure(
            "preflight",
            f"{len(gpus)} GPUs visible, tp size {tp_size} needs {tp_size}" + (f" ({why})" if why else ""),
            fix="run on a host with enough GPUs, or lower server.tp_size",
        )
    busy = [g for g in gpus[:tp_size] if g.mem_used_mib > free_mib]
    if busy:
        holders: dict[int, list[str]] = {}
        for p in probe.processes():
            holders.setdefault(p.gpu_index, []).append(str(p.pid))
        desc = "; ".join(
            f"GPU {g.index}: {g.mem_used_mib} MiB used by pid {','.join(holders.get(g.index, ['?']))}" for g in busy
        )
        raise PointFailure(
            "preflight",
            f"GPUs are not free: {desc}",
            fix="stop those processes, or set server.reap.kill_foreign_gpu_processes: true",
        )
    report.gpu_name, report.gpu_count = gpus[0].name, len(gpus)
    report.checks.append(Check.ok(f"{len(gpus)} x {gpus[0].name}, {tp_size} free"))
    return gpus


def check_port(port: int, host: str, report: PreflightReport, wait_s: float = 0.0) -> None:
    """The server's port free on ``host``, waited for up to ``wait_s`` (a server that is stopping lets
    go of it); else the point fails naming who holds it (``sweep.host.ports.holders``): its pid and
    name, and whether it is another sweep's server (its marker), with the fix for each."""
    deadline = time.monotonic() + wait_s
    while not reaper.port_free(port, host):
        if time.monotonic() >= deadline:
            held = ports.holders(port)
            waited = f" (waited {wait_s:.0f} s: server.reap.wait_s)" if wait_s >= 1 else ""
            who = "; ".join(h.describe() for h in held) or "a process psutil cannot name (run `ss -ltnp` as root)"
            if any(h.sweep for h in held):
                fix = (
                    "another sweep runs on this host: wait until it ends, or give this sweep another "
                    f"server.port (e.g. server.port={port + 100})"
                )
            elif any(h.pid is not None for h in held):
                pids = " ".join(str(h.pid) for h in held if h.pid is not None)
                fix = f"stop that process (kill {pids}), or set server.port to a free port"
            else:
                fix = (
                    f"find the holder with `ss -ltnp 'sport = :{port}'` as root and stop it, or set "
                    "server.port to a free port"
                )
            raise PointFailure("preflight", f"port {port} on {host} is in use{waited}: held by {who}", fix=fix)
        time.sleep(0.2)
    report.checks.append(Check.ok(f"port {port} free"))


def check_dist_init(addr: str | None, node_rank: int, host: str, report: PreflightReport) -> None:
    """Node rank 0 of a server that spans hosts: its ``--dist-init-addr IP:PORT`` must be an address
    of this host (the other nodes connect to it there) and its port free on it. A wrong IP would
    otherwise leave the other nodes waiting for a rendezvous that never comes."""

    if not addr or node_rank != 0:
        return
    ip, _, port = addr.rpartition(":")
    if not ip or not port.isdigit():
        raise PointFailure(
            "preflight",
            f"--dist-init-addr {addr} is not IP:PORT",
            fix="the orchestrator sets it from the leader's IP; check ray_runner.dist_port_offset",
        )
    e = reaper.bind_error(int(port), ip.strip("[]"))
    if e is not None and e.errno == errno.EADDRNOTAVAIL:
        raise PointFailure(
            "preflight",
            f"--dist-init-addr {addr}: {ip} is not an address of {host}, "
            "so the other nodes could not reach node rank 0 there",
            fix="check the IP Ray reports for this host (ray start --node-ip-address)",
        )
    if e is not None:
        raise PointFailure(
            "preflight",
            f"--dist-init-addr port {port} is in use on {host} ({ip}): {e.strerror or e}",
            fix="stop the process holding it, or change server.port (the port is server.port + 1000)",
        )
    report.checks.append(Check.ok(f"dist-init port {port} free on {ip}"))


def check_rules(
    flags: ServerFlags,
    bench,
    report: PreflightReport,
    architecture: str | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """SGLang's speculative rules again, with what only the host knows: its SGLang version, its GPU and
    the target's (and drafter's) config.json as this host has them. An error here is one SGLang
    would hit after minutes of loading; warnings are kept with the checks."""

    typed = ServerFlags(flags)
    configs = {}
    for path in (typed.model_path, typed.draft_model_path):
        cfg = serverargs.read_config(path) if path else None
        if path and cfg is not None:
            configs[path] = cfg
    arch = serverargs.config_architecture(configs.get(str(typed.model_path))) or architecture
    # flag names were checked against this launcher's own --help (check_flags): that is the arbiter
    # here, for SGLang builds the rules do not list and for the fake's --fake-* flags alike
    names = {"unknown-flag", "ambiguous-flag", "flag-abbreviation"}
    findings = [
        f
        for f in rules.host_check(
            flags,
            bench,
            version=report.sglang_version,
            gpu=report.gpu_name or None,
            architecture=arch,
            configs=configs,
            env=env,
        )
        if f.rule not in names
    ]
    errors = [f for f in findings if f.level == rules.ERROR]
    if errors:
        raise PointFailure(
            "preflight",
            "; ".join(f"{f.rule}: {f.message}" for f in errors),
            fix="; ".join(dict.fromkeys(f.fix for f in errors if f.fix)),
        )
    report.checks += findings or [
        Check.ok(f"SGLang {report.sglang_version}'s rules on {report.gpu_name or 'this host'}")
    ]
