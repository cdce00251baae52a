"""Prompt sets and the /server_info helpers (pure parts); /metrics: test_level_metrics.py."""

from __future__ import annotations

import json

import pytest

from sweep.bench import server_metrics as sm
from sweep.bench.prompts import BUILTIN, load_prompts
from sweep.core.errors import BenchError


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_sets_have_at_least_20_distinct_prompts(name):
    ps = load_prompts(name)
    assert ps.name == name and len(set(ps.prompts)) >= 20


def test_choice_is_seeded_spread_and_keyed():
    ps = load_prompts("coding")
    a = ps.choose(60, seed=1, key="level-8")
    assert a == ps.choose(60, seed=1, key="level-8")
    assert a != ps.choose(60, seed=2, key="level-8") and a != ps.choose(60, seed=1, key="level-9")
    n = len(ps.prompts)
    assert sorted(a[:n]) == list(range(n))  # every prompt once before any repeats


def test_jsonl_file_and_its_errors(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"prompt": "a", "id": 1}) + "\n\n" + json.dumps({"prompt": "b"}) + "\n")
    assert load_prompts(str(f)).prompts == ("a", "b")
    f.write_text('{"prompt": "a"}\n{"text": "b"}\n')
    with pytest.raises(BenchError, match="line 2"):
        load_prompts(str(f))
    with pytest.raises(BenchError, match="neither a built-in set nor a file") as e:
        load_prompts("codng")
    assert "coding" in e.value.fix


def test_accept_length_and_model_name_from_server_info():
    info = {
        "internal_states": [{"avg_spec_accept_length": 3.0}, {"avg_spec_accept_length": 3.4}],
        "served_model_name": "kimi",
        "model_path": "/models/k",
    }
    assert sm.accept_length_of(info) == pytest.approx(3.2)
    assert sm.accept_length_of({"avg_spec_accept_length": 2.5}) == 2.5  # older layout
    assert sm.accept_length_of({"internal_states": [{"last_gen_throughput": 1.0}]}) is None
    assert sm.accept_length_of(None) is None
    assert sm.model_name_of(info) == "kimi" and sm.model_name_of({"model_path": "/m"}) == "/m"
    assert sm.model_name_of(None) == "default"
