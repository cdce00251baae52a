"""The real tier: tests that start real SGLang (its CPU backend) on this machine.

They need the CPU install of ``cluster/sglang-cpu-x86/install.sh`` (``.ci/run`` calls it), which picks
the path for this CPU (amx, avx512-bf16 or avx2) and serves speculative decoding on each: found
through ``SGLANG_CPU_PYTHON`` (``source $PREFIX/env.sh``), else through the installer's env.sh at
``$SWEEP_SGLANG_CPU`` or ``~/.cache/sweep-sglang-cpu``. Where there is none, or its kernels do not
load on this CPU, every test here is skipped with the reason. The AVX2 path emulated on a newer CPU
(``SWEEP_CPU_PATH=avx2``) is looked for at ``$SWEEP_SGLANG_CPU_AVX2`` or
``~/.cache/sweep-sglang-cpu-avx2`` (fixture ``real_avx2_sglang``). Run them alone with
``python -m pytest -m real_sglang``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sweep.sglang.args import flag_args

REPO = Path(__file__).resolve().parents[2]
TINYMODELS = REPO / "cluster" / "sglang-cpu-x86" / "tinymodels.py"


@dataclass(frozen=True)
class RealSGLang:
    python: str  # the install's interpreter
    env: dict[str, str]  # what a server process needs (SGLANG_USE_CPU_ENGINE, LD_PRELOAD, offline hub)
    attention_backend: str  # intel_amx on a Xeon with AMX; torch_native with kernels built for another CPU
    models: Path  # the tiny target and drafters (cluster/sglang-cpu-x86/tinymodels.py)
    amx: bool  # SGLang sees AMX (real, or the installer's claim on AVX512-BF16): it runs intel_amx
    path: str | None  # the installer's path (amx | avx512-bf16 | avx2); None: an install without it
    prefix: Path | None = None  # the install's folder, where known

    @property
    def speculates(self) -> bool:
        """intel_amx serves speculation; torch_native only as the installer patches it (every path)."""
        return self.amx or self.path is not None

    @property
    def launcher(self) -> list[str]:
        return [self.python, "-m", "sglang.launch_server"]

    def base_flag_map(self, port: int) -> dict[str, Any]:
        """The flags of every real test server, as the sweep keeps a server's flags ({name: value})."""
        return {
            "model-path": str(self.models / "target"),
            "device": "cpu",
            "host": "127.0.0.1",
            "port": port,
            "attention-backend": self.attention_backend,
            "disable-overlap-schedule": True,
            "max-total-tokens": 16384,
            "max-running-requests": 16,
            "enable-metrics": True,
        }

    def base_flags(self, port: int) -> list[str]:
        """The same as a command line's flags."""
        return flag_args(self.base_flag_map(port))


def _read_env_sh(prefix: Path) -> dict[str, str]:
    """The variables an install's env.sh exports, read without running a shell ({} if not installed)."""
    f = prefix / "env.sh"
    if not (f.is_file() and (prefix / ".installed").is_file()):
        return {}
    out = {}
    for line in f.read_text().splitlines():
        m = re.match(r"\s*export\s+(.*)$", line)
        if m:
            for part in shlex.split(m.group(1)):
                k, _, v = part.partition("=")
                out[k] = v
    return out


def _env_sh() -> tuple[dict[str, str], Path | None]:
    for prefix in filter(None, [os.environ.get("SWEEP_SGLANG_CPU"), str(Path.home() / ".cache" / "sweep-sglang-cpu")]):
        found = _read_env_sh(Path(prefix))
        if found:
            return found, Path(prefix)
    return {}, None


KEYS = ("SGLANG_CPU_PYTHON", "SGLANG_CPU_LD_PRELOAD", "SGLANG_CPU_PATH", "SGLANG_CPU_ATTENTION_BACKEND")
TINY_MODELS = Path(os.environ.get("SWEEP_TINY_MODELS", Path.home() / ".cache" / "sweep" / "tiny-models"))
TINY_SEED = REPO.parent / "shared" / "sglang-cpu" / "tiny-models"


