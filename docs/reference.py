"""The documentation site's generated parts, drawn from the code as it is at each build (mkdocs hook).

``mkdocs.yml`` names this module as a hook: a page holding ``<!-- generated: NAME -->`` gets, in its
place, what ``GENERATED[NAME]()`` renders from live objects, so no reference can drift from the code:

- ``experiment-file``: every key of the experiment file, from the schema's dataclasses
  (``sweep.experiment.config.Experiment`` and ``sweep.core.settings``): type, default and the
  comment or docstring beside it in the source;
- ``cli``: every command's options, from the argparse parsers ``sweep.cli.parsers()`` builds;
- ``results-columns``: every column of the results tables, from ``sweep.results.schema`` (names
  and Arrow types from the schemas, meanings from the comments beside them);
- ``floors``: the layering drawing, from the floors ``tests/test_layering.py`` computes from the
  imports (the same function the test checks);
- ``api``: mkdocstrings' blocks for ``sweep.__all__`` and the modules of its errors, events and records;
- ``bench-readme``: ``sweep/bench/README.md``, its headings one level down;
- ``measured/<name>``: the record ``docs/measured/<name>.json`` of measured figures, with where, when
  and at which commit they were measured (``tests/perf/record.py``; a perf script writes it with
  ``--record``), so a page quotes measured figures only through a record.

Nothing here writes a file; ``python docs/reference.py NAME`` prints one part.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import inspect
import io
import json
import re
import sys
import tokenize
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

import sweep
from sweep import cli as command_line
from sweep.experiment.config import Experiment
from sweep.results import schema

REPO = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- generated: ([a-z_/-]+) -->")

# What each room of the package is, for the drawing of the floors (their floors come from the imports).
ROOMS = {
    "__main__": "python -m sweep",
    "cli": "the command line and its commands (sweep/cli.py)",
    "api": "sweep.run() -> SweepResult (sweep/api.py)",
    "orchestrate": "the only Ray code: the sweep's cluster, points handed to hosts, progress",
    "host": "one point on its host: pre-flight, launch, wait, benchmark, stop, reap",
    "bench": "the benchmark client: single stream, concurrency levels, the server's metrics",
    "search": "which points run: the grid, or the adaptive search (pure; told what each point measured)",
    "experiment": "the experiment file, its grid, the plan checked against SGLang's rules, estimates",
    "analysis": "reports, SLOs, the frontier and queries over the results",
    "fake": "the fake SGLang server, reached by its command line, HTTP and the GPU ledger",
    "sglang": "SGLang as data: its arguments and rules by version, its logs, the drafter checks",
    "results": "the results directory: the schema of its Parquet tables, the writer, the loader",
    "core": "errors, types, settings and small utilities; imports nothing outside it",
}


# ---- comments beside the code ----------------------------------------------------------------------


def _comments(source: str) -> dict[int, str]:
    """line -> the comment on it (without ``#``), for every comment in ``source``."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string.lstrip("#").strip()
    return out


def _doc_at(lines: list[str], comments: dict[int, str], line: int) -> str:
    """The comment that documents what starts on ``line``: the block of comment lines right above it,
    then the comment at the end of its line (or of the last line of a definition over several)."""
    above = []
    i = line - 1
    while i >= 1 and lines[i - 1].lstrip().startswith("#"):
        above.insert(0, comments.get(i, ""))
        i -= 1
    beside = comments.get(line, "")
    parts = [" ".join(p for p in above if not p.startswith("---")), beside]
    return " ".join(p for p in parts if p).strip()


# ---- the experiment file -----------------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return re.sub(r"Optional\[(.*)\]$", r"\1 | None", text.replace("typing.", ""))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _yaml_value(value: Any) -> str:
    if value == "???":
        return "required"
    if dataclasses.is_dataclass(value):
        return "(section)"
    return json.dumps(value, default=str)


def _section_class(f: dataclasses.Field, owner: type) -> tuple[type, str] | None:
    """The dataclass a field holds (a section of the file) and how its keys continue the field's:
    ``""`` for one section, ``"[]"`` for a list of them, ``".<name>"`` for a mapping of named ones;
    None for a plain value."""
    hint = typing.get_type_hints(owner).get(f.name)
    origin = typing.get_origin(hint)
    suffix = "[]" if origin is list else ".<name>" if origin is dict else ""
    args = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_args(hint) else [hint]
    for a in args:
        if isinstance(a, type) and dataclasses.is_dataclass(a):
            return a, suffix
    return None


def _field_docs(cls: type) -> dict[str, str]:
    """field name -> its comment in the class's source (above it or beside it)."""
    source = inspect.getsource(cls)
    lines = source.splitlines()
    comments = _comments(source)
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = _doc_at(lines, comments, node.end_lineno or node.lineno) or _doc_at(
                lines, comments, node.lineno
            )
    return out


def _doc(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    generated = doc.startswith(cls.__name__ + "(")  # dataclasses write a signature when there is no docstring
    return "" if generated else " ".join(doc.split("\n\n")[0].split())


def _text(text: str) -> str:
    """Prose for a page: reStructuredText's double backticks as Markdown's, and ``<``, ``>`` and ``&``
    outside code as entities (``results/<name>`` is no HTML tag)."""
    parts = re.sub(r"``([^`]+)``", r"`\1`", text).replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _cell(text: str) -> str:
    """Prose for a table cell: ``_text`` with its pipes escaped outside code spans (Python-Markdown's
    tables split no cell at a pipe inside one, and print a ``\\|`` there as it is: ``str \\| None``)."""
    parts = _text(text).split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = parts[i].replace("|", "\\|")
    return "`".join(parts)


def _code(text: str) -> str:
    """A table cell's code span: as it is, pipes included (see ``_cell``)."""
    return f"`{text}`"


def experiment_file() -> str:
    """Every key of the experiment file, section by section, from the schema's dataclasses."""
    out: list[str] = []
    seen: set[type] = set()

    def section(cls: type, path: str) -> None:
        seen.add(cls)
        title = f"`{path}`" if path else "The top level"
        out.append(f"## {title}\n")
        doc = _doc(cls)
        if doc:
            out.append(f"{_text(doc)} (`{cls.__module__}.{cls.__qualname__}`)\n")
        else:
            out.append(f"`{cls.__module__}.{cls.__qualname__}`\n")
        out.append("| key | type | default | what it is |\n|---|---|---|---|")
        docs = _field_docs(cls)
        nested = []
        for f in dataclasses.fields(cls):
            if f.name == "source" and cls is Experiment:
                continue  # set by load: the file it came from, not a key
            sub = _section_class(f, cls)
            key = f"{path}.{f.name}" if path else f.name
            doc = f.metadata.get("doc") or docs.get(f.name, "")
            default = _default(f)
            shown = "(section)" if sub is not None and dataclasses.is_dataclass(default) else _yaml_value(default)
            if sub is not None:
                inner = key + sub[1]  # a list or a mapping of sections: each item's keys
                doc = (doc + ": " if doc else "") + f"see [`{inner}`](#{_anchor(inner)})"
                if sub[0] not in seen:
                    nested.append((sub[0], inner))
            out.append(f"| `{key}` | {_code(_type_name(f.type))} | {_code(shown)} | {_cell(doc)} |")
        out.append("")
        for sub, key in nested:
            section(sub, key)

    section(Experiment, "")
    return "\n".join(out)


def _anchor(key: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", key.lower().replace(" ", "-"))


# ---- the command line --------------------------------------------------------------------------------


def _option(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar if isinstance(action.metavar, str) else action.dest
    takes = action.nargs != 0
    metavar = action.metavar or action.dest.upper()
    shown = [f"{o} {metavar}" if takes else o for o in action.option_strings]
    return ", ".join(shown)


def cli() -> str:
    """Every command's usage and options, from the parsers ``python -m sweep`` builds."""
    out = []
    for prog, parser in command_line.parsers().items():
        out.append(f"## `{prog}`\n")
        formatter = argparse.HelpFormatter(parser.prog, width=100)  # not the terminal's: the same on every build
        formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
        usage = formatter.format_help().strip()
        out.append(f"```text\n{usage}\n```\n")
        if parser.description:
            out.append(_text(" ".join(parser.description.split())) + "\n")
        out.append("| argument | default | what it does |\n|---|---|---|")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            helped = formatter._expand_help(action) if action.help else ""
            default = action.default
            shown = "" if default in (None, False, [], argparse.SUPPRESS) else f"`{default}`"
            positional = not action.option_strings
            required = action.nargs not in ("*", "?") if positional else action.required
            shown = shown or ("required" if required else "")
            out.append(f"| {_code(_option(action))} | {_cell(shown)} | {_cell(' '.join(helped.split()))} |")
        out.append("")
    return "\n".join(out)


# ---- the results columns -----------------------------------------------------------------------------


def _tables(schema: types.ModuleType) -> list[tuple[str, str, str]]:
    """(schema's name in ``sweep.results.schema``, the table, where it is): the per-point tables of its
    ``TABLES`` (one file per point in a folder of the table's name), then every other Arrow schema there,
    a table whose file a constant names (``DECISIONS = "decisions.parquet"``)."""
    names = {id(value): attr for attr, value in vars(schema).items() if isinstance(value, pa.Schema)}
    out = [(names[id(arrow)], table, f"{table}/<id>.parquet") for table, arrow in schema.TABLES.items()]
    for attr in names.values():
        if all(attr != o[0] for o in out):
            table = attr.lower().removesuffix("_schema")
            named = getattr(schema, table.upper(), None)
            out.append((attr, table, named if isinstance(named, str) else f"{table}/<id>.parquet"))
    return out


def _column_docs(source: str, name: str) -> dict[str, str]:
    """column -> its comment, for the ``("column", type)`` entries of the assignment to ``name``."""
    lines = source.splitlines()
    comments = _comments(source)
    out: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Tuple)
                    and len(sub.elts) == 2
                    and isinstance(sub.elts[0], ast.Constant)
                    and isinstance(sub.elts[0].value, str)
                ):
                    doc = _doc_at(lines, comments, sub.end_lineno or sub.lineno) or _doc_at(lines, comments, sub.lineno)
                    out.setdefault(sub.elts[0].value, doc)
    return out


def results_columns() -> str:
    """Every column of every results table, from the schemas in ``sweep.results.schema``."""
    source = inspect.getsource(schema)
    out = [
        "Every table's rows are checked against these schemas when written (`sweep.results.schema.check`). "
        f"`points` also has one `{schema.AXIS_PREFIX}<name>` column per grid axis (int64, float64 or string: "
        "`axis_type`).\n"
    ]
    for attr, table, where in _tables(schema):
        arrow = getattr(schema, attr)
        docs = _column_docs(source, attr)
        out.append(f"## `{table}`\n\n`{where}` (`sweep.results.schema.{attr}`)\n")
        out.append("| column | Arrow type | what it is |\n|---|---|---|")
        for f in arrow:
            out.append(f"| `{f.name}` | {_code(str(f.type))} | {_cell(docs.get(f.name, ''))} |")
        out.append("")
    return "\n".join(out)


# ---- the floors --------------------------------------------------------------------------------------


def _layering() -> types.ModuleType:
    return _module("sweep_docs_layering", REPO / "tests" / "test_layering.py")


def _module(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def floors_drawing(floors: dict[str, int] | None = None) -> str:
    """``floor N  room  what it is``, highest floor first; a room on the floor of the line above leaves
    ``floor N`` out. The floors are ``tests/test_layering.py``'s, read from the imports."""
    floors = _layering().floors() if floors is None else floors
    missing = sorted(set(floors) - set(ROOMS))
    if missing:
        raise LookupError(f"describe the rooms {missing} in ROOMS of {__file__}")
    order = list(ROOMS)
    lines, last = [], None
    for room in sorted(floors, key=lambda r: (-floors[r], order.index(r))):
        head = f"floor {floors[room]}" if floors[room] != last else ""
        lines.append(f"{head:<8} {room:<12} {ROOMS[room]}".rstrip())
        last = floors[room]
    return "```text\n" + "\n".join(lines) + "\n```\n"


# ---- the Python API ----------------------------------------------------------------------------------

API_MODULES = (  # besides ``sweep.__all__``: what the API raises, sends and returns
    "sweep.core.errors",
    "sweep.core.events",
    "sweep.core.record",
)


def api() -> str:
    """mkdocstrings' blocks for every name in ``sweep.__all__`` (where each is defined) and the
    modules the API's errors, events and records come from."""
    out = []
    for name in sweep.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(sweep, name)
        out.append(f"::: {obj.__module__}.{obj.__qualname__}\n")
    out += [
        f"::: {module}\n    options:\n      show_root_heading: true\n      heading_level: 2\n" for module in API_MODULES
    ]
    return "\n".join(out)


# ---- sweep/bench/README.md ---------------------------------------------------------------------------


def bench_readme() -> str:
    text = (REPO / "sweep" / "bench" / "README.md").read_text()
    return re.sub(r"(?m)^(#{1,5}) ", r"#\1# ", text)


# ---- measured figures --------------------------------------------------------------------------------


def measured(name: str) -> str:
    """The record ``docs/measured/<name>.json`` as Markdown (``tests/perf/record.py``)."""
    record = _module("sweep_docs_record", REPO / "tests" / "perf" / "record.py")
    return str(record.render(record.load(name)))


GENERATED: dict[str, Callable[[], str]] = {
    "experiment-file": experiment_file,
    "cli": cli,
    "results-columns": results_columns,
    "floors": floors_drawing,
    "bench-readme": bench_readme,
    "api": api,
}


def render(markdown: str) -> str:
    """``markdown`` with every ``<!-- generated: NAME -->`` replaced by what ``NAME`` renders."""

    def one(m: re.Match[str]) -> str:
        if m.group(1).startswith("measured/"):
            return measured(m.group(1).removeprefix("measured/"))
        if m.group(1) not in GENERATED:
            raise LookupError(f"no generated part {m.group(1)!r}: one of {', '.join(GENERATED)} ({__file__})")
        return GENERATED[m.group(1)]()

    return MARK.sub(one, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The mkdocs hook: a page's generated parts filled in before it is rendered."""
    return render(markdown)


if __name__ == "__main__":
    print(render(f"<!-- generated: {sys.argv[1]} -->"))
