"""The report's opening (sweep/analysis/deploy.py): what to deploy on one screen, the policy's config
file beside report.md, the policy's own server measured against the envelope, and phantom speedups;
on results directories built with known numbers (tests/analysis/sweepdir.py)."""

from __future__ import annotations

import json
import textwrap

import polars as pl
from rich.console import Console

from sweep.analysis import phantom, policy, render, report
from sweep.results import load
from tests.analysis.sweepdir import ROLES, SweepDir, story_sweep

SCREEN, WIDTH = 30, 100


def _screen_lines(section: render.Section) -> int:
    """Lines the section takes on a terminal WIDTH columns wide (paragraphs wrapped, table rows)."""
    n = 1 + sum(len(textwrap.wrap(p, WIDTH)) or 1 for p in section.paragraphs)
    return n + (section.table.height + 3 if section.table is not None and section.table.height else 0)


def test_the_report_opens_with_what_to_deploy_on_one_screen(tmp_path):
    built = report.build(story_sweep(tmp_path / "k26_eagle-dryrun").write(), with_plots=False)
    titles = [s.title for s in built.sections]
    assert titles[1] == "Deploy" and titles.index("This sweep") < titles.index("Summary")
    assert built.markdown.split("\n## ", 2)[1].startswith("Deploy")  # the first section after the title
    deploy = built.sections[1]
    assert _screen_lines(built.sections[0]) + _screen_lines(deploy) <= SCREEN
    text = "\n".join(deploy.paragraphs)
    # the policy: steps by load, the break-even with its bracket, the file and flags, the plain table
    assert "- Policy drafter=k26_" in text and "speculation off above C~" in text and "(between C=" in text
    assert "Run: `--speculative-adaptive --speculative-adaptive-config policy-drafter-k26_" in text
    assert "--speculative-eagle-topk 1" in text
    assert (
        "Needs SGLang >= 0.5.23 (--speculative-adaptive); on this version (0.5.10) deploy the plain table: C=1"
    ) in text and "no speculation." in text
    # the long lines of the old header (the scaling's JSON) moved below the answer
    assert '{"single_stream_runs": [5, 3]}' not in text
    about = next(s for s in built.sections if s.title == "This sweep")
    assert any('{"single_stream_runs": [5, 3]}' in p for p in about.paragraphs)
    # the config files, one per policy, are SGLang's JSON of the policy derived from the same tables
    found = policy.from_tables(load(tmp_path / "k26_eagle-dryrun"))
    assert set(built.files) == {f"policy-{p.slug()}.json" for p in found} and len(found) == 4
    for p in found:
        assert json.loads(built.files[f"policy-{p.slug()}.json"]) == p.config()
    # the terminal shows the same first screen; the page puts its contents after it
    console = Console(width=WIDTH, record=True, force_terminal=False)
    render.terminal(built.sections[:2], console)
    assert "Run: `--speculative-adaptive" in console.export_text()
    assert built.html.index(">Deploy<") < built.html.index("<nav>")


def test_with_sglang_0_5_23_the_policy_needs_no_plain_table(tmp_path):
    sd = SweepDir(tmp_path / "r")
    base = sd.point(
        drafter="none",
        nccl="default",
        baseline=True,
        tok_s=[100, 100],
        sglang_version="0.5.23",
        levels={1: 100, 8: 700, 64: 3000},
    )
    for steps, levels in (("1", {1: 130, 8: 800, 64: 2600}), ("3", {1: 160, 8: 690, 64: 2200})):
        sd.point(
            drafter="d1",
            steps=steps,
            nccl="default",
            baseline_of=base,
            tok_s=[150, 150],
            sglang_version="0.5.23",
            levels=levels,
        )
    built = report.build(sd.write(), with_plots=False)
    text = "\n".join(built.sections[1].paragraphs)
    assert "Needs SGLang" not in text
    assert "Plain table (one server per load range): C=1-7: steps=3 · C=8-63: steps=1 · C>=64: no speculation." in text
    # one step count per tier, never 0 from the baseline's figure; C=8's tier from batch 2 (above C=1's)
    assert "one adaptive server, C=1 (batch 1): steps=3 · C>=8 (batches >= 2): steps=1." in text
    assert "there a non-speculative server (C=64: 3,000 tok/s without speculation against 2,600 of steps=1)" in text
    assert json.loads(built.files["policy-drafter-d1_nccl-default.json"]) == {
        "1": {"candidate_steps": [3]},
        "2": {"candidate_steps": [1]},
    }


