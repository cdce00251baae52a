"""The benchmark a host runs against a server: the HTTP client (``client``), closed-loop levels and
open-loop rates (``load``, ``openloop``, ``arrivals``), early stop and refinement (``stop``,
``refine``), the server's /metrics and GPU power (``server_metrics``, ``power``), the workloads
(``workloads``), and ``sweep bench`` by hand (``cli``, ``report``). Method: sweep/bench/README.md."""

from sweep.bench.client import Endpoint, auth_headers, send_one
from sweep.bench.power import POWER_EVERY_S, Recorder, only, with_nodes
from sweep.bench.runner import run
from sweep.bench.workloads import check_experiment

# cli: modules other rooms use as namespaces, imported on first use

__all__ = [
    "Endpoint",
    "POWER_EVERY_S",
    "Recorder",
    "auth_headers",
    "check_experiment",
    "cli",
    "only",
    "run",
    "send_one",
    "with_nodes",
]
