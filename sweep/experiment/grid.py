"""Grid expansion: the experiment's axes become grid points. Pure: nothing is launched here.

An axis is either a scalar axis (one SGLang flag, a list of values) or a bundle axis (named values,
each setting several flags and env vars: a drafter, an NCCL profile). Axes combine as a Cartesian
product, except axes zipped together, which vary in step; exclude rules drop combinations. A point
without ``--speculative-algorithm`` is a baseline: the axes that mean nothing without speculation
(steps, topk, draft tokens) collapse for it instead of multiplying it.

An axis may also set benchmark settings: a scalar axis with ``key: benchmark.X`` instead of ``flag:``,
or bundles with ``benchmark: {...}`` (merged over the experiment's benchmark section). An axis whose
values set only benchmark settings is client-side: it changes what the client sends, not the server,
so the points it makes share one server launch (``GridPoint.bench_key`` names their values).
"""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, cast

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sweep.core import BenchSettings, ConfigError, ServerFlags, speculation, workload_spec
from sweep.experiment.config import AxisConfig, Experiment, NotANumber, normalized_flags
from sweep.sglang import SPECULATIVE_PREFIX

ROLES = ("drafter", "steps", "topk", "draft_tokens", "env", "benchmark", "other")
_ROLE_OF_FLAG = {
    "speculative-num-steps": "steps",
    "speculative-eagle-topk": "topk",
    "speculative-num-draft-tokens": "draft_tokens",
}
_SPEC_ONLY_ROLES = ("steps", "topk", "draft_tokens")
_BUNDLE_KEYS = ("flags", "env", "benchmark")
_BENCH_PREFIX = "benchmark."
# a confirmation point's value of its step axis (the policy's own server, policy.confirm): reserved, since
# the analysis reads an axis valued so as a confirmation ('adaptive', a revision's 'adaptive-r2': the
# speculation model's is_confirm_value), so no axis of the grid may hold such a value
ADAPTIVE = speculation.CONFIRM_VALUE


# a dry run's scale of an axis value's benchmark settings: (the settings, where they are) -> scaled
BenchScale = Callable[[Mapping[str, Any], str], dict[str, Any]]


@dataclass(frozen=True)
class _AxisValue:
    name: str  # how the value appears in labels and results ("k26_100k", "2", "tuned")
    flags: Mapping[str, Any]
    env: Mapping[str, str]
    raw: Any  # the scalar for scalar axes, the name for bundles; what derived values see
    bench: Mapping[str, Any] = field(default_factory=dict)  # benchmark settings it sets (nested, under benchmark)


@dataclass(frozen=True)
class Axis:
    name: str
    role: str
    values: tuple[_AxisValue, ...]

    @property
    def client_side(self) -> bool:
        """True when the axis sets only benchmark settings: its values share one server launch."""
        return all(not v.flags and not v.env for v in self.values) and any(v.bench for v in self.values)

    @property
    def speculative_only(self) -> bool:
        """True when the axis means nothing without speculation, so baselines drop it."""
        if self.role in _SPEC_ONLY_ROLES:
            return True
        if self.role == "drafter":
            return False
        names = {f for v in self.values for f in v.flags}
        return (
            bool(names) and all(f.startswith(SPECULATIVE_PREFIX) for f in names) and not any(v.env for v in self.values)
        )


@dataclass
class GridPoint:
    params: dict[str, str]  # axis -> value name, in axis order; collapsed axes left out
    flags: dict[str, Any]  # from the axes and derived values (base flags not included)
    env: dict[str, str]  # from the axes (base env not included)
    baseline: bool
    label: str = ""
    derived: dict[str, Any] = field(default_factory=dict)
    bench: BenchSettings | None = None  # the benchmark with the axes' settings merged in; None: the experiment's
    bench_key: str = ""  # the client-side axes' values ("workload=chat,max_tokens=256"); "" without any


