#!/usr/bin/env bash
# The GPU tier, on a machine with an NVIDIA GPU: installs the project (with nvidia-ml-py) into .venv if
# needed, then runs the tests/gpu tests, printing their figures (NVML vs nvidia-smi, power side by side).
# Usage: tests/gpu/run_gpu_tier.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v nvidia-smi >/dev/null || { echo "no nvidia-smi here: the GPU tier needs an NVIDIA GPU" >&2; exit 1; }
nvidia-smi --query-gpu=index,name,memory.used,memory.total,power.draw --format=csv
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -c 'import sweep, pynvml, pytest' 2>/dev/null || pip install -q -e '.[test]' nvidia-ml-py
python -m pytest -m gpu tests/gpu -v -s "$@"
