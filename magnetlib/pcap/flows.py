"""Flows: packets grouped by 5-tuple, both directions together, all at once with numpy.

A flow's side A is its initiator (the sender of its first SYN without ACK, else
of its first packet); `direction` is 0 for packets from A, 1 for packets to it.
One 5-tuple is one flow for the whole capture: a connection that reuses the
ports of an earlier one joins it.  Malformed packets and fragments are left out.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..accumulate import Growing, Index
from .columns import IPPROTO_TCP, IPPROTO_UDP, MALFORMED, PACKET_DTYPE, TCP_ACK, TCP_SYN, Flag
from .fast import c_loops
from .pcapfile import PcapFile


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
        """Positions in the file of one flow's packets (one direction, or both)."""
        keep = self.flow == flow
        if direction is not None:
            keep &= self.direction == direction
        return self.index[keep]


def _endpoint_keys(addr: np.ndarray, port: np.ndarray) -> np.ndarray:
    """(n, 3) uint64: address high, address low, port; rows compare lexicographically."""
    return np.column_stack(_endpoint_columns(addr, port))


def _less_equal(a: list[np.ndarray], b: list[np.ndarray]) -> np.ndarray:
    """Row-wise lexicographic a <= b, of rows given as columns."""
    lt = np.zeros(len(a[0]), bool)
    eq = np.ones(len(a[0]), bool)
    for x, y in zip(a, b):
        lt |= eq & (x < y)
        eq &= x == y
    return lt | eq


def group(cap: PcapFile) -> Flows:
    """TCP and UDP flows of a capture."""
    table = FlowTable()
    index, provisional, src_low = table.add(cap.packets)
    final = table.final_ids()
    flow = final[provisional]
    opener_pos, a_low = table.openers()
    direction = (src_low != a_low[flow]).astype(np.int8)
    return Flows(index, flow, direction, np.searchsorted(index, opener_pos), table.table())


_MIX = np.uint64(0x9E3779B97F4A7C15)
_NEVER = np.iinfo(np.int64).max


