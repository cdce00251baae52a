"""Experiment files for tests, built as data instead of YAML copied from module to module.

``experiment(...)`` is one small fake-server experiment (a tiny benchmark, quick timeouts, a fast fake)
with a test's changes merged in (OmegaConf's merge, the one the sweep's own overrides go through:
mappings merge key by key, anything else replaces), and ``write(path, exp)`` writes it as the YAML a
user would. The pieces most tests vary are named: ``DRAFTERS`` (a baseline and one EAGLE-3 drafter),
``FAULTS`` (a clean point and one whose fake dies in capture) and ``QUICK_TIMEOUTS``.

    exp = experiment(name="e2e", server={"port": port}, grid={"axes": {"drafter": DRAFTERS}})
    write(tmp_path / "e2e.yaml", exp, results_dir=tmp_path / "res")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

QUICK_TIMEOUTS = {"stall_s": 20, "load_s": 30, "capture_s": 30, "ready_s": 30, "total_s": 60, "stop_grace_s": 2}

D1 = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/d1", "speculative-eagle-topk": 1}
DRAFTERS = {"values": {"none": {}, "d1": {"flags": D1}}}
FAULTS = {"values": {"none": {}, "oom": {"flags": {"fake-fail-at": "capture"}}}}
DRAFT_TOKENS = {"speculative-num-draft-tokens": "${add:${steps},1}"}  # grid.derived: steps + 1

BASE: dict[str, Any] = {
    "name": "test",
    "server": {
        "model_path": "/models/m",
        "tp_size": 8,
        "flags": {"max-running-requests": 64},
        "timeouts": QUICK_TIMEOUTS,
        "reap": {"wait_s": 5},
    },
    "grid": {"axes": {}},
    "benchmark": {
        "single_stream": {"runs": 1, "warmup": 1, "max_tokens": 32},
        "concurrency": {"levels": [1, 4], "rounds": 1, "max_tokens": 32},
    },
    "dry_run": {"hosts": 1, "fake_speed": 8, "fake_startup_speed": 1000, "max_tokens_scale": 1.0, "min_max_tokens": 16},
}


def experiment(*bases: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``BASE``, then each of ``bases`` (another test's experiment), then ``changes`` merged in, key by
    key (``server={"port": 1}`` keeps the other server keys); a value of None removes the key."""
    layers = [OmegaConf.create(c) for c in (BASE, *bases, changes)]
    merged = OmegaConf.to_container(OmegaConf.merge(*layers), resolve=False)
    assert isinstance(merged, dict)
    return _without_none(merged)


def _without_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _without_none(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}


def write(path: Path, exp: dict[str, Any], *, results_dir: Path | None = None) -> Path:
    """``exp`` as YAML at ``path`` (with ``results_dir`` where given); interpolations stay as written."""
    if results_dir is not None:
        exp = {**exp, "results_dir": str(results_dir)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OmegaConf.to_yaml(OmegaConf.create(exp), resolve=False))
    return path
