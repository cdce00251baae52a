"""Tiny models for a real SGLang sweep with no GPU and no hub: a 4-layer Llama target (random weights)
and one-layer EAGLE-3 drafters for it, with a byte-level BPE tokenizer trained here.

    python cluster/sglang-cpu-x86/tinymodels.py --out ~/.cache/sweep/tiny-models   # creates what is missing
    ... --seed ../shared/sglang-cpu/tiny-models   # copies what a seed holds with the same stamp instead

makes ``target``, ``eagle3`` (the drafter trained on the target: what experiments and tests serve)
and ``eagle3-random`` (the same tensors, random: SGLang serves it and accepts nothing).

Run it with an interpreter that has ``torch``, ``transformers``, ``tokenizers`` and ``safetensors``
(the CPU SGLang install's venv does); the orchestrator never imports this module. Idempotent: a
model folder whose ``.complete`` stamp says the current recipe is left as it is (the trained
drafter's stamp names its training recipe, so an older cache's drafter is made again). Sizes suit
SGLang's CPU backend (bf16, dimensions divisible by 32). The drafters are saved the way EAGLE-3
training libraries (SpecForge, the EAGLE repo) save one (``midlayer.*``, ``fc``, ``norm``,
``lm_head``, ``d2t``/``t2d`` vocabulary maps), with the target's layers it reads named in
``eagle_config.eagle_aux_hidden_state_layer_ids``.

The trained drafter (``train_eagle3``, CPU, float32, fixed seeds, saved as bf16): the bf16 target
continues ~300 prompts greedily for 128 tokens (the benchmark prompts raw and chat-templated,
prefixes of them, the tokenizer corpus's word lines, random token strings); one forward over each
sequence gives the outputs of target layers 0, 1, 2 (what SGLang 7f8f030 captures for layer ids
[0, 1, 2]: the residual stream entering layers 1, 2, 3) and the target's argmax at every position.
The drafter is trained the way SGLang runs it, with "training-time test" unrolled TTT_STEPS steps:
step 0 is the draft extend (at position p it reads token p+1 and fc(target hidden at p), attends
causally to the other positions' step-0 keys), step s >= 1 a draft decode (position p+s, the token
p+1+s, the drafter's own pre-norm hidden of step s-1, attending to step-0 keys at <= p and this
anchor's own keys of steps 1..s); the loss is cross-entropy against the target's greedy token
after the token read, at the anchors SGLang drafts from (the prompt's last position on). The
target's embeddings are shared (SGLang gives the drafter the target's), its lm_head starts from the
target's. On 2 Zen 4 cores: ~20 s of target data and ~2 min of training (more when the machine is
shared), train accuracy per unroll step ~0.80/0.79/0.80; on SGLang (intel_amx, 8 coding prompts,
64 tokens) accept length ~2.9 at --speculative-num-steps 3 against ~1.0 for the random drafter.
Greedy outputs with any drafter are the same as each other; against no speculation, a few prompts
differ after tens of tokens: the random target's logits are nearly flat (near ties), and SGLang's
verify forward (several tokens at once) and its decode forward round differently in bf16.
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
# the benchmark's prompts (the package's, two folders up): the tokenizer and the trained drafter learn them
PROMPTS = Path(__file__).resolve().parents[2] / "sweep" / "bench" / "prompts"


def prompt_files() -> list[Path]:
    """The benchmark's prompt files; none is an error (a model made without them tokenizes the
    benchmark's prompts as it never saw them and its drafter accepts almost nothing on them)."""
    files = sorted(PROMPTS.glob("*.jsonl"))
    if not files:
        raise SystemExit(f"tinymodels: no benchmark prompts at {PROMPTS}: run this file from a checkout of sweep "
                         "(it reads sweep/bench/prompts/*.jsonl)")
    return files


def prompts_digest() -> str:
    """What the models are made from, for their stamps: a cache made from other prompts is made again."""
    import hashlib

    h = hashlib.sha256()
    for f in prompt_files():
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _corpus() -> list[str]:
    """Text to train the tokenizer on: the benchmark's own prompts, and some code-like lines."""
    lines: list[str] = []
    for f in prompt_files():
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


