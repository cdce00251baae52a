"""How long ``--plan`` takes with a big ShareGPT file as the workload, beside a small one.

Writes two ShareGPT files (a JSON array, indented as the public dump is): a small one (~0.2 MB) and
a big one (``--mb``, 20 MB by default), then times ``python -m sweep EXP --plan`` on the reference
experiment with each as ``benchmark.workload`` and a client-side axis of two values naming the same
file (the plan checks the experiment's workload and each axis value's). The plan parses each file
once (a cache by path, size and modification time) and counts line numbers incrementally; before,
every record counted the lines from the file's start: 34-50 s for 20 MB on 2 cores.

    python tests/perf/plan_workload.py [--mb 20] [--repeat 3] [--keep DIR] [--record [NOTE]]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.perf import record  # noqa: E402

WORDS = "the quick brown fox jumps over lazy dog speculative decoding server throughput latency token".split()


def sharegpt(path: Path, mb: float, seed: int = 0) -> int:
    """A ShareGPT-format JSON array of about ``mb`` megabytes; returns its conversations."""
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    records, size = [], 0
    while size < mb * 1e6:
        conv = []
        for _ in range(rng.randint(1, 4)):
            conv += [
                {"from": "human", "value": text(rng.randint(5, 120))},
                {"from": "gpt", "value": text(rng.randint(20, 300))},
            ]
        records.append({"id": f"c{len(records)}", "conversations": conv})
        size += len(json.dumps(records[-1])) + 10
    path.write_text(json.dumps(records, indent=2))
    return len(records)


def experiment(tmp: Path, data: Path) -> Path:
    """The reference experiment with ``data`` as its workload and a two-value workload axis."""
    text = (ROOT / "experiments" / "k26_eagle.yaml").read_text()
    exp = tmp / f"exp-{data.stem}.yaml"
    axis = (
        f'    workload:\n      values:\n        chat: {{benchmark: {{workload: "sharegpt:{data}", api: chat}}}}\n'
        f'        multi: {{benchmark: {{workload: {{kind: sharegpt, path: "{data}", multiturn: true}}}}}}\n'
    )
    exp.write_text(text.replace("  zip:", axis + "  zip:", 1) + f"results_dir: {tmp / ('res-' + data.stem)}\n")
    return exp


def plan_seconds(exp: Path, data: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "sweep", str(exp), "--plan", f"benchmark.workload=sharegpt:{data}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        best = min(best, time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"--plan failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the files here and keep them")
    record.add_flag(ap)
    a = ap.parse_args()
    tmp = a.keep or Path(tempfile.mkdtemp(prefix="plan-workload-"))
    tmp.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for name, mb in (("small", 0.2), ("big", a.mb)):
            data = tmp / f"sharegpt-{name}.json"
            n = sharegpt(data, mb)
            secs = plan_seconds(experiment(tmp, data), data, a.repeat)
            print(
                f"{name:5s} {data.stat().st_size / 1e6:6.1f} MB {n:6d} conversations: --plan {secs:5.2f} s "
                f"(best of {a.repeat})"
            )
            rows.append([name, f"{data.stat().st_size / 1e6:.1f} MB", n, f"{secs:.2f} s"])
        columns = ["workload", "size", "conversations", f"--plan (best of {a.repeat})"]
        sources = ["sweep/bench/prompts.py", "sweep/experiment/plan.py", "sweep/bench/workloads/sharegpt.py"]
        record.write("plan_workload", a, [record.table("--plan on the reference experiment", columns, rows)], sources)
    finally:
        if a.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
