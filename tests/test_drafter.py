"""The drafter pre-flight (sweep/sglang/drafter.py) on small checkpoints built here, one per mistake.

No torch in the project's venv: ``write_safetensors`` writes the header and zero bytes itself.
``MISTAKES`` is shared with tests/real/test_real_drafter.py, which serves each of these checkpoints
with the real SGLang and shows that what it does matches the verdict here.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from sweep.sglang import drafter as dr
from tests.tools import tinymodels

AUX_LAYER_IDS, HEADS, HIDDEN, INTERMEDIATE, KV_HEADS, TARGET_LAYERS, VOCAB = (
    tinymodels.AUX_LAYER_IDS,
    tinymodels.HEADS,
    tinymodels.HIDDEN,
    tinymodels.INTERMEDIATE,
    tinymodels.KV_HEADS,
    tinymodels.TARGET_LAYERS,
    tinymodels.VOCAB,
)

BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "BOOL": 1}
Tensors = dict  # name -> (dtype, shape)


def write_safetensors(path: Path, tensors: Tensors) -> None:
    """A valid safetensors file of zeros: the 8-byte little-endian header length, the JSON header
    (padded to 8 bytes, as safetensors writes it), then the data."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = math.prod(shape) * BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.truncate(8 + len(raw) + offset)  # zeros


