#!/usr/bin/env bash
# Join this machine to the sweep's Ray cluster, as the head or as a GPU host.
#
#   cluster/host-bootstrap.sh head                      [-- EXTRA_RAY_START_FLAGS...]
#   cluster/host-bootstrap.sh worker HEAD_HOST[:PORT]   [-- EXTRA_RAY_START_FLAGS...]
#
# A GPU host advertises one unit of the host resource (cluster.host_resource, gpu_host) and its
# GPUs (cluster.gpus_per_host); each grid point takes one whole unit, so one server per host.
# The head advertises no host resource unless SWEEP_HEAD_IS_GPU_HOST=1.
#
# Environment (all optional):
#   SWEEP_VENV                venv activated BEFORE ray start, so that Ray workers, the job
#                             entrypoint and `python -m sglang.launch_server` all run in it
#                             (default: the repository's .venv)
#   SWEEP_HOST_RESOURCE       the host resource (default gpu_host; must equal cluster.host_resource)
#   SWEEP_GPUS_PER_HOST       GPUs a GPU host declares (default 8; must be >= cluster.gpus_per_host;
#                             0 for a CPU host, with SWEEP_HOST_RESOURCE=cpu_host)
#   SWEEP_HEAD_IS_GPU_HOST    1: the head is itself a GPU host (default 0: a CPU-only head)
#   SWEEP_OBJECT_STORE_BYTES  Ray object store size (default 2 GiB; unset, Ray takes 30% of RAM)
#   SWEEP_RAY_PORT            the head's GCS port (default 6379)
#   SWEEP_DASHBOARD_HOST      dashboard bind address on the head (default 127.0.0.1: use a tunnel)
#   SWEEP_DASHBOARD_PORT      dashboard port on the head (default 8265)
# Ray's token authentication stays on: the head creates ~/.ray/auth_token if no token is set;
# a worker needs the same token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token).
# Everything else exported when this runs (HF_HOME, CUDA_HOME, ...) reaches the SGLang servers.
# No setting is ever run as shell code: each is checked against a pattern, then passed as one argument.

set -euo pipefail

say() { printf 'host-bootstrap: %s\n' "$*"; }
warn() { printf 'host-bootstrap: warning: %s\n' "$*" >&2; }
die() {
  printf 'host-bootstrap: error: %s\n' "$1" >&2
  if [ $# -gt 1 ]; then printf 'host-bootstrap: fix: %s\n' "$2" >&2; fi
  exit 2
}
usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(dirname "$script_dir")"

# ---- arguments -------------------------------------------------------------------------------
role="${1:-}"
case "$role" in
  head | worker) shift ;;
  -h | --help) usage; exit 0 ;;
  *) die "the first argument must be head or worker, not '${role}'" \
    "cluster/host-bootstrap.sh head, or cluster/host-bootstrap.sh worker HEAD_HOST[:PORT] (--help for more)" ;;
esac

