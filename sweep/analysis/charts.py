"""The report's interactive charts (plotly), one per PNG plot of ``sweep.analysis.plots``, for
report.html.

Each ``chart_*`` function draws from the same frames as its PNG, in the same colours (``plots.styles``)
and panels, and returns a plotly Figure, or None when there is nothing to draw (exactly when the PNG is
not drawn). Hovering a point shows its configuration, level and figures (formatted as the tables
format them); the legend toggles a configuration in every panel at once (one legend group per
configuration), and where a chart has several panels a row of buttons shows one panel or all.

The figures become HTML with ``fragment``; plotly.js itself goes into the page once (``script``),
inlined, so the page needs no network.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, cast

import plotly.graph_objects as go
import plotly.offline
import polars as pl
from matplotlib.colors import to_hex
from plotly.subplots import make_subplots

from sweep.analysis import labels, plots, render
from sweep.analysis.frames import natural_key
from sweep.analysis.speedups import reference_profile

_SYMBOLS = {
    "o": "circle",
    "s": "square",
    "^": "triangle-up",
    "D": "diamond",
    "v": "triangle-down",
    "P": "cross",
    "X": "x",
    "*": "star",
}
_TEMPLATE = "plotly_white"
CONFIG = {"displaylogo": False, "responsive": True}  # no link out of the page in the mode bar
_ALL_PANELS = "all panels"


def script() -> str:
    """plotly.js, to inline once in the page (the library ships it; no CDN)."""
    return plotly.offline.get_plotlyjs()


def fragment(fig: go.Figure, div_id: str) -> str:
    """The figure as a <div> and the script that draws it, plotly.js left out (see ``script``)."""
    return fig.to_html(include_plotlyjs=False, full_html=False, div_id=div_id, config=CONFIG)


def _line(style: dict, config: str, label: str, panel: str, baseline: bool, first: bool) -> dict[str, Any]:
    """A trace's look and legend entry: one legend group per configuration, listed once."""
    return dict(
        name=label + ("  (baseline)" if baseline else ""),
        legendgroup=config,
        showlegend=first,
        line=dict(color=to_hex(style["color"]), width=style["linewidth"] * 1.2, dash="dash" if baseline else "solid"),
        marker=dict(
            symbol=_SYMBOLS.get(style["marker"], "circle"),
            size=style.get("markersize", 5) + 3,
            color=to_hex(style["color"]),
        ),
        meta=panel,
    )


def _legend_names(frame: pl.DataFrame) -> dict[str, str]:
    """A legend name per configuration, leaving out the panel's own axes (as ``plots._legend``)."""
    out: dict[str, str] = {}
    for config, group in frame.select("config", "group").unique("config").rows():
        shown = set(group.split(",")) if group else set()
        out[config] = ",".join(p for p in config.split(",") if p not in shown) or config
    return out


def _hover(*lines: str) -> str:
    """A hover template; the trace's panel (its ``meta``) in the side box."""
    return "<br>".join(lines) + "<extra>%{meta}</extra>"


def _panel_buttons(fig: go.Figure, panels: list[str]) -> None:
    """With several panels, buttons that show one panel's traces (or all)."""
    if len(panels) < 2:
        return
    trace_panels = [t.meta for t in fig.data]
    buttons = [dict(label=_ALL_PANELS, method="restyle", args=[{"visible": [True] * len(trace_panels)}])]
    buttons += [
        dict(label=p or "all points", method="restyle", args=[{"visible": [tp in (p, None) for tp in trace_panels]}])
        for p in panels
    ]
    fig.update_layout(
        updatemenus=[
            dict(
                type="buttons",
                direction="right",
                buttons=buttons,
                showactive=True,
                x=0,
                xanchor="left",
                y=1.0,
                yanchor="bottom",
                pad=dict(b=40),
            )
        ]
    )


