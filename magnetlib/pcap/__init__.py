"""tcpdump captures: read pcap/pcapng into per-packet columns, group flows, compare with traces.

    from magnetlib import pcap
    cap = pcap.read("x.pcap")                 # fast path where it applies, dpkt otherwise
    cap.packets["payload"]                    # numpy columns (columns.PACKET_DTYPE)
    flows = pcap.flows.group(cap)             # 5-tuple flows, both directions
"""
from .capture import Capture
from .columns import MALFORMED, PACKET_DTYPE, Flag
from .reader import read_dpkt
from . import columns, compare, convert, flows, offload, plot, writer


def read(path, engine: str = "auto") -> Capture:
    """Read a capture: engine "fast" (vectorised, classic pcap), "dpkt", or "auto"."""
    import os
    path = os.fspath(path)
    if engine == "dpkt":
        return read_dpkt(path)
    from .fast import read_fast
    cap = read_fast(path)
    if cap is None:
        if engine == "fast":
            from ..errors import TraceError
            raise TraceError(path, "a pcapng file: the fast reader reads classic pcap only "
                                   "(use the dpkt reader)")
        return read_dpkt(path)
    return cap


__all__ = ["Capture", "Flag", "MALFORMED", "PACKET_DTYPE", "read", "read_dpkt",
           "columns", "compare", "convert", "flows", "offload", "plot", "writer"]
