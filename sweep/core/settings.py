"""What a benchmark run does: the ``benchmark`` section of an experiment file, and the options of
``python -m sweep bench``. Plain dataclasses, so omegaconf can use them as a typed schema; values
the types cannot check (ranges) are checked in ``__post_init__``, which omegaconf runs when it
builds the experiment, so a bad value is a ``ConfigError`` that names the key. Each field says how
it is part of a point's id (``sweep/core/identity.py``): ``always(...)`` at any value, ``never(...)``
not at all, a plain default only where it differs from it (a new setting at its default moves no id)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from sweep.core.errors import ConfigError
from sweep.core.identity import always, hashed_with, never

API_NAMES = ("generate", "completions", "chat")  # SGLang's native /generate, /v1/completions, /v1/chat/completions
# what ``benchmark.workload.kind`` can be (sweep/bench/workloads/: one loader each)
WORKLOAD_KINDS = ("prompts", "sharegpt", "synthetic", "shared-prefix", "trace")
DISTRIBUTIONS = ("fixed", "uniform", "normal", "empirical")  # what a length is drawn from
_ARRIVALS = ("poisson", "gamma")  # how an open-loop level's arrival gaps are drawn (sweep/bench/arrivals.py)


@dataclass
class SingleStreamSettings:
    """``benchmark.single_stream``: requests sent one at a time, before the concurrency levels: the
    speed of one user with the server to itself."""

    runs: int = always(5)  # measured runs, one request at a time
    warmup: int = always(2)  # runs before them, recorded as phase=warmup and left out of the figures
    max_tokens: int = always(2048)  # max tokens of each of these requests (a workload's own output length wins)


@dataclass
class StopSettings:
    """``benchmark.concurrency.stop``: end a closed-loop level once its output throughput is known
    to ``precision`` (relative half-width of the ``confidence`` interval), or at its fixed request
    count, whichever comes first. How the interval is computed: ``sweep/bench/stop.py``."""

    precision: float = always(0.02)  # 0.02: +-2 %
    confidence: float = always(0.95)  # of the interval (0.95: a 95 % interval)
    # requests that must have completed before a level may stop; None: C (every in-flight slot
    # completed one request) and at least 2 (a spread needs two)
    min_requests: Optional[int] = always(None)

    def __post_init__(self) -> None:
        if not 0 < self.precision < 1:
            raise ConfigError(
                f"benchmark.concurrency.stop.precision = {self.precision!r} is out of range",
                fix="a relative half-width between 0 and 1, e.g. 0.02 for +-2 %",
            )
        if not 0 < self.confidence < 1:
            raise ConfigError(
                f"benchmark.concurrency.stop.confidence = {self.confidence!r} is out of range",
                fix="a probability between 0 and 1, e.g. 0.95",
            )
        if self.min_requests is not None and self.min_requests < 1:
            raise ConfigError(
                f"benchmark.concurrency.stop.min_requests = {self.min_requests!r} is out of range",
                fix="at least 1, or leave it out (C, and at least 2)",
            )


@dataclass
class ConcurrencySettings:
    """``benchmark.concurrency``: the closed-loop levels, each keeping C requests in flight (a new one
    sent as one ends), run in turn on the one server."""

    # the concurrencies C, each level once, run in the order given; ``levels: auto`` in an experiment
    # file: see ``auto``
    levels: list[int] = always(factory=lambda: [1, 2, 5, 10, 30, 70, 100, 250])
    # requests sent at each level; None means rounds * concurrency, so every level keeps exactly
    # C requests in flight for `rounds` full turns
    requests_per_level: Optional[int] = always(None)
    rounds: int = always(2)  # with no requests_per_level: each level sends rounds x C requests
    # max tokens of each request of the levels and of the rates (a workload's own output length wins)
    max_tokens: int = always(512)
    stop: Optional[StopSettings] = None  # None: every level sends its fixed request count
    # bisection (sweep/bench/refine.py): after the levels above, add levels where an SLO of
    # ``benchmark.slo`` flips from met to missed, and where the throughput crosses the baseline's
    # (``RunContext.baseline_curve``), until ``refine_max`` levels were added or the bracket is within
    # ``refine_ratio`` (hi/lo) or one request apart. ``levels: auto`` in an experiment file sets
    # ``auto`` and ``refine`` and starts from AUTO_LEVELS.
    refine: bool = hashed_with("refine", "auto", default=False)
    refine_max: int = hashed_with("refine", "auto", default=4)  # levels refine may add, at most
    refine_ratio: float = hashed_with("refine", "auto", default=1.2)  # a bracket is narrow enough at hi/lo <= it
    # the levels are AUTO_LEVELS, capped at the server's max_running_requests
    auto: bool = hashed_with("refine", "auto", default=False)
    # what a measured second is in real seconds when judging SLOs; not part of the point's identity
    # (a dry run judges at its fake_speed, and the baseline's throughput per level is crossed, both
    # supplied by the sweep beside these settings: sweep.core.run_context.RunContext)
    slo_time_scale: float = never(1.0)


AUTO_LEVELS = [1, 4, 16, 64, 256]  # ``levels: auto``: the coarse start (refinement adds the rest)


@dataclass
class OpenLoopSettings:
    """``benchmark.open_loop``: how each level of ``benchmark.rates`` sends (sweep/bench/openloop.py).
    Requests arrive at drawn times whatever the server does (open loop), not when a slot frees up;
    the gaps are seeded by ``benchmark.seed`` (the same gaps as SGLang's ``bench_serving`` with
    ``--seed``, for Poisson without ramp-up). A level sends ``requests`` requests, or for
    ``duration_s`` seconds, whichever ends first (either may be None, not both)."""

    arrival: str = always("poisson")  # poisson: exponential gaps; gamma: gamma gaps of shape ``burstiness``
    burstiness: float = always(1.0)  # gamma's shape (vLLM's --burstiness): < 1 burstier, > 1 more regular; 1: Poisson
    requests: Optional[int] = always(100)  # requests per level (None: as many as duration_s holds)
    duration_s: Optional[float] = always(None)  # seconds of arrivals per level (None: until ``requests``)
    # at most this many sent and unanswered; the rest wait (the wait is recorded)
    max_in_flight: Optional[int] = always(None)
    ramp_up_s: float = always(0.0)  # the rate climbs linearly from 0 to the level's over these first seconds
    # a trace workload: one more level, sent at the trace's own arrival times (times workload.time_scale)
    replay: bool = always(False)

    def problems(self) -> list[tuple[str, object, str]]:
        out: list[tuple[str, object, str]] = []

        def want(ok: bool, key: str, value: object, use: str) -> None:
            if not ok:
                out.append((f"open_loop.{key}", value, use))

        want(self.arrival in _ARRIVALS, "arrival", self.arrival, "one of " + ", ".join(_ARRIVALS))
        want(self.burstiness > 0, "burstiness", self.burstiness, "a positive gamma shape, e.g. 1 (Poisson)")
        want(
            self.arrival == "gamma" or self.burstiness == 1,
            "burstiness",
            self.burstiness,
            "arrival: gamma for a burstiness other than 1 (Poisson is gamma of shape 1)",
        )
        want(self.requests is None or self.requests >= 1, "requests", self.requests, "at least 1 request per level")
        want(
            self.duration_s is None or self.duration_s > 0,
            "duration_s",
            self.duration_s,
            "a positive number of seconds",
        )
        want(
            self.requests is not None or self.duration_s is not None,
            "requests",
            self.requests,
            "a request count, or a duration_s to end each level by",
        )
        want(
            self.max_in_flight is None or self.max_in_flight >= 1,
            "max_in_flight",
            self.max_in_flight,
            "at least 1, or leave it unset (no cap)",
        )
        want(self.ramp_up_s >= 0, "ramp_up_s", self.ramp_up_s, "seconds >= 0 (0: no ramp-up)")
        return out


@dataclass
class SLOSettings:
    """One service-level objective of ``benchmark.slo``: at least ``percentile`` % of a level's
    requests must meet every limit given (TTFT and TPOT at most, per-user tok/s at least). The
    report finds, per configuration, the highest concurrency that meets it and its goodput; the
    same SLOs can be given afterwards with ``python -m sweep report DIR --slo ...``. The experiment
    file's spelling of an SLO: ``sweep.core.slo_rule.from_settings`` makes it the one ``SLO`` type."""

    name: str = ""  # e.g. interactive; empty: named after its limits
    percentile: float = 90.0  # share of requests that must meet each limit (90: p90 TTFT, p10 tok/s)
    ttft_s: Optional[float] = None  # time to first token, at most (seconds)
    tpot_s: Optional[float] = None  # time per output token after the first, at most (seconds)
    tok_s: Optional[float] = None  # per-user speed (output tokens / latency), at least (tok/s)

    def __post_init__(self) -> None:
        who = f"benchmark.slo {self.name!r}" if self.name else "benchmark.slo"
        if not 0 < self.percentile <= 100:
            raise ConfigError(
                f"{who}: percentile = {self.percentile!r} is out of range",
                fix="a share of requests in (0, 100], e.g. 90",
            )
        limits = {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "tok_s": self.tok_s}
        for key, value in limits.items():
            if value is not None and not value > 0:
                raise ConfigError(
                    f"{who}: {key} = {value!r} must be positive",
                    fix="seconds for ttft_s and tpot_s, tokens per second for tok_s",
                )
        if all(v is None for v in limits.values()):
            raise ConfigError(f"{who} sets no limit", fix="give at least one of ttft_s, tpot_s, tok_s")