def make_target(out: Path, root: Path | None = None) -> None:
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


def _save_eagle3(out: Path, tensors: dict) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(eagle3_config(), indent=2))


def make_eagle3_random(out: Path, root: Path) -> None:
    """The drafter with random weights: SGLang serves it, it accepts (almost) nothing."""
    _save_eagle3(out, eagle3_weights())


# --- the trained drafter -------------------------------------------------------------------------
# Training-time test: the drafter is unrolled this many steps (step 0 = SGLang's draft extend on the
# target's hidden states, steps 1.. = draft decode on the drafter's own hidden state), enough for
# --speculative-num-steps up to this. Changing the recipe changes TRAINED_STAMP, which rebuilds it.
TTT_STEPS = 3
TRAIN_SEED = SEED + 2
NEW_TOKENS = 128      # greedy continuation the target writes for each training prompt
EPOCHS = 8
BATCH = 4
GEN_BATCH = 512
LR = 5e-3
SELF_ATTN_INIT = 5.0
TRAINED_STAMP = (f"trained v1 ttt={TTT_STEPS} seed={TRAIN_SEED} tokens={NEW_TOKENS} epochs={EPOCHS} "
                 f"batch={BATCH} lr={LR} self_attn_init={SELF_ATTN_INIT}\n")


def _training_prompts(tok) -> list[list[int]]:
    """Token ids of the prompts the target continues: the benchmark prompts as the /generate and
    /v1/completions routes send them (raw text) and as the chat route sends them (chat template),
    prefixes of them, the tokenizer corpus's word lines, and random token strings."""
    import random

    rng = random.Random(TRAIN_SEED)
    bench = [json.loads(line)["prompt"] for f in prompt_files()
             for line in f.read_text().splitlines() if line.strip()]
    out = [tok(p, add_special_tokens=False).input_ids for p in bench]
    chat = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
            for p in bench]
    out += [tok(c, add_special_tokens=False).input_ids for c in chat]
    out += [ids[:rng.randint(2, max(2, len(ids) - 1))] for ids in out[:len(bench)]]
    words = [line for line in _corpus()[-400:]]
    out += [tok(w, add_special_tokens=False).input_ids for w in rng.sample(words, 64)]
    out += [[rng.randrange(4, VOCAB) for _ in range(rng.randint(3, 40))] for _ in range(96)]
    return [ids for ids in out if ids]


