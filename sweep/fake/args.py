"""The fake server's command line: SGLang's ``launch_server`` flags (per version) plus ``--fake-*``.

``--help`` lists every flag understood, so the host pre-flight can check an argv against it exactly
as it does against ``python -m sglang.launch_server --help``. Other well-formed ``--flag [value]``
pairs are accepted and reported back (the caller warns in the log); anything else is an argparse
usage error (exit 2), as SGLang gives.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from sweep.sglang import flagnames, flagtypes

DEFAULT_VERSION = "0.5.10"
DEFAULT_GPU = "H200"  # the GPU the fake's hosts have, for SGLang's GPU-dependent choices
SUPPORTED_VERSIONS = ("0.5.10", "0.5.23")
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
_FAULT_PHASES_FAIL = ("load", "capture", "serve")
_FAULT_PHASES_HANG = ("load", "capture")


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


@dataclass(frozen=True)
class Flag:
    """One SGLang flag. ``kind`` is a type, or "switch" for store_true."""

    name: str
    kind: Any = str
    default: Any = None
    help: str = ""
    aliases: tuple[str, ...] = ()
    choices: Optional[tuple[str, ...]] = None
    since: str = "0.0.0"
    until: Optional[str] = None  # last version that has it
    nargs: Optional[str] = None

    def in_version(self, version: str) -> bool:
        v = version_tuple(version)
        if v < version_tuple(self.since):
            return False
        return self.until is None or v <= version_tuple(self.until)


def _f(name: str, kind: Any = str, default: Any = None, help: str = "", **kw: Any) -> Flag:
    return Flag(name, kind, default, help, **kw)


# SGLang's flags the sweep meets, and the common ones users pass (help texts abridged from SGLang).
SGLANG_FLAGS: tuple[Flag, ...] = (
    # model and tokenizer
    _f(
        "model-path",
        str,
        None,
        "The path of the model weights (local folder or Hugging Face repo ID).",
        aliases=("--model",),
    ),
    _f("tokenizer-path", str, None, "The path of the tokenizer."),
    _f("tokenizer-mode", str, "auto", "Tokenizer mode.", choices=("auto", "slow")),
    _f("skip-tokenizer-init", "switch", False, "Skip tokenizer init; pass input_ids in requests."),
    _f("load-format", str, "auto", "The format of the model weights to load."),
    _f("trust-remote-code", "switch", False, "Whether to allow custom models defined on the Hub."),
    _f("context-length", int, None, "The model's maximum context length (default: from config.json)."),
    _f("is-embedding", "switch", False, "Whether to use a CausalLM as an embedding model."),
    _f("revision", str, None, "The specific model version to use."),
    _f("dtype", str, "auto", "Data type for model weights and activations."),
    _f("kv-cache-dtype", str, "auto", "Data type for kv cache storage."),
    _f("quantization", str, None, "The quantization method."),
    _f("served-model-name", str, None, "Override the model name returned by the v1/models endpoint."),
    _f("chat-template", str, None, "The builtin chat template name or path of the chat template file."),
    _f("reasoning-parser", str, None, "Parser for reasoning models."),
    _f("tool-call-parser", str, None, "Parser for tool calls."),
    # HTTP server
    _f("host", str, "127.0.0.1", "The host of the HTTP server."),
    _f("port", int, 30000, "The port of the HTTP server."),
    _f("api-key", str, None, "Set API key of the server; also used by the OpenAI API compatible server."),
    _f(
        "admin-api-key",
        str,
        None,
        "Set admin API key for sensitive management endpoints. When set, admin endpoints "
        "require this key and do NOT accept --api-key.",
    ),
    _f("enable-metrics", "switch", False, "Enable log prometheus metrics."),
    _f("enable-cache-report", "switch", False, "Return number of cached tokens in usage.prompt_tokens_details."),
    _f("log-level", str, "info", "The logging level of all loggers."),
    _f("log-level-http", str, None, "The logging level of HTTP server."),
    _f("log-requests", "switch", False, "Log metadata, inputs, outputs of all requests."),
    _f("decode-log-interval", int, 40, "The log interval of decode batch."),
    _f("show-time-cost", "switch", False, "Show time cost of custom marks."),
    _f("watchdog-timeout", float, 300.0, "Set watchdog timeout in seconds."),
    _f("download-dir", str, None, "Model download directory for huggingface."),
    _f("random-seed", int, None, "The random seed."),
    # memory and scheduling
    _f(
        "mem-fraction-static",
        float,
        None,
        "The fraction of the memory used for static allocation (model weights and KV cache memory pool).",
    ),
    _f("max-running-requests", int, None, "The maximum number of running requests."),
    _f("max-total-tokens", int, None, "The maximum number of tokens in the memory pool."),
    _f("chunked-prefill-size", int, None, "The maximum number of tokens in a chunk for the chunked prefill."),
    _f("max-prefill-tokens", int, 16384, "The maximum number of tokens in a prefill batch."),
    _f("schedule-policy", str, "fcfs", "The scheduling policy of the requests."),
    _f("schedule-conservativeness", float, 1.0, "How conservative the schedule policy is."),
    _f("page-size", int, 1, "The number of tokens in a page."),
    _f("disable-radix-cache", "switch", False, "Disable RadixAttention for prefix caching."),
    _f("stream-interval", int, 1, "The interval (or buffer size) for streaming in terms of the token length."),
    _f("stream-output", "switch", False, "Whether to output as a sequence of disjoint segments."),
    _f(
        "incremental-streaming-output",
        "switch",
        False,
        "Whether to output as a sequence of disjoint segments (chunk text holds only the new text).",
    ),
    _f("enable-mixed-chunk", "switch", False, "Enabling mixing prefill and decode in a batch."),
    # parallelism
    _f("tp-size", int, 1, "The tensor parallelism size.", aliases=("--tensor-parallel-size",)),
    _f("dp-size", int, 1, "The data parallelism size.", aliases=("--data-parallel-size",)),
    _f("pp-size", int, 1, "The pipeline parallelism size.", aliases=("--pipeline-parallel-size",)),
    _f("ep-size", int, 1, "The expert parallelism size.", aliases=("--expert-parallel-size",)),
    _f("enable-ep-moe", "switch", False, "Enable expert parallelism for moe."),
    _f("enable-dp-attention", "switch", False, "Enable data parallelism for attention."),
    _f("nnodes", int, 1, "The number of nodes."),
    _f("node-rank", int, 0, "The node rank."),
    _f("dist-init-addr", str, None, "The host address for initializing distributed backend."),
    _f("base-gpu-id", int, 0, "The base GPU ID to start allocating GPUs from."),
    _f("gpu-id-step", int, 1, "The delta between consecutive GPU IDs that are used."),
    _f("device", str, None, "The device to use ('cuda', 'cpu', ...). Default: detected."),
    # kernels
    _f("attention-backend", str, None, "Choose the kernels for attention layers."),
    _f("prefill-attention-backend", str, None, "Choose the kernels for prefill attention layers."),
    _f("decode-attention-backend", str, None, "Choose the kernels for decode attention layers."),
    _f("sampling-backend", str, None, "Choose the kernels for sampling layers."),
    _f("moe-runner-backend", str, "auto", "Choose the runner backend for MoE."),
    _f(
        "disable-cuda-graph",
        "switch",
        False,
        "Disable cuda graph (0.5.23: deprecated, its only spelling on the "
        "command line; use --cuda-graph-backend-{decode,prefill}=disabled).",
    ),
    _f("cuda-graph-max-bs", int, None, "Set the maximum batch size for cuda graph.", until="0.5.22"),
    _f("cuda-graph-bs", int, None, "Set the list of batch sizes for cuda graph.", nargs="+"),
    _f("cuda-graph-max-bs-decode", int, None, "Set the maximum batch size for the decode cuda graph.", since="0.5.23"),
    _f(
        "cuda-graph-max-bs-prefill", int, None, "Set the maximum batch size for the prefill cuda graph.", since="0.5.23"
    ),
    _f(
        "cuda-graph-backend-decode",
        str,
        None,
        "CUDA graph backend for decode (disabled turns it off; default full).",
        since="0.5.23",
        choices=("full", "piecewise", "disabled"),
    ),
    _f("disable-custom-all-reduce", "switch", False, "Disable the custom all-reduce kernel and fall back to NCCL."),
    _f("enable-torch-compile", "switch", False, "Optimize the model with torch.compile."),
    _f("disable-overlap-schedule", "switch", False, "Disable the overlap scheduler."),
    _f("enable-nccl-nvls", "switch", False, "Enable NCCL NVLS for prefill heavy requests when available."),
    # speculative decoding
    _f("speculative-algorithm", str, None, "Speculative algorithm.", choices=SPEC_ALGORITHMS),
    _f(
        "speculative-draft-model-path",
        str,
        None,
        "The path of the draft model weights.",
        aliases=("--speculative-draft-model",),
    ),
    _f("speculative-draft-model-revision", str, None, "The specific draft model version to use."),
    _f("speculative-num-steps", int, None, "The number of steps sampled from draft model in Speculative Decoding."),
    _f("speculative-eagle-topk", int, None, "The number of tokens sampled from the draft model in eagle2 each step."),
    _f(
        "speculative-num-draft-tokens",
        int,
        None,
        "The number of tokens sampled from the draft model in Speculative Decoding.",
    ),
    _f(
        "speculative-accept-threshold-single",
        float,
        1.0,
        "Accept a draft token if its probability in the target model is greater than this threshold.",
    ),
    _f(
        "speculative-accept-threshold-acc",
        float,
        1.0,
        "The accept probability of a draft token is raised from its target probability p to min(1, p / threshold_acc).",
    ),
    _f("speculative-token-map", str, None, "The path of the draft model's small vocab table."),
    _f(
        "speculative-attention-mode",
        str,
        "prefill",
        "Attention backend for speculative decoding operations.",
        choices=("prefill", "decode"),
    ),
    _f(
        "speculative-ngram-min-match-window-size",
        int,
        1,
        "The minimum window size for pattern matching in ngram speculative decoding.",
    ),
    _f(
        "speculative-ngram-max-match-window-size",
        int,
        12,
        "The maximum window size for pattern matching in ngram speculative decoding.",
    ),
    _f("speculative-ngram-max-bfs-breadth", int, 10, "The maximum breadth for BFS in ngram speculative decoding."),
    _f("enable-multi-layer-eagle", "switch", False, "Enable multi-layer Eagle speculative decoding."),
    _f(
        "speculative-adaptive",
        "switch",
        False,
        "Enable adaptive speculative decoding that dynamically adjusts num_steps based on acceptance rate.",
        since="0.5.23",
    ),
    _f(
        "speculative-adaptive-config",
        str,
        None,
        "Path to a JSON config file for adaptive speculative decoding tuning knobs.",
        since="0.5.23",
    ),
    # PD disaggregation (the fake serves like a plain server; SGLang's rules read the mode)
    _f(
        "disaggregation-mode",
        str,
        "null",
        'Only used for PD disaggregation. "prefill" for prefill-only server, '
        'and "decode" for decode-only server. If not specified, it is not PD disaggregated',
        choices=("null", "prefill", "decode"),
    ),
)


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within [0, 1], got {text}")
    return value


def _accept_map(text: str) -> dict[str, float]:

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}); expected e.g. '{{\"EAGLE3\": 0.72}}'") from None
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in data.values()):
        raise argparse.ArgumentTypeError("expected a JSON object of draft-model-path substring -> rate in [0, 1]")
    return {str(k): float(v) for k, v in data.items()}


# The fake's own flags. dest names start with fake_ so they never collide with SGLang's.
_FAKE_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--fake-version",
        dict(
            default=DEFAULT_VERSION,
            choices=SUPPORTED_VERSIONS,
            help="SGLang version to imitate (flag names, log wording, /server_info version).",
        ),
    ),
    (
        "--fake-speed",
        dict(
            type=_positive_float,
            default=1.0,
            help="Divide every duration (startup phases and decode steps) by this factor.",
        ),
    ),
    (
        "--fake-startup-speed",
        dict(type=_positive_float, default=None, help="Speed factor for startup only (default: --fake-speed)."),
    ),
    (
        "--fake-accept-rate",
        dict(type=_rate, default=None, help="Per-token chain acceptance of the drafter (default 0.7; NGRAM 0.35)."),
    ),
    (
        "--fake-accept-map",
        dict(
            type=_accept_map,
            default=None,
            help="JSON object: draft-model-path substring -> acceptance rate "
            "(the longest matching key wins; 'ngram' keys NGRAM).",
        ),
    ),
    (
        "--fake-ledger",
        dict(default=None, help="Directory of the fake GPU ledger (default: $SWEEP_FAKE_GPU_LEDGER; none when unset)."),
    ),
    (
        "--fake-zombie",
        dict(
            action="store_true",
            help="Children ignore SIGTERM, do not watch the parent, and outlive it; the parent never kills them.",
        ),
    ),
    (
        "--fake-zombie-lifetime",
        dict(
            type=_positive_float, default=600.0, help="Seconds an orphaned zombie child lives before exiting (safety)."
        ),
    ),
    (
        "--fake-check-paths",
        dict(
            action="store_true",
            help="Fail at load, as SGLang does, when --model-path or --speculative-draft-model-path does not exist.",
        ),
    ),
    (
        "--fake-fail-at",
        dict(choices=_FAULT_PHASES_FAIL, default=None, help="Fail with SGLang's real error at this phase."),
    ),
    (
        "--fake-hang-at",
        dict(choices=_FAULT_PHASES_HANG, default=None, help="Stop logging at this phase and never serve."),
    ),
    (
        "--fake-crash-after-requests",
        dict(type=int, default=None, metavar="N", help="The scheduler crashes once N requests have finished."),
    ),
    (
        "--fake-architecture",
        dict(
            default=None,
            help="HF architecture of the target (default: config.json in --model-path, else guessed from its name).",
        ),
    ),
    (
        "--fake-gpu",
        dict(
            default=DEFAULT_GPU,
            help="The GPU the fake host has (H200, B200, A100, ...): "
            "SGLang's attention backend and the rules that follow from it "
            "depend on it (--device cpu: none).",
        ),
    ),
    (
        "--fake-weights-gb",
        dict(type=_positive_float, default=72.5, help="GPU memory the target's weights take on each rank, GB."),
    ),
    ("--fake-gpu-mem-gb", dict(type=_positive_float, default=139.81, help="Memory of each fake GPU, GB.")),
)

_WELL_FORMED = re.compile(r"^--[A-Za-z0-9][A-Za-z0-9_.-]*(=.*)?$")
_NUMBER = re.compile(r"^-\d")


@dataclass
class Parsed:
    ns: argparse.Namespace
    unknown: list[str] = field(default_factory=list)  # well-formed flags nobody here knows, as given
    version: str = DEFAULT_VERSION


def pick_version(argv: Sequence[str]) -> str:
    """The --fake-version an argv asks for (needed before the main parser: flags differ)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--fake-version", default=DEFAULT_VERSION)
    ns, _ = pre.parse_known_args(list(argv))
    return ns.fake_version if ns.fake_version in SUPPORTED_VERSIONS else DEFAULT_VERSION


