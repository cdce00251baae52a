"""The fake tokenizer and the fake model's output text: deterministic, cheap, plausible.

A prompt counts ~4 characters per token (the usual rule of thumb for BPE vocabularies). The output of
a request is a pseudo-random walk over a small vocabulary seeded by its prompt, so the same prompt
(at temperature 0) always gives the same text, as a real greedy decode would. Unless told to ignore
EOS, the model "stops" after a natural length drawn from the same seed.
"""

from __future__ import annotations

import zlib
from typing import Sequence, Union

EOS_TOKEN_ID = 163586  # Kimi-K2's <|im_end|>; any id outside VOCAB would do
_VOCAB_OFFSET = 1000
_WORDS = (
    "the of and to a in is that for it as with was on be by this are from or at an not have which but "
    "function return value if else while def class import self data list dict string number result "
    "error file path model token server request response batch step time memory cache graph kernel "
    "draft target accept length rate speed we can will should would use using used one two three first "
    "next each all any more most some other new when where how what why then than so because into over "
    "after before between under through during without within about against among per via output input "
    "print len range map filter sum min max sorted key item index count size shape type name config args"
).split()
VOCAB: tuple[str, ...] = tuple(" " + w for w in _WORDS) + (".", ",", ":", "\n", " (", ")", " =", " +", "\n\n")
_V = len(VOCAB)
_MIN_NATURAL_LENGTH = 64
_MAX_NATURAL_LENGTH = 512

PromptLike = Union[str, Sequence[int]]


def prompt_tokens(prompt: PromptLike) -> int:
    """Tokens a prompt costs: its ids, or ~4 characters per token for text (at least 1)."""
    if isinstance(prompt, str):
        return max(1, (len(prompt) + 3) // 4)
    return max(1, len(prompt))


def prompt_ids(prompt: PromptLike) -> tuple[int, ...]:
    """A prompt as token ids: its ids, or text cut every 4 characters, each piece an id (so
    ``prompt_tokens`` of text is the length of its ids, and text that repeats a prefix repeats its ids)."""
    if isinstance(prompt, str):
        return tuple(
            _VOCAB_OFFSET + zlib.crc32(prompt[i : i + 4].encode("utf-8", "replace")) % 100000
            for i in range(0, max(len(prompt), 1), 4)
        )
    return tuple(prompt) if prompt else (0,)


def seed_of(prompt: PromptLike) -> int:
    data = prompt.encode("utf-8", "replace") if isinstance(prompt, str) else ",".join(map(str, prompt)).encode()
    return zlib.crc32(data)


def natural_length(seed: int) -> int:
    """How many tokens the fake model says before its EOS (when EOS is not ignored)."""
    return _MIN_NATURAL_LENGTH + (seed * 2654435761 >> 7) % (_MAX_NATURAL_LENGTH - _MIN_NATURAL_LENGTH + 1)


def _token_index(seed: int, position: int) -> int:
    return (seed + position * 40503 + (position * position) * 7) % _V


def token_ids(seed: int, start: int, stop: int) -> list[int]:
    return [_VOCAB_OFFSET + _token_index(seed, i) for i in range(start, stop)]


def token_text(seed: int, start: int, stop: int) -> str:
    return "".join(VOCAB[_token_index(seed, i)] for i in range(start, stop))


def chat_prompt(messages: Sequence[dict]) -> str:
    """A chat template's rendering of messages (the fake's own, ChatML-like)."""
    parts = []
    for m in messages:
        content = m.get("content", "")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            content = "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        parts.append(f"<|im_start|>{m.get('role', 'user')}\n{content}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"
