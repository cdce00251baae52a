"""Points that never ran (pruned by the adaptive search) or ran no single stream (failed): the report's
header names the SGLang and GPU of the points that ran, and the single-stream table a '-' with why."""

from __future__ import annotations

from sweep.analysis import report
from tests.analysis.sweepdir import SweepDir


def test_pruned_and_failed_points_in_the_header_and_the_single_stream_table(tmp_path):
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100})
    sd.point(drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=[150, 150], levels={1: 150})
    sd.point(
        drafter="d1",
        steps="3",
        nccl="default",
        baseline_of=base,
        status="pruned",
        sglang_version="unknown",
        gpu_name="",
        host="",
        failure_phase="search",
        failure_reason="at best within noise",
    )
    sd.point(
        drafter="d1",
        steps="4",
        nccl="default",
        baseline_of=base,
        status="failed",
        failure_phase="capture",
        failure_reason="CUDA out of memory",
    )
    sections = report.build(sd.write(), with_plots=False).sections
    header = " ".join(sections[0].paragraphs)
    assert "SGLang 0.5.10;" in header and "unknown" not in header and "1 host;" in header
    single = next(s for s in sections if s.title == "Single stream").table
    assert single is not None
    runs = dict(zip(single["point"].to_list(), single["runs"].to_list()))
    minmax = dict(zip(single["point"].to_list(), single["min-max"].to_list()))
    assert (
        runs["drafter=d1,steps=3,nccl=default"] == "- (pruned)"
        and runs["drafter=d1,steps=4,nccl=default"] == "- (failed)"
    )
    assert runs["drafter=d1,steps=2,nccl=default"] == "2" and minmax["drafter=d1,steps=3,nccl=default"] == "-"
    assert all("None" not in v for row in single.iter_rows() for v in row if isinstance(v, str))
