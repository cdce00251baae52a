"""The files beside the tables (sweep.json, experiment.yaml, plan.json) read and written by
``sweep.results``."""

from __future__ import annotations

import json

import pytest

from sweep.core.errors import ResultsError
from sweep.results import meta
from sweep.results.writer import ResultsDir


def test_a_sweeps_files_round_trip_through_results_dir(tmp_path):
    rd = ResultsDir(tmp_path / "r", "e", "dry-run").open()
    rd.write_plan({"experiment": "e", "points": [{"id": "p1", "label": "a"}], "warnings": []})
    rd.write_experiment("name: e\nbenchmark:\n  slo:\n  - {name: s, percentile: 90, ttft_s: 2.0}\n  - not a mapping\n")
    assert meta.read_manifest(rd.path)["mode"] == "dry-run"
    assert meta.read_plan(rd.path)["points"] == [{"id": "p1", "label": "a"}]
    assert json.loads(meta.plan_path(rd.path).read_text())["experiment"] == "e"  # the file --plan --json prints
    assert meta.read_experiment(rd.path)["name"] == "e"
    assert meta.experiment_slos(rd.path) == [{"name": "s", "percentile": 90, "ttft_s": 2.0}]
    assert rd.log_path("p1") == meta.log_path(rd.path, "p1") == rd.path / "logs" / "p1.log"


@pytest.mark.parametrize(
    "plan, experiment",
    [
        (None, None),  # absent: a directory bench --out wrote
        ("{not json", "name: [unclosed"),
        ("[1, 2]", "- a list"),  # not an object / mapping
        ("{}", "benchmark: [1]"),  # a benchmark that is not a mapping
    ],
)
def test_absent_or_unreadable_plan_and_experiment_read_as_empty(tmp_path, plan, experiment):
    if plan is not None:
        meta.plan_path(tmp_path).write_text(plan)
        meta.experiment_path(tmp_path).write_text(experiment)
    assert meta.read_plan(tmp_path) == {}
    assert meta.experiment_slos(tmp_path) == []


def test_an_unreadable_manifest_names_the_file_and_the_fix(tmp_path):
    assert meta.read_manifest(tmp_path) is None
    meta.manifest_path(tmp_path).write_text("{broken")
    with pytest.raises(ResultsError, match="sweep.json is unreadable") as e:
        meta.read_manifest(tmp_path)
    assert "results_dir" in e.value.fix
    with pytest.raises(ResultsError, match="sweep.json is unreadable"):  # the writer refuses it the same way
        ResultsDir(tmp_path, "e", "real").check()
