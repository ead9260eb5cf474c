"""Reading traces: memory-mapped, zero-copy in native byte order, one byteswap per column otherwise."""
from __future__ import annotations

import ctypes
import mmap
import os
import sys
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import format as fmt
from .errors import TraceError
from .format import Event
from .meta import MAX_META_RECORDS, TraceMeta, check_sysinfo, decode_header
from .scan import CHUNK, Layout, Scan, in_parallel, populate, release, split
from .scan import c_loops as scan_loops
from .scan import scan as scan_trace

# Records per step of the pandas-based passes (streams, parse): bounds their temporaries.
CHUNK_RECORDS = 1 << 20
# Records from different CPUs reach the buffer slightly out of time order; a step
# back larger than this is not reordering but a broken clock or a corrupt file.
REORDER_TOLERANCE_NS = 100_000_000
NATIVE = "<" if sys.byteorder == "little" else ">"


def detect_byteorder(first_record: bytes, path: str) -> str:
    """'<' or '>' from the SYSINFO event code of the first record."""
    code = int.from_bytes(first_record[16:20], "little")
    if code == fmt.SYSINFO:
        return "<"
    if code == fmt.SYSINFO_SWAPPED:
        return ">"
    raise TraceError(path, "not a magnet trace (the first record is not SYSINFO)")


