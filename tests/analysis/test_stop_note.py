"""The report says when the stop rule ended levels early, how many requests they sent and how
precisely they measured."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from sweep.analysis.report import build
from tests.analysis.sweepdir import SweepDir


def test_the_report_says_which_levels_stopped_early(tmp_path):
    sd = SweepDir(tmp_path)
    pid = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100], levels={1: 100, 4: 320})
    directory = sd.write()
    assert "Stop rule" not in build(directory, with_plots=False, slos=[]).markdown
    path = directory / "levels" / f"{pid}.parquet"
    t = pq.read_table(path)
    # C=4 stopped after its first wave of 4 (of 8 planned), measured to +-1.5 %
    columns = {
        "stopped_early": [False, True],
        "planned_requests": [2, 8],
        "requests": [2, 4],
        "throughput_precision": [None, 0.015],
    }
    for name, values in columns.items():
        t = t.set_column(t.schema.get_field_index(name), name, pa.array(values, t.schema.field(name).type))
    pq.write_table(t, path)
    md = build(directory, with_plots=False, slos=[]).markdown
    assert (
        "Stop rule (benchmark.concurrency.stop): 1 of 2 levels ended once their throughput was known well "
        "enough (median precision +-1.5%); the levels sent 60% of the 10 requests"
    ) in md
