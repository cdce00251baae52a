"""The throughput-interactivity frontier: which points are on it, per panel, per GPU or per host,
and its plot and report section."""

from __future__ import annotations

import polars as pl
import pytest

from sweep.analysis.frontier import frontier_only, frontier_spans, frontier_table
from sweep.analysis.plots import plot_frontier
from sweep.analysis.report import build
from sweep.analysis.speedups import level_speedups
from sweep.core.errors import ConfigError
from sweep.results import load
from tests.analysis.sweepdir import SweepDir, story_sweep

PNG = b"\x89PNG\r\n\x1a\n"


def small(tmp_path, **baseline_extra) -> SweepDir:
    """A drafter faster per user at C=1 and 2 but serving less from C=2 on, under two profiles."""
    sd = SweepDir(tmp_path)
    for nccl, lift in (("default", 1.0), ("tuned", 1.1)):
        base = sd.point(
            drafter="none",
            nccl=nccl,
            baseline=True,
            tok_s=[100],
            levels={c: v * lift for c, v in {1: 100, 2: 180, 4: 320}.items()},
            jitter=0.0,
            **baseline_extra,
        )
        sd.point(
            drafter="d1",
            steps="2",
            nccl=nccl,
            baseline_of=base,
            tok_s=[150],
            levels={c: v * lift for c, v in {1: 150, 2: 170, 4: 200}.items()},
            jitter=0.0,
        )
    return sd


def table(directory, **kw) -> pl.DataFrame:
    tables = load(directory)
    return frontier_table(tables, level_speedups(tables), **kw)


def test_the_pareto_frontier_per_nccl_profile(tmp_path):
    t = table(small(tmp_path).write())
    assert sorted(t["panel"].unique()) == ["nccl=default", "nccl=tuned"]
    on = frontier_only(t).filter(pl.col("panel") == "nccl=default")
    # fastest per user first: the drafter at C=1 (150 tok/s per user), then the baseline at C=1 (100)
    # serves less per GPU than the drafter at C=2 (85 per user, 170 tok/s): off; the baseline at C=2
    # (90 per user, 180) and C=4 (80, 320) are on
    assert on.select("label", "concurrency").rows() == [
        ("drafter=d1,steps=2,nccl=default", 1),
        ("drafter=none,nccl=default", 2),
        ("drafter=none,nccl=default", 4),
    ]
    assert on["frontier_rank"].to_list() == [1, 2, 3]
    row = t.filter((pl.col("label") == "drafter=none,nccl=default") & (pl.col("concurrency") == 4)).row(0, named=True)
    assert row["tok_s_gpu"] == 320 / 8 and row["user_tok_s"] == 80 and row["per"] == "GPU"
    off = t.filter(~pl.col("on_frontier"))
    assert set(off.select("label", "concurrency").rows()) >= {
        ("drafter=d1,steps=2,nccl=default", 2),
        ("drafter=d1,steps=2,nccl=default", 4),
        ("drafter=none,nccl=default", 1),
    }
    spans = frontier_spans(t).filter(pl.col("panel") == "nccl=default")
    assert spans.select("label", "c_from", "c_to").rows() == [
        ("drafter=d1,steps=2,nccl=default", 1, 1),
        ("drafter=none,nccl=default", 2, 4),
    ]


def test_panels_by_any_axis_or_none(tmp_path):
    directory = small(tmp_path).write()
    by_drafter = table(directory, by="drafter")
    assert sorted(by_drafter["panel"].unique()) == ["drafter=d1", "drafter=none"]
    one = table(directory, by="all")
    assert one["panel"].unique().to_list() == [""]
    # across both profiles, the tuned points dominate the default ones
    assert (frontier_only(one)["profile"] == "nccl=tuned").all()
    steps = table(directory, by="steps")  # baselines have no steps: a panel of their own
    assert sorted(steps["panel"].unique()) == ["steps=(none)", "steps=2"]
    with pytest.raises(ConfigError, match="'model' is not an axis") as e:
        table(directory, by="model")
    assert "drafter, steps, nccl" in e.value.fix  # the grid's order


