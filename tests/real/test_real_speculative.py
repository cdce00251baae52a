"""Real speculative servers (the speculative real tier): every algorithm the CPU install serves, on
every path it takes (amx, avx512-bf16; the AVX2 path on this CPU or emulated), each lossless under
greedy decoding and benchmarked, with the benchmark's accept figures equal to the server's own; a
speculative point start to finish; and the drafter mistakes whose consequence is acceptance, observed
on a live server with the tiny drafter trained on the tiny target (cluster/sglang-cpu-x86/tinymodels.py).

Run with ``-s`` to see the figures (ready times, accept lengths, per-position histograms).
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
from pathlib import Path

import polars as pl
import pytest

from sweep.bench.prompts import load_prompts
from sweep.bench.runner import run as run_bench
from sweep.core.checks import lines
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.host.point import run_launch
from sweep.sglang import drafter as dr
from sweep.sglang.args import flag_args
from tests.real.servers import flush, generate, live_server
from tests.real.test_real_point import host, spec_for  # noqa: F401  (host: the fixture)

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(1800)]

PROMPTS = list(load_prompts("coding").prompts[:3])
MAX_TOKENS = 48


def eagle3_flags(drafter: Path, steps: int, topk: int, draft_tokens: int) -> dict:
    return {
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": str(drafter),
        "speculative-num-steps": steps,
        "speculative-eagle-topk": topk,
        "speculative-num-draft-tokens": draft_tokens,
    }


def eagle3(drafter: Path, steps: int, topk: int, draft_tokens: int) -> list[str]:
    return flag_args(eagle3_flags(drafter, steps, topk, draft_tokens))


def algorithms(models: Path) -> dict[str, list[str]]:
    """Each algorithm and tree shape the real tier serves."""
    return {
        "ngram": ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8"],
        "eagle3-chain": eagle3(models / "eagle3", 3, 1, 4),
        "eagle3-tree": eagle3(models / "eagle3", 2, 2, 4),
        "standalone": [
            "--speculative-algorithm",
            "STANDALONE",
            "--speculative-draft-model-path",
            str(models / "target"),
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "4",
        ],
    }


def greedy(url: str) -> list[dict]:
    flush(url)
    return [generate(url, p, MAX_TOKENS) for p in PROMPTS]


_REFERENCE: dict[str, list[dict]] = {}


def reference(real, tmp_path_factory) -> list[dict]:
    """The baseline's greedy answers to PROMPTS on this install (one baseline server per install)."""
    key = real.python
    if key not in _REFERENCE:
        with live_server(real, tmp_path_factory.mktemp("baseline") / "server.log") as srv:
            _REFERENCE[key] = greedy(srv.url)
    return _REFERENCE[key]


SHARED = ("eagle3-chain", "eagle3-tree")  # served again by later tests (the shared_servers fixture)


def lossless_and_benchmarked(real, name: str, tmp_path, tmp_path_factory, shared=None) -> dict:
    """Serve one algorithm: its greedy output equals the baseline's token for token; the benchmark
    runs two levels on it, and its accept figures are the server's own. With ``shared`` (the
    shared_servers fixture), the servers later tests read from too are taken from it."""
    base = reference(real, tmp_path_factory)
    bench = BenchSettings(
        prompts="coding",
        single_stream=SingleStreamSettings(runs=0, warmup=0),
        concurrency=ConcurrencySettings(levels=[1, 2], rounds=1, max_tokens=24),
        request_timeout_s=180,
    )
    with (
        contextlib.nullcontext(shared.get(real, *algorithms(real.models)[name]))
        if shared and name in SHARED
        else live_server(real, tmp_path / "server.log", *algorithms(real.models)[name])
    ) as srv:
        spec = greedy(srv.url)
        res = run_bench(srv.url, bench, point_id=name)
        info = srv.text()
    for b, s in zip(base, spec):
        assert s["output_ids"] == b["output_ids"], (name, b["output_ids"], s["output_ids"])
    accept = [s["meta_info"].get("spec_accept_length") for s in spec]
    assert all(a is not None and a >= 1.0 for a in accept), accept
    levels = pl.from_arrow(res.levels).sort("concurrency")
    assert levels["ok"].to_list() == [1, 2] and (levels["failed"] == 0).all()
    for lv in levels.iter_rows(named=True):
        assert lv["accept_length_requests"] == pytest.approx(lv["accept_length_metrics"], rel=0.02), lv
    print(
        f"\n{real.path or 'shipped'} {name}: ready {srv.ready_s:.0f} s, greedy = baseline on {len(PROMPTS)} prompts, "
        f"accept length {', '.join(f'{a:.2f}' for a in accept)}; histograms "
        f"{[s['meta_info'].get('spec_accept_histogram') for s in spec]}"
    )
    assert "Traceback" not in info
    return {"accept": accept, "levels": levels, "requests": pl.from_arrow(res.requests)}


