"""Sections of a report, and their two renderings: Markdown (report.md) and the terminal (rich).

A section is a title, a few paragraphs, an optional table of already formatted strings and
optional images; the report and ``--vs`` build sections, and this module alone knows the formats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

MISSING = "-"
NOISE_MARK = "~"  # prefixed to a ratio or change whose interval contains 1


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    table: pl.DataFrame | None = None
    images: list[str] = field(default_factory=list)  # file names beside report.md
    level: int = 2  # markdown heading level


def num(value: float | None, digits: int = 1) -> str:
    """A number with fixed decimals and thousands separators; '-' for a missing value."""
    return MISSING if value is None else f"{value:,.{digits}f}"


def ratio(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}x"


def change(value: float | None) -> str:
    """A relative change (0.051 -> '+5.1%')."""
    return MISSING if value is None else f"{value * 100:+.1f}%"


def percent(value: float, digits: int = 0) -> str:
    """A relative change as a signed percentage ('+4%'); an unbounded one as 'unbounded'."""
    return "unbounded" if value == float("inf") else f"{value * 100:+.{digits}f}%"


def margin(value: float, low: float | None, high: float | None, *, within_noise: bool | None = None,
           confidence: float = 0.95, digits: int = 0) -> str:
    """A margin with its interval: '+4% (95% interval -1% .. +9%)', ', within noise' added inside the
    brackets when asked and true; '+4% (no interval)' without one (too few observations to tell)."""
    if low is None or high is None:
        return f"{percent(value, digits)} (no interval)"
    noisy = ", within noise" if within_noise else ""
    return (f"{percent(value, digits)} ({confidence * 100:g}% interval {percent(low, digits)} .. "
            f"{percent(high, digits)}{noisy})")


def interval(low: float | None, high: float | None) -> str:
    return MISSING if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def marked(value: float | None, within_noise: bool | None, fmt: Callable[[float | None], str] = ratio) -> str:
    """``fmt(value)`` with the noise mark in front when the value is within noise."""
    return MISSING if value is None else (NOISE_MARK if within_noise else "") + fmt(value)


def cell(fn: Callable[..., str], *columns: str) -> pl.Expr:
    """A text column: ``fn`` applied to each row's values of ``columns`` (nulls included)."""
    return pl.struct(columns).map_elements(lambda row: fn(*(row[c] for c in columns)),
                                           return_dtype=pl.String)


def strings(frame: pl.DataFrame) -> pl.DataFrame:
    """Every cell as text, nulls as '-' (what both renderings expect)."""
    return frame.select(pl.all().cast(pl.String).fill_null(MISSING))


def markdown(sections: list[Section]) -> str:
    """The sections as one Markdown document."""
    out: list[str] = []
    for s in sections:
        out.append(f"{'#' * s.level} {s.title}\n")
        out += [f"{p}\n" for p in s.paragraphs]
        if s.table is not None and s.table.height:
            escaped = strings(s.table).select(pl.all().str.replace_all("|", r"\|", literal=True))
            with pl.Config(tbl_formatting="MARKDOWN", tbl_hide_column_data_types=True,
                           tbl_hide_dataframe_shape=True, tbl_rows=-1, tbl_cols=-1,
                           fmt_str_lengths=10_000, tbl_width_chars=60_000):
                out.append(f"{escaped}\n")
        out += [f"![{s.title}]({image})\n" for image in s.images]
    return "\n".join(out)


def terminal(sections: list[Section], console: Console, image_dir: str = "") -> None:
    """The sections on the terminal: headings as rules, tables as rich tables, images as paths."""
    for s in sections:
        if s.level <= 1:
            console.rule(Text(s.title, style="bold"))
        else:
            console.print()
            console.print(Text(s.title, style="bold underline"))
        for p in s.paragraphs:
            console.print(p, markup=False, highlight=False)
        if s.table is not None and s.table.height:
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
            for column in s.table.columns:
                table.add_column(Text(column), overflow="fold")  # Text: a name is never read as markup
            for row in strings(s.table).iter_rows():
                table.add_row(*(Text(cell) for cell in row))
            console.print(table)
        for image in s.images:
            console.print(Text(f"plot: {image_dir}{image}", style="dim"))
