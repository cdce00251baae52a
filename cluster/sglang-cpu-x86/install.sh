#!/usr/bin/env bash
# Real SGLang on a CPU host, any x86-64 with AVX2, with speculative decoding on every kind.
#
#   bash cluster/sglang-cpu-x86/install.sh [SHARED_SGLANG_CPU_DIR]    # default ../shared/sglang-cpu
#
# It picks the path for the CPU it runs on, says which one it took, and writes it into the install
# (env.sh exports SGLANG_CPU_PATH and SGLANG_CPU_ATTENTION_BACKEND; the venv's own startup hook,
# sweep_cpu_path.py, does the rest for every server process, so nobody sets a variable by hand):
#   amx          a Xeon with AMX: exactly the shared installer (../shared/sglang-cpu/install.sh), intel_amx
#   avx512-bf16  AVX-512 with AVX512-BF16, no AMX (AMD Zen 4): the shared installer without its AMX gate,
#                its prebuilt kernels, and the AMX claim of ../shared/sglang-cpu/avx512/ in every server
#                process (SGLang asks torch "AMX or not" once; oneDNN's bf16 brgemm has an AVX512-BF16
#                path): intel_amx serves every speculative algorithm there
#   avx2         AVX2 only (AMD Zen 3): kernels rebuilt without AVX-512 sources (-march=x86-64-v3), torch
#                held to AVX2, and SGLang's torch_native attention taught the speculative passes
#                (torch_native_spec.py, applied to the installed SGLang): torch_native
# SWEEP_CPU_PATH=avx2 (or avx512-bf16) forces a path a newer CPU can emulate: kernels built without
# AVX-512, torch at ATEN_CPU_CAPABILITY=avx2 and torch_native behave there as on a Zen 3. Such an
# install is best kept in its own PREFIX (the tests look for one at ~/.cache/sweep-sglang-cpu-avx2).
# Idempotent (about 1 s once done); prints SGLANG_CPU_ENV=$PREFIX/env.sh last, as the shared installer
# does. PREFIX: $PREFIX, else $SWEEP_SGLANG_CPU, else ~/.cache/sweep-sglang-cpu. Exit 3: no path on this
# CPU (neither AMX nor AVX2).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=$(cd "${1:-$HERE/../../../shared/sglang-cpu}" && pwd)
export PREFIX=${PREFIX:-${SWEEP_SGLANG_CPU:-$HOME/.cache/sweep-sglang-cpu}}
log() { echo "[sglang-cpu-x86] $*" >&2; }
PY="$PREFIX/venv/bin/python"
has() { grep -qw "$1" /proc/cpuinfo; }

# 1. the path for this CPU
if [ -n "${SWEEP_CPU_PATH:-}" ]; then
  CPU_PATH=$SWEEP_CPU_PATH; WHY="forced by SWEEP_CPU_PATH"
elif has amx_tile && has amx_bf16; then
  CPU_PATH=amx; WHY="the CPU has AMX"
elif has avx512f && has avx512bw && has avx512vl && has avx512_bf16; then
  CPU_PATH=avx512-bf16; WHY="the CPU has AVX-512 with AVX512-BF16 and no AMX"
elif has avx2 && has fma; then
  CPU_PATH=avx2; WHY="the CPU has AVX2 and no AVX512-BF16"
else
  log "this CPU has neither AMX, AVX512-BF16 nor AVX2: SGLang's CPU kernels need one of them"; exit 3
fi
case "$CPU_PATH" in
  amx|avx512-bf16) BACKEND=intel_amx ;;
  avx2) BACKEND=torch_native ;;
  *) log "SWEEP_CPU_PATH=$CPU_PATH: not a path (amx, avx512-bf16, avx2)"; exit 2 ;;
esac
if [ "$CPU_PATH" = avx512-bf16 ] && ! { has avx512f && has avx512_bf16; }; then
  log "SWEEP_CPU_PATH=avx512-bf16 needs AVX-512 with AVX512-BF16, which this CPU lacks"; exit 3
fi
if [ "$CPU_PATH" = amx ] && ! has amx_tile; then
  log "SWEEP_CPU_PATH=amx needs AMX, which this CPU lacks"; exit 3
