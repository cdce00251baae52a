"""Terminal rendering of a plan (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sweep.core import fit_to_pipe, plural, redact_argv
from sweep.experiment.plan import Plan


def _plan_table(plan: Plan) -> Table:
    exp = plan.experiment
    launches = plan.launches
    shared = len(launches) != len(plan.points) - len(plan.invalid)  # client-side axes: points share launches
    t = Table(
        title=Text(
            f"{exp.name}: {plural(len(plan.points), 'point')} "
            + (f"in {plural(len(launches), 'server launch', 'server launches')} " if shared else "")
            + f"({plural(sum(p.baseline for p in plan.points), 'baseline')}, {len(plan.invalid)} invalid)"
        ),
        title_justify="left",
    )
    axes = list(exp.grid.axes)
    t.add_column("id", style="dim")
    if shared:
        t.add_column("launch", style="dim")
    for a in axes:
        t.add_column(a)
    t.add_column("status")
    t.add_column("baseline", style="dim")
    t.add_column("notes")
    for p in plan.points:
        status = "[red]invalid[/red]" if p.errors else ("[yellow]ok*[/yellow]" if p.warnings else "[green]ok[/green]")
        base = "(baseline)" if p.baseline else (p.baseline_id or "none")
        notes = (
            plural(len(p.errors), "error") if p.errors else (plural(len(p.warnings), "warning") if p.warnings else "")
        )
        # ids, values and baselines as Text: a hex id that starts with a letter reads as a [tag]
        t.add_row(
            Text(p.id),
            *([Text(p.launch_id)] if shared else []),
            *[Text(p.params.get(a, "·")) for a in axes],
            status,
            Text(base),
            notes,
        )
    return t


def print_plan(plan: Plan, console: Console) -> None:
    """The plan's table, then one line per error and warning (whole: never wrapped, even in a pipe)."""
    console = fit_to_pipe(console)
    console.print(_plan_table(plan))
    for p in plan.points:
        for e in p.errors:
            console.print(f"[red]error[/red] {escape(f'{p.label} [{p.id}]: {e}')}", highlight=False, soft_wrap=True)
        for w in p.warnings:
            console.print(
                f"[yellow]warning[/yellow] {escape(f'{p.label} [{p.id}]: {w}')}", highlight=False, soft_wrap=True
            )
    for w in plan.warnings:
        console.print(f"[yellow]warning[/yellow] plan: {escape(w)}", highlight=False, soft_wrap=True)
    if plan.points:
        last = plan.points[-1]  # secrets redacted, as in --plan --json (sweep/core/redact.py)
        console.print(
            f"[dim]example argv ({escape(last.label)}):[/dim] {escape(' '.join(redact_argv(last.argv, last.secrets)))}",
            highlight=False,
            soft_wrap=True,
        )
