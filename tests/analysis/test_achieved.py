"""Achieved concurrency: a level that kept far fewer requests in flight than its C is flagged, and
between two runs a level whose loads differ beyond the margin is not comparable (history)."""

from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq

from sweep.analysis import achieved, history
from sweep.results.schema import from_rows
from tests.analysis.test_history import D1, SETTINGS, nightly

CHANGED = {**SETTINGS, "server": {"model_path": "/models/m", "flags": {"max-running-requests": 32}}}


def _set_achieved(path, label_of: dict[str, dict[int, float]]):
    """Rewrite the run's levels files with these achieved concurrencies (label -> {C: achieved})."""
    for points_file in (path / "points").glob("*.parquet"):
        pid, label = pl.read_parquet(points_file).select("point_id", "label").row(0)
        file = path / "levels" / f"{pid}.parquet"
        if not file.exists():
            continue
        rows = pl.read_parquet(file).to_dicts()
        for r in rows:
            r["achieved_concurrency"] = label_of.get(label, {}).get(r["concurrency"], float(r["concurrency"]))
        pq.write_table(from_rows(rows, "levels"), file)
    return path


def test_a_short_level_is_flagged_and_named():
    levels = pl.DataFrame(
        {
            "label": ["a", "a", "b"],
            "order": [0, 0, 1],
            "concurrency": [1, 70, 70],
            "achieved_concurrency": [1.0, 31.0, 66.0],
        }
    )
    assert achieved.short_levels(levels)["achieved_concurrency"].to_list() == [31.0]
    assert achieved.cell(70, 31.0) == "31.0 (44%) short" and achieved.cell(70, 66.0) == "66.0"
    assert achieved.cell(0, 0.4) == "0.4" and achieved.cell(8, None) == "-"  # an open-loop level: no C to miss
    (line,) = achieved.note(levels)
    assert "a at C=70 kept 31.0 in flight (44%)" in line and "80%" in line and "b at" not in line


def test_history_does_not_judge_a_level_whose_load_differs_between_runs(tmp_path):
    """d1 at C=16 loses half of its throughput: a regression where both runs kept 16 in flight, not
    comparable where the second kept only 7."""
    _set_achieved(nightly(tmp_path / "same" / "n-a", 1000.0), {})  # every level at its C
    _set_achieved(nightly(tmp_path / "same" / "n-b", 5000.0, d1_c16=660.0, settings=CHANGED), {})
    _set_achieved(nightly(tmp_path / "short" / "n-a", 1000.0), {})
    _set_achieved(nightly(tmp_path / "short" / "n-b", 5000.0, d1_c16=660.0, settings=CHANGED), {D1: {16: 7.0}})

    def verdict(root):
        h = history.build([root])
        row = h.history.filter(
            (pl.col("label") == D1)
            & (pl.col("figure") == "output_throughput")
            & (pl.col("concurrency") == 16)
            & pl.col("run").str.ends_with("n-b")
        ).row(0, named=True)
        return row, str(h)

    same, _ = verdict(tmp_path / "same")
    assert same["verdict"] == "regression" and (same["achieved"], same["previous_achieved"]) == (16.0, 16.0)
    short, text = verdict(tmp_path / "short")
    assert short["verdict"] == achieved.NOT_COMPARABLE and (short["achieved"], short["previous_achieved"]) == (
        7.0,
        16.0,
    )
    assert "Not comparable: 2 level figures" in text and "16.0 -> 7.0 requests in flight" in text


def test_the_report_shows_each_levels_load_and_flags_the_short_one(tmp_path):
    from sweep.analysis import report as report_mod

    path = _set_achieved(nightly(tmp_path / "n-a", 1000.0), {D1: {16: 7.0}})
    sections = {s.title: s for s in report_mod.build(path, with_plots=False).sections}
    table = sections["Achieved concurrency"].table
    assert table is not None and table.filter(pl.col("point") == D1)["C=16"].to_list() == ["7.0 (44%) short"]
    assert table.filter(pl.col("point") != D1)["C=16"].to_list() == ["16.0"]
    assert "below 80% of its C" in sections["Achieved concurrency"].paragraphs[0]
    assert any(f"{D1} at C=16 kept 7.0 in flight (44%)" in p for p in sections["Concurrency"].paragraphs)
