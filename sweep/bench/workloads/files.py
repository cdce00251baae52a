"""Reading a workload file: its text (UTF-8, else the line of the first bad byte) and its JSON
records, each with the line it starts on, from a JSON array or from JSON Lines. Errors are
``ConfigError``s that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sweep.core import ConfigError


class _Loc(int):
    """Where a record starts: its line (the int), and for an item of a JSON array its place in the
    array (``record``, from 1), since a whole array may sit on one line."""

    record: int | None

    def __new__(cls, line: int, record: int | None = None) -> "_Loc":
        loc = super().__new__(cls, line)
        loc.record = record
        return loc


def at(line: int | None) -> str:
    """``line 7``, or ``line 1 (record 1234 of the array)`` for an item of a JSON array (counted
    from 1); "" where unknown."""
    if not line:
        return ""
    record = getattr(line, "record", None)
    return f"line {int(line)}" + (f" (record {record} of the array)" if record is not None else "")


def bad(source: str, line: int | None, what: str, fix: str) -> ConfigError:
    where = f"workload file {source}" + (f", {at(line)}" if line else "")
    return ConfigError(f"{where}: {what}", fix=fix)


def read_text(path: str, kind: str) -> str:
    """The file's text; ``ConfigError`` when it is missing or not UTF-8 (with the line)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(
            f"{kind} workload file {path!r} not found",
            fix="give the path of an existing file (relative to where the benchmark runs)",
        )
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise bad(
            path,
            line,
            f"not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start})",
            fix="convert the file to UTF-8, e.g. iconv -f latin1 -t utf-8",
        ) from None


class _Lines:
    """Line numbers of ascending positions in ``text``, each counted from the one before (counting
    from the start every time made a 20 MB array take half a minute)."""

    def __init__(self, text: str):
        self.text, self.pos, self.line = text, 0, 1

    def __call__(self, pos: int) -> int:
        if pos < self.pos:
            return self.text.count("\n", 0, pos) + 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def records(text: str, source: str, example: str) -> Iterator[tuple[int, Any]]:
    """(line, value) of every record: the items of a top-level JSON array, or one JSON value per
    non-blank line (JSON Lines)."""
    start = len(text) - len(text.lstrip())
    if text[start : start + 1] == "[":
        yield from _array(text, start + 1, source, example)
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as e:
            raise bad(source, lineno, f"not JSON ({e.msg})", fix=f"one JSON object per line, e.g. {example}") from None


def _array(text: str, pos: int, source: str, example: str) -> Iterator[tuple[int, Any]]:
    decoder = json.JSONDecoder()
    n = len(text)
    _line = _Lines(text)
    record = 0

    def skip(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    pos = skip(pos)
    if pos < n and text[pos] == "]":
        return
    while True:
        pos = skip(pos)
        record += 1
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise bad(
                source,
                _Loc(_line(e.pos), record),
                f"not JSON ({e.msg})",
                fix=f"a JSON array of objects, e.g. [{example}]",
            ) from None
        yield _Loc(_line(pos), record), value
        pos = skip(end)
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "]":
            if skip(pos + 1) < n:
                raise bad(source, _line(skip(pos + 1)), "text after the closing ]", fix="one JSON array per file")
            return
        raise bad(
            source,
            _Loc(_line(min(pos, n - 1) if n else 0), record),
            "expected , or ] in the array",
            fix=f"a JSON array of objects, e.g. [{example}]",
        )
