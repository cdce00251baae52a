"""``python -m sweep history``: the runs under a root, each experiment's figures run by run, what changed
between runs, regressions beyond noise (and none between identical runs); the same tables from Python
(``sweep.history``) and as ``sweep query`` views over several directories."""

from __future__ import annotations

import json

import polars as pl
import pytest

import sweep
from sweep.analysis import history
from sweep.analysis.slo import parse_slo
from sweep.cli import main
from tests.analysis.sweepdir import SweepDir

BASE = "drafter=none,nccl=default"
D1 = "drafter=d1,steps=2,nccl=default"
SETTINGS = {
    "server": {"model_path": "/models/m", "flags": {"max-running-requests": 64}},
    "benchmark": {"concurrency": {"levels": [1, 16]}},
    "results_dir": "somewhere",
}
SLO = ["chat: ttft_p90<=1s"]


def nightly(
    path,
    started_at,
    *,
    base_tok_s=(100, 101, 99),
    d1_tok_s=(150, 151, 149),
    d1_c16=1320.0,
    base_c16=1200.0,
    settings=None,
    version="0.5.10",
    failed=False,
):
    """One run of the experiment "nightly": a baseline and a drafter over two levels (and a failed point)."""
    settings = {**(SETTINGS if settings is None else settings), "source": f"{path}.yaml"}  # each its own file
    sd = SweepDir(path, experiment="nightly", started_at=started_at, manifest={"mode": "dry-run"}, settings=settings)
    base = sd.point(
        drafter="none",
        nccl="default",
        baseline=True,
        tok_s=list(base_tok_s),
        levels={1: base_tok_s[0], 16: base_c16},
        sglang_version=version,
    )
    sd.point(
        drafter="d1",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=list(d1_tok_s),
        levels={1: d1_tok_s[0], 16: d1_c16},
        sglang_version=version,
    )
    if failed:
        sd.point(
            drafter="d2",
            steps="2",
            nccl="default",
            baseline_of=base,
            status="failed",
            failure_phase="capture",
            failure_reason="CUDA out of memory",
        )
    return sd.write()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Under one root: three runs of "nightly" (b repeats a within noise; c runs with another
    max-running-requests and SGLang: d1 loses 20 % at C=16 and gains 10 % in single stream), and one
    run of another experiment, written by an older sweep without a manifest."""
    r = tmp_path_factory.mktemp("history") / "results"
    nightly(r / "n-a", 1000.0)
    nightly(r / "n-b", 5000.0, base_tok_s=(100.5, 101.5, 99.5), d1_c16=1324.0, failed=True)
    changed = {**SETTINGS, "server": {"model_path": "/models/m", "flags": {"max-running-requests": 32}}}
    nightly(r / "n-c", 9000.0, d1_tok_s=(165, 166, 164), d1_c16=1056.0, settings=changed, version="0.5.23")
    other = SweepDir(r / "other", experiment="other")
    other.point(drafter="none", nccl="default", baseline=True, tok_s=[50, 51, 49], levels={1: 50})
    other.write()
    return r


@pytest.fixture(scope="module")
def h(root):
    return history.build([root])


def verdicts(h: history.History, run: str) -> dict[tuple[str, str, int | None], str | None]:
    rows = h.history.filter(pl.col("run").str.ends_with(run))
    return {(r["label"], r["figure"], r["concurrency"]): r["verdict"] for r in rows.iter_rows(named=True)}


def test_the_runs_table(root):
    h = history.build([root], slos=[parse_slo(SLO[0])])
    by_name = {r["name"]: r for r in h.runs.iter_rows(named=True)}
    assert set(by_name) == {"n-a", "n-b", "n-c", "other"}
    assert by_name["n-b"]["experiment"] == "nightly" and by_name["n-b"]["mode"] == "dry-run"
    assert (by_name["n-b"]["ok"], by_name["n-b"]["failed"], by_name["n-b"]["pruned"]) == (2, 1, 0)
    assert by_name["n-c"]["sglang_version"] == "0.5.23" and by_name["n-c"]["started_at"] == 9000.0
    assert by_name["other"]["experiment"] == "other" and by_name["other"]["mode"] == "real"  # no manifest
    picks = h.picks.filter(pl.col("slo") == "chat")
    assert picks.height == 4 and picks["label"].null_count() == 0


def test_identical_runs_flag_nothing_and_a_changed_run_is_flagged(h):
    first = verdicts(h, "n-a")
    assert set(first.values()) == {None}  # the first run of its series: nothing to compare
    again = verdicts(h, "n-b")
    assert "regression" not in again.values() and "improvement" not in again.values()
    assert again[(BASE, "tok_s", None)] == "within noise"  # +0.5 %, inside its interval
    assert again[(D1, "output_throughput", 16)] == "within noise"  # +0.3 %
    assert again[("drafter=d2,steps=2,nccl=default", "startup_s", None)] == "new"
    changed = verdicts(h, "n-c")
    assert changed[(D1, "output_throughput", 16)] == "regression"
    assert changed[(D1, "per_request_tok_s", 16)] == "regression"
    assert changed[(D1, "tok_s", None)] == "improvement"
    assert changed[(BASE, "tok_s", None)] == "within noise"
    assert changed[(BASE, "output_throughput", 16)] == "within noise"
    assert changed[(D1, "speedup", None)] == "no interval"
    assert set(h.regressions()["run"].str.split("/").list.last()) == {"n-c"}
    row = h.history.filter(
        (pl.col("label") == D1)
        & (pl.col("figure") == "output_throughput")
        & (pl.col("concurrency") == 16)
        & pl.col("run").str.ends_with("n-c")
    ).row(0, named=True)
    assert row["previous"].endswith("n-b") and row["step"] == 2
    # the reference: the median of n-a (1320) and its repeat n-b (1324), the earlier runs with the settings n-b had
    assert (row["previous_value"], row["value"], row["reference_runs"]) == (1322.0, 1056.0, 2)
    assert row["change"] == pytest.approx(1056 / 1322 - 1) and row["ci_high"] < 1
    other = h.history.filter(pl.col("experiment") == "other")
    assert set(other["step"]) == {0} and other["verdict"].null_count() == other.height


def test_min_change_keeps_small_moves_unflagged(root):
    h = history.build([root], min_change=0.15)
    changed = verdicts(h, "n-c")
    assert changed[(D1, "output_throughput", 16)] == "regression"  # -20 %
    assert changed[(D1, "tok_s", None)] == "within noise"  # +10 %: beyond its interval, under 15 %


def test_what_changed_between_runs(h):
    b = h.changes.filter(pl.col("run").str.ends_with("n-b"))
    assert b.select("what", "after", "points").rows() == [
        ("points only in this run", "drafter=d2,steps=2,nccl=default", 1)
    ]  # no setting changed
    c = {
        r["what"]: (r["before"], r["after"])
        for r in h.changes.filter(pl.col("run").str.ends_with("n-c")).iter_rows(named=True)
    }
    assert c["server.flags.max-running-requests"] == ("64", "32")
    assert c["SGLang version"] == ("0.5.10", "0.5.23")
    assert c["points only in the previous run"] == ("drafter=d2,steps=2,nccl=default", None)
    assert "results_dir" not in c and "name" not in c and "source" not in c
    assert h.changes.filter(pl.col("experiment") == "other").is_empty()


def test_the_command_prints_the_change_and_the_regression(root, capsys):
    out_file = root.parent / "history.md"
    assert main(["history", str(root), "--experiment", "nightly", "--out", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "n-a -> n-b: 1 change:" in out and "- points only in this run: (unset) -> drafter=d2" in out
    assert "Figures of n-b against n-a: 0 regressions, 0 improvements" in out
    assert "n-b -> n-c:" in out and "- server.flags.max-running-requests: 64 -> 32" in out
    assert "- SGLang version: 0.5.10 -> 0.5.23" in out
    assert f"- regression: {D1}, output tok/s at C=16: 1,322.0 -> 1,056.0 (-20.1%" in out  # the median of n-a, n-b
    assert f"- improvement: {D1}, single-stream tok/s: 150.0 -> 165.0 (+10.0%" in out
    assert "other" not in out.split("Runs")[1].split("nightly (dry-run)")[0]  # --experiment: its runs only
    md = out_file.read_text()
    assert "## nightly (dry-run): 3 runs" in md
    assert "### nightly (dry-run): output tok/s at C=16, run by run" in md
    line = next(x for x in md.splitlines() if x.startswith(f"| {D1} ") and "1,056" in x)
    assert "1,324 ~+0.3%" in line and "1,056 -20.1% worse" in line


def test_bad_roots_and_experiments_are_results_errors(tmp_path, root, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["history", str(tmp_path / "empty")]) == 5
    assert "no results directory under" in capsys.readouterr().err
    assert main(["history", str(tmp_path / "nowhere")]) == 5
    assert main(["history", str(root), "--experiment", "nightly_typo"]) == 5
    err = capsys.readouterr().err
    assert "no run of experiment 'nightly_typo'" in err and "nightly, other" in err
    assert main(["history", str(root), "--slo", "chat: ttft<=1"]) == 7


def test_the_python_api(root):
    h = sweep.history(root, experiment="nightly", slos=SLO)
    assert set(h.tables()) == {"runs", "picks", "history", "changes"}
    assert h.runs.height == 3 and h.picks.height == 3
    assert h.regressions().height == 2 and "server.flags.max-running-requests: 64 -> 32" in str(h)


def test_query_over_several_directories(root, capsys):
    dirs = [str(root / n) for n in ("n-a", "n-b", "n-c")]
    assert (
        main(
            [
                "query",
                *dirs,
                "SELECT results_dir, count(*) AS n FROM points GROUP BY results_dir ORDER BY results_dir",
                "--format",
                "json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [(r["results_dir"], r["n"]) for r in rows] == [(dirs[0], 2), (dirs[1], 3), (dirs[2], 2)]
    assert (
        main(
            [
                "query",
                *dirs,
                "SELECT s.results_dir, count(DISTINCT s.run) AS runs, max(r.ok) AS ok FROM "
                "single_stream s JOIN runs r ON s.results_dir = r.run GROUP BY s.results_dir ORDER BY s.results_dir",
                "--format",
                "json",
            ]
        )
        == 0
    )  # single_stream's own run (its number) beside the directory's
    rows = json.loads(capsys.readouterr().out)
    assert [(r["results_dir"], r["runs"], r["ok"]) for r in rows] == [(d, 3, 2) for d in dirs]
    assert (
        main(
            [
                "query",
                *dirs,
                "SELECT run, label, concurrency, verdict FROM history "
                "WHERE verdict = 'regression' ORDER BY concurrency",
                "--format",
                "json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert {(r["run"], r["label"], r["concurrency"]) for r in rows} == {(dirs[2], D1, 16)}
    assert (
        main(
            [
                "query",
                *dirs,
                "SELECT results_dir, label, speedup FROM speedup WHERE label = "
                "'drafter=d1,steps=2,nccl=default' ORDER BY results_dir",
                "--format",
                "json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["results_dir"] for r in rows] == dirs and rows[2]["speedup"] == pytest.approx(1.65)
    assert main(["query", dirs[0], "SELECT * FROM points LIMIT 1", "--format", "json"]) == 0
    assert "results_dir" not in json.loads(capsys.readouterr().out)[0]  # one directory: the tables as before
    assert main(["query", dirs[0], "SELECT experiment, ok FROM runs", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"experiment": "nightly", "ok": 2}]  # the history of one run


def test_repeats_measure_the_run_to_run_noise(h):
    """b repeats a (nothing recorded changed) and is the only repeat: it is the measurement, not judged by
    it; c changed and is judged by it as well as by its intervals."""
    rows = h.history.filter(
        pl.col("figure").is_in(history.FLAGGED) & (pl.col("step") > 0) & (pl.col("experiment") == "nightly")
    )
    by_run = {run.split("/")[-1]: set(g["noise_from"]) for (run,), g in rows.group_by("run")}
    assert by_run == {"n-b": {"this repeat"}, "n-c": {"repeats"}}
    c16 = rows.filter(
        pl.col("run").str.ends_with("n-c")
        & (pl.col("label") == D1)
        & (pl.col("figure") == "output_throughput")
        & (pl.col("concurrency") == 16)
    ).row(0, named=True)
    # the largest change at C=16 between a and b (d1's +0.3 %), widened by the margin
    assert c16["run_noise"] == pytest.approx((1324 / 1320) ** history.MARGIN - 1)


def test_a_noisy_repeat_hides_a_smaller_change_and_no_repeat_leaves_the_intervals(tmp_path):
    """a, b (a quiet repeat), x (a repeat whose d1 moved +18 % at C=16: beyond the quiet repeat's noise,
    flagged), c (another max-running-requests, d1 -20 % at C=16: inside the noise x showed, times the margin)."""
    r = tmp_path / "results"
    nightly(r / "a", 1000.0)
    nightly(r / "b", 2000.0, d1_c16=1322.0)
    nightly(r / "x", 3000.0, d1_c16=1322.0 * 1.18)
    changed = {**SETTINGS, "server": {"model_path": "/models/m", "flags": {"max-running-requests": 32}}}
    nightly(r / "c", 4000.0, d1_c16=1322.0 * 1.18 * 0.8, settings=changed)
    h = history.build([r])
    at16 = {
        run.split("/")[-1]: (v, src)
        for run, v, src in h.history.filter(
            (pl.col("label") == D1)
            & (pl.col("figure") == "output_throughput")
            & (pl.col("concurrency") == 16)
            & (pl.col("step") > 0)
        )
        .select("run", "verdict", "noise_from")
        .iter_rows()
    }
    # c's reference: the median of a, b and x (all repeats), judged by their scatter (x's +18 %), widened
    assert at16 == {
        "b": ("within noise", "repeats"),
        "x": ("improvement", "repeats"),
        "c": ("within noise", "reference runs"),
    }
    assert "Judged by the run-to-run noise the repeated runs of this series measured" in h.markdown()
    # two runs and a change between them: no repeat, the intervals alone judge (and say so)
    only = history.build([r / "b", r / "c"])
    assert only.history.filter(pl.col("step") > 0)["noise_from"].drop_nulls().unique().to_list() == ["within run"]
    assert only.regressions().filter(pl.col("concurrency") == 16)["label"].to_list() == [D1] * 2
    assert "No repeated run in this series measures the run-to-run noise" in only.markdown()


@pytest.mark.slow
@pytest.mark.scenario  # three whole dry runs (~40 s): the scenario tier, to keep the default suite under 8 minutes
def test_history_of_real_dry_runs(tmp_path):
    """Three dry runs on the fake server (a baseline and one drafter): two identical, then one whose drafter
    accepts 0.1 of its drafts instead of 0.7. The history lists that setting, flags the drafter's single
    stream as a regression, and nothing between the identical runs."""
    import os

    from tests.conftest import free_port
    from tests.experiments import DRAFT_TOKENS, DRAFTERS, experiment, write

    exp = experiment(
        name="hist",
        server={"port": free_port()},
        grid={
            "axes": {"drafter": DRAFTERS, "steps": {"flag": "speculative-num-steps", "values": [2]}},
            "derived": DRAFT_TOKENS,
        },
        benchmark={"single_stream": {"runs": 3}},
    )
    root = tmp_path / "results"
    root.mkdir()  # results_dir's parent must exist (a mistyped one is refused)
    slower = experiment(exp, server={"flags": {"fake-accept-rate": 0.1}})
    for name, e in (("a", exp), ("b", exp), ("c", slower)):
        path = write(tmp_path / f"{name}.yaml", e, results_dir=root / f"hist-{name}-{os.getpid()}")
        assert sweep.run(path, mode="dry-run", progress=False).ok
    h = sweep.history(root)
    a, b, c = h.runs.sort("started_at")["run"].to_list()
    assert h.history.filter((pl.col("run") == b) & pl.col("verdict").is_in(["regression", "improvement"])).is_empty()
    assert h.changes.filter(pl.col("run") == b).is_empty()  # a repeat
    changed = h.changes.filter(pl.col("run") == c)
    assert ("server.flags.fake-accept-rate", None, "0.1") in changed.select("what", "before", "after").rows()
    drafter = "drafter=d1,steps=2"
    row = h.history.filter((pl.col("run") == c) & (pl.col("label") == drafter) & (pl.col("figure") == "tok_s"))
    assert row["verdict"].to_list() == ["regression"] and row["change"][0] < -0.2
    text = str(h)
    assert (
        "- server.flags.fake-accept-rate: (unset) -> 0.1" in text
        and f"- regression: {drafter}, single-stream tok/s" in text
    )


def test_the_history_views_are_built_only_where_a_table_goes():
    from sweep.analysis.query import HISTORY_VIEWS, _named

    assert HISTORY_VIEWS == history.VIEWS
    assert _named("history", "SELECT * FROM history WHERE verdict = 'regression'")
    assert _named("runs", "SELECT * FROM points p JOIN runs r USING (run)") and _named(
        "picks", "SELECT * FROM runs,picks"
    )
    assert _named("changes", "SELECT * FROM points AS p, changes") and not _named(
        "runs", "SELECT * FROM speedup WHERE runs > 2"
    )
    assert not _named("runs", "SELECT label, runs FROM speedup")  # a column of the speedup view


def test_a_sweep_still_running_has_its_missing_points_pending(tmp_path):
    """A run whose plan lists d1 and has written only its baseline: d1 is pending there, not gone."""
    r = tmp_path / "results"
    nightly(r / "a", 1000.0)
    sd = SweepDir(
        r / "b",
        experiment="nightly",
        started_at=2000.0,
        manifest={"mode": "dry-run"},
        settings={**SETTINGS, "source": "b.yaml"},
    )
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 101, 99], levels={1: 100, 16: 1200})
    sd.point(drafter="d1", steps="2", nccl="default", baseline_of=base, written=False)
    sd.write()
    (r / "b" / "plan.json").write_text(
        json.dumps({"points": [{"id": p.point_id, "label": p.label} for p in sd.points]})
    )
    h = history.build([r])
    b = verdicts(h, "/b")
    assert {v for (label, _, _), v in b.items() if label == D1} == {"pending"}
    assert h.changes.filter(pl.col("run").str.ends_with("/b")).is_empty()
    assert h.runs.filter(pl.col("name") == "b").select("planned", "points").row(0) == (2, 1)
    assert "| b   | nightly    | dry-run" in h.markdown() and "| 1 of 2 " in h.markdown()


# --- the reference: the median of the repeats; shifts every configuration shares


def test_shared_shift_needs_nearly_every_configuration_moving_alike():
    import math

    lr = [math.log(x) for x in (0.88, 0.87, 0.89, 0.88)]
    shift, spread = history.shared_shift(lr)
    assert shift == pytest.approx(-0.12, abs=0.005) and 0 < spread < 0.02
    assert history.shared_shift(lr[:2]) is None  # two configurations are not "every"
    assert history.shared_shift([*lr, math.log(1.10)]) is not None  # one of five the other way: 80 % is nearly all ...
    assert history.shared_shift([*lr[:3], math.log(1.10)]) is None  # ... one of four is not
    assert history.shared_shift([math.log(x) for x in (0.99, 0.985, 0.99)]) is None  # under 2 %: not a shift
    assert history.shared_shift(lr, run_noise=0.2) is None  # within the run-to-run noise
    assert history.shared_shift([math.log(x) for x in (0.95, 0.80, 0.70)]) is None  # moved, not alike


def _four(path, started_at, c16, version="0.5.10"):
    """A run of "shifts": a baseline and three drafters; ``c16``: each one's output tok/s at C=16."""
    sd = SweepDir(
        path,
        experiment="shifts",
        started_at=started_at,
        manifest={"mode": "dry-run"},
        settings={**SETTINGS, "source": f"{path}.yaml"},
    )
    base = sd.point(
        drafter="none",
        nccl="default",
        baseline=True,
        tok_s=[100, 101, 99],
        levels={1: 100, 16: c16[0]},
        sglang_version=version,
    )
    for name, value in zip(("d1", "d2", "d3"), c16[1:]):
        sd.point(
            drafter=name,
            steps="2",
            nccl="default",
            baseline_of=base,
            tok_s=[150, 151, 149],
            levels={1: 150, 16: value},
            sglang_version=version,
        )
    return sd.write()