head_addr=""
if [ "$role" = worker ]; then
  if [ $# -eq 0 ] || [ "$1" = "--" ]; then
    die "worker needs the head's address" "cluster/host-bootstrap.sh worker HEAD_HOST[:PORT]"
  fi
  head_addr="$1"
  shift
fi
extra=()
if [ $# -gt 0 ]; then
  [ "$1" = "--" ] || die "unexpected argument '$1'" "put extra ray start flags after --"
  shift
  extra=("$@")
fi

# ---- settings, checked before use ----------------------------------------------------------------
resource="${SWEEP_HOST_RESOURCE:-gpu_host}"
gpus="${SWEEP_GPUS_PER_HOST:-8}"
head_is_gpu_host="${SWEEP_HEAD_IS_GPU_HOST:-0}"
object_store="${SWEEP_OBJECT_STORE_BYTES:-2147483648}"
port="${SWEEP_RAY_PORT:-6379}"
dash_host="${SWEEP_DASHBOARD_HOST:-127.0.0.1}"
dash_port="${SWEEP_DASHBOARD_PORT:-8265}"
venv="${SWEEP_VENV:-$repo_dir/.venv}"

is_port() { [[ "$1" =~ ^[0-9]{1,5}$ ]] && [ "$1" -ge 1 ] && [ "$1" -le 65535 ]; }

[[ "$resource" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] ||
  die "SWEEP_HOST_RESOURCE='$resource' is not a resource name" "letters, digits and _, e.g. gpu_host (= cluster.host_resource)"
[[ "$gpus" =~ ^(0|[1-9][0-9]{0,2})$ ]] ||
  die "SWEEP_GPUS_PER_HOST='$gpus' is not a whole number" "e.g. SWEEP_GPUS_PER_HOST=8 (= cluster.gpus_per_host; 0 for CPU hosts)"
[[ "$head_is_gpu_host" =~ ^[01]$ ]] ||
  die "SWEEP_HEAD_IS_GPU_HOST='$head_is_gpu_host' must be 0 or 1" "1 when the head also serves grid points"
if ! [[ "$object_store" =~ ^[0-9]{8,15}$ ]] || [ "$object_store" -lt 78643200 ]; then
  die "SWEEP_OBJECT_STORE_BYTES='$object_store' must be bytes, at least 78643200 (Ray's minimum)" "e.g. 2147483648 (2 GiB)"
fi
is_port "$port" || die "SWEEP_RAY_PORT='$port' is not a port" "e.g. 6379"
is_port "$dash_port" || die "SWEEP_DASHBOARD_PORT='$dash_port' is not a port" "e.g. 8265"
[[ "$dash_host" =~ ^[A-Za-z0-9.:_-]+$ ]] ||
  die "SWEEP_DASHBOARD_HOST='$dash_host' is not an address" "127.0.0.1 (tunnel to it) or the head's private IP"
if [ "$role" = worker ]; then
  [[ "$head_addr" =~ ^[A-Za-z0-9._-]+(:[0-9]{1,5})?$ ]] ||
    die "'$head_addr' is not HOST or HOST:PORT" "e.g. cluster/host-bootstrap.sh worker 10.0.0.10:6379"
  [[ "$head_addr" == *:* ]] || head_addr="$head_addr:$port"
fi

# ---- token authentication: always on --------------------------------------------------------------
if [ "${RAY_AUTH_MODE:-token}" != token ]; then
  die "RAY_AUTH_MODE=${RAY_AUTH_MODE} is set, but this cluster keeps Ray's token authentication on" \
    "unset RAY_AUTH_MODE (the script sets RAY_AUTH_MODE=token)"
fi
export RAY_AUTH_MODE=token

if [ -n "${RAY_AUTH_TOKEN_PATH:-}" ] && [ -z "${RAY_AUTH_TOKEN:-}" ] && [ ! -s "$RAY_AUTH_TOKEN_PATH" ]; then
  die "RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH is missing or empty (Ray aborts on that)" \
    "copy the head's token there, or unset RAY_AUTH_TOKEN_PATH to use ~/.ray/auth_token"
fi

# Where the token comes from, in Ray's order of precedence (never the token itself); empty: none.
token_source() {
  if [ -n "${RAY_AUTH_TOKEN:-}" ]; then
    echo "the RAY_AUTH_TOKEN variable"
  elif [ -n "${RAY_AUTH_TOKEN_PATH:-}" ]; then
    echo "$RAY_AUTH_TOKEN_PATH"
  elif [ -s "$HOME/.ray/auth_token" ]; then
    echo "$HOME/.ray/auth_token"
  fi
}

# ---- the virtual environment: activated before ray start, inherited by everything Ray starts ----
[ -f "$venv/bin/activate" ] ||
  die "no virtual environment at $venv" \
    "python3 -m venv $venv && $venv/bin/pip install -e '${repo_dir}[gpu]' (on a CPU-only head: -e '$repo_dir'), or set SWEEP_VENV"
[ -x "$venv/bin/ray" ] ||
  die "$venv has no ray executable" "$venv/bin/pip install -e '$repo_dir' (the same Ray version on every host)"
set +u
# shellcheck source=/dev/null
source "$venv/bin/activate"
set -u
say "venv: $venv ($(python --version 2>&1))"

gpu_host=0
if [ "$role" = worker ] || [ "$head_is_gpu_host" = 1 ]; then gpu_host=1; fi

# find_spec only locates modules: fast, and imports nothing heavy (sglang pulls in torch)
probe="$(python - "$role" "$gpu_host" <<'PY'
import importlib.util
import sys

role, gpu_host = sys.argv[1], sys.argv[2] == "1"
need = ["ray", "sweep"]
if role == "head":  # the dashboard and the job server need ray[default]
    need += ["aiohttp_cors", "opencensus", "prometheus_client", "grpc"]
missing = [m for m in need if importlib.util.find_spec(m) is None]
no_sglang = gpu_host and importlib.util.find_spec("sglang") is None
print(",".join(missing) or "-", "1" if no_sglang else "0")
PY
)" || die "the venv's python could not run ($venv/bin/python)" "recreate the venv: python3 -m venv --clear $venv"
read -r missing no_sglang <<<"$probe"
if [ "$missing" != "-" ]; then
  die "the venv lacks: ${missing//,/, }" \
    "$venv/bin/pip install -e '$repo_dir' and, on the head, 'ray[default]' at the cluster's Ray version"
fi
if [ "$no_sglang" = 1 ]; then
  warn "sglang is not importable in $venv: every real grid point on this host will fail at preflight" \
    "(pip install -e '${repo_dir}[gpu]'; --fake sweeps still work)"
fi

# The head's address, as Ray will find it without --node-ip-address: the source address of a route to
# the internet, else what the hostname resolves to. On a host with no default route whose hostname
# maps to 127.0.x.x (/etc/hosts), that is loopback: the head then tells every worker to join it at
# 127.0.0.1, and none can. (A worker finds its address from the route to the head: no such problem.)
if [ "$role" = head ] && [[ " ${extra[*]-} " != *" --node-ip-address"* ]]; then
  guessed="$(python - <<'PY' 2>/dev/null || true
import socket

for family, target in ((socket.AF_INET, ("8.8.8.8", 53)), (socket.AF_INET6, ("2001:4860:4860::8888", 53))):
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(target)  # UDP: picks the route, sends nothing
            print(s.getsockname()[0])
            raise SystemExit
    except OSError:
        pass
try:
    print(socket.gethostbyname(socket.gethostname()))
except OSError:
    print("")
PY
)"
  case "$guessed" in
    127.* | ::1 | "")
      warn "Ray would advertise this head as '${guessed:-no address}' (no default route, and the hostname resolves to loopback): workers on other hosts could not join it" \
        "(pass its cluster IP: cluster/host-bootstrap.sh head -- --node-ip-address=10.0.0.10)" ;;
  esac
