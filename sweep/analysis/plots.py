"""The report's PNG plots (matplotlib, no display needed).

Every plot uses one colour scheme: a colour family per drafter, darker for later values of the
speculative shape (steps=1 light, steps=3 dark), so a configuration has the same colour in every
panel and plot; baselines are black and dashed. Panels split by NCCL profile share their axes, so
a lift from tuning shows as the same curve sitting higher.

Each ``plot_*`` function draws from frames of ``sweep.analysis.findings`` and returns the path
written, or None when there is nothing to draw (a partial sweep).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import cast

import numpy as np
import polars as pl
from matplotlib import colormaps
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter, NullLocator, ScalarFormatter

from sweep.analysis import labels
from sweep.analysis.frames import natural_key
from sweep.analysis.speedups import reference_profile

FAMILIES = ["Blues", "Oranges", "Greens", "Purples", "Reds", "YlOrBr", "PuRd", "Greys"]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
BASELINE = {"color": "black", "linestyle": "--", "linewidth": 2.4, "marker": "s", "zorder": 5}
DPI = 110


def styles(frame: pl.DataFrame) -> dict[str, dict]:
    """Line style of each configuration (key: the ``config`` column). The colour depends only on
    drafter and speculative shape, so it is the same in every panel (NCCL profile, model...)."""
    rows = frame.select("config", "baseline", "drafter", "spec").unique("config").rows(named=True)
    speculative = [r for r in rows if not r["baseline"]]
    drafters = sorted({r["drafter"] or "" for r in speculative}, key=natural_key)
    by_shape: dict[tuple[str, str], dict] = {}
    for d_index, drafter in enumerate(drafters):
        specs = sorted({r["spec"] for r in speculative if (r["drafter"] or "") == drafter}, key=natural_key)
        cmap = colormaps[FAMILIES[d_index % len(FAMILIES)]]
        for s_index, spec in enumerate(specs):
            shade = 0.55 if len(specs) == 1 else 0.4 + 0.55 * s_index / (len(specs) - 1)
            by_shape[(drafter, spec)] = {
                "color": cmap(shade),
                "marker": _MARKERS[s_index % len(_MARKERS)],
                "linewidth": 1.6,
                "markersize": 5,
            }
    return {r["config"]: dict(BASELINE) if r["baseline"] else by_shape[(r["drafter"] or "", r["spec"])] for r in rows}


def _panel_key() -> pl.Expr:
    """A panel per group (other axes: model, tp...) and NCCL profile."""
    return pl.concat_str("group", "profile", separator="  ").str.strip_chars()


def panel_keys(frame: pl.DataFrame) -> list[str]:
    return sorted(frame.select(key=_panel_key())["key"].unique().to_list(), key=natural_key)


def panel_of(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    return frame.filter(_panel_key() == key)


def _width(panels: int, per_panel: float = 5.0) -> float:
    """Figure width: the panels plus room for the legend on the right."""
    return max(10.0, 3.5 + per_panel * panels)


def _log_x(ax, levels: list[int], label: bool = True) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(levels))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(c) for c in levels])
    if label:
        ax.set_xlabel("concurrency (requests in flight)")
    ax.grid(True, alpha=0.3)


def _legend(fig: Figure, frame: pl.DataFrame, style: dict[str, dict]) -> None:
    """One legend for the figure, in report order, baselines named as such. Entries leave out the
    panel's own axes (group), so a configuration shown in several panels is listed once."""
    entries: dict[str, dict] = {}
    for config, group, baseline in (
        frame.sort("order").unique("config", maintain_order=True).select("config", "group", "baseline").rows()
    ):
        shown = set(group.split(",")) if group else set()
        name = ",".join(p for p in config.split(",") if p not in shown) or config
        entries.setdefault(f"{name}  (baseline)" if baseline else name, style[config])
    handles = [Line2D([], [], **s) for s in entries.values()]
    fig.legend(handles, list(entries), loc="outside right upper", fontsize=8, frameon=False)