def find_real_sglang(found: dict[str, str] | None = None, prefix: Path | None = None) -> tuple[RealSGLang | None, str]:
    """The CPU SGLang install (``found``: its env.sh's variables; else this process's or the default
    install's), or None and why not."""
    if found is None:
        found = {k: os.environ[k] for k in KEYS if k in os.environ}
        if "SGLANG_CPU_PYTHON" not in found:
            found, prefix = _env_sh()
    python = found.get("SGLANG_CPU_PYTHON")
    if not python or not Path(python).is_file():
        return None, (
            "no CPU SGLang installed: run bash cluster/sglang-cpu-x86/install.sh and "
            "source the env.sh it prints (see docs/real-sglang-cpu.md)"
        )
    env = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if found.get("SGLANG_CPU_LD_PRELOAD"):
        env["LD_PRELOAD"] = found["SGLANG_CPU_LD_PRELOAD"]
    probe = subprocess.run(
        [
            python,
            "-c",
            "import sgl_kernel, sglang; from sglang.srt.utils import cpu_has_amx_support;print(cpu_has_amx_support())",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd="/",
        timeout=300,
    )
    if probe.returncode != 0:
        why = (
            "SIGILL: its kernels were built for another CPU"
            if probe.returncode in (-4, 132)
            else (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        )
        return None, f"the CPU SGLang at {python} does not load here ({why})"
    amx = probe.stdout.strip().splitlines()[-1] == "True"
    # the models a fresh machine would train for minutes, copied from ../shared's seed where their stamps match
    made = subprocess.run(
        [python, str(TINYMODELS), "--out", str(TINY_MODELS), "--seed", str(TINY_SEED)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if made.returncode != 0:
        return None, f"could not create the tiny models: {made.stderr.strip().splitlines()[-1:]}"
    backend = found.get("SGLANG_CPU_ATTENTION_BACKEND") or ("intel_amx" if amx else "torch_native")
    return RealSGLang(python, env, backend, TINY_MODELS, amx, found.get("SGLANG_CPU_PATH"), prefix), ""


_FOUND: list = []


@pytest.fixture(scope="session")
def real_sglang() -> RealSGLang:
    if not _FOUND:
        _FOUND.append(find_real_sglang())
    sglang, why = _FOUND[0]
    if sglang is None:
        pytest.skip(why)
    return sglang


@pytest.fixture(scope="session")
def real_spec_sglang(real_sglang) -> RealSGLang:
    """Real SGLang that serves speculative decoding: an install of cluster/sglang-cpu-x86/install.sh
    (any path), or SGLang as shipped on a CPU with AMX."""
    if not real_sglang.speculates:
        pytest.skip(
            "this CPU SGLang was not installed by cluster/sglang-cpu-x86/install.sh and sees no AMX: "
            "torch_native as shipped cannot serve speculative decoding"
        )
    return real_sglang


_AVX2: list = []


@pytest.fixture(scope="session")
def real_avx2_sglang(real_sglang) -> RealSGLang:
    """The AVX2 path (kernels without AVX-512, torch at AVX2, torch_native taught speculation), on this
    CPU itself where it is an AVX2 one, else emulated by the install at $SWEEP_SGLANG_CPU_AVX2 or
    ~/.cache/sweep-sglang-cpu-avx2 (SWEEP_CPU_PATH=avx2 bash cluster/sglang-cpu-x86/install.sh)."""
    if real_sglang.path == "avx2":
        return real_sglang
    if not _AVX2:
        prefix = Path(os.environ.get("SWEEP_SGLANG_CPU_AVX2", Path.home() / ".cache" / "sweep-sglang-cpu-avx2"))
        found = _read_env_sh(prefix)
        _AVX2.append(
            find_real_sglang(found, prefix)
            if found.get("SGLANG_CPU_PATH") == "avx2"
            else (
                None,
                f"no emulated AVX2 install at {prefix}: SWEEP_CPU_PATH=avx2 PREFIX={prefix} "
                "bash cluster/sglang-cpu-x86/install.sh",
            )
        )
    sglang, why = _AVX2[0]
    if sglang is None:
        pytest.skip(why)
    return sglang


@pytest.fixture(scope="session")
def emulated_avx2_sglang(real_sglang, request) -> RealSGLang:
    """The AVX2 path as a second install beside this CPU's own (``real_avx2_sglang``), for the tests
    that repeat a check of this CPU's path on it. On an AVX2-only CPU both are the same install, so
    such a test would start the same servers for the same check a second time: it is skipped there,
    saying which test checked it (on a Zen 1 or Zen 3 that is minutes of the real tier)."""
    if real_sglang.path == "avx2":
        pytest.skip("this CPU's own path is avx2: the same check ran on this very install, as this CPU's path")
    return request.getfixturevalue("real_avx2_sglang")


@pytest.fixture(scope="module")
def shared_servers(tmp_path_factory):
    """Real servers shared by the tests of a module that only read from them (tests/real/servers.py
    SharedServers), stopped when the module's tests are done."""
    from tests.real.servers import SharedServers

    pool = SharedServers(tmp_path_factory.mktemp("shared-servers"))
    yield pool
    pool.close()


@pytest.fixture(autouse=True)
def _pause_shared_servers(request):
    """After a test that read from the shared servers, they wait paused (no CPU) for the next one."""
    yield
    if "shared_servers" in request.fixturenames:
        request.getfixturevalue("shared_servers").pause()
