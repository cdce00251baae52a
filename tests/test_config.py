import pytest

from sweep.core.errors import ConfigError
from sweep.experiment import config

MINIMAL = """
name: t
server:
  model_path: /m
  tp_size: 8
grid:
  axes:
    drafter:
      values:
        none: {}
"""


def test_minimal_loads_with_defaults(write_yaml):
    exp = config.load(write_yaml(MINIMAL))
    assert exp.name == "t"
    assert exp.server.launcher == ["python", "-m", "sglang.launch_server"]
    assert exp.benchmark.concurrency.levels[-1] == 250
    assert exp.source.endswith("exp.yaml")


def test_unknown_key_names_key_file_line_and_suggestion(write_yaml):
    path = write_yaml(MINIMAL.replace("  tp_size: 8", "  tp_size: 8\n  mdoel_path: /x"))
    with pytest.raises(ConfigError) as e:
        config.load(path)
    msg = str(e.value)
    assert "server.mdoel_path" in msg and str(path) in msg and "line 6" in msg
    assert "did you mean 'model_path'" in msg


def test_misspelt_nested_key_in_benchmark(write_yaml):
    path = write_yaml(MINIMAL + "benchmark:\n  single_stream:\n    runz: 3\n")
    with pytest.raises(ConfigError, match="did you mean 'runs'"):
        config.load(path)


def test_wrong_type(write_yaml):
    path = write_yaml(MINIMAL.replace("tp_size: 8", "tp_size: eight"))
    with pytest.raises(ConfigError, match=r"server.tp_size.*could not be converted"):
        config.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        config.load(tmp_path / "nope.yaml")


def test_bad_yaml_names_line(write_yaml):
    path = write_yaml("name: t\nserver: {model_path: /m\n  tp: [1,\n")
    with pytest.raises(ConfigError, match=r"line \d+: not valid YAML"):
        config.load(path)


def test_not_a_mapping(write_yaml):
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        config.load(write_yaml("- a\n- b\n"))


def test_required_key_missing(write_yaml):
    with pytest.raises(ConfigError, match="server.model_path"):
        config.load(write_yaml(MINIMAL.replace("  model_path: /m\n", "")))


def test_overrides_dotlist_and_errors(write_yaml):
    path = write_yaml(MINIMAL)
    exp = config.load(path, ["benchmark.seed=7", "server.flags.page-size=16", "benchmark.concurrency.levels=[1,4]"])
    assert exp.benchmark.seed == 7
    assert exp.server.flags["page-size"] == 16
    assert exp.benchmark.concurrency.levels == [1, 4]
    with pytest.raises(ConfigError, match=r"(?s)override \(benchmark.sed=1\).*did you mean 'seed'"):
        config.load(path, ["benchmark.sed=1"])
    with pytest.raises(ConfigError, match="not key=value"):
        config.load(path, ["benchmark.seed"])


def test_interpolation_and_resolvers(write_yaml):
    exp = config.load(write_yaml(MINIMAL + "benchmark:\n  seed: ${add:${server.tp_size},1}\n"))
    assert exp.benchmark.seed == 9


def test_derived_kept_raw_for_per_point_resolution(write_yaml):
    exp = config.load(write_yaml(MINIMAL + "  derived:\n    speculative-num-draft-tokens: ${add:${steps},1}\n"))
    assert exp.grid.derived["speculative-num-draft-tokens"] == "${add:${steps},1}"


@pytest.mark.parametrize(
    "override,key",
    [
        ("server.tp_size=0", "server.tp_size"),
        ("benchmark.concurrency.levels=[0]", "levels"),
        ("server.port=70000", "server.port"),
    ],
)
def test_out_of_range(write_yaml, override, key):
    with pytest.raises(ConfigError, match=key):
        config.load(write_yaml(MINIMAL), [override])


def test_bad_api_and_name(write_yaml):
    with pytest.raises(ConfigError, match="benchmark.api"):
        config.load(write_yaml(MINIMAL), ["benchmark.api=grpc"])
    with pytest.raises(ConfigError, match="name"):
        config.load(write_yaml(MINIMAL.replace("name: t", "name: 'a b'")))


def test_shipped_experiments_load():
    for f in ("experiments/k26_eagle.yaml", "experiments/glm5_eagle_tree.yaml"):
        assert config.load(f).name


def test_flag_names_are_normalised_once_at_load(write_yaml):
    exp = config.load(
        write_yaml(
            MINIMAL.replace("  tp_size: 8", "  tp_size: 8\n  flags: {--mem_fraction_static: 0.8}")
            + "    steps: {flag: speculative_num_steps, values: [1]}\n"
            + "  derived: {speculative_num_draft_tokens: 2}\n"
        )
    )
    assert exp.server.flags == {"mem-fraction-static": 0.8}
    assert exp.grid.axes["steps"].flag == "speculative-num-steps"
    assert exp.grid.derived == {"speculative-num-draft-tokens": 2}


def test_one_flag_spelled_twice_is_named(write_yaml):
    path = write_yaml(
        MINIMAL.replace("  tp_size: 8", "  tp_size: 8\n  flags: {mem_fraction_static: 0.8, mem-fraction-static: 0.7}")
    )
    with pytest.raises(ConfigError, match="server.flags sets --mem-fraction-static twice"):
        config.load(path)


