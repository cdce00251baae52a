"""How close the benchmark's figures come to the fake's performance model (the figures that
tests/bench/test_bench_fake.py checks only one way: never faster than the model).

Runs the test's benchmark (single stream 2 runs of 128 tokens; closed loops at C=4 and C=16, 2 rounds
of 256 tokens) against a speculative fake server (EAGLE3, 3 steps, accept rate 0.7) at --speed, as
many times as --repeat says, and prints for each figure the model's value, the measured value and
their ratio (1.00 = the model exactly; above 1 would be a bug: the fake sleeps at least its model
time). On an idle machine every ratio is within 3 % of 1; a loaded one shows below 1.

    python tests/perf/bench_vs_model.py [--speed 8] [--repeat 3] [--record [NOTE]]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sweep.bench.runner import run  # noqa: E402
from tests.bench.bench_fake_server import start_fake  # noqa: E402
from tests.bench.test_bench_fake import SPEC_ARGS, level_expected, settings, single_stream_expected  # noqa: E402
from tests.perf import record  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--speed", type=float, default=8.0, help="the fake's --fake-speed (the test's: 8)")
    p.add_argument("--repeat", type=int, default=3)
    record.add_flag(p)
    a = p.parse_args()
    recorded = []
    print(f"{'run':>3}  {'figure':<28} {'model':>10} {'measured':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        server = start_fake(Path(tmp), *SPEC_ARGS, speed=a.speed)
        try:
            for i in range(1, a.repeat + 1):
                result = run(server.url, settings())
                ss = result.single_stream.to_pylist()
                tok_s, decode = single_stream_expected(ss)
                measured_decode = sum(r["completion_tokens"] - 1 for r in ss) / sum(
                    r["latency_s"] - r["ttft_s"] for r in ss
                )
                rows = [
                    ("single stream tok/s", tok_s, result.single_summary["tok_per_s"]),
                    ("single stream decode tok/s", decode, measured_decode),
                ]
                req = result.requests.to_pylist()
                levels = result.levels.to_pylist()
                rows += [
                    (
                        f"C={lv['concurrency']} output tok/s",
                        level_expected(req, lv["concurrency"]),
                        lv["output_throughput"],
                    )
                    for lv in levels
                ]
                rows += [
                    (
                        f"C={lv['concurrency']} achieved concurrency",
                        float(lv["concurrency"]),
                        lv["achieved_concurrency"],
                    )
                    for lv in levels
                ]
                for name, model_value, measured in rows:
                    print(f"{i:>3}  {name:<28} {model_value:>10.1f} {measured:>10.1f} {measured / model_value:>6.3f}")
                    recorded.append(
                        [i, name, round(model_value, 1), round(measured, 1), round(measured / model_value, 3)]
                    )
        finally:
            server.kill()
    columns = ["run", "figure", "model", "measured", "ratio"]
    title = f"the benchmark against the fake's model, --fake-speed {a.speed:g}"
    sources = ["sweep/bench/runner.py", "sweep/bench/load.py", "sweep/bench/client.py", "sweep/fake/model.py"]
    record.write("bench_vs_model", a, [record.table(title, columns, recorded)], sources)


if __name__ == "__main__":
    main()
