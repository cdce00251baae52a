"""Stand-ins for run_launch that take a known time, for testing scheduling on a real Ray cluster
without servers. Shipped to the workers by value (see conftest)."""

import os
import time
from dataclasses import replace

from sweep.core.events import PointMeasured, StartupProgress, StepStarted
from sweep.core.record import LaunchResult, PointResult


def timed_point(spec, ctx, progress):
    """Sleeps for the seconds in the point's label suffix ("p3:1.5"), reporting two stages."""
    seconds = float(spec.points[0].label.split(":")[1])
    t = time.time()
    progress(StartupProgress("load"))
    time.sleep(seconds / 2)
    progress(StepStarted("benchmark"))
    time.sleep(seconds / 2)
    return LaunchResult(
        [
            PointResult(
                spec.key,
                ctx.name,
                ctx.node_id,
                "ok",
                started_at=t,
                ended_at=time.time(),
                checks=[f"pid={os.getpid()}", f"port={spec.port}"],
            )
        ]
    )


def shared_launch(spec, ctx, progress):
    """A server launch with client-side points (``spec.points``), as ``run_launch`` runs one: each
    point in turn, each but the last posted as ``PointMeasured`` when it ends, and the launch's result
    holds every point's. The launch's first point sleeps for the
    seconds in its label ("q0:0.5"); a point after the first runs ``env["STANDIN_HOLD_S"]`` seconds
    (long enough to lose the host under it). Each point's start is appended ("point host" lines) to
    the file ``env["STANDIN_STARTED"]``: the workers are other processes."""
    points = [(s.point_id, s.label) for s in spec.points]
    launch_t = time.time()
    results = []
    for i, (pid, label) in enumerate(points):
        with open(spec.env["STANDIN_STARTED"], "a") as f:
            f.write(f"{pid} {ctx.name}\n")
        t = time.time()
        tell = progress if i == 0 else (lambda ev, pid=pid: progress(replace(ev, sub_point=pid)))
        tell(StepStarted("benchmark"))
        time.sleep(float(label.split(":")[1]) if i == 0 else float(spec.env["STANDIN_HOLD_S"]))
        r = PointResult(pid, ctx.name, ctx.node_id, "ok", started_at=t, ended_at=time.time())
        if i < len(points) - 1:
            progress(PointMeasured(r))
        results.append(r)
    return LaunchResult([replace(results[0], started_at=launch_t), *results[1:]])
