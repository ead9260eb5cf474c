"""A whole-application demand made from a packet trace: what a tcpdump-driven simulation replays.

    d = wire_demand.from_pcap("a.pcap", local="10.203.1.1")         # ADUs, as Tmix builds them
    d = wire_demand.from_pcap("a.pcap", local="10.203.1.1", per_segment=True)   # every segment
    d = wire_demand.from_wire(trace)                                 # a `magnet from-pcap` trace
    app_demand.write(d, "wire.csv")                                  # both replayers take it

The input is one capture point's view: each TCP connection's data segments (new
bytes only, from sequence numbers: retransmissions are TCP's, not the application's),
the local host's as the `client` side, the far end's as the `server` side.  Runs of
data in one direction are ADUs (Tmix's connection vectors from a packet trace); each
ADU's think time is the gap seen at the capture point between the last segment before
it and its first, so the far side's think times hold the original path's round trip.

* ADUs (default): one `send` per ADU of its bytes, waiting for every byte of the
  peer seen before it: Tmix's sequential replay.
* `per_segment=True`: one `send` per data segment at its time, for `--open-loop`
  replays (every row at its time_ns, as a packet replayer writes what it captured).
  A packet replayer waits for nothing: every row's wait_bytes is 0 and its think
  time the gap from its side's previous row, so even a closed-loop replay of it
  writes each side's segments at their captured spacing.

Connections open at their SYN (no dependencies between connections: a packet trace
does not show them, and Tmix starts each vector at its time); they close at the first
FIN or RST each side sent.  numpy over all segments at once.
"""
from __future__ import annotations

import os

import numpy as np

from .app_demand import CLIENT, CLOSE, OPEN, RESET, SEND, SERVER, AppDemand, validate
from .errors import TraceError
from .format import Event, ExtValid
from .trace import Trace

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
IPPROTO_TCP = 6
SEQ_SPACE = np.int64(1) << 32
GROUP_SHIFT = np.int64(1) << 40         # keeps groups apart in one running maximum (flows under 1 TiB)


def from_pcap(path: str | os.PathLike, local: str | None = None, per_segment: bool = False) -> AppDemand:
    """The demand of a tcpdump capture, seen from `local` (default: the address in most flows)."""
    from .pcap import convert, read
    cap = read(path)
    host = convert.parse_address(local) if local else None
    records = convert.from_pcap(cap, host, ext=True).records
    return from_records(records, str(path), per_segment)


def from_wire(trace: Trace, per_segment: bool = False) -> AppDemand:
    """The demand of a trace of device records with TCP headers (`magnet from-pcap`)."""
    if not trace.has_ext:
        raise TraceError(str(trace.path), "no extended records: sequence numbers and flags are needed "
                                          "(magnet from-pcap without --no-ext)")
    pos = trace.select([Event.DEV_SEND, Event.DEV_RECV])
    cols = {name: trace.column_at(name, pos) for name in
            ("sockid", "event", "size", "valid", "seq", "tcp_flags", "ip_protocol")}
    cols["timestamp"] = trace.ns_at(pos)
    return from_records(cols, str(trace.path), per_segment)


# --------------------------------------------------------------- segments ---
def from_records(rec, where: str, per_segment: bool = False) -> AppDemand:
    """The demand of DEV_SEND/DEV_RECV records (a structured array or a dict of columns)."""
    event = np.asarray(rec["event"])
    keep = np.isin(event, [Event.DEV_SEND, Event.DEV_RECV])
    keep &= (np.asarray(rec["valid"]) & ExtValid.SEGMENT) != 0
    keep &= np.asarray(rec["ip_protocol"]) == IPPROTO_TCP
    if not keep.any():
        raise TraceError(where, "no TCP segments with headers (sequence numbers and flags)")
    order = np.lexsort((np.asarray(rec["timestamp"])[keep], np.asarray(rec["sockid"])[keep]))
    seg = {"flow": np.asarray(rec["sockid"])[keep][order].astype(np.int64),
           "ns": np.asarray(rec["timestamp"])[keep][order].astype(np.int64),
           "side": np.where(event[keep][order] == Event.DEV_SEND, CLIENT, SERVER).astype(np.int8),
           "size": np.asarray(rec["size"])[keep][order].astype(np.int64),
           "seq": np.asarray(rec["seq"])[keep][order].astype(np.int64),
           "flags": np.asarray(rec["tcp_flags"])[keep][order].astype(np.int64)}
    flows, first = np.unique(seg["flow"], return_index=True)
    seg["conn"] = np.searchsorted(flows, seg["flow"])
    open_ns, opener = _opens(seg, first)
    data = _new_data(seg)
    rows = _rows(data, open_ns, per_segment)
    closes = _closes(seg, data, open_ns)
    if per_segment:
        _on_own_clock(rows, closes, open_ns)
    d = _table(rows, closes, open_ns, opener)
    validate(d, where)
    d.notes = [f"{len(flows)} TCP connections from the wire at one capture point: ADUs are runs of "
               f"one direction's data, think times the gaps seen there ({'one send per segment' if per_segment else 'one send per ADU'})"]
    return d


