#!/usr/bin/env bash
# SGLang's CPU kernels (module sgl_kernel) built for AVX2: without AVX-512 sources or instructions
# (-march=x86-64-v3, noavx512_stubs.cpp, shm_noavx512.h, CMake edits). Called by install.sh on its avx2
# path where no seed wheel of this recipe is at hand (kernels-avx2.seed); about 7-8 min on 2 cores.
#
#   bash build_kernels_avx2.sh PY PREFIX    # writes PREFIX/wheels-avx2/sglang_kernel_cpu-*.whl
#
# This file, noavx512_stubs.cpp and shm_noavx512.h are the recipe: a change to any of them is a new
# recipe, and a seed wheel built by another is not used.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$1
PREFIX=$2
log() { echo "[sglang-cpu-x86] $*" >&2; }
SRC="$PREFIX/src/sglang-7f8f030/python/sglang/kernels/aot"
KB="$PREFIX/kbuild-avx2"
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
    # x86-64-v3 (AVX2, FMA, F16C), not -march=native: on a newer CPU, native would emit AVX-512
    ('        -march=native', '        $<IF:$<BOOL:$ENV{SGLANG_CPU_NO_AVX512}>,-march=x86-64-v3,-march=native>'),
]
for old, new in edits:
    if old not in s:
        sys.exit(f"SGLang's CPU CMakeLists changed: {old[:60]!r}... not found")
    s = s.replace(old, new)
open(p, "w").write(s)
PY
cp "$HERE/noavx512_stubs.cpp" csrc/cpu/x86_64/
# the shared-memory collectives (TP > 1): SGLang's x86 version is AVX-512 code under target
# attributes, built whatever -march says; a plain C++ one instead
cp "$HERE/shm_noavx512.h" csrc/cpu/x86_64/shm.h
log "building SGLang's CPU kernels for AVX2 (-march=x86-64-v3; about 8 min on 2 cores)"
mkdir -p "$PREFIX/wheels-avx2"; rm -f "$PREFIX"/wheels-avx2/*.whl
SGLANG_CPU_NO_AVX512=1 MAX_JOBS=2 CMAKE_BUILD_PARALLEL_LEVEL=2 VIRTUAL_ENV="$PREFIX/venv" PATH="$PREFIX/venv/bin:$PATH" \
  "$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$PREFIX/wheels-avx2" -C build-dir="$KB" . \
  > "$PREFIX/kernel_build_avx2.log" 2>&1 || { log "kernel build failed: see $PREFIX/kernel_build_avx2.log"; exit 1; }
