"""``history``'s "points: N of M": the plan's points, counted as the points are, with client-side axes
(several points per launch); a plan.json whose labels were hidden (bench_key taken for a secret) is
not counted at all rather than wrongly."""

from __future__ import annotations

import json

from sweep.analysis import history
from sweep.core.redact import redact_tree
from sweep.results.meta import PLAN
from tests.analysis.test_history import nightly


def test_a_plan_points_bench_key_is_no_secret_and_keeps_the_labels():
    point = {"label": "drafter=none,workload=code", "bench_key": "workload=code", "env": {"HF_TOKEN": "hf_abcdefgh"}}
    shown = redact_tree(point)
    assert shown["label"] == "drafter=none,workload=code" and shown["bench_key"] == "workload=code"
    assert shown["env"]["HF_TOKEN"] == "<redacted>"  # a secret still is one


def test_points_of_planned_count_every_point_and_an_unreadable_plan_none(tmp_path):
    path = nightly(tmp_path / "n-a", 1000.0)
    labels = ["drafter=none,nccl=default", "drafter=d1,steps=2,nccl=default"]
    (path / PLAN).write_text(json.dumps({"points": [{"label": label} for label in labels]}))
    (run,) = history.build([tmp_path]).runs.to_dicts()
    assert (run["points"], run["planned"]) == (2, 2)
    hidden = ["drafter=none,<redacted>", "drafter=d1,steps=2,<redacted>"]  # as older sweeps wrote it
    (path / PLAN).write_text(json.dumps({"points": [{"label": label} for label in hidden]}))
    h = history.build([tmp_path])
    (run,) = h.runs.to_dicts()
    assert (run["points"], run["planned"]) == (2, None) and "pending" not in set(h.history["verdict"].drop_nulls())
