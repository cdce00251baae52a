"""The fault suite, end to end: a dry run on a local multi-node Ray cluster with the fake server
told to fail in each way SGLang fails. For each fault, the outcome is asserted: recorded with its
phase and reason, no process left, nothing finished lost, no point duplicated.

(A host removed mid-point: tests/orchestrate/test_runner.py; the driver interrupted or killed and
rerun: tests/orchestrate/test_sweep_e2e.py. docs/faults.md's fault table lists them all.)"""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest

from sweep.results import load
from tests.conftest import REPO, run_sweep_cli
from tests.orchestrate.test_sweep_e2e import our_processes

pytestmark = [pytest.mark.slow, pytest.mark.scenario]  # the scenario tier: python -m pytest -m scenario

FAULTS = """
name: faults
server:
  model_path: /models/m
  tp_size: 8
  port: {port}
  flags: {{max-running-requests: 64}}
  timeouts: {{stall_s: 3, load_s: 30, capture_s: 30, ready_s: 30, total_s: 60, stop_grace_s: 2}}
  reap: {{wait_s: 5}}
grid:
  axes:
    fault:
      values:
        none: {{}}
        load_crash: {{flags: {{fake-fail-at: load}}}}
        capture_oom: {{flags: {{fake-fail-at: capture}}}}
        serve_crash: {{flags: {{fake-crash-after-requests: 4}}}}
        load_hang: {{flags: {{fake-hang-at: load}}}}
        capture_hang: {{flags: {{fake-hang-at: capture}}}}
        zombie: {{flags: {{fake-zombie: true}}}}
benchmark:
  server_metrics: false
  single_stream: {{runs: 2, warmup: 1, max_tokens: 32}}
  concurrency: {{levels: [1, 4], rounds: 2, max_tokens: 32}}
dry_run: {{hosts: 3, fake_speed: 4, fake_startup_speed: 1000, max_tokens_scale: 1.0, min_max_tokens: 16}}
results_dir: {results}
"""


@pytest.fixture(scope="module")
def fault_sweep():
    tmp = Path(tempfile.mkdtemp(prefix="sweep-faults-"))
    exp = tmp / "faults.yaml"
    exp.write_text(FAULTS.format(port=32500, results=tmp / "res"))
    r = run_sweep_cli(str(exp), "--dry-run", timeout=300)
    yield tmp, exp, r
    shutil.rmtree(tmp, ignore_errors=True)


def by_fault(tmp) -> dict[str, dict]:
    pts = load(tmp / "res")["points"].collect()
    return {row["axis_fault"]: row for row in pts.iter_rows(named=True)}


def test_every_fault_recorded_with_phase_and_reason(fault_sweep):
    tmp, _, r = fault_sweep
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    pts = by_fault(tmp)
    assert len(pts) == 7
    expected = {
        "none": ("ok", None, None, None),
        "zombie": ("ok", None, None, None),
        "load_crash": ("failed", "load", "Not enough memory", "raise mem-fraction-static"),
        "capture_oom": ("failed", "capture", "CUDA out of memory", "lower mem-fraction-static or cuda-graph-max-bs"),
        "serve_crash": ("failed", "benchmark", None, None),
        "load_hang": ("failed", "load", "hang: no log output", "raise stall_s"),
        "capture_hang": ("failed", "capture", "hang: no log output", "raise stall_s"),
    }
    for fault, (status, phase, reason, fix) in expected.items():
        p = pts[fault]
        assert p["status"] == status, (fault, p["failure_phase"], p["failure_reason"])
        assert p["failure_phase"] == phase, (fault, p["failure_reason"])
        if reason:
            assert reason in p["failure_reason"], (fault, p["failure_reason"])
        if fix:  # the error's fix is kept beside its reason
            assert fix in p["failure_fix"], (fault, p["failure_fix"])
        assert p["log_tail"], fault
    assert f"fix: {pts['capture_oom']['failure_fix']}" in r.stdout  # and said as the point ends


def test_crash_while_serving_keeps_what_was_measured(fault_sweep):
    tmp, _, _ = fault_sweep
    p = by_fault(tmp)["serve_crash"]
    reqs = load(tmp / "res")["requests"].filter(pl.col("point_id") == p["point_id"]).collect()
    assert reqs.filter(pl.col("ok")).height >= 1, "requests answered before the crash must be kept"
    assert reqs.filter(~pl.col("ok")).height >= 1, "requests that failed with the server are data too"


def test_zombies_reaped_and_nothing_left(fault_sweep):
    tmp, _, _ = fault_sweep
    z = by_fault(tmp)["zombie"]
    reaped = z["reaped"]  # a struct (sweep/results/schema.py REAPED)
    assert len(reaped["killed"]) >= 9  # the parent, 8 TP ranks and a detokenizer
    assert reaped["port_free"] and reaped["gpu_free"]
    assert not our_processes(tmp / "res")


def test_no_point_duplicated_and_rerun_runs_nothing(fault_sweep):
    tmp, exp, _ = fault_sweep
    r = run_sweep_cli(str(exp), "--dry-run", timeout=60)
    assert r.returncode == 1 and "0 to run" in r.stdout
    ids = load(tmp / "res")["points"].select("point_id").collect()["point_id"]
    assert ids.n_unique() == ids.len() == 7


def test_half_written_and_corrupt_files_from_a_crash(fault_sweep):
    tmp, exp, _ = fault_sweep
    res = tmp / "res"
    ok_id = by_fault(tmp)["none"]["point_id"]
    # a crash mid-write leaves a temporary, and a copy cut short leaves a truncated file
    (res / "levels" / "deadbeef0000.parquet.tmp").write_bytes(b"PAR1 half")
    points_file = res / "points" / f"{ok_id}.parquet"
    points_file.write_bytes(points_file.read_bytes()[:40])
    r = run_sweep_cli(str(exp), "--dry-run", "--only", "fault=none", timeout=180)
    assert "set aside an unreadable file" in r.stdout
    assert not (res / "levels" / "deadbeef0000.parquet.tmp").exists()
    assert (res / "points" / f"{ok_id}.parquet.corrupt").exists()
    pts = by_fault(tmp)
    assert pts["none"]["status"] == "ok" and len(pts) == 7  # the damaged point ran again; loading works


def test_results_directory_unwritable_mid_sweep(tmp_path):
    exp = tmp_path / "faults.yaml"
    exp.write_text(
        FAULTS.format(port=32600, results=tmp_path / "res").replace("dry_run: {hosts: 3", "dry_run: {hosts: 1")
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweep",
            str(exp),
            "--dry-run",
            "--only",
            "fault=none",
            "--only",
            "fault=zombie",
            "--only",
            "fault=capture_oom",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list((tmp_path / "res" / "points").glob("*.parquet")):
            time.sleep(0.1)
        first = list((tmp_path / "res" / "points").glob("*.parquet"))
        assert first, "no point finished"
        # the results directory stops taking writes: its requests folder is now a file
        shutil.rmtree(tmp_path / "res" / "requests")
        (tmp_path / "res" / "requests").write_text("not a directory")
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 5, out[-2000:] + err[-2000:]
    assert "cannot write results" in err and "was saved to" in err
    saved = Path(err.split("was saved to ")[1].split()[0].rstrip(";,"))
    try:
        assert (saved / "points.parquet").is_file()
        assert pl.read_parquet(saved / "points.parquet")["status"][0] in ("ok", "failed")
    finally:
        shutil.rmtree(saved, ignore_errors=True)
    assert first[0].is_file(), "a finished point was lost"
    assert not our_processes(tmp_path / "res")
