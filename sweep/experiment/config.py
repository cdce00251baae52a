"""The experiment file: a typed schema, loaded and merged with command-line overrides by omegaconf.

``load(path, overrides)`` returns an ``Experiment`` (a plain dataclass tree). Every mistake (unknown
or misspelt key, wrong type, bad YAML, missing file, bad interpolation) becomes a ``ConfigError`` that
names the key, the file (with the line where we can find it) and the closest valid key.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, cast

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sweep.core import (
    AUTO_LEVELS,
    REDACTED,
    BenchSettings,
    ConfigError,
    DecideSettings,
    ServerFlags,
    normalize_flag,
    redact,
    workload_spec,
)


@dataclass
class ClusterConfig:
    host_resource: str = "gpu_host"  # the custom Ray resource every host advertises (1 per host)
    gpus_per_host: int = 8  # 0 for CPU hosts (a server with device: cpu in server.flags)
    max_host_failures: int = 2  # retries of a point whose host died under it (not of crashes)
    retry_failed_points: int = 0  # retries of a point that failed on its own (crash, timeout)


@dataclass
class Timeouts:
    """Seconds. A phase that passes its limit, or a log that stops growing for ``stall_s``, is a hang."""

    preflight_s: float = 60.0  # accepted, but no limit is applied to pre-flight today (nothing reads it)
    load_s: float = 1800.0  # launch to weights loaded (target and drafter)
    capture_s: float = 1200.0  # weights loaded to all CUDA graphs captured
    ready_s: float = 600.0  # graphs captured to ready (HTTP up, warmup generate answered)
    total_s: float = 3600.0  # launch to ready
    stall_s: float = 600.0  # no log output at all (a progress bar's \r update counts) this long while starting, once it said its first line
    stop_grace_s: float = 30.0  # SIGTERM to SIGKILL
    benchmark_s: float = 7200.0  # accepted, but no limit is applied to the benchmark today (nothing reads it)


@dataclass
class ReapConfig:
    kill_foreign_gpu_processes: bool = False  # GPU processes that are not ours: report, or kill
    gpu_mem_free_mib: int = 2048  # memory per GPU under which a GPU counts as free
    wait_s: float = 60.0  # how long to wait for GPU memory and the port to come back


@dataclass
class CpuConfig:
    """CPU hosts (``device: cpu`` in server.flags): what pre-flight checks instead of GPUs."""

    min_free_mem_gib: float = 2.0  # memory that must be free before launch
    required_flags: list[str] = field(default_factory=list)  # CPU flags beyond what the backend needs
    check_kernels: bool = True  # import SGLang's CPU kernels first (kernels built for another CPU: SIGILL)


@dataclass
class ServerConfig:
    # "python" means the interpreter of the Ray worker on the host (the venv it was started from)
    launcher: list[str] = field(default_factory=lambda: ["python", "-m", "sglang.launch_server"])
    model_path: str = "???"  # the target model, as the hosts see it (--model-path); required
    tp_size: int = 8  # tensor parallelism (--tp-size); above cluster.gpus_per_host the server spans hosts
    host: str = "127.0.0.1"  # the address the server listens on (--host)
    port: int = 30000  # a real host's server port (--port); simulated hosts take a free port at launch
    flags: dict[str, Any] = field(default_factory=dict)  # base SGLang flags, without the leading --
    env: dict[str, str] = field(default_factory=dict)  # base env of the server process
    # what the plan checks SGLang's rules against (the host's pre-flight knows the real ones):
    sglang_version: Optional[str] = None  # e.g. "0.5.10"; None: the newest version the rules know
    architecture: Optional[str] = None  # the target's HF architecture, when model_path has no config.json here
    gpu: Optional[str] = None  # the hosts' GPU (H200, B200, A100, hopper...); None: unknown
    timeouts: Timeouts = field(default_factory=Timeouts)
    reap: ReapConfig = field(default_factory=ReapConfig)
    cpu: CpuConfig = field(default_factory=CpuConfig)


@dataclass
class AxisConfig:
    """One grid axis.

    Either ``flag`` + a list of scalar ``values`` (``null`` leaves the flag out), or ``key`` (a
    benchmark setting, ``benchmark.concurrency.max_tokens``) + a list of scalar ``values`` (``null``
    keeps the experiment's), or ``values`` as a map of named bundles ``{name: {flags: {...}, env:
    {...}, benchmark: {...}}}`` (a drafter, an NCCL profile, a workload). An axis whose values set
    only benchmark settings is client-side: its values run one after another on one server launch.
    ``role`` is inferred when not given: drafter, steps, topk, draft_tokens, env, benchmark, other.
    """

    flag: Optional[str] = None  # the SGLang flag a scalar axis sets, without the leading --
    key: Optional[str] = None  # or the benchmark setting it sets, e.g. benchmark.concurrency.max_tokens
    values: Any = None  # a list of scalars, or a map of named bundles {name: {flags, env, benchmark}}
    role: Optional[str] = None  # drafter, steps, topk, draft_tokens, env, benchmark, other; inferred if not given


@dataclass
class _GridConfig:
    axes: dict[str, AxisConfig] = field(default_factory=dict)
    zip: list[list[str]] = field(default_factory=list)  # axes that vary together, not as a product
    exclude: list[dict[str, Any]] = field(default_factory=list)  # {axis: value name or glob}
    # flags computed per point with interpolation over the axis values, e.g.
    # speculative-num-draft-tokens: "${add:${steps},1}"; speculative-* ones are left out of baselines
    derived: dict[str, Any] = field(default_factory=dict)


@dataclass
class DryRunConfig:
    """How ``--dry-run`` fits the real plan on a laptop: every point, phase and level is kept; only
    token counts, requests and the fake's speed are scaled, and the scale is recorded."""

    hosts: int = 3  # simulated GPU hosts (Ray nodes of a local cluster)
    fake_speed: float = 5.0  # the fake server's serving speed (1 = the real system's)
    fake_startup_speed: float = 300.0  # startup phases run this much faster than real
    max_tokens_scale: float = 0.125  # every max_tokens (and a workload's output lengths) times this
    min_max_tokens: int = 32  # but never below this
    rounds: int = 1  # requests per level = rounds * concurrency
    # each level measured this many times, back to back (as benchmark.repeats, at least): the
    # report measures the level-wide noise from their spread and decides on the pooled figures. The
    # reference experiments ask for 3 (enough for their report to decide what the fake's model
    # separates); 1 by default, since each repeat lengthens every level of a dry run
    repeats: int = 1
    single_stream_runs: int = 3  # benchmark.single_stream.runs at most this
    single_stream_warmup: int = 1  # benchmark.single_stream.warmup at most this
    # SGLang's --stream-interval for the fake: a chunk every N decode steps keeps three simulated
    # hosts at C=250 within two cores; token counts stay exact (the server counts them)
    stream_interval: int = 8
    fake_args: list[str] = field(default_factory=list)  # extra --fake-* flags for every point


