"""sweep/results/writer.py: a results directory belongs to one experiment and mode, every file is
checked against the schema and written whole, the points row last, and a crash's leftovers are
cleaned up when the directory is opened again."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.core.errors import ResultsError
from sweep.results import load, store
from sweep.results.schema import TABLES, from_rows
from sweep.results.writer import MANIFEST, ResultsDir


def _point(pid: str, status: str = "ok") -> pa.Table:
    return from_rows(
        [
            {
                "point_id": pid,
                "label": f"drafter={pid}",
                "status": status,
                "param_roles": {"drafter": "drafter"},
                "env": {"NCCL_ALGO": "Ring"},
                "axis_drafter": pid,
                "reaped": {"killed": [], "foreign": [], "gpu_free": True, "port_free": True, "waited_s": 0.0},
            }
        ],
        "points",
    )


def _levels(pid: str) -> pa.Table:
    return from_rows([{"point_id": pid, "concurrency": 1, "requests": 2, "ok": 2}], "levels")


def test_open_creates_the_layout_and_the_manifest(tmp_path):
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    assert {p.name for p in rd.path.iterdir()} == {*TABLES, "logs", MANIFEST}
    meta = json.loads((rd.path / MANIFEST).read_text())
    assert (meta["experiment"], meta["mode"]) == ("exp", "dry-run")
    ResultsDir(tmp_path / "res", "exp", "dry-run").open()  # the same run again: adopted
    assert json.loads((rd.path / MANIFEST).read_text()) == meta


@pytest.mark.parametrize(
    "experiment, mode, match",
    [("other", "dry-run", "belongs to experiment 'exp'"), ("exp", "real", "holds dry-run results")],
)
def test_a_directory_of_another_experiment_or_mode_is_refused(tmp_path, experiment, mode, match):
    ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    with pytest.raises(ResultsError, match=match) as e:
        ResultsDir(tmp_path / "res", experiment, mode).check()
    assert "results_dir" in e.value.fix


def test_a_foreign_or_damaged_directory_is_refused(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not a sweep's")
    with pytest.raises(ResultsError, match="not empty and was not written by a sweep"):
        ResultsDir(tmp_path / "mine", "exp", "real").check()
    rd = ResultsDir(tmp_path / "res", "exp", "real").open()
    (rd.path / MANIFEST).write_text("{half")
    with pytest.raises(ResultsError, match="unreadable"):
        ResultsDir(tmp_path / "res", "exp", "real").check()


def test_write_point_writes_the_points_row_last(tmp_path, monkeypatch):
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    order = []
    real = rd.write_table
    monkeypatch.setattr(rd, "write_table", lambda name, pid, t: (order.append(name), real(name, pid, t)))
    rd.write_point("p1", _point("p1"), {"levels": _levels("p1"), "metrics": None})
    assert order == ["levels", "points"]
    assert rd.statuses() == {"p1": "ok"}
    row = load(rd.path)["points"].collect().row(0, named=True)
    assert row["env"] == {"NCCL_ALGO": "Ring"} and row["reaped"]["gpu_free"] is True


def test_a_table_that_does_not_fit_is_refused_and_nothing_is_written(tmp_path):
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    bad = _levels("p1").append_column("surprise", pa.array([1]))
    with pytest.raises(ResultsError, match="unexpected"):
        rd.write_point("p1", _point("p1"), {"levels": bad})
    assert not list((rd.path / "levels").iterdir()) and not list((rd.path / "points").iterdir())
    assert rd.statuses() == {}


def test_reopening_cleans_what_a_crash_left(tmp_path):
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    rd.write_point("p1", _point("p1"), {"levels": _levels("p1")})
    rd.write_point("p2", _point("p2", "failed"), {})
    (rd.path / "levels" / "p3.parquet.tmp").write_bytes(b"half")
    (rd.path / "points" / "p2.parquet").write_bytes(b"PAR1 cut short by a full disk")
    again = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    assert not (rd.path / "levels" / "p3.parquet.tmp").exists()
    assert again.set_aside == [str(rd.path / "points" / "p2.parquet")]
    assert (rd.path / "points" / "p2.parquet.corrupt").exists()
    assert again.statuses() == {"p1": "ok"}  # p2 runs again
    assert load(rd.path)["points"].collect()["point_id"].to_list() == ["p1"]


def test_a_crashs_leftovers_are_set_aside_before_anything_recorded_is_read(tmp_path):
    """A resume reads what was recorded (statuses, the SGLang version each point ran under) before it
    opens the directory for writing: what a crash left is set aside first (``clean_crash_leftovers``,
    under the lock), or the read trips on a truncated file (a resume crashed so in CI)."""
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    rd.write_point("p1", _point("p1"), {"levels": _levels("p1")})
    rd.write_point("p2", _point("p2"), {"levels": _levels("p2")})
    cut = rd.path / "points" / "p2.parquet"
    cut.write_bytes(cut.read_bytes()[:40])
    again = ResultsDir(tmp_path / "res", "exp", "dry-run").check()
    again.clean_crash_leftovers()
    assert again.set_aside == [str(cut)]
    assert store.read_columns(rd.path, "points", ["point_id"], point_ids=["p1", "p2"])["point_id"].to_list() == ["p1"]
    never = ResultsDir(tmp_path / "new", "exp", "dry-run").check()
    never.clean_crash_leftovers()  # a directory not yet made: nothing, and nothing made
    assert not (tmp_path / "new").exists()


def test_rescue_writes_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path / "tmp"))
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run")
    where = rd.rescue("p1", {"levels": _levels("p1"), "metrics": None})
    assert pq.read_table(where / "levels.parquet").num_rows == 1 and not (where / "metrics.parquet").exists()


def test_a_results_dir_under_a_missing_folder_is_refused_unless_it_is_the_default(tmp_path):
    (tmp_path / "results").mkdir()
    mistyped = tmp_path / "reslts" / "x"
    with pytest.raises(ResultsError, match=r"reslts does not exist \(nothing was created\)") as e:
        ResultsDir(mistyped, "exp", "dry-run", create_parents=False).check()
    assert f"did you mean {tmp_path / 'results'}" in str(e.value) and e.value.exit_code == 5
    assert not (tmp_path / "reslts").exists()
    ResultsDir(tmp_path / "results" / "x", "exp", "dry-run", create_parents=False).check()  # the parent exists
    ResultsDir(mistyped, "exp", "dry-run").open()  # the default results/<name> may create results/
    assert (mistyped / MANIFEST).is_file()


def test_plan_refuses_a_results_dir_whose_parent_is_missing(tmp_path):
    from sweep import api

    with pytest.raises(ResultsError, match="does not exist"):
        api.plan_for("experiments/k26_eagle.yaml", "plan", [f"results_dir={tmp_path / 'nope' / 'x'}"])
    with pytest.raises(ResultsError, match="does not exist"):
        api.plan_for("experiments/k26_eagle.yaml", "plan", results_dir=tmp_path / "nope" / "x")
    assert api.plan_for("experiments/k26_eagle.yaml", "plan", results_dir=tmp_path / "x").path == tmp_path / "x"
    assert not (tmp_path / "nope").exists()


def test_a_repeat_is_kept_beside_the_first_and_dropped_when_the_point_runs_anew(tmp_path):
    """decide's re-measurements are rows of their own (repeat 1..), never over the grid's; a point
    measured anew (--force) drops the repeats of its earlier run."""
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    rd.write_point("p1", _point("p1"), {"levels": _levels("p1")})
    again = from_rows([{"point_id": "p1", "concurrency": 1, "output_throughput": 11.0, "repeat": 1}], "levels")
    rd.write_repeat("p1", 1, {"levels": again})
    levels = load(rd.path)["levels"].collect().sort("repeat", nulls_last=False)
    assert levels["repeat"].to_list() == [None, 1] and levels["point_id"].to_list() == ["p1", "p1"]
    assert rd.statuses() == {"p1": "ok"}  # a repeat is a measurement, not a point
    rd.write_point("p1", _point("p1"), {"levels": _levels("p1")})
    assert load(rd.path)["levels"].collect()["repeat"].to_list() == [None]
