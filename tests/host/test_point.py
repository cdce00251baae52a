"""One grid point end to end against the fake server: every path of launch, wait, fail, stop, reap.

After every test, no process carrying the test's marker is left (checked, not assumed)."""

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.experiment.config import ReapConfig, Timeouts
from sweep.host import reaper
from sweep.host.point import LaunchPoint, LaunchSpec, run_launch
from tests.conftest import free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

FAKE = [sys.executable, "-m", "sweep.fake"]
SPEC_FLAGS = {
    "speculative-algorithm": "EAGLE3",
    "speculative-draft-model-path": "/drafters/d",
    "speculative-num-steps": 2,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 3,
}
TINY = BenchSettings(
    prompts="coding",
    server_metrics=False,
    single_stream=SingleStreamSettings(runs=2, warmup=1, max_tokens=16),
    concurrency=ConcurrencySettings(levels=[1, 4], rounds=1, max_tokens=16),
)


SWEEP = f"test-point-{uuid.uuid4().hex[:6]}"


def make_spec(tmp_path, *extra, flags=None, timeouts=None, bench=TINY, point_id=None, more=(), **kw) -> LaunchSpec:
    """A launch of the fake: ``flags`` the server's ({name: value}), ``extra`` the fake's own options;
    its point (``point_id``, else a new one), then ``more`` (client-side axes)."""
    flags = {"model-path": "/models/m", "tp-size": 2, "port": free_port(), **(flags or {})}
    return LaunchSpec(
        SWEEP,
        FAKE,
        flags,
        {},
        str(tmp_path / "server.log"),
        [LaunchPoint(point_id or "p" + uuid.uuid4().hex[:8], "label", bench), *more],
        timeouts or Timeouts(stall_s=20, load_s=30, capture_s=30, ready_s=30, total_s=60, stop_grace_s=2),
        ReapConfig(wait_s=5),
        real_paths=False,
        launcher_args=["--fake-speed", "20", "--fake-startup-speed", "400", *extra],
        **kw,
    )


def test_ready_with_phase_timings_and_tables(tmp_path, host):
    spec = make_spec(tmp_path, flags=SPEC_FLAGS)
    stages = []
    [r] = run_launch(spec, host, lambda e: stages.append(e.stage)).points
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-2000:])
    for k in ("load_s", "kv_cache_s", "capture_s", "draft_capture_s", "http_s", "ready_s", "startup_s"):
        assert r.phases[k] is not None and r.phases[k] >= 0, k
    assert r.phases["startup_s"] >= r.phases["load_s"]
    assert r.sglang_version and r.gpu_count == 8 and "simulated" in r.gpu_name
    assert r.levels.num_rows == 2 and r.single_stream.num_rows == 2
    assert stages[:2] == ["preflight", "load"] and "capture" in stages and "benchmark" in stages
    assert r.reaped["port_free"] and r.reaped["gpu_free"]
    assert host.probe.processes() == []  # every rank gave its GPU memory back
    assert r.adaptive is None and set(r.levels.column("adaptive_switches").to_pylist()) == {None}  # not asked for


def test_capture_oom_explained_from_the_log_of_the_dead_server(tmp_path, host):
    # noticed as a death (the exit, explained from the log), not waited out as a hang: stall_s is
    # 20 s and the phase limits 30 s, and a hang's reason would say so. How soon after the exit it is
    # noticed (docs/running.md: within a second) is a figure tests/perf/failure_timings.py prints.
    spec = make_spec(tmp_path, "--fake-fail-at", "capture")
    stages = []
    [r] = run_launch(spec, host, lambda e: stages.append(e.stage)).points
    assert r.status == "failed" and r.failure_phase == "capture"
    assert "CUDA out of memory" in r.failure_reason and not r.failure_reason.startswith("hang")
    assert stages[-1] == "stop" and "benchmark" not in stages
    assert r.phases["load_s"] is not None and r.phases["capture_s"] is None  # it died capturing
    assert "Traceback" in r.log_tail
    # it was already gone: stopping it found nothing to signal
    assert not [k for k in r.reaped["killed"] if k["reason"] == "stopped after the point"]


