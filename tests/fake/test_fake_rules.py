"""The fake's command line and SGLang's ServerArgs semantics (in-process: pure functions)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sweep import fake
from sweep.fake import args as fake_args
from sweep.fake import rules
from sweep.fake.main import Serving, serving_for
from sweep.fake.model import Spec

MODEL = ["--model-path", "/models/Kimi-K2-Instruct"]
LLAMA = ["--model-path", "/models/Llama-3.1-8B-Instruct"]
EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/drafter"]


def resolve(*argv: str, version: str = "0.5.10") -> rules.Resolved:
    parsed = fake_args.parse([*argv, "--fake-version", version])
    return rules.resolve(parsed.ns, parsed.version)


def rejected(*argv: str, version: str = "0.5.10") -> rules.ArgsRejected:
    with pytest.raises(rules.ArgsRejected) as info:
        resolve(*argv, version=version)
    return info.value


# --- command line ---


@pytest.mark.slow
def test_help_lists_every_flag_the_sweep_uses():
    out = subprocess.run([sys.executable, "-m", "sweep.fake", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    from sweep.sglang.args import KNOWN_FLAGS  # the plan's list of SGLang flags

    for_version = {f.name for f in fake_args.SGLANG_FLAGS if f.in_version(fake.SGLANG_VERSION)}
    for flag in KNOWN_FLAGS - {"cuda-graph-max-bs-decode", "cuda-graph-max-bs-prefill", "cuda-graph-backend-decode"}:
        assert f"--{flag}" in out.stdout, flag
    for flag in for_version:
        assert f"--{flag}" in out.stdout
    for fake_flag in (
        "--fake-speed",
        "--fake-startup-speed",
        "--fake-accept-rate",
        "--fake-accept-map",
        "--fake-ledger",
        "--fake-zombie",
        "--fake-zombie-lifetime",
        "--fake-check-paths",
        "--fake-fail-at",
        "--fake-hang-at",
        "--fake-crash-after-requests",
        "--fake-version",
    ):
        assert fake_flag in out.stdout


def test_version_switches_cuda_graph_flags():
    assert fake.SGLANG_VERSION == "0.5.10"
    old = fake_args.build_parser("0.5.10").format_help()
    new = fake_args.build_parser("0.5.23").format_help()
    assert "--disable-cuda-graph" in old and "--cuda-graph-max-bs-decode" not in old
    # 0.5.23 keeps --disable-cuda-graph as a deprecated registration (server_args.py: "Deprecated. Use
    # --cuda-graph-backend-{decode,prefill}=disabled instead."), the only command-line spelling of its field
    assert "--disable-cuda-graph" in new and "--cuda-graph-backend-decode" in new


def test_unknown_well_formed_flags_are_accepted_and_reported():
    parsed = fake_args.parse([*MODEL, "--enable-foo", "--bar-size", "3", "--baz=x", "--neg", "-1"])
    assert parsed.unknown == ["--enable-foo", "--bar-size", "--baz", "--neg"]
    assert parsed.ns.model_path == "/models/Kimi-K2-Instruct"


@pytest.mark.parametrize("argv", [["-x"], ["stray"], ["--tp-size", "eight"], []])
def test_malformed_command_lines_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        fake_args.parse([*MODEL, *argv] if argv else argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_algorithm_case_follows_the_version():
    assert (
        resolve(*MODEL, "--speculative-algorithm", "eagle3", version="0.5.23").args["speculative_algorithm"] == "EAGLE3"
    )
    with pytest.raises(SystemExit):
        resolve(*MODEL, "--speculative-algorithm", "eagle3", version="0.5.10")


# --- ServerArgs rules ---


def test_topk_1_forces_draft_tokens_with_a_warning():
    r = resolve(
        *MODEL,
        *EAGLE3,
        "--speculative-num-steps",
        "1",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "16",
    )
    assert r.args["speculative_num_draft_tokens"] == 2
    assert (
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
        in r.warnings
    )


def test_running_cap_48_unless_given():
    r = resolve(*MODEL, *EAGLE3, "--speculative-num-steps", "2", "--speculative-eagle-topk", "1")
    assert r.args["max_running_requests"] == 48
    assert any("Max running requests is reset to 48" in w for w in r.warnings)
    assert (
        resolve(
            *MODEL,
            *EAGLE3,
            "--speculative-num-steps",
            "2",
            "--speculative-eagle-topk",
            "1",
            "--max-running-requests",
            "256",
        ).args["max_running_requests"]
        == 256
    )
    assert resolve(*MODEL).args["max_running_requests"] is None  # no speculation: no cap from the rules


@pytest.mark.parametrize("model, expected", [(LLAMA, (5, 4, 8)), (MODEL, (3, 1, 4))])
def test_auto_chosen_defaults_by_architecture(model, expected):
    a = resolve(*model, *EAGLE3).args
    assert (a["speculative_num_steps"], a["speculative_eagle_topk"], a["speculative_num_draft_tokens"]) == expected


def test_topk_or_draft_tokens_without_steps_is_a_bare_assertion():
    exc = rejected(*MODEL, *EAGLE3, "--speculative-eagle-topk", "4")
    assert exc.exception == "AssertionError"
    assert rejected(*MODEL, *EAGLE3, "--speculative-num-draft-tokens", "4").exception == "AssertionError"


def test_steps_without_topk_is_a_type_error_while_resolving():
    exc = rejected(*MODEL, *EAGLE3, "--speculative-num-steps", "3")  # real SGLang: in ServerArgs, exit 1
    assert exc.exception == "TypeError: '>' not supported between instances of 'NoneType' and 'int'"


def test_tree_with_pages_needs_flashinfer_or_fa3():
    tree = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"]
    exc = rejected(*MODEL, *EAGLE3, *tree, "--page-size", "64", "--attention-backend", "triton")
    assert exc.exception.startswith("ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable")
    resolve(*MODEL, *EAGLE3, *tree, "--page-size", "64", "--attention-backend", "flashinfer")
    resolve(*MODEL, *EAGLE3, *tree, "--page-size", "64", "--attention-backend", "triton", version="0.5.23")
    # on an H200 0.5.10 refuses trtllm_mha for prefill (Blackwell only); 0.5.23 takes it, not with a tree
    assert "Blackwell" in rejected(*MODEL, *EAGLE3, *tree, "--attention-backend", "trtllm_mha").exception
    exc = rejected(*MODEL, *EAGLE3, *tree, "--attention-backend", "trtllm_mha", version="0.5.23")
    assert exc.exception == "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding."
    # flashmla forces page size 64: no tree with it
    assert rejected(*MODEL, *EAGLE3, *tree, "--attention-backend", "flashmla").exception.startswith("ValueError")


def test_the_backend_is_chosen_before_the_tree_check():
    tree = [
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
        "--page-size",
        "16",
    ]
    assert resolve(*LLAMA, *EAGLE3, *tree).args["attention_backend"] == "flashinfer"
    assert resolve(*MODEL, *EAGLE3, *tree).args["attention_backend"] == "fa3"  # DeepSeek-V3 family on Hopper
    assert rejected(*MODEL, *EAGLE3, *tree, "--fake-gpu", "B200").exception.startswith("ValueError")  # trtllm_mla
    # NGRAM sets topk 10 itself: page 16 fails on the fa3 SGLang picks on Hopper
    assert "topk(10)" in rejected(*LLAMA, "--speculative-algorithm", "NGRAM", "--page-size", "16").exception


def test_tree_too_small_for_its_draft_tokens_fails_at_draft_capture():
    r = resolve(
        *MODEL,
        *EAGLE3,
        "--speculative-num-steps",
        "1",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "8",
    )
    assert r.deferred == rules.Deferred("draft_capture", "RuntimeError: selected index k out of range")
    r = resolve(*MODEL, *EAGLE3, "--speculative-num-steps", "0", "--speculative-eagle-topk", "1")
    assert r.deferred is not None and r.args["speculative_num_draft_tokens"] == 1  # steps 0 passes the checks


def test_other_speculative_rules():
    standalone = [*MODEL, "--speculative-algorithm", "STANDALONE", "--enable-dp-attention"]
    resolve(*standalone)  # dp attention needs dp > 1 to be on at all
    assert "standalone" in rejected(*standalone, "--dp-size", "2").exception
    assert rejected(*MODEL, *EAGLE3, "--pp-size", "2").exception.startswith("AssertionError")
    assert resolve(*MODEL, "--speculative-algorithm", "NEXTN").args["speculative_algorithm"] == "EAGLE"
    ngram = resolve(*MODEL, "--speculative-algorithm", "NGRAM").args
    assert ngram["speculative_num_draft_tokens"] == 12 and ngram["max_running_requests"] == 48
    assert ngram["speculative_eagle_topk"] == 10
    # MTP architectures default the drafter to the target itself; others load the target too
    assert resolve(*MODEL, "--speculative-algorithm", "EAGLE").args["speculative_draft_model_path"] == MODEL[1]
    assert resolve(*LLAMA, "--speculative-algorithm", "EAGLE").deferred is None
    assert resolve(*LLAMA, "--speculative-algorithm", "EAGLE3").deferred.where == "draft_load"  # no hot_token_id
    assert (
        rejected(*MODEL, "--speculative-algorithm", "foo", version="0.5.23").exception
        == "ValueError: Unknown speculative algorithm name: FOO"
    )


def test_pipeline_parallel_speculation_0_5_23():
    nextn = [
        *MODEL,
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--pp-size",
        "2",
    ]
    e = rejected(*nextn, version="0.5.23")
    assert e.exception == (
        "AssertionError: PP + speculative decoding (MTP) is only supported on prefill nodes "
        "(disaggregation-mode=prefill)"
    )
    assert resolve(*nextn, "--disaggregation-mode", "prefill", version="0.5.23").args["pp_size"] == 2
    assert rejected(*nextn, "--disaggregation-mode", "prefill").exception.startswith(
        "AssertionError: Pipeline parallelism is not compatible"
    )  # 0.5.10: never
    assert (
        "multi-layer"
        in rejected(
            *nextn, "--disaggregation-mode", "prefill", "--enable-multi-layer-eagle", version="0.5.23"
        ).exception
    )


def test_pipeline_parallel_speculation_reads_sglang_enable_pp_spec(monkeypatch):
    nextn = [
        *MODEL,
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--pp-size",
        "2",
    ]
    monkeypatch.setenv("SGLANG_ENABLE_PP_SPEC", "1")
    assert resolve(*nextn, version="0.5.23").args["pp_size"] == 2


def test_topk_below_one_fails_at_draft_capture():
    r = resolve(
        *LLAMA,
        *EAGLE3,
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "0",
        "--speculative-num-draft-tokens",
        "4",
        version="0.5.23",
    )
    assert r.deferred.where == "draft_capture"
    assert r.deferred.exception.startswith("RuntimeError: cannot reshape tensor of 0 elements into shape [-1, 0, 0]")
    r = resolve(
        *LLAMA,
        *EAGLE3,
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "-1",
        "--speculative-num-draft-tokens",
        "4",
    )
    assert r.deferred == rules.Deferred("draft_capture", "RuntimeError: selected index k out of range")


def test_cpu_device():
    assert (
        rejected(*LLAMA, "--device", "cpu", "--speculative-algorithm", "NGRAM").exception
        == "ValueError: Ngram speculative decoding only supports CUDA device."
    )
    assert resolve(*LLAMA, "--device", "cpu", "--speculative-algorithm", "NGRAM", version="0.5.23").speculative


def test_architecture_from_config_json(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"]}')
    assert rules.architecture(str(tmp_path)) == "Qwen2ForCausalLM"
    assert rules.architecture(str(tmp_path), override="LlamaForCausalLM") == "Qwen2ForCausalLM"  # the file wins
    assert rules.architecture("/nowhere/kimi-k2") == "DeepseekV3ForCausalLM"
    assert rules.architecture("/nowhere/x", override="GptOssForCausalLM") == "GptOssForCausalLM"
    # a Llama config under a DeepSeek-looking name: the config decides the automatic defaults
    llama = tmp_path / "deepseek-named"
    llama.mkdir()
    (llama / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    a = resolve("--model-path", str(llama), *EAGLE3).args
    assert (a["speculative_num_steps"], a["speculative_eagle_topk"], a["speculative_num_draft_tokens"]) == (5, 4, 8)


def test_serving_for_gives_what_the_server_runs():
    argv = [
        *MODEL,
        *EAGLE3,
        "--speculative-num-steps",
        "1",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "16",
        "--fake-speed",
        "4",
        "--fake-accept-rate",
        "0.5",
    ]
    assert serving_for(argv) == Serving(Spec(1, 1, 2, accept_rate=0.5), 48, 4.0)
    assert serving_for(MODEL) == Serving(None, None, 1.0)
    mapped = serving_for(
        [
            *MODEL,
            *EAGLE3,
            "--speculative-num-steps",
            "2",
            "--speculative-eagle-topk",
            "1",
            "--fake-accept-map",
            '{"drafter": 0.9}',
            "--max-running-requests",
            "100",
        ]
    )
    assert mapped.spec.accept_rate == 0.9 and mapped.max_running == 100
