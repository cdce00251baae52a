"""Every speculative rule, each with a case that passes and one that fails; and what a rule's verdict
depends on: the SGLang version, the target's architecture and the GPU (the differential test in
tests/real/ checks the same model against real SGLang)."""

import json

import pytest

from sweep.core.settings import BenchSettings, ConcurrencySettings
from sweep.sglang import rules, serverargs

E3 = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/d"}
OK_BENCH = BenchSettings(server_metrics=False, concurrency=ConcurrencySettings(levels=[1, 8]))
H200_LLAMA = rules.Target(version="0.5.23", architecture="LlamaForCausalLM", gpu="H200", version_given=True)
TREE = {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8}


def found(flags, bench=OK_BENCH, target=None):
    return {(f.level, f.rule) for f in rules.check({"model-path": "/m", "tp-size": 8, **flags}, bench, target)}


def outcome(flags, version="0.5.23", architecture="LlamaForCausalLM", gpu="H200"):
    return serverargs.resolve({"model-path": "/m", **flags}, serverargs.Context(version, architecture, gpu))


CASES = [
    # (rule, level, failing flags, passing flags)
    (
        "unknown-flag",
        "error",
        {"speculative-num-stpes": 2},
        {"speculative-num-steps": 2, "speculative-eagle-topk": 1, **E3},
    ),
    (
        "ambiguous-flag",
        "error",
        {**E3, "speculative-num": 2},
        {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 1},
    ),
    (
        "flag-abbreviation",
        "warning",
        {**E3, "speculative-num-step": 2, "speculative-eagle-topk": 1},
        {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 1},
    ),
    ("unknown-algorithm", "error", {**E3, "speculative-algorithm": "eagle4"}, E3),
    ("spec-flags-without-algorithm", "warning", {"speculative-num-steps": 2}, {}),
    ("draft-model-missing", "error", {"speculative-algorithm": "EAGLE3"}, {"speculative-algorithm": "NEXTN"}),
    ("topk-or-draft-without-steps", "error", {**E3, "speculative-eagle-topk": 1}, E3),
    ("topk-or-draft-without-steps", "error", {**E3, "speculative-num-draft-tokens": 4}, E3),
    (
        "steps-without-topk",
        "error",
        {**E3, "speculative-num-steps": 2},
        {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 3},
    ),
    (
        "steps-zero",
        "error",
        {**E3, "speculative-num-steps": 0, "speculative-eagle-topk": 1},
        {**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 1},
    ),
    (
        "topk1-draft-tokens-overridden",
        "warning",
        {**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 16},
        {**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 2},
    ),
    (
        "tree-without-draft-tokens",
        "error",
        {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4},
        {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8},
    ),
    (
        "draft-tree-too-small",
        "error",
        {**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 16},
        {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 16},
    ),
    # flashmla forces page size 64, so a tree fails with it even at page size 1
    (
        "topk-page-size-backend",
        "error",
        {**TREE, "attention-backend": "flashmla"},
        {**TREE, "attention-backend": "fa3", "page-size": 64},
    ),
    (
        "topk-page-size-backend",
        "error",
        {**TREE, "page-size": 64, "attention-backend": "torch_native"},
        {**TREE, "page-size": 64, "attention-backend": "flashinfer"},
    ),
    (
        "topk-trtllm-mha",
        "error",
        {**TREE, "attention-backend": "trtllm_mha"},
        {
            **E3,
            "speculative-num-steps": 2,
            "speculative-eagle-topk": 1,
            "speculative-num-draft-tokens": 3,
            "attention-backend": "trtllm_mha",
        },
    ),
    ("spec-with-pipeline-parallel", "error", {**E3, "pp-size": 2}, {"pp-size": 2}),
    (
        "pp-spec-prefill-only",
        "error",
        {**E3, "speculative-algorithm": "NEXTN", "pp-size": 2},
        {**E3, "speculative-algorithm": "NEXTN", "pp-size": 2, "disaggregation-mode": "prefill"},
    ),
    (
        "topk-below-one",
        "error",
        {**E3, "speculative-num-steps": 3, "speculative-eagle-topk": 0, "speculative-num-draft-tokens": 4},
        {**E3, "speculative-num-steps": 3, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4},
    ),
    ("draft-tokens-too-few", "error", {**TREE, "speculative-num-draft-tokens": 1}, TREE),
    (
        "dp-attention-unsupported",
        "error",
        {**E3, "speculative-algorithm": "STANDALONE", "enable-dp-attention": True, "dp-size": 2},
        {**E3, "speculative-algorithm": "STANDALONE", "enable-dp-attention": True},
    ),  # dp 1: no dp attention at all
    (
        "ngram-topk-overridden",
        "warning",
        {"speculative-algorithm": "NGRAM", "speculative-eagle-topk": 4},
        {"speculative-algorithm": "NGRAM"},
    ),
]


