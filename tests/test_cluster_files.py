"""The cluster definitions under cluster/, checked without a cluster.

What a cluster would tell us late (a host that never gets a grid point because it advertises another
resource name, a launcher config Ray rejects, a worker started outside the venv, auth left off) is
checked here early: the YAML files parse and have the fields their tools require, every file
advertises the host resource the experiments ask for, the bootstrap script passes ``bash -n`` and
shellcheck and, run against a stand-in ``ray``, passes exactly the flags the design needs, and the
commands and messages the README shows exist in the project.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep import config
from tests.conftest import REPO, run_sweep_cli

CLUSTER = REPO / "cluster"
SCRIPT = CLUSTER / "host-bootstrap.sh"
LAUNCHER = CLUSTER / "ray-cluster.yaml"
KUBERAY = CLUSTER / "kuberay-raycluster.yaml"
README = CLUSTER / "README.md"
EXPERIMENTS = sorted((REPO / "experiments").glob("*.yaml"))


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path} is not a YAML mapping"
    return doc


def _cluster_settings() -> tuple[str, int]:
    """The host resource and GPUs per host every GPU experiment (and the schema default) uses; CPU
    experiments run on CPU hosts (cpu_host, no GPUs), which the GPU cluster files do not start."""
    default = config.ClusterConfig()
    settings = {(default.host_resource, default.gpus_per_host)}
    settings |= {(e.cluster.host_resource, e.cluster.gpus_per_host) for e in map(config.load, EXPERIMENTS)
                 if not config.is_cpu(e)}
    assert len(settings) == 1, f"experiments disagree on the cluster they need: {settings}"
    return settings.pop()


RESOURCE, GPUS = _cluster_settings()


# ---- the YAML files --------------------------------------------------------------------------


def test_every_yaml_file_parses():
    files = sorted(CLUSTER.glob("*.yaml"))
    assert {p.name for p in files} >= {LAUNCHER.name, KUBERAY.name}
    for p in files:
        _load(p)


def test_no_cluster_file_turns_auth_off():
    for p in [SCRIPT, *CLUSTER.glob("*.yaml")]:
        text = p.read_text()
        assert not re.search(r"RAY_AUTH_MODE\W*(=|value:)\W*disabled", text), f"{p.name} disables Ray auth"
    kuberay = _load(KUBERAY)
    assert kuberay["spec"]["authOptions"]["mode"] == "token"


def _ray_schema() -> dict | None:
    """Ray's own cluster-config schema, found without importing Ray."""
    spec = importlib.util.find_spec("ray")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "autoscaler" / "ray-schema.json"
        if path.is_file():
            return json.loads(path.read_text())
    return None


def test_launcher_config_is_a_valid_local_provider_config():
    cfg = _load(LAUNCHER)
    provider = cfg["provider"]
    assert provider["type"] == "local"
    # what ray up's local provider demands (ray/autoscaler/_private/local/config.py)
    assert provider["head_ip"] and provider["worker_ips"]
    assert not {"available_node_types", "head_node", "worker_nodes"} & set(cfg)
    schema = _ray_schema()
    jsonschema = pytest.importorskip("jsonschema")
    if schema is None:
        pytest.skip("Ray's ray-schema.json not found")
    jsonschema.validate(cfg, schema)


