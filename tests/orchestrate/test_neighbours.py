"""Two sweeps on one machine at the same time: two dry runs of the same experiment (the same
server.port), each its own results directory and local Ray cluster, started together, and every
point of both is ok. Before the ports were chosen at launch, a simulated host served on server.port
+ its index: the other sweep's server took it during the startup and the point failed with uvicorn's
``address already in use`` (or in pre-flight, the port in use)."""

import os
import subprocess
import sys

import polars as pl
import pytest

from tests.conftest import REPO
from tests.experiments import DRAFT_TOKENS, DRAFTERS, experiment, write

pytestmark = [pytest.mark.slow, pytest.mark.scenario]  # the scenario tier: python -m pytest -m scenario

PORT = 30500  # both sweeps' server.port; below the kernel's ephemeral range, so never a chosen one


def _experiment(tmp_path, name: str):
    axes = {"drafter": DRAFTERS, "steps": {"flag": "speculative-num-steps", "values": [2]}}
    exp = experiment(
        name="neighbours",
        server={"port": PORT},
        grid={"axes": axes, "derived": DRAFT_TOKENS},
        dry_run={"hosts": 2, "fake_startup_speed": 30},
    )  # ~13 s of startup: the sweeps' servers overlap
    return write(tmp_path / f"{name}.yaml", exp, results_dir=tmp_path / name)


def test_two_dry_runs_at_once_on_one_machine(tmp_path):
    runs = {}
    for name in ("one", "two"):
        runs[name] = subprocess.Popen(
            [sys.executable, "-m", "sweep", str(_experiment(tmp_path, name)), "--dry-run"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ},
        )
    out = {}
    try:
        for name, proc in runs.items():
            out[name] = proc.communicate(timeout=300)[0]
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    ports = {}
    for name, proc in runs.items():
        assert proc.returncode == 0, f"{name}:\n{out[name][-4000:]}"
        pts = pl.read_parquet(str(tmp_path / name / "points" / "*.parquet"))
        assert pts.height == 2 and pts["status"].to_list() == ["ok", "ok"], pts.select("label", "failure_reason")
        for argv, checks in zip(pts["argv"].to_list(), pts["preflight_checks"].to_list()):
            port = int(argv[argv.index("--port") + 1])  # the port the server ran on, as recorded
            assert port not in (PORT, PORT + 1)  # chosen at launch, not server.port + the host's index
            assert f"ok: port {port} chosen free at launch (simulated host)" in checks
            ports.setdefault(name, []).append(port)
    assert len(ports) == 2