@pytest.mark.parametrize("rule,level,bad,good", CASES, ids=[c[0] for c in CASES])
def test_rule(rule, level, bad, good):
    assert (level, rule) in found(bad, target=H200_LLAMA)
    assert not any(r == rule for _, r in found(good, target=H200_LLAMA))


def test_unknown_flag_is_an_error_only_for_a_known_version():
    assert ("warning", "unchecked-flag") in found({"my-custom-thing": 1})  # version assumed: the host's --help decides
    assert ("error", "unknown-flag") in found({"my-custom-thing": 1}, target=H200_LLAMA)
    assert not any(
        r in ("unchecked-flag", "unknown-flag") for _, r in found({"trust-remote-code": True}, target=H200_LLAMA)
    )


def test_running_cap():
    bench = BenchSettings(server_metrics=False, concurrency=ConcurrencySettings(levels=[1, 100, 250]))
    assert ("warning", "spec-running-cap") in found(E3, bench)
    assert ("warning", "spec-running-cap") not in found({**E3, "max-running-requests": 256}, bench)
    assert ("warning", "spec-running-cap") not in found({}, bench)  # no speculation, no cap


def test_requests_per_level():
    short = BenchSettings(server_metrics=False, concurrency=ConcurrencySettings(levels=[1, 250], requests_per_level=30))
    assert ("warning", "requests-below-concurrency") in found({}, short)
    assert ("warning", "requests-below-concurrency") not in found({}, OK_BENCH)


def test_metrics():
    on = BenchSettings(server_metrics=True, concurrency=ConcurrencySettings(levels=[1]))
    assert ("warning", "metrics-disabled") in found({}, on)
    assert ("warning", "metrics-disabled") not in found({"enable-metrics": True}, on)


def test_messages_name_rule_and_fix():
    f = [
        x
        for x in rules.check(
            {**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 16},
            OK_BENCH,
        )
    ][0]
    assert "steps+1 = 2" in f.message and "2" in f.fix and str(f).startswith("topk1-draft-tokens-overridden:")


# --- the final values SGLang runs with ---


def test_outcome_carries_the_final_values():
    o = outcome({**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 16})
    assert (o.verdict, o.final) == ("adjusted", (1, 1, 2, 48))
    o = outcome(
        {
            **E3,
            "speculative-num-steps": 3,
            "speculative-eagle-topk": 1,
            "speculative-num-draft-tokens": 4,
            "max-running-requests": 256,
        }
    )
    assert (o.verdict, o.final) == ("ok", (3, 1, 4, 256))
    assert outcome({**E3, "speculative-eagle-topk": 4}).verdict == "error"


def test_automatic_defaults_by_architecture_are_checked_after_they_apply():
    assert outcome(E3).final == (5, 4, 8, 48)  # Llama: a tree
    assert outcome(E3, architecture="DeepseekV3ForCausalLM").final == (3, 1, 4, 48)
    assert outcome({**E3, "speculative-algorithm": "STANDALONE"}).final == (3, 1, 4, 48)
    # the automatic tree of a Llama target meets the paged-KV check: flashmla forces page size 64
    assert outcome({**E3, "attention-backend": "flashmla"}).verdict == "error"
    assert outcome({**E3, "attention-backend": "flashmla"}, architecture="DeepseekV3ForCausalLM").verdict == "adjusted"


# --- what a verdict depends on ---


def test_tree_with_pages_and_no_backend_depends_on_the_gpu_and_target():
    tree = {**TREE, "page-size": 16}
    # SGLang picks the backend first: flashinfer for a Llama tree, fa3 for DeepSeek on Hopper: both fine
    assert outcome(tree).attention_backend == "flashinfer" and outcome(tree).verdict == "adjusted"  # only the cap
    assert outcome(tree, architecture="DeepseekV3ForCausalLM").attention_backend == "fa3"
    # DeepSeek-V3 on Blackwell gets trtllm_mla (page 64): a tree fails
    assert outcome(tree, architecture="DeepseekV3ForCausalLM", gpu="B200").verdict == "error"
    # on an A100 DeepSeek gets triton: fine since 0.5.23, not in 0.5.10
    assert outcome(tree, architecture="DeepseekV3ForCausalLM", gpu="A100").verdict == "adjusted"
    assert outcome(tree, "0.5.10", architecture="DeepseekV3ForCausalLM", gpu="A100").verdict == "error"
    # nothing known: a warning that the host checks it, not an error
    assert ("warning", "checked-on-host") in found(tree)
    assert not any(level == "error" for level, _ in found(tree))
    assert not any(level == "error" for level, _ in found(tree, target=H200_LLAMA))


