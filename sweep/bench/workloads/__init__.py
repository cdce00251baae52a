"""Workloads as data: what a benchmark's requests are, loaded and checked before anything is sent.

``load(settings)`` turns ``benchmark.workload`` (``sweep.core.settings.WorkloadSettings``; unset:
the prompt set of ``benchmark.prompts``) into a ``Workload``: an ordered tuple of ``Request``
specs, one loader per kind, each a pure function of the settings and the file's text:

- ``prompts``   (``sweep.bench.prompts``): the built-in sets or a JSONL file of ``{"prompt": ...}``;
- ``sharegpt``  (``sharegpt.py``): ShareGPT JSON/JSONL; the first human turn, or every turn with
  the conversation so far (multi-turn);
- ``synthetic`` and ``shared-prefix`` (``synthetic.py``): token lengths drawn from a distribution;
- ``trace``     (``trace.py``): a JSONL trace of arrival times and lengths (Mooncake's format too).

Lengths are tokens. The client has no tokenizer (nothing here imports sglang or transformers), so
a workload made of lengths is token ids (``tokens.py``), sent as ids where the route takes them
(``/generate``'s ``input_ids``, ``/v1/completions``' ``prompt``), and as text otherwise (chat): one
common three-letter word per id, one token each on the BPE vocabularies of the models served, so
the server's count is close to the given one but not exact. Every request row records both: the
given length (``input_len_given``, ``output_len_given``) and the server's (``prompt_tokens``,
``completion_tokens``). A text workload (prompts, ShareGPT) has no given input length.

A bad file fails at load, before any server starts (``sweep.api.plan_for`` loads the workload of an
experiment), with the file, line, what is wrong and the fix (``ConfigError``, exit 2).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from sweep.bench.prompts import PromptSet, load_prompts
from sweep.bench.workloads import tokens
from sweep.core import BenchSettings, ConfigError, WorkloadSettings

ORDERS = ("shuffle", "conversations", "file")


@dataclass(frozen=True)
class Request:
    """One request a workload may send (a benchmark sends each as often as the draw picks it)."""

    text: str = ""  # the prompt as text; "" where it is given as token ids
    input_ids: Optional[tuple[int, ...]] = None  # the prompt as token ids (synthetic, shared-prefix, trace)
    messages: Optional[tuple[dict, ...]] = None  # chat turns so far, the last the user's (multi-turn)
    input_len: Optional[int] = None  # tokens the workload means the prompt to be; None: not known here
    output_len: Optional[int] = None  # tokens to generate (max tokens); None: the phase's max_tokens
    conversation: Optional[int] = None  # the conversation (multi-turn ShareGPT) and its user turn (0-based)
    turn: Optional[int] = None
    group: Optional[int] = None  # the shared-prefix group (shared-prefix; a trace's group or first hash id)
    arrival_s: Optional[float] = None  # a trace's arrival time, from its first request, scaled
    origin: str = ""  # where it came from, for errors: "FILE, line 12"
    answer: str = ""  # ShareGPT with answer_lengths: the answer whose length is output_len (fit.py counts it)
    lengths_exact: Optional[bool] = (
        None  # its given lengths on the served tokenizer: True exact, False estimated (fit.py)
    )

    def prompt_text(self) -> str:
        """The prompt as text (the ids spelt as words where it is ids)."""
        if self.input_ids is not None and not self.text:
            return tokens.ids_text(self.input_ids)
        return self.text

    def input_estimate(self) -> int:
        """Its input tokens: the given length, else ~4 characters a token of its text."""
        if self.input_len is not None:
            return self.input_len
        return tokens.estimate(
            self.prompt_text() if self.messages is None else "".join(str(m.get("content", "")) for m in self.messages)
        )


@dataclass(frozen=True)
class Workload:
    """The requests of a benchmark, and how a stream of them is drawn (``choose``)."""

    name: str  # recorded with every request (``workload``, ``prompt_set``)
    requests: tuple[Request, ...]
    order: str = "shuffle"  # shuffle: a shuffled deck; conversations: shuffled conversations, turns in order; file

    @classmethod
    def from_prompts(cls, prompts: PromptSet) -> "Workload":
        return cls(prompts.name, tuple(Request(text=p) for p in prompts.prompts))

    def choose(self, n: int, seed: int, key: str) -> list[int]:
        """``n`` request indices for one stream of requests (a phase or a level), reproducible from
        ``seed`` and ``key``. ``shuffle``: every request once before any repeats, as
        ``PromptSet.choose`` (the same draw for a prompt set); ``conversations``: whole conversations
        in a shuffled order, each conversation's turns in order; ``file``: in order, from the start again."""
        if self.order == "file":
            return [i % len(self.requests) for i in range(n)]
        if self.order == "shuffle":
            return PromptSet(self.name, ("",) * len(self.requests)).choose(n, seed, key)
        convs: dict[int, list[int]] = {}
        for i, r in enumerate(self.requests):
            convs.setdefault(r.conversation if r.conversation is not None else -1 - i, []).append(i)
        runs = list(convs.values())
        rng = random.Random(f"{seed}/{key}")
        out: list[int] = []
        deck: list[list[int]] = []
        while len(out) < n:
            if not deck:
                deck = list(runs)
                rng.shuffle(deck)
            out += deck.pop()
        return out[:n]

    def units(self, indices: list[int]) -> list[list[int]]:
        """The positions of ``indices`` grouped into what one in-flight slot sends in order: a
        conversation's consecutive turns (each turn goes after the answer to the one before, as in a
        chat), else one request each."""
        out: list[list[int]] = []
        last: Optional[int] = None
        for pos, idx in enumerate(indices):
            conv = self.requests[idx].conversation
            if (
                self.order == "conversations"
                and out
                and conv is not None
                and conv == last
                and (self.requests[idx].turn or 0) > (self.requests[indices[pos - 1]].turn or 0)
            ):
                out[-1].append(pos)
            else:
                out.append([pos])
            last = conv
        return out