@dataclass
class LengthSettings:
    """A length in tokens, drawn per request: ``fixed`` (``value``), ``uniform`` (``low``..``high``,
    both included), ``normal`` (``mean``, ``std``, rounded, clipped to ``low``..``high`` where
    ``high`` is set, and to at least 1), or ``empirical`` (one of ``values``, as often as its
    ``weights`` say; no weights: equally). The compact form (``200``, ``uniform(100,400)``,
    ``normal(200,50)``, ``empirical(100:1,400:3)``) is read by ``sweep.core.workload_spec``."""

    dist: str = always("fixed")  # fixed | uniform | normal | empirical
    value: int = always(128)  # fixed
    low: int = always(1)  # uniform's range; normal's clip
    high: int = always(0)  # 0 with normal: no upper clip
    mean: float = always(0.0)  # normal
    std: float = always(0.0)  # normal: its standard deviation
    values: list[int] = always(factory=list)  # empirical: the lengths
    weights: list[float] = always(factory=list)  # empirical: how often each (empty: equally)

    def problems(self, key: str) -> list[tuple[str, object, str]]:
        out: list[tuple[str, object, str]] = []
        if self.dist not in DISTRIBUTIONS:
            return [(f"{key}.dist", self.dist, "one of " + ", ".join(DISTRIBUTIONS))]
        if self.dist == "fixed" and self.value < 1:
            out.append((f"{key}.value", self.value, "at least 1 token"))
        if self.dist == "uniform" and not 1 <= self.low <= self.high:
            out.append((f"{key}.low", [self.low, self.high], "1 <= low <= high, e.g. uniform(100,400)"))
        if self.dist == "normal" and (self.mean < 1 or self.std < 0 or (self.high and self.high < self.low)):
            out.append(
                (f"{key}.mean", [self.mean, self.std], "a mean of at least 1 and a std >= 0, e.g. normal(200,50)")
            )
        if self.dist == "empirical":
            if not self.values or any(v < 1 for v in self.values):
                out.append((f"{key}.values", list(self.values), "lengths of at least 1 token, e.g. [100, 200, 400]"))
            elif self.weights and (
                len(self.weights) != len(self.values) or any(w < 0 for w in self.weights) or not sum(self.weights) > 0
            ):
                out.append(
                    (
                        f"{key}.weights",
                        list(self.weights),
                        "one weight >= 0 per value (not all 0), or none: every value equally often",
                    )
                )
        return out


