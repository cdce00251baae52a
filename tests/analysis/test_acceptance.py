"""Acceptance that says "broken" (sweep/analysis/acceptance.py) on hand-made results directories."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.analysis import acceptance as acc
from sweep.analysis.report import build
from sweep.core.argv import flags_of_argv
from sweep.core.flags import ServerFlags
from sweep.results import load
from sweep.results.schema import from_rows
from tests.analysis.sweepdir import SweepDir


def argv(steps: int, topk: int = 1, tokens: int | None = None, algorithm: str = "EAGLE3") -> list[str]:
    out = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m",
        "--speculative-algorithm",
        algorithm,
        "--speculative-draft-model-path",
        "/d",
        "--speculative-num-steps",
        str(steps),
        "--speculative-eagle-topk",
        str(topk),
    ]
    return out + (["--speculative-num-draft-tokens", str(tokens)] if tokens else [])


def chain(p: float, steps: int) -> float:
    return 1 + sum(p**k for k in range(1, steps + 1))


def sweep(tmp_path, *, broken_rate: float = 0.0, aux=None, checks=()) -> SweepDir:
    """good (accepts 0.7 per position) and bad drafters at steps 1, 3; ``bad`` accepts like good at
    position 1 (steps=1) but collapses after it (3 steps: 1.2 tokens per verify), ``dead`` accepts nothing."""
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100, 8: 700})
    for steps in (1, 3):
        sd.point(
            drafter="good",
            steps=str(steps),
            nccl="default",
            baseline_of=base,
            tok_s=[150, 150],
            levels={1: 150, 8: 800},
            accept_length=chain(0.7, steps),
            argv=argv(steps),
        )
    sd.point(
        drafter="bad",
        steps="1",
        nccl="default",
        baseline_of=base,
        tok_s=[150, 150],
        levels={1: 150},
        accept_length=1.6,
        argv=argv(1),
    )
    sd.point(
        drafter="bad",
        steps="3",
        nccl="default",
        baseline_of=base,
        tok_s=[110, 110],
        levels={1: 110},
        accept_length=1.2,
        argv=argv(3),
    )
    sd.point(
        drafter="dead",
        steps="3",
        nccl="default",
        baseline_of=base,
        tok_s=[70, 70],
        levels={1: 70},
        accept_length=1 + 3 * broken_rate,
        argv=argv(3),
        drafter_aux_layers=aux,
        drafter_checks=list(checks),
    )
    sd.point(
        drafter="ngram",
        steps="3",
        nccl="default",
        baseline_of=base,
        tok_s=[90, 90],
        levels={1: 90},
        accept_length=1.0,
        argv=argv(3, algorithm="NGRAM"),
    )
    sd.write()
    return sd


def rows(tmp_path, **kw) -> dict:
    sd = sweep(tmp_path, **kw)
    frame = acc.acceptance(load(sd.path))
    return {r["label"]: r for r in frame.iter_rows(named=True)}


def test_verdicts(tmp_path):
    r = rows(tmp_path)
    assert set(r) == {f"drafter=good,steps={s},nccl=default" for s in (1, 3)} | {
        "drafter=bad,steps=1,nccl=default",
        "drafter=bad,steps=3,nccl=default",
        "drafter=dead,steps=3,nccl=default",
    }
    good3 = r["drafter=good,steps=3,nccl=default"]
    assert good3["verdict"] == "ok" and good3["first_source"] == "steps=1 point"
    assert good3["first_rate"] == pytest.approx(0.7) and good3["predicted_length"] == pytest.approx(chain(0.7, 3))
    assert good3["accept_rate"] == pytest.approx((chain(0.7, 3) - 1) / 3) and good3["positions"] == 3
    bad3 = r["drafter=bad,steps=3,nccl=default"]
    assert bad3["verdict"] == "low" and bad3["vs_predicted"] == pytest.approx(0.2 / (chain(0.6, 3) - 1))
    assert "eagle_aux_hidden_state_layer_ids" in bad3["causes"]
    dead = r["drafter=dead,steps=3,nccl=default"]
    assert dead["verdict"] == "broken" and dead["accept_rate"] == 0.0 and dead["first_rate"] is None
    assert r["drafter=bad,steps=1,nccl=default"]["verdict"] == "ok"


def test_near_zero_boundary(tmp_path):
    assert rows(tmp_path / "a", broken_rate=0.04)["drafter=dead,steps=3,nccl=default"]["verdict"] == "broken"
    assert rows(tmp_path / "b", broken_rate=0.06)["drafter=dead,steps=3,nccl=default"]["verdict"] == "ok"


def test_causes_cite_the_preflight(tmp_path):
    checks = ["warning: [weights-missing] 9 parameter(s) of LlamaForCausalLMEagle3 get no weight (fix: rename)"]
    dead = rows(tmp_path, aux=[2, 30, 58], checks=checks)["drafter=dead,steps=3,nccl=default"]
    assert dead["causes"].startswith("the pre-flight warned: warning: [weights-missing]")
    assert "reads target layers [2, 30, 58]" in dead["causes"]
    assert dead["aux_layers"] == [2, 30, 58]


def test_position_rates_and_prediction():
    # 10 verifies: 2 accepted nothing, 3 one draft, 5 two drafts (of 2): position 1 80 %, position 2 5/8
    assert acc.position_rates([2, 3, 5]) == [pytest.approx(0.8), pytest.approx(5 / 8)]
    assert acc.position_rates([15]) == []  # the transcript's random drafter: nothing past position 0
    assert acc.position_rates([]) == [] and acc.position_rates(None) == []
    assert acc.position_rates([0, 0, 1, 0]) == [1.0, 1.0, 0.0]
    assert acc.chain_prediction(0.5, 2) == pytest.approx(1.75) and acc.chain_prediction(None, 3) is None


def test_spec_shape():
    def spec_shape(argv: list[str], resolved: dict | None = None) -> dict:  # the flags column of that argv
        return acc.spec_shape(ServerFlags(flags_of_argv(argv)), resolved)

    assert spec_shape(argv(3))["positions"] == 3
    tree = spec_shape(argv(3, topk=4, tokens=16))
    assert tree["positions"] == 15 and tree["topk"] == 4
    assert spec_shape(["python"])["algorithm"] is None
    # the plan's resolution wins over the argv: SGLang turns 16 draft tokens with topk 1 into steps + 1
    resolved = {"algorithm": "EAGLE3", "steps": 3, "topk": 1, "draft_tokens": 4}
    shape = spec_shape(argv(3, topk=1, tokens=16), resolved)
    assert (shape["algorithm"], shape["draft_tokens"], shape["positions"]) == ("EAGLE3", 4, 3)
    assert spec_shape(argv(3, topk=4, tokens=16), {"algorithm": None})["positions"] == 15  # none resolved


def test_the_points_table_keeps_the_plans_resolution(tmp_path):
    """The plan's resolved settings land in the points table as a struct, as the plan has them."""
    from sweep.experiment import config
    from sweep.experiment import plan as planning
    from sweep.results.records import point_row

    plan = planning.build(config.load("experiments/k26_eagle.yaml"))
    spec = next(p for p in plan.points if not p.baseline and p.resolved)
    (row,) = point_row(
        spec, "k26", axes=list(spec.params), argv=spec.argv, result=None, mode="dry-run", bench_scale={}
    ).to_pylist()
    assert row["resolved"] == spec.resolved and row["resolved"]["algorithm"] == "EAGLE3"
    assert row["resolved"]["steps"] == int(spec.flags["speculative-num-steps"])


