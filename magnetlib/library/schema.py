"""Column schemas of a library: records (events/), streams and traces (catalog/).

Event names, layers and directions come from format.toml, like everything
else that knows the trace format.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import format as fmt
from ..format import Event

EVENT_NAMES = [ev.name for ev in Event]
# Dense index of each event code in EVENT_NAMES (codes < 256; SYSINFO separately).
_INDEX = np.full(fmt.EVENT_TABLE_SIZE, -1, np.int8)
for _i, _ev in enumerate(Event):
    if _ev < fmt.EVENT_TABLE_SIZE:
        _INDEX[_ev] = _i
SYSINFO_INDEX = EVENT_NAMES.index("SYSINFO")

EVENT_TYPE = pa.dictionary(pa.int8(), pa.string())
TIME_TYPE = pa.timestamp("ns", tz="UTC")

# Ext fields kept per record (reserved0 is always 0); addresses become strings.
EXT_COLUMNS = [f.name for f in fmt.EXT_FIELDS if f.name != "reserved0"]
ADDRESS_COLUMNS = ("saddr", "daddr")

# Network events in stack order: the per-stream count/byte columns, as Trace.streams() names them.
NETWORK_EVENTS = sorted(fmt.NETWORK_EVENTS)
EVENT_COLUMNS = [f"{Event(ev).name.lower()}_{what}" for ev in NETWORK_EVENTS for what in ("records", "bytes")]


def event_indices(codes: np.ndarray) -> np.ndarray:
    """Index into EVENT_NAMES of each (known) event code."""
    small = codes < fmt.EVENT_TABLE_SIZE
    if small.all():
        return _INDEX[codes]
    return np.where(small, _INDEX[np.where(small, codes, 0)], SYSINFO_INDEX).astype(np.int8)


def event_array(codes: np.ndarray) -> pa.DictionaryArray:
    """Event codes as names, dictionary-encoded with the same dictionary in every file."""
    return pa.DictionaryArray.from_arrays(event_indices(codes), EVENT_NAMES)


def event_types():
    """One row per event: name, code, layer, direction (None where it has none)."""
    import pandas as pd
    return pd.DataFrame({
        "event": EVENT_NAMES,
        "code": [int(ev) for ev in Event],
        "layer": [fmt.EVENT_SPEC[ev]["layer"] for ev in Event],
        "direction": [fmt.EVENT_SPEC[ev].get("direction") for ev in Event],
    })


# Columns of the record files that every file has (ext traces add EXT_COLUMNS).
RECORD_SCHEMA = pa.schema([
    ("trace", EVENT_TYPE), ("timestamp_ns", pa.int64()), ("time", TIME_TYPE),
    ("sockid", pa.uint64()), ("event", EVENT_TYPE), ("size", pa.int32()),
])

# Writer options: dictionary pages for small-alphabet columns, delta encoding for times.
PARQUET_OPTIONS = dict(
    compression="zstd",
    use_dictionary=["trace", "event", "sockid", "size", "pid", "cpu", "saddr", "daddr",
                    "sport", "dport", "tcp_state", "valid", "tcp_flags", "ip_version"],
    column_encoding={"timestamp_ns": "DELTA_BINARY_PACKED", "time": "DELTA_BINARY_PACKED"},
)


TRACE_SCHEMA = pa.schema(
    [(name, pa.string()) for name in ("trace", "sha256", "source")]
    + [("imported_at", TIME_TYPE)]
    + [(name, pa.string()) for name in ("host", "hostname")] + [("host_id", pa.uint64())]
    + [(name, pa.string()) for name in ("kernel", "producer", "filter", "application", "path", "clock")]
    + [("clock_khz", pa.int64()), ("record_size", pa.int64()), ("byteorder", pa.string()),
       ("segment_index", pa.uint64())]
    + [(name, pa.int64()) for name in ("records", "truncated_bytes", "streams", "first_ns", "last_ns")]
    + [("start_time", TIME_TYPE), ("end_time", TIME_TYPE), ("lost", pa.int64()), ("lost_records", pa.int64())]
    + [(name, pa.int64()) for name in EVENT_COLUMNS] + [("sched_records", pa.int64())])

STREAM_SCHEMA = pa.schema(
    [("trace", pa.string()), ("host", pa.string()), ("sockid", pa.uint64()), ("application", pa.string()),
     ("path", pa.string()),
     ("pid", pa.uint32()), ("first_ns", pa.int64()), ("last_ns", pa.int64()), ("first_time", TIME_TYPE),
     ("last_time", TIME_TYPE), ("top_layer", pa.string()), ("bytes", pa.int64())]
    + [(name, pa.int64()) for name in EVENT_COLUMNS]
    + [("sport", pa.uint16()), ("dport", pa.uint16()), ("saddr", pa.string()), ("daddr", pa.string()),
       ("mss", pa.uint32()), ("min_srtt_us", pa.uint32()), ("max_snd_wnd", pa.uint32()),
       ("max_rcv_wnd", pa.uint32())])


def empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()
