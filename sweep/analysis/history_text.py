"""The words of ``python -m sweep history``: the ``History`` tables (``sweep.analysis.history``) as
report sections (``render``): the runs, and per series what changed between runs, which noise judged
them, the figures flagged, and each configuration's headline figures run by run."""

from __future__ import annotations

import time
from typing import cast

import polars as pl

from sweep.analysis import achieved, render
from sweep.analysis.history import FIGURE_NAMES, FLAGGED, MARGIN, History, shifts_of
from sweep.analysis.render import Section
from sweep.core import plural

SHOWN = 30  # flagged figures listed per pair of runs; the table has them all


def _when(epoch: float | None) -> str:
    return render.MISSING if epoch is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def _names(runs: pl.DataFrame) -> dict[str, str]:
    """Each run's short name: its directory's name, its path where two share a name."""
    names = runs["name"].to_list()
    return {r: n if names.count(n) == 1 else r for r, n in zip(runs["run"].to_list(), names)}


def _cell(value: float | None, change: float | None, verdict: str | None, digits: int) -> str:
    """'1,234', '1,234 ~+0.3%' (within noise: its interval, or the run-to-run noise), '987 -20.0% worse' (a
    regression), '... better', '1,234 +0.3%' (no interval to judge it by)."""
    text = render.num(value, digits)
    if value is None or change is None:
        return text + (" (new)" if verdict == "new" else "")
    mark = {
        "regression": " worse",
        "improvement": " better",
        "shared shift": " (shared)",
        achieved.NOT_COMPARABLE: " (other load)",
    }.get(verdict or "", "")
    return f"{text} {render.marked(change, verdict == 'within noise', render.change)}{mark}"


def _run_by_run(rows: pl.DataFrame, names: dict[str, str], order: list[str], digits: int) -> pl.DataFrame:
    """Rows: configurations (in the last run's order); columns: the runs; cells: ``_cell``."""
    cells = rows.with_columns(
        cell=render.cell(lambda v, c, verdict: _cell(v, c, verdict, digits), "value", "change", "verdict"),
        name=pl.col("run").replace_strict(names, return_dtype=pl.String),
    )
    wide = cells.filter(pl.col("value").is_not_null()).pivot(
        on="name", index="label", values="cell", aggregate_function="first"
    )
    rank = {label: i for i, label in enumerate(order)}
    wide = wide.with_columns(_o=pl.col("label").replace_strict(rank, default=len(rank), return_dtype=pl.Int64))
    columns = [n for n in names.values() if n in wide.columns]
    return wide.sort("_o", "label").select(pl.col("label").alias("configuration"), *columns)


def _order(history: pl.DataFrame, runs: list[str]) -> list[str]:
    """The labels in the report's order of the latest run that has them."""
    seen: list[str] = []
    for run in reversed(runs):
        mine = history.filter((pl.col("run") == run) & pl.col("order").is_not_null()).sort("order", "label")
        seen += [label for label in mine["label"].unique(maintain_order=True).to_list() if label not in seen]
    return seen


def _flag_line(r: dict, names: dict[str, str]) -> str:
    where = f" at C={r['concurrency']}" if r["concurrency"] is not None else ""
    interval = render.interval(r["ci_low"], r["ci_high"])
    own = ""
    if r.get("shared_shift") is not None and r["change"] is not None:  # judged against the shift
        own = f", {render.change((1 + r['change']) / (1 + r['shared_shift']) - 1)} relative to the shared shift"
    return (
        f"- {r['verdict']}: {r['label']}, {FIGURE_NAMES.get(r['figure'], r['figure'])}{where}: "
        f"{render.num(r['previous_value'])} -> {render.num(r['value'])} ({render.change(r['change'])}, "
        f"ratio interval {interval}{own}) in {names.get(r['run'], r['run'])}"
    )


def _load_lines(pair: pl.DataFrame, names: dict[str, str]) -> list[str]:
    """The level figures not judged because the two runs kept different loads in flight (``achieved``)."""
    apart = pair.filter(pl.col("verdict") == achieved.NOT_COMPARABLE)
    if not apart.height or "achieved" not in apart.columns:
        return []
    lines = [
        f"Not comparable: {plural(apart.height, 'level figure')} whose level kept a load in flight more than "
        f"{1 - achieved.SHORT:.0%} apart in the two runs (achieved concurrency), so the change is that of "
        "another load, not of the configuration:"
    ]
    for r in apart.sort(pl.col("change").abs(), descending=True, nulls_last=True).head(SHOWN).iter_rows(named=True):
        lines.append(
            f"- {r['label']}, {FIGURE_NAMES.get(r['figure'], r['figure'])} at C={r['concurrency']}: "
            f"{render.num(r['previous_value'])} -> {render.num(r['value'])} ({render.change(r['change'])}) "
            f"with {r['previous_achieved']:.1f} -> {r['achieved']:.1f} requests in flight, "
            f"in {names.get(r['run'], r['run'])}"
        )
    if apart.height > SHOWN:
        lines.append(f"- ... and {apart.height - SHOWN} more")
    return lines