@pytest.mark.parametrize("name", ["ngram", "eagle3-chain", "eagle3-tree", "standalone"])
def test_every_algorithm_is_lossless_and_benchmarked(
    real_spec_sglang, name, tmp_path, tmp_path_factory, shared_servers
):
    if real_spec_sglang.path == "avx2":  # this CPU is an AVX2 one: test_the_avx2_path_is_lossless is this test
        assert real_spec_sglang.attention_backend == "torch_native"
    out = lossless_and_benchmarked(real_spec_sglang, name, tmp_path, tmp_path_factory, shared_servers)
    if name == "eagle3-chain":  # the trained drafter predicts its target (a random one accepts nothing)
        assert sum(out["accept"]) / len(out["accept"]) > 1.5, out["accept"]


@pytest.mark.parametrize("name", ["ngram", "eagle3-chain", "eagle3-tree", "standalone"])
def test_the_avx2_path_is_lossless(emulated_avx2_sglang, name, tmp_path, tmp_path_factory):
    """Kernels without AVX-512, torch at AVX2, torch_native taught the speculative passes: the path of
    an AVX2-only CPU, emulated on a newer one (on an AVX2-only CPU the test above is this one)."""
    assert emulated_avx2_sglang.attention_backend == "torch_native"
    lossless_and_benchmarked(emulated_avx2_sglang, name, tmp_path, tmp_path_factory)


def test_accept_figures_are_the_servers_own(real_spec_sglang, tmp_path, shared_servers):
    """The benchmark's accept length and each request's histogram against what the server says:
    ``meta_info`` of the same greedy request asked again, /server_info and the sglang:spec_* metrics
    delta over each level."""
    bench = BenchSettings(
        prompts="coding",
        single_stream=SingleStreamSettings(runs=1, warmup=0, max_tokens=MAX_TOKENS),
        concurrency=ConcurrencySettings(levels=[1, 3], rounds=1, max_tokens=32),
        request_timeout_s=180,
    )
    srv = shared_servers.get(real_spec_sglang, *algorithms(real_spec_sglang.models)["eagle3-chain"])
    res = run_bench(srv.url, bench, point_id="accept")
    req = pl.from_arrow(res.requests)
    single = req.filter(pl.col("phase") == "single").row(0, named=True)
    flush(srv.url)
    again = generate(srv.url, load_prompts("coding").prompts[single["prompt_index"]], MAX_TOKENS)["meta_info"]
    hist = again.get("spec_accept_histogram") or again.get("spec_correct_drafts_histogram")
    assert single["spec_accept_histogram"] == hist, (single["spec_accept_histogram"], again)
    assert single["spec_verify_ct"] == again["spec_verify_ct"]
    assert single["accept_length"] == pytest.approx(again["spec_accept_length"])
    # the histogram counts verify steps: as many as the server says it ran, each accepting k drafts
    assert sum(hist) == again["spec_verify_ct"]
    assert single["accept_length"] == pytest.approx(single["completion_tokens"] / single["spec_verify_ct"], rel=0.05)
    for lv in pl.from_arrow(res.levels).iter_rows(named=True):
        rows = req.filter((pl.col("phase") == "level") & (pl.col("concurrency") == lv["concurrency"]))
        assert rows["spec_accept_histogram"].null_count() == 0
        verifies = int(rows["spec_verify_ct"].sum())
        assert sum(sum(h) for h in rows["spec_accept_histogram"].to_list()) == verifies
        assert lv["accept_length_requests"] == pytest.approx(int(rows["completion_tokens"].sum()) / verifies)
        assert lv["accept_length_metrics"] == pytest.approx(lv["accept_length_requests"], rel=0.02)
        # /server_info of the CPU build 7f8f030 has no avg_spec_accept_length (internal_states lacks it)
        if lv["accept_length_server"] is not None:
            assert lv["accept_length_server"] == pytest.approx(lv["accept_length_requests"], rel=0.05)
    print(
        f"\naccept: single {single['accept_length']:.2f} (histogram {hist}); levels "
        f"{pl.from_arrow(res.levels).select('concurrency', 'accept_length_requests', 'accept_length_metrics', 'accept_length_server').rows()}"
    )


