"""The only definition of the result tables' column names and types.

Every writer builds its rows against these schemas and ``check`` rejects a table that does not
match, so a reader (polars, DuckDB, pandas, the report) can rely on them. Times are seconds
(float64); ``*_at`` columns are Unix epoch seconds. Every row carries ``point_id`` (empty string
when the benchmark runs on its own, outside a sweep).

Tables:
- ``requests``: one row per request sent (warmup, single stream and every concurrency level).
- ``single_stream``: one row per single-stream run (warmups excluded).
- ``levels``: one row per concurrency level, then one per open-loop level (``benchmark.rates``,
  a trace replayed at its timing): those have ``concurrency`` 0 and ``arrival`` set.
- ``levels`` and ``requests`` of a re-measured level (``decide``): one more row per repeat, with its
  ``repeat`` index (and, on ``levels``, its ``decide_round``), in ``<table>/<point_id>~r<round>.parquet``
  beside the point's own file.
- ``decisions`` (``decisions.parquet``, not per point): how each decision ``decide`` took on ended.
- ``metrics``: one row per Prometheus sample and level: the server's raw ``/metrics`` around it.
- ``points``: one row per grid point, written by the sweep (plus one ``axis_<name>`` column per grid
  axis, holding the value's name; those vary per experiment and are checked by prefix). An axis
  whose every value is an integer is int64, one whose every value is a number float64 (so
  ``steps`` sorts 2, 5, 16), any other string (``axis_type``); results that stored every axis as
  text read as numbers too (``sweep.results.store``). The axis values live only there;
  ``param_roles`` says what each axis is.

Nested values are Arrow types, never JSON text: lists (``argv``, ``chunk_tokens``,
``spec_accept_histogram``), maps where the keys vary (``env``, ``param_roles``, ``flags``: ``map<string,
string>``) and structs where the shape is fixed (``reaped``, ``bench_scale``, ``startup_progress``).
Polars reads a map as ``pl.Map`` (``pl.col("env").map.get("NCCL_ALGO")``) -- polars before 2.0 as a
list of ``{key, value}`` structs --, DuckDB as ``MAP`` (``env['NCCL_ALGO']``). Results written
before these types (JSON strings, and a ``params`` column) still load: ``sweep.results.store``
converts them; results written before the ``flags`` column have it filled from their ``argv``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional

import pyarrow as pa

from sweep.core import ResultsError

REQUESTS = pa.schema(
    [
        ("point_id", pa.string()),
        ("phase", pa.string()),  # warmup | single | level | rate (an open-loop level: sweep/bench/openloop.py)
        ("concurrency", pa.int32()),  # 1 for warmup and single stream; 0 for an open-loop level
        ("seq", pa.int32()),  # index of the request within its phase/level
        ("prompt_set", pa.string()),
        ("prompt_index", pa.int32()),
        ("api", pa.string()),  # generate | completions | chat
        ("max_tokens", pa.int32()),  # as sent: the workload's output length for the request, else the phase's
        # --- the workload (sweep/bench/workloads/); null in results written before workloads (store.py)
        ("workload", pa.string()),  # its name: the prompt set, sharegpt:FILE, synthetic:..., trace:FILE
        ("input_len_given", pa.int32()),  # tokens the workload meant the prompt to be (null: text; real: prompt_tokens)
        ("output_len_given", pa.int32()),  # the workload's output length (null: the phase's max_tokens)
        (
            "lengths_exact",
            pa.bool_(),
        ),  # the given lengths on the served tokenizer: exact (ids, /v1/tokenize) or estimated
        ("conversation", pa.int32()),  # ShareGPT: the conversation's index in the file
        ("turn", pa.int32()),  # its user turn (0-based; multi-turn sends each with the conversation so far)
        ("prefix_group", pa.int32()),  # shared-prefix group (a trace's group or first hash id)
        # a trace's arrival time from its first request, scaled; in an open-loop level (phase rate): the
        # request's scheduled arrival from the level's start (a trace replay: the trace's, scaled)
        ("arrival_s", pa.float64()),
        ("start_at", pa.float64()),  # epoch seconds when the request was sent
        ("ttft_s", pa.float64()),  # time to the first chunk carrying a token; null on failure
        # time to the first chunk with text (bench_serving's TTFT: later where the detokenizer holds
        # the first token's text back); null on failure
        ("first_text_s", pa.float64()),
        ("latency_s", pa.float64()),  # time to the last byte of the response
        ("prompt_tokens", pa.int32()),  # as counted by the server
        ("completion_tokens", pa.int32()),  # as counted by the server
        ("chunks", pa.int32()),  # stream chunks that carried tokens
        ("tpot_s", pa.float64()),  # (latency - ttft) / (completion_tokens - 1)
        ("itl_p50_s", pa.float64()),  # inter-token latency, a k-token chunk's gap spread over k
        ("itl_p99_s", pa.float64()),
        ("chunk_times_s", pa.list_(pa.float64())),  # arrival of each token chunk, from start
        ("chunk_tokens", pa.list_(pa.int32())),  # tokens carried by each chunk
        ("accept_length", pa.float64()),  # meta_info spec_accept_length; null without speculation
        ("spec_verify_ct", pa.int32()),
        # SGLang's per-request accept histogram (entry k: verify steps that accepted exactly k drafts; as
        # long as the most drafts one verify accepted, + 1), sent in the final chunk's meta_info of
        # /generate only: ``spec_accept_histogram`` (0.5.10), ``spec_correct_drafts_histogram`` (0.5.23;
        # both until it). Null without speculation, before anything was verified, on the OpenAI routes
        # (they carry it only in sglext.spec_tokens_details when asked), and for failed requests
        ("spec_accept_histogram", pa.list_(pa.int64())),
        ("finish_reason", pa.string()),
        ("ok", pa.bool_()),
        ("error", pa.string()),  # null when ok: "http 503: ...", "timeout", "disconnect", ...
        ("http_status", pa.int32()),
        # --- open-loop levels (phase rate); null elsewhere
        ("offered_rate", pa.float64()),  # the level's offered rate, requests/s (its levels row's)
        # actual send minus scheduled arrival: the wait for a max_in_flight slot, and the event loop's
        # lateness; outside ttft_s and latency_s, which run from the send (as in SGLang's bench_serving)
        ("wait_s", pa.float64()),
        # which measurement of its level (point, phase, concurrency) the request belongs to: 0 (or null,
        # before repeats) the grid's, 1.. a re-measurement by ``decide`` (sweep/search/decide.py)
        ("repeat", pa.int32()),
    ]
)

_SINGLE_STREAM = pa.schema(
    [
        ("point_id", pa.string()),
        ("run", pa.int32()),
        ("max_tokens", pa.int32()),
        ("prompt_index", pa.int32()),
        ("prompt_tokens", pa.int32()),
        ("completion_tokens", pa.int32()),
        ("latency_s", pa.float64()),
        ("ttft_s", pa.float64()),
        ("tok_per_s", pa.float64()),  # completion_tokens / latency_s
        ("accept_length", pa.float64()),
        ("ok", pa.bool_()),
        ("error", pa.string()),
    ]
)

LEVELS = pa.schema(
    [
        ("point_id", pa.string()),
        ("concurrency", pa.int32()),
        ("max_tokens", pa.int32()),
        ("requests", pa.int32()),
        ("ok", pa.int32()),
        ("failed", pa.int32()),
        ("wall_s", pa.float64()),  # first send to last completion of the level
        ("output_throughput", pa.float64()),  # completion tokens of ok requests / wall_s
        ("request_throughput", pa.float64()),  # ok requests / wall_s
        ("per_request_tok_s", pa.float64()),  # mean over ok requests of completion_tokens / latency
        ("latency_mean_s", pa.float64()),
        ("latency_p50_s", pa.float64()),
        ("latency_p90_s", pa.float64()),
        ("latency_p99_s", pa.float64()),
        ("ttft_p50_s", pa.float64()),
        ("ttft_p99_s", pa.float64()),
        ("tpot_p50_s", pa.float64()),
        ("tpot_p99_s", pa.float64()),
        ("itl_p50_s", pa.float64()),
        ("itl_p99_s", pa.float64()),
        ("achieved_concurrency", pa.float64()),  # time-weighted requests in flight
        ("accept_length_server", pa.float64()),  # /server_info after a flush; null if unknown
        ("accept_length_requests", pa.float64()),  # from the requests: tokens / verify steps, summed
        # from /metrics counters: generation tokens / verify calls over the level (the same definition
        # as accept_length_requests, on any route); null without speculation or spec_verify_calls_total
        ("accept_length_metrics", pa.float64()),
        ("flushed", pa.bool_()),  # the server's counters were reset before the level
        # --- adaptive speculation (--speculative-adaptive; sweep/sglang/logs.py AdaptiveLog): from the server's
        # log lines, timed as the host read them (a switch in a level's last ~0.1 s may count in the next);
        # all null for a server that does not run it (points.adaptive not true)
        ("adaptive_switches", pa.int32()),  # "Switch adaptive runtime state" lines during the level
        # the step counts the server ran during the level, in order of first use: the one in force when it
        # began, then each switch's (0 = no speculation: a tier's candidate 0)
        ("adaptive_steps", pa.list_(pa.int32())),
        ("adaptive_steps_final", pa.int32()),  # the step count in force at the level's end
        # added by concurrency.refine's bisection (sweep/bench/refine.py); null: refinement off
        ("refined", pa.bool_()),
        # --- how the level ended (sweep/bench/stop.py): with benchmark.concurrency.stop, a level ends once
        # its throughput is known to the precision asked for, or at its fixed request count
        ("planned_requests", pa.int32()),  # the fixed request count (rounds x C, or requests_per_level)
        ("stopped_early", pa.bool_()),  # the stop rule ended it before planned_requests (false without one)
        ("stop_cancelled", pa.int32()),  # requests in flight at the stop: cancelled, not in the requests table
        # steady output tok/s: the token stream of the completed requests after the first wave's ramp, at
        # full concurrency, as a batch mean over time windows; and the relative half-width of its interval
        # (95 %, or the stop rule's confidence) counting both drift over time and the spread over requests:
        # at the stop, else over the whole level; null when too little was measured (e.g. one round)
        ("steady_throughput", pa.float64()),
        ("throughput_precision", pa.float64()),
        ("precision_batches", pa.int32()),  # time windows left in that estimate after merging
        # --- the server's Prometheus /metrics (sweep/bench/level_metrics.py): all null when the server
        # has no /metrics (or benchmark.server_metrics is off), each null when the server lacks its metric.
        # Ranks: one series per DP rank (the lowest TP/PP rank's; the others repeat it), then counts
        # summed and ratios averaged over DP ranks. Counters: after - before the level. Gauges: the
        # mean over the scrapes taken while the level ran (after a level SGLang reads idle: 0 running).
        ("metrics_scrapes", pa.int32()),  # scrapes taken during the level (0: shorter than the first)
        ("metrics_prompt_tokens", pa.int64()),  # sglang:prompt_tokens_total delta (finished requests)
        ("metrics_generation_tokens", pa.int64()),  # sglang:generation_tokens_total delta
        ("metrics_requests", pa.int64()),  # sglang:num_requests_total delta: requests finished
        # prefix-cache hits / prefill tokens: sglang:prefill_effective_tokens_total deltas (*_hit modes over
        # all modes), else cached_tokens_total / prompt_tokens_total (the cache_hit_rate gauge is only
        # the last prefill batch's, and 0 after every decode log)
        ("metrics_cache_hit_rate", pa.float64()),
        ("metrics_spec_accept_length", pa.float64()),  # sglang:spec_accept_length (SGLang's last log
        # window), DP ranks averaged, 0 (nothing verified) left out; null without speculation
        ("metrics_spec_accept_rate", pa.float64()),  # sglang:spec_accept_rate, same scrapes
        ("metrics_running_reqs", pa.float64()),  # sglang:num_running_reqs, summed over DP ranks
        ("metrics_running_reqs_max", pa.float64()),  # its largest value in those scrapes (a cap shows)
        ("metrics_queue_reqs", pa.float64()),  # sglang:num_queue_reqs (waiting), summed over DP ranks
        ("metrics_gen_throughput", pa.float64()),  # sglang:gen_throughput tok/s, summed over DP ranks
        ("metrics_token_usage", pa.float64()),  # sglang:token_usage (KV pool fraction), DP averaged
        # --- the GPUs' power during the level (sweep/bench/power.py): sampled every 0.5 s from NVML on a GPU
        # host (the fake's GPU ledger in dry runs), each sample summed over every GPU of the host running the
        # server; for a server over several hosts, every node's GPUs (each node's mean over the level's
        # window, summed; null where a node had no figure); all null without a power source (CPU hosts,
        # no NVML, ``sweep bench`` without --power): null, never 0
        ("power_mean_w", pa.float64()),  # mean over the samples (summed over the nodes)
        ("power_peak_w", pa.float64()),  # the largest sample (of the nodes' samples summed where they align)
        ("energy_j", pa.float64()),  # power_mean_w x wall_s
        ("energy_per_token_j", pa.float64()),  # energy_j / output (completion) tokens of the ok requests
        ("power_samples", pa.int32()),  # samples taken (over every node)
        ("power_gpus", pa.int32()),  # GPUs each sample sums (over every node)
        ("power_nodes", pa.int32()),  # nodes the figures cover: 1, or the server's hosts; fewer: figures null
        ("level_started_at", pa.float64()),  # unix time the level's first request was sent (its window)
        ("level_ended_at", pa.float64()),  # unix time its last request ended
        # --- open-loop levels (benchmark.rates, open_loop.replay; sweep/bench/openloop.py): requests sent at
        # drawn (or a trace's) arrival times whatever the server does; all null in a closed-loop row.
        # Such a row has concurrency 0; the analysis of concurrency curves leaves these rows out
        ("offered_rate", pa.float64()),  # requests/s asked for (a trace replay: the trace's mean rate)
        ("arrival", pa.string()),  # poisson | gamma | trace
        ("burstiness", pa.float64()),  # gamma's shape (1: Poisson); null for a trace
        ("max_in_flight", pa.int32()),  # the cap on requests sent and unanswered (null: none)
        ("arrival_rate", pa.float64()),  # the rate the draw actually offered: (requests - 1) / arrival span
        ("achieved_rate", pa.float64()),  # ok requests / wall_s (bench_serving's request throughput; the drain
        # after the last arrival keeps it a little below offered even when the server keeps up)
        ("max_in_flight_seen", pa.int32()),  # most requests sent and unanswered at once
        ("outstanding_mean", pa.float64()),  # mean requests arrived and unanswered, seen at each arrival
        # how many requests the backlog grew by over the level: the least-squares slope of the outstanding
        # requests at each arrival against time, times the span, over the arrivals after the first unqueued
        # latency (the median of the first 5 requests': the backlog's fill from empty); null under 10 of them
        ("queue_growth", pa.float64()),
        # false when queue_growth is beyond chance: 3 sqrt(outstanding_mean + 1) + 1 (a backlog that is
        # Poisson around its mean); the server did not keep up with the rate. A level with too few arrivals
        # after the fill for a fit (a burst) is judged by its drain: false when the last answer came more
        # than 3 unqueued latencies after the last send
        ("kept_up", pa.bool_()),
        ("wait_mean_s", pa.float64()),  # requests' wait_s: mean and largest
        ("wait_max_s", pa.float64()),
        # which measurement of the level this row is: 0 (null in results written before repeats) the
        # grid's, 1.. the re-measurements ``decide`` made of it (sweep/search/decide.py), each a row of its
        # own with its requests (theirs carry the same index); the analysis pools them
        # (sweep/analysis/repeats.py), never overwriting the first
        ("repeat", pa.int32()),
        # null: measured by the grid; k: measured in ``decide``'s k-th paired round (its candidates back
        # to back on one host, their order alternating between rounds: sweep/search/decide.py). Those
        # rows are judged in their pairs and never pooled into the grid's figures
        ("decide_round", pa.int32()),
    ]
)

# The raw /metrics of each level, one row per sample (name + labels), in metrics/<point_id>.parquet;
# what the levels' metrics_* columns are computed from, and everything else the server exports.
METRICS = pa.schema(
    [
        ("point_id", pa.string()),
        ("concurrency", pa.int32()),  # 0 for an open-loop level
        ("offered_rate", pa.float64()),  # an open-loop level's offered rate (null for a concurrency level)
        ("name", pa.string()),  # the sample, e.g. sglang:time_to_first_token_seconds_bucket
        ("labels", pa.string()),  # as in the exposition format, sorted: le="0.5",model_name="m"; "" if none
        ("family", pa.string()),  # its metric family, e.g. sglang:time_to_first_token_seconds
        ("kind", pa.string()),  # the family's type: counter | gauge | histogram | summary | ...
        ("before", pa.float64()),  # in the scrape before the level (after its flush); null if absent
        ("after", pa.float64()),  # in the scrape after the level; null if absent
        ("delta", pa.float64()),  # counters, histogram and summary sums/counts: after - before (absent
        # before counts as 0); null for gauges
        # gauges: the mean over the scrapes taken during the level (NaN left out), and the largest;
        # null for counters, or when no scrape fell within the level
        ("during_mean", pa.float64()),
        ("during_max", pa.float64()),
    ]
)

# SGLang's "Engine startup timings (s): load_weight=..., kv_cache_allocation=..., scheduler_e2e=...,
# cuda_graph={prefill=..., ...}, tokenizer_e2e=..." line (0.5.23-era; sweep/sglang/logs.py parses it):
# SGLang's key -> what it measures. Each is SGLang's own critical path: the maximum over the
# scheduler ranks. One points column each, ``engine_<key>_s`` (``cuda_graph.decode`` ->
# ``engine_cuda_graph_decode_s``), in seconds, beside the phases the sweep times from log lines
# (load_s ... startup_s, which include waiting on the slowest rank and logging delays).
ENGINE_TIMINGS: dict[str, str] = {
    "load_weight": "weights loaded: target plus drafter",
    "kv_cache_allocation": "KV cache pools allocated (target and drafter; plus a resize after capture, if any)",
    "scheduler_e2e": "a scheduler process's whole init: models, KV cache, attention backends, graphs",
    "cuda_graph.prefill": "target prefill graph capture",
    "cuda_graph.decode": "target decode graph capture (a baseline)",
    "cuda_graph.target_verify": "target verify graph capture (a speculative server)",
    "cuda_graph.draft_prefill": "drafter prefill graph capture",
    "cuda_graph.draft_decode": "drafter decode graph capture (steps > 1)",
    "cuda_graph.draft_extend": "drafter extend graph capture",
    "tokenizer_e2e": "the engine's launch to every scheduler ready, in the HTTP server process (before uvicorn)",
}


def engine_column(key: str) -> str:
    """The points column of one of SGLang's startup timings: ``cuda_graph.decode`` -> ``engine_cuda_graph_decode_s``."""
    return "engine_" + key.replace(".", "_") + "_s"


