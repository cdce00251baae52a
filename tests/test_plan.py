import json

import pytest

from sweep.core.errors import ConfigError, PlanError
from sweep.experiment import config, plan
from tests.test_grid import BASE


def build(write_yaml, text=BASE, *overrides):
    return plan.build(config.load(write_yaml(text), list(overrides)))


def test_argv_and_env(write_yaml):
    p = build(write_yaml, BASE, "server.flags.enable-metrics=true", "server.env.HF_HOME=/h")
    pt = [x for x in p.points if x.label == "drafter=d1,steps=2,nccl=tuned"][0]
    assert pt.argv[:3] == ["python", "-m", "sglang.launch_server"]
    a = pt.argv
    assert a[a.index("--model-path") + 1] == "/m" and a[a.index("--tp-size") + 1] == "8"
    assert a[a.index("--speculative-num-steps") + 1] == "2"
    assert "--enable-metrics" in a and a[a.index("--enable-metrics") + 1].startswith("--")
    assert pt.env == {"HF_HOME": "/h", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}


def test_ids_stable_under_axis_and_key_reordering(write_yaml):
    a = build(write_yaml, BASE)
    reordered = BASE.replace(
        """    steps:
      flag: speculative-num-steps
      values: [1, 2, 3]
""",
        "",
    ).replace(
        "    nccl:\n",
        """    steps:
      values: [3, 1, 2]
      flag: speculative-num-steps
    nccl:
""",
    )
    b = build(write_yaml, reordered)
    ids_a = {x.id for x in a.points}
    assert ids_a == {x.id for x in b.points}
    assert len(ids_a) == len(a.points)


def test_id_changes_with_what_changes_the_result(write_yaml):
    ids = {x.id for x in build(write_yaml).points}
    assert ids.isdisjoint({x.id for x in build(write_yaml, BASE, "benchmark.concurrency.max_tokens=256").points})
    assert ids.isdisjoint({x.id for x in build(write_yaml, BASE, "server.env.NCCL_DEBUG=INFO").points})
    assert ids == {x.id for x in build(write_yaml, BASE, "server.port=31000").points}  # placement only
    assert ids == {x.id for x in build(write_yaml, BASE.replace("name: g", "name: other")).points}


def test_baselines_first_and_matched_by_env(write_yaml):
    p = build(write_yaml)
    assert [x.baseline for x in p.points[:2]] == [True, True]
    by_label = {x.label: x for x in p.points}
    assert by_label["drafter=d1,steps=1,nccl=tuned"].baseline_id == by_label["drafter=none,nccl=tuned"].id
    assert by_label["drafter=d1,steps=1,nccl=default"].baseline_id == by_label["drafter=none,nccl=default"].id
    assert not any("baseline-differs" in w for x in p.points for w in x.warnings)


def test_baseline_env_mismatch_warns(write_yaml):
    # the baseline only runs with default NCCL: tuned points get compared with it, with a warning
    p = build(write_yaml, BASE + "  exclude:\n    - {drafter: none, nccl: tuned}\n")
    tuned = [x for x in p.points if x.params.get("nccl") == "tuned"]
    assert tuned and all(any("baseline-differs" in w and "NCCL_PROTO" in w for w in x.warnings) for x in tuned)


def test_no_baseline_is_a_plan_warning(write_yaml):
    p = build(write_yaml, BASE + "  exclude:\n    - {drafter: none}\n")
    assert any("no baseline" in w for w in p.warnings)


def test_invalid_points_listed_all_at_once(write_yaml):
    text = BASE.replace("speculative-eagle-topk: 1}}\n        d2", "speculative-eagle-topk: 1}}\n        d2").replace(
        "d2: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d2, speculative-eagle-topk: 1}}",
        "d2: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d2}}",
    )
    p = build(write_yaml, text)
    assert len(p.invalid) == 6  # d2 has steps but no topk: every d2 point
    with pytest.raises(PlanError) as e:
        p.require_valid()
    assert str(e.value).count("steps-without-topk") == 6 and "--skip-invalid" in str(e.value)
    p.require_valid(skip_invalid=True)
    doc = p.to_json()
    assert {x["status"] for x in doc["points"]} == {"ok", "invalid"}


def test_skip_invalid_with_every_point_invalid_is_refused_not_an_empty_success(write_yaml):
    """--skip-invalid runs the valid points; where there are none it is the plan's error (exit 3),
    not a sweep that runs nothing and exits 0."""
    p = build(
        write_yaml,
        BASE.replace(
            "server: {model_path: /m, tp_size: 8}",
            "server: {model_path: /m, tp_size: 8, flags: {max-running-requests: lots}}",
        ),
    )
    assert p.points and len(p.invalid) == len(p.points)
    with pytest.raises(PlanError, match="--skip-invalid leaves nothing to run"):
        p.require_valid(skip_invalid=True)


