"""The confirmation phase's points, pure: a policy's own server as a point of the sweep (built from a
hand-made ``Policy`` on a plan's member), the plan's stand-ins checked by SGLang's rules before the
grid, and which policies a sweep confirms (the SLO picks' groups; without one, the best group)."""

import json
from types import SimpleNamespace

import polars as pl
import pytest

from sweep.analysis.confirmation import Chosen, choose
from sweep.analysis.policy import Policy, Tier
from sweep.core.errors import PlanError
from sweep.experiment import config, plan

EXP = """
name: c
server: {model_path: /m, tp_size: 8, sglang_version: "0.5.23", architecture: DeepseekV3ForCausalLM, gpu: H200,
         flags: {max-running-requests: 64}}
grid:
  axes:
    drafter:
      values:
        none: {}
        d1: {flags: {speculative-algorithm: EAGLE3, speculative-draft-model-path: /d1, speculative-eagle-topk: 1}}
    steps: {flag: speculative-num-steps, values: [1, 3, 5]}
    nccl:
      values:
        default: {}
        tuned: {env: {NCCL_PROTO: LL}}
  derived: {speculative-num-draft-tokens: "${add:${steps},1}"}
benchmark: {concurrency: {levels: [1, 4, 16]}, server_metrics: false}
policy: {confirm: true}
"""


def _plan(write_yaml, *overrides):
    return plan.build(config.load(write_yaml(EXP), list(overrides)))


def _policy(p, nccl="tuned", tiers=((1, 4, 5, (3, 5)), (16, 16, 0, (0, 1)))):
    members = [q for q in p.points if q.params.get("drafter") == "d1" and q.params.get("nccl") == nccl]
    return Policy(
        group=f"drafter=d1,nccl={nccl}",
        params={"drafter": "d1", "nccl": nccl},
        step_axis="steps",
        workload="",
        tiers=tuple(Tier(lo, hi, best, cands) for lo, hi, best, cands in tiers),
        break_even=None,
        member_ids=tuple(q.id for q in members),
    )


def test_a_confirmation_point_is_a_member_with_the_policys_launch(write_yaml):
    p = _plan(write_yaml)
    pol = _policy(p)
    member = next(q for q in p.points if q.id == pol.member_ids[0])
    cp = plan.confirmation_points(p, [Chosen(pol, ("SLO chat",))])
    assert len(cp.points) == 1 and not cp.notes
    pp = cp.points[0]
    assert pp.label == "drafter=d1,steps=adaptive,nccl=tuned"  # the axes' order, the step axis 'adaptive'
    assert pp.params == {"drafter": "d1", "steps": "adaptive", "nccl": "tuned"}
    assert cp.chosen[pp.id].why == ("SLO chat",)
    # the member's flags and env, the static chain replaced by the policy's launch: the largest candidate
    assert pp.flags["speculative-adaptive"] is True
    assert pp.flags["speculative-adaptive-config"] == {
        "1": {"candidate_steps": [3, 5]},
        "16": {"candidate_steps": [0, 1]},
    }
    assert (
        pp.flags["speculative-num-steps"],
        pp.flags["speculative-num-draft-tokens"],
        pp.flags["speculative-eagle-topk"],
    ) == (5, 6, 1)
    assert {k: v for k, v in pp.flags.items() if not k.startswith("speculative-")} == {
        k: v for k, v in member.flags.items() if not k.startswith("speculative-")
    }
    assert pp.flags["speculative-draft-model-path"] == "/d1" and pp.env == member.env == {"NCCL_PROTO": "LL"}
    # the same baseline and benchmark (levels, workload): a point of the sweep like any other
    assert pp.baseline_id == member.baseline_id and pp.bench == member.bench and not pp.baseline
    assert pp.id not in {q.id for q in p.points} and not pp.errors, pp.errors
    # its argv carries the config as JSON (the host writes it to a file before launch)
    i = pp.argv.index("--speculative-adaptive-config")
    assert json.loads(pp.argv[i + 1]) == pp.flags["speculative-adaptive-config"]
    assert pp.resolved is not None and pp.resolved["verdict"] == "ok"


