"""The bad-input suite: each mistake gets one clear message naming the culprit and the fix, and a
documented exit code, before anything expensive starts (no traceback; Ray is never imported for a bad
experiment: a stand-in ``ray`` package on the path would say so).

docs/faults.md's "bad input" table lists these cases; paths and ports, which only a host can check, are
in tests/host/test_point.py (pre-flight)."""

import json
import os
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
        f"open({str(mark)!r}, 'w').close()\nraise ImportError('ray imported for bad input')\n"
    )
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
    "override not valid YAML": (
        K26,
        ["benchmark.concurrency.levels=[1,4"],
        2,
        ["levels=[1,4", "not valid YAML", "close every bracket"],
    ),
    "override list without brackets": (
        K26,
        ["benchmark.concurrency.levels=1,4,16"],
        2,
        ["takes a list", "'benchmark.concurrency.levels=[1,4,16]'"],
    ),
    "axis values without brackets": (
        K26.replace("values: [1, 2, 3, 5]", "values: 1,2,3,5"),
        [],
        2,
        ["grid.axes.steps", "one value, not a list", "values: [1,2,3,5]"],
    ),
    "axis values without brackets in a flow mapping": (
        K26.replace(
            "    steps:\n      flag: speculative-num-steps\n      values: [1, 2, 3, 5]",
            "    steps: {flag: speculative-num-steps, values: 1,2,4}",
        ),
        [],
        2,
        ["grid.axes.steps.2", "a number where a key belongs", "in brackets"],
    ),
    "empty grid": ("name: x\nserver: {model_path: /m}\n", [], 2, ["grid.axes is empty"]),
    "everything excluded": (
        K26.replace("  derived:", "  exclude: [{nccl: '*'}]\n  derived:"),
        [],
        2,
        ["grid is empty"],
    ),
    "invalid speculative combination": (
        K26.replace("            speculative-eagle-topk: 1  # a chain drafter\n", ""),
        [],
        3,
        ["steps-without-topk", "--skip-invalid"],
    ),
    "draft tree too small": (
        K26.replace("speculative-num-draft-tokens: ${add:${steps},1}", "speculative-num-draft-tokens: 16").replace(
            "speculative-eagle-topk: 1  # a chain drafter", "speculative-eagle-topk: 2"
        ),
        [],
        3,
        ["draft-tree-too-small"],
    ),
    "misspelt SGLang flag": (
        K26.replace("enable-metrics: true", "enable-metric: true"),
        [],
        3,
        ["did you mean --enable-metrics"],
    ),
    "reserved flag in flags": (
        K26.replace("  flags:\n", "  flags:\n    port: 1\n", 1),
        [],
        2,
        ["--port", "server.port"],
    ),
    "unknown workload kind": (
        K26.replace("  prompts: coding", "  workload: sharegp:chat.json"),
        [],
        2,
        ["line 71: benchmark.workload 'sharegp:chat.json': unknown kind 'sharegp'"],
    ),
    "missing workload file": (
        K26,
        ["benchmark.workload=sharegpt:/nonexistent/chat.json"],
        2,
        ["sharegpt workload file '/nonexistent/chat.json' not found"],
    ),
    "bad flag value, baselines included": (
        K26,
        ["server.flags.max-running-requests=lots"],
        3,
        ["drafter=none,nccl=default", "bad-flag-value", "argument --max-running-requests: invalid int value: 'lots'"],
    ),
    "a level given twice": (
        K26,
        ["benchmark.concurrency.levels=[4,4,1]"],
        2,
        ["command-line override (benchmark.concurrency.levels=[4,4,1])", "4 is given twice"],
    ),
    "an axis value holding =": (
        K26.replace("        tuned:", "        'a=b':"),
        [],
        2,
        ["grid.axes.nccl: value 'a=b'"],
    ),
    "a derived value over a word": (
        K26,
        ["grid.axes.steps.values=[1,2,three]"],
        2,
        ["grid.derived.speculative-num-draft-tokens", "'three'", "axis 'steps'"],
    ),
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