def test_a_point_run_again_reads_only_its_own_log(tmp_path, host):
    """The point's log is kept across runs (--retry-failed, a retry after a host was lost): the new
    run appends after a marker line, and its phases and reason come from its own lines only, not
    from the earlier run's ``Uvicorn running`` or ``CUDA out of memory``."""
    first = make_spec(tmp_path, "--fake-fail-at", "capture")
    [r1] = run_launch(first, host).points
    assert r1.status == "failed" and "CUDA out of memory" in r1.failure_reason
    again = make_spec(tmp_path, "--fake-fail-at", "load", point_id=first.key)
    [r2] = run_launch(again, host).points
    assert r2.status == "failed" and r2.failure_phase == "load", (r2.failure_phase, r2.failure_reason)
    assert "Not enough memory" in r2.failure_reason and "CUDA out of memory" not in r2.log_tail
    ok = make_spec(tmp_path, point_id=first.key)
    stages = []
    [r3] = run_launch(ok, host, lambda e: stages.append(e.stage)).points
    assert r3.status == "ok", (r3.failure_phase, r3.failure_reason, r3.log_tail[-2000:])
    assert stages.index("capture") < stages.index("ready")  # not "ready" at once from the old lines
    assert r3.phases["load_s"] is not None and r3.phases["startup_s"] >= r3.phases["load_s"]
    log = Path(first.log_path).read_text()
    assert log.count("Load weight begin") >= 3 * 2  # every run's lines are kept ...
    assert log.count("the lines above are an earlier run's") == 2  # ... each later run after a marker


def test_capture_hang_cut_by_stall_timeout(tmp_path, host):
    t = Timeouts(stall_s=1.5, load_s=30, capture_s=30, ready_s=30, total_s=60, stop_grace_s=1)
    spec = make_spec(tmp_path, "--fake-hang-at", "capture", timeouts=t)
    [r] = run_launch(spec, host).points
    assert r.status == "failed" and r.failure_phase == "capture"
    # the stall detector cut it (stall_s 1.5, shown as 2 s), not capture_s or total_s, whose reasons
    # are "still in capture after 30 s" and "not ready after 60 s"
    assert r.failure_reason.startswith(
        "hang: no log output for 2 s in capture (server.timeouts.stall_s); last log line: "
    ), r.failure_reason
    assert r.phases["load_s"] is not None and r.phases["capture_s"] is None
    # the hung server was still running when it was cut: the stop killed it
    assert [k for k in r.reaped["killed"] if k["reason"] == "stopped after the point"]


def test_zombie_children_reaped_and_port_freed(tmp_path, host):
    spec = make_spec(tmp_path, "--fake-zombie")
    [r] = run_launch(spec, host).points
    assert r.status == "ok", r.failure_reason
    assert len(r.reaped["killed"]) >= 3  # parent, TP ranks, detokenizer
    assert reaper.port_free(spec.port)
    assert host.probe.processes() == []


