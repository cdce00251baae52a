"""Writing a file so that a reader never sees half of it: write a temporary name beside it, then
rename it over the target (atomic on POSIX within one filesystem). The one place the sweep does
this: results tables and files, the benchmark's Parquet, the GPU ledger, the reaper's sessions
file and the cached ``--help`` flags all come here."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Union

TMP_SUFFIX = ".tmp"  # readers of a folder skip names ending in this (a writer died half way)
PathLike = Union[str, os.PathLike]


@contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """A fresh temporary path beside ``path`` (hidden, ending in ``.tmp``, unique to this writer) to
    write; renamed over ``path`` when the block ends, removed when it raises."""
    path = Path(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    os.close(fd)
    tmp = Path(name)
    try:
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
