"""The speculative policy across load (sweep/analysis/policy.py), derived from hand-made frames: the
levels' throughputs and the points table, with no requests (the level-wide noise floor alone: two
figures within about +-5.5 % of each other are within noise)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from sweep.analysis import noise, policy
from sweep.results.store import with_flags

LEVELS = (1, 2, 8, 32, 64, 128)


def _frames(
    curves: dict[str, dict[int, float]],
    *,
    base: dict[int, float] | None,
    topk: int = 1,
    pruned: tuple[int, ...] = (),
    drafter: str = "d1",
    extra: list | None = None,
    more_argv: tuple[str, ...] = (),
):
    """Points and levels of one drafter with step counts ``curves`` ({"1": {C: tok/s}}) against the
    baseline ``base``; ``pruned``: step counts the adaptive search did not run."""
    roles = {"drafter": "drafter", "steps": "steps"}
    points, levels = [], []
    base_id = "base" if base is not None else None
    if base is not None:
        points.append(
            {
                "point_id": "base",
                "label": "drafter=none",
                "status": "ok",
                "baseline": True,
                "baseline_id": None,
                "param_roles": roles,
                "axis_drafter": "none",
                "axis_steps": None,
                "argv": ["python"],
                "sglang_version": "0.5.10",
            }
        )
    for steps, curve in curves.items():
        pid = f"{drafter}-{steps}"
        argv = [
            "python",
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-num-steps",
            steps,
            "--speculative-eagle-topk",
            str(topk),
            *more_argv,
        ]
        points.append(
            {
                "point_id": pid,
                "label": f"drafter={drafter},steps={steps}",
                "status": "ok",
                "baseline": False,
                "baseline_id": base_id,
                "param_roles": roles,
                "axis_drafter": drafter,
                "axis_steps": steps,
                "argv": argv,
                "sglang_version": "0.5.10",
            }
        )
        for c, tok in curve.items():
            b = (base or {}).get(c)
            levels.append(
                {
                    "point_id": pid,
                    "label": f"drafter={drafter},steps={steps}",
                    "concurrency": c,
                    "output_throughput": tok,
                    "per_request_tok_s": tok / c,
                    "baseline_output_throughput": b,
                    "baseline_per_request_tok_s": None if b is None else b / c,
                    "baseline_label": "drafter=none" if b is not None else None,
                }
            )
    for steps in pruned:
        points.append(
            {
                "point_id": f"{drafter}-{steps}",
                "label": f"drafter={drafter},steps={steps}",
                "failure_reason": "at best within noise of a point already measured at every level (1); closest "
                "at C=1: at most 80 tok/s (+5% allowed) against 76 tok/s (+-6% noise) of drafter=d1,steps=3; "
                "predicted from drafter=d1,steps=3",
                "status": "pruned",
                "baseline": False,
                "baseline_id": base_id,
                "param_roles": roles,
                "axis_drafter": drafter,
                "axis_steps": str(steps),
                "argv": [],
                "sglang_version": "0.5.10",
            }
        )
    points += extra or []
    return pl.DataFrame(levels), with_flags(pl.DataFrame(points))  # the flags column, as results.load fills it


# a drafter ahead at low load and behind at saturation: 3 steps best at C<=2, 1 step at C=8, the
# baseline within noise at C=32 and ahead beyond noise from C=64
CURVES = {
    "1": {1: 60, 2: 118, 8: 430, 32: 1000, 64: 1200, 128: 1300},
    "2": {1: 73, 2: 140, 8: 400, 32: 900, 64: 1050, 128: 1150},
    "3": {1: 76, 2: 144, 8: 380, 32: 820, 64: 950, 128: 1000},
}
BASE = {1: 50, 2: 100, 8: 380, 32: 1010, 64: 1400, 128: 1600}


def test_a_drafter_ahead_at_low_load_and_behind_at_saturation():
    levels, points = _frames(CURVES, base=BASE)
    [p] = policy.derive(levels, points)
    assert p.group == "drafter=d1" and p.step_axis == "steps" and p.params == {"drafter": "d1"}
    by_level = {lv.concurrency: (lv.best_steps, lv.candidate_steps) for lv in p.levels}
    assert by_level == {1: (3, (2, 3)), 2: (3, (2, 3)), 8: (1, (1,)), 32: (0, (0, 1)), 64: (0, (0,)), 128: (0, (0,))}
    # each level's choice: the fastest step count (fewer steps in a tie, within 1 %), never 0 (the
    # baseline's figure is not an adaptive server's step 0)
    assert {lv.concurrency: lv.choice for lv in p.levels} == {1: 3, 2: 3, 8: 1, 32: 1, 64: 1, 128: 1}
    assert {lv.concurrency: lv.within_noise for lv in p.levels}[1] == (2, 3)
    # one step count per tier, adjacent equal choices merged; the second key the next graph batch size
    # above C=2's batches (no running requests recorded: a level of C runs batches of C), so that C=8's
    # drain (batches 3-7) stays in its tier
    assert [(t.lo, t.hi, t.best_steps, t.candidate_steps, t.levels) for t in p.tiers] == [
        (1, 2, 3, (3,), (1, 2)),
        (3, 128, 1, (1,), (8, 32, 64, 128)),
    ]
    assert [t.batches_text() for t in p.tiers] == ["batches 1-2", "batches >= 3"]
    assert p.config() == {"1": {"candidate_steps": [3]}, "3": {"candidate_steps": [1]}}
    json.loads(p.config_json())  # a file SGLang's loader reads
    assert p.launch_flags() == {
        "speculative-adaptive": True,
        "speculative-adaptive-config": p.config(),
        "speculative-num-steps": 3,
        "speculative-num-draft-tokens": 4,
        "speculative-eagle-topk": 1,
    }
    # ahead beyond noise up to C=8, within noise at 32, behind beyond noise from 64: off between 8 and 64,
    # the estimate where the best step count's ratio crosses 1 (1.13 at 8, 0.99 at 32)
    be = p.break_even
    assert (be.low, be.high) == (8, 64) and 8 < be.concurrency < 32
    assert be.text().startswith("speculation off above C~") and "(between C=8 and C=64)" in be.text()
    assert p.static_steps == 1  # the best single static setup by mean rank over the levels
    plain = p.plain_table()
    # the plain table: the fastest option, fewer steps in a tie (at C=32 the baseline's 1010 against 1000)
    assert [(r["lo"], r["to"], r["steps"]) for r in plain] == [(1, 7, 3), (8, 31, 1), (32, None, 0)]
    assert plain[-1]["label"] == "drafter=none" and plain[-1]["flags"] == {}
    assert plain[0]["flags"] == {
        "speculative-num-steps": 3,
        "speculative-num-draft-tokens": 4,
        "speculative-eagle-topk": 1,
    }
    at = {lv.concurrency: lv for lv in p.levels}
    assert at[1].policy_tok_s == 76 and at[1].static_tok_s == 60 and at[1].baseline_tok_s == 50
    assert at[32].policy_tok_s == 1000  # the choice's own figure, never the baseline's
    assert p.label() == "drafter=d1,steps=adaptive"


def test_the_candidates_are_the_step_counts_within_noise_of_the_best():
    levels, points = _frames({"1": {1: 100}, "2": {1: 108}, "3": {1: 112}}, base={1: 60})
    [p] = policy.derive(levels, points)
    assert p.levels[0].candidate_steps == (2, 3)  # 1 is 11 % behind: beyond the floor's +-5.5 %
    wide = policy.derive(levels, points, level_noise=0.05)[0]  # a noisier sweep widens the set
    assert wide.levels[0].candidate_steps == (1, 2, 3)


def test_a_drafter_that_never_pays_gets_no_policy():
    levels, points = _frames({"1": {1: 90, 8: 300}, "2": {1: 80, 8: 250}}, base={1: 100, 8: 400})
    found = policy.derive(levels, points)
    assert list(found) == []
    assert any("drafter=d1: no policy" in n and "no speculation" in n for n in found.notes)


def test_speculation_that_never_stops_paying_has_no_break_even():
    levels, points = _frames({"1": {1: 60, 8: 420}, "2": {1: 70, 8: 450}}, base={1: 50, 8: 380})
    [p] = policy.derive(levels, points)
    assert p.break_even is None and 0 not in p.levels[-1].candidate_steps


def test_trees_are_left_out_with_sglangs_words():
    levels, points = _frames({"2": {1: 80}, "3": {1: 90}}, base={1: 50}, topk=4)
    found = policy.derive(levels, points)
    assert list(found) == []
    assert any("tree (topk > 1)" in n and "only topk=1 is supported" in n for n in found.notes)


def test_pruned_points_are_no_candidates_and_the_policy_says_so():
    levels, points = _frames({"1": {1: 60}, "3": {1: 76}}, base={1: 50}, pruned=(5,))
    [p] = policy.derive(levels, points)
    assert p.steps.keys() == {1, 3}
    assert any(
        "pruned by the adaptive search" in n
        and "drafter=d1,steps=5 (predicted at C=1: at most 80 tok/s "
        "(+5% allowed) against 76 tok/s (+-6% noise) of drafter=d1,steps=3)"
        in n
        for n in p.notes
    )


def test_a_confirmation_point_is_no_step_count_of_its_group():
    confirm = {
        "point_id": "adaptive",
        "label": "drafter=d1,steps=adaptive",
        "status": "ok",
        "baseline": False,
        "baseline_id": "base",
        "param_roles": {"drafter": "drafter", "steps": "steps"},
        "axis_drafter": "d1",
        "axis_steps": "adaptive",
        "argv": ["python", "--speculative-adaptive"],
        "sglang_version": "0.5.10",
    }
    levels, points = _frames(CURVES, base=BASE, extra=[confirm])
    levels = pl.concat(
        [
            levels,
            levels.filter(pl.col("point_id") == "d1-3").with_columns(
                point_id=pl.lit("adaptive"), output_throughput=pl.col("output_throughput") * 10
            ),
        ]
    )
    [p] = policy.derive(levels, points)
    assert p.confirmation_ids == ("adaptive",) and "adaptive" not in p.member_ids
    assert p.levels[0].best_steps == 3  # its (much higher) figures made no tier


@pytest.mark.parametrize(
    "version, has",
    [
        ("0.5.10", False),
        ("0.5.23", True),
        ("0.6.0", True),
        ("7f8f030", True),
        ("0.0.0.dev0+g7f8f030", True),
        ("weird", None),
        (None, None),
    ],
)
def test_which_sglang_has_the_flags(version, has):
    assert policy.has_adaptive(version) is has
    if has is False:
        assert policy.needs_text(version).startswith("needs SGLang >= 0.5.23 (--speculative-adaptive)")


def test_the_versions_agree_with_sglangs_own_flags():
    """policy.py may not import sweep.sglang (the analysis reads only results): its versions are
    checked here against the flags each release's parser has."""
    from sweep.sglang.flagnames import FLAGS

    for version, flags in FLAGS.items():
        assert policy.has_adaptive(version) is (
            "speculative-adaptive" in flags and "speculative-adaptive-config" in flags
        ), version


