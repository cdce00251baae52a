"""Pre-flight of a CPU host: CPU flags, free memory, and kernels that load (or die with SIGILL)."""

import stat
import sys

import pytest

from sweep.errors import PointFailure
from sweep.host import cpu

XEON = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
EPYC = "processor\t: 0\nflags\t\t: fpu sse avx2 sha_ni vaes\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd sve\n"


def test_flags_of_x86_and_arm():
    assert {"amx_tile", "avx512f"} <= cpu.cpu_flags(XEON)
    assert "amx_tile" not in cpu.cpu_flags(EPYC)
    assert cpu.cpu_flags(ARM) == {"fp", "asimd", "sve"}
    assert cpu.cpu_flags("") == set()


def test_the_amx_backend_needs_amx_and_torch_native_nothing():
    assert "amx_tile" in cpu.required_flags({})  # intel_amx is SGLang's default on x86
    assert cpu.required_flags({"attention-backend": "torch_native"}) == []
    assert cpu.required_flags({"attention-backend": "torch_native"}, ["avx2"]) == ["avx2"]


def test_missing_flags_fail_with_the_fix():
    checks: list[str] = []
    cpu.check_cpu_flags(cpu.required_flags({}), checks, cpu.cpu_flags(XEON))
    assert checks and checks[0].startswith("ok: CPU flags")
    with pytest.raises(PointFailure) as e:
        cpu.check_cpu_flags(cpu.required_flags({}), [], cpu.cpu_flags(EPYC))
    assert e.value.phase == "preflight" and "amx_tile" in e.value.reason and "torch_native" in e.value.fix


def test_memory_check():
    checks: list[str] = []
    assert cpu.check_memory(0.01, checks) > 0.01 and "memory free" in checks[0]
    with pytest.raises(PointFailure) as e:
        cpu.check_memory(10_000_000, [])
    assert "server.cpu.min_free_mem_gib" in e.value.reason


def _fake_python(tmp_path, body: str) -> str:
    p = tmp_path / "python"
    p.write_text(f"#!{sys.executable}\nimport os, signal, sys\n{body}\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_kernels_built_for_another_cpu_are_named(tmp_path):
    py = _fake_python(tmp_path, "os.kill(os.getpid(), signal.SIGILL)")
    with pytest.raises(PointFailure) as e:
        cpu.check_kernels(py, {}, [])
    assert "SIGILL" in e.value.reason and "REBUILD_KERNELS" in e.value.fix


def test_kernels_missing_and_present(tmp_path):
    bad = _fake_python(tmp_path, "sys.stderr.write(\"ModuleNotFoundError: No module named 'sgl_kernel'\\n\"); sys.exit(1)")
    with pytest.raises(PointFailure) as e:
        cpu.check_kernels(bad, {}, [])
    assert "No module named 'sgl_kernel'" in e.value.reason
    good = tmp_path / "ok"
    good.mkdir()
    checks: list[str] = []
    cpu.check_kernels(_fake_python(good, "assert os.environ['X'] == '1'; print('2.13')"), {"X": "1"}, checks)
    assert checks == ["ok: CPU kernels load (sgl_kernel)"]


def test_speculation_needs_amx_on_a_cpu_host():
    argv = ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "NGRAM"]
    assert cpu.speculative_algorithm(argv) == "NGRAM"
    assert cpu.speculative_algorithm(["x", "--speculative-algorithm=EAGLE3"]) == "EAGLE3"
    assert cpu.speculative_algorithm(["x", "--port", "1"]) is None
    checks: list[str] = []
    cpu.check_speculation(None, checks, cpu.cpu_flags(EPYC))  # a baseline runs anywhere
    cpu.check_speculation("NGRAM", checks, cpu.cpu_flags(XEON))
    assert checks == ["ok: speculative decoding on a CPU with AMX"]
    with pytest.raises(PointFailure) as e:
        cpu.check_speculation("NGRAM", [], cpu.cpu_flags(EPYC))
    assert "torch_native" in e.value.reason and "AMX" in e.value.fix
