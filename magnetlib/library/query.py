"""DuckDB over a library: the tables as views, SQL, and the canned analyses in SQL.

Views (a snapshot of the library when the connection was made):
  traces       the catalogue, one row per trace
  streams      the catalogue, one row per stream (trace, sockid)
  records      every record: trace, timestamp_ns, time, sockid, event, size, [ext fields],
               host and day (from the partition path), layer and direction (from the event)
  event_types  event, code, layer, direction
"""
from __future__ import annotations

import numpy as np

from .. import format as fmt
from ..errors import TraceError
from ..format import Event
from . import catalog
from .catalog import Layout
from .schema import RECORD_SCHEMA, STREAM_SCHEMA, TRACE_SCHEMA, empty, event_types

# In the column order of magnetlib.metrics.series_table.
QUANTILES = (0.5, 0.05, 0.95)
SPACING_QUANTILES = (0.5, 0.05, 0.95, 0.99)
SOCK_EVENTS = ("SOCK_SEND", "SOCK_RECV")
NETWORK_NAMES = tuple(Event(ev).name for ev in sorted(fmt.NETWORK_EVENTS))


def connect(layout: Layout, traces: list[str] | None = None):
    """An in-memory DuckDB connection with the library's views (of `traces`, default all)."""
    import duckdb
    import pyarrow as pa
    con = duckdb.connect(config={"preserve_insertion_order": False})
    con.register("event_types", event_types())
    _macros(con)
    committed = catalog.committed(layout)
    if traces is None:
        traces = committed
    if committed:
        con.execute(f"CREATE VIEW traces AS SELECT * FROM read_parquet({_lit(str(layout.traces_file))}) "
                    f"WHERE trace IN {_lit_list(traces or [''])}")
    else:
        con.register("traces", empty(TRACE_SCHEMA))
    streams = catalog.stream_files(layout, traces)
    if streams:
        con.execute(f"CREATE VIEW streams AS SELECT * FROM read_parquet({_lit_list(streams)}, union_by_name=true)")
    else:
        con.register("streams", empty(STREAM_SCHEMA))
    files = catalog.event_files(layout, traces)
    if files:
        source = parquet_source(files)
    else:
        con.register("_no_records", pa.table({**{f.name: pa.array([], f.type) for f in RECORD_SCHEMA},
                                              "host": pa.array([], pa.string()), "day": pa.array([], pa.string())}))
        source = "_no_records"
    con.execute(f"CREATE VIEW records AS SELECT *, layer_of(event) AS layer, direction_of(event) AS direction "
                f"FROM {source}")
    return con


def parquet_source(files: list[str]) -> str:
    """Record files as one table, with host and day from their partition directories."""
    return (f"read_parquet({_lit_list(files)}, hive_partitioning=true, union_by_name=true, "
            "hive_types={'host': VARCHAR, 'day': VARCHAR})")


def _macros(con) -> None:
    """layer_of(event), direction_of(event), and cv(std, mean) as magnetlib.metrics defines it."""
    layers = " ".join(f"WHEN {_lit(ev.name)} THEN {_lit(spec['layer'])}" for ev, spec in fmt.EVENT_SPEC.items())
    dirs = " ".join(f"WHEN {_lit(ev.name)} THEN {_lit(spec['direction'])}"
                    for ev, spec in fmt.EVENT_SPEC.items() if "direction" in spec)
    con.execute(f"CREATE MACRO layer_of(e) AS CASE e {layers} END")
    con.execute(f"CREATE MACRO direction_of(e) AS CASE e {dirs} END")
    # metrics._cv: std/mean, with rounding noise of a constant series read as 0.
    con.execute("CREATE MACRO cv(s, m) AS CASE WHEN abs(s / m) < 1e-9 THEN 0.0 ELSE s / m END")


