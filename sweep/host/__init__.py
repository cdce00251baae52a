"""A GPU host's side of a point: the pre-flight checks, the server's launch and its startup phases, the
benchmark of each point of the launch, the reaping of every process it left, and the GPUs' power
(``run_launch``, ``run_follower`` for the other nodes of a server over several hosts). Reached by the
orchestrator through a Ray task; imports neither Ray nor the analysis."""

from sweep.host.gpu import FakeGpus, power_source, real_probe
from sweep.host.point import HostContext, LaunchPoint, LaunchSpec, Placement, run_follower, run_launch
from sweep.host.ports import free_port
from sweep.host.preflight import sglang_version

__all__ = [
    "FakeGpus",
    "HostContext",
    "LaunchPoint",
    "LaunchSpec",
    "Placement",
    "free_port",
    "power_source",
    "real_probe",
    "run_follower",
    "run_launch",
    "sglang_version",
]
