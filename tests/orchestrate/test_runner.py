"""Scheduling on a real local multi-node Ray cluster, with stand-ins of known duration for points; and
that cluster's ports: a dry run's local cluster takes none of Ray's fixed ones."""

import os

import psutil
import pytest

from sweep.core.events import PointMeasured, PointStage
from sweep.core.settings import BenchSettings
from sweep.host.point import LaunchPoint, LaunchSpec
from sweep.orchestrate import cluster
from sweep.orchestrate.ray_runner import HostSetup, Runner
from tests.orchestrate.standins import shared_launch, timed_point

pytestmark = pytest.mark.slow


def specs(durations):
    return [
        LaunchSpec("t", ["x"], {"port": 1}, {}, "/dev/null", [LaunchPoint(f"p{i}", f"p{i}:{d}", BenchSettings())])
        for i, d in enumerate(durations)
    ]


def runner(tmp_path, run_fn=timed_point, **kw):
    hosts = cluster.require_hosts("gpu_host", 8)
    setups = {h.node_id: HostSetup(h, 31000 + h.index, str(tmp_path / h.name)) for h in hosts}
    return Runner("gpu_host", 8, setups, run_fn=run_fn, **kw), hosts


# Ray 2.60's fixed defaults: dashboard agent HTTP, autoscaler metrics, dashboard metrics, dashboard,
# Redis-era GCS
FIXED = {52365, 44217, 44227, 8265, 6379}


