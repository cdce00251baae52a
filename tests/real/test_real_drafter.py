"""Each drafter mistake of tests/test_drafter.py served with the real SGLang: what it does with the
checkpoint equals the pre-flight's verdict (error: SGLang stops; warning or ok: it loads).

A mistake SGLang decides while it starts (it loads the drafter, or refuses it) is decided by SGLang's
own start-up of the scheduler (tests/real/sglang_scheduler_init.py: target and drafter loaded, memory
pools and attention backends set up, by ``run_scheduler_process`` itself), many cases in one process
of the install that imports SGLang once: a server per case spent most of its time starting the same
Python three times (the real tier's longest part before). Where the consequence shows only at the
first forward pass (the warmup request), on an install that serves speculative decoding
(cluster/sglang-cpu-x86/install.sh, every CPU path), a real server is started and dies of it: that is
observed here, as is a server that starts where the scheduler start-up is not the one the harness
knows (every case is then served). Where acceptance is the consequence (a wrapper prefix, no fc, no
d2t), tests/real/test_real_speculative.py serves the trained drafter with the mistake and measures it.
With SGLang's shipped torch_native (no AMX, not taught speculation) the server stops right after the
drafter is set up ("EAGLE is not supported in decode attention backend torch_native"), which still
means SGLang accepted the checkpoint. Run with ``-s`` to see the timings.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from sweep.sglang import drafter as dr
from sweep.sglang.logs import exception_lines
from tests.conftest import free_port
from tests.real import sglang_scheduler_init as harness
from tests.test_drafter import MISTAKES, build, eagle3_config, eagle3_tensors, verdict
from tests.waiting import wait_until

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(1800)]

DRAFTER_LOADED = re.compile(r"Load weight end\..*type=(\w+(?:Eagle3?|NextN|MTP)\w*)")
NOT_SERVABLE_HERE = "not supported in decode attention backend torch_native"  # SGLang got past the drafter
READY = "The server is fired up and ready to roll"
PARALLEL = 2  # servers at once (beside the scheduler start-ups, two at a time)


@dataclass
class Served:
    kind: str  # load-error | startup-error | loads
    exception: str  # the last exception line of the log, shutdown noise aside ("" when there is none)
    drafter_class: str | None  # from the drafter's "Load weight end ... type=..." line
    seconds: float  # launch to SGLang's verdict
    log: str
    load_section: str  # the drafter's Load weight begin .. end (or the traceback) lines
    how: str = "server"  # server | scheduler (sglang_scheduler_init.py's start-up, no warmup request)


def argv_for(real, drafter: Path, algorithm: str, port: int) -> list[str]:
    """The flags every drafter case is started with (without the launcher)."""
    return [
        *real.base_flags(port),
        "--speculative-algorithm",
        algorithm,
        "--speculative-draft-model-path",
        str(drafter),
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "3",
    ]


def classify(text: str, seconds: float, how: str = "server") -> Served:
    """SGLang's verdict on the drafter, from what the server (or the scheduler's start-up) logged."""
    lines = text.splitlines()
    begins = [i for i, line in enumerate(lines) if "Load weight begin" in line]
    section = "\n".join(lines[begins[1] :] if len(begins) > 1 else lines[-40:])[:6000]
    exc = exception_lines(lines)
    exception = exc[-1] if exc else ""
    m = DRAFTER_LOADED.search(text)
    if READY in text or harness.READY in text or NOT_SERVABLE_HERE in exception:
        kind = "loads"
    elif m is None:
        kind = "load-error"
    else:
        kind = "startup-error"
    return Served(kind, exception, m.group(1) if m else None, seconds, text, section, how)


def init_schedulers(real, drafters: dict[str, tuple[Path, str]], root: Path) -> dict[str, Served] | None:
    """SGLang's scheduler start-up for each drafter (name: (folder, algorithm)), in one process of the
    install (sglang_scheduler_init.py); None where that install's start-up is not the one it knows."""
    root.mkdir(parents=True, exist_ok=True)
    cases = "".join(
        json.dumps({"id": n, "argv": argv_for(real, d, a, free_port()), "log": str(root / f"{n}.log")}) + "\n"
        for n, (d, a) in drafters.items()
    )
    run = subprocess.run(
        [real.python, harness.__file__, "2"],
        input=cases,
        capture_output=True,
        text=True,
        env={**os.environ, **real.env},
        cwd="/",
        timeout=1200,
    )
    out = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    if not out or not out[0].get("ready"):
        print(f"\nthe scheduler start-up harness does not run on {real.python}: {out[:1] or run.stderr[-2000:]}")
        return None
    done = {o["id"]: o for o in out[1:]}
    assert set(done) == set(drafters), (run.returncode, run.stderr[-3000:])
    return {
        n: classify((root / f"{n}.log").read_text(errors="replace"), done[n]["seconds"], "scheduler") for n in drafters
    }