def _finish(fig: go.Figure, title: str, height: int, panels: list[str]) -> go.Figure:
    fig.update_layout(
        template=_TEMPLATE,
        title=dict(text=title, x=0, y=0.995, yanchor="top"),
        height=height,
        hovermode="closest",
        legend=dict(groupclick="togglegroup", font=dict(size=11)),
        margin=dict(t=110 if len(panels) > 1 else 60, l=70, r=20, b=60),
    )
    _panel_buttons(fig, panels)
    return fig


def _log_x(
    fig: go.Figure, ticks: list[int], title: str | None = "concurrency (requests in flight)", **where: int
) -> None:
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[str(c) for c in ticks], title_text=title, **where)


def _level_lines(
    fig: go.Figure,
    data: pl.DataFrame,
    panels: list[str],
    y: str,
    hover: Callable[[dict], list[str]],
    lines: Iterable[str],
    row: Callable[[str], int] | None = None,
    col: Callable[[str], int] | None = None,
    by: tuple[str, ...] = ("config",),
    seen: set[str] | None = None,
) -> None:
    """A line per configuration (per ``by``) in each panel, ``y`` against concurrency; a configuration
    in ``seen`` has its legend entry already (and is added to it)."""
    style, names = plots.styles(data), _legend_names(data)
    seen = set() if seen is None else seen
    column = col or (lambda p: panels.index(p) + 1)
    row = row or _const(1)
    for key in panels:
        for _, curve in plots.panel_of(data, key).sort("order", "concurrency").group_by(list(by), maintain_order=True):
            rows = curve.sort("concurrency").to_dicts()
            config, baseline = rows[0]["config"], rows[0]["baseline"]
            fig.add_trace(
                go.Scatter(
                    x=[r["concurrency"] for r in rows],
                    y=[r[y] for r in rows],
                    mode="lines+markers",
                    customdata=[hover(r) for r in rows],
                    hovertemplate=_hover(*lines),
                    **_line(style[config], config, names[config], key, baseline, config not in seen),
                ),
                row=row(key),
                col=column(key),
            )
            seen.add(config)


def _const(value: int) -> Callable[[str], int]:
    return lambda _: value


def _level_hover(r: dict) -> list[str]:
    return [
        r["label"] + (" (baseline)" if r["baseline"] else ""),
        str(r["concurrency"]),
        render.num(r["output_throughput"], 0),
        render.num(r["per_request_tok_s"], 1),
        "-" if r.get("throughput_ratio") is None else render.marked(r["throughput_ratio"], r["within_noise"]),
        r.get("verdict") or render.MISSING,
    ]


_LEVEL_LINES = (
    "<b>%{customdata[0]}</b>",
    "C=%{customdata[1]}",
    "output throughput %{customdata[2]} tok/s",
    "per-request speed %{customdata[3]} tok/s",
    "vs baseline %{customdata[4]} (%{customdata[5]})",
)


def chart_concurrency(levels: pl.DataFrame) -> go.Figure | None:
    """Output throughput (top) and per-request tok/s (below, log) against concurrency, a column per panel."""
    data = levels.filter(pl.col("output_throughput").is_not_null())
    if data.is_empty():
        return None
    panels, ticks = plots.panel_keys(data), sorted(data["concurrency"].unique().to_list())
    fig = make_subplots(
        rows=2,
        cols=len(panels),
        shared_xaxes=True,
        shared_yaxes=True,
        vertical_spacing=0.08,
        horizontal_spacing=0.04,
        subplot_titles=[
            f"{p or 'all points'}: {m}" for m in ("output throughput", "per-request speed") for p in panels
        ],
    )
    seen: set[str] = set()
    for row, metric in ((1, "output_throughput"), (2, "per_request_tok_s")):
        _level_lines(fig, data, panels, metric, _level_hover, _LEVEL_LINES, row=_const(row), seen=seen)
    _log_x(fig, ticks, None, row=1)
    _log_x(fig, ticks, row=2)
    fig.update_yaxes(rangemode="tozero", row=1)
    fig.update_yaxes(type="log", row=2)
    fig.update_yaxes(title_text="output throughput (tok/s)", row=1, col=1)
    fig.update_yaxes(title_text="per-request speed (tok/s, log)", row=2, col=1)
    return _finish(fig, "Throughput against concurrency (baselines: black dashed)", 820, panels)


