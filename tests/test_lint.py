"""The code stays clean by the rules pyproject.toml gives ruff ([tool.ruff]): run with the tests, so
that `python -m pytest` (and CI) fails on an unused import, an undefined name or a late-bound loop
variable as it would on a failing test."""

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(REPO / ".venv" / "bin")) or shutil.which("ruff")
    if ruff is None:
        try:
            import ruff as _ruff  # noqa: F401  (the package ships the binary)
        except ImportError:
            pytest.fail("ruff is not installed: pip install -e '.[test]' installs it")
        cmd = [sys.executable, "-m", "ruff"]
    else:
        cmd = [ruff]
    r = subprocess.run([*cmd, "check", "--no-cache", "sweep", "tests", "docs", "cluster"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