def target_config(*, hidden: int = HIDDEN, vocab: int = VOCAB, layers: int = TARGET_LAYERS) -> dict:
    """The tiny Llama target's config.json (tinymodels.make_target (cluster/sglang-cpu-x86/tinymodels.py), as transformers saves it)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "num_hidden_layers": layers,
        "head_dim": hidden // HEADS,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 3,
        "hidden_act": "silu",
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "dtype": "bfloat16",
    }


def eagle3_config(
    *, hidden: int = HIDDEN, vocab: int = VOCAB, draft_vocab: int | None = VOCAB, aux: list[int] | None = AUX_LAYER_IDS
) -> dict:
    """tinymodels.eagle3_config() without transformers: a one-layer LlamaForCausalLMEagle3."""
    cfg = {
        **target_config(hidden=hidden, vocab=vocab, layers=1),
        "architectures": ["LlamaForCausalLMEagle3"],
        "target_hidden_size": hidden,
    }
    if draft_vocab is not None:
        cfg["draft_vocab_size"] = draft_vocab
    if aux is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(aux), "use_aux_hidden_state": True}
    return cfg


def eagle3_tensors(*, hidden: int = HIDDEN, vocab: int = VOCAB, draft_vocab: int = VOCAB, n_aux: int = 3) -> Tensors:
    """The names and shapes of tinymodels.eagle3_weights(): how EAGLE-3 training libraries save it."""
    hd, inter = hidden // HEADS, INTERMEDIATE
    bf = "BF16"
    return {
        "midlayer.self_attn.q_proj.weight": (bf, (HEADS * hd, 2 * hidden)),
        "midlayer.self_attn.k_proj.weight": (bf, (KV_HEADS * hd, 2 * hidden)),
        "midlayer.self_attn.v_proj.weight": (bf, (KV_HEADS * hd, 2 * hidden)),
        "midlayer.self_attn.o_proj.weight": (bf, (hidden, HEADS * hd)),
        "midlayer.mlp.gate_proj.weight": (bf, (inter, hidden)),
        "midlayer.mlp.up_proj.weight": (bf, (inter, hidden)),
        "midlayer.mlp.down_proj.weight": (bf, (hidden, inter)),
        "midlayer.input_layernorm.weight": (bf, (hidden,)),
        "midlayer.hidden_norm.weight": (bf, (hidden,)),
        "midlayer.post_attention_layernorm.weight": (bf, (hidden,)),
        "fc.weight": (bf, (hidden, n_aux * hidden)),
        "norm.weight": (bf, (hidden,)),
        "lm_head.weight": (bf, (draft_vocab, hidden)),
        "d2t": ("I64", (draft_vocab,)),
        "t2d": ("BOOL", (vocab,)),
    }


def eagle1_tensors(hidden: int = HIDDEN) -> Tensors:
    """An EAGLE-1/2 drafter (LlamaForCausalLMEagle, as the EAGLE repository saves one)."""
    hd = hidden // HEADS
    bf = "BF16"
    return {
        "layers.0.self_attn.q_proj.weight": (bf, (HEADS * hd, hidden)),
        "layers.0.self_attn.k_proj.weight": (bf, (KV_HEADS * hd, hidden)),
        "layers.0.self_attn.v_proj.weight": (bf, (KV_HEADS * hd, hidden)),
        "layers.0.self_attn.o_proj.weight": (bf, (hidden, HEADS * hd)),
        "layers.0.mlp.gate_proj.weight": (bf, (INTERMEDIATE, hidden)),
        "layers.0.mlp.up_proj.weight": (bf, (INTERMEDIATE, hidden)),
        "layers.0.mlp.down_proj.weight": (bf, (hidden, INTERMEDIATE)),
        "layers.0.post_attention_layernorm.weight": (bf, (hidden,)),
        "fc.weight": (bf, (hidden, 2 * hidden)),
        "fc.bias": (bf, (hidden,)),
    }


def rename(tensors: Tensors, old: str, new: str) -> Tensors:
    return {k.replace(old, new) if k.startswith(old) else k: v for k, v in tensors.items()}


def reshape(tensors: Tensors, name: str, rows: int) -> Tensors:
    """``name`` with ``rows`` more rows: a weight of the wrong shape."""
    dtype, shape = tensors[name]
    return {**tensors, name: (dtype, (shape[0] + rows, *shape[1:]))}


def without(tensors: Tensors, *names: str) -> Tensors:
    return {k: v for k, v in tensors.items() if k not in names}


@dataclass(frozen=True)
class Mistake:
    """A drafter checkpoint with one mistake, what the check says about it and what real SGLang does.

    ``sglang``: ``load-error`` (SGLang stops while loading the weights, with ``sglang_says`` in the
    log), ``startup-error`` (it stops after loading the drafter, before serving), ``loads`` (it
    loads the drafter without a word; what follows is in ``after``, from SGLang's code)."""

    config: Callable[[], dict]
    tensors: Callable[[], Tensors]
    verdict: str  # ok | warning | error
    checks: tuple[str, ...]  # the findings' check names
    sglang: str  # load-error | startup-error | loads
    sglang_says: str = ""  # a line of the server log that shows it
    after: str = ""  # what SGLang does next, in words
    # the exception a speculative server dies of at its first forward pass (the warmup request), seen
    # on a live one (tests/real/test_real_drafter.py); "" where it serves
    first_forward: str = ""
    algorithm: str = "EAGLE3"
    shards: tuple[tuple[str, ...], ...] = ()  # split the tensors into these shards (names per shard)
    drop_shard: int | None = None  # the index names this shard; the file is not written


def _layers0() -> Tensors:
    return rename(eagle3_tensors(), "midlayer.", "layers.0.")


def _ddp() -> Tensors:
    return {f"module.{k}": v for k, v in eagle3_tensors().items()}


def _cfg(**kw) -> Callable[[], dict]:
    return lambda: eagle3_config(**kw)


Q = "midlayer.self_attn.q_proj.weight"
NORM = "midlayer.hidden_norm.weight"
MISTAKES: dict[str, Mistake] = {
    "ok": Mistake(eagle3_config, eagle3_tensors, "ok", (), "loads"),
    # the training library saved the decoder layer as layers.0.*: SGLang's own name, it loads ...
    "layers0": Mistake(eagle3_config, _layers0, "ok", (), "loads"),
    # ... as the probe shows: the same names with a norm of the wrong size stop the load
    "layers0-probe": Mistake(
        eagle3_config,
        lambda: reshape(_layers0(), NORM.replace("midlayer.", "layers.0."), 32),
        "error",
        ("weight-shape",),
        "load-error",
        "AssertionError",
    ),
    # extra rows of a stacked (q/k/v, gate/up) weight: the tensor-parallel loader cuts them off
    "q-rows-extra": Mistake(
        eagle3_config,
        lambda: reshape(_layers0(), Q.replace("midlayer.", "layers.0."), 32),
        "warning",
        ("weight-shape",),
        "loads",
        after="serves with q_proj's first rows",
    ),
    # a DDP wrapper's module.* prefix: nothing maps, nothing is said
    "ddp-prefix": Mistake(
        eagle3_config,
        _ddp,
        "warning",
        ("weights-ignored", "weights-missing"),
        "loads",
        after="serves with an uninitialized drafter: acceptance near zero",
    ),
    # ... and the probe: even a norm of the wrong size goes unnoticed, so those names were never loaded
    "ddp-prefix-probe": Mistake(
        eagle3_config,
        lambda: reshape(_ddp(), "module." + NORM, 32),
        "warning",
        ("weights-ignored", "weights-missing"),
        "loads",
        after="serves with an uninitialized drafter: acceptance near zero",
    ),
    "no-lm-head": Mistake(
        eagle3_config,
        lambda: without(eagle3_tensors(), "lm_head.weight"),
        "warning",
        ("weights-missing",),
        "loads",
        after="serves with an uninitialized lm_head",
    ),
    "no-fc": Mistake(
        eagle3_config,
        lambda: without(eagle3_tensors(), "fc.weight"),
        "warning",
        ("weights-missing",),
        "loads",
        after="serves with an uninitialized fc",
    ),
    # aux layer ids: 3 is the last layer of a 4-layer target, whose output SGLang never captures
    "aux-out-of-range": Mistake(
        _cfg(aux=[0, 1, 3]),
        eagle3_tensors,
        "error",
        ("aux-layers",),
        "loads",
        after="captures 2 hidden states for an fc of 3: dies at the first forward pass",
        first_forward="RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x512 and 768x256)",
    ),
    # the "fix" of the issue: -1 makes SGLang capture the input of layer 0
    "aux-minus-one": Mistake(
        _cfg(aux=[-1, 1, 2]),
        eagle3_tensors,
        "error",
        ("aux-layers",),
        "loads",
        after="TypeError (hidden_states + None) at the first forward pass",
        first_forward="TypeError: unsupported operand type(s) for +: 'Tensor' and 'NoneType'",
    ),
    "aux-unsorted": Mistake(
        _cfg(aux=[2, 0, 1]),
        eagle3_tensors,
        "warning",
        ("aux-layers",),
        "loads",
        after="serves with the hidden states in another order than training's",
    ),
    # no ids: SGLang's default [2, n//2, n-3] is [2, 2, 1] on a 4-layer target
    "aux-default": Mistake(
        _cfg(aux=None),
        eagle3_tensors,
        "error",
        ("aux-layers",),
        "loads",
        after="captures 2 hidden states for an fc of 3: dies at the first forward pass",
        first_forward="RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x512 and 768x256)",
    ),
    # trained for another target: hidden size 512 (self-consistent, so its weights load)
    "other-hidden": Mistake(
        _cfg(hidden=512),
        lambda: eagle3_tensors(hidden=512),
        "error",
        ("hidden-size",),
        "loads",
        after="fc takes 3x512, gets 3x256: dies at the first forward pass",
        first_forward="RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x768 and 1536x512)",
    ),
    # trained for another target's vocabulary (2048 tokens)
    "other-vocab": Mistake(
        _cfg(vocab=2048, draft_vocab=2048),
        lambda: eagle3_tensors(vocab=2048, draft_vocab=2048),
        "error",
        ("vocab", "draft-vocab"),
        "loads",
        after="draft ids up to 2047 on a 1024-token target: fails at the first verify",
    ),
    "draft-vocab-vs-lm-head": Mistake(
        _cfg(draft_vocab=512), eagle3_tensors, "error", ("weight-shape", "draft-vocab"), "load-error", "AssertionError"
    ),
    "d2t-short": Mistake(
        _cfg(draft_vocab=512),
        lambda: {**eagle3_tensors(draft_vocab=512), "d2t": ("I64", (256,))},
        "error",
        ("draft-vocab",),
        "loads",
        after="a draft id >= 256 indexes past the map at the first draft step",
    ),
    "no-d2t": Mistake(
        _cfg(draft_vocab=512),
        lambda: without(eagle3_tensors(draft_vocab=512), "d2t"),
        "warning",
        ("draft-vocab",),
        "loads",
        after="takes draft ids as target ids: acceptance near zero",
    ),
    "eagle1-under-eagle3": Mistake(
        lambda: {**target_config(layers=1), "architectures": ["LlamaForCausalLMEagle"]},
        eagle1_tensors,
        "error",
        ("algorithm",),
        "startup-error",
        "has no attribute 'hot_token_id'",
    ),
    "eagle3-under-eagle": Mistake(
        eagle3_config,
        eagle3_tensors,
        "warning",
        ("algorithm",),
        "loads",
        after="serves without aux hidden states and with the target's lm_head",
        algorithm="EAGLE",
    ),
    "missing-shard": Mistake(
        eagle3_config,
        eagle3_tensors,
        "error",
        ("shards",),
        "load-error",
        "missing",
        shards=(
            ("fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"),
            tuple(k for k in eagle3_tensors() if k.startswith("midlayer.")),
        ),
        drop_shard=1,
    ),
}


def write_target(folder: Path, cfg: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg or target_config()))
    return folder