ENGINE_COLUMNS: tuple[str, ...] = tuple(engine_column(k) for k in ENGINE_TIMINGS)

# The last update of each kind of progress bar seen during startup (sweep/sglang/logs.py Progress):
# kind load (weight shards) | capture (graph batch sizes / token counts) | other; desc is tqdm's
# description; n of total done after elapsed_s, eta_s left, at rate items/s (null where tqdm printed
# "?"); seen_s is when it was seen (seconds since launch); summary as the live view showed it. For a
# point that hung, it says how far it got: "load 27/64 shards, 5.1 s/it, ETA 02:30".
_STARTUP_PROGRESS = pa.list_(
    pa.struct(
        [
            ("kind", pa.string()),
            ("desc", pa.string()),
            ("n", pa.int64()),
            ("total", pa.int64()),
            ("elapsed_s", pa.float64()),
            ("eta_s", pa.float64()),
            ("rate", pa.float64()),
            ("seen_s", pa.float64()),
            ("summary", pa.string()),
        ]
    )
)

# {axis: role} of a point's axes, in the grid's order; roles: drafter steps topk draft_tokens env other
PARAM_ROLES = pa.map_(pa.string(), pa.string())
ENV = pa.map_(pa.string(), pa.string())  # {name: value} of the server's extra env, sorted, secrets redacted
# {name: value} of the server's flags (sweep.core.flags.ServerFlags.text): each name as SGLang's --help writes it
# without dashes, each value as the argv shows it ("true" for a switch), secrets redacted
FLAGS = pa.map_(pa.string(), pa.string())