def test_the_same_policy_gives_the_same_point_and_another_policy_another(write_yaml):
    p = _plan(write_yaml)
    a = plan.confirmation_points(p, [Chosen(_policy(p), ())]).points[0]
    again = plan.confirmation_points(_plan(write_yaml), [Chosen(_policy(_plan(write_yaml)), ())]).points[0]
    other = plan.confirmation_points(p, [Chosen(_policy(p, tiers=((1, 16, 3, (1, 3)),)), ())]).points[0]
    assert a.id == again.id and a.id != other.id
    # two SLOs picking the same group: one point
    twice = plan.confirmation_points(p, [Chosen(_policy(p), ("a",)), Chosen(_policy(p), ("b",))])
    assert len(twice.points) == 1


def test_members_found_by_label_where_the_ids_differ_and_a_lost_group_is_a_note(write_yaml):
    p = _plan(write_yaml)
    pol = _policy(p)
    stale = Policy(**{**pol.__dict__, "member_ids": ("aaaaaaaaaaaa",)})
    label = next(q.label for q in p.points if q.id == pol.member_ids[0])
    by_label = plan.confirmation_points(p, [Chosen(stale, ())], {"aaaaaaaaaaaa": label})
    assert [q.id for q in by_label.points] == [plan.confirmation_points(p, [Chosen(pol, ())]).points[0].id]
    lost = plan.confirmation_points(p, [Chosen(stale, ())])
    assert not lost.points and "plan any more" in lost.notes[0]


def test_sglang_0_5_10_refuses_the_policys_server_in_its_words(write_yaml):
    p = _plan(write_yaml, "server.sglang_version=0.5.10")
    pp = plan.confirmation_points(p, [Chosen(_policy(p), ())]).points[0]
    assert any("unrecognized arguments: --speculative-adaptive" in e for e in pp.errors), pp.errors


def test_the_plan_checks_the_launch_each_group_could_ask_for(write_yaml):
    p = _plan(write_yaml)
    assert [q.label for q in p.confirm_probes] == [
        "drafter=d1,steps=adaptive,nccl=default",
        "drafter=d1,steps=adaptive,nccl=tuned",
    ]
    probe = p.confirm_probes[0]
    assert probe.flags["speculative-adaptive-config"] == {"1": {"candidate_steps": [1, 3, 5]}}
    assert probe.flags["speculative-num-steps"] == 5 and not p.confirm_errors
    assert p.to_json()["confirm"]["after_grid"] is True
    p.require_valid()
    old = _plan(write_yaml, "server.sglang_version=0.5.10")
    assert old.confirm_errors and not old.invalid  # the grid itself runs on 0.5.10; the policy's server does not
    with pytest.raises(PlanError, match="policy.confirm") as e:
        old.require_valid()
    assert "unrecognized arguments: --speculative-adaptive" in e.value.message and "0.5.23" in e.value.fix
    old.require_valid(skip_invalid=True)  # recorded as invalid points instead, after the grid
    assert _plan(write_yaml, "policy.confirm=false").confirm_probes == []


def test_a_grid_without_step_groups_warns_that_nothing_will_be_confirmed(write_yaml):
    p = _plan(write_yaml, "grid.axes.steps.values=[3]")
    assert not p.confirm_probes
    assert any(w.startswith("policy-nothing-to-confirm") for w in p.warnings)


def _findings(slo_rows, best_rows):
    slo = pl.DataFrame(
        slo_rows,
        schema={
            "slo": pl.String,
            "workload": pl.String,
            "rank": pl.Int64,
            "point_id": pl.String,
            "label": pl.String,
            "baseline": pl.Boolean,
            "tok_s_gpu": pl.Float64,
        },
    )
    best = pl.DataFrame(best_rows, schema={"workload": pl.String, "concurrency": pl.Int64, "point_id": pl.String})
    return SimpleNamespace(slo_table=slo, best=best)


