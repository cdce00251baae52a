"""The adaptive search on trees (topk > 1): the bound it prunes deeper trees by holds on SGLang's
own tree building (re-enacted here on random drafts: ``organize_draft_results`` keeps the top
``num_draft_tokens - 1`` candidates by cumulative score), and on the fake's figures the search
measures the shallowest tree first, prunes deeper ones only where their bound loses everywhere, and
runs the best tree where a deeper one wins. Pure: no server, no Ray."""

from __future__ import annotations

import random

import pytest

from sweep.fake import model
from sweep.search.adaptive import AdaptiveSearch, tree_accept_bound, tree_steps
from sweep.search.measured import SINGLE, Figures, Measured
from tests.search.test_adaptive import P

TUNED = dict(model.TUNED_NCCL)
LEVELS = (1, 4, 16, 64, 128)
VOCAB = 6


def _probs(ctx: tuple, seed: int) -> list[float]:
    """The drafter's next-token distribution after ``ctx`` (fixed per context)."""
    r = random.Random(hash((seed, ctx)))
    w = [r.random() ** 3 for _ in range(VOCAB)]
    return [x / sum(w) for x in w]


def _accepted(ctx: tuple, target: list[int], steps: int, topk: int, draft_tokens: int, seed: int) -> int:
    """Drafts one verify accepts: SGLang's EAGLE tree (a beam of ``topk`` nodes per level, each
    expanded by its ``topk`` likeliest children; the verified tree: the top ``draft_tokens - 1`` of
    all candidates by cumulative score), walked along the target's tokens."""
    cands = []  # (score, path)
    beam = [(1.0, ())]
    for depth in range(steps):
        expanded = []
        for score, path in beam:
            p = _probs(ctx + path, seed)
            kids = sorted(range(VOCAB), key=lambda t: -p[t])[:topk]
            expanded += [(score * p[t], path + (t,)) for t in kids]
            if depth == 0:
                break  # the first level: the root's topk children
        cands += expanded
        beam = sorted(expanded, key=lambda x: -x[0])[:topk]
    tree = {path for _, path in sorted(cands, key=lambda x: -x[0])[: draft_tokens - 1]}
    n = 0
    while n < len(target) and tuple(target[: n + 1]) in tree:
        n += 1
    return n


@pytest.mark.parametrize("topk,draft_tokens", [(4, 16), (2, 6), (3, 8)])
def test_a_deeper_tree_accepts_at_most_the_bound_from_a_shallower_one(topk, draft_tokens):
    """The facts the bound rests on, on the same contexts: a deeper tree reaches every shared depth no
    more often, and its accept length is at most AL(k) + j * p_k."""
    rng = random.Random(7)
    contexts = []
    for seed in range(300):
        ctx = tuple(rng.randrange(VOCAB) for _ in range(3))
        # the target's tokens: often the drafter's likeliest, sometimes not
        target, c = [], ctx
        for _ in range(8):
            p = _probs(c, seed)
            t = max(range(VOCAB), key=lambda i: p[i]) if rng.random() < 0.7 else rng.randrange(VOCAB)
            target.append(t)
            c += (t,)
        contexts.append((ctx, target, seed))
    reach = {}
    for k in range(1, 6):
        if topk + (k - 1) * topk * topk < draft_tokens - 1:
            continue  # SGLang refuses a tree its steps cannot fill
        acc = [_accepted(ctx, tgt, k, topk, draft_tokens, seed) for ctx, tgt, seed in contexts]
        reach[k] = tuple(sum(a >= d for a in acc) / len(acc) for d in range(1, k + 1))
    ks = sorted(reach)
    assert len(ks) >= 3
    for k in ks:
        assert all(a >= b for a, b in zip(reach[k], reach[k][1:]))  # deeper levels reached no more often
        f = Figures(1.0, 1.0, None, 0.0, reach[k], 1.0 + sum(reach[k]))
        for k2 in ks:
            if k2 <= k:
                continue
            assert all(d <= s + 1e-12 for d, s in zip(reach[k2], reach[k]))  # shared depths: no more often
            assert 1.0 + sum(reach[k2]) <= tree_accept_bound(f, k, k2) + 1e-12


