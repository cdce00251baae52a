"""The adaptive search's decisions, on figures from the fake's performance model (sweep/fake/model.py:
the same figures the fake server serves): it runs every point that is best somewhere, prunes the rest
with reasons that name what decided them, and hands out baselines, probes and the cost-of-a-step
probe first. Pure: no server, no Ray (the sweep-level tests run it on the fake server)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest

from sweep.fake import model
from sweep.search.adaptive import AdaptiveSearch, chain_steps, cycle_slope, group_key
from sweep.search.measured import SINGLE, Figures, Measured, reached

TUNED = dict(model.TUNED_NCCL)
LEVELS = (1, 10, 100, 250)
RATES = {"strong": 0.78, "mid": 0.7, "weak": 0.55}


@dataclass
class P:
    id: str
    label: str
    params: dict
    roles: dict
    baseline: bool
    resolved: dict | None = None
    env: dict = field(default_factory=dict)


def grid(drafters=RATES, steps=range(1, 8), nccl=("default", "tuned")) -> list[P]:
    """Baselines (one per NCCL profile), then every drafter x steps x NCCL point."""
    out = [
        P(
            f"b-{n}",
            f"drafter=none,nccl={n}",
            {"drafter": "none", "nccl": n},
            {"drafter": "drafter", "nccl": "env"},
            True,
        )
        for n in nccl
    ]
    for d, k, n in itertools.product(drafters, steps, nccl):
        out.append(
            P(
                f"{d}-{k}-{n}",
                f"drafter={d},steps={k},nccl={n}",
                {"drafter": d, "steps": str(k), "nccl": n},
                {"drafter": "drafter", "steps": "steps", "nccl": "env"},
                False,
                {"steps": k, "topk": 1, "draft_tokens": k + 1},
            )
        )
    return out


def figures(p: P, noise: float = 0.02) -> Measured:
    """What the fake server measures for this point (its model), per level."""
    env = TUNED if p.params["nccl"] == "tuned" else {}
    spec = (
        None
        if p.baseline
        else model.Spec(p.resolved["steps"], 1, p.resolved["draft_tokens"], RATES[p.params["drafter"]])
    )
    hist_reached = () if spec is None else tuple(spec.accept_rate**j for j in range(1, spec.steps + 1))
    single = model.single_stream_tok_s(spec, env)
    out = {SINGLE: Figures(single, single, 0.05, noise, hist_reached)}
    for c in LEVELS:
        thr = model.closed_loop_throughput_tok_s(c, 512, spec, env, 48 if spec else None)
        out[c] = Figures(thr, thr / c, 0.05 + 0.001 * c, noise, hist_reached)
    return Measured(p.id, out)


def run(
    points: list[P], hosts: int = 3, fail: set[str] = frozenset(), **kw
) -> tuple[list[str], dict[str, str], AdaptiveSearch]:
    """Drive the search as the sweep does: up to ``hosts`` points at once, each finishing in turn."""
    s = AdaptiveSearch(points, points, **kw)
    order, running = [], []
    running += [p.id for p in s.take(hosts)]
    while running:
        pid = running.pop(0)
        order.append(pid)
        s.learn(pid, None if pid in fail else figures(next(p for p in points if p.id == pid)))
        running += [p.id for p in s.take(hosts - len(running))]
    return order, s.pruned(), s


def shortfall(points: list[P], ran: set[str]) -> dict[int, float]:
    """Per level, how far the best point run falls short of the best of all (the model's figures)."""
    figs = {p.id: figures(p) for p in points}
    out = {}
    for lv in (SINGLE, *LEVELS):
        top = max(f.levels[lv].throughput for f in figs.values())
        out[lv] = 1 - max(figs[i].levels[lv].throughput for i in ran) / top
    return out


def test_the_wide_grid_finds_the_best_at_every_level_with_under_half_of_its_points():
    points = grid()
    assert len(points) == 44  # the example: 3 drafters x steps 1-7 x 2 NCCL profiles + baselines
    order, pruned, _ = run(points)
    assert set(order) | set(pruned) == {p.id for p in points} and not set(order) & set(pruned)
    # at every level the best point it ran is the best there is, or within noise of it (the 2 % the
    # figures carry on each side: 2.8 % at 95 % for a margin between two)
    assert max(shortfall(points, set(order)).values()) <= 0.028, shortfall(points, set(order))
    assert len(order) <= len(points) // 2, (len(order), order)
    # every pruned point says what decided it: a measured point it cannot beat, and its prediction
    for why in pruned.values():
        assert "at best within noise of a point already measured at every level" in why, why
        assert "predicted from drafter=" in why, why
        assert any(f"of {p.label};" in why for p in points if p.id in order), why


def test_baselines_then_one_probe_per_group_with_its_most_steps_then_the_cost_of_a_step():
    points = grid()
    s = AdaptiveSearch(points, points)
    first = [p.id for p in s.take(100)]
    assert first == [
        "b-default",
        "b-tuned",
        "strong-7-default",
        "strong-7-tuned",
        "mid-7-default",
        "mid-7-tuned",
        "weak-7-default",
        "weak-7-tuned",
    ]  # nothing else can be decided before they measure
    for pid in first:
        s.learn(pid, figures(next(p for p in points if p.id == pid)))
    second = [p.id for p in s.take(1)]
    assert second == ["strong-1-tuned"]  # the best group's fewest steps: the cost of a step
    # hosts that would idle meanwhile take the rest of that group, middle step counts first
    assert [p.id for p in s.take(2)] == ["strong-4-tuned", "strong-3-tuned"]
    for pid in ("strong-1-tuned", "strong-4-tuned", "strong-3-tuned"):
        s.learn(pid, figures(next(p for p in points if p.id == pid)))
    rest = [p.id for p in s.take(100)]
    assert rest and all(pid.startswith("strong-") for pid in rest[:2]), rest  # the most promising first


def test_a_failed_probe_hands_the_group_its_next_longest_chain():
    points = grid(drafters={"strong": 0.78}, nccl=("tuned",))
    order, pruned, _ = run(points, hosts=1, fail={"strong-7-tuned"})
    assert order[:3] == ["b-tuned", "strong-7-tuned", "strong-6-tuned"]
    assert "strong-7-tuned" not in pruned


def test_a_resumed_search_continues_from_what_was_measured():
    points = grid(drafters={"strong": 0.78, "weak": 0.55}, nccl=("tuned",))
    whole, pruned_whole, _ = run(points, hosts=1)
    done = whole[:4]
    s = AdaptiveSearch(
        points,
        [p for p in points if p.id not in done],
        {pid: figures(next(p for p in points if p.id == pid)) for pid in done},
    )
    order = []
    while got := s.take(1):
        order.append(got[0].id)
        s.learn(got[0].id, figures(got[0]))
    assert done + order == whole and s.pruned() == pruned_whole  # the same points, the same decisions


def test_nothing_is_pruned_while_points_run_and_trees_and_lone_points_run_as_in_the_grid():
    points = grid(drafters={"strong": 0.78}, steps=(3,), nccl=("tuned",))
    tree = P(
        "tree",
        "drafter=tree",
        {"drafter": "tree", "nccl": "tuned"},
        {"drafter": "drafter", "nccl": "env"},
        False,
        {"steps": 3, "topk": 4, "draft_tokens": 8},
    )
    s = AdaptiveSearch([*points, tree], [*points, tree])
    assert chain_steps(tree) is None and group_key(points[1]) != group_key(tree)
    got = [p.id for p in s.take(10)]
    assert got == ["b-tuned", "strong-3-tuned", "tree"]  # no group varies its steps: all run
    assert s.pruned() == {}


def test_slope_and_acceptance_arithmetic():
    assert cycle_slope([(1, 2.0), (3, 4.0)]) == pytest.approx(1.0)  # T = 1 + k: s = 1
    assert cycle_slope([(2, 5.0)]) is None and cycle_slope([(1, 3.0), (3, 2.0)]) == 0.0
    r = reached([10, 20, 30, 40])  # 100 verifies: >=1 accepted 90, >=2 70, >=3 40
    assert r == pytest.approx((0.9, 0.7, 0.4))
    assert reached([10, 90], depth=3) == pytest.approx((0.9, 0.0, 0.0))  # positions never reached: 0
    f = Figures(10.0, 10.0, None, 0.0, r)
    assert f.accept_length(2) == pytest.approx(2.6) and f.accept_length(4) is None and f.accept_length(0) == 1.0


def test_a_dry_runs_reasons_quote_tok_s_at_real_speed_and_its_ttft_is_judged_there():
    """The fake serves 5x faster: its measured tok/s are quoted divided by 5 (as the report shows
    them), and a TTFT limit is met only by a first token that meets it at real speed."""
    import re

    points = grid(drafters={"strong": 0.78, "weak": 0.55}, steps=(2, 4), nccl=("default",))
    _, fast, _ = run(points)
    _, real, _ = run(points, time_scale=5.0)
    assert fast.keys() == real.keys() and fast

    def quoted(why: str) -> list[float]:
        return [float(x) for x in re.findall(r"([\d.]+) tok/s", why)]

    for pid in fast:
        assert quoted(real[pid]) == pytest.approx([v / 5 for v in quoted(fast[pid])], rel=1e-3)
    # a measured p99 TTFT of 0.3 s (1.5 s at real speed) does not meet a 1 s limit: nothing beaten by it
    f = Figures(100.0, 100.0, 0.1, 0.02, ttft_p99_s=0.3)
    pr = type("Pr", (), {"allowance": 0.0, "ttft_s": 0.1})()
    assert AdaptiveSearch(points, points, ttft_limits=[1.0])._ttft_no_worse(f, pr)
    assert not AdaptiveSearch(points, points, ttft_limits=[1.0], time_scale=5.0)._ttft_no_worse(f, pr)
