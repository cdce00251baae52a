"""Every speculative rule, each with a case that passes and one that fails."""

import pytest

from sweep.bench.settings import BenchSettings, ConcurrencySettings
from sweep.sglang import rules

E3 = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/d"}
OK_BENCH = BenchSettings(server_metrics=False, concurrency=ConcurrencySettings(levels=[1, 8]))


def found(flags, bench=OK_BENCH):
    return {(f.level, f.rule) for f in rules.check({"model-path": "/m", "tp-size": 8, **flags}, bench)}


CASES = [
    # (rule, level, failing flags, passing flags)
    ("unknown-flag", "error", {"speculative-num-step": 2}, {"speculative-num-steps": 2, "speculative-eagle-topk": 1, **E3}),
    ("unchecked-flag", "warning", {"my-custom-thing": 1}, {"trust-remote-code": True}),
    ("unknown-algorithm", "error", {**E3, "speculative-algorithm": "eagle4"}, E3),
    ("spec-flags-without-algorithm", "warning", {"speculative-num-steps": 2}, {}),
    ("draft-model-missing", "error", {"speculative-algorithm": "EAGLE3"}, {"speculative-algorithm": "NEXTN"}),
    ("topk-or-draft-without-steps", "error", {**E3, "speculative-eagle-topk": 1}, E3),
    ("topk-or-draft-without-steps", "error", {**E3, "speculative-num-draft-tokens": 4}, E3),
    ("steps-without-topk", "error", {**E3, "speculative-num-steps": 2}, {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 3}),
    ("topk1-draft-tokens-overridden", "warning", {**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 16},
     {**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 2}),
    ("tree-without-draft-tokens", "error", {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4},
     {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8}),
    ("draft-tree-too-small", "error", {**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 16},
     {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 16}),
    ("topk-page-size-backend", "error", {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8, "page-size": 64},
     {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8, "page-size": 64, "attention-backend": "fa3"}),
    ("topk-trtllm-mha", "error", {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8, "attention-backend": "trtllm_mha"},
     {**E3, "speculative-num-steps": 2, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 3, "attention-backend": "trtllm_mha"}),
    ("spec-with-pipeline-parallel", "error", {**E3, "pp-size": 2}, {"pp-size": 2}),
    ("dp-attention-unsupported", "error", {**E3, "speculative-algorithm": "STANDALONE", "enable-dp-attention": True},
     {**E3, "enable-dp-attention": True}),
]


@pytest.mark.parametrize("rule,level,bad,good", CASES, ids=[c[0] for c in CASES])
def test_rule(rule, level, bad, good):
    assert (level, rule) in found(bad)
    assert not any(r == rule for _, r in found(good))


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
    f = [x for x in rules.check({**E3, "speculative-num-steps": 1, "speculative-eagle-topk": 1,
                                 "speculative-num-draft-tokens": 16}, OK_BENCH)][0]
    assert "steps+1 = 2" in f.message and "2" in f.fix and str(f).startswith("topk1-draft-tokens-overridden:")
