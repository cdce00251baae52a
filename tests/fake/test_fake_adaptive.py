"""The fake's adaptive speculation (sweep/fake/adaptive.py) against SGLang's rule: sequences replayed
by hand from adaptive_spec_params.py, and the same sequences through SGLang's own classes where its
source is installed (its module's sglang imports stubbed: the rule needs none of them)."""

from __future__ import annotations

import json
import random
import re
import types
from pathlib import Path

import pytest

from sweep.fake import adaptive
from sweep.sglang import adaptive as ad

RELEASE = Path.home() / ".cache/sweep-sglang-releases/v0.5.23/lib/python3.11/site-packages/sglang"
CPU = Path.home() / ".cache/sweep-sglang-cpu/venv/lib/python3.11/site-packages/sglang"
SOURCE = "srt/speculative/adaptive_spec_params.py"
# the CPU build's source as the project keeps it (../shared beside the checkout)
TARBALLS = Path(__file__).resolve().parents[3] / "shared/sglang-cpu/sglang-src-*-python.tar.gz"


def controller(cfg, steps=None):
    lines: list[str] = []
    config = ad.load(cfg)
    return adaptive.Controller(config.initial_steps(steps), config, lines.append), lines


# --- the rule, replayed by hand ---


def test_tiers_route_to_the_closest_lower_key_and_keep_their_own_state():
    c, lines = controller({"1": {"candidate_steps": [1, 3]}, "4": {"candidate_steps": [0, 1]}}, 3)
    assert lines == ["AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3]"]
    # tier 4 starts at its middle candidate (3 is not one of its own): [0, 1][1] = 1
    assert [c.params.route(b).candidate_steps for b in (1, 2, 3, 4, 100)] == [[1, 3]] * 3 + [[0, 1]] * 2
    assert c.before_batch(2) == 3 and c.switches == 0
    assert c.before_batch(4) == 1
    assert lines[-1] == "Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2"
    assert c.before_batch(1) == 3 and c.switches == 2


def test_an_ema_of_rejections_steps_down_after_warmup_at_the_update_interval():
    c, lines = controller({"1": {"candidate_steps": [1, 3]}}, 3)
    slot = c.params.slots[1]
    for i in range(1, 16):
        c.before_batch(1)
        c.after_verify([0], 1)
        # EMA from 2.0 (steps - 1) by 0.8 per batch; warmup 10, then every 5th: only batch 15 decides
        assert slot.ema_accept_len == pytest.approx(2.0 * 0.8**i)
        assert c.steps == (3 if i < 15 else 1), i
    assert lines[-2:] == [
        "Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=0.07)",
        "Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2",
    ]


def test_zero_steps_probes_the_smallest_positive_one_at_each_update():
    c, lines = controller({"1": {"candidate_steps": [0, 2], "warmup_batches": 0, "update_interval": 2}}, 0)
    slot = c.params.slots[1]
    assert slot.ema_accept_len == -1.0  # neutral start at 0 steps
    c.after_verify([0], 1)
    assert c.steps == 0
    c.after_verify([0], 1)  # the update: probe 2, the EMA restarts at its neutral 1.0
    assert c.steps == 2 and slot.ema_accept_len == 1.0
    assert lines[-2] == "Adaptive spec params updated: steps 0 -> 2 (ema_accept_len=1.00)"


def test_hysteresis_and_the_ceiling():
    # up: EMA > current - 0.5 + up_hysteresis; with up 0.6 an EMA of 1.0 at step 1 does not rise
    slot = adaptive.StepSlot.create(
        1, {"candidate_steps": [1, 2], "up_hysteresis": 0.6, "warmup_batches": 0, "update_interval": 1}
    )
    slot.ema_accept_len = 1.0
    assert slot.update([1]) is False and slot.current_steps == 1
    slot.up_hysteresis = 0.0
    assert slot.update([1]) is True and slot.current_steps == 2
    # ceiling: caps a target that does not rise at ceil(ema * coeff)
    slot = adaptive.StepSlot.create(
        7,
        {
            "candidate_steps": [1, 3, 7],
            "ceiling_coeff": 1.0,
            "warmup_batches": 0,
            "update_interval": 1,
            "ema_alpha": 0.0,
        },
    )
    slot.ema_accept_len = 6.6  # stays at 7 by the thresholds; ceiling 7: no cap
    assert slot.update([0]) is False
    slot.ema_accept_len = 2.6  # down to 3 (2.6 <= 6.5 - 0.25, not <= 2.5 - 0.25); ceiling 3
    assert slot.update([0]) is True and slot.current_steps == 3


