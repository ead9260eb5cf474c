"""Importing traces: whole records chunk by chunk into Parquet, streams into the catalogue.

Each chunk of records becomes an Arrow table with whole-column numpy
operations (no Python loop per record) and is written to the Parquet file of
its (host, day) partition while the next chunk is converted: the writes run on
a thread of their own (pyarrow releases the GIL).  Memory stays bounded by a
few chunks, whatever the size of the trace.
"""
from __future__ import annotations

import hashlib
import os
import queue
import shutil
import threading
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import format as fmt
from .. import private
from ..errors import TraceError
from ..format import Event
from ..trace import Trace, format_addresses
from . import catalog
from .catalog import UNANCHORED_DAY, Layout
from .schema import ADDRESS_COLUMNS, EXT_COLUMNS, PARQUET_OPTIONS, TIME_TYPE, TRACE_SCHEMA, event_array
from .streams import StreamTotals

CHUNK_RECORDS = 1 << 20            # records per conversion step and per Parquet row group
ROWS_PER_FILE = 1 << 24            # a new file per partition after this many rows
DAY_NS = 86_400 * 10**9


@dataclass
class Added:
    path: str
    trace: str                     # the trace id: the first 16 hex digits of its SHA-256
    status: str                    # "added" or "present"
    records: int = 0
    seconds: float = 0.0
    truncated_bytes: int = 0


def content_id(path: str) -> tuple[str, str]:
    """(trace id, sha256 hex) of a file's content: what makes re-adding a trace a no-op."""
    try:
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as e:
        raise TraceError(path, e.strerror or str(e)) from None
    return digest[:16], digest


def host_label(trace: Trace) -> str:
    m = trace.meta
    if m.hostname:
        return catalog.safe_label(m.hostname)
    if m.host_id is not None:
        return f"host-{m.host_id:016x}"
    return "unknown"


def import_trace(layout: Layout, path: str, application: str | None = None,
                 chunk_records: int = CHUNK_RECORDS, network_path: str | None = None) -> Added:
    """Add one trace to the library (the caller holds the writer lock); `network_path` names
    the path it was captured across (the catalogues' `path` column)."""
    t0 = time.perf_counter()
    tid, digest = content_id(path)
    if tid in catalog.committed(layout):
        return Added(path, tid, "present")
    with Trace(path) as trace:
        trace.check()
        staged = layout.staging / f"{tid}-{os.getpid()}"
        host = host_label(trace)
        clock = _Clock(trace)
        totals = StreamTotals(trace.has_ext)
        try:
            with _PartitionWriter(Layout(staged), host, tid) as writer:
                for lo, hi in trace.chunks(size=chunk_records):
                    cols = _columns(trace, lo, hi, clock)
                    totals.add(cols)
                    writer.write(_table(cols, tid), cols["day"])
            label = application or trace.meta.filter
            streams = totals.table(tid, host, label, clock.offset if clock.anchored else None, network_path)
            Layout(staged).streams_dir.mkdir(parents=True, exist_ok=True)
            private.touch(Layout(staged).streams_file(tid))
            pq.write_table(streams, Layout(staged).streams_file(tid))
            row = _trace_row(trace, tid, digest, path, host, application, clock, streams, network_path)
            catalog.commit(layout, staged, row)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)     # not committed: nothing of it was moved
            raise
        return Added(path, tid, "added", len(trace.data), time.perf_counter() - t0, trace.truncated_bytes)