def test_reserved_flag_in_base_flags(write_yaml):
    with pytest.raises(ConfigError, match="--port"):
        build(write_yaml, BASE, "server.flags.port=1")


def test_json_object_shape(write_yaml):
    doc = json.loads(json.dumps(build(write_yaml).to_json()))
    assert doc["experiment"] == "g"
    pt = doc["points"][0]
    assert {"id", "label", "params", "argv", "env", "status", "errors", "warnings"} <= set(pt)


def test_shipped_experiments_plan_clean():
    for f, n in (
        ("experiments/k26_eagle.yaml", 18),
        ("experiments/glm5_eagle_tree.yaml", 4),
        ("experiments/k26_eagle_adaptive.yaml", 18),
    ):
        p = plan.build(config.load(f))
        assert len(p.points) == n
        assert not p.invalid
        # no config.json for /models/... here: the experiments name the architecture and the GPU
        assert p.warnings == [], p.warnings
        assert not [w for x in p.points for w in x.warnings], f
        assert all(x.resolved["verdict"] == "ok" for x in p.points if not x.baseline), f
        assert not p.confirm_errors and not [w for x in p.confirm_probes for w in x.warnings], f
    # the variant for 0.5.23 confirms its policies; on 0.5.10 the policy's server is refused in SGLang's words
    adaptive = plan.build(config.load("experiments/k26_eagle_adaptive.yaml"))
    assert len(adaptive.confirm_probes) == 4
    old = plan.build(
        config.load(
            "experiments/k26_eagle_adaptive.yaml",
            ["server.sglang_version=0.5.10", "server.flags.cuda-graph-max-bs-decode=null"],
        )
    )
    assert any("unrecognized arguments: --speculative-adaptive" in e for e in old.confirm_errors), old.confirm_errors


TREE = """
name: t
server: {model_path: MODEL, tp_size: 8, sglang_version: "0.5.23", flags: {page-size: 16, max-running-requests: 64}}
grid:
  axes:
    drafter:
      values:
        none: {}
        tree: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d, speculative-eagle-topk: 4,
                       speculative-num-draft-tokens: 8}}
    steps: {flag: speculative-num-steps, values: [2]}
"""


def _tree(write_yaml, tmp_path, arch=None, *overrides):
    model = tmp_path / "target"
    model.mkdir(exist_ok=True)
    if arch:
        (model / "config.json").write_text(json.dumps({"architectures": [arch]}))
    p = build(write_yaml, TREE.replace("MODEL", str(model)), *overrides)
    return [x for x in p.points if not x.baseline][0], p


def test_architecture_from_config_json_and_gpu_from_the_experiment(write_yaml, tmp_path):
    # a tree with page size 16 and no backend: SGLang picks fa3 for DeepSeek-V3 on Hopper (fine) but
    # trtllm_mla (page 64, no trees) on Blackwell
    pt, p = _tree(write_yaml, tmp_path, "DeepseekV3ForCausalLM", "server.gpu=H200")
    assert not pt.errors and not p.warnings
    assert pt.resolved["attention_backend"] == "fa3" and pt.resolved["architecture"] == "DeepseekV3ForCausalLM"
    assert (
        pt.resolved["steps"],
        pt.resolved["topk"],
        pt.resolved["draft_tokens"],
        pt.resolved["max_running_requests"],
        pt.resolved["verdict"],
    ) == (2, 4, 8, 64, "ok")
    pt, _ = _tree(write_yaml, tmp_path, "DeepseekV3ForCausalLM", "server.gpu=B200")
    assert any(e.startswith("topk-page-size-backend") and "trtllm_mla" in e for e in pt.errors)
    # the GPU unknown: the verdict depends on it, so the host checks it
    pt, _ = _tree(write_yaml, tmp_path, "DeepseekV3ForCausalLM")
    assert not pt.errors and any(w.startswith("checked-on-host") and "gpu" in w for w in pt.warnings)


def test_architecture_from_the_experiment_and_unknown(write_yaml, tmp_path):
    pt, p = _tree(write_yaml, tmp_path, None, "server.architecture=LlamaForCausalLM", "server.gpu=hopper")
    assert not pt.errors and not p.warnings and pt.resolved["attention_backend"] == "flashinfer"
    pt, p = _tree(write_yaml, tmp_path, None)
    assert any(w.startswith("architecture-unknown") for w in p.warnings) and pt.resolved["architecture"] is None
    _, p = _tree(write_yaml, tmp_path, "LlamaForCausalLM", "server.architecture=DeepseekV3ForCausalLM")
    assert any(w.startswith("architecture-mismatch") for w in p.warnings)


