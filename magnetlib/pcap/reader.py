"""The dpkt path: walk the records one by one and decode each packet with dpkt.

The reference reader: every container and link type (classic pcap in both byte
orders, micro- and nanosecond; pcapng), every packet decoded by decode.py.
fast.py computes the same columns without a Python step per packet.
"""
from __future__ import annotations

import numpy as np

from . import files, pcapng
from .columns import PACKET_DTYPE
from .decode import decode
from .pcapfile import PacketStream, PcapFile

# PACKET_DTYPE with the addresses as 16-byte strings: rows built from Python
# tuples (bytes for addresses) convert in one call, then view as PACKET_DTYPE.
ROW_DTYPE = np.dtype({"names": list(PACKET_DTYPE.names),
                      "formats": ["S16" if n in ("saddr", "daddr") else PACKET_DTYPE.fields[n][0]
                                  for n in PACKET_DTYPE.names],
                      "offsets": [PACKET_DTYPE.fields[n][1] for n in PACKET_DTYPE.names],
                      "itemsize": PACKET_DTYPE.itemsize})
# Order of the columns in a row tuple: the record's, then decode()'s.
ROW_ORDER = ("time_ns", "caplen", "origlen", "ip_len", "payload", "seq", "ack", "sport", "dport",
             "flags", "ip_version", "proto", "tcp_flags", "ip_tos", "ip_ttl", "ip_id", "ip_frag_off",
             "saddr", "daddr")
_ROW_TUPLE_DTYPE = np.dtype([(n, ROW_DTYPE.fields[n][0]) for n in ROW_ORDER])


def rows_to_packets(rows: list[tuple]) -> np.ndarray:
    """Row tuples in ROW_ORDER to a PACKET_DTYPE array."""
    packed = np.array(rows, dtype=_ROW_TUPLE_DTYPE) if rows else np.zeros(0, _ROW_TUPLE_DTYPE)
    out = np.zeros(len(packed), ROW_DTYPE)
    for name in ROW_ORDER:
        out[name] = packed[name]
    return out.view(PACKET_DTYPE)


def row(time_ns, caplen, origlen, rflags, decoded: tuple) -> tuple:
    ip_len, payload, seq, ack, sport, dport, flags, version, proto, tflags, ip_fields, saddr, daddr = decoded
    return (time_ns, caplen, origlen, ip_len, payload, seq, ack, sport, dport, flags | rflags,
            version, proto, tflags, *ip_fields, saddr, daddr)


BLOCK = 1 << 16          # packets decoded one by one, then converted to columns together


def read_dpkt(path: str) -> PcapFile:
    """Read a pcap or pcapng file packet by packet with dpkt."""
    return stream_dpkt(path).read()


def stream_dpkt(path: str) -> PacketStream:
    """A pcap or pcapng file decoded packet by packet with dpkt, a block of packets at a time."""
    data, size = files.map_file(path)
    empty = np.zeros(0, PACKET_DTYPE)
    if files.container(path, data, size) == "pcapng":
        cap = PcapFile(path, empty, "pcapng", [], 0, "<", False)
        return PacketStream(cap, _blocks(_pcapng_rows(cap, data, size)))
    header = files.pcap_header(path, data, size)
    cap = PcapFile(path, empty, "pcap", [header.linktype], header.snaplen, header.byteorder, header.nanosecond)
    return PacketStream(cap, _blocks(_pcap_rows(cap, header, data, size)))


def _blocks(rows):
    """Row tuples gathered into PACKET_DTYPE blocks as they come: memory stays near the
    size of a block, not of millions of Python tuples."""
    block = []
    for r in rows:
        block.append(r)
        if len(block) == BLOCK:
            yield rows_to_packets(block)
            block = []
    if block:
        yield rows_to_packets(block)


def _pcap_rows(cap: PcapFile, header: files.PcapHeader, data, size: int):
    walker = files.walk_pcap(header, data, size)
    link = header.linktype
    while True:
        try:
            time_ns, caplen, origlen, rflags, start = next(walker)
        except StopIteration as stop:
            _ended(cap, stop.value)
            return
        yield row(time_ns, caplen, origlen, rflags, decode(link, data[start:start + caplen], origlen))


def _pcapng_rows(cap: PcapFile, data, size: int):
    info = pcapng.Walk()
    for time_ns, caplen, origlen, rflags, link, start in pcapng.walk(cap.path, data, size, info):
        yield row(time_ns, caplen, origlen, rflags, decode(link, data[start:start + caplen], origlen))
    cap.linktypes, cap.snaplen, cap.byteorder = sorted(info.linktypes), info.snaplen, info.byteorder
    cap.interface_drops = info.drops
    _ended(cap, info.end)


def _ended(cap: PcapFile, end: files.End) -> None:
    cap.problems, cap.trailing_bytes = ([end.problem] if end.problem else []), end.trailing_bytes
