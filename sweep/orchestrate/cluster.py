"""Joining the Ray cluster and finding its GPU hosts, or starting simulated ones for a dry run.

A GPU host is a Ray node that advertises the experiment's host resource (``gpu_host: 1``, see
cluster/). Hosts are keyed by node id: in a dry run every simulated host shares one IP.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import ray

from sweep.core import ClusterError
from sweep.host import free_port

_SIM_PREFIX = "sim_host_"


@dataclass(frozen=True)
class Host:
    node_id: str
    name: str
    index: int  # position in the sorted host list: dry runs give each host its own port
    gpus: int
    resources: dict = field(default_factory=dict, hash=False, compare=False)


def connect(address: str | None) -> None:
    """Join a running cluster (``address``, ``RAY_ADDRESS`` or ``auto``)."""
    addr = address or os.environ.get("RAY_ADDRESS") or "auto"
    has_token = (
        os.environ.get("RAY_AUTH_TOKEN")
        or os.environ.get("RAY_AUTH_TOKEN_PATH")
        or (Path.home() / ".ray" / "auth_token").is_file()
    )
    if has_token and "RAY_AUTH_MODE" not in os.environ:
        # a driver that has the cluster's token but not the mode retries InvalidAuthToken forever
        os.environ["RAY_AUTH_MODE"] = "token"
    if addr != "auto":
        _require_reachable(addr)
    try:
        ray.init(address=addr, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ClusterError(
            f"no Ray cluster to join at {addr}: {str(e).splitlines()[0]}",
            fix="start one (see cluster/README.md), set RAY_ADDRESS, or try the experiment "
            "with --dry-run on this machine",
        ) from None


def _require_reachable(addr: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, not minutes: ray.init retries an unreachable GCS for a long time."""

    target = addr.removeprefix("ray://")
    if "://" in target:  # e.g. a dashboard http:// address: let Ray judge it
        return
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as e:
        raise ClusterError(
            f"no Ray cluster answers at {addr}: {e.strerror or e}",
            fix="check the head's address and port (ray status on the head), or try the "
            "experiment with --dry-run on this machine",
        ) from None


def node_names(nodes: list[dict]) -> dict[str, str]:
    """Node id -> host name for live nodes: the simulated host's name, else the hostname. Hosts that
    share a hostname (containers or network namespaces cloned from one image) are told apart by IP,
    ``hostname@IP``, which also keeps a host's name when it rejoins with a new node id; nodes that
    share the IP too (several raylets on one machine) get their node id's prefix as well."""

    def base(n: dict) -> str:
        sim = sorted(k for k in n.get("Resources", {}) if k.startswith(_SIM_PREFIX))
        return sim[0].replace("_", "-") if sim else n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or "?"

    live = [n for n in nodes if n.get("Alive")]
    names = {n["NodeID"]: base(n) for n in live}
    for key in (
        lambda n: f"{names[n['NodeID']]}@{n.get('NodeManagerAddress')}",
        lambda n: f"{names[n['NodeID']]}:{n['NodeID'][:8]}",
    ):
        counts: dict[str, int] = {}
        for n in live:
            counts[names[n["NodeID"]]] = counts.get(names[n["NodeID"]], 0) + 1
        names.update(
            {
                n["NodeID"]: key(n)
                for n in live
                if counts[names[n["NodeID"]]] > 1 and not names[n["NodeID"]].startswith("sim-host-")
            }
        )
    return names


def hosts(resource: str) -> list[Host]:
    """The live nodes advertising ``resource``, in a stable order."""
    found = []
    nodes = ray.nodes()
    names = node_names(nodes)
    for n in nodes:
        res = n.get("Resources", {})
        if not n.get("Alive") or res.get(resource, 0) < 1:
            continue
        found.append((names[n["NodeID"]], n["NodeID"], int(res.get("GPU", 0)), res))
    found.sort()
    return [Host(node_id, name, i, gpus, res) for i, (name, node_id, gpus, res) in enumerate(found)]


def require_hosts(resource: str, gpus_per_host: int) -> list[Host]:
    hs = hosts(resource)
    if not hs:
        seen = sorted(
            {
                k
                for n in ray.nodes()
                if n.get("Alive")
                for k in n.get("Resources", {})
                if not k.startswith("node:") and k not in ("CPU", "memory", "object_store_memory")
            }
        )
        raise ClusterError(
            f"no node of the cluster advertises the host resource {resource!r} "
            f"(resources seen: {', '.join(seen) or 'none'})",
            fix=f"start each GPU host with ray start --resources='{{\"{resource}\": 1}}' "
            "(cluster/host-bootstrap.sh), or set cluster.host_resource to the one you use",
        )
    short = [h for h in hs if h.gpus < gpus_per_host]
    if short:
        raise ClusterError(
            f"{'host' if len(short) == 1 else 'hosts'} {', '.join(h.name for h in short)} "
            f"{'advertises' if len(short) == 1 else 'advertise'} fewer than "
            f"cluster.gpus_per_host={gpus_per_host} GPUs",
            fix="set cluster.gpus_per_host to what the hosts have, or fix their ray start --num-gpus",
        )
    return hs


