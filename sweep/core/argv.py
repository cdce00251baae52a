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


def _size(argv: Iterable[Any] | None, names: tuple[str, ...]) -> int:
    value = argv_value(argv, *names)
    try:
        return max(1, int(value)) if value is not None else 1
    except ValueError:
        return 1


def node_gpus(argv: Iterable[Any] | None) -> tuple[int, int]:
    """(the first GPU, how many GPUs) one host of a server uses, from its argv: tp x pp, times dp for
    data-parallel replicas (not with attention DP, which runs inside the TP group), over ``--nnodes``
    hosts; SGLang places its ranks on consecutive GPUs from ``--base-gpu-id`` (default 0)."""
    argv = [str(a) for a in argv or ()]
    dp_attention = "--enable-dp-attention" in argv or argv_value(argv, "--attn-dp-size", "--attention-data-parallel-size")
    total = _size(argv, PARALLEL["tp"]) * _size(argv, PARALLEL["pp"]) * (1 if dp_attention else _size(argv, PARALLEL["dp"]))
    nodes = _size(argv, ("--nnodes",))
    base = argv_value(argv, "--base-gpu-id")
    first = int(base) if base is not None and base.isdigit() else 0
    return first, max(1, total // nodes)
