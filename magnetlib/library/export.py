"""Exports of a library's streams: demand sets for the replayers, Tmix connection vectors.

A demand set is a directory of magnetlib.demand files, one per stream
(HOST/TRACE-SOCKID.csv|.parquet|.magnet), and index.csv saying which stream
each file holds and when it started.  Tmix connection vectors are one text
file in the original (ns-2) Tmix format, documented in docs/library.md.
Both are written under a temporary name and renamed when complete.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import demand as demand_mod
from .. import private
from ..errors import TraceError
from ..format import Event
from . import catalog, query
from .catalog import Layout
from .engines import _by_trace, _event_codes, _trace_of

DEMAND_FORMATS = ("csv", "parquet", "magnet")
DEFAULT_WINDOW = 65535          # Tmix "w" line when the trace does not know the windows


@dataclass
class StreamCalls:
    """One stream's calls (or one layer's events) in time order, as magnetlib.demand.extract gives them."""
    info: dict                  # its row of the streams catalogue, with utc_offset
    demand: demand_mod.Demand


@dataclass
class Exported:
    path: str
    streams: int = 0
    calls: int = 0
    bytes: int = 0
    notes: list = field(default_factory=list)


def selected_streams(layout: Layout, where: str | None):
    """The streams catalogue rows chosen by an SQL condition, with each trace's UTC offset."""
    cond = f"WHERE ({where})" if where else ""
    sql = f"""SELECT s.*, epoch_ns(t.start_time) - t.first_ns AS utc_offset
              FROM (SELECT * FROM streams {cond}) s JOIN traces t USING (trace)
              ORDER BY s.trace, s.sockid"""
    return query.run(query.connect(layout), sql, str(layout.root)).to_pandas()


def stream_calls(layout: Layout, where: str | None, layer: str = "sock"):
    """StreamCalls of each selected stream, trace by trace (one trace's events in memory at a time)."""
    codes = demand_mod.layer_codes(layer, "both")
    recv = [ev for ev in codes if ev in (Event.SOCK_RECV, Event.TCP_RECV, Event.IP_RECV, Event.DEV_RECV)]
    chosen = selected_streams(layout, where)
    files = {_trace_of(group[0]): group
             for group in _by_trace(catalog.event_files(layout, sorted(set(chosen["trace"]))))}
    for trace, rows in chosen.groupby("trace", sort=True):
        table = pa.concat_tables(pq.read_table(f, columns=["sockid", "timestamp_ns", "event", "size"])
                                 for f in files.get(trace, []))
        code = _event_codes(table)
        sid, size = table.column("sockid").to_numpy(), table.column("size").to_numpy().astype(np.int64)
        ns = table.column("timestamp_ns").to_numpy()
        keep = np.isin(code, codes) & (size > 0) & np.isin(sid, rows["sockid"].to_numpy(np.uint64))
        sid, size, ns, code = sid[keep], size[keep], ns[keep], code[keep]
        order = np.lexsort((ns, sid))               # stable: ties keep the trace's order, as extract does
        sid, size, ns, code = sid[order], size[order], ns[order], code[order]
        bounds = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1], True])
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            info = rows[rows["sockid"] == sid[lo]].iloc[0].to_dict()
            start = int(ns[lo])
            d = demand_mod.Demand(ns[lo:hi] - start, size[lo:hi], np.isin(code[lo:hi], recv).astype(np.int8),
                                  sid[lo:hi].astype(np.uint64), start_ns=start)
            yield StreamCalls(info, d)


def _staging(out: str) -> str:
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise TraceError(out, "exists and is not an empty directory; refusing to mix exports")
    tmp = f"{out.rstrip(os.sep)}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    return tmp


def export_demand(layout: Layout, out: str, where: str | None = None, fmt: str = "csv",
                  layer: str = "sock") -> Exported:
    """One demand file per selected stream, and index.csv; the directory appears when complete."""
    result = Exported(out)

    def entries():
        for sc in stream_calls(layout, where, layer):
            info, d = sc.info, sc.demand
            rel = os.path.join(info["host"], f"{info['trace']}-{int(info['sockid']):x}.{fmt}")
            yield rel, (lambda path, d=d: demand_mod.write_demand(d, path)), _index_row(rel, info, d)
            result.streams, result.calls, result.bytes = result.streams + 1, result.calls + len(d), result.bytes + d.total_bytes
    _demand_set(out, fmt, INDEX_COLUMNS, entries())
    return result