def _lit(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _lit_list(items) -> str:
    return "[" + ", ".join(_lit(i) for i in items) + "]"


def run(con, sql: str, where: str):
    """Run SQL; a DuckDB error becomes one line naming the library."""
    import duckdb
    try:
        return con.sql(sql).to_arrow_table()
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TraceError(where, f"query failed: {first}") from None


# ------------------------------------------------------------ canned SQL ---
def demand_sql() -> str:
    """Per host, application and direction: the socket calls (the demand) of its streams."""
    return f"""
    WITH per_stream AS (
        SELECT host, trace, sockid, direction, count(*) AS calls, sum(size) AS bytes,
               sum(size::DOUBLE * size) AS sumsq, min(size) AS min_size, max(size) AS max_size,
               max(timestamp_ns) - min(timestamp_ns) AS span_ns
        FROM records WHERE event IN {_in(SOCK_EVENTS)} AND size > 0 AND sockid <> 0
        GROUP BY ALL)
    SELECT p.host, s.application, p.direction, count(*) AS streams, sum(p.calls)::BIGINT AS calls,
           sum(p.bytes)::BIGINT AS bytes, sum(p.bytes) / sum(p.calls) AS mean_size,
           sqrt(greatest(sum(p.sumsq) / sum(p.calls) - (sum(p.bytes) / sum(p.calls)) ** 2, 0)) AS std_size,
           min(p.min_size)::BIGINT AS min_size, max(p.max_size)::BIGINT AS max_size,
           sum(p.span_ns) / 1e9 / nullif(sum(p.calls - 1), 0) AS mean_gap_s,
           sum(p.bytes) * 8 / nullif(sum(p.span_ns) / 1e9, 0) AS rate_bps
    FROM per_stream p JOIN (SELECT trace, sockid, application FROM streams) s USING (trace, sockid)
    GROUP BY ALL ORDER BY p.host, s.application, p.direction"""


def modulation_sql(source: str = "records") -> str:
    """Per stream and layer: the columns of magnetlib.metrics.modulation (Table II and more).

    Run it on one trace's records at a time (source = parquet_source(its files)):
    the gaps need each stream's events sorted, and sorting one trace at a time
    bounds the memory by the largest trace rather than by the library."""
    size_q = ", ".join(f"qs[{i + 1}] AS p{q * 100:g}_size" for i, q in enumerate(QUANTILES))
    gap_q = ", ".join(f"qg[{i + 1}] AS p{q * 100:g}_spacing_s" for i, q in enumerate(SPACING_QUANTILES))
    return f"""
    WITH d AS (
        SELECT host, trace, sockid, layer_of(event) AS layer, direction_of(event) AS direction,
               event, timestamp_ns AS ns, size
        FROM {source} WHERE event IN {_in(NETWORK_NAMES)} AND size > 0 AND sockid <> 0),
    g AS (
        SELECT *, (ns - lag(ns) OVER (PARTITION BY trace, sockid, layer, direction ORDER BY ns)) / 1e9 AS gap
        FROM d),
    a AS (
        SELECT host, trace, sockid, layer, direction,
               count(*) AS events, count(*) FILTER (WHERE event = 'TCP_RETRANS') AS retrans,
               sum(size)::BIGINT AS "bytes", avg(size) AS mean_size, quantile_cont(size, {list(QUANTILES)}) AS qs,
               cv(stddev_pop(size), avg(size)) AS cv_size, avg(gap) AS mean_spacing_s,
               quantile_cont(gap, {list(SPACING_QUANTILES)}) AS qg, cv(stddev_pop(gap), avg(gap)) AS cv_spacing,
               min(ns) AS first_ns, max(ns) AS last_ns
        FROM g GROUP BY ALL)
    SELECT a.host, s.application, a.trace, a.sockid, layer, direction, events, retrans, "bytes", mean_size,
           {size_q}, cv_size, mean_spacing_s, {gap_q}, cv_spacing,
           (last_ns - first_ns) / 1e9 AS span_s,
           CASE WHEN last_ns > first_ns THEN "bytes" * 8 / ((last_ns - first_ns) / 1e9) END AS throughput_bps,
           first_ns
    FROM a JOIN (SELECT trace, sockid, application FROM streams) s USING (trace, sockid)"""


def top_sql(n: int) -> str:
    return f"""
    SELECT host, application, trace, sockid, pid, top_layer, bytes,
           sock_send_bytes, sock_recv_bytes, dev_send_bytes, dev_recv_bytes,
           first_time, (last_ns - first_ns) / 1e9 AS duration_s
    FROM streams ORDER BY bytes DESC, trace, sockid LIMIT {int(n)}"""


def loss_sql(bin_ns: int) -> str:
    """Records and losses per host and time bin, on UTC where traces are anchored,
    else on each trace's own clock (timeline = the trace id)."""
    return f"""
    WITH b AS (
        SELECT host, CASE WHEN time IS NULL THEN trace ELSE 'utc' END AS timeline,
               coalesce(epoch_ns(time), timestamp_ns) // {int(bin_ns)} * {int(bin_ns)} AS bin_start_ns,
               event, size
        FROM records)
    SELECT host, timeline, bin_start_ns,
           count(*) FILTER (WHERE event <> 'LOST') AS recorded,
           coalesce(sum(size) FILTER (WHERE event = 'LOST'), 0)::BIGINT AS lost
    FROM b GROUP BY ALL ORDER BY host, timeline, bin_start_ns"""


def _in(names) -> str:
    return "(" + ", ".join(_lit(n) for n in names) + ")"


# --------------------------------------------------- results as DataFrames ---
def sort_modulation(frame):
    """Rows in the order magnet stats prints them: per stream, the send path top-down, then receive."""
    from ..metrics import LAYER_ROWS
    rank = {row: i for i, row in enumerate(LAYER_ROWS)}
    frame = frame.assign(_rank=[rank[(l, d)] for l, d in zip(frame["layer"], frame["direction"])])
    return frame.sort_values(["host", "trace", "sockid", "_rank"]).drop(columns="_rank").reset_index(drop=True)


def finish_loss(frame):
    """Add the loss share and the bin start as a date where the timeline is UTC."""
    import pandas as pd
    total = frame["recorded"] + frame["lost"]
    frame["lost_pct"] = np.where(total > 0, 100.0 * frame["lost"] / total.where(total > 0, 1), 0.0)
    start = pd.to_datetime(frame["bin_start_ns"].astype(np.int64), unit="ns", utc=True)
    frame["bin_start"] = start.where(frame["timeline"] == "utc")
    return frame.reset_index(drop=True)
