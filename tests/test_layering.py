"""The package's layering, checked on the import graph (the README draws the same picture).

Read from the source with ``ast`` (nothing is imported), so a new import that points upwards, reaches
into the fake, or brings Ray outside ``orchestrate`` fails here with the module and line. Imports
under ``if TYPE_CHECKING:`` name shapes, not dependencies, and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SWEEP = Path(__file__).resolve().parents[1] / "sweep"

# Lower rank = lower layer. A module may import its own top-level package and anything ranked
# strictly lower. (``sweep`` itself is the package root: ``__version__`` and the public API.)
RANK = {
    "errors": 0, "atomic": 0, "types": 0, "argv": 0,
    "settings": 1, "console": 1, "redact": 1,
    "config": 2, "results": 2,
    "sglang": 3, "drafter": 3, "analysis": 3, "tinymodels": 3,
    "grid": 4,
    "plan": 5, "dryrun": 5, "estimate": 5,
    "render": 6, "bench": 6,
    "host": 7,
    "fake": 8, "orchestrate": 8,
    "api": 9, "drafter_cli": 9,
    "cli": 10,
    "__main__": 11,
}
ANALYSIS_MAY_READ = {"results", "settings", "errors", "atomic", "console", "types", "argv"}  # analysis reads only results


def _module(path: Path) -> str:
    rel = path.relative_to(SWEEP.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                out.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return out


def imports() -> list[tuple[str, int, str]]:
    """(importing module, line, imported module) for every import in the package."""
    out = []
    for path in sorted(SWEEP.rglob("*.py")):
        mod = _module(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                out += [(mod, node.lineno, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.append((mod, node.lineno, node.module))
                out += [(mod, node.lineno, f"{node.module}.{a.name}") for a in node.names
                        if node.module == "sweep"]
    return out


def _top(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "sweep"


def test_every_top_level_module_has_a_layer():
    tops = {_top(_module(p)) for p in SWEEP.rglob("*.py")} - {"sweep"}
    assert tops <= set(RANK), f"give these a rank in RANK (and a place in the README): {tops - set(RANK)}"


def test_imports_point_down():
    bad = []
    for mod, line, dep in imports():
        if not dep.startswith("sweep"):
            continue
        a, b = _top(mod), _top(dep)
        if dep in ("sweep", "sweep.__version__"):
            continue
        if a == b or a == "sweep" and mod == "sweep":
            continue
        if b == "sweep" or RANK.get(b, 99) >= RANK.get(a, -1):
            bad.append(f"{mod}:{line} imports {dep} ({b} is not below {a})")
    assert not bad, "\n".join(bad)


def test_analysis_reads_only_results():
    bad = [f"{m}:{line} imports {d}" for m, line, d in imports()
           if _top(m) == "analysis" and d.startswith("sweep.") and _top(d) not in ANALYSIS_MAY_READ | {"analysis"}]
    assert not bad, "\n".join(bad)


def test_nothing_outside_the_fake_imports_it():
    """The fake is reached through its command line, HTTP and the GPU ledger (sweep.host.gpu)."""
    bad = [f"{m}:{line} imports {d}" for m, line, d in imports()
           if (d == "sweep.fake" or d.startswith("sweep.fake.")) and not m.startswith("sweep.fake")]
    assert not bad, "\n".join(bad)


def test_orchestration_does_not_reach_into_analysis():
    bad = [f"{m}:{line} imports {d}" for m, line, d in imports()
           if m.startswith("sweep.orchestrate") and d.startswith("sweep.analysis")]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["ray", "sglang"])
def test_ray_only_in_orchestrate_and_sglang_never(package):
    where = {m for m, _, d in imports() if d == package or d.startswith(package + ".")}
    allowed = {m for m in where if m.startswith("sweep.orchestrate")} if package == "ray" else set()
    assert where == allowed, f"{package} imported by {sorted(where - allowed)}"