def chart_speedup_curves(levels: pl.DataFrame, crossover: pl.DataFrame) -> go.Figure | None:
    """Output throughput over the matched baseline's against concurrency; crossings of 1 marked."""
    data = levels.filter(~pl.col("baseline") & pl.col("throughput_ratio").is_not_null())
    if data.is_empty():
        return None
    panels, ticks = plots.panel_keys(data), sorted(data["concurrency"].unique().to_list())
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=[p or "all points" for p in panels],
    )
    _level_lines(fig, data, panels, "throughput_ratio", _level_hover, _LEVEL_LINES, by=("config", "point_id"))
    est = (
        data.join(crossover.select("point_id", "crossover_est"), on="point_id", how="inner")
        .filter(pl.col("crossover_est").is_not_null())
        .unique("point_id", maintain_order=True)
    )
    style = plots.styles(data)
    for col, key in enumerate(panels, start=1):
        fig.add_hline(y=1, line=dict(color="black", width=1), row=1, col=col)
        fig.add_hrect(y0=0, y1=1, fillcolor="#f4cccc", opacity=0.35, line_width=0, layer="below", row=1, col=col)
        marks = plots.panel_of(est, key)
        if marks.height:
            fig.add_trace(
                go.Scatter(
                    x=marks["crossover_est"].to_list(),
                    y=[1.0] * marks.height,
                    mode="markers",
                    name="crosses 1 near C",
                    legendgroup="crossover",
                    showlegend=col == 1,
                    meta=key,
                    marker=dict(
                        symbol="line-ns-open",
                        size=18,
                        line=dict(width=2.5),
                        color=[to_hex(style[c]["color"]) for c in marks["config"]],
                    ),
                    customdata=[[r["label"], render.num(r["crossover_est"], 0)] for r in marks.iter_rows(named=True)],
                    hovertemplate=_hover("<b>%{customdata[0]}</b>", "crosses 1 near C=%{customdata[1]}"),
                ),
                row=1,
                col=col,
            )
    top = max(1.1, cast(float, data["throughput_ratio"].max()) * 1.08)
    bottom = min(0.9, cast(float, data["throughput_ratio"].min()) * 0.92)
    _log_x(fig, ticks)
    fig.update_yaxes(range=[bottom, top])
    fig.update_yaxes(title_text="output throughput / baseline's (below 1 = slower)", row=1, col=1)
    return _finish(fig, "Speedup over the matched baseline against concurrency (| marks the crossover)", 520, panels)


def chart_env_effect(levels: pl.DataFrame, reference: str | None = None) -> go.Figure | None:
    """Each configuration's output throughput under every other NCCL profile over the reference profile's."""
    reference = reference or reference_profile(levels["profile"].to_list())
    data = plots.env_ratios(levels, reference)
    if data is None:
        return None
    panels, ticks = plots.panel_keys(data), sorted(data["concurrency"].unique().to_list())
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=[f"{p} against {reference}" for p in panels],
    )

    def hover(r: dict) -> list[str]:
        return [
            r["label"] + (" (baseline)" if r["baseline"] else ""),
            str(r["concurrency"]),
            render.ratio(r["ratio"]),
            render.num(r["output_throughput"], 0),
            render.num(r["ref"], 0),
        ]

    _level_lines(
        fig,
        data,
        panels,
        "ratio",
        hover,
        (
            "<b>%{customdata[0]}</b>",
            "C=%{customdata[1]}",
            f"%{{customdata[2]}} of its throughput under {reference}",
            f"%{{customdata[3]}} tok/s against %{{customdata[4]}} tok/s under {reference}",
        ),
    )
    for col in range(1, len(panels) + 1):
        fig.add_hline(y=1, line=dict(color="black", width=1), row=1, col=col)
    _log_x(fig, ticks)
    fig.update_yaxes(title_text="output throughput / same configuration under the reference", row=1, col=1)
    return _finish(fig, "Effect of the NCCL profile on each configuration (above 1 = faster)", 520, panels)


