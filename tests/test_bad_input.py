"""The bad-input suite: each mistake gets one clear message naming the culprit and the fix, and a
documented exit code, before anything expensive starts (no traceback; Ray is never imported for a bad
experiment: a stand-in ``ray`` package on the path would say so).

The README's "Bad input" table lists these cases; paths and ports, which only a host can check, are
in tests/host/test_point.py (pre-flight)."""

import json
import socket
from pathlib import Path

import pytest

from tests.conftest import REPO, run_sweep_cli

K26 = (REPO / "experiments" / "k26_eagle.yaml").read_text()


def cli(*args, env=None, timeout=60):
    r = run_sweep_cli(*args, env=env, timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def no_ray(tmp_path: Path) -> tuple[dict, Path]:
    """An environment whose ``import ray`` leaves a mark and fails: the proof that nothing reached
    the cluster layer (starting Ray is the first expensive step of every sweep)."""
    stand_in = tmp_path / "no-ray"
    (stand_in / "ray").mkdir(parents=True)
    mark = tmp_path / "ray-was-imported"
    (stand_in / "ray" / "__init__.py").write_text(
        f"open({str(mark)!r}, 'w').close()\nraise ImportError('ray imported for bad input')\n")
    return {"PYTHONPATH": str(stand_in)}, mark


def check(r, code, *phrases):
    assert r.returncode == code, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    for phrase in phrases:
        assert phrase in r.stderr, (phrase, r.stderr)
    assert "fix:" in r.stderr


CASES = {
    "malformed YAML": ("name: x\nserver: {model_path: /m\n  tp_size: [8,\n", [], 2, ["not valid YAML", "line"]),
    "not a mapping": ("- just\n- a list\n", [], 2, ["must be a YAML mapping"]),
    "unknown key": (K26.replace("  tp_size: 8", "  tp_size: 8\n  gpus: 8"), [], 2, ["server.gpus", "valid keys"]),
    "misspelt key": (K26.replace("    levels: [", "    levles: ["), [], 2, ["levles", "did you mean 'levels'"]),
    "wrong type": (K26.replace("  tp_size: 8", "  tp_size: eight"), [], 2, ["server.tp_size", "Integer"]),
    "bad override": (K26, ["benchmark.single_stream.runs=many"], 2, ["runs", "override"]),
    "override not key=value": (K26, ["benchmark"], 2, ["not key=value"]),
    "empty grid": ("name: x\nserver: {model_path: /m}\n", [], 2, ["grid.axes is empty"]),
    "everything excluded": (K26.replace("  derived:", "  exclude: [{nccl: '*'}]\n  derived:"), [], 2, ["grid is empty"]),
    "invalid speculative combination": (K26.replace("            speculative-eagle-topk: 1  # a chain drafter\n", ""), [], 3,
                                        ["steps-without-topk", "--skip-invalid"]),
    "draft tree too small": (K26.replace("speculative-num-draft-tokens: ${add:${steps},1}",
                                         "speculative-num-draft-tokens: 16").replace(
        "speculative-eagle-topk: 1  # a chain drafter", "speculative-eagle-topk: 2"), [], 3, ["draft-tree-too-small"]),
    "misspelt SGLang flag": (K26.replace("enable-metrics: true", "enable-metric: true"), [], 3, ["did you mean --enable-metrics"]),
    "reserved flag in flags": (K26.replace("  flags:\n", "  flags:\n    port: 1\n", 1), [], 2, ["--port", "server.port"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_experiment(name, tmp_path):
    text, overrides, code, phrases = CASES[name]
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    env, ray_mark = no_ray(tmp_path)
    check(cli(str(path), *overrides, f"results_dir={tmp_path / 'res'}", env=env), code, *phrases)
    assert not (tmp_path / "res").exists(), "nothing may be written for bad input"
    assert not ray_mark.exists(), "bad input reached the cluster layer (Ray was imported)"


def test_missing_experiment_file(tmp_path):
    check(cli(str(tmp_path / "nope.yaml")), 2, "not found")


def test_unreachable_cluster(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    r = cli("experiments/k26_eagle.yaml", f"results_dir={tmp_path / 'res'}", env={"RAY_ADDRESS": f"127.0.0.1:{port}"})
    check(r, 4, "no Ray cluster answers", "--dry-run")
    assert not (tmp_path / "res").exists()


def test_no_cluster_at_all(tmp_path):
    r = cli("experiments/k26_eagle.yaml", f"results_dir={tmp_path / 'res'}", env={"RAY_ADDRESS": ""})
    check(r, 4, "no Ray cluster", "--dry-run")


def test_results_dir_of_another_experiment(tmp_path):
    res = tmp_path / "res"
    res.mkdir()
    (res / "sweep.json").write_text(json.dumps({"experiment": "glm5_eagle_tree", "mode": "real"}))
    check(cli("experiments/k26_eagle.yaml", "--dry-run", f"results_dir={res}"), 5, "belongs to experiment 'glm5_eagle_tree'")


def test_results_dir_of_a_real_run_for_a_dry_run(tmp_path):
    res = tmp_path / "res"
    res.mkdir()
    (res / "sweep.json").write_text(json.dumps({"experiment": "k26_eagle", "mode": "real"}))
    check(cli("experiments/k26_eagle.yaml", "--dry-run", f"results_dir={res}"), 5, "never mix")


def test_results_dir_not_ours(tmp_path):
    res = tmp_path / "res"
    res.mkdir()
    (res / "thesis.tex").write_text("precious")
    check(cli("experiments/k26_eagle.yaml", "--dry-run", f"results_dir={res}"), 5, "not written by a sweep")
    assert (res / "thesis.tex").read_text() == "precious"


def test_report_on_missing_directory(tmp_path):
    check(cli("report", str(tmp_path / "nothing")), 5, "does not exist")
