"""Grid expansion: the experiment's axes become grid points. Pure: nothing is launched here.

An axis is either a scalar axis (one SGLang flag, a list of values) or a bundle axis (named values,
each setting several flags and env vars: a drafter, an NCCL profile). Axes combine as a Cartesian
product, except axes zipped together, which vary in step; exclude rules drop combinations. A point
without ``--speculative-algorithm`` is a baseline: the axes that mean nothing without speculation
(steps, topk, draft tokens) collapse for it instead of multiplying it.
"""

from __future__ import annotations

import fnmatch
import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping, cast

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sweep.experiment.config import AxisConfig, Experiment, normalized_flags
from sweep.core.errors import ConfigError
from sweep.sglang.args import SPECULATIVE_PREFIX

ROLES = ("drafter", "steps", "topk", "draft_tokens", "env", "other")
_ROLE_OF_FLAG = {
    "speculative-num-steps": "steps",
    "speculative-eagle-topk": "topk",
    "speculative-num-draft-tokens": "draft_tokens",
}
_SPEC_ONLY_ROLES = ("steps", "topk", "draft_tokens")
_BUNDLE_KEYS = ("flags", "env")


@dataclass(frozen=True)
class AxisValue:
    name: str  # how the value appears in labels and results ("k26_100k", "2", "tuned")
    flags: Mapping[str, Any]
    env: Mapping[str, str]
    raw: Any  # the scalar for scalar axes, the name for bundles; what derived values see


@dataclass(frozen=True)
class Axis:
    name: str
    role: str
    values: tuple[AxisValue, ...]

    @property
    def speculative_only(self) -> bool:
        """True when the axis means nothing without speculation, so baselines drop it."""
        if self.role in _SPEC_ONLY_ROLES:
            return True
        if self.role == "drafter":
            return False
        names = {f for v in self.values for f in v.flags}
        return bool(names) and all(f.startswith(SPECULATIVE_PREFIX) for f in names) and not any(v.env for v in self.values)


@dataclass
class GridPoint:
    params: dict[str, str]  # axis -> value name, in axis order; collapsed axes left out
    flags: dict[str, Any]  # from the axes and derived values (base flags not included)
    env: dict[str, str]  # from the axes (base env not included)
    baseline: bool
    label: str = ""
    derived: dict[str, Any] = field(default_factory=dict)


def _bad(msg: str, fix: str) -> ConfigError:
    return ConfigError(msg, fix=fix)


def _bundle(axis: str, name: str, spec: Any) -> AxisValue:
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise _bad(f"grid.axes.{axis}.values.{name} must be a bundle {{flags: {{...}}, env: {{...}}}}, got {spec!r}",
                   f"write e.g. {name}: {{flags: {{speculative-algorithm: EAGLE3}}}}")
    unknown = [k for k in spec if k not in _BUNDLE_KEYS]
    if unknown:
        raise _bad(f"grid.axes.{axis}.values.{name}: unknown key {unknown[0]!r}",
                   "a bundle holds only 'flags' and 'env'")
    flags = normalized_flags(dict(spec.get("flags") or {}), f"grid.axes.{axis}.values.{name}.flags")
    env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    return AxisValue(str(name), flags, env, str(name))


def _infer_role(values: tuple[AxisValue, ...], flag: str | None) -> str:
    if flag is not None:
        return _ROLE_OF_FLAG.get(flag, "other")
    names = {f for v in values for f in v.flags}
    if names & {"speculative-algorithm", "speculative-draft-model-path"}:
        return "drafter"
    if not names and any(v.env for v in values):
        return "env"
    return "other"


def build_axis(name: str, cfg: AxisConfig) -> Axis:
    """Validate one axis of the experiment file and turn it into values."""
    where = f"grid.axes.{name}"
    if cfg.values is None:
        raise _bad(f"{where} has no values", "give values: a list (with flag:) or a map of named bundles")
    values_cfg = OmegaConf.to_container(cfg.values) if OmegaConf.is_config(cfg.values) else cfg.values
    if cfg.flag is not None:
        flag = cfg.flag  # normalised by config.load
        if isinstance(values_cfg, str | int | float):
            raise _bad(f"{where}: values: {values_cfg!r} is one value, not a list",
                       f"write the list in brackets: values: [{values_cfg}]" if isinstance(values_cfg, str)
                       and "," in values_cfg else f"write a list, even of one value: values: [{values_cfg}]")
        if not isinstance(values_cfg, list):
            raise _bad(f"{where}: with flag: {cfg.flag}, values must be a list of scalars",
                       "drop 'flag' to use named bundles instead")
        vals = []
        for v in values_cfg:
            if isinstance(v, (dict, list)):
                raise _bad(f"{where}: value {v!r} is not a scalar", "scalar axes take numbers, strings or booleans")
            vals.append(AxisValue("unset" if v is None else str(v), {flag: v} if v is not None else {}, {}, v))
        values = tuple(vals)
    else:
        if not isinstance(values_cfg, Mapping):
            raise _bad(f"{where}: without flag:, values must be a map of named bundles",
                       "add flag: <sglang-flag> to sweep a single flag over a list")
        values = tuple(_bundle(name, str(k), v) for k, v in values_cfg.items())
        flag = None
    if not values:
        raise _bad(f"{where} has an empty list of values", "give at least one value, or remove the axis")
    dupes = sorted({v.name for v in values if [w.name for w in values].count(v.name) > 1})
    if dupes:
        raise _bad(f"{where}: value {dupes[0]!r} appears twice", "each value of an axis must be distinct")
    role = cfg.role or _infer_role(values, flag)
    if role not in ROLES:
        raise _bad(f"{where}: role {role!r} is not one of {', '.join(ROLES)}", "leave role out to infer it")
    return Axis(name, role, values)


