"""SGLang's speculative-decoding rules, checked on a point's flags before anything is launched.

SGLang checks these in ``ServerArgs`` at startup, minutes into a launch, or not at all (a silent
override). Here each rule is a pure function of one point's flags, what is known of its server
(:class:`Target`: the SGLang version, the target's architecture, the GPU) and the benchmark
settings, returning findings: an **error** for what would crash the server, a **warning** for what
SGLang would silently change or what would spoil the measurement. Each finding names the rule and
the fix; the plan adds the point. What SGLang itself does is modelled once, in
``sweep.sglang.serverargs`` (shared with the fake server and checked against real SGLang by
``tests/real/test_rules_differential.py``); this module turns its outcome into findings. Rules that
need several points (baseline env) live in ``sweep.experiment.plan``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Final, Mapping, Optional

from sweep.core import BenchSettings, Check, ServerFlags
from sweep.sglang import adaptive as ad
from sweep.sglang import flagtypes
from sweep.sglang import serverargs as sa
from sweep.sglang.args import KNOWN_FLAGS, SPEC_ALGORITHMS, arg_values, argparse_name, closest_flag, version_flags

ERROR: Final = "error"
WARNING: Final = "warning"

# Running requests SGLang allows when speculating and --max-running-requests is not given.
SPEC_DEFAULT_MAX_RUNNING = sa.SPEC_RUNNING_CAP
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")


@dataclass(frozen=True)
class Target:
    """What the plan knows of the server a point launches, besides its flags.

    ``version``: the SGLang version checked against (None: the newest the rules know, an assumption
    the host's pre-flight replaces with the real one). ``architecture``: the target's HF architecture
    (config.json, else the experiment's ``server.architecture``; None: unknown). ``gpu``: the hosts'
    GPU (``server.gpu``, or cpu for ``device: cpu``; None: unknown). ``configs``: the config.json of
    each model path the plan could read (target and drafters), by path.
    """

    version: Optional[str] = None
    architecture: Optional[str] = None
    gpu: Optional[str] = None
    configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False, compare=False)
    version_given: bool = False  # from the experiment or the host, not assumed
    files_here: bool = False  # the files flags name are read here as the server reads them (the host; a local run)

    @property
    def checked_version(self) -> str:
        return self.version or sa.NEWEST

    def context(self, flags: Mapping[str, Any], env: Optional[Mapping[str, str]] = None) -> sa.Context:
        typed = ServerFlags(flags)
        draft = typed.draft_model_path
        return sa.Context(
            version=self.checked_version,
            architecture=self.architecture,
            gpu=self.gpu,
            target_config=self.configs.get(str(typed.model_path)),
            draft_config=self.configs.get(draft) if draft else None,
            env={str(k): str(v) for k, v in (env or {}).items()},
            files_here=self.files_here,
        )


@dataclass
class Evaluation:
    findings: list[Check]
    outcome: Optional[sa.RuleOutcome]  # SGLang's verdict and final values; None without speculation
    flags: dict[str, Any]  # the flags as argparse reads them (unique prefixes expanded)


Flags = Mapping[str, Any]
Rule = Callable[[Flags, BenchSettings], list[Check]]


def _int(flags: Flags, name: str) -> int | None:
    v = flags.get(name)
    if v is None or v is False:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _algo(flags: Flags) -> str | None:
    v = flags.get("speculative-algorithm")
    return str(v) if v else None


# --- flag names: what argparse makes of them ---


def _read_names(flags: Flags, target: Target) -> tuple[dict[str, Any], list[Check]]:
    """The flags under the names argparse gives them (SGLang's parser takes a unique prefix of a
    flag), and the findings about names: typos, ambiguous prefixes, flags the version lacks."""
    version = target.checked_version
    mine = version_flags(version)  # unset: the newest the rules know, as docs/plan.md says
    every = set(KNOWN_FLAGS).union(*(version_flags(v) or () for v in sa.KNOWN_VERSIONS))
    known = mine if mine is not None else every
    out: dict[str, Any] = {}
    findings: list[Check] = []
    for name, value in flags.items():
        full, matches = argparse_name(name, known)
        if full == name:
            out[name] = value
            continue
        if full is not None:
            out[full] = value
            findings.append(
                Check(
                    WARNING,
                    "flag-abbreviation",
                    f"--{name} is not a flag; SGLang's argparse reads it as --{full} (a unique prefix)",
                    f"write --{full}",
                )
            )
            continue
        if len(matches) > 1:
            elsewhere = [v for v in sa.KNOWN_VERSIONS if name in (version_flags(v) or ())]
            old = f" (a flag of SGLang {', '.join(elsewhere)}, not of {version})" if elsewhere else ""
            findings.append(
                Check(
                    ERROR,
                    "ambiguous-flag",
                    f"--{name}{old} is ambiguous to SGLang's argparse: it could be "
                    + ", ".join("--" + m for m in matches[:4])
                    + (" ..." if len(matches) > 4 else ""),
                    f"did you mean --{closest_flag(name, matches) or matches[0]}? write the whole "
                    "flag name"
                    + (
                        f", or set server.sglang_version: {elsewhere[-1]} if that is the SGLang you run"
                        if elsewhere and not target.version_given
                        else ""
                    ),
                )
            )
            continue
        out[name] = value
        elsewhere = [v for v in sa.KNOWN_VERSIONS if name in (version_flags(v) or ())]
        close = closest_flag(name, known)
        assumed = "" if target.version_given else " (server.sglang_version unset: the newest the rules know)"
        if mine is not None and elsewhere:
            shown = f"--{name}" if value is True else f"--{name} {_shown_value(name, value)}"
            findings.append(
                Check(
                    ERROR,
                    "unknown-flag",
                    f"SGLang {version}{assumed} has no --{name} "
                    f"(SGLang {', '.join(elsewhere)} has it): its argparse dies before anything starts "
                    f"(unrecognized arguments: {shown})",
                    f"use --{close}"
                    if close
                    else f"drop it, or set server.sglang_version: {elsewhere[-1]} if that is the SGLang you run"
                    if assumed
                    else _ADAPTIVE_ELSEWHERE.format(since=elsewhere[-1], version=version)
                    if name in (ad.FLAG, ad.CONFIG_FLAG)
                    else f"drop it, or run SGLang {elsewhere[-1]}",
                )
            )
        elif close:
            findings.append(Check(ERROR, "unknown-flag", f"--{name} is not an SGLang flag", f"did you mean --{close}?"))
        elif mine is not None and not assumed:
            findings.append(
                Check(
                    ERROR,
                    "unknown-flag",
                    f"SGLang {version} has no --{name}: argparse dies",
                    "drop it, or check the version (server.sglang_version)",
                )
            )
        else:  # a flag no version the rules know has: a fork's, or a newer SGLang's
            findings.append(
                Check(
                    WARNING,
                    "unchecked-flag",
                    f"--{name} is not a flag of SGLang {version}{assumed}, "
                    "nor of any version this tool knows: left unchecked",
                    "nothing to do if your SGLang has it: the host pre-flight checks it against --help; "
                    "set server.sglang_version to have it checked here",
                )
            )
    return out, findings


# --- flag values: what argparse makes of them ---


def _read_values(named: Flags, target: Target, sources: Optional[Mapping[str, str]] = None) -> list[Check]:
    """Every flag value SGLang's argparse would refuse (``invalid int value``, ``invalid choice``, a
    value after a switch, a switch's missing value), by the types of the target's version (those every
    known version agrees on for a version this tool does not know); ``named``: the flags under the
    names argparse reads (``_read_names``); ``sources``: where the experiment sets each flag
    (``server.flags.X``, an axis, ``grid.derived.X``), named in the fix. The algorithm's spelling is
    the speculative rules' (below)."""
    every = version_flags(target.checked_version) or ()
    findings: list[Check] = []
    for name, value in named.items():
        refused = flagtypes.refusal(name, value, target.checked_version, name in every)
        if refused:
            message, fix = refused
            findings.append(
                Check(
                    ERROR,
                    "bad-flag-value",
                    f"--{name} {_shown(value)}: SGLang {target.checked_version}'s "
                    f"argparse dies before anything starts ({message})",
                    f"{fix}, in {(sources or {}).get(name) or 'server.flags, the axis or grid.derived that sets it'}",
                )
            )
    return findings


def _shown(value: Any) -> str:
    return "(no value)" if value is True else " ".join(arg_values(value))


def _shown_value(name: str, value: Any) -> str:
    if name == ad.CONFIG_FLAG and isinstance(value, Mapping):
        return "<the config file the host writes>"
    return " ".join(arg_values(value))


_ADAPTIVE_ELSEWHERE = (
    "run SGLang {since} or newer for adaptive speculation, or drop the adaptive flags and deploy the "
    "policy's plain table (one static setup per load range) on SGLang {version}"
)


# --- the speculative rules, from SGLang's modelled resolution ---


def _from_outcome(o: sa.RuleOutcome, flags: Flags, target: Target) -> list[Check]:
    version = o.version
    out: list[Check] = []
    if "gpu" in o.depends_on or "architecture" in o.depends_on or "algorithm" in o.depends_on:
        unknown = [w for w in ("gpu", "architecture", "algorithm") if w in o.depends_on]
        keys = {"gpu": "server.gpu", "architecture": "server.architecture (or a config.json in model_path)"}
        differing = sorted(set(o.alternatives.values()))
        detail = (
            "; ".join(f"{k}: {v}" for k, v in o.alternatives.items())
            if len(o.alternatives) <= 4
            else "; ".join(differing)
        )
        errors = [v for v in o.alternatives.values() if v.startswith("error") or "fails" in v]
        all_fail = bool(o.alternatives) and len(errors) == len(o.alternatives)
        if not all_fail:
            out.append(
                Check(
                    WARNING,
                    "checked-on-host",
                    f"the verdict depends on the {' and the '.join(unknown)}, unknown here ({detail})",
                    "the host's pre-flight checks it with the real GPU and config.json; or set "
                    + " and ".join(keys.get(u, u) for u in unknown if u in keys),
                )
            )
            if o.error or o.later:
                return out  # an error on some hosts only: not an error of the plan
    if "adaptive-config" in o.depends_on:
        out.append(
            Check(
                WARNING,
                "checked-on-host",
                "; ".join(n for n in o.notes if "adaptive config" in n)
                + ": its tiers and candidate steps are left unchecked here",
                "nothing to do if the hosts have the file; or give speculative-adaptive-config as a mapping "
                "(the config itself), which the plan checks",
            )
        )
    if "adaptive-version" in o.depends_on:
        out.append(
            Check(
                WARNING,
                "checked-on-host",
                next(n for n in o.notes if "may lack" in n),
                f"set server.sglang_version to the SGLang the hosts run ({ad.SINCE} has the adaptive flags)",
            )
        )
    if o.error and o.error.rule == "unknown-flag":
        return out  # argparse's refusal of a flag: read_names says it
    if o.error:
        f = o.error
        what = f"{f.what}: " if f.what else ""
        out.append(Check(ERROR, f.rule, f"{what}SGLang {version} dies {f.stage_words} ({f.exception})", f.fix))
        return out
    if o.later:
        f = o.later
        what = f"{f.what}: " if f.what else ""
        out.append(
            Check(
                ERROR,
                f.rule,
                f"{what}SGLang {version} accepts the arguments, then dies {f.stage_words} ({f.exception})",
                f.fix,
            )
        )
    for a in o.adjustments:
        if a.rule == "topk1-draft-tokens-overridden":
            steps = o.steps if o.steps is not None else 0
            out.append(
                Check(
                    WARNING,
                    a.rule,
                    a.message,
                    f'set speculative-num-draft-tokens to {steps + 1} (grid.derived: "${{add:${{steps}},1}}")',
                )
            )
        elif a.rule == "auto-speculative-params":
            out.append(
                Check(
                    WARNING,
                    a.rule,
                    a.message + " (the values recorded with the point)",
                    "give speculative-num-steps, -eagle-topk and -num-draft-tokens to choose them",
                )
            )
        elif a.rule == "page-size-forced":
            out.append(
                Check(
                    WARNING,
                    a.rule,
                    f"{a.message} (SGLang {version})",
                    f"set page-size {o.page_size} yourself, or another attention backend",
                )
            )
        elif a.rule == "ngram-topk-overridden":
            out.append(
                Check(
                    WARNING,
                    a.rule,
                    a.message,
                    "drop speculative-eagle-topk for NGRAM (speculative-ngram-max-bfs-breadth sets it)",
                )
            )
        elif a.rule == "drafter-is-target":
            out.append(Check(WARNING, a.rule, a.message, "add speculative-draft-model-path to the drafter's bundle"))
        elif a.rule == "adaptive-draft-tokens-overridden":
            out.append(
                Check(
                    WARNING,
                    a.rule,
                    a.message,
                    "leave speculative-num-draft-tokens out, or set it to "
                    f"{(o.steps or 0) + 1} (speculative-num-steps + 1)",
                )
            )
        elif a.rule == "adaptive-initial-steps":
            out.append(
                Check(
                    WARNING,
                    a.rule,
                    a.message + " (the values recorded with the point)",
                    f"give speculative-num-steps, one of {list(o.candidate_steps)} (the policy's launch "
                    "flags give the largest)",
                )
            )
    if o.adaptive_requested and not o.adaptive and o.adaptive_disabled_reason and not o.error:
        reason = o.adaptive_disabled_reason
        out.append(
            Check(
                WARNING,
                "adaptive-disabled",
                f'SGLang {version} logs "{ad.disabled_warning(reason)}" and runs static speculation '
                f"(steps {o.steps}, topk {o.topk}, draft tokens {o.draft_tokens}): the point would not be "
                "adaptive",
                ad.reason_fix(reason),
            )
        )
    return out


def _rule_adaptive_config_unused(flags: Flags, bench: BenchSettings) -> list[Check]:
    """--speculative-adaptive-config without --speculative-adaptive: SGLang never reads it."""
    if flags.get(ad.CONFIG_FLAG) not in (None, False, "") and not flags.get(ad.FLAG) and _algo(flags) is not None:
        return [
            Check(
                WARNING,
                "adaptive-config-unused",
                f"--{ad.CONFIG_FLAG} without --{ad.FLAG}: SGLang never reads the config and runs static speculation",
                f"add {ad.FLAG}: true, or drop the config",
            )
        ]
    return []


def _rule_spec_flags_without_algorithm(flags: Flags, bench: BenchSettings) -> list[Check]:
    if _algo(flags) is None:
        spec = [n for n in flags if n.startswith("speculative-") and flags[n] not in (None, False)]
        if spec:
            return [
                Check(
                    WARNING,
                    "spec-flags-without-algorithm",
                    f"{', '.join('--' + s for s in spec)} given without --speculative-algorithm: SGLang ignores them",
                    "set speculative-algorithm, or drop these flags from the baseline",
                )
            ]
    return []


def _running_cap(o: Optional[sa.RuleOutcome], flags: Flags, bench: BenchSettings) -> list[Check]:
    if (
        o is None
        or _int(flags, "max-running-requests") is not None
        or o.max_running_requests != SPEC_DEFAULT_MAX_RUNNING
    ):
        return []
    over = [c for c in bench.concurrency.levels if c > SPEC_DEFAULT_MAX_RUNNING]
    if over:
        return [
            Check(
                WARNING,
                "spec-running-cap",
                f"with speculation and no --max-running-requests SGLang runs at most {SPEC_DEFAULT_MAX_RUNNING} requests; "
                f"levels {over} would silently queue",
                f"set max-running-requests to at least {max(over)} in server.flags",
            )
        ]
    return []


def _rule_requests_per_level(flags: Flags, bench: BenchSettings) -> list[Check]:
    short = [c for c in bench.concurrency.levels if bench.requests_at(c) < c]
    if short:
        return [
            Check(
                WARNING,
                "requests-below-concurrency",
                f"levels {short} send fewer requests than their concurrency, so the real concurrency is lower",
                "leave benchmark.concurrency.requests_per_level unset (rounds x concurrency) or raise it",
            )
        ]
    return []


def _rule_metrics(flags: Flags, bench: BenchSettings) -> list[Check]:
    if bench.server_metrics and not flags.get("enable-metrics"):
        return [
            Check(
                WARNING,
                "metrics-disabled",
                "benchmark.server_metrics is on but the server runs without --enable-metrics: no Prometheus deltas",
                "add enable-metrics: true to server.flags, or set benchmark.server_metrics=false",
            )
        ]
    return []


# Rules of flags and benchmark settings alone; the speculative ones come from serverargs.resolve.
_RULES: tuple[Rule, ...] = (
    _rule_spec_flags_without_algorithm,
    _rule_requests_per_level,
    _rule_metrics,
    _rule_adaptive_config_unused,
)


def evaluate(
    flags: Flags,
    bench: BenchSettings,
    target: Optional[Target] = None,
    env: Optional[Mapping[str, str]] = None,
    sources: Optional[Mapping[str, str]] = None,
) -> Evaluation:
    """Every finding for one point's flags (names normalized, reserved flags included), and SGLang's
    outcome (its verdict and the steps, topk, draft tokens and running cap it would run with).
    ``env``: the server's environment, where SGLang's checks read a variable (SGLANG_ENABLE_PP_SPEC);
    ``sources``: where the experiment sets each flag, for the fixes."""
    target = target or Target()
    named, findings = _read_names(flags, target)
    bad_values = _read_values(named, target, sources)
    findings += bad_values
    outcome = None
    if _algo(named) is not None and not bad_values:  # argparse dies first: nothing else of SGLang's runs
        outcome = sa.resolve(named, target.context(named, env))
        findings += _from_outcome(outcome, named, target)
    findings += _running_cap(outcome, named, bench)
    for rule in _RULES:
        findings += rule(named, bench)
    return Evaluation(findings, outcome, named)


def check(
    flags: Flags, bench: BenchSettings, target: Optional[Target] = None, env: Optional[Mapping[str, str]] = None
) -> list[Check]:
    """Every finding for one point's flags (names normalized, reserved flags included)."""
    return evaluate(flags, bench, target, env).findings


def host_check(
    flags: Flags,
    bench: BenchSettings,
    *,
    version: str,
    gpu: Optional[str],
    architecture: Optional[str],
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    env: Optional[Mapping[str, str]] = None,
) -> list[Check]:
    """The same rules with what only the host knows (for pre-flight, in seconds): its SGLang version,
    its GPU (``nvidia-smi``'s name) and the target's architecture from the config.json it has."""
    return check(
        flags,
        bench,
        Target(
            version=version,
            architecture=architecture,
            gpu=gpu,
            configs=configs or {},
            version_given=True,
            files_here=True,
        ),
        env,
    )


__all__ = [
    "ERROR",
    "WARNING",
    "Check",
    "Target",
    "Evaluation",
    "evaluate",
    "check",
    "host_check",
    "SPEC_DEFAULT_MAX_RUNNING",
    "SPEC_ALGORITHMS",
    "EAGLE_FAMILY",
]
