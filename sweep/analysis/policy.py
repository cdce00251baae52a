"""The speculative policy across load, from what the levels measured: the answer one deploys when
the best step count changes with the load (k steps at C=1, fewer above, none past the break-even).

A **group** is the points that differ only in their step count (a drafter with every other setting:
NCCL profile, the other axes, the workload; ``speculation.step_axis_of``). Per group and measured
level, from the levels' output throughput (the Concurrency table's figures):

- the best option (a step count of the group, or ``0``: the matched baseline) and the options within
  noise of it (the report's one rule for a ratio of two levels' figures, ``noise.judged``);
- the **choice** (``CHOICE_RULE``): the fastest step count, or one of fewer steps in a tie with it
  (within ``CHOICE_TIE``): less verify work and draft memory for the same speed. Never ``0`` from the
  baseline's figure: inside an adaptive server ``0`` is SGLang's step 0, which still runs the drafter's
  extend after each verify and probes its next candidate at every update; it is not the
  no-speculation server (measured on the CPU build: 24-36 % below it);
- **tiers**: one step count each (adjacent levels with the same choice merged; ``policy.candidates:
  within_noise`` gives every step count within noise instead, for SGLang's acceptance rule to pick
  among), keyed where SGLang routes: it pads a decode batch to the next CUDA-graph batch size and
  takes the largest key at or below it, so a tier's key is the smallest padded batch size above every
  batch its lower neighbour ran (``metrics_running_reqs`` and its maximum), and each tier says which
  batch sizes it serves;
- the **break-even**: the concurrency above which no step count beats the baseline, bracketed by
  the last level where one is ahead beyond noise and the first from which the baseline is ahead
  beyond noise of every step count (levels within noise between them widen the bracket), its
  estimate where the best step count's ratio to the baseline crosses 1, linearly in log C. Above it
  the answer is a non-speculative server (the plain table), which no adaptive server can match.

Written as SGLang's adaptive config (``Policy.config``: ``{"1": {"candidate_steps": [k]}, ...}``, for
``--speculative-adaptive-config``), its launch flags (``Policy.launch_flags``), and a plain table
(concurrency range -> the static step count to run, 0: no speculation) for engines without adaptive
speculation, or for the load where no speculation wins.

**The confirmation** (``confirmation``, ``verdict``, ``revise``, ``settle``): the policy's own server,
measured, against the best static setup, the envelope and the baseline per level, with the levels
judged together too (a sign test); where it fell short, a revision (the short tier takes the best
static step count, or the envelope's), confirmed again up to ``policy.revise`` rounds; the verdict
names the winner by measurement (the policy, the best static setup or the plain table).

Trees (topk > 1) are left out: SGLang's adaptive speculation runs topk 1 only. Points the adaptive
search pruned were not measured: their prediction said they are the best at no level, so they are no
tier's choice; the notes say so.

Pure: polars frames in (``speedups.level_speedups`` and the points table), dataclasses out.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from sweep.analysis import noise, speedups
from sweep.analysis.acceptance import spec_shape
from sweep.analysis.frames import as_dict, axes_of, configurations, natural_key, points_frame
from sweep.core import ConfigError, speculation
from sweep.results import server_flags

ADAPTIVE = speculation.CONFIRM_VALUE  # the step axis's value of a confirmation point (the policy's own server)
_ADAPTIVE_FLAG = speculation.ADAPTIVE_FLAG  # the names and the version gate: sweep/core/speculation.py
CONFIG_FLAG = speculation.CONFIG_FLAG
has_adaptive = speculation.has_adaptive  # whether an SGLang version has --speculative-adaptive (None: unknown)


def needs_text(version: str | None) -> str | None:
    """What the report says where the sweep's SGLang lacks the flags (None where it has them)."""
    if has_adaptive(version) is False:
        return (
            f"needs SGLang >= {speculation.SINCE} (--speculative-adaptive); on this version ({version}) "
            "deploy the plain table"
        )
    return None


@dataclass(frozen=True)
class Tier:
    """One batch-size tier of SGLang's adaptive config: its key ``lo`` (the smallest padded batch size
    it serves), its measured levels (``hi`` the last), ``best_steps``: the step count its levels chose
    (``Level.choice``: one, adjacent levels with the same choice merged), ``candidate_steps``: what
    the config gives SGLang (the choice alone; with ``policy.candidates: within_noise``, every positive
    step count within noise of the best at all its levels), ``batches``: the decode batch sizes it
    serves, before padding ((first, last); last None: and above)."""

    lo: int
    hi: int
    best_steps: int
    candidate_steps: tuple[int, ...]
    levels: tuple[int, ...] = ()
    batches: tuple[int, int | None] = (1, None)

    def batches_text(self) -> str:
        a, b = self.batches
        return f"batches >= {a}" if b is None else (f"batch {a}" if a == b else f"batches {a}-{b}")


@dataclass(frozen=True)
class _BreakEven:
    """Where speculation stops paying: above ``concurrency`` (an estimate: where the best step
    count's ratio to the baseline crosses 1, linearly in log C) no step count beats the baseline;
    ``low``: the last level where one is ahead beyond noise; ``high``: the first level from which the
    baseline is ahead of every step count beyond noise (None: within noise up to the highest level)."""

    concurrency: float | None
    low: int
    high: int | None
    top: int  # the highest level measured

    def text(self) -> str:
        est = f"C~{self.concurrency:.0f}" if self.concurrency is not None else f"C~{self.low}"
        if self.high is None:
            return (
                f"speculation off above {est} (ahead beyond noise up to C={self.low}, within noise of the "
                f"baseline above, to C={self.top})"
            )
        return f"speculation off above {est} (between C={self.low} and C={self.high})"


