"""Reading a server's argv: the one place a flag's value is taken from it. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def argv_value(argv: Iterable[Any] | None, flag: str, *aliases: str) -> str | None:
    """The value of ``--flag`` (or of one of its aliases) in an argv: ``--flag X`` or ``--flag=X``;
    the last one wins, as in argparse. None when it is not there."""
    argv = [str(a) for a in argv or ()]
    names = (flag, *aliases)
    found = None
    for i, a in enumerate(argv):
        key, eq, value = a.partition("=")
        if key in names:
            if eq:
                found = value
            elif i + 1 < len(argv):
                found = argv[i + 1]
    return found


PARALLEL = {  # SGLang's spellings of each size
    "tp": ("--tp-size", "--tensor-parallel-size"),
    "pp": ("--pp-size", "--pipeline-parallel-size"),
    "dp": ("--dp-size", "--data-parallel-size"),
}
SERVER_FLAGS = ("--model-path", "--model")  # an argv with one of these is a server's: its sizes default to 1


def _size(argv: Iterable[Any] | None, names: tuple[str, ...]) -> int | None:
    value = argv_value(argv, *names)
    try:
        return max(1, int(value)) if value is not None else None
    except ValueError:
        return None


def server_gpus(argv: Iterable[Any] | None) -> int | None:
    """The GPUs one server uses, from its argv: tp x pp, times dp for data-parallel replicas (not with
    attention DP, which runs inside the TP group); over every host it spans (``--nnodes`` splits the
    same GPUs over hosts). None when the argv names no size and is not a server's command line."""
    argv = [str(a) for a in argv or ()]
    tp, pp, dp = (_size(argv, PARALLEL[k]) for k in ("tp", "pp", "dp"))
    if tp is None and pp is None and dp is None and not any(argv_value(argv, f) for f in SERVER_FLAGS):
        return None
    dp_attention = "--enable-dp-attention" in argv or argv_value(
        argv, "--attn-dp-size", "--attention-data-parallel-size"
    )
    return (tp or 1) * (pp or 1) * (1 if dp_attention else (dp or 1))


def nodes(argv: Iterable[Any] | None) -> int:
    """How many hosts a server spans (``--nnodes``, default 1)."""
    return _size(argv, ("--nnodes",)) or 1


def node_gpus(argv: Iterable[Any] | None) -> tuple[int, int]:
    """(the first GPU, how many GPUs) one host of a server uses, from its argv: ``server_gpus`` over
    ``--nnodes`` hosts; SGLang places its ranks on consecutive GPUs from ``--base-gpu-id`` (default 0)."""
    argv = [str(a) for a in argv or ()]
    total = server_gpus(argv) or 1
    base = argv_value(argv, "--base-gpu-id")
    first = int(base) if base is not None and base.isdigit() else 0
    return first, max(1, total // nodes(argv))
