"""A dry run's local Ray cluster takes none of Ray's fixed ports, so that two on one machine never
collide (sweep/orchestrate/cluster.py ``_ports_of_its_own``), and leaves Ray's address file alone.
Measured on Ray 2.60 before: a second cluster's head found 52365 (its dashboard agent's HTTP
port), 44217 (the autoscaler's metrics) and 44227 (the dashboard's metrics) taken, and logged
``address already in use`` for each; every cluster wrote its address to
``/tmp/ray/ray_current_cluster`` and deleted the file when it stopped."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

# Ray 2.60's fixed defaults: dashboard agent HTTP, autoscaler metrics, dashboard metrics, dashboard,
# Redis-era GCS
FIXED = {52365, 44217, 44227, 8265, 6379}

PROBE = """
import json, os, psutil
from ray._common.utils import get_ray_address_file
from sweep.orchestrate.cluster import SimulatedCluster

sim = SimulatedCluster(1, "gpu_host", 8)
try:
    listening = set()
    for p in psutil.Process().children(recursive=True):
        try:
            listening |= {c.laddr.port for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
        except psutil.Error:
            pass
    f = get_ray_address_file(None)
    written = open(f).read() if os.path.exists(f) else None
    print(json.dumps({"address": sim.cluster.address, "listening": sorted(listening), "file": written,
                      "env": {k: os.environ.get(k) for k in ("AUTOSCALER_METRIC_PORT", "DASHBOARD_METRIC_PORT")}}))
finally:
    sim.shutdown()
"""


def test_a_local_cluster_takes_no_fixed_port_and_leaves_the_address_file(tmp_path):
    r = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=180, env={**os.environ}
    )
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["listening"], "psutil saw none of the cluster's ports"
    assert not FIXED & set(seen["listening"]), seen["listening"]
    assert seen["file"] is None or seen["address"] not in seen["file"]  # another process's Ray may write it
    assert seen["env"] == {"AUTOSCALER_METRIC_PORT": None, "DASHBOARD_METRIC_PORT": None}  # set only while it starts