# A process the reaper killed (or found holding a GPU and left alone): sweep/host/reaper.py _describe
PROCESS = pa.struct(
    [
        ("pid", pa.int64()),
        ("name", pa.string()),
        ("cmdline", pa.string()),  # the first 300 characters
        (
            "reason",
            pa.string(),
        ),  # why it was killed, e.g. "left over: carries this sweep's marker (SIGKILL after grace)"
        ("gpu", pa.int32()),  # the GPU it held (processes found through the GPU); null otherwise
    ]
)
# What the reaper did around a point (sweep/host/reaper.py ReapReport); null for a point never launched
REAPED = pa.struct(
    [
        ("killed", pa.list_(PROCESS)),  # ours, or foreign with kill_foreign_gpu_processes
        ("foreign", pa.list_(PROCESS)),  # GPU processes not ours, left alone
        ("gpu_free", pa.bool_()),  # every GPU under the memory threshold at the end
        ("port_free", pa.bool_()),  # the point's port could be bound at the end
        ("waited_s", pa.float64()),  # waiting for GPU memory and the port
    ]
)
# How a dry run scaled the benchmark (sweep/experiment/dryrun.py scaled); null when nothing was scaled. Pairs are
# [the experiment's value, this run's]
BENCH_SCALE = pa.struct(
    [
        ("fake_speed", pa.float64()),  # the fake serves this many times faster than the real system
        ("fake_startup_speed", pa.float64()),
        ("stream_interval", pa.int64()),
        ("max_tokens_scale", pa.float64()),
        ("single_stream", pa.list_(pa.int64())),  # single-stream max_tokens pair
        ("concurrency_max_tokens", pa.list_(pa.int64())),
        ("rounds", pa.list_(pa.int64())),
        ("single_stream_runs", pa.list_(pa.int64())),
        ("levels", pa.list_(pa.int64())),  # the concurrency levels run
    ]
)