def test_version_from_the_experiment(write_yaml, tmp_path):
    tri = ["server.flags.attention-backend=triton", "server.gpu=H200", "server.architecture=LlamaForCausalLM"]
    pt, _ = _tree(write_yaml, tmp_path, None, *tri)  # the newest known (0.5.23) takes triton
    assert not pt.errors and pt.resolved["version"] == "0.5.23"
    pt, _ = _tree(write_yaml, tmp_path, None, *tri, "server.sglang_version=0.5.10")
    assert any(e.startswith("topk-page-size-backend") for e in pt.errors) and pt.resolved["verdict"] == "error"
    doc = json.loads(json.dumps(build(write_yaml, TREE.replace("MODEL", "/m")).to_json()))
    assert {p["resolved"] is None for p in doc["points"]} == {True, False}  # baselines have none


def test_the_servers_env_reaches_the_rules(write_yaml, tmp_path):
    """SGLang 0.5.23 reads SGLANG_ENABLE_PP_SPEC from its environment: NEXTN with pp-size 2 is an
    error without it (not a prefill node) and fine with it in server.env."""
    nextn = [
        "server.gpu=H200",
        "server.sglang_version=0.5.23",
        "server.flags.pp-size=2",
        "server.flags.speculative-algorithm=NEXTN",
        "server.flags.speculative-eagle-topk=1",
    ]
    pt, _ = _tree(write_yaml, tmp_path, "DeepseekV3ForCausalLM", *nextn)
    assert any(e.startswith("pp-spec-prefill-only") for e in pt.errors), pt.errors
    pt, _ = _tree(write_yaml, tmp_path, "DeepseekV3ForCausalLM", *nextn, "server.env.SGLANG_ENABLE_PP_SPEC=1")
    assert not any(e.startswith("pp-spec-prefill-only") for e in pt.errors), pt.errors


def test_an_unset_version_means_the_newest_the_rules_know(write_yaml):
    """docs/plan.md: ``server.sglang_version`` unset means the newest version the rules know. The plan says so,
    and a flag that version lacks is caught (before: checked against no version at all, and the reference
    experiment's 18 points showed ok where 0.5.23 refuses them all)."""
    exp = config.load("experiments/k26_eagle.yaml", ["server.sglang_version=null"])
    p = plan.build(exp)
    assert any(w.startswith("sglang-version: server.sglang_version is unset") and "0.5.23" in w for w in p.warnings)
    assert len(p.invalid) == 18
    err = p.invalid[0].errors[0]
    assert err.startswith("ambiguous-flag: --cuda-graph-max-bs (a flag of SGLang 0.5.10, not of 0.5.23)")
    assert "set server.sglang_version: 0.5.10" in err
    # the experiment names the SGLang it is for, and is valid for it
    assert config.load("experiments/k26_eagle.yaml").server.sglang_version == "0.5.10"
    # a flag no known version has stays a warning that names the version assumed
    p = build(write_yaml, BASE.replace("tp_size: 8}", "tp_size: 8, flags: {my-fork-flag: 1}}"))
    assert not p.invalid, p.invalid[0].errors
    w = [w for w in p.points[0].warnings if w.startswith("unchecked-flag")]
    assert w and "SGLang 0.5.23 (server.sglang_version unset" in w[0], p.points[0].warnings


# The ids of the shipped experiments' points, as results directories on disk know them. A change that
# moves them (a new benchmark setting marked always(...), which lands in point_id at its default, say)
# makes every existing results directory rerun from scratch on resume: give a new setting a plain default
# (in the id only where set: sweep/core/identity.py), or change these knowingly and say so in the docs (docs/experiment-file.md).
SHIPPED_IDS = {
    "k26_eagle": (18, "2f022fe9e229378e"),
    "glm5_eagle_tree": (4, "58def169fee703a1"),
    "cpu_tiny_spec": (7, "ee7d9a0ce5676b07"),
}


@pytest.mark.parametrize("name", sorted(SHIPPED_IDS))
def test_the_shipped_experiments_point_ids_do_not_move(name, monkeypatch):
    import hashlib

    # cpu_tiny_spec's paths and launcher come from the environment (HOME, the CPU install's env.sh):
    # pinned as they are for root with no install sourced, whoever runs the tests
    monkeypatch.setenv("HOME", "/root")
    for var in ("SWEEP_TINY_MODELS", "SGLANG_CPU_PYTHON", "SGLANG_CPU_ATTENTION_BACKEND", "SGLANG_CPU_LD_PRELOAD"):
        monkeypatch.delenv(var, raising=False)
    points = plan.build(config.load(f"experiments/{name}.yaml", [])).points
    digest = hashlib.sha256(" ".join(sorted(p.id for p in points)).encode()).hexdigest()[:16]
    assert (len(points), digest) == SHIPPED_IDS[name]


