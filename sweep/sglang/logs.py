"""Reading SGLang's log: which startup phase a line marks, what its progress bars say, its own
startup timings, and why a dead server died. Pure.

The wording is SGLang's own (0.5.10, and 0.5.23 where it differs; see shared/sglang-surface.md and
the real server's output in shared/sglang-cpu/transcripts/). The host layer feeds lines as they
appear; this module never does I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Startup events. Checked against real SGLang (shared/sglang-cpu/transcripts, 0.5.23-era main on CPU)
# and its source: a speculative server logs ``Load weight begin/end`` twice (target, then drafter:
# ``type=LlamaForCausalLMEagle3``) and ``KV Cache is allocated`` + ``Memory pool end`` twice (target,
# then drafter); 0.5.23 loads both models before either KV cache and captures after both, 0.5.10
# loads the drafter after the target's graphs. A server without graphs (CPU, --disable-cuda-graph)
# logs no capture at all. Capture lines name the role, the graph and the device:
# ``Capture cuda graph begin`` (0.5.10), ``Capture target {decode,verify,prefill} CUDA graph begin``,
# ``Capture draft {decode,extend,prefill} CUDA graph begin``, ``Capture target decode CPU graph
# begin`` (CPU with torch.compile), ``Capture Frozen-KV MTP draft cuda graph begin``. A failed
# capture (``Capture cuda graph failed: ...``) is no event, it is a failure (below).
_GRAPH = r"\w+ graph"  # cuda / CUDA / CPU / NPU / XPU, whatever the platform calls its graphs
EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("load_begin", re.compile(r"Load weight begin")),
    ("load_end", re.compile(r"Load weight end")),
    ("kv_cache", re.compile(r"KV Cache is allocated|Memory pool end")),
    ("draft_capture_begin", re.compile(r"Capture (?:[\w-]+ )*draft (?:\w+ )?" + _GRAPH + r" begin")),
    ("draft_capture_end", re.compile(r"Capture (?:[\w-]+ )*draft (?:\w+ )?" + _GRAPH + r" end")),
    ("capture_begin", re.compile(r"Capture (?:target (?:\w+ )?)?" + _GRAPH + r" begin")),
    ("capture_end", re.compile(r"Capture (?:target (?:\w+ )?)?" + _GRAPH + r" end")),
    ("http_up", re.compile(r"Uvicorn running on")),
    ("fired_up", re.compile(r"The server is fired up and ready to roll")),
)

# Failure signatures, most specific first: (kind, pattern, what the sweep reports, how to fix).
_FAILURES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    # uvicorn's own line when the server's port is taken (real SGLang and the fake print it alike):
    # ``ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use``
    (
        "port_in_use",
        re.compile(
            r"\[Errno \d+\] error while attempting to bind on address \([^)]*\): "
            r"address already in use[^\n]*"
        ),
        "another process took the server's port during the startup: stop it, or use another server.port",
    ),
    # the same line for any other bind error (asyncio's wording), e.g. an address not on this machine:
    # ``[Errno 99] error while attempting to bind on address ('10.0.0.9', 30000): cannot assign requested address``
    (
        "bind_failed",
        re.compile(r"\[Errno \d+\] error while attempting to bind on address \([^)]*\):[^\n]*"),
        "the server could not listen on server.host / server.port: use an address of this host (or 0.0.0.0) "
        "and a port it may bind",
    ),
    (
        "oom",
        re.compile(r"(torch\.OutOfMemoryError|CUDA out of memory)[^\n]*"),
        "lower mem-fraction-static or cuda-graph-max-bs, or check for leftover processes on the GPUs",
    ),
    (
        "not_enough_memory",
        re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static\.?"),
        "raise mem-fraction-static, or lower max-running-requests / context length",
    ),
    (
        "capture_failed",
        re.compile(r"Capture (cuda|CUDA) graph failed:[^\n]*"),
        "lower cuda-graph-max-bs, or run with --disable-cuda-graph to find the cause",
    ),
    # ``RuntimeError: Cannot find any model weights with `/models/tiny-eagle``` (model_loader/loader.py:
    # a folder with a config but no weights; real SGLang on CPU, shared/.../badargs_summary.txt)
    (
        "model_not_found",
        re.compile(
            r"[^\n]*(is not a local folder and is not a valid model identifier|"
            r"No such file or directory|does not appear to have a file named|"
            r"Cannot find any model weights with)[^\n]*"
        ),
        "check model_path and speculative-draft-model-path on that host (a folder needs its weights, or "
        "load-format dummy)",
    ),
    # ``RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9
    # (SIGKILL), a common cause is the OS OOM killer. ...`` (entrypoints/engine.py)
    (
        "scheduler_died",
        re.compile(r"Rank \d+ scheduler died during initialization[^\n]*"),
        "read the log above this line for the rank's own error; exit code -9 is SIGKILL, most often the "
        "kernel's OOM killer (`dmesg -T | grep -i oom` on the host)",
    ),
    # a process whose step made no progress for --watchdog-timeout seconds (utils/watchdog.py):
    # ``Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)``; it then SIGQUITs the launcher
    (
        "watchdog_timeout",
        re.compile(r"\w+ watchdog timeout \(self\.watchdog_timeout=[^)]*\)"),
        "a step hung past watchdog-timeout (a stuck collective, a deadlock, a kernel that never ends): read "
        "the py-spy dump above it; raise watchdog-timeout only if a step is truly that slow",
    ),
)
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt|Exit))(?::\s*(.*))?$")
_LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[^\]]*)?\]\s*")


_RANK = re.compile(r"^\[[^\]]*\b(TP\d+)\b[^\]]*\]")


def rank_of(line: str) -> str | None:
    """The tensor-parallel rank a log line comes from (``[2026-11-29 10:00:00 TP3] ...`` -> ``TP3``)."""
    m = _RANK.match(line)
    return m.group(1) if m else None


def event_of(line: str) -> str | None:
    """The startup event a log line marks, or None."""
    for name, pattern in EVENTS:
        if pattern.search(line):
            return name
    return None


@dataclass(frozen=True)
class _LogFailure:
    kind: str  # port_in_use | bind_failed | bad_argument | jit_build_failed | oom | not_enough_memory |
    #   capture_failed | model_not_found | scheduler_died | watchdog_timeout | exception | fatal_signal |
    #   child_crashed | child_failed | terminated | killed | exited
    reason: str  # the line that explains it, as the log says it
    fix: str


def _strip(line: str) -> str:
    return _LOG_PREFIX.sub("", line.rstrip())


# Tracebacks that say nothing about why the server died: Python's multiprocessing resource tracker,
# when SGLang's tree goes down, may find a shared-memory segment unregistered twice and print
# ``KeyError: '/mp-...'`` after the real error (seen in CI with the real server, after a scheduler's
# ``ValueError``).
_NOISE_FRAMES = ("multiprocessing/resource_tracker.py",)


# An error torch.compile met while tracing (SGLang compiles some CPU paths): dynamo raises its own
# exception and names the real one on the next line, ``Explanation: ... got RuntimeError('...')``.
# Seen with real SGLang 7f8f030 on an AMD EPYC Zen 3 (topk 0: the draft step's reshape).
_DYNAMO = re.compile(r"^torch\._dynamo\.exc\.\w+: ")
_DYNAMO_GOT = re.compile(r"Explanation: .*?\bgot (\w+(?:Error|Exception))\((['\"])(.*)\2\)")


def exception_lines(lines: list[str]) -> list[str]:
    """The exception lines of a log (``ValueError: ...``, prefix stripped), in order, without those
    ending a traceback through shutdown noise (``_NOISE_FRAMES``); an error torch.compile met while
    tracing is given as the error itself (``RuntimeError: ... (while torch.compile traced it)``)."""
    out: list[str] = []
    noise = False  # inside a traceback through a noise frame
    stripped = [_strip(raw) for raw in lines]
    for i, line in enumerate(stripped):
        if line.endswith("Traceback (most recent call last):"):
            noise = False
        elif any(frame in line for frame in _NOISE_FRAMES) and line.lstrip().startswith("File "):
            noise = True
        elif _EXCEPTION_LINE.match(line):
            got = _DYNAMO_GOT.search(stripped[i + 1]) if _DYNAMO.match(line) and i + 1 < len(stripped) else None
            if got:
                line = f"{got.group(1)}: {got.group(3)} (while torch.compile traced it)"
            if not noise:
                out.append(line)
            noise = False
    return out


# A native crash, as Python's faulthandler prints it (two processes may interleave their lines), and
# the launcher's word for a child gone: seen with real SGLang 7f8f030 on CPU, where topk 0 makes the
# warmup's first draft step die of SIGFPE (``Fatal Python error: Floating point exception``,
# ``Subprocess scheduler_0 (pid=...) crashed with exit code -8``).
_FATAL = re.compile(
    r"Fatal Python error:.*?(Floating point exception|Segmentation fault|Aborted|Bus error|"
    r"Illegal instruction)"
)
_CHILD_CRASHED = re.compile(r"Subprocess (\w+) \(pid=\d+\) crashed with exit code (-?\d+)")


# argparse's own error (exit code 2): ``usage: PROG [-h] ...`` (many lines for SGLang's hundreds of
# flags), then ``PROG: error: MESSAGE``. PROG is ``sglang serve`` at 0.5.23-era main (prepare_server_args
# names it), ``launch_server.py`` (``python -m sglang.launch_server``) or ``__main__.py`` where the parser
# takes its name from argv[0]. Only argparse's own messages count, or any message under a usage line of
# the same PROG (SGLang's DeprecatedAction calls parser.error with its own words): ``gcc: error: ...``
# is no argparse error.
_ARGPARSE_ERROR = re.compile(r"^(?P<prog>[\w.\-]+(?: [\w.\-]+){0,3}): error: (?P<msg>.+)$", re.M)
_ARGPARSE_MSG = re.compile(
    r"^(?:argument \S+: |unrecognized arguments: |the following arguments are required: |"
    r"one of the arguments |ambiguous option: |expected one argument)"
)
_INVALID_VALUE = re.compile(r"^argument (?P<flag>\S+): invalid (?P<type>\S+) value: (?P<value>'.*')$")
_INVALID_CHOICE = re.compile(
    r"^argument (?P<flag>\S+): invalid choice: (?P<value>'.*?') \(choose from (?P<choices>.*)\)$"
)
_EXPECTED = re.compile(r"^argument (?P<flag>\S+): (?P<what>expected (?:one|at least one|\d+) arguments?)$")
_TYPE_WORDS = {"int": "an integer (e.g. 256)", "float": "a number (e.g. 0.85)", "str": "a string"}


def _flag(names: str) -> str:
    return names.split("/")[0]  # "--model-path/--model" -> "--model-path"


def _argparse_failure(text: str) -> _LogFailure | None:
    found = [
        m
        for m in _ARGPARSE_ERROR.finditer(text)
        if _ARGPARSE_MSG.match(m.group("msg"))
        or re.search(r"^usage: " + re.escape(m.group("prog")) + r"(?: |$)", text, re.M)
    ]
    if not found:
        return None
    m = found[-1]
    msg = m.group("msg").strip()
    reason = f"{m.group('prog')}: error: {msg}"
    if v := _INVALID_VALUE.match(msg):
        want = _TYPE_WORDS.get(v.group("type"), f"a value its type check ({v.group('type')}) accepts")
        fix = (
            f"{_flag(v.group('flag'))} takes {want}, not {v.group('value')}: correct it in the experiment's server args"
        )
    elif c := _INVALID_CHOICE.match(msg):
        fix = (
            f"{_flag(c.group('flag'))} takes one of {c.group('choices')}, not {c.group('value')}: correct it "
            "in the experiment's server args (the choices are this SGLang version's)"
        )
    elif e := _EXPECTED.match(msg):
        fix = (
            f"give {_flag(e.group('flag'))} its value ({e.group('what')}); a value that starts with '-' "
            f"is written {_flag(e.group('flag'))}=VALUE"
        )
    elif msg.startswith("unrecognized arguments: ") and not msg.split(": ", 1)[1].startswith("-"):
        fix = (
            f"{msg.split(': ', 1)[1]} follows a flag that takes no value (a switch: write it as `flag: true`) "
            "or fewer values: correct it in the experiment's server args"
        )
    elif msg.startswith("unrecognized arguments: "):
        fix = (
            f"this SGLang has no flag {msg.split(': ', 1)[1]}: remove it, or check its name against the "
            "installed version's `--help` (flags are renamed between versions)"
        )
    elif msg.startswith("the following arguments are required: "):
        fix = f"pass {msg.split(': ', 1)[1]} in the experiment's server args"
    elif msg.startswith("argument "):
        fix = f"correct {_flag(msg.split()[1].rstrip(':'))} as the message says"
    else:
        fix = "correct the server args as the message says (SGLang's own check while it parses its command line)"
    return _LogFailure("bad_argument", reason, fix + " (argparse exits 2 before the server starts anything)")


# A JIT-compiled kernel that does not build (SGLang compiles some kernels with ninja at startup): the
# compiler's first error says why, ``ninja: build stopped: subcommand failed.`` that it stopped.
_NINJA_STOPPED = re.compile(r"ninja: build stopped: subcommand failed\.?")
_COMPILER_ERROR = re.compile(r"^\S+:\d+(?::\d+)?: (?:fatal )?error: .*$", re.M)


def _jit_failure(text: str) -> _LogFailure | None:
    if not _NINJA_STOPPED.search(text):
        return None
    errors = _COMPILER_ERROR.findall(text)
    reason = (
        f"a kernel's JIT build failed: {errors[0].strip()}"
        if errors
        else "a kernel's JIT build failed: " + ("ninja: build stopped: subcommand failed.")
    )
    return _LogFailure(
        "jit_build_failed",
        reason,
        "SGLang compiles this kernel at startup: check the host's compiler and headers (the compiler's "
        "first error is named), or choose a configuration that does not need the kernel",
    )


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_MARKS = re.compile(r"^\s*[~^]+[~^\s]*$")  # Python 3.11+'s ^^^^ under the failing expression


def _frame_of(stripped: list[str], at: int) -> tuple[str, str, str, str] | None:
    """The frame an exception line at ``at`` was raised in: (file, line, function, its source line as
    the traceback shows it), or None when no frame is right above it."""
    source = ""
    for line in reversed(stripped[max(0, at - 6) : at]):
        if _MARKS.match(line) or not line.strip():
            continue
        f = _FRAME.match(line)
        if f:
            return f.group("file"), f.group("line"), f.group("func"), source
        if source:
            return None  # two source lines: not a traceback's last frame
        source = line.strip()
    return None


def _in_argument_resolution(path: str) -> bool:
    return path.endswith("server_args.py") or "/arg_groups/" in path


def _exception_failure(lines: list[str], raised: str) -> _LogFailure:
    stripped = [_strip(raw) for raw in lines]
    at = max((i for i, line in enumerate(stripped) if line == raised or line.endswith("." + raised)), default=None)
    frame = _frame_of(stripped, at) if at is not None else None
    fix = "read the traceback in the point's log"
    reason = raised
    if frame is not None and at is not None:
        path, lineno, func, source = frame
        where = f"{path.rsplit('/', 1)[-1]}:{lineno} in {func}"
        flags = sorted({"--" + a.replace("_", "-") for a in re.findall(r"server_args\.(\w+)", source)})
        if raised == "AssertionError":  # a bare assert: its line is all there is to say
            reason = f"AssertionError at {where}" + (f": `{source}`" if source else "")
        start = max((i for i in range(at) if stripped[i].endswith("Traceback (most recent call last):")), default=0)
        frames = [m.group("file") for m in (_FRAME.match(line) for line in stripped[start:at]) if m]
        if any(_in_argument_resolution(f) for f in frames):  # raised while SGLang resolved its arguments
            fix = (
                "SGLang rejected this combination of server args while resolving them (before it starts "
                f"anything): see the check at {where} in SGLang's source"
                + (f"; it involves {', '.join(flags)}" if flags else "")
                + ", and change the server args"
            )
        elif raised == "AssertionError":
            fix = f"an assert in SGLang failed without a message: read the check at {where} in SGLang's source"
    return _LogFailure("exception", reason, fix)


_CHILD_FAILED = re.compile(
    r"Received sigquit from a child process\. It usually means the child failed\.|"
    r"SIGQUIT received\. signum=\S+, frame=\S+\. It usually means one child failed\."
)
_SIGTERM_RECEIVED = re.compile(r"SIGTERM received\. signum=\S+ frame=\S+\. Draining requests and shutting down")
_SIGNALS = {
    1: "SIGHUP",
    2: "SIGINT",
    4: "SIGILL",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    11: "SIGSEGV",
    15: "SIGTERM",
}
_KILLED_FIX = (
    "nothing in the log says why: the kernel's OOM killer is the usual cause (`dmesg -T | grep -i "
    "-e oom -e 'killed process'` on the host), else a reaper, job scheduler or person outside the sweep"
)


def _signal_of(exit_code: int | None) -> int | None:
    """The signal that ended a process: -N from Python's subprocess, 128+N from a shell or launcher."""
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    if 128 < exit_code < 160:
        return exit_code - 128
    return None


