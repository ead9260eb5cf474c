"""Application demand next to the wire: a trace's streams against a capture's flows.

Matching (one flow per stream, at most one stream per flow):
  * by addresses: a stream whose extended data has ADDR (ports and addresses)
    matches the TCP flow with the same two endpoints;
  * otherwise by time and size: the bytes the application sent and received
    (SOCK_SEND/SOCK_RECV) against the bytes each direction of a flow carried
    (its sequence-number span, so retransmissions do not count twice), plus
    the overlap of their time spans when the trace has a wall-clock anchor.
    The best pairs are taken greedily; a pair whose bytes differ by more than
    MAX_SIZE_MISMATCH is no match.

Per matched stream the comparison holds: the Table II rows (metrics.stack_table)
of the application and the wire in each direction, their size and spacing
distributions side by side, the lag from each application write to the first
and last of its bytes on the wire (from TCP sequence numbers; for reads, from
the wire to the read), and what is in one but not the other: application bytes
never seen on the wire, wire bytes outside the application's, retransmissions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import format as fmt
from ..accumulate import Growing
from ..format import Event, ExtValid
from ..metrics import Series, stack_table
from ..trace import Trace
from .columns import TCP_SYN
from .flows import FlowTable, _endpoint_keys, first_of
from .pcapfile import PcapFile

MAX_SIZE_MISMATCH = 0.05
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


@dataclass
class StreamComparison:
    sockid: int
    flow: int
    how: str                              # "addresses" or "time and size"
    local_side: int                       # flow direction the stream's sends travel (0 or 1)
    app: dict[str, Series] = field(default_factory=dict)    # "send"/"recv", wall-clock ns
    wire: dict[str, Series] = field(default_factory=dict)
    retransmissions: dict[str, int] = field(default_factory=dict)
    device: dict[str, dict[str, int]] = field(default_factory=dict)  # the trace's DEV events vs pcap

    def table(self, direction: str):
        """Table II rows: the application, then the wire."""
        rows = [(f"Application ({'SOCK_SEND' if direction == 'send' else 'SOCK_RECV'})",
                 self.app[direction].ns, self.app[direction].size),
                ("Wire (pcap)", self.wire[direction].ns, self.wire[direction].size)]
        return stack_table(rows)

    def distributions(self, direction: str):
        """Quantiles of size and spacing, application next to wire."""
        import pandas as pd
        cols = {"quantile": [f"p{q * 100:g}" for q in QUANTILES]}
        for who, s in (("app", self.app[direction]), ("wire", self.wire[direction])):
            gaps = np.diff(np.sort(s.ns)) / 1e9
            cols[f"{who} size"] = _quantiles(s.size)
            cols[f"{who} gap s"] = _quantiles(gaps)
        return pd.DataFrame(cols)

    def lag(self, direction: str) -> dict[str, np.ndarray]:
        """Per application call: ns from the call to its first and last byte on the wire
        (send), or from the wire packet that brought its last byte to the call (recv).
        NaN for bytes the wire never carried."""
        app, wire = self.app[direction], self.wire[direction]
        order = np.argsort(wire.ns, kind="stable")
        t, end = wire.ns[order], np.maximum.accumulate(wire.seq[order] + wire.size[order]) \
            if len(order) else np.zeros(0, np.int64)
        start = np.cumsum(app.size) - app.size           # each call's first byte in the stream

        def when(byte):
            i = np.searchsorted(end, byte, side="right")
            return np.where(i < len(t), t[np.minimum(i, len(t) - 1)] if len(t) else 0, -1)

        first, last = when(start), when(start + app.size - 1)
        out = {}
        for name, w in (("first", first), ("last", last)):
            lag = (w - app.ns if direction == "send" else app.ns - w).astype(np.float64)
            out[name] = np.where(w < 0, np.nan, lag)
        return out

    def unmatched(self, direction: str) -> dict[str, int]:
        """Bytes in one but not the other, and retransmitted wire packets."""
        app, wire = self.app[direction], self.wire[direction]
        app_bytes = int(app.size.sum())
        wire_top = int((wire.seq + wire.size).max()) if len(wire.size) else 0
        return {"app bytes not on the wire": max(app_bytes - wire_top, 0),
                "wire bytes beyond the app's": max(wire_top - app_bytes, 0),
                "retransmitted wire packets": self.retransmissions.get(direction, 0)}


def _quantiles(v: np.ndarray) -> list[float]:
    v = np.asarray(v, np.float64)
    return [float(np.quantile(v, q)) if len(v) else np.nan for q in QUANTILES]


@dataclass
class Comparison:
    streams: list[StreamComparison]
    unmatched_streams: list[int]
    unmatched_flows: list[int]
    flow_table: object            # pandas DataFrame: flows.FlowTable.table()
    clock_offset_ns: int
    clock_note: str


# --------------------------------------------------------------- matching ---
def _app_series(trace: Trace, sockid: int, event: Event) -> tuple[np.ndarray, np.ndarray]:
    ns, size = trace.series(trace.select(event, sockid))
    keep = size > 0
    return ns[keep], size[keep]


def _app_streams(trace: Trace):
    """trace.streams() rows of the streams with application (socket) calls."""
    streams = trace.streams()
    if streams.empty:
        return streams
    return streams[(streams["sock_send_records"] + streams["sock_recv_records"]) > 0]


SEND_PATH = [Event.SOCK_SEND, Event.SOCK_RECV, Event.TCP_SEND, Event.TCP_RETRANS, Event.IP_SEND,
             Event.DEV_SEND]


def _stream_endpoints(trace: Trace) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per sockid: (local key, remote key) from its first send-path record with ADDR."""
    if not trace.has_ext:
        return {}
    send_path = np.zeros(fmt.EVENT_TABLE_SIZE + 1, bool)
    send_path[SEND_PATH] = True
    firsts = {}
    for lo, hi in trace.chunks():
        ev = trace.column("event", lo, hi)
        ok = send_path[np.minimum(ev, fmt.EVENT_TABLE_SIZE)] & ((trace.column("valid", lo, hi) & ExtValid.ADDR) != 0)
        pos = np.flatnonzero(ok)
        sids, first = np.unique(trace.column("sockid", lo, hi)[pos], return_index=True)
        for sid, at in zip(sids.tolist(), (lo + pos[first]).tolist()):
            firsts.setdefault(sid, at)
    at = np.array(sorted(firsts.values()), np.int64)
    sids = trace.column_at("sockid", at)
    r = trace.records[at]
    local = _endpoint_keys(r["saddr"], trace.column_at("sport", at))
    remote = _endpoint_keys(r["daddr"], trace.column_at("dport", at))
    return {int(sid): (local[k], remote[k]) for k, sid in enumerate(sids)}


