"""Speculative decoding on SGLang's torch_native attention backend (pure torch, any CPU).

Copied by ``cluster/sglang-cpu-x86/torch_native_spec.py`` into the installed SGLang as
``sglang/srt/layers/attention/torch_native_spec_backend.py``; that script also registers it
(``--attention-backend torch_native`` builds :class:`TorchNativeSpecAttnBackend`, and the EAGLE
draft backend factory gets a ``torch_native`` entry for draft decode and draft extend).

Why: on a CPU without AMX/AVX-512 (AMD Zen 3) SGLang's ``intel_amx`` kernels cannot run, and the
stock ``torch_native`` serves plain prefill and decode only. It knows nothing of the three forward
passes speculative decoding adds: EAGLE/EAGLE3 are refused at startup (no draft backend), NGRAM and
STANDALONE die at their first verify (``extend_prefix_lens`` is None there).

What it teaches, pass by pass. Each pass is reduced to query rows, and each row to the list of KV
pool slots it may see, in sequence order; the row then attends over exactly those slots.

- **target verify** (``ForwardMode.TARGET_VERIFY``; NGRAM, EAGLE, STANDALONE): the batch has no
  ``extend_*`` fields. Request b extends by n = ``spec_info.draft_token_num`` draft tokens after
  its committed prefix of ``seq_lens[b]`` tokens; the forward writes their K/V at ``out_cache_loc``
  (= ``req_to_token[b, seq_lens[b] : seq_lens[b] + n]``). Draft token i sees the whole prefix, then,
  among the draft tokens, for a chain (``spec_info.tree_topk == 1``: EAGLE topk 1, STANDALONE) the
  tokens 0..i, for a tree (EAGLE topk > 1; NGRAM, whose ``tree_topk`` is -1) its ancestors and
  itself as ``spec_info.custom_mask`` says. On CPU that mask is SGLang's ``QLEN_ONLY`` layout
  (eagle_utils.default_tree_mask_mode, ngram_worker): per request an n x n bool block, row i = draft
  token i, True where column j is an ancestor of i or i itself; requests one after another,
  flattened. The GPU ``FULL_MASK`` layout (rows of seq_len + n columns) is read too.
- **draft extend** (``ForwardMode.DRAFT_EXTEND_V2``: EAGLE's drafter over the verified tokens):
  this batch does carry ``extend_seq_lens``, and its ``seq_lens`` already count the new tokens;
  new token i sees the prefix and the new tokens 0..i. (The drafter's first pass after a prefill is
  a plain ``EXTEND``, served by the stock code.)
- **multi-step draft decode** (EAGLE with ``speculative_num_steps`` >= 2, any topk):
  :class:`TorchNativeMultiStepDraftBackend`, one backend per step, as ``IntelAMXMultiStepDraftBackend``
  (draft_utils.py builds it). The batch is in ``DECODE`` mode with ``batch_size`` requests but
  ``batch_size * topk`` query rows (row b * topk + k: candidate k of request b). The draft slots
  are laid out by ``assign_draft_cache_locs_contiguous``: candidate k's step s is at
  ``req_to_token[b, seq_lens[b] + k * num_steps + s]``; at step i candidate k sees the prefix and
  its own slots 0..i (what ``build_draft_decode_metadata_cpu`` hands the AMX kernel, done here in
  torch: a kernel build for AVX2 is a reduced one).

Why one attention call per query row rather than one masked call per request: a row that gathers
exactly the keys it sees, in order, and calls ``scaled_dot_product_attention`` with no mask is the
very computation the stock decode does for that token (same call, shapes, strides, GQA through
``enable_gqa``). With linear layers that give a row the same result whatever the batch (true here),
the verify pass's logits are then bit-identical to what plain decoding computes, and greedy
speculative output equals the baseline's token for token. A masked call over prefix + all n draft
tokens is exact in real arithmetic but not in bf16: masked columns move the visible keys within the
kernel's blocks and vector lanes, the sums round differently, and a near-tie among a tiny random
model's logits flips within a few dozen tokens (measured: NGRAM differed from the baseline at token
19 of 48). The price is n small calls instead of one, per request and layer.

Plain prefill and decode (the baseline) go through the stock ``TorchNativeAttnBackend`` code,
unchanged. The speculative passes do not cover sliding-window or cross-attention layers (they raise
NotImplementedError), attention sinks, or logit capping (the stock torch_native ignores it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple

import torch
from torch.nn.functional import scaled_dot_product_attention

from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
from sglang.srt.mem_cache.memory_pool import KVWriteLoc
from sglang.srt.model_executor.forward_batch_info import ForwardBatch

if TYPE_CHECKING:
    from sglang.srt.layers.radix_attention import RadixAttention
    from sglang.srt.model_executor.model_runner import ModelRunner


def _draft_visibility(spec_info, bs: int, n: int, prefix_lens: List[int]) -> List[torch.Tensor]:
    """Per request, the n x n bool block: [i, j] = draft token i sees draft token j."""
    chain = torch.ones((n, n), dtype=torch.bool).tril_()
    custom_mask = getattr(spec_info, "custom_mask", None)
    if getattr(spec_info, "tree_topk", 1) == 1 or custom_mask is None or custom_mask.numel() == 0:
        return [chain] * bs
    flat = custom_mask.reshape(-1).to(device="cpu", dtype=torch.bool)
    eye = torch.eye(n, dtype=torch.bool)  # a token always sees itself
    if flat.numel() == bs * n * n:  # QLEN_ONLY (CPU)
        return [block | eye for block in flat.view(bs, n, n).unbind(0)]
    if flat.numel() == sum(p * n + n * n for p in prefix_lens):  # FULL_MASK (GPU)
        blocks, start = [], 0
        for p in prefix_lens:
            blocks.append(flat[start : start + n * (p + n)].view(n, p + n)[:, p:] | eye)
            start += n * (p + n)
        return blocks
    raise RuntimeError(
        f"torch_native speculative verify: custom_mask has {flat.numel()} entries, neither the "
        f"QLEN_ONLY ({bs}x{n}x{n}) nor the FULL_MASK layout for prefix lengths {prefix_lens}"
    )


class TorchNativeSpecAttnBackend(TorchNativeAttnBackend):
    """torch_native plus target verify, draft extend and (as one step of
    TorchNativeMultiStepDraftBackend) draft decode; see the module docstring."""

    def __init__(self, model_runner: ModelRunner):
        super().__init__(model_runner)
        # For a speculative pass: per query row of the batch, the KV pool slots it sees (int64,
        # sequence order), and the ForwardBatch they were planned for.
        self._rows: Optional[List[torch.Tensor]] = None
        self._rows_for: Optional[ForwardBatch] = None
        # Set by TorchNativeMultiStepDraftBackend on its per-step backends: the same per row, for
        # one draft step (the forward's DECODE mode alone cannot tell a draft step).
        self.draft_decode_rows: Optional[List[torch.Tensor]] = None

    # ---- planning: which slots each query row sees ---------------------------------------

    def init_forward_metadata(self, forward_batch: ForwardBatch):
        super().init_forward_metadata(forward_batch)
        self._rows = self._rows_for = None
        mode = forward_batch.forward_mode
        if mode.is_target_verify() or mode.is_draft_extend_v2():
            self._rows = self._plan_rows(forward_batch)
            self._rows_for = forward_batch

    def _plan_rows(self, forward_batch: ForwardBatch) -> List[torch.Tensor]:
        req_to_token = self.req_to_token_pool.req_to_token
        rpi = forward_batch.req_pool_indices.tolist()
        seq_lens = forward_batch.seq_lens.tolist()
        rows: List[torch.Tensor] = []
        if forward_batch.forward_mode.is_target_verify():
            spec_info = forward_batch.spec_info
            if spec_info is None:
                raise RuntimeError("TARGET_VERIFY without spec_info")
            n = int(spec_info.draft_token_num)
            visible = _draft_visibility(spec_info, len(rpi), n, seq_lens)
            for b, prefix in enumerate(seq_lens):
                slots = req_to_token[rpi[b], : prefix + n].to(torch.int64)
                for i in range(n):
                    seen = prefix + torch.nonzero(visible[b][i]).flatten()  # ascending: in order
                    rows.append(torch.cat((slots[:prefix], slots[seen])))
            return rows
        # DRAFT_EXTEND_V2: the extend_seq_lens new tokens end each request's seq_lens.
        for b, (kv_len, q_len) in enumerate(zip(seq_lens, forward_batch.extend_seq_lens.tolist())):
            slots = req_to_token[rpi[b], :kv_len].to(torch.int64)
            rows.extend(slots[: kv_len - q_len + i + 1] for i in range(q_len))
        return rows

    # ---- attention ------------------------------------------------------------------------

    def _check_layer(self, layer: RadixAttention, what: str):
        if layer.is_cross_attention or (
            layer.sliding_window_size is not None and layer.sliding_window_size > -1
        ):
            raise NotImplementedError(
                f"torch_native {what}: sliding-window and cross-attention layers are not "
                "supported with speculative decoding"
            )

    def _attend_rows(self, q, k, v, layer, forward_batch, rows, save_kv_cache):
        """Write this forward's K/V, then give each query row attention over its own slots,
        the same call the stock forward_decode makes for one token."""
        if save_kv_cache and k is not None and v is not None:
            loc = forward_batch.out_cache_loc  # a draft step's own, set after planning
            swa_loc = (
                self.token_to_kv_pool.translate_loc_from_full_to_swa(loc)
                if self.use_sliding_window_kv_pool
                else None
            )
            self.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc(loc, swa_loc), k, v)
        q_ = q.reshape(-1, layer.tp_q_head_num, layer.qk_head_dim)
        if q_.shape[0] != len(rows):
            raise RuntimeError(
                f"torch_native speculative pass: {q_.shape[0]} query rows, planned {len(rows)}"
            )
        o = q.new_empty((q_.shape[0], layer.tp_q_head_num, layer.v_head_dim))
        k_cache = self.token_to_kv_pool.get_key_buffer(layer.layer_id)
        v_cache = self.token_to_kv_pool.get_value_buffer(layer.layer_id)
        enable_gqa = layer.tp_q_head_num != layer.tp_k_head_num
        query = q_.movedim(0, 1)  # [heads, rows, dim], as the stock decode has it
        for r, slots in enumerate(rows):
            key = k_cache[slots].movedim(0, 1)  # [kv_heads, len(slots), dim]
            value = v_cache[slots].movedim(0, 1)
            if key.dtype != query.dtype:
                key, value = key.to(query.dtype), value.to(query.dtype)
            o[r] = scaled_dot_product_attention(
                query[:, r : r + 1, :].unsqueeze(0),
                key.unsqueeze(0),
                value.unsqueeze(0),
                enable_gqa=enable_gqa,
                scale=layer.scaling,
                is_causal=False,
            )[0, :, 0, :]
        return o.view(-1, layer.tp_q_head_num * layer.v_head_dim)

    def forward_extend(
        self, q, k, v, layer: RadixAttention, forward_batch: ForwardBatch, save_kv_cache=True
    ):
        mode = forward_batch.forward_mode
        if not (mode.is_target_verify() or mode.is_draft_extend_v2()):
            return super().forward_extend(
                q, k, v, layer, forward_batch, save_kv_cache=save_kv_cache
            )
        self._check_layer(layer, "target verify / draft extend")
        if self._rows_for is not forward_batch:  # planned for another batch, or not at all
            self._rows = self._plan_rows(forward_batch)
            self._rows_for = forward_batch
        return self._attend_rows(q, k, v, layer, forward_batch, self._rows, save_kv_cache)

    def forward_decode(
        self, q, k, v, layer: RadixAttention, forward_batch: ForwardBatch, save_kv_cache=True
    ):
        if self.draft_decode_rows is None:
            return super().forward_decode(
                q, k, v, layer, forward_batch, save_kv_cache=save_kv_cache
            )
        self._check_layer(layer, "draft decode")
        return self._attend_rows(
            q, k, v, layer, forward_batch, self.draft_decode_rows, save_kv_cache
        )


class TorchNativeMultiStepDraftBackend:
    """EAGLE's multi-step draft decode on torch_native: one TorchNativeSpecAttnBackend per draft
    step that runs a forward (steps 0 .. num_steps - 2; the last step only samples), each told
    which slots every candidate row sees at its step."""

    def __init__(self, model_runner: ModelRunner, topk: int, speculative_num_steps: int):
        self.topk = topk
        self.speculative_num_steps = speculative_num_steps
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.attn_backends: List[TorchNativeSpecAttnBackend] = [
            TorchNativeSpecAttnBackend(model_runner) for _ in range(speculative_num_steps - 1)
        ]

    def init_forward_metadata(self, forward_batch: ForwardBatch):
        topk, num_steps = self.topk, self.speculative_num_steps
        req_to_token = self.req_to_token_pool.req_to_token
        per_step: List[List[torch.Tensor]] = [[] for _ in range(num_steps - 1)]
        for b, (req, prefix) in enumerate(
            zip(forward_batch.req_pool_indices.tolist(), forward_batch.seq_lens.tolist())
        ):
            row = req_to_token[req].to(torch.int64)
            # [topk, num_steps]: candidate k's draft slots (assign_draft_cache_locs_contiguous)
            draft = row[prefix : prefix + topk * num_steps].view(topk, num_steps)
            for step in range(num_steps - 1):
                for k in range(topk):
                    per_step[step].append(torch.cat((row[:prefix], draft[k, : step + 1])))
        for step, backend in enumerate(self.attn_backends):
            backend.init_forward_metadata(forward_batch)
            backend.draft_decode_rows = per_step[step]
