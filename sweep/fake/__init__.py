"""A fake SGLang server, indistinguishable from outside: same command line, startup phases and log
lines, HTTP API, process tree, batching and speculative speed-up, and failures; no GPU needed.

Run it as ``python -m sweep.fake <launch_server flags> [--fake-* flags]``. The rest of the sweep reaches
it only through that command line, its HTTP API and the GPU ledger (sweep.core.ledger). Modules:
``args`` (flags), ``rules`` (ServerArgs semantics), ``model`` (the performance model), ``startup``
(phases), ``progress`` (rank 0's tqdm bars), ``procs`` (process tree; GPU memory in the ledger of sweep.core.ledger),
``engine`` (scheduler), ``adaptive`` (SGLang's adaptive speculation: per batch-size tier, the step count
its EMA rule picks), ``server``, ``openai_api`` and ``metrics`` (HTTP), ``main`` (the launch).

Real SGLang is the arbiter: tests/fake/test_fake_vs_real.py compares the fake with what the real
server printed and answered (shared/sglang-cpu/transcripts) and lists the GPU-only differences the
fake keeps (CUDA graph capture, TP-rank prefixes and titles with tp > 1).
"""

from sweep.fake.args import DEFAULT_VERSION, SUPPORTED_VERSIONS

__all__ = ["DEFAULT_VERSION", "SGLANG_VERSION", "SUPPORTED_VERSIONS"]

SGLANG_VERSION = DEFAULT_VERSION  # the version imitated unless --fake-version says otherwise
