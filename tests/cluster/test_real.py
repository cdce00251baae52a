"""Real SGLang (its CPU backend, the install of tests/real) on the cluster of network namespaces:
one real point per host, each server in its host's namespace; and one server over two hosts
(``--nnodes 2``, tp 2: one rank per host, gloo over the bridge, rendezvous at the leader's
``--dist-init-addr``). Skipped with the reason where the CPU SGLang is not installed."""

from __future__ import annotations

import json
import sys
import textwrap
import time

import polars as pl
import pytest

from sweep.results import load
from tests.cluster import netns
from tests.cluster.conftest import TIMINGS
from tests.cluster.test_sweep import assert_nothing_left, host_ips, ip_in

pytestmark = [pytest.mark.netns, pytest.mark.timeout(900)]

REAL = """
name: {name}
cluster: {{host_resource: gpu_host, gpus_per_host: 0, max_host_failures: 1}}
server:
  launcher: [{python}, -m, sglang.launch_server]
  model_path: {models}/target
  tp_size: {tp}
  port: {port}
  flags: {{device: cpu, attention-backend: {backend}, disable-overlap-schedule: true, max-total-tokens: 4096,
          enable-metrics: true{extra_flags}}}
  env: {env}
  timeouts: {{load_s: 400, capture_s: 400, ready_s: 300, total_s: 600, stall_s: 300, stop_grace_s: 20}}
  reap: {{wait_s: 20}}
  cpu: {{min_free_mem_gib: 1.0}}
grid:
  axes:
    mrr: {{flag: max-running-requests, values: {values}}}
benchmark:
  prompts: coding
  server_metrics: false
  single_stream: {{runs: 1, warmup: 1, max_tokens: 16}}
  concurrency: {{levels: [1, 2], rounds: 1, max_tokens: 8}}
  request_timeout_s: 180
results_dir: {results}
"""


@pytest.fixture(scope="module")
def real():
    from tests.real.conftest import find_real_sglang

    found, why = find_real_sglang()
    if found is None:
        pytest.skip(why)
    return found


def real_experiment(
    d,
    real,
    name: str,
    *,
    values,
    tp: int = 1,
    port: int = 31700,
    extra_flags: str = "",
    env: dict | None = None,
    backend: str | None = None,
):
    p = d / f"{name}.yaml"
    p.write_text(
        textwrap.dedent(REAL).format(
            name=name,
            python=real.python,
            models=real.models,
            tp=tp,
            port=port,
            backend=backend or real.attention_backend,
            extra_flags=extra_flags,
            env=json.dumps({**real.env, "OMP_NUM_THREADS": "1", **(env or {})}),
            values=list(values),
            results=d / "res",
        )
    )
    return p


def run_real(c: netns.NetnsCluster, exp, timeout: float) -> tuple[int, str, float, netns.Watch]:
    t0 = time.monotonic()
    with netns.Watch(c, every=1.0) as watch:
        d = c.start("head", [sys.executable, "-m", "sweep", str(exp)], env=c.driver_env())
        rc = d.wait(timeout=timeout)
    return rc, d.text(), time.monotonic() - t0, watch


def test_one_real_point_per_host(healthy, workdir, real):
    c = healthy
    exp = real_experiment(workdir, real, "real_per_host", values=(4, 6, 8))
    rc, out, took, watch = run_real(c, exp, 840)
    pts = load(workdir / "res")["points"].collect()
    assert pts.height == 3, out[-4000:]
    assert (pts["status"] == "ok").all(), pts.select("label", "host", "failure_phase", "failure_reason").rows()
    assert rc == 0, out[-4000:]
    assert {ip_in(h) for h in pts["host"]} == set(host_ips()), pts.select("label", "host").rows()
    for row in pts.iter_rows(named=True):
        assert watch.where(row["point_id"]) == [host_ips()[ip_in(row["host"])]], (
            row["label"],
            watch.where(row["point_id"]),
        )
        assert row["gpu_name"] == "cpu" and row["startup_s"] > 0
    levels = load(workdir / "res")["levels"].collect()
    assert levels.height == 6 and (levels["failed"] == 0).all()
    assert_nothing_left(c, timeout=90)
    TIMINGS["real_per_host"] = {"sweep_s": took, "startup_s": max(pts["startup_s"])}


