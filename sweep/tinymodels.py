"""Tiny models for a real SGLang sweep with no GPU and no hub: a 4-layer Llama target and a one-layer
EAGLE-3 drafter for it, random weights, a byte-level BPE tokenizer trained here.

    python -m sweep.tinymodels --out ~/.cache/sweep/tiny-models     # creates what is missing

Run it with an interpreter that has ``torch``, ``transformers``, ``tokenizers`` and ``safetensors``
(the CPU SGLang install's venv does); the orchestrator never imports this module. Idempotent: a
model folder with its ``.complete`` stamp is left as it is. Sizes suit SGLang's CPU backend (bf16,
dimensions divisible by 32). The drafter is saved the way EAGLE-3 training libraries save one
(``midlayer.*``, ``fc``, ``d2t``/``t2d`` vocabulary maps), with the target's layers it reads named in
``eagle_config.eagle_aux_hidden_state_layer_ids``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HIDDEN = 256
INTERMEDIATE = 512
HEADS = 4
KV_HEADS = 2
VOCAB = 1024
TARGET_LAYERS = 4
AUX_LAYER_IDS = [0, 1, 2]  # SGLang captures the output of these target layers for the drafter
MAX_POSITIONS = 4096
SEED = 1234
STAMP = ".complete"


def _corpus() -> list[str]:
    """Text to train the tokenizer on: the benchmark's own prompts, and some code-like lines."""
    here = Path(__file__).resolve().parent / "bench" / "prompts"
    lines: list[str] = []
    for f in sorted(here.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            lines.extend(str(v) for v in row.values() if isinstance(v, str))
    words = ["def", "return", "class", "import", "for", "while", "if", "else", "the", "and", "of",
             "speculative", "decoding", "server", "token", "model", "draft", "accept", "length"]
    lines += [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(400)]
    return lines


def make_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>", "<unk>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}<s>assistant: {% endif %}")
    fast.save_pretrained(out)


def _llama_config(layers: int):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                       num_hidden_layers=layers, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                       max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-5, tie_word_embeddings=False,
                       bos_token_id=0, eos_token_id=1, pad_token_id=3, torch_dtype="bfloat16")


def make_target(out: Path) -> None:
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(SEED)
    model = LlamaForCausalLM(_llama_config(TARGET_LAYERS)).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    make_tokenizer(out)


def eagle3_weights(seed: int = SEED + 1, draft_vocab: int = VOCAB) -> dict:
    """The tensors of a one-layer EAGLE-3 drafter, named as training libraries save them."""
    import torch

    g = torch.Generator().manual_seed(seed)
    head_dim = HIDDEN // HEADS

    def w(*shape: int):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)

    ones = torch.ones(HIDDEN, dtype=torch.bfloat16)
    return {
        "midlayer.self_attn.q_proj.weight": w(HEADS * head_dim, 2 * HIDDEN),
        "midlayer.self_attn.k_proj.weight": w(KV_HEADS * head_dim, 2 * HIDDEN),
        "midlayer.self_attn.v_proj.weight": w(KV_HEADS * head_dim, 2 * HIDDEN),
        "midlayer.self_attn.o_proj.weight": w(HIDDEN, HEADS * head_dim),
        "midlayer.mlp.gate_proj.weight": w(INTERMEDIATE, HIDDEN),
        "midlayer.mlp.up_proj.weight": w(INTERMEDIATE, HIDDEN),
        "midlayer.mlp.down_proj.weight": w(HIDDEN, INTERMEDIATE),
        "midlayer.input_layernorm.weight": ones.clone(),
        "midlayer.hidden_norm.weight": ones.clone(),
        "midlayer.post_attention_layernorm.weight": ones.clone(),
        "fc.weight": w(HIDDEN, len(AUX_LAYER_IDS) * HIDDEN),
        "norm.weight": ones.clone(),
        "lm_head.weight": w(draft_vocab, HIDDEN),
        # draft id -> target id as a difference (identity maps: the draft vocabulary is the target's)
        "d2t": torch.zeros(draft_vocab, dtype=torch.int64),
        "t2d": torch.ones(VOCAB, dtype=torch.bool),
    }


def eagle3_config() -> dict:
    cfg = _llama_config(1).to_dict()
    cfg.update(architectures=["LlamaForCausalLMEagle3"], draft_vocab_size=VOCAB, target_hidden_size=HIDDEN,
               eagle_config={"eagle_aux_hidden_state_layer_ids": AUX_LAYER_IDS, "use_aux_hidden_state": True})
    return cfg


def make_eagle3(out: Path) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file(eagle3_weights(), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(eagle3_config(), indent=2))


MODELS = {"target": make_target, "eagle3": make_eagle3}


def ensure(root: Path) -> dict[str, Path]:
    """Create every tiny model that is missing under ``root``; the paths of all of them."""
    out = {}
    for name, make in MODELS.items():
        path = root / name
        if not (path / STAMP).is_file():
            tmp = root / f".{name}.tmp{os.getpid()}"
            make(tmp)
            (tmp / STAMP).write_text("ok\n")
            if path.exists():
                import shutil

                shutil.rmtree(path)
            tmp.rename(path)
            print(f"created {path}", file=sys.stderr)
        out[name] = path
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sweep.tinymodels", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for the models (created)")
    args = p.parse_args(argv)
    root = Path(os.path.expanduser(args.out))
    root.mkdir(parents=True, exist_ok=True)
    for name, path in ensure(root).items():
        print(f"{name}={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
