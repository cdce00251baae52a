"""The docs: the reference dry run they show is generated from the code as it is (docs/generate.py), its
staleness judged on what the figures come from, not on comments; the site builds with ``mkdocs build
--strict`` (every link and anchor resolves, the references drawn from the code by docs/reference.py);
the README stays a couple of screens."""

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from sweep.experiment import config, plan

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


def test_a_comment_or_a_docstring_edit_keeps_the_digest(tmp_path, monkeypatch):
    gen = _generate()
    (tmp_path / "a").mkdir()
    module = tmp_path / "a" / "x.py"
    experiment = tmp_path / "e.yaml"
    module.write_text('"""A module."""\n\n\ndef f(x):\n    """Twice."""\n    return 2 * x  # doubled\n')
    experiment.write_text("name: e\nlevels: [1, 2]\n")
    monkeypatch.setattr(gen, "REPO", tmp_path)
    monkeypatch.setattr(gen, "SOURCES", ("e.yaml", "a"))
    before = gen.digest()
    module.write_text('"""A module, said otherwise."""\n\n\ndef f(x):\n    # no docstring now\n    return 2 * x\n')
    experiment.write_text("# the experiment\nname: e  # its name\nlevels:\n  - 1\n  - 2\n")
    (tmp_path / "a" / "README.md").write_text("what a is")
    assert gen.digest() == before


def test_a_code_or_a_setting_change_changes_the_digest(tmp_path, monkeypatch):
    gen = _generate()
    (tmp_path / "a").mkdir()
    module = tmp_path / "a" / "x.py"
    experiment = tmp_path / "e.yaml"
    module.write_text("def f(x):\n    return 2 * x\n")
    experiment.write_text("name: e\nlevels: [1, 2]\n")
    monkeypatch.setattr(gen, "REPO", tmp_path)
    monkeypatch.setattr(gen, "SOURCES", ("e.yaml", "a"))
    before = gen.digest()
    module.write_text("def f(x):\n    return 3 * x\n")
    code_changed = gen.digest()
    experiment.write_text("name: e\nlevels: [1, 4]\n")
    assert len({before, code_changed, gen.digest()}) == 3


def test_the_readme_points_at_the_generated_figures_and_quotes_none():
    readme = (REPO / "README.md").read_text()
    assert "docs/reference-dryrun.md" in readme and "docs/frontier.png" in readme
    # the recommendations and margins are the generated file's, never copied into the README or a page
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        if page.name != "reference-dryrun.md":
            text = page.read_text()
            assert "C≈" not in text and "over its baseline;" not in text, page


def test_the_readme_fits_a_couple_of_screens_and_keeps_the_two_commands():
    """What it is, the two commands for a fresh machine (CI runs them: .ci/run), where to go next."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 60 and len(readme) <= 5000, (len(readme.splitlines()), len(readme))
    install = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]'"
    assert f"{install} && python -m sweep experiments/k26_eagle.yaml --dry-run" in readme
    assert f"{install} && python -m pytest" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test]'" in ci and "\npython -m pytest\n" in ci


def test_every_page_the_readme_and_the_site_link_exists():
    """The README's links into docs/ and the files the README and the pages name (the site's own links are
    checked by the strict build); every page is in the site's navigation."""
    readme = (REPO / "README.md").read_text()
    for target in re.findall(r"\]\(((?:docs/)[^)#]*)", readme):
        assert (REPO / target).exists(), f"README links {target}, which does not exist"
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for path in set(
            re.findall(r"\b((?:cluster|experiments|tests|docs)/[\w./-]+\.(?:sh|yaml|py|md|png))\b", page.read_text())
        ):
            made_by_the_reader = path == "experiments/first.yaml"  # "Your first experiment": save this as ...
            assert made_by_the_reader or (REPO / path).exists(), (
                f"{page.relative_to(REPO)} names {path}, which does not exist"
            )
    nav = (REPO / "mkdocs.yml").read_text()
    for page in sorted((REPO / "docs").rglob("*.md")):
        assert str(page.relative_to(REPO / "docs")) in nav, f"{page} is in no section of mkdocs.yml's nav"