def serve(real, drafter: Path, algorithm: str, log_path: Path, timeout_s: float = 600) -> Served:
    """``_serve``, again on other ports when the server lost a race for one (servers run side by side
    here; SGLang picks its internal ports near the HTTP port)."""
    for _ in range(3):
        s = _serve(real, drafter, algorithm, log_path, timeout_s)
        if not re.search(r"EADDRINUSE|Address already in use", s.log):
            return s
    return s


def _serve(real, drafter: Path, algorithm: str, log_path: Path, timeout_s: float) -> Served:
    """Launch the real server with this drafter and follow its log until SGLang has made up its mind
    about the checkpoint: a traceback, or (AMX) ready. The server's whole process group is killed."""
    argv = [*real.launcher, *argv_for(real, drafter, algorithm, free_port())]
    t0 = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **real.env}, cwd="/", start_new_session=True
        )

    def made_up_its_mind() -> bool:
        text = log_path.read_text(errors="replace")
        return (
            proc.poll() is not None or READY in text or "Traceback" in text and bool(exception_lines(text.splitlines()))
        )

    try:
        try:
            wait_until(made_up_its_mind, timeout_s, "SGLang's verdict on the drafter", interval=0.5)
        except AssertionError:
            pass  # no verdict in time: classified from what the log says by now
        seconds = time.monotonic() - t0
        if READY not in log_path.read_text(errors="replace"):
            # a traceback: SGLang kills its own tree after it, and its log is complete once it has exited
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=60)
    return classify(log_path.read_text(errors="replace"), seconds)


@pytest.fixture(scope="session")
def served(real_sglang, tmp_path_factory, request) -> dict[str, tuple[Served, dr.DrafterReport]]:
    """The mistakes this session tests (all, or those -k selects), built, checked by the pre-flight and
    served by real SGLang, a few at a time."""
    names = [
        n
        for n in MISTAKES
        if any(
            getattr(item, "callspec", None) and item.callspec.params.get("name") == n for item in request.session.items
        )
    ]
    root = tmp_path_factory.mktemp("drafters")
    target = real_sglang.models / "target"
    folders = {n: build(root / n, MISTAKES[n]) for n in names}
    reports = {n: dr.check(target, folders[n], MISTAKES[n].algorithm) for n in names}
    # the first forward pass is a server's (its warmup request): those cases are served, the rest
    # decided by SGLang's scheduler start-up, both at once
    live = [n for n in names if real_sglang.speculates and MISTAKES[n].first_forward]
    started = {n: (folders[n], MISTAKES[n].algorithm) for n in names if n not in live}

    def one(name: str) -> tuple[str, Served]:
        return name, serve(real_sglang, folders[name], MISTAKES[name].algorithm, root / f"{name}.log")

    with ThreadPoolExecutor(PARALLEL) as pool:
        served_live = pool.map(one, live)
        by_scheduler = init_schedulers(real_sglang, started, root / "scheduler") if started else {}
        got = dict(served_live)
        if by_scheduler is None:  # not the start-up the harness knows: every case on a server
            got.update(pool.map(one, started))
        else:
            got.update(by_scheduler)
    out = {n: (got[n], reports[n]) for n in names}
    print("\nmistake                  pre-flight  (ms)   real SGLang      how        after (s)  says")
    for name, (s, r) in out.items():
        print(
            f"{name:24} {verdict(r):10} {r.seconds * 1000:5.1f}   {s.kind:15} {s.how:9} {s.seconds:8.1f}   "
            f"{(s.exception if s.kind != 'loads' else MISTAKES[name].after or 'serves, no message')[:90]}"
        )
    return out


