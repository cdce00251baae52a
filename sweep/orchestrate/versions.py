"""The SGLang version is part of what a point measured: a resume reuses a recorded point only where it
ran under the SGLang the hosts run now (and the experiment pins).

A point's id hashes what the experiment says it runs (sweep/experiment/plan.py); the SGLang release
its server ran is learned on the host at run time and recorded with the point (the ``sglang_version``
column). Before a resume keeps a recorded point, the version it ran is compared with the one the
hosts would run it under now (asked of the launcher the way the hosts ask it: the fake's own answer
in a dry run, the experiment's launcher here for ``--local``, one host of the cluster otherwise), and,
where that cannot be learned, with ``server.sglang_version``. A directory that holds points of another
version is refused before anything is written: upgrading SGLang and running the sweep again never
reports the old release's numbers as the new one's.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweep.core import ClusterError, PointFailure, ResultsError, RunKind, plural
from sweep.experiment import config as config_mod
from sweep.experiment import fake_args, fake_launcher
from sweep.host import sglang_version
from sweep.results import store
from sweep.sglang import serverargs

_UNKNOWN = frozenset({"", "unknown"})


@dataclass(frozen=True)
class Running:
    """The SGLang a point would run under now: ``version`` (None: not learned) and where it was
    learned (``source``, for the message)."""

    version: str | None
    source: str


def recorded_versions(path: Path, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{point_id: (sglang_version, label)}`` of the points ``ids`` recorded in ``path``, where the
    host recorded a version (a pruned or invalid point, or one of an old writer, has none)."""
    if not ids:
        return {}
    rows = store.read_columns(path, "points", ["point_id", "sglang_version", "label"], point_ids=ids)
    return {pid: (v, label) for pid, v, label in rows.iter_rows() if v is not None and v not in _UNKNOWN}


def running(exp: config_mod.Experiment, how: RunKind, address: str | None) -> Running:
    """The SGLang the hosts would run the experiment's points under now, asked as they ask it."""
    pinned = exp.server.sglang_version
    try:
        if how.fake_server and how.local_cluster:  # a dry run: the fake on this machine, speaking its release
            v = sglang_version(fake_launcher(), launcher_args=fake_args(exp))
            return Running(v, "the dry run's fake server speaks")
        if how.local_cluster:  # --local: the experiment's launcher on this machine
            here = sglang_version(_here(list(exp.server.launcher)))
            if here not in _UNKNOWN:
                return Running(here, f"{exp.server.launcher[0]} here runs")
        else:
            on_host = _on_a_host(exp, how, address)
            if on_host is not None:
                return Running(on_host, "the cluster's hosts run")
    except (PointFailure, ClusterError):  # not learned: the experiment's pin, if any, speaks for the hosts
        pass
    return Running(pinned, "server.sglang_version pins") if pinned else Running(None, "")


def _here(launcher: list[str]) -> list[str]:
    return [sys.executable if a in ("python", "python3") and i == 0 else a for i, a in enumerate(launcher)]


def _probe(launcher: list[str], launcher_args: list[str]) -> str:
    return sglang_version(launcher, launcher_args=launcher_args)


def _on_a_host(exp: config_mod.Experiment, how: RunKind, address: str | None) -> str | None:
    """The version one of the cluster's hosts answers for the experiment's launcher (the fake's with
    ``--fake``); the cluster joined if it is not yet."""
    import ray  # lazy: Ray takes about a second to import; only this path needs it
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # lazy: as ray

    from sweep.orchestrate import cluster  # lazy: at the top every importer of this module would load ray

    if not ray.is_initialized():
        cluster.connect(address)
    found = cluster.hosts(exp.cluster.host_resource)
    if not found:
        return None
    launcher, extra = (["python", "-m", "sweep.fake"], fake_args(exp)) if how.fake_server else (exp.server.launcher, [])
    task = ray.remote(_probe).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(found[0].node_id, soft=False)
    )
    try:
        v = ray.get(task.remote(list(launcher), list(extra)), timeout=120)
    except Exception:  # noqa: BLE001 - a host that cannot answer: not learned (each point's pre-flight still asks)
        return None
    return None if v in _UNKNOWN else v


def _same(recorded: str, now: Running) -> bool:
    if now.source.startswith("server.sglang_version"):  # the pin names a release; a host reports a build
        return serverargs.rules_version(recorded)[0] == serverargs.rules_version(now.version)[0]
    return recorded == now.version


def check_reuse(path: Path, kept: Mapping[str, tuple[str, str]], now: Running) -> None:
    """Refuse (``ResultsError``, exit 5) to keep the recorded points ``kept`` (``{point_id: (the
    version it ran, its label)}``) where one ran under another SGLang than ``now``."""
    if now.version is None:
        return
    stale = {pid: vl for pid, vl in kept.items() if not _same(vl[0], now)}
    if not stale:
        return
    versions = sorted({v for v, _ in stale.values()})
    example = ", ".join(label for _, label in list(stale.values())[:3])
    raise ResultsError(
        f"results directory {path} holds {plural(len(stale), 'point')} measured under SGLang "
        f"{' and '.join(versions)} ({example}{', ...' if len(stale) > 3 else ''}), and {now.source} "
        f"{now.version}: resuming would report {versions[0]}'s numbers as {now.version}'s; nothing was run "
        "or written",
        fix=f"measure SGLang {now.version} into a new directory (results_dir={path}-sglang-{now.version}; "
        "python -m sweep history compares the two), or measure these points again here with --force "
        f"(their {' and '.join(versions)} measurements are replaced)",
    )
