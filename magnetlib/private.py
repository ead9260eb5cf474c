"""Files magnet derives from traces are created mode 0600, as traces are: pcaps,
demand, library tables and exports name hosts, ports and what was sent when.

The mode is given when a file is created (the umask can only narrow it); a
user who wants to share one opens it up with chmod, and a file that already
exists keeps the mode its owner gave it when it is written in place.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager

MODE = 0o600


def opener(path: str, flags: int) -> int:
    """For open(..., opener=opener): new files mode 0600."""
    return os.open(path, flags, MODE)


def touch(path: str | os.PathLike) -> None:
    """Create `path` empty with mode 0600 if it does not exist, for writers that
    take a path and open it themselves (pyarrow, pandas): they keep the mode."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, MODE))


def fsync(path: str | os.PathLike) -> None:
    """Flush a file's or a directory's contents (a rename) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temporary(path: str | os.PathLike) -> str:
    """A new empty file (mode 0600) next to `path`, to be renamed over it."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    os.close(fd)
    return tmp


@contextmanager
def replacing(path: str | os.PathLike, durable: bool = False):
    """Yield a temporary path (mode 0600) next to `path` to write; it replaces
    `path` in one rename when the block succeeds and is removed when it fails.
    Readers see the old file or the new one, never a partial one; `durable`
    also survives a power cut (the file and the rename are flushed)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = temporary(path)
    try:
        yield tmp
        if durable:
            fsync(tmp)
        os.replace(tmp, path)
        if durable:
            fsync(directory)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