def test_a_speculative_point_start_to_finish(real_spec_sglang, tmp_path, host):  # noqa: F811
    """run_launch with the trained drafter: the drafter's own load and KV cache seen as phases, the
    benchmark with real acceptance, the stop, nothing left (the ``host`` fixture checks)."""
    real = real_spec_sglang
    drafter = real.models / "eagle3"
    spec = spec_for(
        real,
        tmp_path,
        eagle3_flags(drafter, 3, 1, 4),  # algorithms()'s eagle3-chain
        paths={"model_path": str(real.models / "target"), "draft model path": str(drafter)},
    )
    spec.real_paths = True
    [r] = run_launch(spec, host).points
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-3000:])
    log = Path(spec.log_path).read_text(errors="replace")
    loads = [line for line in log.splitlines() if "Load weight end" in line]
    assert len(loads) == 2 and "type=LlamaForCausalLMEagle3" in loads[1], loads
    assert log.count("KV Cache is allocated") == 2, log[-3000:]
    for k in ("load_s", "kv_cache_s", "http_s", "ready_s", "startup_s"):
        assert r.phases[k] is not None and r.phases[k] >= 0, (k, r.phases)
    assert r.drafter_aux_layers == [0, 1, 2] and all(c.level != "error" for c in r.drafter_checks), r.drafter_checks
    assert any("speculative decoding (EAGLE3)" in c for c in lines(r.checks)), lines(r.checks)
    levels = pl.from_arrow(r.levels)
    assert (levels["failed"] == 0).all() and (levels["accept_length_requests"] > 1.5).all(), levels
    assert r.reaped["port_free"]


# -- drafter mistakes whose consequence is acceptance, on a live server with the trained drafter --------


def read_safetensors(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    header.pop("__metadata__", None)
    return header, raw[8 + n :]


def write_tensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def trained_tensors(drafter: Path) -> dict[str, tuple[str, list[int], bytes]]:
    header, data = read_safetensors(drafter / "model.safetensors")
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0] : v["data_offsets"][1]]) for k, v in header.items()}


def small_vocab(tensors: dict, keep: list[int], vocab: int) -> dict:
    """The drafter over a draft vocabulary of ``keep`` (target ids), as EAGLE-3 training libraries cut
    one: lm_head's rows of those ids, ``d2t`` (target id minus draft id) and ``t2d`` (a target-vocab mask)."""
    dtype, shape, head = tensors["lm_head.weight"]
    row = len(head) // shape[0]
    out = dict(tensors)
    out["lm_head.weight"] = (dtype, [len(keep), shape[1]], b"".join(head[i * row : (i + 1) * row] for i in keep))
    out["d2t"] = ("I64", [len(keep)], struct.pack(f"<{len(keep)}q", *[t - i for i, t in enumerate(keep)]))
    mask = bytearray(vocab)
    for t in keep:
        mask[t] = 1
    out["t2d"] = ("BOOL", [vocab], bytes(mask))
    return out


