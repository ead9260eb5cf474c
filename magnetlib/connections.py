"""Every connection of an application, from its capture: the whole-application demand.

    d = connections.build(["T.magnet"])                              # one trace (a host or one side)
    d = connections.build(["T.client.magnet", "T.server.magnet"])   # both sides (magnet path --capture)
    app_demand.write(d, "D.csv")

A connection is a socket (its cookie) seen in a trace.  From two traces, the
two sockets of one connection are paired by their 4-tuple (extended records,
`--ext`), else by their byte counts in order of appearance.  One trace that
holds both ends of a connection (a host capture of a local client and
server) is paired the same way.  The side that opened a connection is the one
that sent the SYN (extended device records); without them, the client's (two
traces) or the first writer's (both ends in one trace), or the traced end's.

Each side's rows come from its own calls: its writes are sends, and what it
had read before a send is the send's wait_bytes.  Where only one end was
captured, the peer is taken to have written what the traced end read, when it
read it, and to have read each write as it was made (its think times then
include the original path's round trip).  Closes are the FIN or RST each end
sent (or, for an untraced peer, the one the traced end received); without
device records there are no close rows (the replay then closes each side
after its last send, once it has read everything).

Every step is numpy over all calls at once; loops run per socket or connection.
docs/app-demand.md explains the choices.
"""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .app_demand import CLIENT, CLOSE, OPEN, RESET, SEND, SERVER, AppDemand
from .errors import TraceError
from .format import Event, ExtValid
from .trace import Trace

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
READ, WRITE, CLOSE_KIND, RESET_KIND = 0, 1, 2, 3     # kinds of a side's rows, in order at a tie
NONE = -1
AFTER_WITHIN_NS = 1_000_000_000     # default: a connection opened this soon after the last byte of another


# ------------------------------------------------------------- the sockets ---
@dataclass
class Sockets:
    """Per socket of the input traces (an "end" of a connection), and its data calls."""
    trace: np.ndarray          # which input it came from (0, or 0 client / 1 server)
    sockid: np.ndarray
    first_ns: np.ndarray       # its first record (the SYN when the device layer was captured)
    pid: np.ndarray            # the process of its first call (-1: unknown)
    syn: np.ndarray            # it sent a SYN without ACK: it opened the connection
    synack: np.ndarray         # it sent a SYN-ACK: it accepted
    fin_sent: np.ndarray       # ns of the first FIN / RST it sent, or NONE
    rst_sent: np.ndarray
    fin_recv: np.ndarray       # ... it received
    rst_recv: np.ndarray
    local: list                # bytes key of (address, port), or None
    remote: list
    # its data calls
    call_end: np.ndarray
    call_ns: np.ndarray
    call_kind: np.ndarray      # READ or WRITE
    call_size: np.ndarray
    flags_known: list = field(default_factory=list)   # per input: device records with TCP flags
    notes: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sockid)

    def bytes(self, kind: int) -> np.ndarray:
        mine = self.call_kind == kind
        return np.bincount(self.call_end[mine], weights=self.call_size[mine], minlength=len(self)).astype(np.int64)


def load(traces: list[Trace]) -> Sockets:
    """The sockets and data calls of each trace, joined (socket index = position)."""
    parts = [_load_one(trace, k) for k, trace in enumerate(traces)]
    offsets = np.cumsum([0] + [len(p["sockid"]) for p in parts])
    cat = {name: np.concatenate([p[name] for p in parts]) for name in parts[0] if name not in
           ("local", "remote", "call_end", "notes", "flags_known")}
    return Sockets(**cat, local=[x for p in parts for x in p["local"]],
                   remote=[x for p in parts for x in p["remote"]],
                   call_end=np.concatenate([p["call_end"] + off for p, off in zip(parts, offsets)]),
                   flags_known=[p["flags_known"] for p in parts], notes=[n for p in parts for n in p["notes"]])


