import pytest

from sweep.core.errors import ConfigError
from sweep.experiment import config, grid

BASE = """
name: g
server: {model_path: /m, tp_size: 8}
grid:
  axes:
    drafter:
      values:
        none: {}
        d1: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d1, speculative-eagle-topk: 1}}
        d2: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d2, speculative-eagle-topk: 1}}
    steps:
      flag: speculative-num-steps
      values: [1, 2, 3]
    nccl:
      values:
        default: {}
        tuned: {env: {NCCL_PROTO: LL, NCCL_ALGO: Ring}}
"""


def expand(write_yaml, text=BASE, *overrides):
    return grid.expand(config.load(write_yaml(text), list(overrides)))


def test_product_with_baseline_collapse(write_yaml):
    pts = expand(write_yaml)
    # 2 drafters x 3 steps x 2 nccl + 1 baseline x 2 nccl (steps collapse instead of multiplying)
    assert len(pts) == 14
    base = [p for p in pts if p.baseline]
    assert [p.label for p in base] == ["drafter=none,nccl=default", "drafter=none,nccl=tuned"]
    assert all("speculative-num-steps" not in p.flags for p in base)
    assert base[1].env == {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}


def test_labels_and_flags(write_yaml):
    p = [p for p in expand(write_yaml) if p.label == "drafter=d2,steps=2,nccl=tuned"][0]
    assert p.params == {"drafter": "d2", "steps": "2", "nccl": "tuned"}
    assert p.flags["speculative-num-steps"] == 2 and p.flags["speculative-draft-model-path"] == "/d2"
    assert not p.baseline


def test_roles_inferred(write_yaml):
    axes = grid.build_axes(config.load(write_yaml(BASE)))
    assert {a.name: a.role for a in axes} == {"drafter": "drafter", "steps": "steps", "nccl": "env"}
    assert [a.speculative_only for a in axes] == [False, True, False]


def test_zip(write_yaml):
    text = (
        BASE
        + """    topk:
      flag: speculative-eagle-topk
      values: [1, 2, 4]
  zip: [[steps, topk]]
"""
    )
    pts = expand(write_yaml, text)
    spec = [p for p in pts if not p.baseline]
    assert len(spec) == 2 * 3 * 2
    assert {(p.params["steps"], p.params["topk"]) for p in spec} == {("1", "1"), ("2", "2"), ("3", "4")}


def test_zip_errors(write_yaml):
    with pytest.raises(ConfigError, match="different lengths"):
        expand(write_yaml, BASE + "  zip: [[steps, nccl]]\n")
    with pytest.raises(ConfigError, match="not in grid.axes"):
        expand(write_yaml, BASE + "  zip: [[steps, stepz]]\n")


def test_exclude_with_glob(write_yaml):
    pts = expand(write_yaml, BASE + "  exclude:\n    - {drafter: d2, steps: '3'}\n    - {nccl: def*, drafter: d1}\n")
    labels = {p.label for p in pts}
    assert "drafter=d2,steps=3,nccl=tuned" not in labels
    assert not any(label.startswith("drafter=d1") and "default" in label for label in labels)
    assert "drafter=none,nccl=default" in labels  # rules naming collapsed axes don't touch baselines
    assert len(pts) == 14 - 2 - 3


def test_exclude_unknown_axis(write_yaml):
    with pytest.raises(ConfigError, match="names axis 'stepz'"):
        expand(write_yaml, BASE + "  exclude:\n    - {stepz: 1}\n")


def test_everything_excluded_is_empty_grid(write_yaml):
    with pytest.raises(ConfigError, match="grid is empty"):
        expand(write_yaml, BASE + "  exclude:\n    - {nccl: '*'}\n")


def test_no_axes(write_yaml):
    with pytest.raises(ConfigError, match="grid.axes is empty"):
        expand(write_yaml, "name: g\nserver: {model_path: /m}\n")


