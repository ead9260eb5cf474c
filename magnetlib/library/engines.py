"""The analyses on an engine: DuckDB in this process, or Dask on a cluster, same answers.

The Dask engine reads the same Parquet files (one task per file, or per trace
where an analysis needs a stream's events together), reduces partial
aggregates on the cluster, and finishes the small per-stream tables here.
Workers must see the library at the same path (a shared file system) and have
magnet installed.

map_params() runs any function over parameter sets on the same choice of
engine: the hook for parameter sweeps of the replay experiments.
"""
from __future__ import annotations

import itertools
import os
from contextlib import contextmanager

import numpy as np

from ..errors import TraceError
from . import catalog, query
from .catalog import Layout
from .schema import EVENT_NAMES, RECORD_SCHEMA, STREAM_SCHEMA

ENGINES = ("duckdb", "dask")
DEMAND_COLUMNS = ["host", "application", "direction", "streams", "calls", "bytes", "mean_size", "std_size",
                  "min_size", "max_size", "mean_gap_s", "rate_bps"]
TOP_COLUMNS = ["host", "application", "trace", "sockid", "pid", "top_layer", "bytes", "sock_send_bytes",
               "sock_recv_bytes", "dev_send_bytes", "dev_recv_bytes", "first_time", "duration_s"]
LOSS_COLUMNS = ["host", "timeline", "bin_start", "bin_start_ns", "recorded", "lost", "lost_pct"]
CONNECT_TIMEOUT = "5s"          # to reach a Dask scheduler


def make(layout: Layout, engine: str = "duckdb", scheduler: str | None = None) -> "Engine":
    if engine == "duckdb":
        if scheduler:
            raise TraceError(str(layout.root), "--scheduler goes with --engine dask")
        return DuckDBEngine(layout)
    if engine == "dask":
        return DaskEngine(layout, scheduler)
    raise TraceError(str(layout.root), f"unknown engine {engine!r} (use one of {', '.join(ENGINES)})")


class Engine:
    def __init__(self, layout: Layout):
        self.layout = layout
        self.where = str(layout.root)


class DuckDBEngine(Engine):
    def _frame(self, sql: str):
        return query.run(query.connect(self.layout), sql, self.where).to_pandas()

    def demand_stats(self):
        return _demand_types(self._frame(query.demand_sql()))

    def modulation(self):
        import pyarrow as pa
        con = query.connect(self.layout)
        parts = [query.run(con, query.modulation_sql(query.parquet_source(files)), self.where)
                 for files in _by_trace(catalog.event_files(self.layout))]
        if not parts:
            return query.run(con, query.modulation_sql(), self.where).to_pandas()
        return query.sort_modulation(pa.concat_tables(parts).to_pandas())

    def top_streams(self, n: int = 10):
        return self._frame(query.top_sql(n))[TOP_COLUMNS]

    def loss(self, bin_s: float = 60.0):
        return query.finish_loss(self._frame(query.loss_sql(_bin_ns(bin_s))))[LOSS_COLUMNS]