def _load_one(trace: Trace, index: int) -> dict:
    trace.check()
    pos = trace.select([Event.SOCK_SEND, Event.SOCK_RECV])
    sid, ev = trace.column_at("sockid", pos), trace.column_at("event", pos)
    ns, size = trace.ns_at(pos), trace.column_at("size", pos).astype(np.int64)
    notes = []
    if trace.scan.lost:
        notes.append(f"{trace.path}: the capture lost {trace.scan.lost} records; connections may lack calls")
    failed = int(np.count_nonzero(size < 0))
    if failed:
        notes.append(f"{trace.path}: {failed} calls that failed (an error, e.g. EAGAIN) left out")
    peek = _peeks(trace, pos, sid, ev, ns, size)
    if peek.any():
        notes.append(f"{trace.path}: {int(peek.sum())} reads that took no data (MSG_PEEK: copied_seq did not "
                     "move) left out")
        size = np.where(peek, 0, size)
    flag_pos = _flagged_device_records(trace)
    flags_known = flag_pos is not None
    if flag_pos is None:
        flag_pos = np.zeros(0, np.int64)
    fsid, fev = trace.column_at("sockid", flag_pos), trace.column_at("event", flag_pos)
    fns = trace.ns_at(flag_pos)
    flags = trace.column_at("tcp_flags", flag_pos) if flags_known else np.zeros(0, np.uint8)
    opening = (fev == Event.DEV_SEND) & ((flags & SYN) != 0)
    ids = np.unique(np.r_[sid[sid != 0], fsid[opening & (fsid != 0)]])
    n = len(ids)
    at = np.searchsorted(ids, sid)
    fat = np.searchsorted(ids, fsid).clip(0, max(n - 1, 0))
    known = (fat < n) & (ids[fat] == fsid) if n else np.zeros(len(fsid), bool)
    out = {"trace": np.full(n, index, np.int64), "sockid": ids,
           "first_ns": _first(n, np.r_[at, fat[known]], np.r_[ns, fns[known]]),
           "pid": _pids(trace, pos, at, n), "notes": notes, "flags_known": flags_known}
    sent_dev = known & (fev == Event.DEV_SEND)
    got_dev = known & (fev == Event.DEV_RECV)
    out["syn"] = np.bincount(fat[sent_dev & ((flags & (SYN | ACK)) == SYN)], minlength=n) > 0
    out["synack"] = np.bincount(fat[sent_dev & ((flags & (SYN | ACK)) == SYN | ACK)], minlength=n) > 0
    for name, where, bit in (("fin_sent", sent_dev, FIN), ("rst_sent", sent_dev, RST),
                             ("fin_recv", got_dev, FIN), ("rst_recv", got_dev, RST)):
        hit = where & ((flags & bit) != 0)
        out[name] = _first(n, fat[hit], fns[hit], missing=NONE)
    out["local"], out["remote"] = _addresses(trace, np.r_[pos, flag_pos], np.r_[at, fat], n,
                                             np.r_[ev, fev], np.r_[np.ones(len(pos), bool), known])
    data = size > 0
    out["call_end"], out["call_ns"], out["call_size"] = at[data], ns[data], size[data]
    out["call_kind"] = np.where(ev[data] == Event.SOCK_SEND, WRITE, READ).astype(np.int8)
    return out


def _peeks(trace: Trace, pos, sid, ev, ns, size) -> np.ndarray:
    """Reads that left the data in the socket (MSG_PEEK, as vsftpd reads its commands before
    reading them again): the socket's copied_seq, where the records carry its TCP state,
    did not move since its previous call.  Counted as reads, they would make the demand
    wait for twice the bytes its peer sent."""
    state = ExtValid.TCP_STATE | ExtValid.TCP_INFO
    if not trace.has_ext or not len(pos):
        return np.zeros(len(pos), bool)
    has = (trace.column_at("valid", pos) & state) != 0
    copied = trace.column_at("copied_seq", pos)
    order = np.lexsort((ns, sid))
    s, h, c = sid[order], has[order], copied[order]
    still = (s[1:] == s[:-1]) & h[1:] & h[:-1] & (c[1:] == c[:-1])
    out = np.zeros(len(pos), bool)
    out[order[1:]] = still & (ev[order][1:] == Event.SOCK_RECV) & (size[order][1:] > 0)
    return out