def chart_speedup_grid(single: pl.DataFrame, levels: pl.DataFrame) -> go.Figure | None:
    """Speedup heatmaps, drafter by speculative shape, a column per panel: single stream, then the
    highest level. Cells within noise are marked '~' (as in the tables) and drawn faded."""
    rows = plots.grid_rows(single, levels)
    if not rows:
        return None
    allv = pl.concat([r[1] for r in rows])
    panels = plots.panel_keys(allv)
    drafters, specs = plots.grid_axes(allv)
    finite = allv["value"].drop_nulls()
    spread = max(0.05, max(abs(math.log(v)) for v in finite) if finite.len() else 0.05)
    fig = make_subplots(
        rows=len(rows),
        cols=len(panels),
        shared_yaxes=True,
        vertical_spacing=0.16,
        horizontal_spacing=0.05,
        subplot_titles=[f"{p or 'all points'}: {title}" for title, _ in rows for p in panels],
    )
    names = [f"drafter {d}" if d else "-" for d in drafters]
    for r, (title, values) in enumerate(rows, start=1):
        for c, key in enumerate(panels, start=1):
            z: list[list[float | None]] = [[None] * len(specs) for _ in drafters]
            text = [[""] * len(specs) for _ in drafters]
            for cell in plots.panel_of(values, key).iter_rows(named=True):
                i, j = drafters.index(cell["drafter"] or ""), specs.index(cell["spec"])
                v = cell["value"]
                # log scale, centred on 1.0x; within noise pulled halfway to neutral (faded)
                z[i][j] = None if v is None else math.log(v) * (0.5 if cell["within_noise"] else 1.0)
                text[i][j] = (
                    (cell["note"] or "n/a").replace("point ", "")
                    if v is None
                    else render.marked(v, cell["within_noise"])
                )
            fig.add_trace(
                go.Heatmap(
                    z=z,
                    x=specs,
                    y=names,
                    text=text,
                    texttemplate="%{text}",
                    colorscale="RdYlGn",
                    zmid=0,
                    zmin=-spread,
                    zmax=spread,
                    showscale=r == 1 and c == 1,
                    hoverongaps=False,
                    name=title,
                    meta=key,
                    colorbar=dict(
                        title="speedup",
                        tickvals=[-spread, 0, spread],
                        ticktext=[f"{math.exp(-spread):.2f}x", "1.00x", f"{math.exp(spread):.2f}x"],
                    ),
                    hovertemplate=_hover("<b>%{y}, %{x}</b>", f"{title}: %{{text}}"),
                ),
                row=r,
                col=c,
            )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(type="category")
    return _finish(
        fig,
        "Speedup grid: drafter x speculative shape (green faster, red slower, ~ = within noise)",
        220 + len(rows) * (90 + 45 * len(drafters)),
        panels,
    )


