"""Writing a results directory: atomically, one Parquet file per point and table, resumable.

A point's files are written to a temporary name and renamed, the ``points`` row last, so a reader
never sees half a file and a point counts as finished only once its ``points`` row is there. A
``sweep.json`` manifest ties the directory to one experiment and to real or fake runs.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from sweep.core import ResultsError, __version__, atomic
from sweep.results.lock import LOCK
from sweep.results.meta import EXPERIMENT, LOGS, PLAN, log_path, read_manifest
from sweep.results.schema import (
    DECISIONS,
    FAKE_SPEED_DIVIDED,
    MANIFEST,
    REPEAT_MARK,
    TABLES,
    check,
    check_decisions,
    repeat_stem,
)
from sweep.results.speed import to_real_speed
from sweep.results.store import table_files


def sweep_id(path: str | Path) -> str:
    """The sweep's name on its hosts (the reaper's process marker, the fake GPU ledger's folder):
    the results directory's name and a hash of its full path. A rerun into the same directory is
    the same sweep and reaps what the earlier run left; two sweeps whose directories merely share
    a name (``res``) never touch each other's servers."""
    resolved = Path(path).resolve()
    return f"{resolved.name}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:8]}"


def write_parquet(path: Path, table: pa.Table) -> Path:
    """One Parquet file, atomically: written to a temporary name beside it, then renamed."""
    with atomic.atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return path


def _atomic_bytes(path: Path, data: bytes) -> None:
    atomic.write_bytes(path, data, fsync=True)


def _unwritable(path: Path, e: OSError) -> ResultsError:
    return ResultsError(
        f"cannot write results to {path}: {e.strerror or e}",
        fix="free disk space or fix permissions; finished points are kept, and rerunning the "
        "same command resumes where it stopped",
    )


def _missing_parent(path: Path, parent: Path) -> ResultsError:
    """A results_dir whose parent folder does not exist: the first missing folder and, where a folder
    beside it has a close name, that one."""
    missing = parent
    while not missing.parent.is_dir() and missing.parent != missing:
        missing = missing.parent
    try:
        siblings = [p.name for p in missing.parent.iterdir() if p.is_dir()]
    except OSError:
        siblings = []
    close = difflib.get_close_matches(missing.name, siblings, n=1, cutoff=0.6)
    meant = f"did you mean {missing.parent / close[0]}? " if close else ""
    return ResultsError(
        f"results directory {path}: {missing} does not exist (nothing was created)",
        fix=f"{meant}correct results_dir, or create {parent} first (mkdir -p {parent})",
    )