def test_leftovers_of_a_crashed_run_reaped_before_launch(tmp_path, host):
    spec = make_spec(tmp_path, "--fake-zombie")
    env = {**os.environ, **host.extra_env, **reaper.Marker(SWEEP, host.name).env("old")}
    old = subprocess.Popen(
        spec.argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    wait_until(host.probe.processes, 20, "the old server takes its GPUs", interval=0.1)
    old.send_signal(signal.SIGKILL)  # the parent dies, the zombie children keep the GPUs
    old.wait()
    assert host.probe.processes()
    [r] = run_launch(make_spec(tmp_path), host).points
    assert r.status == "ok", r.failure_reason
    assert any("before launch" in k["reason"] for k in r.reaped["killed"])


def test_foreign_gpu_process_reported_not_killed(tmp_path, host):
    ledger = host.extra_env["SWEEP_FAKE_GPU_LEDGER"]
    foreign = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import os, time
        from sweep.core.ledger import ledger_record
        ledger_record({ledger!r}, os.getpid(), 0, 60000)
        time.sleep(60)"""),
        ],
        env={k: v for k, v in os.environ.items() if not k.startswith("SWEEP_")},
    )
    try:
        wait_until(host.probe.processes, 10, "the foreign process holds GPU 0", interval=0.1)
        [r] = run_launch(make_spec(tmp_path), host).points
        assert r.status == "failed" and r.failure_phase == "preflight"
        assert "GPU 0" in r.failure_reason and str(foreign.pid) in r.failure_reason
        assert foreign.poll() is None, "a process that is not ours was killed"
        assert r.reaped["foreign"][0]["pid"] == foreign.pid
    finally:
        foreign.kill()
        foreign.wait()


def test_server_dies_with_the_launching_process(tmp_path, host):
    spec = make_spec(tmp_path)
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from sweep.host.server import ServerProcess
        s = ServerProcess({spec.argv!r}, {{**{host.extra_env!r}, "SWEEP_SWEEP": {SWEEP!r}, "SWEEP_HOST": {host.name!r}}},
                          Path({spec.log_path!r}), port={spec.port})
        s.start()
        print(s.proc.pid, flush=True)
        time.sleep(120)""")
    launcher = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    server_pid = int(launcher.stdout.readline())
    tree = wait_until(
        lambda: t if len(t := reaper.tree(server_pid)) >= 3 else None, 20, "the fake forks its ranks", interval=0.1
    )
    launcher.kill()  # kill -9: no cleanup code runs in the launcher
    launcher.wait()
    gone, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, f"still alive after the launcher died: {[p.pid for p in alive]}"


def _nothing_launched(spec: LaunchSpec, r, stages: list[str]) -> None:
    """Failed in pre-flight, before any server was launched: no launch stage, no log file, no
    startup timed, nothing stopped or reaped. (How many seconds pre-flight takes is a figure
    tests/perf/failure_timings.py prints.)"""
    assert stages == ["preflight", "stop"]
    assert not Path(spec.log_path).exists()
    assert r.phases == {} and r.log_tail == ""
    assert r.reaped["killed"] == []


def test_preflight_missing_drafter_path_launches_nothing(tmp_path, host):
    spec = make_spec(tmp_path, flags=SPEC_FLAGS)
    spec = replace(spec, real_paths=True, paths={"model_path": str(tmp_path), "draft model path": "/nope/drafter"})
    stages = []
    [r] = run_launch(spec, host, lambda e: stages.append(e.stage)).points
    assert r.status == "failed" and r.failure_phase == "preflight"
    assert "/nope/drafter does not exist" in r.failure_reason
    _nothing_launched(spec, r, stages)


def test_preflight_unknown_flag_launches_nothing(tmp_path, host):
    spec = make_spec(tmp_path, "--speculative-num-stepz", "2")
    stages = []
    [r] = run_launch(spec, host, lambda e: stages.append(e.stage)).points
    assert r.status == "failed" and r.failure_phase == "preflight" and "--speculative-num-stepz" in r.failure_reason
    _nothing_launched(spec, r, stages)


def test_levels_carry_the_fake_gpus_power_and_energy(tmp_path, host):
    """The host hands the benchmark its probe's power (here the fake's, through the GPU ledger): every
    level has its watts summed over the GPUs the server uses (tp-size 2: 2 of the host's 8), energy =
    mean watts x wall time, per token."""
    import pyarrow.compute as pc

    from sweep.fake import model

    [r] = run_launch(make_spec(tmp_path), host).points
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-2000:])
    for row in r.levels.to_pylist():
        assert row["power_gpus"] == 2 and row["power_samples"] >= 1  # one at least: as the level ends
        assert 2 * model.IDLE_W <= row["power_mean_w"] <= row["power_peak_w"] <= 2 * model.TDP_W
        assert row["energy_j"] == pytest.approx(row["power_mean_w"] * row["wall_s"])
        ok = r.requests.filter(
            pc.and_(pc.equal(r.requests["phase"], "level"), pc.equal(r.requests["concurrency"], row["concurrency"]))
        )
        tokens = sum(t for t, good in zip(ok["completion_tokens"].to_pylist(), ok["ok"].to_pylist()) if good)
        assert row["energy_per_token_j"] == pytest.approx(row["energy_j"] / tokens)


