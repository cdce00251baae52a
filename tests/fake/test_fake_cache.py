"""The fake's prefix cache (``sweep/fake/cache.py``): what a later request finds cached, as real
SGLang reports it (checked against the real server in tests/real/test_real_workloads.py)."""

from __future__ import annotations

import httpx

from sweep.fake import text
from sweep.fake.cache import PrefixCache
from tests.bench.bench_fake_server import start_fake


def test_the_longest_cached_prefix_but_the_last_token_and_lru_eviction():
    c = PrefixCache(capacity=10)
    assert c.match([1, 2, 3]) == 0
    c.insert([1, 2, 3, 4])
    assert c.match([1, 2, 3, 4, 5]) == 4 and c.match([1, 2, 3, 4]) == 3 and c.match([1, 9]) == 1
    c.insert([7, 8, 9, 10, 11, 12, 13])  # 11 tokens held: the oldest sequence goes
    assert c.match([1, 2, 3, 4, 5]) == 0 and c.match([7, 8, 9, 0]) == 3
    c.clear()
    assert c.match([7, 8, 9, 0]) == 0
    assert text.prompt_ids("abcdefgh") == text.prompt_ids("abcdefghij")[:2] and len(text.prompt_ids("abcdefghi")) == 3


def test_a_second_turn_reports_the_first_as_cached_until_a_flush(tmp_path):
    fake = start_fake(tmp_path, speed=50.0)
    try:

        def gen(ids: list[int], n: int) -> dict:
            body = {"input_ids": ids, "sampling_params": {"max_new_tokens": n, "ignore_eos": True}}
            return httpx.post(fake.url + "/generate", json=body, timeout=30).json()

        first = gen(list(range(100, 140)), 8)
        assert first["meta_info"]["cached_tokens"] == 0
        ids = list(range(100, 140)) + first["output_ids"] + [5, 6, 7]
        second = gen(ids, 4)["meta_info"]
        assert second["prompt_tokens"] == len(ids) and second["cached_tokens"] == 40 + 8 - 1
        assert second["cached_tokens_details"]["device"] == 47
        assert httpx.post(fake.url + "/flush_cache", timeout=10).status_code == 200
        assert gen(ids, 4)["meta_info"]["cached_tokens"] == 0
    finally:
        fake.kill()