def find_failure(lines: list[str], exit_code: int | None = None) -> _LogFailure:
    """Why a server died, from the tail of its log: the most specific signature wins (a port taken,
    argparse's rejection, a kernel's build, then SGLang's own fatal lines), then the last exception
    line of a traceback, then a native crash, then what the launcher said of its children, then the
    exit code (a signal named)."""
    text = "\n".join(_strip(line) for line in lines)
    patterns = list(_FAILURES)
    for kind, pattern, fix in patterns[:2]:  # the bind errors: uvicorn's line says it all
        found = list(pattern.finditer(text))
        if found:
            return _LogFailure(kind, found[-1].group(0).strip(), fix)
    special = _argparse_failure(text) or _jit_failure(text)
    if special:
        return special
    for kind, pattern, fix in patterns[2:]:
        found = list(pattern.finditer(text))
        if found:
            return _LogFailure(kind, found[-1].group(0).strip(), fix)
    raised = exception_lines(lines)
    if raised:
        return _exception_failure(lines, raised[-1])
    fatal = list(_FATAL.finditer(text))
    children = [m for m in _CHILD_CRASHED.finditer(text) if m.group(2) != "-15"]  # -15: the group's own SIGTERM
    if fatal:
        who = f" ({children[0].group(1)} crashed with exit code {children[0].group(2)})" if children else ""
        return _LogFailure(
            "fatal_signal",
            f"Fatal Python error: {fatal[-1].group(1)}{who}",
            "a native kernel crashed: read the point's log (Python's faulthandler stack names the "
            "call); a speculative argument that no SGLang check catches (e.g. topk 0) is a likely cause",
        )
    if children:
        child = children[0]
        sig = _signal_of(int(child.group(2)))
        name = f" ({_SIGNALS.get(sig, f'signal {sig}')})" if sig else ""
        return _LogFailure(
            "child_crashed",
            f"{child.group(0)}{name}, and the launcher stopped the server",
            _KILLED_FIX if sig == 9 else "read the point's log above this line for the child's own output",
        )
    sig = _signal_of(exit_code)
    if _SIGTERM_RECEIVED.search(text) or sig == 15:
        return _LogFailure(
            "terminated",
            f"the server got SIGTERM (exit code {exit_code}) while the sweep still needed it",
            "something outside the sweep stopped it: a job scheduler's time limit, a person, another "
            "sweep's reaper on this host",
        )
    if _CHILD_FAILED.search(text):
        return _LogFailure(
            "child_failed",
            'a child process failed (SGLang: "'
            + _CHILD_FAILED.findall(text)[-1]
            + '") and the launcher killed its tree'
            + (f" (exit code {exit_code})" if exit_code else "")
            + "; the child's own error is not in the log's last lines",
            "read the whole point's log for the child's error (a traceback or a native crash)",
        )
    code = f"exit code {exit_code}" if exit_code is not None else "no exit code"
    if sig == 9:
        return _LogFailure(
            "killed", f"the server was killed with SIGKILL ({code}) and its log names no error", _KILLED_FIX
        )
    if sig is not None:
        return _LogFailure(
            "killed",
            f"the server was killed by signal {sig} ({_SIGNALS.get(sig, 'unnamed')}, {code}) "
            "and its log names no error",
            "read the point's log; " + _KILLED_FIX.split(": ", 1)[1],
        )
    return _LogFailure(
        "exited",
        f"server exited with {code} and no error in its log",
        "read the point's log; the process may have been killed from outside",
    )