def _bad(msg: str, fix: str) -> ConfigError:
    return ConfigError(msg, fix=fix)


def _bundle(axis: str, name: str, spec: Any) -> _AxisValue:
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise _bad(
            f"grid.axes.{axis}.values.{name} must be a bundle {{flags: {{...}}, env: {{...}}}}, got {spec!r}",
            f"write e.g. {name}: {{flags: {{speculative-algorithm: EAGLE3}}}}",
        )
    unknown = [k for k in spec if k not in _BUNDLE_KEYS]
    if unknown:
        raise _bad(
            f"grid.axes.{axis}.values.{name}: unknown key {unknown[0]!r}",
            "a bundle holds only 'flags', 'env' and 'benchmark'",
        )
    flags = normalized_flags(dict(spec.get("flags") or {}), f"grid.axes.{axis}.values.{name}.flags")
    env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    bench = spec.get("benchmark") or {}
    if not isinstance(bench, Mapping):
        raise _bad(
            f"grid.axes.{axis}.values.{name}.benchmark must be a map of benchmark settings, got {bench!r}",
            "write e.g. benchmark: {api: chat, concurrency: {max_tokens: 256}}",
        )
    return _AxisValue(str(name), flags, env, str(name), dict(bench))


def _nested(dotted: str, value: Any) -> dict[str, Any]:
    """``concurrency.max_tokens``, 256 -> {"concurrency": {"max_tokens": 256}}."""
    out: Any = value
    for part in reversed(dotted.split(".")):
        out = {part: out}
    return cast("dict[str, Any]", out)


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in tree.items():
        if isinstance(v, Mapping) and v and k != "workload":
            out += _leaves(v, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}")
    return out


def merged_bench(base: BenchSettings, overrides: list[Mapping[str, Any]], where: str) -> BenchSettings:
    """``base`` with each override merged over it in turn (OmegaConf, so types are checked), and the
    result checked like the experiment's own benchmark section; errors name ``where.KEY``. A workload
    that names its ``kind`` replaces the experiment's workload instead of merging into it."""
    cfg: Any = OmegaConf.structured(base)
    for ov in overrides:
        ov = dict(ov)
        if ov.get("workload") is not None:  # the compact form ("sharegpt:FILE") or compact lengths
            try:
                ov["workload"] = workload_spec.normalize(ov["workload"], f"{where}.workload")
            except ConfigError as e:
                raise _bad(
                    e.message if e.message.startswith(where) else f"{where}.{e.message}",
                    e.fix or "see benchmark.workload in docs/experiment-file.md (Workloads)",
                ) from None
            if isinstance(ov["workload"], Mapping) and "kind" in ov["workload"]:
                cfg.workload = None
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.create(ov))
        except OmegaConfBaseException as e:
            key = getattr(e, "full_key", None) or (_leaves(ov) or ["?"])[0]
            first = str(getattr(e, "msg", e)).splitlines()[0]
            raise _bad(
                f"{where}.{key}: {first}",
                "use the keys and types of the benchmark section (see docs/reference/experiment-file.md)",
            ) from None
    try:
        bench = cast(BenchSettings, OmegaConf.to_object(cfg))
    except (OmegaConfBaseException, ConfigError) as e:
        msg = getattr(e, "message", None) or str(getattr(e, "msg", e)).splitlines()[0]
        raise _bad(f"{where}: {msg}", getattr(e, "fix", None) or "fix the axis value's benchmark settings") from None
    for key, value, use in bench.problems():
        raise _bad(f"{where}.{key} = {value!r} is out of range", f"use {use}")
    return bench


def _infer_role(values: tuple[_AxisValue, ...], flag: str | None) -> str:
    if flag is not None:
        return _ROLE_OF_FLAG.get(flag, "other")
    names = {f for v in values for f in v.flags}
    if names & {"speculative-algorithm", "speculative-draft-model-path"}:
        return "drafter"
    if not names and any(v.env for v in values):
        return "env"
    return "other"


