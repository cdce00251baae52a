"""Command line: parse arguments, call the API, map errors to messages and exit codes.

    python -m sweep CONFIG [key=value ...] [--plan [--json]] [--dry-run | --local | --fake] ...
    python -m sweep bench --url URL ...
    python -m sweep confirm DIR [--only LABEL-GLOB] [--retry-failed] [--force]
    python -m sweep report DIR [--vs OTHER]
    python -m sweep query DIR [DIR ...] "SQL"
    python -m sweep history [RESULTS_ROOT]
    python -m sweep hosts
    python -m sweep check-drafter TARGET DRAFTER [--algorithm EAGLE3]

Exit codes: 0 success; 1 a point failed (the sweep finished); 2 bad config; 3 invalid points;
4 no cluster or no hosts; 5 unusable results directory; 6 benchmark could not start; 7 the analysis
cannot answer (bad SQL, unknown metric or output format); 70 an internal error (a bug: one line,
the traceback in a file); 130 interrupted; 141 the output's reader went away (``| head``).

The sweep itself is ``sweep.api`` (``sweep.run``); this module parses, prints what the API returns
(the plan, the end-of-sweep summary) and maps the result to an exit code.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import json
import os
import platform
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from rich.console import Console
from rich.markup import escape

from sweep.core import BUG_EXIT_CODE, ConfigError, SweepError, kind, lines, output_console

if TYPE_CHECKING:
    from sweep.api import Summary, SweepResult

SUBCOMMANDS = ("bench", "confirm", "report", "query", "history", "hosts", "check-drafter")
_READER_GONE_EXIT_CODE = 141  # 128 + SIGPIPE: the reader of the output went away (`| head`)
_REPORT_BUGS_AT = "the sweep project's issue tracker (README: Reporting a bug)"
_results_logs: list[Path] = []  # the running sweep's DIR/logs, once known: where an internal error's traceback goes


class _Parser(argparse.ArgumentParser):
    """argparse, with a "did you mean" for a mistyped option (``--dryrun``: ``--dry-run``) and, with no
    arguments at all, what to run rather than a list of required names."""

    def error(self, message: str) -> NoReturn:
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if unknown:
            options = [o for a in self._actions for o in a.option_strings]
            hints = []
            for arg in unknown.group(1).split():
                close = difflib.get_close_matches(arg.split("=")[0], options, n=1, cutoff=0.6)
                if close:
                    hints.append(f"{arg}: did you mean {close[0]}?")
            if hints:
                message += " (" + "; ".join(hints) + ")"
        elif "required: config" in message:
            message = (
                "name an experiment file, e.g. python -m sweep experiments/k26_eagle.yaml --dry-run "
                f"(other commands: {', '.join(SUBCOMMANDS)})"
            )
        super().error(message)


def _run_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m sweep",
        description="Launch, benchmark and record an SGLang server for every grid point of an experiment. "
        f"Other commands: {', '.join(SUBCOMMANDS)} (python -m sweep COMMAND --help).",
    )
    p.add_argument("config", help="experiment file, e.g. experiments/k26_eagle.yaml")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="override any key of the file, e.g. benchmark.single_stream.runs=3",
    )
    p.add_argument("--plan", action="store_true", help="print the validated plan and exit; nothing is launched")
    p.add_argument("--json", action="store_true", help="with --plan: print the plan as one JSON object")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="local Ray, simulated hosts and the fake SGLang server; results in results/<name>-dryrun",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="a real sweep on this machine: local Ray, local.hosts hosts, the experiment's own launcher "
        "(real SGLang), nothing scaled; results in results/<name>-local",
    )
    p.add_argument("--fake", action="store_true", help="use the fake SGLang server on the real cluster's hosts")
    p.add_argument(
        "--skip-invalid",
        action="store_true",
        help="record points that break SGLang's rules as invalid and run the rest",
    )
    p.add_argument("--retry-failed", action="store_true", help="run failed points again (ok points are kept)")
    p.add_argument("--force", action="store_true", help="run every point again, even those with an ok result")
    p.add_argument(
        "--only",
        action="append",
        metavar="LABEL-GLOB",
        default=[],
        help="run only points whose label matches, e.g. 'drafter=none*' (repeatable)",
    )
    p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or auto)")
    return p


def _command_parser(name: str, add: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    parser = _Parser(prog=f"python -m sweep {name}")
    add(parser)
    return parser


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, as ``main`` builds it, by its prog (the docs' CLI reference is drawn from these)."""
    out = {"python -m sweep": _run_parser()}
    for name in SUBCOMMANDS:
        out[f"python -m sweep {name}"] = _command_parser(name, _subcommand(name)[0])
    return out