RESOLVED = pa.struct(
    [  # sweep.sglang.serverargs.RuleOutcome.summary(): the plan's resolution of SGLang's arguments
        ("verdict", pa.string()),  # ok | error | later (fails at load) | depends (on the GPU or the target)
        ("steps", pa.int64()),  # the speculative settings SGLang ends up with (topk 1: draft tokens = steps + 1)
        ("topk", pa.int64()),
        ("draft_tokens", pa.int64()),
        ("max_running_requests", pa.int64()),
        ("algorithm", pa.string()),
        ("attention_backend", pa.string()),
        ("page_size", pa.int64()),
        ("error", pa.string()),  # the exception SGLang's argument checks raise, if any
        ("later", pa.string()),  # where and how it fails later (drafter load, CUDA graph capture)
        (
            "depends_on",
            pa.list_(pa.string()),
        ),  # what the verdict depends on: gpu, architecture, algorithm, adaptive-config
        # (a config path not readable where it was planned), adaptive-version (a version that may lack the flags)
        ("version", pa.string()),  # the SGLang version whose rules resolved it
        ("architecture", pa.string()),
        ("gpu", pa.string()),
        ("adaptive", pa.bool_()),  # --speculative-adaptive given: whether the server adapts (false: SGLang falls back)
        ("candidate_steps", pa.list_(pa.int64())),  # adaptive: the step counts it may switch between (every tier's)
        ("adaptive_disabled_reason", pa.string()),  # SGLang's reason for falling back to static speculation
        ("max_draft_tokens", pa.int64()),  # the draft tokens the KV and CUDA-graph sizes follow (adaptive: largest + 1)
    ]
)

