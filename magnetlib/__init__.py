"""magnetlib: read, write and analyse magnet traces of application-generated traffic.

    import magnetlib
    trace = magnetlib.open("ftp.magnet")          # memory-mapped, either byte order
    trace.records                                 # numpy structured array
    magnetlib.demand.extract(trace, sockid)       # what the application asked for
    magnetlib.metrics.modulation(trace)           # how each layer reshaped it

The names below and the submodules load on first use: `magnet` installs its
signal handlers (magnetlib.signals) before numpy takes its 0.2 s to import.
"""
from __future__ import annotations

import importlib

from .errors import BuildError, MagnetError, TraceError, UsageError

__version__ = "0.1.0"
# name -> (submodule, its name there)
_EXPORTS = {"Clock": ("format", "Clock"), "Event": ("format", "Event"), "ExtValid": ("format", "ExtValid"),
            "MetaKey": ("format", "MetaKey"), "TraceMeta": ("meta", "TraceMeta"), "Trace": ("trace", "Trace"),
            "open": ("trace", "open_trace"), "TraceWriter": ("writer", "TraceWriter"),
            "empty_records": ("writer", "empty_records"), "write": ("writer", "write")}
__all__ = ["BuildError", "Clock", "Event", "ExtValid", "MagnetError", "MetaKey", "Trace", "TraceError",
           "TraceMeta", "TraceWriter", "UsageError", "empty_records", "open", "write", "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        module, attr = _EXPORTS[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f".{name}", __name__)     # magnetlib.demand, .metrics, ...
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
