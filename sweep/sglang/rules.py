"""SGLang's speculative-decoding rules, checked on a point's flags before anything is launched.

SGLang checks these in ``ServerArgs`` at startup, minutes into a launch, or not at all (a silent
override). Here each rule is a pure function of one point's flags and benchmark settings that returns
findings: an **error** for what would crash the server, a **warning** for what SGLang would silently
change or what would spoil the measurement. Each finding names the rule and the fix; the plan adds
the point. Rules that need several points (baseline env) live in ``sweep.plan``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from sweep.bench.settings import BenchSettings
from sweep.sglang.args import KNOWN_FLAGS, SPEC_ALGORITHMS, closest_flag

ERROR = "error"
WARNING = "warning"

# Running requests SGLang allows when speculating and --max-running-requests is not given.
SPEC_DEFAULT_MAX_RUNNING = 48
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
TOPK_PAGED_BACKENDS = ("flashinfer", "fa3")  # 0.5.23 adds triton


@dataclass(frozen=True)
class Finding:
    level: str  # error | warning
    rule: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message} (fix: {self.fix})"


Flags = Mapping[str, Any]
Rule = Callable[[Flags, BenchSettings], list[Finding]]


def _int(flags: Flags, name: str) -> int | None:
    v = flags.get(name)
    return None if v is None or v is False else int(v)


def _algo(flags: Flags) -> str | None:
    v = flags.get("speculative-algorithm")
    return str(v) if v else None


def _eagle(flags: Flags) -> bool:
    return _algo(flags) in EAGLE_FAMILY


def rule_unknown_flag(flags: Flags, bench: BenchSettings) -> list[Finding]:
    out = []
    for name in flags:
        if name in KNOWN_FLAGS:
            continue
        close = closest_flag(name)
        if close:
            out.append(Finding(ERROR, "unknown-flag", f"--{name} is not an SGLang flag",
                               f"did you mean --{close}?"))
        else:
            out.append(Finding(WARNING, "unchecked-flag", f"--{name} is not a flag this tool knows",
                               "nothing to do if your SGLang has it: the host pre-flight checks it against --help"))
    return out


def rule_algorithm(flags: Flags, bench: BenchSettings) -> list[Finding]:
    algo = _algo(flags)
    if algo is None:
        spec = [n for n in flags if n.startswith("speculative-") and flags[n] not in (None, False)]
        if spec:
            return [Finding(WARNING, "spec-flags-without-algorithm",
                            f"{', '.join('--' + s for s in spec)} given without --speculative-algorithm: SGLang ignores them",
                            "set speculative-algorithm, or drop these flags from the baseline")]
        return []
    if algo not in SPEC_ALGORITHMS:
        close = [a for a in SPEC_ALGORITHMS if a == algo.upper()]
        return [Finding(ERROR, "unknown-algorithm", f"--speculative-algorithm {algo} is not one of {', '.join(SPEC_ALGORITHMS)}",
                        f"use {close[0]}" if close else "pick one of those (EAGLE3 for EAGLE-3 drafters)")]
    return []


def rule_draft_model(flags: Flags, bench: BenchSettings) -> list[Finding]:
    if _algo(flags) in ("EAGLE", "EAGLE3", "STANDALONE") and not flags.get("speculative-draft-model-path"):
        return [Finding(ERROR, "draft-model-missing",
                        f"--speculative-algorithm {_algo(flags)} needs --speculative-draft-model-path (found only at model load)",
                        "add speculative-draft-model-path to the drafter's bundle")]
    return []


def rule_steps_required(flags: Flags, bench: BenchSettings) -> list[Finding]:
    """SGLang asserts that topk and draft tokens come only with steps (bare AssertionError)."""
    if not _eagle(flags) or _int(flags, "speculative-num-steps") is not None:
        return []
    given = [n for n in ("speculative-eagle-topk", "speculative-num-draft-tokens") if _int(flags, n) is not None]
    if given:
        return [Finding(ERROR, "topk-or-draft-without-steps",
                        f"{' and '.join('--' + g for g in given)} given without --speculative-num-steps: SGLang dies on an AssertionError",
                        "give speculative-num-steps too, or none of the three (SGLang then picks (3, 1, 4) for non-Llama targets)")]
    return []


def rule_topk_required(flags: Flags, bench: BenchSettings) -> list[Finding]:
    if _eagle(flags) and _int(flags, "speculative-num-steps") is not None and _int(flags, "speculative-eagle-topk") is None:
        return [Finding(ERROR, "steps-without-topk",
                        "--speculative-num-steps given without --speculative-eagle-topk: SGLang fails with a TypeError comparing None to 1",
                        "add speculative-eagle-topk (1 for a chain drafter)")]
    return []


def rule_topk1_draft_tokens(flags: Flags, bench: BenchSettings) -> list[Finding]:
    steps, topk = _int(flags, "speculative-num-steps"), _int(flags, "speculative-eagle-topk")
    draft = _int(flags, "speculative-num-draft-tokens")
    if not _eagle(flags) or steps is None or topk is None:
        return []
    if topk == 1 and draft != steps + 1:
        asked = f"{draft} draft tokens" if draft is not None else "no draft-token count"
        return [Finding(WARNING, "topk1-draft-tokens-overridden",
                        f"topk=1 with {asked}: SGLang silently uses steps+1 = {steps + 1}",
                        f"set speculative-num-draft-tokens to {steps + 1} (grid.derived: \"${{add:${{steps}},1}}\")")]
    if topk > 1 and draft is None:
        return [Finding(ERROR, "tree-without-draft-tokens",
                        f"topk={topk} without --speculative-num-draft-tokens",
                        "set speculative-num-draft-tokens for a tree drafter")]
    return []


def rule_draft_tree_capacity(flags: Flags, bench: BenchSettings) -> list[Finding]:
    steps, topk = _int(flags, "speculative-num-steps"), _int(flags, "speculative-eagle-topk")
    draft = _int(flags, "speculative-num-draft-tokens")
    if not _eagle(flags) or None in (steps, topk, draft) or topk == 1:
        return []
    capacity = topk + (steps - 1) * topk * topk
    if draft - 1 > capacity:
        return [Finding(ERROR, "draft-tree-too-small",
                        f"{draft} draft tokens do not fit a tree of steps={steps}, topk={topk} "
                        f"(at most {capacity + 1}: num_draft_tokens - 1 <= topk + (steps-1)*topk^2)",
                        f"lower speculative-num-draft-tokens to <= {capacity + 1} or raise steps/topk")]
    if draft < 2:
        return [Finding(ERROR, "draft-tokens-too-few", f"{draft} draft tokens", "use at least 2")]
    return []


def rule_topk_backend(flags: Flags, bench: BenchSettings) -> list[Finding]:
    topk = _int(flags, "speculative-eagle-topk")
    if not _eagle(flags) or topk is None or topk <= 1:
        return []
    backend = flags.get("attention-backend")
    out = []
    if str(backend) == "trtllm_mha":
        out.append(Finding(ERROR, "topk-trtllm-mha", f"topk={topk} with attention backend trtllm_mha: SGLang raises ValueError",
                           "use topk 1, or attention-backend fa3/flashinfer"))
    page = _int(flags, "page-size") or 1
    if page > 1 and str(backend) not in TOPK_PAGED_BACKENDS:
        out.append(Finding(ERROR, "topk-page-size-backend",
                           f"topk={topk} with page-size {page} needs attention backend flashinfer or fa3, got {backend or 'the default'}",
                           "set attention-backend: fa3 (or flashinfer), or page-size: 1"))
    return out


def rule_parallelism(flags: Flags, bench: BenchSettings) -> list[Finding]:
    algo = _algo(flags)
    if algo is None:
        return []
    out = []
    if (_int(flags, "pp-size") or _int(flags, "pipeline-parallel-size") or 1) > 1:
        out.append(Finding(ERROR, "spec-with-pipeline-parallel", "speculative decoding with pipeline parallel > 1 is not allowed",
                           "drop pp-size, or run without speculation"))
    if algo in ("STANDALONE", "NGRAM") and flags.get("enable-dp-attention"):
        out.append(Finding(ERROR, "dp-attention-unsupported", f"{algo} with --enable-dp-attention: SGLang raises ValueError",
                           "drop enable-dp-attention for this drafter"))
    return out


def rule_running_cap(flags: Flags, bench: BenchSettings) -> list[Finding]:
    if not _algo(flags) or _int(flags, "max-running-requests") is not None:
        return []
    over = [c for c in bench.concurrency.levels if c > SPEC_DEFAULT_MAX_RUNNING]
    if over:
        return [Finding(WARNING, "spec-running-cap",
                        f"with speculation and no --max-running-requests SGLang runs at most {SPEC_DEFAULT_MAX_RUNNING} requests; "
                        f"levels {over} would silently queue",
                        f"set max-running-requests to at least {max(over)} in server.flags")]
    return []


def rule_requests_per_level(flags: Flags, bench: BenchSettings) -> list[Finding]:
    short = [c for c in bench.concurrency.levels if bench.requests_at(c) < c]
    if short:
        return [Finding(WARNING, "requests-below-concurrency",
                        f"levels {short} send fewer requests than their concurrency, so the real concurrency is lower",
                        "leave benchmark.concurrency.requests_per_level unset (rounds x concurrency) or raise it")]
    return []


def rule_metrics(flags: Flags, bench: BenchSettings) -> list[Finding]:
    if bench.server_metrics and not flags.get("enable-metrics"):
        return [Finding(WARNING, "metrics-disabled",
                        "benchmark.server_metrics is on but the server runs without --enable-metrics: no Prometheus deltas",
                        "add enable-metrics: true to server.flags, or set benchmark.server_metrics=false")]
    return []


RULES: tuple[Rule, ...] = (
    rule_unknown_flag,
    rule_algorithm,
    rule_draft_model,
    rule_steps_required,
    rule_topk_required,
    rule_topk1_draft_tokens,
    rule_draft_tree_capacity,
    rule_topk_backend,
    rule_parallelism,
    rule_running_cap,
    rule_requests_per_level,
    rule_metrics,
)


def check(flags: Flags, bench: BenchSettings) -> list[Finding]:
    """Every finding for one point's flags (names normalized, reserved flags included)."""
    return [f for rule in RULES for f in rule(flags, bench)]