def _build_axis(name: str, cfg: AxisConfig) -> Axis:
    """Validate one axis of the experiment file and turn it into values."""
    where = f"grid.axes.{name}"
    if cfg.values is None:
        raise _bad(f"{where} has no values", "give values: a list (with flag:) or a map of named bundles")
    values_cfg = OmegaConf.to_container(cfg.values) if OmegaConf.is_config(cfg.values) else cfg.values
    if cfg.flag is not None and cfg.key is not None:
        raise _bad(f"{where} has both flag: and key:", "an axis sweeps one server flag or one benchmark setting")
    bench_key = None
    if cfg.key is not None:
        if not cfg.key.startswith(_BENCH_PREFIX) or len(cfg.key) == len(_BENCH_PREFIX):
            raise _bad(
                f"{where}: key {cfg.key!r} is not a benchmark setting",
                "key: names a setting under benchmark, e.g. key: benchmark.concurrency.max_tokens "
                "(use flag: for a server flag)",
            )
        bench_key = cfg.key[len(_BENCH_PREFIX) :]
    if cfg.flag is not None or bench_key is not None:
        flag = cfg.flag  # normalised by config.load
        if isinstance(values_cfg, str | int | float):
            raise _bad(
                f"{where}: values: {values_cfg!r} is one value, not a list",
                f"write the list in brackets: values: [{values_cfg}]"
                if isinstance(values_cfg, str) and "," in values_cfg
                else f"write a list, even of one value: values: [{values_cfg}]",
            )
        if not isinstance(values_cfg, list):
            raise _bad(
                f"{where}: with {'flag: ' + str(cfg.flag) if flag else 'key: ' + str(cfg.key)}, values "
                "must be a list of scalars",
                "drop it to use named bundles instead",
            )
        vals = []
        for v in values_cfg:
            if isinstance(v, dict) or (isinstance(v, list) and bench_key is None):
                raise _bad(f"{where}: value {v!r} is not a scalar", "scalar axes take numbers, strings or booleans")
            shown = "unset" if v is None else ("-".join(map(str, v)) if isinstance(v, list) else str(v))
            if bench_key is not None:  # a list is one value here: concurrency.levels: [[1, 8], [64]]
                vals.append(_AxisValue(shown, {}, {}, v, _nested(bench_key, v) if v is not None else {}))
            else:
                vals.append(_AxisValue(shown, {flag: v} if v is not None and flag else {}, {}, v))
        values = tuple(vals)
    else:
        if not isinstance(values_cfg, Mapping):
            raise _bad(
                f"{where}: without flag: or key:, values must be a map of named bundles",
                "add flag: <sglang-flag> (or key: benchmark.<setting>) to sweep a single one over a list",
            )
        values = tuple(_bundle(name, str(k), v) for k, v in values_cfg.items())
        flag = None
    if not values:
        raise _bad(f"{where} has an empty list of values", "give at least one value, or remove the axis")
    for v in values:  # a label is axis=value,axis=value: these two characters would make it ambiguous
        if "," in v.name or "=" in v.name:
            clean = v.name.replace(",", "_").replace("=", "_")
            scalar = cfg.flag is not None or bench_key is not None
            raise _bad(
                f"{where}: value {v.name!r} holds {'a comma' if ',' in v.name else 'an equals sign'}, which "
                "makes point labels (axis=value,axis=value) ambiguous",
                f"use a value without ',' and '=', e.g. {clean!r}"
                if not scalar
                else "a flag's value cannot hold ',' or '=' here; several values are a list in brackets, "
                "e.g. values: [1, 2]",
            )
    reserved = [v.name for v in values if speculation.is_confirm_value(v.name)]
    if reserved:
        raise _bad(
            f"{where}: value {reserved[0]!r} is reserved: it marks a policy's confirmation point "
            f"(steps={ADAPTIVE}: the policy's own --speculative-adaptive server, run after the grid)",
            "to measure adaptive speculation, turn on policy.confirm (policy: {confirm: true}; or python -m "
            "sweep confirm DIR after the grid); for a bundle of your own adaptive flags, name the value "
            "otherwise, e.g. adaptive_fixed",
        )
    dupes = sorted({v.name for v in values if [w.name for w in values].count(v.name) > 1})
    if dupes:
        raise _bad(f"{where}: value {dupes[0]!r} appears twice", "each value of an axis must be distinct")
    client = all(not v.flags and not v.env for v in values) and any(v.bench for v in values)
    role = cfg.role or ("benchmark" if client else _infer_role(values, flag))
    if role not in ROLES:
        raise _bad(f"{where}: role {role!r} is not one of {', '.join(ROLES)}", "leave role out to infer it")
    return Axis(name, role, values)


