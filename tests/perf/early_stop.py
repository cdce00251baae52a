"""Does stopping a level once its throughput is known save benchmark time, and what does it cost?

Side by side in one run, on the fake SGLang server at the reference experiment's levels
(experiments/k26_eagle.yaml: 1, 2, 5, 10, 30, 70, 100, 250; 2 rounds; single stream 5 runs after
2 warmups), for each configuration (a baseline, and a 3-step EAGLE-3 chain drafter that accepts
75 %, with the experiment's tuned NCCL environment): the whole benchmark with the fixed rounds of
today, then with ``benchmark.concurrency.stop`` (precision, confidence, min_requests as given), on
the same server. ``--repeat`` runs the fixed rounds a second time: the noise floor, the difference
two identical fixed runs show.

It prints per configuration the benchmark time (single stream plus levels, as the runner
measures it) of each, the saving, and per level: requests sent, whether and when it stopped, the
precision reached, output throughput (tokens / wall time, the levels table's definition) of each
and their difference.

    python tests/perf/early_stop.py [--speed 2] [--max-tokens 512] [--single-tokens 2048] [--repeat]

The token counts are the reference's; the fake runs --speed 2 times faster than the system it
models: about 8 minutes per configuration and run (42 minutes with --repeat). Faster is noisier
on a small machine: at --speed 4 on 2 shared cores the client and the server fought for the CPUs,
the token stream at C >= 70 jittered by 10-30 %, the rule rightly refused to stop there, and two
fixed runs disagreed by up to 17 %. Fewer tokens per request make the waves short, and the
client's turnaround between two waves (counted by the fixed rounds, not by a level stopped after
its first) then weighs more: at 128 tokens the stopped levels read 1-3 % higher.

Measured (--speed 2 --repeat, 2 shared cores): 35 % less benchmark time (baseline 458 -> 318 s,
EAGLE-3 503 -> 310 s), 9 of 16 levels stopped after their first wave, largest level throughput
difference 1.4 % (fixed against fixed: 0.5 %).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sweep.bench.runner import run  # noqa: E402
from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings, StopSettings  # noqa: E402
from tests.bench.bench_fake_server import start_fake  # noqa: E402
from tests.perf import record  # noqa: E402

LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
TUNED_ENV = {
    "NCCL_PROTO": "LL",
    "NCCL_ALGO": "Ring",
    "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MAX_NCHANNELS": "16",
    "NCCL_BUFFSIZE": "16777216",
    "NCCL_NTHREADS": "512",
}
COMMON = ("--max-running-requests", "256", "--enable-metrics", "--stream-interval", "2")
CONFIGS = {
    "baseline": COMMON,
    "eagle3 steps=3": COMMON
    + (
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "fake/d",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--fake-accept-rate",
        "0.75",
    ),
}


def settings(opts, stop: StopSettings | None) -> BenchSettings:
    return BenchSettings(
        single_stream=SingleStreamSettings(runs=5, warmup=2, max_tokens=opts.single_tokens),
        concurrency=ConcurrencySettings(levels=LEVELS, rounds=2, max_tokens=opts.max_tokens, stop=stop),
    )


def timed(url: str, s: BenchSettings) -> tuple[float, list[dict]]:
    t0 = time.monotonic()
    result = run(url, s)
    return time.monotonic() - t0, result.levels.to_pylist()


def pct(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or not b else f"{(a / b - 1) * 100:+.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--speed", type=float, default=2.0, help="the fake's --fake-speed (default 2)")
    ap.add_argument("--max-tokens", type=int, default=512, help="tokens per level request (reference: 512)")
    ap.add_argument("--single-tokens", type=int, default=2048, help="tokens per single-stream run (reference: 2048)")
    ap.add_argument("--precision", type=float, default=0.02)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--min-requests", type=int, default=None)
    ap.add_argument("--repeat", action="store_true", help="run the fixed rounds twice (the noise floor)")
    ap.add_argument("--only", choices=list(CONFIGS), action="append", help="configurations to run (default: all)")
    record.add_flag(ap)
    opts = ap.parse_args()
    rows = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the finally below kills the fake
    stop = StopSettings(precision=opts.precision, confidence=opts.confidence, min_requests=opts.min_requests)
    log_dir = Path(tempfile.mkdtemp(prefix="early-stop-"))
    print(
        f"early stop vs fixed rounds: fake at speed {opts.speed:g}, levels {LEVELS}, 2 rounds of "
        f"{opts.max_tokens} tokens, single stream 2 + 5 runs of {opts.single_tokens} tokens; stop rule "
        f"+-{opts.precision:.0%} at {opts.confidence:.0%}, min_requests {opts.min_requests or 'C (>= 2)'}"
        f" (server logs in {log_dir})",
        flush=True,
    )
    totals = {"fixed": 0.0, "stop": 0.0}
    worst = 0.0
    os.environ.update(TUNED_ENV)
    for name in opts.only or list(CONFIGS):  # the fake reads the NCCL profile from its environment
        server = start_fake(log_dir, *CONFIGS[name], speed=opts.speed)
        try:
            runs = [("fixed", None), ("stop", stop)] + ([("fixed again", None)] if opts.repeat else [])
            measured = {label: timed(server.url, settings(opts, rule)) for label, rule in runs}
        finally:
            server.kill()
        (t_fixed, fixed), (t_stop, stopped) = measured["fixed"], measured["stop"]
        totals["fixed"] += t_fixed
        totals["stop"] += t_stop
        print(
            f"\n{name}: benchmark {t_fixed:.1f} s fixed, {t_stop:.1f} s with the stop rule "
            f"({(1 - t_stop / t_fixed) * 100:.0f}% less)"
            + (f"; fixed again {measured['fixed again'][0]:.1f} s" if opts.repeat else "")
        )
        print(
            f"{'C':>5} {'sent':>9} {'stopped':>8} {'precision':>9} {'fixed tok/s':>12} {'stop tok/s':>11} {'diff':>7}"
            + (f" {'fixed again':>12} {'diff':>7}" if opts.repeat else "")
        )
        again = measured["fixed again"][1] if opts.repeat else [None] * len(fixed)
        diffs = [abs(s["output_throughput"] / f["output_throughput"] - 1) for f, s in zip(fixed, stopped)]
        floor = [abs(a["output_throughput"] / f["output_throughput"] - 1) for f, a in zip(fixed, again) if a]
        rows.append(
            [
                name,
                f"{t_fixed:.1f} s",
                f"{t_stop:.1f} s",
                f"{1 - t_stop / t_fixed:.0%}",
                f"{sum(bool(s['stopped_early']) for s in stopped)} of {len(stopped)}",
                f"{max(diffs):.1%}",
                f"{max(floor):.1%}" if floor else "-",
            ]
        )
        for f, s, a in zip(fixed, stopped, again):
            hw = s["throughput_precision"]
            d = s["output_throughput"] / f["output_throughput"] - 1
            worst = max(worst, abs(d))
            line = (
                f"{f['concurrency']:>5} {s['requests']:>4}/{s['planned_requests']:<4} "
                f"{'yes' if s['stopped_early'] else 'no':>8} {'-' if hw is None else f'{hw:.1%}':>9} "
                f"{f['output_throughput']:>12,.0f} {s['output_throughput']:>11,.0f} {d * 100:>+6.1f}%"
            )
            if a is not None:
                line += f" {a['output_throughput']:>12,.0f} {pct(a['output_throughput'], f['output_throughput']):>7}"
            print(line, flush=True)
    saving = 1 - totals["stop"] / totals["fixed"]
    print(
        f"\nall configurations: {totals['fixed']:.1f} s fixed, {totals['stop']:.1f} s with the stop rule: "
        f"{saving:.0%} less benchmark time; largest level throughput difference {worst:.1%} "
        f"(target: at least 40% less, at most 2%)"
    )
    columns = ["configuration", "fixed rounds", "stop rule", "less time", "levels stopped early"]
    columns += ["largest level throughput difference", "two fixed runs differ by"]
    rows.append(["all", f"{totals['fixed']:.1f} s", f"{totals['stop']:.1f} s", f"{saving:.0%}", "", f"{worst:.1%}", ""])
    title = f"the stop rule (+-{opts.precision:.0%} at {opts.confidence:.0%}) against the fixed rounds, speed {opts.speed:g}"
    sources = ["sweep/bench/stop.py", "sweep/bench/runner.py", "sweep/bench/load.py"]
    record.write("early_stop", opts, [record.table(title, columns, rows)], sources)


if __name__ == "__main__":
    main()
