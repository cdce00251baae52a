"""A server that spans two hosts (tp_size 16 on hosts of 8 GPUs): a placement group of two bundles,
the leader (node rank 0) serves and is benchmarked, the follower runs its ranks until the point
ends. End to end on a local two-host cluster with the fake server."""

import polars as pl
import pytest

from sweep.results import load
from tests.conftest import run_sweep_cli
from tests.experiments import experiment, write
from tests.orchestrate.test_sweep_e2e import our_processes

pytestmark = [pytest.mark.slow, pytest.mark.scenario]  # the scenario tier: python -m pytest -m scenario

# a server over two hosts of 8 GPUs (tp 16), clean and with its fake dying in capture
EXPERIMENT = experiment(
    name="multihost",
    server={"tp_size": 16, "port": 32800},
    grid={"axes": {"fault": {"values": {"none": {}, "capture_oom": {"flags": {"fake-fail-at": "capture"}}}}}},
    benchmark={"server_metrics": False, "single_stream": {"runs": 2}},
    dry_run={"hosts": 2, "fake_speed": 4},
)


def _write(tmp_path, tp_size: int = 16):
    return write(
        tmp_path / "mh.yaml", experiment(EXPERIMENT, server={"tp_size": tp_size}), results_dir=tmp_path / "res"
    )


def test_point_spanning_two_hosts(tmp_path):
    exp = _write(tmp_path)
    r = run_sweep_cli(str(exp), "--dry-run", timeout=240)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    pts = {row["axis_fault"]: row for row in load(tmp_path / "res")["points"].collect().iter_rows(named=True)}
    ok = pts["none"]
    assert ok["status"] == "ok", ok["failure_reason"]
    argv = ok["argv"]
    assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--node-rank") + 1] == "0"
    assert "--dist-init-addr" in argv
    assert (tmp_path / "res" / "logs" / f"{ok['point_id']}.node1.log").is_file(), "the follower never ran"
    assert ok["gpu_count"] == 8
    levels = load(tmp_path / "res")["levels"].filter(pl.col("point_id") == ok["point_id"]).collect()
    assert levels.height == 2 and (levels["failed"] == 0).all()
    # every node's GPUs in the power columns: node 0's under load, the follower's (idle in the fake)
    assert (levels["power_nodes"] == 2).all() and (levels["power_gpus"] == 16).all()
    assert (levels["power_mean_w"] > 16 * 75.0).all() and levels["energy_j"].is_not_null().all()
    bad = pts["capture_oom"]
    assert bad["status"] == "failed" and "CUDA out of memory" in bad["failure_reason"]
    assert not our_processes(tmp_path / "res")
    assert ok["reaped"]["gpu_free"]


def test_more_hosts_than_the_cluster_has(tmp_path):
    exp = _write(tmp_path, tp_size=24)
    r = run_sweep_cli(str(exp), "--dry-run", timeout=120)
    assert r.returncode == 4 and "needs 3 hosts" in r.stderr and "dry_run.hosts" in r.stderr


def test_tp_size_that_does_not_split(tmp_path):
    exp = _write(tmp_path, tp_size=12)
    r = run_sweep_cli(str(exp), "--dry-run", timeout=60)
    assert r.returncode == 4 and "does not split evenly" in r.stderr
