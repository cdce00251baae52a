#!/usr/bin/env bash
# Install the registry's SGLang releases, each in a venv of its own on the CPU torch, far enough for
# `import sglang.srt.server_args` (argument checking needs no kernels). Used by the real_sglang tier
# (tests/real/test_rules_differential.py), for .ci/run to call before the real tier.
#
#   tests/real/install_sglang_releases.sh [VERSION ...]     (default: 0.5.10 0.5.23)
#
# Idempotent and cached outside the clone: $SWEEP_SGLANG_RELEASES (default
# ~/.cache/sweep-sglang-releases)/v<VERSION>/ is a venv (about 2.5 GB), done when it holds .installed.
# Measured from nothing on 2 busy cores: 0.5.10 in 286 s, 0.5.23 in 158 s; a second run takes a second. Never lets pip pull a CUDA torch: torch comes from a local CPU wheel
# ($TORCH_CPU_WHEEL, default /opt/wheels/torch-2.13.0+cpu-...whl) and is pinned by a constraints file
# for every later install; sglang itself is installed with --no-deps, then only the packages
# server_args needs to import; torchvision (CUDA-linked in the registry) is an import-only stub.
# Exit 0 when every version is installed, 3 when there is no CPU torch wheel, 1 on a failed install.
set -euo pipefail

CACHE=${SWEEP_SGLANG_RELEASES:-$HOME/.cache/sweep-sglang-releases}
TORCH_WHEEL=${TORCH_CPU_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}
PY=${PYTHON:-python3.11}
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(0.5.10 0.5.23)

# What sglang.srt.server_args imports, found by trial (0.5.10 and 0.5.23), as pip names.
# sglang.srt.configs.model_config (read by the argument checks) needs the last few. Each is pinned to the
# version the release's own metadata asks for, where it pins one.
DEPS=(numpy tqdm pybase64 requests ipython pydantic aiohttp safetensors orjson triton packaging pillow
      starlette fastapi uvloop openai partial_json_parser huggingface_hub transformers pyzmq dill
      sentencepiece psutil setproctitle msgspec einops jinja2 blobfile pyyaml compressed_tensors gguf
      apache-tvm-ffi)
IMPORTS='import sglang.srt.server_args, sglang.srt.configs.model_config'
# module name -> pip name, for the trial loop below
declare -A PIP_NAME=([PIL]=pillow [yaml]=pyyaml [zmq]=pyzmq [google]=protobuf [IPython]=ipython
                     [sklearn]=scikit-learn [cv2]=opencv-python-headless [tvm_ffi]=apache-tvm-ffi)
FORBIDDEN='^(torch|torchvision|torchaudio|nvidia-.*|flashinfer.*|sgl[-_]kernel|cuda-python)$'

log() { echo "[sglang-releases] $*" >&2; }

if [ ! -f "$TORCH_WHEEL" ]; then
    log "no CPU torch wheel at $TORCH_WHEEL (set TORCH_CPU_WHEEL); refusing to let pip pick a torch"
    exit 3
fi

stub_torchvision() {  # an import-only torchvision: every submodule and attribute exists, none works
    local site=$1
    mkdir -p "$site/torchvision"
    cat > "$site/torchvision/__init__.py" <<'PYEOF'
"""Import-only stub of torchvision (sweep's tests/real/install_sglang_releases.sh): SGLang imports it at
module level; argument checking never calls it."""
import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+stub"


class _Dummy:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Dummy()

    def __getattr__(self, name):
        return _Dummy()

    def __mro_entries__(self, bases):
        return (object,)


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Dummy()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _Module(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
sys.modules[__name__].__class__ = _Module
PYEOF
}

install_one() {
    local v=$1 d="$CACHE/v$1"
    if [ -f "$d/.installed" ]; then
        log "sglang $v: already installed in $d"
        return 0
    fi
    local t0=$SECONDS
    rm -rf "$d"
    mkdir -p "$CACHE"
    "$PY" -m venv "$d" || return 1
    local pip=("$d/bin/python" -m pip install -q --disable-pip-version-check)
    "${pip[@]}" "$TORCH_WHEEL" || return 1
    local torch_v
    torch_v=$("$d/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null) || return 1
    printf 'torch==%s\n' "$torch_v" > "$d/constraints.txt"
    "${pip[@]}" --no-deps "sglang==$v" || return 1
    local reqs
    reqs=$("$d/bin/python" - "${DEPS[@]}" <<'PYEOF'
import re, sys
from importlib.metadata import requires

norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
wanted = {norm(n): n for n in sys.argv[1:]}
pins = {}
for req in requires("sglang") or []:
    spec, _, marker = req.partition(";")
    if "extra" in marker:
        continue
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^]]*\])?\s*(==[^,\s]+)?", spec)
    if m and m.group(2) and norm(m.group(1)) in wanted:
        pins[norm(m.group(1))] = m.group(2)
print(" ".join(n + pins.get(norm(n), "") for n in sys.argv[1:]))
PYEOF
) || return 1
    # shellcheck disable=SC2086
    "${pip[@]}" -c "$d/constraints.txt" $reqs || return 1
    local site
    site=$("$d/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    stub_torchvision "$site"
    local i out mod pkg
    for i in $(seq 1 20); do  # anything a newer release imports that DEPS lacks
        if out=$("$d/bin/python" -c "$IMPORTS" 2>&1); then
            break
        fi
        mod=$(printf '%s\n' "$out" | grep -oP "No module named '\K[^'.]+" | tail -1 || true)
        if [ -z "$mod" ]; then
            printf '%s\n' "$out" | tail -20 >&2
            log "sglang $v: server_args does not import (above)"
            return 1
        fi
        pkg=${PIP_NAME[$mod]:-$mod}
        if [[ "$pkg" =~ $FORBIDDEN ]]; then
            log "sglang $v: server_args needs $pkg, which this installer will not install"
            return 1
        fi
        log "sglang $v: also installing $pkg (for module $mod)"
        "${pip[@]}" -c "$d/constraints.txt" "$pkg" || { log "sglang $v: cannot install $pkg"; return 1; }
    done
    "$d/bin/python" -c "$IMPORTS" >/dev/null 2>&1 || { log "sglang $v: still fails to import"; return 1; }
    if "$d/bin/python" -m pip list 2>/dev/null | grep -qiE '^nvidia-'; then
        log "sglang $v: a CUDA package got in; refusing ($d)"
        return 1
    fi
    [ "$("$d/bin/python" -c 'import torch; print(torch.__version__)')" = "$torch_v" ] || { log "torch was replaced"; return 1; }
    touch "$d/.installed"
    log "sglang $v: installed in $d in $((SECONDS - t0)) s"
}

rc=0
for v in "${VERSIONS[@]}"; do
    install_one "$v" || rc=1
done
for v in "${VERSIONS[@]}"; do
    [ -f "$CACHE/v$v/.installed" ] && echo "SGLANG_RELEASE_PYTHON_${v//./_}=$CACHE/v$v/bin/python"
done
exit $rc
