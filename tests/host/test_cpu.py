"""Pre-flight of a CPU host: CPU flags, free memory, and kernels that load (or die with SIGILL)."""

import stat
import sys

import pytest

from sweep.core.checks import Check, lines
from sweep.core.errors import PointFailure
from sweep.host import cpu

XEON = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
EPYC = "processor\t: 0\nflags\t\t: fpu sse avx2 sha_ni vaes\n"  # Zen 3: AVX2 only
ZEN4 = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512bw avx512vl avx512_bf16 avx512_vnni\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd sve\n"


def test_flags_of_x86_and_arm():
    assert {"amx_tile", "avx512f"} <= cpu.cpu_flags(XEON)
    assert "amx_tile" not in cpu.cpu_flags(EPYC)
    assert cpu.cpu_flags(ARM) == {"fp", "asimd", "sve"}
    assert cpu.cpu_flags("") == set()


def test_the_amx_backend_needs_avx512_bf16_and_torch_native_nothing():
    # intel_amx is SGLang's default on x86; its kernels run on AVX512-BF16 (AMX claimed by the installer)
    assert cpu.required_flags({}) == ["avx512f", "avx512_bf16"]
    assert cpu.required_flags({"attention-backend": "torch_native"}) == []
    assert cpu.required_flags({"attention-backend": "torch_native"}, ["avx2"]) == ["avx2"]


def test_missing_flags_fail_with_the_fix():
    checks: list[Check] = []
    cpu.check_cpu_flags(cpu.required_flags({}), checks, cpu.cpu_flags(XEON))
    assert lines(checks) and lines(checks)[0].startswith("ok: CPU flags")
    with pytest.raises(PointFailure) as e:
        cpu.check_cpu_flags(cpu.required_flags({}), [], cpu.cpu_flags(EPYC))
    assert e.value.phase == "preflight" and "avx512_bf16" in e.value.reason and "torch_native" in e.value.fix
    assert "cluster/sglang-cpu-x86/install.sh" in e.value.fix
    cpu.check_cpu_flags(cpu.required_flags({}), checks, cpu.cpu_flags(ZEN4))  # no AMX needed


def test_memory_check():
    checks: list[Check] = []
    assert cpu.check_memory(0.01, checks) > 0.01 and "memory free" in lines(checks)[0]
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
    bad = _fake_python(
        tmp_path, "sys.stderr.write(\"ModuleNotFoundError: No module named 'sgl_kernel'\\n\"); sys.exit(1)"
    )
    with pytest.raises(PointFailure) as e:
        cpu.check_kernels(bad, {}, [])
    assert "No module named 'sgl_kernel'" in e.value.reason
    good = tmp_path / "ok"
    good.mkdir()
    checks: list[Check] = []
    cpu.check_kernels(_fake_python(good, "assert os.environ['X'] == '1'; print('2.13')"), {"X": "1"}, checks)
    assert lines(checks) == ["ok: CPU kernels load (sgl_kernel; SGLang sees AMX: no)"]


def test_speculation_is_decided_as_the_servers_interpreter_sees_it():
    assert cpu.DEFAULT_ATTENTION_BACKEND == "intel_amx"  # SGLang's default on x86 (no --attention-backend)
    xeon, zen4 = cpu.CpuEngine("2.13", True, "amx"), cpu.CpuEngine("2.13", True, "avx512-bf16")
    zen3, shipped = cpu.CpuEngine("2.13", False, "avx2"), cpu.CpuEngine("2.13", False, None)
    checks: list[Check] = []
    cpu.check_speculation(None, "intel_amx", shipped, checks)  # a baseline runs anywhere
    assert lines(checks) == []
    cpu.check_speculation("NGRAM", "intel_amx", xeon, checks)
    cpu.check_speculation("EAGLE3", "intel_amx", zen4, checks)
    cpu.check_speculation("EAGLE3", "intel_amx", zen3, checks)  # SGLang falls back to the patched torch_native
    cpu.check_speculation("NGRAM", "torch_native", zen4, checks)
    assert lines(checks)[0] == "ok: speculative decoding (NGRAM) with intel_amx, on AMX"
    assert "AMX claim (avx512-bf16 path)" in lines(checks)[1]
    assert (
        "torch_native (SGLang sees no AMX here and falls back to it)" in lines(checks)[2]
        and "avx2 path" in lines(checks)[2]
    )
    assert lines(checks)[3].startswith("ok: speculative decoding (NGRAM) with torch_native, taught")
    # SGLang as shipped, on a CPU where it sees no AMX: torch_native refuses speculation
    for backend in ("intel_amx", "torch_native"):
        with pytest.raises(PointFailure) as e:
            cpu.check_speculation("NGRAM", backend, shipped, [])
        assert "torch_native" in e.value.reason and "cluster/sglang-cpu-x86/install.sh" in e.value.fix
    # kernels not probed (server.cpu.check_kernels: false): a warning from the flags, never a failure
    checks = []
    cpu.check_speculation("NGRAM", "intel_amx", None, checks, cpu.cpu_flags(EPYC))
    assert lines(checks) and lines(checks)[0].startswith("warning:")
    checks = []
    cpu.check_speculation("NGRAM", "intel_amx", None, checks, cpu.cpu_flags(ZEN4))
    assert lines(checks) == []


def test_a_server_over_hosts_needs_sglang_to_see_no_amx():
    """Where SGLang sees AMX it reduces TP over this host's /dev/shm only: --nnodes 2 would hang (seen in
    CI on a Zen 4); SWEEP_SGLANG_AMX=0 makes it reduce over gloo."""
    xeon, zen4, zen3 = (
        cpu.CpuEngine("2.13", True, "amx"),
        cpu.CpuEngine("2.13", True, "avx512-bf16"),
        cpu.CpuEngine("2.13", False, "avx2"),
    )
    checks: list[Check] = []
    cpu.check_nodes(1, xeon, checks)  # one host: shared memory is right
    assert lines(checks) == []
    for engine, how in ((xeon, "with AMX"), (zen4, "AMX claim (avx512-bf16 path)")):
        with pytest.raises(PointFailure) as e:
            cpu.check_nodes(2, engine, [])
        assert e.value.phase == "preflight" and how in e.value.reason and "Init torch distributed" in e.value.reason
        assert "SWEEP_SGLANG_AMX: '0'" in e.value.fix and "nnodes 1" in e.value.fix
    cpu.check_nodes(2, zen3, checks)
    cpu.check_nodes(2, None, checks)
    assert lines(checks)[0].startswith("ok: --nnodes 2") and "gloo" in lines(checks)[0]
    assert lines(checks)[1].startswith("warning: --nnodes 2") and "SWEEP_SGLANG_AMX" in lines(checks)[1]


def test_the_probe_reads_what_sglang_sees(tmp_path):
    seen = '{"torch": "2.13.0+cpu", "amx": true, "path": "avx512-bf16"}'
    checks: list[Check] = []
    engine = cpu.check_kernels(_fake_python(tmp_path, f"print({seen!r})"), {}, checks)
    assert engine == cpu.CpuEngine("2.13.0+cpu", True, "avx512-bf16")
    assert lines(checks) == ["ok: CPU kernels load (sgl_kernel; SGLang sees AMX: yes, path avx512-bf16)"]