def _pol(group, ids):
    return Policy(
        group=group,
        params={},
        step_axis="steps",
        workload="",
        tiers=(Tier(1, 1, 1, (1,)),),
        break_even=None,
        member_ids=tuple(ids),
    )


def test_the_groups_of_the_slo_picks_once_each_and_a_baseline_pick_is_a_note():
    a, b = _pol("drafter=a", ["a1", "a3"]), _pol("drafter=b", ["b1", "b3"])
    f = _findings(
        [
            {
                "slo": "chat",
                "workload": "",
                "rank": 1,
                "point_id": "a3",
                "label": "drafter=a,steps=3",
                "baseline": False,
                "tok_s_gpu": 10.0,
            },
            {
                "slo": "chat",
                "workload": "",
                "rank": 2,
                "point_id": "b1",
                "label": "x",
                "baseline": False,
                "tok_s_gpu": 9.0,
            },
            {
                "slo": "fast",
                "workload": "",
                "rank": 1,
                "point_id": "a1",
                "label": "drafter=a,steps=1",
                "baseline": False,
                "tok_s_gpu": 5.0,
            },
            {
                "slo": "batch",
                "workload": "",
                "rank": 1,
                "point_id": "base",
                "label": "drafter=none",
                "baseline": True,
                "tok_s_gpu": 50.0,
            },
        ],
        [{"workload": "", "concurrency": 1, "point_id": "b3"}],
    )
    chosen, notes = choose([a, b], f)
    assert [(c.policy.group, c.why) for c in chosen] == [("drafter=a", ("SLO chat", "SLO fast"))]
    assert notes == [
        "SLO batch: its pick drafter=none is a baseline: the answer is no speculation, no policy to confirm"
    ]


def test_without_an_slo_the_group_best_at_the_most_levels():
    a, b = _pol("drafter=a", ["a1", "a3"]), _pol("drafter=b", ["b1", "b3"])
    f = _findings(
        [],
        [
            {"workload": "", "concurrency": 1, "point_id": "a3"},
            {"workload": "", "concurrency": 4, "point_id": "b1"},
            {"workload": "", "concurrency": 16, "point_id": "b3"},
            {"workload": "", "concurrency": 64, "point_id": "base"},
        ],
    )
    chosen, notes = choose([a, b], f)
    assert [(c.policy.group, c.why) for c in chosen] == [("drafter=b", ("best at 2 of 4 levels",))] and not notes
    assert choose([a, b], _findings([], [{"workload": "", "concurrency": 1, "point_id": "base"}])) == ([], [])


def test_where_no_pick_is_in_a_policys_group_the_best_policy_derived():
    def pol(group, ids, figures):
        levels = tuple(SimpleNamespace(concurrency=c, policy_tok_s=v) for c, v in figures.items())
        return Policy(
            group=group,
            params={},
            step_axis="steps",
            workload="",
            tiers=(Tier(1, 1, 1, (1,)),),
            break_even=None,
            member_ids=tuple(ids),
            levels=levels,
        )

    a = pol("drafter=a,nccl=default", ["a1"], {1: 90.0, 4: 200.0, 16: 400.0})
    b = pol("drafter=b,nccl=default", ["b1"], {1: 95.0, 4: 210.0, 16: 390.0})
    f = _findings(
        [
            {
                "slo": "chat",
                "workload": "",
                "rank": 1,
                "point_id": "t3",
                "label": "drafter=a,steps=3,nccl=tuned",
                "baseline": False,
                "tok_s_gpu": 10.0,
            }
        ],
        [{"workload": "", "concurrency": 1, "point_id": "t3"}],
    )
    chosen, notes = choose([a, b], f)
    assert [c.policy.group for c in chosen] == ["drafter=b,nccl=default"]
    assert "ahead of the other policies at 2 of 3 levels" in chosen[0].why[0]
    assert "in no policy's group" in notes[0]
