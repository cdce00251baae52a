"""Only ``sweep/results`` knows where a results directory keeps its files: the analysis, the
experiment's estimates and the benchmark ask it (``sweep.results.store``, ``meta``, ``writer``).

Read from the source with ``ast`` (nothing is imported): every string outside ``sweep/results`` that
names a results file (``points/``, ``.parquet``, ``plan.json``, ``experiment.yaml``, ``sweep.json``),
and every path joined with a table's folder (``d / "points"``, ``d / "logs"``). Docstrings and
comments may name them; code may not, except where the allow-list says why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sweep.results.schema import TABLES

REPO = Path(__file__).resolve().parents[2]
SWEEP = REPO / "sweep"
NAMES = ("points/", ".parquet", "plan.json", "experiment.yaml", "sweep.json")
FOLDERS = (*TABLES, "logs")  # DIR/<table>/, DIR/logs/

# (module, what it names): why it may. Remove an entry once its module asks sweep/results.
ALLOWED = {
    # not a results file: the file the user names for the query's output (--output FILE.parquet)
    ("sweep/analysis/query.py", ".parquet"): "the user's --output file",
    ("sweep/analysis/cli.py", ".parquet"): "the --output help: the suffixes that name a format",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (of a module, class or function, or a bare
    string after an assignment): they document, they name no path the code uses."""
    out = set()
    for node in ast.walk(tree):
        for child in getattr(node, "body", []) if isinstance(getattr(node, "body", None), list) else []:
            if (
                isinstance(child, ast.Expr)
                and isinstance(child.value, ast.Constant)
                and isinstance(child.value.value, str)
            ):
                out.add(id(child.value))
    return out


def named_paths(source: str, filename: str) -> list[tuple[str, int]]:
    """(what is named, line) for each results path the code of ``source`` names."""
    tree = ast.parse(source, filename=filename)
    skip = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            out += [(name, node.lineno) for name in NAMES if name in node.value]
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant)
            and node.right.value in FOLDERS
        ):
            out.append((f'/ "{node.right.value}"', node.lineno))
    return out


def hits() -> dict[tuple[str, str], list[int]]:
    """(module, what it names) -> lines, for every module of the package outside sweep/results."""
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted(SWEEP.rglob("*.py")):
        module = str(path.relative_to(REPO))
        if module.startswith("sweep/results/"):
            continue
        for name, line in named_paths(path.read_text(), module):
            out.setdefault((module, name), []).append(line)
    return out


def test_no_module_outside_results_names_a_results_path():
    bad = [f"{m}:{lines[0]} names {name!r}" for (m, name), lines in sorted(hits().items()) if (m, name) not in ALLOWED]
    assert not bad, (
        "ask sweep/results instead (store.table / read_columns / sweep_dirs, meta.read_plan / "
        "read_experiment / experiment_slos, writer.ResultsDir / write_benchmark):\n" + "\n".join(bad)
    )


def test_the_allow_list_is_not_stale():
    stale = sorted(set(ALLOWED) - set(hits()))
    assert not stale, f"these no longer name the path: remove them from ALLOWED: {stale}"


@pytest.mark.parametrize(
    "code, named",
    [
        ('files = sorted((d / "points").glob("*.parquet"))', ['/ "points"', ".parquet"]),
        ('text = (d / "plan.json").read_text()', ["plan.json"]),
        ('p = f"{d}/experiment.yaml"', ["experiment.yaml"]),
        ('log = d / "logs" / f"{pid}.log"', ['/ "logs"']),
        ('"""Reads DIR/plan.json."""\nx = 1\n"""sweep.json: documented."""', []),  # docstrings may name them
    ],
)
def test_the_check_finds_a_path_in_code_and_not_in_docstrings(code, named):
    assert sorted(n for n, _ in named_paths(code, "<test>")) == sorted(named)
