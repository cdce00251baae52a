"""``report DIR --vs OTHER``: the same configurations in two sweeps side by side, matched by label.

``compare_table`` is the building block (one row per label, figure and level); the report shows
it as tables of changes, marking those within run-to-run noise (the same intervals as the
speedups, with OTHER's runs or requests in place of the baseline's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from sweep.analysis import noise, render
from sweep.analysis.findings import Findings, analyze
from sweep.analysis.frames import Tables, points_frame
from sweep.analysis.render import Section
from sweep.analysis.speedups import level_samples, single_samples
from sweep.results import FLAGS, server_flags

_LEVEL_FIGURES = ("output_throughput", "per_request_tok_s")


def figures(f: Findings) -> pl.DataFrame:
    """One sweep's figures as (label, figure, concurrency, point_id, value) rows: the rows ``compare_findings``
    matches (and ``sweep.analysis.history`` lists run by run)."""
    single = f.single.select("label", "point_id", "tok_s", "speedup", "accept_length")
    levels = f.levels.select(
        "label", "point_id", pl.col("concurrency").cast(pl.Int64), "output_throughput", "per_request_tok_s"
    )
    parts = [
        single.unpivot(index=["label", "point_id"], variable_name="figure").with_columns(
            concurrency=pl.lit(None, pl.Int64)
        ),
        levels.unpivot(index=["label", "point_id", "concurrency"], variable_name="figure"),
        f.startup.select("label", "point_id", "startup_s")
        .unpivot(index=["label", "point_id"], variable_name="figure")
        .with_columns(concurrency=pl.lit(None, pl.Int64)),
    ]
    return pl.concat([p.select("label", "figure", "concurrency", "point_id", "value") for p in parts])


def _prefixed(samples: pl.LazyFrame, prefix: str) -> pl.LazyFrame:
    return samples.with_columns(key=pl.lit(prefix) + pl.col("key"))


def compare_findings(this: Findings, other: Findings, this_tables: Tables, other_tables: Tables) -> pl.DataFrame:
    """``compare_table`` from already analysed sweeps (the report has them at hand). The samples of a
    dry run are at real speed, as its figures are (``analyze``), so a dry run compares with a real run."""
    a = figures(this).rename({"point_id": "this_id", "value": "this"})
    b = figures(other).rename({"point_id": "other_id", "value": "other"})
    joined = a.join(b, on=["label", "figure", "concurrency"], how="full", coalesce=True, nulls_equal=True).with_columns(
        change=pl.col("this") / pl.col("other") - 1
    )
    samples: dict[str, tuple[Callable[[Tables], pl.LazyFrame], noise.Stat, Callable[[str], pl.Expr]]] = {
        "tok_s": (single_samples, "median", lambda c: pl.col(c)),
        "per_request_tok_s": (level_samples, "mean", lambda c: pl.col(c) + "@" + pl.col("concurrency").cast(pl.String)),
    }
    cis = []
    for figure, (source, stat, key) in samples.items():
        rows = joined.filter((pl.col("figure") == figure) & pl.col("change").is_not_null())
        pairs = rows.select(
            "label", "concurrency", key=pl.lit("a:") + key("this_id"), base_key=pl.lit("b:") + key("other_id")
        )
        both = pl.concat([_prefixed(source(this_tables), "a:"), _prefixed(source(other_tables), "b:")])
        found = noise.ratio_intervals(pairs, both, stat=stat)
        cis.append(found.select("label", "concurrency", "ci_low", "ci_high", figure=pl.lit(figure)))
        if figure == "per_request_tok_s":  # a level has one throughput figure: the same requests' noise,
            # as a relative width around the throughput's own change (a change and its mark of one figure)
            ratios = rows.select("label", "concurrency", _pr=pl.col("this") / pl.col("other"))
            tp = joined.filter(pl.col("figure") == "output_throughput").select(
                "label", "concurrency", _tp=pl.col("this") / pl.col("other")
            )
            cis.append(
                found.join(ratios, on=["label", "concurrency"], how="left", nulls_equal=True)
                .join(tp, on=["label", "concurrency"], how="left", nulls_equal=True)
                .select(
                    "label",
                    "concurrency",
                    ci_low=noise.moved("ci_low", "_pr", "_tp"),
                    ci_high=noise.moved("ci_high", "_pr", "_tp"),
                    figure=pl.lit("output_throughput"),
                )
            )
    intervals = pl.concat(cis).select("label", "figure", "concurrency", "ci_low", "ci_high")
    found = joined.join(intervals, on=["label", "figure", "concurrency"], how="left", nulls_equal=True)
    # a level's figure in two runs is two levels, each measured once: judged by the one rule of every
    # verdict at a level (the requests' interval widened by the level-wide noise, at least its floor)
    at_level = pl.col("concurrency").is_not_null() & pl.col("figure").is_in(_LEVEL_FIGURES)
    sigma = max((s for s in (this.level_noise, other.level_noise) if s is not None), default=None)
    levels = noise.judged(
        found.filter(at_level).with_columns(_ratio=pl.col("this") / pl.col("other")), "_ratio", sigma
    ).drop("_ratio", "verdict")
    rest = found.filter(~at_level).with_columns(within_noise=noise.within_noise())
    return pl.concat([rest, levels.select(rest.columns)], how="vertical_relaxed").sort(
        "label", "figure", "concurrency", nulls_last=False
    )


def compare_table(this: Tables, other: Tables) -> pl.DataFrame:
    """Every figure of two sweeps matched by label.

    Columns: label, figure (tok_s, speedup, accept_length, output_throughput, per_request_tok_s,
    startup_s), concurrency (null for single-stream and startup figures), this_id, other_id,
    this, other, change (this / other - 1), ci_low/ci_high (interval of this / other, for tok_s,
    per_request_tok_s and output_throughput; a level's widened by the level-wide noise,
    ``noise.judged``), within_noise. A label present in one sweep only
    has nulls on the other side.
    """
    return compare_findings(analyze(this), analyze(other), this, other)


def _change_cell(change: float | None, within_noise: bool | None, this: float | None, other: float | None) -> str:
    """'+5.1%', '~+0.3%' within noise, 'only here' for a figure the other sweep lacks."""
    if change is None and this is not None and other is None:
        return "only here"
    return render.marked(change, within_noise, render.change)


_CHANGE = ("change", "within_noise", "this", "other")


def _servers(tables: Tables) -> dict[str, set[str]]:
    """What the sweep's servers are: the models they serve, their GPUs per server and the GPUs' name."""
    points = points_frame(tables)
    have = set(points.columns)
    out: dict[str, set[str]] = {"model": set(), "GPUs per server": set(), "GPU": set()}
    for r in points.select(*[c for c in (FLAGS, "gpu_name") if c in have]).iter_rows(named=True):
        flags = server_flags(r)
        if model := flags.model_path:
            out["model"].add(model)
        if (gpus := flags.gpus) is not None:
            out["GPUs per server"].add(str(gpus))
        if r.get("gpu_name"):
            out["GPU"].add(r["gpu_name"])
    return out


def server_differences(this: Tables, other: Tables) -> list[str]:
    """One warning per way the two sweeps' servers differ (model, GPUs per server, GPU): matched by
    label, ``drafter=none`` here and there would otherwise read as the same server."""
    a, b = _servers(this), _servers(other)
    return [
        f"Warning: the two sweeps differ in {what}: {', '.join(sorted(a[what]))} here, "
        f"{', '.join(sorted(b[what]))} there; points matched by label are different servers, and "
        "a change between them is not the change of a setting"
        for what in a
        if a[what] and b[what] and a[what] != b[what]
    ]


def compare_sections(
    this: Findings, other: Findings, this_tables: Tables, other_tables: Tables, this_dir: Path, other_dir: Path
) -> list[Section]:
    """The report's "compared with OTHER" sections."""
    table = compare_findings(this, other, this_tables, other_tables)
    labels_a = set(this.single["label"].to_list())
    labels_b = set(other.single["label"].to_list())
    status = (
        this.single.select("label", this_status="status")
        .join(other.single.select("label", other_status="status"), on="label", how="inner")
        .filter(pl.col("this_status") != pl.col("other_status"))
    )
    intro = [
        f"This sweep ({this_dir}) against {other_dir}, matched by label: "
        f"{len(labels_a & labels_b)} in both, {len(labels_a - labels_b)} only here, "
        f"{len(labels_b - labels_a)} only there. Changes are this / other - 1; "
        f"'{render.NOISE_MARK}' marks a change within run-to-run noise."
    ]
    if labels_a - labels_b:
        intro.append("Only here: " + ", ".join(sorted(labels_a - labels_b)))
    if labels_b - labels_a:
        intro.append("Only there: " + ", ".join(sorted(labels_b - labels_a)))
    for r in status.iter_rows(named=True):
        intro.append(f"Status changed: {r['label']}: {r['other_status']} -> {r['this_status']}")
    intro += server_differences(this_tables, other_tables)
    sections = [Section(f"Compared with {other_dir}", intro)]

    order = this.single.select("label", "order")
    fig = lambda name: table.filter(pl.col("figure") == name)  # noqa: E731
    single = (
        fig("tok_s")
        .select("label", "this", "other", "change", "within_noise")
        .join(fig("speedup").select("label", speedup_this="this", speedup_other="other"), on="label", how="left")
        .join(order, on="label", how="left")
        .sort("order", nulls_last=True)
    )
    if single.height:
        sections.append(
            Section(
                "Single stream, this sweep against the other",
                [],
                single.select(
                    point="label",
                    **{
                        "tok/s here": render.cell(render.num, "this"),
                        "tok/s there": render.cell(render.num, "other"),
                        "change": render.cell(_change_cell, *_CHANGE),
                        "speedup here": render.cell(render.ratio, "speedup_this"),
                        "speedup there": render.cell(render.ratio, "speedup_other"),
                    },
                ),
                level=3,
            )
        )
    levels = fig("output_throughput").filter(pl.col("concurrency").is_not_null())
    if levels.height:
        concurrencies = sorted(levels["concurrency"].unique().to_list())
        wide = (
            levels.with_columns(cell=render.cell(_change_cell, *_CHANGE), c=pl.format("C={}", "concurrency"))
            .pivot(on="c", index="label", values="cell")
            .join(order, on="label", how="left")
            .sort("order", nulls_last=True)
        )
        sections.append(
            Section(
                "Output throughput change per concurrency level",
                [],
                wide.select(pl.col("label").alias("point"), *[f"C={c}" for c in concurrencies]),
                level=3,
            )
        )
    startup = fig("startup_s").join(order, on="label", how="left").sort("order", nulls_last=True)
    if startup.height:
        sections.append(
            Section(
                "Startup time, this sweep against the other",
                [],
                startup.select(
                    point="label",
                    **{
                        "here s": render.cell(lambda v: render.num(v, 0), "this"),
                        "there s": render.cell(lambda v: render.num(v, 0), "other"),
                        "change": render.cell(render.change, "change"),
                    },
                ),
                level=3,
            )
        )
    return sections