def mistakes(models: Path, seen_tokens: list[int]) -> dict[str, tuple[dict, dict, str]]:
    """name -> (config, tensors, what SGLang does with it), each built from the trained drafter."""
    cfg = json.loads((models / "eagle3" / "config.json").read_text())
    good = trained_tensors(models / "eagle3")
    vocab = cfg["vocab_size"]
    # as training libraries cut one: the most frequent target tokens first (draft id 0 the most frequent)
    keep = list(dict.fromkeys(seen_tokens + list(range(vocab))))[: vocab // 2]
    small = small_vocab(good, keep, vocab)
    cfg_small = {**cfg, "draft_vocab_size": len(keep)}
    return {
        "trained": (cfg, good, "accepts"),
        "small-vocab": (cfg_small, small, "accepts"),
        "ddp-prefix": (cfg, {f"module.{k}": v for k, v in good.items()}, "collapses"),
        # measured: the first draft token reads fc (left uninitialized), the later ones the drafter's own
        # hidden state, so acceptance drops (2.90 -> 2.49 on the coding prompts) rather than collapses
        "no-fc": (cfg, {k: v for k, v in good.items() if k != "fc.weight"}, "degrades"),
        "no-d2t": (cfg_small, {k: v for k, v in small.items() if k != "d2t"}, "collapses"),
    }


def test_drafter_mistakes_that_collapse_acceptance(real_spec_sglang, tmp_path, tmp_path_factory, shared_servers):
    """A wrapper prefix, no fc, no d2t with a smaller draft vocabulary: SGLang loads each without a
    word and serves, greedy output unchanged; acceptance collapses to about 1 (prefix, no d2t) or drops
    (no fc) where the trained drafter accepts well above it. The check (sweep/sglang/drafter.py) warns about
    exactly these, and passes the two that accept."""
    real = real_spec_sglang
    base = reference(real, tmp_path_factory)
    counts: dict[int, int] = {}
    for b in base:
        for t in b["output_ids"]:
            counts[t] = counts.get(t, 0) + 1
    seen = sorted(counts, key=lambda t: (-counts[t], t))  # the target's tokens, most frequent first
    rows = {}
    for name, (cfg, tensors, expect) in mistakes(real.models, seen).items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg, indent=1))
        write_tensors(folder / "model.safetensors", tensors)
        verdict = dr.check(real.models / "target", folder, "EAGLE3")
        with (
            # the trained drafter as it is on disk: the eagle3-chain server the tests above read from
            contextlib.nullcontext(shared_servers.get(real, *algorithms(real.models)["eagle3-chain"]))
            if name == "trained"
            else live_server(real, tmp_path / f"{name}.log", *eagle3(folder, 3, 1, 4))
        ) as srv:
            out = greedy(srv.url)
            log = srv.text()
        assert [o["output_ids"] for o in out] == [b["output_ids"] for b in base], name  # lossless, however bad
        accept = sum(o["meta_info"]["spec_accept_length"] for o in out) / len(out)
        level = "error" if verdict.errors else "warning" if verdict.warnings else "ok"
        rows[name] = (
            expect,
            accept,
            level,
            [f.rule for f in verdict.findings],
            [o["meta_info"].get("spec_accept_histogram") for o in out],
        )
        drafter_load = (
            log.split("Load weight begin")[2].split("Load weight end")[0] if log.count("Load weight begin") > 1 else ""
        )
        assert "Traceback" not in log
        assert not any(w in drafter_load.lower() for w in ("missing", "not found", "skipping")), drafter_load
    print("\ndrafter          expected    accept length  check    findings   histograms")
    for name, (expect, accept, level, checks, hists) in rows.items():
        print(f"{name:16} {expect:10}  {accept:12.2f}   {level:8} {','.join(checks) or '-':24} {hists}")
    trained = rows["trained"][1]
    for name, (expect, accept, level, checks, _) in rows.items():
        if expect == "accepts":
            assert accept > 1.5 and accept >= trained - 0.1 and level == "ok", (name, accept, checks)
        elif expect == "degrades":
            # fc left uninitialized: by how much varies with the memory it gets (2.90 -> 2.4-2.5 on a Zen 4,
            # 2.72 -> 2.60 on a Zen 3), never above the trained drafter's
            assert accept < trained and level == "warning", (name, accept, trained, checks)
        else:
            assert accept < 1.2 and level == "warning", (name, accept, checks)


