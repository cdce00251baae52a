"""Client-side axes (benchmark settings only): the grid's values, the plan's launch ids and keys, the
errors that name the value, the estimate's one startup per launch, and a launch's result split into
its points' results (run_launch's ``_points``, pure)."""

import time

import pytest

from sweep.core.errors import ConfigError
from sweep.core.record import Failure, PointResult
from sweep.experiment import config, estimate, plan
from sweep.host.point import _points

AXES = """
name: l
server: {model_path: /m, tp_size: 8, sglang_version: "0.5.10", architecture: LlamaForCausalLM}
benchmark: {concurrency: {levels: [1, 4], max_tokens: 512}}
grid:
  axes:
    drafter:
      values:
        none: {}
        d1: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d1, speculative-eagle-topk: 1,
                     speculative-num-steps: 2, speculative-num-draft-tokens: 3}}
    workload:
      values:
        code: {benchmark: {prompts: coding}}
        chat: {benchmark: {prompts: encyclopedic, api: chat}}
    max_tokens:
      key: benchmark.concurrency.max_tokens
      values: [128, 256]
"""


def build(write_yaml, text=AXES, *overrides):
    return plan.build(config.load(write_yaml(text), list(overrides)))


def test_client_side_axes_share_a_launch_and_keep_their_own_ids(write_yaml):
    p = build(write_yaml)
    assert len(p.points) == 8 and len(p.launches) == 2  # baselines keep the client-side axes
    by = {q.label: q for q in p.points}
    a, b = by["drafter=d1,workload=chat,max_tokens=256"], by["drafter=d1,workload=code,max_tokens=128"]
    assert a.launch_id == b.launch_id and a.id != b.id
    assert a.bench_key == "workload=chat,max_tokens=256" and a.roles["max_tokens"] == "benchmark"
    assert a.bench.api == "chat" and a.bench.prompts == "encyclopedic" and a.bench.concurrency.max_tokens == 256
    assert a.bench.concurrency.levels == [1, 4]  # merged over the experiment's section, not replacing it
    assert b.bench.api == "generate" and b.bench.concurrency.max_tokens == 128
    base = by["drafter=none,workload=chat,max_tokens=256"]
    assert base.launch_id != a.launch_id and a.baseline_id == base.id  # the baseline of the same workload
    js = p.to_json()
    assert js["launches"] == 2 and {q["launch_id"] for q in js["points"]} == {a.launch_id, base.launch_id}


def test_a_server_side_axis_still_makes_its_own_launches(write_yaml):
    text = AXES.replace("code: {benchmark: {prompts: coding}}", "code: {benchmark: {prompts: coding}, env: {W: c}}")
    p = build(write_yaml, text)
    assert len(p.launches) == 4  # the workload axis sets env now: a server change
    assert {q.bench_key for q in p.points} == {"max_tokens=128", "max_tokens=256"}


def test_the_point_id_of_an_axis_value_at_the_experiment_s_setting_is_the_plain_point_s(write_yaml):
    one = """
name: l
server: {model_path: /m, tp_size: 8}
grid: {axes: {drafter: {values: {none: {}}}}}
"""
    plain = build(write_yaml, one).points[0]
    keyed = build(
        write_yaml,
        one.replace("{none: {}}}", "{none: {}}}, mt: {key: benchmark.concurrency.max_tokens, values: [512]}"),
    ).points[0]
    assert keyed.id == plain.id and keyed.launch_id == plain.launch_id


@pytest.mark.parametrize(
    "change, culprit",
    [
        ("chat: {benchmark: {prompts: encyclopedic, api: chat}}", "grid.axes.workload.values.chat.benchmark.api"),
        ("chat: {benchmark: {concurency: {max_tokens: 3}}}", "grid.axes.workload.values.chat.benchmark.concurency"),
        (
            "chat: {benchmark: {concurrency: {max_tokens: 0}}}",
            "grid.axes.workload.values.chat.benchmark.concurrency.max_tokens",
        ),
        (
            "chat: {benchmark: {concurrency: {levels: many}}}",
            "grid.axes.workload.values.chat.benchmark.concurrency.levels",
        ),
    ],
)
def test_a_bad_benchmark_setting_names_the_axis_value(write_yaml, change, culprit):
    text = AXES.replace("chat: {benchmark: {prompts: encyclopedic, api: chat}}", change)
    if "api" in culprit:
        text = text.replace("api: chat", "api: telepathy")
    with pytest.raises(ConfigError) as e:
        build(write_yaml, text)
    assert culprit in e.value.message and e.value.fix