def test_the_noise_rule_is_the_reports():
    """Two figures 5 % apart are within noise at the floor, 6 % apart are not (noise.judged)."""
    assert noise.level_sigma(None) == noise.LEVEL_NOISE_FLOOR
    levels, points = _frames({"1": {1: 95}, "2": {1: 100}}, base={1: 60})
    assert policy.derive(levels, points)[0].levels[0].candidate_steps == (1, 2)
    levels, points = _frames({"1": {1: 94}, "2": {1: 100}}, base={1: 60})
    assert policy.derive(levels, points)[0].levels[0].candidate_steps == (2,)


def test_the_sglang_of_the_policy_is_the_oldest_the_points_ran():
    levels, points = _frames(CURVES, base=BASE)
    newer = points.with_columns(sglang_version=pl.lit("0.5.23"))
    assert policy.derive(levels, newer)[0].sglang_version == "0.5.23"
    mixed = newer.with_columns(
        sglang_version=pl.when(pl.col("point_id") == "d1-2").then(pl.lit("0.5.10")).otherwise(pl.col("sglang_version"))
    )
    assert policy.derive(levels, mixed)[0].sglang_version == "0.5.10"  # the flags must be in every one


def test_tier_keys_follow_the_batches_the_levels_ran_padded_as_sglang_pads_them():
    levels, points = _frames(CURVES, base=BASE)
    # C=2 ran up to 2 at once, C=8 mostly 7 (its drain): SGLang pads 7 to the graph size 7 and routes it to
    # the largest key at or below it; a key of 8 (the level's C) would send C=8's batches of 3-7 to C=2's tier
    ran = {(f"d1-{k}", c): (c * 0.9, float(c)) for k in CURVES for c in LEVELS}
    [p] = policy.derive(levels, points, batches=ran)
    assert [t.lo for t in p.tiers] == [1, 3]
    # with graphs for 1, 2, 4, 8 only (--cuda-graph-bs), a batch of 3 pads to 4: the key is the graph size 4
    levels, graphs = _frames(CURVES, base=BASE, more_argv=("--cuda-graph-bs", "1", "2", "4", "8"))
    [p] = policy.derive(levels, graphs, batches=ran)
    assert [t.lo for t in p.tiers] == [1, 4]
    assert [t.batches_text() for t in p.tiers] == ["batches 1-2", "batches >= 3"]