class Trace:
    """A magnet trace, opened for reading.

    records:  every whole record as a numpy structured array, in the file's
              byte order, mapped from the file (nothing is read until used).
    meta:     SYSINFO and metadata (TraceMeta).
    column(): one field in native byte order (a view when the file is native).
    ns:       timestamps in nanoseconds of the trace's clock, honouring clock changes.
    """

    def __init__(self, path: str | os.PathLike, *, reorder_tolerance_ns: int = REORDER_TOLERANCE_NS):
        self.path = os.fspath(path)
        self.reorder_tolerance_ns = reorder_tolerance_ns
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                head = f.read(fmt.CORE_SIZE)
                self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except OSError as e:
            raise TraceError(self.path, e.strerror or str(e)) from None
        if size == 0:
            raise TraceError(self.path, "empty file")
        if size < fmt.CORE_SIZE:
            raise TraceError(self.path, f"too short to be a magnet trace ({size} bytes)")
        self.byteorder = detect_byteorder(head, self.path)
        sockid = int.from_bytes(head[:8], "little" if self.byteorder == "<" else "big")
        probe = TraceMeta(version=sockid >> 32, record_size=sockid & 0xFFFFFFFF,
                          clock_khz=1, anchor_ticks=1)
        check_sysinfo(probe, self.path, where="SYSINFO")
        self.record_size = probe.record_size
        count, self.truncated_bytes = divmod(size, self.record_size)
        if count == 0:
            raise TraceError(self.path, "truncated inside its first record")
        self._mmap.madvise(mmap.MADV_SEQUENTIAL)
        self.dtype = fmt.record_dtype(self.record_size, self.byteorder)
        self.records = np.frombuffer(self._mmap, dtype=self.dtype, count=count)
        self.meta, self.header_len = decode_header(self.records[:MAX_META_RECORDS + 2], self.path)
        self.meta.record_size = self.record_size

    # ------------------------------------------------------------ basics ---
    def __len__(self) -> int:
        return len(self.records)

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Drop the mapping (arrays still referenced keep it alive until they go)."""
        self.records = None
        self.__dict__.pop("ns", None)
        try:
            self._mmap.close()
        except BufferError:
            pass

    @property
    def swapped(self) -> bool:
        return self.byteorder != NATIVE

    @property
    def has_ext(self) -> bool:
        return self.record_size == fmt.EXT_RECORD_SIZE

    @property
    def data(self) -> np.ndarray:
        """The records after the header."""
        return self.records[self.header_len:]

    def column(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """One field of records[start:stop] in native byte order."""
        col = self.records[name][start:stop]
        return col if col.dtype.isnative else col.astype(col.dtype.newbyteorder("="))

    def chunks(self, start: int | None = None, stop: int | None = None, size: int = CHUNK_RECORDS):
        """(start, stop) bounds covering records[start:stop] in steps of `size`."""
        start = self.header_len if start is None else start
        stop = len(self.records) if stop is None else stop
        for lo in range(start, stop, size):
            yield lo, min(lo + size, stop)

    # ------------------------------------------------------------- scan ---
    @cached_property
    def scan(self) -> Scan:
        """One pass over all records: counts, bytes, loss, clock changes, anomalies."""
        return scan_trace(self)

    def check(self) -> "Trace":
        """Raise TraceError naming the first thing wrong with the records; return self if none."""
        s = self.scan
        if s.first_unknown:
            pos, code = s.first_unknown
            raise TraceError(self.path, f"record {pos}: unknown event code 0x{code:08x} "
                                        f"({s.unknown_events} such records)")
        if s.errors.get(Event.LOST):
            raise TraceError(self.path, f"{s.errors[Event.LOST]} LOST records carry a negative count")
        if s.first_zero_timestamp is not None:
            raise TraceError(self.path, f"record {s.first_zero_timestamp}: timestamp is 0 "
                                        f"({s.zero_timestamps} such records)")
        self._check_clock_changes()
        back_ns = self.ticks_to_ns(s.max_backstep_ticks)
        if back_ns > self.reorder_tolerance_ns:
            raise TraceError(self.path, f"record {s.max_backstep_position}: non-monotonic "
                             f"timestamps, {back_ns / 1e9:.6f} s earlier than the record before "
                             f"(more than the {self.reorder_tolerance_ns / 1e9:g} s that CPUs "
                             "may reorder)")
        return self

    def _check_clock_changes(self) -> None:
        for pos in self.scan.sysinfo_positions[1:]:
            rec = self.records[pos]
            sid = int(rec["sockid"])
            change = TraceMeta(version=sid >> 32, record_size=sid & 0xFFFFFFFF,
                               clock_khz=int(rec["size"]), anchor_ticks=int(rec["timestamp"]))
            check_sysinfo(change, self.path, where=f"record {pos} (SYSINFO)")
            if change.record_size != self.record_size:
                raise TraceError(self.path, f"record {pos}: SYSINFO changes the record size "
                                            f"from {self.record_size} to {change.record_size}")

    # ------------------------------------------------------------- time ---
    @cached_property
    def _clock(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Clock segments: first record position, first tick, ns at that tick, ns per tick."""
        pos = self.scan.sysinfo_positions
        t0 = self.column_at("timestamp", pos).astype(np.int64)
        khz = self.column_at("size", pos).astype(np.float64)
        if (khz <= 0).any():
            self._check_clock_changes()
        scale = 1e6 / khz
        base = np.empty(len(pos), np.float64)
        base[0] = t0[0] * scale[0]
        for i in range(1, len(pos)):          # one step per clock change, not per record
            base[i] = base[i - 1] + (t0[i] - t0[i - 1]) * scale[i - 1]
        return pos, t0, base, scale

    @property
    def exact_ns_clock(self) -> bool:
        """Ticks are nanoseconds throughout: conversion is the identity."""
        pos, _, _, scale = self._clock
        return bool((scale == 1.0).all())

    def to_ns(self, ticks: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Convert ticks of the records at `positions` to int64 nanoseconds."""
        ticks = np.asarray(ticks)
        if self.exact_ns_clock:
            return ticks.astype(np.int64, copy=False)
        pos, t0, base, scale = self._clock
        seg = np.searchsorted(pos, positions, side="right") - 1
        return np.rint(base[seg] + (ticks.astype(np.int64) - t0[seg]) * scale[seg]).astype(np.int64)

    def ns_at(self, positions: np.ndarray) -> np.ndarray:
        """Timestamps in ns of the records at `positions` (without converting the whole column)."""
        return self.to_ns(self.column_at("timestamp", positions), positions)

    def ticks_to_ns(self, ticks: int) -> int:
        """A tick interval in ns at the first clock rate (for thresholds and durations)."""
        return int(round(ticks * 1e6 / self.meta.clock_khz))

    @cached_property
    def ns(self) -> np.ndarray:
        """Every record's timestamp in ns (a view for a native nanosecond trace)."""
        ts = self.column("timestamp")
        if self.exact_ns_clock:
            return ts.view(np.int64)
        return self.to_ns(ts, np.arange(len(ts)))

    @property
    def start_ns(self) -> int:
        """ns at the first SYSINFO: time zero of the trace."""
        return int(self.to_ns(np.array([self.meta.anchor_ticks]), np.array([0]))[0])

    def datetimes(self, ns: np.ndarray | None = None) -> np.ndarray:
        """Timestamps (all records, or the given ns) as numpy datetime64[ns] in UTC."""
        if self.meta.wall_anchor_ns is None:
            raise TraceError(self.path, "the trace has no wall-clock anchor (WALL_ANCHOR_NS)")
        ns = self.ns if ns is None else ns
        return (ns - self.start_ns + self.meta.wall_anchor_ns).astype("datetime64[ns]")

    @property
    def duration_ns(self) -> int:
        """From the earliest to the latest record after the header."""
        s = self.scan
        if s.records == 0:
            return 0
        if self.exact_ns_clock:
            return s.max_ticks - s.min_ticks
        spans = [(ns.min(), ns.max()) for ns in (self.ns_at(np.arange(lo, hi)) for lo, hi in self.chunks())]
        return int(max(hi for _, hi in spans) - min(lo for lo, _ in spans))

    # ----------------------------------------------------------- selection ---
    def select(self, events=None, sockid: int | None = None, start: int | None = None,
               stop: int | None = None) -> np.ndarray:
        """Positions of the records with one of `events` and, if given, this sockid."""
        codes = None if events is None else np.array([int(e) for e in np.atleast_1d(events)], np.uint32)
        start = self.header_len if start is None else start
        stop = len(self.records) if stop is None else stop

        def part(lo: int, hi: int) -> np.ndarray:
            found = []
            for clo in range(lo, hi, CHUNK):
                chi = min(clo + CHUNK, hi)
                populate(self, clo, chi)
                found.append(np.flatnonzero(self._match(clo, chi, codes, sockid)) + clo)
            return np.concatenate(found) if found else np.zeros(0, np.int64)

        if stop <= start:
            return np.zeros(0, np.int64)
        return np.concatenate(in_parallel(part, split(start, stop)))

    def _match(self, lo: int, hi: int, codes: np.ndarray | None, sockid: int | None) -> np.ndarray:
        chunk = self.records[lo:hi]
        keep = np.ones(hi - lo, bool)
        if codes is not None:
            ev = chunk["event"]
            keep = ev == codes[0] if len(codes) == 1 else np.isin(ev.astype(np.uint32), codes, kind="table")
        if sockid is not None:
            keep &= chunk["sockid"] == np.uint64(sockid)
        return keep

    def time_batches(self, events, sockid: int | None = None, size: int | None = None):
        """The records with one of `events` (and this sockid), a batch of columns at a time,
        such that no record of a later batch is earlier than any of this one.

        A trace whose records are in time order is read chunk by chunk.  Otherwise a record
        waits until no later chunk can hold an earlier one (the earliest time of each later
        chunk is found first), so a batch may span chunks; each batch is then unordered
        inside (Batch.ordered False)."""
        table = _code_table(events)
        size = size or CHUNK_RECORDS
        if self.exact_ns_clock and self.scan.backsteps == 0:
            yield from self.batches(events, sockid, size, ordered=True)
            return
        bounds = list(self.chunks(size=size))
        floor = self._later_floor(bounds)
        pending = None
        for k, (lo, hi) in enumerate(bounds):
            batch = self._batch(table, sockid, lo, hi, ordered=False)
            release(self, lo, hi)
            pending = batch if pending is None else pending.joined(batch)
            ready = pending.ns <= floor[k + 1]
            yield pending.part(ready)
            pending = pending.part(~ready)
        if pending is not None and len(pending.ns):
            yield pending

    def batches(self, events, sockid: int | None = None, size: int | None = None, ordered: bool = False):
        """The records with one of `events` (and this sockid), a chunk of columns at a time, in file order."""
        table = _code_table(events)
        for lo, hi in self.chunks(size=size or CHUNK_RECORDS):
            yield self._batch(table, sockid, lo, hi, ordered)
            release(self, lo, hi)

    def _batch(self, table: np.ndarray, sockid: int | None, lo: int, hi: int, ordered: bool) -> "Batch":
        populate(self, lo, hi)
        lib = scan_loops()
        if lib is not None and self.exact_ns_clock and self.records.flags.c_contiguous:
            return self._batch_c(lib, table, sockid, lo, hi, ordered)
        ev = self.column("event", lo, hi)
        keep = table[np.minimum(ev, len(table) - 1)]
        sid = self.column("sockid", lo, hi)
        if sockid is not None:
            keep &= sid == np.uint64(sockid)
        if keep.all():
            keep = slice(None)                       # every record: copies, not selections
        ts = self.column("timestamp", lo, hi)
        if self.exact_ns_clock:
            ns = np.array(ts.view(np.int64)[keep])
        else:
            ns = self.to_ns(ts[keep], np.arange(lo, hi)[keep])
        return Batch(np.array(sid[keep]), np.array(ev[keep]), ns,
                     self.column("size", lo, hi)[keep].astype(np.int64), ordered)

    def _batch_c(self, lib, table: np.ndarray, sockid: int | None, lo: int, hi: int, ordered: bool) -> "Batch":
        """_batch in one C walk over the mapped records (a clock in ns: times need no conversion)."""
        n, keep = hi - lo, np.ascontiguousarray(table, np.uint8)
        sid, ev = np.empty(n, np.uint64), np.empty(n, np.uint32)
        ns, size = np.empty(n, np.int64), np.empty(n, np.int64)
        k = lib.magnet_trace_columns(self.records.ctypes.data + lo * self.record_size, n,
                                     ctypes.byref(Layout.of(self.records)), keep.ctypes.data, len(keep),
                                     sockid is not None, sockid or 0, sid.ctypes.data, ev.ctypes.data,
                                     ns.ctypes.data, size.ctypes.data)
        return Batch(sid[:k], ev[:k], ns[:k], size[:k], ordered)

    def _later_floor(self, bounds: list[tuple[int, int]]) -> np.ndarray:
        """Per chunk k, the earliest ns of chunks k.. (and +inf after the last)."""
        least = np.empty(len(bounds) + 1, np.float64)
        least[-1] = np.inf
        for k, (lo, hi) in enumerate(bounds):
            least[k] = self.ns_at(np.arange(lo, hi)).min() if not self.exact_ns_clock \
                else self.column("timestamp", lo, hi).view(np.int64).min()
        return np.minimum.accumulate(least[::-1])[::-1]

    def column_at(self, name: str, positions: np.ndarray) -> np.ndarray:
        """One field of the records at `positions`, in native byte order."""
        col = self.records[name][positions]
        return col if col.dtype.isnative else col.astype(col.dtype.newbyteorder("="))

    def series(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ns, size) of the records at `positions`."""
        ts = self.column_at("timestamp", positions)
        return self.to_ns(ts, positions), self.column_at("size", positions).astype(np.int64)

    def lost_series(self) -> tuple[np.ndarray, np.ndarray]:
        """(ns, records dropped) of every LOST record: where in time the loss happened."""
        return self.series(self.select(Event.LOST))

    def stream_ids(self) -> np.ndarray:
        """The sockids with network events, sorted."""
        from .accumulate import Index
        streams = Index()
        for b in self.batches(sorted(fmt.NETWORK_EVENTS)):
            streams.of(b.sockid[b.sockid != 0])
        return np.sort(streams.ids)

    def streams(self):
        """Per stream (sockid): first/last ns and, per network event, records and bytes.

        A pandas DataFrame indexed by sockid, sorted; built batch by batch into
        per-stream accumulators, so memory stays bounded by the number of streams."""
        from .accumulate import Growing, Index
        codes = sorted(fmt.NETWORK_EVENTS)
        column_of = np.zeros(fmt.EVENT_TABLE_SIZE, np.int64)
        column_of[codes] = np.arange(len(codes))
        streams, per = Index(), len(codes)
        acc = Growing(first=(np.int64, np.iinfo(np.int64).max), last=(np.int64, np.iinfo(np.int64).min))
        cells = Growing(records=(np.int64, 0), bytes=(np.int64, 0))
        for b in self.batches(codes):
            b = b.part(b.sockid != 0)
            key = streams.cells(b.sockid, b.event, column_of, per)
            s = key // per
            acc.cover(len(streams))
            np.minimum.at(acc.view("first"), s, b.ns)
            np.maximum.at(acc.view("last"), s, b.ns)
            cells.cover(len(streams) * per)
            cells.view("records")[:] += np.bincount(key, minlength=len(cells))
            cells.view("bytes")[:] += np.rint(np.bincount(key, weights=np.maximum(b.size, 0),
                                                          minlength=len(cells))).astype(np.int64)
        return _stream_table(streams.ids, acc, cells, codes)

    # ------------------------------------------------------------ pandas ---
    def to_pandas(self, start: int | None = None, stop: int | None = None, header: bool = False):
        """The records as a DataFrame: timestamp_ns, datetime (if anchored), sockid,
        event (by name), size, and the extended fields when present."""
        import pandas as pd
        lo = 0 if header else self.header_len
        lo = lo if start is None else start
        hi = len(self.records) if stop is None else stop
        names = [f.name for f in fmt.EXT_FIELDS] if self.has_ext else []
        ns = self.ns_at(np.arange(lo, hi))
        cols = {"timestamp_ns": ns}
        if self.meta.wall_anchor_ns is not None:
            cols["datetime"] = self.datetimes(ns)
        cols["sockid"] = self.column("sockid", lo, hi)
        cols["event"] = event_names(self.column("event", lo, hi))
        cols["size"] = self.column("size", lo, hi)
        for name in names:
            if name in ("saddr", "daddr"):
                cols[name] = format_addresses(np.asarray(self.records[name][lo:hi]))
            else:
                cols[name] = self.column(name, lo, hi)
        return pd.DataFrame(cols)


@dataclass
class Batch:
    """Columns of some records: sockid, event, ns, size (int64); ordered: ns never decreases."""
    sockid: np.ndarray
    event: np.ndarray
    ns: np.ndarray
    size: np.ndarray
    ordered: bool = False

    def __len__(self) -> int:
        return len(self.ns)

    def part(self, keep: np.ndarray) -> "Batch":
        return Batch(self.sockid[keep], self.event[keep], self.ns[keep], self.size[keep], self.ordered)

    def joined(self, other: "Batch") -> "Batch":
        return Batch(*(np.concatenate([a, b]) for a, b in
                       ((self.sockid, other.sockid), (self.event, other.event),
                        (self.ns, other.ns), (self.size, other.size))), self.ordered and other.ordered)


def _code_table(events) -> np.ndarray:
    """A lookup table: is this event code (below 256; larger codes clip to the last) wanted?"""
    table = np.zeros(fmt.EVENT_TABLE_SIZE + 1, bool)
    table[[int(e) for e in np.atleast_1d(events)]] = True
    return table


def _stream_table(ids: np.ndarray, acc, cells, codes: list[int]):
    """The per-stream accumulators as a DataFrame, one row per sockid (sorted)."""
    import pandas as pd
    order = np.argsort(ids, kind="stable")
    table = pd.DataFrame(index=pd.Index(ids[order], dtype=np.uint64, name="sockid"))
    if not len(ids):
        return table
    table["first_ns"] = acc.view("first")[order]
    table["last_ns"] = acc.view("last")[order]
    records = cells.view("records").reshape(len(ids), len(codes))[order]
    nbytes = cells.view("bytes").reshape(len(ids), len(codes))[order]
    for k, code in enumerate(codes):
        name = Event(code).name.lower()
        table[f"{name}_records"], table[f"{name}_bytes"] = records[:, k], nbytes[:, k]
    return table


def event_names(codes: np.ndarray):
    """Event codes as a pandas Categorical of names (unknown codes in hex)."""
    import pandas as pd
    uniq, inverse = np.unique(codes, return_inverse=True)
    return pd.Categorical.from_codes(inverse, [fmt.event_name(int(c)) for c in uniq])


def format_addresses(raw: np.ndarray) -> np.ndarray:
    """16-byte addresses (IPv4 as ::ffff:a.b.c.d) to strings, one conversion per distinct address."""
    import ipaddress
    if len(raw) == 0:
        return np.zeros(0, object)
    uniq, inverse = np.unique(raw.reshape(len(raw), 16), axis=0, return_inverse=True)
    names = []
    for row in uniq:
        addr = ipaddress.IPv6Address(row.tobytes())
        names.append("" if not any(row) else str(addr.ipv4_mapped or addr))
    return np.array(names, dtype=object)[inverse.reshape(-1)]


def open_trace(path: str | os.PathLike, **kwargs) -> Trace:
    """Open a trace (magnetlib.open)."""
    return Trace(path, **kwargs)