def _opens(seg: dict, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per connection, when and by which side it opened: its SYN, else its first packet."""
    n = len(first)
    syn = (seg["flags"] & (SYN | ACK)) == SYN
    open_ns, opener = seg["ns"][first].copy(), seg["side"][first].copy()
    at = np.flatnonzero(syn)
    at = at[np.unique(seg["conn"][at], return_index=True)[1]]
    open_ns[seg["conn"][at]], opener[seg["conn"][at]] = seg["ns"][at], seg["side"][at]
    return open_ns, opener.astype(np.int8) if n else opener


def _new_data(seg: dict) -> dict:
    """The data segments that carried new bytes, their new byte counts, in (connection, time) order."""
    has = (seg["size"] > 0) & ((seg["flags"] & SYN) == 0)
    conn, side, ns = seg["conn"][has], seg["side"][has], seg["ns"][has]
    group = conn * 2 + side
    order = np.lexsort((ns, group))
    g, seq, size = group[order], seg["seq"][has][order], seg["size"][has][order]
    start = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    base = seq[np.maximum.accumulate(np.where(start, np.arange(len(g)), 0))] if len(g) else seq
    rel = (seq - base) % SEQ_SPACE                   # bytes from the group's first data segment
    end = rel + size
    ahead = np.maximum.accumulate(end + g * GROUP_SHIFT) - g * GROUP_SHIFT
    before = np.where(start, 0, np.r_[0, ahead[:-1]])  # highest byte sent before this segment
    new = np.clip(end - np.maximum(rel, before), 0, None)
    fresh = order[new > 0]
    back = np.argsort(fresh, kind="stable")            # back to (connection, time) order
    at = fresh[back]
    return {"conn": conn[at], "side": side[at], "ns": ns[at], "size": new[new > 0][back]}


def _rows(data: dict, open_ns: np.ndarray, per_segment: bool) -> dict:
    """Send rows: per ADU (a run of one side's segments in a connection) or per segment,
    with the peer's bytes seen before it and the gap from the later of the open and the
    connection's previous segment."""
    conn, side, ns, size = data["conn"], data["side"], data["ns"], data["size"]
    n = len(conn)
    first_of_conn = np.r_[True, conn[1:] != conn[:-1]] if n else np.zeros(0, bool)
    new_run = first_of_conn | (np.r_[True, side[1:] != side[:-1]] if n else first_of_conn)
    run = np.cumsum(new_run) - 1
    adu = run - np.maximum.accumulate(np.where(first_of_conn, run, 0)) if n else run
    conn_start = np.maximum.accumulate(np.where(first_of_conn, np.arange(n), 0)) if n else run
    before = [np.cumsum(np.where(side == s, size, 0)) - np.where(side == s, size, 0) for s in (CLIENT, SERVER)]
    in_conn = [b - b[conn_start] for b in before]     # this connection's bytes only
    wait = np.where(side == CLIENT, in_conn[SERVER], in_conn[CLIENT])
    prev = np.where(first_of_conn, open_ns[conn], np.r_[0, ns[:-1]])
    think = ns - np.maximum(prev, open_ns[conn])
    if per_segment:
        return {"conn": conn, "side": side, "ns": ns, "size": size, "adu": adu, "wait": wait, "think": think}
    starts = np.flatnonzero(new_run)
    sizes = np.add.reduceat(size, starts) if n else size
    return {"conn": conn[starts], "side": side[starts], "ns": ns[starts], "size": sizes,
            "adu": adu[starts], "wait": wait[starts], "think": think[starts]}



def _on_own_clock(rows: dict, closes: dict, open_ns: np.ndarray) -> None:
    """Every row waits for nothing and thinks from its side's previous row (or the open)."""
    n = len(rows["conn"])
    conn, side = np.r_[rows["conn"], closes["conn"]], np.r_[rows["side"], closes["side"]]
    ns = np.r_[rows["ns"], closes["ns"]]
    order = np.lexsort((np.arange(len(ns)), ns, side, conn))
    g, t = (conn * 2 + side)[order], ns[order]
    first = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    prev = np.where(first, open_ns[conn[order]], np.r_[0, t[:-1]])
    think = np.empty(len(ns), np.int64)
    think[order] = t - np.maximum(prev, open_ns[conn[order]])
    rows["think"], closes["think"] = think[:n], think[n:]
    rows["wait"], closes["wait"] = np.zeros(n, np.int64), np.zeros(len(ns) - n, np.int64)


def _closes(seg: dict, data: dict, open_ns: np.ndarray) -> dict:
    """Close (or reset) rows: the first FIN or RST each side sent, no earlier than its last
    data; waiting for the peer's bytes seen before it, thinking from the connection's
    previous data segment (or its open)."""
    conn, side, ns, flags = seg["conn"], seg["side"], seg["ns"], seg["flags"]
    ending = (flags & (FIN | RST)) != 0
    group = (conn * 2 + side)[ending]
    first = np.unique(group, return_index=True)[1]
    g, t = group[first], ns[ending][first]
    kind = np.where((flags[ending][first] & RST) != 0, RESET, CLOSE).astype(np.int8)
    c, s = g // 2, (g % 2).astype(np.int8)
    last_own = np.full(2 * len(open_ns), np.iinfo(np.int64).min)
    np.maximum.at(last_own, data["conn"] * 2 + data["side"], data["ns"])
    t = np.maximum(np.maximum(t, last_own[g]), open_ns[c])
    zero = min(int(ns.min()), int(open_ns.min()))
    key = _key(data["conn"], data["ns"] - zero)
    here = _key(c, t - zero)
    wait = np.zeros(len(g), np.int64)
    for peer in (CLIENT, SERVER):
        mine = data["side"] == peer
        cum = np.r_[0, np.cumsum(data["size"][mine])]
        upto = np.searchsorted(key[mine], here, side="right")
        from_conn = np.searchsorted(key[mine], _key(c, np.zeros(len(c), np.int64)), side="left")
        wait = np.where(s == 1 - peer, cum[upto] - cum[from_conn], wait)
    prev = np.searchsorted(key, here, side="right") - 1
    has_prev = (prev >= 0) & (data["conn"][np.maximum(prev, 0)] == c) if len(key) else np.zeros(len(c), bool)
    ref = np.where(has_prev, np.maximum(data["ns"][np.maximum(prev, 0)] if len(key) else 0, open_ns[c]), open_ns[c])
    return {"conn": c, "side": s, "ns": t, "kind": kind, "wait": wait, "think": t - ref}


def _key(conn: np.ndarray, rel_ns: np.ndarray) -> np.ndarray:
    """(connection, time from the capture's start) as one sortable int64."""
    if len(rel_ns) and rel_ns.max() >= GROUP_SHIFT:
        raise TraceError("wire", "a capture longer than 18 minutes is not supported")
    return conn * GROUP_SHIFT + rel_ns


def _table(rows: dict, closes: dict, open_ns: np.ndarray, opener: np.ndarray) -> AppDemand:
    """Opens, sends and closes as the demand table: connections numbered in order of opening."""
    n = len(open_ns)
    number = np.empty(n, np.int64)
    number[np.argsort(open_ns, kind="stable")] = np.arange(1, n + 1)
    zero = int(open_ns.min())
    m, k = len(rows["conn"]), len(closes["conn"])
    cols = {"connection": number[np.r_[np.arange(n), rows["conn"], closes["conn"]]],
            "event": np.r_[np.full(n, OPEN), np.full(m, SEND), closes["kind"]],
            "side": np.r_[opener, rows["side"], closes["side"]],
            "time_ns": np.r_[open_ns, rows["ns"], closes["ns"]] - zero,
            "size": np.r_[np.zeros(n, np.int64), rows["size"], np.zeros(k, np.int64)],
            "adu": np.r_[np.full(n, -1), rows["adu"], np.full(k, -1)],
            "wait_bytes": np.r_[np.zeros(n, np.int64), rows["wait"], closes["wait"]],
            "think_ns": np.r_[np.zeros(n, np.int64), rows["think"], closes["think"]],
            "after": np.zeros(n + m + k, np.int64)}
    seq = np.arange(n + m + k)                 # each side's order at equal times
    order = np.lexsort((seq, cols["event"] != OPEN, cols["connection"], cols["time_ns"]))
    return AppDemand.from_columns(**{name: v[order] for name, v in cols.items()})