def _confirmed(tmp_path, adaptive: dict[int, float]):
    """d1 with 1 and 3 steps, and the policy's own server measured at ``adaptive`` (its levels)."""
    sd = SweepDir(tmp_path / "c")
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100, 8: 700, 64: 3000})
    sd.point(
        drafter="d1", steps="1", nccl="default", baseline_of=base, tok_s=[130, 130], levels={1: 130, 8: 800, 64: 2600}
    )
    sd.point(
        drafter="d1", steps="3", nccl="default", baseline_of=base, tok_s=[160, 160], levels={1: 160, 8: 690, 64: 2200}
    )
    sd.point(
        drafter="d1",
        steps="adaptive",
        nccl="default",
        baseline_of=base,
        tok_s=[158, 158],
        levels=adaptive,
        argv=["python", "--speculative-adaptive", "--speculative-adaptive-config", "/tmp/p.json"],
    )
    return sd.write()


def test_the_policys_own_server_against_the_envelope_per_level(tmp_path):
    built = report.build(_confirmed(tmp_path, {1: 158, 8: 790, 64: 2500}), with_plots=False)
    deploy = built.sections[1]
    table = deploy.table
    assert table is not None and table["C"].to_list() == [1, 8, 64]
    rows = {r["C"]: r for r in table.iter_rows(named=True)}
    assert rows[1]["envelope"] == "160 steps=3" and rows[1]["vs envelope"].startswith("~")
    assert rows[64]["envelope"] == "3,000 none" and rows[64]["vs envelope"].endswith("SHORT")
    assert rows[64]["baseline"] == "3,000" and rows[8]["static"] == "800"
    assert rows[8]["vs static"].startswith("~") and rows[1]["vs baseline"] == "+58%"
    line = next(p for p in deploy.paragraphs if p.startswith("The policy's own server"))
    assert (
        "drafter=d1,steps=adaptive,nccl=default" in line and "short of the envelope beyond noise at C=64 (-17%)" in line
    )
    assert "best static setup steps=1" in line
    # its own point is no step count of the policy, and the other findings take it as one more setup
    [p] = policy.from_tables(load(tmp_path / "c"))
    assert set(p.steps) == {1, 3} and len(p.confirmation_ids) == 1
    assert p.config() == {"1": {"candidate_steps": [3]}, "2": {"candidate_steps": [1]}}
    # the first line: the winner by measurement; the policy lost at C=64 to the no-speculation server,
    # which beats the best static steps=1 there too: the plain table, with the figures
    first = deploy.paragraphs[0]
    assert first.startswith("Deploy: the plain table, one server per load range: C=1-7: steps=3 · C=8-63: steps=1")
    assert "below the envelope beyond noise at C=64 (-17%)" in first
    assert "the best static drafter=d1,steps=1,nccl=default is short too at C=1, C=64" in first
    assert "The no-speculation server beats any adaptive server at C=64: 3,000 against 2,500 tok/s" in first
    assert "Confirmation of drafter=d1,steps=adaptive,nccl=default" in built.markdown
    assert _screen_lines(built.sections[0]) + _screen_lines(deploy) <= SCREEN