def test_the_site_builds_strict(tmp_path):
    """``mkdocs build --strict``: a broken link or anchor, a reference that cannot be drawn, a docstring
    mkdocstrings cannot read, fails it. The generated references hold what the code has."""
    for package in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        assert importlib.util.find_spec(package), f"{package} is not installed: pip install -e '.[test]' installs it"
    started = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert time.monotonic() - started < 120
    site = tmp_path / "site"
    keys = (site / "reference" / "experiment-file" / "index.html").read_text()
    assert "benchmark.concurrency.levels" in keys and "server.timeouts.stall_s" in keys
    assert "results/&lt;name&gt;" in keys  # a comment's <name> is text, not an HTML tag that swallows it
    # a type in a table cell as it is, not 'str \\| None' (a pipe in a code span splits no cell there)
    assert "<code>str | None</code>" in keys and "\\|" not in keys
    columns = (site / "reference" / "results-columns" / "index.html").read_text()
    assert "output_throughput" in columns and "point_id" in columns
    commands = (site / "reference" / "cli" / "index.html").read_text()
    assert "--dry-run" in commands and "python -m sweep check-drafter" in commands
    assert "floor 1" in (site / "architecture" / "index.html").read_text()
    assert "SweepResult" in (site / "python-api" / "index.html").read_text()
    walk = (site / "one-gpu-host" / "index.html").read_text()  # from the dry run to one real host, linked
    assert (
        "ray start --head" in walk
        and 'href="../one-gpu-host/"' in (site / "getting-started" / "index.html").read_text()
    )


def test_sections_are_taken_whole_and_in_order():
    gen = _generate()
    md = "# R\n\n## Summary\n\n- a\n\n## Other\n\nx\n\n## SLOs and goodput\n\nb\n"
    assert gen.sections(md, ("SLOs and goodput", "Summary")) == ["## Summary\n\n- a", "## SLOs and goodput\n\nb"]


def test_the_first_experiment_plans_clean(tmp_path):
    """docs/getting-started.md, "Your first experiment": the YAML as printed plans 4 valid points with no warning."""
    page = (REPO / "docs" / "getting-started.md").read_text()
    section = page.split("## Your first experiment", 1)[1].split("\n## ", 1)[0]
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


_DOTTED = re.compile(r"(?<![\w./-])(sweep(?:\.[A-Za-z_]\w*)+)(?![\w-])")
_PATH = re.compile(r"(?<![\w/.-])(sweep/[\w/]*\w\.(?:py|md))\b")
_FILES = ("json", "lock", "yaml", "log", "py", "md")  # sweep.json, .sweep.lock: file names, not modules


