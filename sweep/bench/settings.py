"""What a benchmark run does: the ``benchmark`` section of an experiment file, and the options of
``python -m sweep bench``. Plain dataclasses, so omegaconf can use them as a typed schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class SingleStreamSettings:
    runs: int = 5  # measured runs, one request at a time
    warmup: int = 2  # runs before them, recorded as phase=warmup and left out of the figures
    max_tokens: int = 2048


@dataclass
class ConcurrencySettings:
    levels: list[int] = field(default_factory=lambda: [1, 2, 5, 10, 30, 70, 100, 250])
    # requests sent at each level; None means rounds * concurrency, so every level keeps exactly
    # C requests in flight for `rounds` full turns
    requests_per_level: Optional[int] = None
    rounds: int = 2
    max_tokens: int = 512


@dataclass
class BenchSettings:
    prompts: str = "coding"  # built-in set name (coding, encyclopedic) or a JSONL file path
    api: str = "generate"  # generate (SGLang's native /generate), completions, chat
    model: str = ""  # "model" of OpenAI-route requests; empty = the server's served_model_name
    seed: int = 0  # seeds the prompt choice
    temperature: float = 0.0
    ignore_eos: bool = True  # every request then produces exactly max_tokens
    request_timeout_s: float = 600.0
    flush_between_levels: bool = True  # POST /flush_cache before each level (resets accept length)
    server_metrics: bool = True  # scrape /metrics around and during each level when the server has it
    single_stream: SingleStreamSettings = field(default_factory=SingleStreamSettings)
    concurrency: ConcurrencySettings = field(default_factory=ConcurrencySettings)

    def requests_at(self, concurrency: int) -> int:
        c = self.concurrency
        return c.requests_per_level if c.requests_per_level is not None else c.rounds * concurrency