@pytest.mark.parametrize(
    "override,said",
    [
        ("server.flags.max-running-requests=lots", "invalid int value: 'lots'"),
        ("server.flags.mem-fraction-static=abc", "invalid float value: 'abc'"),
    ],
)
def test_a_bad_base_flag_value_makes_every_point_invalid_baselines_included(write_yaml, override, said):
    p = build(write_yaml, BASE, override)
    assert p.points and all(pt.errors for pt in p.points) and any(pt.baseline for pt in p.points)
    with pytest.raises(PlanError) as e:
        p.require_valid()
    assert e.value.exit_code == 3 and said in str(e.value) and "drafter=none" in str(e.value)
    assert f"in server.flags.{override.split('.')[2].split('=')[0]})" in str(e.value)  # where the file sets it


def test_a_bad_axis_flag_value_names_the_axis_value(write_yaml):
    p = build(write_yaml, BASE.replace("values: [1, 2, 3]", "values: [1, x]"))
    bad = [pt for pt in p.points if pt.errors]
    assert [pt.params["steps"] for pt in bad] == ["x"] * 4  # d1 and d2, each nccl profile; baselines have no steps
    assert "invalid int value: 'x'" in bad[0].errors[0] and "in grid.axes.steps (value x)" in bad[0].errors[0]


def test_a_dry_run_scales_the_client_side_axes_benchmark_settings_as_the_experiments(tmp_path):
    """An axis value's benchmark settings are merged over a dry run's scaled benchmark: they are
    scaled as it is (tokens, runs, rates), not run at full size beside points that are scaled."""
    from sweep.api import plan_for
    from tests.experiments import experiment, write

    exp = write(
        tmp_path / "axes.yaml",
        experiment(
            grid={
                "axes": {
                    "load": {
                        "values": {
                            "small": {"benchmark": {"rates": [4, 8], "concurrency": {"max_tokens": 512}}},
                            "big": {"benchmark": {"single_stream": {"runs": 9}}},
                        }
                    },
                    "mt": {"key": "benchmark.concurrency.max_tokens", "values": [256, None]},
                }
            },
            benchmark={"concurrency": {"max_tokens": 1024}, "rates": [2]},
        ),
        results_dir=tmp_path / "out",
    )
    full = {p.label: p for p in plan_for(exp, "cluster").plan.points}
    dry = plan_for(exp, "dry-run")
    d = config.load(exp).dry_run
    tokens = lambda n: max(d.min_max_tokens, round(n * d.max_tokens_scale))  # noqa: E731
    for p in dry.plan.points:
        f = full[p.label].bench
        assert p.bench.rates == [r * d.fake_speed for r in f.rates], p.label
        assert p.bench.concurrency.max_tokens == tokens(f.concurrency.max_tokens), p.label
        assert p.bench.single_stream.runs == min(f.single_stream.runs, d.single_stream_runs), p.label
    assert {p.label: p.bench.concurrency.max_tokens for p in dry.plan.points}["load=small,mt=unset"] == tokens(512)


@pytest.mark.parametrize(
    "version, pinned, expected",
    [
        ("0.5.23", [], ["--fake-version", "0.5.23"]),
        ("0.0.0.dev0+g7f8f030", [], ["--fake-version", "0.5.23"]),  # the CPU build follows 0.5.23's rules
        ("0.5.10", [], ["--fake-version", "0.5.10"]),
        ("0.5.15", [], []),  # a release the rules only guess at: the fake's default
        ("0.5.23", ["--fake-version", "0.5.10"], ["--fake-version", "0.5.10"]),  # the experiment's own pin wins
    ],
)
def test_a_dry_run_fake_speaks_the_release_planned_for(version, pinned, expected):
    """Without it, a 0.5.23 experiment's dry run met a 0.5.10 fake that refused --speculative-adaptive."""
    from sweep.experiment import config, dryrun

    exp = config.load(
        "experiments/k26_eagle_adaptive.yaml", [f"server.sglang_version={version}", f"dry_run.fake_args={pinned}"]
    )
    args = dryrun.fake_args(exp)
    got = [a for i, a in enumerate(args) if a == "--fake-version" or (i and args[i - 1] == "--fake-version")]
    assert got == expected, args
