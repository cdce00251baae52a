"""Pre-flight of a CPU host (a server with ``device: cpu``): SGLang's CPU backend on a Xeon, or any
x86/Arm host with the right kernels. What matters there is not GPUs but free memory, the CPU's
instruction-set flags the engine's kernels were built for, and that those kernels load at all.

Checked in seconds, before a launch that would otherwise die minutes later, or at once with a bare
``Illegal instruction`` that the log does not explain.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
from pathlib import Path

import psutil

from sweep.argv import argv_value
from sweep.errors import PointFailure

# What SGLang's intel_amx attention backend and its prebuilt CPU kernels (sgl_kernel, built with
# -march=x86-64-v4 + AMX) need; torch_native needs none of them.
AMX_BACKEND_FLAGS = ("avx512f", "avx512_bf16", "amx_tile", "amx_bf16")


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The instruction-set flags of this host's CPU (``flags`` line of /proc/cpuinfo; ``Features`` on Arm)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def speculative_algorithm(argv: list[str]) -> str | None:
    """The ``--speculative-algorithm`` of an argv (either spelling), or None for a baseline."""
    return argv_value(argv, "--speculative-algorithm")


def check_speculation(algorithm: str | None, report_checks: list[str], have: set[str] | None = None) -> None:
    """Speculative decoding on a CPU without AMX: SGLang replaces the intel_amx attention backend with
    torch_native there ("The current platform does not support Intel AMX, will fallback to
    torch_native backend"), and torch_native's extend path dies at the first prefill of a speculative
    server (``AttributeError: 'NoneType' object has no attribute 'shape'``, SGLang 7f8f030 on an AMD
    EPYC); intel_amx's kernels need AMX themselves (``BFloat16 Brgemm VNNI format is only supported
    ... when amx is supported``). Said in seconds here instead of after the server's startup."""
    if not algorithm:
        return
    have = cpu_flags() if have is None else have
    if have and "amx_tile" not in have:
        raise PointFailure("preflight", f"speculative decoding ({algorithm}) on a CPU without "
                                        "AMX: SGLang falls back to the torch_native attention backend there, which "
                                        "crashes on a speculative server's first prefill",
                           fix="run speculative points on a Xeon with AMX (Sapphire Rapids or newer); baselines "
                               "run here with attention-backend: torch_native")
    report_checks.append("ok: speculative decoding on a CPU with AMX")


def required_flags(flags: dict, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The CPU flags a server's flags need: the AMX set unless another attention backend is named."""
    backend = str(flags.get("attention-backend") or "intel_amx")
    need = list(AMX_BACKEND_FLAGS) if backend == "intel_amx" else []
    return need + [f for f in extra if f not in need]


def check_cpu_flags(need: list[str], report_checks: list[str], have: set[str] | None = None) -> None:
    have = cpu_flags() if have is None else have
    if not have:
        report_checks.append("skipped: CPU flags (no /proc/cpuinfo)")
        return
    missing = [f for f in need if f not in have]
    if missing:
        raise PointFailure("preflight", f"this host's CPU lacks {', '.join(missing)}, which SGLang's "
                                        "intel_amx backend and its CPU kernels need",
                           fix="run on a Xeon with AMX (Sapphire Rapids or newer), or set attention-backend: "
                               "torch_native with kernels built for this CPU (README: real SGLang on CPU)")
    report_checks.append(f"ok: CPU flags {', '.join(need) or '(none needed)'}")


def check_memory(min_free_gib: float, report_checks: list[str]) -> float:
    free = psutil.virtual_memory().available / 2**30
    if free < min_free_gib:
        raise PointFailure("preflight", f"{free:.1f} GiB of memory free on this host, the server needs "
                                        f"{min_free_gib:.1f} GiB (server.cpu.min_free_mem_gib)",
                           fix="stop what holds the memory, pass a smaller --max-total-tokens, or lower "
                               "server.cpu.min_free_mem_gib")
    report_checks.append(f"ok: {free:.1f} GiB memory free (need {min_free_gib:.1f})")
    return free


@functools.lru_cache(maxsize=16)
def _import_kernels(python: str, env: tuple[tuple[str, str], ...], timeout_s: float) -> tuple[int, str]:
    """(exit status, last stderr line) of importing the CPU kernels; cached for the worker's life,
    since a reused Ray worker runs many points with the same interpreter."""
    code = "import sgl_kernel, torch; print(torch.__version__)"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout_s,
                             env={**os.environ, **dict(env)}, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, f"cannot run {python}: {e}"
    return out.returncode, (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]


def check_kernels(python: str, env: dict[str, str], report_checks: list[str], timeout_s: float = 120.0) -> None:
    """Import SGLang's CPU kernels in the server's interpreter and environment: kernels built for
    another CPU die here with SIGILL in seconds, instead of at the server's first import."""
    code, last = _import_kernels(python, tuple(sorted(env.items())), timeout_s)
    if code in (-signal.SIGILL, 128 + signal.SIGILL):
        raise PointFailure("preflight", "SGLang's CPU kernels (sgl_kernel) die with SIGILL (illegal "
                                        "instruction) on this host's CPU: they were built for another one",
                           fix="rebuild them on this host (REBUILD_KERNELS=1 with the installer), or run on the CPU "
                               "they were built for (a Xeon with AMX for the prebuilt wheel)")
    if code != 0:
        raise PointFailure("preflight", f"SGLang's CPU kernels do not load with {python}: {last}",
                           fix="install the CPU kernels (sgl_kernel) in the interpreter server.launcher names")
    report_checks.append("ok: CPU kernels load (sgl_kernel)")