POINTS = pa.schema(
    [
        ("point_id", pa.string()),
        ("label", pa.string()),
        ("experiment", pa.string()),
        ("baseline", pa.bool_()),  # a no-speculation point
        ("baseline_id", pa.string()),  # the baseline this point is compared with (null if none)
        # the hash of what its server runs (launcher, flags, env): points of one launch share it, their
        # client-side axes' values in bench_key ("workload=chat,max_tokens=256"; "" without any);
        # null in directories older than launches
        ("launch_id", pa.string()),
        ("bench_key", pa.string()),
        ("param_roles", PARAM_ROLES),  # {axis: role}; the values are the axis_* columns
        ("argv", pa.list_(pa.string())),  # the server's command line, secrets redacted
        # the flags that command line passes, typed by the analysis as ServerFlags (results.records.server_flags);
        # filled from the argv as they are read in directories written before this column (results.store)
        ("flags", FLAGS),
        ("env", ENV),  # the server's extra env, secrets redacted
        ("status", pa.string()),  # ok | failed | invalid
        ("failure_phase", pa.string()),
        ("failure_reason", pa.string()),
        ("failure_fix", pa.string()),  # how to fix it, where the sweep knows (pre-flight, timeouts, auth...)
        ("errors", pa.list_(pa.string())),  # plan errors (invalid points)
        ("warnings", pa.list_(pa.string())),  # plan warnings
        # the drafter pre-flight (sweep/sglang/drafter.py): the 0-based target layers whose output the EAGLE-3
        # drafter reads, as SGLang resolves them (config ids after the target's shift, or its default;
        # -1 = the embeddings), null without one; and its findings, "warning: [rule] message (fix: ...)"
        # (sweep/core/checks.py: Check.line)
        ("drafter_aux_layers", pa.list_(pa.int32())),
        ("drafter_checks", pa.list_(pa.string())),
        # every pre-flight check on the host, "ok: ...", "skipped: ..." or "warning: [rule] ... (fix: ...)"
        # (the SGLang version's rules, CPU flags and memory or GPUs, paths, port), in the order they ran
        ("preflight_checks", pa.list_(pa.string())),
        ("log_tail", pa.string()),
        ("host", pa.string()),
        ("node_id", pa.string()),
        ("gpu_name", pa.string()),
        ("gpu_count", pa.int32()),
        ("sglang_version", pa.string()),
        # startup phases the sweep times from the log lines (sweep/host/server.py Startup.durations)
        ("load_s", pa.float64()),  # launch to the weights loaded before the KV cache: target and drafter
        # (0.5.23); 0.5.10 loads its drafter after the target's graphs, counted in draft_capture_s
        ("kv_cache_s", pa.float64()),  # KV cache pools (target and drafter)
        ("capture_s", pa.float64()),  # target graph capture; null without graphs (CPU, --disable-cuda-graph)
        ("draft_capture_s", pa.float64()),  # drafter graph capture (0.5.10: its weight load included)
        ("http_s", pa.float64()),  # last startup step logged (graphs, or the KV cache) to HTTP listening
        ("ready_s", pa.float64()),  # from HTTP listening to ready (warmup generate answered)
        ("startup_s", pa.float64()),  # launch to ready
        # SGLang's own numbers (0.5.23-era "Engine startup timings (s): ..."), null when not printed
        *((engine_column(key), pa.float64()) for key in ENGINE_TIMINGS),
        ("startup_progress", _STARTUP_PROGRESS),  # last progress-bar update of each kind seen in startup
        ("started_at", pa.float64()),
        ("ended_at", pa.float64()),
        ("attempts", pa.int32()),
        ("reaped", REAPED),  # what the reaper killed or reported, and why
        ("dry_run", pa.bool_()),
        ("bench_scale", BENCH_SCALE),  # how a dry run scaled the benchmark (null if unscaled)
        ("sweep_version", pa.string()),
        ("resolved", RESOLVED),  # SGLang's settings as the plan resolved them (null where it could not)
        # adaptive speculation (--speculative-adaptive), from the server's log: true when SGLang initialised it
        # ("AdaptiveSpeculativeParams initialized") and did not fall back, false when the point asked for it and
        # the server runs static speculation, null when it did not ask (or never started)
        ("adaptive", pa.bool_()),
        ("adaptive_disabled_reason", pa.string()),  # SGLang's reason for the fallback ("speculative_adaptive
        # disabled: <reason>. Falling back to static speculative params."), e.g. "speculative_eagle_topk=4 (only
        # topk=1 is supported)"
    ]
)

