"""The whole package type-checks clean by the rules pyproject.toml gives mypy ([tool.mypy]): run with
the tests, as tests/test_lint.py runs ruff, so that a wrong annotation or an unchecked None fails here.

Every file under sweep/ is checked (the top-level api.py, cli.py, __init__.py, __main__.py and every
room), a new one too. ``NOT_YET`` is empty: it is where a file would wait, named, while its types are
fixed (its errors: ``python -m mypy``, which checks the whole package); a file named there is still
read for its types. mypy keeps its cache in .mypy_cache: the first run takes about 20 s, a run after
it a few."""

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import REPO

NOT_YET: set[str] = set()  # paths under sweep/, e.g. "analysis/report.py"


def clean_files() -> list[str]:
    package = REPO / "sweep"
    return sorted(str(p.relative_to(REPO)) for p in package.rglob("*.py") if str(p.relative_to(package)) not in NOT_YET)


def test_not_yet_names_existing_files():
    missing = sorted(f for f in NOT_YET if not (REPO / "sweep" / f).is_file())
    assert not missing, f"NOT_YET names files that are gone: {missing}"


@pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None, reason="mypy is not installed: pip install -e '.[test]' installs it"
)
def test_mypy_finds_nothing():
    # the files not named are still read for their types, but their errors are theirs (NOT_YET)
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", *clean_files()],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
