"""``concurrency.refine``: which levels ``sweep.bench.refine`` adds (SLO boundaries, crossovers with a
baseline, the resolution and the cap), the one SLO rule (``sweep.core.slo_rule``) as the report
applies it, and the settings (``levels: auto``, validation, point identity)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from sweep.analysis.slo import from_settings, highest_meeting, level_slo
from sweep.bench import refine
from sweep.core import slo_rule
from sweep.core.errors import ConfigError
from sweep.core.settings import AUTO_LEVELS, BenchSettings, ConcurrencySettings, SLOSettings
from sweep.experiment.config import auto_levels

M = refine.MeasuredLevel


def walk(levels, boundary: int, *, ratio=1.2, cap=10) -> list[int]:
    """Run refine against an SLO met exactly at C <= boundary; the levels it adds, in order."""
    measured = [M(c, {"s": c <= boundary}) for c in levels]
    added: list[int] = []
    while len(added) < cap:
        todo = refine.next_levels(measured, ["s"], ratio=ratio)[: cap - len(added)]
        if not todo:
            break
        for c in todo:
            measured.append(M(c, {"s": c <= boundary}))
            added.append(c)
    return added


def test_bisection_closes_in_on_an_slo_boundary_down_to_one_level():
    assert walk([1, 16], boundary=4) == [4, 8, 6, 5]  # geometric middles: 4, then sqrt(64), sqrt(48)...
    assert walk([1, 4, 16, 64, 256], boundary=100) == [128, 91, 108]  # 108 / 91 <= 1.2: resolved
    fine = walk([1, 4, 16, 64, 256], boundary=100, ratio=1.001)
    assert fine[-1] in (100, 101) and {100, 101} <= set(fine) | {1, 4, 16, 64, 256}  # down to hi - lo = 1


def test_the_resolution_and_the_cap_stop_it():
    assert walk([10, 100], boundary=40, ratio=1.5) == [32, 57, 43]  # 43/32 <= 1.5: done
    assert walk([1, 256], boundary=100, cap=2) == [16, 64]
    assert refine.middle(4, 5, 1.01) is None and refine.middle(100, 119, 1.2) is None


def test_nothing_to_bisect_when_every_level_or_none_meets_it():
    assert refine.next_levels([M(1, {"s": True}), M(16, {"s": True})], ["s"]) == []
    assert refine.next_levels([M(1, {"s": False}), M(16, {"s": False})], ["s"]) == []


def test_the_bracket_is_the_reports_last_met_and_first_missed():
    # met at 1, missed at 4, met at 8 (noise), missed at 32: the report walks up from the lowest met
    # level to the last of its run (1) and stops at 4; so does refine
    measured = [M(1, {"s": True}), M(4, {"s": False}), M(8, {"s": True}), M(32, {"s": False})]
    assert refine.slo_bracket(measured, "s") == (1, 4)
    assert refine.next_levels(measured, ["s"]) == [2]
    slo = from_settings(SLOSettings(ttft_s=1.0))
    rows = [{"concurrency": m.concurrency, "met": m.met["s"], "throughput_tok_s_gpu": 1.0, "v0": 0.5} for m in measured]
    h = highest_meeting(slo, rows)
    assert (h.last_met, h.first_missed) == (1, 4)


def test_every_open_bracket_gets_a_level_each_round_slos_first():
    measured = [
        M(1, {"a": True, "b": True}, 100.0),
        M(64, {"a": False, "b": True}, 900.0),
        M(256, {"a": False, "b": False}, 1000.0),
    ]
    # baseline: ahead at 1 and 64, behind at 256 -> a crossover between 64 and 256
    baseline = [(1.0, 50.0), (64.0, 800.0), (256.0, 1500.0)]
    assert refine.next_levels(measured, ["a", "b"], baseline=baseline) == [8, 128]  # (1,64) a; (64,256) b and crossover


def test_crossover_with_the_baseline_interpolated_in_log_concurrency():
    baseline = [(1.0, 100.0), (100.0, 300.0)]
    assert math.isclose(refine.interpolate(baseline, 10.0), 200.0)
    assert refine.interpolate(baseline, 200.0) is None  # no extrapolation
    measured = [M(1, {}, 150.0), M(10, {}, 220.0), M(100, {}, 250.0)]
    assert refine.crossover_brackets(measured, baseline) == [(10, 100)]
    assert refine.next_levels(measured, [], baseline=baseline) == [32]
    assert refine.next_levels(measured, []) == []  # no baseline: nothing to cross


def test_auto_levels_stop_at_the_servers_running_cap():
    assert refine.auto_levels(AUTO_LEVELS, None) == AUTO_LEVELS
    assert refine.auto_levels(AUTO_LEVELS, 48) == [1, 4, 16, 48]
    assert refine.auto_levels(AUTO_LEVELS, 64) == [1, 4, 16, 64]
    assert refine.auto_levels(AUTO_LEVELS, 4096) == AUTO_LEVELS
    info = {
        "internal_states": [
            {"effective_max_running_requests_per_dp": 24},
            {"effective_max_running_requests_per_dp": 24},
        ]
    }
    assert refine.max_running_of(info) == 48
    assert refine.max_running_of({"max_running_requests": 12}) == 12 and refine.max_running_of({}) is None


# --- the one SLO rule ---------------------------------------------------------------------------


def _rows(c: int, ttfts: list[float | None], ok=None) -> list[dict]:
    return [
        {
            "point_id": "p",
            "phase": "level",
            "concurrency": c,
            "seq": i,
            "ok": True if ok is None else ok[i],
            "ttft_s": t,
            "tpot_s": None if t is None else t / 10,
            "latency_s": 1.0 + (t or 0),
            "completion_tokens": 50,
        }
        for i, t in enumerate(ttfts)
    ]


def test_the_rule_judges_failures_undefined_values_and_the_time_scale():
    limits = slo_rule.limits_of(SLOSettings(percentile=90, ttft_s=0.5, tok_s=20))
    good = _rows(1, [0.1] * 10)
    assert slo_rule.level_meets(limits, good)
    assert not slo_rule.level_meets(limits, good, time_scale=10.0)  # at real speed: TTFT 1 s
    failed = _rows(1, [0.1] * 8 + [None, None], ok=[True] * 8 + [False, False])
    assert not slo_rule.level_meets(limits, failed)  # 20 % failed: p90 is a failure
    assert slo_rule.level_meets(limits, _rows(1, [0.1] * 19 + [None], ok=[True] * 19 + [False]))  # 5 %: p90 holds
    assert not slo_rule.level_meets(limits, _rows(1, [0.1] * 9 + [None], ok=[True] * 9 + [False]))  # p90 reaches it
    assert slo_rule.holds(limits[0], None)  # undefined for every request: breaks nothing


def test_the_report_and_the_host_give_the_same_verdict_and_values():
    """level_slo (polars, the report) and slo_rule (the host) over the same request rows."""
    import random

    rng = random.Random(3)
    settings = SLOSettings(name="s", percentile=90, ttft_s=0.3, tpot_s=0.04)
    rows = []
    for c in (1, 2, 4, 8, 16):
        ttfts = [rng.uniform(0.0, 0.08 * c) for _ in range(2 * c)]
        rows += _rows(c, ttfts, ok=[rng.random() > 0.03 for _ in ttfts])
    for r in rows:
        if not r["ok"]:
            r["ttft_s"] = r["tpot_s"] = None
    levels = [
        {"point_id": "p", "concurrency": c, "wall_s": 1.0, "output_throughput": 100.0 * c} for c in (1, 2, 4, 8, 16)
    ]
    tables = {
        "points": pl.LazyFrame({"point_id": ["p"], "gpu_count": [8], "fake_speed_divided": [1.0]}),
        "requests": pl.DataFrame(rows).lazy(),
        "levels": pl.DataFrame(levels).lazy(),
    }
    slo = from_settings(settings)
    report = {r["concurrency"]: r for r in level_slo(tables, [slo]).to_dicts()}
    verdicts = set()
    for c in (1, 2, 4, 8, 16):
        mine = [r for r in rows if r["concurrency"] == c]
        values = slo_rule.level_values(slo.limits, mine)
        assert all(math.isclose(a, b) for a, b in zip(values, (report[c]["v0"], report[c]["v1"])))
        assert slo_rule.level_meets(slo.limits, mine) == report[c]["met"]
        verdicts.add(report[c]["met"])
    assert verdicts == {True, False}  # the data has a boundary: both verdicts were compared


# --- the settings -------------------------------------------------------------------------------


def test_levels_auto_spells_out_the_coarse_start_with_refine_on():
    assert auto_levels({"levels": "auto"}) == {"levels": AUTO_LEVELS, "auto": True, "refine": True}
    assert auto_levels({"levels": "auto", "refine": False})["refine"] is False
    assert auto_levels({"levels": [1, 8]}) == {"levels": [1, 8]}


@pytest.mark.parametrize("key, value", [("refine_max", -1), ("refine_ratio", 1.0), ("slo_time_scale", 0.0)])
def test_bad_refine_settings_name_the_key(key, value):
    s = BenchSettings(concurrency=ConcurrencySettings(refine=True, **{key: value}))
    assert [k for k, _, _ in s.problems()] == [f"concurrency.{key}"]


def test_levels_auto_in_an_override_and_what_moves_the_point_ids():
    from sweep.experiment import config, plan

    def ids(*overrides: str) -> list[str]:
        return [p.id for p in plan.build(config.load("experiments/k26_eagle.yaml", list(overrides))).points]

    exp = config.load("experiments/k26_eagle.yaml", ["benchmark.concurrency.levels=auto"])
    cc = exp.benchmark.concurrency
    assert (cc.levels, cc.auto, cc.refine) == (AUTO_LEVELS, True, True)
    before = ids()
    assert ids("benchmark.concurrency.slo_time_scale=5") == before
    # the baseline's curve is the sweep's run-time input (sweep.core.run_context), never a user key
    with pytest.raises(ConfigError, match="baseline_curve"):
        ids("benchmark.concurrency.baseline_curve=[[1,2]]")
    assert ids("benchmark.concurrency.refine_max=9") == before  # refine off: its settings change nothing
    assert set(ids("benchmark.concurrency.refine=true")).isdisjoint(before)  # refine changes what is measured


def test_the_run_context_judges_and_crosses_beside_the_users_settings():
    """What the sweep supplies at run time (sweep.core.run_context) reaches the refinement beside the
    settings: a dry run's time scale judges the SLO (the settings' own slo_time_scale otherwise), and
    the baseline's curve is crossed; the settings carry neither."""
    from sweep.bench.runner import refinement
    from sweep.core.run_context import RunContext

    settings = BenchSettings(
        concurrency=ConcurrencySettings(levels=[1, 16], refine=True, refine_max=1),
        slo=[SLOSettings(ttft_s=1.0)],
    )
    rows = [{"concurrency": 1, "output_throughput": 10.0}, {"concurrency": 16, "output_throughput": 100.0}]
    at = {c: [{"ok": True, "ttft_s": t}] * 4 for c, t in ((1, 0.3), (16, 0.8))}
    assert list(refinement(settings, rows, at)) == []  # both meet the SLO at the settings' scale: nothing to bisect
    assert list(refinement(settings, rows, at, RunContext(slo_time_scale=2.0))) == [4]  # 0.6 s met, 1.6 s missed
    crossing = RunContext(baseline_curve=((1.0, 20.0), (16.0, 50.0)))  # the point overtakes its baseline
    assert list(refinement(settings, rows, at, crossing)) == [4]