# -- rules that only a live speculative server decides -------------------------------------------------

LIVE_RULES = {  # arguments SGLang's checks accept, and a server then dies of (the plan says which way)
    "tree-one-draft-token": (3, 4, 1),
    "topk-zero": (3, 0, 4),
    "topk-negative": (1, -1, 2),
}


@pytest.mark.parametrize("name", list(LIVE_RULES))
def test_what_only_a_live_server_decides(real_spec_sglang, name, tmp_path):
    from sweep.sglang import rules
    from sweep.sglang.logs import find_failure
    from tests.real.servers import dies

    steps, topk, draft = LIVE_RULES[name]
    drafter = real_spec_sglang.models / "eagle3"
    flags = {
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": str(drafter),
        "speculative-num-steps": steps,
        "speculative-eagle-topk": topk,
        "speculative-num-draft-tokens": draft,
    }
    later = rules.evaluate(flags, BenchSettings()).outcome.later
    assert later is not None, f"the plan lets {flags} through"
    said, log = dies(real_spec_sglang, tmp_path / "server.log", *eagle3(drafter, steps, topk, draft))
    reason = find_failure(log.splitlines()).reason  # what the sweep records
    print(f"\n{name}: the plan says {later.rule}: {later.exception}; SGLang: {reason}")
    assert "fired up and ready" not in log, f"SGLang served {name}: {log[-2000:]}"
    if name == "topk-zero" and not said:
        # no graphs on CPU: the warmup's first draft step divides by the topk before any reshape
        assert reason.startswith("Fatal Python error: Floating point exception"), (reason, log[-3000:])
    else:
        # where torch.compile traced the step (seen on a Zen 3), sizes are symbols (s53 for the topk's 0)
        said_eager = re.sub(r"\bs\d+\b", str(topk), said)
        assert later.exception in said_eager and reason == said, (later.exception, said, reason, log[-3000:])