def build_axes(exp: Experiment) -> list[Axis]:
    if not exp.grid.axes:
        raise _bad(f"{exp.source or 'experiment'}: grid.axes is empty: nothing to sweep",
                   "add at least one axis, e.g. a drafter axis with a 'none' baseline bundle")
    bad = [n for n in exp.grid.axes if not n.isidentifier()]
    if bad:
        raise _bad(f"grid axis name {bad[0]!r} is not an identifier", "use letters, digits and _ (it becomes a column)")
    return [build_axis(n, a) for n, a in exp.grid.axes.items()]


def _groups(axes: list[Axis], zips: list[list[str]]) -> list[list[Axis]]:
    by_name = {a.name: a for a in axes}
    seen: dict[str, int] = {}
    for i, group in enumerate(zips):
        for n in group:
            if n not in by_name:
                raise _bad(f"grid.zip names axis {n!r}, which is not in grid.axes",
                           f"axes are: {', '.join(by_name)}")
            if n in seen:
                raise _bad(f"grid.zip puts axis {n!r} in two groups", "an axis can be zipped with others only once")
            seen[n] = i
        lengths = {len(by_name[n].values) for n in group}
        if len(lengths) > 1:
            raise _bad(f"grid.zip group {group} has axes of different lengths "
                       f"({', '.join(f'{n}={len(by_name[n].values)}' for n in group)})",
                       "zipped axes vary together, so give them the same number of values")
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


def _derive(derived: Mapping[str, Any], context: Mapping[str, Any], label: str) -> dict[str, Any]:
    if not derived:
        return {}
    try:
        cfg = OmegaConf.create({**context, "__derived__": dict(derived)})
        out = OmegaConf.to_container(cfg["__derived__"], resolve=True)
    except OmegaConfBaseException as e:
        first = str(getattr(e, "msg", e)).splitlines()[0]
        raise _bad(f"grid.derived for point {label}: {first}",
                   f"derived values may use the axes ({', '.join(k for k in context)}) and add/mul/max/min, "
                   "e.g. \"${add:${steps},1}\"") from None
    return cast("dict[str, Any]", out)  # a DictConfig converts to a new dict; keys normalised by config.load


def expand(exp: Experiment) -> list[GridPoint]:
    """All grid points, baselines collapsed and exclusions applied, in file order."""
    axes = build_axes(exp)
    names = {a.name for a in axes}
    for rule in exp.grid.exclude:
        unknown = [k for k in rule if k not in names]
        if unknown:
            raise _bad(f"grid.exclude rule {dict(rule)} names axis {unknown[0]!r}, which is not in grid.axes",
                       f"axes are: {', '.join(a.name for a in axes)}")
    base_flags = exp.server.flags
    groups = _groups(axes, exp.grid.zip)
    order = [a.name for a in axes]
    points: list[GridPoint] = []
    seen: set[tuple] = set()
    for combo in itertools.product(*[range(len(g[0].values)) for g in groups]):
        chosen: dict[str, tuple[Axis, AxisValue]] = {}
        for g, i in zip(groups, combo):
            for a in g:
                chosen[a.name] = (a, a.values[i])
        flags: dict[str, Any] = {}
        for n in order:
            flags.update(chosen[n][1].flags)
        baseline = not (flags.get("speculative-algorithm") or base_flags.get("speculative-algorithm"))
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
        derived_cfg = {k: v for k, v in exp.grid.derived.items()
                       if not (baseline and k.startswith(SPECULATIVE_PREFIX))}
        context = {n: chosen[n][1].raw for n in kept}
        context["tp_size"] = exp.server.tp_size
        derived = _derive(derived_cfg, context, label)
        flags.update(derived)
        points.append(GridPoint(params, flags, env, baseline, label, derived))
    if not points:
        raise _bad(f"{exp.source or 'experiment'}: the grid is empty after exclusions",
                   "loosen grid.exclude: every combination was excluded")
    return points
