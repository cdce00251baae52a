"""cluster/sglang-cpu-x86/tinymodels.py: its cache (stamps, rebuilds) without torch; the trained drafter's tensors with it."""

from __future__ import annotations

import pytest

from tests.tools import tinymodels as tm


def test_ensure_makes_what_is_missing_once_and_remakes_an_old_recipe(tmp_path, monkeypatch):
    made = []

    def maker(name):
        def make(out, root):
            assert root == tmp_path and (name != "eagle3" or (root / "target" / tm.STAMP).is_file())
            out.mkdir(parents=True)
            (out / "w").write_text(name)
            made.append(name)
        return make

    monkeypatch.setattr(tm, "MODELS", {n: maker(n) for n in ("target", "eagle3-random", "eagle3")})
    paths = tm.ensure(tmp_path)
    assert made == ["target", "eagle3-random", "eagle3"]
    assert {n: (p / "w").read_text() for n, p in paths.items()} == {n: n for n in paths}
    tm.ensure(tmp_path)
    assert len(made) == 3  # idempotent
    # a cache from before the drafter was trained: "eagle3" stamped "ok" is the random one, made again
    (tmp_path / "eagle3" / tm.STAMP).write_text("ok\n")
    tm.ensure(tmp_path)
    assert made[3:] == ["eagle3"] and not list(tmp_path.glob(".*.tmp*"))


def test_the_trained_drafter_has_the_random_ones_tensors():
    torch = pytest.importorskip("torch")
    model = tm._drafter_module(torch.zeros(tm.VOCAB, tm.HIDDEN))
    random = tm.eagle3_weights()
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in random.items() if k not in ("d2t", "t2d")}
