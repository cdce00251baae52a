"""A results directory written before issue 36's renovation (tests/data/legacy-results/, by 80e9057)
still resumes with nothing run twice, and loads in ``report``, ``query`` and ``history`` with the
figures it had: the acceptance check that today's code keeps the directories users have.

Each test works on a copy in a temporary folder (a resume rewrites experiment.yaml and plan.json; a
report writes report/). Nothing here starts Ray: a resume with every point recorded runs nothing (a
point whose id no longer matches would be run again, and fails the test first, at the plan's ids)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from sweep.results import store
from tests.conftest import REPO, run_sweep_cli

LEGACY = REPO / "tests" / "data" / "legacy-results"
EXPERIMENT = LEGACY / "legacy.yaml"
TABLES = ("points", "levels", "requests", "single_stream", "metrics")
# what 80e9057 recorded: label -> (point id, launch id); the d1 points' baselines are the none points
RECORDED = {
    "drafter=none,workload=code": ("818f1ebc212f", "55fd26217134"),
    "drafter=none,workload=synth": ("b61bc549bbd9", "55fd26217134"),
    "drafter=d1,workload=code": ("aeb2960f402f", "fe92e5447085"),
    "drafter=d1,workload=synth": ("974c38d3879f", "fe92e5447085"),
}


@pytest.fixture
def legacy(tmp_path) -> Path:
    out = tmp_path / "legacy-dryrun"
    shutil.copytree(LEGACY / "legacy-dryrun", out)
    return out


def _points(directory: Path) -> pl.DataFrame:
    """The points as the results layer reads them: a resumed old directory holds files of two writers
    (the new point's has the ``flags`` column), which a plain glob read refuses to concatenate."""
    return store.table(directory, "points").collect().sort("label")


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for t in TABLES for p in sorted((directory / t).glob("*"))}


