"""The server's Prometheus ``/metrics`` over one concurrency level: typed level columns and raw rows.

Three kinds of scrape go in: one before the level, a few during it (``server_metrics.Sampler``,
every couple of seconds) and one after it. Two things come out:

- ``columns``: the ``metrics_*`` columns and ``accept_length_metrics`` of the ``levels`` table
  (defined in ``sweep.results.schema``), what the analysis reads;
- ``rows``: the ``metrics`` table, one row per sample (name + labels) with its value before,
  during (mean, max) and after the level, and the delta of monotonic samples.

How samples of several ranks are combined (real SGLang's label layout): scheduler metrics carry
``tp_rank``/``pp_rank``/``moe_ep_rank`` (and ``dp_rank`` with DP attention); only each attention-TP
group's first rank reports, unless ``--enable-metrics-for-all-schedulers`` makes every rank repeat
the same value. So a metric is first reduced to **one series per DP rank** (per set of the other
labels: the lowest pp/tp rank's value, the other ranks repeat it), then **counters and counts are
summed** over the DP ranks (and over labels such as ``is_streaming``), and **ratios averaged**.
Queue gauges also carry a per-priority breakdown (``priority="3"``) beside the total
(``priority=""``): only the total is read. NaN (SGLang's "no sample yet") is ignored.

Counters are differenced (after - before; a series that appears during the level counts from 0;
a negative delta, i.e. a restarted server, is null). Gauges are averaged over the scrapes taken
during the level, not read after it: when a level drains, SGLang resets running requests and
generation throughput to 0, so the value after a level says nothing about it. Every figure whose
metric the server does not export is null, never an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Optional

from sweep.bench.server_metrics import Sample

_RANK_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "pid"})

Scrape = dict[tuple[str, str], Sample]  # (sample name, labels text) -> sample


def index(samples: Optional[Iterable[Sample]]) -> Optional[Scrape]:
    return None if samples is None else {(s.name, s.labels_text): s for s in samples}


def monotonic(s: Sample) -> bool:
    """Counters, histogram buckets/sums/counts, summary sums/counts: amounts that only grow."""
    if s.name.endswith("_created"):
        return False
    return s.kind in ("counter", "histogram") or (s.kind == "summary" and s.name.endswith(("_sum", "_count")))


def _rank(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (1 << 30, value)


def _per_dp_rank(
    scrape: Optional[Scrape], name: str, where: Callable[[dict], bool] = lambda labels: True
) -> list[tuple[dict, float]]:
    """``(labels, value)`` of ``name``: one series per DP rank and set of non-rank labels (the
    lowest pp/tp rank's), the per-priority breakdown and NaN values left out."""
    best: dict[tuple, tuple[tuple, dict, float]] = {}
    for s in (scrape or {}).values():
        if s.name != name or math.isnan(s.value):
            continue
        labels = dict(s.labels)
        if labels.get("priority", "") != "" or not where(labels):
            continue
        key = tuple((k, v) for k, v in s.labels if k not in _RANK_LABELS)
        rank = (_rank(labels.get("pp_rank", "0")), _rank(labels.get("tp_rank", "0")))
        if key not in best or rank < best[key][0]:
            best[key] = (rank, labels, s.value)
    return [(labels, value) for _, labels, value in best.values()]


def total(scrape: Optional[Scrape], name: str, where: Callable[[dict], bool] = lambda labels: True) -> Optional[float]:
    """Sum over DP ranks (and other labels) of ``name``; None when the scrape has no such series."""
    series = _per_dp_rank(scrape, name, where)
    return sum(v for _, v in series) if series else None


def mean(scrape: Optional[Scrape], name: str, positive: bool = False) -> Optional[float]:
    """Mean over DP ranks of ``name`` (only values > 0 with ``positive``); None without one."""
    values = [v for _, v in _per_dp_rank(scrape, name) if v > 0 or not positive]
    return sum(values) / len(values) if values else None


def delta(
    before: Optional[Scrape], after: Optional[Scrape], name: str, where: Callable[[dict], bool] = lambda labels: True
) -> Optional[float]:
    """How much counter ``name`` grew over the level; None if absent after it or it went backwards."""
    end = total(after, name, where)
    if end is None or before is None:
        return None
    d = end - (total(before, name, where) or 0.0)
    return d if d >= 0 else None


def _ratio(num: Optional[float], den: Optional[float]) -> Optional[float]:
    return num / den if num is not None and den else None


def _int(value: Optional[float]) -> Optional[int]:
    return None if value is None else int(round(value))


def _spec(scrape: Scrape) -> tuple[Optional[float], Optional[float]]:
    """(accept length, accept rate) of one scrape: no accept length > 0 means nothing was
    verified in SGLang's last log window (or no speculation), and then no rate either."""
    length = mean(scrape, "sglang:spec_accept_length", positive=True)
    return length, (mean(scrape, "sglang:spec_accept_rate") if length is not None else None)


def _over(values: list[Optional[float]], fn: Callable[[list[float]], float]) -> Optional[float]:
    known = [v for v in values if v is not None]
    return fn(known) if known else None


def _avg(values: list[float]) -> float:
    return sum(values) / len(values)


def cache_hit_rate(before: Optional[Scrape], after: Optional[Scrape]) -> Optional[float]:
    """Prefix-cache hits / prefill tokens over the level, from counters (SGLang's own formula for
    ``prefill_effective_tokens_total``: the ``*_hit`` modes over all modes); else cached over prompt
    tokens. The ``sglang:cache_hit_rate`` gauge is only the last prefill batch's (0 after decodes)."""
    name = "sglang:prefill_effective_tokens_total"
    hits = delta(before, after, name, lambda labels: labels.get("mode", "").endswith("_hit"))
    rate = _ratio(hits, delta(before, after, name))
    if rate is not None:
        return rate
    return _ratio(
        delta(before, after, "sglang:cached_tokens_total"), delta(before, after, "sglang:prompt_tokens_total")
    )


def columns(before: Optional[Scrape], during: list[Scrape], after: Optional[Scrape]) -> dict:
    """The level row's ``metrics_*`` and ``accept_length_metrics`` values (all None without metrics)."""
    if before is None or after is None:
        return {"metrics_scrapes": None}
    generated = delta(before, after, "sglang:generation_tokens_total")
    spec = [_spec(s) for s in during]
    running = [total(s, "sglang:num_running_reqs") for s in during]
    return {
        "metrics_scrapes": len(during),
        "metrics_prompt_tokens": _int(delta(before, after, "sglang:prompt_tokens_total")),
        "metrics_generation_tokens": _int(generated),
        "metrics_requests": _int(delta(before, after, "sglang:num_requests_total")),
        "accept_length_metrics": _ratio(generated, delta(before, after, "sglang:spec_verify_calls_total")),
        "metrics_cache_hit_rate": cache_hit_rate(before, after),
        "metrics_spec_accept_length": _over([a for a, _ in spec], _avg),
        "metrics_spec_accept_rate": _over([r for _, r in spec], _avg),
        "metrics_running_reqs": _over(running, _avg),
        "metrics_running_reqs_max": _over(running, max),
        "metrics_queue_reqs": _over([total(s, "sglang:num_queue_reqs") for s in during], _avg),
        "metrics_gen_throughput": _over([total(s, "sglang:gen_throughput") for s in during], _avg),
        "metrics_token_usage": _over([mean(s, "sglang:token_usage") for s in during], _avg),
    }


def rows(
    point_id: str, concurrency: int, before: Optional[Scrape], during: list[Scrape], after: Optional[Scrape]
) -> list[dict]:
    """One ``metrics`` table row per sample seen in any scrape of the level (none without metrics)."""
    if before is None or after is None:
        return []
    keys = dict.fromkeys([*before, *(k for s in during for k in s), *after])
    out = []
    for key in keys:
        b, a = before.get(key), after.get(key)
        s = a or b or next(d[key] for d in during if key in d)
        seen = [d[key].value for d in during if key in d and not math.isnan(d[key].value)]
        grows = monotonic(s)
        out.append(
            {
                "point_id": point_id,
                "concurrency": concurrency,
                "name": s.name,
                "labels": s.labels_text,
                "family": s.family,
                "kind": s.kind,
                "before": b.value if b else None,
                "after": a.value if a else None,
                "delta": (a.value - (b.value if b else 0.0)) if grows and a else None,
                "during_mean": _avg(seen) if seen and not grows else None,
                "during_max": max(seen) if seen and not grows else None,
            }
        )
    return out
