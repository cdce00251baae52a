"""A ``speculative-adaptive-config`` path is read where the server runs (SGLang's ServerArgs opens
it before anything loads): where that is this machine (a dry run, ``--local``: the plan's files are
local; the host's pre-flight), a missing file is SGLang's error, refused before any point runs and
named by its key; for a cluster whose hosts may have the file, ``--plan`` says it checks it there."""

from __future__ import annotations

import json

from sweep.core import BenchSettings
from sweep.sglang import rules
from tests.conftest import run_sweep_cli

EXP = """
name: adaptive-missing
server: {model_path: /m, tp_size: 1, sglang_version: "0.5.23", architecture: LlamaForCausalLM, gpu: H200}
grid:
  axes:
    drafter:
      values:
        none: {}
        d1:
          flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d1, speculative-eagle-topk: 1,
                  speculative-num-steps: 3, speculative-num-draft-tokens: 4, speculative-adaptive: true,
                  speculative-adaptive-config: /nonexistent/adaptive.json}
benchmark: {concurrency: {levels: [1]}, server_metrics: false}
"""


def test_a_dry_run_refuses_a_missing_adaptive_config_naming_its_key(write_yaml, tmp_path):
    exp = write_yaml(EXP)
    res = tmp_path / "res"
    r = run_sweep_cli(str(exp), "--plan", "--json", "--dry-run", f"results_dir={res}", timeout=60)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    d1 = next(p for p in json.loads(r.stdout)["points"] if p["label"] == "drafter=d1")
    assert d1["status"] == "invalid"
    assert any("adaptive-config-missing" in e and "fix speculative-adaptive-config" in e for e in d1["errors"]), d1
    assert not any("model_path" in e for e in d1["errors"])
    run = run_sweep_cli(str(exp), "--dry-run", f"results_dir={res}", timeout=60)
    assert run.returncode == 3, run.stdout[-3000:] + run.stderr[-3000:]
    assert "/nonexistent/adaptive.json" in run.stderr and "speculative-adaptive-config" in run.stderr
    assert not res.exists(), "a refused run wrote its results directory"


def test_a_cluster_plan_leaves_it_to_the_hosts_with_a_warning(write_yaml, tmp_path):
    r = run_sweep_cli(str(write_yaml(EXP)), "--plan", "--json", f"results_dir={tmp_path / 'res'}", timeout=60)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    d1 = next(p for p in json.loads(r.stdout)["points"] if p["label"] == "drafter=d1")
    assert d1["status"] == "ok" and any("cannot be read here" in w for w in d1["warnings"]), d1


def test_the_hosts_pre_flight_refuses_it_naming_its_key():
    flags = {
        "model-path": "/m",
        "tp-size": 1,
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": "/d1",
        "speculative-eagle-topk": 1,
        "speculative-num-steps": 3,
        "speculative-num-draft-tokens": 4,
        "speculative-adaptive": True,
        "speculative-adaptive-config": "/nonexistent/adaptive.json",
    }
    found = rules.host_check(flags, BenchSettings(), version="0.5.23", gpu="H200", architecture="LlamaForCausalLM")
    errors = [f for f in found if f.level == rules.ERROR]
    assert [f.rule for f in errors] == ["adaptive-config-missing"], found
    assert "speculative-adaptive-config" in errors[0].fix and "FileNotFoundError" in str(errors[0])
