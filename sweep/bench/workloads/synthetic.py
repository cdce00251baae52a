"""Workloads made of lengths: ``synthetic`` (input and output lengths drawn from distributions) and
``shared-prefix`` (groups of requests that share a system prompt). Pure: the requests follow from
the settings and ``benchmark.seed``. Prompts are token ids (``tokens``)."""

from __future__ import annotations

import bisect
import itertools
import random
from typing import Optional

from sweep.bench.workloads import Request, Workload, tokens
from sweep.core import LengthSettings, WorkloadSettings


def draw(length: LengthSettings, rng: random.Random) -> int:
    """One length from ``length``'s distribution (at least 1 token)."""
    if length.dist == "fixed":
        return max(1, length.value)
    if length.dist == "uniform":
        return rng.randint(length.low, length.high)
    if length.dist == "normal":
        n = round(rng.gauss(length.mean, length.std))
        if length.high:
            n = min(n, length.high)
        return max(n, length.low, 1)
    weights = length.weights or [1.0] * len(length.values)
    cum = list(itertools.accumulate(weights))
    return length.values[bisect.bisect_right(cum, rng.random() * cum[-1])]


def _out(w: WorkloadSettings, rng: random.Random) -> Optional[int]:
    return draw(w.output_len, rng) if w.output_len is not None else None


def synthetic(w: WorkloadSettings, seed: int) -> Workload:
    """``w.requests`` requests, each its own random ids of a drawn input length, and a drawn output length."""
    rng = random.Random(f"{seed}/synthetic")
    out = []
    for i in range(w.requests):
        n_in = draw(w.input_len, rng)
        out.append(
            Request(
                input_ids=tokens.draw_ids(f"{seed}/synthetic/{i}", n_in),
                input_len=n_in,
                output_len=_out(w, rng),
                origin=f"synthetic request {i}",
            )
        )
    return Workload(f"synthetic:in={describe(w.input_len)}{_out_name(w)},requests={w.requests}", tuple(out))


def _out_name(w: WorkloadSettings) -> str:
    return f",out={describe(w.output_len)}" if w.output_len is not None else ""


def shared_prefix(w: WorkloadSettings, seed: int) -> Workload:
    """``w.groups`` groups of ``w.questions`` requests: the group's ``prefix_len`` ids (its system
    prompt, the same in every request of the group) followed by a question of a drawn length."""
    rng = random.Random(f"{seed}/shared-prefix")
    out = []
    for g in range(w.groups):
        prefix = tokens.draw_ids(f"{seed}/prefix/{g}", w.prefix_len)
        for q in range(w.questions):
            n_q = draw(w.input_len, rng)
            ids = prefix + tokens.draw_ids(f"{seed}/question/{g}/{q}", n_q)
            out.append(
                Request(
                    input_ids=ids,
                    input_len=len(ids),
                    output_len=_out(w, rng),
                    group=g,
                    origin=f"shared-prefix group {g}, question {q}",
                )
            )
    return Workload(
        f"shared-prefix:groups={w.groups},prefix={w.prefix_len},questions={w.questions},"
        f"in={describe(w.input_len)}{_out_name(w)}",
        tuple(out),
    )


def describe(length: Optional[LengthSettings]) -> str:
    """A length as the compact form writes it (``uniform(100,400)``)."""
    if length is None:
        return ""
    if length.dist == "fixed":
        return str(length.value)
    if length.dist == "uniform":
        return f"uniform({length.low},{length.high})"
    if length.dist == "normal":
        return f"normal({length.mean:g},{length.std:g})"
    return (
        "empirical("
        + ",".join(f"{v}:{w:g}" for v, w in zip(length.values, length.weights or [1.0] * len(length.values)))
        + ")"
    )