def _target_data(target: Path):
    """(tokens, aux hidden states, target's greedy next token) for each training sequence: the
    target (bf16, as SGLang serves it) continues every prompt greedily, then one forward over the
    whole sequence gives the outputs of the AUX_LAYER_IDS layers (SGLang captures the residual
    stream entering layer i+1, i.e. the output of layer i) and its argmax at every position."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(target)
    model = LlamaForCausalLM.from_pretrained(target, dtype=torch.bfloat16).eval()
    prompts = sorted(_training_prompts(tok), key=len)
    seqs: list[list[int]] = []
    with torch.no_grad():
        for b in range(0, len(prompts), GEN_BATCH):  # left-padded greedy generation
            chunk = prompts[b:b + GEN_BATCH]
            width = max(map(len, chunk))
            ids = torch.full((len(chunk), width), 3, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for r, p in enumerate(chunk):
                ids[r, width - len(p):] = torch.tensor(p)
                mask[r, width - len(p):] = 1
            gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
                                 pad_token_id=3, eos_token_id=None)
            for r, p in enumerate(chunk):  # past an end-of-sequence token too, as with ignore_eos
                seqs.append((p + gen[r, width:].tolist(), len(p)))
        data = []
        for b in range(0, len(seqs), 16):  # right-padded: causal attention leaves real positions as they are
            chunk = seqs[b:b + 16]
            width = max(len(s) for s, _ in chunk)
            ids = torch.full((len(chunk), width), 3, dtype=torch.long)
            for r, (s, _) in enumerate(chunk):
                ids[r, :len(s)] = torch.tensor(s)
            out = model(input_ids=ids, output_hidden_states=True)
            aux = torch.cat([out.hidden_states[i + 1] for i in AUX_LAYER_IDS], dim=-1).float()
            greedy = out.logits.argmax(-1)
            for r, (s, n_prompt) in enumerate(chunk):
                data.append((ids[r, :len(s)].clone(), aux[r, :len(s)].clone(), greedy[r, :len(s)].clone(),
                             n_prompt))
    embed = model.model.embed_tokens.weight.detach().float().clone()
    head = model.lm_head.weight.detach().float().clone()
    return data, embed, head


def _drafter_module(embed):
    """The drafter in float32, its parameters named as eagle3_weights() names them; ``step`` runs
    one unroll step as SGLang's llama_eagle3 does."""
    import torch
    from torch import nn

    head_dim = HIDDEN // HEADS
    eps = 1e-5

    class Norm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(HIDDEN))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight

    def lin(i, o):
        return nn.Linear(i, o, bias=False)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj = lin(2 * HIDDEN, HEADS * head_dim), lin(2 * HIDDEN, KV_HEADS * head_dim)
            self.v_proj, self.o_proj = lin(2 * HIDDEN, KV_HEADS * head_dim), lin(HEADS * head_dim, HIDDEN)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj, self.up_proj = lin(HIDDEN, INTERMEDIATE), lin(HIDDEN, INTERMEDIATE)
            self.down_proj = lin(INTERMEDIATE, HIDDEN)

        def forward(self, x):
            return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))

    class Mid(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.mlp = Attn(), MLP()
            self.input_layernorm, self.hidden_norm, self.post_attention_layernorm = Norm(), Norm(), Norm()

    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))

    def rope(x, pos):  # x (B, heads, T, D), pos (T,): neox-style, as HF Llama and SGLang's llama
        f = pos[:, None].float() * inv_freq[None, :]
        cos, sin = torch.cat([f, f], -1).cos(), torch.cat([f, f], -1).sin()
        x1, x2 = x[..., :head_dim // 2], x[..., head_dim // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    class Drafter(nn.Module):
        def __init__(self):
            super().__init__()
            self.midlayer = Mid()
            self.fc = lin(len(AUX_LAYER_IDS) * HIDDEN, HIDDEN)
            self.norm = Norm()
            self.lm_head = lin(HIDDEN, VOCAB)
            self.register_buffer("embed", embed, persistent=False)  # SGLang shares the target's

        def step(self, tokens, hidden, s, keys):
            """Unroll step ``s``: the query at anchor p (position p+s) sees step 0's keys at anchors
            <= p and this anchor's own keys of steps 1..s (``keys`` holds the earlier steps')."""
            B, T = tokens.shape
            m = self.midlayer
            residual = hidden
            x = torch.cat([m.input_layernorm(self.embed[tokens]), m.hidden_norm(hidden)], -1)
            pos = torch.arange(T) + s
            q = rope(m.self_attn.q_proj(x).view(B, T, HEADS, head_dim).transpose(1, 2), pos)
            k = rope(m.self_attn.k_proj(x).view(B, T, KV_HEADS, head_dim).transpose(1, 2), pos)
            v = m.self_attn.v_proj(x).view(B, T, KV_HEADS, head_dim).transpose(1, 2)
            rep = HEADS // KV_HEADS
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            keys = keys + [(k, v)]
            k0, v0 = keys[0]
            scale = head_dim ** -0.5
            scores = (q @ k0.transpose(-1, -2)) * scale
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
            extra = [((q * kt).sum(-1, keepdim=True) * scale) for kt, _ in keys[1:]]
            probs = torch.softmax(torch.cat([scores] + extra, -1), -1)
            o = probs[..., :T] @ v0
            for j, (_, vt) in enumerate(keys[1:]):
                o = o + probs[..., T + j:T + j + 1] * vt
            o = m.self_attn.o_proj(o.transpose(1, 2).reshape(B, T, HEADS * head_dim))
            residual = o + residual
            out = m.mlp(m.post_attention_layernorm(residual)) + residual  # the pre-norm sum: next step's hidden
            return self.lm_head(self.norm(out)), out, keys

    return Drafter()


def train_eagle3(target: Path, log=None) -> dict:
    """An EAGLE-3 drafter trained on ``target``'s own hidden states and greedy tokens, as bf16
    tensors named as eagle3_weights() names them (float32 training, CPU, deterministic)."""
    import time

    import torch

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.monotonic()
    torch.manual_seed(TRAIN_SEED)
    data, embed, head = _target_data(target)
    return _train(data, embed, head, log, t0)


def _train(data, embed, head, log, t0: float) -> dict:
    import time

    import torch

    n_tok = sum(len(x) for x, _, _, _ in data)
    t_data = time.monotonic() - t0
    log(f"tinymodels: {len(data)} sequences, {n_tok} tokens of the target's greedy text in {t_data:.0f}s")

    model = _drafter_module(embed)
    init = eagle3_weights()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(init[name].float())
        model.lm_head.weight.copy_(head)  # start from the target's head: same vocabulary
        # The token being read reaches the layer only through attention (the residual is the target's
        # hidden state), so start each head attending to its own position: its query a multiple of its
        # key. Uniform attention would dilute that token by the context length and learning crawls.
        if SELF_ATTN_INIT:
            k = model.midlayer.self_attn.k_proj.weight.view(KV_HEADS, HIDDEN // HEADS, 2 * HIDDEN)
            model.midlayer.self_attn.q_proj.weight.copy_(
                SELF_ATTN_INIT * k.repeat_interleave(HEADS // KV_HEADS, 0).reshape(HIDDEN, 2 * HIDDEN))

    def batches(order):
        for b in range(0, len(order), BATCH):
            chunk = [data[i] for i in order[b:b + BATCH]]
            width = max(len(x) for x, _, _, _ in chunk)
            B = len(chunk)
            ids = torch.full((B, width + TTT_STEPS + 1), 3, dtype=torch.long)
            greedy = torch.full_like(ids, -100)
            aux = torch.zeros(B, width, len(AUX_LAYER_IDS) * HIDDEN)
            anchor = torch.zeros(B, width, dtype=torch.bool)
            for r, (x, a, g, n_prompt) in enumerate(chunk):
                ids[r, :len(x)], greedy[r, :len(x)], aux[r, :len(x)] = x, g, a
                # SGLang asks the drafter for tokens from the prompt's last position on (the first
                # draft follows the prefill): earlier positions are context (keys), not anchors
                anchor[r, n_prompt - 1:] = True
            yield ids, greedy, aux, anchor

    def run(ids, greedy, aux, anchor):
        """Per-step logits and labels: at anchor p, step s reads token p+1+s and predicts the
        target's greedy token after it (its argmax at p+1+s)."""
        T = aux.shape[1]
        hidden, keys, outs = model.fc(aux), [], []
        for s in range(TTT_STEPS):
            logits, hidden, keys = model.step(ids[:, 1 + s:1 + s + T], hidden, s, keys)
            outs.append((logits, greedy[:, 1 + s:1 + s + T].masked_fill(~anchor, -100)))
        return outs

    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.0, betas=(0.9, 0.95))
    n_batches = (len(data) + BATCH - 1) // BATCH
    total = EPOCHS * n_batches
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / 20) * max(0.02, 1 - i / total))
    weights = [0.8 ** s for s in range(TTT_STEPS)]
    g = torch.Generator().manual_seed(TRAIN_SEED)
    for epoch in range(EPOCHS):
        order = torch.randperm(len(data), generator=g).tolist()
        hits, counts, loss_sum = [0] * TTT_STEPS, [0] * TTT_STEPS, 0.0
        for batch in batches(order):
            loss = 0.0
            for s, (logits, labels) in enumerate(run(*batch)):
                valid = labels != -100
                loss = loss + weights[s] * torch.nn.functional.cross_entropy(logits[valid], labels[valid])
                hits[s] += int((logits[valid].argmax(-1) == labels[valid]).sum())
                counts[s] += int(valid.sum())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            loss_sum += float(loss.detach())
        log(f"tinymodels: epoch {epoch + 1}/{EPOCHS} loss {loss_sum / n_batches:.3f} accuracy per step "
            + " ".join(f"{h / max(c, 1):.3f}" for h, c in zip(hits, counts)) + f" ({time.monotonic() - t0:.0f}s)")

    hits, counts = [0] * TTT_STEPS, [0] * TTT_STEPS
    with torch.no_grad():
        for batch in batches(list(range(len(data)))):
            for s, (logits, labels) in enumerate(run(*batch)):
                valid = labels != -100
                hits[s] += int((logits[valid].argmax(-1) == labels[valid]).sum())
                counts[s] += int(valid.sum())
    acc = [h / max(c, 1) for h, c in zip(hits, counts)]
    log(f"tinymodels: trained the EAGLE-3 drafter in {time.monotonic() - t0:.0f}s "
        f"({t_data:.0f}s of it the target's data); final train accuracy per unroll step "
        + " ".join(f"{a:.3f}" for a in acc))
    out = {name: t.detach().to(torch.bfloat16).contiguous() for name, t in model.state_dict().items()}
    out["d2t"], out["t2d"] = init["d2t"], init["t2d"]
    return out


def make_eagle3(out: Path, root: Path) -> None:
    """The drafter trained on the target under ``root`` (made first: MODELS is in that order)."""
    _save_eagle3(out, train_eagle3(root / "target"))


# made in this order; a model whose stamp is missing or says another recipe is made again
MODELS = {"target": make_target, "eagle3-random": make_eagle3_random, "eagle3": make_eagle3}


def stamps() -> dict[str, str]:
    """Each model's stamp: its recipe and what it is made from (the target's tokenizer learns the
    benchmark's prompts, the trained drafter learns the target's text on them)."""
    target = f"target v2 seed={SEED} prompts={prompts_digest()}"
    return {"target": target + "\n", "eagle3-random": "ok\n", "eagle3": f"{TRAINED_STAMP.rstrip()} on {target}\n"}


def _stamped(path: Path, stamp: str) -> bool:
    return (path / STAMP).is_file() and (path / STAMP).read_text() == stamp


def ensure(root: Path, seed: Path | None = None) -> dict[str, Path]:
    """Create every tiny model that is missing under ``root``; the paths of all of them. A model that
    ``seed`` holds with the same stamp (the same recipe, made from the same prompts) is copied from
    there instead of made (training the drafter is minutes); one whose stamp differs is made."""
    import shutil

    out, want = {}, stamps()
    for name, make in MODELS.items():
        path = root / name
        stamp = want.get(name, "ok\n")
        if not _stamped(path, stamp):
            tmp = root / f".{name}.tmp{os.getpid()}"
            if seed is not None and _stamped(seed / name, stamp):
                shutil.copytree(seed / name, tmp)
                for f in [tmp, *tmp.rglob("*")]:  # a read-only seed's modes are not the cache's
                    f.chmod(0o755 if f.is_dir() else 0o644)
                how = f"copied from {seed / name}"
            else:
                make(tmp, root)
                (tmp / STAMP).write_text(stamp)
                how = "created"
            if path.exists():
                shutil.rmtree(path)
            tmp.rename(path)
            print(f"{path}: {how}", file=sys.stderr)
        out[name] = path
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python cluster/sglang-cpu-x86/tinymodels.py", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for the models (created)")
    p.add_argument("--seed", help="a folder of models made before (e.g. ../shared/sglang-cpu/tiny-models): "
                                  "those whose stamp matches are copied instead of made; a missing folder is ignored")
    args = p.parse_args(argv)
    root = Path(os.path.expanduser(args.out))
    root.mkdir(parents=True, exist_ok=True)
    seed = Path(os.path.expanduser(args.seed)) if args.seed else None
    for name, path in ensure(root, seed if seed is not None and seed.is_dir() else None).items():
        print(f"{name}={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