def test_a_dry_run_scales_the_benchmark_and_leaves_the_slo_time_scale_to_its_run_context():
    from sweep.experiment import config, dryrun

    exp = config.load("experiments/k26_eagle.yaml", ["dry_run.fake_speed=8"])
    dry, scale = dryrun.scaled(exp)
    assert scale["fake_speed"] == 8 and dry.benchmark.concurrency.max_tokens < exp.benchmark.concurrency.max_tokens
    assert dry.benchmark.concurrency.slo_time_scale == exp.benchmark.concurrency.slo_time_scale == 1.0
    ctx = dryrun.run_context(exp)
    assert ctx.slo_time_scale == 8.0 and ctx.time_scale(dry.benchmark.concurrency.slo_time_scale) == 8.0


def test_an_experiment_yaml_written_before_the_run_context_still_loads(tmp_path):
    """A results directory's experiment.yaml from before the baseline's curve left the settings has
    ``baseline_curve: []`` (``sweep confirm DIR`` loads it); a curve given by hand is refused."""
    from sweep.experiment import config

    exp = config.load("experiments/k26_eagle.yaml")
    text = config.to_yaml(exp)
    assert "baseline_curve" not in text and "\n    slo_time_scale: 1.0\n" in text
    old = tmp_path / "experiment.yaml"
    old.write_text(text.replace("\n    slo_time_scale: 1.0\n", "\n    slo_time_scale: 1.0\n    baseline_curve: []\n"))
    assert config.load(old).benchmark == exp.benchmark  # the same settings, the empty curve dropped
    old.write_text(
        text.replace("\n    slo_time_scale: 1.0\n", "\n    slo_time_scale: 1.0\n    baseline_curve: [[1, 2]]\n")
    )
    with pytest.raises(ConfigError, match="baseline_curve is set by the sweep") as e:
        config.load(old)
    assert "remove it" in (e.value.fix or "")