@pytest.mark.parametrize(
    "axis, words",
    [
        ("{key: concurrency.max_tokens, values: [1]}", "is not a benchmark setting"),
        ("{key: benchmark.concurrency.max_tokens, flag: max-total-tokens, values: [1]}", "has both flag: and key:"),
        ("{key: benchmark.concurrency.max_tokens, values: 3}", "is one value, not a list"),
    ],
)
def test_a_bad_key_axis_is_refused(write_yaml, axis, words):
    text = AXES.replace(
        """    max_tokens:
      key: benchmark.concurrency.max_tokens
      values: [128, 256]
""",
        f"    max_tokens: {axis}\n",
    )
    with pytest.raises(ConfigError) as e:
        build(write_yaml, text)
    assert words in e.value.message and "grid.axes.max_tokens" in e.value.message


def test_the_estimate_counts_one_startup_per_launch(write_yaml):
    shared = build(write_yaml)
    est, _ = estimate._for_experiment(shared.experiment, shared.points, mode="real", scale=None, hosts=1)
    assert est.launches == 2 and sum(p.startup_s > 0 for p in est.points) == 2
    assert est.points[1].bench_s > 0 and est.points[1].overhead_s == 0
    assert "8 points in 2 server launches" in estimate.describe(est, estimate.PriorRuns())[0]
    text = AXES.replace("code: {benchmark: {prompts: coding}}", "code: {benchmark: {prompts: coding}, env: {W: c}}")
    apart, _ = estimate._for_experiment(
        build(write_yaml, text).experiment, build(write_yaml, text).points, mode="real", scale=None, hosts=1
    )
    assert apart.launches == 4 and apart.makespan_s > est.makespan_s


def _launch(status="ok", failure=None):
    now = time.time()
    return PointResult("a", "h", "n", status, failure, phases={"load": 3.0}, started_at=now - 10, ended_at=now)


def test_a_launch_splits_into_its_points_results():
    now = time.time()
    ok = PointResult("a", "h", "n", "ok", started_at=now - 5, ended_at=now - 4)
    bad = PointResult("b", "h", "n", "failed", Failure("benchmark", "no route"), started_at=now - 4, ended_at=now - 3)
    fine = PointResult("c", "h", "n", "ok", started_at=now - 3, ended_at=now - 2)
    got = _points(_launch(), ["a", "b", "c"], {"a": ok, "b": bad, "c": fine})
    assert [r.point_id for r in got] == ["a", "b", "c"] and [r.status for r in got] == ["ok", "failed", "ok"]
    assert got[1].failure.reason == "no route" and got[0].phases and not got[1].phases  # one startup
    # the server died during b: a keeps its ok, b and c carry the launch's failure
    died = Failure("benchmark", "server exited")
    measuring = PointResult("b", "h", "n", "failed", started_at=now - 4)
    got = _points(_launch("failed", died), ["a", "b", "c"], {"a": ok, "b": measuring})
    assert [r.status for r in got] == ["ok", "failed", "failed"] and got[2].failure == died


def test_the_plan_is_a_list_of_launches_each_a_server_and_its_points(write_yaml):
    p = build(write_yaml)
    launches = p.launches
    assert [type(launch).__name__ for launch in launches] == ["Launch", "Launch"]
    assert [launch.id for launch in launches] == [launch.points[0].launch_id for launch in launches]
    assert [q.id for launch in launches for q in launch.points] == [q.id for q in p.points]  # plan order kept
    for launch in launches:
        assert len(launch.points) == 4 and len({q.launch_id for q in launch.points}) == 1
        assert all(q.flags == launch.flags and q.env == launch.env for q in launch.points)  # one server
        assert launch.launcher == list(p.experiment.server.launcher) and launch.first is launch.points[0]
    assert plan.launches_of([]) == [] and [x.id for x in plan.launches_of(p.points[:1])] == [p.points[0].launch_id]


def test_a_launch_that_ended_as_a_whole_stands_for_each_of_its_points():
    """A lost host, a follower's death, a bug: the one result of a launch, under each point's id,
    measurements and the startup's phases on none but the first."""
    from sweep.core.record import LaunchResult

    now = time.time()
    whole = PointResult("a", "h", "n", "failed", Failure("host", "lost"), phases={"load": 3.0}, started_at=now - 9)
    whole.levels = object()  # type: ignore[assignment]  # what the first point measured
    got = LaunchResult.shared(whole, ["a", "b", "c"]).points
    assert [r.point_id for r in got] == ["a", "b", "c"] and all(r.failure == whole.failure for r in got)
    assert got[0].phases == {"load": 3.0} and got[0].levels is whole.levels
    assert [r.phases for r in got[1:]] == [{}, {}] and [r.levels for r in got[1:]] == [None, None]
    assert all(r.started_at == now - 9 and r.host == "h" for r in got)