# --- the rule, against SGLang's own classes ---


def _source(root) -> tuple[str, str]:
    """SGLang's adaptive_spec_params.py: from an install, or from the CPU build's source tarball."""
    if root == "tarball":
        import tarfile

        found = sorted(TARBALLS.parent.glob(TARBALLS.name)) if TARBALLS.parent.is_dir() else []
        if not found:
            pytest.skip(f"no SGLang source tarball at {TARBALLS}")
        with tarfile.open(found[-1]) as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith("sglang/" + SOURCE)), None)
            if member is None:
                pytest.skip(f"{found[-1]} holds no {SOURCE}")
            return tar.extractfile(member).read().decode(), f"{found[-1]}:{member.name}"
    path = root / SOURCE
    if not path.is_file():
        pytest.skip(f"SGLang's source is not installed here ({path})")
    return path.read_text(), str(path)


def _sglang_module(root):
    src, path = _source(root)
    src = re.sub(r"^from sglang\.[^\n]*\([^)]*\)\n", "", src, flags=re.M)  # none is used by the rule
    src = re.sub(r"^from sglang\.[^\n]*\n", "", src, flags=re.M)
    module = types.ModuleType("sglang_adaptive_spec_params")
    lines: list[str] = []
    module.__dict__["log_info_on_rank0"] = lambda logger, message: lines.append(message)
    exec(compile(src, str(path), "exec"), module.__dict__)
    return module, lines


class _SGLangController:
    """eagle_worker_v2's use of AdaptiveController: activate by batch, then verify; its switch line."""

    def __init__(self, module, steps, path, lines, graphs=None):
        self.params = module.AdaptiveSpeculativeParams(initial_steps=steps, cfg_path=path)
        self.params.set_cuda_graph_bs(graphs)  # init_states: the decode graphs' batch sizes
        self.steps, self.lines = steps, lines

    def _activate(self, steps):
        if steps != self.steps:
            self.lines.append(
                f"Switch adaptive runtime state: steps {self.steps} -> {steps}, "
                f"draft_tokens {self.steps + 1} -> {steps + 1}"
            )
            self.steps = steps

    def before_batch(self, bs):
        self._activate(self.params.get_steps_for_batch(bs))
        return self.steps

    def after_verify(self, accepted, bs):
        new = self.params.on_verify_complete(accepted, bs)
        if new is not None:
            self._activate(new)


CONFIGS = [
    None,  # SGLang's default
    {"1": {"candidate_steps": [1, 3]}, "4": {"candidate_steps": [0, 1]}},
    {
        "ema_alpha": 0.5,
        "warmup_batches": 3,
        "update_interval": 2,
        "1": {"candidate_steps": [0, 1, 2, 5], "down_hysteresis": 0.2, "up_hysteresis": 0.3, "ceiling_coeff": 1.5},
        "3": {"candidate_steps": [2, 4], "ceiling_coeff": 0.8},
        "16": {"candidate_steps": [0]},
        "note": "ignored",
    },
]


@pytest.mark.parametrize("graphs", [None, [1, 2, 4, 8, 12, 16, 24, 32, 40]], ids=["no-graphs", "padded"])
@pytest.mark.parametrize(
    "root",
    [  # an install's source is read in the real tier, after .ci/real-installs made it (in the default suite of a
        # fresh CI they are not there yet); the CPU build's source from ../shared's tarball, in the default suite
        pytest.param(RELEASE, marks=pytest.mark.real_sglang),
        pytest.param(CPU, marks=pytest.mark.real_sglang),
        "tarball",
    ],
    ids=["0.5.23", "cpu-build", "cpu-build-source"],
)
@pytest.mark.parametrize("which", range(len(CONFIGS)))
def test_the_same_batches_give_sglang_s_steps_and_lines(tmp_path, root, which, graphs):
    module, theirs = _sglang_module(root)
    cfg = CONFIGS[which]
    path = None
    if cfg is not None:
        path = str(tmp_path / "adaptive.json")
        Path(path).write_text(json.dumps(cfg))
    ours_cfg = ad.load(ad.read(path) if cfg is not None else module.DEFAULT_ADAPTIVE_CONFIG)
    start = module.resolve_candidate_steps_from_config(path)[-1]
    assert list(ours_cfg.candidate_steps) == module.resolve_candidate_steps_from_config(path)
    ours_lines: list[str] = []
    ours = adaptive.Controller(start, ours_cfg, ours_lines.append, cuda_graph_bs=graphs)
    sg = _SGLangController(module, start, path, theirs, graphs)
    rng = random.Random(which)
    for i in range(3000):
        bs = rng.choice([1, 1, 2, 3, 4, 8, 20, 40, 80]) if i % 300 < 150 else rng.choice([1, 2])
        steps = sg.before_batch(bs)
        assert ours.before_batch(bs) == steps
        accepted = [rng.randint(0, steps) if rng.random() < 0.7 else 0 for _ in range(bs)]
        sg.after_verify(accepted, bs)
        ours.after_verify(accepted, bs)
        assert ours.steps == sg.steps
    assert ours_lines == theirs
    assert sum("Switch adaptive" in line for line in theirs) > 10  # the sequence exercised the rule


