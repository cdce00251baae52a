"""``python -m sweep bench --url URL ...``: benchmark a server that is already running.

Every option defaults to ``BenchSettings``' default (the same as an experiment file's
``benchmark`` section), prints the tables, and with ``--out DIR`` writes ``requests.parquet``,
``single_stream.parquet``, ``levels.parquet`` and ``metrics.parquet`` (the server's raw
``/metrics`` around each level) there, and the same tables with a ``points`` row as a results
directory (``DIR/<table>/bench.parquet``) that ``sweep.results.load``, ``python -m sweep query``
and ``report`` read. Errors are ``SweepError``s, mapped to a
message and exit code by ``sweep.cli`` (exit 6 when the server cannot be reached).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sweep.bench.client import APIS, Endpoint, auth_headers
from sweep.bench.power import PowerSource
from sweep.bench.prompts import BUILTIN
from sweep.bench.report import print_report
from sweep.bench.runner import TABLE_NAMES, run
from sweep.core import (
    BenchError,
    BenchSettings,
    ConfigError,
    HostProgress,
    LevelProgress,
    RunProgress,
    ServerFlags,
    output_console,
    workload_spec,
)
from sweep.results import check_benchmark_dir, records, writer

_D = BenchSettings()
_API_KEY_ENV = "SGLANG_API_KEY"  # SGLang itself reads no variable for its key; this one is the benchmark's
_ADMIN_KEY_ENV = "SGLANG_ADMIN_API_KEY"  # the same for the server's --admin-api-key


def _levels(text: str) -> list[int]:
    """``"1,2,5"`` -> [1, 2, 5]; ``""``/``"none"`` -> [] (no concurrency sweep)."""
    if text.strip().lower() in ("", "none"):
        return []
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers, e.g. 1,8,64") from None


def _rates(text: str) -> list[float]:
    """``"1,2,4.5"`` -> [1.0, 2.0, 4.5]; ``""``/``"none"`` -> [] (no open-loop levels)."""
    if text.strip().lower() in ("", "none"):
        return []
    try:
        return [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of rates, e.g. 1,2,4") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m sweep bench``."""
    parser.description = (
        "Benchmark a running SGLang (or OpenAI-compatible) server: single stream, then a concurrency sweep."
    )
    parser.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:30000")
    parser.add_argument(
        "--api-key",
        default=None,
        metavar="KEY",
        help=f"the server's --api-key, sent as Authorization: Bearer KEY (default: ${_API_KEY_ENV}; "
        "the variable keeps the key out of the process list)",
    )
    parser.add_argument(
        "--admin-api-key",
        default=None,
        metavar="KEY",
        help=f"the server's --admin-api-key, which its admin routes (/flush_cache) want instead "
        f"(default: ${_ADMIN_KEY_ENV})",
    )
    g = parser.add_argument_group("single stream")
    g.add_argument(
        "--runs",
        type=int,
        help=f"measured runs, one request at a time (default {_D.single_stream.runs}; 0 skips them and their warmup)",
    )
    g.add_argument(
        "--warmup",
        type=int,
        help=f"warmup runs before them, left out of the figures (default {_D.single_stream.warmup})",
    )
    g.add_argument(
        "--single-max-tokens",
        type=int,
        help=f"tokens per single-stream request (default {_D.single_stream.max_tokens})",
    )
    g = parser.add_argument_group("concurrency sweep")
    g.add_argument(
        "--levels",
        type=_levels,
        help="concurrency levels, comma-separated (default "
        f"{','.join(map(str, _D.concurrency.levels))}; 'none' skips the sweep)",
    )
    g.add_argument("--requests-per-level", type=int, help="requests sent at each level (default: rounds x concurrency)")
    g.add_argument(
        "--rounds",
        type=int,
        help=f"with no --requests-per-level: requests = rounds x C (default {_D.concurrency.rounds})",
    )
    g.add_argument(
        "--max-tokens", type=int, help=f"tokens per request in the sweep (default {_D.concurrency.max_tokens})"
    )
    g.add_argument(
        "--repeats",
        type=int,
        help=f"measure each level this many times, back to back (default {_D.repeats}: once)",
    )
    g = parser.add_argument_group("open loop (requests at drawn arrival times, after the concurrency sweep)")
    g.add_argument(
        "--rates",
        type=_rates,
        help="request rates in requests/s, comma-separated, one open-loop level each (default none)",
    )
    g.add_argument(
        "--arrival",
        choices=("poisson", "gamma"),
        help=f"arrival gaps: poisson (exponential) or gamma of shape --burstiness (default {_D.open_loop.arrival})",
    )
    g.add_argument(
        "--burstiness", type=float, help="gamma's shape: < 1 burstier, > 1 more regular (default 1: Poisson)"
    )
    g.add_argument(
        "--rate-requests",
        type=int,
        help=f"requests per rate level (default {_D.open_loop.requests}; with --duration: at most)",
    )
    g.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="seconds of arrivals per rate level (with --rate-requests: whichever ends first)",
    )
    g.add_argument(
        "--max-in-flight", type=int, help="at most this many requests unanswered; later ones wait (default: no cap)"
    )
    g.add_argument(
        "--ramp-up", type=float, metavar="SECONDS", help="the rate climbs from 0 over these first seconds (default 0)"
    )
    g.add_argument(
        "--replay",
        action="store_true",
        help="a trace workload: one more level at the trace's own timing (scaled by its scale=)",
    )
    g = parser.add_argument_group("requests")
    g.add_argument(
        "--prompts",
        help=f'built-in set ({", ".join(BUILTIN)}) or a JSONL file of {{"prompt": ...}} lines (default {_D.prompts})',
    )
    g.add_argument(
        "--workload",
        metavar="SPEC",
        help="what the requests are, instead of --prompts: sharegpt:FILE, sharegpt-multiturn:FILE, "
        "synthetic:in=uniform(100,400),out=normal(200,50), "
        "shared-prefix:groups=8,prefix=1024,questions=16,in=64, trace:FILE,scale=0.5 "
        "(sweep/core/workload_spec.py; docs/experiment-file.md, 'Workloads')",
    )
    g.add_argument("--api", choices=APIS, help="route: generate = SGLang's /generate (default), completions, chat")
    g.add_argument("--model", help="'model' of OpenAI-route requests (default: the server's served_model_name)")
    g.add_argument("--seed", type=int, help=f"seeds the prompt choice (default {_D.seed})")
    g.add_argument("--temperature", type=float, help=f"sampling temperature (default {_D.temperature})")
    g.add_argument(
        "--no-ignore-eos", action="store_true", help="let requests stop at EOS (default: exactly max tokens)"
    )
    g.add_argument("--timeout", type=float, help=f"seconds per request (default {_D.request_timeout_s:g})")
    g.add_argument("--no-flush", action="store_true", help="do not POST /flush_cache before each level")
    g.add_argument("--no-server-metrics", action="store_true", help="do not scrape /metrics around each level")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write the requests, single_stream, levels and metrics tables "
        "into DIR as Parquet files, and DIR as a results directory "
        "(sweep query/report DIR)",
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress line")
    parser.add_argument(
        "--power",
        metavar="SOURCE",
        type=_power_source_arg,
        help="sample GPU power during each level (the levels' power_*/energy_* columns): "
        "nvml (this machine's GPUs; nvml:0,1 for some of them) or ledger:DIR "
        "(the fake server's GPU ledger)",
    )


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    """``BenchSettings`` with every option the user gave, defaults for the rest."""
    s = BenchSettings()
    ss, cc, ol = s.single_stream, s.concurrency, s.open_loop
    for obj, attr, value in (
        (ss, "runs", args.runs),
        (ss, "warmup", args.warmup),
        (ss, "max_tokens", args.single_max_tokens),
        (cc, "levels", args.levels),
        (cc, "requests_per_level", args.requests_per_level),
        (cc, "rounds", args.rounds),
        (cc, "max_tokens", args.max_tokens),
        (s, "repeats", getattr(args, "repeats", None)),
        (s, "prompts", args.prompts),
        (s, "api", args.api),
        (s, "model", args.model),
        (s, "seed", args.seed),
        (s, "temperature", args.temperature),
        (s, "request_timeout_s", args.timeout),
        (s, "rates", getattr(args, "rates", None)),
        (ol, "arrival", getattr(args, "arrival", None)),
        (ol, "burstiness", getattr(args, "burstiness", None)),
        (ol, "requests", getattr(args, "rate_requests", None)),
        (ol, "duration_s", getattr(args, "duration", None)),
        (ol, "max_in_flight", getattr(args, "max_in_flight", None)),
        (ol, "ramp_up_s", getattr(args, "ramp_up", None)),
    ):
        if value is not None:
            setattr(obj, attr, value)
    if getattr(args, "workload", None):
        if args.prompts is not None:
            raise ConfigError(
                "--prompts and --workload both say what to send",
                fix="give one (--workload prompts:FILE is --prompts FILE)",
            )
        s.workload = workload_spec.settings(args.workload)
    if args.runs == 0 and args.warmup is None:
        ss.warmup = 0  # no single stream: nothing to warm up for (an explicit --warmup still runs)
    if getattr(args, "duration", None) is not None and getattr(args, "rate_requests", None) is None:
        ol.requests = None  # a duration alone: as many requests as it holds
    if getattr(args, "burstiness", None) not in (None, 1.0) and getattr(args, "arrival", None) is None:
        ol.arrival = "gamma"  # a burstiness is gamma's shape
    ol.replay = bool(getattr(args, "replay", False))
    s.ignore_eos = not args.no_ignore_eos
    s.flush_between_levels = not args.no_flush
    s.server_metrics = not args.no_server_metrics
    return s


