import json

from tests.conftest import run_sweep_cli


def test_plan_table():
    r = run_sweep_cli("experiments/k26_eagle.yaml", "--plan")
    assert r.returncode == 0, r.stderr
    assert "18 points" in r.stdout and "k26_public" in r.stdout


def test_the_plan_says_a_dry_runs_ids_differ_and_how_to_see_them():
    """The scaled benchmark is part of a point's id: a dry run's log is not under a --plan id."""
    def ids(*args):
        r = run_sweep_cli("experiments/k26_eagle.yaml", "--plan", "--json", *args)
        return [p["id"] for p in json.loads(r.stdout)["points"]]

    assert set(ids()).isdisjoint(ids("--dry-run"))
    cluster = run_sweep_cli("experiments/k26_eagle.yaml", "--plan")
    assert "these ids are a real run's; a dry run's differ" in cluster.stdout
    assert "add --dry-run to --plan" in cluster.stdout
    assert "a dry run's differ" not in run_sweep_cli("experiments/k26_eagle.yaml", "--plan", "--dry-run").stdout


def test_plan_json():
    r = run_sweep_cli("experiments/k26_eagle.yaml", "--plan", "--json")
    doc = json.loads(r.stdout)
    assert doc["experiment"] == "k26_eagle" and len(doc["points"]) == 18
    assert all(p["status"] == "ok" for p in doc["points"])


def test_bad_config_exit_2_no_traceback():
    r = run_sweep_cli("experiments/k26_eagle.yaml", "--plan", "server.tp_szie=8")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "tp_size" in r.stderr and "fix:" in r.stderr


def test_invalid_points_exit_3(write_yaml):
    path = write_yaml(open("experiments/k26_eagle.yaml").read().replace("speculative-eagle-topk: 1  # a chain drafter", ""))
    r = run_sweep_cli(str(path), "--plan", "--json")
    assert r.returncode == 3
    doc = json.loads(r.stdout)
    assert sum(p["status"] == "invalid" for p in doc["points"]) == 8
    r = run_sweep_cli(str(path), "--dry-run")
    assert r.returncode == 3 and "steps-without-topk" in r.stderr and "--skip-invalid" in r.stderr
