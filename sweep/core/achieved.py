"""Achieved concurrency against a level's C: the margin below which a level is "short" (the load it
measured is not C's), shared by ``sweep bench``'s tables and the report (sweep/analysis/achieved.py)."""

from __future__ import annotations

from typing import Optional

SHORT = 0.8  # a level that kept fewer than this share of its C in flight on average is flagged (one round
# of a closed loop drains at its end, which alone keeps a sound level near 85-95 % of C)


def is_short(concurrency: Optional[int], achieved: Optional[float]) -> bool:
    """Whether a level of nominal ``concurrency`` kept fewer than ``SHORT`` of it in flight on average
    (unknown, or an open-loop level: concurrency 0, never)."""
    return bool(concurrency and concurrency > 0 and achieved is not None and achieved < SHORT * concurrency)


def cell(concurrency: Optional[int], achieved: Optional[float]) -> str:
    """'63.1', or '31.0 (44%) short' for a level below the margin; '-' unknown."""
    if achieved is None:
        return "-"
    text = f"{achieved:.1f}"
    if concurrency and is_short(concurrency, achieved):
        text += f" ({achieved / concurrency:.0%}) short"
    return text