def decode_stats(line: str) -> dict[str, float] | None:
    """Numbers from a ``Decode batch, #running-req: N, ... accept len: X, ...`` line."""
    if "Decode batch" not in line:
        return None
    out = {}
    for key, name in (
        ("#running-req", "running"),
        ("#token", "tokens"),
        ("accept len", "accept_length"),
        ("gen throughput (token/s)", "gen_throughput"),
        ("#queue-req", "queued"),
    ):
        m = re.search(re.escape(key) + r":\s*([0-9.]+)", line)
        if m:
            out[name] = float(m.group(1))
    return out


# --- progress bars ---------------------------------------------------------------------------------
# Rank 0 draws tqdm bars while it loads weights and captures graphs: each update is ``\r`` + the bar,
# with no newline until the bar closes, for minutes on a big model. Real lines (see the transcripts
# and SGLang's BAR_FORMAT, ``{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [...]``):
#   Multi-thread loading shards:   0% Completed | 0/1 [00:00<?, ?it/s]
#   Loading safetensors checkpoint shards:  42% Completed | 27/64 [02:10<02:30, 5.1s/it]
#   Capturing batches (bs=256 avail_mem=20.51 GB):   3%|▎ | 1/36 [00:01<00:45,  1.3s/it]
#   Capturing num tokens (num_tokens=8192 avail_mem=20.51 GB):  10%|█ | 2/20 [...]  (prefill graphs)
# A capture bar's first frame has no description yet (SGLang names it inside the loop).

