"""Labels beside the points of a chart, none overlapping another label or a labelled point: the
frontier's (its configuration and C), in the PNG (sweep/analysis/plots.py) and the HTML chart
(sweep/analysis/charts.py).

Deterministic greedy placement in one unit on both axes (points of the figure, or pixels): each label
in turn takes the first candidate position around its point (right, left, above, below, the
diagonals, then the same farther out, where a leader line joins it to its point) whose box stays
inside the panel and clear of every label placed and every point's marker; where none is clear, the
candidate overlapping least. Pure: no plotting library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_Box = tuple[float, float, float, float]  # x0, y0, x1, y1

_GAP = 4.0  # between a point and its label, and between two labels
_RINGS = (1.0, 2.5, 4.5, 7.0)  # candidate distances, in (label height + GAP) steps; beyond the first, a leader line
_MARKER = 5.0  # half the size of a point's marker (kept clear of labels)
# directions tried at each distance, in order: right, left, above, below, then the diagonals
_DIRECTIONS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1))


def text_size(text: str, fontsize: float) -> tuple[float, float]:
    """A label's width and height in points (or pixels at one pixel a point): about 0.6 of the font
    size a character, which holds for the sans fonts of matplotlib and plotly."""
    return 0.6 * fontsize * len(text) + 2.0, 1.3 * fontsize


def _overlap(a: _Box, b: _Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _box(x: float, y: float, w: float, h: float, dx: int, dy: int, ring: float, marker: float) -> _Box:
    """The box of a label of size w x h in direction (dx, dy) from (x, y), ``ring`` steps out (the
    first just clear of the point's marker, of half-size ``marker``)."""
    d = marker + _GAP + (ring - 1) * (h + _GAP)
    left = x + d if dx > 0 else x - d - w if dx < 0 else x - w / 2
    bottom = y + d if dy > 0 else y - d - h if dy < 0 else y - h / 2
    return left, bottom, left + w, bottom + h


def place(
    points: Sequence[tuple[float, float]],
    sizes: Sequence[tuple[float, float]],
    bounds: _Box | None = None,
    marker: float = _MARKER,
) -> list[_Box]:
    """Each label's box (x0, y0, x1, y1), in the units of ``points`` (x right, y up), for labels of
    ``sizes`` (width, height) beside their ``points``, in order; inside ``bounds`` where it can be,
    clear of every point's marker (half-size ``marker``)."""
    markers = [(x - marker, y - marker, x + marker, y + marker) for x, y in points]
    placed: list[_Box] = []
    for (x, y), (w, h) in zip(points, sizes):
        best: tuple[float, _Box] | None = None
        for ring in _RINGS:
            for dx, dy in _DIRECTIONS:
                box = _box(x, y, w, h, dx, dy, ring, marker)
                padded = (box[0] - _GAP / 2, box[1] - _GAP / 2, box[2] + _GAP / 2, box[3] + _GAP / 2)
                cost = sum(_overlap(padded, o) for o in placed) + sum(_overlap(padded, m) for m in markers)
                if bounds is not None:
                    inside = _overlap(box, bounds)
                    cost += (w * h - inside) * 4  # outside the panel: worse than overlapping
                if best is None or cost < best[0]:
                    best = (cost, box)
                if cost == 0:
                    break
            if best is not None and best[0] == 0:
                break
        assert best is not None
        placed.append(best[1])
    return placed


def far(point: tuple[float, float], box: _Box, marker: float = _MARKER) -> bool:
    """Whether a label sits beyond the first ring around its point (then a leader line joins them)."""
    x, y = point
    return math.hypot(max(box[0] - x, 0, x - box[2]), max(box[1] - y, 0, y - box[3])) > marker + 2 * _GAP


def clear(boxes: Sequence[_Box]) -> bool:
    """Whether no two boxes overlap (what ``place`` achieves wherever there is room)."""
    return all(_overlap(a, b) == 0 for i, a in enumerate(boxes) for b in boxes[i + 1 :])