def test_launcher_starts_every_node_through_the_bootstrap_script():
    cfg = _load(LAUNCHER)
    head = [c for c in cfg["head_start_ray_commands"] if "host-bootstrap.sh" in c]
    workers = [c for c in cfg["worker_start_ray_commands"] if "host-bootstrap.sh" in c]
    assert len(head) == 1 and " head" in head[0] and "--autoscaling-config=" in head[0]
    assert len(workers) == 1 and "worker $RAY_HEAD_IP" in workers[0]
    assert f"SWEEP_HOST_RESOURCE={RESOURCE}" in workers[0] and f"SWEEP_GPUS_PER_HOST={GPUS}" in workers[0]
    assert not any(re.search(r"(^|\s)ray start", c) for c in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"])
    # the token reaches every host, and shells there are authenticated
    assert any(remote.endswith("/.ray/auth_token") for remote in cfg["file_mounts"])
    assert any("RAY_AUTH_MODE=token" in c for c in cfg["initialization_commands"])


def _ray_resources(params: dict) -> dict:
    """A KubeRay ``rayStartParams.resources`` value as Ray reads it: KubeRay puts the string on the
    ``ray start`` command line, where the shell strips its quotes and backslashes."""
    if "resources" not in params:
        return {}
    words = shlex.split(params["resources"])
    assert len(words) == 1, params["resources"]
    return json.loads(words[0])


def test_kuberay_manifest_has_what_kuberay_requires():
    doc = _load(KUBERAY)
    assert doc["apiVersion"] == "ray.io/v1" and doc["kind"] == "RayCluster" and doc["metadata"]["name"]
    spec = doc["spec"]
    # authOptions needs Ray 2.52.0 or newer
    assert tuple(int(x) for x in spec["rayVersion"].split(".")) >= (2, 52, 0)
    head = spec["headGroupSpec"]
    groups = spec["workerGroupSpecs"]
    assert groups, "no worker group"
    for group in [head, *groups]:
        params = group.get("rayStartParams", {})
        assert all(isinstance(v, str) for v in params.values()), f"rayStartParams values must be strings: {params}"
        containers = group["template"]["spec"]["containers"]
        assert containers and containers[0]["name"] and containers[0]["image"]
    assert RESOURCE not in _ray_resources(head.get("rayStartParams", {})), "the head must not take grid points"
    for group in groups:
        assert group["groupName"]
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        params = group["rayStartParams"]
        assert _ray_resources(params) == {RESOURCE: 1}
        assert int(params["num-gpus"]) == GPUS
        res = group["template"]["spec"]["containers"][0]["resources"]
        # KubeRay reads limits; requests must equal them for GPUs
        assert int(res["limits"]["nvidia.com/gpu"]) == GPUS == int(res["requests"]["nvidia.com/gpu"])


# ---- the bootstrap script ------------------------------------------------------------------------


@pytest.mark.slow
def test_bootstrap_script_is_valid_bash():
    r = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert SCRIPT.stat().st_mode & stat.S_IXUSR, "host-bootstrap.sh must be executable"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_bootstrap_script_passes_shellcheck():
    r = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


STUB_RAY = """#!/usr/bin/env bash
# a stand-in for ray: records how it was called and in which environment
if [ "$1" = get-auth-token ]; then
  mkdir -p "$HOME/.ray" && printf 'stub-token' > "$HOME/.ray/auth_token"
  exit 0
fi
printf '%s\\n' "$@" > "$STUB_LOG/args"
{
  echo "RAY_AUTH_MODE=${RAY_AUTH_MODE:-}"
  echo "VIRTUAL_ENV=${VIRTUAL_ENV:-}"
  echo "PYTHON=$(command -v python)"
  echo "HF_HOME=${HF_HOME:-}"
} > "$STUB_LOG/env"
"""


class Bootstrap:
    """Runs host-bootstrap.sh against a stand-in venv whose ``ray`` records its arguments."""

    def __init__(self, tmp: Path):
        self.home = tmp / "home"
        self.venv = tmp / "venv"
        self.log = tmp / "log"
        for d in (self.home, self.venv / "bin", self.log):
            d.mkdir(parents=True)
        (self.venv / "bin" / "activate").write_text(
            f'export VIRTUAL_ENV="{self.venv}"\nexport PATH="$VIRTUAL_ENV/bin:$PATH"\n')
        ray = self.venv / "bin" / "ray"
        ray.write_text(STUB_RAY)
        ray.chmod(0o755)
        # a wrapper, not a symlink: a symlinked venv python would lose its venv's site-packages
        python = self.venv / "bin" / "python"
        python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        python.chmod(0o755)

    def token(self) -> Path:
        return self.home / ".ray" / "auth_token"

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("RAY_", "SWEEP_", "NCCL_", "VIRTUAL_ENV", "HF_"))}
        full = {**base, "HOME": str(self.home), "SWEEP_VENV": str(self.venv), "STUB_LOG": str(self.log),
                "PYTHONPATH": str(REPO), **env}
        return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full, timeout=60)

    def ray_args(self) -> list[str] | None:
        p = self.log / "args"
        return p.read_text().splitlines() if p.exists() else None

    def ray_env(self) -> dict[str, str]:
        return dict(line.split("=", 1) for line in (self.log / "env").read_text().splitlines())


