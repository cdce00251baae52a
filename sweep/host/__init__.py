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
