"""``--local`` and CPU experiments, up to the point where a cluster would start: the config, the mode,
the results directory, the setup command, and the bad input around them."""

from __future__ import annotations

import argparse
import sys

import pytest
from rich.console import Console

from sweep.core.errors import ConfigError
from sweep.core.types import KINDS, kind
from sweep.experiment import config
from sweep.orchestrate import sweep as orch
from tests.conftest import REPO, run_sweep_cli

CPU_EXP = """
name: cpu_exp
cluster: {host_resource: cpu_host, gpus_per_host: 0}
server:
  model_path: /m
  tp_size: 1
  flags: {device: cpu}
grid:
  axes:
    drafter: {values: {none: {}}}
"""


def test_cpu_experiment_needs_no_gpus(write_yaml):
    exp = config.load(write_yaml(CPU_EXP))
    assert config.is_cpu(exp) and exp.cluster.gpus_per_host == 0
    assert orch.hosts_per_point(exp) == 1
    assert exp.local.hosts == 1 and exp.server.cpu.min_free_mem_gib > 0


def test_zero_gpus_per_host_is_only_for_cpu_servers(write_yaml):
    with pytest.raises(ConfigError, match="gpus_per_host"):
        config.load(write_yaml(CPU_EXP.replace("flags: {device: cpu}", "flags: {}")))


def test_local_mode_has_its_own_results_directory(write_yaml):
    exp = config.load(write_yaml(CPU_EXP))
    ns = argparse.Namespace(dry_run=False, local=True, fake=False)
    assert orch.mode_of(ns) == "local"
    assert str(orch.results_path(exp, "local")).endswith("cpu_exp-local")
    assert len({str(orch.results_path(exp, m)) for m in KINDS}) == len(KINDS)


def test_every_run_mode_is_one_row_of_the_kinds_table():
    """The modes' meanings as data: a dry run fakes and scales on a cluster of its own; a local run is
    real on one; the fake mode fakes on the cluster's hosts; the cluster is real (``cluster`` and
    ``plan`` are recorded as ``real``)."""
    rows = {m: (k.fake_server, k.local_cluster, k.scaled) for m, k in KINDS.items()}
    assert rows == {
        "real": (False, False, False),
        "dry-run": (True, True, True),
        "local": (False, True, False),
        "fake": (True, False, True),
    }
    assert kind("cluster") is KINDS["real"] and kind("plan") is KINDS["real"]


def test_modes_do_not_combine(write_yaml):
    r = run_sweep_cli(str(write_yaml(CPU_EXP)), "--local", "--dry-run")
    assert r.returncode == 2 and "--dry-run and --local cannot be combined" in r.stderr


def test_setup_runs_with_the_sweep_importable(tmp_path):
    out = tmp_path / "made"
    orch.run_setup(
        ["python", "-c", f"import sweep.core.errors, pathlib; pathlib.Path({str(out)!r}).write_text('ok')"],
        Console(file=open(tmp_path / "log", "w")),
    )
    assert out.read_text() == "ok"


def test_a_failed_setup_stops_before_anything_launches(tmp_path):
    with pytest.raises(ConfigError) as e:
        orch.run_setup(
            [sys.executable, "-c", "import sys; sys.stderr.write('no space left\\n'); sys.exit(4)"],
            Console(file=open(tmp_path / "log", "w")),
        )
    assert "exit 4" in e.value.message and "no space left" in e.value.message


def test_reference_cpu_experiment_plans(monkeypatch):
    monkeypatch.setenv("SGLANG_CPU_PYTHON", "/opt/sglang/bin/python")
    monkeypatch.setenv("SWEEP_TINY_MODELS", "/tmp/tiny")
    r = run_sweep_cli("experiments/cpu_tiny_spec.yaml", "--plan", "--json", cwd=REPO)
    assert r.returncode == 0, r.stderr
    import json

    plan = json.loads(r.stdout)
    points = plan["points"]
    assert len(points) >= 6 and sum(p["baseline"] for p in points) == 1
    assert all(p["argv"][0] == "/opt/sglang/bin/python" for p in points)
    algos = {p["params"].get("drafter") for p in points}
    assert algos == {"none", "ngram", "eagle3"}
    assert all("--device" in p["argv"] and "cpu" in p["argv"] for p in points)
    assert all(p["env"]["SGLANG_USE_CPU_ENGINE"] == "1" for p in points)
    eagle = [p for p in points if p["params"].get("drafter") == "eagle3"]
    assert all("/tmp/tiny/eagle3" in p["argv"] for p in eagle)