# --- the fake's command line and startup ---

FLAGS = [
    "--model-path",
    "/models/Kimi-K2-Instruct",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "/models/eagle3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
]
TIERS = {"1": {"candidate_steps": [1, 3]}, "4": {"candidate_steps": [0, 1]}}


def _config(tmp_path: Path, cfg=TIERS) -> str:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_the_flags_are_argparse_errors_where_the_version_lacks_them(capsys):
    from sweep.fake import args as fake_args

    argv = [*FLAGS, "--speculative-adaptive", "--speculative-adaptive-config", "/x.json"]
    with pytest.raises(SystemExit) as info:
        fake_args.parse([*argv, "--fake-version", "0.5.10"])
    assert info.value.code == 2
    assert (
        capsys.readouterr()
        .err.rstrip()
        .endswith(
            "launch_server.py: error: unrecognized arguments: --speculative-adaptive --speculative-adaptive-config /x.json"
        )
    )
    ns = fake_args.parse([*argv, "--fake-version", "0.5.23"]).ns
    assert ns.speculative_adaptive is True and ns.speculative_adaptive_config == "/x.json"


def _resolve(*argv: str):
    from sweep.fake import args as fake_args
    from sweep.fake import rules

    parsed = fake_args.parse([*FLAGS, "--speculative-adaptive", *argv, "--fake-version", "0.5.23"])
    warnings: list[str] = []
    return rules.resolve(parsed.ns, parsed.version, warn=warnings.append), warnings


def test_a_config_sglang_refuses_stops_the_launch_while_resolving(tmp_path):
    from sweep.fake import rules

    with pytest.raises(rules.ArgsRejected) as info:
        _resolve("--speculative-adaptive-config", _config(tmp_path, {"1": {"candidate_steps": [1, -3]}}))
    assert info.value.exception == (
        "ValueError: BS 1: candidate_steps must be a list of non-negative ints, got [1, -3]"
    )
    with pytest.raises(rules.ArgsRejected) as info:
        _resolve("--speculative-adaptive-config", str(tmp_path / "none.json"))
    assert info.value.exception == (
        f"FileNotFoundError: [Errno 2] No such file or directory: '{tmp_path / 'none.json'}'"
    )
    with pytest.raises(rules.ArgsRejected) as info:
        _resolve("--speculative-adaptive-config", _config(tmp_path, {"1": {"candidate_steps": [1, 2]}}))
    assert "--speculative-num-steps=3 is not in the adaptive config candidate_steps [1, 2]" in info.value.exception


def test_adaptive_resolves_to_its_steps_or_falls_back_with_sglang_s_warning(tmp_path):
    resolved, warnings = _resolve("--speculative-adaptive-config", _config(tmp_path))
    assert resolved.adaptive_config.tiers == {1: (1, 3), 4: (0, 1)} and resolved.args["speculative_adaptive"] is True
    assert (resolved.args["speculative_num_steps"], resolved.args["speculative_num_draft_tokens"]) == (3, 4)
    from sweep.fake import args as fake_args
    from sweep.fake import rules

    tree = [a if a != "1" else "4" for a in FLAGS]  # topk 4
    parsed = fake_args.parse([*tree, "--speculative-adaptive", "--fake-version", "0.5.23"])
    warnings = []
    resolved = rules.resolve(parsed.ns, parsed.version, warn=warnings.append)
    assert resolved.adaptive_config is None and resolved.args["speculative_adaptive"] is False
    assert (
        "speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is supported). "
        "Falling back to static speculative params."
    ) in warnings