# ------------------------------------------------------------------ Dask ---
class DaskEngine(Engine):
    def __init__(self, layout: Layout, scheduler: str | None):
        super().__init__(layout)
        self.scheduler = scheduler
        try:
            import dask.dataframe  # noqa: F401
            if scheduler:
                import distributed  # noqa: F401
        except ImportError as e:
            raise TraceError(self.where, f"the dask engine needs {e.name} "
                                         "(pip install 'magnet[library]')") from None

    @contextmanager
    def _compute(self):
        """A function that computes dask collections on the chosen scheduler."""
        import dask
        if not self.scheduler:
            yield lambda *c: dask.compute(*c, scheduler="threads")
            return
        from distributed import Client
        try:
            client = Client(self.scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except OSError as e:
            raise TraceError(self.scheduler, f"cannot reach the Dask scheduler: {e}") from None
        with client:
            yield lambda *c: tuple(client.gather(client.compute(list(c))))

    def _files(self) -> list[str]:
        return [os.path.abspath(f) for f in catalog.event_files(self.layout)]

    def _streams(self):
        import pandas as pd
        import pyarrow.parquet as pq
        files = catalog.stream_files(self.layout)
        if not files:
            return pd.DataFrame(columns=["trace", "sockid", "application", "host"])
        return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)

    def demand_stats(self):
        import dask.dataframe as dd
        import pandas as pd
        files = self._files()
        if not files:
            return pd.DataFrame(columns=DEMAND_COLUMNS)
        parts = dd.from_map(demand_partials, files, meta=_demand_of(_empty(DEMAND_READ), "", ""))
        keys = ["host", "trace", "sockid", "direction"]
        per_stream = parts.groupby(keys).agg({"calls": "sum", "bytes": "sum", "sumsq": "sum", "min_size": "min",
                                              "max_size": "max", "first_ns": "min", "last_ns": "max"})
        with self._compute() as compute:
            (s,) = compute(per_stream)
        s = s.reset_index()
        s = s.merge(self._streams()[["trace", "sockid", "application"]], on=["trace", "sockid"])
        s["span_ns"] = s["last_ns"] - s["first_ns"]
        s["gaps"] = s["calls"] - 1
        g = s.groupby(["host", "application", "direction"]).agg(
            streams=("calls", "size"), calls=("calls", "sum"), bytes=("bytes", "sum"), sumsq=("sumsq", "sum"),
            min_size=("min_size", "min"), max_size=("max_size", "max"), span_ns=("span_ns", "sum"),
            gaps=("gaps", "sum")).reset_index()
        mean = g["bytes"] / g["calls"]
        g["mean_size"] = mean
        g["std_size"] = np.sqrt(np.maximum(g["sumsq"] / g["calls"] - mean ** 2, 0))
        g["mean_gap_s"] = (g["span_ns"] / 1e9 / g["gaps"].where(g["gaps"] > 0)).astype(float)
        g["rate_bps"] = (g["bytes"] * 8 / (g["span_ns"] / 1e9).where(g["span_ns"] > 0)).astype(float)
        return _demand_types(g.sort_values(["host", "application", "direction"]).reset_index(drop=True))

    def modulation(self):
        import dask.dataframe as dd
        import pandas as pd
        groups = _by_trace(self._files())
        if not groups:
            return pd.DataFrame()
        with self._compute() as compute:
            (table,) = compute(dd.from_map(modulation_of_files, groups,
                                           meta=_modulation_of(_empty(DEMAND_READ), "", "")))
        table = table.merge(self._streams()[["trace", "sockid", "application"]], on=["trace", "sockid"])
        cols = ["host", "application", "trace"] + [c for c in table.columns if c not in ("host", "application", "trace")]
        return query.sort_modulation(table[cols])

    def top_streams(self, n: int = 10):
        import dask.dataframe as dd
        import pandas as pd
        files = [os.path.abspath(f) for f in catalog.stream_files(self.layout)]
        if not files:
            return pd.DataFrame(columns=TOP_COLUMNS)
        with self._compute() as compute:
            (top,) = compute(dd.from_map(top_of_file, files, n=n, meta=top_of_file(None, n)))
        return _top(top, n).reset_index(drop=True)

    def loss(self, bin_s: float = 60.0):
        import dask.dataframe as dd
        import pandas as pd
        files = self._files()
        if not files:
            return pd.DataFrame(columns=LOSS_COLUMNS)
        bin_ns = _bin_ns(bin_s)
        parts = dd.from_map(loss_partials, files, bin_ns=bin_ns, meta=_loss_of(_empty(LOSS_READ), bin_ns, "", ""))
        summed = parts.groupby(["host", "timeline", "bin_start_ns"]).agg({"recorded": "sum", "lost": "sum"})
        with self._compute() as compute:
            (frame,) = compute(summed)
        frame = frame.reset_index().sort_values(["host", "timeline", "bin_start_ns"])
        return query.finish_loss(frame)[LOSS_COLUMNS]


# Tasks: module-level functions, so that workers can import them.
def _partition(path: str) -> tuple[str, str]:
    """(host, day) of a record file, from its Hive partition directories."""
    day_dir = os.path.basename(os.path.dirname(path))
    host_dir = os.path.basename(os.path.dirname(os.path.dirname(path)))
    return host_dir.split("=", 1)[1], day_dir.split("=", 1)[1]


_CODES = None


def _event_codes(table) -> np.ndarray:
    """Event codes of a table's dictionary-encoded event column."""
    global _CODES
    if _CODES is None:
        from ..format import Event
        _CODES = np.array([int(Event[name]) for name in EVENT_NAMES], np.int64)
    col = table.column("event").combine_chunks()
    names = np.array(col.dictionary.to_pylist())
    lookup = _CODES[[EVENT_NAMES.index(n) for n in names]]
    return lookup[col.indices.to_numpy(zero_copy_only=False)]


def _read(path: str, columns: list[str]):
    import pyarrow.parquet as pq
    return pq.read_table(path, columns=columns)


def _empty(columns: list[str]):
    """No records, with the columns' types: what the tasks' result types are inferred from
    (dask would otherwise compute a first partition here just to learn them)."""
    return RECORD_SCHEMA.empty_table().select(columns)


DEMAND_READ = ["sockid", "event", "size", "timestamp_ns"]


def demand_partials(path: str):
    """Per stream and direction of one file: calls, bytes, sum of squares, extremes, time range."""
    return _demand_of(_read(path, DEMAND_READ), _partition(path)[0], _trace_of(path))


