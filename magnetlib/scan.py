"""The full pass over a trace's records: counts, bytes, loss, clock changes, anomalies.

Where a C compiler is, each chunk is one walk over the mapped records in C (scan.c,
0.14 s on 1 GiB); the numpy version below gives the same Scan (0.31 s).  Speed
comes from, measured on a 1 GiB trace (experiments/bench_parse.py):
  * chunks of 64 Ki records, so that a chunk's columns are still in the CPU cache
    for the second and later operations on it (4 Mi-record chunks ran 4x slower);
  * the mapped pages of a chunk populated in one madvise call rather than by
    one page fault per 4 KiB;
  * the chunks split across threads (numpy releases the GIL in these loops);
  * numpy's temporaries of one batch reused for the next (keep_freed_memory).
Rare cases (clock changes, unknown codes, errors, time running backwards) leave
the fast path only for the chunks that hold them.
"""
from __future__ import annotations

import ctypes
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from . import format as fmt
from . import native
from .format import Event
from .native import I32, I64, PTR

CHUNK = 1 << 16
WORKERS = max(1, min(os.cpu_count() or 1, 4))
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)   # Linux >= 5.14
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3                       # glibc's mallopt()
TABLE = fmt.EVENT_TABLE_SIZE
LOST_ENDED_EARLY = 1                      # a LOST record's sockid when the capture stopped early
KNOWN_SMALL = fmt.EVENT_INDEX >= 0


@dataclass
class Scan:
    """What one pass over every record after the header finds."""
    records: int = 0                      # data records (after the header)
    counts: dict = field(default_factory=dict)       # Event -> records
    bytes: dict = field(default_factory=dict)        # Event -> sum of positive sizes
    errors: dict = field(default_factory=dict)       # Event -> records with size < 0
    zero_size: dict = field(default_factory=dict)    # Event -> records with size == 0
    lost: int = 0                         # records dropped, from LOST records
    lost_records: int = 0                 # LOST records
    ended_early: bool = False             # the last record is a LOST record of sockid 1
    sysinfo_positions: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    unknown_events: int = 0
    first_unknown: tuple[int, int] | None = None      # (position, code)
    zero_timestamps: int = 0
    first_zero_timestamp: int | None = None
    backsteps: int = 0                    # records earlier than the record before them
    max_backstep_ticks: int = 0
    max_backstep_position: int | None = None
    min_ticks: int | None = None
    max_ticks: int | None = None


@dataclass
class _Part:
    """Accumulators of one worker's contiguous range."""
    counts: np.ndarray = field(default_factory=lambda: np.zeros(TABLE, np.int64))
    nbytes: np.ndarray = field(default_factory=lambda: np.zeros(TABLE, np.int64))
    errors: np.ndarray = field(default_factory=lambda: np.zeros(TABLE, np.int64))
    zeros: np.ndarray = field(default_factory=lambda: np.zeros(TABLE, np.int64))
    high: list = field(default_factory=list)          # (positions, codes) of codes >= TABLE
    zero_ts: int = 0
    first_zero_ts: int | None = None
    tmin: int | None = None
    tmax: int | None = None
    backsteps: int = 0
    max_back: int = 0
    max_back_pos: int | None = None