def test_the_tests_experiment_builder_writes_experiments_the_sweep_loads(tmp_path):
    """tests/experiments.py: its base and a merged change load as the user's YAML would, the
    interpolation of ``derived`` kept for the grid, a None removing a key."""
    from tests.experiments import DRAFT_TOKENS, DRAFTERS, experiment, write

    exp = config.load(write(tmp_path / "base.yaml", experiment(), results_dir=tmp_path / "res"))
    assert exp.name == "test" and exp.server.tp_size == 8 and exp.server.flags == {"max-running-requests": 64}
    changed = experiment(
        name="x",
        server={"port": 31000, "flags": {"max-running-requests": None}},
        grid={
            "axes": {"drafter": DRAFTERS, "steps": {"flag": "speculative-num-steps", "values": [1, 2]}},
            "derived": DRAFT_TOKENS,
        },
    )
    exp = config.load(write(tmp_path / "x.yaml", changed))
    assert exp.server.port == 31000 and exp.server.flags == {} and exp.server.timeouts.total_s == 60
    assert list(exp.grid.axes) == ["drafter", "steps"] and "${add:${steps},1}" in (tmp_path / "x.yaml").read_text()


@pytest.mark.parametrize(
    "override,shown,twice",
    [
        ("benchmark.concurrency.levels=[4,4,1]", "[4, 4, 1]", "4"),
        ("benchmark.rates=[1,2,1.0]", "[1.0, 2.0, 1.0]", "1.0"),
    ],
)
def test_a_level_or_rate_given_twice_is_refused(write_yaml, override, shown, twice):
    key = override.partition("=")[0]
    with pytest.raises(ConfigError, match=rf"(?s){key} = \[.*{twice} is given twice") as e:
        config.load(write_yaml(MINIMAL), [override])
    assert shown in str(e.value)
    path = write_yaml(MINIMAL + "benchmark:\n  concurrency:\n    levels: [4, 4, 1]\n")
    with pytest.raises(ConfigError, match=r"line 13: benchmark.concurrency.levels"):
        config.load(path)
    assert config.load(write_yaml(MINIMAL), ["benchmark.concurrency.levels=[4,1]"]).benchmark.concurrency.levels == [
        4,
        1,
    ]


@pytest.mark.parametrize(
    "override",
    [
        "server.tp_size=0",
        "benchmark.concurrency.rounds=0",
        "name=a b",
        "benchmark.rates=[1,-1]",
        "search.strategy=foo",
        "benchmark.seed=${nope}",
        "benchmark.slo=[{ttft_s: -1}]",
    ],
)
def test_a_bad_value_from_an_override_names_the_override_not_the_file(write_yaml, override):
    path = write_yaml(MINIMAL)
    with pytest.raises(ConfigError) as e:
        config.load(path, [override])
    msg = str(e.value)
    assert f"command-line override ({override})" in msg and "line ?" not in msg and str(path) not in msg


def test_a_sections_own_check_names_the_files_line(write_yaml):
    with pytest.raises(ConfigError, match=r"exp.yaml, line 11: search.strategy = 'foo'"):
        config.load(write_yaml(MINIMAL + "search: {strategy: foo}\n"))


def test_policy_confirm_setting(write_yaml):
    assert config.load(write_yaml(MINIMAL)).policy.confirm is False  # off unless asked
    assert config.load(write_yaml(MINIMAL + "policy: {confirm: true}\n")).policy.confirm is True
    assert config.load(write_yaml(MINIMAL), ["policy.confirm=true"]).policy.confirm is True
    path = write_yaml(MINIMAL + "policy: true\n")
    with pytest.raises(ConfigError) as e:  # a section given one value: named, with the mapping to write
        config.load(path)
    assert "line 11" in e.value.message and "policy is a section" in e.value.message
    assert "policy: {confirm: true}" in e.value.fix
    with pytest.raises(ConfigError, match=r"override \(policy=yes\): policy is a section"):
        config.load(write_yaml(MINIMAL), ["policy=yes"])
    with pytest.raises(ConfigError) as e:
        config.load(write_yaml(MINIMAL + "policy: {confrim: true}\n"))
    assert "did you mean 'confirm'" in e.value.fix
    with pytest.raises(ConfigError, match="policy.confirm.*not a valid bool"):
        config.load(write_yaml(MINIMAL), ["policy.confirm=maybe"])


def test_policy_candidates_and_revise_settings(write_yaml):
    from sweep.analysis import policy

    loaded = config.load(write_yaml(MINIMAL)).policy
    assert (loaded.candidates, loaded.revise) == ("one", 2)  # one step count per tier; two revision rounds
    asked = config.load(write_yaml(MINIMAL + "policy: {candidates: within_noise, revise: 0}\n")).policy
    assert (asked.candidates, asked.revise) == ("within_noise", 0)
    with pytest.raises(ConfigError, match=r"policy.candidates = 'within-noise' is not a mode") as e:
        config.load(write_yaml(MINIMAL + "policy: {candidates: within-noise}\n"))
    assert "one of one, within_noise" in e.value.fix
    with pytest.raises(ConfigError, match=r"policy.revise = -1 is out of range"):
        config.load(write_yaml(MINIMAL), ["policy.revise=-1"])
    assert config._POLICY_CANDIDATES == policy.CANDIDATE_MODES  # the experiment's modes are the policy's


@pytest.mark.parametrize("device", ["CPU", "cpu:0"])
def test_a_cpu_device_sglang_would_not_take_for_its_cpu_is_named(write_yaml, device):
    """SGLang runs its CPU paths where --device is 'cpu' exactly (sweep.core.flags.ServerFlags.is_cpu)."""
    path = write_yaml(MINIMAL.replace("  tp_size: 8", f"  tp_size: 8\n  flags: {{device: '{device}'}}"))
    with pytest.raises(ConfigError, match=f"server.flags.device '{device}' is not SGLang's CPU device") as e:
        config.load(path)
    assert "device: cpu" in e.value.fix
    assert config.is_cpu(
        config.load(write_yaml(MINIMAL.replace("  tp_size: 8", "  tp_size: 8\n  flags: {device: cpu}")))
    )
