"""Measured figures as records: what a perf script measured, with where, when and from what.

A record is one JSON file, ``docs/measured/<name>.json`` (``<name>``: the script's, ``adaptive`` for
``tests/perf/adaptive.py``), that a docs page includes with ``<!-- generated: measured/<name> -->``
(docs/reference.py renders it with ``render``), so a page quotes measured figures only through a record
and re-measuring is running the script again with ``--record``, never a hand edit of a page. It holds:

- ``command``: what measured it (``python tests/perf/adaptive.py --only reference``);
- ``date`` (UTC, ISO 8601), ``machine`` (``cpu``: the CPU model, ``cores``: what the OS offers),
  ``commit`` (the checkout's, ``+dirty`` where the sources below have uncommitted changes);
- ``sources``: what the figures come from, the modules the script measures (``sweep/search/adaptive.py``),
  and ``fingerprint``: a digest of their meaning when measured (``docs/generate.py``'s ``meaning``: a
  module's syntax tree without docstrings, so a comment or a docstring edit keeps it); the page says
  whether the code it measures changed since, beside ``measured at <commit>``, and the suite never
  fails because it did (perf figures are not measured in CI); a record copied by hand has none;
- ``by``: ``"--record"`` where the script wrote it, or the words saying it was copied from a page by
  hand before ``--record`` existed;
- ``note`` (optional): what the reader must know to read them (a busy machine, one run);
- ``tables``: each a ``title``, its ``columns`` and ``rows`` (strings or numbers, as printed).

``add_flag(parser)`` gives a script ``--record``; ``write(name, args, tables, sources)`` writes the
record where ``args.record`` is set. ``check(record)`` says what a record lacks.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "docs" / "measured"
BY_SCRIPT = "--record"
FIELDS = ("command", "date", "machine", "commit", "sources", "by", "tables")


def add_flag(parser: argparse.ArgumentParser) -> None:
    """``--record``: also write the figures printed as ``docs/measured/<script>.json``."""
    parser.add_argument(
        "--record",
        nargs="?",
        const="",
        default=None,
        metavar="NOTE",
        help="also write the figures as docs/measured/<script>.json for the docs (NOTE: what a reader must "
        "know to read them, e.g. 'another test run shared the 2 cores')",
    )


def table(title: str, columns: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    """One table of a record; every row as long as ``columns``."""
    bad = [r for r in rows if len(r) != len(columns)]
    if bad:
        raise ValueError(f"table {title!r}: rows {bad} do not have the {len(columns)} columns {columns}")
    return {"title": title, "columns": list(columns), "rows": [list(r) for r in rows]}


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit(sources: list[str]) -> str:
    """The checkout's commit (short), ``+dirty`` where ``sources`` (what the figures come from) hold
    uncommitted changes; ``unknown`` outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *sources],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def fingerprint(sources: list[str]) -> str:
    """A digest of what ``sources`` (files or folders) mean: their syntax trees without docstrings,
    as ``docs/generate.py`` reads the sources of the reference dry run."""
    spec = importlib.util.spec_from_file_location("sweep_docs_generate", REPO / "docs" / "generate.py")
    assert spec and spec.loader
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    h = hashlib.sha256()
    for source in sources:
        p = REPO / source
        files = sorted(f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts) if p.is_dir() else [p]
        for f in files:
            content = generate.meaning(f)
            if content is not None:
                h.update(str(f.relative_to(REPO)).encode() + b"\0" + content + b"\0")
    return h.hexdigest()[:16]


