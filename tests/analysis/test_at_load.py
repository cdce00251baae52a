"""``report DIR --at C=40`` / ``--rate 3/s`` (sweep/analysis/at_load.py): the setup at one load, read
off the measured curves, saying whether a level measured that load or it is interpolated between two;
on results directories built with known numbers (tests/analysis/sweepdir.py)."""

from __future__ import annotations

import pytest

from sweep.analysis import analyze, at_load
from sweep.core import SLOError
from sweep.results import load
from tests.analysis.sweepdir import SweepDir, story_sweep
from tests.conftest import run_sweep_cli


def _two(tmp_path):
    """A baseline and one drafter: the drafter ahead at C=1 and C=4, behind at C=16; each request is
    100 tokens, so a level's request rate is its output tok/s / 100."""
    sd = SweepDir(tmp_path / "res")
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[60] * 3, levels={1: 100, 4: 300, 16: 800})
    sd.point(
        drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=[90] * 3, levels={1: 150, 4: 330, 16: 600}
    )
    return sd.write()


def test_between_two_levels_the_figures_are_interpolated_and_said_to_be(tmp_path):
    f = analyze(load(_two(tmp_path)))
    lines = at_load.at_concurrency(f, 8)
    assert lines[0].startswith("C=8 was not measured: it lies between the measured levels C=4 and C=16")
    # in log C, 8 is halfway from 4 to 16: 300 + (800 - 300) / 2 = 550 against 330 + (600 - 330) / 2 = 465
    assert lines[1] == (
        "- Best, interpolated: drafter=none,nccl=default ≈ 550 output tok/s; runner-up "
        "drafter=d1,steps=2,nccl=default ≈ 465 (+18%)."
    )
    # how sure: the picks at the two measured levels around it, each with its interval
    assert lines[2].startswith("- How sure, at the measured levels around it: C=4: drafter=d1,steps=2,nccl=default")
    assert "C=16: drafter=none,nccl=default (no speculation)" in lines[2] and lines[2].count("95% interval") == 2


def test_at_a_measured_level_the_pick_and_its_interval(tmp_path):
    f = analyze(load(_two(tmp_path)))
    lines = at_load.at_concurrency(f, at_load.parse_concurrency("C=4"))
    assert lines[0] == "C=4 was measured."
    assert lines[1].startswith("- Best: C=4: drafter=d1,steps=2,nccl=default, 330 output tok/s, +10% (95% interval ")
    assert lines[1].endswith("over drafter=none,nccl=default.")


def test_outside_the_levels_nothing_is_extrapolated(tmp_path):
    f = analyze(load(_two(tmp_path)))
    lines = at_load.at_concurrency(f, 64)
    assert lines[0] == "C=64 is beyond the highest level measured (C=16): nothing is extrapolated."
    assert lines[1].startswith("- Nearest measured: C=16: drafter=none,nccl=default")
    assert not any("≈" in line for line in lines)


def test_a_rate_is_read_off_each_curve_and_the_faster_per_user_wins(tmp_path):
    f = analyze(load(path := _two(tmp_path)))
    rates = at_load.request_rates(load(path))
    lines = at_load.at_rate(f, rates, at_load.parse_rate("2/s"))
    # the baseline reaches 2 req/s halfway (in log C) from C=1 (1 req/s) to C=4 (3 req/s): C=2, where a
    # request gets 100 + (75 - 100) / 2 = 87.5 tok/s; the drafter at C=4^(0.5/1.8)=1.47, 131.2 tok/s
    assert lines[1] == (
        "- drafter=d1,steps=2,nccl=default: 131.2 tok/s per user, at C≈1.47, between the measured levels C=1 and "
        "C=4 (interpolated)."
    )
    assert lines[2].startswith("- drafter=none,nccl=default: 87.5 tok/s per user, at C≈2,")
    assert lines[3].startswith("- Best: drafter=d1,steps=2,nccl=default")
    # 7 req/s: the drafter never served more than 6 (at C=16)
    high = at_load.at_rate(f, rates, at_load.parse_rate("420/min"))
    assert (
        high[-1]
        == "- Cannot keep up at any level measured: drafter=d1,steps=2,nccl=default (at most 6.00 req/s, at C=16)."
    )
    assert high[-2].startswith("- Best: drafter=none,nccl=default")


def test_the_policys_tier_at_the_load(tmp_path):
    f = analyze(load(story_sweep(tmp_path / "res", dry_run=False).write()))
    assert f.policies
    lines = at_load.at_concurrency(f, 40)
    for p in f.policies:
        row = [r for r in p.plain_table() if r["lo"] <= 40][-1]  # the plain table: concurrency ranges
        runs = "no speculation" if row["steps"] == 0 else f"steps={row['steps']}"
        span = f"C>={row['lo']}" if row["to"] is None else f"C={row['lo']}-{row['to']}"
        (line,) = [x for x in lines if x.startswith(f"- Policy {p.group}: ")]
        assert f"at C=40 its plain table runs {runs} (its range {span})" in line, line
        tier = next(t for t in p.tiers if 30 in t.levels)  # the adaptive server: C=30's batches
        assert f"its adaptive server serves C=30's {tier.batches_text()}" in line, line


@pytest.mark.parametrize("text", ["x", "C=0", "-3", "C=40 rps"])
def test_a_load_that_is_not_one_is_refused(text):
    with pytest.raises(SLOError, match="is not a concurrency"):
        at_load.parse_concurrency(text)


def test_the_command_prints_the_answer_and_writes_nothing(tmp_path):
    path = _two(tmp_path)
    r = run_sweep_cli("report", str(path), "--at", "C=8")
    assert r.returncode == 0, r.stderr
    assert "C=8 was not measured" in r.stdout and "≈ 550 output tok/s" in r.stdout
    assert not (path / "report").exists()
    bad = run_sweep_cli("report", str(path), "--rate", "fast")
    assert bad.returncode == 7 and "--rate 'fast' is not a request rate" in bad.stderr
