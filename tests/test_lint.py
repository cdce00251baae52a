"""The code stays clean by the rules pyproject.toml gives ruff ([tool.ruff]): run with the tests, so
that `python -m pytest` (and CI) fails on an unused import, an undefined name, a late-bound loop
variable, unsorted imports or unformatted code (ruff format) as it would on a failing test."""

import importlib.util
import subprocess
import sys

from tests.conftest import REPO


def test_ruff_finds_nothing():
    assert importlib.util.find_spec("ruff"), "ruff is not installed: pip install -e '.[test]' installs it"
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "sweep", "tests", "docs", "cluster"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_ruff_format_leaves_nothing_to_change():
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "sweep", "tests", "docs", "cluster"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, "run `ruff format sweep tests docs cluster`:\n" + r.stdout[-4000:] + r.stderr[-2000:]