@dataclass
class WorkloadSettings:
    """``benchmark.workload``: what the requests are (sweep/bench/workloads/). Unset: the prompt set
    of ``benchmark.prompts``, as before workloads existed. The compact form of ``--workload``
    (``sharegpt:FILE``, ``synthetic:in=uniform(100,400),out=200``...) is read by
    ``sweep.core.workload_spec``; the same string may stand for the mapping in an experiment file."""

    kind: str = always("prompts")  # prompts | sharegpt | synthetic | shared-prefix | trace
    path: str = always("")  # prompts: a built-in set or a JSONL file; sharegpt and trace: the file
    multiturn: bool = always(False)  # sharegpt: every turn of each conversation, with the conversation so far
    answer_lengths: bool = always(False)  # sharegpt: the dataset's answer length (~4 characters a token) as max tokens
    input_len: LengthSettings = always(factory=LengthSettings)  # synthetic; shared-prefix: a question's
    # synthetic, shared-prefix: max tokens per request (None: the phase's)
    output_len: Optional[LengthSettings] = always(None)
    requests: int = always(256)  # synthetic: distinct requests drawn (the set the benchmark draws from)
    groups: int = always(8)  # shared-prefix: groups, each one system prompt
    prefix_len: int = always(1024)  # shared-prefix: tokens of each group's system prompt
    questions: int = always(16)  # shared-prefix: distinct questions per group
    time_scale: float = always(1.0)  # trace: arrival times multiplied by it (0.5: twice as fast)
    # tokens a request may take, input + output (None: the server's, where known)
    max_context: Optional[int] = always(None)
    # multiplies every output length the workload gives (at least 1 token); a dry run sets its max_tokens_scale
    output_scale: float = always(1.0)

    def problems(self) -> list[tuple[str, object, str]]:
        """Like ``BenchSettings.problems``, keys under ``workload``; files are checked by their loaders."""
        out: list[tuple[str, object, str]] = []

        def want(ok: bool, key: str, value: object, use: str) -> None:
            if not ok:
                out.append((f"workload.{key}", value, use))

        want(self.kind in WORKLOAD_KINDS, "kind", self.kind, "one of " + ", ".join(WORKLOAD_KINDS))
        if self.kind in ("sharegpt", "trace"):
            want(bool(self.path), "path", self.path, f"the path of the {self.kind} file")
        if self.kind in ("synthetic", "shared-prefix"):
            out += [(f"workload.{k}", v, u) for k, v, u in self.input_len.problems("input_len")]
            if self.output_len is not None:
                out += [(f"workload.{k}", v, u) for k, v, u in self.output_len.problems("output_len")]
        want(self.requests >= 1, "requests", self.requests, "at least 1 request")
        want(self.groups >= 1, "groups", self.groups, "at least 1 group")
        want(self.prefix_len >= 0, "prefix_len", self.prefix_len, "a count of tokens >= 0")
        want(self.questions >= 1, "questions", self.questions, "at least 1 question per group")
        want(self.time_scale > 0, "time_scale", self.time_scale, "a positive factor, e.g. 0.5 for twice as fast")
        want(self.output_scale > 0, "output_scale", self.output_scale, "a positive factor, e.g. 0.125")
        want(
            self.max_context is None or self.max_context >= 2,
            "max_context",
            self.max_context,
            "the model's context length in tokens, or leave it unset",
        )
        return out