def test_several_candidates_only_when_asked_and_a_misspelled_mode_is_refused():
    from sweep.core import ConfigError

    levels, points = _frames(CURVES, base=BASE)
    [p] = policy.derive(levels, points, candidates="within_noise")
    assert p.config()["1"] == {"candidate_steps": [2, 3]} and p.candidates == "within_noise"
    assert p.tiers[0].best_steps == 3
    with pytest.raises(ConfigError, match="policy.candidates = 'within-noise' is not a mode") as e:
        policy.derive(levels, points, candidates="within-noise")
    assert "within_noise" in e.value.fix


def test_a_tie_goes_to_the_fewer_steps():
    levels, points = _frames({"1": {1: 100}, "2": {1: 100.5}, "3": {1: 99}}, base={1: 60})
    [p] = policy.derive(levels, points)
    assert p.levels[0].best_steps == 2 and p.levels[0].choice == 1 and p.config() == {"1": {"candidate_steps": [1]}}
    levels, points = _frames({"1": {1: 100}, "2": {1: 102}}, base={1: 60})
    assert policy.derive(levels, points)[0].levels[0].choice == 2  # 2 % is no tie: the fastest


EIGHT = (1, 2, 4, 8, 16, 32, 64, 128)


def _confirming(curves, base, runs: dict[str, tuple[dict, dict[int, float]]]):
    """Frames with confirmation points: ``runs`` {axis value: (its config, {C: tok/s})}."""
    extra, rows = [], []
    for value, (config, figures) in runs.items():
        pid = f"confirm-{value}"
        extra.append(
            {
                "point_id": pid,
                "label": f"drafter=d1,steps={value}",
                "status": "ok",
                "baseline": False,
                "baseline_id": "base",
                "param_roles": {"drafter": "drafter", "steps": "steps"},
                "axis_drafter": "d1",
                "axis_steps": value,
                "argv": ["python", "--speculative-adaptive", "--speculative-adaptive-config", json.dumps(config)],
                "sglang_version": "0.5.23",
            }
        )
        for c, tok in figures.items():
            rows.append(
                {
                    "point_id": pid,
                    "label": f"drafter=d1,steps={value}",
                    "concurrency": c,
                    "output_throughput": tok,
                    "per_request_tok_s": tok / c,
                    "baseline_output_throughput": base[c],
                    "baseline_per_request_tok_s": base[c] / c,
                    "baseline_label": "drafter=none",
                }
            )
    levels, points = _frames(curves, base=base, extra=extra)
    return pl.concat([levels, pl.DataFrame(rows)], how="diagonal_relaxed"), points