@pytest.mark.parametrize(
    "name, data, says",
    [
        (
            "empty conversations",
            b'[{"conversations": [{"from": "human", "value": "hi"}]},\n {"conversations": []}]',
            'line 2 (record 2 of the array): empty "conversations"',
        ),
        (
            "not UTF-8",
            b'{"conversations": [{"from": "human", "value": "hi"}]}\n\n{"conversations": [{"from": "human", '
            b'"value": "caf\xe9"}]}\n',
            "line 3: not UTF-8 text",
        ),
    ],
)
def test_bad_workload_file(name, data, says, tmp_path):
    """A bad workload file stops the sweep before anything runs, naming the file and line."""
    chat = tmp_path / "chat.json"
    chat.write_bytes(data)
    env, ray_mark = no_ray(tmp_path)
    r = cli(
        "experiments/k26_eagle.yaml",
        "--dry-run",
        f"benchmark.workload=sharegpt:{chat}",
        f"results_dir={tmp_path / 'res'}",
        env=env,
    )
    check(r, 2, f"workload file {chat}, {says}")
    assert not (tmp_path / "res").exists() and not ray_mark.exists()


def test_missing_experiment_file(tmp_path):
    check(cli(str(tmp_path / "nope.yaml")), 2, "not found")


def test_unreachable_cluster(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    r = cli("experiments/k26_eagle.yaml", f"results_dir={tmp_path / 'res'}", env={"RAY_ADDRESS": f"127.0.0.1:{port}"})
    check(r, 4, "no Ray cluster answers", "--dry-run")
    assert not (tmp_path / "res").exists()


# Ray's address="auto" finds a cluster two ways: the address in <temp dir>/ray/ray_current_cluster
# (the temp dir is RAY_TMPDIR, else TMPDIR, else /tmp), and failing that any raylet in the process
# table (ray._private.services.find_gcs_addresses reads every process's command line). So a process
# alone on the machine gets a RAY_TMPDIR of its own, and that scan finds none of the raylets others
# run (this test starts none). It fails loudly (a traceback) if Ray no longer has that function.
NO_OTHER_RAYLETS = """
import importlib.abc, importlib.util, sys


class _NoOtherRaylets(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "ray._private.services":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            scan = module.find_gcs_addresses  # AttributeError, a traceback, if Ray renamed it

            def find_gcs_addresses():
                return frozenset()

            find_gcs_addresses.cache_clear = scan.cache_clear  # ray.init and shutdown call it
            module.find_gcs_addresses = find_gcs_addresses

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _NoOtherRaylets())
"""


def alone_on_the_machine(tmp_path: Path) -> dict:
    """An environment in which Ray finds no cluster started by anyone else on this machine."""
    site = tmp_path / "alone"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_OTHER_RAYLETS)
    ray_tmp = tmp_path / "raytmp"
    ray_tmp.mkdir()
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"RAY_TMPDIR": str(ray_tmp), "PYTHONPATH": path}


def test_no_cluster_at_all(tmp_path):
    """No RAY_ADDRESS and no cluster: exit 4, and try --dry-run. Whatever other Ray runs on this
    machine (another test run, a dry run, the netns tier's nodes) is kept out of sight."""
    r = cli(
        "experiments/k26_eagle.yaml",
        f"results_dir={tmp_path / 'res'}",
        env={"RAY_ADDRESS": "", **alone_on_the_machine(tmp_path)},
    )
    check(r, 4, "no Ray cluster", "--dry-run")


def test_results_dir_of_another_experiment(tmp_path):
    res = tmp_path / "res"
    res.mkdir()
    (res / "sweep.json").write_text(json.dumps({"experiment": "glm5_eagle_tree", "mode": "real"}))
    check(
        cli("experiments/k26_eagle.yaml", "--dry-run", f"results_dir={res}"),
        5,
        "belongs to experiment 'glm5_eagle_tree'",
    )


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