def test_the_bound_arithmetic():
    f = Figures(10.0, 10.0, None, 0.0, (0.9, 0.6), 2.5)
    assert tree_accept_bound(f, 2, 2) == pytest.approx(2.5)
    assert tree_accept_bound(f, 2, 4) == pytest.approx(2.5 + 2 * 0.6)
    # no histogram: the last level's reach is at most the mean reach of all levels
    g = Figures(10.0, 10.0, None, 0.0, (), 2.5)
    assert tree_accept_bound(g, 2, 3) == pytest.approx(2.5 + 0.75)
    assert tree_accept_bound(Figures(1.0, 1.0, None, 0.0), 2, 3) is None


def tree_grid(rate: float, steps=(2, 3, 4), topk: int = 4, draft_tokens: int = 16) -> list[P]:
    out = [P("base", "drafter=none", {"drafter": "none"}, {"drafter": "drafter", "steps": "steps"}, True)]
    for k in steps:
        out.append(
            P(
                f"t{k}",
                f"drafter=tree,steps={k}",
                {"drafter": "tree", "steps": str(k)},
                {"drafter": "drafter", "steps": "steps"},
                False,
                {"steps": k, "topk": topk, "draft_tokens": draft_tokens, "rate": rate},
            )
        )
    return out


def figures(p: P, noise: float = 0.02) -> Measured:
    """What the fake server measures for the point (its model), with its accept histogram's reach."""
    r = p.resolved or {}
    spec = None if p.baseline else model.Spec(r["steps"], r["topk"], r["draft_tokens"], r["rate"])
    q = model.effective_accept_rate(spec) if spec else 0.0
    reach = () if spec is None else tuple(q**j for j in range(1, model.max_accepted(spec) + 1))
    single = model.single_stream_tok_s(spec, TUNED)
    out = {SINGLE: Figures(single, single, 0.05, noise, reach)}
    for c in LEVELS:
        thr = model.closed_loop_throughput_tok_s(c, 512, spec, TUNED, None)
        out[c] = Figures(thr, thr / c, 0.05 + 0.001 * c, noise, reach)
    return Measured(p.id, out)


def drive(points: list[P], hosts: int) -> tuple[list[str], dict[str, str]]:
    s = AdaptiveSearch(points, points)
    order, running = [], [p.id for p in s.take(hosts)]
    while running:
        pid = running.pop(0)
        order.append(pid)
        s.learn(pid, figures(next(p for p in points if p.id == pid)))
        running += [p.id for p in s.take(hosts - len(running))]
    return order, s.pruned()


def test_glm5_like_trees_run_the_shallowest_and_prune_the_deeper_ones_that_cannot_win():
    points = tree_grid(0.7)  # experiments/glm5_eagle_tree.yaml on the fake: every tree behind its baseline
    assert [tree_steps(p) for p in points] == [None, 2, 3, 4]
    s = AdaptiveSearch(points, points)
    assert s.outline() == (["base", "t2"], ["t3", "t4"])  # baseline and the shallowest tree first
    order, pruned = drive(points, hosts=2)
    assert order == ["base", "t2"] and set(pruned) == {"t3", "t4"}
    for why in pruned.values():
        assert "bounded from drafter=tree,steps=2" in why and "of drafter=none;" in why, why


def test_a_deeper_tree_that_wins_is_run_and_the_best_at_every_level_is_found():
    points = tree_grid(0.9, steps=(2, 3, 4, 5))  # a strong drafter: its deeper trees beat the baseline
    order, pruned = drive(points, hosts=1)
    assert order[:2] == ["base", "t2"] and set(order) | set(pruned) == {p.id for p in points}
    figs = {p.id: figures(p) for p in points}
    for lv in (SINGLE, *LEVELS):
        best = max(figs, key=lambda i: figs[i].levels[lv].throughput)
        ran = max(figs[i].levels[lv].throughput for i in order)
        assert ran >= figs[best].levels[lv].throughput / 1.028, (lv, best, order)


def test_a_tree_is_not_bounded_by_a_deeper_one_nor_by_another_topk():
    points = tree_grid(0.7)
    other = P(
        "t3-k2",
        "drafter=tree2,steps=3",
        {"drafter": "tree2", "steps": "3"},
        {"drafter": "drafter", "steps": "steps"},
        False,
        {"steps": 3, "topk": 2, "draft_tokens": 6, "rate": 0.7},
    )
    s = AdaptiveSearch([*points, other], [*points, other], {"t4": figures(points[3])})
    assert s.predict("t2") is None and s.predict("t3") is None  # only deeper measured: nothing bounds them
    assert s.predict("t3-k2") is None  # alone in its group (another topk and budget)
    assert "t2" in [p.id for p in s.take(10)]
