"""What a whole-application replay did, from both sides' records (replay.app_endpoint):
connections.csv, adus.csv, the sides' timing and the series of Table II.

Times in the tables are seconds from the replay's time zero (the anchor both sides
were given); the records hold CLOCK_MONOTONIC ns.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import magnetlib
from magnetlib import demand as demand_mod
from magnetlib import metrics
from magnetlib.app_demand import SEND, SIDES, AppDemand

from . import report
from .endpoint import load_record

PACED_NS = 1_000_000            # a row scheduled at least this long before its due time is "paced"


@dataclass
class Tables:
    connections: pd.DataFrame
    adus: pd.DataFrame
    timing: dict
    series: dict                # "send" / "recv": Table II's series


def collect(demand: AppDemand, plans: dict, records: dict, results: dict, anchor: int, traces: dict) -> Tables:
    """The tables from both sides' records and results (their JSON lines)."""
    rec = {side: load_record(path) for side, path in records.items()}
    issued = _issued(demand, plans, rec)
    conns = _connections(demand, plans, rec, anchor, results)
    adus = _adus(demand, plans, rec, issued, anchor)
    timing = {side: _timing(rec[side], plans[side]) for side in SIDES}
    series = _series(demand, issued, rec, traces, conns)
    return Tables(conns, adus, timing, series)


def _issued(demand: AppDemand, plans: dict, rec: dict) -> np.ndarray:
    """Per row of the demand, when its side issued it (-1: never)."""
    issued = np.full(len(demand), -1, np.int64)
    for side in SIDES:
        rows = np.asarray(rec[side]["rows"]).reshape(-1, 5)
        issued[np.asarray(plans[side].row)[rows[:, 0]]] = rows[:, 2]
    return issued


def _connections(demand: AppDemand, plans: dict, rec: dict, anchor: int, results: dict) -> pd.DataFrame:
    client, server = plans["client"], plans["server"]
    opener = np.asarray(client.opener)
    open_at = np.where(opener == 0, rec["client"]["open_at"], rec["server"]["open_at"])
    done = np.maximum(rec["client"]["done_at"], rec["server"]["done_at"])
    both_done = (rec["client"]["done_at"] >= 0) & (rec["server"]["done_at"] >= 0)
    sends = demand.event == SEND
    conn_index = np.searchsorted(np.asarray(client.number), demand.connection)
    adus = np.zeros(len(client.number), np.int64)
    np.maximum.at(adus, conn_index[sends], demand.adu[sends] + 1)
    start = np.where(open_at >= 0, (open_at - anchor) / 1e9, np.nan)
    completion = np.where(both_done, (done - anchor) / 1e9, np.nan)
    frame = pd.DataFrame({"stack": 1, "connection": np.asarray(client.number),
                          "opener": np.array(SIDES)[opener], "start_s": start, "completion_s": completion,
                          "duration_s": completion - start,
                          "bytes_sent": rec["client"]["sent"], "bytes_received": rec["client"]["received"],
                          "adus": adus})
    frame["status"] = _status(plans, rec, results)
    return frame


def _status(plans: dict, rec: dict, results: dict) -> list[str]:
    """ok, or the first reason either side gave, or `incomplete` when bytes are missing."""
    want_client = np.asarray(plans["server"].peer_total)
    want_server = np.asarray(plans["client"].peer_total)
    numbers = np.asarray(plans["client"].number)
    reasons = {side: results[side]["failed"] for side in SIDES}
    status = []
    for k in range(len(want_client)):
        number = str(int(numbers[k]))
        why = reasons["client"].get(number) or reasons["server"].get(number)
        if why is None and (rec["client"]["sent"][k] != want_client[k] or rec["server"]["sent"][k] != want_server[k]
                            or rec["server"]["received"][k] != want_client[k]
                            or rec["client"]["received"][k] != want_server[k]):
            why = "incomplete"
        status.append(why or "ok")
    return status