fi

if [ "$gpu_host" = 1 ] && command -v nvidia-smi >/dev/null 2>&1; then
  seen="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
  if [ "${seen:-0}" -lt "$gpus" ]; then
    warn "nvidia-smi lists ${seen:-0} GPUs but this host will declare $gpus (SWEEP_GPUS_PER_HOST)"
  fi
fi

# NCCL settings are per grid point (the server's env); a host-wide NCCL_* would leak into every point
nccl_vars="$(env | grep -o '^NCCL_[A-Za-z0-9_]*' | tr '\n' ' ' || true)"
if [ -n "$nccl_vars" ]; then
  warn "exported here, these reach every server that does not set them itself: $nccl_vars" \
    "(put NCCL settings in the experiment: server.env or an env axis)"
fi
passed=""
for v in HF_HOME HF_HUB_OFFLINE HF_TOKEN CUDA_HOME SGLANG_CACHE_DIR TORCHINDUCTOR_CACHE_DIR; do
  if [ -n "${!v:-}" ]; then passed="$passed $v"; fi
done
say "environment passed on to the servers includes:${passed:- (none of HF_HOME, HF_HUB_OFFLINE, HF_TOKEN, CUDA_HOME, ...)}"

src="$(token_source)"
if [ -z "$src" ]; then
  if [ "$role" = head ]; then
    (umask 077 && "$venv/bin/ray" get-auth-token --generate >/dev/null)
    [ -s "$HOME/.ray/auth_token" ] || die "ray get-auth-token --generate wrote no $HOME/.ray/auth_token" \
      "run it by hand and check its message"
    src="$HOME/.ray/auth_token"
    say "created a new Ray auth token in $src: copy it to every worker and driver (cluster/README.md)"
  else
    die "no Ray auth token on this host" \
      "copy the head's token: scp HEAD:.ray/auth_token ~/.ray/auth_token (chmod 600), or set RAY_AUTH_TOKEN_PATH"
  fi
fi
say "token authentication on, token from $src"

# ---- ray start --------------------------------------------------------------------------------
host_resources="{\"$resource\": 1}"
args=(start)
if [ "$role" = head ]; then
  args+=(--head "--port=$port" --include-dashboard=true "--dashboard-host=$dash_host" "--dashboard-port=$dash_port")
  if [ "$head_is_gpu_host" = 1 ]; then
    args+=("--num-gpus=$gpus" "--resources=$host_resources")
  else
    args+=(--num-gpus=0) # and no host resource: grid points never land on the head
  fi
else
  args+=("--address=$head_addr" "--num-gpus=$gpus" "--resources=$host_resources")
fi
args+=("--object-store-memory=$object_store")
args+=(${extra[@]+"${extra[@]}"})

say "ray ${args[*]}"
exec "$venv/bin/ray" "${args[@]}"
