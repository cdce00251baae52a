"""The frontier's labels: each beside its point, none overlapping another or a point, the same
placement every time (sweep/analysis/labels.py), in the PNG and the HTML chart."""

from __future__ import annotations

import pytest

from sweep.analysis import labels


def test_crowded_labels_are_placed_apart_and_deterministically():
    points = [(100 + 3 * i, 100 + 2 * i) for i in range(8)]  # eight points nearly on top of each other
    sizes = [labels.text_size(f"drafter=mine,steps={i} C={2**i}", 7) for i in range(8)]
    boxes = labels.place(points, sizes, bounds=(0, 0, 600, 400))
    assert labels.clear(boxes) and boxes == labels.place(points, sizes, bounds=(0, 0, 600, 400))
    for box in boxes:  # none covers a point's marker
        for px, py in points:
            assert not (box[0] < px < box[2] and box[1] < py < box[3])
    # a lone label sits right of its point
    (box,) = labels.place([(10, 10)], [(40, 9)], bounds=(0, 0, 600, 400))
    assert box[0] > 10 and box[1] < 10 < box[3]


def test_a_label_at_the_right_edge_goes_left():
    (box,) = labels.place([(590, 200)], [(80, 9)], bounds=(0, 0, 600, 400))
    assert box[2] <= 600 and box[2] < 590


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """The story sweep's frontier, analysed once for the module's tests (a polars frame: none changes it)."""
    from sweep.analysis.findings import analyze
    from sweep.results import load
    from tests.analysis.sweepdir import story_sweep

    return analyze(load(story_sweep(tmp_path_factory.mktemp("labels") / "story").write())).frontier


def test_the_png_labels_name_configuration_and_c_and_do_not_overlap(story):
    import polars as pl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    from sweep.analysis import plots

    front = story.filter(pl.col("on_frontier") & (pl.col("panel") == "nccl=default")).sort("user_tok_s")
    assert front.height >= 6
    fig = Figure(figsize=(6.5, 6.2), dpi=plots.DPI)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.plot(front["user_tok_s"], front["tok_s_gpu"])
    ax.set_xscale("log")
    fig.draw_without_rendering()
    plots._label_frontier(ax, front, fig.dpi)
    renderer = fig.canvas.get_renderer()
    texts = [t for t in ax.texts]
    assert [t.get_text() for t in texts] == [plots.frontier_label(r) for r in front.to_dicts()]
    assert all(" C=" in t.get_text() and "drafter=" in t.get_text() for t in texts)
    for t in texts:
        t.update_positions(renderer)
    boxes = [Text.get_window_extent(t, renderer) for t in texts]  # the text's own box (an Annotation's has its line)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_the_html_chart_labels_every_frontier_point_with_its_configuration_and_c(story):
    from sweep.analysis import charts

    fig = charts.chart_frontier(story)
    notes = [a for a in fig.layout.annotations if a.showarrow]  # the panels' titles are annotations too
    front = story.filter("on_frontier")
    assert len(notes) == front.height and all(" C=" in a.text and "drafter=" in a.text for a in notes)
    assert fig.data[-1].mode == "lines+markers"  # the bare 'C=..' text of the frontier trace is gone