def write_drafter(
    folder: Path, cfg: dict, tensors: Tensors, *, shards: tuple = (), drop_shard: int | None = None
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    if not shards:
        write_safetensors(folder / "model.safetensors", tensors)
        return folder
    weight_map = {}
    for i, names in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        weight_map.update({n: fname for n in names})
        if i != drop_shard:
            write_safetensors(folder / fname, {n: tensors[n] for n in names})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def build(folder: Path, m: Mistake) -> Path:
    return write_drafter(folder, m.config(), m.tensors(), shards=m.shards, drop_shard=m.drop_shard)


def verdict(report: dr.DrafterReport) -> str:
    return "error" if report.errors else "warning" if report.warnings else "ok"


@pytest.fixture
def target(tmp_path) -> Path:
    return write_target(tmp_path / "target")


# --- each mistake -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(MISTAKES))
def test_each_mistake_gets_its_verdict(name, target, tmp_path):
    m = MISTAKES[name]
    report = dr.check(target, build(tmp_path / name, m), m.algorithm)
    assert verdict(report) == m.verdict, [str(f) for f in report.findings]
    assert {f.rule for f in report.findings} == set(m.checks), [str(f) for f in report.findings]
    assert all(f.fix for f in report.findings)


def test_the_tiny_drafter_reads_the_layers_it_was_made_for(target, tmp_path):
    report = dr.check(target, build(tmp_path / "d", MISTAKES["ok"]), "EAGLE3")
    assert report.findings == []
    assert report.architecture == "LlamaForCausalLMEagle3" and report.tensors == 15
    assert report.aux_layers == AUX_LAYER_IDS and report.aux_source == "config"  # Llama: id k = output of layer k
    assert "ok in" in report.summary()


def test_ddp_prefix_fix_names_the_prefix(target, tmp_path):
    report = dr.check(target, build(tmp_path / "d", MISTAKES["ddp-prefix"]), "EAGLE3")
    ignored = next(f for f in report.findings if f.rule == "weights-ignored")
    assert "'module.'" in ignored.fix and "13 of 15" in ignored.message  # module.d2t/t2d still count
    missing = next(f for f in report.findings if f.rule == "weights-missing")
    assert "model.layers.0.self_attn.qkv_proj.weight" in missing.message


def test_aux_default_is_sglangs_and_recorded(target, tmp_path):
    report = dr.check(target, build(tmp_path / "d", MISTAKES["aux-default"]), "EAGLE3")
    assert report.aux_source == "default" and report.aux_layers == [1, 1, 0]  # capture [2, 2, 1]
    big = write_target(tmp_path / "big", target_config(layers=61))
    report = dr.check(big, build(tmp_path / "d2", MISTAKES["aux-default"]), "EAGLE3")
    assert report.findings == [] and report.aux_layers == [1, 29, 57]  # capture [2, 30, 58]


def test_aux_ids_of_the_issue_on_a_61_layer_llama(tmp_path):
    big = write_target(tmp_path / "big", target_config(layers=61))
    ok = dr.check(big, write_drafter(tmp_path / "a", eagle3_config(aux=[2, 30, 58]), eagle3_tensors()), "EAGLE3")
    assert ok.findings == [] and ok.aux_layers == [2, 30, 58]
    bad = dr.check(big, write_drafter(tmp_path / "b", eagle3_config(aux=[-1, 2, 30]), eagle3_tensors()), "EAGLE3")
    assert verdict(bad) == "error" and "TypeError" in bad.errors[0].message and bad.aux_layers == [-1, 2, 30]
    last = dr.check(big, write_drafter(tmp_path / "c", eagle3_config(aux=[2, 30, 60]), eagle3_tensors()), "EAGLE3")
    assert verdict(last) == "error" and "never reaches" in last.errors[0].message


def test_deepseek_targets_keep_the_ids_unless_the_first_is_one(tmp_path):
    kimi = write_target(
        tmp_path / "kimi",
        {
            "architectures": ["KimiK25ForConditionalGeneration"],
            "text_config": {**target_config(layers=61), "architectures": ["DeepseekV3ForCausalLM"]},
        },
    )
    assert dr.capture_indices(json.loads((kimi / "config.json").read_text()), [2, 30, 58]) == [2, 30, 58]
    assert dr.capture_indices({"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61}, [1, 29, 57]) == [
        2,
        30,
        58,
    ]
    report = dr.check(kimi, write_drafter(tmp_path / "d", eagle3_config(aux=[2, 30, 58]), eagle3_tensors()), "EAGLE3")
    assert report.findings == [] and report.aux_layers == [1, 29, 57]
    report = dr.check(kimi, write_drafter(tmp_path / "e", eagle3_config(aux=[-1, 2, 30]), eagle3_tensors()), "EAGLE3")
    assert verdict(report) == "error" and "never reaches" in report.errors[0].message


def test_capturing_before_layer_0(tmp_path):
    """Llama adds a None residual there (TypeError); Qwen2 checks for None and hands over the embeddings."""
    d = write_drafter(tmp_path / "d", eagle3_config(aux=[-1, 1, 2]), eagle3_tensors())
    qwen = write_target(tmp_path / "qwen", {**target_config(), "architectures": ["Qwen2ForCausalLM"]})
    report = dr.check(qwen, d, "EAGLE3")
    assert verdict(report) == "warning" and "embeddings" in report.warnings[0].message
    glm = write_target(tmp_path / "glm", {**target_config(), "architectures": ["Glm4MoeLiteForCausalLM"]})
    assert dr.capture_indices(json.loads((glm / "config.json").read_text()), [-1, 1, 2]) == [-1, 1, 2]


def test_top_level_aux_ids_are_not_read(target, tmp_path):
    cfg = {**eagle3_config(aux=None), "eagle_aux_hidden_state_layer_ids": [0, 1, 2]}
    report = dr.check(target, write_drafter(tmp_path / "d", cfg, eagle3_tensors()), "EAGLE3")
    assert any(f.rule == "aux-layers" and "top level" in f.message for f in report.warnings)


def test_fewer_aux_ids_than_fc_takes_is_a_shape_error(target, tmp_path):
    report = dr.check(target, write_drafter(tmp_path / "d", eagle3_config(aux=[0, 2]), eagle3_tensors()), "EAGLE3")
    assert [f.rule for f in report.errors] == ["weight-shape"] and "fc.weight" in report.errors[0].message


def test_target_hidden_size_differs_from_the_targets(target, tmp_path):
    cfg = {**eagle3_config(), "target_hidden_size": 512}
    report = dr.check(target, write_drafter(tmp_path / "d", cfg, eagle3_tensors()), "EAGLE3")
    assert "hidden-size" in {f.rule for f in report.errors}


def test_smaller_trained_vocabulary_is_a_warning(target, tmp_path):
    cfg = eagle3_config(vocab=512, draft_vocab=512)
    report = dr.check(target, write_drafter(tmp_path / "d", cfg, eagle3_tensors(vocab=512, draft_vocab=512)), "EAGLE3")
    assert [f.rule for f in report.findings] == ["vocab"] and verdict(report) == "warning"


def test_no_draft_vocab_size_uses_the_targets_lm_head(target, tmp_path):
    cfg = eagle3_config(draft_vocab=None)
    report = dr.check(target, write_drafter(tmp_path / "d", cfg, without(eagle3_tensors(), "lm_head.weight")), "EAGLE3")
    assert report.findings == []


def test_unreadable_files_are_findings(target, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    report = dr.check(target, d, "EAGLE3")
    assert verdict(report) == "error" and "config.json" in report.errors[0].message
    (d / "config.json").write_text(json.dumps(eagle3_config()))
    report = dr.check(target, d, "EAGLE3")
    assert verdict(report) == "error" and "no weight files" in report.errors[0].message
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 40))
    report = dr.check(target, d, "EAGLE3")
    assert verdict(report) == "error" and "not a safetensors file" in report.errors[0].message
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 100) + b"{")
    assert "truncated" in dr.check(target, d, "EAGLE3").errors[0].message


