"""``--api-key`` on the fake, as real SGLang guards its routes (``sglang/srt/utils/auth.py`` of 0.5.10
and 0.5.23, and what the CPU build 7f8f030 answered on loopback): every route but ``/health*`` and
``/metrics*`` (0.5.23: ``/ready*`` too) and ``OPTIONS`` needs ``Authorization: Bearer <key>`` (the
scheme in any case) and answers 401 ``{"error":"Unauthorized"}`` (JSON) without it, unknown routes
included; ``/server_info`` with the key shows it in ``api_key``, as SGLang's does. Then the sweep's
``bench`` command against such a server: with ``--api-key`` or ``$SGLANG_API_KEY``, and without."""

from __future__ import annotations

import httpx
import pytest

from sweep.fake.server import authorized
from tests.conftest import run_sweep_cli

KEY = "sk-fake-test-key-42"
ADMIN = "sk-fake-admin-key-7"
GUARDED = [
    ("GET", "/server_info"),
    ("GET", "/get_server_info"),
    ("GET", "/v1/models"),
    ("POST", "/generate"),
    ("POST", "/v1/completions"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/flush_cache"),
    ("GET", "/model_info"),
    ("GET", "/nonexistent"),
]


@pytest.fixture(scope="module")
def keyed(module_starter):
    server = module_starter("--api-key", KEY, "--enable-metrics")
    server.wait_ready()
    return server


@pytest.mark.parametrize("method,path", GUARDED)
def test_guarded_routes_answer_401_json(keyed, method, path):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": f"Token {KEY}"}):
        r = httpx.request(method, keyed.base + path, headers=headers, json={}, timeout=30)
        assert r.status_code == 401, (path, headers, r.status_code)
        assert r.headers["content-type"].startswith("application/json") and r.text == '{"error":"Unauthorized"}'


@pytest.mark.parametrize("path", ["/health", "/health_generate", "/metrics"])
def test_probe_routes_open(keyed, path):
    assert httpx.get(keyed.base + path, timeout=30).status_code == 200


def test_the_key_opens_every_route_in_any_case_of_the_scheme(keyed):
    for scheme in ("Bearer", "bearer", "BEARER"):
        r = httpx.get(keyed.base + "/v1/models", headers={"Authorization": f"{scheme} {KEY}"}, timeout=30)
        assert r.status_code == 200
    r = httpx.post(
        keyed.base + "/generate",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"text": "hi", "sampling_params": {"max_new_tokens": 4}},
        timeout=30,
    )
    assert r.status_code == 200 and r.json()["meta_info"]["completion_tokens"] == 4
    info = httpx.get(keyed.base + "/server_info", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).json()
    assert info["api_key"] == KEY  # as real SGLang: the sweep never stores server_info
    assert (
        httpx.get(keyed.base + "/nonexistent", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).status_code
        == 404
    )
    assert '"GET /v1/models HTTP/1.1" 401 Unauthorized' in keyed.log()  # uvicorn's access line


def test_auth_decision_per_version():
    assert authorized("GET", "/v1/models", None, None, "0.5.10")  # no key configured: open
    assert authorized("OPTIONS", "/generate", None, KEY, "0.5.10")
    assert not authorized("GET", "/ready", None, KEY, "0.5.10")  # 0.5.10 (and the CPU build): guarded
    assert authorized("GET", "/ready", None, KEY, "0.5.23")  # 0.5.23 opened /ready* for probes
    assert authorized("GET", "/metrics", None, KEY, "0.5.23") and authorized(
        "GET", "/health_generate", None, KEY, "0.5.10"
    )
    assert not authorized("GET", "/v1/models", f"Bearer  {KEY}", KEY, "0.5.10")  # split(" ", 1): exact
    assert not authorized("GET", "/v1/models", "Bearer", KEY, "0.5.10")


def test_admin_routes_want_the_admin_key():
    """``--admin-api-key``: SGLang's ADMIN_OPTIONAL routes want it and refuse the api key; the other
    routes want the api key (open when only an admin key is set)."""
    both = dict(api_key=KEY, admin_api_key=ADMIN, version="0.5.10")
    assert not authorized("POST", "/flush_cache", f"Bearer {KEY}", **both)
    assert authorized("POST", "/flush_cache", f"Bearer {ADMIN}", **both)
    assert authorized("POST", "/freeze_gc", f"bearer {ADMIN}", **both)
    assert not authorized("POST", "/generate", f"Bearer {ADMIN}", **both)
    assert authorized("POST", "/generate", f"Bearer {KEY}", **both)
    only_admin = dict(api_key=None, admin_api_key=ADMIN, version="0.5.23")
    assert authorized("POST", "/generate", None, **only_admin) and authorized("GET", "/server_info", None, **only_admin)
    assert not authorized("GET", "/flush_cache", None, **only_admin)
    assert authorized("POST", "/flush_cache", f"Bearer {KEY}", KEY, "0.5.10")  # no admin key: the api key


