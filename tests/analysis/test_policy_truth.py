"""The policy against the fake's model, the truth of a dry run: the reference experiment's curves
(k26_eagle_adaptive: Kimi-K2.6 on 8 GPUs, the trained drafter at 1, 2, 3 and 5 steps, tuned NCCL, its
levels) as ``sweep.fake.adaptive.closed_loop_tok_s`` says a server serves them, derived into a
policy, and that policy's config served by SGLang's runtime rule on the same model."""

from __future__ import annotations

import polars as pl

from sweep.analysis import policy
from sweep.fake import adaptive, model
from sweep.sglang import adaptive as ad
from tests.analysis.test_policy import _confirming, _frames

LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
STEPS = (1, 2, 3, 5)
P = 0.75  # the trained drafter's acceptance in the reference's fake_args
NCCL = dict(model.TUNED_NCCL)


def _truth(k: int, c: int) -> float:
    return adaptive.closed_loop_tok_s(None, c, steps=k, accept_rate=P, nccl_env=NCCL)


def _served(config: dict, c: int) -> float:
    cfg = ad.load(ad.as_json(config))
    return adaptive.closed_loop_tok_s(
        cfg, c, steps=max(cfg.candidate_steps), accept_rate=P, nccl_env=NCCL, cuda_graph_bs=_GRAPHS
    )


_GRAPHS = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8)]


def test_the_policy_is_the_truths_best_step_count_per_level_one_per_tier():
    curves = {str(k): {c: _truth(k, c) for c in LEVELS} for k in STEPS}
    base = {c: _truth(0, c) for c in LEVELS}
    [p] = policy.derive(*_frames(curves, base=base))
    assert all(len(t.candidate_steps) == 1 for t in p.tiers), p.config()
    for lv in p.levels:  # the choice: the truth's fastest step count, or fewer steps within 1 % of it
        best = max(_truth(k, lv.concurrency) for k in STEPS)
        assert _truth(lv.choice, lv.concurrency) >= best * (1 - policy.CHOICE_TIE), lv
        assert 0 not in lv.within_noise
    # the config, served by SGLang's rule on the model (routing with padding, the EMA, step 0): what
    # its step counts serve statically, so within 1 % of the best static setup at every level
    for c in LEVELS:
        best = max(_truth(k, c) for k in STEPS)
        assert _served(p.config(), c) >= best * (1 - 0.015), (c, p.config())
    # the confirmation of that server: no level short, and the levels together no shortfall
    figures = {c: _served(p.config(), c) for c in LEVELS}
    levels, points = _confirming(curves, base, {"adaptive": (p.config(), figures)})
    [q] = policy.derive(levels, points)
    v = policy.verdict(policy.confirmation(q, levels))
    assert v.short_static == () and not v.together_static


def test_where_the_no_speculation_server_wins_at_high_load_the_answer_is_the_plain_table():
    """A weaker drafter (0.65, stock NCCL): speculation pays at low load only (+17 % at C=1), the
    no-speculation server is 7-8 % ahead from C=70. The adaptive server cannot switch off (its step 0
    still drafts), so it falls short there; the verdict names the plain table, with the no-speculation
    server's figures where it wins."""
    p45 = 0.65

    def truth(k: int, c: int) -> float:
        return adaptive.closed_loop_tok_s(None, c, steps=k, accept_rate=p45)

    curves = {str(k): {c: truth(k, c) for c in LEVELS} for k in (1, 2, 3)}
    base = {c: truth(0, c) for c in LEVELS}
    [p] = policy.derive(*_frames(curves, base=base))
    assert p.break_even is not None and all(len(t.candidate_steps) == 1 for t in p.tiers)
    assert p.plain_table()[-1]["steps"] == 0  # no speculation at the top
    cfg = ad.load(ad.as_json(p.config()))
    figures = {
        c: adaptive.closed_loop_tok_s(cfg, c, steps=max(cfg.candidate_steps), accept_rate=p45, cuda_graph_bs=_GRAPHS)
        for c in LEVELS
    }
    levels, points = _confirming(curves, base, {"adaptive": (p.config(), figures)})
    [q] = policy.derive(levels, points)
    table = policy.confirmation(q, levels)
    v = policy.verdict(table)
    top = table.filter(pl.col("concurrency") == LEVELS[-1]).row(0, named=True)
    assert top["envelope_label"] == "none" and top["vs_envelope"] < -0.05  # the baseline is the envelope up there
    assert v.winner == "plain" and v.off_wins == (70, 100, 250)  # the plain table: no speculation from C=70
    assert policy.revise(q, table) is None  # no step count an adaptive server runs closes that gap
