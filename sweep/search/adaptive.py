"""The adaptive search (``search.strategy: adaptive``): which point to run next, from what the points
run so far measured, and which points need not run at all. Pure: the driver asks it for points and
tells it what each measured.

How it decides:

- **Groups.** Speculative chain points (topk 1) that differ only in their step count form a group
  (same drafter, NCCL profile, every other axis); so do trees (topk > 1) with the same topk and
  draft tokens. Baselines and points alone in their group are run as the grid would run them.
- **Order.** Baselines first; then one probe per group, its point with the most steps: a chain
  drafter drafts the same tokens whatever its step count, so that point's acceptance per draft
  position gives the accept length of every shorter chain. Then, once no group knows its cost of
  a step, the best group's fewest-steps point: two step counts give the cost of a draft step
  against a verify pass (a verify cycle's time ``T(k) ~ 1 + s*k``; the other groups borrow ``s``,
  with twice the allowance, until they measure their own). Then the candidates most likely to win.
  A tree group's probe is its fewest-steps point, the opposite of a chain's: a shallower tree bounds
  a deeper one, not the other way round.
- **Prediction.** A point with ``k`` steps, at each level measured by its nearest measured
  neighbour (the anchor, ``k_a`` steps): its throughput and per-user speed are the anchor's times
  ``AL(k)/AL(k_a) * T(k_a)/T(k)``, its time to first token the anchor's; the allowance is
  ``search.tolerance`` plus the noise the anchor measured at that level. A tree point's prediction
  is an upper bound instead, from the deepest measured point of its group with fewer steps (depth
  ``k``, accept length ``AL(k)``, a share ``p_k`` of its verifies reaching depth ``k``): its accept
  length is at most ``AL(k) + j * p_k`` for ``j`` more levels (``tree_accept_bound``: SGLang verifies
  the top ``num_draft_tokens - 1`` nodes by cumulative score, so a deeper tree keeps fewer nodes at
  every shared depth), and its verify costs no less (the same tokens verified, more draft steps), so
  its figures are at most the anchor's times ``bound/AL(k)``. No cost of a step is assumed for trees,
  and draft tokens are no ordered axis: more of them accept more and cost more, which bounds neither
  way without a cost model.
- **Pruning.** A point is not run when, at every level its anchor measured (the single stream and
  each concurrency level), some point already measured beats its prediction raised by the
  allowance, in throughput and per-user speed, with a first token no later: then it is the best at
  no level and, since an SLO's pick is the best configuration among those that meet it at some
  level, the pick of no SLO. It is recorded as ``pruned``, with the points and the prediction that
  decided it.

What it can miss: a point whose real figures are further from the prediction than the allowance
(a drafter whose acceptance depends on the step count, a cost that is not linear in the steps), and
SLO limits on figures it does not predict (latency percentiles beyond the median TTFT). A tree's
bound holds per verify from the same context; over a run it assumes that the contexts the two trees'
verifies start from accept alike on average (ties between node scores, which SGLang's top-k breaks
arbitrarily, aside).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from sweep.analysis import noise
from sweep.core import speculation
from sweep.search.measured import SINGLE, Figures, Measured, from_tables
from sweep.search.strategy import Search, Tables

if TYPE_CHECKING:  # what the search reads of a point: the plan's own (tests hand in look-alikes)
    from sweep.experiment import PlannedPoint

Z = 1.96  # the report's 95 % intervals


@dataclass(frozen=True)
class Prediction:
    level: int
    throughput: float
    speed: float
    ttft_s: float | None  # the anchor's, median and p99
    ttft_p99_s: float | None
    allowance: float  # relative: what the model may be off by (search.tolerance)
    noise: float = 0.0  # the anchor's measured noise at this level (relative half-width, 95 %)


def chain_steps(p: PlannedPoint) -> int | None:
    """The step count of a speculative chain point (topk 1) as SGLang resolves it; None otherwise."""
    r = p.resolved or {}
    if p.baseline or r.get("steps") is None or (r.get("topk") or 1) != 1:
        return None
    return int(r["steps"])


def tree_steps(p: PlannedPoint) -> int | None:
    """The step count of a speculative tree point (topk > 1) as SGLang resolves it; None otherwise."""
    r = p.resolved or {}
    if p.baseline or r.get("steps") is None or (r.get("topk") or 1) <= 1:
        return None
    return int(r["steps"])


def _tree_depth(p: PlannedPoint) -> int:
    """The most drafts one verify of a tree point can accept: its steps, at most its draft tokens - 1."""
    r = p.resolved or {}
    k = int(r["steps"])
    n = r.get("draft_tokens")
    return min(k, int(n) - 1) if n else k


def tree_accept_bound(f: Figures, depth: int, deeper: int) -> float | None:
    """An upper bound on the accept length of the same tree drafted ``deeper`` levels deep, from a
    shallower tree's figures ``f`` (which accepted at most ``depth`` drafts per verify): its accept
    length plus, per extra level, the share of its verifies that reached its last level.

    Why (SGLang's ``organize_draft_results``): the tree verified is the top ``num_draft_tokens - 1``
    of all candidate nodes by cumulative score (a node's score is its parent's times a probability,
    so never above it); the candidates of ``k`` steps are those of ``k - 1`` steps plus one more
    level; so a deeper tree keeps, at every depth it shares with a shallower one, a subset of the
    shallower one's nodes (more candidates compete for the same budget), and reaches each depth
    ``<= k`` no more often; and a level below ``k`` is reached no more often than level ``k``.
    None without what it needs (its accept length)."""
    al = _accept(f, depth)
    if not al:
        return None
    if deeper <= depth:
        return al
    if len(f.reached) >= depth and depth > 0:
        last = f.reached[depth - 1]
    else:  # no histogram: the reach of the last level is at most the mean reach of all of them
        last = (al - 1.0) / depth if depth > 0 else 1.0
    return al + (deeper - depth) * max(0.0, last)


def group_key(p: PlannedPoint) -> tuple:
    """What a group's points share: every axis value but the ordered ones (``speculation.shared_axes``)."""
    return speculation.shared_axes(p.params, p.roles)


def level_name(level: int) -> str:
    return "the single stream" if level == SINGLE else f"C={level}"


def cycle_slope(pairs: Sequence[tuple[int, float]]) -> float | None:
    """``s`` of ``T(k) ~ 1 + s*k`` from (steps, cycle time) of two or more step counts (least
    squares); None from fewer; never below 0 (a longer draft is never cheaper)."""
    ks = {k for k, _ in pairs}
    if len(ks) < 2:
        return None
    n = len(pairs)
    mk, mt = sum(k for k, _ in pairs) / n, sum(t for _, t in pairs) / n
    b = sum((k - mk) * (t - mt) for k, t in pairs) / sum((k - mk) ** 2 for k, _ in pairs)
    a = mt - b * mk
    if a <= 0:
        return None
    return max(0.0, b / a)


def _accept(f: Figures, steps: int) -> float | None:
    """The accept length a point measured with ``steps`` steps: from its histogram, else as the server said."""
    return f.accept_length(steps) or f.accept


class AdaptiveSearch(Search["PlannedPoint"]):
    """Hands out the points to run, most informative first, and decides which need not run.

    ``points``: the plan's valid points (the groups are drawn over all of them); ``todo``: those to
    run now (resume: the rest are recorded); ``measured``: what the recorded ok points measured."""

    def __init__(
        self,
        points: Sequence[PlannedPoint],
        todo: Sequence[PlannedPoint],
        measured: Mapping[str, Measured] | None = None,
        *,
        tolerance: float = 0.05,
        ttft_limits: Sequence[float] = (),
        time_scale: float = 1.0,
    ):
        self.points = {p.id: p for p in points}
        # what a measured second is at real speed: a dry run's fake serves time_scale times faster (its
        # run context's slo_time_scale), so its TTFTs are judged, and its tok/s quoted, at real speed
        self.time_scale = time_scale
        self.todo = [p.id for p in todo]
        self.tolerance = tolerance
        self.ttft_limits = list(ttft_limits)  # the SLOs' TTFT limits: where a first token's time decides
        self.measured: dict[str, Measured] = dict(measured or {})
        self.running: set[str] = set()
        self.finished: set[str] = set(self.measured)
        self.steps = {p.id: k for p in points if (k := chain_steps(p)) is not None}
        groups: dict[tuple, list[str]] = {}
        for pid in self.steps:
            groups.setdefault(group_key(self.points[pid]), []).append(pid)
        self.group_of: dict[str, tuple] = {}
        self.groups: dict[tuple, list[str]] = {}
        for key, ids in groups.items():
            if len({self.steps[i] for i in ids}) > 1:  # a group varies its step count
                self.groups[key] = sorted(ids, key=lambda i: self.steps[i])
                self.group_of.update({i: key for i in ids})
        self._slope_probe_id: str | None = None  # the point handed out to measure a second step count
        self._noise: tuple[int, float | None] = (-1, None)  # level_noise's cache: (points measured, figure)
        self._slope_candidate: str | None = None
        # trees (topk > 1) that differ only in their step count, shallowest first: same group key,
        # topk and draft tokens (the budget their nodes compete for)
        self.tree_steps = {p.id: k for p in points if (k := tree_steps(p)) is not None}
        trees: dict[tuple, list[str]] = {}
        for pid in self.tree_steps:
            r = self.points[pid].resolved or {}
            trees.setdefault((group_key(self.points[pid]), r.get("topk"), r.get("draft_tokens")), []).append(pid)
        self.tree_of: dict[str, tuple] = {}
        self.tree_groups: dict[tuple, list[str]] = {}
        for key, ids in trees.items():
            if len({self.tree_steps[i] for i in ids}) > 1:
                self.tree_groups[key] = sorted(ids, key=lambda i: self.tree_steps[i])
                self.tree_of.update({i: key for i in ids})

    # --- the driver's side -------------------------------------------------------------------------

    def take(self, n: int) -> list[PlannedPoint]:
        """Up to ``n`` points to run now (each handed out once), most informative first."""
        out = []
        needed = self._needed()
        for pid in needed[: max(0, n)]:
            self.running.add(pid)
            out.append(self.points[pid])
            if pid == self._slope_candidate:
                self._slope_probe_id = pid
        return out

    def record(self, point_id: str, tables: Tables | None) -> None:
        """A point handed out has finished: its ``levels``, ``requests`` and ``single_stream`` rows
        (polars frames, or the Arrow tables a host returns; None: it failed)."""
        self.learn(point_id, self.measure(point_id, tables) if tables is not None else None)

    def learn(self, point_id: str, measured: Measured | None) -> None:
        """``record`` with what the point measured already read (None: it failed)."""
        self.running.discard(point_id)
        self.finished.add(point_id)
        if measured is not None and measured.levels:
            self.measured[point_id] = measured

    def measure(self, point_id: str, tables: Mapping[str, pl.DataFrame | pa.Table | None]) -> Measured:
        """What a point's rows say (its step count pads the acceptance to every position it drafts)."""

        def frame(name: str) -> pl.DataFrame:
            t = tables.get(name)
            return pl.DataFrame() if t is None else t if isinstance(t, pl.DataFrame) else pl.from_arrow(t)  # type: ignore[return-value]

        depth = self.steps.get(point_id)
        if point_id in self.tree_steps:
            depth = _tree_depth(self.points[point_id])
        return from_tables(point_id, frame("levels"), frame("requests"), frame("single_stream"), depth=depth)

    def outline(self) -> tuple[list[str], list[str]]:
        """Before anything is measured: (the points it runs whatever they measure: baselines, points
        outside a group, one probe per group and the cost-of-a-step probe; the points it may skip)."""
        must = self._needed()
        slope = next((ids[0] for ids in self.groups.values() if ids[0] in self.todo and ids[0] not in must), None)
        must += [slope] if slope else []
        return must, [i for i in self._waiting() if i not in must]

    def pruned(self) -> dict[str, str]:
        """The points of ``todo`` not run and not to run (once nothing is running): why, each."""
        if self.running:
            return {}
        out = {}
        for pid in self._waiting():
            reason = self.prune_reason(pid)
            if reason is not None:
                out[pid] = reason
        return out

    # --- deciding ----------------------------------------------------------------------------------

    def _waiting(self) -> list[str]:
        return [i for i in self.todo if i not in self.finished and i not in self.running]

    def _needed(self) -> list[str]:
        """The waiting points to run, in order: baselines, points outside a group, probes, the
        cost-of-a-step probe, then the candidates not pruned (the most promising first)."""
        waiting = self._waiting()
        first = [i for i in waiting if self.points[i].baseline]
        alone = [i for i in waiting if not self.points[i].baseline and i not in self.group_of and i not in self.tree_of]
        probes, blocked = [], set()
        trees, later = self._tree_order(waiting)
        for key, ids in self.groups.items():
            if any(i in self.measured for i in ids):
                continue
            blocked.add(key)  # its probe runs (or is about to): its other points wait for it
            live = [i for i in ids if i not in self.finished]  # the probe: the most steps not yet failed
            if live and live[-1] in waiting and not any(i in self.running for i in ids):
                probes.append(live[-1])
        slope_probe = self._slope_candidate = self._slope_probe(waiting, blocked)
        slope_pending = slope_probe is not None or self._slope_probe_id in self.running
        scored = []
        for i in waiting:
            g = self.group_of.get(i)
            if g is None or g in blocked or i == slope_probe:
                continue
            got = self.predict(i)
            if slope_pending and got is None:
                continue  # the cost of a step is being measured: wait for it
            score = self._score(i, got)
            if score is not None:
                scored.append((-score, self.todo.index(i), i))
        fill = self._fill(waiting, blocked) if slope_pending else []
        return (
            first
            + alone
            + probes
            + trees
            + ([slope_probe] if slope_probe else [])
            + [i for *_, i in sorted(scored)]
            + [i for i in fill if i not in {j for *_, j in scored}]
            + later
        )

    def _tree_order(self, waiting: list[str]) -> tuple[list[str], list[str]]:
        """The tree points to run: (each group's probe, its shallowest point not failed, while nothing
        of it is measured; then, once it is, its points not pruned, the shallowest first), and those
        to run only once nothing else is left (a shallower point of the group, nearer than what
        bounds them, is still running: it will bound them tighter)."""
        now: list[str] = []
        later: list[str] = []
        for ids in self.tree_groups.values():
            if not any(i in self.measured for i in ids):
                live = [i for i in ids if i not in self.finished]
                if live and live[0] in waiting and not any(i in self.running for i in ids):
                    now.append(live[0])
                continue
            for i in ids:
                if i not in waiting:
                    continue
                got = self.predict(i)
                if got is not None and self._score(i, got) is None:
                    continue  # pruned
                anchor = self._tree_anchor(i)
                k = self.tree_steps[i]
                nearer = any(
                    j in self.running
                    and self.tree_steps[j] < k
                    and (anchor is None or self.tree_steps[j] > self.tree_steps[anchor])
                    for j in ids
                )
                (later if nearer else now).append(i)
        return now, later

    def _tree_anchor(self, pid: str) -> str | None:
        """The deepest measured point of the tree's group shallower than it (what bounds it)."""
        k = self.tree_steps[pid]
        done = [i for i in self.tree_groups[self.tree_of[pid]] if i in self.measured and self.tree_steps[i] < k]
        return max(done, key=lambda i: self.tree_steps[i]) if done else None

    def _predict_tree(self, pid: str) -> tuple[list[Prediction], str] | None:
        """An upper bound on a tree point's figures at every level its anchor (the deepest measured
        point of its group with fewer steps) measured: the anchor's throughput and per-user speed
        times ``bound/AL_a`` (``tree_accept_bound``), since a verify of the deeper tree costs no less
        (the same draft tokens verified, more draft steps); None where nothing shallower is measured."""
        anchor = self._tree_anchor(pid)
        if anchor is None:
            return None
        da, d = _tree_depth(self.points[anchor]), _tree_depth(self.points[pid])
        out = []
        for lv, fa in self.measured[anchor].levels.items():
            al_a, bound = _accept(fa, da), tree_accept_bound(fa, da, d)
            if not al_a or bound is None:
                return None
            factor = max(1.0, bound / al_a)
            out.append(
                Prediction(
                    lv, fa.throughput * factor, fa.speed * factor, fa.ttft_s, fa.ttft_p99_s, self.tolerance, fa.noise
                )
            )
        if not out:
            return None
        return out, (
            f"bounded from {self.points[anchor].label}: a deeper tree accepts at most its accept length "
            f"plus, per extra level, the share of its verifies that reached its last one, at no lower "
            f"cost per verify"
        )

    def _fill(self, waiting: list[str], blocked: set[tuple]) -> list[str]:
        """While the cost of a step is measured: the rest of that group, middle step counts first,
        for hosts that would otherwise idle (the best group's best point runs whatever is decided)."""
        probe = self._slope_probe_id if self._slope_probe_id in self.running else self._slope_candidate
        key = self.group_of.get(probe or "")
        if key is None or key in blocked:
            return []
        ids = [i for i in self.groups[key] if i in waiting and i != probe]
        ks = sorted(self.steps[i] for i in self.groups[key])
        middle = ks[len(ks) // 2]
        return sorted(ids, key=lambda i: (abs(self.steps[i] - middle), self.steps[i]))

    def _slope_probe(self, waiting: list[str], blocked: set[tuple]) -> str | None:
        """While no group has measured two step counts: the fewest-steps point of the group whose
        probe measured best (the one already handed out, while it runs)."""
        if any(self._own_slope_levels(key) for key in self.groups):
            return None
        if self._slope_probe_id in self.running:
            return None
        top: dict[int, float] = {}
        for m in self.measured.values():
            for lv, f in m.levels.items():
                top[lv] = max(top.get(lv, 0.0), f.throughput)
        best, best_score = None, -1.0
        for key, ids in self.groups.items():
            if key in blocked:
                continue
            shares = [
                f.throughput / top[lv]
                for i in self._measured_in(key)
                for lv, f in self.measured[i].levels.items()
                if top.get(lv)
            ]
            score = sum(shares) / len(shares) if shares else -1.0  # its mean share of the best, over levels
            first = next((i for i in ids if i in waiting), None)
            if first is not None and score > best_score:
                best, best_score = first, score
        return best

    def _measured_in(self, key: tuple) -> list[str]:
        return [i for i in self.groups[key] if i in self.measured]

    def _own_slope_levels(self, key: tuple) -> dict[int, float]:
        """Per level, ``s`` from this group's own measured step counts."""
        done = self._measured_in(key)
        out = {}
        levels = {lv for i in done for lv in self.measured[i].levels}
        for lv in levels:
            pairs = []
            for i in done:
                f = self.measured[i].levels.get(lv)
                al = _accept(f, self.steps[i]) if f else None
                if f and al and f.speed > 0:
                    pairs.append((self.steps[i], al / f.speed))
            s = cycle_slope(pairs)
            if s is not None:
                out[lv] = s
        return out

    def _slope(self, key: tuple, level: int) -> tuple[float, str] | None:
        """(s, where it came from) at a level: the group's own, else the median of the others'."""
        own = self._own_slope_levels(key).get(level)
        if own is not None:
            return own, "own"
        others = sorted(
            s for k in self.groups if k != key for lv, s in self._own_slope_levels(k).items() if lv == level
        )
        if not others:
            return None
        return others[len(others) // 2], "borrowed"

    def _twin(self, pid: str) -> str | None:
        """A measured point with the same step count and every other axis but the drafter the same:
        its cycle costs what this point's will (the same draft and verify shapes), only its
        acceptance differs."""
        p, k = self.points[pid], self.steps[pid]
        mine = {a: v for a, v in p.params.items() if p.roles.get(a) != "drafter"}
        for mid in self.measured:
            q = self.points.get(mid)
            if q is None or mid == pid or self.steps.get(mid) != k:
                continue
            if {a: v for a, v in q.params.items() if q.roles.get(a) != "drafter"} == mine:
                return mid
        return None

    def predict(self, pid: str) -> tuple[list[Prediction], str] | None:
        """The point's predicted figures at every level its anchor measured, and how they were
        made; None where there is nothing to predict from yet.

        The anchor is, where one is measured, its twin (the same steps with another drafter: only
        the acceptance scales the figures), else the nearest step count of its own group (the
        acceptance and the cost of the steps between them scale them)."""
        if pid in self.tree_of:
            return self._predict_tree(pid)
        key = self.group_of.get(pid)
        if key is None:
            return None
        k = self.steps[pid]
        done = self._measured_in(key)
        if not done:
            return None
        source = max(done, key=lambda i: self.steps[i])  # the acceptance of every shorter chain
        twin = self._twin(pid)
        anchor = twin or min(done, key=lambda i: (abs(self.steps[i] - k), -self.steps[i]))
        ka = self.steps[anchor]
        out, how = [], set()
        for lv, fa in self.measured[anchor].levels.items():
            fs = self.measured[source].levels.get(lv)
            al_k = fs.accept_length(k) if fs else None
            al_a = _accept(fa, ka)
            if twin:
                slope: tuple[float, str] | None = (0.0, "twin")  # the same cycle: no cost to scale by
            else:
                slope = self._slope(key, lv)
            if al_k is None or not al_a or slope is None:
                return None  # a level it cannot predict: it is not decided
            s, where = slope
            how.add(where)
            factor = (al_k / al_a) * (1 + s * ka) / (1 + s * k)
            allowance = self.tolerance
            out.append(
                Prediction(lv, fa.throughput * factor, fa.speed * factor, fa.ttft_s, fa.ttft_p99_s, allowance, fa.noise)
            )
        if not out:
            return None
        a, src = self.points[anchor].label, self.points[source].label
        text = (
            f"predicted from {a}"
            + (" (the same steps, another drafter)" if twin else "")
            + (f" with the acceptance per position of {src}" if source != anchor else "")
            + (", the cost of a step borrowed from other groups" if "borrowed" in how else "")
        )
        return out, text

    def _ttft_no_worse(self, f: Figures, pr: Prediction) -> bool:
        """The measured point's first token is no later where it matters: against every SLO's TTFT
        limit, it meets it (its p99) wherever the prediction might (its median under the limit)."""
        up = 1 + pr.allowance
        for limit in self.ttft_limits:
            k = self.time_scale
            might = pr.ttft_s is None or pr.ttft_s * k <= limit * up
            meets = f.ttft_p99_s is not None and f.ttft_p99_s * k <= limit
            if might and not meets:
                return False
        return True

    def level_noise(self) -> float | None:
        """The run-to-run noise of a level (relative SD) from the curves measured so far
        (``sweep.analysis.noise.curve_noise``); None until a point has enough levels."""
        if self._noise[0] != len(self.measured):
            rows = [
                {"point_id": pid, "concurrency": lv, "output_throughput": f.throughput}
                for pid, m in self.measured.items()
                for lv, f in m.levels.items()
                if lv != SINGLE
            ]
            self._noise = (len(self.measured), noise.curve_noise(pl.DataFrame(rows)) if rows else None)
        return self._noise[1]

    def band(self, pr: Prediction, f: Figures) -> float:
        """How far above a measured figure the prediction may lie and still be within noise of it:
        the report's 95 % test of a margin between two measured figures, each with the level's noise
        (the curves' scatter, or the level's own spread where that is larger). Not the report's 2 %
        floor (``noise.level_sigma``): the floor keeps a verdict from calling a difference real, and
        here a wider band would prune more, so it would make the search less careful, not more."""
        curve = self.level_noise() or 0.0
        sd_a, sd_m = max(curve, pr.noise / Z), max(curve, f.noise / Z)
        return Z * math.sqrt(sd_a**2 + sd_m**2)

    def _beaten(self, pr: Prediction, exclude: str) -> tuple[str, Figures] | None:
        """A measured point that this prediction (raised by its allowance) cannot beat by more than
        noise at its level, in throughput and per-user speed, with a first token no later."""
        up = 1 + pr.allowance
        best = None
        for mid, m in self.measured.items():
            f = m.levels.get(pr.level)
            if mid == exclude or f is None:
                continue
            band = 1 + self.band(pr, f)
            if (
                f.throughput * band >= pr.throughput * up
                and f.speed * band >= pr.speed * up
                and self._ttft_no_worse(f, pr)
            ):
                if best is None or f.throughput > best[1].throughput:
                    best = (mid, f)
        return best

    def _score(self, pid: str, got: tuple[list[Prediction], str] | None) -> float | None:
        """How likely the point is to win somewhere, from its prediction (``predict``): its best
        predicted (raised) throughput over the best measured at that level; None when it is beaten at
        every level (pruned). A point with nothing to predict from scores as a probe would: high."""
        if got is None:
            return 10.0
        preds, _ = got
        if all(self._beaten(pr, pid) for pr in preds):
            return None
        ratios = []
        for pr in preds:
            best = max(
                (m.levels[pr.level].throughput for m in self.measured.values() if pr.level in m.levels), default=0.0
            )
            ratios.append(pr.throughput * (1 + pr.allowance) / best if best > 0 else 10.0)
        return max(ratios)

    def prune_reason(self, pid: str) -> str | None:
        """Why the point need not run (None: it may win somewhere, or cannot be predicted)."""
        got = self.predict(pid)
        if got is None:
            return None
        preds, how = got
        beaten = [(pr, self._beaten(pr, pid)) for pr in preds]
        if not all(b for _, b in beaten):
            return None
        closest = max(beaten, key=lambda x: x[0].throughput * (1 + x[0].allowance) / x[1][1].throughput)  # type: ignore[index]
        pr, (mid, f) = closest  # type: ignore[misc]
        band = self.band(pr, f)
        k = self.time_scale  # tok/s at real speed, as the report shows them
        return (
            f"at best within noise of a point already measured at every level ({len(preds)}); closest at "
            f"{level_name(pr.level)}: at most {pr.throughput * (1 + pr.allowance) / k:.4g} tok/s (+{pr.allowance:.0%} "
            f"allowed) against {f.throughput / k:.4g} tok/s (+-{band:.0%} noise) of "
            f"{self.points[mid].label if mid in self.points else mid}; {how}"
        )
