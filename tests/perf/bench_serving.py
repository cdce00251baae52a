"""``python -m sweep bench --rates R`` against SGLang's own ``bench_serving`` (0.5.10), side by side.

Both tools run against the same server, one after the other (the server's cache flushed before
each), with the same ShareGPT-format file, the same Poisson rate and seed, the same request count
(every conversation of the file once: bench_serving samples ``--num-prompts`` after a shuffle, so
with N usable conversations and N prompts both send the same set, each in its own order), the same
fixed output length with EOS ignored, on ``/generate``. Printed: completed requests, output
throughput (tok/s) and mean TTFT (ms) of each, and the ratio.

What "the same Poisson rate" compares here: bench_serving draws its gaps with NumPy's legacy
generator after ``np.random.seed(--seed)`` (one ``np.random.exponential(1 / rate)`` per request;
its ShareGPT sampling uses Python's ``random``), and ``sweep.bench.arrivals`` draws Poisson gaps
from ``RandomState(seed)`` the same way, so with the same seed both send at the same offsets from
their first request, and the comparison is not drowned by two different draws (a level of N
Poisson arrivals has a span with a relative spread of 1/sqrt(N): 7 % at 200). The printed
"span of arrivals" line says whether that held: bench_serving's duration against ours.

TTFT differs by definition where a token's text can be empty: bench_serving times the first chunk
whose ``text`` is non-empty, sweep the first chunk that carries a token (``completion_tokens`` > 0).
The fake's every token has text (the two agree); a real tokenizer's incremental detokenizer holds
back a token that ends mid-word or mid-UTF-8 (the tiny model's random output: in 7 of 40 requests
the first text came a decode step after the first token, +14 ms on average), so bench_serving's
TTFT reads higher there. sweep records both (``requests.ttft_s`` and ``requests.first_text_s``): the
line "mean TTFT ms, first text" compares like with like.

Servers: the fake (``python -m sweep.fake``, default), and with ``--real`` the CPU SGLang of the
real tier with its tiny model (tests/real/conftest.py finds it; minutes to start). bench_serving
needs a tokenizer (it counts prompt lengths, and drops prompts under 2 tokens): the tiny model's.

    python tests/perf/bench_serving.py [--rate 4] [--requests 200] [--out-len 32] [--seed 1] [--real [--no-fake]]
                                       [--sweep-first] [--warm]

Needs ``~/.cache/sweep-sglang-releases/v0.5.10`` with ``datasets`` installed in it (bench_serving
imports it): ``~/.cache/sweep-sglang-releases/v0.5.10/bin/python -m pip install datasets``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import polars as pl

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf import record  # noqa: E402

RELEASE = Path(os.environ.get("SWEEP_SGLANG_RELEASE", Path.home() / ".cache" / "sweep-sglang-releases" / "v0.5.10"))
TINY = Path(os.environ.get("SWEEP_TINY_MODELS", Path.home() / ".cache" / "sweep" / "tiny-models")) / "target"
WORDS = (
    "the quick brown fox jumps over a lazy dog while seven bright stars shine above quiet hills and "
    "rivers run toward distant seas carrying stories of old towns"
).split()


def sharegpt_file(path: Path, n: int) -> Path:
    """``n`` ShareGPT conversations (a human turn of 8 to 40 words, a gpt answer), deterministic."""
    rows = []
    for i in range(n):
        k = 8 + (i * 7) % 33
        text = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(k))
        rows.append(
            {
                "id": f"c{i}",
                "conversations": [
                    {"from": "human", "value": f"Question {i}: {text}?"},
                    {"from": "gpt", "value": "An answer. " * 4},
                ],
            }
        )
    path.write_text(json.dumps(rows))
    return path


def flush(url: str) -> None:
    try:
        httpx.post(url + "/flush_cache", timeout=30, trust_env=False)
    except httpx.HTTPError:
        pass


def run_bench_serving(url: str, data: Path, a, out: Path) -> dict:
    flush(url)
    cmd = [
        str(RELEASE / "bin" / "python"),
        "-m",
        "sglang.bench_serving",
        "--backend",
        "sglang",
        "--base-url",
        url,
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(data),
        "--num-prompts",
        str(a.requests),
        "--sharegpt-output-len",
        str(a.out_len),
        "--request-rate",
        str(a.rate),
        "--seed",
        str(a.seed),
        "--tokenizer",
        str(TINY),
        "--model",
        str(TINY),
        "--output-file",
        str(out),
        "--disable-tqdm",
        "--warmup-requests",
        "1",
    ]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=1800,
        cwd="/",
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"bench_serving failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    rec = json.loads(out.read_text().strip().splitlines()[-1])
    return {
        "completed": rec["completed"],
        "output_throughput": rec["output_throughput"],
        "mean_ttft_ms": rec["mean_ttft_ms"],
        "median_ttft_ms": rec["median_ttft_ms"],
        "duration_s": rec["duration"],
        "mean_text_ttft_ms": rec["mean_ttft_ms"],  # its TTFT is the first chunk with text already
        "output_tokens": rec.get("total_output_tokens"),
    }


def run_sweep_bench(url: str, data: Path, a, out: Path) -> dict:
    flush(url)
    cmd = [
        sys.executable,
        "-m",
        "sweep",
        "bench",
        "--url",
        url,
        "--workload",
        f"sharegpt:{data}",
        "--runs",
        "0",
        "--levels",
        "none",
        "--rates",
        str(a.rate),
        "--rate-requests",
        str(a.requests),
        "--max-tokens",
        str(a.out_len),
        "--seed",
        str(a.seed),
        "--out",
        str(out),
        "--quiet",
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=1800, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"sweep bench failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    level = pl.read_parquet(out / "levels.parquet").row(0, named=True)
    req = pl.read_parquet(out / "requests.parquet").filter(pl.col("ok"))
    return {
        "completed": level["ok"],
        "output_throughput": level["output_throughput"],
        "mean_ttft_ms": req["ttft_s"].mean() * 1000,
        "median_ttft_ms": req["ttft_s"].median() * 1000,
        # bench_serving's definition: the first chunk with text
        "mean_text_ttft_ms": req["first_text_s"].mean() * 1000,
        "duration_s": level["wall_s"],
        "output_tokens": int(req["completion_tokens"].sum()),
        "kept_up": level["kept_up"],
    }


def compare(name: str, url: str, data: Path, a, work: Path) -> list[list]:
    """Both tools on one server; the rows printed (server, figure, theirs, ours, ours over theirs)."""
    if a.warm:  # a fresh server's first requests of each prompt length pay one-off costs (CPU kernels)
        run_sweep_bench(url, data, argparse.Namespace(**{**vars(a), "rate": max(a.rate, 8.0)}), work / f"{name}-warm")
    if a.sweep_first:
        ours = run_sweep_bench(url, data, a, work / f"{name}-sweep")
        theirs = run_bench_serving(url, data, a, work / f"{name}-bench_serving.jsonl")
    else:
        theirs = run_bench_serving(url, data, a, work / f"{name}-bench_serving.jsonl")
        ours = run_sweep_bench(url, data, a, work / f"{name}-sweep")
    print(
        f"\n{name}: {'sweep bench ran first' if a.sweep_first else 'bench_serving ran first'}"
        f"{', after a warm-up pass over the file' if a.warm else ''}"
    )
    print(f"\n{name}: {a.requests} requests, Poisson {a.rate:g} req/s, seed {a.seed}, {a.out_len} output tokens")
    print(f"{'':28}{'bench_serving':>15}{'sweep bench':>15}{'sweep/theirs':>14}")
    rows = []
    for key, label, fmt in (
        ("completed", "completed requests", "{:.0f}"),
        ("output_throughput", "output throughput tok/s", "{:.2f}"),
        ("mean_ttft_ms", "mean TTFT ms", "{:.2f}"),
        ("mean_text_ttft_ms", "mean TTFT ms, first text", "{:.2f}"),
        ("median_ttft_ms", "median TTFT ms", "{:.2f}"),
        ("duration_s", "duration s (span of arrivals", "{:.3f}"),
        ("output_tokens", "output tokens", "{:.0f}"),
    ):
        t, o = theirs[key], ours[key]
        ratio = f"{o / t:.3f}" if t else "-"
        print(
            f"{label + (' + drain)' if key == 'duration_s' else ''):28}{fmt.format(t):>15}{fmt.format(o):>15}{ratio:>14}"
        )
        rows.append([name, label + (" + drain)" if key == "duration_s" else ""), fmt.format(t), fmt.format(o), ratio])
    print(f"sweep bench judged the level kept up: {ours['kept_up']}")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=4.0)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--out-len", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--speed", type=float, default=1.0, help="the fake's --fake-speed")
    p.add_argument("--real", action="store_true", help="also against the real CPU SGLang with the tiny model")
    p.add_argument("--no-fake", action="store_true")
    p.add_argument("--sweep-first", action="store_true", help="run sweep bench before bench_serving")
    p.add_argument("--warm", action="store_true", help="first one unmeasured pass over the file (sweep bench)")
    record.add_flag(p)
    a = p.parse_args()
    rows: list[list] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = sharegpt_file(work / "sharegpt.json", a.requests)
        if not a.no_fake:
            from tests.bench.bench_fake_server import start_fake

            server = start_fake(work, speed=a.speed)
            try:
                rows += compare("fake", server.url, data, a, work)
            finally:
                server.kill()
        if a.real:
            from tests.real.conftest import find_real_sglang
            from tests.real.servers import live_server

            real, why = find_real_sglang()
            if real is None:
                print(f"\nreal: skipped ({why})")
            else:
                with live_server(real, work / "real.log") as live:
                    rows += compare("real CPU SGLang (tiny model)", live.url, data, a, work)
    title = (
        f"{a.requests} requests, Poisson {a.rate:g} req/s, seed {a.seed}, {a.out_len} output tokens, the same server"
    )
    columns = ["server", "figure", "bench_serving", "sweep bench", "sweep/theirs"]
    sources = ["sweep/bench/load.py", "sweep/bench/arrivals.py", "sweep/bench/client.py"]
    record.write(
        "bench_serving", a, [record.table(title, columns, rows)], sources + ["sweep/bench/workloads/sharegpt.py"]
    )


if __name__ == "__main__":
    main()