@dataclass(frozen=True)
class Level:
    """One measured level of a policy: the options' figures (output tok/s, at real speed where the
    report reads them so) and what the policy runs there.

    ``best_steps``: the fastest option (0: the no-speculation baseline); ``candidate_steps``: every
    option within noise of it (0 among them where the baseline is); ``choice``: the step count the
    adaptive server runs at this level, by the written rule (``CHOICE_RULE``): the fastest step count
    measured, or one of fewer steps in a tie with it (within ``CHOICE_TIE``: less verify work and memory
    for the same speed), never 0 from the baseline's figure (an adaptive server's step 0 still runs the
    drafter's extend: it is not the no-speculation server); ``within_noise``: the positive step counts
    within noise of the fastest one (what ``policy.candidates: within_noise`` gives SGLang to pick
    among); ``plain_steps``: the plain table's (the same rule over every option, 0 the fewest steps);
    ``batch``/``batch_max``: the running requests the level recorded (mean, largest; None: not
    recorded)."""

    concurrency: int
    best_steps: int
    candidate_steps: tuple[int, ...]
    tok_s: dict[int, float]  # steps -> output tok/s measured (0: the baseline)
    policy_tok_s: float | None  # the choice's static figure here (the policy's prediction)
    static_tok_s: float | None  # the group's best single static setup's
    baseline_tok_s: float | None
    choice: int = 0
    within_noise: tuple[int, ...] = ()
    plain_steps: int = 0
    batch: float | None = None
    batch_max: float | None = None


CHOICE_TIE = 0.01  # figures this close are a tie: the fewer steps win it (AutoSpec's and vLLM's tuners' 1 %)
CHOICE_RULE = (
    "per level the fastest step count measured; a step count with fewer steps within 1 % of it (a tie) is "
    "taken instead (less verify work and draft memory for the same speed)"
)
CANDIDATE_MODES = ("one", "within_noise")  # policy.candidates: one step count per tier (the default), or SGLang's pick


@dataclass(frozen=True)
class Policy:
    group: str  # the group's label: its params as axis=value pairs
    params: dict[str, Any]  # axis -> value of the group, without the step axis
    step_axis: str
    workload: str
    tiers: tuple[Tier, ...]
    break_even: _BreakEven | None
    member_ids: tuple[str, ...]
    steps: dict[int, str] = field(default_factory=dict)  # step count -> the member's point id
    labels: dict[int, str] = field(default_factory=dict)  # step count -> the member's label
    baseline_id: str | None = None
    baseline_label: str | None = None
    levels: tuple[Level, ...] = ()
    static_steps: int | None = None  # the group's best single static setup (by mean rank over levels; 0: none)
    sglang_version: str | None = None
    notes: tuple[str, ...] = ()
    confirmation_ids: tuple[str, ...] = ()  # measured points of this policy's own server
    axis_order: tuple[str, ...] = ()  # the grid's axes in its order (the step axis among them)
    candidates: str = "one"  # policy.candidates: "one" step count per tier, or "within_noise" (SGLang picks)
    revision: int = 1  # 1: derived from the grid; 2...: revised after a confirmation fell short
    revised: tuple[str, ...] = ()  # what each revision changed, and why (measured)
    confirmation_configs: dict[str, str] = field(default_factory=dict)  # confirmation id -> its config (canonical)

    def config(self) -> dict[str, dict]:
        """SGLang's adaptive config (``--speculative-adaptive-config``): integer-string batch-size keys."""
        return {str(t.lo): {"candidate_steps": list(t.candidate_steps)} for t in self.tiers}

    def config_key(self) -> str:
        """The config as canonical JSON: what a recorded confirmation point's config is matched by."""
        return _canonical(self.config())

    def config_json(self) -> str:
        """The config as the file SGLang reads: one tier a line."""
        tiers = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in self.config().items()]
        return "{\n" + ",\n".join(tiers) + "\n}\n"

    def largest(self) -> int:
        return max(s for t in self.tiers for s in t.candidate_steps)

    def launch_flags(self) -> dict[str, Any]:
        """The speculative flags to launch the policy with: the largest candidate's steps (SGLang
        requires --speculative-num-steps among the candidates and sizes its buffers for it), its draft
        tokens (steps + 1), topk 1, and the config as a mapping (the host writes it to a file)."""
        k = self.largest()
        return {
            _ADAPTIVE_FLAG: True,
            CONFIG_FLAG: self.config(),
            "speculative-num-steps": k,
            "speculative-num-draft-tokens": k + 1,
            "speculative-eagle-topk": 1,
        }

    def plain_table(self) -> list[dict]:
        """For engines without adaptive speculation: per concurrency range (measured levels, adjacent
        ones with the same answer merged) the static step count to run (``Level.plain_steps``: the
        fewest steps within noise of the fastest option, 0: no speculation), its label and flags.
        ``to`` is the range's last level (None for the last range: and above)."""
        rows: list[dict] = []
        for lv in self.levels:
            if rows and rows[-1]["steps"] == lv.plain_steps:
                rows[-1]["hi"] = lv.concurrency
                continue
            rows.append({"lo": lv.concurrency, "hi": lv.concurrency, "steps": lv.plain_steps})
        for i, r in enumerate(rows):
            r["to"] = rows[i + 1]["lo"] - 1 if i + 1 < len(rows) else None
            k = r["steps"]
            r["label"] = self.labels.get(k) if k else self.baseline_label
            r["flags"] = _static_flags(k)
        return rows

    def slug(self) -> str:
        """A file name's stem for this policy's config (``policy-<slug>.json``)."""
        text = ",".join(x for x in (self.group, self.workload) if x) or "all"
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", text.replace("=", "-").replace(",", "_")).strip("-") or "all"

    def step_value(self) -> str:
        """The step axis's value of this policy's confirmation point: 'adaptive', 'adaptive-r2' for a revision."""
        return speculation.confirm_value(self.revision)

    def label(self) -> str:
        """The confirmation point's label: the group's params with the step axis set to 'adaptive' (a
        revision: 'adaptive-r2'), in the grid's order (``drafter=k26_100k,steps=adaptive,nccl=tuned``)."""
        values = {**self.params, self.step_axis: self.step_value()}
        order = [a for a in self.axis_order if a in values] + [a for a in values if a not in self.axis_order]
        return ",".join(f"{a}={values[a]}" for a in order)


def _canonical(config: Any) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _config_of(row: dict) -> str | None:
    """A confirmation point's adaptive config as canonical JSON (None: not recorded as a mapping)."""
    value = server_flags(row).get(CONFIG_FLAG)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return _canonical(value) if isinstance(value, dict) else None