fi
WANT="$CPU_PATH $(sha256sum "$HERE/install.sh" "$HERE/build_kernels_avx2.sh" "$HERE/torch_native_spec.py" "$HERE/torch_native_spec_backend.py" "$HERE/adaptive_cpu.py" "$HERE/sweep_cpu_path.py" "$HERE/shm_noavx512.h" | sha256sum | cut -c1-16)"
kernels_load() { ( cd / && SGLANG_USE_CPU_ENGINE=1 "$PY" -c "import sgl_kernel, sglang.srt.server_args" ) >/dev/null 2>&1; }
# AVX2 path: the first AVX-512 instructions (an EVEX register: zmm, a mask register, xmm/ymm 16-31) in
# SGLang's kernel library, none when it is clean. Such code dies with SIGILL on an AVX2 CPU but runs
# on a newer one emulating the path, where "the kernels load" proves nothing.
kernels_so() { ( cd / && "$PY" -c "import glob, importlib.util, os; s = importlib.util.find_spec('sgl_kernel'); print(*glob.glob(os.path.join(os.path.dirname(s.origin), '*.so')))" ); }
kernels_avx512() {
  command -v objdump >/dev/null || return 0
  objdump -d --no-show-raw-insn $(kernels_so) 2>/dev/null | grep -m3 -E '%zmm|%k[1-7]\b|%[xy]mm(1[6-9]|2[0-9]|3[01])\b' || true
}
if [ -f "$PREFIX/.installed" ] && [ "$(cat "$PREFIX/.path" 2>/dev/null)" = "$WANT" ] && kernels_load \
   && { [ "$CPU_PATH" != avx2 ] || [ -z "$(kernels_avx512)" ]; }; then
  log "already installed in $PREFIX (path $CPU_PATH: $WHY; attention backend $BACKEND)"
  echo "SGLANG_CPU_ENV=$PREFIX/env.sh"; exit 0
fi
log "path $CPU_PATH ($WHY): attention backend $BACKEND"
T0=$(date +%s)
rm -f "$PREFIX/.path"

# 2. the shared installer: as it is on AMX; elsewhere without its AMX gate and with a smoke test that
#    does not ask for AMX (its prebuilt kernels, -march=x86-64-v4, run on any AVX-512 CPU)
mkdir -p "$PREFIX"
if [ "$CPU_PATH" = amx ]; then
  bash "$SHARED/install.sh"
else
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
        sys.exit(f"the shared installer changed: {old!r} not found; update cluster/sglang-cpu-x86/install.sh")
    s = s.replace(old, new)
open(dst, "w").write(s)
PY
  bash "$PATCHED"
fi
SITE=$("$PY" -c "import sysconfig;print(sysconfig.get_paths()['purelib'])")

