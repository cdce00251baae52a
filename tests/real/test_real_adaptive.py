"""The speculative policy across load, from a real sweep to a real server: ``python -m sweep EXP
--local`` with ``policy.confirm`` runs the baseline and the trained tiny EAGLE-3 drafter at two step
counts on real SGLang, derives the policy (``sweep.analysis.policy``), and serves it on SGLang's own
adaptive speculation (``--speculative-adaptive --speculative-adaptive-config``) as a confirmation
point; then that policy's config is served again on every CPU path, greedy output equal to the
baseline's token for token, with the tier switches the policy implies seen in the server's log at low
and at high concurrency.

Where the grid measures no step count ahead of its baseline at any level (the tiny drafter on the
AVX2 torch_native path: its verify costs more than it saves), the answer that wins when served is no
speculation: the first test checks that the sweep confirms nothing and the report's Deploy says why,
and the serving test skips with the measured figures.

Run with ``-s`` to see the policy, the switches and the figures per level.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import re
import textwrap

import polars as pl
import pytest

from sweep.analysis import policy as pol
from sweep.results import store
from sweep.sglang.args import flag_args
from tests.conftest import run_sweep_cli
from tests.real.servers import live_server
from tests.real.test_real_speculative import PROMPTS, greedy, reference

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(1800)]

LEVELS = (1, 8)
SWITCH = re.compile(r"Switch adaptive runtime state: steps (\d+) -> (\d+)")


@pytest.fixture(scope="module")
def policy_sweep(real_spec_sglang, tmp_path_factory):
    """A real local sweep (baseline, the trained drafter at 1 and 3 steps, levels 1 and 8) with its
    policy confirmed on SGLang's adaptive speculation: (results directory, the CLI's result)."""
    real = real_spec_sglang
    tmp = tmp_path_factory.mktemp("policy-sweep")
    out = tmp / "results"
    exp = tmp / "exp.yaml"
    exp.write_text(
        textwrap.dedent(f"""
        name: real_policy
        cluster: {{host_resource: cpu_host, gpus_per_host: 0}}
        server:
          sglang_version: "0.5.23"
          launcher: [{real.python}, -m, sglang.launch_server]
          model_path: {real.models / "target"}
          tp_size: 1
          port: 31600
          flags: {{device: cpu, attention-backend: {real.attention_backend}, disable-overlap-schedule: true,
                  disable-cuda-graph: true, max-total-tokens: 16384, max-running-requests: 16, enable-metrics: true}}
          env: {json.dumps(real.env)}
          timeouts: {{load_s: 300, capture_s: 300, ready_s: 180, total_s: 420, stall_s: 180, stop_grace_s: 20}}
          reap: {{wait_s: 20}}
          cpu: {{min_free_mem_gib: 1.0}}
        grid:
          axes:
            drafter:
              values:
                none: {{}}
                eagle3:
                  flags: {{speculative-algorithm: EAGLE3, speculative-draft-model-path: {real.models / "eagle3"},
                          speculative-eagle-topk: 1}}
            steps:
              flag: speculative-num-steps
              values: [1, 3]
          derived:
            speculative-num-draft-tokens: ${{add:${{steps}},1}}
        benchmark:
          prompts: coding
          single_stream: {{runs: 1, warmup: 1, max_tokens: 32}}
          concurrency: {{levels: {list(LEVELS)}, rounds: 2, max_tokens: 32}}
          request_timeout_s: 180
        policy: {{confirm: true, revise: 1}}
        local: {{hosts: 1}}
        results_dir: {out}
        """)
    )
    r = run_sweep_cli(str(exp), "--local", timeout=1500)
    return out, r


NOTHING_PAYS = "no step count is faster than its baseline beyond noise at any level"


def _policy(out) -> pol.Policy:
    policies = pol.from_tables(store.load(out))
    assert len(policies) == 1, (policies, policies.notes)
    return policies[0]


def _grid_figures(out) -> str:
    """Each grid point's output tok/s per level, for a message."""
    levels = store.table(out, "levels").collect()
    labels = dict(store.table(out, "points").collect().select("point_id", "label").iter_rows())
    return "; ".join(
        f"{labels.get(pid, pid)} C={c}: {v:.0f} tok/s"
        for pid, c, v in levels.sort("point_id", "concurrency")
        .select("point_id", "concurrency", "output_throughput")
        .iter_rows()
    )


def _nothing_pays(out) -> bool:
    """The grid measured no step count ahead of its baseline beyond noise at any level: the tiny drafter
    on a CPU path whose verify costs more than it saves (measured on an AVX2-only Zen 3, torch_native:
    steps=1 126 against 134 tok/s at C=1, 238 against 315 at C=8). Then the right answer is no policy."""
    policies = pol.from_tables(store.load(out))
    return not len(policies) and any(NOTHING_PAYS in n for n in policies.notes)