def test_no_architectures_and_unknown_classes(target, tmp_path):
    cfg = {k: v for k, v in eagle3_config().items() if k != "architectures"}
    report = dr.check(target, write_drafter(tmp_path / "a", cfg, eagle3_tensors()), "EAGLE3")
    assert [f.rule for f in report.errors] == ["algorithm"]
    mla = {**eagle3_config(), "architectures": ["Eagle3DeepseekV2ForCausalLM"]}
    report = dr.check(target, write_drafter(tmp_path / "b", mla, _ddp()), "EAGLE3")
    assert {f.rule for f in report.warnings} == {"weights-ignored", "weights-missing"}
    report = dr.check(target, write_drafter(tmp_path / "c", mla, _layers0()), "EAGLE3")
    assert report.findings == []


def test_eagle1_drafter_under_eagle(target, tmp_path):
    cfg = {**target_config(layers=1), "architectures": ["LlamaForCausalLMEagle"]}
    report = dr.check(target, write_drafter(tmp_path / "d", cfg, eagle1_tensors()), "EAGLE")
    assert report.findings == [] and report.aux_layers is None
    report = dr.check(target, write_drafter(tmp_path / "e", cfg, without(eagle1_tensors(), "fc.bias")), "NEXTN")
    assert [f.rule for f in report.findings] == ["weights-missing"] and "model.fc.bias" in report.findings[0].message


