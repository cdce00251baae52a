"""Pre-flight of a CPU host (a server with ``device: cpu``): SGLang's CPU backend on a Xeon, or any
x86/Arm host with the right kernels. What matters there is not GPUs but free memory, the CPU's
instruction-set flags the engine's kernels were built for, and that those kernels load at all.

Checked in seconds, before a launch that would otherwise die minutes later, or at once with a bare
``Illegal instruction`` that the log does not explain.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psutil

from sweep.core import Check, PointFailure, ServerFlags

# What SGLang's intel_amx attention backend and its prebuilt CPU kernels (sgl_kernel, built with
# -march=x86-64-v4) need: AVX-512 with BF16. AMX itself is not needed: on a CPU without it the
# installer (cluster/sglang-cpu-x86/install.sh) claims AMX for SGLang, and oneDNN's bf16 brgemm runs
# on AVX512-BF16 (measured on an AMD EPYC Zen 4). torch_native needs none of them.
AMX_BACKEND_FLAGS = ("avx512f", "avx512_bf16")
_INSTALLER = "cluster/sglang-cpu-x86/install.sh"


@dataclass(frozen=True)
class CpuEngine:
    """SGLang's CPU engine as one interpreter sees it: what decides which attention backend serves."""

    torch: str
    amx: bool  # SGLang's cpu_has_amx_support() there: real AMX, or the installer's claim (avx512-bf16)
    path: str | None  # the path the installer took (amx | avx512-bf16 | avx2); None: not installed by it

    @property
    def backend(self) -> str:
        """The attention backend SGLang runs for ``--attention-backend intel_amx`` (or none given on
        x86): itself where it sees AMX, else torch_native (its own fallback, with a warning)."""
        return "intel_amx" if self.amx else "torch_native"

    @property
    def torch_native_speculates(self) -> bool:
        """The installer teaches torch_native the speculative passes on every path it takes."""
        return self.path is not None


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


DEFAULT_ATTENTION_BACKEND = "intel_amx"  # SGLang's --attention-backend on x86 CPUs when none is given


def check_speculation(
    algorithm: str | None,
    backend: str,
    engine: CpuEngine | None,
    report_checks: list[Check],
    have: set[str] | None = None,
) -> None:
    """Speculative decoding on a CPU host, decided as the server's own interpreter decides it.

    SGLang's CPU speculation runs on intel_amx, which it uses only where it sees AMX (real, or claimed
    by the installer on an AVX512-BF16 CPU); elsewhere it replaces intel_amx with torch_native, which
    as shipped refuses speculation (EAGLE at startup: ``EAGLE is not supported in decode attention
    backend torch_native``; NGRAM and STANDALONE at the first prefill: ``AttributeError: 'NoneType'
    object has no attribute 'shape'``). The installer teaches torch_native the speculative passes, so
    an install of its serves speculation on every path. Said in seconds here instead of after startup.
    ``engine`` None (``server.cpu.check_kernels: false``): judged from the CPU's flags alone."""
    if not algorithm:
        return
    fix = (
        f"install SGLang for this CPU with {_INSTALLER}, which picks the path for it (AMX, AVX512-BF16 "
        "or AVX2) and serves speculative decoding on each, and point server.launcher at its interpreter"
    )
    if engine is None:
        have = cpu_flags() if have is None else have
        if have and not {"amx_tile", "avx512_bf16"} & have:
            report_checks.append(
                Check.warning(
                    f"speculative decoding ({algorithm}) on a CPU without AMX or AVX512-BF16 "
                    "serves only with torch_native as the installer patches it (not checked: "
                    "server.cpu.check_kernels is false)"
                )
            )
        return
    served_by = engine.backend if backend == "intel_amx" else backend
    if served_by == "intel_amx":
        how = "AMX" if engine.path in (None, "amx") else f"the installer's AMX claim ({engine.path} path)"
        report_checks.append(Check.ok(f"speculative decoding ({algorithm}) with intel_amx, on {how}"))
        return
    if served_by == "torch_native" and engine.torch_native_speculates:
        fell_back = " (SGLang sees no AMX here and falls back to it)" if backend == "intel_amx" else ""
        report_checks.append(
            Check.ok(
                f"speculative decoding ({algorithm}) with torch_native{fell_back}, taught the "
                f"speculative passes by the installer ({engine.path} path)"
            )
        )
        return
    if served_by == "torch_native":
        raise PointFailure(
            "preflight",
            f"speculative decoding ({algorithm}) with SGLang's torch_native attention "
            "backend as shipped"
            + (" (SGLang sees no AMX here and falls back to it)" if backend == "intel_amx" else "")
            + ": it refuses speculation (EAGLE at startup, the others at the first prefill)",
            fix=fix,
        )
    report_checks.append(
        Check.ok(f"speculative decoding ({algorithm}) with attention backend {served_by} (not checked)")
    )