def _print_error(e: SweepError) -> None:
    err = output_console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"[bold red]error:[/bold red] {escape(e.message)}")
    if e.fix:
        err.print(f"[bold]fix:[/bold] {escape(e.fix)}")


def _subcommand(name: str) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]:
    if name == "bench":
        from sweep.bench import (
            cli as bench_cli,  # lazy: `import sweep` and the command line load a room only when it is used
        )

        def run_bench(args: argparse.Namespace) -> int:
            from sweep.host import power_source  # --power: the GPU probes are the host layer's

            return bench_cli.run_cli(args, power=power_source(getattr(args, "power", None)))

        return bench_cli.add_arguments, run_bench
    if name == "confirm":
        return _confirm_arguments, _run_confirm
    if name == "report":
        from sweep.analysis import (
            cli as a,  # lazy: `import sweep` and the command line load a room only when it is used
        )

        return a.add_report_arguments, a.run_report
    if name == "query":
        from sweep.analysis import (
            cli as a,  # lazy: `import sweep` and the command line load a room only when it is used
        )

        return a.add_query_arguments, a.run_query
    if name == "history":
        from sweep.analysis import (
            cli as a,  # lazy: `import sweep` and the command line load a room only when it is used
        )

        return a.add_history_arguments, a.run_history
    if name == "check-drafter":
        from sweep.sglang import (
            drafter_cli,  # lazy: `import sweep` and the command line load a room only when it is used
        )

        return drafter_cli.add_arguments, drafter_cli.run_cli
    from sweep.orchestrate import (
        hosts_cli,  # lazy: `import sweep` and the command line load a room only when it is used
    )

    return hosts_cli.add_arguments, hosts_cli.run_cli


def _confirm_arguments(p: argparse.ArgumentParser) -> None:
    """``confirm DIR``: the confirmation phase of ``policy.confirm`` on an existing results directory."""
    p.description = (
        "Derive the speculative policies from the grid recorded in DIR and run each chosen "
        "policy's server (--speculative-adaptive) for the pick of each SLO (no SLO: the best "
        "group's) over the same levels and workloads, as points of that sweep, in DIR and in its "
        "mode. Run it again to resume."
    )
    p.add_argument("directory", metavar="DIR", help="a results directory a sweep wrote, e.g. results/k26_eagle-dryrun")
    p.add_argument("--retry-failed", action="store_true", help="run failed confirmation points again")
    p.add_argument(
        "--force", action="store_true", help="run the confirmation points again, even those with an ok result"
    )
    p.add_argument(
        "--only",
        action="append",
        metavar="LABEL-GLOB",
        default=[],
        help="run only confirmation points whose label matches, e.g. '*steps=adaptive*' (repeatable)",
    )
    p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or auto)")


def _run_confirm(args: argparse.Namespace) -> int:
    """``confirm DIR``: 0 when every recorded point is ok, 1 when one failed (a confirmation's
    failure is recorded as data), as a sweep's exit code."""
    from sweep import api  # lazy: `import sweep` and the command line load a room only when it is used
    from sweep.results import LOGS  # lazy: `import sweep` and the command line load a room only when it is used

    _results_logs[:] = [Path(args.directory) / LOGS]
    console = output_console(highlight=False)
    result = api.confirm(
        args.directory,
        progress=True,
        force=args.force,
        retry_failed=args.retry_failed,
        only=args.only,
        address=args.address,
        console=console,
    )
    for line in _confirmation_lines(result):
        console.print(escape(line), soft_wrap=True)
    return exit_code(result)