def test_triton_takes_a_tree_with_pages_since_0_5_23():
    tree = {**TREE, "page-size": 16, "attention-backend": "triton", "max-running-requests": 64}
    assert outcome(tree, "0.5.23").verdict == "ok"
    assert outcome(tree, "0.5.10").verdict == "error"
    assert ("error", "topk-page-size-backend") in found(tree, target=rules.Target(version="0.5.10", version_given=True))


def test_ngram_sets_topk_itself_and_fails_with_pages_off_flashinfer():
    ngram = {"speculative-algorithm": "NGRAM", "page-size": 16}
    assert outcome(ngram).verdict == "error"  # fa3 on Hopper (no topk given)
    assert outcome({**ngram, "attention-backend": "flashinfer"}).final == (1, 10, 12, 48)
    assert outcome({**ngram, "attention-backend": "flashinfer"}, "0.5.10").final == (None, 10, 12, 48)
    assert outcome({"speculative-algorithm": "NGRAM", "device": "cpu"}, "0.5.10").verdict == "error"
    assert outcome({"speculative-algorithm": "NGRAM", "device": "cpu"}, "0.5.23").verdict == "adjusted"


def test_mtp_targets_draft_for_themselves():
    o = outcome({"speculative-algorithm": "NEXTN"}, architecture="DeepseekV3ForCausalLM")
    assert o.draft_model_path == "/m" and o.later is None and o.algorithm == "EAGLE"
    o = outcome({"speculative-algorithm": "EAGLE"})  # a Llama target: its own path, with a warning
    assert o.later is None and any(a.rule == "drafter-is-target" for a in o.adjustments)
    assert outcome({"speculative-algorithm": "EAGLE3"}).later.rule == "draft-model-missing"


def test_algorithm_spelling_follows_the_version():
    assert outcome({**E3, "speculative-algorithm": "eagle3"}, "0.5.23").algorithm == "EAGLE3"
    assert outcome({**E3, "speculative-algorithm": "eagle3"}, "0.5.10").verdict == "error"


def test_drafter_config_json_checks(tmp_path):
    target = tmp_path / "target"
    drafter = tmp_path / "drafter"
    for d, arch, extra in (
        (target, "DeepseekV3ForCausalLM", {"num_nextn_predict_layers": 2}),
        (drafter, "LlamaForCausalLM", {}),
    ):
        d.mkdir()
        (d / "config.json").write_text(__import__("json").dumps({"architectures": [arch], **extra}))
    t = rules.Target(
        version="0.5.23",
        architecture="DeepseekV3ForCausalLM",
        gpu="H200",
        configs={str(target): serverargs.read_config(str(target)), str(drafter): serverargs.read_config(str(drafter))},
    )
    flags = {
        "model-path": str(target),
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": str(drafter),
        "speculative-num-steps": 2,
        "speculative-eagle-topk": 1,
    }
    assert "drafter-not-eagle3" in {f.rule for f in rules.check(flags, OK_BENCH, t) if f.level == "error"}
    nextn = {"model-path": str(target), "speculative-algorithm": "NEXTN"}
    assert "nextn-layers" in {f.rule for f in rules.check(nextn, OK_BENCH, t) if f.level == "error"}


def test_version_specific_flags():
    old = rules.Target(version="0.5.10", version_given=True)
    new = rules.Target(version="0.5.23", version_given=True)
    # 0.5.23 has --cuda-graph-max-bs-decode and -prefill: argparse finds the old name ambiguous
    assert ("error", "ambiguous-flag") in found({"cuda-graph-max-bs": 256}, target=new)
    assert ("error", "unknown-flag") in found({"stream-output": True}, target=new)
    assert not any(r == "unknown-flag" for _, r in found({"cuda-graph-max-bs": 256}, target=old))
    assert not any(
        r == "unknown-flag" for _, r in found({"cuda-graph-max-bs": 256})
    )  # version assumed: the host checks


def test_versions_and_gpus_are_read_leniently():
    assert serverargs.rules_version("0.5.23")[0] == "0.5.23"
    assert serverargs.rules_version("0.0.0.dev0+g7f8f030") == ("0.5.23", None)
    assert serverargs.rules_version("0.5.12")[0] == "0.5.10"
    assert serverargs.rules_version(None)[0] == serverargs.NEWEST
    assert serverargs.gpu_info("NVIDIA H200").sm == 90 and serverargs.gpu_info("hopper").sm == 90
    assert serverargs.gpu_info("B200").sm == 100 and serverargs.gpu_info("nonsense") is None


