"""``python -m sweep hosts``: the GPU hosts the cluster offers, as a sweep would see them.

For each node advertising the host resource: its resources, its GPUs (through NVML, on the host)
and the SGLang version importable there. The quickest check that a new cluster is ready.
"""

from __future__ import annotations

import argparse
import sys

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from rich.console import Console
from rich.table import Table

from sweep.core import PointFailure, plural
from sweep.host import real_probe, sglang_version
from sweep.orchestrate import cluster


def _probe_host() -> dict:

    probe = real_probe()
    gpus = probe.gpus()
    try:
        version = sglang_version([sys.executable, "-m", "sglang.launch_server"])
    except PointFailure as e:
        version = f"not importable ({e.reason[:60]})"
    return {"gpus": f"{len(gpus)} x {gpus[0].name}" if gpus else getattr(probe, "reason", "none"), "sglang": version}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or auto)")
    p.add_argument("--resource", default="gpu_host", help="the host resource (cluster.host_resource)")


def run_cli(args: argparse.Namespace) -> int:
    cluster.connect(args.address)
    try:
        hosts = cluster.require_hosts(args.resource, 0)
        task = ray.remote(_probe_host)
        refs = [
            task.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(h.node_id, soft=False)).remote()
            for h in hosts
        ]
        t = Table(title=f"{plural(len(hosts), 'host')} advertising {args.resource!r}", title_justify="left")
        for c in ("host", "node id", "Ray GPUs", "GPUs (NVML)", "SGLang", "resources"):
            t.add_column(c)
        for h, ref in zip(hosts, refs):
            try:
                info = ray.get(ref, timeout=180)
            except Exception as e:  # a host that cannot run a task is itself the finding
                info = {"gpus": "?", "sglang": f"probe failed: {type(e).__name__}"}
            res = ", ".join(
                f"{k}={v:g}"
                for k, v in sorted(h.resources.items())
                if not k.startswith(("node:", "memory", "object_store"))
            )
            t.add_row(h.name, h.node_id[:12], str(h.gpus), info["gpus"], info["sglang"], res)
        Console().print(t)
    finally:
        ray.shutdown()
    return 0