def test_the_longest_chain_predicts_the_shorter_ones(real_spec_sglang, tmp_path, shared_servers):
    """What the adaptive search relies on (sweep/search/adaptive.py), on real SGLang: a chain drafter
    drafts the same tokens whatever its step count, so the acceptance per draft position that a
    3-step server measures gives the accept length of a 1-step server of the same drafter."""
    from sweep.search.measured import SINGLE, from_tables

    real = real_spec_sglang
    bench = BenchSettings(
        prompts="coding",
        single_stream=SingleStreamSettings(runs=6, warmup=0, max_tokens=MAX_TOKENS),
        concurrency=ConcurrencySettings(levels=[], rounds=1),
        request_timeout_s=180,
    )
    got, requests = {}, {}
    for steps in (3, 1):  # 3 steps: the eagle3-chain server of the tests above
        flags = eagle3(real.models / "eagle3", steps, 1, steps + 1)
        with (
            contextlib.nullcontext(shared_servers.get(real, *flags))
            if steps == 3
            else live_server(real, tmp_path / f"steps{steps}.log", *flags)
        ) as srv:
            res = run_bench(srv.url, bench, point_id=f"s{steps}")
        requests[steps] = pl.from_arrow(res.requests)
        got[steps] = from_tables(
            f"s{steps}", pl.from_arrow(res.levels), requests[steps], pl.from_arrow(res.single_stream), depth=steps
        ).levels[SINGLE]
    predicted, measured = got[3].accept_length(1), got[1].accept_length(1)
    print(
        f"\naccept length of 1 step: predicted from 3 steps {predicted:.3f}, measured {measured:.3f}; "
        f"per position at 3 steps {[round(r, 3) for r in got[3].reached]}"
    )
    assert predicted is not None and measured is not None
    assert predicted == pytest.approx(measured, rel=0.15)
    # its own, as the server counts it: one histogram entry per verify (spec_verify_ct), and a request's
    # tokens are the prefill's first one plus each verify's accepted drafts and bonus token, less what
    # max_tokens cut off its last verify (at most the steps). So the histogram's accept length is the
    # server's pooled one without the first token, to within that cut; the server's per-request
    # spec_accept_length (completion tokens / verifies, first token included, averaged over requests)
    # is not the same figure (CI once saw 2.68 from the histogram against 2.91 averaged)
    rows = requests[3].filter(pl.col("ok") & (pl.col("phase") == "single")).to_dicts()
    assert rows
    for r in rows:
        hist = r["spec_accept_histogram"]
        verified = sum((k + 1) * n for k, n in enumerate(hist))
        assert sum(hist) == r["spec_verify_ct"], r
        assert verified - 3 <= r["completion_tokens"] - 1 <= verified, r
    verifies = sum(r["spec_verify_ct"] for r in rows)
    pooled = sum(r["completion_tokens"] - 1 for r in rows) / verifies
    assert got[3].accept_length(3) - 3 * len(rows) / verifies - 1e-9 <= pooled <= got[3].accept_length(3) + 1e-9


def test_a_shallower_tree_bounds_a_deeper_ones_acceptance(real_spec_sglang, tmp_path, shared_servers):
    """What the adaptive search's tree bound relies on (sweep/search/adaptive.py::tree_accept_bound),
    on real SGLang: with the same topk and draft tokens, a 3-step tree reaches each depth it shares
    with a 2-step one no more often, and accepts at most AL(2) + p_2 per verify."""
    from sweep.search.adaptive import tree_accept_bound
    from sweep.search.measured import SINGLE, from_tables

    real = real_spec_sglang
    bench = BenchSettings(
        prompts="coding",
        single_stream=SingleStreamSettings(runs=6, warmup=0, max_tokens=MAX_TOKENS),
        concurrency=ConcurrencySettings(levels=[], rounds=1),
        request_timeout_s=180,
    )
    got = {}
    for steps in (2, 3):  # 2 steps: the eagle3-tree server of the tests above
        flags = eagle3(real.models / "eagle3", steps, 2, 4)
        with (
            contextlib.nullcontext(shared_servers.get(real, *flags))
            if steps == 2
            else live_server(real, tmp_path / f"tree{steps}.log", *flags)
        ) as srv:
            res = run_bench(srv.url, bench, point_id=f"t{steps}")
        got[steps] = from_tables(
            f"t{steps}",
            pl.from_arrow(res.levels),
            pl.from_arrow(res.requests),
            pl.from_arrow(res.single_stream),
            depth=steps,
        ).levels[SINGLE]
    shallow, deep = got[2], got[3]
    bound = tree_accept_bound(shallow, 2, 3)
    print(
        f"\ntree topk 2, 4 draft tokens: reach per depth at 2 steps {[round(r, 3) for r in shallow.reached]}, "
        f"at 3 steps {[round(r, 3) for r in deep.reached]}; accept length at 3 steps {deep.accept_length(3):.3f}, "
        f"bound from 2 steps {bound:.3f}"
    )
    assert shallow.reached and deep.reached and shallow.reached[0] > 0  # the trained drafter accepts
    # the same prompts, greedy: the two runs verify from different positions, so allow a little noise
    assert all(d <= s * 1.05 + 0.02 for d, s in zip(deep.reached, shallow.reached)), (deep.reached, shallow.reached)
    assert deep.accept_length(3) <= bound * 1.03, (deep.accept_length(3), bound)