# SGLang's CPU backend binds each TP rank's threads by its global rank, as if all ranks were on one
# machine: one core each (the hosts export SGLANG_HOST_IP and GLOO_SOCKET_IFNAME themselves, see
# netns.NetnsCluster.bootstrap)
TWO_HOSTS_ENV = {"SGLANG_CPU_OMP_THREADS_BIND": "0|1"}


def test_a_server_over_two_hosts_where_sglang_sees_amx_is_refused_before_launch(healthy, workdir, real):
    """Where SGLang sees AMX it reduces TP over this host's /dev/shm only (LOCAL_SIZE = TP size): over two
    hosts, each with its own /dev/shm, it hangs after ``Init torch distributed begin.`` until the stall
    timeout (seen in CI on a Zen 4). Pre-flight says so in seconds. On a CPU where the install sees no
    AMX, the claim of ../shared/sglang-cpu/avx512 makes it see AMX, as on a Zen 4."""
    c = healthy
    claim = {} if real.amx else {"PYTHONPATH": str(netns.REPO.parent / "shared" / "sglang-cpu" / "avx512")}
    exp = real_experiment(
        workdir,
        real,
        "real_two_hosts_amx",
        values=(4,),
        tp=2,
        port=31850,
        extra_flags=", nnodes: 2",
        env={**TWO_HOSTS_ENV, **claim},
    )
    rc, out, took, watch = run_real(c, exp, 300)
    pts = load(workdir / "res")["points"].collect()
    assert pts.height == 1, out[-4000:]
    row = pts.row(0, named=True)
    assert (row["status"], row["failure_phase"]) == ("failed", "preflight"), (row["failure_reason"], out[-3000:])
    assert "--nnodes 2" in row["failure_reason"] and "Init torch distributed begin" in row["failure_reason"]
    assert "SWEEP_SGLANG_AMX: '0'" in row["failure_fix"]
    assert watch.where(row["point_id"]) == [], "no server may start"
    TIMINGS["real_two_hosts_amx_refused"] = {"sweep_s": took}


def test_real_server_over_two_hosts(healthy, workdir, real):
    """``--nnodes 2``: SGLang's CPU backend reduces over torch.distributed (gloo) when the ranks are not
    on one machine and it sees no AMX (SWEEP_SGLANG_AMX=0, on every path of the installer); gloo is
    told the interface (GLOO_SOCKET_IFNAME), as on any multi-NIC host."""
    c = healthy
    port = 31800
    exp = real_experiment(
        workdir,
        real,
        "real_two_hosts",
        values=(4,),
        tp=2,
        port=port,
        extra_flags=", nnodes: 2",
        env={**TWO_HOSTS_ENV, "SWEEP_SGLANG_AMX": "0"},
        backend="torch_native",
    )
    rc, out, took, watch = run_real(c, exp, 840)
    pts = load(workdir / "res")["points"].collect()
    assert pts.height == 1, out[-4000:]
    row = pts.row(0, named=True)
    assert row["status"] == "ok", (row["failure_phase"], row["failure_reason"], (row["log_tail"] or "")[-3000:])
    assert rc == 0, out[-4000:]
    argv = row["argv"]
    leader_ip = ip_in(row["host"])
    assert argv[argv.index("--dist-init-addr") + 1] == f"{leader_ip}:{port + 1000}"
    assert len(watch.where(row["point_id"])) == 2, watch.where(row["point_id"])
    levels = load(workdir / "res")["levels"].filter(pl.col("point_id") == row["point_id"]).collect()
    assert levels.height == 2 and (levels["failed"] == 0).all()
    assert_nothing_left(c, timeout=90)
    TIMINGS["real_two_hosts"] = {"sweep_s": took, "startup_s": row["startup_s"]}
