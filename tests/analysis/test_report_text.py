"""The report's sentences count in the right number: '1 baseline', '1 host', '1 of 1 level'."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from sweep.analysis.report import build
from tests.analysis.sweepdir import SweepDir


def test_counts_of_one_take_the_singular(tmp_path):
    sd = SweepDir(tmp_path)
    pid = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100], levels={4: 320})
    directory = sd.write()
    path = directory / "levels" / f"{pid}.parquet"
    t = pq.read_table(path)
    for name, values in {
        "stopped_early": [True],
        "planned_requests": [8],
        "requests": [4],
        "throughput_precision": [0.015],
    }.items():
        t = t.set_column(t.schema.get_field_index(name), name, pa.array(values, t.schema.field(name).type))
    pq.write_table(t, path)
    md = build(directory, with_plots=False, slos=[]).markdown
    assert "of which 1 baseline." in md and "; 1 host;" in md
    assert "1 of 1 level ended once" in md
    assert "over 1 point:" in md
    for wrong in ("1 baselines", "1 hosts", "1 host(s)", "1 levels", "1 points"):
        assert wrong not in md, wrong


def test_a_drafter_of_one_position_is_said_so():
    import polars as pl

    from sweep.analysis.acceptance import flagged_lines

    frame = pl.DataFrame(
        {
            "label": ["drafter=d,steps=1", "drafter=d,steps=3"],
            "verdict": ["broken", "broken"],
            "accept_rate": [0.0, 0.0],
            "positions": [1, 3],
            "accept_length": [1.0, 1.0],
            "causes": ["c", "c"],
        }
    )
    one, three = flagged_lines(frame)
    assert "over 1 draft position, " in one and "over 3 draft positions, " in three
