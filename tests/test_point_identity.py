"""A point's id from what the user gave (sweep/core/identity.py, sweep.experiment.plan.point_id): every
point of every shipped experiment and of the tests' experiments, planned for the cluster and for a
dry run (whose benchmark is scaled), keeps the id the code before issue 36 gave it (``old_point_id``
below, kept as the reference: seven hand-written pops), and a new setting left at its default moves
no id."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, field, fields, make_dataclass
from pathlib import Path
from typing import Any

import pytest

from sweep.api import plan_for
from sweep.core.identity import Mark, identity, mark_of
from sweep.core.settings import (
    BenchSettings,
    ConcurrencySettings,
    OpenLoopSettings,
    SLOSettings,
    WorkloadSettings,
)
from sweep.experiment import config, plan
from tests.conftest import REPO
from tests.experiments import DRAFT_TOKENS, DRAFTERS, FAULTS, experiment, write
from tests.test_grid import BASE as GRID_BASE

# --- the reference: point_id as 80e9057 had it (sweep/experiment/plan.py), verbatim but for names ---
PLACEMENT_FLAGS = frozenset({"host", "port"})


def _digest(identity: dict[str, Any]) -> str:
    blob = json.dumps(identity, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _server_identity(exp, flags: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    return {
        "launcher": list(exp.server.launcher),
        "flags": {k: flags[k] for k in sorted(flags) if k not in PLACEMENT_FLAGS},
        "env": {k: env[k] for k in sorted(env)},
    }


def old_point_id(exp, flags: dict[str, Any], env: dict[str, str], bench_settings: BenchSettings | None = None) -> str:
    bench = asdict(bench_settings if bench_settings is not None else exp.benchmark)
    bench.pop("slo", None)  # an SLO judges the measurements, it changes none of them
    if bench["concurrency"].get("stop") is None:  # no stop rule: the same levels as before it existed
        bench["concurrency"].pop("stop", None)
    if bench.get("workload") is None:  # no workload: the prompt set, the same points as before workloads
        bench.pop("workload", None)
    if not bench.get("rates"):  # no open-loop levels: the same points as before they existed
        bench.pop("rates", None)
    if bench.get("open_loop") == asdict(OpenLoopSettings()):
        bench.pop("open_loop", None)
    if bench.get("repeats") == 1:  # each level once: the same points as before repeats existed
        bench.pop("repeats", None)
    cc = bench["concurrency"]
    for key in ("slo_time_scale", "baseline_curve"):  # how the host judges and whom it compares with: no new point
        cc.pop(key, None)
    if not cc.get("refine") and not cc.get("auto"):  # no refinement: the same levels as before it existed
        for key in ("refine", "refine_max", "refine_ratio", "auto"):
            cc.pop(key, None)
    return _digest({**_server_identity(exp, flags, env), "benchmark": bench})


# --- the experiments ---
SHIPPED = sorted((REPO / "experiments").glob("*.yaml"))
SYNTH = "synthetic:in=uniform(16,64),out=normal(24,4),requests=8"
STEPS = {"drafter": DRAFTERS, "steps": {"flag": "speculative-num-steps", "values": [1, 2]}}
# the tests' experiments (tests/experiments.py), each with the benchmark settings that the old id
# treated apart: a stop rule, refinement (on, off with its knobs set, levels: auto), open-loop rates
# and their settings, a workload (which a dry run scales), client-side axes, SLOs, requests per level
TESTS: dict[str, dict[str, Any]] = {
    "drafters": experiment(grid={"axes": {"drafter": DRAFTERS}}),
    "drafters-steps-faults": experiment(
        grid={"axes": {**STEPS, "fault": FAULTS}, "derived": DRAFT_TOKENS, "exclude": [{"drafter": "none"}]}
    ),
    "stop": experiment(grid={"axes": STEPS}, benchmark={"concurrency": {"stop": {"precision": 0.05}}}),
    "stop-defaults": experiment(grid={"axes": STEPS}, benchmark={"concurrency": {"stop": {}}}),
    "refine": experiment(
        grid={"axes": STEPS}, benchmark={"concurrency": {"refine": True, "refine_max": 6}, "slo": [{"ttft_s": 1}]}
    ),
    "refine-off-knobs-set": experiment(grid={"axes": STEPS}, benchmark={"concurrency": {"refine_ratio": 1.5}}),
    "levels-auto": experiment(grid={"axes": STEPS}, benchmark={"concurrency": {"levels": "auto"}}),
    "rates": experiment(grid={"axes": STEPS}, benchmark={"rates": [1, 2.5]}),
    "open-loop": experiment(
        grid={"axes": STEPS},
        benchmark={"rates": [2], "open_loop": {"arrival": "gamma", "burstiness": 0.5, "duration_s": 30}},
    ),
    "open-loop-no-rates": experiment(grid={"axes": STEPS}, benchmark={"open_loop": {"requests": 50}}),
    "workload": experiment(grid={"axes": STEPS}, benchmark={"workload": SYNTH}),
    "workload-scaled": experiment(
        grid={"axes": STEPS}, benchmark={"workload": SYNTH}, dry_run={"max_tokens_scale": 0.25}
    ),
    "client-side-axes": experiment(
        grid={
            "axes": {
                **STEPS,
                "load": {
                    "values": {
                        "code": {"benchmark": {"prompts": "coding"}},
                        "synth": {"benchmark": {"workload": SYNTH}},
                        "open": {"benchmark": {"rates": [4, 8], "concurrency": {"max_tokens": 128}}},
                    }
                },
                "mt": {"key": "benchmark.concurrency.max_tokens", "values": [64, None]},
            }
        },
        dry_run={"max_tokens_scale": 0.5},
    ),
    "slo-requests": experiment(
        grid={"axes": STEPS},
        benchmark={
            "slo": [{"name": "chat", "ttft_s": 0.5, "tok_s": 20}],
            "concurrency": {"requests_per_level": 12},
            "single_stream": {"runs": 3},
            "seed": 4,
            "api": "chat",
        },
    ),
}
# the ids of TESTS as 80e9057 gave them (computed there): per experiment, its number of points and the
# digest of its points' labels and ids planned for the cluster, and for a dry run. They hold what the
# reference cannot once a run-time value leaves the settings (a dry run's workload.output_scale is
# hashed with every workload, and the reference reads it from the settings)
PINNED = {
    "client-side-axes": (18, "1d73f259f46087e1", "d14c4f18d96d799f"),
    "drafters": (2, "a4597bcf32c09a25", "aaddacb44b9f4428"),
    "drafters-steps-faults": (4, "9b15f7979df084ca", "aee9bf2e604e23c7"),
    "levels-auto": (3, "ff5787543ea5bfa4", "2acbd65efdc418c0"),
    "open-loop": (3, "2e3adee9600c6e5e", "d83275c8ab86db01"),
    "open-loop-no-rates": (3, "3eab11baf817e5cf", "bc0dcefa4cc5e9a2"),
    "rates": (3, "e4414c191e00d038", "67ead561ef853e9d"),
    "refine": (3, "71b82a4df9e424ea", "43ccfdabc3f78a4e"),
    "refine-off-knobs-set": (3, "477d5c4090df42bd", "265bbe9c4ae0608a"),
    "slo-requests": (3, "f43021f7ecf42edb", "357a02aaf7aada23"),
    "stop": (3, "6747a60f709ea186", "324f8e15e6ee7eba"),
    "stop-defaults": (3, "086637cb8f7b89b6", "d7b3e5a2a448eb2b"),
    "workload": (3, "c4c4e677d4ac5471", "f2e988bef1c0e811"),
    "workload-scaled": (3, "c4c4e677d4ac5471", "6429f99ab8787e01"),
}


def _plan(path: Path, mode: str, tmp_path: Path) -> plan.Plan:
    found = plan_for(path, mode, [], results_dir=tmp_path / f"res-{mode}", drafter_checks=False).plan
    assert found is not None and found.points
    return found


def _checked(p: plan.Plan) -> int:
    exp = p.experiment
    for pt in p.points:
        assert pt.id == old_point_id(exp, pt.flags, pt.env, pt.bench), pt.label
    for pt in p.confirm_probes:
        assert pt.id == old_point_id(exp, pt.flags, pt.env, pt.bench), pt.label
    return len(p.points) + len(p.confirm_probes)


def _shipped_env(monkeypatch) -> None:
    """cpu_tiny_spec's paths and launcher come from the environment: as for root with none sourced."""
    monkeypatch.setenv("HOME", "/root")
    for var in ("SWEEP_TINY_MODELS", "SGLANG_CPU_PYTHON", "SGLANG_CPU_ATTENTION_BACKEND", "SGLANG_CPU_LD_PRELOAD"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("mode", ["cluster", "dry-run"])
@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_the_shipped_experiments_keep_their_ids(path, mode, tmp_path, monkeypatch):
    _shipped_env(monkeypatch)
    assert _checked(_plan(path, mode, tmp_path)) > 0


@pytest.mark.parametrize("mode", ["cluster", "dry-run"])
@pytest.mark.parametrize("name", sorted(TESTS))
def test_the_tests_experiments_keep_their_ids(name, mode, tmp_path):
    path = write(tmp_path / f"{name}.yaml", TESTS[name])
    p = _plan(path, mode, tmp_path)
    _checked(p)
    n, cluster, dry_run = PINNED[name]
    got = hashlib.sha256(json.dumps(sorted((pt.label, pt.id) for pt in p.points)).encode()).hexdigest()[:16]
    assert (len(p.points), got) == (n, dry_run if mode == "dry-run" else cluster)


@pytest.mark.parametrize("mode", ["cluster", "dry-run"])
def test_the_grid_tests_experiment_and_the_legacy_one_keep_their_ids(mode, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID_BASE)
    _checked(_plan(grid, mode, tmp_path))
    _checked(_plan(REPO / "tests" / "data" / "legacy-results" / "legacy.yaml", mode, tmp_path))


def _point_id(bench: BenchSettings) -> str:
    exp = config.load(REPO / "experiments" / "k26_eagle.yaml")
    return plan.point_id(exp, {"model-path": "/m", "tp-size": 8}, {}, bench)


def test_a_new_setting_at_its_default_moves_no_id():
    """A setting added to the benchmark settings (here in a subclass), left at its default, is no part of
    any id; set, it is: at the top, in a section hashed whole (concurrency), in an optional one (workload)."""
    today = _point_id(BenchSettings())
    New = make_dataclass("New", [("new_knob", int, field(default=3))], bases=(BenchSettings,))
    assert _point_id(New()) == today
    assert _point_id(New(new_knob=4)) != today
    NewCC = make_dataclass("NewCC", [("new_knob", str, field(default="x"))], bases=(ConcurrencySettings,))
    assert _point_id(BenchSettings(concurrency=NewCC())) == today
    assert _point_id(BenchSettings(concurrency=NewCC(new_knob="y"))) != today
    NewW = make_dataclass("NewW", [("new_knob", float, field(default=0.5))], bases=(WorkloadSettings,))
    with_workload = _point_id(BenchSettings(workload=WorkloadSettings(kind="synthetic")))
    assert _point_id(BenchSettings(workload=NewW(kind="synthetic"))) == with_workload
    assert _point_id(BenchSettings(workload=NewW(kind="synthetic", new_knob=1.0))) != with_workload


def test_what_the_marks_say():
    """The rules of the old id, as the settings now declare them: the SLOs are no part of it; the
    refinement's knobs only with refinement on; a section at its defaults (open_loop) not at all."""
    base = _point_id(BenchSettings())
    assert _point_id(BenchSettings(slo=[SLOSettings(name="chat", ttft_s=0.5)])) == base
    assert _point_id(BenchSettings(concurrency=ConcurrencySettings(refine_max=9))) == base
    refining = _point_id(BenchSettings(concurrency=ConcurrencySettings(refine=True)))
    assert refining != base
    assert _point_id(BenchSettings(concurrency=ConcurrencySettings(refine=True, refine_max=9))) != refining
    assert _point_id(BenchSettings(open_loop=OpenLoopSettings())) == base
    assert _point_id(BenchSettings(open_loop=OpenLoopSettings(ramp_up_s=1))) != base
    tree = identity(BenchSettings(), skip={"concurrency.slo_time_scale", "concurrency.baseline_curve"})
    assert set(tree) == {
        f for f in asdict(BenchSettings()) if f not in ("slo", "workload", "rates", "open_loop", "repeats")
    }
    assert _point_id(BenchSettings(repeats=1)) == base  # each level once: no id moves
    assert _point_id(BenchSettings(repeats=3)) != base  # measured three times: another point
    assert set(tree["concurrency"]) == {"levels", "requests_per_level", "rounds", "max_tokens"}
    marks = {f.name: mark_of(f) for f in fields(ConcurrencySettings)}
    assert marks["levels"] == Mark("always") and marks["refine_max"].siblings == ("refine", "auto")
