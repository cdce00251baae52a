"""The fake's prefix cache: SGLang's radix cache reduced to what a client can see. Pure.

A request's prompt, as token ids (``text.prompt_ids``: its ids, or one id per 4 characters of
text), is matched against the sequences of the requests finished before it: the longest common
prefix is its ``cached_tokens`` (``meta_info``), at most all of its prompt but the last token (SGLang
always computes one, for the logits: ``max_prefix_len = input_len - 1``), and only those uncached
tokens cost prefill time. A finished request leaves its prompt and its output but the last token
(that token has no KV yet) in the cache, as SGLang's ``cache_finished_req`` does, so a chat's next
turn, which repeats the conversation so far, hits it. ``/flush_cache`` empties it; past
``capacity`` tokens the least recently used sequences go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class PrefixCache:
    def __init__(self, capacity: int):
        self.capacity = max(capacity, 0)
        self._root: dict = {}
        self._seqs: OrderedDict[tuple[int, ...], None] = OrderedDict()  # what was inserted, oldest first
        self._tokens = 0

    def match(self, ids: Sequence[int]) -> int:
        """Tokens of ``ids`` already cached (at most ``len(ids) - 1``)."""
        node: dict = self._root
        n = 0
        for t in ids[: max(len(ids) - 1, 0)]:
            child = node.get(t)
            if child is None:
                break
            node, n = child, n + 1
        return n

    def insert(self, ids: Sequence[int]) -> None:
        seq = tuple(ids)
        if not seq or self.capacity <= 0:
            return
        if seq in self._seqs:
            self._seqs.move_to_end(seq)
            return
        self._seqs[seq] = None
        self._tokens += len(seq)
        while self._tokens > self.capacity and len(self._seqs) > 1:
            old, _ = self._seqs.popitem(last=False)
            self._tokens -= len(old)
            self._rebuild()
        self._add(seq)

    def clear(self) -> None:
        self._root, self._seqs, self._tokens = {}, OrderedDict(), 0

    def _add(self, seq: tuple[int, ...]) -> None:
        node = self._root
        for t in seq:
            node = node.setdefault(t, {})

    def _rebuild(self) -> None:
        self._root = {}
        for s in self._seqs:
            self._add(s)
