"""Project-wide test set-up: Ray and anything else a test starts must not touch the user's HOME."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The project's shared data beside the checkout (../shared): real SGLang's transcripts and source. A
# plain clone has none; the tests that read it skip with the reason (``needs_shared``).
SHARED = REPO.parent / "shared"
TRANSCRIPTS = SHARED / "sglang-cpu" / "transcripts"


# The default suite runs side by side (pytest-xdist, ``-n auto`` in pyproject.toml); each worker is a
# process of its own, and every test that holds a machine-wide name (a port, a Ray cluster, a results
# lock) takes a free one or a tmp_path of its own. xdist hands its workers COLUMNS=80 from the
# controller's terminal, which the consoles read as a width the user chose (sweep/core/console.py):
# the tests read the output as a pipe gives it, so a worker drops it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

_TIERS = re.compile(r"(?<!not )\b(scenario|real_sglang|netns|gpu)\b")
MAX_WORKERS = 4  # beyond it the suite's few long tests, not the cores, set its time


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: a worker per core, at most MAX_WORKERS, for the default suite; none (one process,
    as before) for a tier (``-m scenario``, ``real_sglang``, ``netns``, ``gpu``): its tests start Ray
    clusters, namespaces or SGLang servers that take every core, and time each other out side by side."""
    if _TIERS.search(config.option.markexpr or ""):
        return 0
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def needs_shared(path: Path = TRANSCRIPTS) -> pytest.MarkDecorator:
    """Skip a test (or, as ``pytestmark``, a module) where ``path`` under ../shared is missing."""
    return pytest.mark.skipif(
        not path.exists(), reason=f"no {path} (../shared beside the checkout; a plain clone has none)"
    )


@pytest.fixture(autouse=True, scope="session")
def _isolated_ray_home(tmp_path_factory):
    # ray.init() writes ~/.ray/auth_token and turns token auth on; keep tests out of the real HOME
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    yield


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def write_yaml(tmp_path):
    """Write an experiment file from text and return its path."""

    def _write(text: str, name: str = "exp.yaml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return _write


def run_sweep_cli(*args: str, cwd: Path = REPO, timeout: float = 120, env: dict | None = None):
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "sweep", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
