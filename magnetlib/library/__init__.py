"""Trace libraries: many traces of many hosts and days, as Parquet, queried as one.

    from magnetlib.library import Library
    lib = Library.create("lib")                   # or Library("lib") for an existing one
    lib.add(["a.magnet", "b.magnet"])             # idempotent, each trace atomic
    lib.query("SELECT host, count(*) FROM records GROUP BY host")   # DuckDB -> DataFrame
    lib.demand_stats(engine="dask", scheduler="tcp://host:8786")    # the same on a cluster

docs/library.md describes the layout, the catalogue and the queries.
"""
from .api import Library

__all__ = ["Library"]
