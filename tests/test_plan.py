import json

import pytest

from sweep import config, plan
from sweep.errors import ConfigError, PlanError
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
    assert pt.argv_for(port=31234)[a.index("--port") + 1] == "31234"
    assert pt.argv_for(launcher=["fake"])[0] == "fake"


def test_ids_stable_under_axis_and_key_reordering(write_yaml):
    a = build(write_yaml, BASE)
    reordered = BASE.replace("""    steps:
      flag: speculative-num-steps
      values: [1, 2, 3]
""", "").replace("    nccl:\n", """    steps:
      values: [3, 1, 2]
      flag: speculative-num-steps
    nccl:
""")
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
        "d2: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d2}}")
    p = build(write_yaml, text)
    assert len(p.invalid) == 6  # d2 has steps but no topk: every d2 point
    with pytest.raises(PlanError) as e:
        p.require_valid()
    assert str(e.value).count("steps-without-topk") == 6 and "--skip-invalid" in str(e.value)
    p.require_valid(skip_invalid=True)
    doc = p.to_json()
    assert {x["status"] for x in doc["points"]} == {"ok", "invalid"}


def test_reserved_flag_in_base_flags(write_yaml):
    with pytest.raises(ConfigError, match="--port"):
        build(write_yaml, BASE, "server.flags.port=1")


def test_json_object_shape(write_yaml):
    doc = json.loads(json.dumps(build(write_yaml).to_json()))
    assert doc["experiment"] == "g"
    pt = doc["points"][0]
    assert {"id", "label", "params", "argv", "env", "status", "errors", "warnings"} <= set(pt)


def test_shipped_experiments_plan_clean():
    for f, n in (("experiments/k26_eagle.yaml", 18), ("experiments/glm5_eagle_tree.yaml", 4)):
        p = plan.build(config.load(f))
        assert len(p.points) == n
        assert not p.invalid and not p.warnings
        assert not [w for x in p.points for w in x.warnings], f
