"""Sections of a report, and their three renderings: Markdown (report.md), HTML (report.html) and
the terminal (rich).

A section is a title, a few paragraphs, an optional table of already formatted strings and
optional images; the report and ``--vs`` build sections, and this module alone knows the formats.
The HTML page shows the very strings the Markdown does; where the Markdown links a PNG it places the
chart of that name (a fragment the caller gives, ``sweep.analysis.charts``).
"""

from __future__ import annotations

import html as html_mod
import re
from collections.abc import Callable, Mapping
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


def bound(value: float, digits: int = 0) -> str:
    """An interval's bound as a signed percentage, with up to two more digits where ``digits`` would
    round a bound that is not zero to 0 ('+0.3%', not '+0%'): which side of zero a bound lies on is
    the verdict, and the text must not hide it."""
    for d in range(digits, digits + 3):
        if value == 0 or value == float("inf") or round(value * 100, d) != 0:
            return percent(value, d)
    return percent(value, digits + 2)


def margin(
    value: float,
    low: float | None,
    high: float | None,
    *,
    within_noise: bool | None = None,
    confidence: float = 0.95,
    digits: int = 0,
) -> str:
    """A margin with its interval: '+4% (95% interval -1% .. +9%)', ', within noise' added inside the
    brackets when asked and true; '+4% (no interval)' without one (too few observations to tell)."""
    if low is None or high is None:
        return f"{percent(value, digits)} (no interval)"
    noisy = ", within noise" if within_noise else ""
    return (
        f"{percent(value, digits)} ({confidence * 100:g}% interval {bound(low, digits)} .. "
        f"{bound(high, digits)}{noisy})"
    )


def interval(low: float | None, high: float | None) -> str:
    return MISSING if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def marked(value: float | None, within_noise: bool | None, fmt: Callable[[float | None], str] = ratio) -> str:
    """``fmt(value)`` with the noise mark in front when the value is within noise."""
    return MISSING if value is None else (NOISE_MARK if within_noise else "") + fmt(value)


_UNKNOWN_MARK = "?"  # prefixed to a ratio that carries no verdict (no interval: e.g. a level whose requests all failed)


def judged_mark(value: float | None, within_noise: bool | None) -> str:
    """A ratio with its one verdict against 1 (``noise.Verdict``): '~' within noise, '?' no verdict
    (no interval), bare beyond noise."""
    if value is None:
        return MISSING
    return (_UNKNOWN_MARK if within_noise is None else NOISE_MARK if within_noise else "") + ratio(value)


def cell(fn: Callable[..., str], *columns: str) -> pl.Expr:
    """A text column: ``fn`` applied to each row's values of ``columns`` (nulls included)."""
    return pl.struct(columns).map_elements(lambda row: fn(*(row[c] for c in columns)), return_dtype=pl.String)


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
            with pl.Config(
                tbl_formatting="MARKDOWN",
                tbl_hide_column_data_types=True,
                tbl_hide_dataframe_shape=True,
                tbl_rows=-1,
                tbl_cols=-1,
                fmt_str_lengths=10_000,
                tbl_width_chars=60_000,
            ):
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


_PAGE_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em auto; max-width: 1500px;
       padding: 0 1.5em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fafafa; }
.table-wrap { overflow-x: auto; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; }
.chart { margin: .5em 0 1.5em; border: 1px solid #eee; }
nav { font-size: 13px; column-width: 22em; background: #fafafa; padding: .5em 1em; border: 1px solid #eee; }
nav a { display: block; }
"""


def _inline(text: str) -> str:
    """A paragraph's text as HTML: escaped, `code` as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html_mod.escape(text))


def _anchor(index: int, title: str) -> str:
    return f"s{index}-" + (re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "section")


def _paragraphs(paragraphs: list[str]) -> list[str]:
    """Paragraphs as <p>; a run of '- ' lines as one list."""
    out: list[str] = []
    items: list[str] = []
    for p in paragraphs:
        if p.startswith("- "):
            items.append(f"<li>{_inline(p[2:])}</li>")
            continue
        if items:
            out.append("<ul>" + "".join(items) + "</ul>")
            items = []
        out.append(f"<p>{_inline(p)}</p>")
    if items:
        out.append("<ul>" + "".join(items) + "</ul>")
    return out


def _html_table(frame: pl.DataFrame) -> str:
    """A table of strings (as ``strings`` makes them) as an HTML table."""
    text = strings(frame)
    head = "".join(f"<th>{html_mod.escape(c)}</th>" for c in text.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html_mod.escape(c)}</td>" for c in row) + "</tr>" for row in text.iter_rows()
    )
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def html(sections: list[Section], charts: Mapping[str, str] | None = None, script: str = "", nav_after: int = 1) -> str:
    """The sections as one self-contained HTML page: ``charts`` maps an image name (a section's
    ``images``) to the HTML that draws it, ``script`` is inlined once in the head (the charting library);
    an image with no chart is left out. The table of contents follows the first ``nav_after`` sections
    (the header; the report's answer too, so that it opens the page)."""
    charts = charts or {}
    title = sections[0].title if sections else "Sweep report"
    parts: list[str] = []
    toc: list[str] = []
    for i, s in enumerate(sections):
        anchor = _anchor(i, s.title)
        level = min(max(s.level, 1), 6)
        if level == 2:
            toc.append(f'<a href="#{anchor}">{html_mod.escape(s.title)}</a>')
        body = [f'<section><h{level} id="{anchor}">{html_mod.escape(s.title)}</h{level}>', *_paragraphs(s.paragraphs)]
        if s.table is not None and s.table.height:
            body.append(_html_table(s.table))
        body += [
            f'<div class="chart" data-image="{html_mod.escape(image)}">{charts[image]}</div>'
            for image in s.images
            if image in charts
        ]
        parts.append("\n".join(body) + "</section>")
    if toc and parts:
        parts.insert(min(nav_after, len(parts)), "<nav>" + "".join(toc) + "</nav>")
    # "</script" inside the inlined library would end its tag early
    js = "<script>" + script.replace("</script", "<\\/script") + "</script>" if script else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html_mod.escape(title)}</title><style>{_PAGE_STYLE}</style>{js}</head>\n"
        "<body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
