"""sweep/core/flags.py: one typed flags type, each derived fact by one rule; the same facts from the
flags as the plan has them (typed values) and as the points table's ``flags`` column keeps them (text)."""

from __future__ import annotations

import pickle

import pytest

from sweep.core.errors import ConfigError
from sweep.core.flags import ServerFlags, flag_args

PLAN = {
    "model-path": "/models/target",
    "tp-size": 4,
    "dp-size": 2,
    "port": 30000,
    "trust-remote-code": True,
    "disable-cuda-graph": False,
    "speculative-algorithm": "eagle3",
    "speculative-draft-model-path": "/models/drafter",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 4.0,
    "speculative-adaptive-config": {"1": {"candidate_steps": [1, 3]}},
    "cuda-graph-bs": [1, 2, 4],
}


def facts(f: ServerFlags) -> tuple:
    return (
        f.device, f.is_cpu, f.tp, f.pp, f.dp, f.gpus, f.nnodes, f.node_gpus, f.model_path, f.draft_model_path,
        f.algorithm, f.steps, f.topk, f.draft_tokens, f.adaptive, f.port,
    )  # fmt: skip


def test_the_facts_of_a_plans_flags_and_of_their_column_agree():
    typed = ServerFlags(PLAN)
    assert facts(typed) == (
        "cuda", False, 4, 1, 2, 8, 1, (0, 8), "/models/target", "/models/drafter",
        "EAGLE3", 3, 1, 4, False, 30000,
    )  # fmt: skip
    column = typed.text()
    assert column["trust-remote-code"] == "true" and "disable-cuda-graph" not in column
    assert column["cuda-graph-bs"] == "1 2 4" and column["speculative-num-draft-tokens"] == "4"
    assert column["speculative-adaptive-config"] == '{"1": {"candidate_steps": [1, 3]}}'
    assert facts(ServerFlags(column)) == facts(typed)


def test_it_is_the_map_it_was_built_from_for_the_argv_and_the_ids():
    typed = ServerFlags(PLAN)
    assert typed == PLAN and typed.as_dict() == PLAN and list(typed) == list(PLAN)
    assert typed.args() == flag_args(PLAN) and "--disable-cuda-graph" not in typed.args()
    assert pickle.loads(pickle.dumps(typed)) == typed  # it travels to a Ray task in the LaunchSpec
    with pytest.raises(TypeError):
        typed["tp-size"] = 8  # type: ignore[index]
    moved = typed.merged({"port": 31000})
    assert moved.port == 31000 and typed.port == 30000 and list(moved) == list(PLAN)


def test_names_are_normalised_once_and_one_flag_given_twice_is_an_error():
    assert list(ServerFlags({"--tp_size": 2, "speculative_num_steps": 3})) == ["tp-size", "speculative-num-steps"]
    with pytest.raises(ConfigError, match="--tp-size twice"):
        ServerFlags({"tp_size": 2, "tp-size": 4})


@pytest.mark.parametrize(
    "device, expect",
    [
        (None, "cuda"),
        ("", "cuda"),
        ("cuda", "cuda"),
        ("cpu", "cpu"),
        ("xpu", "xpu"),
        ("CPU", "CPU"),
        ("cpu:0", "cpu:0"),
    ],
)
def test_the_device_is_sglangs_as_given_and_cpu_only_when_it_says_cpu(device, expect):
    """SGLang detects the device where --device is not given (a GPU on the sweep's hosts) and runs its
    CPU paths where ``device == "cpu"`` (server_args.py, 0.5.10 and 0.5.23): not 'CPU', not 'cpu:0'."""
    f = ServerFlags({"device": device})
    assert f.device == expect and f.is_cpu == (expect == "cpu")


def test_the_gpus_one_server_uses():
    assert ServerFlags({}).gpus is None  # no size, no model: not a server's flags
    assert ServerFlags({"model": "/m"}).gpus == 1
    assert ServerFlags({"tp-size": 2, "pp-size": 2, "dp-size": 2}).gpus == 8
    assert ServerFlags({"tp-size": 8, "dp-size": 8, "enable-dp-attention": True}).gpus == 8
    assert ServerFlags({"tp-size": "8", "dp-size": "8", "attn-dp-size": "4"}).gpus == 8
    assert ServerFlags({"tensor-parallel-size": 2, "tp-size": 4}).tp == 4  # the later of two spellings
    assert ServerFlags({"tp-size": 16, "nnodes": 2}).node_gpus == (0, 8)
    assert ServerFlags({"tp-size": 4, "base-gpu-id": 4}).node_gpus == (4, 4)
    assert ServerFlags({"tp-size": "x"}).gpus is None and ServerFlags({"tp-size": 0}).tp == 1


def test_speculation_and_adaptive():
    assert ServerFlags({"model-path": "/m"}).algorithm is None and not ServerFlags({}).is_speculative
    assert ServerFlags({"speculative-algorithm": ""}).algorithm is None
    assert (
        ServerFlags({"speculative-adaptive": True}).adaptive and ServerFlags({"speculative-adaptive": "true"}).adaptive
    )
    assert not ServerFlags({"speculative-adaptive": False}).adaptive
    assert ServerFlags({"speculative-num-steps": True}).steps is None  # a switch is no count
    assert ServerFlags({"speculative-draft-model": "/d"}).draft_model_path == "/d"  # SGLang's alias
    assert ServerFlags({"model": "/a", "model-path": "/m"}).model_path == "/m"