def test_derived_per_point(write_yaml):
    pts = expand(write_yaml, BASE + "  derived:\n    speculative-num-draft-tokens: ${add:${steps},1}\n")
    for p in pts:
        if p.baseline:
            assert "speculative-num-draft-tokens" not in p.flags
        else:
            assert p.flags["speculative-num-draft-tokens"] == p.flags["speculative-num-steps"] + 1


def test_derived_bad_reference(write_yaml):
    with pytest.raises(ConfigError, match="grid.derived"):
        expand(write_yaml, BASE + "  derived:\n    speculative-num-draft-tokens: ${add:${stepz},1}\n")


def test_bad_axis_shapes(write_yaml):
    with pytest.raises(ConfigError, match="must be a list"):
        expand(write_yaml, BASE.replace("values: [1, 2, 3]", "values: {a: 1}"))
    with pytest.raises(ConfigError, match="unknown key 'flag'"):
        expand(write_yaml, BASE.replace("tuned: {env:", "tuned: {flag: {}, env:"))
    with pytest.raises(ConfigError, match="empty list"):
        expand(write_yaml, BASE.replace("values: [1, 2, 3]", "values: []"))
    with pytest.raises(ConfigError, match="appears twice"):
        expand(write_yaml, BASE.replace("values: [1, 2, 3]", "values: [1, 1]"))


def test_null_scalar_leaves_flag_out(write_yaml):
    pts = expand(write_yaml, BASE.replace("values: [1, 2, 3]", "values: [null, 2]"))
    unset = [p for p in pts if p.params.get("steps") == "unset"]
    assert unset and all("speculative-num-steps" not in p.flags for p in unset)


def test_a_derived_value_over_a_non_numeric_axis_value_names_the_value_and_the_key(write_yaml):
    text = BASE + "  derived:\n    speculative-num-draft-tokens: ${add:${steps},1}\n"
    with pytest.raises(ConfigError) as e:
        expand(write_yaml, text, "grid.axes.steps.values=[1,2,three]")
    msg = str(e.value)
    assert "grid.derived.speculative-num-draft-tokens" in msg and "'three'" in msg and "axis 'steps'" in msg
    assert "TypeError" not in msg


@pytest.mark.parametrize(
    "old,new,value",
    [
        ("values: [1, 2, 3]", "values: [1, '2,3']", "'2,3'"),
        ("tuned: {env:", "'a=b': {env:", "'a=b'"),
        ("tuned: {env:", "'x,y': {env:", "'x,y'"),
    ],
)
def test_an_axis_value_with_a_comma_or_equals_sign_is_refused(write_yaml, old, new, value):
    with pytest.raises(ConfigError, match=rf"grid.axes.(steps|nccl): value {value} holds .* ambiguous"):
        expand(write_yaml, BASE.replace(old, new))


def test_the_confirmations_marker_is_a_reserved_value_on_every_axis(write_yaml):
    """``adaptive`` is the step axis's value of a policy's confirmation point (and the analysis reads any
    axis valued so as one): a grid value of that name, scalar or bundle, is refused with a pointer to
    policy.confirm."""
    with pytest.raises(ConfigError, match="'adaptive' is reserved") as e:
        expand(write_yaml, BASE.replace("values: [1, 2, 3]", "values: [1, 2, adaptive]"))
    assert "grid.axes.steps" in e.value.message and "policy.confirm" in e.value.fix
    with pytest.raises(ConfigError, match="grid.axes.nccl: value 'adaptive' is reserved"):
        expand(write_yaml, BASE.replace("tuned: {env:", "adaptive: {env:"))


def test_a_reserved_value_stops_a_skip_invalid_dry_run_with_exit_2_and_nothing_written(write_yaml, tmp_path):
    from tests.conftest import run_sweep_cli

    exp = write_yaml(BASE.replace("values: [1, 2, 3]", "values: [1, adaptive]"))
    res = tmp_path / "res"
    r = run_sweep_cli(str(exp), "--dry-run", "--skip-invalid", f"results_dir={res}", timeout=60)
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    assert "reserved" in r.stderr and "policy.confirm" in r.stderr
    assert not res.exists()
