"""Arguments and entry points of ``python -m sweep report``, ``query`` and ``history``.

The main command line (sweep/cli.py) adds these to its subparsers and calls ``run_*``; errors are
raised as ``sweep.core.errors.SweepError`` subclasses for it to print and map to an exit code: a missing
directory, a file, or one no sweep wrote is a ResultsError (exit 5), and what the analysis cannot
answer an AnalysisError (exit 7: QueryError for bad SQL, UnknownFormatError, UnknownMetricError, SLOError for
a bad --slo).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape

from sweep.analysis import history, query, render
from sweep.core import ConfigError, SLOError, atomic, output_console, parse_slo, plural


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """``report DIR [--vs OTHER] [--out DIR] [--no-plots] [--nccl-reference PROFILE] [--slo SLO]...
    [--frontier-by AXIS] [--quiet]``."""
    parser.add_argument("directory", metavar="DIR", help="a results directory (e.g. results/k26_eagle-dryrun)")
    parser.add_argument(
        "--vs",
        metavar="OTHER_DIR",
        default=None,
        help="compare with another sweep: the same labels side by side, with the change",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="where report.md, report.html and the plots go (default: DIR/report; where DIR "
        "cannot be written, ~/.cache/sweep/reports/<name>-<hash>)",
    )
    parser.add_argument(
        "--no-plots", action="store_true", help="write report.md without PNG plots, and report.html without charts"
    )
    parser.add_argument(
        "--nccl-reference",
        metavar="PROFILE",
        default=None,
        dest="env_reference",
        help="NCCL profile the others are compared with, as in the labels "
        "(e.g. nccl=default; default: the one named default/none/off)",
    )
    parser.add_argument(
        "--slo",
        metavar="SLO",
        action="append",
        default=None,
        help="judge every configuration by this SLO instead of the experiment's benchmark.slo "
        "(repeatable): '[NAME:] LIMIT,...' with limits such as ttft_p90<=2s, tpot_p90<=50ms, "
        "latency_p99<=30s, tok_s_p10>=20 (90%% of requests at 20 tok/s or more)",
    )
    parser.add_argument(
        "--frontier-by",
        metavar="AXIS",
        default=None,
        help="the frontier's panels: one per value of this grid axis, or 'all' for one (default: one per NCCL profile)",
    )
    parser.add_argument("--quiet", action="store_true", help="write the files and print only where they are")
    at = parser.add_mutually_exclusive_group()
    at.add_argument(
        "--at",
        metavar="C=N",
        default=None,
        help="the answer at your load instead of the report: the setup to run at this concurrency "
        "(requests in flight, e.g. C=40) with its interval, each policy's tier there and each SLO's "
        "pick, saying whether a level measured it or it is interpolated between two; writes nothing",
    )
    at.add_argument(
        "--rate",
        metavar="R/s",
        default=None,
        help="as --at, for a request rate (e.g. 3/s, 180/min): each configuration at the concurrency "
        "where its measured request throughput reaches the rate, the fastest per user first",
    )


def run_report(args: argparse.Namespace) -> int:
    """Build the report, write DIR/report/report.md (plots beside it) and report.html, print it; returns 0.
    With ``--at`` or ``--rate``: print the answer at that load only, writing nothing."""
    from sweep.analysis import report  # matplotlib: only the report needs it, not `query`

    slos = _slos(args.slo)
    if getattr(args, "at", None) is not None or getattr(args, "rate", None) is not None:
        return _run_at_load(args, slos)
    written = report.publish(
        args.directory,
        args.out,
        with_plots=not args.no_plots,
        env_reference=args.env_reference,
        vs=args.vs,
        slos=slos,
        frontier_by=args.frontier_by,
    )
    built, path = written.report, written.path
    # a pipe or a file has no width: give tables room instead of rich's 80 columns
    console = output_console()
    if not args.quiet:
        render.terminal(built.sections, console, image_dir=f"{path.parent}/")
    if written.moved:
        console.print(f"note: {escape(written.moved)}", highlight=False, soft_wrap=True)
    configs = (
        f"; the policies' SGLang configs beside it: {escape(', '.join(sorted(built.files)))}" if built.files else ""
    )
    console.print(
        f"report written to {escape(str(path))} ({plural(len(built.images), 'plot')}) and "
        f"{escape(str(path.with_suffix('.html')))}{configs}",
        highlight=False,
        soft_wrap=True,
    )
    return 0


def _run_at_load(args: argparse.Namespace, slos: list | None) -> int:
    """``report DIR --at C=40`` / ``--rate 3/s``: the answer at one load (sweep/analysis/at_load.py)."""
    from sweep.analysis import at_load, findings, slo  # lazy: the analysis loads only when the command runs
    from sweep.results import check_sweep_dir, load  # lazy: as the line above

    directory = Path(args.directory)
    check_sweep_dir(directory)  # a missing or wrong directory: exit 5, nothing created
    # a bad value: exit 7 before anything is read
    c = at_load.parse_concurrency(args.at) if args.at is not None else None
    rate = at_load.parse_rate(args.rate) if c is None else 0.0
    tables = load(directory)
    judged = slo.from_experiment(directory) if slos is None else slos
    f = findings.analyze(tables, env_reference=args.env_reference, slos=judged)
    lines = at_load.at_concurrency(f, c) if c is not None else at_load.at_rate(f, at_load.request_rates(tables), rate)
    console = output_console()
    for line in lines:
        console.print(escape(line), highlight=False, soft_wrap=True)
    return 0


def _slos(texts: list[str] | None) -> list | None:
    """``--slo`` texts as SLOs (None when none given); a bad or twice-named one is an SLOError (exit 7)."""

    try:
        slos = None if not texts else [parse_slo(text) for text in texts]
    except ConfigError as e:  # in the experiment file a bad SLO is bad config (2); here the analysis cannot answer
        raise SLOError(e.message, fix=e.fix) from None
    if slos:
        names = [s.name for s in slos]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SLOError(
                f"--slo names {', '.join(map(repr, dupes))} more than once",
                fix="give each SLO its own name: --slo 'strict: ...' --slo 'loose: ...'",
            )
    return slos


def add_query_arguments(parser: argparse.ArgumentParser) -> None:
    """``query DIR [DIR ...] "SQL" [--format table|csv|json|ndjson|parquet|markdown] [--output FILE] [--max-rows N]``."""
    parser.add_argument(
        "directory",
        metavar="DIR",
        nargs="+",
        help="a results directory; several: every table gets a first column results_dir "
        "(the directory), and the history views compare them",
    )
    parser.add_argument(
        "sql",
        metavar="SQL",
        help="a query over points, single_stream, levels, requests, metrics (and the views "
        "speedup, level_speedups, best_per_level, crossover, rate_levels; runs, picks, history, changes)",
    )
    # no argparse choices: an unknown format is the analysis's UnknownFormatError (exit 7), not a usage error (2)
    parser.add_argument(
        "--format",
        metavar="FORMAT",
        default=None,
        dest="fmt",
        help=f"output format: {', '.join(query.FORMATS)} (default: what --output's suffix "
        "says, .parquet .csv .json .ndjson/.jsonl .md .txt; else table)",
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        default=None,
        help="write there instead of stdout (needed for parquet on a terminal)",
    )
    parser.add_argument("--max-rows", type=int, default=100, help="rows shown by --format table")


def run_query(args: argparse.Namespace) -> int:
    """Run the query and write its result; returns 0."""
    directories = args.directory[0] if len(args.directory) == 1 else args.directory
    frame = query.query(directories, args.sql, args.fmt, args.output, max_rows=args.max_rows)
    if args.output is not None:  # stderr: stdout stays the result's alone
        fmt = query.output_format(args.fmt, args.output)
        print(f"{plural(frame.height, 'row')} written to {args.output} ({fmt})", file=sys.stderr, flush=True)
    return 0


def add_history_arguments(parser: argparse.ArgumentParser) -> None:
    """``history [RESULTS_ROOT ...] [--experiment NAME] [--slo SLO]... [--min-change PCT] [--out FILE]``."""
    parser.add_argument(
        "roots",
        metavar="RESULTS_ROOT",
        nargs="*",
        default=["results"],
        help="a folder of results directories (default: results), or results directories",
    )
    parser.add_argument("--experiment", metavar="NAME", default=None, help="only the runs of this experiment")
    parser.add_argument(
        "--slo",
        metavar="SLO",
        action="append",
        default=None,
        help="pick the configuration to deploy by this SLO instead of each experiment's "
        "benchmark.slo (repeatable; as report --slo)",
    )
    parser.add_argument(
        "--min-change",
        metavar="PCT",
        type=float,
        default=0.0,
        help="flag a regression or improvement only when the figure moved by at least PCT "
        "percent, besides beyond noise (default: 0, any change beyond noise)",
    )
    parser.add_argument("--out", metavar="FILE", default=None, help="also write the history as Markdown there")


def run_history(args: argparse.Namespace) -> int:
    """Print the history of the runs under the roots (and write it to --out); returns 0."""

    built = history.build(
        args.roots, experiment=args.experiment, slos=_slos(args.slo), min_change=args.min_change / 100
    )
    sections = built.sections()
    console = output_console()
    render.terminal(sections, console)
    if args.out:
        try:
            atomic.write_text(Path(args.out), render.markdown(sections))
        except OSError as e:  # a folder that cannot be written: exit 7 naming it, the history printed above
            raise query.cannot_write(Path(args.out), e) from None
        console.print(f"history written to {escape(args.out)}", highlight=False, soft_wrap=True)
    return 0