def keep_freed_memory() -> None:
    """Have glibc serve arrays of up to 32 MiB from its heap and keep what is freed
    there, instead of a fresh mmap() per array given back by munmap(): every page
    of a fresh mapping costs a page fault and zeroing. Analyses allocate such
    temporaries batch after batch: on 1 GiB, `magnet stats` spent 1.2 s of its 3.4 s
    in the kernel doing that, 0.45 s after (and 10 % more peak memory). No-op
    where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
    except (OSError, AttributeError):
        pass


def split(start: int, stop: int, workers: int = WORKERS) -> list[tuple[int, int]]:
    """Contiguous ranges covering [start, stop), one per worker, on chunk boundaries."""
    n = stop - start
    per = -(-max(n, 1) // workers)
    per = -(-per // CHUNK) * CHUNK
    return [(lo, min(lo + per, stop)) for lo in range(start, stop, per)] or [(start, stop)]


def in_parallel(fn, ranges: list[tuple[int, int]]) -> list:
    if len(ranges) == 1:
        return [fn(*ranges[0])]
    with ThreadPoolExecutor(len(ranges)) as pool:
        return list(pool.map(lambda r: fn(*r), ranges))


def ahead(items, prepare=lambda item: item):
    """prepare(item) of each item (and the next item itself), computed one item ahead on a
    second thread: numpy releases the GIL, so producing the next overlaps using this one."""
    items = iter(items)

    def step():
        item = next(items, None)
        return None if item is None else prepare(item)

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(step)
        while (prepared := future.result()) is not None:
            future = pool.submit(step)
            yield prepared


def populate(trace, lo: int, hi: int) -> None:
    """Map the pages of records[lo:hi] in one call instead of a fault per page."""
    mm = trace._mmap
    begin = lo * trace.record_size & ~(mmap.PAGESIZE - 1)
    end = min(hi * trace.record_size, len(mm))
    try:
        mm.madvise(MADV_POPULATE_READ, begin, end - begin)
    except (OSError, ValueError):
        pass                            # older kernel: pages fault in one by one


def release(trace, lo: int, hi: int) -> None:
    """Unmap the pages of records[lo:hi] from this process once read (see release_pages)."""
    release_pages(trace._mmap, lo * trace.record_size, hi * trace.record_size)


def release_pages(mm, begin: int, end: int) -> None:
    """Unmap the whole pages of bytes [begin, end) of a read-only file mapping: they stay in
    the page cache, but the process's resident memory no longer grows with the file."""
    if not isinstance(mm, mmap.mmap):
        return
    page = mmap.PAGESIZE
    begin = -(-begin // page) * page
    end = min(end, len(mm)) // page * page
    if end > begin:
        try:
            mm.madvise(mmap.MADV_DONTNEED, begin, end - begin)
        except (OSError, ValueError):
            pass


class _Times(ctypes.Structure):
    """scan.c's struct scan_times: a range's clock accumulators."""
    _fields_ = [(name, ctypes.c_int64) for name in (
        "tmin", "tmax", "zero_ts", "first_zero_ts", "backsteps")] + [("max_back", ctypes.c_uint64)] + [
        (name, ctypes.c_int64) for name in ("max_back_pos", "prev", "has_prev", "seen")]


class Layout(ctypes.Structure):
    """scan.c's struct scan_layout: where a record's fields are, and whether to swap them."""
    _fields_ = [(name, ctypes.c_int64) for name in (
        "record_size", "at_sockid", "at_event", "at_size", "at_timestamp", "swap")]

    @classmethod
    def of(cls, records: np.ndarray) -> "Layout":
        dt = records.dtype
        return cls(dt.itemsize, *(dt.fields[name][1] for name in ("sockid", "event", "size", "timestamp")),
                   not dt["event"].isnative)


SIGNATURES = {
    "magnet_scan_range": ([PTR, I64, I64, PTR, I64, PTR, PTR, PTR, PTR, PTR, PTR, PTR], I64),
    "magnet_trace_columns": ([PTR, I64, PTR, PTR, I64, I32, ctypes.c_uint64, PTR, PTR, PTR, PTR], I64),
}


def c_loops() -> ctypes.CDLL | None:
    """scan.c's loops, or None (no compiler, or MAGNET_NATIVE=0): numpy's."""
    return native.library("scan.c", SIGNATURES)


def _scan_range(trace, lo: int, hi: int) -> _Part:
    lib = c_loops()
    if lib is not None and trace.records.flags.c_contiguous:
        return _scan_range_c(lib, trace, lo, hi)
    p = _Part()
    records = trace.records
    prev = int(records["timestamp"][lo - 1]) if lo > trace.header_len else None
    for clo in range(lo, hi, CHUNK):
        chi = min(clo + CHUNK, hi)
        populate(trace, clo, chi)
        chunk = records[clo:chi]
        ev = chunk["event"].astype(np.intp)
        size = chunk["size"].astype(np.int64)
        ts = chunk["timestamp"].astype(np.int64)
        _count(p, ev, size, clo)
        prev = _times(p, ts, clo, prev)
        release(trace, clo, chi)
    return p


def _scan_range_c(lib, trace, lo: int, hi: int) -> _Part:
    """_scan_range in one C walk per chunk over the mapped records."""
    p, records = _Part(), trace.records
    dt, layout = records.dtype, Layout.of(records)
    times = _Times(first_zero_ts=-1, max_back_pos=-1)
    if lo > trace.header_len:
        times.prev, times.has_prev = int(records["timestamp"][lo - 1].astype(np.int64)), 1
    high_pos, high_code = np.empty(CHUNK, np.int64), np.empty(CHUNK, np.int64)
    base = records.ctypes.data
    for clo in range(lo, hi, CHUNK):
        chi = min(clo + CHUNK, hi)
        populate(trace, clo, chi)
        k = lib.magnet_scan_range(base + clo * dt.itemsize, clo, chi - clo, ctypes.byref(layout), TABLE,
                                  p.counts.ctypes.data, p.nbytes.ctypes.data, p.errors.ctypes.data,
                                  p.zeros.ctypes.data, ctypes.byref(times), high_pos.ctypes.data,
                                  high_code.ctypes.data)
        if k:
            p.high.append((high_pos[:k].copy(), high_code[:k].astype(np.intp)))
        release(trace, clo, chi)
    if times.seen:
        p.tmin, p.tmax = times.tmin, times.tmax
    p.zero_ts, p.backsteps = times.zero_ts, times.backsteps
    p.first_zero_ts = times.first_zero_ts if times.first_zero_ts >= 0 else None
    p.max_back = times.max_back
    p.max_back_pos = times.max_back_pos if times.max_back_pos >= 0 else None
    return p


def _count(p: _Part, ev: np.ndarray, size: np.ndarray, base: int) -> None:
    if ev.max() >= TABLE or ev.min() < 0:          # SYSINFO (clock change) or unknown code
        high = (ev >= TABLE) | (ev < 0)
        p.high.append((np.flatnonzero(high) + base, ev[high]))
        ev, size = ev[~high], size[~high]
    p.counts += np.bincount(ev, minlength=TABLE)
    zero = size == 0                      # an error's size is its code: not a zero size
    if zero.any():
        p.zeros += np.bincount(ev[zero], minlength=TABLE)
    if size.min(initial=0) < 0:
        neg = size < 0
        p.errors += np.bincount(ev[neg], minlength=TABLE)
        size = np.maximum(size, 0)
    p.nbytes += np.bincount(ev, weights=size, minlength=TABLE).astype(np.int64)   # exact: < 2**53 a chunk


def _times(p: _Part, ts: np.ndarray, base: int, prev: int | None) -> int:
    lo_t, hi_t = int(ts.min()), int(ts.max())
    p.tmin = lo_t if p.tmin is None else min(p.tmin, lo_t)
    p.tmax = hi_t if p.tmax is None else max(p.tmax, hi_t)
    if lo_t == 0:
        zero = ts == 0
        if p.first_zero_ts is None:
            p.first_zero_ts = base + int(np.argmax(zero))
        p.zero_ts += int(zero.sum())
    step = np.diff(ts)
    first = 0 if prev is None else int(ts[0]) - prev
    if step.min(initial=0) < 0 or first < 0:
        step = np.concatenate(([first], step))
        back = step < 0
        p.backsteps += int(back.sum())
        at = int(np.argmin(step))
        if -int(step[at]) > p.max_back:
            p.max_back, p.max_back_pos = -int(step[at]), base + at
    return int(ts[-1])


def scan(trace) -> Scan:
    """One pass over the records after the header of `trace`, in parallel chunks."""
    start, stop = trace.header_len, len(trace.records)
    parts = in_parallel(lambda lo, hi: _scan_range(trace, lo, hi), split(start, stop)) if stop > start else []
    s = Scan(records=stop - start)
    if not parts:
        return s
    counts = sum(p.counts for p in parts)
    nbytes = sum(p.nbytes for p in parts)
    errors, zeros = sum(p.errors for p in parts), sum(p.zeros for p in parts)
    for ev in fmt.INDEX_EVENT:
        if counts[ev] and ev != Event.META:
            s.counts[ev], s.bytes[ev] = int(counts[ev]), int(nbytes[ev])
            s.errors[ev], s.zero_size[ev] = int(errors[ev]), int(zeros[ev])
    s.lost, s.lost_records = int(nbytes[Event.LOST]), int(counts[Event.LOST])
    last = trace.records[stop - 1]
    s.ended_early = bool(last["event"] == Event.LOST and last["sockid"] == LOST_ENDED_EARLY)
    high_pos = np.concatenate([pos for p in parts for pos, _ in p.high] or [np.zeros(0, np.int64)])
    high_code = np.concatenate([code for p in parts for _, code in p.high] or [np.zeros(0, np.intp)])
    is_sys = high_code == fmt.SYSINFO
    s.sysinfo_positions = np.concatenate(([0], high_pos[is_sys])).astype(np.int64)
    _unknown(trace, s, counts, high_pos[~is_sys], high_code[~is_sys])
    _merge_times(s, parts)
    return s


def _unknown(trace, s: Scan, counts: np.ndarray, high_pos: np.ndarray, high_code: np.ndarray) -> None:
    small_unknown = int(counts[~KNOWN_SMALL].sum())
    s.unknown_events = small_unknown + len(high_pos)
    if not s.unknown_events:
        return
    first = (int(high_pos[0]), int(high_code[0])) if len(high_pos) else None
    if small_unknown:                    # rare: find the first one with a second pass
        for lo in range(trace.header_len, len(trace.records), CHUNK):
            ev = trace.records["event"][lo:lo + CHUNK].astype(np.intp)
            bad = (ev < TABLE) & (ev >= 0)
            bad[bad] = ~KNOWN_SMALL[ev[bad]]
            if bad.any():
                pos = lo + int(np.argmax(bad))
                if first is None or pos < first[0]:
                    first = (pos, int(ev[pos - lo]))
                break
    s.first_unknown = first


def _merge_times(s: Scan, parts: list[_Part]) -> None:
    s.min_ticks = min(p.tmin for p in parts)
    s.max_ticks = max(p.tmax for p in parts)
    s.zero_timestamps = sum(p.zero_ts for p in parts)
    zeros = [p.first_zero_ts for p in parts if p.first_zero_ts is not None]
    s.first_zero_timestamp = min(zeros) if zeros else None
    s.backsteps = sum(p.backsteps for p in parts)
    worst = max(parts, key=lambda p: p.max_back)
    s.max_backstep_ticks, s.max_backstep_position = worst.max_back, worst.max_back_pos
