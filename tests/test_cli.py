import functools
import json

from tests.conftest import run_sweep_cli


@functools.cache
def _plan(*args: str):
    """``python -m sweep experiments/k26_eagle.yaml --plan *args``, run once for the tests here that read it."""
    return run_sweep_cli("experiments/k26_eagle.yaml", "--plan", *args)


def test_plan_table():
    r = _plan()
    assert r.returncode == 0, r.stderr
    assert "18 points" in r.stdout and "k26_public" in r.stdout


def test_the_plan_says_a_dry_runs_ids_differ_and_how_to_see_them():
    """The scaled benchmark is part of a point's id: a dry run's log is not under a --plan id."""

    def ids(*args):
        r = _plan("--json", *args)
        return [p["id"] for p in json.loads(r.stdout)["points"]]

    assert set(ids()).isdisjoint(ids("--dry-run"))
    cluster = _plan()
    assert "these ids are a real run's; a dry run's differ" in cluster.stdout
    assert "add --dry-run to --plan" in cluster.stdout
    assert "a dry run's differ" not in _plan("--dry-run").stdout


def test_plan_json():
    r = _plan("--json")
    doc = json.loads(r.stdout)
    assert doc["experiment"] == "k26_eagle" and len(doc["points"]) == 18
    assert all(p["status"] == "ok" for p in doc["points"])


def test_bad_config_exit_2_no_traceback():
    r = run_sweep_cli("experiments/k26_eagle.yaml", "--plan", "server.tp_szie=8")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "tp_size" in r.stderr and "fix:" in r.stderr


def test_invalid_points_exit_3(write_yaml):
    path = write_yaml(
        open("experiments/k26_eagle.yaml").read().replace("speculative-eagle-topk: 1  # a chain drafter", "")
    )
    r = run_sweep_cli(str(path), "--plan", "--json")
    assert r.returncode == 3
    doc = json.loads(r.stdout)
    assert sum(p["status"] == "invalid" for p in doc["points"]) == 8
    r = run_sweep_cli(str(path), "--dry-run")
    assert r.returncode == 3 and "steps-without-topk" in r.stderr and "--skip-invalid" in r.stderr


def test_plan_with_policy_confirm_lists_the_phase_and_refuses_the_launch_sglang_would(write_yaml):
    ok = run_sweep_cli("experiments/k26_eagle_adaptive.yaml", "--plan")
    assert ok.returncode == 0, ok.stderr
    assert (
        "policy confirmation (policy.confirm): after the grid" in ok.stdout and "known only after the grid" in ok.stdout
    )
    assert "drafter=k26_100k,steps=adaptive,nccl=tuned: ok by SGLang rules" in ok.stdout
    as_json = json.loads(run_sweep_cli("experiments/k26_eagle_adaptive.yaml", "--plan", "--json").stdout)
    assert as_json["confirm"]["after_grid"] is True and len(as_json["confirm"]["probes"]) == 4
    # the reference experiment (SGLang 0.5.10): its grid is valid, the policy's server is not
    old = run_sweep_cli("experiments/k26_eagle.yaml", "--plan", "policy.confirm=true")
    assert old.returncode == 3 and "would fail in SGLang" in old.stdout
    assert "unrecognized arguments: --speculative-adaptive" in old.stdout
    run = run_sweep_cli("experiments/k26_eagle.yaml", "--dry-run", "policy.confirm=true")
    assert (
        run.returncode == 3
        and "policy.confirm: the policy's server would fail in SGLang; nothing was launched" in run.stderr
        and "policy.confirm=false" in run.stderr
    )


def test_confirm_needs_a_sweeps_results_directory(tmp_path):
    r = run_sweep_cli("confirm", str(tmp_path / "nothing"))
    assert r.returncode == 5 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    bench = tmp_path / "bench"
    (bench / "levels").mkdir(parents=True)
    (bench / "levels" / "x.parquet").write_bytes(b"")  # a bench --out directory: tables, no experiment
    r = run_sweep_cli("confirm", str(bench))
    assert r.returncode == 5 and "no grid to derive a policy from" in r.stderr, r.stderr
    h = run_sweep_cli("confirm", "--help")
    assert h.returncode == 0 and "--retry-failed" in h.stdout and "--only" in h.stdout
