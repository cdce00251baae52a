#!/usr/bin/env bash
# Real SGLang on a CPU host, any x86-64 with AVX2 (a Xeon with AMX, or e.g. an AMD EPYC without AVX-512).
#
#   bash cluster/sglang-cpu-x86/install.sh [SHARED_SGLANG_CPU_DIR]    # default ../shared/sglang-cpu
#
# On a CPU with AMX this is exactly the shared installer (../shared/sglang-cpu/install.sh: SGLang at one
# commit, its prebuilt AMX kernels). On a CPU without AMX that installer stops (exit 3), and its prebuilt
# kernels (-march=x86-64-v4 + AMX) die with SIGILL at import. Then this script runs the same installer
# without its AMX gate, and rebuilds the kernels for this CPU the way SGLang builds them for Arm64 (no
# AVX-512/AMX sources, -march=native), with stubs for the four int8/MoE ops that exist only as AVX-512
# code (noavx512_stubs.cpp). Such a server runs bf16/fp16 dense models with --attention-backend
# torch_native. Idempotent (about 1 s once done); prints SGLANG_CPU_ENV=$PREFIX/env.sh last, as the
# shared installer does. PREFIX: $PREFIX, else $SWEEP_SGLANG_CPU, else ~/.cache/sweep-sglang-cpu.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=$(cd "${1:-$HERE/../../../shared/sglang-cpu}" && pwd)
export PREFIX=${PREFIX:-${SWEEP_SGLANG_CPU:-$HOME/.cache/sweep-sglang-cpu}}
log() { echo "[sglang-cpu-x86] $*" >&2; }
PY="$PREFIX/venv/bin/python"
kernels_load() { ( cd / && SGLANG_USE_CPU_ENGINE=1 "$PY" -c "import sgl_kernel" ) >/dev/null 2>&1; }

if grep -q amx_tile /proc/cpuinfo; then
  exec bash "$SHARED/install.sh"
fi
if [ -f "$PREFIX/.kernels-native" ] && [ -f "$PREFIX/.installed" ] && kernels_load; then
  log "already installed in $PREFIX (kernels built for this CPU)"; echo "SGLANG_CPU_ENV=$PREFIX/env.sh"; exit 0
fi
grep -q avx2 /proc/cpuinfo || { log "this CPU has neither AMX nor AVX2: SGLang's CPU kernels need one of them"; exit 3; }
T0=$(date +%s)
rm -f "$PREFIX/.kernels-native"

# 1. the shared installer, without its AMX gate and with a smoke test that does not ask for AMX
mkdir -p "$PREFIX"
PATCHED="$PREFIX/.install-noamx.sh"
python3 - "$SHARED/install.sh" "$PATCHED" "$SHARED" <<'PY'
import sys
src, dst, shared = sys.argv[1:]
s = open(src).read()
edits = [
    ('HERE=$(cd "$(dirname "$0")" && pwd)', f'HERE="{shared}"'),
    ("grep -q amx_tile /proc/cpuinfo ||", "true ||"),
    ("assert is_cpu() and cpu_has_amx_support(), 'not a CPU engine'", "assert is_cpu(), 'not a CPU engine'"),
    ('import sgl_kernel, torch, sglang.srt.server_args;', 'import torch, sglang.srt.server_args;'),
]
for old, new in edits:
    if old not in s:
        sys.exit(f"the shared installer changed: {old!r} not found; update {__file__ or 'this script'}")
    s = s.replace(old, new)
open(dst, "w").write(s)
PY
bash "$PATCHED"

# 2. the kernels, built for this CPU
SRC="$PREFIX/src/sglang-7f8f030/python/sglang/kernels/aot"
KB="$PREFIX/kbuild-native"
rm -rf "$KB.src"; cp -r "$SRC" "$KB.src"; cd "$KB.src"
cp pyproject_cpu.toml pyproject.toml
sed -i 's/"torch==2.12.0"/"torch"/' pyproject.toml
"$PY" - csrc/cpu/CMakeLists.txt <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
edits = [
    ('if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")\n    add_compile_definitions',
     'if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64" OR DEFINED ENV{SGLANG_CPU_NO_AVX512})\n    add_compile_definitions'),
    ('if(MY_ARCH_DIR STREQUAL "x86_64")\n    add_compile_options(',
     'if(MY_ARCH_DIR STREQUAL "x86_64" AND NOT DEFINED ENV{SGLANG_CPU_NO_AVX512})\n    add_compile_options('),
]
for old, new in edits:
    if old not in s:
        sys.exit(f"SGLang's CPU CMakeLists changed: {old[:60]!r}... not found")
    s = s.replace(old, new)
open(p, "w").write(s)
PY
cp "$HERE/noavx512_stubs.cpp" csrc/cpu/x86_64/
log "building SGLang's CPU kernels for this CPU (no AVX-512; about 5 min on 2 cores)"
mkdir -p "$PREFIX/wheels-native"; rm -f "$PREFIX"/wheels-native/*.whl
SGLANG_CPU_NO_AVX512=1 MAX_JOBS=2 CMAKE_BUILD_PARALLEL_LEVEL=2 VIRTUAL_ENV="$PREFIX/venv" PATH="$PREFIX/venv/bin:$PATH" \
  "$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$PREFIX/wheels-native" -C build-dir="$KB" . \
  > "$PREFIX/kernel_build_native.log" 2>&1 || { log "kernel build failed: see $PREFIX/kernel_build_native.log"; exit 1; }
"$PY" -m pip install -q --no-deps --force-reinstall "$PREFIX"/wheels-native/sglang_kernel_cpu-*.whl
cd "$PREFIX"
kernels_load || { log "the kernels built for this CPU do not load: see $PREFIX/kernel_build_native.log"; exit 1; }
touch "$PREFIX/.kernels-native"
log "installed in $PREFIX in $(( $(date +%s) - T0 )) s (kernels built for this CPU: use --attention-backend torch_native)"
echo "SGLANG_CPU_ENV=$PREFIX/env.sh"
