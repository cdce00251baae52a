"""Workloads as data (sweep/bench/workloads/, sweep/core/workload_spec.py): every loader on good
files and every bad-file error with its file and line; the compact form; an experiment's
``benchmark.workload`` (a string or a mapping, overrides) checked before anything launches; and
requests files written before the workload columns still loading."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sweep
from sweep.bench import workloads
from sweep.bench.workloads import Request, Workload, sharegpt, synthetic, tokens, trace
from sweep.core import workload_spec
from sweep.core.errors import ConfigError
from sweep.core.settings import BenchSettings, LengthSettings, WorkloadSettings
from sweep.experiment import config
from sweep.experiment.plan import build
from sweep.results import load
from sweep.results.schema import REQUESTS, from_rows
from sweep.results.writer import ResultsDir

CHAT = [
    {
        "id": "a",
        "conversations": [
            {"from": "human", "value": "What is a monad?"},
            {"from": "gpt", "value": "A pattern that chains computations."},  # 35 characters: 9 tokens
            {"from": "human", "value": "An example?"},
            {"from": "gpt", "value": "Maybe."},
        ],
    },
    {
        "id": "b",
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Capital of France?"},
            {"from": "gpt", "value": "Paris."},
        ],
    },
]


def _write(tmp_path: Path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(p)


def _sharegpt(path: str, **kw) -> Workload:
    return sharegpt.load(WorkloadSettings(kind="sharegpt", path=path, **kw))


# --- the compact form ------------------------------------------------------------------------------------


def test_the_compact_form_reads_every_kind():
    s = workload_spec.settings("synthetic:in=uniform(100,400),out=normal(200,50),requests=32")
    assert (s.kind, s.requests) == ("synthetic", 32)
    assert s.input_len == LengthSettings(dist="uniform", low=100, high=400)
    assert s.output_len == LengthSettings(dist="normal", mean=200.0, std=50.0)
    s = workload_spec.settings("shared-prefix:groups=4,prefix=512,questions=3,in=empirical(10:1,20:3),context=4096")
    assert (s.groups, s.prefix_len, s.questions, s.max_context) == (4, 512, 3, 4096)
    assert (s.input_len.values, s.input_len.weights) == ([10, 20], [1.0, 3.0])
    s = workload_spec.settings("sharegpt-multiturn:data/chat.json,answer_lengths")
    assert (s.kind, s.path, s.multiturn, s.answer_lengths) == ("sharegpt", "data/chat.json", True, True)
    s = workload_spec.settings("trace:t.jsonl,scale=0.5")
    assert (s.kind, s.path, s.time_scale) == ("trace", "t.jsonl", 0.5)
    assert workload_spec.settings("coding") == WorkloadSettings(kind="prompts", path="coding")
    assert workload_spec.parse_length("normal(200,50,10,800)") == {
        "dist": "normal",
        "mean": 200.0,
        "std": 50.0,
        "low": 10,
        "high": 800,
    }
    assert workload_spec.parse_length(64) == {"dist": "fixed", "value": 64}


@pytest.mark.parametrize(
    "spec, says",
    [
        ("sharegp:x.json", "unknown kind 'sharegp'"),
        ("synthetic:in=uniform(100)", "uniform(...) takes 2 numbers"),
        ("synthetic:in=gauss(1,2)", "is not a length"),
        ("synthetic:inn=5", "unknown key 'inn'"),
        ("synthetic:in=12.5", "not a whole number"),
        ("shared-prefix:groups=x", "'x' is not a number"),
        ("synthetic:5", "neither key=value nor a flag"),
    ],
)
def test_a_bad_compact_form_says_what_is_wrong(spec, says):
    with pytest.raises(ConfigError, match=r"(?s)" + says.replace("(", r"\(").replace(")", r"\)") + ".*fix:"):
        workload_spec.settings(spec)


def test_settings_that_cannot_run_are_problems_naming_the_key():
    bad = BenchSettings(
        workload=WorkloadSettings(
            kind="synthetic",
            input_len=LengthSettings(dist="uniform", low=9, high=3),
            output_len=LengthSettings(dist="empirical", values=[]),
            time_scale=0,
        )
    )
    keys = [k for k, _, _ in bad.problems()]
    assert keys == ["workload.input_len.low", "workload.output_len.values", "workload.time_scale"]
    assert [k for k, _, _ in BenchSettings(workload=WorkloadSettings(kind="trace")).problems()] == ["workload.path"]


# --- ShareGPT ----------------------------------------------------------------------------------------------


def test_sharegpt_single_turn_is_the_first_human_turn_and_its_answer_length(tmp_path):
    for name, text in (("a.json", json.dumps(CHAT, indent=2)), ("a.jsonl", "\n".join(map(json.dumps, CHAT)))):
        path = _write(tmp_path, name, text)
        w = _sharegpt(path, answer_lengths=True)
        assert [r.text for r in w.requests] == ["What is a monad?", "Capital of France?"]
        assert [r.output_len for r in w.requests] == [9, 2]  # ~4 characters a token
        assert [(r.conversation, r.turn, r.input_len) for r in w.requests] == [(0, 0, None), (1, 0, None)]
        assert w.name == f"sharegpt:{path}" and w.order == "shuffle"
    assert [r.output_len for r in _sharegpt(path).requests] == [None, None]  # the phase's max_tokens


def test_sharegpt_multiturn_sends_every_turn_with_the_conversation_so_far_in_order(tmp_path):
    w = _sharegpt(_write(tmp_path, "a.json", json.dumps(CHAT)), multiturn=True)
    assert [(r.conversation, r.turn) for r in w.requests] == [(0, 0), (0, 1), (1, 0)]
    second = w.requests[1]
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[-1]["content"] == "An example?" and "A pattern that chains" in second.text
    assert second.text.endswith("User: An example?\n\nAssistant:")
    assert w.requests[2].messages[0] == {"role": "system", "content": "Be brief."}
    # whole conversations in a shuffled order, each one's turns in order, and one slot sends a conversation
    order = w.choose(9, seed=3, key="level-4")
    turns = [(w.requests[i].conversation, w.requests[i].turn) for i in order]
    for k, (conv, turn) in enumerate(turns):
        if turn == 1:
            assert turns[k - 1] == (conv, 0)
    units = w.units(order)
    assert sorted(p for u in units for p in u) == list(range(9))
    assert all(len({w.requests[order[p]].conversation for p in u}) == 1 for u in units)
    assert any(len(u) == 2 for u in units)


def test_an_error_in_a_one_line_json_array_names_the_record(tmp_path):
    good = '{"conversations": [{"from": "human", "value": "hi"}]}'
    path = _write(tmp_path, "bad.json", "[" + ", ".join([good] * 1233 + ['{"conversations": []}', good]) + "]")
    with pytest.raises(ConfigError) as e:
        _sharegpt(path)
    assert f'workload file {path}, line 1 (record 1234 of the array): empty "conversations"' in e.value.message
    path = _write(tmp_path, "bad2.json", "[" + ", ".join([good] * 7) + " " + good + "]")
    with pytest.raises(ConfigError, match=r"line 1 \(record 7 of the array\): expected , or \]"):
        _sharegpt(path)


@pytest.mark.parametrize(
    "text, line, says",
    [
        ('[\n  {"conversations": []}\n]', 2, 'empty "conversations"'),
        ('{"conversations": [{"from": "human", "value": "hi"}]}\n{"id": 3}\n', 2, 'no "conversations" field'),
        (
            '[{"conversations": [{"from": "human", "value": "hi"}]},\n {"conversations": [{"from": "human"}]}]',
            2,
            'turn 0 has no "from" and "value"',
        ),
        ('{"conversations": [{"from": "gpt", "value": "hi"}]}\n', 1, "no human turn with text"),
        ('\n\n{"conversations": [{"from": "robot", "value": "hi"}]}\n', 3, "turn 0 is from 'robot'"),
        ('{"conversations": [{"from": "human", "value": "hi"}]}\n{"conversations": [\n', 2, "not JSON"),
        ('[{"conversations": [{"from": "human", "value": "hi"}]}\n\n {"x": 1}]', 3, "expected , or ]"),
        (
            b'{"conversations": [{"from": "human", "value": "hi"}]}\n{"conversations": [{"from": "human", "value": "caf\xe9"}]}\n',
            2,
            "not UTF-8",
        ),
    ],
)
def test_a_bad_sharegpt_file_fails_at_load_with_its_file_and_line(tmp_path, text, line, says):
    path = _write(tmp_path, "bad.json", text)
    with pytest.raises(ConfigError) as e:
        _sharegpt(path)
    assert (
        re.search(
            rf"workload file {re.escape(str(path))}, line {line}( \(record \d+ of the array\))?: ", e.value.message
        )
        and says in e.value.message
    )
    assert e.value.fix


def test_an_empty_or_missing_sharegpt_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="no conversations"):
        _sharegpt(_write(tmp_path, "empty.json", "[]"))
    with pytest.raises(ConfigError, match="not found"):
        _sharegpt(str(tmp_path / "nope.json"))


# --- synthetic lengths and shared prefixes ------------------------------------------------------------------


def test_synthetic_lengths_follow_their_distribution_reproducibly():
    w = WorkloadSettings(
        kind="synthetic",
        requests=400,
        input_len=LengthSettings(dist="uniform", low=5, high=9),
        output_len=LengthSettings(dist="empirical", values=[3, 30], weights=[1, 3]),
    )
    a = synthetic.synthetic(w, seed=1)
    assert a == synthetic.synthetic(w, seed=1) and a != synthetic.synthetic(w, seed=2)
    assert {r.input_len for r in a.requests} == {5, 6, 7, 8, 9}
    assert all(len(r.input_ids) == r.input_len and r.text == "" for r in a.requests)
    assert all(tokens.LOW <= t < tokens.HIGH for r in a.requests for t in r.input_ids)
    outs = [r.output_len for r in a.requests]
    assert set(outs) == {3, 30} and 0.65 < outs.count(30) / len(outs) < 0.85  # weight 3 of 4
    assert a.name == "synthetic:in=uniform(5,9),out=empirical(3:1,30:3),requests=400"
    normal = LengthSettings(dist="normal", mean=50, std=40, low=10, high=60)
    drawn = synthetic.synthetic(WorkloadSettings(kind="synthetic", requests=300, input_len=normal), seed=0).requests
    assert min(r.input_len for r in drawn) == 10 and max(r.input_len for r in drawn) == 60  # clipped
    assert all(r.output_len is None for r in drawn)
    # as text (chat), one word a token: 4 characters each, the fake's count too
    assert len(drawn[0].prompt_text()) == 4 * drawn[0].input_len


def test_shared_prefix_groups_share_their_system_prompt_and_nothing_else():
    w = WorkloadSettings(
        kind="shared-prefix",
        groups=3,
        prefix_len=40,
        questions=4,
        input_len=LengthSettings(value=8),
        output_len=LengthSettings(value=5),
    )
    reqs = synthetic.shared_prefix(w, seed=0).requests
    assert len(reqs) == 12 and [r.group for r in reqs] == [g for g in range(3) for _ in range(4)]
    assert all(r.input_len == 48 == len(r.input_ids) and r.output_len == 5 for r in reqs)
    prefixes = {r.group: set() for r in reqs}
    for r in reqs:
        prefixes[r.group].add(r.input_ids[:40])
    assert all(len(p) == 1 for p in prefixes.values()) and len({next(iter(p)) for p in prefixes.values()}) == 3
    assert len({r.input_ids[40:] for r in reqs}) == 12  # distinct questions


# --- traces ---------------------------------------------------------------------------------------------------


def test_a_trace_keeps_its_arrival_times_scaled_its_lengths_and_its_prefixes(tmp_path):
    lines = [
        {"timestamp": 3000, "input_length": 700, "output_length": 5, "hash_ids": [7, 8]},
        {"timestamp": 1000, "input_length": 600, "output_length": 4, "hash_ids": [7, 9]},
        {"timestamp_s": 2.0, "input_len": 30, "output_len": 3, "group": 2, "prefix_length": 20},
        {"timestamp_s": 2.0, "input_len": 25, "output_len": 3, "group": 2, "prefix_length": 20},
    ]
    path = _write(tmp_path, "t.jsonl", "\n".join(map(json.dumps, lines)))
    w = trace.load(WorkloadSettings(kind="trace", path=path, time_scale=0.5))
    assert [r.arrival_s for r in w.requests] == [0.0, 0.5, 0.5, 1.0]  # sorted, from the first, scaled
    assert [(r.input_len, len(r.input_ids), r.output_len) for r in w.requests] == [
        (600, 600, 4),
        (30, 30, 3),
        (25, 25, 3),
        (700, 700, 5),
    ]
    first, last = w.requests[0], w.requests[3]
    assert first.input_ids[:512] == last.input_ids[:512] and first.input_ids[512:] != last.input_ids[512:600]
    assert w.requests[1].input_ids[:20] == w.requests[2].input_ids[:20]
    assert w.requests[1].input_ids[20:25] != w.requests[2].input_ids[20:25]
    assert [r.group for r in w.requests] == [7, 2, 2, 7] and w.order == "file"
    assert w.choose(6, 0, "level-2") == [0, 1, 2, 3, 0, 1]
    assert w.requests[2].origin == f"workload file {path}, line 4"


@pytest.mark.parametrize(
    "line, says",
    [
        ({"input_length": 5, "output_length": 5}, "no timestamp"),
        ({"timestamp": -1, "input_length": 5, "output_length": 5}, "no timestamp"),
        ({"timestamp": 0, "output_length": 5}, "no 'input_length' or 'input_len'"),
        ({"timestamp": 0, "input_length": 0, "output_length": 5}, "input_length = 0 is not a whole number >= 1"),
        ({"timestamp": 0, "input_length": 5, "output_length": "5"}, "output_length = '5'"),
        ({"timestamp": 0, "input_length": 5, "output_length": 5, "hash_ids": "1,2"}, "hash_ids is not a list"),
        (
            {"timestamp": 0, "input_length": 5, "output_length": 5, "group": 1, "prefix_length": 9},
            "prefix_length 9 is longer",
        ),
    ],
)
def test_a_bad_trace_line_fails_at_load_with_its_file_and_line(tmp_path, line, says):
    good = {"timestamp": 0, "input_length": 5, "output_length": 5}
    path = _write(tmp_path, "t.jsonl", json.dumps(good) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(ConfigError) as e:
        trace.load(WorkloadSettings(kind="trace", path=path))
    assert f"workload file {path}, line 2: " in e.value.message and says in e.value.message


# --- the context -------------------------------------------------------------------------------------------------


def test_lengths_beyond_the_context_fail_at_load_naming_the_request(tmp_path):
    path = _write(
        tmp_path,
        "t.jsonl",
        '{"timestamp": 0, "input_length": 90, "output_length": 5}\n'
        '{"timestamp": 1, "input_length": 99, "output_length": 5}\n',
    )
    w = WorkloadSettings(kind="trace", path=path, max_context=100)
    with pytest.raises(
        ConfigError,
        match=f"workload file {path}, line 2: 99 input \\+ 5 output tokens exceed the context of 100 tokens",
    ):
        workloads.load(BenchSettings(workload=w))
    w.max_context = 104
    assert len(workloads.load(BenchSettings(workload=w)).requests) == 2
    # no output length of its own: the larger phase's max_tokens counts
    syn = WorkloadSettings(kind="synthetic", requests=2, input_len=LengthSettings(value=90), max_context=100)
    bench = BenchSettings(workload=syn)
    bench.single_stream.max_tokens, bench.concurrency.max_tokens = 10, 11
    with pytest.raises(ConfigError, match="synthetic request 0: 90 input \\+ 11 output tokens"):
        workloads.load(bench)
    bench.concurrency.levels = []  # no levels: only the single stream's 10
    assert len(workloads.load(bench).requests) == 2


def test_text_lengths_are_estimated_for_the_check(tmp_path):
    w = Workload("x", (Request(text="a" * 400, origin="here"),))
    with pytest.raises(ConfigError, match=r"here: 100 input \(estimated at ~4 characters a token\) tokens exceed"):
        workloads.check_context(w, 99, max_tokens=None, what="test")


def test_a_prompt_set_is_the_workload_it_always_was():
    from sweep.bench.prompts import load_prompts

    ps = load_prompts("coding")
    w = workloads.load(BenchSettings())
    assert w.name == "coding" and [r.text for r in w.requests] == list(ps.prompts)
    assert w.choose(30, 5, "level-8") == ps.choose(30, 5, "level-8")  # the same draw: the same requests as before
    assert workloads.load(BenchSettings(workload=WorkloadSettings(path="encyclopedic"))).name == "encyclopedic"


# --- an experiment's benchmark.workload ------------------------------------------------------------------------

EXPERIMENT = """\
name: wl
server: {model_path: MODEL, flags: {context-length: 4096}}
grid: {axes: {drafter: {values: {none: {}}}}}
benchmark:
  single_stream: {runs: 1, warmup: 0, max_tokens: 16}
  concurrency: {levels: [1], max_tokens: 16}