_NUM = r"[\d.]+[kMGTPEZY]?"
_BAR = re.compile(  # tqdm with a total: l_bar, the bar (or SGLang's " Completed |"), r_bar
    r"(?:(?P<desc>.*?): ?)?\s*(?P<pct>\d{1,3})%(?:\|[^|]*\|| Completed \|)\s*"
    r"(?P<n>" + _NUM + r")/(?P<total>" + _NUM + r")\s*"
    r"\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:]+|\?),\s*(?P<rate>\?|" + _NUM + r")(?P<unit>[^\],]*)"
    r"(?P<postfix>[^\]]*)\]"
)
_BAR_NO_TOTAL = re.compile(  # tqdm without a total: "desc: 27it [02:10, 5.10s/it]"
    r"(?:(?P<desc>.*?): )?(?P<n>" + _NUM + r")[a-zA-Z]* "
    r"\[(?P<elapsed>[\d:]+),\s*(?P<rate>\?|" + _NUM + r")(?P<unit>[^\],]*)(?P<postfix>[^\]]*)\]"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DESC_VALUES = re.compile(r"(\w+)=([\d.]+)")
_SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}
_PROGRESS_KINDS = ("load", "capture", "other")


@dataclass(frozen=True)
class Progress:
    """One update of a progress bar, as tqdm printed it."""

    kind: str  # load (weight shards) | capture (graph batch sizes or token counts) | other
    desc: str  # tqdm's description: "Loading safetensors checkpoint shards", "Capturing batches (bs=256 ...)"
    n: int  # items done
    total: int | None  # items in all; None when tqdm does not know
    elapsed_s: float | None
    eta_s: float | None  # tqdm's remaining time; None before the first item ("?")
    rate: float | None  # items per second (tqdm prints seconds per item below 1/s); None before the first
    raw: str  # the update itself, as printed (without the \r and the padding)

    @property
    def done(self) -> bool:
        return self.total is not None and self.n >= self.total

    @property
    def values(self) -> dict[str, float]:
        """``name=number`` pairs of the description: ``{"bs": 256, "avail_mem": 20.51}``."""
        return {k: float(v) for k, v in _DESC_VALUES.findall(self.desc)}

    @property
    def unit(self) -> str:
        if self.kind == "load":
            return "shards"
        if self.kind == "capture":
            return "token counts" if "num_tokens" in self.values else "batch sizes"
        return "steps"

    def summary(self) -> str:
        """``load 27/64 shards, 5.1 s/it, ETA 02:30``; ``capture 1/36 batch sizes (bs=256, 20.51 GB
        free), 1.3 s/it, ETA 00:45``."""
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        head = f"{self.kind} {count} {self.unit}" if self.kind != "other" else f"{self.desc or 'progress'} {count}"
        v = self.values
        if self.kind == "capture" and v:
            size = next((f"{k}={v[k]:g}" for k in ("bs", "num_tokens") if k in v), None)
            extra = [x for x in (size, f"{v['avail_mem']:g} GB free" if "avail_mem" in v else None) if x]
            head += f" ({', '.join(extra)})" if extra else ""
        parts = [head]
        if self.rate:
            parts.append(f"{self.rate:.3g} it/s" if self.rate >= 1 else f"{1 / self.rate:.3g} s/it")
        if self.eta_s is not None and not self.done:
            parts.append(f"ETA {_clock(self.eta_s)}")
        return ", ".join(parts)