def _flagged_device_records(trace: Trace) -> np.ndarray | None:
    """Positions of device records carrying SYN, FIN or RST; None when the trace has no
    device records with TCP flags (a preload capture, or no --ext)."""
    if not trace.has_ext:
        return None
    pos = trace.select([Event.DEV_SEND, Event.DEV_RECV])
    if not len(pos):
        return None
    seg = (trace.column_at("valid", pos) & ExtValid.SEGMENT) != 0
    if not seg.any():
        return None
    flags = trace.column_at("tcp_flags", pos)
    return pos[seg & ((flags & (SYN | FIN | RST)) != 0)]


def _first(n: int, at: np.ndarray, ns: np.ndarray, missing: int | None = None) -> np.ndarray:
    """Per socket, the earliest of its times (missing where it has none)."""
    big = np.iinfo(np.int64).max
    first = np.full(n, big, np.int64)
    np.minimum.at(first, at, ns)
    if missing is not None:
        first[first == big] = missing
    return first


def _pids(trace: Trace, pos: np.ndarray, at: np.ndarray, n: int) -> np.ndarray:
    pid = np.full(n, NONE, np.int64)
    if not trace.has_ext or not len(pos):
        return pid
    task = (trace.column_at("valid", pos) & ExtValid.TASK) != 0
    values = trace.column_at("pid", pos).astype(np.int64)
    keep = task & (values > 0)
    pid[at[keep][::-1]] = values[keep][::-1]            # the first call's process wins
    return pid


def _addresses(trace: Trace, pos: np.ndarray, at: np.ndarray, n: int, ev: np.ndarray,
               keep: np.ndarray) -> tuple[list, list]:
    """Per socket, (local, remote) as bytes keys from its first record with both ports,
    or None without addresses.  Receive-path records carry the peer's as source."""
    local, remote = [None] * n, [None] * n
    if not trace.has_ext or not len(pos):
        return local, remote
    valid = trace.column_at("valid", pos)
    sport, dport = trace.column_at("sport", pos), trace.column_at("dport", pos)
    usable = keep & ((valid & ExtValid.ADDR) != 0) & (sport != 0) & (dport != 0)
    idx = np.flatnonzero(usable)
    idx = idx[np.unique(at[idx], return_index=True)[1]]
    saddr, daddr = trace.column_at("saddr", pos[idx]), trace.column_at("daddr", pos[idx])
    recv = np.isin(ev[idx], [Event.SOCK_RECV, Event.DEV_RECV, Event.IP_RECV, Event.TCP_RECV])
    for j, i in enumerate(idx):
        src = saddr[j].tobytes() + int(sport[i]).to_bytes(2, "big")
        dst = daddr[j].tobytes() + int(dport[i]).to_bytes(2, "big")
        local[at[i]], remote[at[i]] = (dst, src) if recv[j] else (src, dst)
    return local, remote


# ------------------------------------------------------------- connections ---
@dataclass
class Connection:
    """One connection: its ends (socket indices, NONE where not traced) per side, who opened it."""
    client: int
    server: int
    opener: int                # CLIENT or SERVER


def pair(s: Sockets, two_sided: bool) -> tuple[list[Connection], list[str]]:
    """The connections of the sockets: two ends joined where both were captured."""
    notes = []
    every = list(range(len(s)))
    if two_sided:
        matched = _match(s, [i for i in every if s.trace[i] == 0], [i for i in every if s.trace[i] == 1], notes)
    else:
        matched = _match(s, every, every, notes)
    conns, used = [], set()
    for a, b in matched:
        used.update((a, b))
        client, server = (a, b) if two_sided else _by_opening(s, a, b)
        opener = SERVER if two_sided and (s.syn[server] or s.synack[client]) else CLIENT
        conns.append(Connection(client, server, opener))
    alone = [i for i in every if i not in used]
    for i in alone:
        if two_sided:                    # its side is its trace's; it opened unless it accepted
            side = CLIENT if s.trace[i] == 0 else SERVER
            opener = side if s.syn[i] or not (s.synack[i] or side == SERVER) else 1 - side
        else:                            # the traced end is the client unless it accepted
            side, opener = (SERVER if s.synack[i] else CLIENT), CLIENT
        conns.append(Connection(i if side == CLIENT else NONE, i if side == SERVER else NONE, opener))
    if two_sided and alone:
        notes.append(f"{len(alone)} connections captured on one side only: their peer is inferred "
                     "from the traced end's calls")
    return conns, notes


