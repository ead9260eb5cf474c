"""A trace library on disk: its layout, its catalogue, and how an import commits.

    LIB/magnet-library.json                       marks the directory as a library
    LIB/events/host=H/day=D/T-NNNN.parquet        the records of trace T (Hive partitions)
    LIB/catalog/streams/T.parquet                 one row per stream of trace T
    LIB/catalog/traces.parquet                    one row per trace: THE list of what is in
    LIB/.staging/                                 imports in progress
    LIB/.lock                                     writers take it (readers never wait)

A trace T is in the library exactly when traces.parquet lists it.  An import
writes everything under .staging/T-PID/ (the same tree, outside events/),
commits by replacing traces.parquet (one atomic rename), and only then moves
its files into place.  Readers build their file lists from traces.parquet and
look for a listed trace's files in .staging too, so an import interrupted
before its commit is never seen and one interrupted after it is seen whole.
The Hive tree under events/ never holds a file of an unlisted trace, so a raw
scan of it never counts one; the next writer removes the staged files of
uncommitted imports and moves those of committed ones into place.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import private
from ..errors import MagnetError

MARKER = "magnet-library.json"
LAYOUT_VERSION = 1
UNANCHORED_DAY = "unanchored"        # the day partition of traces without a wall-clock anchor


class LibraryError(MagnetError):
    """Something wrong with a library directory: one line, "PATH: problem"."""


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    @property
    def events(self) -> Path:
        return self.root / "events"

    @property
    def streams_dir(self) -> Path:
        return self.root / "catalog" / "streams"

    @property
    def traces_file(self) -> Path:
        return self.root / "catalog" / "traces.parquet"

    @property
    def staging(self) -> Path:
        return self.root / ".staging"

    def partition(self, host: str, day: str) -> Path:
        return self.events / f"host={host}" / f"day={day}"

    def streams_file(self, trace: str) -> Path:
        return self.streams_dir / f"{trace}.parquet"


def safe_label(text: str) -> str:
    """A host label usable as a partition directory name (and in SQL without quoting woes)."""
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", text.strip()).strip("._") or "unknown"
    return label[:100]


def open_layout(path: str | os.PathLike, create: bool = False) -> Layout:
    """The layout of the library at `path`; with create, make an empty library there.

    Creation is atomic: the empty library is made in a directory of its own beside
    `path` and renamed onto it (rename(2) takes an empty directory's place, and fails
    on a directory holding anything), so concurrent creators all end up with the one
    that won, and a failed creation (a full disk) leaves `path` as it was.  A library
    half made by an interrupted creation (its empty directories, no marker) is
    completed."""
    root = Path(path)
    layout = Layout(root)
    if not layout.marker.is_file() and create:
        if _half_made(layout):
            _complete(layout)
        elif root.exists() and any(root.iterdir()):
            if not layout.marker.is_file():    # not a creator that won since the first look
                raise LibraryError(str(root), "is not empty and not a magnet library; refusing to use it")
        else:
            _create(layout)
    if layout.marker.is_file():
        _check_marker(layout)
        return layout
    what = "does not exist" if not root.exists() else "is not a magnet library (no magnet-library.json)"
    raise LibraryError(str(root), what)


SKELETON = ("events", "catalog", ".staging", ".lock")


def _half_made(layout: Layout) -> bool:
    """A directory holding only what creation makes before the marker, and no file."""
    root = layout.root
    if not root.is_dir():
        return False
    entries = {p.name for p in root.iterdir()}
    leftover_tmp = {p for p in entries if p.startswith(f".{MARKER}.") or p == MARKER + ".tmp"}
    if not entries or not entries - leftover_tmp <= set(SKELETON):
        return False
    return not any(p.is_file() and p.name != ".lock" for name in entries - leftover_tmp
                   for p in [root / name, *(root / name).rglob("*")])


def _skeleton(layout: Layout) -> None:
    for d in (layout.events, layout.streams_dir, layout.staging):
        d.mkdir(parents=True, exist_ok=True)
    with private.replacing(layout.marker, durable=True) as tmp:
        Path(tmp).write_text(json.dumps({"format": "magnet-library", "version": LAYOUT_VERSION}) + "\n")


def _create(layout: Layout) -> None:
    root = layout.root
    root.parent.mkdir(parents=True, exist_ok=True)
    new = root.parent / f".{root.name}.new-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        new.mkdir()
        _skeleton(Layout(new))
        os.rename(new, root)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not layout.marker.is_file():
            raise LibraryError(str(root), f"cannot create the library: {e.strerror or e}") from None
    finally:
        shutil.rmtree(new, ignore_errors=True)


def _complete(layout: Layout) -> None:
    try:
        _skeleton(layout)
    except OSError as e:
        raise LibraryError(str(layout.root), f"cannot complete the library: {e.strerror or e}") from None
    for tmp in [*layout.root.glob(MARKER + ".tmp"), *layout.root.glob(f".{MARKER}.*.tmp")]:
        tmp.unlink(missing_ok=True)


def _check_marker(layout: Layout) -> None:
    try:
        info = json.loads(layout.marker.read_text())
        version = int(info["version"])
    except (ValueError, KeyError, TypeError, OSError):
        raise LibraryError(str(layout.marker), "unreadable library marker") from None
    if version > LAYOUT_VERSION:
        raise LibraryError(str(layout.root), f"library layout version {version} is newer than "
                                              f"this magnet reads ({LAYOUT_VERSION})")


@contextmanager
def writer_lock(layout: Layout):
    """One writer at a time; the lock goes with the process, however it ends."""
    with open(layout.root / ".lock", "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


# ----------------------------------------------------------- the catalogue ---
def read_traces(layout: Layout):
    """The traces table (pyarrow), or None for a library with no trace yet."""
    import pyarrow.parquet as pq
    if not layout.traces_file.exists():
        return None
    return pq.read_table(layout.traces_file)


def committed(layout: Layout) -> list[str]:
    """Ids of the traces in the library."""
    table = read_traces(layout)
    return [] if table is None else table.column("trace").to_pylist()


def event_files(layout: Layout, traces: list[str] | None = None) -> list[str]:
    """Parquet files of the records of the given traces (default: all committed ones)."""
    return _placed_or_staged(layout, traces, lambda root: Layout(root).events.glob("host=*/day=*/*.parquet"))


def stream_files(layout: Layout, traces: list[str] | None = None) -> list[str]:
    return _placed_or_staged(layout, traces, lambda root: Layout(root).streams_dir.glob("*.parquet"))


def _trace_of_file(path: Path) -> str:
    return path.name.split("-", 1)[0].removesuffix(".parquet")


def _staged_imports(layout: Layout) -> list[Path]:
    return sorted(layout.staging.iterdir()) if layout.staging.exists() else []


def _placed_or_staged(layout: Layout, traces: list[str] | None, files) -> list[str]:
    """The files `files(root)` lists of `traces` (default: the committed ones), in
    place or, for a committed trace, still staged. Staged ones are listed first, so
    that one moved meanwhile is found in place; each path relative to its root
    counts once, in place first."""
    listed = set(committed(layout))
    wanted = listed if traces is None else set(traces)
    found: dict[Path, Path] = {}
    for root in _staged_imports(layout) + [layout.root]:
        if root != layout.root and root.name.split("-", 1)[0] not in wanted & listed:
            continue
        found.update({p.relative_to(root): p for p in files(root) if _trace_of_file(p) in wanted})
    return [str(found[rel]) for rel in sorted(found)]


def commit(layout: Layout, staged: Path, trace_row) -> None:
    """List a staged import's trace, then move its files into place.

    Listing is the import's one atomic step (traces.parquet replaced). Files
    reach the Hive tree only after it: a crash before leaves nothing there, a
    crash after leaves staged files that readers find and cleanup() moves.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    old = read_traces(layout)
    table = trace_row if old is None else pa.concat_tables([old, trace_row], promote_options="default")
    tmp = layout.traces_file.with_suffix(".parquet.tmp")
    tmp.unlink(missing_ok=True)
    private.touch(tmp)
    pq.write_table(table, tmp)
    private.fsync(tmp)
    os.replace(tmp, layout.traces_file)
    private.fsync(layout.traces_file.parent)
    place(layout, staged)


def place(layout: Layout, staged: Path) -> int:
    """Move a committed import's staged files into place; returns how many."""
    moved = 0
    for src in sorted(staged.rglob("*.parquet")):
        dest = layout.root / src.relative_to(staged)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, dest)
        moved += 1
    shutil.rmtree(staged, ignore_errors=True)
    return moved


def cleanup(layout: Layout) -> int:
    """Finish what interrupted imports left (under the writer lock): staged files of a
    committed trace are moved into place, others removed; returns the entries handled."""
    removed = 0
    keep = set(committed(layout))
    for entry in _staged_imports(layout):
        if entry.name.split("-", 1)[0] in keep:
            place(layout, entry)
        else:
            shutil.rmtree(entry, ignore_errors=True)
        removed += 1
    orphans = [p for p in layout.events.glob("host=*/day=*/*.parquet") if p.name.split("-", 1)[0] not in keep]
    orphans += [p for p in layout.streams_dir.glob("*.parquet") if p.stem not in keep]
    for path in orphans:
        path.unlink(missing_ok=True)
    layout.traces_file.with_suffix(".parquet.tmp").unlink(missing_ok=True)
    return removed + len(orphans)
