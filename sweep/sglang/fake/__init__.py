"""A fake SGLang server, indistinguishable from outside: same command line, startup phases and log
lines, HTTP API, process tree, batching and speculative speed-up, and failures; no GPU needed.

Run it as ``python -m sweep.fake_sglang <launch_server flags> [--fake-* flags]``. Modules:
``args`` (flags), ``rules`` (ServerArgs semantics), ``model`` (the performance model), ``startup``
(phases), ``procs`` (process tree), ``ledger`` (fake GPU memory), ``engine`` (scheduler), ``server``
and ``openai_api`` (HTTP), ``main`` (the launch).
"""

from sweep.sglang.fake.args import DEFAULT_VERSION, SUPPORTED_VERSIONS

SGLANG_VERSION = DEFAULT_VERSION  # the version imitated unless --fake-version says otherwise

__all__ = ["SGLANG_VERSION", "SUPPORTED_VERSIONS"]