def _demand_set(out: str, fmt: str, columns: list[str], entries) -> None:
    """Write each (relative name, write(path), index row) of `entries` and index.csv under a
    staging directory, renamed to `out` when complete (removed on any failure)."""
    import pandas as pd
    if fmt not in DEMAND_FORMATS:
        raise TraceError(out, f"unknown demand format {fmt!r} (use one of {', '.join(DEMAND_FORMATS)})")
    tmp = _staging(out)
    index = []
    try:
        for rel, write, row in entries:
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            write(os.path.join(tmp, rel))
            index.append(row)
        private.touch(os.path.join(tmp, "index.csv"))
        pd.DataFrame(index, columns=columns).to_csv(os.path.join(tmp, "index.csv"), index=False)
        if os.path.isdir(out):
            os.rmdir(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


INDEX_COLUMNS = ["file", "host", "application", "trace", "sockid", "pid", "start_time", "start_ns",
                 "calls", "bytes", "duration_s"]


# ------------------------------------------------- whole applications ---
APP_INDEX_COLUMNS = ["file", "application", "path", "traces", "sources", "start_time", "connections",
                     "opened_by_server", "client_bytes", "server_bytes", "duration_s"]


def selected_traces(layout: Layout, where: str | None) -> list[dict]:
    """Catalogue rows of the traces with a stream the condition selects (all without one)."""
    cond = f"WHERE trace IN (SELECT trace FROM streams WHERE ({where}))" if where else ""
    sql = f"SELECT * FROM traces {cond} ORDER BY first_ns, trace"
    return query.run(query.connect(layout), sql, str(layout.root)).to_pylist()


def export_app_demand(layout: Layout, out: str, where: str | None = None, fmt: str = "csv") -> Exported:
    """The whole-application demand (magnetlib.connections) of each selected capture: a
    client's and a server's trace of one `magnet path --capture` together, any other trace
    alone; OUT/APPLICATION/NAME.ext and OUT/index.csv.  The directory appears when complete."""
    from .. import app_demand, connections
    from . import stored
    result = Exported(out)

    def entries():
        for capture in stored.captures(selected_traces(layout, where)):
            d = connections.of_traces(capture.open(layout), capture.name)
            app = catalog.safe_label(capture.rows[0]["application"] or "unknown")
            rel = os.path.join(app, f"{catalog.safe_label(os.path.basename(capture.name))}.{fmt}")
            yield rel, (lambda path, d=d: app_demand.write(d, path)), _app_index_row(rel, capture, d)
            sources = tuple(r["source"] for r in capture.rows)
            result.notes += [note if note.startswith(sources) else f"{capture.name}: {note}" for note in d.notes]
            result.streams += len(d.connections)
            result.calls += int((d.event == app_demand.SEND).sum())
            result.bytes += int(d.size.sum())
    _demand_set(out, fmt, APP_INDEX_COLUMNS, entries())
    return result


def _app_index_row(rel: str, capture, d) -> list:
    from ..app_demand import CLIENT, OPEN, SERVER
    first = capture.rows[0]
    start = first.get("start_time")
    opens = d.event == OPEN
    return [rel, first["application"], first.get("path") or "", "+".join(r["trace"] for r in capture.rows),
            " ".join(os.path.basename(r["source"]) for r in capture.rows),
            "" if start is None else str(start), int(opens.sum()), int((d.side[opens] == SERVER).sum()),
            d.sent_bytes(CLIENT), d.sent_bytes(SERVER), d.duration_ns / 1e9]


def _index_row(rel: str, info: dict, d: demand_mod.Demand) -> list:
    offset = info["utc_offset"]
    anchored = offset is not None and offset == offset
    start = (str(np.datetime64(int(d.start_ns + offset), "ns")) + "Z") if anchored else ""
    pid = info.get("pid")
    return [rel, info["host"], info["application"], info["trace"], int(info["sockid"]),
            "" if pid is None or pid != pid else int(pid), start, d.start_ns, len(d), d.total_bytes,
            d.duration_ns / 1e9]


# ------------------------------------------------------------------ Tmix ---
def export_tmix(layout: Layout, out: str, where: str | None = None, layer: str = "sock",
                adu_gap_s: float = 0.0, concurrent: bool = False) -> Exported:
    """Tmix connection vectors (original ns-2 format), one per selected stream, by start time."""
    vectors, anchored = [], set()
    result = Exported(out)
    for sc in stream_calls(layout, where, layer):
        offset = sc.info["utc_offset"]
        is_anchored = offset is not None and offset == offset
        anchored.add(is_anchored)
        start = sc.demand.start_ns + (int(offset) if is_anchored else 0)
        vectors.append((start, sc))
        result.streams, result.calls = result.streams + 1, result.calls + len(sc.demand)
        result.bytes += sc.demand.total_bytes
    if len(anchored) > 1:
        result.notes.append("streams of traces without a wall-clock anchor start on their own clock, "
                            "not on UTC: their start times are not comparable with the others")
    vectors.sort(key=lambda v: (v[0], v[1].info["trace"], int(v[1].info["sockid"])))
    base = vectors[0][0] if vectors else 0
    with private.replacing(out) as tmp, open(tmp, "wb") as f:
        f.write(_tmix_preamble(layer, adu_gap_s).encode())
        for i, (start, sc) in enumerate(vectors, start=1):
            adus = demand_mod.adu_table(sc.demand, adu_gap_s)
            f.write(_tmix_header(i, (start - base) // 1000, adus, sc.info, concurrent).encode())
            f.write(_tmix_body(adus, concurrent))
    return result


def _tmix_preamble(layer: str, adu_gap_s: float) -> str:
    return ("# Tmix connection vectors (original format) written by magnet library export-tmix\n"
            f"# ADUs: runs of {layer.upper()} calls in one direction at most {adu_gap_s:g} s apart;\n"
            "# '>' = sent by the traced host (the initiator), '<' = received by it; times in microseconds\n")


def _tmix_header(index: int, start_us: int, adus: dict, info: dict, concurrent: bool) -> str:
    n_init = int((adus["direction"] == 0).sum())
    n_acc = len(adus["direction"]) - n_init
    first = (f"CONC {start_us} {n_init} {n_acc} {index} {index}" if concurrent
             else f"SEQ {start_us} {max(n_init, n_acc)} {index} {index}")
    lines = [f"# {info['host']} trace {info['trace']} stream {int(info['sockid']):#x} "
             f"application {info['application']}", first]
    init_win, acc_win = _known(info.get("max_rcv_wnd")), _known(info.get("max_snd_wnd"))
    lines.append(f"w {init_win or DEFAULT_WINDOW} {acc_win or DEFAULT_WINDOW}")
    if _known(info.get("min_srtt_us")):
        lines.append(f"r {_known(info['min_srtt_us'])}")
    if _known(info.get("mss")):
        lines.append(f"m {_known(info['mss'])} {_known(info['mss'])}")
    sent = (info.get("tcp_send_records") or 0) + (info.get("tcp_retrans_records") or 0)
    if sent:
        lines.append(f"l {(info.get('tcp_retrans_records') or 0) / sent:.6f} 0.000000")
    return "\n".join(lines) + "\n"


def _known(value) -> int | None:
    if value is None or value != value or value == 0:
        return None
    return int(value)


def _tmix_body(adus: dict, concurrent: bool) -> bytes:
    """The ADU and wait lines of one vector, built as whole columns.

    SEQ: '> size' / '< size' per ADU, each after the first preceded by 't us', the
    time since the previous ADU ended.  CONC: per side, 'c> size' / 'c< size',
    preceded by 't> us' / 't< us', the time since that side's previous ADU ended
    (or since the connection's first ADU, for a side's first).
    """
    start, end, size, dirn = adus["start_ns"], adus["end_ns"], adus["size"], adus["direction"]
    n = len(size)
    if n == 0:
        return b""
    if concurrent:
        wait = np.zeros(n, np.int64)
        has_wait = np.zeros(n, bool)
        for side in (0, 1):
            at = np.flatnonzero(dirn == side)
            if len(at):
                prev_end = np.r_[start[0], end[at[:-1]]]
                wait[at] = (start[at] - prev_end) // 1000
                has_wait[at] = np.r_[start[at[0]] > start[0], np.ones(len(at) - 1, bool)]
        wait_kind = np.where(dirn == 0, "t> ", "t< ")
        adu_kind = np.where(dirn == 0, "c> ", "c< ")
    else:
        wait = np.r_[0, (start[1:] - end[:-1]) // 1000]
        has_wait = np.r_[False, np.ones(n - 1, bool)]
        wait_kind = np.full(n, "t ")
        adu_kind = np.where(dirn == 0, "> ", "< ")
    kinds = np.column_stack([wait_kind, adu_kind]).ravel()
    values = np.column_stack([wait, size]).ravel()
    keep = np.column_stack([has_wait, np.ones(n, bool)]).ravel()
    lines = pc.binary_join_element_wise(pa.array(kinds[keep]), pc.cast(pa.array(values[keep]), pa.string()),
                                        pa.scalar("\n"), "")
    offsets = np.frombuffer(lines.buffers()[1], np.int32)[lines.offset:lines.offset + len(lines) + 1]
    return lines.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]