def _power_source_arg(text: str) -> str:
    """``--power``'s value, checked for its form (the source opens in ``sweep.host.gpu.power_source``)."""
    kind, _, rest = text.partition(":")
    if kind == "nvml" and (not rest or all(x.strip().isdigit() for x in rest.split(","))):
        return text
    if kind == "ledger" and rest:
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not a power source: nvml, nvml:0,1 (GPU indices) or ledger:DIR")


def _describe(info: HostProgress) -> str:
    if isinstance(info, LevelProgress) and info.rate is not None:
        return (
            f"{info.rate:g} req/s: {info.done}/{info.of} requests"
            if info.rate
            else f"trace: {info.done}/{info.of} requests"
        )
    if isinstance(info, LevelProgress):
        return f"C={info.concurrency}: {info.done}/{info.of} requests"
    if isinstance(info, RunProgress):
        return f"{info.stage} run {info.run}/{info.of}"
    return info.stage


def _check_auth(url: str, key: str | None, timeout_s: float = 30.0) -> None:
    """Fail at once, before any measurement, when the server refuses the key (or wants one):
    ``GET /v1/models``, which SGLang guards with its ``--api-key``. Anything else (no such route,
    not reachable) is left to the benchmark's own probe."""
    import httpx  # lazy: only this path needs it

    try:
        r = httpx.get(url.rstrip("/") + "/v1/models", headers=auth_headers(key), timeout=timeout_s, trust_env=False)
    except httpx.HTTPError:
        return
    if r.status_code in (401, 403):
        what = "401 Unauthorized" if r.status_code == 401 else "403 Forbidden"
        sent = "refuses the key given" if key else "wants an API key and none was given"
        raise BenchError(
            f"the server at {url} answered {what} to GET /v1/models: it {sent}",
            fix=f"pass the server's --api-key with --api-key KEY or in ${_API_KEY_ENV}",
        )


