"""The exception tree's exit codes (the analysis has its own: 1 means a point failed), errors that say
what failed (NVML's own words, a point cancelled outside the sweep), and the typed state: every
status and failure phase the code writes is one of the Literals, and the progress events round-trip
the hosts' dicts."""

from __future__ import annotations

import ast
import dataclasses
import io
import pickle
import sys
import types
from pathlib import Path
from typing import get_args, get_type_hints

import polars as pl
import pytest
from rich.console import Console

from sweep.analysis import best_per_level, query
from sweep.cli import main
from sweep.core import errors
from sweep.core.events import (
    HostProgress,
    LevelProgress,
    NodeJoined,
    PointFinished,
    PointProgress,
    PointStage,
    PowerSamples,
    Retrying,
    RunProgress,
    StartupProgress,
    SweepStarted,
)
from sweep.core.record import Failure, PointResult
from sweep.core.types import (
    FAILURE_PHASES,
    POINT_STATUSES,
    STAGES,
    Launched,
    Mode,
    PlanStatus,
    PointState,
    PointStatus,
    RunMode,
    run_mode,
)
from sweep.results import load

SWEEP = Path(__file__).resolve().parents[1] / "sweep"


def test_every_error_has_its_exit_code():
    codes = {
        errors.ConfigError: 2,
        errors.PlanError: 3,
        errors.ClusterError: 4,
        errors.ResultsError: 5,
        errors.BenchError: 6,
        errors.AnalysisError: 7,
        errors.QueryError: 7,
        errors.UnknownMetricError: 7,
        errors.UnknownFormatError: 7,
        errors.Interrupted: 130,
        errors.Cancelled: 130,
    }
    for cls, code in codes.items():
        assert issubclass(cls, errors.SweepError) and cls.exit_code == code, cls
    assert issubclass(errors.QueryError, errors.AnalysisError) and issubclass(errors.Cancelled, errors.Interrupted)
    e = errors.QueryError("the query failed: x", fix="list the columns")
    assert e.message == "the query failed: x" and "fix: list the columns" in str(e)


def test_bad_sql_exits_7_with_the_tables_named(tmp_path, capsys):
    (tmp_path / "sweep.json").write_text('{"experiment": "x", "mode": "dry-run"}')  # a sweep, nothing measured
    assert main(["query", str(tmp_path), "SELECT nope FROM points"]) == 7
    err = capsys.readouterr().err
    assert "the query failed" in err and "fix:" in err and "single_stream" in err and "Traceback" not in err


def test_unknown_format_and_metric_are_analysis_errors(tmp_path):
    (tmp_path / "sweep.json").write_text('{"experiment": "x", "mode": "dry-run"}')
    with pytest.raises(errors.UnknownFormatError, match="unknown output format 'xml'") as e:
        query.write(pl.DataFrame({"a": [1]}), "xml", io.BytesIO())
    assert e.value.exit_code == 7 and "csv" in e.value.fix
    with pytest.raises(errors.UnknownMetricError, match="unknown level metric 'tok_s'") as e:
        best_per_level(load(tmp_path), metric="tok_s")
    assert e.value.exit_code == 7 and "output_throughput" in e.value.fix
    with pytest.raises(errors.QueryError):
        query.run_sql(load(tmp_path), "SELEC 1")


def test_a_missing_results_directory_is_still_exit_5(tmp_path):
    assert main(["query", str(tmp_path / "nope"), "SELECT 1"]) == 5