def _confirmation_lines(result: SweepResult) -> list[str]:
    """What the confirmation phase came to: each confirmation point, its status and the policy it ran."""
    c = result.confirmation
    if c is None or not c.points:
        return []
    status = {p.point_id: p for p in result.points}
    out = ["confirmation (the policies' own servers):"]
    for pp in c.points:
        rec = status.get(pp.id)
        state = rec.status if rec is not None else "pending"
        why = f": {rec.failure_phase}: {rec.failure_reason}" if rec is not None and rec.failure is not None else ""
        out.append(
            f"  {pp.label} [{pp.id}] {state}{why} (policy of {c.chosen[pp.id].policy.group}; "
            f"{'; '.join(c.chosen[pp.id].why)})"
        )
    return out + [f"  compare: python -m sweep report {result.path}"]


def _mode(args: argparse.Namespace) -> str:
    """``sweep.run``'s mode from the flags (none: the cluster); two of them are an error."""
    modes = [f for f, on in (("--dry-run", args.dry_run), ("--local", args.local), ("--fake", args.fake)) if on]
    if len(modes) > 1:
        raise ConfigError(
            f"{' and '.join(modes)} cannot be combined",
            fix="--dry-run: fake server, simulated hosts; --local: real server here; "
            "--fake: fake server on the cluster",
        )
    return modes[0].removeprefix("--") if modes else "cluster"


def exit_code(result: SweepResult) -> int:
    """0: a valid plan, or a sweep whose recorded points are all ok (or invalid and skipped);
    3: a plan with points that break SGLang's rules (or a drafter error); 1: a point failed."""
    if result.ok:
        return 0
    return 3 if result.mode == "plan" else 1


def _print_plan(result: SweepResult, as_json: bool) -> None:
    plan, drafters = result.plan, result.drafter_checks
    if as_json:
        out = plan.to_json()
        for p in out["points"]:
            if p["id"] in drafters:
                p["drafter_checks"] = lines(drafters[p["id"]].findings)
        print(json.dumps(out, indent=2))
        return
    from sweep.experiment import (
        plan_lines,  # lazy: `import sweep` and the command line load a room only when it is used
        print_plan,  # lazy: `import sweep` and the command line load a room only when it is used
    )

    print_plan(plan, Console(highlight=False))
    for line in plan_lines(plan, mode=result.run_mode, scale=result.scale):
        print(line)
    if plan.experiment.search.strategy == "adaptive":
        for line in _adaptive_lines(plan, result):
            print(line)
    if plan.experiment.policy.confirm:
        for line in _confirm_lines(plan, result):
            print(line)
    if not kind(result.run_mode).scaled:
        # a dry run scales the benchmark, which is part of a point's id
        print(
            f"  note: these ids are a {result.run_mode} run's; a dry run's differ (its benchmark is scaled): "
            "add --dry-run to --plan to see them"
        )
    for p in plan.points:
        for f in drafters[p.id].findings if p.id in drafters else ():
            print(f"drafter {f.level} {p.label} [{p.id}]: {f.message} (fix: {f.fix})")


def _adaptive_lines(plan, result: SweepResult) -> list[str]:
    """What ``--plan`` says of an adaptive search: the points it runs whatever they measure, and
    those it may skip, with their share of the estimated time."""
    from sweep.experiment import (
        point_estimates,  # lazy: `import sweep` and the command line load a room only when it is used
    )
    from sweep.search import (
        AdaptiveSearch,  # lazy: `import sweep` and the command line load a room only when it is used
    )

    valid = [p for p in plan.points if not p.errors]
    must, may = AdaptiveSearch(valid, valid).outline()
    est = point_estimates(plan.experiment, valid, mode=result.run_mode, scale=result.scale)
    label = {p.id: p.label for p in valid}
    total, skip = sum(est.values()), sum(est.get(label[i], 0.0) for i in may)
    share = f" (~{skip / 3600:.1f} h of the {total / 3600:.1f} h estimated on one host)" if total else ""
    return [
        f"adaptive search (search.strategy=adaptive): runs at least {len(must)} of {len(valid)} points "
        "(the baselines, the points outside a group, one probe per group with its most steps, one point "
        f"for the cost of a step); may skip up to {len(may)}{share}, as what the others measure decides",
        "  points it may skip: " + (", ".join(label[i] for i in may) if may else "none"),
    ]