class FlowTable:
    """TCP and UDP flows of a capture read a chunk at a time (chunks in file order).

    One row per flow, whatever order its packets come in: its 5-tuple, the first packet
    and the first SYN (without ACK) and who sent them, packets and bytes each way between
    the flow's lower and higher endpoint, first and last time.  Flows are found by a hash
    of the 5-tuple, each packet checked against its flow's whole key (a key whose hash
    another has is looked up exactly)."""

    def __init__(self):
        self._c = _CFlowIndex.create()           # None: the numpy lookup below
        self._hashes = Index()
        self._flow_of_hash = Growing(flow=(np.int64, -1))
        self._exact: dict[bytes, int] = {}
        self.cols = Growing(proto=(np.uint64, 0), lo_hi=(np.uint64, 0), lo_lo=(np.uint64, 0),
                            lo_port=(np.uint64, 0), hi_hi=(np.uint64, 0), hi_lo=(np.uint64, 0),
                            hi_port=(np.uint64, 0), first_pos=(np.int64, _NEVER), first_low=(bool, False),
                            syn_pos=(np.int64, _NEVER), syn_low=(bool, False),
                            packets_up=(np.int64, 0), bytes_up=(np.int64, 0), packets_down=(np.int64, 0),
                            bytes_down=(np.int64, 0), first_ns=(np.int64, _NEVER),
                            last_ns=(np.int64, np.iinfo(np.int64).min))
        self.packets_seen = 0

    def __len__(self) -> int:
        return len(self.cols)

    def add(self, p: np.ndarray, count: bool = True):
        """Take a chunk of packets: returns the chunk positions of its flow packets, their
        flows (provisional ids: final_ids() maps them) and whether each was sent by its
        flow's lower endpoint.  count=False only looks flows up (a second pass)."""
        wanted = _transport(p)
        index = np.flatnonzero(wanted)
        q = _Columns(p, None if len(index) == len(p) else index)
        if self._c is not None:
            flow, src_low, new_keys = self._c.lookup(p, index)
            if len(new_keys):
                self._allocate(new_keys)
        else:
            keys, src_low = _flow_keys(q)
            flow = self._ids(keys)
        if count:
            self._count(q, flow, src_low, self.packets_seen + index)
        self.packets_seen += len(p)
        return index, flow, src_low

    def _ids(self, keys: list[np.ndarray]) -> np.ndarray:
        h = np.full(len(keys[0]), _MIX, np.uint64)
        for col in keys:
            h = (h ^ col) * _MIX
            h ^= h >> np.uint64(31)
        at = self._hashes.of(h)
        self._flow_of_hash.cover(len(self._hashes))
        of_hash = self._flow_of_hash.view("flow")
        new = np.unique(at[of_hash[at] < 0])
        if len(new):
            rows = _first_rows(at, new)
            of_hash[new] = self._allocate(np.stack([col[rows] for col in keys], axis=1))
        flow = of_hash[at]
        wrong = np.zeros(len(flow), bool)
        for name, col in zip(KEY_COLUMNS, keys):
            wrong |= self.cols.view(name)[flow] != col
        if wrong.any():                        # a hash shared by two keys: exact lookup
            flow[wrong] = [self._exact_id(k) for k in np.stack(keys, axis=1)[wrong]]
        return flow

    def _exact_id(self, key: np.ndarray) -> int:
        raw = key.tobytes()
        if raw not in self._exact:
            self._exact[raw] = int(self._allocate(key[None])[0])
        return self._exact[raw]

    def _allocate(self, keys: np.ndarray) -> np.ndarray:
        first = len(self.cols)
        self.cols.cover(first + len(keys))
        for k, name in enumerate(KEY_COLUMNS):
            self.cols.view(name)[first:] = keys[:, k]
        return np.arange(first, first + len(keys))

    def _count(self, q: np.ndarray, flow: np.ndarray, src_low: np.ndarray, pos: np.ndarray) -> None:
        c, n = self.cols, len(self.cols)
        syn = (q["proto"] == IPPROTO_TCP) & ((q["tcp_flags"] & (TCP_SYN | TCP_ACK)) == TCP_SYN)
        for where, pos_name, low_name in ((None, "first_pos", "first_low"), (syn, "syn_pos", "syn_low")):
            at = first_of(flow, n, where)
            fresh = (at >= 0) & (c.view(pos_name) == _NEVER)      # chunks come in order
            c.view(pos_name)[fresh] = pos[at[fresh]]
            c.view(low_name)[fresh] = src_low[at[fresh]]
        way = 2 * flow + ~src_low                              # up (0) and down (1) of each flow
        packets = np.bincount(way, minlength=2 * n).reshape(n, 2)
        nbytes = np.rint(np.bincount(way, weights=q["payload"], minlength=2 * n)).astype(np.int64).reshape(n, 2)
        for k, name in enumerate(("up", "down")):
            c.view(f"packets_{name}")[:] += packets[:, k]
            c.view(f"bytes_{name}")[:] += nbytes[:, k]
        np.minimum.at(c.view("first_ns"), flow, q["time_ns"])
        np.maximum.at(c.view("last_ns"), flow, q["time_ns"])

    def final_ids(self) -> np.ndarray:
        """Provisional id -> flow id: flows numbered by their first packet."""
        rank = np.empty(len(self), np.int64)
        rank[np.argsort(self.cols.view("first_pos"), kind="stable")] = np.arange(len(self))
        return rank

    def openers(self) -> tuple[np.ndarray, np.ndarray]:
        """Per flow id: capture position of its opening packet (the first SYN's, else the
        first packet's) and whether the lower endpoint sent it (is side A)."""
        order = np.argsort(self.cols.view("first_pos"), kind="stable")
        c = {name: self.cols.view(name)[order] for name in ("first_pos", "first_low", "syn_pos", "syn_low")}
        has_syn = c["syn_pos"] != _NEVER
        return np.where(has_syn, c["syn_pos"], c["first_pos"]), np.where(has_syn, c["syn_low"], c["first_low"])

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Per flow id: side A's and side B's addresses, (n, 16) uint8."""
        order = np.argsort(self.cols.view("first_pos"), kind="stable")
        _, a_low = self.openers()
        return tuple(self._addresses(order, low) for low in (a_low, ~a_low))

    def _addresses(self, order: np.ndarray, low: np.ndarray) -> np.ndarray:
        """The lower endpoint's address where `low`, else the higher's, of flows in `order`."""
        c = self.cols
        hi = np.where(low, c.view("lo_hi")[order], c.view("hi_hi")[order])
        lo = np.where(low, c.view("lo_lo")[order], c.view("hi_lo")[order])
        return np.stack([hi, lo], axis=1).astype(">u8").view(np.uint8).reshape(len(order), 16)

    def first_sender(self) -> np.ndarray:
        """The address that sent the capture's first flow packet."""
        first = np.argmin(self.cols.view("first_pos"))
        return self._addresses(np.array([first]), self.cols.view("first_low")[[first]])[0]

    def last_ns(self) -> int:
        return int(self.cols.view("last_ns").max())

    def table(self):
        """One row per flow id: side A (the opener's sender) and B, packets and bytes each way."""
        import pandas as pd
        from ..trace import format_addresses
        order = np.argsort(self.cols.view("first_pos"), kind="stable")
        c = {name: self.cols.view(name)[order] for name in self.cols._spec}
        _, a_low = self.openers()
        ends = {}
        for side, low in (("a", a_low), ("b", ~a_low)):
            ends[f"{side}_addr"] = format_addresses(self._addresses(order, low))
            ends[f"{side}_port"] = np.where(low, c["lo_port"], c["hi_port"]).astype(np.int64)
        cols = {"flow": np.arange(len(order)), "proto": np.where(c["proto"] == IPPROTO_TCP, "tcp", "udp"),
                "a_addr": ends["a_addr"], "a_port": ends["a_port"], "b_addr": ends["b_addr"],
                "b_port": ends["b_port"]}
        for name, a_way in (("ab", "up"), ("ba", "down")):
            cols[f"packets_{name}"] = np.where(a_low, c[f"packets_{a_way}"], c[f"packets_{_other(a_way)}"])
            cols[f"bytes_{name}"] = np.where(a_low, c[f"bytes_{a_way}"], c[f"bytes_{_other(a_way)}"])
        cols["first_ns"], cols["last_ns"] = c["first_ns"], c["last_ns"]
        cols["syn"] = c["syn_pos"] != _NEVER
        return pd.DataFrame(cols)