def _repeated(values: list[Any]) -> Any:
    """The first value given twice in ``values`` (1 and 1.0 are one value), else None."""
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            return v
        seen.add(v)
    return None


@dataclass
class BenchSettings:
    """``benchmark``: what each point's benchmark sends to its server (``python -m sweep bench`` takes
    the same settings as options). A point's benchmark runs the single stream, then the concurrency
    levels, then the rates."""

    prompts: str = always("coding")  # built-in set name (coding, encyclopedic) or a JSONL file path
    # what the requests are (sharegpt, synthetic lengths, shared prefixes, a trace); set, it wins over
    # ``prompts``; None: the prompt set of ``prompts``, as before workloads
    workload: Optional[WorkloadSettings] = None
    api: str = always("generate")  # generate (SGLang's native /generate), completions, chat
    model: str = always("")  # "model" of OpenAI-route requests; empty = the server's served_model_name
    seed: int = always(0)  # seeds the prompt choice
    temperature: float = always(0.0)  # sampling temperature of every request (0: greedy)
    ignore_eos: bool = always(True)  # every request then produces exactly max_tokens
    # seconds one request may take, sent to last token; past it the request is recorded as failed
    # ("timeout after ...s") and the benchmark goes on (a dry run caps it at 120)
    request_timeout_s: float = always(600.0)
    flush_between_levels: bool = always(True)  # POST /flush_cache before each level (resets accept length)
    server_metrics: bool = always(True)  # scrape /metrics around and during each level when the server has it
    single_stream: SingleStreamSettings = always(factory=SingleStreamSettings)
    concurrency: ConcurrencySettings = always(factory=ConcurrencySettings)
    # open-loop levels after the concurrency levels, in requests/s (empty: none); how they send:
    # ``open_loop`` (``open_loop.replay``: a trace at its own timing).
    rates: list[float] = field(default_factory=list)
    open_loop: OpenLoopSettings = field(default_factory=OpenLoopSettings)
    # measurements of each concurrency level, back to back on the same server (repeat 0, 1, ...),
    # before the next level: the report pools them and measures the level-wide noise from their
    # spread, so that picks can be decided without relaunching (1: each level once)
    repeats: int = 1
    # the service-level objectives the report judges every configuration by (they change no
    # measurement; the report reads them from the results directory's experiment.yaml)
    slo: list[SLOSettings] = never(factory=list)

    def __post_init__(self) -> None:
        names = [s.name for s in self.slo if s.name]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(
                f"benchmark.slo names {', '.join(map(repr, dupes))} more than once", fix="give every SLO its own name"
            )

    def problems(self) -> list[tuple[str, object, str]]:
        """Every value the types cannot check that cannot run: ``(key under benchmark, value, what to
        use instead)``. The one place these rules live: the experiment loader reports them with the
        file's line, ``python -m sweep bench`` with its option, each in its own error class."""
        ss, cc = self.single_stream, self.concurrency
        out: list[tuple[str, object, str]] = []

        def want(ok: bool, key: str, value: object, use: str) -> None:
            if not ok:
                out.append((key, value, use))

        want(self.api in API_NAMES, "api", self.api, "one of " + ", ".join(API_NAMES))
        want(
            isinstance(self.repeats, int) and self.repeats >= 1,
            "repeats",
            self.repeats,
            "a count >= 1 (1: each level once)",
        )
        want(ss.runs >= 0, "single_stream.runs", ss.runs, "a count >= 0 (0 skips the single stream)")
        want(ss.warmup >= 0, "single_stream.warmup", ss.warmup, "a count >= 0")
        want(ss.max_tokens >= 1, "single_stream.max_tokens", ss.max_tokens, "at least 1 token")
        want(cc.max_tokens >= 1, "concurrency.max_tokens", cc.max_tokens, "at least 1 token")
        want(
            all(isinstance(c, int) and c >= 1 for c in cc.levels),
            "concurrency.levels",
            list(cc.levels),
            "positive integers, e.g. [1, 8, 64]",
        )
        twice = _repeated(cc.levels)
        want(
            not twice,
            "concurrency.levels",
            list(cc.levels),
            f"each level once ({twice} is given twice; a level's rows are keyed by it), e.g. {sorted(set(cc.levels))}",
        )
        want(cc.refine_max >= 0, "concurrency.refine_max", cc.refine_max, "a count of added levels >= 0, e.g. 4")
        want(
            cc.refine_ratio > 1,
            "concurrency.refine_ratio",
            cc.refine_ratio,
            "a ratio above 1 (stop bisecting when hi/lo is at most it), e.g. 1.2",
        )
        want(self.concurrency.slo_time_scale > 0, "concurrency.slo_time_scale", cc.slo_time_scale, "a positive factor")
        want(cc.rounds >= 1, "concurrency.rounds", cc.rounds, "at least 1 round")
        want(
            cc.requests_per_level is None or cc.requests_per_level >= 1,
            "concurrency.requests_per_level",
            cc.requests_per_level,
            "at least 1 request per level, or leave it unset (rounds x concurrency)",
        )
        want(self.request_timeout_s > 0, "request_timeout_s", self.request_timeout_s, "a positive number of seconds")
        want(
            all(isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0 for r in self.rates),
            "rates",
            list(self.rates),
            "positive request rates in requests/s, e.g. [1, 2, 4, 8]",
        )
        twice_rate = _repeated(self.rates)
        want(
            not twice_rate,
            "rates",
            list(self.rates),
            f"each rate once ({twice_rate} is given twice; a level's rows are keyed by it), e.g. "
            f"{sorted(set(self.rates))}",
        )
        out += self.open_loop.problems()
        want(
            not self.open_loop.replay or (self.workload is not None and self.workload.kind == "trace"),
            "open_loop.replay",
            self.open_loop.replay,
            "a trace workload (workload.kind: trace), or replay: false",
        )
        if self.workload is not None:
            out += self.workload.problems()
        return out

    def requests_at(self, concurrency: int) -> int:
        c = self.concurrency
        return c.requests_per_level if c.requests_per_level is not None else c.rounds * concurrency