class WireFlows:
    """compare's first pass over a capture: its flows, and where each direction's sequence
    numbers start (the first SYN's + 1, else the first packet's)."""

    def __init__(self):
        self.flows = FlowTable()
        self.starts = Growing(any_seq=(np.int64, -1), syn_seq=(np.int64, -1))   # per flow * 2 + sender

    def add(self, p: np.ndarray) -> None:
        index, flow, src_low = self.flows.add(p)
        side = flow * 2 + src_low
        self.starts.cover(2 * len(self.flows))
        seq = p["seq"][index].astype(np.int64)
        syn = (p["tcp_flags"][index] & TCP_SYN) != 0
        for where, name in ((None, "any_seq"), (syn, "syn_seq")):
            at = first_of(side, len(self.starts), where)
            fresh = (at >= 0) & (self.starts.view(name) < 0)          # chunks come in order
            self.starts.view(name)[fresh] = seq[at[fresh]]

    def sides(self, flow: np.ndarray, src_low: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(flow id, direction: 0 from side A) of packets given as provisional flow and sender."""
        return self.final[flow], (src_low != self.a_low[flow]).astype(np.int8)

    def finish(self) -> None:
        self.final = self.flows.final_ids()
        self.a_low = self.flows.openers()[1][self.final]                   # by provisional id
        any_seq, syn_seq = self.starts.view("any_seq"), self.starts.view("syn_seq")
        self.base = np.where(syn_seq >= 0, syn_seq + 1, any_seq)             # per provisional side
        self.table = self.flows.table()

    def relative(self, p: np.ndarray):
        """A chunk's flow packets: their positions, (flow id, direction), and sequence
        numbers relative to their direction's start."""
        index, flow, src_low = self.flows.add(p, count=False)
        rel = (p["seq"][index].astype(np.int64) - self.base[flow * 2 + src_low]) % (1 << 32)
        rel = np.where(rel > (1 << 31), rel - (1 << 32), rel)
        return index, *self.sides(flow, src_low), rel


def _chunks(packets):
    """A function giving the capture's packets a chunk at a time, afresh each call."""
    if isinstance(packets, PcapFile):
        return lambda: [packets.packets]
    return packets


def compare(trace: Trace, packets, first: WireFlows | None = None) -> Comparison:
    """Match streams to flows and line up each matched pair (see the module doc).

    `packets` is a PcapFile, or a function giving a fresh PacketStream of it each call
    (read up to three times, a chunk at a time: memory holds the flows and the matched
    flows' data packets, not the capture); `first`, the first pass, if already read."""
    chunks = _chunks(packets)
    if first is None:
        first = WireFlows()
        for p in chunks():
            first.add(p)
    first.finish()
    table = first.table
    tcp_flows = np.flatnonzero(table["proto"].to_numpy() == "tcp")
    offset, note = _clock(trace)
    streams = _app_streams(trace)
    endpoints = _stream_endpoints(trace)
    a_keys, b_keys = _flow_endpoints(first)
    pairs, rest, taken = [], [], set()
    for sid in streams.index.to_numpy(np.uint64).tolist():
        if sid not in endpoints:
            rest.append(sid)
            continue
        local, remote = endpoints[sid]
        hit_a = (a_keys == local).all(1) & (b_keys == remote).all(1)
        hit_b = (b_keys == local).all(1) & (a_keys == remote).all(1)
        cand = [f for f in tcp_flows[(hit_a | hit_b)[tcp_flows]] if f not in taken]
        if cand:
            taken.add(cand[0])
            pairs.append((sid, cand[0], "addresses", 0 if hit_a[cand[0]] else 1))
        else:
            rest.append(sid)
    free = np.array([f for f in tcp_flows if f not in taken], np.int64)
    if rest and len(free):
        by_size, rest = _match_by_size(trace, streams.loc[rest], first, _spans(first, chunks), free, offset)
        pairs += by_size
    wire = _wire_packets(first, chunks, {f for _, f, _, _ in pairs})
    streams = [_line_up(trace, wire, sid, f, how, side, offset) for sid, f, how, side in pairs]
    matched_flows = {f for _, f, _, _ in pairs}
    return Comparison(streams, rest, [int(f) for f in tcp_flows if f not in matched_flows],
                      table, offset, note)


def _flow_endpoints(first: WireFlows) -> tuple[np.ndarray, np.ndarray]:
    """Side A and side B keys of each flow (from its opening packet, sent by A)."""
    a, b = first.flows.ends()
    t = first.table
    return _endpoint_keys(a, t["a_port"].to_numpy()), _endpoint_keys(b, t["b_port"].to_numpy())


def _spans(first: WireFlows, chunks) -> np.ndarray:
    """(flows, 2): the bytes each direction's data covers in sequence space (a second pass:
    retransmissions count once)."""
    top = np.zeros(2 * len(first.flows), np.int64)
    for p in chunks():
        index, flow, direction, rel = first.relative(p)
        payload = p["payload"][index].astype(np.int64)
        data = payload > 0
        np.maximum.at(top, (flow * 2 + direction)[data], (rel + payload)[data])
    return top.reshape(len(first.flows), 2)


WIRE_DTYPE = np.dtype([("flow", np.int64), ("direction", np.int8), ("time_ns", np.int64),
                       ("payload", np.int64), ("seq", np.uint32), ("rel", np.int64)])


def _wire_packets(first: WireFlows, chunks, flows: set[int]) -> np.ndarray:
    """The data packets of these flows, in capture order (WIRE_DTYPE; a last pass)."""
    if not flows:
        return np.zeros(0, WIRE_DTYPE)
    wanted = np.zeros(len(first.flows), bool)
    wanted[list(flows)] = True
    parts = []
    for p in chunks():
        index, flow, direction, rel = first.relative(p)
        keep = wanted[flow] & (p["payload"][index] > 0)
        q = p[index[keep]]
        part = np.zeros(len(q), WIRE_DTYPE)
        part["flow"], part["direction"], part["rel"] = flow[keep], direction[keep], rel[keep]
        part["time_ns"], part["payload"], part["seq"] = q["time_ns"], q["payload"], q["seq"]
        parts.append(part)
    return np.concatenate(parts) if parts else np.zeros(0, WIRE_DTYPE)


def _clock(trace: Trace) -> tuple[int, str]:
    """ns to add to trace times to get Unix time."""
    if trace.meta.wall_anchor_ns is not None:
        return trace.meta.wall_anchor_ns - trace.start_ns, "trace times placed by its wall-clock anchor"
    return 0, "the trace has no wall-clock anchor: its times are aligned to the capture by the first data"


def _match_by_size(trace, streams, first, spans, free, offset):
    """Greedy pairs of (stream, flow) whose byte counts agree best (see the module doc)."""
    sids = streams.index.to_numpy(np.uint64).tolist()
    if not sids or not len(free):
        return [], sids
    span = spans[free]                                                   # (F, 2)
    sent = streams["sock_send_bytes"].to_numpy(np.int64)[:, None, None]  # (S, 1, 1)
    got = streams["sock_recv_bytes"].to_numpy(np.int64)[:, None, None]
    out = np.stack([span[:, 0], span[:, 1]], axis=1)[None]              # (1, F, side)
    back = np.stack([span[:, 1], span[:, 0]], axis=1)[None]
    mismatch = (np.abs(sent - out) + np.abs(got - back)) / np.maximum(np.maximum(sent + got, out + back), 1)
    cost = mismatch + _time_penalty(trace, streams, first.table, free, offset)[:, :, None]
    cost[mismatch > MAX_SIZE_MISMATCH] = np.inf
    pairs, used_s, used_f = [], set(), set()
    for flat in np.argsort(cost, axis=None):            # one step per candidate pair, not per packet
        i, j, side = np.unravel_index(flat, cost.shape)
        if not np.isfinite(cost[i, j, side]):
            break
        if i in used_s or j in used_f:
            continue
        used_s.add(i)
        used_f.add(j)
        pairs.append((sids[i], int(free[j]), "time and size", int(side)))
    return pairs, [s for i, s in enumerate(sids) if i not in used_s]


def _time_penalty(trace, streams, table, free, offset) -> np.ndarray:
    """(S, F): the share of each stream's time span outside each flow's (1 s slack); 0 unanchored."""
    if trace.meta.wall_anchor_ns is None:
        return np.zeros((len(streams), len(free)))
    s0 = streams["first_ns"].to_numpy(np.float64)[:, None] + offset
    s1 = streams["last_ns"].to_numpy(np.float64)[:, None] + offset
    f0 = table["first_ns"].to_numpy(np.float64)[free][None] - 1e9
    f1 = table["last_ns"].to_numpy(np.float64)[free][None] + 1e9
    overlap = np.clip(np.minimum(s1, f1) - np.maximum(s0, f0), 0, None)
    return 1.0 - np.where(s1 > s0, overlap / np.maximum(s1 - s0, 1), (s0 >= f0) & (s0 <= f1))


def _line_up(trace, wire, sid, flow, how, side, offset) -> StreamComparison:
    s = StreamComparison(sid, int(flow), how, side)
    for direction, event, wire_dir in (("send", Event.SOCK_SEND, side), ("recv", Event.SOCK_RECV, 1 - side)):
        ns, size = _app_series(trace, sid, event)
        q = wire[(wire["flow"] == flow) & (wire["direction"] == wire_dir)]
        s.app[direction] = Series(ns + offset, size)
        s.wire[direction] = Series(q["time_ns"], q["payload"], q["rel"])
        w = s.wire[direction]
        order = np.argsort(w.ns, kind="stable")
        ends = (w.seq + w.size)[order]
        seen = np.maximum.accumulate(np.r_[np.iinfo(np.int64).min, ends[:-1]]) if len(ends) else ends
        s.retransmissions[direction] = int(np.count_nonzero(ends <= seen))
        dev = _device_match(trace, sid, Event.DEV_SEND if direction == "send" else Event.DEV_RECV,
                            q, offset)
        if dev:
            s.device[direction] = dev
    if trace.meta.wall_anchor_ns is None:
        _align_first_data(s)
    return s


DEVICE_TOLERANCE_NS = 10_000_000


def _device_match(trace: Trace, sid: int, event: Event, wire: np.ndarray, offset: int) -> dict | None:
    """The trace's own wire-level (DEV) data events of a stream against the pcap's packets.

    With SEGMENT extended data, events and packets pair by (seq, size); otherwise the
    k-th event of a size pairs with the k-th packet of that size, when within 10 ms
    (clocks permitting).  Returns matched / only in the trace / only in the pcap."""
    pos = trace.select(event, sid)
    size = trace.column_at("size", pos).astype(np.int64)
    pos, size = pos[size > 0], size[size > 0]
    if not len(pos):
        return None
    segment = trace.has_ext and ((trace.column_at("valid", pos) & ExtValid.SEGMENT) != 0).all()
    if segment:
        a = trace.column_at("seq", pos).astype(np.uint64) << np.uint64(32) | size.astype(np.uint64)
        b = wire["seq"].astype(np.uint64) << np.uint64(32) | wire["payload"].astype(np.uint64)
        ka, ca = np.unique(a, return_counts=True)
        kb, cb = np.unique(b, return_counts=True)
        _, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
        matched, how = int(np.minimum(ca[ia], cb[ib]).sum()), "seq and size"
    else:
        ta = trace.ns_at(pos) + offset
        matched = _pair_by_size(ta, size, wire["time_ns"], wire["payload"].astype(np.int64))
        how = "size and time"
    return {"matched": matched, "only in the trace": len(pos) - matched,
            "only in the pcap": len(wire) - matched, "by": how}


def _pair_by_size(ta, sa, tb, sb) -> int:
    """Pairs (k-th of a size in a, k-th of that size in b) within the time tolerance."""
    def ranked(t, s):
        order = np.lexsort((t, s))
        s, t = s[order], t[order]
        start = np.r_[0, np.flatnonzero(np.diff(s)) + 1]
        rank = np.arange(len(s)) - np.repeat(start, np.diff(np.r_[start, len(s)]))
        return s, rank, t
    sa, ra, ta = ranked(ta, sa)
    sb, rb, tb = ranked(tb, sb)
    key_a = sa.astype(np.uint64) << np.uint64(32) | ra.astype(np.uint64)
    key_b = sb.astype(np.uint64) << np.uint64(32) | rb.astype(np.uint64)
    _, ia, ib = np.intersect1d(key_a, key_b, assume_unique=True, return_indices=True)
    return int(np.count_nonzero(np.abs(ta[ia] - tb[ib]) <= DEVICE_TOLERANCE_NS))


def _align_first_data(s: StreamComparison) -> None:
    """Without a wall clock: shift the application's times so its first send meets the wire's."""
    for direction in ("send", "recv"):
        app, wire = s.app[direction], s.wire[direction]
        if len(app.ns) and len(wire.ns):
            shift = int(wire.ns.min() - app.ns.min())
            for d in ("send", "recv"):
                s.app[d].ns = s.app[d].ns + shift
            return
