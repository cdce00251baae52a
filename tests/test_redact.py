"""Secrets stay secret (issue 14, item 10): which names are secret, argv / env / text / nested
redaction, and each place the plan side writes or prints them: ``--plan --json``, ``--plan``, the
results' plan.json (``Plan.to_json``), experiment.yaml (``config.to_yaml``), the points table's
argv and env columns. The host side (server log, reaped command lines, the key sent to the server)
is in tests/host/test_api_key.py, the whole sweep in tests/orchestrate/test_secrets_e2e.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from sweep.core import redact
from sweep.core.redact import REDACTED, is_secret_name, redact_argv, redact_env, redact_text, redact_tree
from sweep.experiment import config
from sweep.experiment import plan as planning
from tests.conftest import TRANSCRIPTS, needs_shared, run_sweep_cli

KEY, HF, MINE, AXIS_TOKEN = "sk-flag-secret-123", "hf_env_secret_456", "from-env-secret-000", "hf_other_secret_789"
SECRETS = (KEY, HF, MINE, AXIS_TOKEN)

EXPERIMENT = """
name: sec
server:
  model_path: /models/m
  tp_size: 8
  flags: {api-key: %s, enable-metrics: true, max-running-requests: 64, max-total-tokens: 4096}
  env: {HF_TOKEN: %s, MY_API_KEY: "${oc.env:SWEEP_TEST_KEY_SOURCE}", NCCL_ALGO: Ring}
grid:
  axes:
    drafter:
      values:
        none: {}
        d1: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d1, speculative-eagle-topk: 1,
                     speculative-num-steps: 2, speculative-num-draft-tokens: 3}, env: {HF_TOKEN: %s}}
