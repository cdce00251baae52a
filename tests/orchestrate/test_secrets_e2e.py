"""Secrets through the whole sweep (issue 14, item 10): ``python -m sweep EXP.yaml --dry-run`` with
``server.env: {HF_TOKEN, MY_API_KEY}`` and ``server.flags.api-key``, on a local Ray cluster and the
fake server (which guards its routes with the key, as SGLang does). The points are benchmarked with
the key, and not one file of the results directory (plan.json, experiment.yaml, every Parquet table
-- argv, env, reaped, log_tail, warnings --, the server logs) nor the console output shows a secret
value. Then the same command again, and ``--retry-failed``: the same ids, nothing rerun."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import free_port, run_sweep_cli
from tests.experiments import experiment, write

pytestmark = [pytest.mark.slow, pytest.mark.scenario]  # the scenario tier: python -m pytest -m scenario

KEY, HF, MINE, AXIS = "sk-e2e-key-0123456789", "hf_e2e_token_abcdef", "e2e-from-env-secret", "hf_e2e_axis_token_xyz"
SECRETS = (KEY, HF, MINE, AXIS)

# the key as a flag, secrets in the env (one from the environment, one an axis's own), nothing else
EXPERIMENT = experiment(
    name="secrets",
    server={
        "flags": {"api-key": KEY, "enable-metrics": True},
        "env": {"HF_TOKEN": HF, "MY_API_KEY": "${oc.env:SWEEP_E2E_KEY_SOURCE}", "NCCL_ALGO": "Ring"},
    },
    grid={"axes": {"tokens": {"values": {"shared": {}, "own": {"env": {"HF_TOKEN": AXIS}}}}}},
    benchmark={
        "server_metrics": True,
        "single_stream": {"max_tokens": 16},
        "concurrency": {"levels": [1, 2], "max_tokens": 16},
    },
    dry_run={"fake_speed": 20, "fake_startup_speed": 300, "min_max_tokens": 8},
)


def all_text(directory: Path) -> dict[str, str]:
    """Every file of a results directory as text (Parquet read back: its bytes may be compressed)."""
    out = {}
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        if f.suffix == ".parquet":
            out[str(f)] = json.dumps(pq.read_table(f).to_pylist(), default=str)
        else:
            out[str(f)] = f.read_bytes().decode("utf-8", "replace")
    return out


def test_secrets_never_written_and_the_key_works(tmp_path):
    # a name of its own: the sweep's process marker is the results directory's name, and another
    # sweep's reaper on this machine (tests/orchestrate/test_sweep_e2e.py uses "res") kills what it marks
    results = tmp_path / f"secrets-{uuid.uuid4().hex[:8]}"
    exp = write(tmp_path / "secrets.yaml", experiment(EXPERIMENT, server={"port": free_port()}), results_dir=results)
    env = {"SWEEP_E2E_KEY_SOURCE": MINE}
    r = run_sweep_cli(str(exp), "--dry-run", timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # the live progress and the summary (the console) show no secret
    assert not [s for s in SECRETS if s in r.stdout + r.stderr], "the console output shows a secret"

    pts = pl.read_parquet(str(results / "points" / "*.parquet"))
    assert pts.height == 2 and (pts["status"] == "ok").all(), pts.select("label", "failure_reason").to_dicts()
    reqs = pl.read_parquet(str(results / "requests" / "*.parquet"))
    assert reqs["ok"].all() and reqs.height == 2 * (2 + 1 + 2)  # the key went with every request

    files = all_text(results)
    leaks = {f: [s for s in SECRETS if s in text] for f, text in files.items()}
    assert not {f: s for f, s in leaks.items() if s}, "secrets in the results directory"
    assert any(f.endswith(".log") for f in files) and any("points" in f for f in files)

    # what is there instead: names and references, redacted values
    doc = yaml.safe_load((results / "experiment.yaml").read_text())
    assert doc["server"]["flags"]["api-key"] == "<redacted>"
    assert doc["server"]["env"]["HF_TOKEN"] == "<redacted>"
    assert doc["server"]["env"]["MY_API_KEY"] == "${oc.env:SWEEP_E2E_KEY_SOURCE}"
    plan = json.loads((results / "plan.json").read_text())
    assert {p["id"] for p in plan["points"]} == set(pts["point_id"])
    row = pts.row(0, named=True)
    assert row["argv"][row["argv"].index("--api-key") + 1] == "<redacted>"
    env_col = dict(row["env"]) if isinstance(row["env"], dict) else {e["key"]: e["value"] for e in row["env"]}
    assert env_col["HF_TOKEN"] == "<redacted>" and env_col["NCCL_ALGO"] == "Ring"
    killed = [k for r_ in pts["reaped"].to_list() for k in (r_ or {}).get("killed") or []]
    assert any("--api-key <redacted>" in (k["cmdline"] or "") for k in killed), killed
    logs = [t for f, t in files.items() if f.endswith(".log")]
    assert all("api_key='<redacted>'" in t for t in logs)

    # a rerun reads none of these files back for its values: same ids, nothing to run
    again = run_sweep_cli(str(exp), "--dry-run", timeout=120, env=env)
    assert again.returncode == 0 and "0 to run" in again.stdout, again.stdout[-2000:] + again.stderr[-2000:]
    retry = run_sweep_cli(str(exp), "--dry-run", "--retry-failed", timeout=120, env=env)
    assert retry.returncode == 0 and "0 to run" in retry.stdout, retry.stdout[-2000:] + retry.stderr[-2000:]
    assert set(pl.read_parquet(str(results / "points" / "*.parquet"))["point_id"]) == set(pts["point_id"])
