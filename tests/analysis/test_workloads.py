"""Acceptance and speedup per workload (``sweep.analysis.workloads``, the report's section), on
results directories built with known numbers."""

from __future__ import annotations

import polars as pl

from sweep.analysis import workloads as wl
from sweep.analysis.findings import analyze
from sweep.analysis.report import build
from sweep.results import load
from tests.analysis.sweepdir import ROLES, SweepDir

CODING, CHAT = "sharegpt:/data/coding.json", "sharegpt-multiturn:/data/chat.json"


def two_workloads(tmp_path) -> SweepDir:
    """A workload axis: on coding the drafter accepts 3.1 and is 1.8x its baseline, on chat 2.2 and 1.2x."""
    sd = SweepDir(tmp_path, roles={**ROLES, "workload": "other"})
    for name, path, accept, speedup, at_8 in (("coding", CODING, 3.1, 1.8, 1.3), ("chat", CHAT, 2.2, 1.2, 0.9)):
        base = sd.point(
            drafter="none",
            nccl="default",
            workload=name,
            baseline=True,
            tok_s=[100, 100],
            levels={1: 100, 8: 700},
            requests_workload=path,
        )
        sd.point(
            drafter="k26_100k",
            steps="2",
            nccl="default",
            workload=name,
            baseline_of=base,
            tok_s=[100 * speedup] * 2,
            levels={1: 100 * speedup, 8: 700 * at_8},
            accept_length=accept,
            requests_workload=path,
        )
    sd.write()
    return sd


def test_each_configuration_lines_up_across_its_workloads(tmp_path):
    tables = load(two_workloads(tmp_path).path)
    f = analyze(tables)
    frame = wl.by_workload(tables, f.single, f.levels)
    rows = {r["workload"]: r for r in frame.iter_rows(named=True)}
    assert set(rows) == {"sharegpt:coding.json", "sharegpt-multiturn:chat.json"}
    assert {r["configuration"] for r in rows.values()} == {"drafter=k26_100k steps=2 nccl=default"}
    coding, chat = rows["sharegpt:coding.json"], rows["sharegpt-multiturn:chat.json"]
    assert (coding["accept_length"], chat["accept_length"]) == (3.1, 2.2)
    assert coding["accept_source"] == "server"
    assert abs(coding["speedup"] - 1.8) < 1e-9 and abs(chat["speedup"] - 1.2) < 1e-9
    assert abs(coding["throughput_ratio"] - 1.3) < 1e-9 and coding["concurrency"] == 8
    assert wl.lines(frame) == [
        "drafter=k26_100k steps=2 nccl=default: sharegpt-multiturn:chat.json accept 2.20, "
        "speedup 1.20x, 0.90x at C=8; sharegpt:coding.json accept 3.10, speedup 1.80x, 1.30x at C=8"
    ]