def _resolves(dotted: str) -> bool:
    """``sweep.x.y.Name``: the longest importable module, then each attribute in turn."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _wrong_references(text: str) -> list[str]:
    names = [m.group(1) for m in _DOTTED.finditer(text) if m.group(1).rsplit(".", 1)[-1] not in _FILES]
    return [n for n in names if not _resolves(n)] + [p for p in _PATH.findall(text) if not (REPO / p).exists()]


def _docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return [(getattr(n, "lineno", 1), ast.get_docstring(n) or "") for n in ast.walk(tree) if isinstance(n, kinds)]


def test_every_module_a_docstring_or_a_page_names_is_there():
    """A docstring or a page that names ``sweep.x.y.Name`` or ``sweep/x/y.py`` names something that exists there."""
    wrong = [
        f"{path.relative_to(REPO)}:{line}: {ref}"
        for path in sorted((REPO / "sweep").rglob("*.py"))
        for line, doc in _docstrings(path)
        for ref in _wrong_references(doc)
    ]
    pages = [REPO / "README.md", REPO / "sweep" / "bench" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    wrong += [f"{page.relative_to(REPO)}: {ref}" for page in pages for ref in _wrong_references(page.read_text())]
    assert not wrong, "\n".join(wrong)


def test_a_wrong_module_in_a_docstring_is_found():
    assert _wrong_references("gets a ``sweep.core.types.SweepStarted`` (see sweep/core/nothing.py)") == [
        "sweep.core.types.SweepStarted",
        "sweep/core/nothing.py",
    ]
    assert _wrong_references("``sweep.core.events.SweepStarted``, sweep/core/events.py, ``sweep.json``") == []


# ---- measured figures: records (tests/perf/record.py), included by the pages ----------------------------

_RECORDS = REPO / "docs" / "measured"
_INCLUDE = re.compile(r"<!-- generated: measured/([a-z_-]+) -->")
_UNIT = r"\s*(?:%|s|ms|MB|tok/s|x|host-s)"
_NUMBER = rf"~?(?:\d+\.\d+(?:{_UNIT})?|\d[\d,]*{_UNIT})"  # a decimal, or a number with its unit
_FIGURE = re.compile(rf"^\s*{_NUMBER}(?:\s*/\s*[\d.,]+\s*(?:%|s|ms)?)?\s*$|^\s*\d+\s*/\s*\d+\s*(?:%|s|ms)\s*$")


def _record_module():
    spec = importlib.util.spec_from_file_location("perf_record", REPO / "tests" / "perf" / "record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pages() -> dict[Path, str]:
    return {p: p.read_text() for p in sorted((REPO / "docs").rglob("*.md")) if p.name != "reference-dryrun.md"}


def test_every_record_has_its_provenance_and_a_page_that_includes_it():
    """A record says what measured it, when, where, at which commit and from what; a page includes it, and
    every page's include names a record. A record measured before the code changed stays (perf figures are
    not measured in CI): the page shows the commit and the date it was measured at."""
    record = _record_module()
    records = sorted(p.stem for p in _RECORDS.glob("*.json"))
    assert records, f"no record in {_RECORDS}"
    included = {name for text in _pages().values() for name in _INCLUDE.findall(text)}
    for name in records:
        problems = record.check(record.load(name))
        assert not problems, f"docs/measured/{name}.json: {'; '.join(problems)}"
        assert name in included, (
            f"docs/measured/{name}.json is included by no page: add <!-- generated: measured/{name} -->"
        )
    assert not included - set(records), f"pages include records that do not exist: {sorted(included - set(records))}"


def test_a_record_without_its_provenance_is_found():
    record = _record_module()
    good = record.make("python tests/perf/x.py", [record.table("t", ["a", "b"], [[1, "2 s"]])], ["sweep/core"])
    assert record.check(good) == []
    assert "Measured at" in record.render(good) and "| 1 | 2 s |" in record.render(good)
    bad = {**good, "commit": "", "machine": {"cpu": "x"}, "sources": ["sweep/nothing.py"]}
    assert record.check(bad) == ["no commit", "no machine cores", "source sweep/nothing.py does not exist"]


def test_a_record_says_whether_the_code_it_measures_changed_since_and_fails_nothing():
    """The fingerprint is of the sources' meaning: the page says the code changed (and how to measure
    again) where it did, and nothing fails."""
    record = _record_module()
    now = record.make("python tests/perf/x.py", [record.table("t", ["a"], [[1]])], ["sweep/core/errors.py"])
    assert now["fingerprint"] == record.fingerprint(["sweep/core/errors.py"]) != record.fingerprint(["sweep/core"])
    assert "is the same since" in record.render(now)
    before = {**now, "fingerprint": "0" * 16}
    assert record.check(before) == [] and "has changed since" in record.render(before)


def _tables(text: str) -> list[list[str]]:
    """Every Markdown table row's cells, header and rule rows left out."""
    rows, previous = [], ""
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|[\s:|-]+\|$", line):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if previous.startswith("|"):  # not a header: a header is the first row
                rows.append(cells)
        previous = line
    return rows


def test_pages_quote_measured_figures_only_through_records():
    """No page holds a table of measured figures (a cell that is only a number, a time or a percentage), and
    a paragraph that says what was measured includes its record: re-measuring is running a script with
    ``--record``, never a hand edit of a page."""
    for page, text in _pages().items():
        figures = [row for row in _tables(text) if any(_FIGURE.match(c) for c in row if c)]
        assert not figures, f"{page.relative_to(REPO)} types measured figures into a table: {figures[:3]}"
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Measured"):  # what was measured, and its figures: a record within a few lines
                near = "\n".join(lines[i : i + 12])
                assert _INCLUDE.search(near), f"{page.relative_to(REPO)}:{i + 1}: {line[:80]!r}... quotes no record"


def test_a_table_of_figures_is_found():
    assert _tables("| a | b |\n|---|---|\n| x | 56 / 108 s |\n| 0.1 % | y |\n") == [["x", "56 / 108 s"], ["0.1 %", "y"]]
    assert all(_FIGURE.match(c) for c in ("56 / 108 s", "0.1 %", "1.005", "130.65", "45 s"))
    assert not any(_FIGURE.match(c) for c in ("`k26_eagle.yaml`", "C=250", "no decision", "x", "2"))  # an exit code