"""


def _experiment(tmp_path: Path, workload: str) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(EXPERIMENT.replace("MODEL", str(tmp_path / "model")) + workload)
    return p


def test_an_experiment_takes_the_compact_form_or_a_mapping_and_overrides(tmp_path):
    exp = config.load(_experiment(tmp_path, "  workload: synthetic:in=uniform(10,20),out=8\n"))
    w = exp.benchmark.workload
    assert w.kind == "synthetic" and w.input_len == LengthSettings(dist="uniform", low=10, high=20)
    exp = config.load(
        _experiment(
            tmp_path,
            "  workload:\n    kind: shared-prefix\n    groups: 2\n"
            "    input_len: normal(20,5)\n    output_len: {dist: fixed, value: 4}\n",
        )
    )
    w = exp.benchmark.workload
    assert (w.kind, w.groups, w.input_len.dist, w.output_len.value) == ("shared-prefix", 2, "normal", 4)
    exp = config.load(_experiment(tmp_path, ""), ["benchmark.workload=trace:t.jsonl,scale=2"])
    assert (exp.benchmark.workload.kind, exp.benchmark.workload.time_scale) == ("trace", 2.0)
    exp = config.load(
        _experiment(tmp_path, "  workload: synthetic:in=5\n"), ["benchmark.workload.input_len=uniform(1,3)"]
    )
    assert (exp.benchmark.workload.input_len.dist, exp.benchmark.workload.input_len.high) == ("uniform", 3)
    # no workload: the point ids of before workloads existed; a workload is another point
    plain = build(config.load(_experiment(tmp_path, ""))).points[0].id
    assert build(config.load(_experiment(tmp_path, "  workload: null\n"))).points[0].id == plain
    assert build(config.load(_experiment(tmp_path, "  workload: synthetic:in=5\n"))).points[0].id != plain


def test_a_bad_workload_in_an_experiment_names_the_file_line_and_key(tmp_path):
    with pytest.raises(ConfigError, match=r"exp.yaml, line 7: benchmark.workload 'sharegp:x': unknown kind"):
        config.load(_experiment(tmp_path, "  workload: sharegp:x\n"))
    with pytest.raises(ConfigError, match=r"override \(benchmark.workload=synthetic:in=0.5\).*not a whole number"):
        config.load(_experiment(tmp_path, ""), ["benchmark.workload=synthetic:in=0.5"])
    with pytest.raises(ConfigError, match=r"line 7: benchmark.workload.input_len.value = 0 is out of range"):
        config.load(_experiment(tmp_path, "  workload: synthetic:in=0\n"))


def test_a_bad_workload_file_stops_the_plan_before_anything_launches(tmp_path):
    bad = _write(
        tmp_path, "chat.json", '[{"conversations": [{"from": "human", "value": "hi"}]},\n{"conversations": []}]'
    )
    exp = _experiment(tmp_path, f"  workload: sharegpt:{bad}\n")
    with pytest.raises(
        ConfigError, match=re.escape(f'workload file {bad}, line 2 (record 2 of the array): empty "conversations"')
    ):
        sweep.run(exp, mode="plan")
    with pytest.raises(ConfigError, match=f"workload file {bad}, line 2"):
        sweep.run(exp, mode="dry-run", progress=False, results_dir=tmp_path / "res")
    assert not (tmp_path / "res").exists()
    # lengths beyond the server's --context-length (4096 here), checked in the plan too
    long = _write(tmp_path, "t.jsonl", '{"timestamp": 0, "input_length": 4096, "output_length": 1}\n')
    with pytest.raises(
        ConfigError,
        match=r"line 1: 4096 input \+ 1 output tokens exceed the context of 4096 tokens "
        r"\(the context of .*model: --context-length or its config.json\)",
    ):
        sweep.run(_experiment(tmp_path, f"  workload: trace:{long}\n"), mode="plan")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"text_config": {"max_position_embeddings": 5000}}')
    assert workloads.model_context(str(tmp_path / "model"), {}) == 5000
    assert workloads.model_context(str(tmp_path / "nowhere"), {}) is None


# --- the requests table -------------------------------------------------------------------------------------------


def test_requests_written_before_the_workload_columns_still_load(tmp_path):
    rd = ResultsDir(tmp_path / "res", "exp", "dry-run").open()
    new = from_rows(
        [
            {
                "point_id": "new1",
                "phase": "level",
                "workload": "sharegpt:x.json",
                "conversation": 3,
                "turn": 1,
                "input_len_given": None,
                "output_len_given": 9,
            }
        ],
        "requests",
    )
    rd.write_point("new1", from_rows([{"point_id": "new1", "label": "a", "status": "ok"}], "points"), {"requests": new})
    added = {
        "workload",
        "input_len_given",
        "output_len_given",
        "conversation",
        "turn",
        "prefix_group",
        "arrival_s",
        "lengths_exact",
    }
    old_fields = [f for f in REQUESTS if f.name not in added]  # a requests file as the previous version wrote it
    old = pa.table(
        {f.name: pa.array(["old1"] if f.name == "point_id" else [None], f.type) for f in old_fields},
        schema=pa.schema(old_fields),
    )
    pq.write_table(old, tmp_path / "res" / "requests" / "old1.parquet")
    req = load(tmp_path / "res")["requests"].collect().sort("point_id")
    assert set(REQUESTS.names) <= set(req.columns)
    assert req.select("point_id", "workload", "conversation", "turn", "output_len_given").rows() == [
        ("new1", "sharegpt:x.json", 3, 1, 9),
        ("old1", None, None, None, None),
    ]
    assert req.schema["arrival_s"] == pl.Float64 and req.schema["turn"] == pl.Int32


def test_sweep_bench_takes_workload_or_prompts_not_both():
    import argparse

    from sweep.bench import cli

    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    args = p.parse_args(["--url", "http://127.0.0.1:1", "--workload", "shared-prefix:groups=3,prefix=16,in=4"])
    w = cli.settings_from_args(args).workload
    assert (w.kind, w.groups, w.prefix_len, w.input_len.value) == ("shared-prefix", 3, 16, 4)
    assert cli.settings_from_args(p.parse_args(["--url", "http://x:1"])).workload is None
    with pytest.raises(ConfigError, match="--prompts and --workload"):
        cli.settings_from_args(p.parse_args(["--url", "http://x:1", "--prompts", "coding", "--workload", "trace:t"]))


def test_a_dry_run_scales_the_workloads_own_output_lengths_as_it_scales_max_tokens(tmp_path):
    from sweep.experiment.dryrun import scaled

    exp = config.load(_experiment(tmp_path, "  workload: synthetic:in=5,out=uniform(40,80),requests=20\n"))
    full = workloads.load(exp.benchmark)
    dry, _ = scaled(exp)
    assert dry.benchmark.workload.output_scale == 0.125 and exp.benchmark.workload.output_scale == 1.0
    small = workloads.load(dry.benchmark)
    assert [r.output_len for r in small.requests] == [max(1, round(r.output_len / 8)) for r in full.requests]
    assert [r.input_ids for r in small.requests] == [r.input_ids for r in full.requests]  # inputs kept
    assert scaled(config.load(_experiment(tmp_path, "")))[0].benchmark.workload is None


def test_a_workload_file_is_read_once_while_it_does_not_change(tmp_path):
    good = '{"conversations": [{"from": "human", "value": "hi"}]}'
    path = Path(_write(tmp_path, "w.json", f"[{good}]"))
    settings = BenchSettings(workload=WorkloadSettings(kind="sharegpt", path=str(path)))
    first = workloads.load(settings)
    assert workloads.load(settings) is first  # the plan checks the experiment's and each axis value's
    path.write_text(f"[{good}, {good}]")
    assert len(workloads.load(settings).requests) == 2  # a changed file is read again
    path.write_text(f'[{good}, {{"conversations": []}}]')
    with pytest.raises(ConfigError, match="record 2 of the array"):
        workloads.load(settings)
