"""Building an SGLang server's argv from a map of flags, and what we know of its flag names.

Flags are kept as an ordered ``{name: value}`` map with names in SGLang's spelling without the
leading dashes (``speculative-num-steps``). ``True`` is a bare switch, ``False``/``None`` leaves the
flag out, a list gives several values. The authoritative check of flag names happens on the host,
against the launcher's ``--help`` of the installed version; this list catches typos in a second.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Optional

from sweep.core import ServerFlags, given, value_text
from sweep.core import arg_values as _values
from sweep.core import flag_args as flag_args  # rendered in the core, named here as ever
from sweep.sglang.flagnames import FLAGS
from sweep.sglang.serverargs import KNOWN_BUILDS, rules_version

# Flags of `python -m sglang.launch_server` the sweep meets (0.5.10 and 0.5.23, see
# shared/sglang-surface.md), plus common ones users put in base flags.
KNOWN_FLAGS: frozenset[str] = frozenset(
    """
    model-path tokenizer-path tp-size tensor-parallel-size dp-size data-parallel-size pp-size
    pipeline-parallel-size host port trust-remote-code mem-fraction-static disable-custom-all-reduce
    enable-metrics max-running-requests max-total-tokens max-prefill-tokens chunked-prefill-size
    attention-backend sampling-backend page-size context-length dtype kv-cache-dtype quantization
    load-format served-model-name chat-template log-level log-requests decode-log-interval
    enable-dp-attention enable-torch-compile cuda-graph-max-bs disable-cuda-graph cuda-graph-bs
    cuda-graph-max-bs-decode cuda-graph-max-bs-prefill cuda-graph-backend-decode
    speculative-algorithm speculative-draft-model-path speculative-draft-model-revision
    speculative-num-steps speculative-eagle-topk speculative-num-draft-tokens
    speculative-accept-threshold-single speculative-accept-threshold-acc speculative-token-map
    speculative-attention-mode speculative-ngram-min-match-window-size
    speculative-ngram-max-match-window-size speculative-ngram-max-bfs-breadth
    incremental-streaming-output enable-mixed-chunk random-seed schedule-policy schedule-conservativeness
    tool-call-parser reasoning-parser watchdog-timeout nnodes node-rank dist-init-addr
    disable-radix-cache enable-cache-report api-key moe-runner-backend ep-size enable-ep-moe
    """.split()
)

# Flags the plan sets itself from the experiment's server section.
RESERVED_FLAGS = frozenset({"model-path", "tp-size", "tensor-parallel-size", "host", "port"})

SPECULATIVE_PREFIX = "speculative-"

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


def version_flags(version: Optional[str]) -> Optional[frozenset[str]]:
    """Every flag of that SGLang version's launch_server (sweep.sglang.flagnames), None if unknown."""

    if not version:
        return None
    for commit in KNOWN_BUILDS:
        if commit in version and commit in FLAGS:
            return FLAGS[commit]
    if version in FLAGS:
        return FLAGS[version]
    release, note = rules_version(version)
    return FLAGS.get(release) if note is None else None


def argparse_name(name: str, known: Iterable[str]) -> tuple[Optional[str], list[str]]:
    """What argparse makes of ``--name`` among ``known`` flags: the exact flag, else the one flag it is
    a unique prefix of (``allow_abbrev``), else None with the candidates (several: ambiguous)."""
    known = set(known)
    if name in known:
        return name, [name]
    matches = sorted(k for k in known if k.startswith(name))
    return (matches[0] if len(matches) == 1 else None), matches


def closest_flag(name: str, known: Iterable[str] = KNOWN_FLAGS) -> str | None:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
    return close[0] if close else None


def arg_values(value: Any) -> list[str]:
    """What follows a flag's name in the argv (``flag_args``): nothing for a switch, each of a list's
    values, or the value (``sweep.core.flags.arg_values``)."""
    return _values(value)


def flags_in_argv(argv: Iterable[str]) -> list[str]:
    """The flag names (without dashes) an argv passes, e.g. for checking against ``--help``."""
    return [a[2:].split("=", 1)[0] for a in argv if a.startswith("--")]


def flag_value(flags: ServerFlags, name: str, *aliases: str) -> Optional[str]:
    """The value of a flag (or of one of its aliases) in a ``{name: value}`` map, as its argv shows
    it (``flag_args``); None when it is absent, ``False`` or ``None``. Of two aliases the later in
    the map wins, as the later flag of an argv does in argparse."""
    names, found = (name, *aliases), None
    for key, value in flags.items():
        if key in names and given(value):
            found = value_text(value)
    return found


# Flags the orchestrator sets per node of a server that spans hosts (a retry on other hosts replaces them).
_NODE_FLAGS = ("nnodes", "node-rank", "dist-init-addr")


def with_node_flags(flags: ServerFlags, nnodes: int, rank: int, dist_init_addr: str) -> ServerFlags:
    """The flags of node ``rank`` of a server over ``nnodes`` hosts: any node flags an earlier
    attempt set (on hosts now gone) replaced by these."""
    kept = {k: v for k, v in flags.items() if k not in _NODE_FLAGS}
    return ServerFlags({**kept, "nnodes": nnodes, "node-rank": rank, "dist-init-addr": dist_init_addr})
