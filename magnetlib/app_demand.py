"""The whole-application demand: every connection of an application, one row per event.

    d = app_demand.read("D.csv")          # .csv, .parquet or .magnet; validated
    d.connections                          # numbers 1..N
    d.rows_of(3)                           # connection 3's rows
    app_demand.write(d, "D.magnet")

Columns (docs/app-demand.md is the reference):

  connection  1.., in order of opening
  event       open, send, close, reset
  side        client or server (open: the side that connected; send: the writer;
              close/reset: the side that closed)
  time_ns     ns from the application's first open
  size        bytes written (send); 0 otherwise
  adu         ADU number within the connection (send), -1 otherwise
  wait_bytes  send/close: the peer's bytes this side had read before its think time began
  think_ns    send/close: from the later of (wait_bytes read, this side's previous event,
              the open) to this event; open with after K: from the opener's reading
              connection K's last byte to this open
  after       open only: 0, or K (opens think_ns after the opener read all of connection K)

The .magnet form is a magnet trace of 144-byte records, one per row, each
marked with the extended group DEMAND (format.toml): sockid = connection,
timestamp = time_ns from 1 s (clock SYNTHETIC), event SOCK_SEND for a client's
row and SOCK_RECV for a server's (so the socket layer of the file is the
application's demand, stream by stream), size = bytes; the row's kind is in
tcp_flags (SYN open, PSH send, FIN close, RST reset); wait_bytes is
seq + 2^32 ack_seq, think_ns snd_wnd + 2^32 rcv_wnd, adu srtt_us and after
rto_us (as signed 32-bit numbers).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from . import private
from .demand import file_kind as kind_of     # csv, parquet or magnet, by extension
from .errors import TraceError
from .format import Clock, Event, ExtValid
from .meta import TraceMeta
from .writer import empty_records

OPEN, SEND, CLOSE, RESET = 0, 1, 2, 3
EVENTS = ("open", "send", "close", "reset")
CLIENT, SERVER = 0, 1
SIDES = ("client", "server")
COLUMNS = ("connection", "event", "side", "time_ns", "size", "adu", "wait_bytes", "think_ns", "after")
INT_COLUMNS = ("connection", "time_ns", "size", "adu", "wait_bytes", "think_ns", "after")
EPOCH_NS = 1_000_000_000            # time zero of the .magnet form: timestamps must be nonzero
TCP_FLAG = {OPEN: 0x02, SEND: 0x08, CLOSE: 0x01, RESET: 0x04}    # SYN, PSH, FIN, RST
MAX_SEND = 2**31 - 1                # the .magnet form's size field is a signed 32-bit number

# Where the DEMAND row keeps its 64-bit columns: (low 32 bits, high 32 bits) in two u32
# fields of the extended block, so that byte order is handled field by field as for
# every record; the 32-bit ones in one u32 field each (docs/app-demand.md).
WIDE_FIELDS = {"wait_bytes": ("seq", "ack_seq"), "think_ns": ("snd_wnd", "rcv_wnd")}
NARROW_FIELDS = {"adu": "srtt_us", "after": "rto_us"}
LOW = np.int64(0xFFFFFFFF)


@dataclass
class AppDemand:
    """The table's columns as numpy arrays (event and side as small codes), in row order."""
    connection: np.ndarray
    event: np.ndarray
    side: np.ndarray
    time_ns: np.ndarray
    size: np.ndarray
    adu: np.ndarray
    wait_bytes: np.ndarray
    think_ns: np.ndarray
    after: np.ndarray
    notes: list[str] = field(default_factory=list)     # how it was built (not stored)

    def __len__(self) -> int:
        return len(self.connection)

    @classmethod
    def from_columns(cls, **cols) -> "AppDemand":
        dtypes = {"event": np.int8, "side": np.int8}
        return cls(**{name: np.asarray(cols[name], dtypes.get(name, np.int64)) for name in COLUMNS})

    @property
    def connections(self) -> np.ndarray:
        return np.unique(self.connection)

    def part(self, keep) -> "AppDemand":
        return AppDemand(*(getattr(self, name)[keep] for name in COLUMNS), notes=list(self.notes))

    def rows_of(self, connection: int) -> "AppDemand":
        return self.part(self.connection == connection)

    def sent_bytes(self, side: int) -> int:
        """Bytes written by `side` over every connection."""
        return int(self.size[(self.event == SEND) & (self.side == side)].sum())

    @property
    def duration_ns(self) -> int:
        return int(self.time_ns.max() - self.time_ns.min()) if len(self) else 0

    def to_frame(self):
        import pandas as pd
        frame = pd.DataFrame({name: getattr(self, name) for name in COLUMNS})
        frame["event"] = np.array(EVENTS)[self.event]
        frame["side"] = np.array(SIDES)[self.side]
        return frame

    def summary(self) -> str:
        """One line: connections, who opened them, bytes each way, span."""
        opens = self.event == OPEN
        by_server = int((self.side[opens] == SERVER).sum())
        return (f"{int(opens.sum())} connections ({by_server} opened by the server), "
                f"{self.sent_bytes(CLIENT)} bytes client->server, {self.sent_bytes(SERVER)} bytes "
                f"server->client, over {self.duration_ns / 1e9:.6f} s")


