"""How fast failures are found and ended: the timings the tests assert as behaviour, not as seconds.

The tests check what happened (the phase, the reason, the order of events, that nothing was
launched); how long it took is a figure, printed here next to what the docs (docs/running.md) and the code claim:

* pre-flight: a point that fails in pre-flight (a missing drafter path, a flag the host's SGLang
  does not accept) is recorded in seconds, before anything launches (docs/running.md: "pre-flight in
  seconds"); the flag check's ``--help`` probe is cached per host and version, so it is timed with
  and without the cache;
* a dead server: from its log's last write to the point's ``stop`` stage (docs/running.md: "noticed within
  1 s of the exit");
* a hung server: from its log's last write to ``stop``, against ``stall_s`` (the stall detector
  cuts it, not the phase limit);
* the fake server's own fault paths: a rank failing at load (SIGQUIT) until the launcher is gone
  ("a fraction of a second"), and SIGTERM to the group until exit, against the real launcher's
  5 s crash-diagnostics sleep divided by the startup speed;
* the drafter check (headers only) on each drafter mistake of tests/test_drafter.py, in ms.

    python tests/perf/failure_timings.py [--repeat 3]

Each figure is the median and the worst of ``--repeat`` runs. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings  # noqa: E402
from sweep.experiment.config import ReapConfig, Timeouts  # noqa: E402
from sweep.fake.server import CRASH_DIAGNOSTICS_S  # noqa: E402
from sweep.host import reaper  # noqa: E402
from sweep.host.gpu import FakeGpus  # noqa: E402
from sweep.host.point import HostContext, LaunchPoint, LaunchSpec, run_launch  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.perf import record  # noqa: E402

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
    single_stream=SingleStreamSettings(runs=1, warmup=0, max_tokens=8),
    concurrency=ConcurrencySettings(levels=[1], rounds=1, max_tokens=8),
)
SWEEP = f"perf-failures-{uuid.uuid4().hex[:6]}"
STALL_S = 1.5


def spec(tmp: Path, *extra: str, flags: dict | None = None, stall_s: float = 20.0) -> LaunchSpec:
    """A point of the fake: ``flags`` the server's ({name: value}), ``extra`` the fake's own options."""
    flags = {"model-path": "/models/m", "tp-size": 2, "port": free_port(), **(flags or {})}
    log = tmp / f"{uuid.uuid4().hex[:8]}.log"
    return LaunchSpec(
        SWEEP,
        FAKE,
        flags,
        {},
        str(log),
        [LaunchPoint("p" + uuid.uuid4().hex[:8], "label", TINY)],
        Timeouts(stall_s=stall_s, load_s=30, capture_s=30, ready_s=30, total_s=60, stop_grace_s=2),
        ReapConfig(wait_s=5),
        real_paths=False,
        launcher_args=["--fake-speed", "20", "--fake-startup-speed", "400", *extra],
    )


def timed_point(s: LaunchSpec, host: HostContext) -> tuple[float, dict[str, float], object]:
    """(seconds, wall time of each stage's first event, result) of one run_launch."""
    stages: dict[str, float] = {}
    t0 = time.monotonic()
    [r] = run_launch(s, host, lambda e: stages.setdefault(e.stage, time.time())).points
    return time.monotonic() - t0, stages, r


def figure(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    v = [x * scale for x in values]
    return f"median {statistics.median(v):7.3f} {unit}, worst {max(v):7.3f} {unit}"


def host_figures(tmp: Path, repeat: int) -> list[tuple[str, str, str]]:
    ledger = tmp / "ledger"
    ledger.mkdir()
    os.environ["SWEEP_CACHE_DIR"] = str(tmp / "cache")
    host = HostContext(f"perf-{uuid.uuid4().hex[:6]}", FakeGpus(ledger), "node", {"SWEEP_FAKE_GPU_LEDGER": str(ledger)})
    rows = []

    missing = []
    for _ in range(repeat):
        s = replace(
            spec(tmp, flags=SPEC_FLAGS),
            real_paths=True,
            paths={"model_path": str(tmp), "draft model path": "/nope/drafter"},
        )
        took, _, r = timed_point(s, host)
        assert r.failure_phase == "preflight", r.failure_reason
        missing.append(took)
    rows.append(("pre-flight: missing drafter path", figure(missing), "seconds, nothing launched"))

    uncached, cached = [], []
    for i in range(repeat):
        os.environ["SWEEP_CACHE_DIR"] = str(tmp / f"cache-{i}")  # a host that never ran --help
        for into in (uncached, cached):
            took, _, r = timed_point(spec(tmp, "--speculative-num-stepz", "2"), host)
            assert r.failure_phase == "preflight", r.failure_reason
            into.append(took)
    rows.append(("pre-flight: unknown flag, --help not cached", figure(uncached), "seconds, nothing launched"))
    rows.append(("pre-flight: unknown flag, --help cached", figure(cached), "seconds, nothing launched"))

    dead = []
    for _ in range(repeat):
        s = spec(tmp, "--fake-fail-at", "capture")
        _, stages, r = timed_point(s, host)
        assert r.failure_phase == "capture" and "CUDA out of memory" in r.failure_reason, r.failure_reason
        dead.append(stages["stop"] - os.path.getmtime(s.log_path))
    rows.append(("dead server: last log write -> stop", figure(dead), "< 1 s (docs/running.md)"))

    hung = []
    for _ in range(repeat):
        s = spec(tmp, "--fake-hang-at", "capture", stall_s=STALL_S)
        _, stages, r = timed_point(s, host)
        assert r.failure_reason.startswith("hang: no log output"), r.failure_reason
        hung.append(stages["stop"] - os.path.getmtime(s.log_path))
    rows.append(
        ("hung server: last log write -> stop", figure(hung), f"stall_s {STALL_S} s + a poll (capture_s: 30 s)")
    )

    left = reaper.marked(reaper.Marker(SWEEP, host.name))
    for p in left:
        p.kill()
    return rows


def fake(tmp: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    log = tmp / f"fake-{uuid.uuid4().hex[:8]}.log"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [*FAKE, "--model-path", "/models/m", "--port", str(free_port()), "--fake-speed", "50", *args],
            cwd=REPO,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return proc, log


def wait_log(proc: subprocess.Popen, log: Path, pattern: str, timeout: float = 60) -> float:
    """The monotonic time ``pattern`` was first seen in the log (polled every 2 ms)."""
    deadline = time.monotonic() + timeout
    rx = re.compile(pattern, re.M)
    while time.monotonic() < deadline:
        if rx.search(log.read_bytes().decode("utf-8", "replace")):
            return time.monotonic()
        time.sleep(0.002)
    raise RuntimeError(f"no /{pattern}/ in {log}")


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def fake_figures(tmp: Path, repeat: int) -> list[tuple[str, str, str]]:
    sigquit, sigterm = [], []
    speed = 20.0
    for _ in range(repeat):
        proc, log = fake(tmp, "--tp-size", "2", "--fake-startup-speed", "3000", "--fake-fail-at", "load")
        try:
            seen = wait_log(proc, log, r"Received sigquit from a child process")
            proc.wait(timeout=30)
            sigquit.append(time.monotonic() - seen)
        finally:
            kill_group(proc)
        proc, log = fake(tmp, "--fake-startup-speed", str(speed))
        try:
            wait_log(proc, log, r"The server is fired up and ready to roll!")
            t0 = time.monotonic()
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
            sigterm.append(time.monotonic() - t0)
        finally:
            kill_group(proc)
    scaled = (
        f">= {CRASH_DIAGNOSTICS_S:g} s / {speed:g} = {CRASH_DIAGNOSTICS_S / speed:.2f} s, < {CRASH_DIAGNOSTICS_S:g} s"
    )
    return [
        ("fake: rank fails at load, SIGQUIT -> launcher gone", figure(sigquit), "a fraction of a second"),
        (f"fake: SIGTERM to the group -> exit, startup speed {speed:g}", figure(sigterm), scaled),
    ]


def drafter_figures(tmp: Path, repeat: int) -> list[tuple[str, str, str]]:
    from sweep.sglang import drafter as dr
    from tests.test_drafter import MISTAKES, build, write_target

    target = write_target(tmp / "target")
    seconds = []
    for name, m in MISTAKES.items():
        folder = build(tmp / "drafters" / name, m)
        seconds += [dr.check(target, folder, m.algorithm).seconds for _ in range(repeat)]
    return [
        (
            f"drafter check, {len(MISTAKES)} mistakes (its own timing)",
            figure(seconds, "ms", 1000),
            "milliseconds: headers only",
        )
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    record.add_flag(ap)
    opts = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="failure-timings-") as d:
        tmp = Path(d)
        print(f"{'figure':<56} {'measured':<38} claim")
        for part in (host_figures, fake_figures, drafter_figures):
            sub = tmp / part.__name__
            sub.mkdir()
            for name, measured, claim in part(sub, opts.repeat):
                print(f"{name:<56} {measured:<38} {claim}", flush=True)
                rows.append([name, measured, claim])
    sources = [
        "sweep/host/point.py",
        "sweep/host/preflight.py",
        "sweep/host/server.py",
        "sweep/fake/server.py",
        "sweep/sglang/drafter.py",
    ]
    table = record.table(f"failures noticed, {opts.repeat} times each", ["figure", "measured", "claim"], rows)
    record.write("failure_timings", opts, [table], sources)


if __name__ == "__main__":
    main()
