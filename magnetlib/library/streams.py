"""Per-stream totals for the catalogue, accumulated chunk by chunk with hash grouping.

The counts follow Trace.streams(): per network event, records and bytes (sizes
below 0 count as 0) of records with a socket; first/last ns over those records.
Extended traces add what they know of the stream: process, ports, addresses,
and TCP state extremes (the Tmix export uses the window, RTT and MSS).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import format as fmt
from ..format import Event, ExtValid
from ..trace import format_addresses
from .schema import EVENT_COLUMNS, NETWORK_EVENTS, STREAM_SCHEMA, TIME_TYPE

_NET_CODES = np.array(NETWORK_EVENTS, np.uint32)
TOP_LAYERS = ("sock", "tcp", "ip", "dev")
# Bytes that stand for a layer: both directions, retransmissions not counted twice.
LAYER_BYTES = {layer: [f"{Event(ev).name.lower()}_bytes" for ev in NETWORK_EVENTS
                       if fmt.NETWORK_EVENTS[ev][0] == layer and ev != Event.TCP_RETRANS]
               for layer in TOP_LAYERS}
LAYER_RECORDS = {layer: [f"{Event(ev).name.lower()}_records" for ev in NETWORK_EVENTS
                         if fmt.NETWORK_EVENTS[ev][0] == layer] for layer in TOP_LAYERS}
TCP_STATE_AGG = [("mss", "max"), ("srtt_us", "min"), ("snd_wnd", "max"), ("rcv_wnd", "max")]


class StreamTotals:
    def __init__(self, ext: bool):
        self.ext = ext
        self.parts: list[pa.Table] = []
        self.pids: list[pa.Table] = []
        self.tcp: list[pa.Table] = []
        self.addr: list = []

    def add(self, cols: dict) -> None:
        """Aggregate a chunk by (sockid, event) over all its records; table() keeps the
        network events of real sockets (grouping first is cheaper than masking first)."""
        table = pa.table({"sockid": cols["sockid"], "event": cols["event"],
                          "bytes": np.maximum(cols["size"], 0), "ns": cols["timestamp_ns"]})
        self.parts.append(table.group_by(["sockid", "event"]).aggregate(
            [("bytes", "sum"), ("bytes", "count"), ("ns", "min"), ("ns", "max")]))
        if self.ext:
            net = np.isin(cols["event"], _NET_CODES) & (cols["sockid"] != 0)
            self._add_ext(cols, net, cols["sockid"][net])

    def _add_ext(self, cols: dict, net: np.ndarray, sid: np.ndarray) -> None:
        valid = cols["valid"][net]
        task = (valid & ExtValid.TASK) != 0
        if task.any():
            self.pids.append(pa.table({"sockid": sid[task], "pid": cols["pid"][net][task]})
                             .group_by("sockid").aggregate([("pid", "max")]))
        state = (valid & (ExtValid.TCP_STATE | ExtValid.TCP_INFO)) != 0     # both hold mss, srtt, windows
        if state.any():
            t = pa.table({"sockid": sid[state], **{c: cols[c][net][state] for c, _ in TCP_STATE_AGG}})
            t = t.set_column(t.schema.get_field_index("srtt_us"), "srtt_us",
                             pa.array(np.where(cols["srtt_us"][net][state] > 0,
                                               cols["srtt_us"][net][state], np.iinfo(np.uint32).max)))
            self.tcp.append(t.group_by("sockid").aggregate(list(TCP_STATE_AGG)))
        addr = np.flatnonzero((valid & ExtValid.ADDR) != 0)
        if len(addr):
            _, first = np.unique(sid[addr], return_index=True)
            rows = np.flatnonzero(net)[addr[first]]
            self.addr.append((cols["sockid"][rows], cols["sport"][rows], cols["dport"][rows],
                              cols["saddr"][rows], cols["daddr"][rows]))

    def table(self, tid: str, host: str, application: str | None, utc_offset: int | None,
              path: str | None = None) -> pa.Table:
        """One row per stream: ids, time range, per-event records/bytes, what ext data says.

        utc_offset: ns to add to the trace's ns for Unix time (None: the trace has no anchor);
        path: the network path the trace was captured across (a name given at import)."""
        import pandas as pd
        frame = _pivot(self.parts)
        frame.insert(0, "trace", tid)
        frame.insert(1, "host", host)
        if self.ext:
            frame = _with_ext(frame, self)
        else:
            for col in ("pid", "sport", "dport", "saddr", "daddr", "mss", "min_srtt_us", "max_snd_wnd", "max_rcv_wnd"):
                frame[col] = pd.NA
        frame["application"] = _applications(frame, application)
        frame["path"] = path
        top = np.full(len(frame), None, object)
        nbytes = np.zeros(len(frame), np.int64)
        for layer in reversed(TOP_LAYERS):          # the highest layer with records wins
            has = frame[LAYER_RECORDS[layer]].sum(axis=1).to_numpy() > 0
            top[has] = layer
            nbytes[has] = frame[LAYER_BYTES[layer]].sum(axis=1).to_numpy()[has]
        frame["top_layer"] = top
        frame["bytes"] = nbytes
        return _to_arrow(frame, utc_offset)


def _pivot(parts: list[pa.Table]):
    import pandas as pd
    if not parts:
        frame = pd.DataFrame({"sockid": np.zeros(0, np.uint64), "first_ns": np.zeros(0, np.int64),
                              "last_ns": np.zeros(0, np.int64)})
        for col in EVENT_COLUMNS:
            frame[col] = np.zeros(0, np.int64)
        return frame
    g = (pa.concat_tables(parts).group_by(["sockid", "event"])
         .aggregate([("bytes_sum", "sum"), ("bytes_count", "sum"), ("ns_min", "min"), ("ns_max", "max")])
         .to_pandas())
    g = g[g["event"].isin(_NET_CODES) & (g["sockid"] != 0)]
    if g.empty:
        return _pivot([])
    by = g.groupby("sockid")
    frame = pd.DataFrame({"first_ns": by["ns_min_min"].min(), "last_ns": by["ns_max_max"].max()})
    for ev in NETWORK_EVENTS:
        name = Event(ev).name.lower()
        part = g[g["event"] == ev].set_index("sockid")
        frame[f"{name}_records"] = part["bytes_count_sum"].reindex(frame.index).fillna(0).astype(np.int64)
        frame[f"{name}_bytes"] = part["bytes_sum_sum"].reindex(frame.index).fillna(0).astype(np.int64)
    frame.index.name = "sockid"
    return frame.sort_index().reset_index()


def _with_ext(frame, totals: StreamTotals):
    import pandas as pd
    if totals.pids:
        pid = pa.concat_tables(totals.pids).group_by("sockid").aggregate([("pid_max", "max")]).to_pandas()
        frame = frame.merge(pid.rename(columns={"pid_max_max": "pid"}), on="sockid", how="left")
    else:
        frame["pid"] = pd.NA
    ports = _first_addresses(totals.addr)
    frame = frame.merge(ports, on="sockid", how="left")
    if totals.tcp:
        tcp = (pa.concat_tables(totals.tcp).group_by("sockid")
               .aggregate([(f"{c}_{how}", how) for c, how in TCP_STATE_AGG]).to_pandas())
        tcp.columns = ["sockid", "mss", "min_srtt_us", "max_snd_wnd", "max_rcv_wnd"]
        tcp.loc[tcp["min_srtt_us"] == np.iinfo(np.uint32).max, "min_srtt_us"] = 0
        frame = frame.merge(tcp, on="sockid", how="left")
    else:
        for col in ("mss", "min_srtt_us", "max_snd_wnd", "max_rcv_wnd"):
            frame[col] = pd.NA
    return frame


def _first_addresses(parts: list):
    import pandas as pd
    if not parts:
        return pd.DataFrame({"sockid": np.zeros(0, np.uint64), "sport": [], "dport": [], "saddr": [], "daddr": []})
    sid, sport, dport, saddr, daddr = (np.concatenate(c) for c in zip(*parts))
    _, first = np.unique(sid, return_index=True)          # the earliest chunk that saw the stream
    return pd.DataFrame({"sockid": sid[first], "sport": sport[first], "dport": dport[first],
                         "saddr": format_addresses(saddr[first]), "daddr": format_addresses(daddr[first])})


def _applications(frame, application: str | None) -> np.ndarray:
    """The import's label, else the capture filter, else "pid N", else "unknown"."""
    if application:
        return np.full(len(frame), application, object)
    pid = frame["pid"].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
    named = np.array([f"pid {int(p)}" if p == p and p > 0 else "unknown" for p in pid], object)
    return named


def _to_arrow(frame, utc_offset: int | None) -> pa.Table:
    arrays = {}
    for col in STREAM_SCHEMA.names:
        if col in ("first_time", "last_time"):
            ns = frame[col.replace("time", "ns")].to_numpy(np.int64)
            arrays[col] = (pa.array((ns + utc_offset).view("datetime64[ns]")).cast(TIME_TYPE)
                           if utc_offset is not None else pa.nulls(len(ns), TIME_TYPE))
            continue
        values = frame[col]
        arrays[col] = pa.array(values.astype(object).where(values.notna(), None).tolist()
                               if values.dtype == object or values.isna().any() else values.to_numpy(),
                               STREAM_SCHEMA.field(col).type)
    return pa.table(arrays, schema=STREAM_SCHEMA)