@dataclass
class _LocalConfig:
    """How ``--local`` runs the real plan on this machine: a local Ray cluster whose hosts share this
    machine, each point launching the experiment's own launcher (real SGLang), nothing scaled."""

    hosts: int = 1  # servers that run at once on this machine
    # run once on this machine before the sweep, e.g. to create the models it needs; "python" is the
    # sweep's interpreter, and the sweep package is importable (PYTHONPATH) under any interpreter
    setup: list[str] = field(default_factory=list)


_SEARCH_STRATEGIES = ("grid", "adaptive")


@dataclass
class _SearchConfig:
    """``search``: which points of the plan the sweep runs. ``grid`` runs every one; ``adaptive``
    (sweep/search/adaptive.py) runs the baselines, probes each group of points that differ only in
    the speculative steps, predicts the rest from what the probes measured (accept length per draft
    position, cost per step), and records as ``pruned`` the points that cannot win at any level."""

    strategy: str = "grid"  # grid (every point) or adaptive
    # what a prediction may be off by beyond the noise the anchor measured (relative): a point is
    # pruned only when even its prediction raised by this (and by the noise) loses everywhere
    tolerance: float = 0.05

    def __post_init__(self) -> None:
        if self.strategy not in _SEARCH_STRATEGIES:
            raise ConfigError(
                f"search.strategy = {self.strategy!r} is not a strategy",
                fix="one of " + ", ".join(_SEARCH_STRATEGIES) + " (grid runs every point)",
            )
        if not 0 <= self.tolerance < 1:
            raise ConfigError(
                f"search.tolerance = {self.tolerance!r} is out of range", fix="a relative margin in [0, 1), e.g. 0.05"
            )