def test_a_shift_every_configuration_shares_is_said_once_and_each_is_judged_relative_to_it(tmp_path):
    """a, b, c repeat (c's reference: the median of a and b); d runs a new SGLang: every configuration
    loses about 12 % at C=16, d3 40 %: d3 alone is a regression (relative to the shift), the others
    moved with it."""
    r = tmp_path / "results"
    _four(r / "a", 1000.0, (1200, 1300, 1400, 1500))
    _four(r / "b", 2000.0, (1204, 1303, 1396, 1505))
    _four(r / "c", 3000.0, (1202, 1301, 1402, 1499))
    _four(r / "d", 4000.0, (1200 * 0.88, 1300 * 0.87, 1400 * 0.885, 1500 * 0.6), version="0.5.23")
    h = history.build([r])
    at16 = h.history.filter((pl.col("figure") == "output_throughput") & (pl.col("concurrency") == 16))
    c = at16.filter(pl.col("run").str.ends_with("/c") & (pl.col("label") == "drafter=d1,steps=2,nccl=default"))
    assert c.select("previous_value", "reference_runs").row(0) == (pytest.approx((1300 + 1303) / 2), 2)
    d = {
        row["label"].split(",")[0]: row for row in at16.filter(pl.col("run").str.ends_with("/d")).iter_rows(named=True)
    }
    assert {k: v["verdict"] for k, v in d.items()} == {
        "drafter=none": "shared shift",
        "drafter=d1": "shared shift",
        "drafter=d2": "shared shift",
        "drafter=d3": "regression",
    }
    assert d["drafter=d3"]["shared_shift"] == pytest.approx(-0.12, abs=0.01)
    assert d["drafter=none"]["reference_runs"] == 3  # a, b and c: the median of the repeats
    assert h.regressions()["label"].to_list() == ["drafter=d3,steps=2,nccl=default"] * 2  # and its per-request tok/s
    text = h.markdown()
    assert "- output tok/s: every configuration -12." in text and "a shared shift, with SGLang version changed" in text
    assert "relative to the shared shift) in d" in text
    assert "compared with the median of the 3 earlier runs" in text