def _static_flags(steps: int) -> dict[str, Any]:
    """The speculative flags of a static chain of ``steps`` (0: no speculation)."""
    if not steps:
        return {}
    return {"speculative-num-steps": steps, "speculative-num-draft-tokens": steps + 1, "speculative-eagle-topk": 1}


def flags_text(flags: dict[str, Any]) -> str:
    """Flags as a command line's words (a mapping as its JSON; True as a bare flag)."""
    out = []
    for k, v in flags.items():
        if v is True:
            out.append(f"--{k}")
        elif isinstance(v, dict):
            out.append(f"--{k} '{json.dumps(v, sort_keys=True, separators=(',', ':'))}'")
        else:
            out.append(f"--{k} {v}")
    return " ".join(out)


class Policies(list):
    """``derive``'s answer: the policies, and ``notes`` on the groups that got none (and why)."""

    def __init__(self, items=(), notes: list[str] | None = None):
        super().__init__(items)
        self.notes: list[str] = list(notes or [])


def is_confirmation(row: dict) -> bool:
    """A point of a policy's own server: a step axis valued 'adaptive', or --speculative-adaptive."""
    if any(_is_adaptive_value(v) for v in axes_of(row).values() if v is not None):
        return True
    return server_flags(row).adaptive


def _is_adaptive_value(v: Any) -> bool:
    """'adaptive', or a revision's 'adaptive-r2'."""
    return speculation.is_confirm_value(v)


def _step_axis(row: dict) -> str | None:
    roles = as_dict(row.get("param_roles"))
    return next((a for a, role in roles.items() if role == speculation.STEPS_ROLE), None)


def _steps_of(row: dict, axis: str | None) -> int | None:
    shape = spec_shape(server_flags(row), _resolved(row))
    if shape["steps"] is not None:
        return int(shape["steps"])
    if axis is not None:
        try:
            return int(str(row.get(f"axis_{axis}")))
        except ValueError:
            return None
    return None


def _resolved(row: dict) -> dict | None:
    r = row.get("resolved")
    return r if isinstance(r, dict) else None


def _topk(row: dict) -> int:
    shape = spec_shape(server_flags(row), _resolved(row))
    return int(shape["topk"] or 1)


def _infer_step_axis(rows: list[dict]) -> dict[str, str]:
    """{point_id: its step axis} for speculative points with no axis of role steps
    (``speculation.step_axis_of``: the axis whose values alone tell apart points of different step counts)."""
    loose = [r for r in rows if _step_axis(r) is None]
    out: dict[str, str] = {}
    for r in loose:
        axis = speculation.step_axis_of(
            r,
            loose,
            roles=lambda q: as_dict(q.get("param_roles")),
            params=axes_of,
            steps=lambda q: _steps_of(q, None),
        )
        if axis is not None:
            out[r["point_id"]] = axis
    return out


def _prediction(reason: str | None) -> str:
    """The adaptive search's prediction for a pruned point, from its recorded reason (its closest level:
    ``C=8: at most 410 tok/s (+5% allowed) against 400 tok/s (+-6% noise) of LABEL``), in brackets."""
    m = re.search(r"closest at ((?:C=\d+|the single stream): at most [^;]*)", reason or "")
    return f" (predicted at {m.group(1)})" if m else ""


def _pairs(params: dict[str, Any]) -> str:
    return ",".join(f"{a}={v}" for a, v in params.items() if v is not None)


@dataclass
class _Group:
    key: tuple
    params: dict[str, Any]
    step_axis: str
    workload: str
    order: tuple[str, ...] = ()
    members: dict[int, dict] = field(default_factory=dict)  # steps -> points row
    pruned: list[str] = field(default_factory=list)
    confirmations: list[str] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)  # confirmation point id -> its config (canonical JSON)


def groups(points: pl.DataFrame, configurations: pl.DataFrame | None = None) -> tuple[list[_Group], list[str]]:
    """The step-count groups of a points table (chains of topk 1 only), and notes on what was left
    out (trees; points without a step count). ``configurations``: ``frames.configurations`` of the same
    tables, for each point's workload (the client-side axes)."""
    rows = [r for r in points.iter_rows(named=True) if not r.get("baseline")]
    workload = (
        {r["point_id"]: r["workload"] or "" for r in configurations.iter_rows(named=True)}
        if configurations is not None and "workload" in configurations.columns
        else {}
    )
    inferred = _infer_step_axis([r for r in rows if not is_confirmation(r)])
    found: dict[tuple, _Group] = {}
    notes: list[str] = []
    trees: set[str] = set()
    for r in rows:
        axis = _step_axis(r) or inferred.get(r["point_id"])
        if axis is None and is_confirmation(r):
            axis = next((a for a, v in axes_of(r).items() if _is_adaptive_value(v)), None)
        if axis is None:
            continue
        params = {a: v for a, v in axes_of(r).items() if a != axis and v is not None}
        key = speculation.step_group_key(axes_of(r), axis)
        g = found.setdefault(key, _Group(key, params, axis, workload.get(r["point_id"], ""), tuple(axes_of(r))))
        if is_confirmation(r):
            g.confirmations.append(r["point_id"])
            cfg = _config_of(r)
            if cfg is not None:
                g.configs[r["point_id"]] = cfg
            continue
        if _topk(r) > 1:
            trees.add(_pairs(params))
            continue
        steps = _steps_of(r, axis)
        if steps is None:
            continue
        if r.get("status") == "pruned":
            g.pruned.append(r["label"] + _prediction(r.get("failure_reason")))
            continue
        if r.get("status") != "ok":
            continue
        g.members[steps] = r
    for t in sorted(trees, key=natural_key):
        notes.append(
            f"{t}: a tree (topk > 1), left out: SGLang's adaptive speculation runs topk 1 only "
            "('only topk=1 is supported')"
        )
    return sorted(found.values(), key=lambda g: (natural_key(g.workload), natural_key(_pairs(g.params)))), notes


def group_name(g: _Group) -> str:
    """A group's label as its policy carries it (``Policy.group``)."""
    return _pairs(g.params)


