"""The plan: every grid point as the exact argv and env of its SGLang server, validated. Pure, but for
reading the ``config.json`` of the model paths it names, where this machine has them (the target's
architecture decides some of SGLang's rules; see ``sweep.sglang.serverargs``).

Each point gets a stable id: a hash of everything that changes its result (model, tp, launcher,
flags other than host and port, env, benchmark settings: each field says whether it counts, in
sweep/core/identity.py), independent of axis order, labels and file layout. Each point also gets a launch id: the hash of what its server runs (launcher, flags,
env; not the benchmark): the points of client-side axes (benchmark settings only) share it, and so
one server launch: the plan is also a list of ``Launch``es, each a server and the points it serves
(``Plan.launches``), the unit the hosts run. Each speculative point is matched with the baseline it
is compared against (same model, tp, env and non-speculative flags); a mismatch is a warning, since it once cost a day (the baseline
lost its NCCL settings between restarts and dropped from 88.8 to 62.9 tok/s).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sweep.core import (
    BenchSettings,
    ConfigError,
    PlanError,
    PlanStatus,
    ServerFlags,
    identity,
    plural,
    redact,
    speculation,
)
from sweep.experiment.config import Experiment
from sweep.experiment.grid import ADAPTIVE, Axis, BenchScale, GridPoint, build_axes, expand
from sweep.sglang import RESERVED_FLAGS, SPECULATIVE_PREFIX, flag_args, rules, serverargs

# Flags that place a server, not what it computes: left out of the point id and baseline matching.
PLACEMENT_FLAGS = frozenset({"host", "port"})


@dataclass
class PlannedPoint:
    id: str
    label: str
    params: dict[str, str]
    roles: dict[str, str]
    baseline: bool
    flags: ServerFlags  # every flag, model-path/tp-size/host/port included
    env: dict[str, str]  # the server's env on top of the host's (base env + the point's)
    launcher: list[str]
    bench: BenchSettings = field(default_factory=BenchSettings)  # what its benchmark runs (axes merged in)
    launch_id: str = ""  # the hash of what its server runs: shared by the points of one server launch
    bench_key: str = ""  # its client-side axes' values ("workload=chat,max_tokens=256"); "" without any
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    baseline_id: str | None = None
    # what SGLang would run with, by its rules (verdict ok/adjusted/error, final steps, topk, draft
    # tokens, running-request cap, attention backend, page size; the version, architecture and GPU
    # assumed); None for a baseline
    resolved: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.flags = ServerFlags(self.flags)  # built once, also from a plain map (typed here, not by the caller)

    @property
    def status(self) -> PlanStatus:
        return "invalid" if self.errors else "ok"

    @property
    def argv(self) -> list[str]:
        """The server's command line as planned (the host's launcher and port may differ: LaunchSpec)."""
        return list(self.launcher) + flag_args(self.flags)

    @property
    def secrets(self) -> list[str]:
        """The secret values of this point (of its secret-named flags and env; sweep/core/redact.py)."""
        return redact.secret_values(self.argv, self.env, self.flags)

    def to_json(self) -> dict[str, Any]:
        """The point as ``--plan --json`` and the results' plan.json show it: secrets redacted (the
        values of secret-named env and flags, in argv, env and any text; the id is of the real values)."""
        return redact.redact_tree(self._json(), self.secrets)

    def _json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "launch_id": self.launch_id,
            "bench_key": self.bench_key,
            "label": self.label,
            "params": self.params,
            "argv": self.argv,
            "env": self.env,
            "status": self.status,
            "errors": self.errors,
            "warnings": self.warnings,
            "baseline": self.baseline,
            "baseline_id": self.baseline_id,
            "resolved": self.resolved,
        }


@dataclass
class Plan:
    experiment: Experiment
    points: list[PlannedPoint]
    warnings: list[str] = field(default_factory=list)  # about the plan as a whole
    # with policy.confirm: one stand-in per step group of what its policy's server will launch (the
    # group's largest step count with --speculative-adaptive and every step count a candidate), checked
    # by SGLang's rules now; the real confirmation points are known only after the grid
    confirm_probes: list[PlannedPoint] = field(default_factory=list)

    @property
    def confirm_errors(self) -> list[str]:
        """The rules a policy's launch would break (``confirm_probes``), one line each."""
        return [f"  {p.label} [policy launch]: {e}" for p in self.confirm_probes for e in p.errors]

    @property
    def invalid(self) -> list[PlannedPoint]:
        return [p for p in self.points if p.errors]

    @property
    def launches(self) -> list[Launch]:
        """The valid points as server launches, in plan order (``launches_of``)."""
        return launches_of([p for p in self.points if not p.errors])

    def to_json(self) -> dict[str, Any]:
        """The plan as one JSON object, secrets redacted (``PlannedPoint.to_json``)."""
        secrets = sorted({s for p in self.points for s in p.secrets})
        out = {
            "experiment": self.experiment.name,
            "points": [p.to_json() for p in self.points],
            "launches": len(launches_of(self.points)),
            "warnings": [redact.redact_text(w, secrets) for w in self.warnings],
        }
        if self.experiment.policy.confirm:
            out["confirm"] = {"after_grid": True, "probes": [p.to_json() for p in self.confirm_probes]}
        return out

    def require_valid(self, skip_invalid: bool = False) -> None:
        """Raise PlanError listing every invalid point, unless they are to be recorded as invalid."""
        bad = self.invalid
        if bad and skip_invalid and len(bad) == len(self.points):  # nothing would be left to run
            raise PlanError(
                f"all {plural(len(self.points), 'point')} would fail in SGLang; --skip-invalid leaves "
                "nothing to run, and nothing was launched:\n"
                + "\n".join(f"  {p.label} [{p.id}]: {e}" for p in bad for e in p.errors),
                fix="fix the experiment file: --skip-invalid runs the valid points, and there are none",
            )
        if bad and not skip_invalid:
            lines = [f"  {p.label} [{p.id}]: {e}" for p in bad for e in p.errors]
            raise PlanError(
                f"{len(bad)} of {plural(len(self.points), 'point')} would fail in SGLang; nothing was launched:\n"
                + "\n".join(lines),
                fix="fix the experiment file, or pass --skip-invalid to record these points as invalid and run the rest",
            )
        if self.confirm_errors and not skip_invalid:
            raise PlanError(
                "policy.confirm: the policy's server would fail in SGLang; nothing was launched:\n"
                + "\n".join(self.confirm_errors),
                fix="set server.sglang_version to a release with --speculative-adaptive (0.5.23), or "
                "turn the confirmation off (policy.confirm=false: the report still writes the policy); "
                "--skip-invalid records the confirmation points as invalid and runs the grid",
            )


