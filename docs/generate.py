"""Regenerate the reference experiment's dry run the docs show, from a run of the code as it is.

    python docs/generate.py            # the dry run (a few minutes), its report, then docs/ rewritten

Writes ``docs/frontier.png`` and ``docs/reference-dryrun.md`` (the report's summary, its SLO
recommendations and its frontier table, word for word), stamped with a digest of what produces them.
``tests/test_docs.py`` fails when that changed since: the figures can then no longer be trusted, and
this script makes them true again. The README and the hand-written pages quote none of them.

The digest is of what the figures come from, read for its meaning: a module's syntax tree without its
docstrings (``ast.dump`` leaves comments and positions out), the experiment file's parsed content, and
other files (the prompt sets) byte for byte; Markdown is left out. A comment, a docstring or a
reformatting changes no figure, so it keeps the digest; a change of code or of a setting does not.
(The references of the site, experiment keys, commands, columns, the floors, are not generated here:
docs/reference.py draws them from the code at each build.)
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXPERIMENT = "experiments/k26_eagle.yaml"
DOC = REPO / "docs" / "reference-dryrun.md"
FRONTIER = REPO / "docs" / "frontier.png"
# what the figures come from: the experiment, the fake and its speed, the benchmark, the orchestration
# of a dry run, the results and the analysis
SOURCES = (
    EXPERIMENT,
    "sweep/fake",
    "sweep/bench",
    "sweep/analysis",
    "sweep/results",
    "sweep/experiment/dryrun.py",
    "sweep/experiment/grid.py",
    "sweep/experiment/plan.py",
    "sweep/core/settings.py",
)
SECTIONS = ("Deploy", "Summary", "SLOs and goodput", "Throughput-interactivity frontier")
STAMP = re.compile(r"^<!-- sources: ([0-9a-f]{16}) -->$", re.M)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with the docstring of its module, classes and functions taken out."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            del body[0]
    return tree


def meaning(path: Path) -> bytes | None:
    """What of a file can change a figure: a module's syntax tree without docstrings (comments and
    positions are not in it), a YAML file's parsed content, any other file's bytes; None for Markdown."""
    if path.suffix == ".md":
        return None
    if path.suffix == ".py":
        tree = _without_docstrings(ast.parse(path.read_bytes(), filename=str(path)))
        return ast.dump(tree, include_attributes=False).encode()
    if path.suffix in (".yaml", ".yml"):
        return json.dumps(yaml.safe_load(path.read_text()), sort_keys=True, default=str).encode()
    return path.read_bytes()


def digest() -> str:
    """A digest of what the figures come from: each source file's path and ``meaning`` (caches left out)."""
    h = hashlib.sha256()
    for source in SOURCES:
        p = REPO / source
        files = sorted(f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts) if p.is_dir() else [p]
        for f in files:
            content = meaning(f)
            if content is not None:
                h.update(str(f.relative_to(REPO)).encode() + b"\0" + content + b"\0")
    return h.hexdigest()[:16]


def stamped() -> str | None:
    """The digest docs/reference-dryrun.md was generated from, or None."""
    m = STAMP.search(DOC.read_text()) if DOC.exists() else None
    return m.group(1) if m else None


def sections(report_md: str, titles: tuple[str, ...]) -> list[str]:
    """The named ``## `` sections of a report, in the report's order, each whole."""
    parts = re.split(r"(?m)^(?=## )", report_md)
    found = [p.rstrip() for p in parts if p.startswith("## ") and p[3:].splitlines()[0].strip() in titles]
    names = [p[3:].splitlines()[0].strip() for p in found]
    missing = [t for t in titles if t not in names]
    if missing:
        raise SystemExit(f"the report has no section {', '.join(missing)}: update SECTIONS in {__file__}")
    return found


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="sweep-docs-") as tmp:
        env = {**os.environ, "COLUMNS": "200"}
        run = [sys.executable, "-m", "sweep", EXPERIMENT, "--dry-run", f"results_dir={tmp}"]
        subprocess.run(run, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
        out = Path(tmp)  # results_dir is the sweep's own directory
        subprocess.run(
            [sys.executable, "-m", "sweep", "report", str(out)],
            cwd=REPO,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        report = out / "report"
        shutil.copyfile(report / "frontier.png", FRONTIER)
        body = "\n\n".join(sections((report / "report.md").read_text(), SECTIONS))
    DOC.write_text(
        "# The reference experiment's dry run, as the code now computes it\n\n"
        f"Generated by `python docs/generate.py` (`{' '.join(['python', '-m', 'sweep', EXPERIMENT, '--dry-run'])}`, "
        "then `python -m sweep report`): the fake SGLang server, its figures at the real system's speed. "
        "Do not edit: rerun the script.\n\n"
        "**One run, not the expected answer.** The fake serves its model in real time on the machine that ran "
        "this, so every figure below moves from run to run, and a pick within noise of its runner-up (the lines "
        "that say so, and every 'no decision') can name the other setup next time. How much identical dry runs "
        "of this experiment move, measured by `python tests/perf/run_to_run.py`, is in [Measured performance]"
        "(measured.md#how-much-a-dry-run-moves-from-run-to-run). What holds from run to run is the shape: which lines are within "
        "noise, speculation ahead at low concurrency and behind at the highest, the NCCL lift fading with load.\n\n"
        f"<!-- sources: {digest()} -->\n\n{body}\n"
    )
    print(f"wrote {DOC.relative_to(REPO)} and {FRONTIER.relative_to(REPO)} (sources {digest()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
