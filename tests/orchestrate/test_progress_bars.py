"""The live view shows a host's startup progress bar on its line; plain output logs it sparingly.
And the points row keeps the last update of each kind and SGLang's own startup timings."""

import io
from dataclasses import replace

from rich.console import Console

from sweep.core.events import StartupProgress, StepStarted, TaskStarted
from sweep.orchestrate import progress as progress_mod
from sweep.orchestrate.progress import SweepProgress
from sweep.results.schema import ENGINE_COLUMNS

LOAD = StartupProgress("load", elapsed_s=130.2, progress="load 27/64 shards, 5.1 s/it, ETA 02:30", progress_kind="load")
CAPTURE = StartupProgress(
    "capture",
    elapsed_s=200.0,
    progress_kind="capture",
    progress="capture 1/36 batch sizes (bs=256, 20.51 GB free), 1.3 s/it, ETA 00:45",
)


def test_detail_of_a_progress_event():
    assert LOAD.detail == "27/64 shards, 5.1 s/it, ETA 02:30"  # the stage is shown beside it
    assert StartupProgress("ready", progress="load 64/64 shards").detail == "load 64/64 shards"
    assert StartupProgress("load", elapsed_s=3.0).detail == ""


def test_live_line_per_host_shows_the_bar():
    sp = SweepProgress(2, 2, Console(file=io.StringIO(), width=160, force_terminal=False))
    sp.host_event("gpu-1", "drafter=none", LOAD)
    sp.host_event("gpu-2", "drafter=k26,steps=2", CAPTURE)
    out = io.StringIO()
    Console(file=out, width=160).print(sp._render())
    rows = [line for line in out.getvalue().splitlines() if line.startswith("gpu-")]
    assert len(rows) == 2
    assert "load 27/64 shards, 5.1 s/it, ETA 02:30" in rows[0]
    assert "capture 1/36 batch sizes (bs=256, 20.51 GB free)" in rows[1]
    sp.host_event("gpu-1", "drafter=none", StartupProgress("capture", elapsed_s=300.0))  # the bar is over
    assert sp.hosts["gpu-1"].detail == ""


def test_plain_output_says_where_a_long_startup_is_every_30_s(monkeypatch):
    """A startup's bar is not a line per update, nor a line per phase: a line every 30 s of the point,
    saying the bar and how long the phase has lasted, then one as its benchmark begins, with how long
    the server took to come up and each phase."""
    buf = io.StringIO()
    sp = SweepProgress(1, 1, Console(file=buf, width=200, force_terminal=False))
    now = [1000.0]
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: now[0])
    sp.host_event("gpu-1", "p", TaskStarted())
    for i in range(50):  # a second apart
        sp.host_event("gpu-1", "p", replace(LOAD, progress=f"load {i}/64 shards"))
        now[0] += 1.0
    for _ in range(20):
        sp.host_event("gpu-1", "p", CAPTURE)
        now[0] += 1.0
    sp.host_event("gpu-1", "p", StartupProgress("ready"))
    sp.host_event("gpu-1", "p", StepStarted("benchmark"))
    lines = [line.split("] ", 1)[1] for line in buf.getvalue().splitlines()]
    assert lines == [
        "gpu-1: p: start",
        "gpu-1: p: load 30/64 shards (for 30s)",
        "gpu-1: p: capture 1/36 batch sizes (bs=256, 20.51 GB free), 1.3 s/it, ETA 00:45 (for 10s)",
        "gpu-1: p: benchmark, server up in 70s (load 50s, capture 20s)",
    ]


def test_a_reason_with_brackets_is_printed_as_it_is():
    """torch and gloo errors name source paths in brackets, which rich would take for markup."""
    buf = io.StringIO()
    sp = SweepProgress(1, 1, Console(file=buf, width=400, force_terminal=False))
    reason = "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer"
    sp.point_finished("host-a", "drafter=none", "failed", 12.0, f"load: {reason}")
    assert reason in buf.getvalue()


def test_points_row_takes_progress_and_engine_timings():
    from sweep.core.record import Failure, PointResult
    from sweep.experiment.plan import PlannedPoint
    from sweep.host.server import Startup
    from sweep.results.records import point_row
    from sweep.sglang.logs import engine_timings, parse_progress

    st = Startup()
    st.see("load_begin", 1.0)
    bar, _ = parse_progress("Loading safetensors checkpoint shards:  42% Completed | 27/64 [02:10<02:30, 5.1s/it]")
    st.see_progress(bar, 131.2)
    st.engine = engine_timings(
        "Engine startup timings (s): load_weight=0.08, kv_cache_allocation=0.53, "
        "scheduler_e2e=2.19, cuda_graph={prefill=0.00, decode=0.00, target_verify=0.00, "
        "draft_prefill=0.00, draft_decode=0.00, draft_extend=0.00}, tokenizer_e2e=20.51"
    )
    res = PointResult(
        "p1",
        "gpu-1",
        "n",
        "failed",
        Failure("load", "hang"),
        phases=st.durations(),
        startup_progress=st.progress_records(),
    )
    pp = PlannedPoint("p1", "drafter=none", {"drafter": "none"}, {"drafter": "drafter"}, True, {}, {}, ["python"])
    t = point_row(pp, "exp", axes=["drafter"], argv=["python"], result=res, mode="dry-run", bench_scale={})
    (prog,) = t.column("startup_progress").to_pylist()[0]
    assert prog == {
        "kind": "load",
        "desc": "Loading safetensors checkpoint shards",
        "n": 27,
        "total": 64,
        "elapsed_s": 130.0,
        "eta_s": 150.0,
        "rate": prog["rate"],
        "seen_s": 131.2,
        "summary": "load 27/64 shards, 5.1 s/it, ETA 02:30",
    }
    assert t.column("engine_load_weight_s").to_pylist() == [0.08]
    assert t.column("engine_tokenizer_e2e_s").to_pylist() == [20.51]
    assert t.column("load_s").to_pylist() == [None] and set(ENGINE_COLUMNS) <= set(t.column_names)
    invalid = point_row(
        replace(pp, errors=["bad"]), "exp", axes=["drafter"], argv=[], result=None, mode="dry-run", bench_scale={}
    )
    assert invalid.column("startup_progress").to_pylist() == [None]
