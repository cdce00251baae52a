"""The package's layering, read from its folders and checked on the import graph.

Every module lives in a room (a folder of ``sweep/``) or is one of the front modules (the package's
face, the Python API, the command line). The rooms' imports, read from the source with ``ast``
(nothing is imported), give each room its floor: 1 for a room that imports no other, else one above
the highest room it imports. The docs' architecture page draws those floors, from ``floors()`` here
(docs/reference.py, at each build of the site); a new import that points up (into a room that imports
this one, directly or not) makes a circle and fails here with the module and line, and a room that
comes without a line saying what it is fails until docs/reference.py's ``ROOMS`` says so. Imports
under ``if TYPE_CHECKING:`` name shapes, not dependencies, and are left out.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SWEEP = REPO / "sweep"
FRONT = {"__main__", "api", "cli"}  # sweep/*.py besides __init__.py: each a room of its own
ANALYSIS_MAY_READ = {"results", "core"}  # the analysis reads only results


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _room(mod: str) -> str:
    """The room a module is in: its folder under sweep/ (or, for a front module, its name)."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "sweep"


def _type_checking_lines(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                out.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return out


@cache
def imports() -> tuple[tuple[str, int, str], ...]:
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
                out += [
                    (mod, node.lineno, f"{node.module}.{a.name}")
                    for a in node.names
                    if node.module == "sweep" and a.name != "__version__"
                ]
    return tuple(out)


def room_imports() -> dict[str, dict[str, list[str]]]:
    """room -> {room it imports: ["module:line", ...]}; the package's face (``sweep``) is no room:
    its ``__version__`` is anyone's to read, and it hands the API on lazily."""
    out: dict[str, dict[str, list[str]]] = {}
    for mod, line, dep in imports():
        if dep.split(".")[0] != "sweep" or dep == "sweep":
            continue
        a, b = _room(mod), _room(dep)
        if a != b and a != "sweep":
            out.setdefault(a, {}).setdefault(b, []).append(f"{mod}:{line}")
    return out


def rooms() -> set[str]:
    return {p.name for p in SWEEP.iterdir() if (p / "__init__.py").exists()} | FRONT


def floors() -> dict[str, int]:
    """Each room's floor; raises with the circle where rooms import each other."""
    graph = room_imports()
    out: dict[str, int] = {}

    def floor(room: str, path: tuple[str, ...]) -> int:
        if room in path:
            circle = path[path.index(room) :] + (room,)
            where = "; ".join(f"{a} -> {b} at {', '.join(graph[a][b][:3])}" for a, b in zip(circle, circle[1:]))
            raise AssertionError(f"rooms import each other: {' -> '.join(circle)} ({where})")
        if room not in out:
            out[room] = 1 + max((floor(d, path + (room,)) for d in graph.get(room, {})), default=0)
        return out[room]

    for room in sorted(rooms()):
        floor(room, ())
    return out


def _docs_reference():
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "docs" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def drawn_floors() -> dict[str, int]:
    """The architecture page's drawing (docs/architecture.md, drawn by docs/reference.py): ``floor N  room
    what it is``, a line without ``floor N`` on the floor above."""
    page = (REPO / "docs" / "architecture.md").read_text()
    assert "<!-- generated: floors -->" in page, "docs/architecture.md lost its drawing of the floors"
    block = re.search(r"```text\n(.*?)```", _docs_reference().floors_drawing(), re.S)
    assert block, "docs/reference.py's floors_drawing() drew no text block"
    out, current = {}, None
    for line in block.group(1).splitlines():
        m = re.match(r"\s*(?:floor (\d+))?\s+([a-z_]+)\s", line + " ")
        if m:
            current = int(m.group(1)) if m.group(1) else current
            out[m.group(2)] = current
    return out


def test_every_module_is_in_a_room():
    stray = sorted(p.name for p in SWEEP.glob("*.py") if p.stem not in FRONT | {"__init__"})
    assert not stray, f"put these in a room (a folder of sweep/) or make them front modules in FRONT: {stray}"


def test_no_import_points_up():
    floors()  # raises with the circle, the modules and the lines


def test_the_architecture_page_draws_the_floors():
    assert drawn_floors() == floors(), (
        "the docs' drawing of the floors is not the floors the imports give: "
        f"docs/reference.py's floors_drawing(): {sorted(floors().items(), key=lambda kv: -kv[1])}"
    )


def test_the_core_imports_nothing_outside_it():
    assert room_imports().get("core", {}) == {}, room_imports()["core"]


def test_analysis_reads_only_results():
    bad = {b: where for b, where in room_imports().get("analysis", {}).items() if b not in ANALYSIS_MAY_READ}
    assert not bad, bad


def test_nothing_outside_the_fake_imports_it():
    """The fake is reached through its command line, HTTP and the GPU ledger (sweep.host.gpu)."""
    bad = [
        f"{m}:{line} imports {d}"
        for m, line, d in imports()
        if (d == "sweep.fake" or d.startswith("sweep.fake.")) and not m.startswith("sweep.fake")
    ]
    assert not bad, "\n".join(bad)


def test_orchestration_does_not_reach_into_analysis():
    assert "analysis" not in room_imports().get("orchestrate", {})


@pytest.mark.parametrize("package", ["ray", "sglang"])
def test_ray_only_in_orchestrate_and_sglang_never(package):
    where = {m for m, _, d in imports() if d == package or d.startswith(package + ".")}
    allowed = {m for m in where if m.startswith("sweep.orchestrate")} if package == "ray" else set()
    assert where == allowed, f"{package} imported by {sorted(where - allowed)}"


def test_a_circle_is_found(monkeypatch):
    """The check itself: an import from the core up into the host makes a circle, named with its line."""
    real = imports()
    monkeypatch.setattr(
        sys.modules[__name__], "imports", lambda: real + (("sweep.core.errors", 7, "sweep.host.point"),)
    )
    with pytest.raises(AssertionError, match=r"core -> host.*sweep.core.errors:7"):
        floors()


def test_a_room_the_drawing_cannot_describe_is_named():
    """A new room fails the drawing (and so the site's build) until docs/reference.py's ROOMS says what it is."""
    with pytest.raises(LookupError, match=r"'newroom'.*ROOMS"):
        _docs_reference().floors_drawing({**floors(), "newroom": 1})