def plot_concurrency(levels: pl.DataFrame, path: Path) -> Path | None:
    """Output throughput and per-request tok/s against concurrency; a column per NCCL profile."""
    data = levels.filter(pl.col("output_throughput").is_not_null())
    if data.is_empty():
        return None
    panels, style = panel_keys(data), styles(data)
    ticks = sorted(data["concurrency"].unique().to_list())
    metrics = [
        ("output_throughput", "output throughput (tok/s)"),
        ("per_request_tok_s", "per-request speed (tok/s, log scale)"),
    ]
    fig = Figure(figsize=(_width(len(panels)), 8.5), layout="constrained", dpi=DPI)
    axes = fig.subplots(2, len(panels), squeeze=False, sharex=True, sharey="row")
    for col, key in enumerate(panels):
        panel = panel_of(data, key)
        for row, (metric, title) in enumerate(metrics):
            ax = axes[row][col]
            for config, curve in panel.sort("concurrency").group_by("config", maintain_order=True):
                ax.plot(curve["concurrency"], curve[metric], **style[config[0]])
            _log_x(ax, ticks, label=row == 1)
            ax.set_title(f"{key or 'all points'}: {title.split(' (')[0]}", fontsize=10)
            if col == 0:
                ax.set_ylabel(title)
    axes[0][0].set_ylim(bottom=0)
    per_request = axes[1][0].yaxis
    axes[1][0].set_yscale("log")
    per_request.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    per_request.set_major_formatter(ScalarFormatter())
    per_request.set_minor_formatter(NullFormatter())
    _legend(fig, data, style)
    fig.suptitle("Throughput against concurrency (baselines: black dashed)", fontsize=12)
    fig.savefig(path)
    return path


def plot_speedup_curves(levels: pl.DataFrame, crossover: pl.DataFrame, path: Path) -> Path | None:
    """Output throughput relative to the matched baseline, against concurrency, with crossovers."""
    data = levels.filter(~pl.col("baseline") & pl.col("throughput_ratio").is_not_null())
    if data.is_empty():
        return None
    panels, style = panel_keys(data), styles(data)
    ticks = sorted(data["concurrency"].unique().to_list())
    # polars types a column's min and max as any Python literal; non-null ratios are floats
    top = max(1.1, cast(float, data["throughput_ratio"].max()) * 1.08)
    bottom = min(0.9, cast(float, data["throughput_ratio"].min()) * 0.92)
    fig = Figure(figsize=(_width(len(panels)), 4.8), layout="constrained", dpi=DPI)
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    est = dict(crossover.select("point_id", "crossover_est").iter_rows())
    for ax, key in zip(axes, panels):
        ax.axhspan(0, 1, color="#f4cccc", alpha=0.35, zorder=0)
        ax.axhline(1, color="black", linewidth=1)
        ax.text(ticks[0], 1, " baseline", va="bottom", fontsize=8)
        for (config, pid), curve in (
            panel_of(data, key).sort("concurrency").group_by("config", "point_id", maintain_order=True)
        ):
            ax.plot(curve["concurrency"], curve["throughput_ratio"], **style[config])
            if est.get(pid):
                ax.plot([est[pid]], [1], marker="|", markersize=14, color=style[config]["color"])
        _log_x(ax, ticks)
        ax.set_ylim(bottom, top)
        ax.set_title(f"{key or 'all points'}", fontsize=10)
    axes[0].set_ylabel("output throughput / baseline's\n(below 1 = slower than baseline)")
    _legend(fig, data, style)
    fig.suptitle("Speedup over the matched baseline against concurrency (| marks the crossover)", fontsize=12)
    fig.savefig(path)
    return path


def env_ratios(levels: pl.DataFrame, reference: str | None) -> pl.DataFrame | None:
    """The levels under every profile but ``reference``, with ``ratio``: the output throughput over the
    same configuration's under the reference profile at the same level; None when there is none."""
    if reference is None:  # no NCCL profile axis
        return None
    data = levels.filter(pl.col("output_throughput").is_not_null())
    ref = data.filter(pl.col("profile") == reference).select("config", "group", "concurrency", ref="output_throughput")
    data = (
        data.filter(pl.col("profile") != reference)
        .join(ref, on=["config", "group", "concurrency"], how="inner")
        .with_columns(ratio=pl.col("output_throughput") / pl.col("ref"))
    )
    return None if data.is_empty() else data


