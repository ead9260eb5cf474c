"""A library's traces read back from their Parquet records, for what needs a whole trace:
the whole-application demand (magnetlib.connections) of the traces of one capture.

    for capture in stored.captures(layout, trace_rows):     # a client's and a server's, or one
        demand = connections.of_traces(capture.traces, capture.name)

`StoredTrace` holds one trace's records as numpy columns and answers the part of
magnetlib.Trace's interface that connections.load reads (select, column_at, ns_at,
has_ext, scan.lost, path).  Addresses come back as the 16 bytes the capture recorded
(IPv4 as ::ffff:a.b.c.d) from the text the library stores.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import catalog
from .catalog import Layout
from .engines import _event_codes
from .schema import ADDRESS_COLUMNS, EXT_COLUMNS

# magnet path --capture T writes T.client.magnet and T.server.magnet (docs/path.md)
SIDE_FILE = re.compile(r"^(?P<prefix>.*)\.(?P<side>client|server)\.magnet$")


def parse_addresses(text: np.ndarray) -> np.ndarray:
    """Address strings (as the library stores them) to (n, 16) bytes; "" is all zeros."""
    uniq, inverse = np.unique(np.asarray(text, dtype=object).astype(str), return_inverse=True)
    raw = np.zeros((len(uniq), 16), np.uint8)
    for i, name in enumerate(uniq):
        if name:
            addr = ipaddress.ip_address(name)
            packed = (ipaddress.IPv6Address(f"::ffff:{addr}") if addr.version == 4 else addr).packed
            raw[i] = np.frombuffer(packed, np.uint8)
    return raw[inverse.reshape(-1)]


class StoredTrace:
    """One trace of the library, its records in trace order."""

    def __init__(self, layout: Layout, row: dict):
        self.path = row["source"]
        self.trace_id = row["trace"]
        self.scan = SimpleNamespace(lost=int(row.get("lost") or 0))
        files = catalog.event_files(layout, [self.trace_id])
        table = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
        self.has_ext = "valid" in table.column_names
        self.columns = {"event": _event_codes(table).astype(np.uint32),
                        "timestamp_ns": table.column("timestamp_ns").to_numpy()}
        for name in ("sockid", "size", *(EXT_COLUMNS if self.has_ext else ())):
            col = table.column(name)
            if name in ADDRESS_COLUMNS:
                self.columns[name] = parse_addresses(col.to_numpy(zero_copy_only=False))
            else:
                self.columns[name] = col.to_numpy(zero_copy_only=False)

    def check(self) -> None:
        """Checked when it was imported."""

    def close(self) -> None:
        self.columns = {}

    def select(self, events) -> np.ndarray:
        codes = np.array([int(e) for e in np.atleast_1d(events)], np.uint32)
        return np.flatnonzero(np.isin(self.columns["event"], codes))

    def column_at(self, name: str, positions: np.ndarray) -> np.ndarray:
        return self.columns[name][positions]

    def ns_at(self, positions: np.ndarray) -> np.ndarray:
        return self.columns["timestamp_ns"][positions]


@dataclass
class StoredCapture:
    """The traces of one capture: a client's and a server's (magnet path), or one trace."""
    name: str
    rows: list[dict]            # traces catalogue rows, client first

    def open(self, layout: Layout) -> list[StoredTrace]:
        return [StoredTrace(layout, row) for row in self.rows]


def captures(rows: list[dict]) -> list[StoredCapture]:
    """Group trace rows into captures: T.client.magnet with T.server.magnet (by the file each
    was imported from), every other trace alone."""
    pairs: dict[str, dict[str, dict]] = {}
    alone = []
    for row in rows:
        m = SIDE_FILE.match(row["source"] or "")
        if m:
            pairs.setdefault(m.group("prefix"), {})[m.group("side")] = row
        else:
            alone.append(StoredCapture(row["trace"], [row]))
    for prefix, sides in pairs.items():
        if len(sides) == 2:
            alone.append(StoredCapture(prefix, [sides["client"], sides["server"]]))
        else:
            alone += [StoredCapture(row["trace"], [row]) for row in sides.values()]
    return sorted(alone, key=lambda c: (c.rows[0].get("first_ns") or 0, c.name))