def _judge(rows: list[dict], sigma: float, confidence: float) -> list[bool | None]:
    """Within noise, per row of {ratio, ci_low, ci_high} (the requests' interval of the ratio, or
    None): ``noise.judged``'s rule."""
    if not rows:
        return []
    frame = pl.DataFrame(rows, schema={"ratio": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64})
    judged = noise.judged(frame, "ratio", sigma, confidence=confidence)
    return judged["within_noise"].to_list()


def _request_intervals(
    pairs: list[tuple[str, str, int, float]], samples: pl.LazyFrame | None, confidence: float
) -> dict[tuple[str, str, int], tuple[float | None, float | None]]:
    """The per-request interval of each pair's throughput ratio (a, b, level, per-request ratio): the
    interval of a's mean per-request tok/s over b's at that level, moved to the throughput ratio as a
    relative width by the caller. Empty without samples."""
    if samples is None or not pairs:
        return {}
    frame = pl.DataFrame(
        [{"key": f"{a}@{c}", "base_key": f"{b}@{c}"} for a, b, c, _ in pairs],
        schema={"key": pl.String, "base_key": pl.String},
    ).unique()
    found = noise.ratio_intervals(frame, samples, stat="mean", confidence=confidence)
    out = {}
    for r in found.iter_rows(named=True):
        a, c = r["key"].rsplit("@", 1)
        b = r["base_key"].rsplit("@", 1)[0]
        out[(a, b, int(c))] = (r["ci_low"], r["ci_high"])
    return out


def _within(
    best: tuple[str, float, float | None],
    other: tuple[str, float, float | None],
    c: int,
    intervals: dict,
    sigma: float,
    confidence: float,
) -> bool:
    """Is ``other`` (point id, throughput, per-request tok/s) within noise of ``best`` at level c."""
    (a, ta, pa), (b, tb, pb) = best, other
    if a == b:
        return True
    ratio = tb / ta if ta > 0 else None
    if ratio is None:
        return False
    lo, hi = intervals.get((b, a, c), (None, None))
    if lo is not None and hi is not None and pa and pb:
        pr = pb / pa
        lo, hi = ratio * lo / pr, ratio * hi / pr
    else:
        lo = hi = None
    return bool(_judge([{"ratio": ratio, "ci_low": lo, "ci_high": hi}], sigma, confidence)[0])


def _graph_bs(rows: list[dict]) -> list[int] | None:
    """The decode CUDA-graph batch sizes an adaptive server of these points pads its batches to
    (``speculation.decode_graph_bs``: --cuda-graph-bs, else SGLang's speculative list up to
    --cuda-graph-max-bs(-decode), 256 where not given); None where graphs are off (a CPU server, or
    --disable-cuda-graph): SGLang then routes the batch as it is."""
    if not rows:
        return None
    flags = server_flags(rows[0])
    if flags.is_cpu or flags.get("disable-cuda-graph") in (True, "true", "True"):
        return None
    given = flags.get("cuda-graph-bs")
    if isinstance(given, str):
        given = [int(x) for x in given.split()]
    top = flags.get("cuda-graph-max-bs-decode") or flags.get("cuda-graph-max-bs") or 256
    try:
        top = int(top)
    except (TypeError, ValueError):
        top = 256
    return speculation.decode_graph_bs(top, speculative=True, given=given)


def _tiers(levels: list[Level], graph_bs: list[int] | None, mode: str = "one") -> tuple[tuple[Tier, ...], list[str]]:
    """Tiers where SGLang routes: adjacent levels with the same choice (``within_noise``: the same set)
    merged; each later tier's key the smallest padded batch size above every batch its lower neighbour
    ran (the next graph size above its padded largest batch, or that batch + 1 without graphs), at most
    the padded batch its own first level mostly ran, so that a level's batches land in its own tier;
    where the two levels' batches overlap so that no key tells them apart, the upper level joins the
    lower tier (and a note says so). The first key is 1. Also returns those notes."""

    def same(a: Level, b: Level) -> bool:
        return a.within_noise == b.within_noise if mode == "within_noise" else a.choice == b.choice

    def top(lv: Level) -> int:
        return int(math.ceil(lv.batch_max)) if lv.batch_max else lv.concurrency

    def typical(lv: Level) -> int:
        return max(1, int(round(lv.batch))) if lv.batch else lv.concurrency

    segments: list[list[Level]] = []
    keys: list[int] = []
    notes: list[str] = []
    for lv in levels:
        if segments and same(segments[-1][-1], lv):
            segments[-1].append(lv)
            continue
        if not segments:
            segments.append([lv])
            keys.append(1)
            continue
        low = speculation.padded(top(segments[-1][-1]), graph_bs)
        above = next((g for g in graph_bs or () if g > low), low + 1)
        key = min(above, speculation.padded(typical(lv), graph_bs))
        if key <= keys[-1]:
            notes.append(
                f"C={lv.concurrency} ran batches ({typical(lv)} running, padded to "
                f"{speculation.padded(typical(lv), graph_bs)}) that SGLang routes with C="
                f"{segments[-1][-1].concurrency}'s (up to {top(segments[-1][-1])}): one tier holds both, its "
                "lower level's choice"
            )
            segments[-1].append(lv)
            continue
        segments.append([lv])
        keys.append(key)
    tops = max((top(lv) for lv in levels), default=1)
    spans = speculation.served(keys, graph_bs, max(tops, keys[-1] if keys else 1))
    out = []
    for key, seg in zip(keys, segments):
        choice = seg[0].choice
        if mode == "within_noise":
            common = set(seg[0].within_noise)
            for lv in seg[1:]:
                common &= set(lv.within_noise)
            cands = tuple(sorted(common)) or (choice,)
        else:
            cands = (choice,)
        out.append(
            Tier(
                key,
                seg[-1].concurrency,
                choice,
                cands,
                tuple(lv.concurrency for lv in seg),
                spans.get(key, (key, None)),
            )
        )
    return tuple(out), notes


def level_batches(tables) -> dict[tuple[str, int], tuple[float | None, float | None]]:
    """{(point id, concurrency): (mean running requests, largest)} from a results directory's levels
    table (``metrics_running_reqs``, ``metrics_running_reqs_max``: what SGLang batched there)."""
    frame = tables["levels"]
    frame = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
    cols = ("metrics_running_reqs", "metrics_running_reqs_max")
    if not all(c in frame.columns for c in cols) or not frame.height:
        return {}
    out: dict[tuple[str, int], tuple[float | None, float | None]] = {}
    for r in frame.select("point_id", "concurrency", *cols).iter_rows(named=True):
        if r["concurrency"] and r["concurrency"] > 0:
            out[(r["point_id"], int(r["concurrency"]))] = (r[cols[0]], r[cols[1]])
    return out


