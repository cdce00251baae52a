"""The cluster definitions under cluster/, checked without a cluster.

What a cluster would tell us late (a host that never gets a grid point because it advertises another
resource name, a launcher config Ray rejects, a worker started outside the venv, auth left off) is
checked here early: the YAML files parse and have the fields their tools require, every file
advertises the host resource the experiments ask for, the bootstrap script passes ``bash -n`` and
shellcheck and, run against a stand-in ``ray``, passes exactly the flags the design needs, the
launcher's own commands, run as ``ray up`` runs them, start every host with token authentication,
the commands the README shows exist, and the error messages it quotes are what the code says when
that error happens (each produced by the code that raises it, with stand-ins for Ray and the GPUs).
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

from sweep.experiment import config
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
    settings |= {
        (e.cluster.host_resource, e.cluster.gpus_per_host)
        for e in map(config.load, EXPERIMENTS)
        if not config.is_cpu(e)
    }
    assert len(settings) == 1, f"experiments disagree on the cluster they need: {settings}"
    return settings.pop()


RESOURCE, GPUS = _cluster_settings()


# ---- the YAML files --------------------------------------------------------------------------


def test_every_yaml_file_parses():
    files = sorted(CLUSTER.glob("*.yaml"))
    assert {p.name for p in files} >= {LAUNCHER.name, KUBERAY.name}
    for p in files:
        _load(p)


def _assigned(command: str, name: str) -> list[str]:
    """The values a shell line assigns or exports to ``name``, word by word as the shell splits it;
    quoted text is split again (``echo 'export X=1' >> ~/.bashrc`` assigns it in every later shell)."""
    found = []
    for word in shlex.split(command):
        if any(c.isspace() for c in word):
            found += _assigned(word, name)
        elif word.startswith(name + "="):
            found.append(word.split("=", 1)[1])
    return found


def test_no_cluster_file_turns_auth_off():
    """Ray's token authentication as each file leaves it. KubeRay: ``authOptions`` asks for tokens
    (the operator then sets the mode in every Ray container) and no container of any group sets
    another mode over it. The launcher config: no command of any stage sets another mode (what its
    commands do when run: test_launcher_commands_start_every_host_with_token_auth). The bootstrap
    script turns every other mode down: test_auth_cannot_be_turned_off."""
    kuberay = _load(KUBERAY)["spec"]
    assert kuberay["authOptions"]["mode"] == "token"
    for group in [kuberay["headGroupSpec"], *kuberay["workerGroupSpecs"]]:
        pod = group["template"]["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            modes = {e.get("value") for e in container.get("env", []) if e["name"] == "RAY_AUTH_MODE"}
            assert modes <= {"token"}, f"{container['name']} sets RAY_AUTH_MODE={modes}"
    launcher = _load(LAUNCHER)
    stages = [k for k in launcher if k.endswith("_commands")]
    assert {"initialization_commands", "head_start_ray_commands", "worker_start_ray_commands"} <= set(stages)
    for stage in stages:
        for command in launcher[stage]:
            assert set(_assigned(command, "RAY_AUTH_MODE")) <= {"token"}, f"{stage}: {command}"


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
    assert not any(
        re.search(r"(^|\s)ray start", c) for c in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"]
    )
    # that the token reaches every host and shells there are authenticated is what the commands do
    # when run: test_launcher_commands_start_every_host_with_token_auth


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

    def __init__(self, tmp: Path, venv: Path | None = None):
        self.home = tmp / "home"
        self.venv = venv or tmp / "venv"
        self.log = tmp / "log"
        for d in (self.home, self.venv / "bin", self.log):
            d.mkdir(parents=True)
        (self.venv / "bin" / "activate").write_text(
            f'export VIRTUAL_ENV="{self.venv}"\nexport PATH="$VIRTUAL_ENV/bin:$PATH"\n'
        )
        ray = self.venv / "bin" / "ray"
        ray.write_text(STUB_RAY)
        ray.chmod(0o755)
        # a wrapper, not a symlink: a symlinked venv python would lose its venv's site-packages
        python = self.venv / "bin" / "python"
        python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        python.chmod(0o755)

    def token(self) -> Path:
        return self.home / ".ray" / "auth_token"

    def env(self, **extra: str) -> dict[str, str]:
        base = {
            k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SWEEP_", "NCCL_", "VIRTUAL_ENV", "HF_"))
        }
        return {**base, "HOME": str(self.home), "STUB_LOG": str(self.log), "PYTHONPATH": str(REPO), **extra}

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SCRIPT), *args],
            capture_output=True,
            text=True,
            env=self.env(**{"SWEEP_VENV": str(self.venv), **env}),
            timeout=60,
        )

    def shell(self, command: str, **env: str) -> subprocess.CompletedProcess:
        """A command line in a fresh bash on this stand-in host (its HOME, no SWEEP_VENV)."""
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=self.env(**env), timeout=60)

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
    assert boot.ray_args() == [
        "start",
        "--head",
        "--port=6379",
        "--include-dashboard=true",
        "--dashboard-host=127.0.0.1",
        "--dashboard-port=8265",
        "--num-gpus=0",
        "--object-store-memory=2147483648",
    ]
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
    r = boot.run(
        "worker", "10.0.0.10", "--", "--node-ip-address=10.0.0.11", HF_HOME="/models/hf-cache", NCCL_ALGO="Ring"
    )
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
@pytest.mark.parametrize("role", ["head", "worker"])
def test_launcher_commands_start_every_host_with_token_auth(tmp_path, role):
    """``ray up``'s own commands for a host of each role, run the way it runs them over SSH
    (``source ~/.bashrc; export ... && (CMD)``, ray/autoscaler/_private/command_runner.py) on a
    stand-in host laid out as its file_mounts leave it: the repository at ~/sweep (its venv a
    stand-in whose ``ray`` records how it was started) and the token at ~/.ray/auth_token."""
    cfg = _load(LAUNCHER)
    user = cfg["auth"]["ssh_user"]
    assert {f"/home/{user}/sweep", f"/home/{user}/.ray/auth_token"} <= set(cfg["file_mounts"])
    host = Bootstrap(tmp_path, venv=tmp_path / "home" / "sweep" / ".venv")
    (host.home / "sweep" / "cluster").mkdir(parents=True)
    (host.home / "sweep" / "cluster" / SCRIPT.name).symlink_to(SCRIPT)
    host.token().parent.mkdir()
    host.token().write_text("the-clusters-token")
    for command in cfg["initialization_commands"] * 2:  # run again on every later `ray up`
        r = host.shell(command)
        assert r.returncode == 0, (command, r.stderr)
    assert stat.S_IMODE(host.token().stat().st_mode) == 0o600
    # every later shell on the host (ray exec, a driver started by hand) is authenticated, once
    assert host.shell('source ~/.bashrc; printf %s "$RAY_AUTH_MODE"').stdout == "token"
    assert (host.home / ".bashrc").read_text().count("RAY_AUTH_MODE") == 1
    for command in cfg[f"{role}_start_ray_commands"]:
        r = host.shell(
            f"source ~/.bashrc; export OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore && ({command})", RAY_HEAD_IP="10.0.0.10"
        )
        assert r.returncode == 0, (command, r.stderr)
    args, env = host.ray_args(), host.ray_env()
    assert args[0] == "start" and env["RAY_AUTH_MODE"] == "token"
    assert env["VIRTUAL_ENV"] == str(host.venv)  # the repository's venv, found from the script's place
    assert "the-clusters-token" == host.token().read_text()  # the head used the mounted token, made none
    if role == "head":
        assert "--head" in args and _resources_arg(args) is None and "--num-gpus=0" in args
    else:
        assert "--address=10.0.0.10:6379" in args
        assert _resources_arg(args) == {RESOURCE: 1} and f"--num-gpus={GPUS}" in args


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, env, culprit",
    [
        (["worker", "10.0.0.10; reboot"], {}, "is not HOST or HOST:PORT"),
        (["head"], {"SWEEP_HOST_RESOURCE": 'gpu_host", "GPU": 99, "x'}, "SWEEP_HOST_RESOURCE"),
        (["head"], {"SWEEP_GPUS_PER_HOST": "$(id)"}, "SWEEP_GPUS_PER_HOST"),
        (["head"], {"SWEEP_OBJECT_STORE_BYTES": "1000"}, "SWEEP_OBJECT_STORE_BYTES"),
        (["head"], {"SWEEP_DASHBOARD_HOST": "0.0.0.0 --block"}, "SWEEP_DASHBOARD_HOST"),
        (["head", "extra"], {}, "unexpected argument"),
        (["primary"], {}, "head or worker"),
    ],
)
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


# The troubleshooting tables (docs/faults.md, cluster/README.md; and any other page) quote error messages. Each is produced
# here by the code that raises it, in the situation the table describes, and every quote of it must
# be how that message begins: "..." in a quote stands for any text, a placeholder (pid P, HOST:PORT)
# for what this run put there.

READMES = (REPO / "README.md", README, *sorted((REPO / "docs").rglob("*.md")))
CLI_PREFIX = "error: "  # how the command line prints a SweepError's message (sweep/cli.py)


def _quotes(phrase: str) -> list[str]:
    return [q for path in READMES for q in re.findall(r"`([^`\n]+)`", path.read_text()) if phrase in q]


def _begins_as_quoted(message: str, quote: str, values: dict[str, str]) -> bool:
    quote = quote.removeprefix(CLI_PREFIX)
    for placeholder, value in values.items():
        quote = quote.replace(placeholder, value)
    return re.match(".*?".join(re.escape(part) for part in quote.split("...")), message) is not None


def _node(name: str, ip: str, **resources: float) -> dict:
    """A live node as ray.nodes() describes it."""
    return {
        "NodeID": (name.encode().hex() * 28)[:56],
        "Alive": True,
        "NodeManagerHostname": name,
        "NodeManagerAddress": ip,
        "Resources": {"CPU": 96.0, "memory": 1e12, "object_store_memory": 2e9, f"node:{ip}": 1.0, **resources},
    }


def _cluster_with(monkeypatch, nodes: list[dict]):
    """sweep.orchestrate.cluster against a stand-in Ray: ``ray.nodes()`` answers ``nodes``, and
    ``ray.init`` finds no cluster (Ray's own message), so no test here ever joins a real one."""
    from sweep.orchestrate import cluster

    def no_cluster(*args, **kwargs):
        raise ConnectionError(
            "Could not find any running Ray instance. Please specify the one to connect to "
            "by setting `--address` flag or `RAY_ADDRESS` environment variable."
        )

    monkeypatch.setattr(cluster.ray, "nodes", lambda: nodes)
    monkeypatch.setattr(cluster.ray, "init", no_cluster)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return cluster


def _no_host_resource(monkeypatch, tmp_path):
    cluster = _cluster_with(monkeypatch, [_node("head", "10.0.0.10"), _node("gpu-a", "10.0.0.11", GPU=GPUS)])
    return lambda: cluster.require_hosts(RESOURCE, GPUS), {}


def _too_few_gpus(monkeypatch, tmp_path):
    cluster = _cluster_with(monkeypatch, [_node("gpu-a", "10.0.0.11", GPU=GPUS // 2, **{RESOURCE: 1.0})])
    return lambda: cluster.require_hosts(RESOURCE, GPUS), {}


def _no_cluster_to_join(monkeypatch, tmp_path):
    cluster = _cluster_with(monkeypatch, [])
    return lambda: cluster.connect(None), {}  # RAY_ADDRESS unset: auto


def _nothing_answers(monkeypatch, tmp_path):
    from tests.conftest import free_port

    cluster = _cluster_with(monkeypatch, [])
    addr = f"127.0.0.1:{free_port()}"
    return lambda: cluster.connect(addr), {"HOST:PORT": addr}


def _no_sglang(monkeypatch, tmp_path):
    from sweep.host import preflight

    # a `python` first on PATH that cannot import sglang, whatever this interpreter has installed:
    # isolated, without site-packages
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -I -S "$@"\n')
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return lambda: preflight.sglang_version(["python", "-m", "sglang.launch_server"]), {}


def _gpus_held(monkeypatch, tmp_path):
    from sweep.core.ledger import ledger_record
    from sweep.experiment.config import ReapConfig
    from sweep.host import preflight
    from sweep.host.gpu import FakeGpus

    ledger_record(tmp_path, os.getpid(), 3, 60_000)  # a live process that is not the sweep's holds GPU 3
    probe = FakeGpus(tmp_path)
    return (
        lambda: preflight.check_gpus(probe, GPUS, ReapConfig().gpu_mem_free_mib, preflight.PreflightReport()),
        {"pid P": f"pid {os.getpid()}"},
    )


def _too_few_gpus_visible(monkeypatch, tmp_path):
    from sweep.experiment.config import ReapConfig
    from sweep.host import preflight
    from sweep.host.gpu import NoGpus

    return (
        lambda: preflight.check_gpus(NoGpus(), GPUS, ReapConfig().gpu_mem_free_mib, preflight.PreflightReport()),
        {"N GPUs": "0 GPUs"},
    )


def _flag_unknown(monkeypatch, tmp_path):
    from sweep.host import preflight

    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path))
    launcher = [sys.executable, "-m", "sweep.fake"]  # answers --help with the flags of its SGLang version
    names = ["model-path", "speculative-num-stepz"]  # a point's flag names (LaunchSpec.flags)
    return (
        lambda: preflight.check_flags(names, launcher, "0.5.10", "gpu-a"),
        {"SGLang X on H": "SGLang 0.5.10 on gpu-a", "--flag": "--speculative-num-stepz"},
    )


@pytest.mark.parametrize(
    "phrase, situation, error",
    [
        pytest.param(
            "no node of the cluster advertises the host resource",
            _no_host_resource,
            "ClusterError",
            id="no-host-resource",
        ),
        pytest.param("advertises fewer than", _too_few_gpus, "ClusterError", id="too-few-gpus"),
        pytest.param("no Ray cluster to join at", _no_cluster_to_join, "ClusterError", id="no-cluster"),
        pytest.param("no Ray cluster answers at", _nothing_answers, "ClusterError", id="nothing-answers"),
        pytest.param("SGLang is not importable with", _no_sglang, "PointFailure", id="no-sglang"),
        pytest.param("GPUs are not free", _gpus_held, "PointFailure", id="gpus-held"),
        pytest.param("GPUs visible, tp size", _too_few_gpus_visible, "PointFailure", id="gpus-missing"),
        pytest.param("does not accept", _flag_unknown, "PointFailure", id="flag-unknown"),
    ],
)
def test_readme_quotes_what_the_code_says(monkeypatch, tmp_path, phrase, situation, error):
    from sweep.core import errors

    quotes = _quotes(phrase)
    assert quotes, f"the READMEs no longer quote {phrase!r}"
    raise_it, values = situation(monkeypatch, tmp_path)
    with pytest.raises(getattr(errors, error)) as e:
        raise_it()
    if error == "ClusterError":  # the command line exits 4 printing "error: MESSAGE"
        assert e.value.exit_code == 4
        said = e.value.message
    else:  # the point fails in preflight with this reason (its failure_reason)
        assert e.value.phase == "preflight"
        said = e.value.reason
    for quote in quotes:
        assert _begins_as_quoted(said, quote, values), f"README quotes `{quote}`; the code says: {said}"


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