@pytest.mark.slow
def test_the_fake_switches_per_tier_and_logs_it(start_fake, tmp_path):
    import asyncio

    import httpx

    server = start_fake(
        *FLAGS,
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        _config(tmp_path),
        "--fake-version",
        "0.5.23",
        "--fake-accept-rate",
        "0.7",
        "--enable-metrics",
    )
    server.wait_ready()
    log = server.log()
    assert "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3]" in log
    assert re.search(r"Built adaptive runtime state steps=0: elapsed=\d+\.\d\ds, mem=\d+\.\d\dGB", log)
    assert "Built adaptive runtime state steps=1:" in log and "Built adaptive runtime state steps=3:" not in log

    async def burst(n: int) -> list[dict]:
        async with httpx.AsyncClient(timeout=120) as client:

            async def one(i: int) -> dict:
                r = await client.post(
                    f"{server.base}/generate",
                    json={"text": f"request {i}", "sampling_params": {"max_new_tokens": 150, "ignore_eos": True}},
                )
                return r.json()

            return await asyncio.gather(*(one(i) for i in range(n)))

    alone = asyncio.run(burst(1))[0]["meta_info"]
    # C=1: tier 1's EMA of ~1.5 accepted drafts keeps it at 3 steps
    assert "Switch adaptive runtime state" not in server.log()[len(log) :]
    assert alone["spec_num_proposed_drafts"] == 3 * alone["spec_verify_ct"]
    # C=6: tier 4 (from 4 requests up) runs its own step count, 1 (its middle candidate: 3 is not one of its)
    many = asyncio.run(burst(6))
    server.wait_for_log(r"Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2")
    proposed = [r["meta_info"]["spec_num_proposed_drafts"] / r["meta_info"]["spec_verify_ct"] for r in many]
    assert min(proposed) < 3  # verified with 1 draft token under load
    metrics = server.get("/metrics").text
    assert re.search(r"^sglang:spec_num_steps\{[^}]*\} [13]\.0$", metrics, re.M)


def test_a_poor_drafter_drops_a_tier_to_no_speculation_and_probes_back():
    lines: list[str] = []
    c = adaptive.Controller(3, ad.load(TIERS), lines.append)
    for _ in range(15):  # 15 batches of 6 at 1 step, a drafter accepting nothing
        c.before_batch(6)
        c.after_verify([0] * 6, 6)
    assert c.steps == 0 and lines[-1] == "Switch adaptive runtime state: steps 1 -> 0, draft_tokens 2 -> 1"
    for _ in range(5):
        c.before_batch(6)
        c.after_verify([0] * 6, 6)
    assert c.steps == 1 and "Adaptive spec params updated: steps 0 -> 1" in lines[-2]


@pytest.mark.slow
@pytest.mark.scenario  # a whole sweep on a local Ray cluster: the scenario tier (python -m pytest -m scenario)
def test_a_dry_run_shows_the_switches_per_level(tmp_path):
    """One adaptive point through the whole sweep (local Ray, the fake of 0.5.23): the config given inline,
    the levels table says tier 1 kept its 3 steps at C=1 and tier 4's 1 step ran at C=8. The same point on
    one host, in the default suite: tests/host/test_point.py's
    test_an_adaptive_config_given_inline_is_served_and_its_switches_land_in_their_levels."""
    import sweep
    from sweep.results import load
    from tests.conftest import free_port
    from tests.experiments import experiment, write

    flags = {
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": "/d1",
        "speculative-eagle-topk": 1,
        "speculative-num-steps": 3,
        "speculative-num-draft-tokens": 4,
        "speculative-adaptive": True,
        "speculative-adaptive-config": TIERS,
    }
    exp = experiment(
        name="adaptive",
        server={"port": free_port(), "sglang_version": "0.5.23"},
        grid={"axes": {"drafter": {"values": {"d1": {"flags": flags}}}}},
        benchmark={
            "single_stream": {"runs": 1, "warmup": 0, "max_tokens": 16},
            "server_metrics": False,
            "concurrency": {"levels": [1, 8], "rounds": 2, "max_tokens": 64},
        },
        dry_run={"fake_args": ["--fake-version", "0.5.23"]},
    )
    result = sweep.run(
        write(tmp_path / "adaptive.yaml", exp, results_dir=tmp_path / "res"), mode="dry-run", progress=False
    )
    assert [p.status for p in result.points] == ["ok"], [(p.label, p.failure_reason) for p in result.points]
    tables = load(tmp_path / "res")
    point = tables["points"].collect().row(0, named=True)
    assert point["adaptive"] is True and point["adaptive_disabled_reason"] is None
    levels = {r["concurrency"]: r for r in tables["levels"].collect().to_dicts()}
    assert (levels[1]["adaptive_switches"], levels[1]["adaptive_steps"]) == (0, [3])
    assert levels[8]["adaptive_switches"] >= 1 and levels[8]["adaptive_steps"] == [3, 1]


