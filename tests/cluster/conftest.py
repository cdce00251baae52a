"""The cluster tier: one Ray cluster of network namespaces (tests/cluster/netns.py) for the whole
session, torn down at the end, on a failure, on Ctrl-C (pytest tears session fixtures down then),
on SIGTERM, and at exit; what a killed earlier run left is removed before it starts. Every name it
makes carries this run's tag (netns.TAG), and it removes and checks only this run's: two runs on one
machine leave each other be."""

from __future__ import annotations

import atexit
import signal
from pathlib import Path

import pytest

from tests.cluster import netns
from tests.experiments import experiment, write

TIMINGS: dict[str, dict] = {}  # what the tests measured, printed at the end of the session


def pytest_terminal_summary(terminalreporter):
    if not TIMINGS:
        return
    terminalreporter.section("netns cluster: measured seconds")
    for what, t in TIMINGS.items():
        terminalreporter.write_line(
            f"{what}: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in t.items())
        )


@pytest.fixture(scope="session")
def cluster(request):
    why = netns.unavailable()
    if why:
        pytest.skip(why)
    c = netns.NetnsCluster()
    ray_current = Path("/tmp/ray/ray_current_cluster")  # address=auto finds a cluster by it: never ours
    before = _file_state(ray_current)  # other processes' local Ray may write it meanwhile: not ours to judge

    def down() -> None:
        ours = {f"{netns.ip_of(n)}:" for n in ("head", *c.hosts)}
        c.down()
        left = netns.leftovers()
        assert not left, f"the netns cluster left: {left}"
        now = _file_state(ray_current)
        assert now == before or not any(now[1].startswith(a) for a in ours), (
            f"{ray_current} was written with this run's cluster: {now[1]!r}"
        )

    request.addfinalizer(down)  # before up(): a cluster that came up halfway is removed too
    atexit.register(netns.cleanup)
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):  # a CI runner's SIGTERM: unwind like Ctrl-C, so the finalizers run
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    request.addfinalizer(lambda: signal.signal(signal.SIGTERM, previous))
    c.up()
    TIMINGS["cluster_up"] = dict(c.timings)
    yield c


def _file_state(p: Path) -> tuple[int | None, str]:
    """(mtime in ns, content) of a file; (None, "") where there is none."""
    try:
        return p.stat().st_mtime_ns, p.read_text().strip()
    except OSError:
        return None, ""


@pytest.fixture
def healthy(cluster):
    """The cluster with all three hosts alive and no server of an earlier test left on any host."""
    restarted = cluster.heal()
    if restarted:
        print(f"restarted {restarted}")
    for node in ("head", *cluster.hosts):
        netns.wait_for(
            lambda n=node: not cluster.servers(n), 60, lambda n=node: f"servers left on {n}: {cluster.servers(n)}"
        )
    return cluster


@pytest.fixture
def workdir(cluster, request) -> Path:
    d = cluster.root / "tests" / request.node.name
    d.mkdir(parents=True, exist_ok=True)
    return d


def fake_experiment(
    d: Path,
    name: str,
    *,
    tp: int = 8,
    port: int = 32900,
    values=(16, 32, 48),
    runs: int = 2,
    tokens: int = 32,
    speed: float = 4,
    max_host_failures: int = 2,
) -> Path:
    """A small fake-server experiment (the benchmark scaled like --dry-run), one point per value."""
    exp = experiment(
        name=name,
        cluster={"host_resource": "gpu_host", "gpus_per_host": 8, "max_host_failures": max_host_failures},
        server={
            "tp_size": tp,
            "port": port,
            "flags": {"enable-metrics": True, "max-running-requests": None},
            "timeouts": {
                "stall_s": 30,
                "load_s": 90,
                "capture_s": 90,
                "ready_s": 90,
                "total_s": 180,
                "stop_grace_s": 3,
            },
            "reap": {"wait_s": 10},
        },
        grid={"axes": {"mrr": {"flag": "max-running-requests", "values": list(values)}}},
        benchmark={
            "server_metrics": False,
            "single_stream": {"runs": runs, "max_tokens": tokens},
            "concurrency": {"max_tokens": tokens},
        },
        dry_run={"hosts": None, "fake_speed": speed, "fake_startup_speed": 100, "single_stream_runs": runs},
    )
    return write(d / f"{name}.yaml", exp, results_dir=d / "res")
