"""The rooms' doors, read from the source with ``ast`` (nothing is imported but the packages' ``__all__``).

Each room (a folder of ``sweep/``) declares in its ``__init__.py`` what other rooms may use of it: its
``__all__``, the names it re-exports and the modules it lends as namespaces. Another room enters only
by that door (``from sweep.results import load``, never ``from sweep.results.store import load``), so a
maintainer sees a room's outside in one place and may change the rest freely. Inside a module, a
top-level name nothing outside it uses is private by name (``_name``). An import inside a function
says why it is there, beside it (``# lazy: ...``): the rest are at the top of the module.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

from tests.test_layering import FRONT, REPO, SWEEP, _module, _room

ROOMS = sorted(p.parent.name for p in SWEEP.glob("*/__init__.py"))


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _module_all(path: Path) -> set[str]:
    """A module's own ``__all__`` (empty without one)."""
    for node in _tree(path).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def _declared(room: str) -> set[str]:
    tree = _tree(SWEEP / room / "__init__.py")
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                return set(ast.literal_eval(node.value))
    raise AssertionError(f"sweep/{room}/__init__.py declares no __all__: list what other rooms may import from it")


def test_every_room_declares_its_door():
    for room in ROOMS:
        init = SWEEP / room / "__init__.py"
        bound = {a.asname or a.name for n in _tree(init).body if isinstance(n, ast.ImportFrom) for a in n.names}
        bound |= {
            t.id for n in _tree(init).body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
        }
        missing = [
            name
            for name in _declared(room)
            if name not in bound and not (SWEEP / room / f"{name}.py").exists() and not (SWEEP / room / name).is_dir()
        ]
        assert not missing, f"sweep/{room}/__init__.py lists in __all__ what it neither imports nor holds: {missing}"


def test_rooms_enter_each_other_by_the_door():
    bad = []
    for path in sorted(SWEEP.rglob("*.py")):
        mod = _module(path)
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("sweep.")):
                continue
            room = _room(node.module)
            if room == _room(mod) or room in FRONT:
                continue
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            if node.module != f"sweep.{room}":
                bad.append(f"{where}: from {node.module} import ...: import it from sweep.{room} (its door)")
                continue
            bad += [
                f"{where}: {a.name} is not in sweep.{room}.__all__ (add it to the door, or don't use it from here)"
                for a in node.names
                if a.name not in _declared(room)
            ]
    assert not bad, "\n".join(bad)


def test_no_room_enters_its_own_door():
    """Inside a room, modules import each other by module: the room's ``__init__`` imports them all."""
    bad = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted(SWEEP.rglob("*.py"))
        if path.name != "__init__.py"
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ImportFrom)
        and node.module == f"sweep.{_room(_module(path))}"
        and any(_not_a_module(_room(_module(path)), a.name) for a in node.names)
    ]
    assert not bad, f"import these from their module, not from the room's door (a circle at import time): {bad}"


def _not_a_module(room: str, name: str) -> bool:
    return not (SWEEP / room / f"{name}.py").exists() and not (SWEEP / room / name / "__init__.py").exists()


@cache
def _words_outside() -> dict[Path, set[str]]:
    """Every identifier of every source file (and every word in its strings: f-strings, string
    annotations and names given as text count as uses)."""
    out = {}
    for d in ("sweep", "tests", "docs", "cluster"):
        for p in (REPO / d).rglob("*.py"):
            toks = list(tokenize.generate_tokens(io.StringIO(p.read_text()).readline))
            out[p] = {t.string for t in toks if t.type == tokenize.NAME} | {
                w for t in toks if t.type == tokenize.STRING for w in re.findall(r"[A-Za-z_]\w*", t.string)
            }
    return out


def test_what_no_other_module_uses_is_private_by_name():
    texts = (REPO / "pyproject.toml").read_text() + "".join(p.read_text() for p in (REPO / "docs").rglob("*.md"))
    words = _words_outside()
    bad = []
    for path in sorted(SWEEP.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        declared = _module_all(path)
        for node in _tree(path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                names = [node.target.id]
            else:
                continue
            for name in names:
                if name.startswith("_") or name == "main" or name in declared or name in texts:
                    continue
                if not any(name in w for p, w in words.items() if p != path):
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno} {name}")
    assert not bad, "nothing outside its module uses these: make them private (_name):\n" + "\n".join(bad)


def _unexplained_imports(node: ast.AST, lines: list[str], in_function: bool = False) -> list[int]:
    """The lines of the imports inside functions under ``node`` with no comment beside them."""
    if in_function and isinstance(node, (ast.Import, ast.ImportFrom)):
        return [] if "#" in " ".join(lines[node.lineno - 1 : node.end_lineno]) else [node.lineno]
    inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return [n for child in ast.iter_child_nodes(node) for n in _unexplained_imports(child, lines, inside)]


def test_imports_inside_functions_say_why():
    bad = []
    for path in sorted(SWEEP.rglob("*.py")):
        lines = path.read_text().splitlines()
        bad += [
            f"{path.relative_to(REPO)}:{n}: {lines[n - 1].strip()}" for n in _unexplained_imports(_tree(path), lines)
        ]
    assert not bad, (
        "an import inside a function says why beside it (# lazy: ...), or moves to the top of the module:\n"
        + "\n".join(bad)
    )


def test_no_module_imports_another_modules_private_name():
    bad = [
        f"{path.relative_to(REPO)}:{node.lineno}: {a.name} from {node.module}"
        for path in sorted(SWEEP.rglob("*.py"))
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sweep")
        for a in node.names
        if a.name.startswith("_") and not a.name.startswith("__")
    ]
    assert not bad, "a name another module imports is not private: drop its underscore\n" + "\n".join(bad)