@pytest.fixture
def boot(tmp_path) -> Bootstrap:
    return Bootstrap(tmp_path)


def _resources_arg(args: list[str]) -> dict | None:
    found = [a.split("=", 1)[1] for a in args if a.startswith("--resources=")]
    return json.loads(found[0]) if found else None


@pytest.mark.slow
def test_cpu_head_starts_in_the_venv_with_auth_and_no_host_resource(boot):
    r = boot.run("head")
    assert r.returncode == 0, r.stderr
    assert boot.ray_args() == ["start", "--head", "--port=6379", "--include-dashboard=true",
                               "--dashboard-host=127.0.0.1", "--dashboard-port=8265", "--num-gpus=0",
                               "--object-store-memory=2147483648"]
    env = boot.ray_env()
    assert env["RAY_AUTH_MODE"] == "token"
    assert env["VIRTUAL_ENV"] == str(boot.venv) and env["PYTHON"] == str(boot.venv / "bin" / "python")
    # no token anywhere: the head makes one, readable by its owner only
    assert boot.token().read_text() == "stub-token"
    assert stat.S_IMODE(boot.token().stat().st_mode) == 0o600
    assert "stub-token" not in r.stdout + r.stderr


@pytest.mark.slow
def test_gpu_head_advertises_the_experiments_host_resource(boot):
    r = boot.run("head", SWEEP_HEAD_IS_GPU_HOST="1")
    assert r.returncode == 0, r.stderr
    args = boot.ray_args()
    assert _resources_arg(args) == {RESOURCE: 1} and f"--num-gpus={GPUS}" in args


@pytest.mark.slow
def test_worker_joins_the_head_as_one_gpu_host(boot):
    boot.token().parent.mkdir()
    boot.token().write_text("copied-from-head")
    r = boot.run("worker", "10.0.0.10", "--", "--node-ip-address=10.0.0.11",
                 HF_HOME="/models/hf-cache", NCCL_ALGO="Ring")
    assert r.returncode == 0, r.stderr
    args = boot.ray_args()
    assert args[:2] == ["start", "--address=10.0.0.10:6379"]
    assert _resources_arg(args) == {RESOURCE: 1} and f"--num-gpus={GPUS}" in args
    assert "--object-store-memory=2147483648" in args and args[-1] == "--node-ip-address=10.0.0.11"
    assert not any(a.startswith("--head") for a in args)
    assert boot.ray_env()["RAY_AUTH_MODE"] == "token" and boot.ray_env()["HF_HOME"] == "/models/hf-cache"
    assert "NCCL_ALGO" in r.stderr  # host-wide NCCL settings would leak into every point
    if importlib.util.find_spec("sglang") is None:
        assert "sglang is not importable" in r.stderr


@pytest.mark.slow
def test_worker_without_the_token_does_not_start(boot):
    r = boot.run("worker", "10.0.0.10:6380")
    assert r.returncode == 2 and boot.ray_args() is None
    assert "no Ray auth token" in r.stderr and "RAY_AUTH_TOKEN_PATH" in r.stderr
    r = boot.run("worker", "10.0.0.10", RAY_AUTH_TOKEN_PATH=str(boot.home / "missing"))
    assert r.returncode == 2 and "RAY_AUTH_TOKEN_PATH" in r.stderr and boot.ray_args() is None


