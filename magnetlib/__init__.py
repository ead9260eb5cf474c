"""magnetlib: read, write and analyse magnet traces of application-generated traffic.

    import magnetlib
    trace = magnetlib.open("ftp.magnet")          # memory-mapped, either byte order
    trace.records                                 # numpy structured array
    magnetlib.demand.extract(trace, sockid)       # what the application asked for
    magnetlib.metrics.modulation(trace)           # how each layer reshaped it
"""
from .errors import TraceError
from .format import Clock, Event, ExtValid, MetaKey
from .meta import TraceMeta
from .trace import Trace, open_trace as open
from . import demand, metrics, synth
from .writer import TraceWriter, empty_records, write

__version__ = "0.1.0"
__all__ = ["Clock", "Event", "ExtValid", "MetaKey", "Trace", "TraceError", "TraceMeta",
           "TraceWriter", "empty_records", "open", "write", "__version__"]