def plot_env_effect(levels: pl.DataFrame, path: Path, reference: str | None = None) -> Path | None:
    """Each configuration's output throughput under every other NCCL profile, relative to the
    reference profile, against concurrency (above 1 = the profile helps)."""
    reference = reference or reference_profile(levels["profile"].to_list())
    data = env_ratios(levels, reference)
    if data is None:
        return None
    style, ticks = styles(data), sorted(data["concurrency"].unique().to_list())
    panels = panel_keys(data)
    fig = Figure(figsize=(_width(len(panels)), 4.8), layout="constrained", dpi=DPI)
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, key in zip(axes, panels):
        ax.axhline(1, color="black", linewidth=1)
        for config, curve in panel_of(data, key).sort("concurrency").group_by("config", maintain_order=True):
            ax.plot(curve["concurrency"], curve["ratio"], **style[config[0]])
        _log_x(ax, ticks)
        ax.set_title(f"{key} against {reference}", fontsize=10)
    axes[0].set_ylabel("output throughput / same configuration\nunder the reference profile")
    _legend(fig, data, style)
    fig.suptitle("Effect of the NCCL profile on each configuration (above 1 = faster)", fontsize=12)
    fig.savefig(path)
    return path


def _grid_values(frame: pl.DataFrame, ratio: str) -> pl.DataFrame:
    return frame.filter(~pl.col("baseline")).select(
        "group", "profile", "drafter", "spec", "within_noise", "note", value=ratio
    )


def grid_rows(single: pl.DataFrame, levels: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """The speedup grid's rows: (title, the speculative points' group, profile, drafter, spec,
    within_noise, note and value) for single stream, then for the highest level measured."""
    rows: list[tuple[str, pl.DataFrame]] = []
    if single.filter(~pl.col("baseline")).height:
        rows.append(("single stream (C=1)", _grid_values(single, "speedup")))
    measured = levels.filter(~pl.col("baseline") & pl.col("throughput_ratio").is_not_null())
    if measured.height:
        top_c = cast(int, measured["concurrency"].max())
        rows.append(
            (
                f"C={top_c} (highest level), output throughput",
                _grid_values(levels.filter(pl.col("concurrency") == top_c), "throughput_ratio"),
            )
        )
    return rows


def grid_axes(values: pl.DataFrame) -> tuple[list[str], list[str]]:
    """The grid's drafters (rows; '' for none) and speculative shapes (columns), in natural order."""
    return (
        sorted({d or "" for d in values["drafter"].to_list()}, key=natural_key),
        sorted(set(values["spec"].to_list()), key=natural_key),
    )


def plot_speedup_grid(single: pl.DataFrame, levels: pl.DataFrame, path: Path) -> Path | None:
    """Speedup heatmaps, drafter x speculative shape, one panel per NCCL profile: single stream
    (C=1) on top, the highest concurrency level below. Faded cells are within noise."""
    rows = grid_rows(single, levels)
    if not rows:
        return None
    allv = pl.concat([r[1] for r in rows])
    panels = panel_keys(allv)
    drafters, specs = grid_axes(allv)
    finite = allv["value"].drop_nulls()
    spread = max(0.05, max(abs(math.log(v)) for v in finite) if finite.len() else 0.05)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=math.exp(-spread), vmax=math.exp(spread))
    cmap = colormaps["RdYlGn"]
    width = 1.8 + len(panels) * (1.2 + 1.1 * len(specs))
    fig = Figure(figsize=(width, 1.2 + len(rows) * (1.1 + 0.55 * len(drafters))), layout="constrained", dpi=DPI)
    axes = fig.subplots(len(rows), len(panels), squeeze=False)
    for r, (title, values) in enumerate(rows):
        for c, key in enumerate(panels):
            ax = axes[r][c]
            panel = panel_of(values, key)
            grid = np.full((len(drafters), len(specs)), np.nan)
            for cell in panel.iter_rows(named=True):
                i, j = drafters.index(cell["drafter"] or ""), specs.index(cell["spec"])
                grid[i, j] = cell["value"] if cell["value"] is not None else np.nan
                if cell["value"] is None:
                    text, color = (cell["note"] or "n/a").replace("point ", ""), "dimgray"
                else:
                    noisy = bool(cell["within_noise"])
                    text = f"{cell['value']:.2f}x" + ("\n(noise)" if noisy else "")
                    red, green, blue, _ = cmap(norm(cell["value"]))
                    dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.45  # white text on dark cells
                    color = "dimgray" if noisy else ("white" if dark else "black")
                ax.text(j, i, text, ha="center", va="center", fontsize=9, color=color)
            ax.set_facecolor("#eeeeee")  # not measured: grey, distinct from a neutral 1.0x
            ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto", alpha=np.where(np.isnan(grid), 0.0, 1.0))
            noisy_mask = np.zeros_like(grid)
            for cell in panel.iter_rows(named=True):
                if cell["within_noise"]:
                    noisy_mask[drafters.index(cell["drafter"] or ""), specs.index(cell["spec"])] = 1
            ax.imshow(np.where(noisy_mask == 1, 1.0, np.nan), cmap="Greys", vmin=0, vmax=1.5, aspect="auto", alpha=0.55)
            ax.set_xticks(range(len(specs)), specs, fontsize=9)
            ax.set_yticks(range(len(drafters)), [f"drafter {d}" if d else "-" for d in drafters], fontsize=9)
            ax.set_title(f"{key or 'all points'}\n{title}", fontsize=10)
    fig.colorbar(axes[0][0].images[0], ax=axes, label="speedup over matched baseline", shrink=0.8)
    fig.suptitle(
        "Speedup grid: drafter x speculative shape (green faster, red slower, grey = within noise)", fontsize=12
    )
    fig.savefig(path)
    return path