def _everything(directory: Path) -> dict[str, bytes]:
    """Every file of the directory but the lock (its record is emptied at each end), by content."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != ".sweep.lock"
    }


def test_the_fixture_is_what_the_old_code_wrote():
    pts = _points(LEGACY / "legacy-dryrun")
    assert {r["label"]: (r["point_id"], r["launch_id"]) for r in pts.iter_rows(named=True)} == RECORDED
    assert (pts["status"] == "ok").all() and pts["dry_run"].all()


def test_the_plan_today_gives_the_ids_recorded_then(legacy):
    r = run_sweep_cli(str(EXPERIMENT), "--plan", "--json", "--dry-run", f"results_dir={legacy}", timeout=60)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    planned = json.loads(r.stdout)["points"]
    assert {p["label"]: (p["id"], p["launch_id"]) for p in planned} == RECORDED
    baselines = {p["label"]: p["baseline_id"] for p in planned if not p["baseline"]}
    assert baselines == {
        "drafter=d1,workload=code": RECORDED["drafter=none,workload=code"][0],
        "drafter=d1,workload=synth": RECORDED["drafter=none,workload=synth"][0],
    }


def test_a_resume_runs_nothing_again_and_writes_nothing(legacy):
    """Its points ran under SGLang 0.5.10, the version the experiment pins and the dry run's fake
    speaks: all are kept, and a resume that runs nothing leaves the record of what ran as it was
    (experiment.yaml and plan.json included)."""
    before_points, before_files, before_all = _points(legacy), _files(legacy), _everything(legacy)
    r = run_sweep_cli(str(EXPERIMENT), "--dry-run", f"results_dir={legacy}", timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "0 to run, 4 already recorded" in r.stdout
    assert _files(legacy) == before_files, "a recorded point was run (or written) again"
    after = _points(legacy)
    assert after.select("point_id", "launch_id", "status", "started_at").equals(
        before_points.select("point_id", "launch_id", "status", "started_at")
    )
    assert _everything(legacy) == before_all, "a resume that ran nothing rewrote the directory's record"
    recorded_plan = json.loads((legacy / "plan.json").read_text())
    assert {p["label"]: (p["id"], p["launch_id"]) for p in recorded_plan["points"]} == RECORDED


def test_a_resume_under_another_sglang_is_refused_with_nothing_written(legacy):
    """The same experiment with SGLang 0.5.23 on a directory of 0.5.10's points: the dry run's fake
    would speak 0.5.23, so keeping the recorded points would report 0.5.10's numbers as 0.5.23's.
    Refused (exit 5: the directory is unusable for this run) before anything is said or written,
    the versions named, a new directory or --force offered."""
    before = _everything(legacy)
    r = run_sweep_cli(
        str(EXPERIMENT), "--dry-run", f"results_dir={legacy}", "server.sglang_version=0.5.23", timeout=120
    )
    assert r.returncode == 5, r.stdout[-3000:] + r.stderr[-3000:]
    assert "4 points measured under SGLang 0.5.10" in r.stderr, r.stderr
    assert "fake server speaks 0.5.23" in r.stderr and "--force" in r.stderr and "-sglang-0.5.23" in r.stderr
    assert "to run" not in r.stdout, "it said what it would run before refusing"
    assert _everything(legacy) == before


def test_report_reads_it_with_its_figures(legacy, tmp_path):
    out = tmp_path / "report"
    r = run_sweep_cli("report", str(legacy), "--no-plots", "--quiet", "--out", str(out), timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    md = (out / "report.md").read_text()
    assert "Points written: 4 (4 ok), of which 2 baselines." in md
    # per GPU: the level's tok/s over tp 8, read from the recorded point; the SLO pick per workload
    assert "SLO interactive [workload=code]: drafter=d1, at every level (C>=2), 13 tok/s per GPU" in md
    assert "SLO interactive [workload=synth]: drafter=d1, at every level (C>=2), 11 tok/s per GPU" in md
    # the single-stream speedup against the matched baseline, and the workload's accept length
    assert "the fastest is drafter=d1 at 68.4 tok/s, 1.18x over drafter=none" in md
    assert "synthetic:in=16,out=24,requests=8 accept 2.17, speedup 1.49x, 1.03x at C=2" in md
    assert "DRY RUN at 8x" in md


def test_query_reads_its_tables_and_views(legacy):
    sql = "select label, point_id, baseline_id, speedup from speedup order by label"
    r = run_sweep_cli("query", str(legacy), sql, "--format", "json", timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = {row["label"]: row for row in json.loads(r.stdout)}
    assert {k: v["point_id"] for k, v in rows.items()} == {k: v[0] for k, v in RECORDED.items()}
    code, synth = rows["drafter=d1,workload=code"], rows["drafter=d1,workload=synth"]
    assert code["baseline_id"] == RECORDED["drafter=none,workload=code"][0]
    assert synth["baseline_id"] == RECORDED["drafter=none,workload=synth"][0]
    assert round(code["speedup"], 2) == 1.18 and round(synth["speedup"], 2) == 1.49
    levels = run_sweep_cli("query", str(legacy), "select count(*) as n from levels", "--format", "json")
    assert levels.returncode == 0, levels.stderr[-3000:]
    assert json.loads(levels.stdout) == [{"n": 8}]  # 4 points x 2 levels


def test_history_reads_it(legacy, tmp_path):
    out = tmp_path / "history.md"
    r = run_sweep_cli("history", str(legacy), "--out", str(out), timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    md = out.read_text()
    assert "legacy" in md and "dry-run" in md
    assert "interactive: drafter=d1,workload=code; interactive: drafter=d1,workload=synth" in md


@pytest.mark.slow
@pytest.mark.scenario
def test_a_resume_of_a_half_recorded_launch_runs_only_the_point_missing(legacy):
    """One point of a shared launch lost (its files removed): the resume runs that point alone, under
    the id it had, and leaves the three others as they were (a local Ray cluster: the scenario tier)."""
    lost = RECORDED["drafter=d1,workload=synth"][0]
    for t in TABLES:
        (legacy / t / f"{lost}.parquet").unlink()
    before_points, before_files = _points(legacy), _files(legacy)
    assert before_points.height == 3
    r = run_sweep_cli(str(EXPERIMENT), "--dry-run", f"results_dir={legacy}", timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    after = _points(legacy)
    assert {r["label"]: (r["point_id"], r["launch_id"]) for r in after.iter_rows(named=True)} == RECORDED
    assert (after["status"] == "ok").all()
    kept = after.filter(pl.col("point_id") != lost).select("point_id", "started_at")
    assert kept.equals(before_points.select("point_id", "started_at")), "a recorded point ran again"
    files = _files(legacy)
    assert {k: v for k, v in files.items() if lost not in k} == before_files
    assert {k for k in files if lost in k} >= {f"{t}/{lost}.parquet" for t in ("points", "levels", "requests")}
