"""`query DIR "SQL"`: SQL over the tables and the report's views, in every output format."""

from __future__ import annotations

import argparse
import json
import re

import polars as pl
import pytest

from sweep.analysis.cli import add_query_arguments, run_query
from sweep.core.errors import SweepError
from sweep.results import load
from tests.analysis.sweepdir import SweepDir


@pytest.fixture
def directory(tmp_path):
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100, 4: 360})
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[150, 150],
        levels={1: 150, 4: 300},
        status="ok",
    )
    return sd.write()


def query(directory, sql, *extra):
    parser = argparse.ArgumentParser()
    add_query_arguments(parser)
    return run_query(parser.parse_args([str(directory), sql, *extra]))


def test_table_to_stdout(directory, capfd):
    assert (
        query(directory, "SELECT concurrency, SUM(requests) AS n FROM levels GROUP BY concurrency ORDER BY concurrency")
        == 0
    )
    out = capfd.readouterr().out
    assert "concurrency" in out and re.search(r"4 +┆ +16 ", out)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_formats_to_a_file(directory, tmp_path, fmt):
    target = tmp_path / f"out.{fmt}"
    query(
        directory,
        "SELECT p.label, p.argv, s.speedup FROM points p JOIN speedup s USING (point_id) ORDER BY p.label",
        "--format",
        fmt,
        "--output",
        str(target),
    )
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


@pytest.fixture
def dry(tmp_path):
    """A dry run whose fake served 5x fast: 500 tok/s measured at C=1 is 100 at real speed."""
    sd = SweepDir(tmp_path / "dry", dry_run=True, bench_scale={"fake_speed": 5.0})
    base = sd.point(
        drafter="none", nccl="default", baseline=True, tok_s=[500, 500], levels={1: 500, 4: 1800}, jitter=0.0
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[750, 750],
        levels={1: 750, 4: 1500},
        jitter=0.0,
    )
    return sd.write()


def test_a_dry_runs_tables_and_views_are_at_real_speed_as_in_the_report(dry, capfd):
    assert query(dry, "SELECT concurrency, value FROM best_per_level ORDER BY concurrency", "--format", "csv") == 0
    captured = capfd.readouterr()
    assert pl.read_csv(captured.out.encode())["value"].to_list() == pytest.approx([150.0, 360.0])  # not 750, 1800
    assert "DRY RUN at 5x" in captured.err and "_measured" in captured.err
    query(
        dry,
        "SELECT tok_per_s, tok_per_s_measured, latency_s, latency_s_measured FROM single_stream ORDER BY tok_per_s",
        "--format",
        "csv",
    )
    frame = pl.read_csv(capfd.readouterr().out.encode())
    assert frame["tok_per_s"].to_list() == pytest.approx([100, 100, 150, 150])
    assert frame["tok_per_s_measured"].to_list() == pytest.approx([500, 500, 750, 750])  # the fake's, kept
    assert (frame["latency_s"] / frame["latency_s_measured"]).to_list() == pytest.approx([5.0] * 4)
    query(dry, "SELECT tok_s, speedup FROM speedup ORDER BY tok_s", "--format", "csv")
    frame = pl.read_csv(capfd.readouterr().out.encode())
    assert frame["tok_s"].to_list() == pytest.approx([100, 150]) and frame["speedup"][1] == pytest.approx(1.5)


def test_the_python_views_of_a_dry_run_are_at_real_speed_too(dry):
    from sweep.analysis import analyze, best_per_level, speedup_table

    tables = load(dry)
    assert best_per_level(tables)["value"].to_list() == pytest.approx([150.0, 360.0])
    assert speedup_table(tables)["tok_s"].to_list() == pytest.approx([100, 150])
    f = analyze(tables)  # scaling twice is a no-op, and still says what it did
    assert f.best["value"].to_list() == pytest.approx([150.0, 360.0]) and f.speed.scaled and f.speed.factor == 5


def test_a_real_run_is_queried_as_measured_and_says_nothing(directory, capfd):
    query(directory, "SELECT value FROM best_per_level ORDER BY concurrency", "--format", "csv")
    captured = capfd.readouterr()
    assert pl.read_csv(captured.out.encode())["value"].to_list() == [150, 360] and captured.err == ""
    with pytest.raises(SweepError, match="the query failed"):
        query(directory, "SELECT tok_per_s_measured FROM single_stream")


def test_a_table_in_a_pipe_or_a_file_is_never_squashed(directory, tmp_path, monkeypatch):
    """Without a terminal polars would fit the table into 100 columns, each label folded over lines."""
    from sweep.analysis import query

    monkeypatch.delenv("COLUMNS", raising=False)
    out = tmp_path / "wide.txt"
    frame = query.query(
        directory,
        "select label, status, point_id, baseline_id, experiment, sglang_version from points order by label",
        "table",
        out,
    )
    text = out.read_text()
    for label in frame["label"]:
        assert label in text, (label, text)


@pytest.mark.parametrize(
    "suffix,check",
    [
        (".parquet", pl.read_parquet),
        (".csv", pl.read_csv),
        (".jsonl", pl.read_ndjson),
        (".json", lambda p: pl.DataFrame(json.loads(p.read_text()))),
    ],
)
def test_the_output_suffix_names_the_format(directory, tmp_path, suffix, check):
    """``--output x.parquet`` without ``--format`` wrote a text table into a .parquet file."""
    target = tmp_path / f"out{suffix}"
    query(directory, "SELECT label FROM points ORDER BY label", "--output", str(target))
    assert check(target)["label"].to_list() == ["drafter=d1,steps=2,nccl=default", "drafter=none,nccl=default"]


def test_markdown_output(directory, tmp_path):
    target = tmp_path / "out.md"
    query(directory, "SELECT label FROM points ORDER BY label", "--output", str(target))
    assert target.read_text().splitlines()[:2] == [
        "| label                           |",
        "|---------------------------------|",
    ]


@pytest.mark.parametrize(
    "extra,said,fix",
    [
        (["--format", "xml"], "unknown output format 'xml'", "parquet"),
        (["--output", "x.xlsx"], "no output format is named .xlsx", ".parquet"),
        (["--format", "csv", "--output", "x.parquet"], "says parquet", ".csv"),
    ],
)
def test_an_unknown_or_contradicted_format_is_exit_7_before_anything_is_written(
    directory, tmp_path, extra, said, fix, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SweepError) as e:
        query(directory, "SELECT label FROM points", *extra)
    assert e.value.exit_code == 7 and said in e.value.message and fix in (e.value.fix or "")
    assert not list(tmp_path.glob("x.*"))


def test_format_xml_on_the_command_line_exits_7_not_argparses_2(directory):
    from tests.conftest import run_sweep_cli

    r = run_sweep_cli("query", str(directory), "SELECT 1", "--format", "xml")
    assert r.returncode == 7 and "table, csv, json, ndjson, parquet, markdown" in r.stderr


def test_an_output_that_cannot_be_written_is_exit_7_naming_it(directory, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SweepError) as e:
        query(directory, "SELECT label FROM points", "--output", str(tmp_path / "file" / "out.csv"))
    assert e.value.exit_code == 7 and str(tmp_path / "file" / "out.csv") in e.value.message
