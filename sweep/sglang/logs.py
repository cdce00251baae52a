"""Reading SGLang's log: which startup phase a line marks, and why a dead server died. Pure.

The wording is SGLang's own (0.5.10, and 0.5.23 where it differs; see shared/sglang-surface.md).
The host layer feeds lines as they appear; this module never does I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Startup events in the order a speculative server logs them. A baseline logs no draft events.
EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("load_begin", re.compile(r"Load weight begin")),
    ("load_end", re.compile(r"Load weight end")),
    ("kv_cache", re.compile(r"KV Cache is allocated|Memory pool end")),
    ("draft_capture_begin", re.compile(r"Capture (draft|draft decode|draft extend) (cuda|CUDA) graph begin", re.I)),
    ("draft_capture_end", re.compile(r"Capture (draft|draft decode|draft extend) (cuda|CUDA) graph end", re.I)),
    ("capture_begin", re.compile(r"Capture (target (verify|decode) )?(cuda|CUDA) graph begin")),
    ("capture_end", re.compile(r"Capture (target (verify|decode) )?(cuda|CUDA) graph end")),
    ("http_up", re.compile(r"Uvicorn running on")),
    ("fired_up", re.compile(r"The server is fired up and ready to roll")),
)

# Failure signatures, most specific first: (kind, pattern, what the sweep reports, how to fix).
FAILURES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("oom", re.compile(r"(torch\.OutOfMemoryError|CUDA out of memory)[^\n]*"),
     "lower mem-fraction-static or cuda-graph-max-bs, or check for leftover processes on the GPUs"),
    ("not_enough_memory", re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static\.?"),
     "raise mem-fraction-static, or lower max-running-requests / context length"),
    ("capture_failed", re.compile(r"Capture (cuda|CUDA) graph failed:[^\n]*"),
     "lower cuda-graph-max-bs, or run with --disable-cuda-graph to find the cause"),
    ("model_not_found", re.compile(r"[^\n]*(is not a local folder and is not a valid model identifier|"
                                   r"No such file or directory|does not appear to have a file named)[^\n]*"),
     "check model_path and speculative-draft-model-path on that host"),
    ("scheduler_died", re.compile(r"Rank \d+ scheduler died during initialization[^\n]*"),
     "read the log above this line for the rank's own error"),
)

_EXCEPTION_LINE = re.compile(
    r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt|Exit))(?::\s*(.*))?$")
_LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[^\]]*)?\]\s*")


_RANK = re.compile(r"^\[[^\]]*\b(TP\d+)\b[^\]]*\]")


def rank_of(line: str) -> str | None:
    """The tensor-parallel rank a log line comes from (``[2026-11-29 10:00:00 TP3] ...`` -> ``TP3``)."""
    m = _RANK.match(line)
    return m.group(1) if m else None


def event_of(line: str) -> str | None:
    """The startup event a log line marks, or None."""
    for name, pattern in EVENTS:
        if pattern.search(line):
            return name
    return None


@dataclass(frozen=True)
class Failure:
    kind: str  # oom | not_enough_memory | capture_failed | model_not_found | scheduler_died | exception | exited
    reason: str  # the line that explains it, as the log says it
    fix: str


def _strip(line: str) -> str:
    return _LOG_PREFIX.sub("", line.rstrip())


def find_failure(lines: list[str], exit_code: int | None = None) -> Failure:
    """Why a server died, from the tail of its log: the most specific signature wins, then the last
    exception line of a traceback, then the exit code."""
    text = "\n".join(_strip(line) for line in lines)
    for kind, pattern, fix in FAILURES:
        found = list(pattern.finditer(text))
        if found:
            return Failure(kind, found[-1].group(0).strip(), fix)
    last_exc = None
    for line in lines:
        m = _EXCEPTION_LINE.match(_strip(line))
        if m:
            last_exc = _strip(line)
    if last_exc:
        return Failure("exception", last_exc, "read the traceback in the point's log")
    code = f"exit code {exit_code}" if exit_code is not None else "no exit code"
    sig = f" (signal {-exit_code})" if exit_code is not None and exit_code < 0 else ""
    return Failure("exited", f"server exited with {code}{sig} and no error in its log",
                   "read the point's log; the process may have been killed from outside")


def decode_stats(line: str) -> dict[str, float] | None:
    """Numbers from a ``Decode batch, #running-req: N, ... accept len: X, ...`` line."""
    if "Decode batch" not in line:
        return None
    out = {}
    for key, name in (("#running-req", "running"), ("#token", "tokens"), ("accept len", "accept_length"),
                      ("gen throughput (token/s)", "gen_throughput"), ("#queue-req", "queued")):
        m = re.search(re.escape(key) + r":\s*([0-9.]+)", line)
        if m:
            out[name] = float(m.group(1))
    return out