# How each decision ``decide`` took on ended (sweep/search/decide.py), one row per decision, in
# DIR/decisions.parquet (written whole after the decide phase): an SLO's pick against its runner-up, a
# level's best against the second, or a pair a caller asked about (a policy tier's candidates)
DECISIONS = "decisions.parquet"
DECISIONS_SCHEMA = pa.schema(
    [
        ("decision", pa.string()),  # its key: slo:<name>[@workload], level:C=<c>[@workload], pair:<a>|<b>@C=<c>
        ("kind", pa.string()),  # slo | level | pair
        ("subject", pa.string()),  # in words: "SLO interactive", "the best at C=30"
        ("workload", pa.string()),  # "" without client-side axes
        ("pick_id", pa.string()),  # the candidate ahead at the end (the report's pick)
        ("pick_label", pa.string()),
        ("other_id", pa.string()),  # the other candidate (the runner-up)
        ("other_label", pa.string()),
        ("levels", pa.list_(pa.int32())),  # the levels re-measured in pairs (where each candidate is read)
        ("pick_level", pa.int32()),  # the level the pick's figure is read at (an SLO's: the highest meeting it)
        ("other_level", pa.int32()),
        ("pairs", pa.int32()),  # paired rounds judged (both candidates measured in the same round)
        ("margin_first", pa.float64()),  # pick over other - 1, and its interval, before any re-measurement
        ("low_first", pa.float64()),
        ("high_first", pa.float64()),
        ("margin", pa.float64()),  # the same at the end: from decide's paired rounds (their mean log ratio)
        ("low", pa.float64()),
        ("high", pa.float64()),
        ("outcome", pa.string()),  # decided | equal | budget
        ("detail", pa.string()),  # in words: which limit ended it, whether the pick changed
        ("repeats_pick", pa.int32()),  # measurements of the pick's deciding levels (the first included)
        ("repeats_other", pa.int32()),
        ("rounds", pa.int32()),  # rounds of re-measurement it took part in
        ("bench_s", pa.float64()),  # benchmark seconds of its candidates' re-measured levels (as measured)
        ("practical_margin", pa.float64()),  # decide.margin: inside +-it, the two are equal
    ]
)
REPEAT_MARK = "~r"  # <table>/<point_id>~r<round>.parquet: a re-measurement's rows