def _adus(demand: AppDemand, plans: dict, rec: dict, issued: np.ndarray, anchor: int) -> pd.DataFrame:
    """Per ADU: bytes, first write, its last byte read by the peer, and the response time of
    an ADU that answers the previous one (its first send waited for all of it)."""
    sends = np.flatnonzero(demand.event == SEND)
    conn, adu, side = demand.connection[sends], demand.adu[sends], demand.side[sends]
    key = conn * (int(adu.max()) + 2 if len(adu) else 1) + adu
    order = np.lexsort((sends, key))
    sends, conn, adu, side, key = sends[order], conn[order], adu[order], side[order], key[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else key
    nbytes = np.add.reduceat(demand.size[sends], first) if len(first) else np.zeros(0, np.int64)
    a_conn, a_adu, a_side = conn[first], adu[first], side[first]
    first_row = sends[first]
    start = issued[first_row]
    # the peer's cumulative bytes through each ADU (per connection and writing side)
    through = np.zeros(len(first), np.int64)
    answers = np.zeros(len(first), bool)
    numbers = np.asarray(plans["client"].number)
    for k in np.unique(a_conn):
        mine = np.flatnonzero(a_conn == k)
        for s in (0, 1):
            of_side = mine[a_side[mine] == s]
            through[of_side] = np.cumsum(nbytes[of_side])
        prev = mine[:-1]
        answers[mine[1:]] = demand.wait_bytes[first_row[mine[1:]]] >= through[prev]
    end = np.full(len(first), -1, np.int64)
    for s, reader in ((0, "server"), (1, "client")):
        reads = np.asarray(rec[reader]["reads"]).reshape(-1, 3)
        reads = reads[reads[:, 2] > 0]
        reads = reads[np.lexsort((reads[:, 0], reads[:, 1]))]        # by connection, then time
        bounds = np.searchsorted(reads[:, 1], np.arange(len(numbers) + 1))
        for k in np.unique(a_conn[a_side == s]):
            index = int(np.searchsorted(numbers, k))
            mine = reads[bounds[index]:bounds[index + 1]]
            got = np.cumsum(mine[:, 2])
            which = np.flatnonzero((a_conn == k) & (a_side == s))
            at = np.searchsorted(got, through[which])
            ok = at < len(got)
            end[which[ok]] = mine[at[ok], 0]
    prev_start = np.r_[-1, start[:-1]]
    same_conn = np.r_[False, a_conn[1:] == a_conn[:-1]]
    response = np.where(answers & same_conn & (end >= 0) & (prev_start >= 0), end - prev_start, -1)
    secs = lambda t: np.where(t >= 0, (t - anchor) / 1e9, np.nan)      # noqa: E731
    return pd.DataFrame({"stack": 1, "connection": a_conn, "adu": a_adu, "side": np.array(SIDES)[a_side],
                         "bytes": nbytes, "start_s": secs(start), "end_s": secs(end),
                         "response_s": np.where(response >= 0, response / 1e9, np.nan)})


def _timing(record: dict, plan) -> dict:
    """|issued - due| of a side's sends: over every row, and over the paced ones (scheduled
    at least PACED_NS ahead; the others show how soon the side answered what it read)."""
    rows = np.asarray(record["rows"]).reshape(-1, 5)
    sends = np.asarray(plan.kind)[rows[:, 0]] == SEND if len(rows) else np.zeros(0, bool)
    rows = rows[sends]
    error = np.abs(rows[:, 2] - rows[:, 1]) / 1e3
    paced = rows[:, 1] - rows[:, 4] >= PACED_NS
    opens = record["open_due"] >= 0
    open_error = np.abs(record["open_at"][opens] - record["open_due"][opens]) / 1e3
    return {"sends": int(len(rows)), **_stats("all", error), "paced": int(paced.sum()),
            **_stats("paced", error[paced]), "opens": int(opens.sum()), **_stats("open", open_error)}


def _stats(name: str, us: np.ndarray) -> dict:
    if not len(us):
        return {f"{name}_p50_us": None, f"{name}_p99_us": None, f"{name}_max_us": None}
    return {f"{name}_p50_us": float(np.percentile(us, 50)), f"{name}_p99_us": float(np.percentile(us, 99)),
            f"{name}_max_us": float(us.max())}


def timing_line(side: str, t: dict) -> str:
    def part(name, count):
        if not count:
            return f"no {name} rows"
        return (f"{count} {name}: p50 {t[f'{name}_p50_us']:.1f} us, p99 {t[f'{name}_p99_us']:.1f} us, "
                f"max {t[f'{name}_max_us']:.0f} us")
    return (f"{side} side: |issued - due| of {part('paced', t['paced'])} (of {t['sends']} sends; all "
            f"sends p99 {t['all_p99_us'] or 0:.1f} us); opens {part('open', t['opens'])}")


def _series(demand: AppDemand, issued: np.ndarray, rec: dict, traces: dict, conns: pd.DataFrame) -> dict:
    """Table II per direction: the application's writes, then its wire (the side's DEV_SEND
    data in its capture; without one, what the peer read)."""
    out = {}
    for direction, side, peer in (("send", 0, "server"), ("recv", 1, "client")):
        rows = (demand.event == SEND) & (demand.side == side) & (issued >= 0)
        order = np.argsort(issued[rows], kind="stable")
        app = (metrics.ordinal_label(0), issued[rows][order], demand.size[rows][order])
        name = SIDES[side]
        if name in traces and Path(traces[name]).exists():
            with magnetlib.open(traces[name]) as trace:
                d = demand_mod.extract(trace.check(), None, "send", "dev")
            wire = (metrics.ordinal_label(1), d.time_ns + d.start_ns, d.size)
        else:
            reads = np.asarray(rec[peer]["reads"]).reshape(-1, 3)
            reads = reads[reads[:, 2] > 0]
            wire = (metrics.ordinal_label(1), reads[:, 0], reads[:, 2])
        out[direction] = [app, wire]
    return out


def failures(connections: pd.DataFrame) -> dict:
    bad = connections[connections["status"] != "ok"]
    return dict(zip(bad["connection"].astype(int), bad["status"]))


def write(tables: Tables, out: Path) -> list[Path]:
    files = [report.write_csv(tables.connections, out / "connections.csv"),
             report.write_csv(tables.adus, out / "adus.csv")]
    return files
