"""How faithfully a replayer issued its writes: its own record, and the capture's confirmation.

A replayer record (replay.endpoint) holds every send() call (write index, time
before, time after, what it returned) and every write's due time, all in
CLOCK_MONOTONIC ns.  A write is *issued* at its first call; it is *blocked*
if that call could not hand the whole write to the socket (the send buffer
was full), and *done* when its last byte was taken.  Timing error is
issued - due, measured over *paced* writes: due at least `min_gap` after the
previous write's due time, and not held up by an earlier write still blocked at
their due time (those are late because of TCP, and counted as such).  A write
late because the replayer was still in the previous send() call counts: that
is the replayer's own delay.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

MIN_GAP_NS = 1_000_000


@dataclass
class Writes:
    due: np.ndarray
    issued: np.ndarray
    done: np.ndarray
    size: np.ndarray          # bytes the calls moved per write (= its size once done)
    calls: np.ndarray         # send() calls per write
    blocked: np.ndarray       # bool

    def frame(self, part: slice = slice(None)):
        import pandas as pd
        return pd.DataFrame({"due_ns": self.due[part], "issued_ns": self.issued[part],
                             "done_ns": self.done[part], "bytes": self.size[part],
                             "calls": self.calls[part], "blocked": self.blocked[part]})

    def to_csv(self, path, chunk: int = 1_000_000) -> None:
        """writes.csv, a million rows at a time (memory stays bounded)."""
        with open(path, "w") as f:
            for lo in range(0, max(len(self.due), 1), chunk):
                self.frame(slice(lo, lo + chunk)).to_csv(f, index=False, header=lo == 0)


def writes(record) -> Writes:
    """Per write, from a replayer record (endpoint.load_record, or a dict of its arrays)."""
    calls = np.asarray(record["calls"]).reshape(-1, 4)
    index = calls[:, 0]
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]]) if len(index) else index
    ends = np.r_[starts[1:], len(index)][:len(starts)] - 1
    n = len(starts)                   # writes with a call (all, unless the run was stopped)
    size = np.asarray(record["size"])[:n]
    moved = np.add.reduceat(np.maximum(calls[:, 3], 0), starts) if n else size
    return Writes(np.asarray(record["due"])[:n], calls[starts, 1], calls[ends, 2], moved,
                  ends - starts + 1, calls[starts, 3] != size)


@dataclass
class Timing:
    writes: int
    paced: int                 # writes the error is measured over
    p50_us: float
    p99_us: float
    max_us: float
    blocked: int               # writes the send buffer could not take whole
    blocked_lag_p50_ms: float  # done - due of blocked writes
    blocked_lag_max_ms: float
    held_up: int               # writes due while an earlier one was still blocked

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        text = (f"timing of {self.paced} paced writes (of {self.writes}): |issued - due| "
                f"p50 {self.p50_us:.1f} us, p99 {self.p99_us:.1f} us, max {self.max_us:.0f} us")
        if self.blocked:
            text += (f"; {self.blocked} writes blocked on a full send buffer (lag p50 "
                     f"{self.blocked_lag_p50_ms:.1f} ms, max {self.blocked_lag_max_ms:.1f} ms), "
                     f"{self.held_up} more issued late behind them")
        return text


def paced_mask(w: Writes, min_gap_ns: int = MIN_GAP_NS) -> tuple[np.ndarray, np.ndarray]:
    """(paced writes, writes held up by a blocked one: due before it was done)."""
    if not len(w.due):
        return np.zeros(0, bool), np.zeros(0, bool)
    gap = np.diff(w.due, prepend=w.due[0] - min_gap_ns)
    blocked_until = np.maximum.accumulate(np.where(w.blocked, w.done, 0))
    held = np.r_[False, blocked_until[:-1] > w.due[1:]]
    return (gap >= min_gap_ns) & ~held, held


def timing(record, min_gap_ns: int = MIN_GAP_NS, w: Writes | None = None) -> Timing:
    """From a record, or its Writes if already derived."""
    w = w or writes(record)
    paced, held = paced_mask(w, min_gap_ns)
    err = np.abs(w.issued - w.due)[paced] / 1e3
    lag = (w.done - w.due)[w.blocked] / 1e6
    q = (lambda v, p: float(np.percentile(v, p)) if len(v) else float("nan"))
    return Timing(len(w.due), int(paced.sum()), q(err, 50), q(err, 99),
                  float(err.max()) if len(err) else float("nan"), int(w.blocked.sum()),
                  q(lag, 50), float(lag.max()) if len(lag) else float("nan"),
                  int((held & ~w.blocked).sum()))


def confirmed(record, sock_ns: np.ndarray, sock_size: np.ndarray, min_gap_ns: int = MIN_GAP_NS,
              w: Writes | None = None) -> dict:
    """The capture's view: each send() call's SOCK_SEND record (stamped as the call
    returns, so it lies between the replayer's before and after times), and the
    error of the paced writes measured at those records: SOCK_SEND - due."""
    calls = np.asarray(record["calls"]).reshape(-1, 4)
    order = np.argsort(sock_ns, kind="stable")
    ts, size = np.asarray(sock_ns)[order], np.asarray(sock_size)[order]
    k = np.searchsorted(ts, calls[:, 1], "left")
    ok = k < len(ts)
    k = np.minimum(k, max(len(ts) - 1, 0))
    matched = ok & (ts[k] <= calls[:, 2]) & (size[k] == calls[:, 3]) if len(ts) else ok
    w = w or writes(record)
    paced, _ = paced_mask(w, min_gap_ns)
    first = np.flatnonzero(np.r_[True, calls[1:, 0] != calls[:-1, 0]])[:len(w.due)]
    use = paced & matched[first]
    err = (ts[k[first]] - w.due)[use] / 1e3
    in_call = (ts[k[first]] - w.issued)[use] / 1e3
    q = (lambda v, p: float(np.percentile(np.abs(v), p)) if len(v) else float("nan"))
    return {"calls": len(calls), "matched": int(matched.sum()), "paced": int(use.sum()),
            "p50_us": q(err, 50), "p99_us": q(err, 99),
            "in_call_p50_us": q(in_call, 50), "in_call_p99_us": q(in_call, 99)}


def confirmed_line(c: dict) -> str:
    return (f"capture: {c['matched']} of {c['calls']} send() calls seen as SOCK_SEND; "
            f"SOCK_SEND - due over {c['paced']} paced writes p50 {c['p50_us']:.1f} us, "
            f"p99 {c['p99_us']:.1f} us (of which inside the call: p50 {c['in_call_p50_us']:.1f} us)")
