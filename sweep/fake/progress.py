"""tqdm progress bars as SGLang's rank 0 prints them on stderr, without tqdm.

Each redraw is ``\\r`` + the bar (padded with spaces over a longer previous one), with no newline
until the bar closes; the transcript's raw bytes (shared/sglang-cpu/transcripts/startup.log)::

    \\rMulti-thread loading shards:   0% Completed | 0/1 [00:00<?, ?it/s]\\rMulti-thread loading shards: 100% Completed | 1/1 [00:00<00:00, 559.32it/s]\\n

Weight loading uses SGLang's ``BAR_FORMAT``; CUDA-graph capture uses tqdm's default bar (10 cells
when stderr is not a terminal) and renames it before each batch size:
``Capturing batches (bs=256 avail_mem=20.51 GB):   3%|▎         | 1/36 [00:01<00:45,  1.30s/it]``.
As tqdm does, a bar redraws on creation, on ``set_description``, on close, and on ``update`` only
once ``_MININTERVAL_S`` of wall time has passed since its last redraw.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from sweep.fake.log import write_stderr

SGLANG_BAR_FORMAT = "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"
DEFAULT_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"
_MININTERVAL_S = 0.1  # tqdm's default
_BAR_CELLS = 10  # tqdm's bar width when it cannot ask the terminal
_CHARSET = " " + "".join(chr(c) for c in range(0x258F, 0x2587, -1))  # " ▏▎▍▌▋▊▉█"


def _format_interval(seconds: float) -> str:
    """tqdm's ``MM:SS`` (``H:MM:SS`` past an hour)."""
    minutes, s = divmod(int(seconds), 60)
    h, m = divmod(minutes, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _rate_text(n: int, elapsed: float) -> str:
    """tqdm's rate: ``5.10it/s``, or inverted below one item a second, `` 1.30s/it``."""
    rate = n / elapsed if n and elapsed > 0 else None
    if rate is None:
        return "?it/s"
    return f"{1 / rate:5.2f}s/it" if rate < 1 else f"{rate:5.2f}it/s"


def _bar_cells(frac: float, cells: int = _BAR_CELLS) -> str:
    """tqdm's unicode bar: full blocks, one partial block, spaces."""
    nsyms = len(_CHARSET) - 1
    full, part = divmod(int(max(0.0, min(frac, 1.0)) * cells * nsyms), nsyms)
    out = _CHARSET[-1] * full
    if full < cells:
        out += _CHARSET[part] + _CHARSET[0] * (cells - full - 1)
    return out


def render(desc: str, n: int, total: int, elapsed: float, fmt: str) -> str:
    frac = n / total if total else 0.0
    remaining = _format_interval((total - n) * elapsed / n) if n and elapsed > 0 else "?"
    l_bar = f"{desc}: {frac * 100:3.0f}%|" if desc else f"{frac * 100:3.0f}%|"
    return fmt.format(
        desc=desc,
        percentage=frac * 100,
        n_fmt=n,
        total_fmt=total,
        elapsed=_format_interval(elapsed),
        remaining=remaining,
        rate_fmt=_rate_text(n, elapsed),
        l_bar=l_bar,
        bar=_bar_cells(frac),
    )


class Bar:
    """One tqdm bar. ``write`` gets each redraw (``\\r`` + text, and the closing ``\\n``)."""

    def __init__(
        self,
        total: int,
        desc: str = "",
        fmt: str = DEFAULT_BAR_FORMAT,
        write: Callable[[str], None] = write_stderr,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total = total
        self.desc = desc
        self.fmt = fmt
        self.n = 0
        self._write = write
        self._clock = clock
        self._start = clock()
        self._last_draw: Optional[float] = None
        self._last_len = 0
        self.display()

    def display(self) -> None:
        text = render(self.desc, self.n, self.total, self._clock() - self._start, self.fmt)
        pad = " " * max(self._last_len - len(text), 0)
        self._last_len = len(text)
        self._last_draw = self._clock()
        self._write("\r" + text + pad)

    def set_description(self, desc: str) -> None:
        self.desc = desc
        self.display()

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._last_draw is None or self._clock() - self._last_draw >= _MININTERVAL_S:
            self.display()

    def close(self) -> None:
        self.display()
        self._write("\n")
