"""Which recorded points a resume may keep, by the SGLang they ran (sweep/orchestrate/versions.py):
those of the release the hosts run now; where only the experiment's pin speaks for the hosts, a build
of the pinned release (a CPU build's own version string) counts as that release. The whole refusal
on a results directory: tests/results/test_legacy_dir.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.core import ResultsError
from sweep.orchestrate.versions import Running, check_reuse

KEPT = {"a": ("0.5.10", "drafter=none"), "b": ("0.5.10", "drafter=d1")}


def test_points_of_the_release_the_hosts_run_are_kept():
    check_reuse(Path("res"), KEPT, Running("0.5.10", "the cluster's hosts run"))
    check_reuse(Path("res"), KEPT, Running(None, ""))  # not learned, nothing pinned: nothing to hold against them


def test_points_of_another_release_are_refused_naming_both_and_the_way_out():
    with pytest.raises(ResultsError) as e:
        check_reuse(Path("res"), KEPT, Running("0.5.23", "the cluster's hosts run"))
    assert "2 points measured under SGLang 0.5.10 (drafter=none, drafter=d1)" in e.value.message
    assert "the cluster's hosts run 0.5.23" in e.value.message
    assert "results_dir=res-sglang-0.5.23" in e.value.fix and "--force" in e.value.fix
    assert e.value.exit_code == 5


def test_a_pin_compares_releases_not_build_strings():
    built = {"a": ("0.0.0.dev0+g7f8f030", "drafter=none")}  # the CPU build (commit 7f8f030): 0.5.23's rules
    check_reuse(Path("res"), built, Running("0.5.23", "server.sglang_version pins"))
    with pytest.raises(ResultsError):
        check_reuse(Path("res"), built, Running("0.5.10", "server.sglang_version pins"))