def _confirm_lines(plan, result: SweepResult) -> list[str]:
    """What ``--plan`` says of ``policy.confirm``: the confirmation points come after the grid (how
    many is known only then; each costs about a speculative point of its group), and SGLang's rules
    on the launch each step group's policy may ask for."""
    from sweep.experiment import (  # lazy: `import sweep` and the command line load a room only when it is used
        fmt_s,
        point_estimates,
    )

    groups = plan.confirm_probes
    each = point_estimates(plan.experiment, groups, mode=result.run_mode, scale=result.scale) if groups else {}
    cost = f"; each about {fmt_s(max(each.values()))} of host time" if each else ""
    out = [
        f"policy confirmation (policy.confirm): after the grid, up to {len(groups)} more "
        f"point{'s' if len(groups) != 1 else ''} (one per step group holding an SLO's pick; how many is "
        f"known only after the grid), each the policy's own server over its group's levels and workloads{cost}"
    ]
    for p in groups:
        out.append(
            f"  {p.label}: {'would fail in SGLang' if p.errors else 'ok by SGLang rules'} "
            "(the launch at most: every step count a candidate)"
        )
        out += [f"    error: {e}" for e in p.errors]
    return out


def _print_summary(summary: Summary, console: Console) -> None:
    """The end-of-sweep summary: what to deploy (the report's Deploy section), the headlines, and the
    best configuration at C=1 and at saturation against its baseline."""
    from rich.table import Table  # lazy: rich is imported only where output is drawn

    if summary.error:
        console.print(f"(no summary: {escape(summary.error)})", soft_wrap=True)
        return
    if summary.deploy:
        console.print("[bold]deploy[/bold]")
        for line in summary.deploy:
            console.print(escape(line), soft_wrap=True)
        console.print("[bold]summary[/bold]")
    for line in summary.headlines:
        console.print(f"- {escape(line)}", soft_wrap=True)
    if summary.best:
        t = Table(title="best configuration", title_justify="left")
        for c in ("concurrency", "configuration", "output tok/s", "vs its baseline", "vs the runner-up"):
            t.add_column(c, overflow="fold")
        for b in summary.best:
            vs = "(baseline)" if b.baseline else (f"{b.speedup:.2f}x" if b.speedup is not None else "-")
            t.add_row(str(b.concurrency), escape(b.label), f"{b.value:.1f}", vs, escape(b.vs_runner_up()))
        console.print(t)
    console.print(f"full report: python -m sweep report {escape(str(summary.path))}", soft_wrap=True)


def _run_command(args: argparse.Namespace) -> int:
    from sweep import api  # lazy: `import sweep` and the command line load a room only when it is used
    from sweep.experiment import config  # lazy: `import sweep` and the command line load a room only when it is used

    if args.json and not args.plan:
        raise ConfigError(
            "--json prints the plan, and needs --plan (a sweep's results are Parquet, not JSON)",
            fix="add --plan: python -m sweep CONFIG --plan --json; after a sweep, "
            'python -m sweep query DIR "SQL" --format json',
        )
    mode = _mode(args)
    exp = config.load(args.config, args.overrides)
    _results_logs[:] = [_logs_of(exp, mode)]
    if args.plan:
        result = api.plan_for(exp, mode)  # type: ignore[arg-type]
        _print_plan(result, args.json)
        return exit_code(result)
    console = output_console(highlight=False)
    result = api.run(
        exp,
        mode,  # type: ignore[arg-type]
        progress=True,
        force=args.force,
        retry_failed=args.retry_failed,
        only=args.only,
        skip_invalid=args.skip_invalid,
        address=args.address,
        console=console,
    )
    if result.ran:
        _print_summary(result.summary(), console)
    for line in _confirmation_lines(result):
        console.print(escape(line), soft_wrap=True)
    return exit_code(result)


