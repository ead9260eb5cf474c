"""The Python face of a trace library: add traces, query them, run the analyses on an engine."""
from __future__ import annotations

import os

from . import catalog, engines, importer, query
from .catalog import Layout


class Library:
    """A trace library directory (docs/library.md).

    Results come back as pandas DataFrames; query_arrow() returns a pyarrow Table.
    The analyses take engine="duckdb" (default, in this process) or engine="dask"
    with scheduler="tcp://HOST:PORT" (a Dask cluster whose workers see the same
    directory) or scheduler=None (Dask's local threads).
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = False):
        self.path = os.fspath(path)
        self.layout: Layout = catalog.open_layout(path, create=create)

    @classmethod
    def create(cls, path: str | os.PathLike) -> "Library":
        """Open the library at `path`, making an empty one if there is none."""
        return cls(path, create=True)

    # ---------------------------------------------------------- writing ---
    def add(self, paths, application: str | None = None, progress=None,
            network_path: str | None = None) -> list[importer.Added]:
        """Import traces; each is whole or absent, and one already present is skipped.

        network_path names the path they were captured across (the `path` column);
        progress, if given, is called with each importer.Added as it finishes.
        """
        done = []
        with catalog.writer_lock(self.layout):
            catalog.cleanup(self.layout)
            for path in paths:
                added = importer.import_trace(self.layout, os.fspath(path), application, network_path=network_path)
                done.append(added)
                if progress:
                    progress(added)
        return done

    # ---------------------------------------------------------- reading ---
    def traces(self):
        """The catalogue of traces (one row per trace)."""
        return self.query("SELECT * FROM traces ORDER BY host, first_ns, trace")

    def streams(self):
        """The catalogue of streams (one row per stream of every trace)."""
        return self.query("SELECT * FROM streams ORDER BY host, trace, sockid")

    def connect(self, traces: list[str] | None = None):
        """A DuckDB connection with the views traces, streams, records, event_types."""
        return query.connect(self.layout, traces)

    def query_arrow(self, sql: str):
        return query.run(self.connect(), sql, self.path)

    def query(self, sql: str):
        return self.query_arrow(sql).to_pandas()

    # --------------------------------------------------------- analyses ---
    def engine(self, engine: str = "duckdb", scheduler: str | None = None) -> "engines.Engine":
        return engines.make(self.layout, engine, scheduler)

    def demand_stats(self, engine: str = "duckdb", scheduler: str | None = None):
        """Demand per host, application and direction (socket calls that moved data)."""
        return self.engine(engine, scheduler).demand_stats()

    def modulation(self, engine: str = "duckdb", scheduler: str | None = None):
        """Per stream and layer, the columns of magnetlib.metrics.modulation."""
        return self.engine(engine, scheduler).modulation()

    def top_streams(self, n: int = 10, engine: str = "duckdb", scheduler: str | None = None):
        return self.engine(engine, scheduler).top_streams(n)

    def loss(self, bin_s: float = 60.0, engine: str = "duckdb", scheduler: str | None = None):
        """Records and losses per host and time bin."""
        return self.engine(engine, scheduler).loss(bin_s)