@pytest.mark.slow
def test_auth_cannot_be_turned_off(boot):
    r = boot.run("head", RAY_AUTH_MODE="disabled")
    assert r.returncode == 2 and "token authentication" in r.stderr and boot.ray_args() is None


@pytest.mark.slow
@pytest.mark.parametrize("args, env, culprit", [
    (["worker", "10.0.0.10; reboot"], {}, "is not HOST or HOST:PORT"),
    (["head"], {"SWEEP_HOST_RESOURCE": 'gpu_host", "GPU": 99, "x'}, "SWEEP_HOST_RESOURCE"),
    (["head"], {"SWEEP_GPUS_PER_HOST": "$(id)"}, "SWEEP_GPUS_PER_HOST"),
    (["head"], {"SWEEP_OBJECT_STORE_BYTES": "1000"}, "SWEEP_OBJECT_STORE_BYTES"),
    (["head"], {"SWEEP_DASHBOARD_HOST": "0.0.0.0 --block"}, "SWEEP_DASHBOARD_HOST"),
    (["head", "extra"], {}, "unexpected argument"),
    (["primary"], {}, "head or worker"),
])
def test_bad_settings_are_refused_before_ray_starts(boot, args, env, culprit):
    r = boot.run(*args, **env)
    assert r.returncode == 2 and culprit in r.stderr and "fix:" in r.stderr, r.stderr
    assert boot.ray_args() is None


@pytest.mark.slow
def test_missing_venv_names_the_fix(boot, tmp_path):
    r = boot.run("head", SWEEP_VENV=str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "no virtual environment" in r.stderr and "pip install" in r.stderr


# ---- the README ----------------------------------------------------------------------------------


def test_readme_names_only_files_and_settings_that_exist():
    text = README.read_text()
    for path in set(re.findall(r"\b((?:cluster|experiments|tests)/[\w./-]+\.(?:sh|yaml|py|md))\b", text)):
        assert (REPO / path).exists(), f"README names {path}, which does not exist"
    script = SCRIPT.read_text()
    for var in set(re.findall(r"\bSWEEP_[A-Z_]+\b", text)):
        assert var in script, f"README names {var}, which host-bootstrap.sh does not read"
    assert importlib.util.find_spec("sweep.fake") is not None  # what --fake launches


def test_readme_quotes_the_real_error_messages():
    """The troubleshooting table quotes these; they must stay what the code says."""
    text = README.read_text()
    sources = "".join(p.read_text() for p in (REPO / "sweep").rglob("*.py"))
    for message in ("no node of the cluster advertises the host resource", "no Ray cluster to join at",
                    "advertise fewer than", "SGLang is not importable with", "GPUs are not free"):
        assert message in text, f"README no longer quotes {message!r}"
        assert message in sources, f"README quotes {message!r}, which no module says any more"


@pytest.mark.slow
def test_readme_commands_exist():
    from sweep.cli import SUBCOMMANDS

    text = README.read_text()
    for word in set(re.findall(r"python -m sweep ([\w./-]+)", text)):
        assert word in SUBCOMMANDS or (REPO / word).is_file(), f"README runs python -m sweep {word}"
    r = run_sweep_cli("hosts", "--help", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "--address" in r.stdout and "--resource" in r.stdout
    r = run_sweep_cli("--help", timeout=120)
    assert r.returncode == 0 and "--fake" in r.stdout and "--dry-run" in r.stdout
    for flag in ("--plan", "--retry-failed"):
        assert flag in r.stdout and flag in text
    r = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and all(v in r.stdout for v in re.findall(r"\bSWEEP_[A-Z_]+\b", text))