def test_a_policys_config_is_a_change(tmp_path):
    """Two runs alike in every setting whose policy server ran another adaptive config (inlined in its
    flags, as a confirmation point's): the changes table says so, and the second is no repeat of the
    first; placement (host, port) is no change (issue 44)."""
    r = tmp_path / "results"
    for name, when, config, port in (
        ("p-a", 1000.0, '{"1": {"candidate_steps": [1]}}', "30001"),
        ("p-b", 2000.0, '{"1": {"candidate_steps": [0, 1]}}', "30002"),
    ):
        sd = SweepDir(r / name, experiment="pol", started_at=when, manifest={"mode": "dry-run"}, settings=SETTINGS)
        base = sd.point(
            drafter="none",
            nccl="default",
            baseline=True,
            tok_s=[100, 101, 99],
            levels={1: 100, 16: 1200},
            flags=[("port", port)],
        )
        sd.point(
            drafter="d1",
            steps="adaptive",
            nccl="default",
            baseline_of=base,
            tok_s=[150, 151, 149],
            levels={1: 150, 16: 1320},
            flags=[("speculative-adaptive-config", config), ("port", port)],
        )
        sd.write()
    h = history.build([r])
    a, b = h.runs.sort("started_at")["run"].to_list()
    changed = h.changes.filter(pl.col("run") == b)
    assert changed.select("what", "before", "after", "points").rows() == [
        (
            "flags.speculative-adaptive-config",
            '{"1": {"candidate_steps": [1]}}',
            '{"1": {"candidate_steps": [0, 1]}}',
            1,
        )
    ]
    assert b not in history.repeats(h.changes, history._load_runs([r]))


def test_the_picks_carry_their_margin_interval_and_state(root):
    """A script gates on a pick: its runner-up, margin over it, the margin's interval and whether it is
    decided (issue 44); the state is the margin's one verdict."""
    h = history.build([root], slos=[parse_slo(SLO[0])])
    rows = h.picks.filter(pl.col("slo") == "chat").to_dicts()
    assert rows and all(r["state"] in {"decided", "equal", "within noise", "budget", "only"} for r in rows)
    assert any(r["state"] != "only" for r in rows)
    for r in rows:
        if r["state"] == "only":
            assert r["runner_up"] is None and r["margin"] is None
            continue
        assert r["runner_up"] and r["margin"] is not None and r["margin_low"] <= r["margin"] <= r["margin_high"]
        decided = r["margin_low"] > 0 or r["margin_high"] < 0
        assert (r["state"] == "decided") == decided
