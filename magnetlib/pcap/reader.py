"""The dpkt path: walk the records one by one and decode each packet with dpkt.

The reference reader: every container and link type (classic pcap in both byte
orders, micro- and nanosecond; pcapng), every packet decoded by decode.py.
fast.py computes the same columns without a Python step per packet.
"""
from __future__ import annotations

import numpy as np

from . import files, pcapng
from .capture import Capture
from .columns import PACKET_DTYPE
from .decode import decode

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


class Rows:
    """Row tuples gathered into PACKET_DTYPE blocks as they come: memory stays near the
    size of the result, not of millions of Python tuples."""
    BLOCK = 1 << 16

    def __init__(self):
        self.blocks, self.rows = [], []

    def append(self, r: tuple) -> None:
        self.rows.append(r)
        if len(self.rows) == self.BLOCK:
            self.blocks.append(rows_to_packets(self.rows))
            self.rows = []

    def packets(self) -> np.ndarray:
        return np.concatenate(self.blocks + [rows_to_packets(self.rows)])


def row(time_ns, caplen, origlen, rflags, decoded: tuple) -> tuple:
    ip_len, payload, seq, ack, sport, dport, flags, version, proto, tflags, ip_fields, saddr, daddr = decoded
    return (time_ns, caplen, origlen, ip_len, payload, seq, ack, sport, dport, flags | rflags,
            version, proto, tflags, *ip_fields, saddr, daddr)


def read_dpkt(path: str) -> Capture:
    """Read a pcap or pcapng file packet by packet with dpkt."""
    data, size = files.map_file(path)
    kind = files.container(path, data, size)
    if kind == "pcapng":
        return _read_pcapng(path, data, size)
    header = files.pcap_header(path, data, size)
    rows = Rows()
    walker = files.walk_pcap(header, data, size)
    link = header.linktype
    while True:
        try:
            time_ns, caplen, origlen, rflags, start = next(walker)
        except StopIteration as stop:
            end = stop.value
            break
        rows.append(row(time_ns, caplen, origlen, rflags,
                        decode(link, data[start:start + caplen], origlen)))
    return Capture(path, rows.packets(), "pcap", [link], header.snaplen, header.byteorder,
                   header.nanosecond, [end.problem] if end.problem else [], end.trailing_bytes)


def _read_pcapng(path: str, data, size: int) -> Capture:
    info = pcapng.Walk()
    rows = Rows()
    for time_ns, caplen, origlen, rflags, link, start in pcapng.walk(path, data, size, info):
        rows.append(row(time_ns, caplen, origlen, rflags, decode(link, data[start:start + caplen], origlen)))
    end = info.end
    return Capture(path, rows.packets(), "pcapng", sorted(info.linktypes), info.snaplen,
                   info.byteorder, False, [end.problem] if end.problem else [], end.trailing_bytes,
                   interface_drops=info.drops)