KEY_COLUMNS = ("proto", "lo_hi", "lo_lo", "lo_port", "hi_hi", "hi_lo", "hi_port")


class _CFlowIndex:
    """FlowTable's key -> flow id lookup as fastpath.c's hash table (exact keys, ids in
    order of first appearance, as the numpy lookup gives them)."""

    @classmethod
    def create(cls) -> "_CFlowIndex | None":
        lib = c_loops()
        return None if lib is None else cls(lib)

    def __init__(self, lib):
        self.lib, self.handle = lib, lib.magnet_flows_new()
        if not self.handle:
            raise MemoryError("the flow table")
        weakref.finalize(self, lib.magnet_flows_free, self.handle)

    def lookup(self, p: np.ndarray, index: np.ndarray):
        """(flow of each packet p[index], whether its source is the lower endpoint, keys of
        the flows new to the table as (k, 7) uint64)."""
        p = np.ascontiguousarray(p, PACKET_DTYPE)
        index = np.ascontiguousarray(index, np.int64)
        flow, low = np.empty(len(index), np.int64), np.empty(len(index), np.uint8)
        new_keys = np.empty((len(index), len(KEY_COLUMNS)), np.uint64)
        fresh = self.lib.magnet_flows_lookup(self.handle, p.ctypes.data, index.ctypes.data, len(index),
                                             flow.ctypes.data, low.ctypes.data, new_keys.ctypes.data)
        if fresh < 0:
            raise MemoryError("the flow table")
        return flow, low.view(bool), new_keys[:fresh]


def _other(way: str) -> str:
    return "down" if way == "up" else "up"


def _first_rows(at: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The first row holding each wanted value of `at`."""
    first = np.full(int(at.max()) + 1, -1, np.int64)
    first[at[::-1]] = np.arange(len(at))[::-1]
    return first[wanted]


def _transport(p: np.ndarray) -> np.ndarray:
    """Packets of TCP or UDP with their header decoded (PcapFile.transport of both)."""
    usable = ((p["flags"] & MALFORMED) == 0) & (p["ip_version"] != 0) & ((p["flags"] & Flag.FRAGMENT) == 0)
    return usable & ((p["proto"] == IPPROTO_TCP) | (p["proto"] == IPPROTO_UDP))


class _Columns:
    """Columns of the packets at `index` (None: all), each taken when first asked for."""

    def __init__(self, p: np.ndarray, index: np.ndarray | None):
        self.p, self.index, self._got = p, index, {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._got:
            col = self.p[name]
            self._got[name] = col if self.index is None else col[self.index]
        return self._got[name]


def _flow_keys(q) -> tuple[list[np.ndarray], np.ndarray]:
    """Flow keys as 7 uint64 columns (proto, lower endpoint, higher endpoint; an endpoint
    is address high, low, port) and whether each packet's source is the lower endpoint."""
    src, dst = _endpoint_columns(q["saddr"], q["sport"]), _endpoint_columns(q["daddr"], q["dport"])
    src_low = _less_equal(src, dst)
    lo = [np.where(src_low, a, b) for a, b in zip(src, dst)]
    hi = [np.where(src_low, b, a) for a, b in zip(src, dst)]
    return [q["proto"].astype(np.uint64), *lo, *hi], src_low


def _endpoint_columns(addr: np.ndarray, port: np.ndarray) -> list[np.ndarray]:
    """Address high and low 64 bits (network order) and port, as uint64 columns."""
    if addr.strides[-1] != 1:
        addr = np.ascontiguousarray(addr)
    words = addr.view(">u8").reshape(len(addr), 2)          # each row's 16 bytes: no copy
    return [words[:, 0].astype(np.uint64), words[:, 1].astype(np.uint64), port.astype(np.uint64)]


def first_of(flow: np.ndarray, n: int, where: np.ndarray | None = None) -> np.ndarray:
    """Per flow id, the position of its first packet (among `where`), -1 for none."""
    pos = np.full(n, -1, np.int64)
    at = (np.arange(len(flow)) if where is None else np.flatnonzero(where))[::-1]
    pos[flow[at]] = at                                 # the last write wins: the earliest
    return pos