def test_json_without_plan_starts_nothing(tmp_path):
    env, ray_mark = no_ray(tmp_path)
    r = cli("experiments/k26_eagle.yaml", "--json", f"results_dir={tmp_path / 'res'}", env=env)
    check(r, 2, "--json", "needs --plan")
    assert not ray_mark.exists() and not (tmp_path / "res").exists()


@pytest.mark.parametrize("plan", [True, False], ids=["plan", "dry-run"])
def test_results_dir_that_is_a_file(tmp_path, plan):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("precious")
    for where in (a_file, a_file / "below"):
        r = cli("experiments/k26_eagle.yaml", *(["--plan"] if plan else ["--dry-run"]), f"results_dir={where}")
        check(r, 5, "is a file, not a directory", "results_dir=")
    assert a_file.read_text() == "precious"


@pytest.mark.parametrize("plan", [True, False], ids=["plan", "dry-run"])
def test_results_dir_under_a_missing_folder(tmp_path, plan):
    env, ray_mark = no_ray(tmp_path)
    r = cli(
        "experiments/k26_eagle.yaml",
        *(["--plan"] if plan else ["--dry-run"]),
        f"results_dir={tmp_path / 'reslts' / 'x'}",
        env=env,
    )
    check(r, 5, f"{tmp_path / 'reslts'} does not exist (nothing was created)")
    assert not (tmp_path / "reslts").exists() and not ray_mark.exists()


def test_report_on_a_file(tmp_path):
    a_file = tmp_path / "report.txt"
    a_file.write_text("x")
    check(cli("report", str(a_file)), 5, "is a file, not a results directory")


def test_report_on_a_folder_no_sweep_wrote_writes_nothing(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    check(cli("report", str(empty)), 5, "not a sweep's results directory", "it is empty")
    assert not any(empty.iterdir()), "the report wrote into a folder that is not a sweep's"
    # the results/ folder itself: a folder of sweeps, each named
    root = tmp_path / "results"
    for name in ("a-dryrun", "b-dryrun"):
        (root / name).mkdir(parents=True)
        (root / name / "sweep.json").write_text(json.dumps({"experiment": name, "mode": "dry-run"}))
    (root / "README.md").write_text("results land here")
    r = cli("report", str(root))
    check(r, 5, "holds 2 sweeps", str(root / "a-dryrun"), f"e.g. {root / 'a-dryrun'}")
    assert sorted(p.name for p in root.iterdir()) == ["README.md", "a-dryrun", "b-dryrun"]
    check(cli("query", str(root), "select 1"), 5, "not a sweep's results directory")


def test_report_with_a_bad_slo_is_an_analysis_error(tmp_path):
    check(cli("report", str(tmp_path), "--slo", "ttft<2"), 7, "'ttft<2' is not a limit")
    check(cli("report", str(tmp_path), "--slo", "a: ttft_p90<=2s", "--slo", "a: ttft_p90<=3s"), 7, "more than once")


@pytest.mark.parametrize(
    "args, hint",
    [
        (["experiments/k26_eagle.yaml", "--dryrun"], "did you mean --dry-run?"),
        (["experiments/k26_eagle.yaml", "--plan", "--retry-faild"], "did you mean --retry-failed?"),
        (["report", "results", "--vss", "x"], "did you mean --vs?"),
    ],
)
def test_a_mistyped_option_gets_did_you_mean(args, hint):
    r = cli(*args)
    assert r.returncode == 2 and hint in r.stderr, r.stderr


def test_no_arguments_says_what_to_run():
    r = cli()
    assert r.returncode == 2, r.stderr
    assert "name an experiment file, e.g. python -m sweep experiments/k26_eagle.yaml" in r.stderr, r.stderr
    assert "key=value" not in r.stderr.splitlines()[-1], "overrides are optional, not required"


def test_an_error_prints_ids_and_paths_in_brackets_whole(tmp_path):
    """An error names its culprit as it is: ``[deadbeef]`` in a message is not console markup."""
    path = tmp_path / "[deadbeef]" / "exp.yaml"
    check(cli(str(path)), 2, f"{path}", "not found")