def _calls(name: str):
    for path in sorted(SWEEP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
                yield path, node


def _written_by() -> list[Path]:
    """Where points' statuses and phases are written: the host, the orchestration, the records (the
    analysis's ``status=`` keywords are polars column names, and the fake has stages of its own)."""
    return sorted(p for d in ("host", "orchestrate", "results") for p in (SWEEP / d).rglob("*.py"))


def _const(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def test_no_keyboard_interrupt_raised_as_control_flow():
    raised = [
        f"{p.relative_to(SWEEP.parent)}:{n.lineno}"
        for p in sorted(SWEEP.rglob("*.py"))
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.Raise) and n.exc is not None and "KeyboardInterrupt" in ast.unparse(n.exc)
    ]
    assert not raised, raised


def test_every_failure_phase_written_is_a_failure_phase():
    seen = set()
    for _, call in _calls("PointFailure"):
        if call.args and _const(call.args[0]):
            seen.add(_const(call.args[0]))
    for _, call in _calls("died"):  # a server that exited, explained from its log
        if call.args and _const(call.args[0]):
            seen.add(_const(call.args[0]))
    for _, call in _calls("_failed"):
        if len(call.args) > 2 and _const(call.args[2]):
            seen.add(_const(call.args[2]))
    for path in _written_by():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "failure_phase" and _const(node.value):
                seen.add(_const(node.value))
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and _const(node.value)
                and any(
                    getattr(t, "id", None) == "phase" for t in getattr(node, "targets", [getattr(node, "target", None)])
                )
            ):
                seen.add(_const(node.value))
    assert {"preflight", "benchmark", "host", "internal", "plan"} <= seen
    assert seen <= set(FAILURE_PHASES), seen - set(FAILURE_PHASES)
    # and the startup phases a server dies or hangs in (sweep/host/server.py: Startup.phase)
    from sweep.host.server import Startup

    st = Startup()
    phases = {st.phase}
    st.see("kv_cache", 1.0)
    phases.add(st.phase)
    st.see("http_up", 2.0)
    phases.add(st.phase)
    assert phases == {"load", "capture", "ready"} and phases <= set(FAILURE_PHASES)


def test_every_status_written_is_a_point_status():
    seen = set()
    for path in _written_by():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "status" and _const(node.value):
                seen.add(_const(node.value))
            if (
                isinstance(node, ast.Assign)
                and any(getattr(t, "attr", None) == "status" for t in node.targets)
                and _const(node.value)
            ):
                seen.add(_const(node.value))
    for _, call in _calls("PointResult"):
        if len(call.args) > 3 and _const(call.args[3]):
            seen.add(_const(call.args[3]))
    assert {"ok", "failed", "invalid"} <= seen <= set(POINT_STATUSES), seen


def test_one_vocabulary_per_idea_status_and_mode():
    """A point's status, its state in ``sweep.run`` and a plan's status are one vocabulary; the
    modes of ``sweep.run`` and of a results directory share their spelling but for cluster/real."""
    assert get_args(PointState) == get_args(PointStatus) + ("pending",)
    assert set(get_args(PlanStatus)) <= set(get_args(PointStatus))
    assert get_args(Mode) == ("plan", *get_args(Launched), "cluster")
    assert get_args(RunMode) == ("real", *get_args(Launched))
    assert [run_mode(m) for m in get_args(Mode) if m != "plan"] == [*get_args(Launched), "real"]


def test_no_class_name_is_defined_twice():
    """One name per idea: a maintainer reading ``Failure`` or ``Outcome`` knows which one it is."""
    homes: dict[str, list[str]] = {}
    for p in sorted(SWEEP.rglob("*.py")):
        for n in ast.parse(p.read_text()).body:
            if isinstance(n, ast.ClassDef):
                homes.setdefault(n.name, []).append(str(p.relative_to(SWEEP.parent)))
    twice = {name: where for name, where in homes.items() if len(where) > 1}
    assert not twice, f"give each idea its own name: {twice}"


def test_a_hosts_progress_is_a_union_of_small_typed_events():
    """One small frozen event per kind of stage (the power transport its own), every stage covered
    once; the driver's PointStage carries one and reads its fields through."""
    kinds = get_args(HostProgress)
    for k in kinds:
        assert dataclasses.is_dataclass(k) and k.__dataclass_params__.frozen and issubclass(k, PointProgress), k
        own = [f.name for f in dataclasses.fields(k) if f.name not in ("stage", "sub_point")]
        assert len(own) <= 5, f"{k.__name__}: a small event, not a bag of optional fields: {own}"
    stages = [s for k in kinds for s in get_args(get_type_hints(k)["stage"])]
    assert sorted(stages) == sorted(STAGES)  # each stage belongs to one kind of event
    power = PowerSamples(1, ((1.0, 300.0, 0),))
    assert power.stage == "power" and "power" not in {f.name for f in dataclasses.fields(LevelProgress)}
    e = PointStage.at("p1", "x", "gpu-2", power)
    assert e.event is power and e.samples == power.samples and pickle.loads(pickle.dumps(e)) == e


