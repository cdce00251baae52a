"""`report DIR` writes report.html: the Markdown's sections and numbers, one self-contained page, and an
interactive chart for every plot of the Markdown, drawn by a real browser with networking off."""

from __future__ import annotations

import asyncio
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sweep.analysis.cli import run_report
from tests.analysis.sweepdir import story_sweep
from tests.analysis.test_report import report_args
from tests.browser import MISSING, Browser, chromium

SEPARATOR = re.compile(r"^\|[\s\-:|]+\|$")


class Text(HTMLParser):
    """The page's headings, paragraphs and list items, table cells, and tags, as a reader sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.paragraphs: list[str] = []
        self.cells: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self._open: list[str] = []
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("h1", "h2", "h3", "p", "li", "th", "td"):
            self._open.append(tag)
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()
            text = "".join(self._text)
            {"p": self.paragraphs, "li": self.paragraphs, "th": self.cells, "td": self.cells}.get(
                tag, self.headings
            ).append(text)

    def handle_data(self, data: str) -> None:
        if self._open:
            self._text.append(data)


def markdown_parts(md: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """The Markdown's headings, paragraphs (list items without their '- ', code without backticks),
    table cells (headers included) and images."""
    headings, paragraphs, cells, images = [], [], [], []
    for line in md.splitlines():
        if not line.strip() or SEPARATOR.match(line):
            continue
        if line.startswith("#"):
            headings.append(line.lstrip("#").strip())
        elif line.startswith("|"):
            cells += [c.strip().replace(r"\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        elif m := re.fullmatch(r"!\[[^\]]*\]\(([^)]+)\)", line):
            images.append(m.group(1))
        else:
            paragraphs.append(line.removeprefix("- ").replace("`", ""))
    return headings, paragraphs, cells, images


def test_the_page_shows_the_markdowns_sections_and_numbers(tmp_path):
    """Every heading, paragraph and table cell of report.md is on the page, in the same order, as the
    same text (the very strings: numbers formatted once); without plots the page has no script at all."""
    directory = story_sweep(tmp_path / "k26_eagle-dryrun").write()
    assert run_report(report_args(str(directory), "--no-plots", "--quiet")) == 0
    md = (directory / "report" / "report.md").read_text()
    page = Text()
    page.feed((directory / "report" / "report.html").read_text())
    headings, paragraphs, cells, images = markdown_parts(md)
    assert page.headings == headings and "Sweep report: test" in headings and "Speedup grid" in headings
    assert page.paragraphs == paragraphs
    assert page.cells == cells and "1.82x" in cells and "~1.00x" not in cells  # single stream, tuned, steps=3
    assert any("python -m sweep query DIR" in p for p in page.paragraphs)
    assert not images and not [t for t, _ in page.tags if t in ("script", "img", "link", "iframe")]


CHART_TRACES = {  # the story sweep: 7 configurations (a baseline and 6 speculative) under 2 NCCL profiles
    "chart-frontier": 2 * (7 + 1),  # a line per configuration per panel, and each panel's frontier
    "chart-single_stream": 7,  # a bar series per configuration
    "chart-concurrency": 2 * 2 * 7,  # throughput and per-request speed, per panel
    "chart-speedup_vs_concurrency": 2 * 6 + 2,  # the speculative ones per panel, each panel's crossovers
    "chart-speedup_grid": 2 * 2,  # a heatmap for C=1 and for C=250, per panel
    "chart-nccl_effect": 7,  # tuned against default
    "chart-startup": 7,  # a series per phase
}

CHARTS_DRAWN = """(() => {
  const charts = [...document.querySelectorAll('.js-plotly-plot')];
  if (!charts.length || !charts.every(el => el._fullLayout && el.querySelector('.main-svg'))) return null;
  return charts.map(el => ({id: el.id, image: el.closest('.chart').dataset.image, traces: el.data.length,
    drawn: el.querySelectorAll('.scatterlayer .trace, .barlayer .trace, .heatmaplayer .hm').length}));
})()"""


def _center(selector: str, index: int = 0) -> str:
    """JS: scroll the element into view and return its centre in the viewport."""
    return f"""(() => {{ const el = document.querySelectorAll({selector!r})[{index}]; if (!el) return null;
      el.scrollIntoView({{block: 'center'}}); const r = el.getBoundingClientRect();
      return [r.x + r.width / 2, r.y + r.height / 2]; }})()"""


async def _click(page, selector: str, index: int = 0) -> None:
    x, y = await page.wait_for(_center(selector, index), 10, f"{selector} on the page")
    await page.mouse("mouseMoved", x, y)
    await page.mouse("mousePressed", x, y)
    await page.mouse("mouseReleased", x, y)


async def _in_browser(binary: str, html: Path, work: Path) -> dict:
    async with Browser(binary, work) as browser:
        page = await browser.open(html.as_uri())
        charts = await page.wait_for(CHARTS_DRAWN, 60, "every chart drawn")
        await page.screenshot(work / "report-screenshot.png")
        # hover a point of the frontier: its configuration, level and figures
        frontier = "#chart-frontier .scatterlayer .trace .points path"
        x, y = await page.wait_for(_center(frontier, 3), 10, "a point of the frontier chart")
        await page.mouse("mouseMoved", x, y)
        hover = await page.wait_for(
            "document.querySelector('#chart-frontier .hoverlayer .hovertext')?.textContent",
            10,
            "the frontier's hover box",
        )
        hover_box = await page.evaluate(
            "(() => { const r = document.getElementById('chart-frontier').getBoundingClientRect();"
            " return {x: r.x, y: r.y + window.scrollY, width: r.width, height: r.height}; })()"
        )
        await page.screenshot(work / "report-frontier-hover.png", clip=hover_box)
        # the legend toggles a configuration in every panel; a button shows one panel
        group = await page.evaluate("document.getElementById('chart-concurrency').data[0].legendgroup")
        await _click(page, "#chart-concurrency .legend .traces .legendtoggle", 0)
        hidden = await page.wait_for(
            f"""(() => {{ const d = document.getElementById('chart-concurrency').data;
            const g = d.filter(t => t.legendgroup === {group!r});
            return g.every(t => t.visible === 'legendonly') && g.length; }})()""",
            10,
            "the legend hid a configuration",
        )
        await _click(page, "#chart-concurrency .updatemenu-button", 2)  # all panels, nccl=default, nccl=tuned
        shown = await page.wait_for(
            """(() => { const d = document.getElementById('chart-concurrency').data;
            const off = d.filter(t => t.visible === false);
            return off.length && [...new Set(off.map(t => t.meta))]; })()""",
            10,
            "a button hid a panel",
        )
        return {
            "charts": charts,
            "hover": hover,
            "hidden": hidden,
            "shown": shown,
            "errors": page.errors,
            "requests": page.requests,
        }


@pytest.mark.slow  # draws the PNGs too, and Chromium loads 5 MB of page (~10 s on two busy cores)
@pytest.mark.skipif(chromium() is None, reason=MISSING)
def test_the_page_draws_every_chart_offline_in_chromium(tmp_path):
    """A dry run's report.html in headless Chromium with networking off: no console error, no request
    leaves the file, every chart of report.md drawn with its series, hover and toggles work."""
    directory = story_sweep(tmp_path / "k26_eagle-dryrun").write()
    assert run_report(report_args(str(directory), "--quiet")) == 0
    out = directory / "report"
    html = (out / "report.html").read_text()
    assert html.count("<script") == 1 + len(CHART_TRACES)  # plotly.js once, then one per chart
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", html)  # nothing loaded from elsewhere
    headings, paragraphs, cells, images = markdown_parts((out / "report.md").read_text())
    assert len(images) == 7
    page = Text()
    page.feed(html)
    assert (page.headings, page.paragraphs, page.cells) == (headings, paragraphs, cells)  # the charts add no text

    seen = asyncio.run(_in_browser(chromium() or "", out / "report.html", tmp_path / "browser"))
    # the screenshots stay under tmp_path/browser (pytest keeps its last runs' tmp dirs), out of the checkout
    assert seen["errors"] == []
    assert {u.split(":", 1)[0] for u in seen["requests"]} <= {"file", "data"}, seen["requests"]
    charts = {c["id"]: c for c in seen["charts"]}
    assert sorted(c["image"] for c in charts.values()) == sorted(images)  # every plot of the Markdown
    assert {i: c["traces"] for i, c in charts.items()} == CHART_TRACES
    assert {i: c["drawn"] for i, c in charts.items()} == CHART_TRACES  # each series drawn in the SVG
    assert re.search(r"drafter=\S+,nccl=default.*C=\d+.*per-user [\d.]+ tok/s.*tok/s per GPU", seen["hover"]), seen[
        "hover"
    ]
    assert seen["hidden"] == 4  # one configuration: 2 metrics x 2 panels
    assert seen["shown"] == ["nccl=default"]
    assert (tmp_path / "browser" / "report-screenshot.png").read_bytes().startswith(b"\x89PNG")