def _shift_lines(pair: pl.DataFrame, changed: pl.DataFrame) -> list[str]:
    """One line per figure whose change every configuration shared (``shifts_of``), with what changed."""
    shifts = shifts_of(pair)
    what = ", ".join(_short(w) for w in changed["what"].to_list()) if changed.height else "nothing recorded"
    lines = []
    for figure in FLAGGED:
        rows = shifts.filter(pl.col("figure") == figure).sort("concurrency", nulls_last=False)
        if not rows.height:
            continue
        parts = [
            f"{r['shared_shift']:+.1%} (±{r['shift_spread']:.1%})"
            + (f" at C={r['concurrency']}" if r["concurrency"] is not None else "")
            for r in rows.iter_rows(named=True)
        ]
        lines.append(
            f"- {FIGURE_NAMES[figure]}: every configuration {', '.join(parts)}: a shared shift, "
            f"with {what} changed; each configuration is judged relative to it."
        )
    return lines


def _short(text: str | None, labels: int = 4) -> str:
    """A setting's value as shown: '(unset)' for none, a long list of labels cut after a few."""
    if text is None:
        return "(unset)"
    parts = text.split(", ")
    return text if len(parts) <= labels else ", ".join(parts[:labels]) + f" and {len(parts) - labels} more"


def _spread(frame: pl.DataFrame, column: str) -> str:
    """Per figure, the largest relative change of ``column`` over its configurations and levels: 'single-stream
    tok/s 4.9%, output tok/s 76% (C=2)'."""
    parts = []
    for figure in FLAGGED:
        rows = frame.filter((pl.col("figure") == figure) & pl.col(column).is_not_null())
        if rows.height:
            top = rows.sort(pl.col(column).abs(), descending=True).row(0, named=True)
            where = f" (C={top['concurrency']})" if top["concurrency"] is not None else ""
            size = abs(top[column])  # a relative change; past +100 %, as a factor (x8.5 reads better than 750 %)
            parts.append(f"{FIGURE_NAMES[figure]} {f'{size:.1%}' if size < 1 else f'x{1 + size:.1f}'}{where}")
    return ", ".join(parts) or render.MISSING


def _noise_line(pair: pl.DataFrame, names: dict[str, str]) -> str:
    """Which noise the pair's changes are judged by (``_run_noise``), in words."""
    sources = set(pair["noise_from"].drop_nulls().to_list())
    refs = pair["reference_runs"].max()
    median = (
        f"Each figure is compared with the median of the {refs} earlier runs with the previous run's settings; "
        if isinstance(refs, int) and refs > 1
        else ""
    )
    if "reference runs" in sources:
        return (
            median + "judged by the scatter those runs measured (largest over smallest, "
            f"x{MARGIN:g}) or the series' repeats, whichever is larger: up to {_spread(pair, 'run_noise')}; "
            "and by each figure's own interval."
        )
    if "repeats" in sources:
        return (
            median
            + ("judged" if median else "Judged")
            + " by the run-to-run noise the repeated runs of this series measured (the largest change of "
            f"each figure and level between them, x{MARGIN:g}): up to {_spread(pair, 'run_noise')}; and by "
            "each figure's own interval."
        )
    if "this repeat" in sources:
        moved = pair.filter(pl.col("figure").is_in(FLAGGED) & (pl.col("previous_value") > 0)).with_columns(
            lr=pl.col("value") / pl.col("previous_value") - 1
        )
        return (
            "A repeat (nothing recorded changed) with no other to judge it by: its changes are the run-to-run "
            f"noise the later runs are judged by, up to {_spread(moved, 'lr')} (largest change of each figure)."
        )
    return (
        "No repeated run in this series measures the run-to-run noise, so only each figure's own interval (the "
        "spread within each run) judges it, which misses what varies from one run to the next: run the same "
        "experiment twice to measure that."
    )


