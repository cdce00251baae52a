"""Scheduling efficiency of the sweep on Ray, measured on a local cluster of simulated hosts.

Runs a grid of points with known durations (stand-ins for run_launch that sleep) on H simulated
hosts and prints, side by side in one run:
- ideal makespan over the measured one (target >= 0.9 at H=3, 12 points). The ideal is the
  makespan of the same points, in the same order, handed to the first free host with zero
  overhead (list scheduling, what Ray does with a queue of equal tasks); the absolute lower bound
  sum/H is printed beside it;
- orchestration overhead per point: host-time spent outside the points, divided by the number of
  points (target < 1 s);
for each worker policy: reused workers (the default) and a fresh worker per point (max_calls=1).

    python tests/perf/scheduling.py [--hosts 3] [--points 12]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from ray import cloudpickle  # noqa: E402

from sweep.core.settings import BenchSettings  # noqa: E402
from sweep.host.point import LaunchPoint, LaunchSpec  # noqa: E402
from sweep.orchestrate import cluster  # noqa: E402
from sweep.orchestrate.ray_runner import HostSetup, Runner  # noqa: E402
from tests.orchestrate import standins  # noqa: E402


def measure(hosts_n: int, durations: list[float], fresh_workers: bool, tmp: Path) -> dict:
    hosts = cluster.require_hosts("gpu_host", 8)
    setups = {h.node_id: HostSetup(h, 33000 + h.index, str(tmp / h.name)) for h in hosts}
    runner = Runner("gpu_host", 8, setups, run_fn=standins.timed_point, fresh_workers=fresh_workers)
    specs = [
        LaunchSpec("perf", ["x"], {"port": 1}, {}, "/dev/null", [LaunchPoint(f"p{i}", f"p{i}:{d}", BenchSettings())])
        for i, d in enumerate(durations)
    ]
    t0 = time.monotonic()
    outs = list(runner.run(specs, lambda *a: None))
    makespan = time.monotonic() - t0
    free = [0.0] * hosts_n
    for d in durations:  # zero-overhead list scheduling in submission order
        free[free.index(min(free))] += d
    ideal = max(free)
    busy = sum(r.ended_at - r.started_at for o in outs for r in o.result.points)
    return {
        "makespan": makespan,
        "ideal": ideal,
        "efficiency": ideal / makespan,
        "bound": max(sum(durations) / hosts_n, max(durations)),
        "overhead_per_point": (makespan * hosts_n - busy) / len(durations),
        "in_point_overhead": (busy - sum(durations)) / len(durations),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--points", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    durations = [round(rng.uniform(4.0, 8.0), 1) for _ in range(a.points)]
    cloudpickle.register_pickle_by_value(standins)
    t = time.monotonic()
    sim = cluster.SimulatedCluster(a.hosts, "gpu_host", 8)
    print(
        f"cluster of {a.hosts} simulated hosts up in {time.monotonic() - t:.1f} s; "
        f"{a.points} points, durations {min(durations)}-{max(durations)} s, total {sum(durations):.1f} s"
    )
    try:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            rows = [
                (name, measure(a.hosts, durations, fresh, Path(tmp)))
                for name, fresh in (("reused workers", False), ("fresh worker per point", True))
            ]
    finally:
        sim.shutdown()
    print(
        f"{'policy':<24} {'sum/H s':>8} {'ideal s':>8} {'measured s':>11} {'efficiency':>11} {'overhead/point s':>17}"
    )
    for name, m in rows:
        print(
            f"{name:<24} {m['bound']:8.1f} {m['ideal']:8.1f} {m['makespan']:11.1f} {m['efficiency']:11.3f} "
            f"{m['overhead_per_point']:17.2f}"
        )
    print("targets: efficiency >= 0.9 at H=3, 12 points; overhead < 1 s per point")


if __name__ == "__main__":
    main()