def test_progress_events_are_typed_end_to_end():
    level = LevelProgress(concurrency=4, done=3, of=8, stopped=True)
    e = PointStage.at("p1", "drafter=none", "gpu-1", level)
    assert (e.point_id, e.label, e.host) == ("p1", "drafter=none", "gpu-1")
    assert (e.stage, e.concurrency, e.done, e.of, e.stopped) == ("level", 4, 3, 8, True)
    assert isinstance(e, PointProgress) and e.detail == level.detail == "C=4 3/8 (measured enough: stopped)"
    node = PointStage.at("p1", "x", "gpu-2", NodeJoined(2))
    assert node.stage == "node" and node.node_rank == 2 and node.title == "node 2"
    retry = Retrying(2)
    assert retry.stage in STAGES and retry.title == "host lost, retrying (attempt 2)"
    assert RunProgress("single", run=1, of=3).detail == "run 1/3" and StartupProgress("load").title == "load"
    assert pickle.loads(pickle.dumps(e)) == e  # they cross from a host's task to the driver
    ok = PointFinished("l", PointResult("p", "h", "n", "ok", started_at=10.0, ended_at=11.0))
    assert (ok.point_id, ok.host, ok.status, ok.seconds, ok.attempts, ok.failure, ok.reason) == (
        "p",
        "h",
        "ok",
        1.0,
        1,
        None,
        "",
    )
    oom = Failure("capture", "CUDA out of memory", fix="lower --mem-fraction-static")
    failed = PointFinished("l", PointResult("p", "h", "n", "failed", oom, attempts=2))
    assert failed.failure is oom and failed.reason == "capture: CUDA out of memory" and failed.attempts == 2
    assert pickle.loads(pickle.dumps(failed)) == failed


def test_the_live_view_takes_typed_events():
    from sweep.orchestrate.progress import SweepProgress

    bar = StartupProgress("load", progress="load 27/64 shards", progress_kind="load")
    assert bar.detail == "27/64 shards"
    out = io.StringIO()
    sp = SweepProgress(2, 1, Console(file=out, width=160, force_terminal=False))
    sp.on(SweepStarted("e", "dry-run", "/r", 2, 2, 0))  # not drawn
    sp.on(PointStage.at("p1", "drafter=none", "gpu-1", bar))
    assert sp.hosts["gpu-1"].label == "drafter=none" and sp.hosts["gpu-1"].detail == "27/64 shards"
    sp.on(PointStage.at("p1", "drafter=none", "gpu-1", Retrying(2)))
    assert sp.hosts["gpu-1"].stage == "host lost, retrying (attempt 2)"
    sp.on(
        PointFinished("drafter=none", PointResult("p1", "gpu-1", "n", "failed", Failure("load", "oom"), ended_at=12.0))
    )
    assert (sp.done, sp.failed) == (0, 1) and "failed in 12s on gpu-1 (load: oom)" in out.getvalue()


def test_nvml_own_error_text_is_kept(monkeypatch):
    from sweep.host import gpu, preflight

    class NVMLError_DriverNotLoaded(Exception):
        def __str__(self) -> str:
            return "Driver Not Loaded"

    def init():
        raise NVMLError_DriverNotLoaded()

    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=init))
    probe = gpu.real_probe()
    assert isinstance(probe, gpu.NoGpus) and probe.gpus() == []
    assert "NVMLError_DriverNotLoaded: Driver Not Loaded" in probe.reason
    with pytest.raises(errors.PointFailure) as e:
        preflight.check_gpus(probe, 8, 2048, preflight.PreflightReport())
    assert "Driver Not Loaded" in e.value.reason and e.value.phase == "preflight"
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    probe = gpu.real_probe()
    assert "nvidia-ml-py" in probe.reason and "pynvml" in probe.reason
    assert gpu.NoGpus().reason.startswith("no GPU found")  # the default stays


def test_a_point_cancelled_outside_the_sweep_is_cancelled_not_a_keyboard_interrupt(monkeypatch):
    import ray

    from sweep.core.settings import BenchSettings
    from sweep.host.point import LaunchPoint, LaunchSpec
    from sweep.orchestrate import ray_runner

    def cancelled(ref, **kw):
        raise ray.exceptions.TaskCancelledError()

    monkeypatch.setattr(ray_runner.ray, "get", cancelled)
    spec = LaunchSpec(
        "s", ["python"], {"port": 30000}, {}, "/tmp/x.log", [LaunchPoint("p1", "drafter=none", BenchSettings())]
    )
    runner = ray_runner.Runner("gpu_host", 8, {})
    with pytest.raises(errors.Cancelled) as e:
        runner._collect(object(), spec, 1, 0.0)
    assert "drafter=none was cancelled outside the sweep" in e.value.message and e.value.exit_code == 130