def _clock(s: float) -> str:
    s = int(round(s))
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def _seconds(clock: str) -> float | None:
    try:
        parts = [float(x) for x in clock.split(":")]
    except ValueError:
        return None
    out = 0.0
    for x in parts:
        out = out * 60 + x
    return out


def _number(text: str) -> float:
    if text[-1] in _SI:
        return float(text[:-1]) * _SI[text[-1]]
    return float(text)


def progress_kind(desc: str) -> str:
    """What a bar counts, from its description."""
    if re.search(r"shards|Loading safetensors|Loading pt checkpoint|Loading np_cache|weights", desc, re.I):
        return "load"
    if desc.startswith("Capturing"):
        return "capture"
    return "other"


def parse_progress(segment: str) -> tuple[Progress, str] | None:
    """One ``\\r``-separated piece of a log line -> (the bar update, the text after it), or None when
    it is no bar. The text after it is a log line another process wrote while the bar had no newline:
    ``Capturing batches ...: 3%|▎ | 1/36 [00:01<00:45, 1.3s/it][2026-11-29 10:00:00 TP3] ...``."""
    seg = _ANSI.sub("", segment)
    m = _BAR.match(seg) or _BAR_NO_TOTAL.match(seg)
    if m is None:
        return None
    g = m.groupdict()
    try:
        n = int(round(_number(g["n"])))
        total = int(round(_number(g["total"]))) if g.get("total") else None
        rate = None if g["rate"] == "?" else _number(g["rate"])
    except (ValueError, IndexError):
        return None
    if rate is not None and g["unit"].strip().startswith("s/"):  # "5.10s/it": seconds per item
        rate = 1 / rate if rate > 0 else None
    remaining = g.get("remaining")
    desc = (g.get("desc") or "").strip()
    p = Progress(
        kind=progress_kind(desc),
        desc=desc,
        n=n,
        total=total,
        elapsed_s=_seconds(g["elapsed"]),
        eta_s=None if not remaining or remaining == "?" else _seconds(remaining),
        rate=rate,
        raw=seg[: m.end()].strip(),
    )
    return p, seg[m.end() :]