class ResultsDir:
    def __init__(self, path: str | Path, experiment: str, mode: str, *, create_parents: bool = True):
        """``mode`` is ``real``, ``dry-run`` or ``fake``: runs of different modes never share a directory.
        ``create_parents``: whether folders above the directory may be created (the default
        ``results/<name>`` may create ``results/``; a ``results_dir`` given by the user may not, so
        that a mistyped parent is an error rather than a new tree)."""
        self.path = Path(path)
        self.experiment = experiment
        self.mode = mode
        self.create_parents = create_parents
        self.set_aside: list[str] = []  # unreadable files of an earlier run, renamed *.corrupt
        # a dry run's fake speed: its points' times and rates are written at real speed (divided by it),
        # what was measured beside them (sweep/results/speed.py); 1: written as measured
        self.speed = 1.0

    def check(self) -> "ResultsDir":
        """Refuse a directory that belongs to another experiment or mode (writes nothing)."""
        blocked = next((p for p in (self.path, *self.path.parents) if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            raise ResultsError(
                f"results directory {self.path}: {blocked} is a file, not a directory",
                fix="point results_dir=... at a directory (new, empty, or one a sweep wrote), "
                f"e.g. results_dir=results/{self.experiment}",
            )
        parent = self.path.absolute().parent
        if not self.create_parents and not self.path.exists() and not parent.is_dir():
            raise _missing_parent(self.path, parent)
        meta = read_manifest(self.path)
        if meta is not None:
            if meta.get("experiment") != self.experiment:
                raise ResultsError(
                    f"results directory {self.path} belongs to experiment {meta.get('experiment')!r}, "
                    f"not {self.experiment!r}",
                    fix=f"use results_dir=results/{self.experiment}, or rename one of the experiments",
                )
            if meta.get("mode") != self.mode:
                raise ResultsError(
                    f"results directory {self.path} holds {meta.get('mode')} results; this is a {self.mode} run",
                    fix="fake and real numbers never mix: give this run another results_dir=...",
                )
        elif self.path.exists() and any(p.name != LOCK for p in self.path.iterdir()):  # a sweep's lock alone
            raise ResultsError(
                f"results directory {self.path} is not empty and was not written by a sweep",
                fix="point results_dir=... at a new or empty directory",
            )
        return self

    def open(self) -> "ResultsDir":
        """Create or adopt the directory (after ``check``), and set aside what a crash left."""
        self.check()
        manifest = self.path / MANIFEST
        try:
            for t in (*TABLES, LOGS):
                (self.path / t).mkdir(parents=True, exist_ok=True)
            if not manifest.is_file():
                _atomic_bytes(
                    manifest,
                    json.dumps(
                        {
                            "experiment": self.experiment,
                            "mode": self.mode,
                            "created_at": time.time(),
                            "sweep_version": __version__,
                        },
                        indent=2,
                    ).encode(),
                )
            self.clean_crash_leftovers()
        except OSError as e:
            raise _unwritable(self.path, e) from None
        return self

    def clean_crash_leftovers(self) -> None:
        """Half-written files of a crashed run: temporaries (never read) are removed, and a Parquet
        file that does not read back (a crash mid-copy, a full disk) is set aside as ``*.corrupt``,
        so its point runs again and readers never trip on it. A directory not yet made: nothing.
        Call it under the directory's lock, before reading what earlier runs recorded."""
        if not self.path.is_dir():
            return
        for t in TABLES:
            for tmp in (self.path / t).glob(f"*{atomic.TMP_SUFFIX}"):
                try:
                    tmp.unlink(missing_ok=True)
                except OSError as e:
                    raise _unwritable(tmp, e) from None
            for f in table_files(self.path, t):
                try:
                    pq.read_metadata(f)
                except Exception:  # ArrowInvalid, OSError: any file that does not read back
                    try:
                        f.rename(f.with_name(f.name + ".corrupt"))
                    except OSError as e:
                        raise _unwritable(f, e) from None
                    if str(f) not in self.set_aside:
                        self.set_aside.append(str(f))

    def log_path(self, point_id: str) -> Path:
        return log_path(self.path, point_id)

    def write_text(self, name: str, text: str) -> None:
        try:
            _atomic_bytes(self.path / name, text.encode())
        except OSError as e:
            raise _unwritable(self.path / name, e) from None

    def write_experiment(self, text: str) -> None:
        """The resolved experiment, as ``config.to_yaml`` renders it (secrets redacted there)."""
        self.write_text(EXPERIMENT, text)

    def write_plan(self, plan: dict) -> None:
        """The plan, the object ``Plan.to_json()`` gives (the same as ``--plan --json``)."""
        self.write_text(PLAN, json.dumps(plan, indent=2))

    def write_table(self, table_name: str, point_id: str, table: pa.Table, *, stem: str | None = None) -> None:
        table = check(table, table_name)
        target = self.path / table_name / f"{stem or point_id}.parquet"
        try:
            write_parquet(target, table)
        except OSError as e:
            raise _unwritable(target, e) from None

    def write_point(self, point_id: str, row: pa.Table, tables: dict[str, pa.Table | None]) -> None:
        """The measurement tables first, the ``points`` row last: its presence marks the point done. A
        point measured anew (``--force``, ``--retry-failed``) drops the re-measurements ``decide`` made
        of its earlier run: they were repeats of levels no longer there."""
        self.drop_repeats(point_id)
        for name, t in tables.items():
            if t is not None:
                self.write_table(name, point_id, to_real_speed(name, t, self.speed))
        if self.speed != 1.0 and FAKE_SPEED_DIVIDED not in row.column_names:
            row = row.append_column(FAKE_SPEED_DIVIDED, pa.array([self.speed] * row.num_rows, pa.float64()))
        self.write_table("points", point_id, row)

    def write_repeat(self, point_id: str, round_: int, tables: Mapping[str, pa.Table]) -> None:
        """A re-measurement of some of a point's levels (``decide``): its ``levels`` and ``requests``
        rows (their ``repeat`` set) as ``<table>/<point_id>~r<round>.parquet``, beside the point's own
        files, which stay as they are."""
        for name in ("requests", "levels"):  # the levels row last: a reader pools a level once it is there
            if name in tables and tables[name] is not None:
                t = to_real_speed(name, tables[name], self.speed)
                self.write_table(name, point_id, t, stem=repeat_stem(point_id, round_))

    def drop_repeats(self, point_id: str) -> None:
        for name in TABLES:
            for f in (self.path / name).glob(f"{point_id}{REPEAT_MARK}*.parquet"):
                f.unlink(missing_ok=True)

    def write_decisions(self, table: pa.Table) -> Path:
        """How each decision ended (``decide``), the whole table at once: ``decisions.parquet``."""
        target = self.path / DECISIONS
        try:
            return write_parquet(target, check_decisions(table))
        except OSError as e:
            raise _unwritable(target, e) from None

    def rescue(self, point_id: str, tables: dict[str, pa.Table | None]) -> Path:
        """Write a point that could not be written here to a directory in the system's temp dir."""

        where = Path(tempfile.gettempdir()) / "sweep-rescue" / self.path.resolve().name / point_id
        where.mkdir(parents=True, exist_ok=True)
        for name, t in tables.items():
            if t is not None:
                pq.write_table(t, where / f"{name}.parquet")
        return where

    def statuses(self) -> dict[str, str]:
        """``{point_id: status}`` of every point recorded so far (a corrupt file counts as absent)."""
        out: dict[str, str] = {}
        for f in table_files(self.path, "points"):
            try:
                df = pl.read_parquet(f, columns=["point_id", "status"])
            except Exception:  # a damaged file: the point is simply run again
                continue
            for pid, status in df.iter_rows():
                out[pid] = status
        return out


# --- a benchmark run on its own: python -m sweep bench --out DIR ---------------------------------

_BENCH_NAME = "bench"  # its files in DIR/<table>/ (its rows' point_id is "", as outside any sweep)


def write_tables(directory: str | Path, tables: Mapping[str, pa.Table]) -> dict[str, Path]:
    """Each table as ``DIR/<name>.parquet`` (atomically), the files ``BenchResult.write`` gives and
    ``bench --out`` has always written; ``{name: path}``. OSError when the directory is not writable."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    return {name: write_parquet(d / f"{name}.parquet", table) for name, table in tables.items()}


def check_benchmark_dir(directory: str | Path) -> None:
    """Refuse a sweep's results directory (its sweep.json) as a benchmark's: the benchmark's rows
    would be counted among the sweep's points. Anything else will do (files already there stay)."""
    d = Path(directory)
    manifest = read_manifest(d) if d.is_dir() else None
    if manifest is not None:
        raise ResultsError(
            f"{d} holds the results of the sweep {manifest.get('experiment')!r} ({MANIFEST}); "
            "a benchmark's tables there would be counted among its points",
            fix="pass --out a directory of its own, e.g. a new one",
        )


def write_benchmark(directory: str | Path, tables: Mapping[str, pa.Table], row: pa.Table) -> dict[str, Path]:
    """A benchmark's tables as a results directory that ``sweep.results.load``, ``python -m sweep
    query`` and ``report`` read: ``DIR/<table>/bench.parquet`` for each table and the ``points`` row
    (``records.benchmark_row``) last, as a sweep writes a point. A rerun into the same directory
    replaces them. ``{table: path}``; OSError when the directory is not writable. A sweep's directory
    (its sweep.json) is refused: the benchmark's rows would be counted among the sweep's points."""
    d = Path(directory)
    check_benchmark_dir(d)
    checked = {name: check(t, name) for name, t in (*tables.items(), ("points", row))}
    out = {}
    for name, table in checked.items():
        (d / name).mkdir(parents=True, exist_ok=True)
        out[name] = write_parquet(d / name / f"{_BENCH_NAME}.parquet", table)
    return out