def test_below_the_envelope_at_7_of_8_levels_is_a_shortfall_though_each_is_within_noise():
    curves = {"1": {c: 100.0 * c for c in EIGHT}, "2": {c: 104.0 * c for c in EIGHT}}
    base = {c: 80.0 * c for c in EIGHT}
    [p] = policy.derive(*_frames(curves, base=base))
    assert p.config() == {"1": {"candidate_steps": [2]}}
    ours = {c: 104.0 * c * (0.97 if c != 8 else 1.01) for c in EIGHT}  # 3 % below at 7 levels
    levels, points = _confirming(curves, base, {"adaptive": (p.config(), ours)})
    [p] = policy.derive(levels, points)
    v = policy.verdict(policy.confirmation(p, levels))
    assert v.short == () and v.below == 7 and v.together and v.winner != "policy"
    six = {c: 104.0 * c * (0.97 if c not in (8, 16) else 1.01) for c in EIGHT}  # 6 of 8: chance
    levels, points = _confirming(curves, base, {"adaptive": (p.config(), six)})
    [p] = policy.derive(levels, points)
    v = policy.verdict(policy.confirmation(p, levels))
    assert v.below == 6 and not v.together and v.winner == "policy"


def test_a_confirmation_short_of_the_best_static_setup_is_revised_and_confirmed_again():
    curves = {
        "1": {1: 60, 2: 118, 8: 430, 32: 1000},
        "2": {1: 74, 2: 143, 8: 435, 32: 995},
        "3": {1: 76, 2: 144, 8: 380, 32: 820},
    }
    base = {1: 50, 2: 100, 8: 300, 32: 700}
    [p] = policy.derive(*_frames(curves, base=base))
    assert p.static_steps == 2  # the best mean rank over the levels
    assert p.config() == {"1": {"candidate_steps": [3]}, "2": {"candidate_steps": [2]}, "10": {"candidate_steps": [1]}}
    # its own server: well short of the static 2 steps at C=1 (the EMA's warm-up, say), fine above
    first = {1: 62, 2: 142, 8: 433, 32: 998}
    levels, points = _confirming(curves, base, {"adaptive": (p.config(), first)})
    [p] = policy.derive(levels, points)
    rounds = policy.settle(p, levels)
    assert [r.policy.revision for r in rounds] == [1, 2]
    assert rounds[0].verdict.short_static == (1,) and rounds[0].verdict.winner != "policy"
    r2 = rounds[1].policy
    assert rounds[1].table.is_empty()  # awaits its confirmation
    # the short tier takes the best static step count, and merges with its equal neighbour
    assert r2.config() == {"1": {"candidate_steps": [2]}, "10": {"candidate_steps": [1]}}
    assert r2.label() == "drafter=d1,steps=adaptive-r2" and r2.revised[0].startswith("revision 2: C=1: -16%")
    # confirmed: the second round is measured, matched by its config, and wins
    levels, points = _confirming(
        curves, base, {"adaptive": (p.config(), first), "adaptive-r2": (r2.config(), {1: 74, 2: 143, 8: 434, 32: 999})}
    )
    [p] = policy.derive(levels, points)
    rounds = policy.settle(p, levels)
    assert [r.policy.revision for r in rounds] == [1, 2] and rounds[1].verdict.winner == "policy"
    assert len(policy.settle(p, levels, rounds=0)) == 1  # no revision allowed