# -------------------------------------------------------------- validation ---
def validate(d: AppDemand, path: str) -> AppDemand:
    """Refuse a table no replayer can honour; TraceError names the row (from 1) and connection."""
    n = len(d)
    if n == 0:
        raise TraceError(path, "no connection: the demand has no rows")

    def refuse(bad: np.ndarray, what) -> None:
        if bad.any():
            i = int(np.argmax(bad))
            text = what(i) if callable(what) else what
            raise TraceError(path, f"row {i + 1} (connection {int(d.connection[i])}): {text}")

    refuse(d.connection < 1, "connection numbers start at 1")
    refuse((d.event < 0) | (d.event >= len(EVENTS)), "unknown event")
    refuse((d.side < 0) | (d.side > 1), "unknown side")
    refuse(d.time_ns < 0, lambda i: f"negative time {int(d.time_ns[i])} ns")
    refuse(np.r_[False, np.diff(d.time_ns) < 0], "rows out of time order (sort by time_ns)")
    sends = d.event == SEND
    refuse(sends & (d.size <= 0), lambda i: f"send of {int(d.size[i])} bytes (must be positive)")
    refuse(sends & (d.size > MAX_SEND), lambda i: f"send of {int(d.size[i])} bytes (at most {MAX_SEND} a row)")
    refuse(~sends & (d.size != 0), lambda i: f"{EVENTS[d.event[i]]} with size {int(d.size[i])} (must be 0)")
    refuse(sends & (d.adu < 0), "send without an ADU number")
    refuse(~sends & (d.adu != -1), lambda i: f"{EVENTS[d.event[i]]} with ADU {int(d.adu[i])} (must be -1)")
    refuse(d.think_ns < 0, lambda i: f"negative think time {int(d.think_ns[i])} ns")
    refuse(d.wait_bytes < 0, lambda i: f"negative wait_bytes {int(d.wait_bytes[i])}")
    opens = d.event == OPEN
    refuse(opens & (d.wait_bytes != 0), "open with wait_bytes (must be 0)")
    refuse(~opens & (d.after != 0), "after on a row that is not an open")
    _check_opens(d, refuse)
    _check_waits(d, refuse)
    return d


def _check_opens(d: AppDemand, refuse) -> None:
    """Every connection has exactly one open, before its other rows; after names an earlier one."""
    opens, conn, rows = d.event == OPEN, d.connection, np.arange(len(d))
    first_open = np.flatnonzero(opens)[np.unique(conn[opens], return_index=True)[1]]
    refuse(opens & ~np.isin(rows, first_open), "a second open")
    first_row = np.unique(conn, return_index=True)[1]
    refuse(~opens & np.isin(rows, first_row), lambda i: f"{EVENTS[d.event[i]]} before the connection's open")
    after = d.after
    refuse(opens & (after < 0), "after must be 0 or a connection number")
    refuse(opens & (after >= conn), lambda i: f"opens after connection {int(after[i])}, which is not an "
                                              "earlier connection")
    refuse(opens & (after > 0) & ~np.isin(after, conn), lambda i: f"opens after connection {int(after[i])}, "
                                                                  "which has no rows")


