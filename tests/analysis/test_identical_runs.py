"""Two identical dry runs either name the same setup for every SLO, or both reports say on that line
that the pick is within noise of the runner-up (issue 23: a pick that flips between identical runs
is noise presented as a finding).

The experiment is two setups that are the same server (they differ only in an environment variable
the fake ignores), so which of them a run picks is pure noise. Slow: two sweeps on local Ray.
"""

from __future__ import annotations

import os

import polars as pl
import pytest

import sweep
from sweep.analysis import analyze
from sweep.analysis.slo import parse_slo
from tests.conftest import free_port
from tests.experiments import experiment, write

TWINS = {"values": {"a": {"env": {"SWEEP_TEST_TWIN": "a"}}, "b": {"env": {"SWEEP_TEST_TWIN": "b"}}}}


def _run(tmp_path, name: str) -> sweep.SweepResult:
    exp = experiment(
        name="twins",
        server={"port": free_port()},
        grid={"axes": {"twin": TWINS}},
        benchmark={"single_stream": {"runs": 2}, "concurrency": {"levels": [1, 2, 4, 8, 16], "rounds": 1}},
        dry_run={"hosts": 2})
    path = write(tmp_path / f"{name}.yaml", exp, results_dir=tmp_path / f"twins-{name}-{os.getpid()}")
    result = sweep.run(path, mode="dry-run", progress=False)
    assert result.ok, [(p.label, p.failure_reason) for p in result.failed]
    return result


def _slo_lines(markdown: str) -> dict[str, str]:
    summary = markdown.split("## Summary")[1].split("\n## ")[0]
    return {line.split()[2]: line for line in summary.splitlines() if line.startswith("- SLO ")}


@pytest.mark.slow
def test_two_identical_dry_runs_agree_or_both_say_within_noise(tmp_path):
    first, second = _run(tmp_path, "first"), _run(tmp_path, "second")
    # SLOs judged the same way on both: a per-user speed near the one at C=4 (where the curves are
    # steep, so the crossing is interpolated), and one every level meets (the throughput at the top)
    levels = first.findings().levels
    at4 = levels.filter(pl.col("concurrency") == 4)["per_request_tok_s"].median()
    slos = [f"per_user: tok_s_p10>={at4:.4g}", "loose: tpot_p90<=10s"]
    reports = [r.report(slos=slos) for r in (first, second)]
    lines = [_slo_lines(md) for md in reports]
    assert set(lines[0]) == set(lines[1]) == {"per_user", "loose"}, reports[0]
    for name in ("per_user", "loose"):
        a, b = lines[0][name], lines[1][name]
        print(f"{name}:\n  first:  {a}\n  second: {b}")
        assert "95% interval" in a and "95% interval" in b  # every pick carries its interval
        pick_a, pick_b = (line.split(": deploy ")[1].split(" ")[0].rstrip(",") for line in (a, b))
        if pick_a != pick_b:
            assert "is within noise of" in a and "is within noise of" in b, (a, b)
    # the frame the report renders says what its line says
    f = analyze(first.tables, slos=[parse_slo(s) for s in slos])
    for rec in f.slo_table.filter(pl.col("rank") == 1).iter_rows(named=True):
        line = lines[0][rec["slo"]]
        assert (f"{rec['label']} is within noise of" in line) == bool(rec["margin_within_noise"]), line
