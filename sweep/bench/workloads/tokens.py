"""Token ids for workloads given as lengths, their text, and the client's token estimate. Pure.

Ids are drawn from ``LOW``..``HIGH``: inside the vocabulary of any model this benchmarks (32k and up)
and clear of the special tokens most vocabularies put first. A request's ids come from a generator
seeded by what it is (its seed, group or block), so a shared prefix is the same ids every time and
the server's prefix cache sees it. As text (routes that take no ids), id ``i`` is the word
``WORDS[i % len(WORDS)]``: common three-letter English words with their leading space, one token
each in the BPE vocabularies of Llama, Qwen, DeepSeek, Kimi and GPT models (and 4 characters, what
the fake server counts as a token), so the same ids give the same text.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

LOW, HIGH = 1000, 30000
WORDS = tuple(
    " " + w
    for w in (
        "the and for are but not you all any can had her was one our out day get has him his how man new "
        "now old see two way who boy did its let put say she too use end far few got run sat set top war "
        "yes yet act add age ago air ask bad big bit box car cut dog eat eye fit fun gas hot job key law "
        "lay leg lot low map may mix net oil own pay per red sea sit six sky son sun ten tie try win"
    ).split()
)


def draw_ids(seed: object, n: int) -> tuple[int, ...]:
    """``n`` token ids from a generator seeded by ``seed`` (the same ``seed``, the same ids)."""
    rng = random.Random(str(seed))
    return tuple(rng.randrange(LOW, HIGH) for _ in range(n))


def ids_text(ids: Sequence[int]) -> str:
    """The text that stands for ``ids`` on a route that takes no ids: one word per id."""
    return "".join(WORDS[i % len(WORDS)] for i in ids)


def estimate(text: str) -> int:
    """Tokens of ``text`` as the client guesses them: ~4 characters a token (at least 1)."""
    return max(1, (len(text) + 3) // 4)
