"""``/metrics``: the Prometheus families real SGLang exports, by name, type, help and label layout
(shared/sglang-cpu/transcripts/api_samples*.txt, ``metrics_after``: 70 families, 71 with
speculation, which adds ``spec_verify_calls_total``). The fake gives values to those its model has
(requests, tokens, latencies, running and queued requests, accept length, startup timings, HTTP
counts); every other family is exported at 0 (histograms: no samples), so a reader meets the same
names. Pure: the engine and the server pass the values in.

Label layout, as SGLang's: scheduler series carry ``engine_type``, ``model_name``, ``moe_ep_rank``,
``pp_rank``, ``tp_rank`` (rank 0's, the one that reports); tokenizer series ``engine_type`` and
``model_name`` (and ``is_streaming`` for the request counters and latencies); process and HTTP
series only their own labels. Labels are written sorted, as prometheus_client does.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Any, Iterable, Mapping, Optional, Sequence

# (name without "sglang:", type, label kind: sched | tok | none, extra label names, help)
FAMILIES: tuple[tuple[str, str, str, tuple[str, ...], str], ...] = (
    ("per_stage_req_latency_seconds", "histogram", "sched", ("stage",), "The latency of each stage of requests."),
    ("queue_time_seconds", "histogram", "sched", (), "Histogram of queueing time in seconds."),
    ("startup_time_seconds", "gauge", "tok", ("phase",), "Engine startup duration by phase in seconds."),
    ("startup_cuda_graph_time_seconds", "gauge", "tok", ("phase",), "CUDA graph capture duration by phase in seconds."),
    (
        "time_to_first_token_seconds",
        "histogram",
        "tok",
        ("is_streaming",),
        "Histogram of time to first token in seconds.",
    ),
    (
        "e2e_request_latency_seconds",
        "histogram",
        "tok",
        ("is_streaming",),
        "Histogram of End-to-end request latency in seconds",
    ),
    ("prompt_tokens_histogram", "histogram", "tok", (), "Histogram of prompt token length."),
    (
        "uncached_prompt_tokens_histogram",
        "histogram",
        "tok",
        (),
        "Histogram of uncached (compute) prompt token length.",
    ),
    ("generation_tokens_histogram", "histogram", "tok", (), "Histogram of generation token length."),
    ("inter_token_latency_seconds", "histogram", "tok", (), "Histogram of inter-token latency in seconds."),
    ("num_retracted_reqs", "gauge", "sched", ("pid",), "The number of retracted requests."),
    ("num_paused_reqs", "gauge", "sched", ("pid",), "The number of paused requests by async weight sync."),
    (
        "process_cpu_seconds_total",
        "counter",
        "none",
        ("component",),
        "Total CPU time consumed by this process (user + system)",
    ),
    (
        "http_requests_total",
        "counter",
        "none",
        ("endpoint", "method"),
        "Total number of HTTP requests by endpoint and method",
    ),
    (
        "http_responses_total",
        "counter",
        "none",
        ("endpoint", "method", "status_code"),
        "Total number of HTTP responses by endpoint and status code",
    ),
    ("prompt_tokens_total", "counter", "tok", ("is_streaming",), "Number of prefill tokens processed."),
    ("generation_tokens_total", "counter", "tok", ("is_streaming",), "Number of generation tokens processed."),
    ("spec_verify_calls_total", "counter", "tok", (), "Number of speculative decoding verification calls."),
    ("num_requests_total", "counter", "tok", ("is_streaming",), "Number of requests processed."),
    (
        "cached_tokens_total",
        "counter",
        "tok",
        ("cache_source",),
        "Number of cached prompt tokens by source (device/host/storage).",
    ),
    (
        "prefill_effective_tokens_total",
        "counter",
        "sched",
        ("mode",),
        "Effective prefill tokens with retracted-request re-counts excluded, updated on each log interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate = rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode in the numerator.",
    ),
    (
        "cuda_graph_passes_total",
        "counter",
        "sched",
        ("mode",),
        "Total number of forward passes categorized by CUDA graph.",
    ),
    (
        "realtime_tokens_total",
        "counter",
        "sched",
        ("mode",),
        "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
    ),
    ("max_total_num_tokens", "gauge", "sched", (), "Maximum total number of tokens in the KV cache pool."),
    ("weight_memory_usage_gb", "gauge", "sched", (), "Memory used by model weights in GB."),
    ("kv_cache_memory_usage_gb", "gauge", "sched", (), "Memory used by the KV cache pools in GB."),
    ("graph_memory_usage_gb", "gauge", "sched", ("phase",), "Memory used by captured device graphs in GB."),
    ("page_size", "gauge", "sched", (), "KV cache page size in tokens."),
    ("num_pages", "gauge", "sched", (), "Number of KV cache pages."),
    ("context_len", "gauge", "sched", (), "Maximum context length."),
    ("startup_available_gpu_memory_gb", "gauge", "sched", (), "Available GPU memory in GB at startup."),
    ("num_running_reqs", "gauge", "sched", (), "The number of running requests."),
    ("num_queue_reqs", "gauge", "sched", (), "The number of requests in the waiting queue."),
    ("num_grammar_queue_reqs", "gauge", "sched", (), "The number of requests in the grammar waiting queue."),
    ("gen_throughput", "gauge", "sched", (), "The generation throughput (token/s)."),
    ("cache_hit_rate", "gauge", "sched", (), "The prefix cache hit rate."),
    ("decode_sum_seq_lens", "gauge", "sched", (), "The sum of all sequence lengths in decode."),
    ("token_usage", "gauge", "sched", (), "The token usage."),
    ("full_token_usage", "gauge", "sched", (), "The token usage for full attention layers."),
    ("swa_token_usage", "gauge", "sched", (), "The token usage for SWA layers."),
    ("mamba_usage", "gauge", "sched", (), "The token usage for Mamba layers."),
    ("num_used_tokens", "gauge", "sched", (), "The number of used tokens."),
    ("kv_available_tokens", "gauge", "sched", (), "Number of free token slots in the KV cache pool."),
    (
        "kv_evictable_tokens",
        "gauge",
        "sched",
        (),
        "Number of evictable (radix-cached) token slots in the KV cache pool.",
    ),
    ("kv_used_tokens", "gauge", "sched", (), "Number of actively used token slots in the KV cache pool."),
    ("swa_available_tokens", "gauge", "sched", (), "Number of free token slots in the SWA pool (hybrid-SWA only)."),
    ("swa_evictable_tokens", "gauge", "sched", (), "Number of evictable (radix-cached) token slots in the SWA pool."),
    ("swa_used_tokens", "gauge", "sched", (), "Number of actively used token slots in the SWA pool."),
    (
        "mamba_available_tokens",
        "gauge",
        "sched",
        (),
        "Number of free state slots in the mamba SSM pool (hybrid-SSM only).",
    ),
    (
        "mamba_evictable_tokens",
        "gauge",
        "sched",
        (),
        "Number of evictable (radix-cached) state slots in the mamba SSM pool.",
    ),
    ("mamba_used_tokens", "gauge", "sched", (), "Number of actively used state slots in the mamba SSM pool."),
    (
        "spec_accept_length",
        "gauge",
        "sched",
        (),
        "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
    ),
    (
        "spec_accept_rate",
        "gauge",
        "sched",
        (),
        "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
    ),
    (
        "spec_cap_length",
        "gauge",
        "sched",
        (),
        "Mean DSpark confidence-scheduled verify window per verify step, incl the bonus slot (0 when no cap is scheduled).",
    ),
    (
        "spec_block_accept_length",
        "gauge",
        "sched",
        (),
        "Mean uncapped full-block accept length per verify step (accept + cap-trimmed drafts; exact only in DSpark cap-accept mode).",
    ),
    ("spec_num_steps", "gauge", "sched", (), "Currently active speculative_num_steps."),
    (
        "spec_num_draft_tokens",
        "gauge",
        "sched",
        (),
        "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
    ),
    (
        "num_prefill_bootstrap_queue_reqs",
        "gauge",
        "sched",
        (),
        "The number of requests in the prefill bootstrap queue.",
    ),
    ("num_prefill_inflight_queue_reqs", "gauge", "sched", (), "The number of requests in the prefill inflight queue."),
    ("num_decode_prealloc_queue_reqs", "gauge", "sched", (), "The number of requests in the decode prealloc queue."),
    ("num_decode_transfer_queue_reqs", "gauge", "sched", (), "The number of requests in the decode transfer queue."),
    (
        "pending_prealloc_token_usage",
        "gauge",
        "sched",
        (),
        "The token usage for pending preallocated tokens (not preallocated yet).",
    ),
    ("utilization", "gauge", "sched", (), "The utilization."),
    ("fwd_occupancy", "gauge", "sched", (), "Forward pass GPU occupancy percentage."),
    ("new_token_ratio", "gauge", "sched", (), "The new token ratio."),
    ("is_cuda_graph", "gauge", "sched", (), "Whether the batch is using CUDA graph."),
    ("num_unique_running_routing_keys", "gauge", "sched", (), "Number of unique routing keys in running batch."),
    (
        "routing_key_running_req_count",
        "gauge",
        "sched",
        ("gt",),
        "Distribution of routing keys by running request count (gt < count <= le).",
    ),
    (
        "routing_key_all_req_count",
        "gauge",
        "sched",
        ("gt",),
        "Distribution of routing keys by running+waiting request count (gt < count <= le).",
    ),
    ("routing_keys_active", "gauge", "none", (), "Number of unique routing keys with active requests"),
    ("http_requests_active", "gauge", "none", ("endpoint", "method"), "Number of currently active HTTP requests"),
)
_SPEC_ONLY = frozenset({"spec_verify_calls_total"})
_ROUTING_BUCKETS = (
    ("0", "1"),
    ("1", "2"),
    ("2", "3"),
    ("3", "5"),
    ("5", "7"),
    ("7", "10"),
    ("10", "20"),
    ("20", "50"),
    ("50", "100"),
    ("100", "200"),
    ("200", "+Inf"),
)

Series = list[tuple[dict[str, str], float]]  # (extra labels, value) per sample of a scalar family


class Histogram:
    """A Prometheus histogram (cumulative buckets, sum, count). ``observe`` is one bisection: the
    engine calls it per request and step."""

    def __init__(self, buckets: Sequence[float]):
        self.buckets = tuple(buckets)
        self._in = [0] * (len(self.buckets) + 1)  # per bucket (the last: above every bound)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.total += value
        self.n += 1
        self._in[bisect.bisect_left(self.buckets, value)] += 1

    @property
    def counts(self) -> list[int]:
        """Cumulative counts per bound (``le``), as Prometheus wants them."""
        return list(itertools.accumulate(self._in[:-1]))


def _labels(items: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(items.items())) + "}" if items else ""


def _num(value: float) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return repr(float(value))


def render(model_name: str, values: Mapping[str, Any], speculative: bool, pid: int = 0) -> str:
    """The exposition text. ``values``: family name -> a number (one series), a ``Series``, or, for a
    histogram, a list of (extra labels, :class:`Histogram`). Families not given are exported at 0."""
    sched = {"engine_type": "unified", "model_name": model_name, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}
    tok = {"engine_type": "unified", "model_name": model_name}
    out: list[str] = []
    for name, kind, labels_kind, extra, help_ in FAMILIES:
        if name in _SPEC_ONLY and not speculative:
            continue
        full = "sglang:" + name
        base = sched if labels_kind == "sched" else tok if labels_kind == "tok" else {}
        out.append(f"# HELP {full} {help_}")
        out.append(f"# TYPE {full} {kind}")
        given = values.get(name)
        if kind == "histogram":
            for labels, h in given or []:
                lab = {**base, **labels}
                out.append(f"{full}_sum{_labels(lab)} {_num(h.total)}")
                for b, c in zip(h.buckets, h.counts):
                    out.append(f"{full}_bucket{_labels({**lab, 'le': str(float(b))})} {_num(c)}")
                out.append(f"{full}_bucket{_labels({**lab, 'le': '+Inf'})} {_num(h.n)}")
                out.append(f"{full}_count{_labels(lab)} {_num(h.n)}")
            continue
        if given is None:
            given = _zero_series(name, extra, pid)
        elif not isinstance(given, list):
            given = [({"pid": str(pid)} if "pid" in extra else {}, given)]
        for labels, value in given:
            out.append(f"{full}{_labels({**base, **labels})} {_num(value)}")
    return "\n".join(out) + "\n"


def _zero_series(name: str, extra: Iterable[str], pid: int) -> Series:
    extra = tuple(extra)
    if extra == ("gt",) or set(extra) == {"gt"}:
        return [({"gt": gt, "le": le}, 0.0) for gt, le in _ROUTING_BUCKETS]
    if "pid" in extra:
        return [({"pid": str(pid)}, 0.0)]
    if not extra:
        return [({}, 0.0)]
    return []  # a labelled family with nothing observed yet: HELP and TYPE only


def series(label: str, values: Mapping[str, float]) -> Series:
    """A family with one extra label: ``{"decode": 1.0, ...}`` -> [({label: "decode"}, 1.0), ...]."""
    return [({label: k}, float(v)) for k, v in values.items()]


def family_names(speculative: bool) -> list[str]:
    """Every family the fake exports (``sglang:...``)."""
    return ["sglang:" + n for n, *_ in FAMILIES if speculative or n not in _SPEC_ONLY]


def _histogram_of(labels: Optional[dict[str, str]], h: Histogram) -> list[tuple[dict[str, str], Histogram]]:
    return [(labels or {}, h)]