@pytest.fixture(scope="module")
def admin_keyed(module_starter):
    server = module_starter("--api-key", KEY, "--admin-api-key", ADMIN, "--fake-version", "0.5.23")
    server.wait_ready()  # 0.5.23's warmup posts /freeze_gc with the admin key, as SGLang's does
    return server


def test_admin_keyed_server(admin_keyed):
    server = admin_keyed
    bearer = lambda k: {"Authorization": f"Bearer {k}"}  # noqa: E731
    assert httpx.post(server.base + "/flush_cache", headers=bearer(KEY), timeout=30).status_code == 401
    assert httpx.post(server.base + "/flush_cache", headers=bearer(ADMIN), timeout=30).status_code == 200
    assert httpx.get(server.base + "/v1/models", headers=bearer(ADMIN), timeout=30).status_code == 401
    assert httpx.get(server.base + "/v1/models", headers=bearer(KEY), timeout=30).status_code == 200
    assert '"POST /freeze_gc HTTP/1.1" 200' in server.log()


@pytest.mark.slow
def test_bench_cli_with_and_without_the_key(keyed, tmp_path):
    common = [
        "bench",
        "--url",
        keyed.base,
        "--runs",
        "1",
        "--warmup",
        "0",
        "--single-max-tokens",
        "8",
        "--levels",
        "2",
        "--rounds",
        "1",
        "--max-tokens",
        "8",
        "--quiet",
    ]
    r = run_sweep_cli(*common, "--api-key", KEY, "--out", str(tmp_path / "a"), timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    import polars as pl

    reqs = pl.read_parquet(tmp_path / "a" / "requests.parquet")
    assert reqs["ok"].all() and reqs.height == 3
    assert KEY not in r.stdout + r.stderr
    # from the environment: the key stays out of the process list
    r = run_sweep_cli(*common, timeout=120, env={"SGLANG_API_KEY": KEY})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # no key, or the wrong one: refused before anything is measured (exit 6), saying why
    for extra in ([], ["--api-key", "sk-wrong"]):
        r = run_sweep_cli(*common, *extra, timeout=60, env={"SGLANG_API_KEY": ""})
        assert r.returncode == 6, r.stdout[-2000:] + r.stderr[-2000:]
        assert "401 Unauthorized" in r.stderr and "--api-key" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_bench_cli_with_an_admin_key(admin_keyed, tmp_path):
    """/flush_cache wants the admin key: without it the benchmark stops before measuring (exit 6),
    naming the option; with it (or ``$SGLANG_ADMIN_API_KEY``) every level is flushed."""
    common = [
        "bench",
        "--url",
        admin_keyed.base,
        "--runs",
        "1",
        "--warmup",
        "0",
        "--single-max-tokens",
        "8",
        "--levels",
        "2",
        "--rounds",
        "1",
        "--max-tokens",
        "8",
        "--quiet",
        "--api-key",
        KEY,
    ]
    r = run_sweep_cli(*common, timeout=60, env={"SGLANG_ADMIN_API_KEY": ""})
    assert r.returncode == 6, r.stdout[-2000:] + r.stderr[-2000:]
    assert "401 to POST /flush_cache" in r.stderr and "--admin-api-key" in r.stderr and "Traceback" not in r.stderr
    r = run_sweep_cli(*common, "--out", str(tmp_path / "a"), timeout=120, env={"SGLANG_ADMIN_API_KEY": ADMIN})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    import polars as pl

    assert pl.read_parquet(tmp_path / "a" / "levels.parquet")["flushed"].to_list() == [True]
    assert ADMIN not in r.stdout + r.stderr
    r = run_sweep_cli(*common, "--no-flush", timeout=120, env={"SGLANG_ADMIN_API_KEY": ""})  # or no flush at all
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.mark.slow
def test_the_benchmark_takes_its_keys_explicitly(admin_keyed):
    """The benchmark's keys travel in the ``Endpoint`` it is given, nothing ambient: a bare URL sends
    none (refused at once), the endpoint's keys open every request and its admin key the flushes;
    neither key shows in the endpoint's repr (it lands in logs and tracebacks)."""
    from sweep.bench.client import Endpoint
    from sweep.bench.runner import run
    from sweep.core.errors import BenchError
    from sweep.core.settings import BenchSettings, ConcurrencySettings, SingleStreamSettings

    settings = BenchSettings(
        single_stream=SingleStreamSettings(runs=1, warmup=0, max_tokens=8),
        concurrency=ConcurrencySettings(levels=[2], rounds=1, max_tokens=8),
    )
    with pytest.raises(BenchError, match="401"):
        run(admin_keyed.base, settings)
    with pytest.raises(BenchError, match="401 to POST /flush_cache"):
        run(Endpoint(admin_keyed.base, api_key=KEY), settings)
    server = Endpoint(admin_keyed.base, api_key=KEY, admin_key=ADMIN)
    res = run(server, settings)
    assert all(res.requests.column("ok").to_pylist()) and res.levels.column("flushed").to_pylist() == [True]
    assert KEY not in repr(server) and ADMIN not in repr(server) and admin_keyed.base in repr(server)