def check_nodes(nnodes: int, engine: CpuEngine | None, report_checks: list[Check]) -> None:
    """A server over several hosts (``--nnodes`` > 1) on SGLang's CPU engine, as its interpreter sees AMX.

    Where SGLang sees AMX (real, or the installer's claim) it reduces TP over shared memory only: it sets
    ``LOCAL_SIZE`` to the TP size, as if every rank were on this host, and ``sgl_kernel.initialize``
    waits for each rank's /dev/shm segment, which ranks on other hosts never create. The server then
    hangs after ``Init torch distributed begin.`` until the stall timeout (seen in CI on a Zen 4, two
    hosts of their own /dev/shm). Where it sees no AMX it reduces over gloo, across hosts."""
    if nnodes <= 1:
        return
    if engine is None:
        report_checks.append(
            Check.warning(
                f"--nnodes {nnodes} on the CPU engine: not checked whether SGLang sees AMX "
                "there (server.cpu.check_kernels is false); where it does, the server hangs in its "
                "shared-memory all-reduce setup (set env SWEEP_SGLANG_AMX: '0')"
            )
        )
        return
    if engine.amx:
        how = "AMX" if engine.path in (None, "amx") else f"the installer's AMX claim ({engine.path} path)"
        raise PointFailure(
            "preflight",
            f"--nnodes {nnodes} on SGLang's CPU engine with {how}: there it reduces "
            "tensor parallelism over this host's shared memory only (LOCAL_SIZE = TP "
            "size), so it would hang after 'Init torch distributed begin.' waiting for "
            "the other hosts' ranks",
            fix="set env SWEEP_SGLANG_AMX: '0' for these points (an install by "
            f"{_INSTALLER}: SGLang then sees no AMX, serves with torch_native, speculation "
            "included, and reduces over gloo), or keep the server on one host (nnodes 1)",
        )
    report_checks.append(Check.ok(f"--nnodes {nnodes}: SGLang sees no AMX here, so TP reduces over gloo across hosts"))


def required_flags(flags: ServerFlags, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The CPU flags a server's flags need: intel_amx's unless another attention backend is named."""
    backend = str(flags.get("attention-backend") or "intel_amx")
    need = list(AMX_BACKEND_FLAGS) if backend == "intel_amx" else []
    return need + [f for f in extra if f not in need]


def check_cpu_flags(need: list[str], report_checks: list[Check], have: set[str] | None = None) -> None:
    have = cpu_flags() if have is None else have
    if not have:
        report_checks.append(Check.skipped("CPU flags (no /proc/cpuinfo)"))
        return
    missing = [f for f in need if f not in have]
    if missing:
        raise PointFailure(
            "preflight",
            f"this host's CPU lacks {', '.join(missing)}, which SGLang's "
            "intel_amx backend and its prebuilt CPU kernels need",
            fix=f"set attention-backend: torch_native with SGLang installed for this CPU by {_INSTALLER} "
            "(its AVX2 path serves speculative decoding too), or run on a CPU with AVX512-BF16 "
            "or AMX",
        )
    report_checks.append(Check.ok(f"CPU flags {', '.join(need) or '(none needed)'}"))


def check_memory(min_free_gib: float, report_checks: list[Check]) -> float:
    free = psutil.virtual_memory().available / 2**30
    if free < min_free_gib:
        raise PointFailure(
            "preflight",
            f"{free:.1f} GiB of memory free on this host, the server needs "
            f"{min_free_gib:.1f} GiB (server.cpu.min_free_mem_gib)",
            fix="stop what holds the memory, pass a smaller --max-total-tokens, or lower server.cpu.min_free_mem_gib",
        )
    report_checks.append(Check.ok(f"{free:.1f} GiB memory free (need {min_free_gib:.1f})"))
    return free


_PROBE = """
import json, sgl_kernel, torch
from sglang.srt.utils import cpu_has_amx_support
try:
    import sweep_cpu_path
    path = sweep_cpu_path.CPU_PATH
except ImportError:
    path = None
print(json.dumps({"torch": torch.__version__, "amx": bool(cpu_has_amx_support()), "path": path}))
"""


@functools.lru_cache(maxsize=16)
def _probe(python: str, env: tuple[tuple[str, str], ...], timeout_s: float) -> tuple[int, str]:
    """(exit status, last stdout line or last stderr line) of importing the CPU kernels and SGLang
    in the server's interpreter; cached for the worker's life, since a reused Ray worker runs many
    points with the same interpreter."""
    try:
        out = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, **dict(env)},
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, f"cannot run {python}: {e}"
    if out.returncode == 0:
        return 0, (out.stdout.strip().splitlines() or ["{}"])[-1]
    return out.returncode, (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]


def check_kernels(python: str, env: dict[str, str], report_checks: list[Check], timeout_s: float = 120.0) -> CpuEngine:
    """Import SGLang's CPU kernels and SGLang in the server's interpreter and environment: kernels
    built for another CPU die here with SIGILL in seconds, instead of at the server's first import.
    What SGLang sees there (AMX or not, the installer's path) decides its attention backend."""
    code, last = _probe(python, tuple(sorted(env.items())), timeout_s)
    if code in (-signal.SIGILL, 128 + signal.SIGILL):
        raise PointFailure(
            "preflight",
            "SGLang's CPU kernels (sgl_kernel) die with SIGILL (illegal "
            "instruction) on this host's CPU: they were built for another one",
            fix=f"install them for this CPU with {_INSTALLER} (it builds them for AVX2 CPUs), or "
            "REBUILD_KERNELS=1 with the shared installer",
        )
    if code != 0:
        raise PointFailure(
            "preflight",
            f"SGLang's CPU kernels do not load with {python}: {last}",
            fix="install the CPU kernels (sgl_kernel) in the interpreter server.launcher names",
        )
    try:
        seen = json.loads(last)
        engine = CpuEngine(str(seen.get("torch", "")), bool(seen.get("amx")), seen.get("path"))
    except (ValueError, AttributeError):
        engine = CpuEngine("", False, None)
    path = f", path {engine.path}" if engine.path else ""
    report_checks.append(
        Check.ok(f"CPU kernels load (sgl_kernel; SGLang sees AMX: {'yes' if engine.amx else 'no'}{path})")
    )
    return engine