def chart_single_stream(single: pl.DataFrame) -> go.Figure | None:
    """Median single-stream tok/s per point (a bar), whiskers min-max, its speedup in the hover."""
    data = single.filter(pl.col("tok_s").is_not_null()).sort("order")
    if data.is_empty():
        return None
    style, names = plots.styles(data), _legend_names(data)
    fig = go.Figure()
    for (config,), group in data.group_by("config", maintain_order=True):
        rows = group.to_dicts()
        baseline = rows[0]["baseline"]
        look = _line(style[config], config, names[config], "", baseline, True)
        fig.add_trace(
            go.Bar(
                x=group["tok_s"].to_list(),
                y=group["label"].to_list(),
                orientation="h",
                name=look["name"],
                legendgroup=config,
                marker=dict(color=look["line"]["color"], pattern_shape="/" if baseline else ""),
                text=[
                    "baseline"
                    if r["baseline"]
                    else render.marked(r["speedup"], r["within_noise"])
                    if r["speedup"] is not None
                    else (r["note"] or "")
                    for r in rows
                ],
                textposition="outside",
                cliponaxis=False,
                error_x=dict(
                    type="data",
                    symmetric=False,
                    color="black",
                    array=[r["tok_s_max"] - r["tok_s"] for r in rows],
                    arrayminus=[r["tok_s"] - r["tok_s_min"] for r in rows],
                ),
                customdata=[
                    [
                        r["label"],
                        render.num(r["tok_s"], 1),
                        f"{render.num(r['tok_s_min'])}-{render.num(r['tok_s_max'])}",
                        "(is a baseline)" if r["baseline"] else render.marked(r["speedup"], r["within_noise"]),
                        render.interval(r["ci_low"], r["ci_high"]),
                        r["verdict"] or r["note"] or render.MISSING,
                        str(r["runs"]),
                    ]
                    for r in rows
                ],
                hovertemplate=_hover(
                    "<b>%{customdata[0]}</b>",
                    "C=1 (single stream), %{customdata[6]} runs",
                    "median %{customdata[1]} tok/s (min-max %{customdata[2]})",
                    "speedup %{customdata[3]}, 95% CI %{customdata[4]}",
                    "%{customdata[5]}",
                ),
            )
        )
    fig.update_yaxes(categoryorder="array", categoryarray=data["label"].to_list(), autorange="reversed")
    fig.update_xaxes(
        title_text="single-stream decode speed, tok/s (median over runs, whiskers min-max)", rangemode="tozero"
    )
    fig.update_layout(barmode="overlay")
    return _finish(
        fig, "Single stream: speed per point and speedup over its matched baseline", 160 + 26 * data.height, []
    )