def _break_even(rows: list[dict]) -> _BreakEven | None:
    """From per level {c, ahead (a step count faster than the baseline beyond noise), behind (the
    baseline faster than every step count beyond noise), ratio (the best step count's over the
    baseline)}: None when no level is ahead (never pays) or the highest is (never stops paying)."""
    rows = [r for r in rows if r["ratio"] is not None]
    if not rows or not any(r["ahead"] for r in rows) or rows[-1]["ahead"]:
        return None
    last = max(i for i, r in enumerate(rows) if r["ahead"])
    high = next((i for i in range(last + 1, len(rows)) if all(x["behind"] for x in rows[i:])), None)
    est = None
    for i in range(last, len(rows) - 1):  # where the best ratio crosses 1 after the last level ahead
        r0, r1 = rows[i]["ratio"], rows[i + 1]["ratio"]
        if r0 >= 1 > r1:
            c0, c1 = rows[i]["c"], rows[i + 1]["c"]
            frac = (r0 - 1) / (r0 - r1)
            est = math.exp(math.log(c0) + frac * (math.log(c1) - math.log(c0)))
            break
    return _BreakEven(est, rows[last]["c"], None if high is None else rows[high]["c"], rows[-1]["c"])


def _version(points: pl.DataFrame) -> str | None:
    """The SGLang the points ran (the hosts' ``sglang_version``, else the version the plan resolved
    against); the oldest where they differ (the flags must be in every one)."""
    found = set()
    for r in points.iter_rows(named=True):
        v = r.get("sglang_version") or (_resolved(r) or {}).get("version")
        if v and v != "unknown":
            found.add(str(v))
    known = sorted((v for v in found if has_adaptive(v) is not None), key=lambda v: (has_adaptive(v), natural_key(v)))
    return known[0] if known else (sorted(found)[0] if found else None)


