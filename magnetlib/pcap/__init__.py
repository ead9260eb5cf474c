"""tcpdump captures: read pcap/pcapng into per-packet columns, group flows, compare with traces.

    from magnetlib import pcap
    cap = pcap.read("x.pcap")                 # fast path where it applies, dpkt otherwise
    cap.packets["payload"]                    # numpy columns (columns.PACKET_DTYPE)
    flows = pcap.flows.group(cap)             # 5-tuple flows, both directions
"""
from .columns import MALFORMED, PACKET_DTYPE, Flag
from .pcapfile import PacketStream, PcapFile
from .reader import read_dpkt, stream_dpkt
from .summary import Summary
from . import columns, compare, convert, flows, offload, plot, writer


def read(path, engine: str = "auto") -> PcapFile:
    """Read a capture: engine "fast" (vectorised, classic pcap), "dpkt", or "auto"."""
    return stream(path, engine).read()


def stream(path, engine: str = "auto") -> PacketStream:
    """A capture a chunk of packets at a time (memory bounded by a chunk, not the file)."""
    import os
    path = os.fspath(path)
    if engine == "dpkt":
        return stream_dpkt(path)
    from .fast import stream_fast
    packets = stream_fast(path)
    if packets is None:
        if engine == "fast":
            from ..errors import TraceError
            raise TraceError(path, "a pcapng file: the fast reader reads classic pcap only "
                                   "(use the dpkt reader)")
        return stream_dpkt(path)
    return packets


__all__ = ["Flag", "MALFORMED", "PACKET_DTYPE", "PacketStream", "PcapFile", "Summary", "read", "read_dpkt", "stream",
           "columns", "compare", "convert", "flows", "offload", "plot", "writer"]
