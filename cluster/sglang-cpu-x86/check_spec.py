"""Greedy speculative decoding must give the baseline's tokens: a check on a real SGLang CPU install.

    python cluster/sglang-cpu-x86/check_spec.py --env ~/.cache/sweep-sglang-cpu-avx2/env.sh \\
        [--attention-backend torch_native] [--models ~/.cache/sweep/tiny-models] [--port-base 33000]

Starts, one at a time, a baseline server and one server per speculative setup (NGRAM; EAGLE3 as a
chain and as a tree with the ``eagle3`` drafter; STANDALONE with the target as its own drafter),
sends the same prompts to each (greedy, ``ignore_eos``, one request at a time and then all of them
in one batched request), and compares every ``output_ids`` with the baseline's. Prints per server
the time to ready, the accept length per prompt (``meta_info.spec_accept_length``) and whether the
tokens are equal; exits 1 if any server differs or fails. Each server is stopped (its whole process
group) before the next starts.

Any python runs it (stdlib only). The server's python and environment come from ``--env`` (an
install's ``env.sh``: ``SGLANG_CPU_PYTHON``, ``SGLANG_CPU_LD_PRELOAD``, ``SGLANG_USE_CPU_ENGINE``,
``SGLANG_CPU_ATTENTION_BACKEND``), else from this process's environment. Importable:
:func:`run_check` returns the rows, :func:`format_table` prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

PROMPTS = [
    "The speculative decoding server accepts the draft token and the model returns the",
    "def draft(model, token):\n    return model(token)\n\ndef draft(model, token):\n    return",
    "one two three four one two three four one two three four one two three four one two",
]
MAX_NEW_TOKENS = 48


@dataclass
class Setup:
    name: str
    args: List[str]  # speculative flags; "{models}" is replaced by the models folder


SETUPS = [
    Setup("baseline", []),
    Setup("NGRAM, 8 draft tokens", ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8"]),
    Setup("EAGLE3 chain: steps 3, topk 1, 4 draft tokens",
          ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "{models}/eagle3",
           "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]),
    Setup("EAGLE3 tree: steps 2, topk 2, 4 draft tokens",
          ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "{models}/eagle3",
           "--speculative-num-steps", "2", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "4"]),
    Setup("STANDALONE (target drafts): steps 3, topk 1, 4 draft tokens",
          ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "{models}/target",
           "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]),
    # Equality cannot see a wrong draft (it only lowers the accept length); the target drafting for
    # itself accepts drafts where the random EAGLE-3 drafter accepts none, so its accept lengths
    # exercise the draft passes, here the multi-step draft decode with two candidates per request.
    # (Not every draft: SGLang's STANDALONE feeds its drafter EAGLE's input, the sequence shifted by
    # one token.) Compare them across backends.
    Setup("STANDALONE tree (target drafts): steps 3, topk 2, 4 draft tokens",
          ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "{models}/target",
           "--speculative-num-steps", "3", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "4"]),
]


@dataclass
class Row:
    name: str
    ready_s: Optional[float] = None
    accept_lengths: List[float] = field(default_factory=list)  # per prompt, one request at a time
    equal: Optional[bool] = None  # one request at a time: output_ids == the baseline's
    batch_equal: Optional[bool] = None  # all prompts in one request
    error: Optional[str] = None
    output_ids: List[List[int]] = field(default_factory=list)
    first_diff: List[Optional[int]] = field(default_factory=list)  # per prompt: first token that differs
    # per prompt where it differs: the baseline's top-2 logprob gap at that token (a tiny gap is a
    # near-tie that rounding can flip; a wide one points at a wrong attention)
    diff_gap: List[Optional[float]] = field(default_factory=list)
    # baseline only: per prompt and generated token, its top-2 logprob gap
    gaps: List[List[Optional[float]]] = field(default_factory=list)
    log: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.equal is not False and self.batch_equal is not False


def env_from_file(path: str) -> Dict[str, str]:
    """The environment after sourcing an install's env.sh."""
    out = subprocess.run(["bash", "-c", 'set -a; source "$0" >/dev/null; env -0', path],
                         check=True, capture_output=True).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def _post(url: str, body: dict, timeout: float) -> object:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=10) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _stop(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM to the server's whole process group, SIGKILL what is left after grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        proc.poll()  # reap the launcher, so that a zombie does not count as alive
        if not _group_alive(proc.pid):
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()
            if not _group_alive(proc.pid):
                break
            time.sleep(0.2)
    proc.poll()


def _tail(path: str, n: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def _top2_gaps(url: str, prompts: Sequence[str], max_new_tokens: int, timeout: float) -> List[List[Optional[float]]]:
    """Per prompt and generated token: the gap between the baseline's two likeliest tokens."""
    params = {"temperature": 0, "max_new_tokens": max_new_tokens, "ignore_eos": True}
    out = []
    for p in prompts:
        res = _post(url + "/generate", {"text": p, "sampling_params": params, "return_logprob": True,
                                        "top_logprobs_num": 2}, timeout)
        tops = res["meta_info"].get("output_top_logprobs") or []
        out.append([t[0][0] - t[1][0] if t and len(t) > 1 and t[1][0] is not None else None for t in tops])
    return out


def _generate(url: str, prompts: Sequence[str], max_new_tokens: int, timeout: float, batched: bool):
    params = {"temperature": 0, "max_new_tokens": max_new_tokens, "ignore_eos": True}
    if batched:
        res = _post(url + "/generate", {"text": list(prompts), "sampling_params": params}, timeout)
        return list(res)
    return [_post(url + "/generate", {"text": p, "sampling_params": params}, timeout) for p in prompts]


def _first_diff(a: List[int], b: List[int]) -> Optional[int]:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _gap_at(baseline: Row, prompt: int, token: Optional[int]) -> Optional[float]:
    try:
        return None if token is None else baseline.gaps[prompt][token]
    except (IndexError, TypeError):
        return None


def run_check(
    python: str,
    env: Dict[str, str],
    attention_backend: str,
    models: str,
    port_base: int = 33000,
    setups: Sequence[Setup] = SETUPS,
    prompts: Sequence[str] = PROMPTS,
    max_new_tokens: int = MAX_NEW_TOKENS,
    ready_timeout: float = 420.0,
    request_timeout: float = 300.0,
    log_dir: Optional[str] = None,
    extra_args: Sequence[str] = (),
    progress=None,
) -> List[Row]:
    """Start each setup's server in turn (the first one is the baseline), generate, compare.

    env: the server's environment (LD_PRELOAD is taken from SGLANG_CPU_LD_PRELOAD when set).
    Returns one Row per setup; a setup that fails to start or to answer has .error set.
    """
    log_dir = log_dir or tempfile.mkdtemp(prefix="check_spec-")
    os.makedirs(log_dir, exist_ok=True)
    server_env = dict(env)
    server_env.setdefault("SGLANG_USE_CPU_ENGINE", "1")
    if server_env.get("SGLANG_CPU_LD_PRELOAD"):
        server_env["LD_PRELOAD"] = server_env["SGLANG_CPU_LD_PRELOAD"]
    rows: List[Row] = []
    baseline: Optional[Row] = None
    for i, setup in enumerate(setups):
        port = port_base + i
        url = f"http://127.0.0.1:{port}"
        row = Row(setup.name, log=os.path.join(log_dir, f"server_{i}.log"))
        cmd = [python, "-m", "sglang.launch_server", "--model-path", f"{models}/target", "--device", "cpu",
               "--host", "127.0.0.1", "--port", str(port), "--attention-backend", attention_backend,
               "--disable-overlap-schedule", "--max-total-tokens", "16384", "--max-running-requests", "16",
               *extra_args, *(a.replace("{models}", models) for a in setup.args)]
        t0 = time.monotonic()
        with open(row.log, "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            proc = subprocess.Popen(cmd, env=server_env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd="/")
        try:
            while not _healthy(url):
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited with {proc.returncode} before ready")
                if time.monotonic() - t0 > ready_timeout:
                    raise RuntimeError(f"not ready after {ready_timeout:.0f} s")
                time.sleep(1.0)
            row.ready_s = time.monotonic() - t0
            single = _generate(url, prompts, max_new_tokens, request_timeout, batched=False)
            batch = _generate(url, prompts, max_new_tokens, request_timeout, batched=True)
            row.output_ids = [r["output_ids"] for r in single]
            row.accept_lengths = [r["meta_info"].get("spec_accept_length") for r in single]
            if baseline is None:
                baseline = row
                row.batch_equal = [r["output_ids"] for r in batch] == row.output_ids
                try:  # a separate request, so that the compared outputs are plain ones
                    row.gaps = _top2_gaps(url, prompts, max_new_tokens, request_timeout)
                except Exception:  # noqa: BLE001 (only a diagnostic)
                    row.gaps = []
            else:
                row.equal = row.output_ids == baseline.output_ids
                row.first_diff = [_first_diff(a, b) for a, b in zip(row.output_ids, baseline.output_ids)]
                row.diff_gap = [_gap_at(baseline, i, d) for i, d in enumerate(row.first_diff)]
                row.batch_equal = [r["output_ids"] for r in batch] == baseline.output_ids
        except Exception as e:  # noqa: BLE001 (a row per failure, the next setup still runs)
            row.error = f"{type(e).__name__}: {e}"
            tail = _tail(row.log)
            if tail:
                row.error += "\n    " + tail.replace("\n", "\n    ")
        finally:
            _stop(proc)
        if baseline is None and row.error is None:
            baseline = row
        rows.append(row)
        with open(os.path.join(log_dir, "rows.json"), "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
        if progress:
            progress(row)
        if baseline is None:
            break  # no baseline, nothing to compare with
    return rows


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def format_table(rows: Sequence[Row]) -> str:
    lines = ["| server | ready after | accept length per prompt | equal (one at a time) | equal (batched) |",
             "|---|---|---|---|---|"]
    for r in rows:
        acc = ", ".join(_fmt(a) for a in r.accept_lengths) if any(a is not None for a in r.accept_lengths) else "-"
        ready = f"{r.ready_s:.0f} s" if r.ready_s is not None else "-"
        eq = "FAILED" if r.error else _fmt(r.equal)
        if r.equal is False:
            eq += " (" + "; ".join(
                f"prompt {i + 1} from token {d}" + (f", baseline top-2 gap {g:.3g}" if g is not None else "")
                for i, (d, g) in enumerate(zip(r.first_diff, r.diff_gap or [None] * len(r.first_diff))) if d is not None) + ")"
        lines.append(f"| {r.name} | {ready} | {acc} | {eq} | {_fmt(r.batch_equal) if not r.error else '-'} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", help="an install's env.sh to source for the servers (default: this environment)")
    p.add_argument("--python", help="the server's python (default: $SGLANG_CPU_PYTHON)")
    p.add_argument("--attention-backend", help="default: $SGLANG_CPU_ATTENTION_BACKEND, else torch_native")
    p.add_argument("--models", default=os.path.expanduser("~/.cache/sweep/tiny-models"),
                   help="folder with target/ and eagle3/ (python cluster/sglang-cpu-x86/tinymodels.py)")
    p.add_argument("--port-base", type=int, default=33000, help="server i listens on port-base + i")
    p.add_argument("--only", action="append", default=[],
                   help="run only the setups whose name contains this (repeatable; the baseline always runs)")
    p.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    p.add_argument("--ready-timeout", type=float, default=420.0)
    p.add_argument("--log-dir", help="where the server logs go (default: a new temporary folder)")
    a = p.parse_args(argv)

    env = env_from_file(a.env) if a.env else dict(os.environ)
    python = a.python or env.get("SGLANG_CPU_PYTHON")
    if not python:
        p.error("no server python: pass --env or --python, or set SGLANG_CPU_PYTHON")
    backend = a.attention_backend or env.get("SGLANG_CPU_ATTENTION_BACKEND") or "torch_native"
    models = os.path.abspath(os.path.expanduser(a.models))
    for sub in ("target", "eagle3"):
        if not os.path.isdir(os.path.join(models, sub)):
            p.error(f"{models}/{sub} is missing (python cluster/sglang-cpu-x86/tinymodels.py --out {models})")
    setups = [s for i, s in enumerate(SETUPS) if i == 0 or not a.only or any(o.lower() in s.name.lower() for o in a.only)]
    print(f"check_spec: {python}, attention backend {backend}, path {env.get('SGLANG_CPU_PATH', '?')}, "
          f"models {models}, ports {a.port_base}..{a.port_base + len(setups) - 1}", flush=True)

    def progress(r: Row):
        state = "FAILED: " + r.error if r.error else (
            f"ready {r.ready_s:.0f} s, accept {[_fmt(x) for x in r.accept_lengths]}, equal {_fmt(r.equal)}"
            + (f" (first differing token per prompt: {r.first_diff}; the baseline's top-2 logprob gap there: "
               f"{[None if g is None else round(g, 4) for g in r.diff_gap]})" if r.equal is False else "")
            + f", batched {_fmt(r.batch_equal)}")
        print(f"  {r.name}: {state}  (log {r.log})", flush=True)

    rows = run_check(python, env, backend, models, a.port_base, setups, max_new_tokens=a.max_new_tokens,
                     ready_timeout=a.ready_timeout, log_dir=a.log_dir, progress=progress)
    print(format_table(rows))
    bad = [r.name for r in rows if not r.ok] + (["(baseline missing)"] if len(rows) < len(setups) else [])
    if bad:
        print("check_spec: FAILED: " + "; ".join(bad))
        return 1
    print("check_spec: every speculative server's greedy tokens equal the baseline's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