def build_axes(exp: Experiment) -> list[Axis]:
    if not exp.grid.axes:
        raise _bad(
            f"{exp.source or 'experiment'}: grid.axes is empty: nothing to sweep",
            "add at least one axis, e.g. a drafter axis with a 'none' baseline bundle",
        )
    bad = [n for n in exp.grid.axes if not n.isidentifier()]
    if bad:
        raise _bad(f"grid axis name {bad[0]!r} is not an identifier", "use letters, digits and _ (it becomes a column)")
    return [_build_axis(n, a) for n, a in exp.grid.axes.items()]


def _groups(axes: list[Axis], zips: list[list[str]]) -> list[list[Axis]]:
    by_name = {a.name: a for a in axes}
    seen: dict[str, int] = {}
    for i, group in enumerate(zips):
        for n in group:
            if n not in by_name:
                raise _bad(f"grid.zip names axis {n!r}, which is not in grid.axes", f"axes are: {', '.join(by_name)}")
            if n in seen:
                raise _bad(f"grid.zip puts axis {n!r} in two groups", "an axis can be zipped with others only once")
            seen[n] = i
        lengths = {len(by_name[n].values) for n in group}
        if len(lengths) > 1:
            raise _bad(
                f"grid.zip group {group} has axes of different lengths "
                f"({', '.join(f'{n}={len(by_name[n].values)}' for n in group)})",
                "zipped axes vary together, so give them the same number of values",
            )
    groups: list[list[Axis]] = []
    placed: set[int] = set()
    for a in axes:
        if a.name in seen:
            gi = seen[a.name]
            if gi not in placed:
                placed.add(gi)
                groups.append([by_name[n] for n in zips[gi]])
        else:
            groups.append([a])
    return groups


def _matches(rule: Mapping[str, Any], params: Mapping[str, str]) -> bool:
    return all(k in params and fnmatch.fnmatchcase(params[k], str(v)) for k, v in rule.items())


def _not_a_number(e: BaseException) -> NotANumber | None:
    """The resolver's NotANumber behind OmegaConf's error (it chains it as the context), if any."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, NotANumber):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _derive(derived: Mapping[str, Any], context: Mapping[str, Any], label: str) -> dict[str, Any]:
    """``grid.derived`` resolved over one point's axis values, key by key, so an error names its key."""
    out: dict[str, Any] = {}
    for key, expr in derived.items():
        try:
            cfg = OmegaConf.create({**context, "__derived__": {key: expr}})
            out.update(cast("dict[str, Any]", OmegaConf.to_container(cfg["__derived__"], resolve=True)))
        except OmegaConfBaseException as e:
            cause = _not_a_number(e)
            if cause is not None:
                axes = [n for n, v in context.items() if v == cause.value and "${" + n + "}" in str(expr)]
                raise _bad(
                    f"grid.derived.{key} = {expr!r} for point {label}: {cause}"
                    + (f" (the value of axis {axes[0]!r})" if axes else ""),
                    f"give axis {axes[0]!r} numeric values (e.g. values: [1, 2, 3]), or leave it out of "
                    f"grid.derived.{key}"
                    if axes
                    else 'give add/mul/max/min numbers or axes with numeric values, e.g. "${add:${steps},1}"',
                ) from None
            first = str(getattr(e, "msg", e)).splitlines()[0]
            raise _bad(
                f"grid.derived.{key} for point {label}: {first}",
                f"derived values may use the axes ({', '.join(k for k in context)}) and add/mul/max/min, "
                'e.g. "${add:${steps},1}"',
            ) from None
    return out  # keys normalised by config.load


