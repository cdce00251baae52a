"""Acceptance and speedup per workload (``sweep.analysis.workloads``, the report's section), on
results directories built with known numbers."""

from __future__ import annotations

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
        base = sd.point(drafter="none", nccl="default", workload=name, baseline=True, tok_s=[100, 100],
                        levels={1: 100, 8: 700}, requests_workload=path)
        sd.point(drafter="k26_100k", steps="2", nccl="default", workload=name, baseline_of=base,
                 tok_s=[100 * speedup] * 2, levels={1: 100 * speedup, 8: 700 * at_8}, accept_length=accept,
                 requests_workload=path)
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
    assert wl.lines(frame) == ["drafter=k26_100k steps=2 nccl=default: sharegpt-multiturn:chat.json accept 2.20, "
                               "speedup 1.20x, 0.90x at C=8; sharegpt:coding.json accept 3.10, speedup 1.80x, 1.30x at C=8"]


def test_the_report_has_the_section_only_where_there_are_several_workloads(tmp_path):
    report = build(two_workloads(tmp_path / "two").path, with_plots=False)
    md = report.markdown
    assert "Acceptance per workload" in report.html  # the page and the terminal render the same sections
    section = md.split("## Acceptance per workload", 1)[1].split("\n## ", 1)[0]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("| drafter")]
    assert ["drafter=k26_100k steps=2 nccl=default", "sharegpt:coding.json", "3.10", "1.80x", "1.30x at C=8"] in cells
    assert ["drafter=k26_100k steps=2 nccl=default", "sharegpt-multiturn:chat.json", "2.20", "1.20x", "0.90x at C=8"] in cells
    assert "- drafter=k26_100k steps=2 nccl=default: sharegpt-multiturn:chat.json accept 2.20, speedup 1.20x" in section
    one = SweepDir(tmp_path / "one")
    base = one.point(drafter="none", nccl="default", baseline=True, tok_s=[100], requests_workload=CODING)
    one.point(drafter="d", steps="2", nccl="default", baseline_of=base, tok_s=[150], accept_length=2.0,
              requests_workload=CODING)
    one.write()
    assert "Acceptance per workload" not in build(one.write(), with_plots=False).markdown
    old = SweepDir(tmp_path / "old")  # results written before workloads: no workload column at all
    base = old.point(drafter="none", nccl="default", baseline=True, tok_s=[100])
    old.point(drafter="d", steps="2", nccl="default", baseline_of=base, tok_s=[150], accept_length=2.0)
    tables = load(old.write())
    assert wl.point_workloads(tables) == {} and "Acceptance per workload" not in build(old.path, with_plots=False).markdown