def test_on_cpu_adaptive_needs_the_graphs_off_as_sglang_does():
    """SGLang builds a verify graph per candidate step count; on CPU that dies (NotImplementedError) unless
    the decode graph is off: --disable-cuda-graph (0.5.23's deprecated spelling, still its only one) does it."""
    from sweep.fake import args as fake_args
    from sweep.fake import rules

    argv = [*FLAGS, "--speculative-adaptive", "--device", "cpu", "--fake-version", "0.5.23"]
    parsed = fake_args.parse(argv)
    resolved = rules.resolve(parsed.ns, parsed.version)
    assert resolved.deferred == rules.Deferred("adaptive_capture", "NotImplementedError")
    parsed = fake_args.parse([*argv, "--disable-cuda-graph"])
    resolved = rules.resolve(parsed.ns, parsed.version)
    assert resolved.deferred is None and resolved.adaptive_config is not None


# --- the fake's truth: what SGLang's runtime rule makes of a policy's config ---

_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
_P = 0.75  # the reference experiment's trained drafter
_WIDE = 0.15  # the old sets' width: the reference dry run wrote "5": [0, 1, 2, 3, 5], "250": [0, 1, 2, 3] (issue 43)
_TIE = 0.01  # the policy's tie: fewer steps within 1 % of the fastest
_NOISE = 0.05  # a confirmation's noise: short beyond it is a loss


def _static(c: int, k: int) -> float:
    return adaptive.closed_loop_tok_s(None, c, steps=k, accept_rate=_P)


def _served(cfg: dict, c: int) -> float:
    config = ad.load(cfg)
    return adaptive.closed_loop_tok_s(config, c, steps=max(config.candidate_steps), accept_rate=_P)


def test_the_old_all_within_noise_config_falls_short_and_one_step_per_tier_does_not():
    """The policy of before (each tier every option within noise of the best, 0 the baseline's) lost
    live to the best static setup; so it does on the fake, whose SGLang rule climbs by acceptance to a
    tier's largest candidate. One step count per tier (the fewest within noise of the fastest) serves
    what its step count serves statically, at every level."""
    old, one = {}, {}
    for c in _LEVELS:
        figures = {k: _static(c, k) for k in (0, 1, 2, 3, 5)}
        best = max(figures.values())
        old[str(c)] = {"candidate_steps": sorted(k for k, v in figures.items() if v >= best * (1 - _WIDE))}
        spec = {k: v for k, v in figures.items() if k}
        top = max(spec.values())
        one[str(c)] = {"candidate_steps": [min(k for k, v in spec.items() if v >= top * (1 - _TIE))]}
    assert old["5"]["candidate_steps"] == [0, 1, 2, 3, 5] and old["250"]["candidate_steps"] == [0, 1, 2, 3]
    short_old, short_one = [], []
    for c in _LEVELS:
        static = max(_static(c, k) for k in (1, 2, 3, 5))  # what one static chain serves at best there
        if _served(old, c) < static * (1 - _NOISE):
            short_old.append(c)
        if _served(one, c) < static * (1 - _NOISE):
            short_one.append(c)
    assert short_old, "the old config kept up with the best static setup"
    assert short_one == []


def test_step_0_runs_the_draft_extend_and_is_slower_than_no_speculation():
    """SGLang's step 0 is not the no-speculation server: a tier held at [0] still runs the drafter's
    extend after each verify, so it serves less than the plain server at every load (the real CPU build
    measured 24-36 % less at C=8-16)."""
    for c in (1, 8, 64):
        zero = _served({"1": {"candidate_steps": [0]}}, c)
        assert zero < _static(c, 0) * 0.99, c


def test_a_batch_is_padded_to_its_cuda_graph_size_before_it_is_routed():
    c, _ = controller({"1": {"candidate_steps": [1]}, "5": {"candidate_steps": [2]}}, 2)
    assert c.params.key_for(4) == 1  # no graphs: routed as it is
    c = adaptive.Controller(
        2, ad.load({"1": {"candidate_steps": [1]}, "5": {"candidate_steps": [2]}}), cuda_graph_bs=[1, 2, 4, 8]
    )
    assert [c.params.key_for(b) for b in (1, 2, 3, 4, 5, 8, 9, 300)] == [1, 1, 1, 1, 5, 5, 5, 5]
    assert c.before_batch(3) == 1 and c.before_batch(5) == 2