_POLICY_CANDIDATES = ("one", "within_noise")  # sweep.analysis.policy.CANDIDATE_MODES (tests keep them equal)


@dataclass
class _PolicyConfig:
    """``policy``: the speculative policy across load (``sweep.analysis.policy``: per group of points
    that differ only in their step count, SGLang's adaptive config). With ``confirm``, after the grid
    the sweep derives the policies and runs each one's own server (``--speculative-adaptive``) for the
    pick of each SLO (no SLO: the best group's) over the group's levels and workloads, as ordinary
    points of the sweep labelled ``<step axis>=adaptive`` (sweep/orchestrate/confirm.py);
    ``python -m sweep confirm DIR`` does that second part on an existing results directory.
    ``candidates``: what each tier of the policy's config holds: ``one`` step count (the level's
    choice, the default) or ``within_noise`` (every step count within noise of the best: SGLang's own
    rule then picks among them by acceptance, not by speed). ``revise``: where a confirmation is short
    of the best static setup (or of the envelope) beyond noise, the policy is revised and confirmed
    again, up to this many more rounds (0: never)."""

    confirm: bool = False  # after the grid, run each chosen policy's own server as more points
    candidates: str = "one"  # one step count per tier, or within_noise (SGLang picks by acceptance)
    revise: int = 2  # revision rounds after a confirmation that fell short

    def __post_init__(self) -> None:
        if self.candidates not in _POLICY_CANDIDATES:
            raise ConfigError(
                f"policy.candidates = {self.candidates!r} is not a mode",
                fix="one of " + ", ".join(_POLICY_CANDIDATES) + " (one: one step count per tier, chosen by speed; "
                "within_noise: every step count within noise of the best, for SGLang's acceptance rule to pick among)",
            )
        if not 0 <= self.revise <= 10:
            raise ConfigError(
                f"policy.revise = {self.revise!r} is out of range", fix="a number of rounds from 0 (never) to 10"
            )


@dataclass
class Experiment:
    name: str = "???"  # names the results directory (results/<name>); required
    description: str = ""  # free text for the reader; the sweep does not read it
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    grid: _GridConfig = field(default_factory=_GridConfig)
    search: _SearchConfig = field(default_factory=_SearchConfig)
    policy: _PolicyConfig = field(default_factory=_PolicyConfig)
    decide: DecideSettings = field(default_factory=DecideSettings)  # re-measure picks within noise
    benchmark: BenchSettings = field(default_factory=BenchSettings)
    dry_run: DryRunConfig = field(default_factory=DryRunConfig)
    local: _LocalConfig = field(default_factory=_LocalConfig)
    results_dir: Optional[str] = None  # default: results/<name> (-dryrun, -local or -fake by mode)
    source: str = ""  # the file it was loaded from (set by load)


class NotANumber(ValueError):
    """An argument of a derived value's resolver (``${add:${steps},1}``) that is not a number."""

    def __init__(self, resolver: str, value: Any):
        self.value = value
        super().__init__(f"{resolver} takes numbers, got {value!r}")


