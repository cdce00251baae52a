"""How many workers ``-n auto`` gives (tests/conftest.py): the default suite side by side, each tier in
one process, whatever the markers say around it."""

from __future__ import annotations

import shlex
import tomllib
from types import SimpleNamespace

import pytest

from tests.conftest import MAX_WORKERS, REPO, pytest_xdist_auto_num_workers


def workers(markexpr: str) -> int:
    return pytest_xdist_auto_num_workers(SimpleNamespace(option=SimpleNamespace(markexpr=markexpr)))


def test_the_default_suite_runs_side_by_side():
    addopts = shlex.split(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    )
    assert addopts[addopts.index("-n") + 1] == "auto"
    default = addopts[addopts.index("-m") + 1]
    assert 1 <= workers(default) <= MAX_WORKERS
    assert workers("not slow") == workers(default) == workers("")


@pytest.mark.parametrize("tier", ["scenario", "real_sglang", "netns", "gpu"])
def test_a_tier_runs_in_one_process(tier):
    assert workers(tier) == 0
    assert workers(f"{tier} and not slow") == 0
    assert workers(f"not {tier}") >= 1
