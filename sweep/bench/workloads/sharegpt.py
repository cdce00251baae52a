"""ShareGPT-format files: a JSON array (or JSON Lines) of ``{"conversations": [{"from": "human",
"value": "..."}, {"from": "gpt", "value": "..."}, ...]}``. Pure but for reading the file.

Single-turn (the default): one request per conversation, its first human turn as the prompt.
Multi-turn (``multiturn``): one request per human turn, carrying the conversation so far (the
dataset's own earlier answers, not the server's, so a rerun sends the same requests), the turns of
one conversation sent in order by one in-flight slot, so that the server's prefix cache is used as
in a chat. With ``answer_lengths`` the dataset's answer to a turn gives its output length (max
tokens), estimated at ~4 characters a token, then counted on the served model's tokenizer
before anything is sent (``fit.py``); a turn without an answer then takes
the phase's max_tokens. Roles: ``human``/``user`` ask, ``gpt``/``chatgpt``/``bard``/``bing``/
``model``/``assistant`` answer, ``system`` is kept as the chat's system message.
"""

from __future__ import annotations

from typing import Any, Optional

from sweep.bench.workloads import Request, Workload, tokens
from sweep.bench.workloads.files import at, bad, read_text, records
from sweep.core import WorkloadSettings

USER = ("human", "user")
_ASSISTANT = ("gpt", "chatgpt", "bard", "bing", "model", "assistant")
_SYSTEM = ("system",)
EXAMPLE = '{"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"}]}'
LABEL = {"user": "User", "assistant": "Assistant", "system": "System"}


def _turns(obj: Any, source: str, line: int) -> list[tuple[str, str]]:
    """(role, text) of one conversation record, checked."""
    if not isinstance(obj, dict):
        raise bad(source, line, f"a {type(obj).__name__}, not a conversation object", fix=f"e.g. {EXAMPLE}")
    conv = obj.get("conversations", obj.get("conversation"))
    if conv is None:
        raise bad(source, line, 'no "conversations" field', fix=f"e.g. {EXAMPLE}")
    if not isinstance(conv, list) or not conv:
        raise bad(
            source,
            line,
            'empty "conversations"' if conv == [] else '"conversations" is not a list of turns',
            fix="drop the record, e.g. jq -c '.[] | select(.conversations | length > 0)'",
        )
    out: list[tuple[str, str]] = []
    for k, turn in enumerate(conv):
        if not isinstance(turn, dict) or "from" not in turn or "value" not in turn:
            raise bad(source, line, f'turn {k} has no "from" and "value"', fix=f"every turn as in {EXAMPLE}")
        who, value = str(turn["from"]).lower(), turn["value"]
        role = "user" if who in USER else "assistant" if who in _ASSISTANT else "system" if who in _SYSTEM else None
        if role is None:
            raise bad(
                source,
                line,
                f"turn {k} is from {turn['from']!r}",
                fix=f"from one of {', '.join(USER + _ASSISTANT + _SYSTEM)}",
            )
        if not isinstance(value, str):
            raise bad(source, line, f'turn {k}\'s "value" is not a string', fix="text in every turn's value")
        out.append((role, value))
    if not any(r == "user" and v.strip() for r, v in out):
        raise bad(source, line, "no human turn with text", fix="drop the record, or give it a human turn")
    return out


def render(messages: list[dict]) -> str:
    """A conversation as plain text for routes without a chat template (/generate, /v1/completions)."""
    return "".join(f"{LABEL[m['role']]}: {m['content']}\n\n" for m in messages) + "Assistant:"


def _answer(turns: list[tuple[str, str]], k: int, use: bool) -> str:
    if use and k + 1 < len(turns) and turns[k + 1][0] == "assistant" and turns[k + 1][1].strip():
        return turns[k + 1][1]
    return ""


def _answer_len(answer: str) -> Optional[int]:
    return tokens.estimate(answer) if answer else None


def load(w: WorkloadSettings) -> Workload:
    text = read_text(w.path, "sharegpt")
    out: list[Request] = []
    n = 0
    for n, (line, obj) in enumerate(records(text, w.path, EXAMPLE), start=1):
        turns = _turns(obj, w.path, line)
        origin = f"workload file {w.path}, {at(line)}"
        conv = n - 1
        if not w.multiturn:
            k = next(i for i, (r, v) in enumerate(turns) if r == "user" and v.strip())
            answer = _answer(turns, k, w.answer_lengths)
            out.append(
                Request(
                    text=turns[k][1],
                    output_len=_answer_len(answer),
                    answer=answer,
                    conversation=conv,
                    turn=0,
                    origin=origin,
                )
            )
            continue
        history: list[dict] = []
        turn = 0
        for k, (role, value) in enumerate(turns):
            history.append({"role": role, "content": value})
            if role != "user" or not value.strip():
                continue
            msgs = tuple(dict(m) for m in history)
            answer = _answer(turns, k, w.answer_lengths)
            out.append(
                Request(
                    text=render(list(msgs)),
                    messages=msgs,
                    output_len=_answer_len(answer),
                    answer=answer,
                    conversation=conv,
                    turn=turn,
                    origin=origin,
                )
            )
            turn += 1
    if not out:
        raise bad(
            w.path, None, "no conversations", fix=f"a JSON array (or JSON Lines) of conversations, e.g. {EXAMPLE}"
        )
    return Workload(
        f"sharegpt{'-multiturn' if w.multiturn else ''}:{w.path}",
        tuple(out),
        order="conversations" if w.multiturn else "shuffle",
    )
