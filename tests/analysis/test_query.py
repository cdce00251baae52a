"""`query DIR "SQL"`: SQL over the tables and the report's views, in every output format."""

from __future__ import annotations

import argparse
import json
import re

import polars as pl
import pytest

from sweep.analysis.cli import add_query_arguments, run_query
from sweep.errors import SweepError
from sweep.results import load
from tests.analysis.sweepdir import SweepDir


@pytest.fixture
def directory(tmp_path):
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100, 4: 360})
    sd.point(drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=[150, 150],
             levels={1: 150, 4: 300}, status="ok")
    return sd.write()


def query(directory, sql, *extra):
    parser = argparse.ArgumentParser()
    add_query_arguments(parser)
    return run_query(parser.parse_args([str(directory), sql, *extra]))


def test_table_to_stdout(directory, capfd):
    assert query(directory, "SELECT concurrency, SUM(requests) AS n FROM levels GROUP BY concurrency "
                            "ORDER BY concurrency") == 0
    out = capfd.readouterr().out
    assert "concurrency" in out and re.search(r"4 +┆ +16 ", out)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_formats_to_a_file(directory, tmp_path, fmt):
    target = tmp_path / f"out.{fmt}"
    query(directory, "SELECT p.label, p.argv, s.speedup FROM points p JOIN speedup s USING (point_id) "
                     "ORDER BY p.label", "--format", fmt, "--output", str(target))
    if fmt == "csv":
        frame = pl.read_csv(target)
        assert frame["argv"].to_list() == ['["python"]', '["python"]']  # lists as JSON text
    elif fmt == "json":
        frame = pl.DataFrame(json.loads(target.read_text()))
    else:
        frame = pl.read_parquet(target)
    assert frame["label"].to_list() == ["drafter=d1,steps=2,nccl=default", "drafter=none,nccl=default"]
    assert frame["speedup"].to_list()[0] == pytest.approx(1.5)


def test_views_match_the_python_api(directory):
    from sweep.analysis import crossover, run_sql
    tables = load(directory)
    via_sql = run_sql(tables, "SELECT label, crossover FROM crossover")
    assert via_sql.to_dicts() == crossover(tables).select("label", "crossover").to_dicts()
    assert via_sql["crossover"].to_list() == [4]


def test_bad_query_names_the_tables(directory):
    with pytest.raises(SweepError, match="the query failed") as e:
        query(directory, "SELECT nope FROM points")
    assert "single_stream" in str(e.value) and "best_per_level" in str(e.value)