def test_standalone_drafter_may_be_narrower(tmp_path):
    target = write_target(tmp_path / "t", target_config(hidden=512))
    small = write_drafter(
        tmp_path / "d", target_config(hidden=256, layers=2), {"lm_head.weight": ("BF16", (VOCAB, 256))}
    )
    report = dr.check(target, small, "STANDALONE")
    assert report.findings == [] and "not checked" in report.summary()
    report = dr.check(target, write_drafter(tmp_path / "e", eagle3_config(), eagle3_tensors()), "STANDALONE")
    assert [f.rule for f in report.errors] == ["algorithm"]


def test_sharded_checkpoint_reads_every_shard(target, tmp_path):
    m = MISTAKES["missing-shard"]
    d = write_drafter(tmp_path / "d", m.config(), m.tensors(), shards=m.shards)
    report = dr.check(target, d, "EAGLE3")
    assert report.findings == [] and report.tensors == 15


def test_only_the_headers_are_read(target, tmp_path, monkeypatch):
    """A 2 GB drafter (sparse file): only its header is read (8 bytes of length, then the JSON), never
    its data; how fast that is, is tests/perf/failure_timings.py's figure."""
    tensors = {**eagle3_tensors(), "midlayer.mlp.big.weight": ("BF16", (32768, 32768))}
    d = write_drafter(tmp_path / "d", eagle3_config(), tensors)
    size = (d / "model.safetensors").stat().st_size
    assert size > 2e9
    with open(d / "model.safetensors", "rb") as f:
        header = 8 + int.from_bytes(f.read(8), "little")
    read: dict[str, int] = {}

    class Counting:
        def __init__(self, path, *args, **kwargs):
            self._f, self._name = open(path, *args, **kwargs), Path(path).name

        def read(self, n=-1):
            data = self._f.read(n)
            read[self._name] = read.get(self._name, 0) + len(data)
            return data

        def __getattr__(self, name):
            return getattr(self._f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()

    monkeypatch.setattr(dr, "open", Counting, raising=False)
    report = dr.check(target, d, "EAGLE3")
    assert read.get("model.safetensors") == header < 1e6, (read, header, size)
    assert [f.rule for f in report.findings] == ["weights-ignored"]


def test_from_flags():
    flags = {
        "model-path": "/m",
        "speculative-algorithm": "eagle3",
        "speculative-draft-model-path": "/d",
        "speculative-num-steps": 2,
    }
    assert dr.from_flags(flags) == ("/m", "/d", "EAGLE3")
    assert dr.from_flags({"model-path": "/m", "speculative-algorithm": "NGRAM"}) is None
    assert dr.from_flags({"model-path": "/m"}) is None
    assert (
        dr.from_flags({"model-path": "/m", "speculative-algorithm": "EAGLE3", "speculative-draft-model-path": None})
        is None
    )
    # aliases: the later in the map wins, as the later flag of the argv built from it does in argparse
    assert dr.from_flags(
        {
            "model": "/a",
            "model-path": "/m",
            "speculative-draft": "/d1",
            "speculative-algorithm": "EAGLE",
            "speculative-draft-model-path": "/d",
        }
    ) == ("/m", "/d", "EAGLE")
    assert (
        dr.check_flags(
            {"model-path": "/nope", "speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/nope2"}
        )
        is None
    )


def test_check_drafter_command(target, tmp_path):
    good = build(tmp_path / "good", MISTAKES["ok"])
    bad = build(tmp_path / "bad", MISTAKES["aux-out-of-range"])
    warn = build(tmp_path / "warn", MISTAKES["aux-unsorted"])
    run = [sys.executable, "-m", "sweep", "check-drafter"]
    r = subprocess.run([*run, str(target), str(good)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout and "[0, 1, 2]" in r.stdout
    r = subprocess.run(
        [*run, str(target), str(bad), "--algorithm", "EAGLE3"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1 and "aux-layers" in r.stdout and "fix:" in r.stdout
    r = subprocess.run([*run, str(target), str(warn)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "warning: [aux-layers]" in r.stdout
    r = subprocess.run([*run, str(target), str(warn), "--strict"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    r = subprocess.run([*run, str(target), str(good), "--json"], capture_output=True, text=True, timeout=60)
    out = json.loads(r.stdout)
    assert out["aux_layers"] == [0, 1, 2] and out["findings"] == []
    r = subprocess.run([*run, str(tmp_path / "nowhere"), str(good)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nowhere" in r.stderr


def test_check_drafter_refuses_a_drafter_whose_parameters_get_no_weight(target, tmp_path, capsys):
    """SGLang loads such a drafter without a word and serves the parameters uninitialized: the check
    alone exits 1 and names every one (a sweep still runs it, with the warning, and measures it)."""
    import argparse

    from sweep.sglang import drafter_cli

    tensors = eagle3_tensors()
    dropped = sorted(tensors)[:10]
    d = write_drafter(tmp_path / "dropped", eagle3_config(), without(tensors, *dropped))
    args = argparse.Namespace(target=str(target), drafter=str(d), algorithm="EAGLE3", json=False, strict=False)
    assert drafter_cli.run_cli(args) == 1
    out = capsys.readouterr().out
    report = dr.check(target, d, "EAGLE3")
    assert not report.errors and len(report.missing_weights) >= 5  # q/k/v stack into one parameter, gate/up too
    assert "unusable:" in out and all(m in out for m in report.missing_weights)
    for name in ("ddp-prefix", "no-fc", "no-lm-head"):  # a wrapper's prefix, one weight missing
        args.drafter = str(build(tmp_path / name, MISTAKES[name]))
        assert drafter_cli.run_cli(args) == 1, name
    args.drafter = str(build(tmp_path / "ok", MISTAKES["ok"]))
    assert drafter_cli.run_cli(args) == 0


def test_plan_prints_the_drafter_findings(target, tmp_path):
    bad = build(tmp_path / "bad", MISTAKES["aux-out-of-range"])
    warn = build(tmp_path / "warn", MISTAKES["ddp-prefix"])
    exp = tmp_path / "exp.yaml"
    values = "\n".join(
        f"        {name}: {{flags: {{speculative-algorithm: EAGLE3, speculative-draft-model-path: {d}, "
        "speculative-eagle-topk: 1}}"
        for name, d in (("bad", bad), ("warn", warn))
    )
    exp.write_text(f"""name: dcheck
server:
  model_path: {target}
  tp_size: 1
  flags: {{max-running-requests: 16, enable-metrics: true}}
grid:
  axes:
    drafter:
      values:
        none: {{}}
{values}
        hub: {{flags: {{speculative-algorithm: EAGLE3, speculative-draft-model-path: org/drafter, speculative-eagle-topk: 1}}}}
    steps: {{flag: speculative-num-steps, values: [2]}}
  derived:
    speculative-num-draft-tokens: ${{add:${{steps}},1}}
""")
    run = [sys.executable, "-m", "sweep", str(exp), "--plan"]
    r = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr  # a drafter error: the point would fail
    assert "drafter error drafter=bad,steps=2" in r.stdout and "never reaches" in r.stdout
    assert "drafter warning drafter=warn,steps=2" in r.stdout and "'module.'" in r.stdout
    assert "drafter error drafter=hub" not in r.stdout and "drafter warning drafter=hub" not in r.stdout  # a hub id
    r = subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=120)
    checks = {p["label"]: p.get("drafter_checks") for p in json.loads(r.stdout)["points"]}
    assert checks["drafter=none"] is None and checks["drafter=hub,steps=2"] is None
    assert checks["drafter=bad,steps=2"][0].startswith("error: [aux-layers]")
    assert [c.split("]")[0] for c in checks["drafter=warn,steps=2"]] == [
        "warning: [weights-ignored",
        "warning: [weights-missing",
    ]