@dataclass
class DecideSettings:
    """``decide``: after the grid, spend measurement on the picks that are within noise (an SLO's pick
    against its runner-up, a level's best against the second; sweep/search/decide.py). Each round, an
    open decision's two candidates are relaunched back to back on one host, in alternating order
    (A B, then B A), measuring only the levels their figures are read at (every measurement kept as a
    ``repeat`` of the level, with its ``decide_round``), until the interval of their paired difference
    excludes zero (decided), lies within +-``margin`` (equal), or the budget runs out: ``budget_s``
    host-seconds of relaunches, at most ``budget_share`` of the host time the grid's points took, and at
    most ``max_repeats`` measurements of one level of one point (the grid's included: ``max_repeats - 1``
    paired rounds). An undecided pick stays the grid's. Off unless ``enabled``."""

    enabled: bool = False  # run the decide phase after the grid (false: the grid's picks stand as measured)
    margin: float = 0.03  # relative: two candidates closer than this are equal for any practical purpose
    budget_s: Optional[float] = None  # host-seconds of re-measurement (launch + benchmark); None: no cap of its own
    budget_share: float = 0.25  # of the host time the grid's points took: the cap that keeps a sweep's size
    max_repeats: int = 4  # measurements of one level of one point, the grid's first included (3 paired rounds)

    def __post_init__(self) -> None:
        if not 0 < self.margin < 1:
            raise ConfigError(
                f"decide.margin = {self.margin!r} is out of range",
                fix="a relative difference between 0 and 1, e.g. 0.03 for 3 %",
            )
        if self.budget_s is not None and not self.budget_s > 0:
            raise ConfigError(
                f"decide.budget_s = {self.budget_s!r} is out of range",
                fix="positive host-seconds, e.g. 1800, or leave it out (budget_share caps it)",
            )
        if not 0 < self.budget_share <= 10:
            raise ConfigError(
                f"decide.budget_share = {self.budget_share!r} is out of range",
                fix="a share of the grid's host time in (0, 10], e.g. 0.25",
            )
        if self.max_repeats < 3:
            raise ConfigError(
                f"decide.max_repeats = {self.max_repeats!r} is out of range",
                fix="at least 3 measurements of a level (the grid's and two paired rounds: a pair's spread needs two), e.g. 4",
            )
