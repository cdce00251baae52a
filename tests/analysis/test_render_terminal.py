"""The report on the terminal (sweep/analysis/render.py): titles, paragraphs, column names, cells and
plot paths printed as they are, never read as console markup."""

import io

import polars as pl
from rich.console import Console

from sweep.analysis.render import Section, terminal


def test_every_text_of_a_section_is_printed_as_it_is():
    section = Section(
        "best [b]per[/b] level",
        ["drafter=[d1] is ahead [/x]"],
        table=pl.DataFrame({"label [id]": ["drafter=[dim]none"], "x": ["[red]1.0x"]}),
        images=["[plot].png"],
    )
    buf = io.StringIO()
    terminal([section], Console(file=buf, width=200), image_dir="out/[r]/")
    out = buf.getvalue()
    for text in (
        "best [b]per[/b] level",
        "drafter=[d1] is ahead [/x]",
        "label [id]",
        "drafter=[dim]none",
        "[red]1.0x",
        "plot: out/[r]/[plot].png",
    ):
        assert text in out, text
