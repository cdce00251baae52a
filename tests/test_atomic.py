"""Atomic writes (sweep/core/atomic.py) leave files as open() would: mode 0666 less the umask, so a shared
results directory is readable by the team (mkstemp's 0600 must not survive the rename)."""

from __future__ import annotations

import os
import stat

import pytest

from sweep.core import atomic
from sweep.results.schema import from_rows
from sweep.results.writer import ResultsDir


@pytest.fixture
def umask():
    """Set a umask for one test; the old one is restored."""
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600), (0o027, 0o640)])
def test_written_files_get_the_mode_open_would_give(tmp_path, umask, mask, mode):
    umask(mask)
    atomic.write_text(tmp_path / "a.txt", "x")
    atomic.write_bytes(tmp_path / "b.bin", b"x", fsync=True)
    with atomic.atomic_path(tmp_path / "c.parquet") as tmp:
        tmp.write_bytes(b"x")
    with open(tmp_path / "d.ref", "w") as f:  # what open() gives, the reference
        f.write("x")
    assert [_mode(tmp_path / n) for n in ("a.txt", "b.bin", "c.parquet", "d.ref")] == [mode] * 4
    assert os.umask(mask) == mask  # the umask itself is left as it was


def test_a_results_directory_is_readable_by_the_team(tmp_path, umask):
    umask(0o022)
    rd = ResultsDir(tmp_path / "res", "e", "dry-run").open()
    rd.write_text("plan.json", "{}")
    rd.write_table("levels", "p1", from_rows([{"point_id": "p1", "concurrency": 1}], "levels"))
    files = [p for p in (tmp_path / "res").rglob("*") if p.is_file()]
    assert files and {_mode(p) for p in files} == {0o644}, {str(p): oct(_mode(p)) for p in files}


def test_the_umask_is_read_without_proc_too(umask, monkeypatch):
    umask(0o027)
    assert atomic.current_umask() == 0o027

    def no_proc(*a, **k):
        raise FileNotFoundError("/proc/self/status")

    monkeypatch.setattr(atomic, "open", no_proc, raising=False)  # not Linux: set and restored
    assert atomic.current_umask() == 0o027 and os.umask(0o027) == 0o027
