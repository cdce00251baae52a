"""The faults real hosts have, on the cluster of network namespaces (tests/cluster/netns.py), each
in the middle of a point of a ``--fake`` sweep run from the head: a host's link cut (restored once
the cluster has declared it dead), its raylet killed, the whole host killed at once, the driver
killed with kill -9 and the command run again, and a follower host of a two-host point lost.

In each: the point is retried on another host (or, past cluster.max_host_failures, recorded failed
with the reason), finished points are kept, no point is recorded twice, and no server process is
left on any host once the sweep has ended. The times (fault to noticed, to recovered) are printed
at the end of the session."""

from __future__ import annotations

import re
import time

import polars as pl
import pytest

from sweep.results import load
from tests.cluster import netns
from tests.cluster.conftest import TIMINGS, fake_experiment
from tests.cluster.test_sweep import assert_nothing_left, driver, host_ips, ip_in

pytestmark = [pytest.mark.netns, pytest.mark.timeout(300)]

STAGE = re.compile(r"\] \S+@(\d+\.\d+\.\d+\.\d+): (\S+): (\S.*)$")  # "[12:00:00] host@IP: label: stage"


def stage_line(d: netns.Output, stage: str, label: str | None = None, after: float = 0.0, ip: str | None = None):
    """The first line where a host reports ``stage`` (a prefix) for a point; (line, ip, label)."""
    for ln in list(d.lines):
        m = STAGE.search(ln.text)
        if (
            m
            and ln.t >= after
            and m.group(3).startswith(stage)
            and (label is None or m.group(2) == label)
            and (ip is None or m.group(1) == ip)
        ):
            return ln, m.group(1), m.group(2)
    return None


def wait_stage(d: netns.Output, stage: str, timeout: float, **kw):
    return netns.wait_for(
        lambda: stage_line(d, stage, **kw) or (d.proc.poll() is not None and "ended"), timeout, lambda: d.text()[-3000:]
    )


def points(res) -> pl.DataFrame:
    return load(res)["points"].collect()


def check_retried(res, label: str, victim_ip: str, n: int) -> dict:
    """Every point recorded once and ok; ``label`` on its second attempt, on another host."""
    pts = points(res)
    assert pts.height == n and pts["point_id"].n_unique() == n, pts.select("label", "status").rows()
    assert (pts["status"] == "ok").all(), pts.select("label", "status", "failure_phase", "failure_reason").rows()
    row = pts.filter(pl.col("label") == label).row(0, named=True)
    assert row["attempts"] == 2, (label, row["attempts"])
    assert ip_in(row["host"]) != victim_ip, (label, row["host"])
    others = pts.filter(pl.col("label") != label)
    assert (others["attempts"] == 1).all()
    return row


def _fault_mid_point(c: netns.NetnsCluster, workdir, fault: str, *, speed: float, restore: bool = False) -> None:
    exp = fake_experiment(workdir, fault, values=(16, 32), speed=speed, tokens=64, port=33100)
    d = driver(c, exp)
    found = wait_stage(d, "benchmark", 120)
    assert found != "ended", d.text()[-3000:]
    _, ip, label = found
    victim = host_ips()[ip]
    t0 = time.time()
    if fault == "link_cut":
        c.cut(victim)
    elif fault == "raylet_killed":
        assert c.kill_raylet(victim), f"no raylet on {victim}"
    else:
        assert c.kill_host(victim) > 0
    noticed = netns.wait_for(
        lambda: stage_line(d, "host lost, retrying (attempt 2)", label=label), 150, lambda: d.text()[-3000:]
    )[0].t
    t = {"noticed_s": noticed - t0}
    dead = _declared_dead(c, ip, t0)
    if dead:
        t["declared_dead_s"] = dead - t0
    if restore:  # the link comes back: the host learns it was declared dead, its raylet exits
        c.restore(victim)
        t["restored_s"] = time.time() - t0
    # the host's server goes: killed with the host, or leashed to a worker that died with its raylet
    netns.wait_for(lambda: not c.servers(victim), 90, lambda: f"servers left on {victim}: {c.servers(victim)}")
    t["server_gone_s"] = time.time() - t0
    if restore:
        netns.wait_for(
            lambda: not any(n == "raylet" for _, n, _ in c.processes(victim)),
            60,
            lambda: f"{victim}'s raylet still runs after the link came back",
        )
        t["raylet_exited_s"] = time.time() - t0
    again = wait_stage(d, "start", 120, label=label, after=noticed)
    assert again != "ended", d.text()[-3000:]
    t["retry_started_s"] = again[0].t - t0
    assert again[1] != ip
    rc = d.wait(timeout=180)
    assert rc == 0, d.text()[-4000:]
    row = check_retried(workdir / "res", label, ip, 2)
    t["recovered_s"] = row["ended_at"] - t0
    assert_nothing_left(c)
    TIMINGS[fault] = t


def _declared_dead(c: netns.NetnsCluster, ip: str, after: float) -> float | None:
    for e in c.node_events():
        if e["t"] >= after and any(n["ip"] == ip and not n["alive"] for n in e["nodes"]):
            return e["t"]
    return None


def test_link_cut_mid_point_then_restored(healthy, workdir):
    """The cable pulled: no reset reaches anyone, the head declares the host dead after its health
    checks, the driver retries the point elsewhere at once (it does not wait for Ray to give up on
    the silent connection), and when the link returns the host's raylet exits and its server with it."""
    _fault_mid_point(healthy, workdir, "link_cut", speed=0.25, restore=True)