def repeat_stem(point_id: str, round_: int) -> str:
    return f"{point_id}{REPEAT_MARK}{round_}"


def check_decisions(table: pa.Table) -> pa.Table:
    """``table`` in the decisions schema (ResultsError where it does not fit)."""
    missing = set(DECISIONS_SCHEMA.names) - set(table.column_names)
    if missing:
        raise ResultsError(
            f"table 'decisions' does not match its schema: missing {sorted(missing)}",
            fix="this is a bug in the writer; sweep/results/schema.py is the definition",
        )
    return table.select(DECISIONS_SCHEMA.names).cast(DECISIONS_SCHEMA)


MANIFEST = "sweep.json"  # what makes a directory a sweep's: its experiment and mode

# A dry run's figures at real speed (sweep/experiment/dryrun.py: the fake serves dry_run.fake_speed
# times faster than the system it models). Per table, the columns in seconds (multiplied by the speed)
# and in per-second rates (divided by it), and lists of seconds. A dry run writes each of them at real
# speed, under its own name, and what the fake measured beside it as ``<column>_measured`` (a column of
# a dry run's files only), so that DuckDB on the files, polars, ``sweep.results.load`` and ``sweep query``
# read one figure under one name; its points rows say by how much (``fake_speed_divided``, float64: the
# fake's speed the figures were divided by). A dry run's directory written before holds what the fake
# measured under the plain names and neither column: its readers divide it back
# (sweep/analysis/realspeed.py). Counts and ratios (tokens, requests, accept lengths, speedups) and
# power do not depend on the speed; energy (watts x seconds) is scaled as a time. Startup phases are
# the fake's own (compressed apart): not scaled.
SCALED_TIMES: dict[str, tuple[str, ...]] = {
    "single_stream": ("latency_s", "ttft_s"),
    "levels": (
        "wall_s",
        "latency_mean_s",
        "latency_p50_s",
        "latency_p90_s",
        "latency_p99_s",
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "itl_p50_s",
        "itl_p99_s",
        "energy_j",
        "energy_per_token_j",  # watts x seconds: the fake's watts are real, its seconds not
        "wait_mean_s",
        "wait_max_s",
    ),
    "requests": ("ttft_s", "latency_s", "tpot_s", "itl_p50_s", "itl_p99_s", "wait_s"),
}
SCALED_RATES: dict[str, tuple[str, ...]] = {
    "single_stream": ("tok_per_s",),
    "levels": (
        "output_throughput",
        "request_throughput",
        "per_request_tok_s",
        "steady_throughput",
        "metrics_gen_throughput",
        "offered_rate",  # an open-loop level's (sweep/bench/openloop.py)
        "arrival_rate",
        "achieved_rate",
    ),
    "requests": ("offered_rate",),
}
SCALED_TIME_LISTS: dict[str, tuple[str, ...]] = {"requests": ("chunk_times_s",)}
MEASURED = "_measured"  # the suffix of the column beside a scaled one: what the fake measured
FAKE_SPEED_DIVIDED = "fake_speed_divided"  # the points column: the speed a point's figures were divided by