def _demand_of(t, host: str, trace: str):
    import pandas as pd
    from ..format import Event
    code = _event_codes(t)
    size = t.column("size").to_numpy()
    sid = t.column("sockid").to_numpy()
    keep = np.isin(code, [Event.SOCK_SEND, Event.SOCK_RECV]) & (size > 0) & (sid != 0)
    frame = pd.DataFrame({
        "host": host, "trace": trace, "sockid": sid[keep],
        "direction": np.where(code[keep] == Event.SOCK_RECV, "recv", "send"),
        "size": size[keep].astype(np.int64), "ns": t.column("timestamp_ns").to_numpy()[keep]})
    frame["sq"] = frame["size"].astype(np.float64) ** 2
    return frame.groupby(["host", "trace", "sockid", "direction"], as_index=False).agg(
        calls=("size", "size"), bytes=("size", "sum"), sumsq=("sq", "sum"), min_size=("size", "min"),
        max_size=("size", "max"), first_ns=("ns", "min"), last_ns=("ns", "max"))


def _trace_of(path: str) -> str:
    """The trace a record file belongs to: its name is TRACE-NNNN.parquet."""
    return os.path.basename(path).split("-", 1)[0]


def modulation_of_files(files: list[str]):
    """magnetlib.metrics.modulation of one trace's records, read from its Parquet files."""
    import pyarrow as pa
    t = pa.concat_tables(_read(f, DEMAND_READ) for f in files)
    return _modulation_of(t, _partition(files[0])[0], _trace_of(files[0]))


def _modulation_of(t, host: str, trace: str):
    from ..metrics import modulation_of
    table = modulation_of(t.column("timestamp_ns").to_numpy(), t.column("size").to_numpy().astype(np.int64),
                          _event_codes(t), t.column("sockid").to_numpy())
    table.insert(0, "host", host)
    table.insert(1, "trace", trace)
    return table


def top_of_file(path: str | None, n: int):
    import pyarrow.parquet as pq
    frame = (pq.read_table(path) if path else STREAM_SCHEMA.empty_table()).to_pandas()
    frame["duration_s"] = (frame["last_ns"] - frame["first_ns"]) / 1e9
    return _top(frame[TOP_COLUMNS], n)


def _top(frame, n: int):
    return frame.sort_values(["bytes", "trace", "sockid"], ascending=[False, True, True]).head(n)


LOSS_READ = ["timestamp_ns", "time", "event", "size"]


def loss_partials(path: str, bin_ns: int):
    return _loss_of(_read(path, LOSS_READ), bin_ns, _partition(path)[0], _trace_of(path))


def _loss_of(t, bin_ns: int, host: str, trace: str):
    import pandas as pd
    from ..format import Event
    code = _event_codes(t)
    anchored = t.column("time").null_count == 0
    ns = (t.column("time").cast("int64") if anchored else t.column("timestamp_ns")).to_numpy()
    lost = code == Event.LOST
    frame = pd.DataFrame({"bin_start_ns": ns // bin_ns * bin_ns, "recorded": (~lost).astype(np.int64),
                          "lost": np.where(lost, t.column("size").to_numpy(), 0).astype(np.int64)})
    frame = frame.groupby("bin_start_ns", as_index=False).sum()
    frame.insert(0, "host", host)
    frame.insert(1, "timeline", "utc" if anchored else trace)
    return frame


def _by_trace(files: list[str]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for f in files:
        groups.setdefault(_trace_of(f), []).append(f)
    return [groups[t] for t in sorted(groups)]


def _bin_ns(bin_s: float) -> int:
    if not bin_s > 0:
        raise TraceError("--bin", f"a time bin must be positive, not {bin_s}")
    return int(round(bin_s * 1e9))


def _demand_types(frame):
    frame = frame[DEMAND_COLUMNS].copy()
    for col in ("streams", "calls", "bytes", "min_size", "max_size"):
        frame[col] = frame[col].astype(np.int64)
    for col in ("mean_size", "std_size", "mean_gap_s", "rate_bps"):
        frame[col] = frame[col].astype(np.float64)
    return frame.reset_index(drop=True)


# -------------------------------------------------------- parameter sweeps ---
def param_grid(**axes) -> list[dict]:
    """Every combination of the given axes: param_grid(mss=[536, 1448], rate=[1e6, 1e7])."""
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*(axes[n] for n in names))]


def _call(fn, params):
    return fn(**params) if isinstance(params, dict) else fn(params)


def map_params(fn, param_sets, engine: str = "local", scheduler: str | None = None) -> list:
    """fn applied to each parameter set (a dict is passed as keywords), results in order.

    engine "local" (or "duckdb") runs here, one after another; "dask" runs the sets
    as tasks on the cluster at `scheduler` (or on local threads without one).
    """
    params = list(param_sets)
    if engine in ("local", "duckdb"):
        return [_call(fn, p) for p in params]
    if engine != "dask":
        raise ValueError(f"unknown engine {engine!r} (use local or dask)")
    if not scheduler:
        import dask
        return list(dask.compute(*[dask.delayed(_call)(fn, p) for p in params], scheduler="threads"))
    from distributed import Client
    with Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False) as client:
        return client.gather(client.map(_call, [fn] * len(params), params, pure=False))