# --- topk below 1, and pipeline parallelism (issue 20) ---


@pytest.mark.parametrize("algorithm", ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE"])
@pytest.mark.parametrize("version", serverargs.KNOWN_VERSIONS)
@pytest.mark.parametrize("topk", [0, -1])
def test_topk_below_one_passes_the_arguments_and_dies_in_the_drafter(algorithm, version, topk):
    flags = {
        **E3,
        "speculative-algorithm": algorithm,
        "speculative-num-steps": 3,
        "speculative-eagle-topk": topk,
        "speculative-num-draft-tokens": 4,
    }
    o = outcome(flags, version)
    # SGLang's argument checks let it through untouched (the cap of 48 is the only change)
    assert o.error is None and o.final == (3, topk, 4, 48)
    assert o.later.rule == "topk-below-one" and o.later.stage == "draft_capture"
    f = [
        x
        for x in rules.check(
            flags,
            OK_BENCH,
            rules.Target(version=version, architecture="LlamaForCausalLM", gpu="H200", version_given=True),
        )
        if x.rule == "topk-below-one"
    ]
    assert len(f) == 1 and f[0].level == "error"
    assert f"--speculative-eagle-topk {topk}" in f[0].message and "accepts the arguments" in f[0].message
    assert "speculative-eagle-topk >= 1" in f[0].fix


def test_topk_below_one_says_what_sglang_raises():
    chain = {**E3, "speculative-num-steps": 3, "speculative-eagle-topk": 0, "speculative-num-draft-tokens": 4}
    assert outcome(chain).later.exception.startswith("RuntimeError: cannot reshape tensor of 0 elements")
    one_step = {**chain, "speculative-num-steps": 1, "speculative-num-draft-tokens": 2}
    assert outcome(one_step).later.exception == "RuntimeError: selected index k out of range"
    assert (
        outcome({**chain, "speculative-eagle-topk": -1}).later.exception
        == "RuntimeError: selected index k out of range"
    )
    # topk 0 without steps is still the bare assertion of the argument checks
    assert outcome({**E3, "speculative-eagle-topk": 0}).error.rule == "topk-or-draft-without-steps"


def test_ngram_ignores_topk_below_one():
    o = outcome({"speculative-algorithm": "NGRAM", "speculative-eagle-topk": 0})
    assert o.later is None and o.topk == 10 and any(a.rule == "ngram-topk-overridden" for a in o.adjustments)


def test_tree_with_one_draft_token_passes_the_arguments_and_dies_at_startup():
    o = outcome({**TREE, "speculative-num-steps": 3, "speculative-num-draft-tokens": 1})
    assert o.error is None and o.final == (3, 4, 1, 48)
    assert o.later.rule == "draft-tokens-too-few" and o.later.stage == "draft_capture"


NEXTN_PP = {
    "speculative-algorithm": "NEXTN",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 4,
    "pp-size": 2,
}
DSV3 = "DeepseekV3ForCausalLM"


def test_pipeline_parallel_speculation_by_version():
    # 0.5.10: no speculation with pp at all
    assert outcome(NEXTN_PP, "0.5.10", DSV3).error.rule == "spec-with-pipeline-parallel"
    assert (
        outcome({**NEXTN_PP, "disaggregation-mode": "prefill"}, "0.5.10", DSV3).error.rule
        == "spec-with-pipeline-parallel"
    )
    # 0.5.23: EAGLE / NEXTN, on a prefill node only
    for mode in (None, "null", "decode"):
        flags = {**NEXTN_PP, "disaggregation-mode": mode} if mode else NEXTN_PP
        e = outcome(flags, "0.5.23", DSV3).error
        assert e.rule == "pp-spec-prefill-only" and e.stage == "args"
        assert e.exception == (
            "AssertionError: PP + speculative decoding (MTP) is only supported on prefill nodes "
            "(disaggregation-mode=prefill)"
        )
    assert outcome({**NEXTN_PP, "disaggregation-mode": "prefill"}, "0.5.23", DSV3).error is None
    eagle = {**E3, **NEXTN_PP, "speculative-algorithm": "EAGLE", "disaggregation-mode": "prefill"}
    assert outcome(eagle).error is None
    assert outcome({**eagle, "enable-multi-layer-eagle": True}).error.rule == "spec-with-pipeline-parallel"
    assert outcome({**eagle, "speculative-algorithm": "EAGLE3"}).error.rule == "spec-with-pipeline-parallel"
    assert outcome({**eagle, "speculative-algorithm": "STANDALONE"}).error.rule == "spec-with-pipeline-parallel"


def test_pipeline_parallel_speculation_with_sglang_enable_pp_spec():
    on = {"SGLANG_ENABLE_PP_SPEC": "1"}
    t = rules.Target(version="0.5.23", architecture=DSV3, gpu="H200", version_given=True)
    errors = lambda flags, env=None: {f.rule for f in rules.check(flags, OK_BENCH, t, env) if f.level == "error"}  # noqa: E731
    assert "pp-spec-prefill-only" in errors(NEXTN_PP)
    assert not errors(NEXTN_PP, on) and not errors(NEXTN_PP, {"SGLANG_ENABLE_PP_SPEC": "True"})
    assert "pp-spec-prefill-only" in errors(NEXTN_PP, {"SGLANG_ENABLE_PP_SPEC": "0"})
    # the aggregated PP speculation has its own limits
    assert "spec-with-pipeline-parallel" in errors({**NEXTN_PP, "disaggregation-mode": "prefill"}, on)
    assert "spec-with-pipeline-parallel" in errors({**NEXTN_PP, "speculative-adaptive": True}, on)
    assert "spec-with-pipeline-parallel" in errors({**NEXTN_PP, "enable-dp-attention": True, "dp-size": 2}, on)
    # host_check takes the env too
    assert not [
        f
        for f in rules.host_check(
            {"model-path": "/m", **NEXTN_PP}, OK_BENCH, version="0.5.23", gpu="H200", architecture=DSV3, env=on
        )
        if f.level == "error"
    ]


# --- flag values, checked as SGLang's argparse types them (sweep.sglang.flagtypes), baselines included ---


@pytest.mark.parametrize(
    "flags,said",
    [
        ({"max-running-requests": "lots"}, "argument --max-running-requests: invalid int value: 'lots'"),
        ({"mem-fraction-static": "abc"}, "argument --mem-fraction-static: invalid float value: 'abc'"),
        ({"page-size": True}, "argument --page-size: expected one argument"),
        ({"enable-metrics": 2}, "unrecognized arguments: 2"),
        ({"dtype": "fp8"}, "argument --dtype: invalid choice: 'fp8'"),
        ({"max-running-requests": [8, 16]}, "unrecognized arguments: 16"),
        ({"max-running-requests": 2.5}, "invalid int value: '2.5'"),
    ],
)
@pytest.mark.parametrize("version", ["0.5.10", "0.5.23"])
def test_a_flag_value_argparse_refuses_is_an_error_of_every_point(flags, said, version):
    target = rules.Target(version=version, version_given=True)
    for spec in (
        {},
        {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 1},
    ):  # a baseline and a speculative point
        ev = rules.evaluate({"model-path": "/m", "tp-size": 8, **spec, **flags}, OK_BENCH, target)
        errors = [f for f in ev.findings if f.level == "error"]
        assert [f.rule for f in errors] == ["bad-flag-value"], errors
        assert said in errors[0].message and f"SGLang {version}" in errors[0].message and errors[0].fix


@pytest.mark.parametrize(
    "flags",
    [
        {
            "max-running-requests": 256,
            "mem-fraction-static": 0.85,
            "enable-metrics": True,
            "trust-remote-code": False,
            "dtype": "bfloat16",
            "cuda-graph-bs": [1, 2, 4],
            "random-seed": None,
            "page-size": 16.0,
            "attention-backend": "fa3",
        }
    ],
)
def test_flag_values_argparse_takes_pass(flags):
    for version in ("0.5.10", "0.5.23", None, "0.9.0"):
        assert not [
            f
            for f in rules.check({"model-path": "/m", "tp-size": 8, **flags}, OK_BENCH, rules.Target(version=version))
            if f.rule == "bad-flag-value"
        ], version


def test_a_speculative_flags_bad_value_is_argparses_error_alone():
    target = rules.Target(version="0.5.23", version_given=True)
    ev = rules.evaluate(
        {"model-path": "/m", **E3, "speculative-num-steps": "three", "speculative-eagle-topk": 1}, OK_BENCH, target
    )
    assert [(f.level, f.rule) for f in ev.findings if f.level == "error"] == [("error", "bad-flag-value")]
    assert "invalid int value: 'three'" in ev.findings[0].message and ev.outcome is None


# --- adaptive speculation (--speculative-adaptive, 0.5.23 and the CPU build 7f8f030; not 0.5.10) ---

POLICY = {"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0]}}
AD = {
    **E3,
    "speculative-adaptive": True,
    "speculative-adaptive-config": POLICY,
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 4,
    "max-running-requests": 64,
}
CPU_BUILD = rules.Target(version="0.0.0.dev0+g7f8f030", architecture="LlamaForCausalLM", gpu="cpu", version_given=True)

ADAPTIVE_CASES = [
    # (rule, level, failing flags, passing flags)
    ("adaptive-disabled", "warning", {**AD, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8}, AD),
    ("adaptive-disabled", "warning", {**AD, "speculative-algorithm": "STANDALONE"}, AD),
    ("adaptive-disabled", "warning", {**AD, "speculative-algorithm": "NGRAM"}, AD),
    (
        "adaptive-disabled",
        "warning",
        {**AD, "enable-dp-attention": True, "dp-size": 2},
        {**AD, "enable-dp-attention": True},
    ),
    ("adaptive-disabled", "warning", {**AD, "enable-multi-layer-eagle": True}, AD),
    ("adaptive-disabled", "warning", {**AD, "enable-two-batch-overlap": True}, AD),
    ("adaptive-disabled", "warning", {**AD, "enable-pdmux": True}, AD),
    ("adaptive-steps-not-candidate", "error", {**AD, "speculative-num-steps": 2}, {**AD, "speculative-num-steps": 0}),
    (
        "adaptive-draft-tokens-overridden",
        "warning",
        {**AD, "speculative-num-draft-tokens": 9},
        {k: v for k, v in AD.items() if k != "speculative-num-draft-tokens"},
    ),
    ("adaptive-initial-steps", "warning", {k: v for k, v in AD.items() if k != "speculative-num-steps"}, AD),
    (
        "adaptive-config-refused",
        "error",
        {**AD, "speculative-adaptive-config": {"1": {"candidate_steps": [1, -1]}}},
        AD,
    ),
    ("adaptive-config-refused", "error", {**AD, "speculative-adaptive-config": {"1": {"candidate_steps": []}}}, AD),
    (
        "adaptive-config-refused",
        "error",
        {**AD, "speculative-adaptive-config": {"1": {"candidate_steps": [1.0, 3]}}},
        AD,
    ),
    ("adaptive-config-refused", "error", {**AD, "speculative-adaptive-config": {"1": {"steps": [1]}}}, AD),
    ("adaptive-config-refused", "error", {**AD, "speculative-adaptive-config": {"ema_alpha": 0.3}}, AD),
    ("adaptive-config-refused", "error", {**AD, "speculative-adaptive-config": {"bs1": {"candidate_steps": [1]}}}, AD),
    ("adaptive-hisparse", "error", {**AD, "enable-hisparse": True, "disable-radix-cache": True}, AD),
    ("adaptive-config-unused", "warning", {**AD, "speculative-adaptive": False}, AD),
    ("adaptive-lora", "error", {**AD, "enable-lora": True}, {**AD, "speculative-adaptive": False, "enable-lora": True}),
]


@pytest.mark.parametrize(
    "rule,level,bad,good", ADAPTIVE_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(ADAPTIVE_CASES)]
)
def test_adaptive_rule(rule, level, bad, good):
    assert (level, rule) in found(bad, target=H200_LLAMA)
    assert not any(r == rule for _, r in found(good, target=H200_LLAMA))


def test_the_policy_launch_is_accepted_by_0523_and_refused_by_0510_in_argparses_words():
    assert not [f for f in rules.check({"model-path": "/m", **AD}, OK_BENCH, H200_LLAMA) if f.level == rules.ERROR]
    old = rules.Target(version="0.5.10", architecture="LlamaForCausalLM", gpu="H200", version_given=True)
    errors = [f for f in rules.check({"model-path": "/m", **AD}, OK_BENCH, old) if f.level == rules.ERROR]
    assert {f.rule for f in errors} == {"unknown-flag"} and len(
        errors
    ) == 2  # one per flag, no duplicate from the model
    text = " ".join(f"{f.message} {f.fix}" for f in errors)
    assert "unrecognized arguments: --speculative-adaptive" in text and "0.5.23" in text
    o = outcome(AD, version="0.5.10")  # the model (the fake's too) refuses them as argparse does
    assert o.verdict == "error" and o.error.exception.startswith("unrecognized arguments: --speculative-adaptive ")


def test_adaptive_outcome_says_what_the_server_runs():
    o = outcome(AD)
    assert o.adaptive and o.adaptive_requested and o.adaptive_disabled_reason is None
    assert o.candidate_steps == (0, 1, 3) and o.adaptive_tiers == {1: (1, 3), 32: (0,)}
    assert (o.steps, o.topk, o.draft_tokens, o.max_draft_tokens) == (3, 1, 4, 4)
    assert o.adaptive_knobs[1]["ema_alpha"] == 0.2 and o.adaptive_knobs[32]["update_interval"] == 5
    s = o.summary()
    assert s["adaptive"] is True and s["candidate_steps"] == [0, 1, 3] and s["max_draft_tokens"] == 4
    # SGLang's own config when none is given (0.5.23's and the CPU build's differ), the knobs a tier overrides
    assert outcome({**AD, "speculative-adaptive-config": None}).candidate_steps == (0, 1, 3, 5, 7)
    assert outcome({**AD, "speculative-adaptive-config": None}, version="0.0.0.dev0+g7f8f030").candidate_steps == (
        0,
        1,
        3,
        7,
    )
    knobs = outcome(
        {
            **AD,
            "speculative-adaptive-config": {
                "ema_alpha": 0.5,
                "1": {"candidate_steps": [1, 3], "ema_alpha": 0.1},
                "8": {"candidate_steps": [3]},
            },
        }
    )
    assert knobs.adaptive_knobs[1]["ema_alpha"] == 0.1 and knobs.adaptive_knobs[8]["ema_alpha"] == 0.5
    # steps None: the middle of the union; topk None: 1; draft tokens: steps + 1; the largest candidate sizes the KV
    o = outcome(
        {**E3, "speculative-adaptive": True, "speculative-adaptive-config": {1: {"candidate_steps": [0, 2, 5]}}}
    )
    assert (o.steps, o.topk, o.draft_tokens, o.max_draft_tokens) == (2, 1, 3, 6)
    assert outcome({**AD, "speculative-num-steps": 0}).later is None  # steps 0 is adaptive's no-drafting tier


def test_adaptive_disabled_runs_static_with_sglangs_reason():
    o = outcome(
        {**AD, "speculative-algorithm": "NEXTN", "speculative-draft-model-path": None},
        architecture="DeepseekV3ForCausalLM",
    )
    assert o.adaptive and o.algorithm == "EAGLE"  # NEXTN is EAGLE before the adaptive check
    o = outcome(
        {k: v for k, v in AD.items() if not k.startswith("speculative-num") and k != "speculative-eagle-topk"}
        | {"enable-dp-attention": True, "dp-size": 2}
    )
    assert not o.adaptive and o.adaptive_disabled_reason.startswith("attention DP is not supported")
    assert (o.steps, o.topk, o.draft_tokens) == (5, 4, 8)  # static from there on: the automatic choice for Llama
    assert "speculative_adaptive disabled: attention DP is not supported" in " ".join(o.warnings)
    o = outcome({**AD, "enable-dp-attention": True, "dp-size": 2}, version="0.0.0.dev0+g7f8f030")
    assert o.adaptive_disabled_reason.startswith("enable_dp_attention=True is not supported")


def test_adaptive_on_cpu_needs_the_decode_graph_off():
    cpu = {**AD, "device": "cpu"}
    assert ("error", "adaptive-cuda-graph-cpu") in found(cpu, target=CPU_BUILD)
    for off in (
        {"disable-cuda-graph": True},
        {"disable-decode-cuda-graph": True},
        {"cuda-graph-backend-decode": "disabled"},
        {"cuda-graph-config": '{"decode": {"backend": "disabled"}}'},
    ):
        assert not any(r == "adaptive-cuda-graph-cpu" for _, r in found({**cpu, **off}, target=CPU_BUILD)), off
    # the JSON wins over the flags, the backend flag over the switches
    assert ("error", "adaptive-cuda-graph-cpu") in found(
        {**cpu, "disable-cuda-graph": True, "cuda-graph-backend-decode": "full"}, target=CPU_BUILD
    )
    o = outcome(cpu, version="0.0.0.dev0+g7f8f030", gpu="cpu")
    assert o.later.exception == "NotImplementedError" and "disable-cuda-graph: true" in o.later.fix
    assert ("error", "adaptive-hisparse") not in found(
        {**AD, "enable-hisparse": True, "disable-radix-cache": True},
        target=rules.Target(
            version="0.0.0.dev0+g7f8f030", architecture="LlamaForCausalLM", gpu="H200", version_given=True
        ),
    )


def test_adaptive_config_from_a_path(tmp_path):
    good = tmp_path / "policy.json"
    good.write_text('{"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0]}}')
    assert outcome({**AD, "speculative-adaptive-config": str(good)}).candidate_steps == (0, 1, 3)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    o = outcome({**AD, "speculative-adaptive-config": str(bad)})
    assert o.error.exception.startswith("JSONDecodeError: Expecting property name")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    assert (
        outcome({**AD, "speculative-adaptive-config": str(listed)}).error.exception
        == "AttributeError: 'list' object has no attribute 'items'"
    )
    # a path this machine cannot read: the host's to check, not an error of the plan
    missing = {**AD, "speculative-adaptive-config": str(tmp_path / "on-the-hosts.json")}
    assert ("warning", "checked-on-host") in found(missing, target=H200_LLAMA)
    assert not any(level == "error" for level, _ in found(missing, target=H200_LLAMA))


def test_pp_spec_refuses_adaptive_only_when_it_stays_on():
    pp = {**AD, "speculative-algorithm": "NEXTN", "speculative-draft-model-path": None, "pp-size": 2}
    ctx = serverargs.Context("0.5.23", "DeepseekV3ForCausalLM", "H200", env={"SGLANG_ENABLE_PP_SPEC": "1"})
    o = serverargs.resolve({"model-path": "/m", **pp}, ctx)
    assert o.error and "SGLANG_ENABLE_PP_SPEC is not compatible with --speculative-adaptive" in o.error.exception
    # a tree turns adaptive off first, and SGLang's PP check reads the switch as resolved (measured on 0.5.23)
    o = serverargs.resolve(
        {"model-path": "/m", **pp, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8}, ctx
    )
    assert o.error is None and not o.adaptive and o.final == (3, 4, 8, 64)


def test_a_mapping_flag_value_is_json_in_the_argv():
    from sweep.sglang.args import flag_args

    assert flag_args(
        {"speculative-adaptive-config": {32: {"candidate_steps": [0]}, "1": {"candidate_steps": [1, 3]}}}
    ) == ["--speculative-adaptive-config", '{"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0]}}']
    from sweep.sglang import flagtypes

    for version in ("0.5.23", "0.0.0.dev0+g7f8f030"):  # argparse takes it as one value (the host's file path)
        assert flagtypes.refusal("speculative-adaptive-config", POLICY, version, True) is None


def test_adaptive_flags_of_a_version_between_the_known_ones_are_the_hosts_to_check():
    between = rules.Target(version="0.5.15", architecture="LlamaForCausalLM", gpu="H200", version_given=True)
    got = found(AD, target=between)
    assert ("warning", "checked-on-host") in got and not any(level == "error" for level, _ in got)


def test_lora_with_speculation_per_version():
    lora = {
        **E3,
        "speculative-num-steps": 3,
        "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 4,
        "enable-lora": True,
    }
    assert outcome(lora).error is None  # 0.5.23 takes EAGLE3 with LoRA (static)
    for version in ("0.5.10", "0.0.0.dev0+g7f8f030"):
        assert "only compatible with NGRAM" in outcome(lora, version=version).error.exception
    assert outcome({**lora, "speculative-algorithm": "STANDALONE"}).error.exception.endswith("not STANDALONE.")
    assert outcome({"speculative-algorithm": "NGRAM", "enable-lora": True}, version="0.5.10", gpu="H200").error is None


POLICY_PLAN = """
name: policy
server: {model_path: /m, tp_size: 8, architecture: KimiK25ForConditionalGeneration, gpu: H200,
         flags: {max-running-requests: 256}}
grid:
  axes:
    drafter:
      values:
        none: {}
        d1:
          flags:
            speculative-algorithm: EAGLE3
            speculative-draft-model-path: /d1
            speculative-adaptive: true
            speculative-adaptive-config: {"1": {"candidate_steps": [3, 5]}, "30": {"candidate_steps": [1, 2]}, "100": {"candidate_steps": [0]}}
            speculative-num-steps: 5
            speculative-num-draft-tokens: 6
            speculative-eagle-topk: 1
"""


@pytest.mark.parametrize("version", ["0.5.23", "0.5.10"])
def test_plan_of_the_policy_launch(write_yaml, version):
    """--plan: the policy's launch flags (a mapping config) pass 0.5.23's rules, and 0.5.10 refuses them as its
    argparse does."""
    from sweep.experiment import config, plan

    built = plan.build(config.load(write_yaml(POLICY_PLAN), [f"server.sglang_version={version}"]))
    point = next(p for p in built.points if not p.baseline)
    if version == "0.5.23":
        assert not point.errors and point.resolved["adaptive"] is True
        assert point.resolved["candidate_steps"] == [0, 1, 2, 3, 5] and point.resolved["max_draft_tokens"] == 6
        config_arg = point.argv[point.argv.index("--speculative-adaptive-config") + 1]
        assert json.loads(config_arg)["30"] == {"candidate_steps": [1, 2]}
    else:
        assert len(point.errors) == 2 and all(
            "unrecognized arguments: --speculative-adaptive" in e for e in point.errors
        )
        assert all("0.5.23" in e for e in point.errors)
