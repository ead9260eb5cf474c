"""Application demand: what a stream's application asked the network for, before any modulation.

A stream's demand is its socket-layer series, SOCK_SEND (and SOCK_RECV for the
other direction): (time, bytes) per call.  Calls that returned an error or moved
no bytes (EOF reads) are not demand; they are counted, not silently dropped.
The same extraction at a lower layer gives the post-modulation series.

Demand files (read_demand/write_demand), chosen by extension:
  .csv       header "sockid,time_ns,direction,size", time relative to the stream's start
  .parquet   the same columns (needs pyarrow)
  .magnet    a magnet trace holding only SOCK_SEND/SOCK_RECV records (the compact binary form)
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from . import format as fmt
from . import private
from .errors import TraceError
from .format import Clock, Event
from .meta import TraceMeta
from .trace import Trace
from .writer import Atomic, empty_records

SEND, RECV = 0, 1
DIRECTIONS = {"send": SEND, "recv": RECV}
DIRECTION_NAMES = np.array(["send", "recv"])
# Time zero of demand traces written by write_demand: nonzero, as timestamps must be.
DEMAND_EPOCH_NS = 1_000_000_000


@dataclass
class Demand:
    """A series of application calls (or of one layer's events) of one or more streams.

    time_ns    int64 ns since `start_ns` (the stream's first event at this layer)
    size       int64 bytes, > 0
    direction  int8, SEND or RECV
    sockid     uint64 per call
    errors     calls that returned an error (left out)
    zero       calls that moved no bytes, e.g. EOF reads (left out)
    """
    time_ns: np.ndarray
    size: np.ndarray
    direction: np.ndarray
    sockid: np.ndarray
    start_ns: int = 0
    errors: int = 0
    zero: int = 0

    def __len__(self) -> int:
        return len(self.time_ns)

    @property
    def total_bytes(self) -> int:
        return int(self.size.sum())

    @property
    def duration_ns(self) -> int:
        return int(self.time_ns[-1] - self.time_ns[0]) if len(self) else 0

    def only(self, direction: str) -> "Demand":
        keep = self.direction == DIRECTIONS[direction]
        return Demand(self.time_ns[keep], self.size[keep], self.direction[keep],
                      self.sockid[keep], self.start_ns, self.errors, self.zero)

    @classmethod
    def from_arrays(cls, time_ns, size, direction=SEND, sockid=1) -> "Demand":
        time_ns = np.asarray(time_ns, np.int64)
        n = len(time_ns)
        return cls(time_ns, np.asarray(size, np.int64),
                   np.broadcast_to(np.asarray(direction, np.int8), n).copy(),
                   np.broadcast_to(np.asarray(sockid, np.uint64), n).copy())


def layer_codes(layer: str, direction: str) -> list[Event]:
    if layer not in fmt.LAYERS:
        raise ValueError(f"layer {layer!r}: use one of {fmt.LAYERS}")
    wanted = ("send", "recv") if direction == "both" else (direction,)
    return [ev for d in wanted for ev in fmt.layer_events(layer, d)]


@dataclass
class Left:
    """Calls left out of a demand: errors and zero-byte calls."""
    errors: int = 0
    zero: int = 0


def pieces(trace: Trace, sockid: int | None = None, direction: str = "both", layer: str = "sock",
           left: Left | None = None):
    """extract()'s calls a time-ordered piece at a time (time_ns absolute, start_ns 0): no
    piece holds a call earlier than one of the piece before.  Calls that failed or moved no
    bytes are counted into `left`."""
    codes = layer_codes(layer, direction)
    is_recv = np.zeros(fmt.EVENT_TABLE_SIZE, np.int8)
    is_recv[[ev for ev in codes if fmt.NETWORK_EVENTS[ev][1] == "recv"]] = 1
    left = Left() if left is None else left
    for b in trace.time_batches(codes, sockid):
        left.errors += int(np.count_nonzero(b.size < 0))
        left.zero += int(np.count_nonzero(b.size == 0))
        b = b.part(b.size > 0)
        order = slice(None) if b.ordered else np.argsort(b.ns, kind="stable")  # CPUs may have reordered
        yield Demand(b.ns[order], b.size[order], is_recv[b.event[order]], b.sockid[order].astype(np.uint64))


def extract(trace: Trace, sockid: int | None = None, direction: str = "both",
            layer: str = "sock") -> Demand:
    """The demand (layer "sock") or a lower layer's series of one stream, or of all."""
    left = Left()
    parts = list(pieces(trace, sockid, direction, layer, left))
    joined = [np.concatenate([getattr(p, name) for p in parts]) if parts else np.zeros(0, dtype)
              for name, dtype in (("time_ns", np.int64), ("size", np.int64), ("direction", np.int8),
                                  ("sockid", np.uint64))]
    ns = joined[0]
    start = int(ns[0]) if len(ns) else 0
    return Demand(ns - start, *joined[1:], start_ns=start, errors=left.errors, zero=left.zero)


def validate(demand: Demand, path: str) -> Demand:
    """Refuse demand no replayer can honour: empty, non-positive sizes, time running backwards."""
    if len(demand) == 0:
        raise TraceError(path, "empty demand: no application calls that moved data")
    if (demand.size <= 0).any():
        i = int(np.argmax(demand.size <= 0))
        raise TraceError(path, f"row {i}: size {int(demand.size[i])} is not a positive byte count")
    if (demand.time_ns < 0).any():
        i = int(np.argmax(demand.time_ns < 0))
        raise TraceError(path, f"row {i}: negative time {int(demand.time_ns[i])} ns")
    for sid in np.unique(demand.sockid):
        t = demand.time_ns[demand.sockid == sid]
        back = np.flatnonzero(np.diff(t) < 0)
        if len(back):
            raise TraceError(path, f"stream {int(sid):#x}: times out of order after "
                                   f"{int(t[back[0]])} ns")
    return demand


def adu_table(d: Demand, adu_gap_s: float) -> dict:
    """Calls grouped into ADUs: a run of calls in one direction whose gaps are at most adu_gap_s.

    Returns start_ns, end_ns, size, direction (0 send = initiator, 1 recv = acceptor) and
    first (index of its first call) per ADU.
    """
    t, size, dirn = d.time_ns, d.size, d.direction
    new = np.r_[True, (dirn[1:] != dirn[:-1]) | (np.diff(t) > adu_gap_s * 1e9)]
    first = np.flatnonzero(new)
    last = np.r_[first[1:], len(t)] - 1
    return {"start_ns": t[first], "end_ns": t[last], "size": np.add.reduceat(size, first) if len(t) else size,
            "direction": dirn[first], "first": first}


# ------------------------------------------------------------------ files ---
def write_demand(demand: Demand, path: str | os.PathLike) -> str:
    """Write demand as CSV, Parquet or a compact magnet trace, by extension."""
    with DemandWriter(path) as out:
        out.write(demand)
    return out.path


class DemandWriter(Atomic):
    """A demand file written a piece at a time (pieces in time order, times relative to
    the first call), atomically: a temporary file renamed on close, removed on error."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.kind = file_kind(self.path)
        self.tmp = None if self.kind == "magnet" else private.temporary(self.path)
        self._out = None
        self._aborted = False

    def write(self, demand: Demand) -> None:
        if self.kind == "magnet":
            self._trace().append(_records(demand))
            return
        frame = to_frame(demand)
        if self.kind == "csv":
            header = self._out is None
            self._out = self._out or open(self.tmp, "w")
            frame.to_csv(self._out, index=False, header=header)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq
            table = pa.Table.from_pandas(frame, preserve_index=False)
            self._out = self._out or pq.ParquetWriter(self.tmp, table.schema)
            self._out.write_table(table)

    def _trace(self):
        if self._out is None:
            from .writer import TraceWriter
            self._out = TraceWriter(self.path, TraceMeta(anchor_ticks=DEMAND_EPOCH_NS,
                                                         clock_source=Clock.SYNTHETIC,
                                                         producer="magnet demand"))
        return self._out

    def close(self) -> None:
        if self._aborted:
            return
        if self._out is None:                        # no pieces: an empty file of the kind
            self.write(Demand.from_arrays([], []))
        if self.kind == "magnet":
            self._out.close()
            return
        self._out.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self._aborted = True
        if self.kind == "magnet":
            if self._out is not None:
                self._out.abort()
            return
        if self._out is not None:
            self._out.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


def to_frame(demand: Demand):
    import pandas as pd
    return pd.DataFrame({"sockid": demand.sockid, "time_ns": demand.time_ns,
                         "direction": DIRECTION_NAMES[demand.direction], "size": demand.size})


def _records(demand: Demand) -> np.ndarray:
    rec = empty_records(len(demand))
    rec["sockid"] = demand.sockid
    rec["timestamp"] = demand.time_ns + DEMAND_EPOCH_NS
    rec["event"] = np.where(demand.direction == RECV, Event.SOCK_RECV, Event.SOCK_SEND)
    rec["size"] = demand.size
    return rec


def file_kind(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    kinds = {".csv": "csv", ".parquet": "parquet", ".magnet": "magnet", ".trace": "magnet"}
    if ext not in kinds:
        raise TraceError(path, f"unknown demand file type {ext!r} (use .csv, .parquet or .magnet)")
    return kinds[ext]


def read_demand(path: str | os.PathLike, sockid: int | None = None) -> Demand:
    """Read and validate a demand file (CSV, Parquet, or any magnet trace's socket layer)."""
    path = os.fspath(path)
    if file_kind(path) == "magnet":
        with Trace(path) as trace:
            demand = extract(trace.check(), sockid)
    else:
        demand = _read_table(path, sockid)
    return validate(demand, path)


def _read_table(path: str, sockid: int | None) -> Demand:
    import pandas as pd
    try:
        frame = pd.read_csv(path) if file_kind(path) == "csv" else pd.read_parquet(path)
    except (OSError, ValueError, pd.errors.ParserError, ImportError) as e:
        raise TraceError(path, f"cannot read demand: {str(e).splitlines()[0]}") from None
    missing = {"time_ns", "size"} - set(frame.columns)
    if missing:
        raise TraceError(path, f"not a demand file: no column {', '.join(sorted(missing))}")
    if "sockid" not in frame:
        frame["sockid"] = 1
    if "direction" not in frame:
        frame["direction"] = "send"
    if sockid is not None:
        frame = frame[frame["sockid"] == sockid]
    bad = ~frame["direction"].isin(list(DIRECTIONS))
    if bad.any():
        raise TraceError(path, f"row {int(np.argmax(bad.to_numpy()))}: direction must be send or recv")
    times = _whole_numbers(frame, "time_ns", np.int64, path)
    sizes = _whole_numbers(frame, "size", np.int64, path)
    sids = _whole_numbers(frame, "sockid", np.uint64, path)
    return Demand(times, sizes, frame["direction"].map(DIRECTIONS).to_numpy(np.int8), sids)


def _whole_numbers(frame, column: str, dtype, path: str) -> np.ndarray:
    """A column as `dtype` integers. A column pandas read as floats or text (an empty
    cell, NaN, a fraction, a word) is checked first: the first bad row is named,
    rather than cast to a meaningless integer."""
    import pandas as pd
    values = frame[column]
    if pd.api.types.is_integer_dtype(values):
        return _integers(values, column, dtype, path)
    try:
        numbers = pd.to_numeric(values).to_numpy(np.float64)
    except (ValueError, TypeError) as e:
        raise TraceError(path, f"not a demand file: column {column}: {str(e).splitlines()[0]}") from None
    limits = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(numbers) | (numbers != np.round(numbers)) | \
              (numbers < limits.min) | (numbers >= float(limits.max))
    if bad.any():
        i = int(np.argmax(bad))
        value = numbers[i]
        what = "is empty or NaN" if np.isnan(value) else f"{value:g} is not a whole number in range"
        raise TraceError(path, f"row {i}: {column} {what}")
    return numbers.astype(dtype)


def _integers(values, column: str, dtype, path: str) -> np.ndarray:
    """An integer column (numpy's, or pandas' nullable Int64 of Parquet) as `dtype`: a
    missing value or one out of the dtype's range is named by its row, never cast."""
    missing = values.isna().to_numpy()
    if missing.any():
        raise TraceError(path, f"row {int(np.argmax(missing))}: {column} is empty or NaN")
    raw = values.to_numpy(getattr(values.dtype, "numpy_dtype", values.dtype))
    limits = np.iinfo(dtype)
    bad = (raw < limits.min) | (raw > limits.max)
    if bad.any():
        i = int(np.argmax(bad))
        raise TraceError(path, f"row {i}: {column} {int(raw[i])} is not a whole number in range")
    return raw.astype(dtype)
