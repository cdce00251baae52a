"""The speculative flag combinations the differential test runs through real SGLang, and their models.

Pure and deterministic: the same cases, with the same ids, on every run. A case is a point's flags
(the sweep's ``{flag: value}`` map, ``--model-path`` added from the target) plus the GPU its host
has. ``write_models`` writes the tiny ``config.json`` folders the cases name (no weights: argument
checking reads only the configs).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "rope_theta": 10000.0,
}
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "kv_lora_rank": 64,
    "q_lora_rank": 128,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "n_group": 1,
    "topk_group": 1,
    "num_nextn_predict_layers": 1,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "torch_dtype": "bfloat16",
    "bos_token_id": 0,
    "eos_token_id": 1,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "topk_method": "noaux_tc",
    "norm_topk_prob": True,
}

MODELS: dict[str, dict[str, Any]] = {
    "llama": LLAMA,
    "dsv3": DEEPSEEK_V3,
    "llama-eagle3": {
        **LLAMA,
        "architectures": ["LlamaForCausalLMEagle3"],
        "num_hidden_layers": 1,
        "draft_vocab_size": 512,
    },
    "llama-eagle": {**LLAMA, "architectures": ["LlamaForCausalLMEagle"], "num_hidden_layers": 1},
    "llama-small": {**LLAMA, "num_hidden_layers": 1},
    "dsv3-nextn": {**DEEPSEEK_V3, "architectures": ["DeepseekV3ForCausalLMNextN"], "num_hidden_layers": 1},
    # a DeepSeek Sparse Attention target (index_topk): what --enable-hisparse takes
    "dsv32": {
        **DEEPSEEK_V3,
        "architectures": ["DeepseekV32ForCausalLM"],
        "index_topk": 64,
        "index_head_dim": 32,
        "index_n_heads": 4,
    },
}
# adaptive speculation configs (--speculative-adaptive-config NAME: written as adaptive/NAME.json), as text
ADAPTIVE_CONFIGS: dict[str, str] = {
    "policy": '{"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0]}}',
    "knobs": '{"ema_alpha": 0.3, "1": {"candidate_steps": [0, 2, 5], "update_interval": 3}, "8": {"candidate_steps": [2]}}',
    "off": '{"1": {"candidate_steps": [0]}}',
    "negative": '{"1": {"candidate_steps": [1, -1]}}',
    "not-a-list": '{"1": {"candidate_steps": 3}}',
    "empty": '{"1": {"candidate_steps": []}}',
    "float": '{"1": {"candidate_steps": [1.0, 3]}}',
    "no-steps": '{"1": {"steps": [1]}}',
    "no-tier": '{"ema_alpha": 0.3}',
    "named-tier": '{"bs1": {"candidate_steps": [1]}}',
    "a-list": "[1, 2]",
    "not-json": "{not json",
}
TARGETS = ("llama", "dsv3")
# drafters each algorithm is given per target (None: no --speculative-draft-model-path)
DRAFTERS = {
    ("llama", "EAGLE3"): ("llama-eagle3", None),
    ("dsv3", "EAGLE3"): ("llama-eagle3", None),
    ("llama", "EAGLE"): ("llama-eagle", None),
    ("dsv3", "EAGLE"): (None, "dsv3-nextn"),
    ("llama", "NEXTN"): (None, "llama-eagle"),
    ("dsv3", "NEXTN"): (None, "dsv3-nextn"),
    ("llama", "STANDALONE"): ("llama-small", None),
    ("dsv3", "STANDALONE"): ("llama-small", None),
    ("llama", "NGRAM"): (None,),
    ("dsv3", "NGRAM"): (None,),
}
ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
STEPS = (None, 0, 1, 3)
TOPK = (None, 1, 4)
DRAFT = (None, 2, 4, 16)
PAGE = (None, 16, 64)
BACKENDS = (None, "fa3", "flashinfer", "triton", "flashmla", "trtllm_mha")
CAP = (None, 256)
GPUS = ("H200",) * 8 + ("B200", "A100")
N_RANDOM = 240


@dataclass(frozen=True)
class Case:
    id: str
    gpu: str  # a key of sglang_argcheck.GPUS; "cpu" means --device cpu
    target: str  # a key of MODELS
    flags: dict[str, Any] = field(hash=False)  # without model-path (added by argv())

    def all_flags(self, models: Path) -> dict[str, Any]:
        out: dict[str, Any] = {"model-path": str(models / self.target)}
        for k, v in self.flags.items():
            out[k] = (
                str(models / v)
                if k == "speculative-draft-model-path" and v
                else str(models / "adaptive" / f"{v}.json")
                if k == "speculative-adaptive-config" and v
                else v
            )
        return out


def _label(gpu: str, target: str, flags: dict[str, Any]) -> str:
    short = {
        "speculative-algorithm": "",
        "speculative-num-steps": "s",
        "speculative-eagle-topk": "k",
        "speculative-num-draft-tokens": "d",
        "page-size": "p",
        "attention-backend": "",
        "max-running-requests": "cap",
        "speculative-draft-model-path": "drafter=",
        "device": "device=",
        "speculative-adaptive": "adaptive",
        "speculative-adaptive-config": "config=",
    }
    parts = [gpu, target]
    for k, v in flags.items():
        parts.append((short[k] if v is True else f"{short[k]}{v}") if k in short else f"{k}={v}")
    return "/".join(parts)


def _case(gpu: str, target: str, **given: Any) -> Case:
    names = {
        "algo": "speculative-algorithm",
        "drafter": "speculative-draft-model-path",
        "steps": "speculative-num-steps",
        "topk": "speculative-eagle-topk",
        "draft": "speculative-num-draft-tokens",
        "page": "page-size",
        "backend": "attention-backend",
        "cap": "max-running-requests",
        "device": "device",
        "adaptive": "speculative-adaptive",
        "config": "speculative-adaptive-config",
    }
    flags = {names.get(k, k): v for k, v in given.items() if v is not None}
    return Case(_label(gpu, target, flags), gpu, target, flags)


# Combinations the issue names, kept whatever the random draw gives.
NAMED = [
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4, draft=8, page=16),
    _case("H200", "dsv3", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4, draft=8, page=16),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4, draft=8, page=16, backend="triton"),
    _case("H200", "dsv3", algo="EAGLE", steps=3, topk=4, draft=8, backend="flashmla"),
    _case("H200", "dsv3", algo="EAGLE", steps=3, topk=1, draft=4, backend="flashmla"),
    _case("H200", "dsv3", algo="NEXTN"),
    _case("H200", "dsv3", algo="EAGLE"),
    _case("H200", "llama", algo="EAGLE"),
    _case("H200", "llama", algo="EAGLE3"),
    _case("H200", "llama", algo="STANDALONE"),
    _case("H200", "llama", algo="NEXTN"),
    _case("H200", "llama", algo="NGRAM", page=16),
    _case("H200", "llama", algo="NGRAM", page=16, backend="flashinfer"),
    _case("H200", "dsv3", algo="NGRAM", page=64),
    _case("H200", "llama", algo="NGRAM"),
    _case("H200", "llama", algo="eagle3", drafter="llama-eagle3", steps=2, topk=1, draft=3),
    _case("H200", "llama", algo="ngram"),
    _case("H200", "llama", algo="FOO"),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=0, topk=1, draft=1),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=1, topk=1, draft=16),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", topk=4),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", draft=4),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=1, topk=4, draft=16),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4, draft=8, backend="trtllm_mha"),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=1, draft=4, backend="trtllm_mha"),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=1, draft=4, cap=256),
    _case(
        "H200",
        "llama",
        algo="STANDALONE",
        drafter="llama-small",
        steps=3,
        topk=1,
        draft=4,
        **{"enable-dp-attention": True},
    ),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=1, draft=4, **{"pp-size": 2}),
    _case(
        "H200",
        "llama",
        algo="EAGLE3",
        drafter="llama-eagle3",
        **{"speculative-num-step": 3, "speculative-eagle-topk": 1},
    ),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", **{"speculative-num": 3}),
    _case("B200", "dsv3", algo="EAGLE", steps=3, topk=4, draft=8),
    _case("B200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4, draft=8, page=16),
    _case("B200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=1, draft=4),
    _case("A100", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4, draft=8, page=16),
    _case("A100", "dsv3", algo="EAGLE", steps=3, topk=4, draft=8, page=16),
    _case("cpu", "llama", algo="NGRAM", device="cpu"),
    _case("cpu", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=1, draft=4, device="cpu"),
    _case("cpu", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4, draft=8, page=16, device="cpu"),
]

# topk below 1 (issue 20): every version's argument checks pass it; the drafter dies building its tree.
# NGRAM sets topk itself (its BFS breadth), so there it is only ignored.
TOPK_BELOW_ONE = [
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=0, draft=4),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=1, topk=0, draft=2),
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=-1, draft=4),
    _case("H200", "llama", algo="EAGLE", drafter="llama-eagle", steps=3, topk=0, draft=4),
    _case("H200", "dsv3", algo="NEXTN", steps=3, topk=0, draft=4),
    _case("H200", "dsv3", algo="NEXTN", steps=2, topk=-2, draft=8),
    _case("H200", "llama", algo="STANDALONE", drafter="llama-small", steps=3, topk=0, draft=4, page=16),
    _case("B200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=0, draft=4),
    _case("cpu", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=0, draft=4, device="cpu"),
]
NGRAM_TOPK = [
    _case("H200", "llama", algo="NGRAM", topk=0),
    _case("H200", "llama", algo="NGRAM", topk=-1, draft=8),
]
# a tree with a single draft token: the argument checks pass it, startup dies (draft-tokens-too-few)
TREE_ONE_TOKEN = [
    _case("H200", "llama", algo="EAGLE3", drafter="llama-eagle3", steps=3, topk=4, draft=1),
]
# speculation with pipeline parallelism: 0.5.10 rejects all of it; 0.5.23 takes EAGLE / NEXTN
# (non-multi-layer) only on a prefill node of a disaggregated deployment (without SGLANG_ENABLE_PP_SPEC)
PIPELINE = [
    _case("H200", "dsv3", algo="NEXTN", steps=3, topk=1, draft=4, **{"pp-size": 2}),
    _case("H200", "dsv3", algo="NEXTN", **{"pp-size": 2}),
    _case("H200", "llama", algo="EAGLE", drafter="llama-eagle", steps=3, topk=1, draft=4, **{"pp-size": 2}),
    _case("H200", "llama", algo="NEXTN", drafter="llama-eagle", steps=3, topk=4, draft=8, **{"pp-size": 2}),
    _case("H200", "dsv3", algo="NEXTN", steps=3, topk=1, draft=4, **{"pp-size": 2, "disaggregation-mode": "decode"}),
    _case("H200", "dsv3", algo="NEXTN", steps=3, topk=1, draft=4, **{"pp-size": 2, "disaggregation-mode": "prefill"}),
    _case(
        "H200",
        "llama",
        algo="EAGLE",
        drafter="llama-eagle",
        steps=3,
        topk=1,
        draft=4,
        **{"pp-size": 2, "disaggregation-mode": "prefill"},
    ),
    _case(
        "H200",
        "llama",
        algo="EAGLE",
        drafter="llama-eagle",
        steps=3,
        topk=1,
        draft=4,
        **{"pp-size": 2, "disaggregation-mode": "prefill", "enable-multi-layer-eagle": True},
    ),
    _case(
        "H200",
        "llama",
        algo="EAGLE3",
        drafter="llama-eagle3",
        steps=3,
        topk=1,
        draft=4,
        **{"pp-size": 2, "disaggregation-mode": "prefill"},
    ),
    _case(
        "H200",
        "llama",
        algo="STANDALONE",
        drafter="llama-small",
        steps=3,
        topk=1,
        draft=4,
        **{"pp-size": 2, "disaggregation-mode": "prefill"},
    ),
]

# adaptive speculation (issue 35): 0.5.10's argparse refuses the flags; 0.5.23 and the CPU build load the config
# (refusing what its loader refuses), fall back to static speculation for each of adaptive_unsupported_reason's
# conditions, start at the given steps (else the middle candidate) with draft tokens = steps + 1
_E3 = dict(algo="EAGLE3", drafter="llama-eagle3")
_AD = dict(adaptive=True, config="policy")
_LORA = {"enable-lora": True, "max-lora-rank": 8, "lora-target-modules": "q_proj"}
ADAPTIVE = [
    _case("H200", "llama", **_E3, **_AD),
    _case("H200", "llama", **_E3, adaptive=True),  # SGLang's own config (0.5.23's and the CPU build's differ)
    _case("H200", "llama", **_E3, **_AD, steps=3, topk=1, draft=4),
    _case("H200", "llama", **_E3, **_AD, steps=1),
    _case("H200", "llama", **_E3, **_AD, steps=0),
    _case("H200", "llama", **_E3, **_AD, steps=2),  # not a candidate
    _case("H200", "llama", **_E3, **_AD, steps=3, topk=1, draft=9),  # draft tokens: steps + 1 whatever is given
    _case("H200", "llama", **_E3, **_AD, draft=4),  # no steps: allowed with adaptive (the middle candidate)
    _case("H200", "llama", **_E3, adaptive=True, config="knobs"),
    _case("H200", "llama", **_E3, adaptive=True, config="off"),
    *[
        _case("H200", "llama", **_E3, adaptive=True, config=bad)
        for bad in (
            "negative",
            "not-a-list",
            "empty",
            "float",
            "no-steps",
            "no-tier",
            "named-tier",
            "a-list",
            "not-json",
        )
    ],
    _case("H200", "llama", **_E3, config="negative", steps=3, topk=1, draft=4),  # config without the switch: unread
    # adaptive_unsupported_reason: static speculation from there on (the automatic choice where no steps are given)
    _case("H200", "llama", **_E3, **_AD, steps=3, topk=4, draft=8),
    _case("H200", "llama", **_E3, **_AD, topk=4),
    _case("H200", "llama", algo="STANDALONE", drafter="llama-small", **_AD),
    _case("H200", "llama", algo="NGRAM", **_AD),
    _case("H200", "dsv3", algo="NEXTN", **_AD),  # NEXTN is EAGLE by then: adaptive
    _case("H200", "dsv3", algo="NEXTN", **_AD, **{"enable-dp-attention": True, "dp-size": 2, "tp-size": 2}),
    _case("H200", "dsv3", algo="NEXTN", **_AD, **{"enable-dp-attention": True}),  # dp 1: no attention DP
    _case("H200", "llama", **_E3, **_AD, **{"enable-dp-attention": True, "dp-size": 2, "tp-size": 2}),
    _case("H200", "dsv3", algo="NEXTN", **_AD, **{"enable-multi-layer-eagle": True}),
    _case("H200", "llama", algo="EAGLE", drafter="llama-eagle", **_AD, **{"enable-multi-layer-eagle": True}),
    _case(
        "H200",
        "dsv3",
        algo="NEXTN",
        **_AD,
        **{"enable-two-batch-overlap": True, "moe-a2a-backend": "deepep", "tp-size": 2, "ep-size": 2},
    ),
    # HiSparse (0.5.23; not the CPU build) refuses adaptive speculation that stays on
    _case("H200", "dsv32", algo="NEXTN", **_AD, **{"enable-hisparse": True, "disable-radix-cache": True}),
    _case(
        "H200",
        "dsv32",
        algo="NEXTN",
        **_AD,
        **{
            "enable-hisparse": True,
            "disable-radix-cache": True,
            "enable-dp-attention": True,
            "dp-size": 2,
            "tp-size": 2,
        },
    ),
    _case(
        "H200",
        "llama",
        **_E3,
        **_AD,
        **{"enable-pdmux": True, "disable-overlap-schedule": True, "chunked-prefill-size": -1},
    ),
    # LoRA: 0.5.23 refuses adaptive speculation with it; 0.5.10 and the CPU build refuse any speculation but NGRAM
    _case("H200", "llama", **_E3, **_AD, **_LORA),
    _case("H200", "llama", **_E3, steps=3, topk=1, draft=4, **_LORA),
    _case("H200", "llama", algo="STANDALONE", drafter="llama-small", steps=3, topk=1, draft=4, **_LORA),
    _case("H200", "llama", algo="NGRAM", **_LORA),
    # on CPU the arguments pass; without the decode CUDA graph off, startup dies building the runtime states
    _case("cpu", "llama", **_E3, **_AD, device="cpu"),
    _case("cpu", "llama", **_E3, **_AD, device="cpu", **{"disable-cuda-graph": True}),
    _case("cpu", "llama", **_E3, **_AD, device="cpu", **{"cuda-graph-backend-decode": "disabled"}),
]
NAMED += TOPK_BELOW_ONE + NGRAM_TOPK + TREE_ONE_TOKEN + PIPELINE + ADAPTIVE

# What the plan must predict for cases SGLang's argument checks pass: case id -> the later failure's rule
EXPECT_LATER = {
    **{c.id: "topk-below-one" for c in TOPK_BELOW_ONE},
    **{c.id: "draft-tokens-too-few" for c in TREE_ONE_TOKEN},
    ADAPTIVE[-3].id: "adaptive-cuda-graph-cpu",
}
# where SGLang has no adaptive flags (0.5.10), EXPECT_LATER's cases that use them are refused by its argparse
ADAPTIVE_IDS = frozenset(c.id for c in ADAPTIVE)


def generate(n_random: int = N_RANDOM, seed: int = 12) -> list[Case]:
    """The named cases plus ``n_random`` drawn from the product (the same every run)."""
    rng = random.Random(seed)
    out = {c.id: c for c in NAMED}
    while len(out) < len(NAMED) + n_random:
        target = rng.choice(TARGETS)
        algo = rng.choice(ALGORITHMS)
        c = _case(
            rng.choice(GPUS),
            target,
            algo=algo,
            drafter=rng.choice(DRAFTERS[(target, algo)]),
            steps=rng.choice(STEPS),
            topk=rng.choice(TOPK),
            draft=rng.choice(DRAFT),
            page=rng.choice(PAGE),
            backend=rng.choice(BACKENDS),
            cap=rng.choice(CAP),
        )
        out.setdefault(c.id, c)
    return list(out.values())


def write_models(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, config in MODELS.items():
        (root / name).mkdir(exist_ok=True)
        (root / name / "config.json").write_text(json.dumps(config, indent=1))
    (root / "adaptive").mkdir(exist_ok=True)
    for name, text in ADAPTIVE_CONFIGS.items():
        (root / "adaptive" / f"{name}.json").write_text(text)
    return root