def span(requests) -> tuple[float | None, float | None]:
    """The first send and the last answer of a requests table (None, None without requests)."""
    ends = [
        (s, s + (lat or 0.0))
        for s, lat in zip(requests.column("start_at").to_pylist(), requests.column("latency_s").to_pylist())
        if s is not None
    ]
    return min((a for a, _ in ends), default=None), max((b for _, b in ends), default=None)


_SIZE_FLAGS = (
    ("tp_size", "tp-size"),
    ("pp_size", "pp-size"),
    ("dp_size", "dp-size"),
    ("nnodes", "nnodes"),
    ("base_gpu_id", "base-gpu-id"),
)  # SGLang's server args -> its flags


def server_flags(info: dict) -> ServerFlags:
    """The server's parallelism and device as its flags (``tp-size: 8`` ...), from its ``/server_info``."""
    flags: dict[str, Any] = {}
    for key, flag in _SIZE_FLAGS:
        value = info.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            flags[flag] = value
    if info.get("enable_dp_attention") is True:
        flags["enable-dp-attention"] = True
    if isinstance(info.get("device"), str):
        flags["device"] = info["device"]
    return ServerFlags(flags)


def server_argv(info: dict) -> tuple[list[str], int | None]:
    """The server's parallelism as its command line would say it (``--tp-size 8`` ...), from its
    ``/server_info`` (``server_flags``), and the GPUs that makes on this host (0 for a CPU server;
    None when the server said nothing of it): what a per-GPU figure is divided by (``ServerFlags.node_gpus``)."""
    flags = server_flags(info)
    if flags.is_cpu:
        return flags.args(), 0
    return flags.args(), (flags.node_gpus[1] if "tp-size" in flags else None)


