"""What each step of ``.ci/run`` took, read from the output of one run: the budget table of
docs/development.md.

    bash .ci/run 2>&1 | tee ci.log
    python tests/perf/ci_timings.py ci.log [--record [NOTE]]

``.ci/run`` prints a ``ci-lap: STEP SECONDS s (total T s)`` line after each step (the install, the
default suite, the scenario tier, the GPU tier, the wait for the real tier's installs, the real tier,
the cluster tier); each pytest run prints its closing line (``N passed, M skipped ... in S s``). This
script pairs them in order, adds the CPU path the real tier's install took (``path avx2``) and the
installs' own times (hidden behind the first tiers), prints the table and, with ``--record``, writes
it as ``docs/measured/ci_timings.json``. CI itself has a limit of 90 minutes for all of it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf import record  # noqa: E402

LAP = re.compile(r"^ci-lap: (\S+) (\d+) s \(total (\d+) s\)")
CLOSING = re.compile(r"^=+ (.*\b(?:passed|failed|skipped|deselected|error)\b.*) in ([\d.]+)s")
TESTED = ("default", "scenario", "gpu", "real", "netns")  # the steps that are a pytest run, in .ci/run's order
WHAT = {
    "install": "the project's install (`pip install -e '.[test]'`, chromium)",
    "default": "the default suite (`python -m pytest`)",
    "scenario": "the scenario tier (`-m scenario`)",
    "gpu": "the GPU tier (`-m gpu`; skipped without a GPU)",
    "installs-wait": "waiting for the real tier's installs after the tiers above",
    "real": "the real tier (`-m real_sglang`)",
    "netns": "the cluster tier (`-m netns`)",
}


def minutes(seconds: float) -> str:
    return f"{int(seconds) // 60} min {int(seconds) % 60:02d} s"


def read(log: str) -> tuple[list[list], dict[str, str]]:
    """The rows (step, what, tests, wall time) and facts (path, total, installs) of one .ci/run log."""
    laps, closings, facts = [], [], {}
    for line in log.splitlines():
        if m := LAP.match(line):
            laps.append((m.group(1), int(m.group(2)), int(m.group(3))))
        elif m := CLOSING.match(line.strip()):
            closings.append(m.group(1).strip())
        elif m := re.search(r"installed in \S+ in (\d+) s: path (\S+)", line):
            facts["path"] = m.group(2)
            facts.setdefault("installs", []).append(f"this CPU's SGLang {m.group(1)} s")  # type: ignore[union-attr]
    if not laps:
        raise SystemExit("no 'ci-lap:' line in that log: is it the output of this checkout's .ci/run?")
    closing = dict(zip([s for s, _, _ in laps if s in TESTED], closings))
    rows = [[step, WHAT.get(step, step), closing.get(step, ""), minutes(sec)] for step, sec, _ in laps]
    facts["total"] = minutes(laps[-1][2])
    return rows, facts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the output of one `bash .ci/run` (stdout and stderr)")
    record.add_flag(ap)
    args = ap.parse_args()
    rows, facts = read(Path(args.log).read_text(errors="replace"))
    print(f"{'step':14} {'tests':48} time")
    for step, _, tests, took in rows:
        print(f"{step:14} {tests[:48]:48} {took}")
    print(f"all of .ci/run: {facts['total']}; the real tier's CPU path: {facts.get('path', 'unknown')}")
    tables = [
        record.table("the steps of .ci/run, one after another", ["step", "what", "tests", "time"], rows),
        record.table(
            "in all",
            ["what", "value"],
            [
                ["all of .ci/run", facts["total"]],
                ["the real tier's CPU path (the install's choice)", facts.get("path", "unknown")],
            ],
        ),
    ]
    record.write("ci_timings", args, tables, [".ci/run", ".ci/real-installs", "tests"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
