"""What a whole application did on a path, and how far one run of it is from another.

    truth = app_metrics.profile("t.client.magnet", "t.server.magnet")      # magnet path --capture t
    pred = app_metrics.profile("out/client.magnet", "out/server.magnet")   # either engine's replay
    app_metrics.compare(pred, truth)        # {"ks_size": ..., "completion_err_median": ..., ...}

One reader for every source: the two traces of a whole-application run in the form
`magnet path --capture` and both replayers write (each side's socket calls and the data
segments its device sent and received, one sockid per connection and side).  Every
quantity is defined from those records alone, the same way for a real application
and a replay:

* **segments** of a direction: the data segments its receiver's device received
  (DEV_RECV, TCP payload > 0: what arrived after the path), their sizes, and the gaps
  between consecutive ones of the same connection;
* **a connection's completion time**: from its first byte written to its last byte
  read, either side (handshakes and FIN exchanges left out: not every trace records
  them, the ns-3 replay's does not);
* **responses**: per connection, the runs of one side's writes are ADUs; an ADU whose
  first write came after its writer had read the whole previous ADU answers it, and
  its response time runs from the previous ADU's first write to the moment the
  requester had read this ADU's last byte (as adus.csv's response_s);
* **throughput**: bytes received per 100 ms from the run's first write, per direction;
* **retransmitted bytes** of a direction: the data its sender's device sent (DEV_SEND,
  retransmissions included) beyond what its application wrote, per connection;
* **exchange round trips**: per response, from the requester's device sending the
  request's last segment (its last data segment before the answerer had read the whole
  request) to the requester's device receiving the answer's first segment (its first
  after the answer was written), less the answerer's own time (from reading the
  request's last byte to writing the answer; exchanges whose first segment after the
  write cannot be the answer's left out):
  the data's round trip through both stacks and the path, from data records alone
  (the ns-3 replay records no ACK and no TCP state).

Connections are paired across the two traces by their 4-tuple where the records carry
addresses, else by sockid (the replays number a connection alike on both sides), else by
byte counts (magnetlib.connections).  Two runs' connections are matched in order of
their first write.  numpy over whole arrays; loops run per connection.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import connections as cx
from .app_demand import CLIENT, SERVER
from .errors import TraceError
from .format import Event
from .trace import Trace

DIRECTIONS = ("c2s", "s2c")                  # client to server, server to client
BIN_NS = 100_000_000
MIN_SAMPLES = 5                              # a KS distance needs at least this many values each side


@dataclass
class Profile:
    """A whole-application run, reduced to what the metrics compare."""
    source: str
    zero_ns: int                             # the run's first write
    seg_conn: dict                           # direction -> connection of each received data segment
    seg_ns: dict                             # direction -> its arrival, ns from zero_ns
    seg_size: dict                           # direction -> its TCP payload
    sent_conn: dict                          # direction -> connection of each data segment its sender's
    sent_size: dict                          # device sent (retransmissions included), and its payload
    first_write_s: np.ndarray                # per connection (in order of first write), from zero
    last_read_s: np.ndarray
    bytes: np.ndarray                        # (connections, 2): bytes written client->server, server->client
    responses_s: list                        # per connection, its response times in order of request
    round_trips_s: np.ndarray                # every exchange round trip (s)
    adus: int = 0                            # ADUs that follow another of their connection
    answers: int = 0                         # ... whose writer had read all of the one before
    notes: list[str] = field(default_factory=list)

    @property
    def responses(self) -> np.ndarray:
        """Every response time (s)."""
        return np.concatenate(self.responses_s) if self.responses_s else np.zeros(0)

    @property
    def completion_s(self) -> np.ndarray:
        return self.last_read_s - self.first_write_s

    def sizes(self, direction: str) -> np.ndarray:
        return self.seg_size[direction]

    def gaps(self, direction: str) -> np.ndarray:
        """Seconds between consecutive data segments of one connection, every connection's."""
        conn, ns = self.seg_conn[direction], self.seg_ns[direction]
        order = np.lexsort((ns, conn))
        conn, ns = conn[order], ns[order]
        same = conn[1:] == conn[:-1]
        return np.diff(ns)[same] / 1e9

    def tail_gaps(self) -> np.ndarray:
        """Seconds from a full-sized data segment to a shorter one right behind it on the same
        connection and direction (a write's short tail: how long TCP held it)."""
        out = []
        full = max((int(self.seg_size[d].max()) for d in DIRECTIONS if len(self.seg_size[d])), default=0)
        for d in DIRECTIONS:                # full-sized: the largest segment either way (the MSS)
            conn, ns, size = self.seg_conn[d], self.seg_ns[d], self.seg_size[d]
            if len(conn) < 2:
                continue
            order = np.lexsort((ns, conn))
            conn, ns, size = conn[order], ns[order], size[order]
            tail = (conn[1:] == conn[:-1]) & (size[:-1] == full) & (size[1:] < full)
            out.append(np.diff(ns)[tail] / 1e9)
        return np.concatenate(out) if out else np.zeros(0)

    def throughput(self, direction: str, bin_ns: int = BIN_NS) -> np.ndarray:
        """Bytes received per bin from the first write."""
        ns = self.seg_ns[direction]
        if not len(ns):
            return np.zeros(0)
        return np.bincount(np.maximum(ns, 0) // bin_ns, weights=self.seg_size[direction]).astype(np.float64)

    def retrans_bytes(self, direction: str) -> float:
        """Bytes the sender's device sent beyond what its application wrote (NaN when it
        wrote but no data segment it sent was recorded)."""
        col = DIRECTIONS.index(direction)
        written = self.bytes[:, col]
        conn, size = self.sent_conn[direction], self.sent_size[direction]
        if not len(conn):
            return float("nan") if written.sum() else 0.0
        sent = np.bincount(conn, weights=size, minlength=len(written))
        return float(np.maximum(sent - written, 0).sum())

    def summary(self) -> str:
        c = self.completion_s
        return (f"{len(c)} connections, completion median {np.nanmedian(c) if len(c) else float('nan'):.3f} s, "
                f"{len(self.sizes('c2s'))}+{len(self.sizes('s2c'))} data segments, "
                f"{len(self.responses)} responses")


# ---------------------------------------------------------------- reading ---
def profile(client: str, server: str, source: str = "") -> Profile:
    """The profile of one run from its client's and server's traces."""
    traces = [Trace(p) for p in (client, server)]
    try:
        s = cx.load(traces)
        dev = [_device_segments(t, s, k, Event.DEV_RECV) for k, t in enumerate(traces)]
        sent = [_device_segments(t, s, k, Event.DEV_SEND) for k, t in enumerate(traces)]
    finally:
        for t in traces:
            t.close()
    if not len(s):
        raise TraceError(f"{client} and {server}", "no socket calls: not a whole-application run's traces")
    conns, notes = _pair(s)
    return _reduce(s, conns, dev, sent, source or str(client), s.notes + notes)


def _device_segments(trace: Trace, s: cx.Sockets, k: int, event: Event) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(socket index, ns, size) of the data segments trace k's device received (DEV_RECV)
    or sent (DEV_SEND)."""
    pos = trace.select([event])
    size = trace.column_at("size", pos).astype(np.int64)
    pos, size = pos[size > 0], size[size > 0]
    sid, ns = trace.column_at("sockid", pos), trace.ns_at(pos)
    mine = np.flatnonzero(s.trace == k)
    ids = s.sockid[mine]
    if not len(ids):
        return mine, ns[:0], size[:0]
    order = np.argsort(ids)
    at = np.searchsorted(ids[order], sid).clip(0, len(ids) - 1)
    known = ids[order][at] == sid
    return mine[order][at][known], ns[known], size[known]


def _pair(s: cx.Sockets) -> tuple[list[cx.Connection], list[str]]:
    """Connections from the two traces' sockets: by 4-tuple, else by sockid, else by bytes."""
    if any(x is not None for x in s.local):
        return cx.pair(s, two_sided=True)
    client = {int(sid): i for i, sid in enumerate(s.sockid) if s.trace[i] == 0}
    server = {int(sid): i for i, sid in enumerate(s.sockid) if s.trace[i] == 1}
    if not client.keys() & server.keys():
        return cx.pair(s, two_sided=True)
    conns = [cx.Connection(client[k], server[k], CLIENT) for k in sorted(client.keys() & server.keys())]
    alone = len(client.keys() ^ server.keys())
    notes = ["connections paired by sockid (no addresses in the records)"]
    if alone:
        notes.append(f"{alone} sockets with no peer of the same sockid left out")
    return conns, notes


def _reduce(s: cx.Sockets, conns: list[cx.Connection], dev: list, sent: list, source: str,
            notes: list[str]) -> Profile:
    both = [c for c in conns if c.client >= 0 and c.server >= 0]
    if len(both) < len(conns):
        notes.append(f"{len(conns) - len(both)} connections captured on one side only left out")
    ends = np.array([(c.client, c.server) for c in both], np.int64).reshape(-1, 2)
    conn_of = np.full(len(s), -1, np.int64)
    conn_of[ends[:, 0]], conn_of[ends[:, 1]] = np.arange(len(ends)), np.arange(len(ends))
    c = conn_of[s.call_end]
    keep = c >= 0
    c, ns, kind, size = c[keep], s.call_ns[keep], s.call_kind[keep], s.call_size[keep]
    side = (s.trace[s.call_end[keep]] == 1).astype(np.int8)          # 0 client, 1 server
    writes, reads = kind == cx.WRITE, kind == cx.READ
    n = len(ends)
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    first_write, last_read = np.full(n, big), np.full(n, small)
    np.minimum.at(first_write, c[writes], ns[writes])
    np.maximum.at(last_read, c[reads], ns[reads])
    data = (first_write < big) & (last_read > small)
    if not data.any():
        raise TraceError(source, "no connection with data written and read on both sides")
    if not data.all():
        notes.append(f"{int((~data).sum())} connections without data read and written left out")
    nbytes = np.zeros((n, 2), np.int64)
    np.add.at(nbytes, (c[writes], side[writes]), size[writes])
    rank = np.full(n, -1, np.int64)                     # connections numbered by first write
    order = np.flatnonzero(data)[np.argsort(first_write[data], kind="stable")]
    rank[order] = np.arange(len(order))
    zero = int(first_write[data].min())
    seg = {name: {} for name in ("conn", "ns", "size", "sent_conn", "sent_ns", "sent_size")}
    for k, direction in ((1, "c2s"), (0, "s2c")):      # the receiver's device: server's, client's
        for prefix, (end, t, sz) in (("", dev[k]), ("sent_", sent[1 - k])):
            r = rank[conn_of[end]] if len(end) else end
            ok = r >= 0
            seg[prefix + "conn"][direction], seg[prefix + "ns"][direction] = r[ok], t[ok] - zero
            seg[prefix + "size"][direction] = sz[ok]
    by = np.argsort(c, kind="stable")
    cuts = np.searchsorted(c[by], np.arange(1, n))
    parts = [np.split(a[by], cuts) for a in (ns - zero, side, kind, size)]
    found = [_responses(*(part[i] for part in parts)) for i in order]
    trips = _round_trips(seg, [answered for *_, answered in found])
    return Profile(source, zero, seg["conn"], seg["ns"], seg["size"], seg["sent_conn"], seg["sent_size"],
                   (first_write[order] - zero) / 1e9, (last_read[order] - zero) / 1e9, nbytes[order],
                   [times / 1e9 for times, *_ in found], trips / 1e9,
                   sum(k for _, k, *_ in found), sum(a for _, _, a, _ in found), notes)


def _round_trips(seg: dict, answered: list[tuple]) -> np.ndarray:
    """Exchange round trips (ns), per connection (in rank order) from its answers' (answering
    side, when it had read the request, its answer's first write, the bytes it wrote before
    the answer): the requester's device sending the request's last data segment (its last
    before that read) to it receiving the answer's first (its first after that write), less
    the answerer's time between the two.

    Without sequence numbers the answer's first segment cannot always be told from another,
    and such exchanges are left out: one in which the answerer's device sent data between
    the request's last segment and its read (a tail loss probe, a retransmission); and one
    whose requester had by that first segment after the write received no more than the
    answerer wrote before the answer (earlier data, sent before the request and still queued
    on the path, arrives after the write too; counting bytes to the answer's first instead
    would need every byte to arrive once and in order)."""
    out = []
    ways = {SERVER: ("c2s", "s2c"), CLIENT: ("s2c", "c2s")}      # answerer -> (request, answer) direction
    split = {}
    for prefix in ("sent_", ""):
        for d in DIRECTIONS:
            conn, t = seg[prefix + "conn"][d], seg[prefix + "ns"][d]
            order = np.lexsort((t, conn))
            cuts = np.searchsorted(conn[order], np.arange(1, len(answered)))
            split[prefix, d] = np.split(t[order], cuts)
            if not prefix:                              # bytes received, in order of arrival
                split["bytes", d] = [np.cumsum(b) for b in np.split(seg["size"][d][order], cuts)]
    for i, (x, read_at, answer_at, before) in enumerate(answered):
        for who in (CLIENT, SERVER):
            mine = x == who
            if not mine.any():
                continue
            asked, answer = ways[who]
            read, wrote = read_at[mine], answer_at[mine]
            sent, left, got = split["sent_", asked][i], split["sent_", answer][i], split["", answer][i]
            if not len(sent) or not len(got):
                continue
            j = np.searchsorted(sent, read, side="right") - 1
            k = np.searchsorted(got, wrote, side="left")
            earlier = np.searchsorted(split["bytes", answer][i], before[mine], side="right") > k
            ok = (j >= 0) & (k < len(got)) & ~earlier
            out_ns = sent[j.clip(0)]
            # not up to the write: its record may be stamped when the call returns, its segment sent
            crossing = np.searchsorted(left, read, side="right") - np.searchsorted(left, out_ns, side="right")
            ok &= crossing == 0
            out.append((got[k[ok]] - out_ns[ok]) - (wrote[ok] - read[ok]))
    return np.concatenate(out).astype(np.float64) if out else np.zeros(0)


def _responses(ns: np.ndarray, side: np.ndarray, kind: np.ndarray, size: np.ndarray) -> tuple:
    """Response times (ns) of one connection's ADUs that answer the previous one; how many
    ADUs follow another, and how many of those answer it; and per answer (its writer, when
    that side had read the request's last byte, the answer's first write, the bytes that
    side wrote before it)."""
    order = np.argsort(ns, kind="stable")
    ns, side, kind, size = ns[order], side[order], kind[order], size[order]
    w = kind == cx.WRITE
    wns, wside, wsize = ns[w], side[w], size[w]
    none = (np.zeros(0, np.int8), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    if len(wns) < 2:
        return np.zeros(0, np.int64), 0, 0, none
    start = np.flatnonzero(np.r_[True, wside[1:] != wside[:-1]])
    run_side, run_first = wside[start], wns[start]
    run_end = np.r_[start[1:], len(wns)] - 1
    sent = [np.cumsum(np.where(wside == x, wsize, 0)) for x in (CLIENT, SERVER)]
    reads = [(ns[(~w) & (side == x)], np.cumsum(size[(~w) & (side == x)])) for x in (CLIENT, SERVER)]
    out, asked_at, answering, answered = [], [], 0, []
    for x in (CLIENT, SERVER):                          # answers written by side x
        j = np.flatnonzero(run_side == x)
        j = j[j > 0]
        if not len(j):
            continue
        y = 1 - x
        asked = sent[y][run_end[j - 1]]                 # the peer's bytes through the request ADU
        read_t, read_cum = reads[x]
        had = np.r_[0, read_cum][np.searchsorted(read_t, run_first[j], side="right")]
        answers = j[had >= asked]
        answering += len(answers)
        read_done = read_t[np.searchsorted(read_cum, asked[had >= asked], side="left")]
        wrote_before = sent[x][start[answers]] - wsize[start[answers]]
        answered.append((np.full(len(answers), x, np.int8), read_done, run_first[answers], wrote_before))
        total = sent[x][run_end[answers]]               # this side's bytes through its answer
        back_t, back_cum = reads[y]
        at = np.searchsorted(back_cum, total, side="left")
        got = at < len(back_t)
        out.append(back_t[at[got]] - run_first[answers[got] - 1])
        asked_at.append(run_first[answers[got] - 1])
    answered = tuple(np.concatenate(a) for a in zip(*answered)) if answered else none
    if not out:
        return np.zeros(0, np.int64), len(start) - 1, answering, answered
    times = np.concatenate(out)
    return times[np.argsort(np.concatenate(asked_at), kind="stable")], len(start) - 1, answering, answered


# --------------------------------------------------------------- metrics ---
def ks(a: np.ndarray, b: np.ndarray, least: int = MIN_SAMPLES) -> float:
    """Two-sample Kolmogorov-Smirnov distance; NaN when either sample has fewer than
    `least` values (one response against one other is 0 or 1, which says nothing)."""
    if min(len(a), len(b)) < max(least, 1):
        return float("nan")
    a, b = np.sort(a), np.sort(b)
    x = np.r_[a, b]
    return float(np.abs(np.searchsorted(a, x, "right") / len(a) - np.searchsorted(b, x, "right") / len(b)).max())


def ks_within(a: np.ndarray, b: np.ndarray, tolerance: float, least: int = MIN_SAMPLES) -> float:
    """The KS distance when values within `tolerance` (relative) of each other count as equal:
    the least D with Fa(x) <= Fb(x (1 + tolerance)) + D and Fb(x) <= Fa(x (1 + tolerance)) + D
    (the Levy distance's idea on a log scale).  Non-negative values; NaN as for ks()."""
    if min(len(a), len(b)) < max(least, 1):
        return float("nan")
    a, b = np.sort(a), np.sort(b)
    x = np.r_[a, b]

    def cdf(v, at):
        return np.searchsorted(v, at, "right") / len(v)
    return float(max(0.0, (cdf(a, x) - cdf(b, x * (1 + tolerance))).max(),
                     (cdf(b, x) - cdf(a, x * (1 + tolerance))).max()))


def _weighted(values: list[float], weights: list[int]) -> float:
    v, w = np.array(values, float), np.array(weights, float)
    ok = ~np.isnan(v) & (w > 0)
    return float((v[ok] * w[ok]).sum() / w[ok].sum()) if ok.any() else float("nan")


def compare(pred: Profile, truth: Profile) -> dict:
    """How far `pred` is from `truth`: the fidelity study's columns (docs: fidelity.csv).

    ks_size, ks_gap: per direction, weighted by the truth's segments in it;
    completion_err_median/p90: of |pred - truth| / truth over connections matched in
    order of first write; response_ks and response_err_median (|median pred - median
    truth| / median truth); throughput_err: sum over bins and directions of |pred -
    truth| over the truth's bytes; bytes_diff: sum of |bytes pred - bytes truth| over
    matched connections and both directions, plus every byte of unmatched ones."""
    out: dict = {}
    weights = [len(truth.sizes(d)) for d in DIRECTIONS]
    for name, get in (("size", "sizes"), ("gap", "gaps")):
        values = []
        for d in DIRECTIONS:
            values.append(ks(getattr(pred, get)(d), getattr(truth, get)(d)))
            out[f"ks_{name}_{d}"] = values[-1]
        out[f"ks_{name}"] = _weighted(values, weights)
    out["ks_gap_2pct"] = _weighted([ks_within(pred.gaps(d), truth.gaps(d), 0.02) for d in DIRECTIONS], weights)
    n = min(len(pred.completion_s), len(truth.completion_s))
    err = np.abs(pred.completion_s[:n] - truth.completion_s[:n]) / truth.completion_s[:n]
    out["completion_err_median"] = float(np.median(err)) if n else float("nan")
    out["completion_err_p90"] = float(np.quantile(err, 0.9)) if n else float("nan")
    out["completion_s"] = float(np.median(pred.completion_s)) if len(pred.completion_s) else float("nan")
    out["response_ks"] = ks(pred.responses, truth.responses)
    pairs = [(p[:k], t[:k]) for p, t in zip(pred.responses_s, truth.responses_s) if (k := min(len(p), len(t)))]
    err = np.concatenate([np.abs(p - t) / t for p, t in pairs]) if pairs else np.zeros(0)
    out["response_err_median"] = float(np.median(err)) if len(err) else float("nan")
    out["response_s"] = float(np.median(pred.responses)) if len(pred.responses) else float("nan")
    out["throughput_err"] = _series_error(pred, truth)
    out["start_lag_s"] = float(np.median(pred.first_write_s[:n] - truth.first_write_s[:n])) if n else float("nan")
    out["span_ratio"] = _span(pred) / _span(truth) if _span(truth) > 0 else float("nan")
    out["answering"] = pred.answers / pred.adus if pred.adus else float("nan")
    tails = pred.tail_gaps()
    out["tail_gap_s"] = float(np.median(tails)) if len(tails) else float("nan")
    out["connections"] = len(pred.completion_s)
    out["connections_truth"] = len(truth.completion_s)
    out["bytes_diff"] = int(np.abs(pred.bytes[:n] - truth.bytes[:n]).sum()
                            + pred.bytes[n:].sum() + truth.bytes[n:].sum())
    return out


def _span(p: Profile) -> float:
    """Seconds from the run's first write to its last read."""
    return float(p.last_read_s.max()) if len(p.last_read_s) else 0.0


def totals(p: Profile) -> dict:
    """One run's whole-application figures, both directions together: mean data-segment
    size (B) and gap (s), throughput (bits of data segments received per second of the
    run's span), the median exchange round trip (ms), the median connection's
    completion (s), retransmitted bytes; NaN where a run has none to measure."""
    def mean(parts):
        a = np.concatenate(parts)
        return float(a.mean()) if len(a) else float("nan")
    received = sum(float(p.sizes(d).sum()) for d in DIRECTIONS)
    span = _span(p)
    return {"size": mean([p.sizes(d) for d in DIRECTIONS]), "gap": mean([p.gaps(d) for d in DIRECTIONS]),
            "throughput": 8 * received / span if span > 0 else float("nan"),
            "RTT": float(np.median(p.round_trips_s)) * 1e3 if len(p.round_trips_s) else float("nan"),
            "completion": float(np.median(p.completion_s)) if len(p.completion_s) else float("nan"),
            "retrans": sum(p.retrans_bytes(d) for d in DIRECTIONS),
            "connections": len(p.completion_s), "round_trips": len(p.round_trips_s)}


def _series_error(pred: Profile, truth: Profile) -> float:
    diff = total = 0.0
    for d in DIRECTIONS:
        p, t = pred.throughput(d), truth.throughput(d)
        m = max(len(p), len(t))
        p, t = np.pad(p, (0, m - len(p))), np.pad(t, (0, m - len(t)))
        diff += np.abs(p - t).sum()
        total += t.sum()
    return diff / total if total else float("nan")