def _scaled_columns(name: str) -> tuple[str, ...]:
    """The columns of table ``name`` that a dry run writes at real speed (``*_measured`` beside each)."""
    return SCALED_TIMES.get(name, ()) + SCALED_RATES.get(name, ()) + SCALED_TIME_LISTS.get(name, ())


TABLES: dict[str, pa.Schema] = {
    "points": POINTS,
    "single_stream": _SINGLE_STREAM,
    "levels": LEVELS,
    "requests": REQUESTS,
    "metrics": METRICS,
}


def dry_run_fields(name: str) -> dict[str, pa.Field]:
    """The columns only a dry run's files of table ``name`` hold, by name: each scaled column's
    ``<column>_measured`` (of its type), and the points' ``fake_speed_divided``."""
    if name == "points":
        return {FAKE_SPEED_DIVIDED: pa.field(FAKE_SPEED_DIVIDED, pa.float64())}
    schema = TABLES.get(name)
    return {c + MEASURED: pa.field(c + MEASURED, schema.field(c).type) for c in _scaled_columns(name)} if schema else {}


AXIS_PREFIX = "axis_"
_AXIS_TYPES = (pa.int64(), pa.float64(), pa.string())  # what an axis column may be
_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_INT64_MAX = 2**63 - 1


def _is_int(name: str) -> bool:
    return bool(_INT.fullmatch(name)) and abs(int(name)) <= _INT64_MAX


def _is_number(name: str) -> bool:
    """A name a float prints back as ("0.5", "1.25"), or an integer: never "nan", "1e3", "007"."""
    if _is_int(name):
        return True
    try:
        value = float(name)
    except ValueError:
        return False
    return math.isfinite(value) and repr(value) == name


def axis_type(names: Iterable[Optional[str]]) -> pa.DataType:
    """The column type of an axis from the names of all its values (nulls, a baseline's collapsed
    axis, left out): int64 if every one is an integer, float64 if every one is a number (as it
    prints: "0.5", not "1e3" or "nan"), else string. A name is numeric only if the number gives it
    back, so storing the number loses nothing but a float axis's "1" (read back as 1.0)."""
    given = [str(n) for n in names if n is not None]
    if given and all(_is_int(n) for n in given):
        return pa.int64()
    if given and all(_is_number(n) for n in given):
        return pa.float64()
    return pa.string()


def axis_value(name: Optional[str], kind: pa.DataType) -> Any:
    """An axis value's name as a value of its column type ``kind`` (null stays null)."""
    if name is None:
        return None
    if kind == pa.int64():
        return int(name)
    if kind == pa.float64():
        return float(name)
    return str(name)


def _axis_field(name: str, kind: pa.DataType) -> pa.Field:
    return pa.field(name, kind if kind in _AXIS_TYPES else pa.string())


def check(table: pa.Table, name: str) -> pa.Table:
    """Return ``table`` cast to the schema of ``name``; raise ResultsError if it does not fit.

    Columns must be exactly the schema's (in any order), and may add those a dry run writes
    (``dry_run_fields``: ``*_measured``, ``fake_speed_divided``); ``points`` may add ``axis_*`` columns
    (int64, float64 or string; any other type is cast to string).
    """
    schema = TABLES[name]
    expected = set(schema.names)
    dry = dry_run_fields(name)
    got = set(table.column_names)
    extra = got - expected - set(dry)
    if name == "points":
        extra = {c for c in extra if not c.startswith(AXIS_PREFIX)}
    missing = expected - got
    if missing or extra:
        raise ResultsError(
            f"table {name!r} does not match its schema: missing {sorted(missing)}, unexpected {sorted(extra)}",
            fix="this is a bug in the writer; sweep/results/schema.py is the definition",
        )
    fields = [schema.field(c) for c in schema.names] + [dry[c] for c in table.column_names if c in dry]
    if name == "points":
        fields += [_axis_field(c, table.schema.field(c).type) for c in table.column_names if c.startswith(AXIS_PREFIX)]
    target = pa.schema(fields)
    try:
        return table.select(target.names).cast(target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        raise ResultsError(
            f"table {name!r} has a column of the wrong type: {e}",
            fix="this is a bug in the writer; sweep/results/schema.py is the definition",
        ) from e


def from_rows(rows: list[dict], name: str, axis_types: Optional[Mapping[str, pa.DataType]] = None) -> pa.Table:
    """Build a checked table from a list of row dicts (missing keys become nulls). ``axis_types``:
    the type of each ``axis_*`` column (``{"axis_steps": pa.int64()}``; string where not given)."""
    schema = TABLES[name]
    names = list(schema.names)
    if name == "points" and rows:  # the axis columns in the order given (the grid's)
        names += list(dict.fromkeys(k for r in rows for k in r if k.startswith(AXIS_PREFIX)))
    cols = {n: [r.get(n) for r in rows] for n in names}
    types = dict(axis_types or {})
    fields = [schema.field(n) if n in schema.names else _axis_field(n, types.get(n, pa.string())) for n in names]
    return check(pa.table(cols, schema=pa.schema(fields)), name)
