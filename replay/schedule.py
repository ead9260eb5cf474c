"""What each end of a replayed connection writes, and when: Tmix-style ADUs.

A demand of one stream may have both directions: `send` calls are the
initiator's writes, `recv` calls stand for the acceptor's (a one-sided trace
does not hold the peer's own writes; the reads of its data stand for them).
In time order the calls form ADUs, runs of calls in one direction
(magnetlib.demand.adu_table).  As in Tmix's sequential connection vectors,
an ADU that follows one of the peer waits for all of the peer's bytes so far
to arrive, then for its think time (the trace's gap between the peer's last
call and its own first), and its writes keep their trace spacing from its
start.  With `concurrent`, each side writes at its trace times and waits for
nothing (Tmix's concurrent vectors).

    initiator, acceptor = schedule.sides(demand)
    initiator.save("a-writes"); Side.load("a-writes")   # a directory of .npy, read memory-mapped
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from magnetlib.demand import RECV, SEND, Demand, adu_table

NO_WAIT = -1          # think_ns of a write that keeps its ADU's anchor


@dataclass
class Side:
    """One end's writes.

    time_ns     the write's trace time, ns since the demand's start
    size        bytes
    after_peer  the peer's bytes (counted from the connection's start) that must
                have arrived before this write is issued; 0: none
    think_ns    for a write that starts an ADU waiting for the peer: how long
                after the peer's last awaited byte it is due; NO_WAIT otherwise
    """
    time_ns: np.ndarray
    size: np.ndarray
    after_peer: np.ndarray
    think_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.time_ns)

    @property
    def total_bytes(self) -> int:
        return int(self.size.sum())

    FIELDS = ("time_ns", "size", "after_peer", "think_ns")

    def save(self, path) -> None:
        """One .npy per field in directory `path`, so that load() can map them."""
        Path(path).mkdir(parents=True, exist_ok=True)
        for name in self.FIELDS:
            np.save(Path(path) / f"{name}.npy", np.asarray(getattr(self, name), np.int64))

    @classmethod
    def load(cls, path) -> "Side":
        """Memory-mapped: a side of millions of writes is read as it is replayed."""
        return cls(*(np.load(Path(path) / f"{name}.npy", mmap_mode="r") for name in cls.FIELDS))

    @classmethod
    def paced(cls, time_ns, size) -> "Side":
        """Writes at their times, waiting for nothing."""
        time_ns, size = np.asarray(time_ns, np.int64), np.asarray(size, np.int64)
        return cls(time_ns, size, np.broadcast_to(np.int64(0), len(size)),
                   np.broadcast_to(np.int64(NO_WAIT), len(size)))


def sides(demand: Demand, concurrent: bool = False) -> tuple[Side, Side]:
    """(initiator, acceptor): the send calls and the recv calls of `demand` as writes."""
    t, size, dirn = demand.time_ns, demand.size, demand.direction
    if concurrent or not (dirn == RECV).any():
        return tuple(Side.paced(t[dirn == d], size[dirn == d]) for d in (SEND, RECV))
    adus = adu_table(demand, np.inf)                     # runs of one direction
    sent = np.cumsum(np.where(dirn == SEND, size, 0)) - np.where(dirn == SEND, size, 0)
    received = np.cumsum(np.where(dirn == RECV, size, 0)) - np.where(dirn == RECV, size, 0)
    after_peer = np.where(dirn == SEND, received, sent)  # the other side's bytes before each call
    think = np.full(len(t), NO_WAIT, np.int64)
    first = adus["first"][1:]
    think[first] = adus["start_ns"][1:] - adus["end_ns"][:-1]
    return tuple(Side(t[dirn == d], size[dirn == d], after_peer[dirn == d], think[dirn == d])
                 for d in (SEND, RECV))


# ---------------------------------------------------- whole applications ---
@dataclass
class AppPlan:
    """What one side of a whole-application replay does (magnetlib.app_demand): per
    connection (index 0.., in the demand's order of connection numbers) and per row of
    this side, in each connection's order.  Saved as a directory of .npy files, mapped."""
    number: np.ndarray        # per connection: its number in the demand
    opener: np.ndarray        # CLIENT or SERVER
    open_ns: np.ndarray       # the open's time_ns
    after: np.ndarray         # index of the connection it opens after, or -1
    open_think: np.ndarray    # think_ns of the open (with after)
    first: np.ndarray         # this side's rows of the connection: first..end-1
    end: np.ndarray
    peer_total: np.ndarray    # bytes the peer sends on the connection
    closes: np.ndarray        # 1: this side has a close or reset row (else it closes by default)
    peer_resets: np.ndarray   # 1: the peer ends the connection with a reset
    kind: np.ndarray          # per row: SEND, CLOSE or RESET (app_demand's codes)
    time_ns: np.ndarray
    size: np.ndarray
    wait: np.ndarray
    think: np.ndarray
    adu: np.ndarray
    row: np.ndarray           # the row's position in the demand table

    CONN_FIELDS = ("number", "opener", "open_ns", "after", "open_think", "first", "end", "peer_total",
                   "closes", "peer_resets")
    ROW_FIELDS = ("kind", "time_ns", "size", "wait", "think", "adu", "row")

    @classmethod
    def of(cls, d, side: int) -> "AppPlan":
        """Side `side`'s plan of the (validated) whole-application demand `d`."""
        from magnetlib.app_demand import OPEN, RESET, SEND
        numbers = np.unique(d.connection)
        index = np.searchsorted(numbers, d.connection)
        opens = np.flatnonzero(d.event == OPEN)
        mine = np.flatnonzero((d.event != OPEN) & (d.side == side))
        mine = mine[np.argsort(index[mine], kind="stable")]
        conn_of_row = index[mine]
        first = np.searchsorted(conn_of_row, np.arange(len(numbers)))
        end = np.searchsorted(conn_of_row, np.arange(len(numbers)), side="right")
        peer = (d.side != side) & (d.event == SEND)
        peer_total = np.bincount(index[peer], weights=d.size[peer], minlength=len(numbers)).astype(np.int64)
        after = d.after[opens]
        return cls(numbers, d.side[opens].astype(np.int8), d.time_ns[opens],
                   np.where(after > 0, np.searchsorted(numbers, after), -1), d.think_ns[opens],
                   first, end, peer_total, _closes(d, index, side, len(numbers)),
                   _closes(d, index, 1 - side, len(numbers), RESET),
                   d.event[mine].astype(np.int8), d.time_ns[mine], d.size[mine], d.wait_bytes[mine],
                   d.think_ns[mine], d.adu[mine], mine)

    def save(self, path) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        for name in self.CONN_FIELDS + self.ROW_FIELDS:
            np.save(Path(path) / f"{name}.npy", np.asarray(getattr(self, name), np.int64))

    @classmethod
    def load(cls, path) -> "AppPlan":
        return cls(**{name: np.load(Path(path) / f"{name}.npy", mmap_mode="r")
                      for name in cls.CONN_FIELDS + cls.ROW_FIELDS})


def _closes(d, index: np.ndarray, side: int, n: int, kind: int | None = None) -> np.ndarray:
    """Per connection, 1 if `side` has a close or reset row (or, given `kind`, one of it)."""
    from magnetlib.app_demand import CLOSE, RESET
    wanted = np.isin(d.event, [CLOSE, RESET] if kind is None else [kind]) & (d.side == side)
    return (np.bincount(index[wanted], minlength=n) > 0).astype(np.int8)