def make(
    command: str,
    tables: list[dict[str, Any]],
    sources: list[str],
    note: str = "",
    by: str = BY_SCRIPT,
    date: str | None = None,
    machine: dict[str, Any] | None = None,
    at: str | None = None,
) -> dict[str, Any]:
    """A record: this machine, now and this commit unless given (a record copied from a page by hand
    gives the page's date and machine, and ``at``: the commit that page was at)."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    return {
        "command": command,
        "date": date or now,
        "machine": machine or {"cpu": cpu_model(), "cores": os.cpu_count()},
        "commit": at or commit(sources),
        "sources": list(sources),
        "fingerprint": "" if at else fingerprint(sources),
        "by": by,
        "note": note,
        "tables": tables,
    }


def write(name: str, args: argparse.Namespace, tables: list[dict[str, Any]], sources: list[str]) -> Path | None:
    """Where ``args.record`` is set (``--record [NOTE]``), the record of this run as
    ``docs/measured/<name>.json``; its path, or None without ``--record``."""
    if getattr(args, "record", None) is None:
        return None
    argv = [a for a in sys.argv[1:] if not a.startswith("--record=")]  # what measured, not how it was recorded
    if "--record" in argv:
        at = argv.index("--record")
        del argv[at : at + (2 if args.record and argv[at + 1 :][:1] == [args.record] else 1)]
    command = "python " + shlex.join([str(Path(sys.argv[0]).resolve().relative_to(REPO)), *argv])
    rec = make(command, tables, sources, note=args.record or "")
    problems = check(rec)
    if problems:
        raise ValueError(f"the record of {name} is incomplete: {'; '.join(problems)}")
    RECORDS.mkdir(parents=True, exist_ok=True)
    path = RECORDS / f"{name}.json"
    path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
    print(f"recorded in {path.relative_to(REPO)}")
    return path


def load(name: str) -> dict[str, Any]:
    """The record ``docs/measured/<name>.json``."""
    path = RECORDS / f"{name}.json"
    if not path.exists():
        have = sorted(p.stem for p in RECORDS.glob("*.json"))
        raise LookupError(f"no record {path}: run its script with --record (records: {', '.join(have)})")
    record: dict[str, Any] = json.loads(path.read_text())
    return record


def check(record: dict[str, Any]) -> list[str]:
    """What a record lacks: a field, its machine's CPU or cores, a source that does not exist, a table
    with no rows or rows not as long as its columns."""
    problems = [f"no {f}" for f in FIELDS if not record.get(f)]
    machine = record.get("machine") or {}
    problems += [f"no machine {k}" for k in ("cpu", "cores") if not machine.get(k)]
    problems += [f"source {s} does not exist" for s in record.get("sources", []) if not (REPO / s).exists()]
    for t in record.get("tables", []):
        if not t.get("rows"):
            problems.append(f"table {t.get('title')!r} has no rows")
        problems += [
            f"table {t.get('title')!r}: a row of {len(r)} cells for {len(t['columns'])} columns"
            for r in t.get("rows", [])
            if len(r) != len(t.get("columns", []))
        ]
    return problems


def _cell(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def render(record: dict[str, Any]) -> str:
    """The record as Markdown: its tables, then ``measured at <commit>, <date>`` with the machine, the
    command, who recorded it, what the figures come from and its note."""
    out = []
    for t in record["tables"]:
        if t.get("title"):
            out.append(f"*{t['title']}*\n")
        out.append("| " + " | ".join(_cell(c) for c in t["columns"]) + " |")
        out.append("|" + "---|" * len(t["columns"]))
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t["rows"]]
        out.append("")
    machine = record["machine"]
    by = "written by the script (`--record`)" if record["by"] == BY_SCRIPT else record["by"]
    sources = ", ".join(f"`{s}`" for s in record["sources"])
    line = (
        f"Measured at `{record['commit']}`, {record['date'][:10]}, on {machine['cores']} cores of "
        f"{machine['cpu']}: `{record['command']}`; {by}. From {sources}."
    )
    if record.get("fingerprint"):
        changed = fingerprint(record["sources"]) != record["fingerprint"]
        line += (
            f" **The code it measures has changed since**: `{record['command']} --record` measures it again."
            if changed
            else " The code it measures is the same since (comments and docstrings aside)."
        )
    if record.get("note"):
        note = record["note"].rstrip(".")
        line += f" Note: {note[0].upper()}{note[1:]}."
    out.append(line + "\n")
    return "\n".join(out)


if __name__ == "__main__":
    print(render(load(sys.argv[1])))