def _logs_of(exp, mode: str) -> Path:
    """The logs folder of the results directory this run writes (it may not exist yet)."""
    from sweep.core import run_mode  # lazy: `import sweep` and the command line load a room only when it is used
    from sweep.results import LOGS  # lazy: `import sweep` and the command line load a room only when it is used

    suffix = kind(run_mode(mode)).suffix  # type: ignore[arg-type]
    return (Path(exp.results_dir) if exp.results_dir else Path("results") / f"{exp.name}{suffix}") / LOGS


def _save_traceback(e: BaseException, argv: list[str]) -> Path:
    """The traceback of ``e`` with the command and versions, in a new file: in the sweep's results
    directory's logs folder when it exists (a reading command never writes there), else in the temp
    folder; returns its path."""
    from sweep import __version__  # lazy: `import sweep` and the command line load a room only when it is used
    from sweep.core import (  # lazy: `import sweep` and the command line load a room only when it is used
        redact_argv,
        redact_text,
    )

    text = (
        f"command: python -m sweep {' '.join(redact_argv(argv))}\n"
        f"sweep {__version__}, Python {platform.python_version()}, {platform.platform()}\n"
        f"at {time.strftime('%Y-%m-%d %H:%M:%S %z')}, in {os.getcwd()}\n\n"
        + redact_text("".join(traceback.format_exception(e)))
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for folder in [*(d for d in _results_logs if d.is_dir()), Path(tempfile.gettempdir())]:
        try:
            fd, name = tempfile.mkstemp(dir=folder, prefix=f"sweep-internal-error-{stamp}-", suffix=".txt")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            return Path(name)
        except OSError:
            continue
    raise OSError("no folder to write the traceback in")


def _internal_error(e: BaseException, argv: list[str]) -> int:
    """An exception the sweep did not expect (a bug): one line on stderr, the traceback in a file;
    returns BUG_EXIT_CODE."""
    said = " ".join(str(e).split())
    said = f"{type(e).__name__}: {said[:300]}{'...' if len(said) > 300 else ''}" if said else type(e).__name__
    try:
        where = f"the traceback is in {_save_traceback(e, argv)}; please report it with that file at {_REPORT_BUGS_AT}"
    except OSError:  # nowhere to write: the traceback on stderr, as Python would
        traceback.print_exception(e, file=sys.stderr)
        where = f"the traceback is above; please report it at {_REPORT_BUGS_AT}"
    print(f"internal error: {said} (a bug in sweep, not in your input); {where}", file=sys.stderr, flush=True)
    return BUG_EXIT_CODE


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _results_logs.clear()
    try:
        if argv and argv[0] in SUBCOMMANDS:
            add, run = _subcommand(argv[0])
            return run(_command_parser(argv[0], add).parse_args(argv[1:]))
        return _run_command(_run_parser().parse_intermixed_args(argv))
    except SweepError as e:
        _print_error(e)
        return e.exit_code
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted")
        return 130
    except Exception as e:  # noqa: BLE001 - anything else is a bug: its own exit code, not 1 ("a point failed")
        if _broken_pipe(e):  # `| head` closed the output: no bug, nothing more to say
            return _reader_gone()
        return _internal_error(e, argv)


def _broken_pipe(e: BaseException) -> bool:
    """Whether ``e`` is a write to an output whose reader went away (Python's BrokenPipeError, or
    polars' OSError "Broken pipe (os error 32)")."""

    return isinstance(e, BrokenPipeError) or (
        isinstance(e, OSError) and (e.errno == errno.EPIPE or "Broken pipe" in str(e))
    )


def _reader_gone() -> int:
    """Exit as a program killed by SIGPIPE is seen (141), stdout pointed at /dev/null so that the
    interpreter's last flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return _READER_GONE_EXIT_CODE
