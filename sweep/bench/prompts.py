"""Prompt sets: the built-in ``coding`` and ``encyclopedic`` sets, or a user's JSONL file.

A prompt set is a fixed, ordered list of prompts; which prompt each request gets is drawn from a
seeded generator keyed by the phase and concurrency level, so a rerun with the same seed sends the
same prompts in the same order, and the chosen index is recorded with every request.

JSONL format: one JSON object per line with a ``"prompt"`` string (other keys are ignored, so a
file can carry ids or sources); blank lines are skipped.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from sweep.core import BenchError

BUILTIN = ("coding", "encyclopedic")


@dataclass(frozen=True)
class PromptSet:
    """An ordered list of prompts and the name it is recorded under (built-in name or file path)."""

    name: str
    prompts: tuple[str, ...]

    def choose(self, n: int, seed: int, key: str) -> list[int]:
        """``n`` prompt indices for one stream of requests (a phase or a concurrency level).

        Every prompt is used once before any repeats (a shuffled deck, reshuffled per pass), so
        short runs still spread over the set; ``key`` makes levels draw different orders.
        """
        rng = random.Random(f"{seed}/{key}")
        out: list[int] = []
        deck: list[int] = []
        while len(out) < n:
            if not deck:
                deck = list(range(len(self.prompts)))
                rng.shuffle(deck)
            out.append(deck.pop())
        return out


def _parse_jsonl(text: str, source: str) -> tuple[str, ...]:
    """The prompts of a JSONL document; errors name the file and line."""
    prompts: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise BenchError(
                f"prompt file {source}, line {lineno}: not JSON ({e.msg})",
                fix='write one object per line, e.g. {"prompt": "Explain ..."}',
            ) from e
        prompt = obj.get("prompt") if isinstance(obj, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            raise BenchError(
                f'prompt file {source}, line {lineno}: no non-empty "prompt" string',
                fix='write one object per line, e.g. {"prompt": "Explain ..."}',
            )
        prompts.append(prompt)
    if not prompts:
        raise BenchError(
            f"prompt file {source} has no prompts", fix='write one object per line, e.g. {"prompt": "Explain ..."}'
        )
    return tuple(prompts)


def load_prompts(spec: str) -> PromptSet:
    """A built-in set by name, else a JSONL file by path."""
    if spec in BUILTIN:
        text = resources.files("sweep.bench").joinpath("prompts", f"{spec}.jsonl").read_text("utf-8")
        return PromptSet(spec, _parse_jsonl(text, f"<built-in {spec}>"))
    path = Path(spec).expanduser()
    if not path.is_file():
        raise BenchError(
            f"prompt set {spec!r} is neither a built-in set nor a file",
            fix=f"use one of {', '.join(BUILTIN)}, or the path of a JSONL file",
        )
    return PromptSet(spec, _parse_jsonl(path.read_text("utf-8"), str(path)))