def test_histogram_column_gives_per_position_rates(tmp_path):
    """The requests table's spec_accept_histogram (meta_info's, per request): summed per point, the
    per-position rates and p1 come from it; warmups, failed requests and nulls (baselines, the
    OpenAI routes) are left out."""
    sd = sweep(tmp_path)
    frames = load(sd.path)
    pid = next(p.point_id for p in sd.points if p.label == "drafter=dead,steps=3,nccl=default")
    req = {"point_id": pid, "concurrency": 1, "ok": True}
    table = from_rows(
        [
            {**req, "phase": "single", "seq": 0, "spec_accept_histogram": [5, 1]},
            {**req, "phase": "single", "seq": 1, "spec_accept_histogram": [4]},
            {**req, "phase": "single", "seq": 2, "spec_accept_histogram": None},
            {**req, "phase": "warmup", "seq": 0, "spec_accept_histogram": [0, 0, 0, 7]},
            {**req, "phase": "level", "seq": 0, "ok": False, "spec_accept_histogram": [0, 9]},
        ],
        "requests",
    )
    assert table.schema.field("spec_accept_histogram").type == pa.list_(pa.int64())
    pq.write_table(table, sd.path / "requests" / f"{pid}.parquet")
    frame = acc.acceptance(load(sd.path))
    dead = frame.filter(frame["point_id"] == pid).row(0, named=True)
    # [9, 1] over 3 positions: SGLang's histogram ends at the most accepted (1); positions 2, 3 reached by none
    assert dead["position_rates"] == [pytest.approx(0.1), 0.0, None]
    assert dead["first_source"] == "histogram" and dead["first_rate"] == pytest.approx(0.1)
    good = frame.filter(frame["label"] == "drafter=good,steps=3,nccl=default").row(0, named=True)
    assert good["position_rates"] == [] and good["first_source"] == "steps=1 point"
    assert frames["points"].collect().height == 7


def test_report_section_and_headline(tmp_path):
    sd = sweep(tmp_path)
    report = build(sd.path, with_plots=False)
    md = report.markdown
    assert "## Drafter acceptance" in md
    assert "- 2 speculative points accept far less than a working drafter" in md  # the headline, in the plural
    assert "drafter=dead,steps=3,nccl=default: accept rate 0% over 3 draft positions" in md
    assert "a broken drafter" in md and "check-drafter" in md
    assert "of the gain its first position predicts (60% at position 1, from its steps=1 point" in md


def test_old_results_without_drafter_columns(tmp_path):
    """Points written before the drafter columns existed: the section still renders."""
    sd = SweepDir(tmp_path)
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100], levels={1: 100})
    sd.point(
        drafter="d",
        steps="2",
        nccl="default",
        baseline_of=base,
        tok_s=[120],
        levels={1: 120},
        accept_length=1.5,
        argv=argv(2),
    )
    sd.write()
    for f in (sd.path / "points").glob("*.parquet"):
        t = pq.read_table(f)
        pq.write_table(t.drop_columns(["drafter_aux_layers", "drafter_checks"]), f)
    frame = acc.acceptance(load(sd.path))
    assert frame.height == 1 and frame["verdict"][0] == "ok" and frame["aux_layers"][0] is None
    assert "## Drafter acceptance" in build(sd.path, with_plots=False).markdown


def test_no_speculation_at_all(tmp_path):
    sd = SweepDir(tmp_path)
    sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100], levels={1: 100})
    sd.write()
    assert acc.acceptance(load(sd.path)).height == 0
    assert "No speculative point with a drafter." in build(sd.path, with_plots=False).markdown