""" % (KEY, HF, AXIS_TOKEN)


@pytest.fixture
def secret_exp(write_yaml, monkeypatch):
    monkeypatch.setenv("SWEEP_TEST_KEY_SOURCE", MINE)
    return write_yaml(EXPERIMENT, "sec.yaml")


def assert_no_secret(text: str, where: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{where} shows {leaked}"


# --- names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "MY_API_KEY",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "DB_PASSWORD",
        "GOOGLE_CREDENTIALS",
        "--api-key",
        "--admin-api-key",
        "--ssl-keyfile-password",
        "apiKey",
        "api_key",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "TOKENIZERS_PARALLELISM",
        "NCCL_ALGO",
        "--max-total-tokens",
        "--skip-tokenizer-init",
        "--speculative-num-draft-tokens",
        "--speculative-token-map",
        "--ssl-keyfile",
        "--tokenizer-path",
        "--bucket-time-to-first-token",
        "SGLANG_ROUTING_KEY_POLICY_DEBUG_LOG",
    ],
)
def test_names_that_are_not_secret(name):
    assert not is_secret_name(name)


def test_of_every_flag_sglang_knows_only_its_keys_are_secret():
    from sweep.sglang import flagnames

    names = set(re.findall(r"[a-z0-9][a-z0-9-]+[a-z0-9]", Path(flagnames.__file__).read_text()))
    assert "speculative-num-draft-tokens" in names and "api-key" in names  # the list was read
    assert {n for n in names if is_secret_name(n)} == {"api-key", "admin-api-key", "ssl-keyfile-password"}


# --- argv, env, text, trees ------------------------------------------------------------------------


def test_argv_redaction_keeps_every_other_flag():
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--skip-tokenizer-init",
        "--speculative-num-draft-tokens",
        "3",
        "--api-key",
        KEY,
        "--max-total-tokens=4096",
        "--admin-api-key=adm-secret",
        "--ssl-keyfile",
        "/k.pem",
        "--ssl-keyfile-password",
        "pw-secret",
        "--enable-auth",
        "--port",
        "1",
    ]
    assert redact_argv(argv) == [
        "python",
        "-m",
        "sglang.launch_server",
        "--skip-tokenizer-init",
        "--speculative-num-draft-tokens",
        "3",
        "--api-key",
        REDACTED,
        "--max-total-tokens=4096",
        f"--admin-api-key={REDACTED}",
        "--ssl-keyfile",
        "/k.pem",
        "--ssl-keyfile-password",
        REDACTED,
        "--enable-auth",
        "--port",
        "1",
    ]
    # a known value anywhere else in the argv goes too
    assert redact_argv(["--model-path", f"/m/{KEY}"], [KEY]) == ["--model-path", f"/m/{REDACTED}"]


def test_the_points_argv_column_keeps_draft_tokens():
    """Before: any flag with TOKEN or KEY in its name lost its value (the acceptance analysis reads
    --speculative-num-draft-tokens from this column)."""
    from sweep.results.records import redact_argv as column

    assert column(["--speculative-num-draft-tokens", "3", "--api-key", KEY, "--x", KEY]) == [
        "--speculative-num-draft-tokens",
        "3",
        "--api-key",
        REDACTED,
        "--x",
        REDACTED,
    ]


def test_env_redaction():
    assert redact_env({"HF_TOKEN": HF, "NCCL_ALGO": "Ring", "TOKENIZERS_PARALLELISM": "false", "EMPTY_TOKEN": ""}) == {
        "HF_TOKEN": REDACTED,
        "NCCL_ALGO": "Ring",
        "TOKENIZERS_PARALLELISM": "false",
        "EMPTY_TOKEN": "",
    }


@needs_shared()
def test_sglang_server_args_line_redacted():
    """The real line (CPU SGLang 7f8f030), with a key: ``api_key='...'`` hidden whether or not the
    value is known; everything else byte for byte."""
    line = next(ln for ln in (TRANSCRIPTS / "startup.log").read_text().splitlines() if "server_args=ServerArgs(" in ln)
    assert "api_key=None" in line
    assert redact_text(line) == line  # nothing secret: unchanged
    keyed = line.replace("api_key=None", f"api_key='{KEY}'", 1)
    assert redact_text(keyed) == line.replace("api_key=None", f"api_key='{REDACTED}'", 1)
    assert redact_text(keyed, [KEY]) == redact_text(keyed)


@needs_shared()
def test_real_sglang_output_without_secrets_is_left_alone():
    """No false positives: every transcript of the real server (logs, API answers, process trees)
    comes out of the text redaction byte for byte."""
    files = sorted(TRANSCRIPTS.iterdir())
    assert len(files) >= 10
    for f in files:
        text = f.read_bytes().decode("utf-8", "surrogateescape")
        assert redact_text(text, ["sk-not-in-there"]) == text, f.name


def test_text_redaction_forms():
    assert redact_text(f'{{"api_key":"{KEY}","model":"m"}}') == f'{{"api_key":"{REDACTED}","model":"m"}}'
    assert (
        redact_text(f"python -m sglang.launch_server --api-key {KEY} --port 1")
        == f"python -m sglang.launch_server --api-key {REDACTED} --port 1"
    )
    assert redact_text(f"HF_TOKEN={HF} python x") == f"HF_TOKEN={REDACTED} python x"
    assert redact_text(f"Authorization: Bearer {KEY}") == f"Authorization: Bearer {REDACTED}"
    assert redact_text(f"loading from /cache/{HF}/x", [HF]) == f"loading from /cache/{REDACTED}/x"
    # short or plain values are hidden under their name, never searched for in free text
    assert (
        redact_text("max_total_tokens=4096 #token: 1 true", ["1", "true", "4096"])
        == "max_total_tokens=4096 #token: 1 true"
    )


def test_tree_redaction():
    tree = {
        "env": {"HF_TOKEN": HF, "A": "b"},
        "argv": ["x", "--api-key", KEY],
        "label": f"k={KEY}",
        "n": 3,
        "nested": [{"password": "pw-secret-1"}, "see pw-secret-1"],
    }
    assert redact_tree(tree) == {
        "env": {"HF_TOKEN": REDACTED, "A": "b"},
        "argv": ["x", "--api-key", REDACTED],
        "label": f"k={REDACTED}",
        "n": 3,
        "nested": [{"password": REDACTED}, f"see {REDACTED}"],
    }


# --- the plan: --plan --json, --plan, plan.json, ids ------------------------------------------------


def test_plan_json_redacted_ids_unchanged(secret_exp):
    exp = config.load(secret_exp)
    plan = planning.build(exp)
    doc = plan.to_json()
    text = json.dumps(doc)
    assert_no_secret(text, "Plan.to_json (plan.json, --plan --json)")
    # ids are of the real values: redaction changes none, and another key is another point
    assert [p["id"] for p in doc["points"]] == [p.id for p in plan.points]
    other = planning.build(config.load(secret_exp, ["server.flags.api-key=sk-another-key-1"]))
    assert {p.id for p in other.points}.isdisjoint(p.id for p in plan.points)
    spec = next(p for p in doc["points"] if not p["baseline"])
    assert spec["argv"][spec["argv"].index("--api-key") + 1] == REDACTED
    assert spec["env"] == {"HF_TOKEN": REDACTED, "MY_API_KEY": REDACTED, "NCCL_ALGO": "Ring"}
    assert "--speculative-num-draft-tokens" in spec["argv"] and "3" in spec["argv"]
    # the baseline-differs warning names the variable, never its values
    differs = [w for w in spec["warnings"] if w.startswith("baseline-differs")]
    assert differs and f"env HF_TOKEN: {REDACTED} vs {REDACTED}" in differs[0]
    assert_no_secret(" ".join(w for p in plan.points for w in p.warnings), "the points' warnings (points table)")


def test_plan_without_secrets_is_unchanged():
    """For an experiment without secrets the plan's JSON is what it was before redaction existed."""
    plan = planning.build(config.load(Path(__file__).resolve().parents[1] / "experiments" / "k26_eagle.yaml"))
    assert [p.to_json() for p in plan.points] == [p._json() for p in plan.points]