def write_out(out: str, result, *, url: str) -> dict[str, Path]:
    """``--out DIR``: the four tables as DIR/<table>.parquet (as ever; their paths are returned), and
    DIR as a results directory (``sweep.results.load``, ``query``, ``report``): the same tables in
    DIR/<table>/ and a points row for the run, from its first send to its last answer
    (``sweep.results.writer.write_benchmark``)."""

    info = result.server_info or {}
    version = info.get("version") if isinstance(info.get("version"), str) else None
    started, ended = span(result.requests)
    argv, gpus = server_argv(info)
    row = records.benchmark_row(
        flags=server_flags(info).text(),
        label=f"bench {urlsplit(url).netloc.rpartition('@')[2]}",
        sglang_version=version,
        started_at=started,
        ended_at=ended,
        argv=argv,
        gpu_count=gpus,
    )
    writer.check_benchmark_dir(out)  # a sweep's directory: nothing written
    try:
        paths = result.write(out)
        writer.write_benchmark(out, {name: getattr(result, name) for name in TABLE_NAMES}, row)
    except OSError as e:
        raise BenchError(f"cannot write results to {out!r}: {e}", fix="pass a writable directory to --out") from e
    return paths


def run_cli(args: argparse.Namespace, power: PowerSource | None = None) -> int:
    """Run the benchmark the options describe; 0 when every request succeeded, 1 otherwise.
    ``power``: what ``--power`` names, opened by the caller (``sweep.host.gpu.power_source``: the
    GPU probes live in the host layer, above this one)."""

    settings = settings_from_args(args)
    if args.out:  # a sweep's results directory is refused before the benchmark, not after it
        check_benchmark_dir(args.out)
    console = output_console(highlight=False)
    key = getattr(args, "api_key", None) or os.environ.get(_API_KEY_ENV) or None
    admin = getattr(args, "admin_api_key", None) or os.environ.get(_ADMIN_KEY_ENV) or None
    _check_auth(args.url, key)
    server = Endpoint(args.url, api_key=key, admin_key=admin)  # every request sends the key, /flush_cache the admin one
    if args.quiet or not console.is_terminal:
        result = run(server, settings, power=power)
    else:
        with console.status(f"benchmarking {args.url}") as status:
            result = run(server, settings, progress=lambda i: status.update(f"{args.url}  {_describe(i)}"), power=power)
    print_report(result, console)
    if args.out:
        paths = write_out(args.out, result, url=args.url)
        console.print(f"wrote {', '.join(str(p) for p in paths.values())}")
        console.print(
            f"{args.out} is a results directory too: python -m sweep report {args.out}, "
            f'python -m sweep query {args.out} "SELECT * FROM levels"',
            soft_wrap=True,
        )
    failed = result.requests.num_rows - sum(result.requests.column("ok").to_pylist())
    return 1 if failed else 0
