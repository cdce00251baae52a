"""cluster/sglang-cpu-x86/tinymodels.py: its cache (stamps, rebuilds) without torch; the trained drafter's tensors with it."""

from __future__ import annotations

import json

import pytest

from sweep.bench.prompts import load_prompts
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
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == {
        k: tuple(v.shape) for k, v in random.items() if k not in ("d2t", "t2d")
    }


def test_the_tokenizer_and_the_drafter_learn_the_benchmarks_prompts():
    """The corpus holds every prompt the benchmark sends (a cache made without them tokenized them as
    never seen, and the drafter trained on other text accepted ~1.0 on two of three coding prompts)."""
    corpus = set(tm._corpus())
    for name in ("coding", "encyclopedic"):
        prompts = load_prompts(name).prompts
        assert prompts and set(prompts) <= corpus, name
    assert {f.stem for f in tm.prompt_files()} >= {"coding", "encyclopedic"}


def test_models_made_from_other_prompts_are_made_again(tmp_path, monkeypatch):
    made = []

    def maker(name):
        def make(out, root):
            out.mkdir(parents=True)
            made.append(name)

        return make

    monkeypatch.setattr(tm, "MODELS", {n: maker(n) for n in ("target", "eagle3-random", "eagle3")})
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "coding.jsonl").write_text(json.dumps({"prompt": "def f():"}) + "\n")
    monkeypatch.setattr(tm, "PROMPTS", folder)
    tm.ensure(tmp_path / "models")
    tm.ensure(tmp_path / "models")
    assert made == ["target", "eagle3-random", "eagle3"]
    (folder / "coding.jsonl").write_text(json.dumps({"prompt": "def g():"}) + "\n")
    tm.ensure(tmp_path / "models")
    assert made[3:] == ["target", "eagle3"]  # the random drafter does not read the prompts


def test_no_prompts_is_an_error_that_says_where_they_are_looked_for(tmp_path, monkeypatch):
    monkeypatch.setattr(tm, "PROMPTS", tmp_path / "nowhere")
    with pytest.raises(SystemExit, match="no benchmark prompts at .*nowhere"):
        tm.ensure(tmp_path / "models")


def test_a_seed_with_the_same_stamp_is_copied_one_with_another_is_made_again(tmp_path, monkeypatch):
    made = []

    def maker(name):
        def make(out, root):
            out.mkdir(parents=True)
            (out / "w").write_text("made")
            made.append(name)

        return make

    monkeypatch.setattr(tm, "MODELS", {n: maker(n) for n in ("target", "eagle3-random", "eagle3")})
    seed = tmp_path / "seed"
    want = tm.stamps()
    for name in ("target", "eagle3"):
        (seed / name).mkdir(parents=True)
        (seed / name / "w").write_text("seeded")
        (seed / name / tm.STAMP).write_text(want[name])
        (seed / name / "w").chmod(0o444)  # the shared seed is read-only
    (seed / "eagle3-random").mkdir()
    (seed / "eagle3-random" / tm.STAMP).write_text("another recipe\n")
    paths = tm.ensure(tmp_path / "models", seed)
    assert made == ["eagle3-random"]
    assert {n: (p / "w").read_text() for n, p in paths.items()} == {
        "target": "seeded",
        "eagle3": "seeded",
        "eagle3-random": "made",
    }
    (paths["target"] / "w").write_text("writable")  # the copy is the cache's own
    assert tm.ensure(tmp_path / "models", seed) == paths and len(made) == 1


def test_the_shared_seed_matches_this_recipe():
    """../shared/sglang-cpu/tiny-models seeds the real tier's models (11 minutes of training on an AVX2
    machine): a change of recipe or prompts makes every fresh machine train again, said here."""
    from tests.tools import REPO

    seed = REPO.parent / "shared" / "sglang-cpu" / "tiny-models"
    if not seed.is_dir():
        pytest.skip(f"no seed at {seed} (../shared beside the checkout)")
    want = tm.stamps()
    stale = [n for n in want if (seed / n / tm.STAMP).is_file() and (seed / n / tm.STAMP).read_text() != want[n]]
    assert not stale, f"the seed's {stale} were made by another recipe: each fresh machine makes them again"