@dataclass(frozen=True)
class Launch:
    """One server launch: its server (what its first point runs: launcher, flags, env; ``id``, the
    launch id) and the points it serves in turn, in plan order. Its points differ in their benchmark
    alone (client-side axes); a point without a launch id is a launch of its own."""

    id: str
    points: list[PlannedPoint]

    @property
    def first(self) -> PlannedPoint:
        """The point the launch starts with: its server's flags, env and launcher are the launch's."""
        return self.points[0]

    @property
    def launcher(self) -> list[str]:
        return self.first.launcher

    @property
    def flags(self) -> ServerFlags:
        return self.first.flags

    @property
    def env(self) -> dict[str, str]:
        return self.first.env


def launches_of(points: list[PlannedPoint]) -> list[Launch]:
    """``points`` as server launches: grouped by launch id, in their order (the one constructor of
    ``Launch``)."""
    by_id: dict[str, list[PlannedPoint]] = {}
    for p in points:
        by_id.setdefault(p.launch_id or p.id, []).append(p)
    return [Launch(i, ps) for i, ps in by_id.items()]


def _digest(identity: dict[str, Any]) -> str:
    blob = json.dumps(identity, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _server_identity(exp: Experiment, flags: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    return {
        "launcher": list(exp.server.launcher),
        "flags": {k: flags[k] for k in sorted(flags) if k not in PLACEMENT_FLAGS},
        "env": {k: env[k] for k in sorted(env)},
    }


def launch_id(exp: Experiment, flags: dict[str, Any], env: dict[str, str]) -> str:
    """12 hex digits of SHA-256 over what the server runs (launcher, flags but host and port, env)."""
    return _digest(_server_identity(exp, flags, env))


def point_id(
    exp: Experiment, flags: dict[str, Any], env: dict[str, str], bench_settings: BenchSettings | None = None
) -> str:
    """12 hex digits of SHA-256 over what changes a point's result, in canonical JSON: what the server
    runs and the benchmark settings that are part of a point's identity, as each field of them is marked
    (``sweep.core.identity``; ``bench_settings``, else the experiment's)."""
    bench = identity(bench_settings if bench_settings is not None else exp.benchmark)
    return _digest({**_server_identity(exp, flags, env), "benchmark": bench})


def _server_flags(exp: Experiment) -> dict[str, Any]:
    base = dict(exp.server.flags)  # names normalised by config.load
    clash = sorted(set(base) & RESERVED_FLAGS)
    if clash:
        raise ConfigError(
            f"server.flags sets --{clash[0]}, which comes from the server section",
            fix="use server.model_path, server.tp_size, server.host and server.port instead",
        )
    flags = {
        "model-path": exp.server.model_path,
        "tp-size": exp.server.tp_size,
        "host": exp.server.host,
        "port": exp.server.port,
    }
    flags.update(base)
    return flags


def _comparable(p: PlannedPoint) -> dict[str, Any]:
    """What must be equal for a baseline to be a fair comparison: flags without speculation, env, and
    the client-side axes' values (the same workload)."""
    flags = {k: v for k, v in p.flags.items() if not k.startswith(SPECULATIVE_PREFIX) and k not in PLACEMENT_FLAGS}
    return {
        **{f"--{k}": v for k, v in flags.items()},
        **{f"env {k}": v for k, v in p.env.items()},
        **({"benchmark": p.bench_key} if p.bench_key else {}),
    }


def _diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    def shown(d: dict[str, Any], k: str) -> Any:  # a secret's value never goes into a warning
        return "<unset>" if k not in d else (redact.REDACTED if redact.is_secret_name(k.split()[-1]) else d[k])

    return [f"{k}: {shown(a, k)} vs {shown(b, k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _match_baselines(points: list[PlannedPoint]) -> list[str]:
    baselines = [p for p in points if p.baseline]
    spec = [p for p in points if not p.baseline]
    if spec and not baselines:
        return [
            "no baseline in the grid: speedups cannot be computed "
            "(add a drafter value with no speculative flags, e.g. none: {})"
        ]
    keyed = [(b, _comparable(b)) for b in baselines]
    for p in spec:
        mine = _comparable(p)
        diffs = sorted(((len(_diff(mine, k)), b.id, b, _diff(mine, k)) for b, k in keyed), key=lambda t: t[:2])
        n, _, best, d = diffs[0]
        p.baseline_id = best.id
        if n:
            p.warnings.append(
                str(
                    rules.Check(
                        rules.WARNING,
                        "baseline-differs",
                        f"no baseline runs with the same settings; compared with {best.label} [{best.id}], which differs in "
                        + "; ".join(d),
                        "add a baseline with the same env (NCCL settings) and flags, e.g. cross the baseline with the same env axis",
                    )
                )
            )
    return []


def target_of(
    exp: Experiment, points_flags: list[Mapping[str, Any]], files_here: bool = False
) -> tuple[rules.Target, list[str]]:
    """What the rules are checked against: the SGLang version (``server.sglang_version``, else the
    newest known), the target's architecture (its config.json here, else ``server.architecture``,
    else unknown) and the GPU (``server.gpu``; cpu with ``device: cpu``); and the plan's warnings.
    ``files_here``: the hosts are this machine (a dry run, ``--local``): a file a flag names is read
    here as the server will read it, and one missing is an error of the plan."""
    warnings: list[str] = []
    configs: dict[str, dict[str, Any]] = {}
    every = [ServerFlags(f) for f in points_flags]
    paths = {str(exp.server.model_path)} | {f.draft_model_path for f in every if f.draft_model_path}
    for path in sorted(paths):
        config = serverargs.read_config(path)
        if config is not None:
            configs[path] = config
    arch = serverargs.config_architecture(configs.get(str(exp.server.model_path)))
    if arch and exp.server.architecture and arch != exp.server.architecture:
        warnings.append(
            f"architecture-mismatch: {exp.server.model_path}/config.json says {arch}, server.architecture "
            f"says {exp.server.architecture}; the rules use {arch} (fix: drop or correct server.architecture)"
        )
    arch = arch or exp.server.architecture
    spec = any(f.is_speculative for f in every)
    if not arch and spec:
        warnings.append(
            f"architecture-unknown: no config.json in {exp.server.model_path} here and no "
            "server.architecture: rules that depend on the target (automatic steps/topk, the drafter "
            "SGLang defaults to, the attention backend) are checked for every likely architecture, "
            "and on the host (fix: set server.architecture, e.g. DeepseekV3ForCausalLM)"
        )
    gpu = exp.server.gpu
    if ServerFlags(exp.server.flags).is_cpu:
        gpu = "cpu"
    elif gpu and serverargs.gpu_info(gpu) is None:
        warnings.append(
            f"gpu-unknown: server.gpu {gpu!r} is not a GPU these rules know (one of "
            f"{', '.join(g.name for g in serverargs.GPUS.values())}, or hopper, blackwell, ampere); "
            "treated as unknown"
        )
        gpu = None
    version = exp.server.sglang_version
    if version and serverargs.rules_version(version)[1]:
        warnings.append(f"sglang-version: {serverargs.rules_version(version)[1]}")
    elif not version:
        warnings.append(
            f"sglang-version: server.sglang_version is unset: flags and rules are checked against SGLang "
            f"{serverargs.NEWEST}, the newest the rules know (fix: set server.sglang_version to the SGLang "
            "your hosts run; their pre-flight checks that one again)"
        )
    return rules.Target(
        version=version, architecture=arch, gpu=gpu, configs=configs, version_given=bool(version), files_here=files_here
    ), warnings


def _sources(exp: Experiment, axes: list[Axis], gp: GridPoint) -> dict[str, str]:
    """Where the experiment sets each of a point's flags, for the fixes of its findings: the server
    section, the axis value that sets it, or grid.derived (the later wins, as in the point's flags)."""
    out = {k: f"server.flags.{k}" for k in exp.server.flags}
    out.update({"model-path": "server.model_path", "tp-size": "server.tp_size"})
    for a in axes:
        for v in a.values:
            if gp.params.get(a.name) == v.name:
                out.update({f: f"grid.axes.{a.name} (value {v.name})" for f in v.flags})
    out.update({k: f"grid.derived.{k}" for k in gp.derived})
    return out


# the flags of a point's static chain, replaced by the policy's launch flags in a confirmation point
_STEP_FLAGS = speculation.STEP_FLAGS  # a static chain's flags, which a policy's launch flags replace


def _confirmation_point(
    exp: Experiment,
    member: PlannedPoint,
    step_axis: str,
    launch_flags: dict[str, Any],
    target: rules.Target | None = None,
    value: str = ADAPTIVE,
) -> PlannedPoint:
    """The point that runs a policy's own server: a member of its step group (``member``: any point of
    the group, its bench and workload the policy's) with the step axis set to ``adaptive`` and its
    static chain's flags (``_STEP_FLAGS``) replaced by the policy's ``launch_flags``
    (``--speculative-adaptive``, the config as a mapping, steps and draft tokens for the largest
    candidate, topk 1). Same baseline, same benchmark (levels, workload); checked by SGLang's rules
    against ``target`` (default: the experiment's). Pure."""
    flags = {k: v for k, v in member.flags.items() if k not in _STEP_FLAGS}
    flags.update(launch_flags)
    params = {a: (value if a == step_axis else v) for a, v in member.params.items()}
    if step_axis not in params:
        params[step_axis] = value
    label = ",".join(f"{k}={v}" for k, v in params.items())
    roles = {a: member.roles.get(a, "steps") for a in params}
    pp = PlannedPoint(
        id=point_id(exp, flags, member.env, member.bench),
        label=label,
        params=params,
        roles=roles,
        baseline=False,
        flags=ServerFlags(flags),
        env=dict(member.env),
        launcher=list(member.launcher),
        bench=member.bench,
        launch_id=launch_id(exp, flags, member.env),
        bench_key=member.bench_key,
        baseline_id=member.baseline_id,
    )
    if target is None:
        target, _ = target_of(exp, [flags])
    sources = {k: "the policy's launch flags (sweep.analysis.policy)" for k in launch_flags}
    ev = rules.evaluate(flags, member.bench, target, member.env, sources)
    for f in ev.findings:
        (pp.errors if f.level == rules.ERROR else pp.warnings).append(str(f))
    if ev.outcome is not None:
        pp.resolved = ev.outcome.summary()
    return pp


class _ConfirmablePolicy(Protocol):
    """What the confirmation reads of a policy (``sweep.analysis.policy.Policy``, which the plan may
    not import): its group's label, step axis and member points, and the flags its server launches with."""

    @property
    def group(self) -> str: ...
    @property
    def step_axis(self) -> str: ...
    @property
    def member_ids(self) -> tuple[str, ...]: ...
    def launch_flags(self) -> dict[str, Any]: ...


class _ChosenPolicy(Protocol):
    """A policy chosen to confirm, and why (``sweep.analysis.confirmation.Chosen``)."""

    @property
    def policy(self) -> _ConfirmablePolicy: ...
    @property
    def why(self) -> tuple[str, ...]: ...


@dataclass
class ConfirmPlan:
    """The confirmation phase's points (valid or not: an invalid one is recorded as such), the chosen
    policy each runs (point id -> ``sweep.analysis.confirmation.Chosen``: the policy and why), and notes
    on what is not confirmed, and why."""

    points: list[PlannedPoint] = field(default_factory=list)
    chosen: dict[str, _ChosenPolicy] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def confirmation_points(
    plan: Plan, chosen: Sequence[_ChosenPolicy], labels: dict[str, str] | None = None
) -> ConfirmPlan:
    """The confirmation point of each chosen policy (``chosen``: items with ``.policy``, whose
    ``member_ids``, ``step_axis``, ``group`` and ``launch_flags()`` are read), built on a member of its
    group found in ``plan`` by id, else by label (``labels``: the recorded label of each id, for a plan
    rebuilt from a results directory); one point per distinct launch. Pure."""
    exp = plan.experiment
    by_id = {p.id: p for p in plan.points}
    by_label = {p.label: p for p in plan.points}
    target, _ = target_of(exp, [p.flags for p in plan.points])
    out = ConfirmPlan()
    for c in chosen:
        pol = c.policy
        found = [by_id.get(i) or by_label.get((labels or {}).get(i, "")) for i in pol.member_ids]
        members = [m for m in found if m is not None]
        if not members:
            out.notes.append(f"{pol.group}: none of its points is in the experiment's plan any more: not confirmed")
            continue
        value = pol.step_value() if hasattr(pol, "step_value") else ADAPTIVE  # a revision: adaptive-r2
        pp = _confirmation_point(exp, members[0], pol.step_axis, pol.launch_flags(), target, value)
        if pp.id not in out.chosen:
            out.points.append(pp)
            out.chosen[pp.id] = c
    return out


def _steps(p: PlannedPoint) -> int | None:
    return p.flags.steps


def _step_groups(points: list[PlannedPoint]) -> list[tuple[str, list[PlannedPoint]]]:
    """The plan's groups of speculative chains (topk 1) that differ only in their step count, as
    (step axis, members): ``speculation.step_axis_of`` and ``step_group_key``, the analysis's rule.
    Groups of one step count are left out: there is no policy to derive there."""
    chains = [p for p in points if not p.baseline and _steps(p) is not None and (p.flags.topk or 1) == 1]
    found: dict[tuple, tuple[str, list[PlannedPoint]]] = {}
    for p in chains:
        axis = speculation.step_axis_of(p, chains, roles=lambda q: q.roles, params=lambda q: q.params, steps=_steps)
        if axis is None:
            continue
        found.setdefault(speculation.step_group_key(p.params, axis), (axis, []))[1].append(p)
    return [(axis, members) for axis, members in found.values() if len({_steps(m) for m in members}) > 1]


def confirm_probes(
    exp: Experiment, points: list[PlannedPoint], target: rules.Target | None = None
) -> list[PlannedPoint]:
    """What ``--plan`` checks of ``policy.confirm`` before the grid has measured anything: per step
    group, the launch its policy could ask for at most (every step count of the group a candidate in
    one tier, steps and draft tokens for the largest): SGLang's rules on the adaptive flags (the
    release that has them, topk 1, the conditions under which SGLang disables it)."""
    out = []
    for axis, members in _step_groups(points):
        top = max(members, key=lambda m: _steps(m) or 0)
        steps = sorted({s for m in members if (s := _steps(m)) is not None})
        k = steps[-1]
        flags = {
            speculation.ADAPTIVE_FLAG: True,
            speculation.CONFIG_FLAG: {"1": {"candidate_steps": steps}},
            "speculative-num-steps": k,
            "speculative-num-draft-tokens": k + 1,
            "speculative-eagle-topk": 1,
        }
        out.append(_confirmation_point(exp, top, axis, flags, target))
    return out


def build(exp: Experiment, bench_scale: BenchScale | None = None, *, files_here: bool = False) -> Plan:
    """Expand the grid and validate every point; never raises for a point's errors (see require_valid).
    ``bench_scale``: a dry run's scale of the client-side axes' benchmark settings (grid.expand);
    ``files_here``: the hosts are this machine (``target_of``)."""
    axes = build_axes(exp)
    roles = {a.name: a.role for a in axes}
    base_flags = _server_flags(exp)
    grid = list(expand(exp, bench_scale))
    target, target_warnings = target_of(exp, [{**base_flags, **gp.flags} for gp in grid], files_here)
    points: list[PlannedPoint] = []
    for gp in grid:
        flags = {**base_flags, **gp.flags}
        env = {**{str(k): str(v) for k, v in exp.server.env.items()}, **gp.env}
        bench = gp.bench if gp.bench is not None else exp.benchmark
        pp = PlannedPoint(
            id=point_id(exp, flags, env, bench),
            label=gp.label,
            params=gp.params,
            roles={k: roles[k] for k in gp.params},
            baseline=gp.baseline,
            flags=ServerFlags(flags),
            env=env,
            launcher=list(exp.server.launcher),
            bench=bench,
            launch_id=launch_id(exp, flags, env),
            bench_key=gp.bench_key,
        )
        ev = rules.evaluate(flags, bench, target, env, _sources(exp, axes, gp))
        for f in ev.findings:
            (pp.errors if f.level == rules.ERROR else pp.warnings).append(str(f))
        if ev.outcome is not None:
            pp.resolved = ev.outcome.summary()
        points.append(pp)
    ids: dict[str, str] = {}
    for p in points:
        if p.id in ids:
            raise PlanError(
                f"points {ids[p.id]} and {p.label} launch the same server (id {p.id})",
                fix="two axis values set the same flags; remove one or exclude the duplicate",
            )
        ids[p.id] = p.label
    plan_warnings = target_warnings + _match_baselines(points)
    # Baselines first, so that speedups can be read as soon as the first speculative point ends.
    points.sort(key=lambda p: not p.baseline)
    probes = confirm_probes(exp, points, target) if exp.policy.confirm else []
    if exp.policy.confirm and not probes:
        plan_warnings.append(
            "policy-nothing-to-confirm: policy.confirm is on, but no group of points differs only in "
            "its step count, so no policy will be derived (fix: add a steps axis, or turn "
            "policy.confirm off)"
        )
    return Plan(exp, points, plan_warnings, probes)
