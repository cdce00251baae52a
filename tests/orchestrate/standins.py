"""Stand-ins for run_point that take a known time, for testing scheduling on a real Ray cluster
without servers. Shipped to the workers by value (see conftest)."""

import os
import time

from sweep.core.events import PointProgress
from sweep.core.record import PointResult


def timed_point(spec, ctx, progress):
    """Sleeps for the seconds in the point's label suffix ("p3:1.5"), reporting two stages."""
    seconds = float(spec.label.split(":")[1])
    t = time.time()
    progress(PointProgress("load"))
    time.sleep(seconds / 2)
    progress(PointProgress("benchmark"))
    time.sleep(seconds / 2)
    return PointResult(spec.point_id, ctx.name, ctx.node_id, "ok", started_at=t, ended_at=time.time(),
                       checks=[f"pid={os.getpid()}", f"port={spec.port}"])