def test_plan_cli_json_and_text_redacted(secret_exp):
    env = {"SWEEP_TEST_KEY_SOURCE": MINE}
    r = run_sweep_cli(str(secret_exp), "--plan", "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert_no_secret(r.stdout + r.stderr, "--plan --json")
    doc = json.loads(r.stdout)
    assert any(a == REDACTED for p in doc["points"] for a in p["argv"])
    r = run_sweep_cli(str(secret_exp), "--plan", env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert_no_secret(r.stdout + r.stderr, "--plan")
    assert f"--api-key {REDACTED}" in r.stdout  # the example argv


# --- experiment.yaml --------------------------------------------------------------------------------


def test_experiment_yaml_redacted_by_reference(secret_exp):
    exp = config.load(secret_exp)
    assert exp.server.flags["api-key"] == KEY and exp.server.env["MY_API_KEY"] == MINE  # the run has the values
    text = config.to_yaml(exp)
    assert_no_secret(text, "experiment.yaml")
    doc = yaml.safe_load(text)
    assert doc["server"]["flags"]["api-key"] == REDACTED
    assert doc["server"]["env"] == {
        "HF_TOKEN": REDACTED,
        "MY_API_KEY": "${oc.env:SWEEP_TEST_KEY_SOURCE}",
        "NCCL_ALGO": "Ring",
    }  # the reference the file wrote, kept
    assert doc["grid"]["axes"]["drafter"]["values"]["d1"]["env"] == {"HF_TOKEN": REDACTED}
    assert doc["server"]["flags"]["max-total-tokens"] == 4096
    # what the report reads back from it still reads
    from sweep.analysis import slo

    slo.from_experiment(secret_exp.parent)  # no experiment.yaml there: [] without raising


def test_experiment_yaml_without_secrets_is_unchanged():
    from omegaconf import OmegaConf

    exp = config.load(Path(__file__).resolve().parents[1] / "experiments" / "k26_eagle.yaml")
    assert config.to_yaml(exp) == OmegaConf.to_yaml(OmegaConf.structured(exp))


# --- the points table -------------------------------------------------------------------------------


def test_points_row_argv_env_reaped_tail_redacted(secret_exp):
    from sweep.core.record import Failure, PointResult
    from sweep.results.records import point_row

    plan = planning.build(config.load(secret_exp))
    pp = next(p for p in plan.points if not p.baseline)
    result = PointResult(
        pp.id,
        "h",
        "n",
        "failed",
        Failure("ready", "x"),
        log_tail="tail",
        reaped={
            "killed": [{"pid": 1, "name": "python", "cmdline": redact_text(" ".join(pp.argv)), "reason": "stopped"}],
            "foreign": [],
            "gpu_free": True,
            "port_free": True,
            "waited_s": 0.0,
        },
    )
    row = point_row(
        pp, "sec", axes=["drafter"], argv=pp.argv, result=result, mode="dry-run", bench_scale={}
    ).to_pylist()[0]
    assert_no_secret(json.dumps(row, default=str), "the points row")
    assert row["argv"][row["argv"].index("--api-key") + 1] == REDACTED
    env = dict(row["env"]) if isinstance(row["env"], list) else row["env"]
    assert env["HF_TOKEN"] == REDACTED and env["NCCL_ALGO"] == "Ring"
    assert redact.secret_values(pp.argv, pp.env)  # this point has secrets to hide
