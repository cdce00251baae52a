"""What the README shows of the reference dry run is generated from the code as it is (docs/generate.py)."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _generate():
    spec = importlib.util.spec_from_file_location("docs_generate", REPO / "docs" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_reference_figures_are_from_the_code_as_it_is():
    gen = _generate()
    assert gen.stamped() == gen.digest(), (
        "the code that computes docs/reference-dryrun.md and docs/frontier.png changed since they were generated: "
        "run `python docs/generate.py` and commit what it writes"
    )


def test_the_digest_follows_the_sources(tmp_path, monkeypatch):
    gen = _generate()
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("1")
    monkeypatch.setattr(gen, "REPO", tmp_path)
    monkeypatch.setattr(gen, "SOURCES", ("a",))
    before = gen.digest()
    (tmp_path / "a" / "x.py").write_text("2")
    assert gen.digest() != before


def test_the_readme_points_at_the_generated_figures_and_quotes_none():
    readme = (REPO / "README.md").read_text()
    assert "docs/reference-dryrun.md" in readme and "docs/frontier.png" in readme
    # the recommendations and margins are the generated file's, never copied into the README
    assert "C≈" not in readme and "over its baseline;" not in readme


def test_sections_are_taken_whole_and_in_order():
    gen = _generate()
    md = "# R\n\n## Summary\n\n- a\n\n## Other\n\nx\n\n## SLOs and goodput\n\nb\n"
    assert gen.sections(md, ("SLOs and goodput", "Summary")) == ["## Summary\n\n- a", "## SLOs and goodput\n\nb"]


def test_the_readmes_first_experiment_plans_clean(tmp_path):
    """README, "Your first experiment": the YAML as printed plans 4 valid points with no warning."""
    import re

    from sweep.experiment import config, plan

    readme = (REPO / "README.md").read_text()
    section = readme.split("## Your first experiment", 1)[1].split("\n## ", 1)[0]
    yaml_text = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    path = tmp_path / "first.yaml"
    path.write_text(yaml_text)
    p = plan.build(config.load(str(path)))
    assert len(p.points) == 4 and not p.invalid, [x.errors for x in p.invalid]
    assert p.warnings == [] and not [w for x in p.points for w in x.warnings]
    assert sorted(x.label for x in p.points) == [
        "drafter=mine,steps=1",
        "drafter=mine,steps=2",
        "drafter=mine,steps=3",
        "drafter=none",
    ]