def test_each_point_of_a_shared_launch_but_the_last_is_posted_as_its_benchmark_ends(tmp_path, host):
    """Client-side axes: the host sends each point of the launch but the last (PointMeasured) before
    the next one's benchmark starts, with its tables, the startup's phases (first point) and the power
    samples up to its end; the launch's result has every point, the same measurements."""
    from sweep.core.events import PointMeasured

    spec = make_spec(tmp_path, more=[LaunchPoint("q2", "second", TINY), LaunchPoint("q3", "third", TINY)])
    seen: list = []
    r, *more = run_launch(spec, host, seen.append).points
    assert [x.point_id for x in (r, *more)] == [spec.key, "q2", "q3"]
    assert r.status == "ok" and [m.status for m in more] == ["ok", "ok"], r.failure
    posted = [e for e in seen if isinstance(e, PointMeasured)]
    assert [e.point_id for e in posted] == [spec.key, "q2"]  # q3 comes with the launch's result
    for e in posted:  # posted before the next point's benchmark began
        nxt = {spec.key: "q2", "q2": "q3"}[e.point_id]
        assert seen.index(e) < next(i for i, x in enumerate(seen) if getattr(x, "sub_point", None) == nxt)
    first, second = (e.result for e in posted)
    assert first.phases["startup_s"] is not None and second.phases == {}
    assert first.levels.equals(r.levels) and second.levels.equals(more[0].levels)
    assert first.requests.num_rows == r.requests.num_rows and first.sglang_version == r.sglang_version
    assert first.ended_at == r.ended_at and second.started_at == more[0].started_at
    assert first.power_series and first.power_series[-1][0] <= first.ended_at
    assert len(second.power_series) > len(first.power_series)  # a snapshot each: the launch kept recording
    assert r.power_series[: len(second.power_series)] == second.power_series
    assert first.port == second.port == r.port == more[0].port is not None  # the port it served on


ADAPTIVE = {"1": {"candidate_steps": [1, 3]}, "4": {"candidate_steps": [0, 1]}}


def test_an_adaptive_config_given_inline_is_served_and_its_switches_land_in_their_levels(tmp_path, host):
    """A mapping value of speculative-adaptive-config is written to a JSON file beside the point's log and
    its path passed; the server's switch lines (the fake's, SGLang's wording) are read as each level begins
    and ends: none at C=1 (tier 1 keeps 3 steps), tier 4's own step count at C=4."""
    import json

    flags = {
        **SPEC_FLAGS,
        "speculative-num-steps": 3,
        "speculative-num-draft-tokens": 4,
        "speculative-adaptive": True,
        "speculative-adaptive-config": ADAPTIVE,
    }
    bench = replace(TINY, concurrency=ConcurrencySettings(levels=[1, 4], rounds=2, max_tokens=48))
    [r] = run_launch(make_spec(tmp_path, "--fake-version", "0.5.23", flags=flags, bench=bench), host).points
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-2000:])
    written = tmp_path / "server.adaptive-config.json"
    assert json.loads(written.read_text()) == ADAPTIVE
    assert f"speculative_adaptive_config='{written}'" in (tmp_path / "server.log").read_text()  # server_args=
    assert r.adaptive is True and r.adaptive_disabled_reason is None
    rows = {row["concurrency"]: row for row in r.levels.to_pylist()}
    assert (rows[1]["adaptive_switches"], rows[1]["adaptive_steps"], rows[1]["adaptive_steps_final"]) == (0, [3], 3)
    assert rows[4]["adaptive_switches"] >= 1 and rows[4]["adaptive_steps"] == [3, 1]
    assert rows[4]["adaptive_steps_final"] in (1, 3)
