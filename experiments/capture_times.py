"""The same traffic recorded by two builds of magnet-read at once: per layer,
the records each made and how far apart their timestamps are, event by event
(bench_capture_cost --baseline: the check that recording a layer's event from
another layer's program, or from a stamp the kernel set, keeps its time).

Events are matched by what the extended block says of them (connection,
event, sequence and acknowledgement numbers, flags, size) and their order
among equals, so both traces need --ext.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from magnetlib.format import Event as E

LAYERS = {"sock send": (E.SOCK_SEND,), "sock recv": (E.SOCK_RECV,),
          "tcp send": (E.TCP_SEND, E.TCP_RETRANS), "tcp recv": (E.TCP_RECV,),
          "ip send": (E.IP_SEND,), "ip recv": (E.IP_RECV,),
          "dev send": (E.DEV_SEND,), "dev recv": (E.DEV_RECV,)}
KEY = ["sockid", "event", "seq", "ack_seq", "tcp_flags", "size"]
# A layer's event may come from another layer's program in the same call chain
# if its time stays within this of the separate hook's, at the 99th percentile.
CHAIN_P99_US = 2.0


def keyed(trace) -> pd.DataFrame:
    """The trace's layer events: key columns, timestamp, and `n`, the event's
    place among those with the same key (in time order)."""
    d = trace.data
    d = d[np.isin(d["event"], [e for events in LAYERS.values() for e in events])]
    frame = pd.DataFrame({name: d[name] for name in KEY})
    frame["timestamp"] = d["timestamp"].astype(np.int64)
    frame = frame.sort_values("timestamp", kind="stable")
    frame["n"] = frame.groupby(KEY, sort=False).cumcount()
    return frame


def differences(new, old) -> dict[str, dict]:
    """Per layer: records of each trace, matched pairs, and the differences of
    their times (new minus old, in us)."""
    a, b = keyed(new), keyed(old)
    both = a.merge(b, on=KEY + ["n"], suffixes=("_new", "_old"))
    out = {}
    for layer, events in LAYERS.items():
        pick = both.event.isin(events)
        out[layer] = {"new": int(a.event.isin(events).sum()), "old": int(b.event.isin(events).sum()),
                      "matched": int(pick.sum()),
                      "diff_us": ((both.timestamp_new[pick] - both.timestamp_old[pick]) / 1000).to_numpy()}
    return out


def summary(rounds: list[dict[str, dict]]) -> pd.DataFrame:
    """One row per layer over every round: records of each build, whether they
    were equal in every round, and the time differences' median and 99th
    percentile (and of their absolute values)."""
    rows = []
    for layer in LAYERS:
        parts = [r[layer] for r in rounds]
        diff = np.concatenate([p["diff_us"] for p in parts]) if parts else np.zeros(0)
        row = {"layer": layer, "records_new": sum(p["new"] for p in parts),
               "records_old": sum(p["old"] for p in parts), "matched": sum(p["matched"] for p in parts),
               "counts_equal": all(p["new"] == p["old"] for p in parts)}
        if len(diff):
            row.update(median_us=float(np.median(diff)), p99_us=float(np.percentile(diff, 99)),
                       p1_us=float(np.percentile(diff, 1)),
                       abs_p99_us=float(np.percentile(np.abs(diff), 99)))
        rows.append(row)
    return pd.DataFrame(rows)