def test_a_phantom_speedup_is_flagged_with_both_figures(tmp_path):
    """The drafter accepts 3.1 on the built-in coding prompts and 2.0 on the user's ShareGPT file."""
    sd = SweepDir(tmp_path / "w", roles={**ROLES, "workload": "benchmark"})
    for name, source, accept, gain in (("builtin", "coding", 3.1, 1.6), ("mine", "sharegpt:/data/mine.json", 2.0, 0.9)):
        base = sd.point(
            drafter="none",
            nccl="default",
            workload=name,
            baseline=True,
            tok_s=[100, 100],
            levels={1: 100, 8: 700},
            requests_workload=source,
        )
        for steps, scale in (("1", 0.9), ("2", 1.0)):
            sd.point(
                drafter="d1",
                steps=steps,
                nccl="default",
                workload=name,
                baseline_of=base,
                tok_s=[100 * gain * scale] * 2,
                levels={1: 100 * gain * scale, 8: 700 * gain * scale},
                accept_length=accept * scale,
                requests_workload=source,
            )
    built = report.build(sd.write(), with_plots=False)
    text = "\n".join(built.sections[1].paragraphs)
    assert (
        "phantom speedup: drafter=d1 steps=2 nccl=default accepts 2.00 tokens per verify on the user's workload "
        "sharegpt:mine.json against 3.10 on the built-in coding (0.65x"
    ) in text
    assert "single-stream speedup 0.90x on it against 1.60x on coding" in text
    # the deploy section shows the user's workload's policy, not the built-in prompts'
    assert "[workload=mine]" not in text  # the user's workload never pays: no policy for it
    frame = phantom.phantoms(load(tmp_path / "w"), *_single_and_levels(tmp_path / "w"))
    assert frame.filter(pl.col("below")).height == 2  # both step counts


def _single_and_levels(path):
    from sweep.analysis import speedups

    tables = load(path)
    return speedups.speedup_table(tables), speedups.level_speedups(tables)


def test_the_builtin_prompt_sets_are_the_benchmarks():
    """phantom.py may not import the benchmark (the analysis reads only results): its names of the
    built-in prompt sets are checked here against the benchmark's own."""
    from sweep.bench.prompts import BUILTIN

    assert phantom.BUILTIN_PROMPTS == BUILTIN


def test_an_adaptive_server_is_not_judged_against_a_chain_of_its_launch_steps(tmp_path):
    """It runs fewer steps under load: a chain of 3 steps accepting like the steps=1 point (0.7 at
    position 1) would reach 2.53 tokens per verify; the adaptive server's 1.3 is no 'low' drafter."""
    from sweep.analysis.findings import analyze

    sd = SweepDir(tmp_path / "a")
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100, 64: 3000})
    eagle = ["python", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d1"]
    sd.point(
        drafter="d1",
        steps="1",
        nccl="default",
        baseline_of=base,
        tok_s=[130, 130],
        levels={1: 130, 64: 2600},
        accept_length=1.7,
        argv=eagle + ["--speculative-num-steps", "1", "--speculative-eagle-topk", "1"],
    )
    sd.point(
        drafter="d1",
        steps="adaptive",
        nccl="default",
        baseline_of=base,
        tok_s=[130, 130],
        levels={1: 130, 64: 2900},
        accept_length=1.3,
        argv=eagle + ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-adaptive"],
    )
    acc = analyze(load(sd.write())).acceptance
    verdicts = dict(zip(acc["label"].to_list(), acc["verdict"].to_list()))
    assert verdicts["drafter=d1,steps=adaptive,nccl=default"] == "ok"


def test_the_break_even_and_the_plain_table_tell_one_story():
    """Where the baseline is never ahead beyond noise and speculation still measures faster at the top,
    the plain table keeps speculation: the text does not say 'off above C~N' beside it."""
    from tests.analysis.test_policy import _frames

    curves = {"1": {1: 60, 8: 430, 64: 1030}, "2": {1: 75, 8: 400, 64: 960}}
    base = {1: 50, 8: 380, 64: 1000}  # within noise of the best at C=64, 3 % slower
    [p] = policy.derive(*_frames(curves, base=base))
    assert p.break_even is not None and p.plain_table()[-1]["steps"] == 1
    from sweep.analysis import deploy

    text = deploy._off_text(p)
    assert "speculation off above" not in text and "within noise of no speculation (to C=64)" in text
    base = {1: 50, 8: 380, 64: 1200}  # ahead beyond noise at C=64: the plain table ends without speculation
    [p] = policy.derive(*_frames(curves, base=base))
    assert p.plain_table()[-1]["steps"] == 0 and "Break-even: speculation off above C~" in deploy._off_text(p)
    assert "(C=64: 1,200 tok/s without speculation against 1,030 of steps=1)" in deploy._off_text(p)
