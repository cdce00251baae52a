"""When an open-loop level's requests arrive: seeded arrival times, a pure function of the settings.

Gaps between arrivals are drawn with mean ``1 / rate``:

- ``poisson``: exponential gaps (a Poisson process), as SGLang's ``bench_serving --request-rate``;
- ``gamma``: gamma gaps of shape ``burstiness`` (scale ``1 / (rate * burstiness)``), as vLLM's
  ``--burstiness``: below 1 burstier than Poisson, above 1 more regular; shape 1 is Poisson.

The first request arrives at 0 and request k after the first k gaps (``bench_serving`` sends its
first request at once, then sleeps a gap after each). The gaps come from NumPy's legacy
``RandomState(seed)``, the generator ``bench_serving`` seeds with ``np.random.seed(--seed)`` and
draws its gaps from, one per request, so a Poisson level without ramp-up has the same arrival times
as ``bench_serving --request-rate R --seed S`` (its ShareGPT sampling draws from Python's
``random``, not NumPy's). Every level of a benchmark draws from the same seed: the levels share
one normalised sequence, so the curve over rates is not bent by a different draw at each rate.

Ramp-up: with ``ramp_up_s`` the rate climbs linearly from 0 to ``rate`` over the first
``ramp_up_s`` seconds (a non-homogeneous process, by time rescaling: the same unit-mean gaps are
laid out on the expected-arrivals clock Lambda(t) and mapped back through its inverse).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

CHUNK = 1024  # gaps drawn at a time when only a duration bounds the level


def _unit_gaps(rs: np.random.RandomState, n: int, arrival: str, burstiness: float) -> np.ndarray:
    if arrival == "gamma":
        return rs.gamma(shape=burstiness, scale=1.0 / burstiness, size=n)
    return rs.standard_exponential(size=n)


def _clock(u: np.ndarray, rate: float, ramp_up_s: float) -> np.ndarray:
    """Seconds at which the expected number of arrivals reaches ``u``: Lambda^-1(u)."""
    if ramp_up_s <= 0:
        return u / rate
    ramp = rate * ramp_up_s / 2  # arrivals expected during the ramp
    return np.where(u <= ramp, np.sqrt(2 * ramp_up_s * np.maximum(u, 0) / rate), ramp_up_s + (u - ramp) / rate)


def times(
    rate: float,
    *,
    seed: int,
    requests: Optional[int] = None,
    duration_s: Optional[float] = None,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    ramp_up_s: float = 0.0,
) -> list[float]:
    """Arrival times in seconds from the level's start: ``requests`` of them, and only those before
    ``duration_s`` when that is given (at least one: the first, at 0)."""
    if not rate > 0 or not math.isfinite(rate):
        raise ValueError(f"rate {rate!r} is not a positive number of requests/s")
    if requests is None and duration_s is None:
        raise ValueError("an open-loop level needs a request count or a duration")
    rs = np.random.RandomState(seed)
    if requests is not None:
        u = np.concatenate([[0.0], np.cumsum(_unit_gaps(rs, requests - 1, arrival, burstiness))])
    else:  # only a duration: draw until the clock passes it
        u = np.zeros(1)
        while _clock(u[-1:], rate, ramp_up_s)[0] < duration_s:
            u = np.concatenate([u, u[-1] + np.cumsum(_unit_gaps(rs, CHUNK, arrival, burstiness))])
    out = _clock(u, rate, ramp_up_s)
    if duration_s is not None:
        out = out[(out < duration_s) | (np.arange(len(out)) == 0)]
    return [float(t) for t in out]