# 3. AVX2: the kernels, built without AVX-512 sources or instructions
if [ "$CPU_PATH" = avx2 ]; then
  if [ -f "$PREFIX/.kernels-avx2" ] && kernels_load && [ -z "$(kernels_avx512)" ]; then
    log "kernels built for AVX2 already installed"
  else
    rm -f "$PREFIX/.kernels-avx2"
    # a seed wheel (../shared/sglang-cpu/wheels-avx2) built by this very recipe is used as it is: the
    # build is about 7 minutes of every fresh install; kernels-avx2.seed lists the wheels known to
    # have been built by each recipe (the wheel's sha256 and the recipe's, below)
    RECIPE=$(cat "$HERE/build_kernels_avx2.sh" "$HERE/noavx512_stubs.cpp" "$HERE/shm_noavx512.h" | sha256sum | cut -c1-16)
    SEED_WHL=$(ls "$SHARED"/wheels-avx2/sglang_kernel_cpu-*.whl 2>/dev/null | head -1 || true)
    SEEDED=""
    if [ -n "$SEED_WHL" ] && grep -qx "$(sha256sum "$SEED_WHL" | cut -c1-64) recipe=$RECIPE" "$HERE/kernels-avx2.seed"; then
      log "kernels for AVX2 from the seed $SEED_WHL (recipe $RECIPE)"
      mkdir -p "$PREFIX/wheels-avx2"; rm -f "$PREFIX"/wheels-avx2/*.whl; cp "$SEED_WHL" "$PREFIX/wheels-avx2/"
      "$PY" -m pip install -q --no-deps --force-reinstall "$PREFIX"/wheels-avx2/sglang_kernel_cpu-*.whl
      if ( cd "$PREFIX" && kernels_load ) && [ -z "$(kernels_avx512)" ]; then SEEDED=1
      else log "the seed's kernels do not load here (or hold AVX-512 instructions): building them"; fi
    elif [ -n "$SEED_WHL" ]; then
      log "the seed $SEED_WHL was not built by this recipe ($RECIPE, kernels-avx2.seed): building the kernels"
    fi
    if [ -z "$SEEDED" ]; then
      bash "$HERE/build_kernels_avx2.sh" "$PY" "$PREFIX"
      "$PY" -m pip install -q --no-deps --force-reinstall "$PREFIX"/wheels-avx2/sglang_kernel_cpu-*.whl
    fi
    cd "$PREFIX"
    kernels_load || { log "the kernels built for AVX2 do not load: see $PREFIX/kernel_build_avx2.log"; exit 1; }
    touch "$PREFIX/.kernels-avx2"
  fi
fi

# 4. speculative decoding with torch_native (used on the avx2 path; applied everywhere, so one SGLang
#    tree serves every path): target verify with the draft tokens' mask, draft extend, multi-step draft
#    decode; idempotent
"$PY" "$HERE/torch_native_spec.py" "$SITE"
# 4b. adaptive speculation (--speculative-adaptive) at 0 steps on the CPU engine: the 1-node verify's
#     token as int64, as the CPU kernel requires (adaptive_cpu.py says why); idempotent
"$PY" "$HERE/adaptive_cpu.py" "$SITE"

# 5. the path, in every process of this venv that runs SGLang's CPU engine: a startup hook (.pth)
#    that, when SGLANG_USE_CPU_ENGINE=1, claims AMX (avx512-bf16) or holds torch to AVX2 (avx2)
sed "s/^CPU_PATH = .*/CPU_PATH = \"$CPU_PATH\"/" "$HERE/sweep_cpu_path.py" > "$SITE/sweep_cpu_path.py"
if [ "$CPU_PATH" = avx512-bf16 ]; then cp "$SHARED/avx512/sitecustomize.py" "$SITE/sweep_amx_claim.py"; fi
echo "import sweep_cpu_path" > "$SITE/sweep_cpu_path.pth"
sed -i '/SGLANG_CPU_PATH=\|SGLANG_CPU_ATTENTION_BACKEND=\|^# the path cluster\/sglang-cpu-x86/d' "$PREFIX/env.sh"
cat >> "$PREFIX/env.sh" <<EOF
# the path cluster/sglang-cpu-x86/install.sh took for this CPU, and SGLang's attention backend on it
export SGLANG_CPU_PATH=$CPU_PATH
export SGLANG_CPU_ATTENTION_BACKEND=$BACKEND
EOF
( cd / && SGLANG_USE_CPU_ENGINE=1 "$PY" -c "
import sgl_kernel, sglang.srt.server_args, sweep_cpu_path
from sglang.srt.utils import cpu_has_amx_support
want = sweep_cpu_path.CPU_PATH != 'avx2'
assert cpu_has_amx_support() == want, f'SGLang sees AMX={cpu_has_amx_support()} on the {sweep_cpu_path.CPU_PATH} path'
" ) || { log "smoke test of the $CPU_PATH path failed"; exit 1; }
( cd / && SGLANG_USE_CPU_ENGINE=1 SWEEP_SGLANG_AMX=0 "$PY" -c "
import sgl_kernel, sglang.srt.server_args
from sglang.srt.utils import cpu_has_amx_support
assert not cpu_has_amx_support(), 'SGLang sees AMX with SWEEP_SGLANG_AMX=0'
" ) || { log "smoke test of SWEEP_SGLANG_AMX=0 (SGLang sees no AMX) failed"; exit 1; }
if [ "$CPU_PATH" = avx2 ]; then
  command -v objdump >/dev/null || log "objdump is missing: SGLang's kernels not checked for AVX-512 instructions"
  FOUND=$(kernels_avx512)
  if [ -n "$FOUND" ]; then
    log "smoke test of the avx2 path failed: SGLang's kernel library $(kernels_so) has AVX-512 instructions,"
    log "which die with SIGILL on an AVX2-only CPU (first: $(echo "$FOUND" | head -1 | sed 's/^ *//' | cut -c1-80)); rerun this installer to rebuild them"
    exit 1
  fi
fi
echo "$WANT" > "$PREFIX/.path"
log "installed in $PREFIX in $(( $(date +%s) - T0 )) s: path $CPU_PATH ($WHY), attention backend $BACKEND"
echo "SGLANG_CPU_ENV=$PREFIX/env.sh"