def split_progress(line: str) -> list[Progress | str]:
    """A log line as its pieces, in order: bar updates (``Progress``) and text (``str``, each a log
    line or a part of one). A line without ``\\r`` is itself; tqdm starts every update with ``\\r``, so
    only the pieces after a ``\\r`` can be bars, and the text before the first ``\\r`` is text."""
    if "\r" not in line:
        return [line]
    first, *segments = _ANSI.sub("", line).split("\r")  # without tqdm's cursor moves (nested bars)
    out: list[Progress | str] = [first] if first.strip() else []
    for seg in segments:
        found = parse_progress(seg)
        if found is None:
            if seg.strip():
                out.append(seg.rstrip())
            continue
        bar, rest = found
        out.append(bar)
        if rest.strip():
            out.append(rest.rstrip())
    return out


# --- SGLang's own startup timings ------------------------------------------------------------------
# 0.5.23-era servers print, once, just before uvicorn starts (seconds; each the max over the
# scheduler ranks; see sweep/results/schema.py ENGINE_TIMINGS for what each one covers):
#   Engine startup timings (s): load_weight=0.08, kv_cache_allocation=0.53, scheduler_e2e=2.19,
#   cuda_graph={prefill=0.00, decode=0.00, target_verify=0.00, draft_prefill=0.00, draft_decode=0.00,
#   draft_extend=0.00}, tokenizer_e2e=20.51
_ENGINE_TIMINGS = re.compile(r"Engine startup timings \(s\):\s*(?P<body>.*)$")
_PAIR = re.compile(r"(\w+)=(-?[\d.]+(?:[eE][-+]?\d+)?)")
_NESTED = re.compile(r"(\w+)=\{([^}]*)\}")


