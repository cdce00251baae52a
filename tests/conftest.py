"""Project-wide test set-up: Ray and anything else a test starts must not touch the user's HOME."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The project's shared data beside the checkout (../shared): real SGLang's transcripts and source. A
# plain clone has none; the tests that read it skip with the reason (``needs_shared``).
SHARED = REPO.parent / "shared"
TRANSCRIPTS = SHARED / "sglang-cpu" / "transcripts"


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