def _match(s: Sockets, left: list[int], right: list[int], notes: list[str]) -> list[tuple[int, int]]:
    """Pairs (a in left, b in right) of one connection's two ends: by 4-tuple where both have
    addresses (the k-th use of a 4-tuple on one side with the k-th on the other), else by
    mirrored byte counts, in order of first record."""
    pairs, taken = [], set()
    by_tuple: dict = {}
    for b in sorted(right, key=lambda i: s.first_ns[i]):
        if s.local[b] is not None:
            by_tuple.setdefault((s.local[b], s.remote[b]), []).append(b)
    for a in sorted(left, key=lambda i: s.first_ns[i]):
        if a in taken or s.local[a] is None:
            continue
        for b in by_tuple.get((s.remote[a], s.local[a]), []):
            if b not in taken and b != a:
                pairs.append((a, b))
                taken.update((a, b))
                break
    rest_left = [a for a in left if a not in taken and s.local[a] is None]
    rest_right = [b for b in right if b not in taken and s.local[b] is None]
    if rest_left and rest_right:
        found = _match_by_bytes(s, rest_left, rest_right, taken)
        if found:
            notes.append(f"{len(found)} connections paired by their byte counts (no addresses in the "
                         "records: capture with --ext and the BPF capture to pair by 4-tuple)")
        pairs += found
    return pairs


def _match_by_bytes(s: Sockets, left: list[int], right: list[int], taken: set) -> list[tuple[int, int]]:
    """Ends with mirrored byte counts (one's written the other's read, both ways) whose
    calls overlap in time, in order of first record; a dictionary by counts, not a search."""
    sent, got = s.bytes(WRITE), s.bytes(READ)
    last = np.full(len(s), np.iinfo(np.int64).min)
    np.maximum.at(last, s.call_end, s.call_ns)
    waiting: dict = {}
    for b in sorted(right, key=lambda i: s.first_ns[i]):
        waiting.setdefault((int(sent[b]), int(got[b])), deque()).append(b)
    pairs = []
    for a in sorted(left, key=lambda i: s.first_ns[i]):
        if a in taken or sent[a] + got[a] == 0:
            continue
        bucket = waiting.get((int(got[a]), int(sent[a])), deque())
        while bucket and bucket[0] in taken:          # taken ones leave from the front
            bucket.popleft()
        for b in bucket:
            if b not in taken and b != a and s.first_ns[a] <= last[b] and s.first_ns[b] <= last[a]:
                pairs.append((a, b))
                taken.update((a, b))
                break
    return pairs


def _by_opening(s: Sockets, a: int, b: int) -> tuple[int, int]:
    """Both ends in one trace: (client, server) = (the end that opened, the other)."""
    if s.syn[b] or s.synack[a]:
        return b, a
    if s.syn[a] or s.synack[b]:
        return a, b
    return (a, b) if _first_write(s, a) <= _first_write(s, b) else (b, a)


def _first_write(s: Sockets, i: int) -> int:
    mine = (s.call_end == i) & (s.call_kind == WRITE)
    return int(s.call_ns[mine].min()) if mine.any() else np.iinfo(np.int64).max


# ------------------------------------------------------------------ build ---
def build(paths: list[str], after_within_ns: int = AFTER_WITHIN_NS) -> AppDemand:
    """The whole-application demand of one trace, or of a client's and a server's trace."""
    if len(paths) not in (1, 2):
        raise TraceError(" ".join(map(str, paths)), "give one trace, or a client's and a server's")
    traces = [Trace(p) for p in paths]
    try:
        return of_traces(traces, " and ".join(map(str, paths)), after_within_ns)
    finally:
        for t in traces:
            t.close()