def _numbers(resolver: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    for a in args:
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            raise NotANumber(resolver, a)
    return args


def _register_resolvers() -> None:
    """Resolvers for derived values: ``${add:${steps},1}``, ``${mul:...}``, ``${max:...}``, ``${min:...}``;
    an argument that is not a number raises ``NotANumber`` naming it."""
    for name, fn in {
        "add": lambda *a: sum(_numbers("add", a)),
        "mul": lambda a, b: _numbers("mul", (a, b))[0] * b,
        "max": lambda *a: max(_numbers("max", a)),
        "min": lambda *a: min(_numbers("min", a)),
    }.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_resolver(name, fn, annotation_validation="off")


_register_resolvers()


def _line_of(path: Path, dotted_key: str | None) -> int | None:
    """Best-effort line number of the last component of ``dotted_key`` in the YAML file."""
    if not dotted_key:
        return None
    leaf = str(dotted_key).split(".")[-1]
    try:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(rf"\s*-?\s*['\"]?{re.escape(leaf)}['\"]?\s*:", line):
                return i
    except OSError:
        return None
    return None


def _schema_keys(object_type: Any) -> list[str]:
    fields = getattr(object_type, "__dataclass_fields__", None)
    return sorted(fields) if fields else []


def _config_error(e: OmegaConfBaseException, path: Path, origin: str) -> ConfigError:
    key = getattr(e, "full_key", None) or getattr(e, "key", None)
    first = str(getattr(e, "msg", e)).splitlines()[0]
    first = re.sub(r"\s*Did you mean: .*$", "", first)
    where = f"{path}" if origin == "file" else f"command-line override ({origin})"
    line = _line_of(path, key) if origin == "file" else None
    if line:
        where += f", line {line}"
    fix = None
    valid = _schema_keys(getattr(e, "object_type", None))
    leaf = str(getattr(e, "key", "") or "")
    overridden, _, given = origin.partition("=")  # an override's key and value (origin: "file" or the override)
    if "is not a ListConfig" in first:
        first = "takes a list, not one value"
    if "not in" in first and re.fullmatch(r"-?[\d.]+", leaf):
        fix = (
            f"{leaf!r} is a number where a key belongs: a list written without brackets inside "
            "{...} reads as more keys; write it in brackets, e.g. values: [1, 2, 4]"
        )
    elif "not in" in first and valid:
        close = difflib.get_close_matches(leaf, valid, n=1, cutoff=0.5)
        fix = (f"did you mean {close[0]!r}? " if close else "") + f"valid keys here: {', '.join(valid)}"
    elif "takes a list" in first and origin != "file" and "," in given:
        fix = f"write a list in brackets, quoted for the shell: '{overridden}=[{given.strip('[]')}]'"
    elif "takes a list" in first:
        fix = f"give {key!r} a list in brackets, e.g. [1, 2, 4]"
    elif "converted" in first or "Value" in first:
        fix = f"give {key!r} a value of the type the schema expects (see sweep/experiment/config.py)"
    return ConfigError(f"{where}: key {key!r}: {first}", fix=fix)


def _without_run_time_keys(concurrency: dict[str, Any], path: Path) -> dict[str, Any]:
    """``benchmark.concurrency`` without ``baseline_curve``: a results directory's experiment.yaml
    written before the baseline's curve left the settings for the sweep's run context
    (``sweep.core.run_context``) has it, always empty; a curve given by hand is refused."""
    if "baseline_curve" not in concurrency:
        return concurrency
    if concurrency["baseline_curve"]:
        raise ConfigError(
            f"{path}: benchmark.concurrency.baseline_curve is set by the sweep at run time, not by hand",
            fix="remove it: with concurrency.refine on, each point is given its matched baseline's curve",
        )
    return {k: v for k, v in concurrency.items() if k != "baseline_curve"}


def load(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Experiment:
    """Load an experiment file, apply ``key=value`` overrides, resolve interpolations, check types."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"experiment file {str(path)!r} not found",
            fix="pass the path of a YAML file, e.g. experiments/k26_eagle.yaml",
        )
    text = path.read_text()
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}, line {mark.line + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(
            f"{where}: not valid YAML: {problem}", fix="check the indentation and quoting around that line"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{path}: the file must be a YAML mapping (name:, server:, grid:, ...)",
            fix="see experiments/k26_eagle.yaml for the layout",
        )
    bench = raw.get("benchmark")
    if isinstance(bench, dict) and bench.get("workload") is not None:  # the compact form, or compact lengths
        try:
            raw["benchmark"] = {**bench, "workload": workload_spec.normalize(bench["workload"])}
        except ConfigError as e:
            line = _line_of(path, "benchmark.workload")
            raise ConfigError(f"{path}, line {line or '?'}: benchmark.{e.message}", fix=e.fix) from None
    if isinstance(bench, dict) and isinstance(bench.get("concurrency"), dict):
        concurrency = _without_run_time_keys(bench["concurrency"], path)
        raw["benchmark"] = {**raw["benchmark"], "concurrency": auto_levels(concurrency)}
    for key, value in raw.items():  # a section given one value: OmegaConf's error names no key
        _check_section(str(key), value, lambda k: f"{path}, line {_line_of(path, k) or '?'}")
    base = OmegaConf.structured(Experiment)
    try:
        cfg = OmegaConf.merge(base, OmegaConf.create(raw))
    except OmegaConfBaseException as e:
        raise _config_error(e, path, "file") from None
    for ov in overrides:
        if "=" not in ov:
            raise ConfigError(
                f"override {ov!r} is not key=value", fix="write overrides as dotted keys, e.g. benchmark.seed=3"
            )
        try:
            cfg = _merge_override(cfg, ov)
        except ConfigError as e:
            raise ConfigError(f"command-line override ({ov}): {e.message}", fix=e.fix) from None
        except OmegaConfBaseException as e:
            raise _config_error(e, path, ov) from None
        except yaml.YAMLError as e:
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ConfigError(
                f"command-line override ({ov}): the value is not valid YAML: {problem}",
                fix="close every bracket and quote the override for the shell, "
                "e.g. 'benchmark.concurrency.levels=[1,4,16]'",
            ) from None
    # grid.derived is interpolated per point over the axis values (sweep.experiment.grid), not here
    derived = OmegaConf.to_container(cfg.grid.derived, resolve=False)
    cfg.grid.derived = {}
    try:
        OmegaConf.resolve(cfg)
        missing = sorted(OmegaConf.missing_keys(cfg))
    except OmegaConfBaseException as e:
        key = str(getattr(e, "full_key", None) or "")
        given = _where(path, key, tuple(overrides)) if key else ""
        raise _config_error(
            e,
            path,
            given[len("command-line override (") : -1] if given.startswith("command-line override (") else "file",
        ) from None
    if missing:
        raise ConfigError(
            f"{path}: required {'key' if len(missing) == 1 else 'keys'} {', '.join(missing)} not set",
            fix="set them in the file or as overrides, e.g. " + f"{missing[0]}=...",
        )
    cfg.source = str(path)
    # OmegaConf's stubs say any container: a structured config converts to its dataclass, a DictConfig to a dict
    try:
        exp = cast(Experiment, OmegaConf.to_object(cfg))
    except ConfigError as e:  # a section's own check (search, benchmark.slo): where its value came from
        key = e.message.split(" ", 1)[0].rstrip(":")
        raise ConfigError(f"{_where(path, key, tuple(overrides))}: {e.message}", fix=e.fix) from None
    exp.grid.derived = cast("dict[str, Any]", derived)
    _normalize_flags(exp, path)
    _check_values(exp, path, tuple(overrides))
    return exp


def _where(path: Path, key: str, overrides: tuple[str, ...] = ()) -> str:
    """Where a value came from: the last override that set ``key`` (or a key above or below it), as
    given on the command line, else the file and the line of the key (of the key above it, for a
    key the file wrote compactly)."""
    for ov in reversed(overrides):
        given = ov.partition("=")[0].strip()
        if given == key or key.startswith(given + ".") or given.startswith(key + "."):
            return f"command-line override ({ov})"
    parts = key.split(".")
    line = next((n for k in range(len(parts), 0, -1) if (n := _line_of(path, ".".join(parts[:k])))), None)
    return f"{path}, line {line}" if line else str(path)


def auto_levels(concurrency: dict) -> dict:
    """``benchmark.concurrency`` with ``levels: auto`` spelled out: the coarse start ``AUTO_LEVELS``
    (the benchmark caps it at the server's max_running_requests), ``auto`` and ``refine`` on (unless
    the file turns refine off). Any other ``levels`` comes back as it is."""
    levels = concurrency.get("levels")
    if not (isinstance(levels, str) and levels.strip().lower() == "auto"):
        return concurrency
    return {**concurrency, "levels": list(AUTO_LEVELS), "auto": True, "refine": concurrency.get("refine", True)}


def _merge_override(cfg: Any, ov: str) -> Any:
    """One ``key=value`` merged into ``cfg``; ``benchmark.workload=sharegpt:FILE`` (the compact form)
    replaces the whole workload, ``benchmark.workload.input_len=uniform(1,9)`` a compact length."""
    key, _, value = ov.partition("=")
    key = key.strip()
    if "." not in key and value.strip() and not value.strip().startswith("{"):
        _check_section(key, value, lambda k: "")
    if key == "benchmark.workload" and value.strip() not in ("", "null", "None") and not value.strip().startswith("{"):
        cfg.benchmark.workload = None
        return OmegaConf.merge(cfg, OmegaConf.create({"benchmark": {"workload": workload_spec.parse(value)}}))
    if key == "benchmark.concurrency.levels" and value.strip().lower() == "auto":
        return OmegaConf.merge(cfg, OmegaConf.create({"benchmark": {"concurrency": auto_levels({"levels": "auto"})}}))
    leaf = key.rpartition(".")[2]
    if (
        key.startswith("benchmark.workload.")
        and leaf in workload_spec.LENGTH_KEYS
        and not value.strip().startswith("{")
    ):
        tree = workload_spec.parse_length(value.strip(), key)
        return OmegaConf.merge(cfg, OmegaConf.create({"benchmark": {"workload": {leaf: tree}}}))
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist([ov]))


_SECTION_EXAMPLES = {"policy": "policy: {confirm: true}", "search": "search: {strategy: adaptive}"}


def _check_section(key: str, value: Any, where) -> None:
    """A top-level section (``policy``, ``search``, ``server``...) given one value instead of a mapping:
    a ConfigError naming the key (``where(key)``: the file and line; "" for an override)."""
    fields = getattr(Experiment, "__dataclass_fields__", {})
    f = fields.get(key)
    if f is None or value is None or isinstance(value, dict):
        return
    if not hasattr(f.default_factory, "__dataclass_fields__"):  # a scalar key (name, results_dir...)
        return
    valid = ", ".join(sorted(f.default_factory.__dataclass_fields__))
    example = _SECTION_EXAMPLES.get(key, f"{key}: {{...}}")
    at = where(key)
    raise ConfigError(
        f"{at + ': ' if at else ''}{key} is a section, not one value (got {value!r})",
        fix=f"write it as a mapping, e.g. {example} (its keys: {valid})",
    )


def normalized_flags(flags: dict[str, Any], where: str) -> dict[str, Any]:
    """``flags`` with every name as SGLang's ``--help`` writes it; one flag given twice (``tp_size``
    and ``tp-size``) is an error, not a silent choice."""
    out: dict[str, Any] = {}
    for name, value in flags.items():
        key = normalize_flag(name)
        if key in out:
            raise ConfigError(f"{where} sets --{key} twice (spelled differently)", fix="keep one of them")
        out[key] = value
    return out


def _normalize_flags(exp: Experiment, path: Path) -> None:
    """Flag names normalised once, here, for every layer above (the axes' bundles: sweep.experiment.grid)."""
    exp.server.flags = normalized_flags(exp.server.flags, f"{path}: server.flags")
    exp.grid.derived = normalized_flags(exp.grid.derived, f"{path}: grid.derived")
    for axis in exp.grid.axes.values():
        if axis.flag is not None:
            axis.flag = normalize_flag(axis.flag)


def _check_values(exp: Experiment, path: Path, overrides: tuple[str, ...] = ()) -> None:
    """Checks the types cannot express: positive sizes, non-empty lists, a sane name."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", exp.name):
        raise ConfigError(
            f"{_where(path, 'name', overrides)}: name {exp.name!r} must be letters, digits, '_', '-' or '.'",
            fix="it names the results directory; e.g. name: k26_eagle",
        )
    checks = [
        ("server.tp_size", exp.server.tp_size >= 1),
        ("server.port", 1 <= exp.server.port <= 65535),
        ("cluster.gpus_per_host", exp.cluster.gpus_per_host >= (0 if is_cpu(exp) else 1)),
        ("dry_run.hosts", exp.dry_run.hosts >= 1),
        ("dry_run.fake_speed", exp.dry_run.fake_speed > 0),
        ("local.hosts", exp.local.hosts >= 1),
    ]
    for key, ok in checks:
        if not ok:
            raise ConfigError(
                f"{_where(path, key, overrides)}: {key} is out of range",
                fix="sizes, counts and levels must be positive; ports 1-65535",
            )
    for key, value, use in exp.benchmark.problems():
        raise ConfigError(
            f"{_where(path, 'benchmark.' + key, overrides)}: benchmark.{key} = {value!r} is out of range",
            fix=f"use {use}",
        )
    if exp.search.strategy == "adaptive" and (exp.benchmark.rates or exp.benchmark.open_loop.replay):
        # sweep/search/measured.py keys a point's figures by concurrency, the single stream's by 0: an
        # open-loop level (concurrency 0) would be read as the single stream
        raise ConfigError(
            f"{_where(path, 'benchmark.rates', overrides)}: benchmark.rates (open-loop "
            "levels) with search.strategy: adaptive, which learns from concurrency levels only",
            fix="run the rates with search.strategy: grid, or leave benchmark.rates out of the adaptive sweep",
        )
    device = ServerFlags(exp.server.flags).device
    if device != "cpu" and device.lower().partition(":")[0] == "cpu":  # SGLang runs its CPU paths for "cpu" alone
        raise ConfigError(
            f"{_where(path, 'server.flags.device', overrides)}: server.flags.device {device!r} is not SGLang's "
            "CPU device: it compares --device with 'cpu' exactly",
            fix="write device: cpu",
        )
    if not exp.server.launcher:
        raise ConfigError(
            f"{_where(path, 'server.launcher', overrides)}: server.launcher is empty",
            fix="leave it out for python -m sglang.launch_server",
        )


def _device_of(exp: Experiment) -> str:
    """Where the server computes: SGLang's own ``--device`` flag (``ServerFlags.device``)."""
    return ServerFlags(exp.server.flags).device


def is_cpu(exp: Experiment) -> bool:
    return ServerFlags(exp.server.flags).is_cpu


def to_yaml(exp: Experiment) -> str:
    """The resolved experiment as YAML (written beside the results), secrets redacted: the value of a
    secret-named key (``server.env.HF_TOKEN``, ``server.flags.api-key``, in a grid bundle too; see
    sweep/core/redact.py) becomes ``<redacted>``, or stays the interpolation the experiment file wrote
    there (``${oc.env:HF_TOKEN}``, a reference with no secret in it); a secret value anywhere else
    (a launcher, ``local.setup``) is hidden too."""

    tree = OmegaConf.to_container(OmegaConf.structured(exp), resolve=False)
    tree = redact.redact_tree(tree)
    _keep_references(tree, _source_tree(exp.source))
    return OmegaConf.to_yaml(OmegaConf.create(tree))


def _source_tree(source: str) -> Any:
    """The experiment file as written (interpolations unresolved), or None."""
    try:
        return yaml.safe_load(Path(source).read_text()) if source else None
    except (OSError, yaml.YAMLError):
        return None


def _keep_references(tree: Any, raw: Any) -> None:
    """Where a value was redacted and the file had an interpolation there, put the interpolation back."""

    if isinstance(tree, dict) and isinstance(raw, dict):
        for k, v in tree.items():
            r = raw.get(k)
            if v == REDACTED and isinstance(r, str) and "${" in r:
                tree[k] = r
            else:
                _keep_references(v, r)
    elif isinstance(tree, list) and isinstance(raw, list):
        for v, r in zip(tree, raw):
            _keep_references(v, r)
