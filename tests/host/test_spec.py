"""A launch's spec: its flags are the one source of the server's command line and of what the host
checks; the runner's placement (port, node flags) is laid over them, never written into them (pure:
no process starts)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweep.core.settings import BenchSettings
from sweep.experiment.config import CpuConfig
from sweep.host.cpu import AMX_BACKEND_FLAGS
from sweep.host.point import LaunchPoint, LaunchSpec, Placement
from sweep.sglang.args import flag_value, with_node_flags
from tests.argvs import argv_value

LAUNCHER = ["python", "-m", "sglang.launch_server"]


def spec(**flags) -> LaunchSpec:
    return LaunchSpec(
        "s",
        LAUNCHER,
        {"model-path": "/m", "tp-size": 8, "port": 30000, **flags},
        {},
        "/tmp/x.log",
        [LaunchPoint("p1", "label", BenchSettings())],
        launcher_args=["--fake-speed", "20"],
    )


def test_the_argv_is_built_from_the_flags():
    s = spec(**{"speculative-num-steps": 2, "enable-metrics": True, "disable-cuda-graph": False, "api-key": "sk-x"})
    assert s.argv == [
        *LAUNCHER,
        "--model-path",
        "/m",
        "--tp-size",
        "8",
        "--port",
        "30000",
        "--speculative-num-steps",
        "2",
        "--enable-metrics",
        "--api-key",
        "sk-x",
        "--fake-speed",
        "20",
    ]
    assert s.port == 30000 and s.flag("speculative-num-steps") == "2" and s.flag("disable-cuda-graph") is None
    assert s.flag("api-key") == "sk-x" and s.secrets == ["sk-x"]
    # what a flag reads is what the argv says, for every value kind
    for name in ("model-path", "tp-size", "port", "speculative-num-steps", "api-key"):
        assert s.flag(name) == argv_value(s.argv, f"--{name}"), name
    moved = replace(s, flags={**s.flags, "port": 31001})  # the runner's change for a simulated host
    assert moved.port == 31001 and argv_value(moved.argv, "--port") == "31001" and s.port == 30000


def test_flag_value_aliases_and_kinds():
    flags = {
        "model": "/a",
        "model-path": "/b",
        "cuda-graph-bs": [1, 2, 4],
        "mem-fraction-static": 0.8,
        "trust-remote-code": True,
        "x": None,
    }
    assert flag_value(flags, "model-path", "model") == "/b"  # the later in the map wins
    assert flag_value({"model-path": "/b", "model": "/a"}, "model-path", "model") == "/a"
    assert flag_value(flags, "cuda-graph-bs") == "1 2 4" and flag_value(flags, "mem-fraction-static") == "0.8"
    assert flag_value(flags, "trust-remote-code") == "true"
    assert flag_value(flags, "x") is None and flag_value(flags, "absent") is None


def test_node_flags_are_replaced_on_a_retry():
    first = with_node_flags(spec().flags, 2, 1, "10.0.0.1:31000")
    assert (first["nnodes"], first["node-rank"], first["dist-init-addr"]) == (2, 1, "10.0.0.1:31000")
    again = with_node_flags(first, 2, 0, "10.0.0.7:31000")  # the retry's hosts: new IP, this node now rank 0
    argv = replace(spec(), flags=again).argv
    assert argv.count("--dist-init-addr") == 1 and argv_value(argv, "--dist-init-addr") == "10.0.0.7:31000"
    assert argv_value(argv, "--node-rank") == "0" and argv_value(argv, "--model-path") == "/m"


def test_where_a_server_runs_is_laid_over_its_flags_never_written_into_them():
    planned = spec(nnodes=4, **{"node-rank": 3})  # node flags an earlier attempt (or the user) set
    placed = replace(planned, placement=Placement(port=31001, nnodes=2, node_rank=1, dist_init_addr="10.0.0.1:32000"))
    assert placed.flags == planned.flags and placed.flags["port"] == 30000  # the plan's flags as they were
    assert placed.port == 31001 and placed.flag("node-rank") == "1" and placed.flag("nnodes") == "2"
    argv = placed.argv
    assert argv.count("--port") == 1 and argv_value(argv, "--port") == "31001"
    assert argv.count("--nnodes") == 1 and argv_value(argv, "--dist-init-addr") == "10.0.0.1:32000"
    one_host = replace(planned, placement=Placement(port=31001))  # its own node flags kept (a CPU host's nnodes)
    assert one_host.server_flags == {**planned.flags, "port": 31001} and planned.server_flags == planned.flags


def test_a_launch_is_named_by_its_first_point_and_serves_at_least_one():
    """The launch's own names (its marker, a result made for it as a whole) are its first point's id."""
    two = replace(spec(), points=[LaunchPoint("a", "a:1", BenchSettings()), LaunchPoint("b", "b:2", BenchSettings())])
    assert two.key == "a" and two.point_ids == ["a", "b"]
    with pytest.raises(ValueError, match="at least one point"):
        replace(two, points=[])


def test_what_the_flags_say_is_read_from_them_and_the_hosts_it_spans_is_the_placement():
    """The device, tensor parallelism and CPU flags needed are the flags' (never given twice); the
    hosts one server spans are the runner's reckoning (tp_size over a host's GPUs), laid over nothing
    until the runner places it on its hosts."""
    gpu = spec()
    assert (gpu.device, gpu.tp_size, gpu.nnodes, gpu.local_gpus) == ("cuda", 8, 1, 8)
    spread = replace(gpu, placement=Placement(nnodes=2))
    assert (spread.nnodes, spread.local_gpus) == (2, 4) and spread.argv == gpu.argv  # not placed yet
    cpu = replace(spec(device="cpu"), cpu=CpuConfig(required_flags=["avx2", "amx_bf16"]))
    assert cpu.device == "cpu"
    assert cpu.cpu_flags_needed == [*AMX_BACKEND_FLAGS, "avx2", "amx_bf16"]  # intel_amx's by default
    torch = replace(cpu, flags={**cpu.flags, "attention-backend": "torch_native"})
    assert torch.cpu_flags_needed == ["avx2", "amx_bf16"]
