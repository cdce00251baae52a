"""Lengths on the served model's tokenizer: SGLang's ``/v1/tokenize``, asked before the measurement.

A workload is loaded without a tokenizer (nothing in the benchmark imports sglang or transformers),
so two of its lengths are first guesses: a length workload's prompt sent as text (the chat route,
which takes no ids: one word per id, ``tokens.ids_text``), and a ShareGPT answer's length (its
output length with ``answer_lengths``: ~4 characters a token). ``fit`` asks the server's
``/v1/tokenize`` (SGLang 0.5.10 has it; the fake too) once per distinct text, all texts in a
few batched calls, before anything is timed, and

- makes each text prompt exactly its drawn length on that tokenizer: words are added (more ids of
  the same seed) or dropped, in proportion to the words a token the count shows, until the count
  matches (a few rounds), the count of the content alone
  (``add_special_tokens`` false; the chat template's tokens come on top, in ``prompt_tokens``);
- counts each ShareGPT answer, the output length then that count (times ``output_scale``).

Every request with a given length records how it is known (``Request.lengths_exact``, the
``lengths_exact`` column): True for ids sent as ids and for lengths the server's tokenizer
counted, False where a guess remained (no count: a 404 from an older server, or SGLang's 500 for a
tokenizer whose ``model_max_length`` is unbounded, which its JSON encoder cannot write; a text that
did not fit), None without given lengths. The benchmark logs once how many stayed estimates.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Optional

import httpx

from sweep.bench.workloads import Request, Workload, tokens

log = logging.getLogger(__name__)

_ROUTE = "/v1/tokenize"
BATCH = 256  # texts per /v1/tokenize call
ROUNDS = 4  # add/drop words at most this often per text
_TIMEOUT_S = 60.0


async def count(client: httpx.AsyncClient, url: str, texts: list[str]) -> Optional[dict[str, int]]:
    """Tokens of each distinct text on the server's tokenizer (no special tokens); None when the
    server has no tokenize route or answers it badly (the caller keeps its estimates)."""
    out: dict[str, int] = {}
    todo = list(dict.fromkeys(t for t in texts if t not in out))
    for i in range(0, len(todo), BATCH):
        part = todo[i : i + BATCH]
        try:
            resp = await client.post(
                url.rstrip("/") + _ROUTE, json={"prompt": part, "add_special_tokens": False}, timeout=_TIMEOUT_S
            )
            counts = resp.json().get("count") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            counts = None
        if not isinstance(counts, list) or len(counts) != len(part) or not all(isinstance(c, int) for c in counts):
            return None
        out.update(zip(part, counts))
    return out


def _words(r: Request, n: int, salt: int) -> str:
    """``n`` words for ``r`` (its own ids first, then more of the same seed)."""
    ids = tuple(r.input_ids or ())
    if n > len(ids):
        ids += tokens.draw_ids(f"{r.origin}/more/{salt}", n - len(ids))
    return tokens.ids_text(ids[:n])


async def fit(client: httpx.AsyncClient, url: str, workload: Workload, api: str, output_scale: float = 1.0) -> Workload:
    """``workload`` with its text prompts made of their drawn token counts and its ShareGPT answers
    counted, on the tokenizer of the server at ``url`` (see the module docstring)."""
    reqs = list(workload.requests)
    as_text = [i for i, r in enumerate(reqs) if r.input_ids is not None and r.input_len is not None and api == "chat"]
    answers = [i for i, r in enumerate(reqs) if r.answer]
    for i, r in enumerate(reqs):  # ids sent as ids: exact; the rest a guess until counted
        if r.input_len is not None or r.answer:
            reqs[i] = replace(r, lengths_exact=r.input_ids is not None and api != "chat" and not r.answer)
    if not as_text and not answers:
        return replace(workload, requests=tuple(reqs))
    sizes = {i: reqs[i].input_len or 0 for i in as_text}
    texts = {i: tokens.ids_text(reqs[i].input_ids or ()) for i in as_text}
    fitted: set[int] = set()
    ok = True
    for rnd in range(ROUNDS):
        left = [i for i in as_text if i not in fitted]
        got = await count(
            client, url, [texts[i] for i in left] + ([reqs[i].answer for i in answers] if rnd == 0 else [])
        )
        if got is None:
            ok = False
            break
        if rnd == 0:
            for i in answers:
                n = max(1, round(got[reqs[i].answer] * output_scale))
                reqs[i] = replace(
                    reqs[i], output_len=n, lengths_exact=reqs[i].input_len is None or bool(reqs[i].lengths_exact)
                )
        for i in left:
            want, have = reqs[i].input_len or 0, got[texts[i]]
            if have == want:
                fitted.add(i)
                continue
            new = max(1, round(sizes[i] * want / max(have, 1)))  # words per token as this text shows it
            sizes[i] = new if new != sizes[i] else max(1, new + (1 if want > have else -1))
            texts[i] = _words(reqs[i], sizes[i], rnd)
        if len(fitted) == len(as_text):
            break
    for i in fitted:
        reqs[i] = replace(reqs[i], text=texts[i], lengths_exact=True)
    guessed = sum(1 for r in reqs if r.lengths_exact is False)
    if guessed:
        why = (
            f"no count from {_ROUTE} at {url}: an older server has no such route, and SGLang answers 500 "
            "where the tokenizer's model_max_length is unbounded"
            if not ok
            else f"{guessed} text(s) did not come to their length in {ROUNDS} rounds"
        )
        log.warning(
            "%s: %d request(s) of %s keep estimated lengths (~4 characters a token; %s)",
            workload.name,
            guessed,
            workload.name,
            why,
        )
    return replace(workload, requests=tuple(reqs))
