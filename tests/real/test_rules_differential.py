"""The plan's rule checker and the fake server against real SGLang's own argument checks.

Every case of ``tests/real/cases.py`` (over 200 speculative flag combinations: algorithm x steps x
topk x draft tokens x page size x attention backend x target architecture x running-request cap x
GPU) goes through what ``launch_server`` runs before it starts a scheduler (``prepare_server_args``,
``resolve_once`` where the version has it, ``check_server_args``; ``sglang_argcheck.py``), in a
subprocess of an SGLang install whose hardware probes answer for the case's GPU. SGLang's verdict
(error, adjusted, ok) and final (steps, topk, draft tokens, running-request cap) must equal the
plan's (``sweep.sglang.rules`` with what the plan knows: the version, config.json, the GPU) and the
fake's (``sweep.fake.rules`` on the same argv), or the case stands in ``KNOWN_DIFFERENCES``
with its reason.

The installs: the CPU build at commit 7f8f030 (``SGLANG_CPU_PYTHON``, or the installer's env.sh at
``$SWEEP_SGLANG_CPU``, ``~/.cache/sweep-sglang-cpu`` or ``~/.cache/sweep-sglang-cpu-noamx``: its
server_args imports even where its kernels do not run) and the registry's 0.5.10 and 0.5.23
(``tests/real/install_sglang_releases.sh``, cached in ``$SWEEP_SGLANG_RELEASES`` or
``~/.cache/sweep-sglang-releases``). Each one that is absent is skipped with the reason.

``python tests/real/test_rules_differential.py`` prints the agreement table without pytest.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sweep.sglang import rules, serverargs  # noqa: E402
from sweep.sglang.args import argparse_name, flag_args, version_flags  # noqa: E402
from tests.real import cases as C  # noqa: E402

pytestmark = [pytest.mark.real_sglang, pytest.mark.timeout(1800)]

HARNESS = Path(__file__).with_name("sglang_argcheck.py")
MIN_CASES = 200


# --- the installs ---


@dataclass(frozen=True)
class Install:
    name: str  # what the tables say
    python: Optional[str]
    why_missing: str = ""


def _env_sh_python() -> Optional[str]:
    for prefix in filter(
        None,
        [
            os.environ.get("SWEEP_SGLANG_CPU"),
            str(Path.home() / ".cache" / "sweep-sglang-cpu"),
            str(Path.home() / ".cache" / "sweep-sglang-cpu-noamx"),
        ],
    ):
        f = Path(prefix) / "env.sh"
        if f.is_file():
            m = re.search(r"SGLANG_CPU_PYTHON=(\S+)", f.read_text())
            if m:
                python = shlex.split(m.group(1))[0]
                if Path(python).is_file():
                    return python
    return None


def installs() -> list[Install]:
    out = []
    cpu = os.environ.get("SGLANG_CPU_PYTHON") or _env_sh_python()
    out.append(
        Install(
            "7f8f030 (CPU build)",
            cpu if cpu and Path(cpu).is_file() else None,
            "no CPU SGLang: run bash ../shared/sglang-cpu/install.sh and source the env.sh it prints",
        )
    )
    cache = Path(os.environ.get("SWEEP_SGLANG_RELEASES", Path.home() / ".cache" / "sweep-sglang-releases"))
    for v in serverargs.KNOWN_VERSIONS:
        d = cache / f"v{v}"
        ok = (d / ".installed").is_file() and (d / "bin" / "python").is_file()
        out.append(
            Install(
                v,
                str(d / "bin" / "python") if ok else None,
                f"no SGLang {v} in {d}: run tests/real/install_sglang_releases.sh {v}",
            )
        )
    return out


_VERSIONS: dict[str, str] = {}
_VERDICTS: dict[str, dict[str, dict[str, Any]]] = {}


def sglang_version(python: str) -> str:
    if python not in _VERSIONS:
        r = subprocess.run(
            [python, "-c", "import sglang; print(sglang.__version__)"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd="/",
        )
        if r.returncode != 0:
            raise RuntimeError((r.stderr.strip().splitlines() or ["?"])[-1])
        _VERSIONS[python] = r.stdout.strip().splitlines()[-1]
    return _VERSIONS[python]


def real_verdicts(python: str, cases: list[C.Case], models: Path) -> dict[str, dict[str, Any]]:
    """SGLang's verdict on every case, one harness process per GPU (SGLang caches its probes)."""
    key = python + "|" + str(models)
    if key in _VERDICTS:
        return _VERDICTS[key]
    by_gpu: dict[str, list[C.Case]] = defaultdict(list)
    for c in cases:
        by_gpu[c.gpu].append(c)

    def run(gpu: str) -> dict[str, dict[str, Any]]:
        lines = "".join(json.dumps({"id": c.id, "argv": flag_args(c.all_flags(models))}) + "\n" for c in by_gpu[gpu])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_USE_CPU", "LD_PRELOAD"))}
        r = subprocess.run(
            [python, str(HARNESS), gpu],
            input=lines,
            capture_output=True,
            text=True,
            timeout=1500,
            cwd=tempfile.gettempdir(),
            env={**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
        got = {d["id"]: d for d in map(json.loads, r.stdout.splitlines())}
        if r.returncode != 0 or len(got) != len(by_gpu[gpu]):
            raise RuntimeError(f"the harness failed for {gpu} (exit {r.returncode}): {r.stderr[-2000:]}")
        return got

    out: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for part in pool.map(run, sorted(by_gpu)):
            out.update(part)
    _VERDICTS[key] = out
    return out


_DUMP_PARSER = """
import argparse, json, logging, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.CRITICAL)
from sglang.srt.server_args import ServerArgs
p = argparse.ArgumentParser(); ServerArgs.add_cli_args(p)
flags, types = set(), {}
for a in p._actions:
    longs = [o[2:] for o in a.option_strings if o.startswith("--")]
    flags.update(longs)
    if isinstance(a, argparse._HelpAction):
        continue
    if a.nargs == 0:
        kind = "switch"
    elif a.nargs in ("+", "*"):
        kind = {int: "int", float: "float"}.get(a.type, "str") + "-list"
    elif a.nargs == "?":
        kind = "optional"
    else:
        kind = {int: "int", float: "float"}.get(a.type, "str")
    choices = sorted(str(c) for c in a.choices) if a.choices is not None and a.nargs != 0 else []
    for o in longs:
        types[o] = [kind, choices]
print(json.dumps({"flags": sorted(flags), "types": types}))
"""
_PARSERS: dict[str, dict[str, Any]] = {}


def _parser(python: str) -> dict[str, Any]:
    """An install's launch_server parser, read once (an import of SGLang takes a while)."""
    if python not in _PARSERS:
        r = subprocess.run([python, "-c", _DUMP_PARSER], capture_output=True, text=True, timeout=300, cwd="/")
        _PARSERS[python] = json.loads(r.stdout.strip().splitlines()[-1])
    return _PARSERS[python]


def dump_flags(python: str) -> list[str]:
    """Every flag of an install's launch_server parser (what sweep/sglang/flagnames.py holds)."""
    return _parser(python)["flags"]


def test_flag_lists_match_the_installs():
    from sweep.sglang.flagnames import FLAGS

    checked = 0
    for install in installs():
        if install.python is None:
            continue
        version = sglang_version(install.python)
        key = next((c for c in serverargs.KNOWN_BUILDS if c in version), version)
        if key in FLAGS:
            assert set(dump_flags(install.python)) == FLAGS[key], key
            checked += 1
    if not checked:
        pytest.skip("no SGLang install to read flags from")


def dump_flag_types(python: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every flag of an install's launch_server parser with its kind and choices (what
    sweep/sglang/flagtypes.py holds: ``str`` is any one value)."""
    return {k: (v[0], tuple(v[1])) for k, v in _parser(python)["types"].items()}


def test_flag_types_match_the_installs():
    from sweep.sglang.flagtypes import CHOICES, TYPES

    checked = 0
    for install in installs():
        if install.python is None:
            continue
        version = sglang_version(install.python)
        key = next((c for c in serverargs.KNOWN_BUILDS if c in version), version)
        if key in TYPES:
            real = dump_flag_types(install.python)
            assert {k: kind for k, (kind, _) in real.items() if kind != "str"} == TYPES[key], key
            assert {k: ch for k, (_, ch) in real.items() if ch} == {
                k: tuple(sorted(c)) for k, c in CHOICES[key].items()
            }, key
            checked += 1
    if not checked:
        pytest.skip("no SGLang install to read flag types from")


# --- verdicts, as comparable tuples ---

Verdict = tuple  # ("error",) or (verdict, steps, topk, draft tokens, running cap[, adaptive stays on])


def given_values(case: C.Case, version: str) -> tuple:
    """(steps, topk, draft tokens, cap) as the case gives them, read the way argparse reads names."""
    known = version_flags(version) or version_flags(serverargs.NEWEST)
    named = {argparse_name(k, known)[0] or k: v for k, v in case.flags.items()}
    return tuple(
        named.get(n)
        for n in (
            "speculative-num-steps",
            "speculative-eagle-topk",
            "speculative-num-draft-tokens",
            "max-running-requests",
        )
    )


def _verdict(
    error: bool, final: tuple, given: tuple, speculative: bool, case: Optional[C.Case] = None, adaptive: Any = None
) -> Verdict:
    if error:
        return ("error",)
    extra = (bool(adaptive),) if case is not None and case.id in C.ADAPTIVE_IDS else ()  # adaptive stays on
    return ("adjusted" if speculative and final != given else "ok", *final, *extra)


def sglang_verdict(case: C.Case, real: dict[str, Any], version: str) -> Verdict:
    final = (real.get("steps"), real.get("topk"), real.get("draft"), real.get("max_running"))
    return _verdict(
        real["verdict"] == "error",
        final,
        given_values(case, version),
        bool(real.get("algorithm")),
        case,
        real.get("adaptive"),
    )


def plan_target(case: C.Case, models: Path, version: str) -> rules.Target:
    """What the plan knows of the case's server: as sweep.experiment.plan.target_of builds it."""
    flags = case.all_flags(models)
    configs = {
        p: c
        for p in (flags["model-path"], flags.get("speculative-draft-model-path"))
        if p and (c := serverargs.read_config(p)) is not None
    }
    return rules.Target(
        version=version,
        architecture=serverargs.config_architecture(configs.get(flags["model-path"])),
        gpu="cpu" if case.gpu == "cpu" else case.gpu,
        configs=configs,
        version_given=True,
    )


NAME_RULES = ("unknown-flag", "ambiguous-flag")


def plan_verdict(case: C.Case, models: Path, version: str) -> tuple[Verdict, Optional[str]]:
    """The plan's verdict on what SGLang's argument checks do, and the later failure it predicts."""
    ev = rules.evaluate(case.all_flags(models), _BENCH, plan_target(case, models, version))
    name_error = any(f.level == rules.ERROR and f.rule in NAME_RULES for f in ev.findings)
    o = ev.outcome
    if o is None:
        return _verdict(name_error, (None,) * 4, given_values(case, version), False), None
    later = f"{o.later.rule} ({o.later.stage})" if o.later else None
    return _verdict(
        name_error or o.verdict == "error", o.final, given_values(case, version), True, case, o.adaptive
    ), later


def fake_verdict(case: C.Case, models: Path, version: str) -> Verdict:
    from sweep.fake import args as fake_args
    from sweep.fake import rules as fake_rules

    fake_version = serverargs.rules_version(version)[0]
    argv = flag_args(case.all_flags(models)) + ["--fake-version", fake_version, "--fake-gpu", case.gpu]
    try:
        import contextlib
        import io

        with contextlib.redirect_stderr(io.StringIO()):
            parsed = fake_args.parse(argv)
        r = fake_rules.resolve(parsed.ns, parsed.version)
    except SystemExit:
        return ("error",)
    except fake_rules.ArgsRejected:
        return ("error",)
    a = r.args
    final = (
        a.get("speculative_num_steps"),
        a.get("speculative_eagle_topk"),
        a.get("speculative_num_draft_tokens"),
        a.get("max_running_requests"),
    )
    return _verdict(
        False,
        final,
        given_values(case, version),
        bool(a.get("speculative_algorithm")),
        case,
        a.get("speculative_adaptive"),
    )


from sweep.core.settings import BenchSettings, ConcurrencySettings  # noqa: E402

_BENCH = BenchSettings(server_metrics=False, concurrency=ConcurrencySettings(levels=[1]))


# --- the differences known, with their reasons ---


@dataclass(frozen=True)
class Known:
    checker: str  # plan | fake
    versions: tuple[str, ...]  # the rules versions it applies to ("0.5.10", "0.5.23")
    applies: Callable[[C.Case, Verdict, Verdict], bool]  # (case, SGLang's verdict, the checker's)
    reason: str
    builds: tuple[str, ...] = ()  # only for these development builds (a commit in the version); () for any


def _ngram_steps(case: C.Case, real: Verdict, mine: Verdict) -> bool:
    return (
        case.flags.get("speculative-algorithm", "").upper() == "NGRAM"
        and real[0] != "error"
        and mine[0] != "error"
        and real[2:] == mine[2:]
        and (real[1] is None or real[1] < 1)
        and mine[1] == 1
    )


def _pp_spec_prefill(case: C.Case, real: Verdict, mine: Verdict) -> bool:
    return (
        int(case.flags.get("pp-size") or 1) > 1
        and case.flags.get("disaggregation-mode") == "prefill"
        and real[0] == "error"
        and mine[0] != "error"
    )


_PP_BUILD = (
    "the CPU build 7f8f030 rejects any speculation with pp > 1 (ServerArgs.check_server_args, "
    "server_args.py:9247: 'Pipeline parallelism is not compatible with overlap schedule, speculative "
    "decoding'); 0.5.23, whose rules it is checked with, lets EAGLE / NEXTN through on a prefill node "
    "(arg_groups/validation_hook.py:159). No CPU server runs pp with PD disaggregation."
)

# flags the fake server takes without serving what they do (it accepts any well-formed flag of SGLang's)
FAKE_UNSERVED = ("enable-two-batch-overlap", "enable-hisparse", "enable-pdmux", "enable-lora")


def _fake_unserved(case: C.Case, real: Verdict, mine: Verdict) -> bool:
    return any(case.flags.get(f) for f in FAKE_UNSERVED) and case.id in C.ADAPTIVE_IDS


KNOWN_DIFFERENCES: tuple[Known, ...] = (
    Known("plan", ("0.5.23",), _pp_spec_prefill, _PP_BUILD, builds=("7f8f030",)),
    Known("fake", ("0.5.23",), _pp_spec_prefill, _PP_BUILD, builds=("7f8f030",)),
    Known(
        "fake",
        ("0.5.10", "0.5.23"),
        _ngram_steps,
        "NGRAM: SGLang 0.5.10 leaves speculative_num_steps unset and 0.5.23 sets it to draft // topk (0 below 10 "
        "draft tokens); the fake reports 1, since its scheduler model (fake/main.speculative_config, "
        "fake/model.Spec) needs a step. NGRAM never reads the value.",
    ),
    Known(
        "fake",
        ("0.5.10", "0.5.23"),
        _fake_unserved,
        "the fake takes --enable-two-batch-overlap, --enable-hisparse, --enable-pdmux and --enable-lora as flags it "
        "does not serve (sweep/fake/args.py parses only what it models), so SGLang's adaptive fallback (two-batch "
        "overlap, pdmux) and the refusals of HiSparse and LoRA do not reach its model; the plan's verdict is SGLang's",
    ),
)


def known_reason(checker: str, version: str, case: C.Case, real: Verdict, mine: Verdict) -> Optional[str]:
    rv = serverargs.rules_version(version)[0]
    for k in KNOWN_DIFFERENCES:
        if k.builds and not any(b in version for b in k.builds):
            continue
        if k.checker == checker and rv in k.versions and k.applies(case, real, mine):
            return k.reason
    return None


# --- the comparison ---


@dataclass
class Comparison:
    install: str
    version: str
    checker: str
    total: int
    agree: int
    known: list[tuple[str, Verdict, Verdict, str]]
    unexplained: list[tuple[str, Verdict, Verdict, str]]
    later: int = 0  # cases SGLang's argument checks pass that the plan says fail later
    later_rules: dict[str, Optional[str]] = field(default_factory=dict)  # case id -> the plan's later rule
    words: list[str] = field(default_factory=list)  # adaptive cases whose exception text the model words otherwise
    accepted: set[str] = field(default_factory=set)  # case ids SGLang's argument checks pass

    def line(self) -> str:
        return (
            f"{self.checker:4} vs SGLang {self.install:20} ({self.version}): {self.agree}/{self.total} agree "
            f"({100.0 * self.agree / self.total:.1f} %), {len(self.known)} known differences, "
            f"{len(self.unexplained)} unexplained"
            + (f"; {self.later} predicted later failures" if self.checker == "plan" else "")
        )


def compare(install: Install, models: Path, checker: str, cases: Optional[list[C.Case]] = None) -> Comparison:
    cases = cases or C.generate()
    assert install.python
    version = sglang_version(install.python)
    real = real_verdicts(install.python, cases, models)
    cmp = Comparison(install.name, version, checker, len(cases), 0, [], [])
    for case in cases:
        theirs = sglang_verdict(case, real[case.id], version)
        if theirs[0] != "error":
            cmp.accepted.add(case.id)
        if checker == "plan":
            cmp.words += adaptive_words(case, real[case.id], models, version)
            mine, later = plan_verdict(case, models, version)
            cmp.later += bool(later) and theirs[0] != "error"
            cmp.later_rules[case.id] = later.split(" ")[0] if later else None
        else:
            mine = fake_verdict(case, models, version)
        if mine == theirs:
            cmp.agree += 1
            continue
        detail = (real[case.id].get("message") or "")[:160]
        reason = known_reason(checker, version, case, theirs, mine)
        (cmp.known if reason else cmp.unexplained).append((case.id, theirs, mine, reason or detail))
    return cmp


# --- the tests ---


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return C.write_models(tmp_path_factory.mktemp("argcheck-models"))


def test_enough_cases():
    cases = C.generate()
    assert len(cases) >= MIN_CASES and len({c.id for c in cases}) == len(cases)
    assert {c.flags.get("speculative-algorithm") for c in cases} >= set(serverargs.ALGORITHMS_0510)
    assert {c.target for c in cases} >= set(C.TARGETS) and len({c.gpu for c in cases}) >= 3
    assert len(C.ADAPTIVE) >= 30 and C.ADAPTIVE_IDS <= {c.id for c in cases}


@pytest.mark.parametrize("checker", ["plan", "fake"])
@pytest.mark.parametrize("install", installs(), ids=lambda i: i.name.split()[0])
def test_agrees_with_real_sglang(install: Install, checker: str, models: Path):
    if install.python is None:
        pytest.skip(install.why_missing)
    try:
        sglang_version(install.python)
    except RuntimeError as exc:
        pytest.skip(f"SGLang at {install.python} does not import: {exc}")
    cmp = compare(install, models, checker)
    print("\n" + cmp.line())
    for cid, theirs, mine, why in cmp.known:
        print(f"  known   {cid}: SGLang {theirs}, {checker} {mine}: {why[:100]}")
    lines = [f"  {cid}: SGLang {theirs}, {checker} {mine} [{why}]" for cid, theirs, mine, why in cmp.unexplained]
    assert not cmp.unexplained, cmp.line() + "\n" + "\n".join(lines)
    if checker == "plan":
        wrong = missed_later(cmp) + cmp.words
        assert not wrong, "\n".join(wrong)


def adaptive_words(case: C.Case, real: dict[str, Any], models: Path, version: str) -> list[str]:
    """An adaptive case SGLang refuses: the model must raise SGLang's own text (0.5.10's argparse, the config
    loader's ValueError, the steps check), which the plan's finding and the fake's traceback show."""
    if case.id not in C.ADAPTIVE_IDS or real["verdict"] != "error":
        return []
    o = rules.evaluate(case.all_flags(models), _BENCH, plan_target(case, models, version)).outcome
    theirs = (
        real["message"]
        if real["exception"] == "SystemExit"
        else f"{real['exception']}: {real['message']}"
        if real["message"]
        else real["exception"]
    )
    mine = o.error.exception if o is not None and o.error else None
    # argparse's line starts "sglang serve: error: " and goes on with any other flag the version lacks
    if mine and (theirs == mine or theirs.endswith(": " + mine) or f": {mine} --" in theirs):
        return []
    return [f"  {case.id}: SGLang says {theirs!r}, the model {mine!r}"]


def missed_later(cmp: Comparison) -> list[str]:
    """The named cases whose arguments SGLang accepts and whose startup dies (C.EXPECT_LATER): SGLang
    must accept them, and the plan must name the failure to come."""
    out = []
    for cid, rule in C.EXPECT_LATER.items():
        if cid in C.ADAPTIVE_IDS and not serverargs.at_least(cmp.version, "0.5.23"):
            continue  # no adaptive flags in that version: its argparse refuses them (adaptive_words checks it)
        if cid not in cmp.accepted:
            out.append(f"  {cid}: SGLang {cmp.install} rejects its arguments; expected it to pass them (then {rule})")
        elif cmp.later_rules.get(cid) != rule:
            out.append(f"  {cid}: the plan predicts {cmp.later_rules.get(cid)}, expected {rule}")
    return out


def main() -> int:
    models = C.write_models(Path(tempfile.mkdtemp(prefix="argcheck-models-")))
    bad = 0
    for install in installs():
        if install.python is None:
            print(f"skip {install.name}: {install.why_missing}")
            continue
        for checker in ("plan", "fake"):
            cmp = compare(install, models, checker)
            print(cmp.line())
            for cid, theirs, mine, why in cmp.unexplained:
                print(f"  {cid}: SGLang {theirs}, {checker} {mine} [{why}]")
            bad += len(cmp.unexplained)
            if checker == "plan":
                for line in missed_later(cmp) + cmp.words:
                    print(line)
                    bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