def of_traces(traces: list, where: str, after_within_ns: int = AFTER_WITHIN_NS) -> AppDemand:
    """build() of open traces (a client's and a server's, or one), `where` naming them in errors.
    Anything with the part of Trace's interface that load() reads will do (a library's
    stored records: magnetlib.library.stored)."""
    s = load(traces)
    if not len(s):
        raise TraceError(where, "no connection: no socket calls (SOCK_SEND/SOCK_RECV) and no SYN "
                                "(capture the socket layer)")
    conns, notes = pair(s, len(traces) == 2)
    demand = assemble(s, conns, after_within_ns)
    demand.notes = s.notes + notes + demand.notes
    if not all(s.flags_known):
        demand.notes.append("no device records with TCP flags (a preload capture, or no --ext): opens are "
                            "each connection's first call, and there are no close rows")
    return demand


def assemble(s: Sockets, conns: list[Connection], after_within_ns: int) -> AppDemand:
    """The table from the connections' ends and calls."""
    n = len(conns)
    client = np.array([c.client for c in conns], np.int64)
    server = np.array([c.server for c in conns], np.int64)
    opener = np.array([c.opener for c in conns], np.int8)
    open_ns = np.minimum(np.where(client >= 0, s.first_ns[client], np.iinfo(np.int64).max),
                         np.where(server >= 0, s.first_ns[server], np.iinfo(np.int64).max))
    order = np.argsort(open_ns, kind="stable")             # connections numbered in order of opening
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    conn_of_end, side_of_end = np.full(len(s), NONE, np.int64), np.full(len(s), NONE, np.int8)
    for side, ends in ((CLIENT, client), (SERVER, server)):
        has = ends >= 0
        conn_of_end[ends[has]] = rank[has]
        side_of_end[ends[has]] = side
    alone = np.zeros(len(s), bool)
    alone[client[(client >= 0) & (server < 0)]] = True
    alone[server[(server >= 0) & (client < 0)]] = True
    open_ns, opener = open_ns[order], opener[order]
    rows = _actor_rows(s, conn_of_end, side_of_end, alone)
    rows = _with_closes(s, rows, conn_of_end, side_of_end, alone)
    notes: list[str] = []
    table = _waits_and_thinks(rows, open_ns, notes)
    after, after_think = _dependencies(table, open_ns, opener, _side_pids(s, conns, order), after_within_ns)
    return _table(table, open_ns, opener, after, after_think, notes)


def _actor_rows(s: Sockets, conn_of_end, side_of_end, alone) -> dict:
    """Reads and writes per (connection, side): each end's own calls, and for an end whose
    peer was not captured, the peer's mirrored (its reads written, its writes read)."""
    e, kind = s.call_end, s.call_kind
    mirror = alone[e]
    conn = np.r_[conn_of_end[e], conn_of_end[e][mirror]]
    side = np.r_[side_of_end[e], 1 - side_of_end[e][mirror]]
    return {"conn": conn, "side": side.astype(np.int8), "ns": np.r_[s.call_ns, s.call_ns[mirror]],
            "size": np.r_[s.call_size, s.call_size[mirror]],
            "kind": np.r_[kind, 1 - kind[mirror]].astype(np.int8)}


def _with_closes(s: Sockets, rows: dict, conn_of_end, side_of_end, alone) -> dict:
    """Close/reset rows: the FIN or RST each end sent first; for an untraced peer, the one its
    traced end received.  Kinds: READ 0, WRITE 1, CLOSE 2, RESET 3 (in that order at a tie)."""
    ends = np.flatnonzero(conn_of_end >= 0)
    conn, side, ns, kind = [], [], [], []
    for mine, fin, rst, ids in ((True, s.fin_sent, s.rst_sent, ends), (False, s.fin_recv, s.rst_recv, ends[alone[ends]])):
        f, r = fin[ids], rst[ids]
        has = (f != NONE) | (r != NONE)
        f = np.where(f == NONE, np.iinfo(np.int64).max, f)
        r = np.where(r == NONE, np.iinfo(np.int64).max, r)
        ids, f, r = ids[has], f[has], r[has]
        conn.append(conn_of_end[ids])
        side.append(side_of_end[ids] if mine else 1 - side_of_end[ids])
        ns.append(np.minimum(f, r))
        kind.append(np.where(r < f, RESET_KIND, CLOSE_KIND))
    out = {"conn": np.r_[rows["conn"], *conn], "side": np.r_[rows["side"], *side].astype(np.int8),
           "ns": np.r_[rows["ns"], *ns], "size": np.r_[rows["size"], np.zeros(sum(map(len, ns)), np.int64)],
           "kind": np.r_[rows["kind"], *kind].astype(np.int8)}
    return out