def _check_waits(d: AppDemand, refuse) -> None:
    """wait_bytes never decreases per connection and side, and never exceeds what the peer sends."""
    key = d.connection * 2 + d.side
    peer_key = d.connection * 2 + (1 - d.side)
    sends = d.event == SEND
    keys, inverse = np.unique(np.r_[key, peer_key], return_inverse=True)
    sent = np.bincount(inverse[:len(d)], weights=np.where(sends, d.size, 0), minlength=len(keys))
    peer_total = sent[inverse[len(d):]]
    waits = d.event != OPEN
    refuse(waits & (d.wait_bytes > peer_total), lambda i: (
        f"waits for {int(d.wait_bytes[i])} bytes of the {SIDES[1 - d.side[i]]}'s, which sends only "
        f"{int(peer_total[i])} on this connection"))
    order = np.flatnonzero(waits)[np.argsort(key[waits], kind="stable")]
    same = key[order][1:] == key[order][:-1]
    back = same & (np.diff(d.wait_bytes[order]) < 0)
    bad = np.zeros(len(d), bool)
    bad[order[1:][back]] = True
    refuse(bad, "wait_bytes smaller than on this side's previous row")
    ended = np.isin(d.event[order], [CLOSE, RESET])
    count = np.cumsum(ended)
    start = np.r_[True, ~same]
    before = count - ended - np.maximum.accumulate(np.where(start, count - ended, 0))
    late = np.zeros(len(d), bool)
    late[order[before > 0]] = True
    refuse(late, lambda i: f"{EVENTS[d.event[i]]} after the {SIDES[d.side[i]]}'s close")


# ------------------------------------------------------------------- files ---
def write(d: AppDemand, path: str | os.PathLike) -> str:
    """The table as CSV, Parquet or the .magnet form (by extension), mode 0600, atomically."""
    path = os.fspath(path)
    kind = kind_of(path)
    if kind == "magnet":
        from .writer import write as write_trace
        return write_trace(path, to_records(d, path), TraceMeta(
            record_size=144, anchor_ticks=EPOCH_NS, clock_source=Clock.SYNTHETIC,
            producer="magnet demand --all", ext_mask=int(ExtValid.DEMAND)))
    with private.replacing(path) as tmp:
        frame = d.to_frame()
        if kind == "csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_parquet(tmp, index=False)
    return path


def to_records(d: AppDemand, path: str = "demand") -> np.ndarray:
    """The rows as 144-byte DEMAND records (the .magnet form)."""
    too_big = np.flatnonzero(d.size > MAX_SEND)
    if len(too_big):
        i = int(too_big[0])
        raise TraceError(path, f"row {i + 1} (connection {int(d.connection[i])}): send of "
                               f"{int(d.size[i])} bytes; the .magnet form holds at most {MAX_SEND} a row")
    rec = empty_records(len(d), ext=True)
    rec["sockid"] = d.connection
    rec["timestamp"] = d.time_ns + EPOCH_NS
    rec["event"] = np.where(d.side == CLIENT, Event.SOCK_SEND, Event.SOCK_RECV)
    rec["size"] = d.size
    rec["valid"] = ExtValid.DEMAND
    rec["tcp_flags"] = np.array([TCP_FLAG[k] for k in range(len(EVENTS))], np.uint8)[d.event]
    for name, (low, high) in WIDE_FIELDS.items():
        value = getattr(d, name)
        rec[low], rec[high] = value & LOW, value >> 32
    for name, where in NARROW_FIELDS.items():
        rec[where] = getattr(d, name).astype(np.int32).view(np.uint32)
    return rec


