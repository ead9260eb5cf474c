"""Flows: packets grouped by 5-tuple, both directions together, all at once with numpy.

A flow's side A is its initiator (the sender of its first SYN without ACK, else
of its first packet); `direction` is 0 for packets from A, 1 for packets to it.
One 5-tuple is one flow for the whole capture: a connection that reuses the
ports of an earlier one joins it.  Malformed packets and fragments are left out.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .capture import Capture
from .columns import IPPROTO_TCP, IPPROTO_UDP, TCP_ACK, TCP_SYN


@dataclass
class Flows:
    index: np.ndarray       # positions in the capture of the flow packets, in capture order
    flow: np.ndarray        # flow id (0..n-1, by first appearance) of each of those packets
    direction: np.ndarray   # 0: from side A (the initiator), 1: towards it
    opener: np.ndarray      # per flow: where in `index` its opening packet (sent by side A) is
    table: object           # pandas DataFrame, one row per flow

    def __len__(self) -> int:
        return len(self.table)

    def packets(self, flow: int, direction: int | None = None) -> np.ndarray:
        """Capture positions of one flow's packets (one direction, or both)."""
        keep = self.flow == flow
        if direction is not None:
            keep &= self.direction == direction
        return self.index[keep]


def _endpoint_keys(addr: np.ndarray, port: np.ndarray) -> np.ndarray:
    """(n, 3) uint64: address high, address low, port; rows compare lexicographically."""
    a = np.ascontiguousarray(addr).view(">u8").reshape(len(addr), 2).astype(np.uint64)
    return np.column_stack([a, port.astype(np.uint64)])


def _less_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise lexicographic a <= b."""
    lt = np.zeros(len(a), bool)
    eq = np.ones(len(a), bool)
    for k in range(a.shape[1]):
        lt |= eq & (a[:, k] < b[:, k])
        eq &= a[:, k] == b[:, k]
    return lt | eq


def group(cap: Capture) -> Flows:
    """TCP and UDP flows of a capture."""
    p = cap.packets
    index = np.flatnonzero(cap.transport(IPPROTO_TCP) | cap.transport(IPPROTO_UDP))
    q = p[index]
    src, dst = _endpoint_keys(q["saddr"], q["sport"]), _endpoint_keys(q["daddr"], q["dport"])
    src_low = _less_equal(src, dst)
    lo, hi = np.where(src_low[:, None], src, dst), np.where(src_low[:, None], dst, src)
    keys = np.column_stack([q["proto"].astype(np.uint64), lo, hi])
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))   # ids by first appearance
    flow = rank[inverse] if len(index) else np.zeros(0, np.int64)
    nflows = len(first)
    # Side A: the first SYN's sender, else the first packet's.
    syn = (q["proto"] == IPPROTO_TCP) & ((q["tcp_flags"] & (TCP_SYN | TCP_ACK)) == TCP_SYN)
    opener = first_of(flow, nflows, syn)
    no_syn = opener < 0
    opener[no_syn] = first_of(flow, nflows)[no_syn]
    a_low = src_low[opener]                            # is side A the low endpoint?
    direction = (src_low != a_low[flow]).astype(np.int8)
    table = _table(q, flow, direction, opener, nflows, syn)
    return Flows(index, flow, direction, opener, table)


def first_of(flow: np.ndarray, n: int, where: np.ndarray | None = None) -> np.ndarray:
    """Per flow id, the position of its first packet (among `where`), -1 for none."""
    pos = np.full(n, -1, np.int64)
    at = (np.arange(len(flow)) if where is None else np.flatnonzero(where))[::-1]
    pos[flow[at]] = at                                 # the last write wins: the earliest
    return pos


def _table(q, flow, direction, opener, n, syn):
    import pandas as pd
    from ..trace import format_addresses
    o = q[opener]
    cols = {"flow": np.arange(n), "proto": np.where(o["proto"] == IPPROTO_TCP, "tcp", "udp"),
            "a_addr": format_addresses(o["saddr"]), "a_port": o["sport"].astype(np.int64),
            "b_addr": format_addresses(o["daddr"]), "b_port": o["dport"].astype(np.int64)}
    for d, name in ((0, "ab"), (1, "ba")):
        sel = direction == d
        cols[f"packets_{name}"] = np.bincount(flow[sel], minlength=n)
        cols[f"bytes_{name}"] = np.bincount(flow[sel], weights=q["payload"][sel], minlength=n).astype(np.int64)
    t = q["time_ns"]
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, flow, t)
    np.maximum.at(last, flow, t)
    cols["first_ns"], cols["last_ns"] = first, last
    cols["syn"] = np.bincount(flow[syn], minlength=n) > 0
    return pd.DataFrame(cols)
