"""The headline on NCCL profiles says how the profile moved every curve: at every level or not, and
the shape of the shift (a lift that fades with load is the real finding of NCCL tuning)."""

import polars as pl

from sweep.analysis.findings import _profile_line


def _env(rows):
    cols = ("single_stream_ratio", "ratio_min_level", "ratio_max_level", "geomean_ratio", "min_ratio")
    return pl.DataFrame([dict(zip(cols, r), levels=8) for r in rows])


def test_a_lift_that_fades_with_load():
    line = _profile_line(
        "nccl=tuned", "nccl=default", _env([(1.41, 1.40, 1.12, 1.17, 1.06), (1.13, 1.12, 0.98, 1.03, 0.98)])
    )
    assert line == (
        "nccl=tuned against nccl=default lifts 1 of 2 curves at every level (the other 1 is at or below 1.00x at "
        "one level or more, lowest 0.98x): single stream 1.13x to "
        "1.41x, output throughput 1.12x to 1.40x at the lowest level and 0.98x to 1.12x at the "
        "highest, the lift fades with load (geometric mean over levels 1.03x to 1.17x, per configuration)."
    )


def test_every_curve_lifted_evenly():
    line = _profile_line("nccl=tuned", "nccl=default", _env([(1.2, 1.2, 1.2, 1.2, 1.19), (1.2, 1.21, 1.19, 1.2, 1.18)]))
    assert line.startswith("nccl=tuned against nccl=default lifts every curve: single stream 1.20x, output ")
    assert "fades" not in line and "grows" not in line


def test_a_lift_that_grows_with_load_and_no_single_stream():
    env = _env([(None, 1.01, 1.30, 1.1, 1.01)])
    line = _profile_line("nccl=ring", "nccl=default", env)
    assert "single stream" not in line and "the lift grows with load" in line and "lifts every curve" in line


def test_the_single_stream_best_is_the_fastest_not_the_largest_ratio(tmp_path):
    """k26_300k steps=3 is 1.85x over the default-NCCL baseline (80.8 tok/s) and 1.82x over the tuned one
    (101.8 tok/s): a user deploying "the best" wants the 101.8, the ratio beside it."""
    from sweep.analysis import analyze, headlines
    from sweep.results import load
    from tests.analysis.sweepdir import story_sweep

    f = analyze(load(story_sweep(tmp_path, dry_run=False).write()))
    line = next(line for line in headlines(f) if line.startswith("Single stream"))
    assert (
        "the fastest is drafter=k26_300k,steps=3,nccl=tuned at 101.8 tok/s, 1.82x over drafter=none,nccl=tuned" in line
    )
    assert "nccl=default" not in line


def test_one_curve_is_one_curve():
    line = _profile_line("nccl=tuned", "nccl=default", _env([(1.13, 1.12, 0.98, 1.03, 0.98)]))
    assert line.startswith(
        "nccl=tuned against nccl=default does not lift the curve at every level (it is at or below 1.00x at one "
        "level or more, lowest 0.98x): "
    ), line


def test_no_curve_lifted_at_every_level_is_not_read_as_none_lifted():
    """'lifts 0 of 9 curves at every level: single stream 1.05x to 1.40x' read as a contradiction: say
    that none is lifted at every level, and how low each went."""
    line = _profile_line(
        "nccl=tuned", "nccl=default", _env([(1.41, 1.40, 0.97, 1.17, 0.97), (1.05, 1.12, 0.95, 1.03, 0.95)])
    )
    assert line.startswith(
        "nccl=tuned against nccl=default lifts no curve at every level (each is at or below 1.00x at one level "
        "or more, lowest 0.95x to 0.97x): single stream 1.05x to 1.41x"
    ), line
    assert "0 of" not in line


def test_one_configuration_is_one_configuration_in_the_summary(tmp_path):
    """'Speculation stops paying from C=64 (1 configuration that was ... falls behind it there)', not
    'stops paying C=64 (1 configurations ...)'; '1 configuration is mixed: behind its baseline', not
    'behind their baseline'."""
    from sweep.analysis import analyze, headlines
    from sweep.results import load
    from tests.analysis.sweepdir import SweepDir

    def lines(path, levels):
        sd = SweepDir(path)
        base = sd.point(drafter="none", nccl="default", baseline=True, levels={1: 100, 8: 800, 64: 6400})
        sd.point(drafter="d1", steps="1", nccl="default", baseline_of=base, levels=levels)
        return "\n".join(headlines(analyze(load(sd.write()))))

    crossing = lines(tmp_path / "a", {1: 130, 8: 1040, 64: 4480})
    assert (
        "Speculation stops paying from C=64 (1 configuration that was ahead of its baseline beyond noise "
        "at lower concurrency falls behind it there)."
    ) in crossing
    assert "1 of 1 speculative configuration is slower than its baseline beyond noise" in crossing
    mixed = lines(tmp_path / "b", {1: 130, 8: 560, 64: 8320})
    assert "1 configuration is mixed: behind its baseline beyond noise at some levels (C=8)" in mixed