def chart_startup(startup: pl.DataFrame) -> go.Figure | None:
    """Startup time per point, stacked by phase; a legend entry per phase."""
    phases = list(plots.PHASE_COLORS)
    data = startup.filter(pl.any_horizontal(pl.col(phases).is_not_null()))
    if data.is_empty():
        return None
    fig = go.Figure()
    labels = data["label"].to_list()
    for phase in phases:
        fig.add_trace(
            go.Bar(
                x=data[phase].to_list(),
                y=labels,
                orientation="h",
                name=phase.removesuffix("_s"),
                marker_color=plots.PHASE_COLORS[phase],
                customdata=[
                    [render.num(r[phase]), render.num(r["startup_s"]), r["status"]] for r in data.iter_rows(named=True)
                ],
                hovertemplate=_hover(
                    "<b>%{y}</b> (%{customdata[2]})",
                    f"{phase.removesuffix('_s')}: %{{customdata[0]}} s of %{{customdata[1]}} s",
                ),
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_yaxes(categoryorder="array", categoryarray=labels, autorange="reversed")
    fig.update_xaxes(title_text="seconds from launch to ready")
    return _finish(fig, "Startup phases per point", 180 + 26 * data.height, [])


_FRONTIER_HEIGHT = 600
_PANEL_PX = (
    700,
    430,
)  # the plotting area the labels are placed for, shared by the panels (a ~1000 px page less its legend; smaller: safer)
_LABEL_FONT = 10


def _frontier_annotations(front: list[dict], x_range: list[float], y_range: list[float], panels: int) -> list[dict]:
    """Each frontier point's label (its configuration and C: ``plots.frontier_label``) as a plotly
    annotation, placed clear of the others and of the points (``labels.place``, in the pixels of a
    panel ``_PANEL_PX`` wide shared by ``panels``), a thin line to its point."""
    if not front:
        return []
    w, h = _PANEL_PX[0] / max(panels, 1), _PANEL_PX[1]
    span_x, span_y = (x_range[1] - x_range[0]) or 1.0, (y_range[1] - y_range[0]) or 1.0
    at = [
        ((math.log10(r["user_tok_s"]) - x_range[0]) / span_x * w, (r["tok_s_gpu"] - y_range[0]) / span_y * h)
        for r in front
    ]
    texts = [plots.frontier_label(r) for r in front]
    boxes = labels.place(at, [labels.text_size(t, _LABEL_FONT) for t in texts], bounds=(0.0, 0.0, w, h), marker=6.0)
    out = []
    for r, (x, y), text, box in zip(front, at, texts, boxes):
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        out.append(
            dict(
                x=math.log10(r["user_tok_s"]),
                y=r["tok_s_gpu"],
                text=text,
                showarrow=True,
                ax=cx - x,
                ay=-(cy - y),  # pixels from the point to the label's centre (plotly: y down)
                arrowhead=0,
                arrowwidth=0.8,
                arrowcolor="crimson",
                standoff=6,
                font=dict(color="crimson", size=_LABEL_FONT),
            )
        )
    return out


def chart_frontier(frontier: pl.DataFrame) -> go.Figure | None:
    """Output tok/s per GPU against per-user speed, every configuration and level, a panel per NCCL
    profile (or axis), the Pareto frontier drawn over them."""
    data = frontier.filter(pl.col("user_tok_s") > 0)
    if data.is_empty():
        return None
    panels = sorted(data["panel"].unique().to_list(), key=natural_key)
    style, names = plots.styles(data), _legend_names(data)
    per = "host" if (data["per"] == "host").all() else "GPU"
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        shared_xaxes=True,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=[p or "all points" for p in panels],
    )
    # the axes' ranges set here, so that the labels can be placed where the points are drawn
    lo, hi = math.log10(cast(float, data["user_tok_s"].min())), math.log10(cast(float, data["user_tok_s"].max()))
    pad = max(hi - lo, 0.3) * 0.06
    x_range, y_range = [lo - pad, hi + pad], [0.0, cast(float, data["tok_s_gpu"].max()) * 1.08 or 1.0]

    def hover(r: dict) -> list[str]:
        return [
            r["label"] + (" (baseline)" if r["baseline"] else ""),
            str(r["concurrency"]),
            render.num(r["user_tok_s"], 1),
            f"{render.num(r['tok_s_gpu'], 1)} tok/s per {r['per']}",
            "on the frontier" if r["on_frontier"] else "not on the frontier",
        ]

    lines = (
        "<b>%{customdata[0]}</b>",
        "C=%{customdata[1]}",
        "per-user %{customdata[2]} tok/s",
        "output %{customdata[3]}",
        "%{customdata[4]}",
    )
    seen: set[str] = set()
    for col, key in enumerate(panels, start=1):
        panel = data.filter(pl.col("panel") == key)
        for (config,), curve in panel.sort("order", "concurrency").group_by("config", maintain_order=True):
            rows = curve.sort("concurrency").to_dicts()
            look = _line(style[config], config, names[config], key, rows[0]["baseline"], config not in seen)
            look["line"]["width"] = 1.2
            fig.add_trace(
                go.Scatter(
                    x=[r["user_tok_s"] for r in rows],
                    y=[r["tok_s_gpu"] for r in rows],
                    mode="lines+markers",
                    opacity=0.6,
                    customdata=[hover(r) for r in rows],
                    hovertemplate=_hover(*lines),
                    **look,
                ),
                row=1,
                col=col,
            )
            seen.add(config)
        front = panel.filter("on_frontier").sort("user_tok_s").to_dicts()
        fig.add_trace(
            go.Scatter(
                x=[r["user_tok_s"] for r in front],
                y=[r["tok_s_gpu"] for r in front],
                mode="lines+markers",
                name="Pareto frontier",
                legendgroup="frontier",
                showlegend=col == 1,
                meta=key,
                line=dict(color="crimson", width=3),
                marker=dict(size=10, color="rgba(0,0,0,0)", line=dict(color="crimson", width=2)),
                customdata=[hover(r) for r in front],
                hovertemplate=_hover(*lines),
            ),
            row=1,
            col=col,
        )
        for a in _frontier_annotations(front, x_range, y_range, len(panels)):
            fig.add_annotation(a, row=1, col=col)
    fig.update_xaxes(
        type="log", range=x_range, title_text="per-user speed, tok/s per request (output tokens / latency; log)"
    )
    fig.update_yaxes(range=y_range)
    fig.update_yaxes(title_text=f"output tok/s per {per} (completion tokens only)", row=1, col=1)
    return _finish(
        fig,
        "Throughput-interactivity frontier: every configuration and level; red = the Pareto frontier (labelled)",
        _FRONTIER_HEIGHT,
        panels,
    )