def is_app_demand(path: str | os.PathLike) -> bool:
    """Whether a file holds a whole-application demand (by its columns or DEMAND records)."""
    path = os.fspath(path)
    try:
        kind = kind_of(path)
    except TraceError:
        return False
    if kind == "magnet":
        from .trace import Trace
        try:
            with Trace(path) as trace:
                return bool(trace.has_ext and trace.meta.ext_mask is not None
                            and trace.meta.ext_mask & ExtValid.DEMAND)
        except TraceError:
            return False
    try:
        if kind == "csv":
            with open(path) as f:
                header = f.readline().strip().split(",")
        else:
            import pyarrow.parquet as pq
            header = pq.read_schema(path).names
    except (OSError, ImportError, ValueError):
        return False
    return "connection" in header and "event" in header


def read(path: str | os.PathLike) -> AppDemand:
    """Read and validate a whole-application demand (CSV, Parquet or .magnet)."""
    path = os.fspath(path)
    d = _read_magnet(path) if kind_of(path) == "magnet" else _read_table(path)
    return validate(d, path)


def _read_magnet(path: str) -> AppDemand:
    from .trace import Trace
    with Trace(path) as trace:
        trace.check()
        if not trace.has_ext:
            raise TraceError(path, "not a whole-application demand: no extended records (DEMAND)")
        start = trace.header_len
        names = ("sockid", "timestamp", "event", "size", "valid", "tcp_flags", *NARROW_FIELDS.values(),
                 *(f for pair in WIDE_FIELDS.values() for f in pair))
        keep = trace.column("event", start) != Event.LOST
        col = {name: trace.column(name, start)[keep] for name in names}
    demand_rows = (col["valid"] & ExtValid.DEMAND) != 0
    if not demand_rows.all():
        i = int(np.argmax(~demand_rows))
        raise TraceError(path, f"record {i + 1}: not a DEMAND row (not a whole-application demand)")
    kind = np.full(256, -1, np.int8)
    for k, flag in TCP_FLAG.items():
        kind[flag] = k
    wide = {name: col[low].astype(np.int64) | col[high].astype(np.int64) << 32
            for name, (low, high) in WIDE_FIELDS.items()}
    narrow = {name: col[where].astype(np.uint32).view(np.int32) for name, where in NARROW_FIELDS.items()}
    side = np.where(col["event"] == Event.SOCK_SEND, CLIENT, np.where(col["event"] == Event.SOCK_RECV, SERVER, -1))
    return AppDemand.from_columns(
        connection=col["sockid"].astype(np.int64), event=kind[col["tcp_flags"]], side=side,
        time_ns=col["timestamp"].astype(np.int64) - EPOCH_NS, size=col["size"].astype(np.int64),
        **wide, **narrow)


def _read_table(path: str) -> AppDemand:
    import pandas as pd
    try:
        frame = pd.read_csv(path) if kind_of(path) == "csv" else pd.read_parquet(path)
    except (OSError, ValueError, pd.errors.ParserError, ImportError) as e:
        raise TraceError(path, f"cannot read demand: {str(e).splitlines()[0]}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise TraceError(path, f"not a whole-application demand: no column {', '.join(missing)}")
    cols = {name: _integers(frame, name, path) for name in INT_COLUMNS}
    for name, names in (("event", EVENTS), ("side", SIDES)):
        text = frame[name].astype(str).str.strip().str.lower()
        codes = text.map({n: k for k, n in enumerate(names)})
        bad = codes.isna().to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceError(path, f"row {i + 1} (connection {frame['connection'].iloc[i]}): unknown {name} "
                                   f"{frame[name].iloc[i]!r} (one of {', '.join(names)})")
        cols[name] = codes.to_numpy(np.int8)
    return AppDemand.from_columns(**cols)


def _integers(frame, column: str, path: str) -> np.ndarray:
    """A column as int64; an empty cell, a fraction or a word is refused naming its row."""
    import pandas as pd
    values = frame[column]
    if pd.api.types.is_integer_dtype(values):
        return values.to_numpy(np.int64)
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(numbers) | (numbers != np.round(numbers)) | (np.abs(numbers) >= 2.0**63)
    if bad.any():
        i = int(np.argmax(bad))
        raise TraceError(path, f"row {i + 1}: {column} {str(values.iloc[i])!r} is not a whole number")
    return numbers.astype(np.int64)