def _pair_lines(h: History, run: str, previous: str, names: dict[str, str]) -> list[str]:
    """What changed from ``previous`` to ``run``, and which figures moved beyond noise."""
    a, b = names[previous], names[run]
    changed = h.changes.filter((pl.col("run") == run) & (pl.col("previous") == previous))
    lines = [
        f"{a} -> {b}: " + ("no setting changed." if not changed.height else f"{plural(changed.height, 'change')}:")
    ]
    for c in changed.iter_rows(named=True):
        count = f" ({plural(c['points'], 'point')})" if c["points"] is not None else ""
        lines.append(f"- {c['what']}: {_short(c['before'])} -> {_short(c['after'])}{count}")
    pair = h.history.filter(pl.col("run") == run)
    lines.append(_noise_line(pair, names))
    lines += _shift_lines(pair, changed)
    flagged = pair.filter(pl.col("verdict").is_in(["regression", "improvement"]))
    regress = flagged.filter(pl.col("verdict") == "regression").height
    compared = pair.filter(
        pl.col("verdict").is_in(["regression", "improvement", "within noise", "shared shift"])
    ).height
    threshold = f", and by {h.min_change:.0%} or more" if h.min_change else ""
    lines.append(
        f"Figures of {b} against {a}: {plural(regress, 'regression')}, "
        f"{plural(flagged.height - regress, 'improvement')} "
        f"beyond noise{threshold}, of {compared} with an interval."
    )
    flagged = flagged.sort(pl.col("change").abs(), descending=True)
    lines += [_flag_line(r, names) for r in flagged.head(SHOWN).iter_rows(named=True)]
    lines += _load_lines(pair, names)
    if flagged.height > SHOWN:
        lines.append(
            f"- ... and {flagged.height - SHOWN} more (all of them: the history table, "
            'sweep.history(...).history or `python -m sweep query DIR... "SELECT * FROM history '
            "WHERE verdict = 'regression'\"`)"
        )
    return lines


def sections(h: History) -> list[Section]:
    names = _names(h.runs)
    runs = h.runs.sort("started_at", "run", nulls_last=True)
    picks = (
        h.picks.with_columns(text=pl.col("slo") + ": " + pl.coalesce("label", "reason", pl.lit(render.MISSING)))
        .group_by("run", maintain_order=True)
        .agg(pl.col("text").str.join("; "))
    )
    table = runs.join(picks, on="run", how="left").select(
        run=pl.col("run").replace_strict(names, return_dtype=pl.String),
        experiment="experiment",
        mode="mode",
        when=render.cell(
            lambda started, created: _when(started if started is not None else created), "started_at", "created_at"
        ),
        SGLang="sglang_version",
        points=render.cell(
            lambda n, planned: f"{n} of {planned}" if planned is not None and planned != n else str(n),
            "points",
            "planned",
        ),
        ok="ok",
        failed="failed",
        invalid="invalid",
        pruned="pruned",
        **{"picks per SLO": pl.col("text")},
    )
    out = [
        Section(
            f"Sweep history: {', '.join(map(str, h.roots))}",
            [
                f"{plural(h.runs.height, 'results directory', 'results directories')}, "
                f"{plural(h.runs.select('experiment', 'mode').unique().height, 'series', 'series')} "
                "(the runs of one experiment in one mode, in the order they ran)."
            ],
            level=1,
        ),
        Section(
            "Runs",
            [
                "Each results directory: when its first point started (the directory was made, "
                "before any), the SGLang its points ran, its points written (of those planned) by "
                "status, and the configuration to deploy for each SLO (as its report names it)."
            ],
            table,
        ),
    ]
    for (experiment, mode), g in h.history.group_by(["experiment", "mode"], maintain_order=True):
        order_runs = g.sort("step")["run"].unique(maintain_order=True).to_list()
        title = f"{experiment} ({mode}): {plural(len(order_runs), 'run')}"
        if len(order_runs) < 2:
            out.append(Section(title, ["One run: nothing to compare it with yet."]))
            continue
        paragraphs = [
            "Each run against the run before it, matched by label: the settings that differ, and every "
            "figure whose ratio to the previous run's lies beyond noise: outside its interval (the report's "
            "noise model, as `report --vs`) and beyond the run-to-run noise that repeated runs (nothing "
            f"recorded changed) measured. In the tables: '{render.NOISE_MARK}' marks a change within noise, "
            "'worse' and 'better' one beyond it."
        ]
        for prev, run in zip(order_runs, order_runs[1:]):
            paragraphs += _pair_lines(h, run, prev, names)
        out.append(Section(title, paragraphs))
        mine = {r: names[r] for r in order_runs}
        order = _order(g, order_runs)
        single = g.filter(pl.col("figure") == "tok_s")
        if single.height:
            out.append(
                Section(
                    f"{experiment} ({mode}): single-stream tok/s, run by run",
                    [],
                    _run_by_run(single, mine, order, 1),
                    level=3,
                )
            )
        levels = g.filter((pl.col("figure") == "output_throughput") & pl.col("concurrency").is_not_null())
        if levels.height:
            top = cast(int, levels["concurrency"].max())  # an Int64 column
            out.append(
                Section(
                    f"{experiment} ({mode}): output tok/s at C={top}, run by run",
                    [],
                    _run_by_run(levels.filter(pl.col("concurrency") == top), mine, order, 0),
                    level=3,
                )
            )
    return out