def expand(exp: Experiment, bench_scale: BenchScale | None = None) -> list[GridPoint]:
    """All grid points, baselines collapsed and exclusions applied, in file order. ``bench_scale``
    (a dry run's): what puts each axis value's benchmark settings at the experiment's scale."""
    axes = build_axes(exp)
    if bench_scale is not None:
        axes = [
            replace(
                a,
                values=tuple(
                    replace(v, bench=bench_scale(v.bench, f"grid.axes.{a.name}.values.{v.name}.benchmark"))
                    if v.bench
                    else v
                    for v in a.values
                ),
            )
            for a in axes
        ]
    names = {a.name for a in axes}
    for rule in exp.grid.exclude:
        unknown = [k for k in rule if k not in names]
        if unknown:
            raise _bad(
                f"grid.exclude rule {dict(rule)} names axis {unknown[0]!r}, which is not in grid.axes",
                f"axes are: {', '.join(a.name for a in axes)}",
            )
    base_speculative = ServerFlags(exp.server.flags).is_speculative
    for a in axes:  # each value's benchmark settings checked alone, so an error names the value
        for v in a.values:
            if v.bench:
                merged_bench(exp.benchmark, [v.bench], f"grid.axes.{a.name}.values.{v.name}.benchmark")
    groups = _groups(axes, exp.grid.zip)
    order = [a.name for a in axes]
    points: list[GridPoint] = []
    seen: set[tuple] = set()
    for combo in itertools.product(*[range(len(g[0].values)) for g in groups]):
        chosen: dict[str, tuple[Axis, _AxisValue]] = {}
        for g, i in zip(groups, combo):
            for a in g:
                chosen[a.name] = (a, a.values[i])
        flags: dict[str, Any] = {}
        for n in order:
            flags.update(chosen[n][1].flags)
        baseline = not (ServerFlags(flags).is_speculative or base_speculative)
        kept = [n for n in order if not (baseline and chosen[n][0].speculative_only)]
        params = {n: chosen[n][1].name for n in kept}
        key = tuple(params.items())
        if key in seen or any(_matches(r, params) for r in exp.grid.exclude):
            continue
        seen.add(key)
        label = ",".join(f"{k}={v}" for k, v in params.items())
        flags = {}
        env: dict[str, str] = {}
        for n in kept:
            flags.update(chosen[n][1].flags)
            env.update(chosen[n][1].env)
        derived_cfg = {k: v for k, v in exp.grid.derived.items() if not (baseline and k.startswith(SPECULATIVE_PREFIX))}
        context = {n: chosen[n][1].raw for n in kept}
        context["tp_size"] = exp.server.tp_size
        derived = _derive(derived_cfg, context, label)
        flags.update(derived)
        overrides = [chosen[n][1].bench for n in kept if chosen[n][1].bench]
        bench = merged_bench(exp.benchmark, overrides, f"grid point {label}: benchmark") if overrides else None
        bench_key = ",".join(f"{n}={params[n]}" for n in kept if chosen[n][0].client_side)
        points.append(GridPoint(params, flags, env, baseline, label, derived, bench, bench_key))
    if not points:
        raise _bad(
            f"{exp.source or 'experiment'}: the grid is empty after exclusions",
            "loosen grid.exclude: every combination was excluded",
        )
    return points
