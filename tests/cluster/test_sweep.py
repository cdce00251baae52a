"""The sweep as a user runs it on a cluster of real addresses (a head and three hosts, each in a
network namespace of its own, tests/cluster/netns.py): ``ray job submit`` from the head, and the
driver run directly on the head with ``RAY_ADDRESS``. The fake server on every host (``--fake``)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import polars as pl
import pytest

from sweep.results import load
from tests.cluster import netns
from tests.cluster.conftest import TIMINGS, fake_experiment

pytestmark = [pytest.mark.netns, pytest.mark.timeout(300)]


def host_ips() -> dict[str, str]:
    """IP -> host (this run's subnet, netns.subnet(), is chosen when it is first asked for)."""
    return {netns.ip_of(h): h for h in netns.HOSTS}


def points(res) -> pl.DataFrame:
    return load(res)["points"].collect()


def ip_in(name: str) -> str:
    """The IP in a host's name (``hostname@IP``: the hosts share one hostname here)."""
    m = re.search(r"@(\d+\.\d+\.\d+\.\d+)$", name or "")
    assert m, f"host name {name!r} carries no IP"
    return m.group(1)


def checks_of(row: dict) -> list[str]:
    """A point's pre-flight checks (the column's name changed: ``preflight_checks``, earlier ``checks``)."""
    return list(row.get("preflight_checks") or row.get("checks") or [])


def driver(cluster: netns.NetnsCluster, exp, *args: str) -> netns.Output:
    """``python -m sweep EXP --fake`` on the head, as a user there runs it (venv, RAY_ADDRESS, token)."""
    return cluster.start("head", [sys.executable, "-m", "sweep", str(exp), "--fake", *args], env=cluster.driver_env())


def assert_nothing_left(cluster: netns.NetnsCluster, timeout: float = 60) -> None:
    for node in ("head", *cluster.hosts):
        netns.wait_for(
            lambda n=node: not cluster.servers(n),
            timeout,
            lambda n=node: f"server processes left on {n}: {cluster.servers(n)}",
        )


def test_job_submit_spreads_points_over_the_hosts(healthy, workdir):
    c = healthy
    exp = fake_experiment(workdir, "spread", values=(16, 32, 48, 64))  # 4 points: one host runs two
    env = {k: v for k, v in c.driver_env().items() if k != "RAY_ADDRESS"}
    t0 = time.monotonic()
    with netns.Watch(c) as watch:
        job = c.run(
            "head",
            [
                "ray",
                "job",
                "submit",
                "--address",
                netns.DASHBOARD,
                "--working-dir",
                str(netns.REPO),
                "--",
                "python",
                "-m",
                "sweep",
                str(exp),
                "--fake",
            ],
            env=env,
            timeout=240,
        )
    took = time.monotonic() - t0
    out = job.stdout + job.stderr
    assert job.returncode == 0, out[-4000:]
    hosts_line = next(line for line in out.splitlines() if line.startswith("hosts: "))
    assert all(f"@{ip} (8 GPUs)" in hosts_line for ip in host_ips()), hosts_line
    pts = points(workdir / "res")
    assert pts.height == 4 and (pts["status"] == "ok").all(), pts.select("label", "status", "failure_reason").rows()
    assert pts["point_id"].n_unique() == 4
    # spread over the three hosts, each named with its own IP
    ips = {ip_in(h) for h in pts["host"]}
    assert ips == set(host_ips()), pts.select("label", "host").rows()
    # every server ran in the namespace of the host its result names, none on the head
    assert not watch.on("head")
    for row in pts.iter_rows(named=True):
        assert watch.where(row["point_id"]) == [host_ips()[ip_in(row["host"])]], (row["label"], row["host"])
    for s in watch.seen.values():  # (pre-flight's --help and version probes carry no marker)
        if "SWEEP_HOST" in s.env:
            assert ip_in(s.env["SWEEP_HOST"]) == netns.ip_of(s.node), (s.node, s.env.get("SWEEP_HOST"))
    assert_nothing_left(c)
    TIMINGS["job_submit_4_points"] = {"sweep_s": took}


def test_two_host_point_with_ray_address(healthy, workdir):
    """tp 16 over two 8-GPU hosts: the follower starts with --dist-init-addr on the leader's own IP,
    whose port the leader checked free in pre-flight; with it taken, the point fails there."""
    c = healthy
    port = 32950
    exp = fake_experiment(workdir, "two_host", tp=16, port=port, values=(16, 32))
    t0 = time.monotonic()
    with netns.Watch(c) as watch:
        d = driver(c, exp)
        rc = d.wait(timeout=240)
    took = time.monotonic() - t0
    assert rc == 0, d.text()[-4000:]
    pts = points(workdir / "res")
    assert pts.height == 2 and (pts["status"] == "ok").all(), pts.select("label", "failure_reason").rows()
    for row in pts.iter_rows(named=True):
        leader_ip = ip_in(row["host"])
        argv = row["argv"]
        assert argv[argv.index("--dist-init-addr") + 1] == f"{leader_ip}:{port + 1000}"
        assert f"ok: dist-init port {port + 1000} free on {leader_ip}" in checks_of(row), checks_of(row)
        ranks = {}
        for s in watch.seen.values():
            if s.env.get("SWEEP_POINT") != row["point_id"] or "sweep.fake" not in s.cmdline:
                continue
            argv_s = s.cmdline.split()
            if "--node-rank" in argv_s:
                ranks[argv_s[argv_s.index("--node-rank") + 1]] = (s.node, argv_s[argv_s.index("--dist-init-addr") + 1])
        assert set(ranks) == {"0", "1"}, (row["label"], ranks)
        (leader_ns, addr0), (follower_ns, addr1) = ranks["0"], ranks["1"]
        assert leader_ns == host_ips()[leader_ip] and follower_ns != leader_ns and follower_ns in c.hosts
        assert addr0 == addr1 == f"{netns.ip_of(leader_ns)}:{port + 1000}"
        assert (workdir / "res" / "logs" / f"{row['point_id']}.node1.log").is_file()
    assert_nothing_left(c)
    TIMINGS["ray_address_2_two_host_points"] = {"sweep_s": took}

    # the dist-init port taken on every host: the leader's pre-flight says so, nothing launches
    hold = f"import socket, time; s = socket.socket(); s.bind(('0.0.0.0', {port + 1000})); s.listen(); time.sleep(600)"
    holders = [
        c.popen(h, [sys.executable, "-c", hold], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in c.hosts
    ]
    try:
        netns.wait_for(lambda: all(f":{port + 1000:04X} " in _listening(c, h) for h in c.hosts), 30, "port holders up")
        d = driver(c, exp, "--force", "--only", "mrr=16", f"results_dir={workdir / 'busy'}")
        rc = d.wait(timeout=120)
        assert rc == 1, d.text()[-3000:]
        bad = points(workdir / "busy").row(0, named=True)
        assert bad["status"] == "failed" and bad["failure_phase"] == "preflight", bad["failure_reason"]
        assert f"--dist-init-addr port {port + 1000} is in use" in bad["failure_reason"], bad["failure_reason"]
        assert ip_in(bad["host"]) in bad["failure_reason"]
    finally:
        for h in holders:
            h.kill()
            h.wait()
    assert_nothing_left(c)


def _listening(c: netns.NetnsCluster, node: str) -> str:
    return c.run(node, ["cat", "/proc/net/tcp"], timeout=10).stdout


def test_hosts_command_and_token_auth(healthy):
    c = healthy
    r = c.run("head", [sys.executable, "-m", "sweep", "hosts"], env=c.driver_env(COLUMNS="200"), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "3 hosts advertising 'gpu_host'" in r.stdout
    for ip in host_ips():
        assert f"@{ip}" in r.stdout, r.stdout
    # a driver without the token is refused by the head (Ray retries it forever: cut short here)
    env = {k: v for k, v in c.driver_env(HOME=str(c.root / "tokenless")).items() if not k.startswith("RAY_AUTH")}
    d = c.start("head", [sys.executable, "-m", "sweep", "hosts"], env=env)
    try:
        netns.wait_for(lambda: d.find("InvalidAuthToken") or d.proc.poll() is not None, 60, d.text)
        assert d.find("InvalidAuthToken"), d.text()[-2000:]
    finally:
        d.proc.kill()
        d.wait(timeout=30)
    # a host without the token is refused by the bootstrap script before ray start
    env = {k: v for k, v in c.env("h1", HOME=str(c.root / "tokenless")).items() if k != "RAY_AUTH_TOKEN_PATH"}
    r = c.run("h1", ["bash", "cluster/host-bootstrap.sh", "worker", netns.ip_of("head")], env=env, timeout=60)
    assert r.returncode == 2 and "no Ray auth token on this host" in r.stderr, r.stderr