def test_a_real_sweep_derives_its_policy_and_serves_it(policy_sweep):
    out, r = policy_sweep
    assert r.returncode == 0, (r.stdout[-4000:], r.stderr[-4000:])
    # through the store: the step axis holds numbers and the confirmation's "adaptive"
    points = store.table(out, "points").collect()
    if _nothing_pays(out):  # the answer that wins when served is no speculation: nothing to confirm, said so
        assert points.height == 3 and (points["status"] == "ok").all(), points.select("label", "status")
        rep = run_sweep_cli("report", str(out), timeout=300)
        assert rep.returncode == 0, rep.stderr[-3000:]
        md = (out / "report" / "report.md").read_text()
        deploy = md[md.index("\n## Deploy") : md.index("\n## ", md.index("\n## Deploy") + 1)]
        assert "no speculative policy: no step count is ahead of its baseline beyond noise at any level" in deploy, (
            deploy
        )
        print(f"\nno policy, as measured: {_grid_figures(out)}")
        return
    # the grid's 3 points and the policy's confirmation, and at most one revision of it (policy.revise: 1)
    # where the confirmation fell short of the best static setup beyond noise
    assert points.height in (4, 5), points.select("label", "status")
    assert (points["status"] == "ok").all(), points.select("label", "status", "failure_reason").rows()
    p = _policy(out)
    print(
        f"\npolicy {p.group}: {p.config_json().strip()}; break-even {p.break_even}; "
        f"levels {[(lv.concurrency, lv.best_steps) for lv in p.levels]}"
    )
    conf = points.filter(pl.col("label") == p.label()).row(0, named=True)
    assert conf["adaptive"] is True, conf
    # what the confirmation's server ran at each level: the steps of the tier the level routes to
    levels = store.table(out, "levels").collect().filter(pl.col("point_id") == conf["point_id"])
    ran = {lv["concurrency"]: lv["adaptive_steps"] for lv in levels.iter_rows(named=True)}
    print(f"confirmation {conf['label']}: steps run per level {ran}")
    for c in LEVELS:
        tier = _tier(p, c)
        assert ran[c] and set(ran[c]) & set(tier.candidate_steps), (c, ran[c], tier)
    # the report opens with what to deploy, and the config file it names is the policy's
    rep = run_sweep_cli("report", str(out), timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    md = (out / "report" / "report.md").read_text()
    first = md[md.index("\n## ") + 1 :].splitlines()[0]
    assert "Deploy" in first, md[:2000]
    assert json.loads((out / "report" / f"policy-{p.slug()}.json").read_text()) == p.config()


def _tier(p: pol.Policy, concurrency: int) -> pol.Tier:
    """The tier SGLang routes a batch of ``concurrency`` to: the closest lower key."""
    return [t for t in p.tiers if t.lo <= concurrency][-1]


def _serve_policy(real, p: pol.Policy, tmp_path, label: str) -> dict:
    flags = dict(p.launch_flags())
    cfg = tmp_path / "policy.json"
    cfg.write_text(p.config_json())
    flags[pol.CONFIG_FLAG] = str(cfg)
    flags.update(
        {
            "speculative-algorithm": "EAGLE3",
            "speculative-draft-model-path": str(real.models / "eagle3"),
            "disable-cuda-graph": True,
        }
    )
    with live_server(real, tmp_path / "server.log", *flag_args(flags)) as srv:
        low = greedy(srv.url)  # one request at a time: the tier of batch size 1
        at_low = srv.text()
        with cf.ThreadPoolExecutor(16) as ex:  # sixteen at once: batches of 8 and more
            high = list(ex.map(lambda q: _generate(srv.url, q), PROMPTS * 6))
        log = srv.text()
    assert "Traceback" not in log, log[-4000:]
    return {"low": low, "high": high, "log_low": at_low, "log": log, "label": label}


def _generate(url: str, prompt: str) -> dict:
    from tests.real.servers import generate
    from tests.real.test_real_speculative import MAX_TOKENS

    return generate(url, prompt, MAX_TOKENS)


def _steps_in_log(text: str, start: int) -> list[int]:
    """The step counts the server ran, in order: the one it started at, then each switch's target."""
    return [start] + [int(b) for _, b in SWITCH.findall(text)]


@pytest.mark.parametrize("path", ["this CPU's", "avx2"])
def test_the_policy_is_lossless_and_switches_tiers(
    path, policy_sweep, real_spec_sglang, request, tmp_path, tmp_path_factory
):
    out, r = policy_sweep
    assert r.returncode == 0, (r.stdout[-4000:], r.stderr[-4000:])
    real = real_spec_sglang if path == "this CPU's" else request.getfixturevalue("emulated_avx2_sglang")
    if real.path is None:
        pytest.skip(
            "SGLang as shipped (not cluster/sglang-cpu-x86/install.sh): no adaptive_cpu.py edit, a "
            "0-step tier stops its scheduler"
        )
    if _nothing_pays(out):
        pytest.skip(f"no policy to serve: speculation does not pay on this CPU path ({_grid_figures(out)})")
    p = _policy(out)
    base = reference(real, tmp_path_factory)
    got = _serve_policy(real, p, tmp_path, path)
    for b, s in zip(base, got["low"]):
        assert s["output_ids"] == b["output_ids"], ("one at a time", b["output_ids"], s["output_ids"])
    for i, s in enumerate(got["high"]):
        b = base[i % len(base)]
        assert s["output_ids"] == b["output_ids"], ("sixteen at once", b["output_ids"], s["output_ids"])
    start = p.largest()
    low_tier, high_tier = _tier(p, 1), _tier(p, 8)
    low = _steps_in_log(got["log_low"], start)
    high = _steps_in_log(got["log"], start)[len(low) :]
    print(f"\n{real.path} path, policy {p.config()}: steps one at a time {low}, then under load {high}")
    # one at a time the server runs the low tier's steps (a first switch, at the first batch, where
    # the launch's steps are not among that tier's candidates)
    assert all(s in low_tier.candidate_steps for s in low[1:]) and low[-1] in low_tier.candidate_steps, (low, low_tier)
    if set(high_tier.candidate_steps) != set(low_tier.candidate_steps):
        # under load it switches into the high tier's steps (and back as the batch drains)
        assert set(high) & set(high_tier.candidate_steps), (high, high_tier)
    else:  # one tier: any switch is its EMA moving among that tier's candidates
        assert all(s in high_tier.candidate_steps for s in high), (high, high_tier)
