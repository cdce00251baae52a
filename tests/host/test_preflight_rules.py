"""Pre-flight checks SGLang's rules again with what only the host knows: its SGLang version, its GPU
and the target's config.json there."""

import json

import pytest

from sweep.core.checks import lines
from sweep.core.errors import PointFailure
from sweep.core.settings import BenchSettings
from sweep.host import preflight as pf

TREE = {
    "model-path": "/m",
    "speculative-algorithm": "EAGLE3",
    "speculative-draft-model-path": "/d",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 4,
    "speculative-num-draft-tokens": 8,
    "page-size": 16,
    "max-running-requests": 64,
    "enable-metrics": True,
}


def test_a_tree_with_paged_kv_on_a_hopper_host_passes():
    r = pf.PreflightReport(sglang_version="0.5.23", gpu_name="NVIDIA H200")
    pf.check_rules(TREE, BenchSettings(), r, "DeepseekV3ForCausalLM")
    assert lines(r.checks) == ["ok: SGLang 0.5.23's rules on NVIDIA H200"]


def test_flashmla_forces_page_64_and_a_tree_fails_in_seconds():
    r = pf.PreflightReport(sglang_version="0.5.23", gpu_name="NVIDIA H200")
    with pytest.raises(PointFailure) as e:
        pf.check_rules({**TREE, "attention-backend": "flashmla"}, BenchSettings(), r, "DeepseekV3ForCausalLM")
    assert e.value.phase == "preflight" and "topk-page-size-backend" in e.value.reason and e.value.fix


def test_the_hosts_config_json_names_the_architecture(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4}))
    auto = {
        "model-path": str(model),
        "speculative-algorithm": "EAGLE",
        "speculative-draft-model-path": "/d",
        "max-running-requests": 64,
        "enable-metrics": True,
    }
    r = pf.PreflightReport(sglang_version="0.5.23", gpu_name="NVIDIA H200")
    pf.check_rules(auto, BenchSettings(), r, architecture="DeepseekV3ForCausalLM")  # config.json wins
    # read as a Llama (the host's config.json), not as the experiment's DeepSeek (which SGLang gives (3, 1, 4))
    assert [c.rule for c in r.checks] == ["auto-speculative-params"], lines(r.checks)
    assert "SGLang picks (5, 4, 8) for EAGLE on LlamaForCausalLM" in r.checks[0].message