def plot_single_stream(single: pl.DataFrame, path: Path) -> Path | None:
    """Median single-stream tok/s per point (bar) with its min-max over runs, speedup written."""
    data = single.filter(pl.col("tok_s").is_not_null()).sort("order", descending=True)
    if data.is_empty():
        return None
    style = styles(data)
    fig = Figure(figsize=(10, 1.4 + 0.32 * data.height), layout="constrained", dpi=DPI)
    ax = fig.subplots()
    y = np.arange(data.height)
    colors = [style[c]["color"] for c in data["config"]]
    ax.barh(
        y,
        data["tok_s"],
        color=colors,
        alpha=0.85,
        hatch=["//" if b else "" for b in data["baseline"]],
        edgecolor="white",
    )
    err = np.vstack([(data["tok_s"] - data["tok_s_min"]).to_numpy(), (data["tok_s_max"] - data["tok_s"]).to_numpy()])
    ax.errorbar(data["tok_s"], y, xerr=err, fmt="none", ecolor="black", capsize=3, linewidth=1)
    for yi, row in enumerate(data.iter_rows(named=True)):
        if row["baseline"]:
            note = "baseline"
        elif row["speedup"] is None:
            note = row["note"] or ""
        else:
            note = f"{row['speedup']:.2f}x" + (" (within noise)" if row["within_noise"] else "")
        ax.text(row["tok_s_max"] or row["tok_s"], yi, f"  {note}", va="center", fontsize=8)
    ax.set_yticks(y, data["label"], fontsize=8)
    ax.set_xlabel("single-stream decode speed, tok/s (median over runs, whiskers min-max)")
    ax.set_xlim(0, cast(float, data["tok_s_max"].max()) * 1.3)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title("Single stream: speed per point and speedup over its matched baseline", fontsize=12)
    fig.savefig(path)
    return path


PHASE_COLORS = {
    "load_s": "#4e79a7",
    "kv_cache_s": "#9c755f",
    "capture_s": "#f28e2b",
    "draft_capture_s": "#e15759",
    "http_s": "#76b7b2",
    "ready_s": "#59a14f",
    "other_s": "#bab0ac",
}


def plot_startup(startup: pl.DataFrame, path: Path) -> Path | None:
    """Startup time per point, stacked by phase (where the minutes go)."""
    phases = list(PHASE_COLORS)
    data = startup.filter(pl.any_horizontal(pl.col(phases).is_not_null())).reverse()
    if data.is_empty():
        return None
    fig = Figure(figsize=(10, 1.6 + 0.32 * data.height), layout="constrained", dpi=DPI)
    ax = fig.subplots()
    y = np.arange(data.height)
    left = np.zeros(data.height)
    for phase in phases:
        width = data[phase].fill_null(0).to_numpy()
        ax.barh(y, width, left=left, color=PHASE_COLORS[phase], label=phase.removesuffix("_s"))
        left += width
    for yi, row in enumerate(data.iter_rows(named=True)):
        total = row["startup_s"]
        label = f"{total:.1f} s" if total is not None and total < 10 else f"{total or 0:.0f} s"
        ax.text(left[yi], yi, f"  {label}" if total is not None else f"  {row['status']}", va="center", fontsize=8)
    ax.set_yticks(y, data["label"], fontsize=8)
    ax.set_xlabel("seconds from launch to ready")
    ax.set_xlim(0, left.max() * 1.15 if left.max() > 0 else 1)
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(loc="outside lower center", ncols=len(phases), fontsize=8, frameon=False)
    ax.set_title("Startup phases per point", fontsize=12)
    fig.savefig(path)
    return path


