"""Writing traces in either byte order: the header, then records; whole or not at all."""
from __future__ import annotations

import os
import tempfile

import numpy as np

from . import format as fmt
from .meta import TraceMeta, encode_header
from .trace import NATIVE

BYTEORDERS = {"=": NATIVE, "native": NATIVE, "<": "<", "little": "<", ">": ">", "big": ">"}


def empty_records(n: int, ext: bool = False) -> np.ndarray:
    """A zeroed native-order record array to fill in."""
    return np.zeros(n, fmt.record_dtype(fmt.EXT_RECORD_SIZE if ext else fmt.CORE_SIZE))


def as_records(data, dtype: np.dtype) -> np.ndarray:
    """Records in `dtype` from a structured array, a dict of columns or a DataFrame.

    Fields the input lacks are 0; fields `dtype` lacks are dropped.
    """
    if isinstance(data, np.ndarray) and data.dtype == dtype:
        return data                                  # already records of this layout
    names = data.dtype.names if isinstance(data, np.ndarray) else list(data.keys())
    if names is None:
        raise ValueError("records must be a structured array or a mapping of columns")
    n = len(data) if isinstance(data, np.ndarray) else len(next(iter(data.values()), []))
    out = np.zeros(n, dtype)
    for name in dtype.names:
        if name in names:
            out[name] = np.asarray(data[name])
    return out


class Atomic:
    """An output that is whole or absent: `with` closes it, or aborts it on an exception."""

    def close(self):
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class TraceWriter(Atomic):
    """Write a trace to `path`: atomically (a temporary file renamed on close), mode 0600.

        with TraceWriter("x.magnet", TraceMeta(producer="me"), byteorder=">") as w:
            w.append(records)

    The header is written before the first records; its anchor (SYSINFO's
    timestamp) defaults to the earliest timestamp of those records.
    """

    def __init__(self, path: str | os.PathLike, meta: TraceMeta | None = None, *,
                 byteorder: str = "=", ext: bool = False):
        if byteorder not in BYTEORDERS:
            raise ValueError(f"byte order {byteorder!r}: use one of {sorted(BYTEORDERS)}")
        self.path = os.fspath(path)
        record_size = fmt.EXT_RECORD_SIZE if ext else fmt.CORE_SIZE
        self.meta = (meta or TraceMeta()).replace(record_size=record_size)
        self.dtype = fmt.record_dtype(record_size, BYTEORDERS[byteorder])
        self.records_written = 0
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, self._tmp = tempfile.mkstemp(prefix=".magnet-", suffix=".tmp", dir=directory)
        os.fchmod(fd, 0o600)
        self._file = os.fdopen(fd, "wb")
        self._header_written = False

    def _write_header(self, first_ticks: int | None) -> None:
        if self.meta.anchor_ticks is None:
            self.meta.anchor_ticks = first_ticks or 1
        self._file.write(encode_header(self.meta, self.dtype).tobytes())
        self._header_written = True

    def append(self, data) -> None:
        """Append records (structured array, dict of columns or DataFrame)."""
        records = as_records(data, self.dtype)
        if len(records) and not records["timestamp"].all():
            raise ValueError("a record's timestamp must not be 0")
        if not self._header_written:
            self._write_header(int(records["timestamp"].min()) if len(records) else None)
        self._file.write(records.tobytes())
        self.records_written += len(records)

    def close(self) -> str:
        """Finish the file and move it into place; returns its path."""
        if not self._header_written:
            self._write_header(None)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Discard what was written: no partial trace is left behind."""
        self._file.close()
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)


def write(path: str | os.PathLike, records, meta: TraceMeta | None = None, *,
          byteorder: str = "=", ext: bool | None = None, **meta_fields) -> str:
    """Write `records` as a trace at `path`; returns the path.

    ext defaults to whether the records carry the extended fields; keyword
    arguments set TraceMeta fields (producer="...", clock_source=Clock.SYNTHETIC, ...).
    """
    names = records.dtype.names if isinstance(records, np.ndarray) else list(records.keys())
    if ext is None:
        ext = "valid" in names
    meta = (meta or TraceMeta()).replace(**meta_fields)
    with TraceWriter(path, meta, byteorder=byteorder, ext=ext) as w:
        w.append(records)
    return w.path