def _reap_dead_simulation(state_file: Path) -> list[int]:
    """Kill what a dry run whose driver was killed outright (``kill -9``) left running: Ray's agent
    processes outlive the local cluster's driver. They are found by the dead driver's process group,
    recorded in ``state_file``, and only if orphaned (parent is init) and Ray's own."""

    import psutil  # lazy: only this path needs it

    try:
        old = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return []
    if psutil.pid_exists(int(old.get("pid", 0))):
        return []  # that driver still runs
    killed = []
    for p in psutil.process_iter(["name", "ppid"]):
        try:
            if (
                os.getpgid(p.pid) == old.get("pgid")
                and p.info["ppid"] == 1
                and (p.info["name"] or "").startswith(("ray::", "raylet", "gcs_server"))
            ):
                p.kill()
                killed.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            continue
    return killed


class SimulatedCluster:
    """A local multi-node Ray cluster: one head and ``n`` simulated GPU hosts, each with fake GPUs.

    The driver's pid and process group go to ``state_file``, so that the next dry run can remove
    what a killed driver left behind."""

    def __init__(self, n: int, resource: str, gpus_per_host: int, state_file: Path | None = None):

        from ray.cluster_utils import Cluster  # lazy: Ray takes about a second to import; only this path needs it

        if state_file is not None:
            _reap_dead_simulation(state_file)
            state_file.parent.mkdir(parents=True, exist_ok=True)
            state_file.write_text(json.dumps({"pid": os.getpid(), "pgid": os.getpgid(0)}))
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        logging.getLogger("ray").setLevel(logging.WARNING)
        with _ports_of_its_own():
            # the head's dashboard agent would listen on Ray's fixed 52365 (the other nodes' get 0 from
            # cluster_utils): 0 lets it take a free one, as every other port of the cluster does
            self.cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 1,
                    "object_store_memory": 150 * 2**20,
                    "include_dashboard": False,
                    "dashboard_agent_listen_port": 0,
                },
            )
            for i in range(n):
                self.cluster.add_node(
                    num_cpus=2,
                    num_gpus=gpus_per_host,
                    object_store_memory=100 * 2**20,
                    resources={resource: 1, f"{_SIM_PREFIX}{i}": 1},
                )
        ray.init(address=self.cluster.address, log_to_driver=False, configure_logging=False)
        self.cluster.wait_for_nodes()

    def shutdown(self) -> None:
        try:
            ray.shutdown()
        finally:
            with _ports_of_its_own():
                self.cluster.shutdown()


# Ray's fixed ports a local cluster's head would take (Ray 2.60; each read from the environment by
# the process that binds it, which the head starts): a second cluster on the machine, another sweep's
# dry run, would find them taken (its metrics servers then fail to start)
_FIXED_PORT_ENV = ("AUTOSCALER_METRIC_PORT", "DASHBOARD_METRIC_PORT")  # 44217, 44227


@contextlib.contextmanager
def _ports_of_its_own() -> Iterator[None]:
    """While a local cluster starts (or stops): Ray's fixed ports (``_FIXED_PORT_ENV``) chosen free
    for it, unless set already; and Ray's address file, ``<temp dir>/ray/ray_current_cluster`` (what
    ``ray.init(address="auto")`` and ``ray status`` read), left alone: ``Cluster`` writes its address
    there and deletes the file when it shuts down, which would take it over from, then remove it
    for, a cluster started with ``ray start`` on this machine or another sweep's dry run. This driver
    connects by the cluster's address and reads no such file."""
    import ray._common.utils as common_utils  # lazy: Ray takes about a second to import; only this path needs it
    import ray._private.utils as private_utils  # lazy: Ray takes about a second to import; only this path needs it

    set_here = [k for k in _FIXED_PORT_ENV if k not in os.environ]
    for k in set_here:
        os.environ[k] = str(free_port("0.0.0.0"))
    write, reset = private_utils.write_ray_address, common_utils.reset_ray_address
    private_utils.write_ray_address = lambda *a, **k: None
    common_utils.reset_ray_address = lambda *a, **k: None
    try:
        yield
    finally:
        private_utils.write_ray_address, common_utils.reset_ray_address = write, reset
        for k in set_here:
            os.environ.pop(k, None)