def _algorithm_type(version: str) -> Callable[[str], str]:
    # 0.5.23 upper-cases the algorithm and checks it while resolving (ValueError: Unknown speculative
    # algorithm name); 0.5.10 takes it as written, and argparse checks the choices
    return str.upper if version_tuple(version) >= (0, 5, 23) else str


def prog_for(version: str) -> str:
    """The name SGLang's argparse gives itself, in its ``usage:`` and ``PROG: error: ...`` lines:
    ``sglang serve`` where prepare_server_args names its parser (0.5.23-era main, 7f8f030:
    ``argparse.ArgumentParser(prog="sglang serve")``), else argparse's default, argv[0]'s basename,
    which is ``launch_server.py`` under ``python -m sglang.launch_server``."""
    return "sglang serve" if version_tuple(version) >= (0, 5, 23) else "launch_server.py"


def build_parser(version: str = DEFAULT_VERSION) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog_for(version),
        description=f"A fake SGLang {version} server (no GPU): same command line, log, HTTP API and "
        "process tree as `python -m sglang.launch_server`, timed by a performance model.",
    )
    for flag in SGLANG_FLAGS:
        if not flag.in_version(version):
            continue
        names = [f"--{flag.name}", *flag.aliases]
        if flag.kind == "switch":
            parser.add_argument(*names, action="store_true", help=flag.help)
            continue
        kind = _algorithm_type(version) if flag.name == "speculative-algorithm" else flag.kind
        kw: dict[str, Any] = dict(type=kind, default=flag.default, help=flag.help)
        choices = flag.choices or flagtypes.CHOICES.get(version, {}).get(flag.name)  # SGLang's own, where it has them
        if choices and not (flag.name == "speculative-algorithm" and version_tuple(version) >= (0, 5, 23)):
            kw["choices"] = choices
        if flag.nargs:
            kw["nargs"] = flag.nargs
        parser.add_argument(*names, **kw)
    fake = parser.add_argument_group("fake server (not SGLang)")
    for name, kw in _FAKE_FLAGS:
        fake.add_argument(name, **kw)
    return parser