def test_the_hand_made_drafter_is_the_tiny_one(real_sglang):
    """tests/test_drafter.py's checkpoints are cluster/sglang-cpu-x86/tinymodels.py' drafter, tensor for tensor."""
    disk = real_sglang.models / "eagle3"
    header = {k: (t.dtype, t.shape) for k, t in dr.read_header(disk / "model.safetensors").items()}
    assert header == {k: (d, tuple(s)) for k, (d, s) in eagle3_tensors().items()}
    cfg = dr.read_config(disk)
    mine = eagle3_config()
    assert {k: cfg.get(k) for k in mine} == mine


@pytest.mark.parametrize("name", list(MISTAKES))
def test_sglang_does_what_the_check_says(served, name, real_sglang):
    m = MISTAKES[name]
    s, report = served[name]
    assert verdict(report) == m.verdict, [str(f) for f in report.findings]
    live = real_sglang.speculates and m.first_forward  # a speculative server runs its first forward pass
    assert s.kind == ("startup-error" if live else m.sglang), (
        s.kind,
        s.exception,
        s.log[s.log.rfind("Traceback") - 2000 :][:6000],
    )
    if live:
        assert m.first_forward in s.exception, (s.exception, s.log[-3000:])
    if m.sglang_says:
        assert m.sglang_says in s.exception, (s.exception, s.load_section[-3000:])
    # the check's level follows SGLang: an error where it stops, never where it loads; a checkpoint it
    # loads with weights dropped, without a word in its log
    if s.kind != "loads":
        assert verdict(report) == "error"
    elif verdict(report) != "error":
        drafter_load = s.load_section.split("Load weight end")[0]
        assert not re.search(r"(?i)not found in params_dict|skipping unexpected weight|missing", drafter_load), (
            drafter_load
        )
    if s.kind != "load-error":
        assert s.drafter_class == report.architecture
    # how fast the check is beside SGLang (headers only: milliseconds) is a figure, printed by the
    # ``served`` fixture (-s) and by tests/perf/failure_timings.py, not a timed assert


def test_preflight_fails_the_point_in_seconds(real_sglang, tmp_path, monkeypatch):
    """On the host: a drafter whose aux layers the target never reaches fails in pre-flight, named."""
    from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
    from sweep.experiment.config import CpuConfig, ReapConfig, Timeouts
    from sweep.host import cpu
    from sweep.host.gpu import NoGpus
    from sweep.host.point import HostContext, LaunchPoint, LaunchSpec, run_launch

    monkeypatch.setattr(cpu, "check_speculation", lambda *a, **k: None)  # let it get to the drafter on no-AMX
    folder = build(tmp_path / "aux", MISTAKES["aux-out-of-range"])
    flags = {
        **real_sglang.base_flag_map(free_port()),
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": str(folder),
        "speculative-num-steps": 2,
        "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 3,
    }
    bench = BenchSettings(
        prompts="coding",
        single_stream=SingleStreamSettings(runs=1, warmup=0, max_tokens=8),
        concurrency=ConcurrencySettings(levels=[1], rounds=1, max_tokens=8),
    )
    spec = LaunchSpec(
        f"real-{uuid.uuid4().hex[:6]}",
        real_sglang.launcher,
        flags,
        dict(real_sglang.env),
        str(tmp_path / "server.log"),
        [LaunchPoint("p1", "aux", bench)],
        Timeouts(),
        ReapConfig(wait_s=10),
        paths={"model_path": str(real_sglang.models / "target"), "draft model path": str(folder)},
        cpu=CpuConfig(min_free_mem_gib=1.0),
        check_rules=False,
    )  # the drafter's own check, then SGLang's
    t0 = time.monotonic()
    [r] = run_launch(spec, HostContext("cpu-drafter", NoGpus(), "node")).points
    took = time.monotonic() - t0
    assert r.status == "failed" and r.failure_phase == "preflight", (r.failure_phase, r.failure_reason)
    assert "[aux-layers]" in r.failure_reason and "never reaches" in r.failure_reason
    assert r.drafter_aux_layers == [0, 1, 3] and r.drafter_checks and r.drafter_checks[0].level == "error"
    assert not Path(spec.log_path).exists()  # nothing was launched
    print(f"\npre-flight failed the point in {took:.1f} s (SGLang version and --help probes included)")