def load(settings: BenchSettings) -> Workload:
    """The workload ``settings`` describe; ``ConfigError`` naming the file and line for a bad file
    (``BenchError`` for a prompt set, as before workloads). Lengths are checked against
    ``workload.max_context`` where it is set (``check_context``)."""
    w = settings.workload
    if w is None or w.kind == "prompts":
        return Workload.from_prompts(load_prompts(w.path if w is not None and w.path else settings.prompts))
    from sweep.bench.workloads import sharegpt, synthetic, trace  # lazy: at the top it makes a circle at import time

    if w.kind == "sharegpt":
        out = _cached(w, sharegpt.load)
    elif w.kind == "synthetic":
        out = synthetic.synthetic(w, settings.seed)
    elif w.kind == "shared-prefix":
        out = synthetic.shared_prefix(w, settings.seed)
    elif w.kind == "trace":
        out = _cached(w, trace.load)
    else:
        raise ConfigError(
            f"benchmark.workload.kind = {w.kind!r} is unknown",
            fix="one of prompts, sharegpt, synthetic, shared-prefix, trace",
        )
    if w.output_scale != 1:
        out = replace(
            out,
            requests=tuple(
                r if r.output_len is None else replace(r, output_len=max(1, round(r.output_len * w.output_scale)))
                for r in out.requests
            ),
        )
    if w.max_context is not None:
        check_context(out, w.max_context, max_tokens=max_phase_tokens(settings), what="benchmark.workload.max_context")
    return out


_FILES: dict[tuple, Workload] = {}  # a file's workload by what it was read with and the file's stat


def _cached(w: WorkloadSettings, read: Callable[[WorkloadSettings], Workload]) -> Workload:
    """``read(w)``, once per file as it is on disk (path, size, modification time) and the settings
    that shape what it reads: the plan checks the experiment's workload and each client-side axis
    value's, which mostly name the same file. A file that changes is read again."""
    try:
        st = os.stat(os.path.expanduser(w.path))
    except OSError:
        return read(w)  # the reader names what is wrong
    key = (
        read,
        os.path.abspath(os.path.expanduser(w.path)),
        st.st_size,
        st.st_mtime_ns,
        repr(replace(w, output_scale=1.0, max_context=None)),
    )
    if key not in _FILES:
        if len(_FILES) >= 4:
            _FILES.pop(next(iter(_FILES)))
        _FILES[key] = read(w)
    return _FILES[key]


def max_phase_tokens(settings: BenchSettings) -> int:
    """The most tokens a request without its own output length asks for (the larger phase's max_tokens)."""
    ss, cc = settings.single_stream, settings.concurrency
    runs = ss.runs + ss.warmup > 0
    return max(ss.max_tokens if runs else 0, cc.max_tokens if cc.levels else 0, 1)


def check_context(
    workload: Workload, context: int, *, max_tokens: Optional[int], what: str, given_only: bool = False
) -> None:
    """``ConfigError`` for the first request whose input plus output (``max_tokens`` where it sets
    none; None: the input alone) exceeds ``context`` tokens, naming where it came from. A text
    prompt's length is estimated (~4 characters a token); ``given_only``: such prompts are left to
    the server, only given lengths are checked."""
    for r in workload.requests:
        if given_only and r.input_len is None:
            continue
        n_in = r.input_estimate()
        n_out = r.output_len if r.output_len is not None else (max_tokens or 0)
        if n_in + n_out > context:
            given = "" if r.input_len is not None else " (estimated at ~4 characters a token)"
            out = f" + {n_out} output" if n_out else ""
            raise ConfigError(
                f"{r.origin or workload.name}: {n_in} input{given}{out} tokens exceed the "
                f"context of {context} tokens ({what})",
                fix="shorten or drop that request, lower the lengths or max_tokens, or serve a longer context",
            )


def model_context(model_path: str, flags: dict) -> Optional[int]:
    """The context a server of ``model_path`` will have, where it can be known here: its
    ``--context-length`` flag, else ``max_position_embeddings`` of the model's config.json (or its
    ``text_config``'s) where this machine has the file; None otherwise."""

    flag = flags.get("context-length")
    if isinstance(flag, int) and not isinstance(flag, bool):
        return flag
    try:
        cfg = json.loads((Path(model_path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    for c in (cfg, cfg.get("text_config") if isinstance(cfg, dict) else None):
        if isinstance(c, dict) and isinstance(c.get("max_position_embeddings"), int):
            return int(c["max_position_embeddings"])
    return None


def check_experiment(settings: BenchSettings, model_path: str, flags: dict) -> Optional[Workload]:
    """An experiment's workload loaded and checked before anything launches (``sweep.api.plan_for``):
    the file, and every request's lengths against ``workload.max_context``, else the context the
    model will have where it is known here (``model_context``). None without a workload."""
    if settings.workload is None:
        return None
    w = load(settings)
    if settings.workload.max_context is None and (ctx := model_context(model_path, flags)) is not None:
        check_context(
            w,
            ctx,
            max_tokens=max_phase_tokens(settings),
            what=f"the context of {model_path}: --context-length or its config.json",
        )
    return w