class _Clock:
    """Record positions -> trace ns and UTC ns, and the trace's time range as it is read."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.anchored = trace.meta.wall_anchor_ns is not None
        self.offset = (trace.meta.wall_anchor_ns - trace.start_ns) if self.anchored else 0
        self.first = self.last = None

    def ns(self, lo: int, hi: int) -> np.ndarray:
        ticks = self.trace.column("timestamp", lo, hi)
        if self.trace.exact_ns_clock:
            ns = ticks.view(np.int64)
        else:
            ns = self.trace.to_ns(ticks, np.arange(lo, hi))
        lo_ns, hi_ns = int(ns.min()), int(ns.max())
        self.first = lo_ns if self.first is None else min(self.first, lo_ns)
        self.last = hi_ns if self.last is None else max(self.last, hi_ns)
        return ns


def _columns(trace: Trace, lo: int, hi: int, clock: _Clock) -> dict:
    """The numpy columns of records[lo:hi], with UTC time and day where the trace is anchored."""
    ns = clock.ns(lo, hi)
    cols = {"timestamp_ns": ns, "sockid": trace.column("sockid", lo, hi),
            "event": trace.column("event", lo, hi), "size": trace.column("size", lo, hi)}
    cols["utc_ns"] = ns + clock.offset if clock.anchored else None
    cols["day"] = cols["utc_ns"] // DAY_NS if clock.anchored else None
    if trace.has_ext:
        for name in EXT_COLUMNS:
            if name in ADDRESS_COLUMNS:
                cols[name] = np.asarray(trace.records[name][lo:hi])
            else:
                cols[name] = trace.column(name, lo, hi)
    return cols


def _table(cols: dict, tid: str) -> pa.Table:
    n = len(cols["timestamp_ns"])
    utc = cols["utc_ns"]
    arrays = {
        "trace": pa.DictionaryArray.from_arrays(np.zeros(n, np.int8), [tid]),
        "timestamp_ns": pa.array(cols["timestamp_ns"]),
        "time": pa.array(utc, TIME_TYPE) if utc is not None else pa.nulls(n, TIME_TYPE),
        "sockid": pa.array(cols["sockid"]),
        "event": event_array(cols["event"]),
        "size": pa.array(cols["size"]),
    }
    for name in EXT_COLUMNS if "valid" in cols else ():
        arrays[name] = _addresses(cols[name]) if name in ADDRESS_COLUMNS else pa.array(cols[name])
    return pa.table(arrays)


def _addresses(raw: np.ndarray) -> pa.DictionaryArray:
    """16-byte addresses as dictionary-encoded text: one conversion per distinct address."""
    keys = np.ascontiguousarray(raw).view("S16").ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return pa.DictionaryArray.from_arrays(inverse.astype(np.int32), list(format_addresses(raw[first])))


def day_name(day: int | None) -> str:
    if day is None:
        return UNANCHORED_DAY
    return str(np.datetime64(int(day), "D"))


class _PartitionWriter:
    """Parquet files of one trace, one series per (host, day), written on a thread of their own."""

    def __init__(self, layout: Layout, host: str, tid: str):
        self.layout, self.host, self.tid = layout, host, tid
        self.open: dict[str, tuple[pq.ParquetWriter, list]] = {}
        self.files: dict[str, int] = {}
        self.jobs: queue.Queue = queue.Queue(maxsize=2)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def write(self, table: pa.Table, day: np.ndarray | None) -> None:
        if day is None or day.min() == day.max():
            self._put(day_name(None if day is None else int(day[0])), table)
            return
        for d in np.unique(day):              # a chunk across midnight: one slice per day
            self._put(day_name(int(d)), table.filter(pa.array(day == d)))

    def _put(self, day: str, table: pa.Table) -> None:
        if self.error:
            raise self.error
        self.jobs.put((day, table))

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            if self.error is None:
                try:
                    self._write(*job)
                except BaseException as e:        # reported to the importing thread
                    self.error = e

    def _write(self, day: str, table: pa.Table) -> None:
        writer, rows = self.open.get(day, (None, [0]))
        if writer is not None and rows[0] + len(table) > ROWS_PER_FILE:
            writer.close()
            writer = None
        if writer is None:
            n = self.files.get(day, 0)
            self.files[day] = n + 1
            path = self.layout.partition(self.host, day) / f"{self.tid}-{n:04d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            private.touch(path)
            writer = pq.ParquetWriter(path, table.schema, **_options(table.schema))
            rows = [0]
            self.open[day] = (writer, rows)
        writer.write_table(table, row_group_size=len(table))
        rows[0] += len(table)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.jobs.put(None)
        self.thread.join()
        for writer, _ in self.open.values():
            writer.close()
        if self.error and exc[0] is None:
            raise self.error


def _options(schema: pa.Schema) -> dict:
    names = set(schema.names)
    return dict(compression=PARQUET_OPTIONS["compression"],
                use_dictionary=[c for c in PARQUET_OPTIONS["use_dictionary"] if c in names],
                column_encoding={c: e for c, e in PARQUET_OPTIONS["column_encoding"].items() if c in names})


def _trace_row(trace: Trace, tid: str, digest: str, path: str, host: str,
               application: str | None, clock: _Clock, streams: pa.Table,
               network_path: str | None = None) -> pa.Table:
    """The catalogue row of a trace: where it came from, its metadata, totals per event, loss."""
    m, s = trace.meta, trace.scan
    first, last = clock.first, clock.last
    utc = (lambda ns: None if ns is None or not clock.anchored else ns + clock.offset)
    row = {
        "trace": tid, "sha256": digest, "source": os.path.abspath(path),
        "imported_at": time.time_ns(),
        "host": host, "hostname": m.hostname, "host_id": m.host_id, "kernel": m.kernel,
        "producer": m.producer, "filter": m.filter, "application": application, "path": network_path,
        "clock": m.clock_name, "clock_khz": m.clock_khz, "record_size": m.record_size,
        "byteorder": {"<": "little", ">": "big"}[trace.byteorder],
        "segment_index": m.segment_index, "records": s.records,
        "truncated_bytes": trace.truncated_bytes, "streams": streams.num_rows,
        "first_ns": first, "last_ns": last,
        "start_time": utc(first), "end_time": utc(last),
        "lost": s.lost, "lost_records": s.lost_records,
    }
    for ev in sorted(fmt.NETWORK_EVENTS):
        name = Event(ev).name.lower()
        row[f"{name}_records"] = s.counts.get(ev, 0)
        row[f"{name}_bytes"] = s.bytes.get(ev, 0)
    row["sched_records"] = sum(s.counts.get(ev, 0) for ev in fmt.SCHED_EVENTS)
    return pa.Table.from_pylist([row], TRACE_SCHEMA)