def test_rounds_are_bounded_and_a_policy_that_only_loses_collapses_to_the_static_setup():
    curves = {"1": {1: 100, 8: 500}, "2": {1: 120, 8: 450}}
    base = {1: 50, 8: 300}
    [p] = policy.derive(*_frames(curves, base=base))
    assert p.config() == {"1": {"candidate_steps": [2]}, "2": {"candidate_steps": [1]}}
    # short of the best static setup at every level: every tier would take it, so no revision
    levels, points = _confirming(curves, base, {"adaptive": (p.config(), {1: 80, 8: 400})})
    [p] = policy.derive(levels, points)
    rounds = policy.settle(p, levels)
    assert len(rounds) == 1 and rounds[0].verdict.winner in ("static", "plain")
    assert policy.revise(p, rounds[0].table) is None


def test_the_best_static_setup_may_be_no_speculation():
    """The baseline ahead at every level but C=1: the best single static setup is no speculation, and
    the policy's gain over it is where it speculates (C=1), not '+50% over the best static steps=1' at
    C=128, where the policy runs none and running none all along does as well."""
    from sweep.analysis import deploy

    curves = {"1": {1: 120, 2: 205, 8: 380, 32: 700, 64: 1000, 128: 1100}}
    base = {1: 100, 2: 200, 8: 420, 32: 1000, 64: 1400, 128: 1650}
    [p] = policy.derive(*_frames(curves, base=base))
    assert p.static_steps == 0
    assert [lv.static_tok_s for lv in p.levels] == [base[c] for c in LEVELS]
    assert deploy._predicted(p).startswith(" Predicted: up to +20% over the best static setup (no speculation) at C=1")