@dataclass(frozen=True)
class EngineTimings:
    load_weight: float | None = None
    kv_cache_allocation: float | None = None
    scheduler_e2e: float | None = None
    tokenizer_e2e: float | None = None
    cuda_graph: dict[str, float] | None = None  # phase -> capture seconds (prefill, decode, target_verify, draft_*)
    other: dict[str, float] | None = None  # keys a later SGLang adds ("group.key" when nested)

    def flat(self) -> dict[str, float]:
        """``{"load_weight": ..., "cuda_graph.decode": ..., ...}`` (keys as SGLang names them)."""
        out = {
            k: v
            for k, v in (
                ("load_weight", self.load_weight),
                ("kv_cache_allocation", self.kv_cache_allocation),
                ("scheduler_e2e", self.scheduler_e2e),
                ("tokenizer_e2e", self.tokenizer_e2e),
            )
            if v is not None
        }
        out.update({f"cuda_graph.{k}": v for k, v in (self.cuda_graph or {}).items()})
        out.update(self.other or {})
        return out


def engine_timings(line: str) -> EngineTimings | None:
    """The numbers of an ``Engine startup timings (s): ...`` line, or None for any other line."""
    m = _ENGINE_TIMINGS.search(line)
    if m is None:
        return None
    body = m.group("body")
    values: dict[str, float] = {}
    for group, inner in _NESTED.findall(body):
        values.update({f"{group}.{k}": float(v) for k, v in _PAIR.findall(inner)})
    values.update({k: float(v) for k, v in _PAIR.findall(_NESTED.sub("", body))})
    top = ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e")
    graphs = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("cuda_graph.")}
    other = {k: v for k, v in values.items() if k not in top and not k.startswith("cuda_graph.")}
    return EngineTimings(**{k: values.get(k) for k in top}, cuda_graph=graphs or None, other=other or None)