def test_a_local_cluster_takes_no_fixed_port_and_leaves_the_address_file(sim_cluster):
    """A dry run's local Ray cluster (the module's, started as a dry run starts its own) takes none of
    Ray's fixed ports, so that two on one machine never collide (sweep/orchestrate/cluster.py
    ``_ports_of_its_own``), and leaves Ray's address file alone. Measured on Ray 2.60 before: a second
    cluster's head found 52365 (its dashboard agent's HTTP port), 44217 (the autoscaler's metrics) and
    44227 (the dashboard's metrics) taken, and logged ``address already in use`` for each; every cluster
    wrote its address to ``/tmp/ray/ray_current_cluster`` and deleted the file when it stopped."""
    from ray._common.utils import get_ray_address_file

    listening = set()
    for p in psutil.Process().children(recursive=True):  # the cluster's processes: this test's children
        try:
            listening |= {c.laddr.port for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
        except psutil.Error:
            pass
    assert listening, "psutil saw none of the cluster's ports"
    assert not FIXED & listening, sorted(listening)
    f = get_ray_address_file(None)
    written = open(f).read() if os.path.exists(f) else None
    assert written is None or sim_cluster.cluster.address not in written  # another process's Ray may write it
    # set only while it starts
    assert {k: os.environ.get(k) for k in ("AUTOSCALER_METRIC_PORT", "DASHBOARD_METRIC_PORT")} == {
        "AUTOSCALER_METRIC_PORT": None,
        "DASHBOARD_METRIC_PORT": None,
    }


def test_spread_one_point_per_host_at_a_time(sim_cluster, tmp_path):
    r, hosts = runner(tmp_path)
    events = []
    outs = list(r.run(specs([1.0] * 6), lambda pid, host, ev: events.append((pid, host, ev.stage))))
    assert sorted(o.result.points[0].point_id for o in outs) == [f"p{i}" for i in range(6)]
    by_host = {}
    for o in outs:
        by_host.setdefault(o.result.points[0].host, []).append(
            (o.result.points[0].started_at, o.result.points[0].ended_at)
        )
        assert o.attempts == 1
        assert o.result.points[0].checks[1] == f"port={31000 + [h.name for h in hosts].index(o.result.points[0].host)}"
    assert set(by_host) == {h.name for h in hosts}  # every host used
    for spans in by_host.values():  # never two points at once on a host
        spans.sort()
        assert all(a_end <= b_start + 0.01 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert {s for _, _, s in events} >= {"start", "load", "benchmark"}


def test_node_removed_mid_point_completes_elsewhere(sim_cluster, tmp_path):
    r, hosts = runner(tmp_path, max_host_failures=1)
    victim = {}
    seen: list[PointStage] = []

    def on_event(pid, host, ev):
        seen.append(PointStage.at(pid, "label", host, ev))
        if pid == "p0" and ev.stage == "load" and not victim:
            node = next(
                n
                for n in sim_cluster.cluster.worker_nodes
                if n.node_id == next(h.node_id for h in hosts if h.name == host)
            )
            victim["host"] = host
            sim_cluster.cluster.remove_node(node)

    outs = {o.result.points[0].point_id: o for o in r.run(specs([6.0, 0.5]), on_event)}
    assert victim, "the point never reported from a host"
    o = outs["p0"]
    assert o.result.points[0].status == "ok" and o.attempts == 2 and o.result.points[0].host != victim["host"]
    retry = [e for e in seen if e.stage == "retry"]  # the driver said so, where the point was
    assert [(e.point_id, e.host, e.attempt) for e in retry] == [("p0", victim["host"], 2)]
    assert outs["p1"].result.points[0].status == "ok"
    sim_cluster.cluster.add_node(num_cpus=2, num_gpus=8, resources={"gpu_host": 1, "sim_host_9": 1})


def test_host_lost_between_points_of_a_launch_reruns_only_the_rest(sim_cluster, tmp_path):
    """A launch of two points (a client-side axis): its host is lost after the first is measured
    (PointMeasured) while the second runs. The first stays measured, once; the launch runs again on
    another host with the second point alone."""
    r, hosts = runner(tmp_path, run_fn=shared_launch, max_host_failures=1)
    started = tmp_path / "started"
    launch = LaunchSpec(
        "t",
        ["x"],
        {"port": 1},
        {"STANDIN_STARTED": str(started), "STANDIN_HOLD_S": "30"},  # q1 outlasts the host
        str(tmp_path / "logs" / "q0.log"),
        [LaunchPoint("q0", "q0:0.5", BenchSettings()), LaunchPoint("q1", "q1:0.5", BenchSettings())],
    )
    victim = {}
    measured: list[tuple[str, str, PointMeasured]] = []
    retries = []

    def on_event(pid, host, ev):
        if isinstance(ev, PointMeasured):
            measured.append((pid, host, ev))
            if pid == "q0" and not victim:  # q0 is measured, q1 runs: the host goes
                node = next(
                    n
                    for n in sim_cluster.cluster.worker_nodes
                    if n.node_id == next(h.node_id for h in hosts if h.name == host)
                )
                victim["host"] = host
                sim_cluster.cluster.remove_node(node)
        elif ev.stage == "retry":
            retries.append((pid, ev.attempt))

    outs = list(r.run([launch], on_event))
    assert victim, "the first point was never measured"
    assert [(pid, host, ev.result.status, ev.result.attempts) for pid, host, ev in measured] == [
        ("q0", victim["host"], "ok", 1)
    ]  # once, from the lost host, before its loss
    assert retries == [("q1", 2)]
    [o] = outs
    # the launch run again: the second point alone, the first gone from it
    assert o.spec.key == "q1" and [(q.point_id, q.label) for q in o.spec.points] == [("q1", "q1:0.5")]
    assert o.spec.log_path == str(tmp_path / "logs" / "q1.log")
    assert [r.point_id for r in o.result.points] == ["q1"]
    assert o.result.points[0].status == "ok" and o.attempts == 2 and o.result.points[0].host != victim["host"]
    lines = started.read_text().split()
    starts = list(zip(lines[::2], lines[1::2]))  # (point, host) each time a point started
    assert [s for s in starts if s[0] == "q0"] == [("q0", victim["host"])]  # never run again
    assert starts[-1] == ("q1", o.result.points[0].host)
    sim_cluster.cluster.add_node(num_cpus=2, num_gpus=8, resources={"gpu_host": 1, "sim_host_8": 1})