def test_points_without_gpus_are_counted_per_host(tmp_path):
    t = table(small(tmp_path, gpu_count=0).write())
    base = t.filter(pl.col("baseline") & (pl.col("concurrency") == 4) & (pl.col("profile") == "nccl=default"))
    assert base.row(0, named=True)["per"] == "host" and base["tok_s_gpu"][0] == 320
    assert set(t.filter(~pl.col("baseline"))["per"]) == {"GPU"}


def test_the_plot_and_the_report_section(tmp_path):
    directory = story_sweep(tmp_path / "s", dry_run=False).write()
    t = table(directory)
    assert plot_frontier(t, tmp_path / "f.png").read_bytes().startswith(PNG)
    assert plot_frontier(t.clear(), tmp_path / "none.png") is None
    report = build(directory, with_plots=False, slos=[])
    md = report.markdown
    assert "## Throughput-interactivity frontier" in md
    assert "Tokens counted: output (completion) tokens only, prompt tokens not; per GPU" in md
    section = md.split("## Throughput-interactivity frontier")[1].split("\n## ")[0]
    # speculation owns the frontier at high per-user speed, the baseline at saturation
    tuned = next(line for line in section.splitlines() if line.startswith("- nccl=tuned"))
    assert tuned.index("drafter=k26_300k") < tuned.index("drafter=none,nccl=tuned (baseline)")
    assert tuned.endswith("-250).")


SERVER = ["python", "-m", "sglang.launch_server", "--model-path", "/models/m"]


@pytest.mark.parametrize(
    "flags, gpus",
    [
        (["--tp-size", "4"], 4),  # TP4 on an 8-GPU host: 4 GPUs, not the host's 8
        (["--tp-size=2", "--dp-size", "2"], 4),  # two data-parallel replicas of TP2
        (["--tp-size", "4", "--dp-size", "4", "--enable-dp-attention"], 4),  # attention DP inside the TP group
        (["--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"], 4),
        (["--tp-size", "16", "--nnodes", "2"], 16),  # one server over two 8-GPU hosts
        ([], 1),  # SGLang's default TP is 1
    ],
)
def test_per_gpu_divides_by_the_gpus_the_server_uses(tmp_path, flags, gpus):
    sd = SweepDir(tmp_path)
    sd.point(
        drafter="none",
        nccl="default",
        baseline=True,
        tok_s=[100],
        levels={1: 100, 4: 320},
        jitter=0.0,
        argv=SERVER + flags,
        gpu_count=8,
    )
    directory = sd.write()
    t = table(directory)
    row = t.filter(pl.col("concurrency") == 4).row(0, named=True)
    assert row["tok_s_gpu"] == pytest.approx(320 / gpus) and row["per"] == "GPU" and row["gpus"] == gpus
    from sweep.analysis.slo import parse_slo, slo_table

    slo = slo_table(load(directory), [parse_slo("s: tok_s_p10>=50")]).row(0, named=True)
    assert slo["tok_s_gpu"] == pytest.approx(320 / gpus)


def test_an_argv_with_no_server_flags_falls_back_to_the_hosts_gpus_and_says_so(tmp_path):
    sd = small(tmp_path)  # argv ["python"]: no --tp-size, no --model-path
    directory = sd.write()
    t = table(directory)
    assert set(t["gpus"]) == {8} and set(t["gpus_from"]) == {"host"}
    md = build(directory, with_plots=False, slos=[]).markdown
    section = md.split("## Throughput-interactivity frontier")[1].split("\n## ")[0]
    assert "the GPUs the server uses" in section and "names no parallelism" in section
    assert "drafter=none,nccl=default" in section.split("WARNING")[1]


def test_a_cpu_server_over_two_hosts_is_counted_per_host(tmp_path):
    t = table(small(tmp_path, gpu_count=0, argv=SERVER + ["--device", "cpu", "--nnodes", "2"]).write())
    base = t.filter(pl.col("baseline") & (pl.col("concurrency") == 4) & (pl.col("profile") == "nccl=default"))
    assert base.row(0, named=True)["per"] == "host" and base["tok_s_gpu"][0] == 320 / 2
