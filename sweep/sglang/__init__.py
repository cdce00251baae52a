"""What the sweep knows of SGLang without importing it: its flags (``args``, ``flagnames``, ``flagtypes``),
its ServerArgs rules as data (``serverargs``, ``rules``: what a launch would do, or why it would fail),
adaptive speculation's config (``adaptive``), its log lines (``logs``) and drafter checkpoints
(``drafter``). Real SGLang is the arbiter: tests/real/test_rules_differential.py holds these to it."""

from sweep.sglang.adaptive import Config
from sweep.sglang.args import RESERVED_FLAGS, SPECULATIVE_PREFIX, flag_args, flag_value, flags_in_argv, with_node_flags
from sweep.sglang.drafter import DrafterReport
from sweep.sglang.logs import (
    AdaptiveLog,
    EngineTimings,
    Progress,
    engine_timings,
    event_of,
    find_failure,
    rank_of,
    split_progress,
)

# adaptive, drafter, drafter_cli, flagnames, flagtypes, rules, serverargs: modules other rooms use as namespaces, imported on first use

__all__ = [
    "AdaptiveLog",
    "Config",
    "DrafterReport",
    "EngineTimings",
    "Progress",
    "RESERVED_FLAGS",
    "SPECULATIVE_PREFIX",
    "adaptive",
    "drafter",
    "drafter_cli",
    "engine_timings",
    "event_of",
    "find_failure",
    "flag_args",
    "flag_value",
    "flagnames",
    "flags_in_argv",
    "flagtypes",
    "rank_of",
    "rules",
    "serverargs",
    "split_progress",
    "with_node_flags",
]
