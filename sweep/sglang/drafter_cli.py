"""``python -m sweep check-drafter TARGET DRAFTER [--algorithm EAGLE3]``: the drafter pre-flight alone.

Check a freshly trained drafter against the target it will serve with, before any sweep: weight
names SGLang's model class would drop or miss, the target layers it reads, hidden size and
vocabularies, architecture against the algorithm (sweep/sglang/drafter.py). Reads config.json files and
safetensors headers only: milliseconds, even for a large checkpoint.

Exit 0: no error (warnings printed); 1: an error, or parameters no weight of the checkpoint reaches
(SGLang would load the drafter and serve them uninitialized: a drafter that cannot accept), or with
--strict a warning; 2: a folder missing.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from sweep.core import ConfigError
from sweep.sglang import drafter as dr


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Check a drafter checkpoint against its target the way SGLang would load it (config.json and "
        "safetensors headers only). Exit 1 on an error or on parameters no weight reaches."
    )
    p.add_argument("target", help="the target model's folder (its config.json)")
    p.add_argument("drafter", help="the drafter's folder (config.json and *.safetensors)")
    p.add_argument(
        "--algorithm",
        default="EAGLE3",
        type=str.upper,
        help="SGLang's --speculative-algorithm: EAGLE3 (default), EAGLE, NEXTN, STANDALONE",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--strict", action="store_true", help="exit 1 on warnings too")


def run_cli(args: argparse.Namespace) -> int:
    for what, path in (("target", args.target), ("drafter", args.drafter)):
        if not Path(path).expanduser().is_dir():
            raise ConfigError(f"{what} folder {path} does not exist", fix=f"pass the {what} model's folder")
    if args.algorithm not in dr.ALGORITHMS:
        raise ConfigError(
            f"--algorithm {args.algorithm}: no drafter checkpoint to check under it",
            fix=f"one of {', '.join(sorted(dr.ALGORITHMS))}",
        )
    report = dr.check(Path(args.target).expanduser(), Path(args.drafter).expanduser(), args.algorithm)
    if args.json:
        out = asdict(report)
        out["errors"], out["warnings"] = len(report.errors), len(report.warnings)
        # each finding as this command has always written it: its rule under "check"
        out["findings"] = [
            {"level": f.level, "check": f.rule, "message": f.message, "fix": f.fix} for f in report.findings
        ]
        print(json.dumps(out, indent=2))
    else:
        print(report.summary())
        for f in report.findings:
            print(f"{f.level}: [{f.rule}] {f.message}\n  fix: {f.fix}")
        if report.missing_weights:
            print(
                f"unusable: {len(report.missing_weights)} parameter(s) get no weight and would serve uninitialized "
                f"(SGLang loads the drafter without a word): {', '.join(report.missing_weights)} (exit 1)"
            )
    return 1 if report.errors or report.missing_weights or (args.strict and report.warnings) else 0