# Adaptive speculation (``--speculative-adaptive``): rank 0's lines, SGLang's wording
# (srt/speculative/adaptive_spec_params.py, eagle_worker_v2.py, arg_groups/speculative_hook.py).
_ADAPTIVE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "initialized",
        re.compile(
            r"AdaptiveSpeculativeParams initialized: steps=(?P<to>\d+), "
            r"candidate_steps=\[(?P<candidates>[\d, ]*)\]"
        ),
    ),
    ("built", re.compile(r"Built adaptive runtime state steps=(?P<to>\d+): elapsed=[\d.]+s, mem=-?[\d.]+GB")),
    (
        "updated",
        re.compile(
            r"Adaptive spec params updated: steps (?P<before>\d+) -> (?P<to>\d+) "
            r"\(ema_accept_len=(?P<ema>-?[\d.]+)\)"
        ),
    ),
    (
        "switch",
        re.compile(
            r"Switch adaptive runtime state: steps (?P<before>\d+) -> (?P<to>\d+), "
            r"draft_tokens \d+ -> \d+"
        ),
    ),
    (
        "disabled",
        re.compile(
            r"speculative_adaptive disabled: (?P<reason>.*)\. "
            r"Falling back to static speculative params\."
        ),
    ),
)


@dataclass(frozen=True)
class AdaptiveLine:
    """One of SGLang's adaptive-speculation lines: ``initialized`` (the starting step count and the first
    tier's candidates), ``built`` (a runtime state for one candidate step count), ``updated`` (a tier's
    EMA moved its step count), ``switch`` (the worker changed its step count: a batch of another tier, or
    an update), ``disabled`` (SGLang fell back to static speculation, and why)."""

    kind: str
    steps: int | None = None  # initialized: the starting count; built: its count; updated / switch: the new one
    before: int | None = None  # updated / switch: the old count
    candidates: tuple[int, ...] = ()
    ema: float | None = None
    reason: str | None = None


def adaptive_line(line: str) -> AdaptiveLine | None:
    """The adaptive-speculation line ``line`` is, or None."""
    if "daptive" not in line:  # most lines: one substring test
        return None
    for kind, pattern in _ADAPTIVE:
        m = pattern.search(line)
        if m is None:
            continue
        g = m.groupdict()
        return AdaptiveLine(
            kind,
            steps=int(g["to"]) if g.get("to") else None,
            before=int(g["before"]) if g.get("before") else None,
            candidates=tuple(int(c) for c in (g.get("candidates") or "").replace(" ", "").split(",") if c),
            ema=float(g["ema"]) if g.get("ema") else None,
            reason=g.get("reason"),
        )
    return None


@dataclass
class AdaptiveLog:
    """What a server's log says of adaptive speculation, fed line by line (``see``): whether it runs
    (``running``), why not (``disabled``), and its switches, in order. ``mark`` (the switches seen so far),
    taken as a benchmark level begins and ends with the log read up to then, bounds the level's switches:
    ``level`` gives its columns (sweep/results/schema.py LEVELS: adaptive_*)."""

    start_steps: int | None = None  # "initialized": the server runs adaptive speculation from this count
    candidates: tuple[int, ...] = ()
    built: list[int] | None = None
    disabled: str | None = None  # SGLang's reason for falling back to static speculation
    switches: list[tuple[int, int]] | None = None  # (from, to), as logged

    def see(self, line: str) -> AdaptiveLine | None:
        got = adaptive_line(line)
        if got is None:
            return None
        if got.kind == "initialized":
            self.start_steps, self.candidates = got.steps, got.candidates
        elif got.kind == "built":
            self.built = [*(self.built or []), got.steps or 0]
        elif got.kind == "disabled":
            self.disabled = got.reason
        elif got.kind == "switch":
            self.switches = [*(self.switches or []), (got.before or 0, got.steps or 0)]
        return got

    @property
    def running(self) -> bool:
        """The server runs adaptive speculation: initialised, and not fallen back to static."""
        return self.start_steps is not None and self.disabled is None

    def mark(self) -> int:
        return len(self.switches or [])

    def level(self, begin: int | None, end: int | None) -> dict[str, object]:
        """A level's columns from its marks (``mark`` as it began and as it ended): ``adaptive_switches``
        (the switch lines logged meanwhile), ``adaptive_steps`` (the step counts the server ran in it, in
        order of first use: the count in force when it began, then each switch's), ``adaptive_steps_final``
        (the count in force at its end); all null for a server that does not run adaptive speculation
        (or a level without marks)."""
        if not self.running or begin is None or end is None:
            return {"adaptive_switches": None, "adaptive_steps": None, "adaptive_steps_final": None}
        switches = self.switches or []
        steps = switches[begin - 1][1] if begin > 0 else self.start_steps
        inside = [to for _, to in switches[begin:end]]
        used = [steps]
        for to in inside:
            if to not in used:
                used.append(to)
        return {
            "adaptive_switches": len(inside),
            "adaptive_steps": used,
            "adaptive_steps_final": inside[-1] if inside else steps,
        }
