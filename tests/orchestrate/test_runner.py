"""Scheduling on a real local multi-node Ray cluster, with stand-ins of known duration for points."""


import pytest

from sweep.core.settings import BenchSettings
from sweep.host.point import PointSpec
from sweep.orchestrate import cluster
from sweep.orchestrate.ray_runner import HostSetup, Runner
from sweep.core.events import PointStage
from tests.orchestrate.standins import timed_point

pytestmark = pytest.mark.slow


def specs(durations):
    return [PointSpec("t", f"p{i}", f"p{i}:{d}", ["x"], {"port": 1}, {}, "/dev/null", 8, BenchSettings())
            for i, d in enumerate(durations)]


def runner(tmp_path, **kw):
    hosts = cluster.require_hosts("gpu_host", 8)
    setups = {h.node_id: HostSetup(h, 31000 + h.index, str(tmp_path / h.name)) for h in hosts}
    return Runner("gpu_host", 8, setups, run_fn=timed_point, **kw), hosts


def test_spread_one_point_per_host_at_a_time(sim_cluster, tmp_path):
    r, hosts = runner(tmp_path)
    events = []
    outs = list(r.run(specs([1.0] * 6), lambda pid, host, ev: events.append((pid, host, ev.stage))))
    assert sorted(o.result.point_id for o in outs) == [f"p{i}" for i in range(6)]
    by_host = {}
    for o in outs:
        by_host.setdefault(o.result.host, []).append((o.result.started_at, o.result.ended_at))
        assert o.attempts == 1
        assert o.result.checks[1] == f"port={31000 + [h.name for h in hosts].index(o.result.host)}"
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
            node = next(n for n in sim_cluster.cluster.worker_nodes
                        if n.node_id == next(h.node_id for h in hosts if h.name == host))
            victim["host"] = host
            sim_cluster.cluster.remove_node(node)

    outs = {o.result.point_id: o for o in r.run(specs([6.0, 0.5]), on_event)}
    assert victim, "the point never reported from a host"
    o = outs["p0"]
    assert o.result.status == "ok" and o.attempts == 2 and o.result.host != victim["host"]
    retry = [e for e in seen if e.stage == "retry"]  # the driver said so, where the point was
    assert [(e.point_id, e.host, e.attempt) for e in retry] == [("p0", victim["host"], 2)]
    assert outs["p1"].result.status == "ok"
    sim_cluster.cluster.add_node(num_cpus=2, num_gpus=8, resources={"gpu_host": 1, "sim_host_9": 1})