def derive(
    levels: pl.DataFrame,
    points: pl.DataFrame,
    *,
    configurations: pl.DataFrame | None = None,
    samples: pl.LazyFrame | None = None,
    level_noise: float | None = None,
    confidence: float = 0.95,
    batches: dict[tuple[str, int], tuple[float | None, float | None]] | None = None,
    candidates: str = "one",
) -> Policies:
    """One ``Policy`` per group of points that differ only in their step count (``groups``), from
    ``levels`` (``speedups.level_speedups``: output_throughput, per_request_tok_s and the matched
    baseline's, per point and level) and ``points`` (the points table: roles, axes, argv, resolved,
    status). ``samples``: the per-request tok/s (``speedups.level_samples``) for the intervals;
    without it, the level-wide noise alone. ``level_noise``: ``noise.curve_noise`` (at least the
    floor). None for a group that never beats its baseline beyond noise (``notes`` says so).
    ``batches``: ``level_batches`` (the running requests each level recorded; without it a level of C is
    taken to run batches of C); ``candidates``: ``policy.candidates`` ("one": one step count per tier,
    by ``CHOICE_RULE``; "within_noise": every step count within noise, for SGLang to pick among)."""
    _check_candidates(candidates)
    batches = batches or {}
    sigma = noise.level_sigma(level_noise)
    found, notes = groups(points, configurations)
    lv = levels.filter(pl.col("concurrency") > 0) if levels.height else levels
    figures: dict[str, dict[int, dict]] = {}
    for r in lv.iter_rows(named=True):
        if r.get("output_throughput") is not None:
            figures.setdefault(r["point_id"], {})[int(r["concurrency"])] = r
    version = _version(points)
    out = Policies(notes=notes)
    for g in found:
        if not g.members:
            continue
        name = _pairs(g.params)
        member_ids = {k: r["point_id"] for k, r in sorted(g.members.items())}
        base_id = next((r.get("baseline_id") for r in g.members.values() if r.get("baseline_id")), None)
        base_label = None
        concurrencies = sorted({c for pid in member_ids.values() for c in figures.get(pid, {})})
        if not concurrencies:
            continue
        # every option at every level: (point id, throughput, per-request tok/s)
        options: dict[int, dict[int, tuple[str, float, float | None]]] = {}
        for c in concurrencies:
            at: dict[int, tuple[str, float, float | None]] = {}
            for k, pid in member_ids.items():
                row = figures.get(pid, {}).get(c)
                if row is not None and row["output_throughput"] > 0:
                    at[k] = (pid, row["output_throughput"], row.get("per_request_tok_s"))
                    if base_id and row.get("baseline_output_throughput"):
                        at[0] = (base_id, row["baseline_output_throughput"], row.get("baseline_per_request_tok_s"))
                        base_label = base_label or row.get("baseline_label")
            options[c] = at
        pairs = [
            (b[0], a[0], c, 0.0) for c, at in options.items() for a in at.values() for b in at.values() if a[0] != b[0]
        ]
        intervals = _request_intervals(pairs, samples, confidence)
        rows, judged = [], []
        for c in concurrencies:
            at = options[c]
            spec = {k: v for k, v in at.items() if k}
            if not spec:
                continue
            best_k = max(at, key=lambda k: (at[k][1], -k))
            cands = tuple(sorted(k for k in at if _within(at[best_k], at[k], c, intervals, sigma, confidence)))
            top_spec = max(spec, key=lambda k: (spec[k][1], -k))
            near = tuple(sorted(k for k in spec if _within(spec[top_spec], spec[k], c, intervals, sigma, confidence)))
            choice = min(k for k in spec if spec[k][1] >= spec[top_spec][1] * (1 - CHOICE_TIE))
            plain = min(k for k in at if at[k][1] >= at[best_k][1] * (1 - CHOICE_TIE))
            ahead = behind = False
            ratio = None
            if 0 in at:
                ratio = spec[top_spec][1] / at[0][1]
                ahead = any(
                    v[1] > at[0][1] and not _within(v, at[0], c, intervals, sigma, confidence) for v in spec.values()
                )
                behind = all(
                    at[0][1] > v[1] and not _within(at[0], v, c, intervals, sigma, confidence) for v in spec.values()
                )
            judged.append({"c": c, "ahead": ahead, "behind": behind, "ratio": ratio})
            ran = [batches[(pid, c)] for pid in member_ids.values() if (pid, c) in batches]
            means = sorted(m for m, _ in ran if m)
            tops = [x for _, x in ran if x]
            batch = means[len(means) // 2] if means else None
            rows.append(
                (
                    c,
                    best_k,
                    cands,
                    {k: v[1] for k, v in at.items()},
                    near,
                    batch,
                    max(tops) if tops else None,
                    choice,
                    plain,
                )
            )
        if not any(j["ahead"] for j in judged) and any(j["ratio"] is not None for j in judged):
            out.notes.append(
                f"{name}: no policy: no step count is faster than its baseline beyond noise at any "
                "level (no speculation)"
            )
            continue
        # the group's best single static setup: the best mean rank over the levels (then geomean);
        # no speculation (0, the baseline) is one of them: a policy that turns it off at high load is
        # not "+19 % over the best static" there when running none all along would do as well
        ranks: dict[int, list[int]] = {}
        for _, _, _, tok, *_ in rows:
            for i, k in enumerate(sorted(tok, key=lambda k: -tok[k])):
                ranks.setdefault(k, []).append(i)
        static = min(ranks, key=lambda k: (sum(ranks[k]) / len(ranks[k]), -len(ranks[k]), k)) if ranks else None
        level_rows = []
        for c, best_k, cands, tok, near, batch, batch_max, choice, plain in rows:
            level_rows.append(
                Level(
                    c,
                    best_k,
                    cands,
                    tok,
                    tok.get(choice),
                    tok.get(static) if static is not None else None,
                    tok.get(0),
                    choice=choice,
                    within_noise=near,
                    plain_steps=plain,
                    batch=batch,
                    batch_max=batch_max,
                )
            )
        tiers, tier_notes = _tiers(level_rows, _graph_bs(list(g.members.values())), candidates)
        policy_notes = []
        if g.pruned:
            policy_notes.append(
                f"not measured (pruned by the adaptive search: predicted to be at best within noise "
                f"of a measured point at every level, never the best): {'; '.join(g.pruned)}; left "
                "out of the candidates, which hold measured step counts only"
            )
        policy_notes += tier_notes
        if base_id is None or all(0 not in options[c] for c in concurrencies):
            policy_notes.append(
                "no matched baseline measured: 0 (no speculation) is never a candidate, and there is no break-even"
            )
        out.append(
            Policy(
                group=name,
                params=g.params,
                step_axis=g.step_axis,
                workload=g.workload,
                tiers=tiers,
                break_even=_break_even(judged),
                member_ids=tuple(member_ids.values()),
                steps=member_ids,
                labels={k: r["label"] for k, r in g.members.items()},
                baseline_id=base_id,
                baseline_label=base_label,
                levels=tuple(level_rows),
                static_steps=static,
                sglang_version=version,
                notes=tuple(policy_notes),
                confirmation_ids=tuple(g.confirmations),
                confirmation_configs=dict(g.configs),
                axis_order=g.order,
                candidates=candidates,
            )
        )
    return out


def candidates_of(experiment: dict) -> str:
    """An experiment's ``policy.candidates`` as its experiment.yaml holds it ("one" where not given or no mode)."""
    section = experiment.get("policy") if isinstance(experiment, dict) else None
    mode = section.get("candidates", "one") if isinstance(section, dict) else "one"
    return mode if mode in CANDIDATE_MODES else "one"


def _check_candidates(mode: str) -> None:
    """Refuse a ``policy.candidates`` that is no mode, naming the fix."""
    if mode not in CANDIDATE_MODES:
        raise ConfigError(
            f"policy.candidates = {mode!r} is not a mode",
            fix="one of " + ", ".join(CANDIDATE_MODES) + " (one: one step count per tier, chosen by speed; "
            "within_noise: every step count within noise of the best, for SGLang's acceptance rule to pick among)",
        )


def from_tables(
    tables, *, level_noise: float | None = None, confidence: float = 0.95, candidates: str = "one"
) -> Policies:
    """``derive`` on a results directory's tables (``sweep.results.load``), its figures at real speed
    as the report reads them (``level_noise``: by default measured between repeats where there are
    enough, else the curves' own: ``speedups.measured_level_noise``, ``noise.curve_noise``)."""

    if level_noise is None:
        level_noise = speedups.measured_level_noise(tables)
    levels = speedups.level_speedups(tables, level_noise=level_noise)
    return derive(
        levels,
        points_frame(tables),
        configurations=configurations(tables),
        samples=speedups.level_samples(tables),
        level_noise=noise.curve_noise(levels) if level_noise is None else level_noise,
        confidence=confidence,
        batches=level_batches(tables),
        candidates=candidates,
    )


def _for_point(policies: list[Policy], point_id: str) -> Policy | None:
    """The policy whose group holds the point (a step count of it), if any."""
    return next((p for p in policies if point_id in p.member_ids), None)


_CONFIRMATION = {
    "concurrency": pl.Int64,
    "policy_tok_s": pl.Float64,
    "static_tok_s": pl.Float64,
    "static_label": pl.String,
    "envelope_tok_s": pl.Float64,
    "envelope_label": pl.String,
    "baseline_tok_s": pl.Float64,
    "vs_envelope": pl.Float64,
    "vs_envelope_low": pl.Float64,
    "vs_envelope_high": pl.Float64,
    "short": pl.Boolean,
    "vs_static": pl.Float64,
    "vs_static_low": pl.Float64,
    "vs_static_high": pl.Float64,
    "vs_baseline": pl.Float64,
    "vs_baseline_low": pl.Float64,
    "vs_baseline_high": pl.Float64,
    "envelope_steps": pl.Int64,
    "static_short": pl.Boolean,  # the best static setup below the envelope beyond noise (the grid's figures)
}


def _option(row: dict) -> tuple[str, float, float | None]:
    return (row["point_id"], row["output_throughput"], row.get("per_request_tok_s"))


def confirmation_id(p: Policy, rows_of: dict[str, Any]) -> str | None:
    """The measured confirmation point of exactly this policy's config (a revision's own); for points
    recorded without their config, the first measured one."""
    key = p.config_key()
    measured = [c for c in p.confirmation_ids if c in rows_of]
    exact = next((c for c in measured if p.confirmation_configs.get(c) == key), None)
    if exact is not None or p.confirmation_configs:
        return exact
    return measured[0] if measured else None


def confirmation(
    p: Policy,
    levels: pl.DataFrame,
    *,
    samples: pl.LazyFrame | None = None,
    level_noise: float | None = None,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """The policy's own server (its confirmation point, measured as an ordinary point) against, per
    level: the group's best single static setup, the envelope (the best the group measured at that
    level: any of its step counts or its baseline) and the baseline. Each ``vs_*`` is the policy's
    throughput over the other's - 1, with its interval (the report's rule: the two levels' per-request
    interval as a relative width, widened by the level-wide noise); ``short``: below the envelope
    beyond noise. Empty without a measured confirmation point (``_CONFIRMATION``)."""
    sigma = noise.level_sigma(level_noise)
    rows_of: dict[str, dict[int, dict]] = {}
    for r in levels.filter(pl.col("concurrency") > 0).iter_rows(named=True):
        if r.get("output_throughput"):
            rows_of.setdefault(r["point_id"], {})[int(r["concurrency"])] = r
    cid = confirmation_id(p, rows_of)
    mine = rows_of.get(cid) if cid is not None else None
    if mine is None or cid is None:
        return pl.DataFrame(schema=_CONFIRMATION)
    ids = {**p.steps, **({0: p.baseline_id} if p.baseline_id else {})}
    label = {k: f"{p.step_axis}={k}" for k in p.steps} | {0: "none"}  # within the group
    out, pairs = [], []
    for c, r in sorted(mine.items()):
        opts = {k: rows_of[pid][c] for k, pid in ids.items() if pid in rows_of and c in rows_of[pid]}
        if 0 not in opts and r.get("baseline_output_throughput"):
            opts[0] = {
                "point_id": p.baseline_id,
                "output_throughput": r["baseline_output_throughput"],
                "per_request_tok_s": r.get("baseline_per_request_tok_s"),
            }
        env_k = max(opts, key=lambda k: opts[k]["output_throughput"]) if opts else None
        row: dict[str, Any] = {
            "concurrency": c,
            "policy_tok_s": r["output_throughput"],
            "static_tok_s": opts[p.static_steps]["output_throughput"] if p.static_steps in opts else None,
            "static_label": label.get(p.static_steps) if p.static_steps is not None else None,
            "envelope_tok_s": opts[env_k]["output_throughput"] if env_k is not None else None,
            "envelope_label": label.get(env_k) if env_k is not None else None,
            "baseline_tok_s": opts[0]["output_throughput"] if 0 in opts else None,
            "envelope_steps": env_k,
        }
        if env_k is not None and p.static_steps in opts and p.static_steps != env_k:
            row["static_short"] = not _within(
                _option(opts[env_k]), _option(opts[p.static_steps]), c, {}, sigma, confidence
            ) and (opts[p.static_steps]["output_throughput"] < opts[env_k]["output_throughput"])
        else:
            row["static_short"] = False
        for name, k in (("envelope", env_k), ("static", p.static_steps), ("baseline", 0)):
            other = opts.get(k) if k is not None else None
            if other is None:
                continue
            row[f"vs_{name}"] = r["output_throughput"] / other["output_throughput"] - 1
            pairs.append((name, c, cid, other["point_id"], r.get("per_request_tok_s"), other.get("per_request_tok_s")))
        out.append(row)
    intervals = _request_intervals([(a, b, c, 0.0) for _, c, a, b, _, _ in pairs], samples, confidence)
    by = {(name, c): (a, b, pa, pb) for name, c, a, b, pa, pb in pairs}
    for row in out:
        for name in ("envelope", "static", "baseline"):
            if row.get(f"vs_{name}") is None:
                continue
            a, b, pa, pb = by[(name, row["concurrency"])]
            ratio = row[f"vs_{name}"] + 1
            lo, hi = intervals.get((a, b, row["concurrency"]), (None, None))
            if lo is not None and hi is not None and pa and pb:
                lo, hi = ratio * lo / (pa / pb), ratio * hi / (pa / pb)
            else:
                lo = hi = None
            judged = noise.judged(
                pl.DataFrame(
                    [{"ratio": ratio, "ci_low": lo, "ci_high": hi}],
                    schema={"ratio": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64},
                ),
                "ratio",
                sigma,
                confidence=confidence,
            ).row(0, named=True)
            row[f"vs_{name}_low"], row[f"vs_{name}_high"] = judged["ci_low"] - 1, judged["ci_high"] - 1
        row["short"] = row.get("vs_envelope_high") is not None and row["vs_envelope_high"] < 0
    return pl.DataFrame(out, schema=_CONFIRMATION)


# --- the verdict on a confirmation, and the revision it may call for ---

_SIGN_ALPHA = 0.05  # levels together: below the envelope at so many levels that chance (a fair coin) is ruled out


def _sign_short(below: int, n: int) -> bool:
    """A one-sided sign test: ``below`` of ``n`` levels below, each equally likely above or below were
    the two equal (7 of 8: p = 0.035, a shortfall; 6 of 8: p = 0.14, not)."""
    if n < 3:
        return False
    p = sum(math.comb(n, k) for k in range(below, n + 1)) / 2**n
    return p < _SIGN_ALPHA


@dataclass(frozen=True)
class _ConfirmationVerdict:
    """What a confirmation says, levels alone and together. ``winner``: what to deploy by measurement
    (``policy``: the adaptive server, not short of the envelope nor of the best static setup beyond
    noise at any level, nor below the envelope at so many levels together that chance is ruled out;
    ``static``: else the best single static setup, where it is within noise of the envelope at every
    level; ``plain``: else the plain table, one server per load range, the envelope by construction)."""

    winner: str
    short: tuple[int, ...]  # levels where the policy is below the envelope beyond noise
    short_static: tuple[int, ...]  # levels where it is below the best static setup beyond noise
    below: int  # levels where it is below the envelope by more than a tie (CHOICE_TIE)
    below_static: int
    levels: int
    together: bool  # below the envelope at so many levels that chance is ruled out (sign test)
    together_static: bool
    static_short: tuple[int, ...]  # levels where the best static setup is below the envelope beyond noise
    off_wins: tuple[int, ...]  # levels where the policy is short and the envelope is the no-speculation server

    @property
    def policy_ok(self) -> bool:
        return not (self.short or self.short_static or self.together or self.together_static)


def verdict(table: pl.DataFrame) -> _ConfirmationVerdict | None:
    """The verdict of a confirmation table (``confirmation``); None when it is empty. Levels together:
    a sign test over the levels where the policy is below the envelope (the best static setup) by more
    than a tie, so that a policy a little below at nearly every level is a shortfall even where each
    level alone is within noise."""
    if table.is_empty():
        return None
    rows = list(table.iter_rows(named=True))
    short = tuple(r["concurrency"] for r in rows if r["short"])
    short_static = tuple(
        r["concurrency"] for r in rows if r.get("vs_static_high") is not None and r["vs_static_high"] < 0
    )
    env = [r for r in rows if r.get("vs_envelope") is not None]
    stat = [r for r in rows if r.get("vs_static") is not None]
    below = sum(r["vs_envelope"] < -CHOICE_TIE for r in env)
    below_static = sum(r["vs_static"] < -CHOICE_TIE for r in stat)
    static_short = tuple(r["concurrency"] for r in rows if r.get("static_short"))
    off = tuple(r["concurrency"] for r in rows if r["short"] and r.get("envelope_steps") == 0)
    v = _ConfirmationVerdict(
        winner="policy",
        short=short,
        short_static=short_static,
        below=below,
        below_static=below_static,
        levels=len(rows),
        together=_sign_short(below, len(env)),
        together_static=_sign_short(below_static, len(stat)),
        static_short=static_short,
        off_wins=off,
    )
    if v.policy_ok:
        return v
    static_ok = not static_short and any(r.get("static_tok_s") for r in rows)
    return replace(v, winner="static" if static_ok else "plain")


def _merged(tiers: list[Tier]) -> tuple[Tier, ...]:
    out: list[Tier] = []
    for t in tiers:
        if out and out[-1].candidate_steps == t.candidate_steps:
            u = out[-1]
            out[-1] = Tier(
                u.lo, t.hi, u.best_steps, u.candidate_steps, u.levels + t.levels, (u.batches[0], t.batches[1])
            )
            continue
        out.append(t)
    return tuple(out)


def revise(p: Policy, table: pl.DataFrame) -> Policy | None:
    """The policy revised after its confirmation (``table``) fell short: each tier holding a level where
    it is short of the best static setup beyond noise takes the static step count; one holding a level
    short of the envelope beyond noise, where the envelope is a step count, takes that step count (the
    envelope's no-speculation server no adaptive server can run: its step 0 still drafts). None where
    nothing is to revise, or where every tier would take the best static step count (the policy
    collapses to the best static setup: that server is the answer, no adaptive one to confirm)."""
    v = verdict(table)
    if v is None or v.policy_ok:
        return None
    by_level = {r["concurrency"]: r for r in table.iter_rows(named=True)}
    wants: dict[int, int] = {}  # tier index -> the step count it takes
    why: list[str] = []
    for i, t in enumerate(p.tiers):
        for c in t.levels:
            r = by_level.get(c)
            if r is None:
                continue
            if c in v.short_static and p.static_steps:
                wants[i] = p.static_steps
                why.append(f"C={c}: {_pct_text(r['vs_static'])} against the best static {p.step_axis}={p.static_steps}")
                break
            if c in v.short and (r.get("envelope_steps") or 0) > 0:
                wants[i] = int(r["envelope_steps"])
                why.append(f"C={c}: {_pct_text(r['vs_envelope'])} against {p.step_axis}={r['envelope_steps']}")
                break
    if not wants and v.together_static and p.static_steps:
        wants = {i: p.static_steps for i in range(len(p.tiers))}
        why.append(f"below the best static {p.step_axis}={p.static_steps} at {v.below_static} of {v.levels} levels")
    if not wants:
        return None
    tiers = [
        replace(t, best_steps=wants[i], candidate_steps=(wants[i],)) if i in wants else t for i, t in enumerate(p.tiers)
    ]
    if all(t.candidate_steps == (p.static_steps,) for t in tiers):
        return None
    merged = _merged(tiers)
    if merged == p.tiers:
        return None
    n = p.revision + 1
    text = f"revision {n}: " + "; ".join(why) + " (its confirmation)"
    return replace(p, tiers=merged, revision=n, revised=p.revised + (text,))


def _pct_text(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:+.0f}%"


@dataclass(frozen=True)
class ConfirmationRound:
    """One confirmation round: the policy, its confirmation table (empty: not measured yet) and verdict."""

    policy: Policy
    table: pl.DataFrame
    verdict: _ConfirmationVerdict | None


def settle(
    p: Policy,
    levels: pl.DataFrame,
    *,
    samples: pl.LazyFrame | None = None,
    level_noise: float | None = None,
    confidence: float = 0.95,
    rounds: int | None = None,
) -> list[ConfirmationRound]:
    """The confirmation rounds of the grid's policy ``p``: its confirmation, the revision that called
    for (``revise``) and its confirmation, and so on while each is recorded, at most ``rounds``
    revisions (None: as many as were recorded). The last round's table is empty where its policy
    awaits its confirmation."""
    out: list[ConfirmationRound] = []
    seen: set[str] = set()
    while True:
        table = confirmation(p, levels, samples=samples, level_noise=level_noise, confidence=confidence)
        out.append(ConfirmationRound(p, table, verdict(table)))
        seen.add(p.config_key())
        if table.is_empty():
            return out
        nxt = revise(p, table)
        if nxt is None or (rounds is not None and nxt.revision > rounds + 1) or nxt.config_key() in seen:
            return out  # nothing to revise, no rounds left, or a config already confirmed (no circle)
        p = nxt