def plot_frontier(frontier: pl.DataFrame, path: Path) -> Path | None:
    """Output tok/s per GPU against per-user speed, every configuration and level, a panel per
    NCCL profile (or axis); the Pareto frontier drawn over them, each point on it labelled with its
    configuration and concurrency."""
    data = frontier.filter(pl.col("user_tok_s") > 0)
    if data.is_empty():
        return None
    panels = sorted(data["panel"].unique().to_list(), key=natural_key)
    style = styles(data)
    fig = Figure(figsize=(_width(len(panels), 6.5), 6.2), layout="constrained", dpi=DPI)
    axes = fig.subplots(1, len(panels), squeeze=False, sharex=True, sharey=True)[0]
    per = "host" if (data["per"] == "host").all() else "GPU"
    fronts: list[tuple] = []  # (axes, its frontier rows): labelled once the layout is done
    for ax, key in zip(axes, panels):
        panel = data.filter(pl.col("panel") == key)
        for config, curve in panel.sort("concurrency").group_by("config", maintain_order=True):
            s = dict(style[config[0]])
            s.update(alpha=0.45, linewidth=1.0, markersize=4, zorder=2)
            ax.plot(curve["user_tok_s"], curve["tok_s_gpu"], **s)
        front = panel.filter("on_frontier").sort("user_tok_s")
        ax.plot(front["user_tok_s"], front["tok_s_gpu"], color="crimson", linewidth=2.2, alpha=0.8, zorder=3)
        for r in front.iter_rows(named=True):
            ax.plot(
                [r["user_tok_s"]],
                [r["tok_s_gpu"]],
                marker=style[r["config"]]["marker"],
                markersize=_FRONT_MARKER,
                color=style[r["config"]]["color"],
                markeredgecolor="crimson",
                markeredgewidth=1.5,
                zorder=4,
            )
        fronts.append((ax, front))
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("per-user speed, tok/s per request (output tokens / latency; log scale)")
        ax.grid(True, alpha=0.3)
        ax.set_title(key or "all points", fontsize=10)
    axes[0].set_ylabel(f"output tok/s per {per} (completion tokens only)")
    axes[0].set_ylim(bottom=0)
    _legend(fig, data, style)
    fig.suptitle(
        "Throughput-interactivity frontier: every configuration and level; red = the Pareto frontier (labelled)",
        fontsize=12,
    )
    fig.draw_without_rendering()  # the layout, so that the labels are placed where the points are drawn
    for ax, front in fronts:
        _label_frontier(ax, front, fig.dpi)
    fig.savefig(path)
    return path


_LABEL_SIZE = 7  # points
_FRONT_MARKER = 8  # points: a frontier point's marker


def frontier_label(r: dict) -> str:
    """A frontier point's label: its configuration (without what its panel's group already says) and C."""
    name = r["config"] + (" (baseline)" if r["baseline"] else "")
    group = set(r["group"].split(",")) if r.get("group") else set()
    return f"{','.join(p for p in name.split(',') if p not in group)} C={r['concurrency']}"


def _label_frontier(ax, front: pl.DataFrame, dpi: float) -> None:
    """Each frontier point's label, placed clear of the others and of the points (``labels.place``, in
    pixels of the drawn axes), a thin leader line to its point where it sits farther out."""
    rows = front.to_dicts()
    if not rows:
        return
    px = 72.0 / dpi  # points per pixel
    at = [(float(x), float(y)) for x, y in (ax.transData.transform((r["user_tok_s"], r["tok_s_gpu"])) for r in rows)]
    texts = [frontier_label(r) for r in rows]
    sizes = [(w / px, h / px) for w, h in (labels.text_size(t, _LABEL_SIZE) for t in texts)]
    marker = _FRONT_MARKER / 2 / px  # the frontier's markers, half their size in pixels
    x0, y0, x1, y1 = (float(v) for v in ax.bbox.extents)
    boxes = labels.place(at, sizes, bounds=(x0, y0, x1, y1), marker=marker)
    for r, (x, y), text, box in zip(rows, at, texts, boxes):
        far = labels.far((x, y), box, marker)
        ax.annotate(
            text,
            (r["user_tok_s"], r["tok_s_gpu"]),
            xytext=((box[0] - x) * px, (box[1] - y) * px),
            textcoords="offset points",
            ha="left",
            va="bottom",
            fontsize=_LABEL_SIZE,
            color="crimson",
            zorder=5,
            annotation_clip=False,
            in_layout=False,
            arrowprops=None
            if not far
            else dict(arrowstyle="-", color="crimson", linewidth=0.6, alpha=0.7, shrinkA=0, shrinkB=3),
        )