def test_the_report_has_the_section_only_where_there_are_several_workloads(tmp_path):
    report = build(two_workloads(tmp_path / "two").path, with_plots=False)
    md = report.markdown
    assert "Acceptance per workload" in report.html  # the page and the terminal render the same sections
    section = md.split("## Acceptance per workload", 1)[1].split("\n## ", 1)[0]
    cells = [
        [c.strip() for c in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("| drafter")
    ]
    assert ["drafter=k26_100k steps=2 nccl=default", "sharegpt:coding.json", "3.10", "1.80x", "1.30x at C=8"] in cells
    assert [
        "drafter=k26_100k steps=2 nccl=default",
        "sharegpt-multiturn:chat.json",
        "2.20",
        "1.20x",
        "0.90x at C=8",
    ] in cells
    assert "- drafter=k26_100k steps=2 nccl=default: sharegpt-multiturn:chat.json accept 2.20, speedup 1.20x" in section
    one = SweepDir(tmp_path / "one")
    base = one.point(drafter="none", nccl="default", baseline=True, tok_s=[100], requests_workload=CODING)
    one.point(
        drafter="d",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[150],
        accept_length=2.0,
        requests_workload=CODING,
    )
    one.write()
    assert "Acceptance per workload" not in build(one.write(), with_plots=False).markdown
    old = SweepDir(tmp_path / "old")  # results written before workloads: no workload column at all
    base = old.point(drafter="none", nccl="default", baseline=True, tok_s=[100])
    old.point(drafter="d", steps="2", nccl="default", baseline_of=base, tok_s=[150], accept_length=2.0)
    tables = load(old.write())
    assert (
        wl.point_workloads(tables) == {} and "Acceptance per workload" not in build(old.path, with_plots=False).markdown
    )


def _two_workloads(tmp_path):
    """A client-side workload axis (role benchmark): code is served 30 % faster than chat by the same
    setups; on each, the drafter is 1.5x its baseline at C=1 and 0.8x at C=64."""
    sd = SweepDir(tmp_path, roles={**ROLES, "workload": "benchmark"})
    for name, k in (("code", 1.3), ("chat", 1.0)):
        base = sd.point(
            drafter="none",
            nccl="default",
            workload=name,
            baseline=True,
            tok_s=[100 * k] * 3,
            levels={1: 100 * k, 8: 700 * k, 64: 3000 * k},
        )
        sd.point(
            drafter="d1",
            steps="2",
            nccl="default",
            workload=name,
            baseline_of=base,
            tok_s=[150 * k] * 3,
            levels={1: 150 * k, 8: 800 * k, 64: 2400 * k},
        )
    return load(sd.write())


def test_picks_are_made_within_each_workload_and_name_the_setup_without_it(tmp_path):
    """Two workloads are two traffic mixes on one server, never two setups: the best per level, the
    summary, the SLO picks rank within each, and name the setup without the workload."""
    from sweep.analysis import analyze, headlines
    from sweep.analysis.slo import parse_slo

    f = analyze(_two_workloads(tmp_path), slos=[parse_slo("any: tpot_p90<=10s")])
    best = f.best.sort("workload", "concurrency")
    assert best["workload"].to_list() == ["workload=chat"] * 3 + ["workload=code"] * 3
    assert best["label"].to_list()[:3] == ["drafter=d1,steps=2,nccl=default"] * 2 + ["drafter=none,nccl=default"]
    assert best["label"].to_list()[3:] == best["label"].to_list()[:3]
    assert not best["runner_up"].str.contains("workload").any()  # never another workload's point
    lines = headlines(f)
    assert not any(
        "workload=code" in line.split(": ", 1)[1] or "workload=chat" in line.split(": ", 1)[1] for line in lines
    )  # the workload leads a line, never names a setup in it
    for w in ("workload=chat", "workload=code"):
        mine = [line for line in lines if line.startswith(f"{w}: ")]
        assert any(line.startswith(f"{w}: SLO any") for line in mine)
        assert any(
            f"{w}: Single stream: 1 of 1 speculative configuration is faster than its baseline" in line for line in mine
        )
        assert any("the best there is drafter=none,nccl=default (a baseline)" in line for line in mine)
    picks = f.slo_table.filter(pl.col("rank") == 1)
    assert sorted(picks["workload"].to_list()) == ["workload=chat", "workload=code"]
    assert f.fastest.height == 2 and not f.fastest["runner_up"].str.contains("workload").any()
    for (panel,), g in f.frontier.group_by("panel"):  # a frontier per workload, never one across two
        workload = panel.split(" ")[0]  # then the NCCL profile, the default panels
        assert workload in ("workload=chat", "workload=code") and g["label"].str.contains(workload).all()


def test_the_summary_gives_the_best_per_workload(tmp_path):
    from sweep.api import SweepResult

    _two_workloads(tmp_path)
    summary = SweepResult(experiment=None, mode="local", path=tmp_path, plan=None, points=[]).summary()  # type: ignore[arg-type]
    assert summary.error is None
    assert [(b.workload, b.concurrency) for b in summary.best] == [
        ("workload=chat", 1),
        ("workload=chat", 64),
        ("workload=code", 1),
        ("workload=code", 64),
    ]
    text = str(summary)
    assert "best at workload=code, C=64: drafter=none,nccl=default (a baseline), " in text
    assert "vs its baseline" not in text.split("C=64: ")[1].split("\n")[0]  # not "(baseline) vs its baseline"
    assert "best at workload=code, C=1: drafter=d1,steps=2,nccl=default" in text and "(faster)" in text


def test_a_client_side_axis_is_known_by_its_recorded_role_not_its_name(tmp_path):
    """An axis named 'mix' whose role is benchmark chooses the workload as surely as one named workload."""
    sd = SweepDir(tmp_path, roles={**ROLES, "mix": "benchmark"})
    for name, path in (("a", CODING), ("b", CHAT)):
        base = sd.point(
            drafter="none",
            nccl="default",
            mix=name,
            baseline=True,
            tok_s=[100, 100],
            levels={1: 100, 8: 700},
            requests_workload=path,
        )
        sd.point(
            drafter="d1",
            steps="2",
            nccl="default",
            mix=name,
            baseline_of=base,
            tok_s=[150, 150],
            levels={1: 150, 8: 800},
            accept_length=2.5,
            requests_workload=path,
        )
    tables = load(sd.write())
    f = analyze(tables)
    assert set(wl.by_workload(tables, f.single, f.levels)["configuration"]) == {"drafter=d1 steps=2 nccl=default"}
    assert sorted(f.best["workload"].unique()) == ["mix=a", "mix=b"] and not f.best["label"].str.contains("mix").any()


def test_todays_directory_knows_the_workload_axis_by_its_role_alone(tmp_path):
    """A directory written with launch ids records the role benchmark of every client-side axis: an
    axis named 'workload' of another role (it sets server flags too: two setups) is part of the
    configuration there; in a directory written before that role (two_workloads: no launch_id) its
    name still says it chose the workload."""
    sd = SweepDir(tmp_path, roles={**ROLES, "workload": "other"})
    for name, path in (("coding", CODING), ("chat", CHAT)):
        base = sd.point(
            drafter="none",
            nccl="default",
            workload=name,
            baseline=True,
            tok_s=[100, 100],
            levels={1: 100, 8: 700},
            requests_workload=path,
            launch_id=f"base-{name}",
        )
        sd.point(
            drafter="d1",
            steps="2",
            nccl="default",
            workload=name,
            baseline_of=base,
            tok_s=[150, 150],
            levels={1: 150, 8: 800},
            accept_length=2.5,
            requests_workload=path,
            launch_id=f"d1-{name}",
        )
    tables = load(sd.write())
    f = analyze(tables)
    assert set(wl.by_workload(tables, f.single, f.levels)["configuration"]) == {
        "drafter=d1 steps=2 nccl=default workload=coding",
        "drafter=d1 steps=2 nccl=default workload=chat",
    }
    old = load(two_workloads(tmp_path / "old").path)
    f = analyze(old)
    assert set(wl.by_workload(old, f.single, f.levels)["configuration"]) == {"drafter=k26_100k steps=2 nccl=default"}