def _waits_and_thinks(rows: dict, open_ns: np.ndarray, notes: list[str]) -> dict:
    """Per row of each (connection, side) in time order: the peer's bytes read so far
    (wait_bytes) and the time from the later of (the read that completed them, this side's
    previous event, the open) to the row (think_ns)."""
    group = rows["conn"] * 2 + rows["side"]
    closing = rows["kind"] >= CLOSE_KIND
    # a close can be no earlier than its side's last write (a FIN leaves after the data)
    last_write = np.full(2 * len(open_ns), np.iinfo(np.int64).min)
    writes = rows["kind"] == WRITE
    np.maximum.at(last_write, group[writes], rows["ns"][writes])
    ns = np.where(closing, np.maximum(rows["ns"], last_write[group]), rows["ns"])
    ns = np.maximum(ns, open_ns[rows["conn"]])
    order = np.lexsort((rows["kind"], ns, group))
    g, ns = group[order], ns[order]
    kind, size = rows["kind"][order], rows["size"][order]
    n = len(g)
    start = np.r_[0, np.flatnonzero(np.diff(g)) + 1] if n else np.zeros(0, np.int64)
    begin = np.repeat(start, np.diff(np.r_[start, n]))
    is_read = kind == READ
    read_bytes = np.cumsum(np.where(is_read, size, 0))
    wait = read_bytes - np.r_[0, read_bytes][begin]
    idx = np.arange(n)
    last_read = np.maximum.accumulate(np.where(is_read, idx, -1)) if n else idx
    has_read = last_read >= begin
    acts = np.maximum.accumulate(np.where(~is_read, idx, -1)) if n else idx
    prev = np.r_[-1, acts[:-1]] if n else idx
    has_prev = prev >= begin
    conn = g // 2
    ref = open_ns[conn]
    ref = np.where(has_read & (wait > 0), np.maximum(ref, ns[np.maximum(last_read, 0)]), ref)
    ref = np.where(has_prev, np.maximum(ref, ns[np.maximum(prev, 0)]), ref)
    keep = ~is_read
    # what the peer sends, per (connection, side): a side cannot have waited for more
    peer_sent = np.bincount(g ^ 1, weights=np.where(kind == WRITE, size, 0), minlength=2 * len(open_ns))
    peer_sent = peer_sent.astype(np.int64)[g]
    over = keep & (wait > peer_sent)
    if over.any():
        notes.append(f"{int(over.sum())} rows waited for more bytes than the peer's calls show (calls the "
                     "capture lost): their wait_bytes are cut to what the peer sends")
    return {"conn": conn[keep], "side": (g % 2)[keep].astype(np.int8), "ns": ns[keep],
            "size": size[keep], "kind": kind[keep], "wait": np.minimum(wait, peer_sent)[keep],
            "think": (ns - ref)[keep], "reads": {"conn": conn[is_read], "side": (g % 2)[is_read],
                                                 "ns": ns[is_read], "size": size[is_read]}}


def _side_pids(s: Sockets, conns: list[Connection], order: np.ndarray) -> np.ndarray:
    """Per connection (in number order) and side, the process of that end (NONE: unknown)."""
    pid = np.full((len(conns), 2), NONE, np.int64)
    for k, c in enumerate(conns):
        for side, end in ((CLIENT, c.client), (SERVER, c.server)):
            if end >= 0:
                pid[k, side] = s.pid[end]
    return pid[order]


