"""The real tier: tests that start real SGLang (its CPU backend) on this machine.

They need the CPU install of ``../shared/sglang-cpu`` (``install.sh``, or ``.ci/run``, which calls it):
found through ``SGLANG_CPU_PYTHON`` (``source $PREFIX/env.sh``), else through the installer's env.sh
at ``$SWEEP_SGLANG_CPU`` or ``~/.cache/sweep-sglang-cpu``. Where there is none, or its kernels do not
load on this CPU, every test here is skipped with the reason. Run them alone with
``python -m pytest -m real_sglang``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class RealSGLang:
    python: str  # the install's interpreter
    env: dict[str, str]  # what a server process needs (SGLANG_USE_CPU_ENGINE, LD_PRELOAD, offline hub)
    attention_backend: str  # intel_amx on a Xeon with AMX; torch_native with kernels built for another CPU
    models: Path  # the tiny target and drafter (sweep.tinymodels)
    amx: bool  # SGLang serves speculative decoding on CPU only with AMX (torch_native cannot)

    @property
    def launcher(self) -> list[str]:
        return [self.python, "-m", "sglang.launch_server"]

    def base_flags(self, port: int) -> list[str]:
        return ["--model-path", str(self.models / "target"), "--device", "cpu", "--host", "127.0.0.1",
                "--port", str(port), "--attention-backend", self.attention_backend, "--disable-overlap-schedule",
                "--max-total-tokens", "16384", "--max-running-requests", "16", "--enable-metrics"]


def _env_sh() -> dict[str, str]:
    """The variables the installer's env.sh exports, read without running a shell."""
    for prefix in filter(None, [os.environ.get("SWEEP_SGLANG_CPU"), str(Path.home() / ".cache" / "sweep-sglang-cpu")]):
        f = Path(prefix) / "env.sh"
        if f.is_file() and (Path(prefix) / ".installed").is_file():
            out = {}
            for line in f.read_text().splitlines():
                m = re.match(r"\s*export\s+(.*)$", line)
                if m:
                    for part in shlex.split(m.group(1)):
                        k, _, v = part.partition("=")
                        out[k] = v
            return out
    return {}


def find_real_sglang() -> tuple[RealSGLang | None, str]:
    """The CPU SGLang install, or None and why not."""
    found = {k: os.environ[k] for k in ("SGLANG_CPU_PYTHON", "SGLANG_CPU_LD_PRELOAD") if k in os.environ}
    if "SGLANG_CPU_PYTHON" not in found:
        found = _env_sh()
    python = found.get("SGLANG_CPU_PYTHON")
    if not python or not Path(python).is_file():
        return None, ("no CPU SGLang installed: run bash ../shared/sglang-cpu/install.sh and "
                      "source the env.sh it prints (see README: real SGLang on CPU)")
    env = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if found.get("SGLANG_CPU_LD_PRELOAD"):
        env["LD_PRELOAD"] = found["SGLANG_CPU_LD_PRELOAD"]
    probe = subprocess.run([python, "-c", "import sgl_kernel, sglang; from sglang.srt.utils import cpu_has_amx_support;"
                                          "print(cpu_has_amx_support())"],
                           capture_output=True, text=True, env={**os.environ, **env}, cwd="/", timeout=300)
    if probe.returncode != 0:
        why = "SIGILL: its kernels were built for another CPU" if probe.returncode in (-4, 132) else \
            (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        return None, f"the CPU SGLang at {python} does not load here ({why})"
    amx = probe.stdout.strip().splitlines()[-1] == "True"
    models = Path(os.environ.get("SWEEP_TINY_MODELS", Path.home() / ".cache" / "sweep" / "tiny-models"))
    made = subprocess.run([python, "-m", "sweep.tinymodels", "--out", str(models)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    if made.returncode != 0:
        return None, f"could not create the tiny models: {made.stderr.strip().splitlines()[-1:]}"
    return RealSGLang(python, env, "intel_amx" if amx else "torch_native", models, amx), ""


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
    """Real SGLang that serves speculative decoding: a CPU with AMX."""
    if not real_sglang.amx:
        pytest.skip("this CPU has no AMX: SGLang falls back to torch_native attention, which cannot serve "
                    "speculative decoding (test_real_point.py shows the crash)")
    return real_sglang
