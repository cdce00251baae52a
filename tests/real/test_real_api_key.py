"""Real SGLang (CPU backend) started with ``--api-key`` and ``--admin-api-key`` (issue 14, item 10),
one point on a CPU host: the readiness check and the benchmark send the key, so the point is measured; the server printed
its key (``server_args=ServerArgs(... api_key='...')``) and its log, log tail and reaped command
lines show ``<redacted>``; while it runs, the routes answer as the fake's do (tests/fake/
test_fake_api_key.py): 401 ``{"error":"Unauthorized"}`` without the key, ``/health`` and
``/metrics`` open, and ``/flush_cache`` (an admin route) wanting the admin key, which the benchmark
sends it."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings
from sweep.experiment.config import CpuConfig, ReapConfig, Timeouts
from sweep.host import reaper
from sweep.host.gpu import NoGpus
from sweep.host.point import HostContext, LaunchPoint, LaunchSpec, run_launch
from tests.conftest import free_port

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(900)]

KEY = "sk-real-key-0123456789"
ADMIN = "sk-real-admin-key-4242"
SWEEP = f"real-key-{uuid.uuid4().hex[:6]}"
BENCH = BenchSettings(
    prompts="coding",
    single_stream=SingleStreamSettings(runs=1, warmup=0, max_tokens=8),
    concurrency=ConcurrencySettings(levels=[2], rounds=1, max_tokens=8),
    request_timeout_s=120,
)


def test_real_server_with_a_key(real_sglang, tmp_path):
    host = HostContext(f"cpu-{uuid.uuid4().hex[:6]}", NoGpus(), "node")
    flags = {**real_sglang.base_flag_map(free_port()), "api-key": KEY, "admin-api-key": ADMIN}
    spec = LaunchSpec(
        SWEEP,
        real_sglang.launcher,
        flags,
        dict(real_sglang.env),
        str(tmp_path / "server.log"),
        [LaunchPoint("p" + uuid.uuid4().hex[:8], "label", BENCH)],
        Timeouts(load_s=300, capture_s=300, ready_s=180, total_s=420, stall_s=180, stop_grace_s=20),
        ReapConfig(wait_s=20),
        paths={"model_path": str(real_sglang.models / "target")},
        cpu=CpuConfig(min_free_mem_gib=1.0),
    )
    seen: dict[str, tuple[int, str]] = {}

    def probe(ev: dict) -> None:  # once the benchmark starts, the server is up: ask it as a stranger would
        if ev.stage != "benchmark" or seen:
            return
        url = f"http://127.0.0.1:{spec.port}"
        for method, path in (
            ("GET", "/health"),
            ("GET", "/metrics"),
            ("GET", "/server_info"),
            ("GET", "/v1/models"),
            ("POST", "/generate"),
            ("POST", "/v1/chat/completions"),
            ("GET", "/nonexistent"),
        ):
            r = httpx.request(method, url + path, json={}, timeout=30)
            seen[path] = (r.status_code, r.text if r.status_code == 401 else "")
        r = httpx.get(url + "/server_info", headers={"Authorization": f"bearer {KEY}"}, timeout=30)
        seen["keyed /server_info"] = (r.status_code, json.dumps(r.json().get("api_key")))
        for who, key in (("api key", KEY), ("admin key", ADMIN)):  # an admin route: the admin key only
            seen[f"/flush_cache with the {who}"] = (
                httpx.post(url + "/flush_cache", headers={"Authorization": f"Bearer {key}"}, timeout=30).status_code,
                "",
            )
        seen["/v1/models with the admin key"] = (
            httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30).status_code,
            "",
        )

    try:
        [r] = run_launch(spec, host, probe).points
    finally:
        left = reaper.marked(reaper.Marker(SWEEP, host.name))
        for p in left:
            p.kill()
    assert not left
    assert r.status == "ok", (r.failure_phase, r.failure_reason, r.log_tail[-3000:])
    assert all(r.requests.column("ok").to_pylist())
    assert seen["/health"][0] == 200 and seen["/metrics"][0] == 200
    for path in ("/server_info", "/v1/models", "/generate", "/v1/chat/completions", "/nonexistent"):
        assert seen[path] == (401, '{"error":"Unauthorized"}'), (path, seen[path])
    assert seen["keyed /server_info"] == (200, json.dumps(KEY))  # SGLang shows its key to whoever has it
    # --admin-api-key: /flush_cache wants it and refuses the api key, /v1/models the reverse (as the
    # fake: tests/fake/test_fake_api_key.py); the benchmark sent it there, so every level was flushed
    assert seen["/flush_cache with the api key"][0] == 401 and seen["/flush_cache with the admin key"][0] == 200
    assert seen["/v1/models with the admin key"][0] == 401
    assert r.levels.column("flushed").to_pylist() == [True]
    log = (tmp_path / "server.log").read_text()
    assert KEY not in log and "api_key='<redacted>'" in log
    assert ADMIN not in log and "admin_api_key='<redacted>'" in log
    for secret in (KEY, ADMIN):
        assert secret not in json.dumps({"tail": r.log_tail, "reaped": r.reaped}, default=str)
    assert r.reaped["killed"]  # the server's command line was recorded (cut at 300 characters), without the key