def _split_unknown(parser: argparse.ArgumentParser, rest: list[str], version: str = DEFAULT_VERSION) -> list[str]:
    """Well-formed unknown flags (with their value, if any) -> their names; anything else is an error,
    and so is a value SGLang's own parser would refuse for a flag the fake does not model
    (``sweep.sglang.flagtypes``: an int flag's ``lots``, a switch's value, a choice it lacks)."""
    names: list[str] = []
    newer: list[str] = []  # SGLang's flags of another version only: this version's argparse knows none of them
    i = 0
    while i < len(rest):
        tok = rest[i]
        if not _WELL_FORMED.match(tok):
            parser.error(f"unrecognized arguments: {' '.join(rest[i:])}")
        name, eq, value = tok.partition("=")
        start = i
        if not eq and i + 1 < len(rest) and (not rest[i + 1].startswith("-") or _NUMBER.match(rest[i + 1])):
            i += 1  # its value
            value, eq = rest[i], "="
        if _of_another_version(name[2:], version):
            newer += rest[start : i + 1]
            i += 1
            continue
        names.append(name)
        refused = flagtypes.refusal(name[2:], value if eq else True, version)
        if refused:
            parser.error(refused[0])
        i += 1
    if newer:
        parser.error(f"unrecognized arguments: {' '.join(newer)}")
    return names


def _of_another_version(name: str, version: str) -> bool:
    """A flag of SGLang's that ``version`` lacks (``--speculative-adaptive`` for 0.5.10): neither one of its
    flags nor a prefix of one (argparse's abbreviations), but another version's (sweep.sglang.flagnames)."""
    mine = flagnames.FLAGS.get(version)
    if mine is None or name in mine or any(f.startswith(name) for f in mine):
        return False
    return any(name in flags for v, flags in flagnames.FLAGS.items() if v != version)


def parse(argv: Sequence[str]) -> Parsed:
    """Parse a launch_server argv. Exits 2 with a usage message on malformed input (argparse)."""
    version = pick_version(argv)
    parser = build_parser(version)
    ns, rest = parser.parse_known_args(list(argv))
    unknown = _split_unknown(parser, rest, version)
    if ns.model_path is None:
        parser.error("the following arguments are required: --model-path/--model")
    return Parsed(ns, unknown, version)