def test_raylet_killed_mid_point(healthy, workdir):
    _fault_mid_point(healthy, workdir, "raylet_killed", speed=1)


def test_whole_host_killed_mid_point(healthy, workdir):
    _fault_mid_point(healthy, workdir, "host_killed", speed=1)


def test_driver_killed_then_rerun(healthy, workdir):
    """kill -9 of the driver on the head: Ray ends its job, the hosts' workers die and their servers
    with them; the same command again runs only the points with no result, once each."""
    c = healthy
    exp = fake_experiment(workdir, "driver_killed", values=(16, 32, 48, 64), speed=1, tokens=64, port=33200)
    d = driver(c, exp)
    res = workdir / "res"
    netns.wait_for(lambda: list((res / "points").glob("*.parquet")) or d.proc.poll() is not None, 150, d.text)
    netns.wait_for(lambda: any(c.servers(h) for h in c.hosts) or d.proc.poll() is not None, 60, d.text)
    assert d.proc.poll() is None, d.text()[-3000:]
    running = [h for h in c.hosts if c.servers(h)]
    t0 = time.time()
    d.proc.kill()  # kill -9 (ip netns exec became the driver)
    d.wait(timeout=30)
    before = points(res)  # what the driver recorded before it died
    assert 1 <= before.height < 4 and running
    for h in c.hosts:
        netns.wait_for(lambda h=h: not c.servers(h), 90, lambda h=h: f"servers left on {h} after the driver died")
    t = {"servers_gone_s": time.time() - t0, "recorded_before": before.height}
    again = driver(c, exp)
    rc = again.wait(timeout=180)
    assert rc == 0, again.text()[-4000:]
    assert f"{4 - before.height} to run" in again.text()
    after = points(res)
    assert after.height == 4 and after["point_id"].n_unique() == 4 and (after["status"] == "ok").all()
    kept = after.filter(pl.col("point_id").is_in(before["point_id"].to_list()))
    assert kept.sort("point_id")["started_at"].to_list() == before.sort("point_id")["started_at"].to_list(), (
        "a finished point ran again"
    )
    t["rerun_done_s"] = time.time() - t0
    assert_nothing_left(c)
    TIMINGS["driver_killed"] = t


def test_follower_host_of_a_two_host_point_lost(healthy, workdir):
    """tp 16 over two hosts: the follower's host is killed; the leader is stopped, and the point runs
    again on the two hosts left."""
    c = healthy
    port = 33300
    exp = fake_experiment(workdir, "follower_lost", tp=16, values=(16,), speed=1, tokens=64, port=port)
    with netns.Watch(c) as watch:
        d = driver(c, exp)

        def follower():
            for s in list(watch.seen.values()):
                if "--node-rank 1 " in s.cmdline + " " and "SWEEP_POINT" in s.env:
                    return s
            return None

        f = netns.wait_for(lambda: follower() or (d.proc.poll() is not None and "ended"), 120, d.text)
        assert f != "ended", d.text()[-3000:]
        wait_stage(d, "benchmark", 60)
        leader = next(s for s in watch.seen.values() if "--node-rank 0 " in s.cmdline + " " and "SWEEP_POINT" in s.env)
        assert leader.node != f.node
        t0 = time.time()
        assert c.kill_host(f.node) > 0
        noticed = netns.wait_for(lambda: stage_line(d, "host lost, retrying (attempt 2)"), 120, d.text)[0].t
        netns.wait_for(lambda: not netns.alive(leader.pid), 60, f"the leader's server on {leader.node} still runs")
        t = {"noticed_s": noticed - t0, "leader_stopped_s": time.time() - t0}
        rc = d.wait(timeout=180)
        assert rc == 0, d.text()[-4000:]
    pts = points(workdir / "res")
    assert pts.height == 1
    row = pts.row(0, named=True)
    assert row["status"] == "ok" and row["attempts"] == 2, (row["failure_reason"], row["attempts"])
    t["recovered_s"] = row["ended_at"] - t0
    second = {s.node for s in watch.seen.values() if s.first >= t0 and "SWEEP_POINT" in s.env}
    assert f.node not in second and len(second) == 2, second
    argv = row["argv"]
    assert argv[argv.index("--dist-init-addr") + 1] == f"{ip_in(row['host'])}:{port + 1000}"
    assert_nothing_left(c)
    TIMINGS["follower_host_lost"] = t


def test_point_recorded_failed_when_retries_run_out(healthy, workdir):
    """max_host_failures 0: a host lost under the point is recorded as the point's failure, with the reason."""
    c = healthy
    exp = fake_experiment(workdir, "no_retries", values=(16,), speed=1, tokens=64, port=33400, max_host_failures=0)
    d = driver(c, exp)
    found = wait_stage(d, "benchmark", 120)
    assert found != "ended", d.text()[-3000:]
    _, ip, _ = found
    c.kill_raylet(host_ips()[ip])
    rc = d.wait(timeout=120)
    assert rc == 1, d.text()[-3000:]
    row = points(workdir / "res").row(0, named=True)
    assert row["status"] == "failed" and row["failure_phase"] == "host", row
    assert "lost during attempt 1" in row["failure_reason"] and "max_host_failures" in row["failure_reason"]
    assert ip in row["failure_reason"] or ip in (row["host"] or ""), row["failure_reason"]
    assert_nothing_left(c)
