"""Writing a file so that a reader never sees half of it: write a temporary name beside it, then
rename it over the target (atomic on POSIX within one filesystem). The one place the sweep does
this: results tables and files, the benchmark's Parquet, the GPU ledger, the reaper's sessions
file and the cached ``--help`` flags all come here.

A file written here gets the mode ``open()`` would give it, 0666 less the umask (0644 under the
usual 022, 0664 under 002): ``mkstemp`` makes its temporary 0600, and a rename keeps the mode, so
without this a results directory shared by a team would be readable by its writer alone."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Union

_FILE_MODE = 0o666  # what open() asks for; the umask takes its share
TMP_SUFFIX = ".tmp"  # readers of a folder skip names ending in this (a writer died half way)
PathLike = Union[str, os.PathLike]


@contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """A fresh temporary path beside ``path`` (hidden, ending in ``.tmp``, unique to this writer) to
    write; renamed over ``path`` when the block ends (with the mode open() would have given it),
    removed when it raises."""
    path = Path(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    tmp = Path(name)
    try:
        try:
            os.fchmod(fd, _FILE_MODE & ~current_umask())
        finally:
            os.close(fd)
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: PathLike, data: bytes, *, fsync: bool = False) -> None:
    """``data`` as the whole of ``path``, atomically; ``fsync``: on disk before the rename."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def write_text(path: PathLike, text: str, *, fsync: bool = False) -> None:
    write_bytes(path, text.encode(), fsync=fsync)


def current_umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc/self/status``,
    since 4.7): setting it to read it back would, for that moment, let another thread create files
    with no umask at all."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # elsewhere: the only way; 077 (not 0) while it is briefly set
    os.umask(mask)
    return mask
