"""The confirmation's rounds on a results directory (sweep/analysis/confirmation.py ``to_confirm``):
the grid's policy first; once its own server was measured short of the best static setup, its revision
(``steps=adaptive-r2``); once that was measured, nothing (the notes say how it did); no revision past
the experiment's ``policy.revise``."""

from __future__ import annotations

import json

from sweep.analysis import policy
from sweep.analysis.confirmation import to_confirm
from sweep.results import load
from tests.analysis.sweepdir import SweepDir

LEVELS_1 = {1: 60, 2: 118, 8: 430, 32: 1000}
LEVELS_2 = {1: 74, 2: 143, 8: 435, 32: 995}
LEVELS_3 = {1: 76, 2: 144, 8: 380, 32: 820}
BASE = {1: 50, 2: 100, 8: 300, 32: 700}


def _grid(path, settings=None) -> tuple[SweepDir, str]:
    sd = SweepDir(path, settings=settings)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels=BASE, jitter=0.0)
    for steps, levels in (("1", LEVELS_1), ("2", LEVELS_2), ("3", LEVELS_3)):
        sd.point(
            drafter="d1", steps=steps, nccl="default", baseline_of=base, tok_s=[150, 150], levels=levels, jitter=0.0
        )
    return sd, base


def _confirmation(sd: SweepDir, base: str, value: str, config: dict, levels: dict[int, float]) -> None:
    sd.point(
        drafter="d1",
        steps=value,
        nccl="default",
        baseline_of=base,
        tok_s=[150, 150],
        levels=levels,
        jitter=0.0,
        argv=["python", "--speculative-adaptive", "--speculative-adaptive-config", json.dumps(config)],
    )


def test_a_short_confirmation_gives_its_revision_to_confirm_then_nothing(tmp_path):
    sd, base = _grid(tmp_path / "r")
    chosen, _, _ = to_confirm(sd.write())
    [c] = chosen
    first = c.policy
    assert first.revision == 1 and first.label() == "drafter=d1,steps=adaptive,nccl=default"
    # its own server: well short of the best static setup (2 steps) at C=1
    _confirmation(sd, base, "adaptive", first.config(), {1: 62, 2: 142, 8: 433, 32: 998})
    chosen, notes, _ = to_confirm(sd.write())
    [c] = chosen
    assert c.policy.revision == 2 and c.policy.label() == "drafter=d1,steps=adaptive-r2,nccl=default"
    assert c.policy.config() != first.config() and any(w.startswith("revision 2: C=1") for w in c.why)
    # the revision measured, within noise of the best at every level: nothing more to run
    _confirmation(sd, base, "adaptive-r2", c.policy.config(), {1: 74, 2: 143, 8: 434, 32: 999})
    chosen, notes, _ = to_confirm(sd.write())
    assert chosen == []
    assert any("confirmed (2 rounds): within noise of the best measured at every level" in n for n in notes), notes
    [p] = policy.from_tables(load(sd.path))
    assert set(p.confirmation_configs.values()) == {first.config_key(), c.policy.config_key()}


def test_no_revision_past_policy_revise(tmp_path):
    sd, base = _grid(tmp_path / "r", settings={"policy": {"confirm": True, "revise": 0}})
    [c] = to_confirm(sd.write())[0]
    _confirmation(sd, base, "adaptive", c.policy.config(), {1: 62, 2: 142, 8: 433, 32: 998})
    chosen, notes, _ = to_confirm(sd.write())
    assert chosen == [] and any("short; the answer by measurement is the" in n for n in notes), notes