def _dependencies(rows: dict, open_ns: np.ndarray, opener: np.ndarray, pids: np.ndarray,
                  within_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Per connection, `after` (0 or K, numbered from 1) and its think time: the earlier
    connection whose last byte the opening side (the same process, where known) read most
    recently before this open, at most within_ns before it, and which that side had closed
    by then (where closes are known)."""
    n = len(open_ns)
    after, think = np.zeros(n, np.int64), np.zeros(n, np.int64)
    if within_ns <= 0 or n < 2:
        return after, think
    reads, never = rows["reads"], np.iinfo(np.int64).min
    done = np.full((n, 2), never)
    np.maximum.at(done, (reads["conn"], reads["side"]), reads["ns"])
    # where closes are known, a connection is finished only once the opening side closed it
    closes = rows["kind"] >= CLOSE_KIND
    closed = np.full((n, 2), np.iinfo(np.int64).max if closes.any() else never)
    np.minimum.at(closed, (rows["conn"][closes], rows["side"][closes]), rows["ns"][closes])
    for side in (CLIENT, SERVER):
        known = np.flatnonzero(done[:, side] > np.iinfo(np.int64).min)
        known = known[np.argsort(done[known, side], kind="stable")]
        times = done[known, side]
        for c in np.flatnonzero(opener == side):
            lo, hi = np.searchsorted(times, [open_ns[c] - within_ns, open_ns[c]], side="right")
            cand = known[max(lo - 1, 0) if lo and times[lo - 1] == open_ns[c] - within_ns else lo:hi]
            cand = cand[(cand < c) & (closed[cand, side] <= open_ns[c])]
            pid = pids[c, side]
            if pid != NONE:
                cand = cand[pids[cand, side] == pid]
            if len(cand):
                k = int(cand[np.argmax(done[cand, side])])
                after[c], think[c] = k + 1, open_ns[c] - done[k, side]
    return after, think


def _table(rows: dict, open_ns: np.ndarray, opener: np.ndarray, after: np.ndarray,
           after_think: np.ndarray, notes: list[str]) -> AppDemand:
    n = len(open_ns)
    zero = int(open_ns.min())
    event = np.array([NONE, SEND, CLOSE, RESET], np.int8)[rows["kind"]]
    sends = event == SEND
    conn = np.r_[np.arange(n), rows["conn"]]
    ev = np.r_[np.full(n, OPEN, np.int8), event]
    time_ns = np.r_[open_ns, rows["ns"]] - zero
    seq = np.arange(len(conn))                      # keeps each side's order at equal times
    order = np.lexsort((seq, ev != OPEN, conn, time_ns))
    adu = np.full(len(rows["conn"]), -1, np.int64)
    adu[sends] = _adu_numbers(rows["conn"][sends], rows["side"][sends], rows["ns"][sends])
    cols = {"connection": conn + 1, "event": ev, "side": np.r_[opener, rows["side"]],
            "time_ns": time_ns, "size": np.r_[np.zeros(n, np.int64), rows["size"]],
            "adu": np.r_[np.full(n, -1, np.int64), adu],
            "wait_bytes": np.r_[np.zeros(n, np.int64), rows["wait"]],
            "think_ns": np.r_[after_think, rows["think"]],
            "after": np.r_[after, np.zeros(len(rows["conn"]), np.int64)]}
    d = AppDemand.from_columns(**{k: v[order] for k, v in cols.items()})
    d.notes = notes
    return d


def _adu_numbers(conn: np.ndarray, side: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """Per send: its ADU, a run of sends by one side within the connection (0-based, in time order)."""
    order = np.lexsort((ns, conn))
    c, sd = conn[order], side[order]
    first = np.r_[True, c[1:] != c[:-1]] if len(c) else np.zeros(0, bool)
    new = first | np.r_[True, sd[1:] != sd[:-1]] if len(c) else first
    run = np.cumsum(new) - 1
    base = np.maximum.accumulate(np.where(first, run, 0)) if len(c) else run
    out = np.empty(len(c), np.int64)
    out[order] = run - base
    return out


def pair_paths(path: str) -> list[str] | None:
    """PREFIX -> [PREFIX.client.magnet, PREFIX.server.magnet] when those exist and PREFIX does not."""
    if os.path.exists(path):
        return None
    both = [f"{path}.client.magnet", f"{path}.server.magnet"]
    return both if all(os.path.exists(p) for p in both) else None
