"""Test captures: packets built by scapy, records written by hand (any byte order, clock,
link type, snaplen), so the readers are checked against bytes nobody in magnet produced."""
from __future__ import annotations

import functools
import struct

from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.layers.l2 import ARP, CookedLinux, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

try:
    from scapy.layers.l2 import CookedLinuxV2
except ImportError:             # older scapy
    CookedLinuxV2 = None

T0 = 1_700_000_000_000_000_000


def _tcp(i: int, payload: int = 100, **kw):
    return TCP(sport=40000 + i, dport=5001, seq=1000 + 7 * i, ack=99 + i, flags="PA", **kw) / Raw(b"\x00" * payload)


def ip_payloads(i: int):
    """Network-layer packets: (bytes, is the plain case the fast path decodes)."""
    v4 = dict(src=f"10.0.{i % 7}.1", dst="192.168.1.2")
    v6 = dict(src=f"fd00::{i % 5 + 1}", dst="2001:db8::2")
    return [
        (IP(**v4) / _tcp(i), True),
        (IP(**v4) / UDP(sport=53, dport=3000 + i) / Raw(b"\x00" * (i % 40)), True),
        (IP(**v4, options=[IPOption_NOP()] * 8) / _tcp(i, 10, options=[("MSS", 1460), ("NOP", None), ("WScale", 7)]), True),
        (IPv6(**v6) / _tcp(i, 1448), True),
        (IPv6(**v6) / UDP(sport=5353, dport=5353) / Raw(b"\x00" * 12), True),
        (IP(**v4) / TCP(sport=1, dport=2, flags="S"), True),
        (IP(**v4) / ICMP() / Raw(b"\x00" * 8), False),
        (IP(**v4, flags="MF") / _tcp(i, 200), False),
        (IP(**v4, frag=10) / Raw(b"\x00" * 64), False),
        (IPv6(**v6) / IPv6ExtHdrHopByHop() / _tcp(i, 5), False),
        (IPv6(**v6) / IPv6ExtHdrFragment(offset=3) / Raw(b"\x00" * 16), False),
    ]


def _loop(order: str, family: int):
    return lambda ip: struct.pack(order, family) + bytes(ip)


ETHER = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")    # no ARP lookups


def framings():
    """link type -> function(IP packet) -> frame bytes, or None when not an IP frame."""
    return {
        1: [lambda ip: bytes(Ether(**ETHER) / ip),
            lambda ip: bytes(Ether(**ETHER) / Dot1Q(vlan=7) / ip),
            lambda ip: bytes(Ether(**ETHER) / Dot1AD(vlan=3) / Dot1Q(vlan=7) / ip)],
        113: [lambda ip: bytes(CookedLinux(proto=0x86DD if ip.version == 6 else 0x0800) / ip)],
        101: [lambda ip: bytes(ip)],
        0: [lambda ip: struct.pack("<I", 2 if ip.version == 4 else 10) + bytes(ip),
            lambda ip: struct.pack(">I", 2 if ip.version == 4 else 30) + bytes(ip)],
        108: [lambda ip: struct.pack(">I", 2 if ip.version == 4 else 24) + bytes(ip)],
        276: [lambda ip: struct.pack(">HHIHBB8s", 0x86DD if ip.version == 6 else 0x0800, 0, 1, 1, 0, 6, b"")
              + bytes(ip)],
    }


@functools.lru_cache(maxsize=None)
def frames(linktype: int, n_rounds: int = 3):
    """(frame bytes, plain) for a link type: every framing of every network packet."""
    out = []
    for i in range(n_rounds):
        for ip, plain in ip_payloads(i):
            for frame in framings()[linktype]:
                out.append((frame(ip), plain))
    if linktype == 1:
        out.append((bytes(Ether(**ETHER) / ARP()), False))
    return tuple(out)


def write_classic(path, frames_, linktype: int, order: str = "<", nano: bool = False,
                  snaplen: int = 65535, cut: int | None = None, tail: bytes = b"") -> None:
    """A classic pcap with our own record writer; `cut` truncates every capture to that many bytes."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for k, data in enumerate(frames_):
        t = T0 + k * 1_234_567
        sec, ns = divmod(t, 1_000_000_000)
        cap = data[:cut] if cut is not None else data
        out.append(struct.pack(order + "IIII", sec, ns if nano else ns // 1000, len(cap), len(data)) + cap)
    with open(path, "wb") as f:
        f.write(b"".join(out) + tail)


def _block(btype: int, body: bytes, order: str = "<") -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack(order + "II", btype, len(body) + 12) + body + struct.pack(order + "I", len(body) + 12)


def write_pcapng(path, packets, order: str = "<", tsresol: int | None = None) -> None:
    """A pcapng of (linktype, frame, time_ns): one interface per link type, enhanced packet blocks."""
    out = [_block(0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1), order)]
    ifaces = {}
    for lt, _, _ in packets:
        if lt not in ifaces:
            opts = (struct.pack(order + "HHB3x", 9, 1, tsresol) if tsresol is not None else b"") + bytes(4)
            out.append(_block(1, struct.pack(order + "HHI", lt, 0, 65535) + opts, order))
            ifaces[lt] = len(ifaces)
    units = 10 ** (tsresol if tsresol is not None else 6)
    for lt, frame, t in packets:
        ticks = t * units // 1_000_000_000
        out.append(_block(6, struct.pack(order + "IIIII", ifaces[lt], ticks >> 32, ticks & 0xFFFFFFFF,
                                         len(frame), len(frame)) + frame, order))
    with open(path, "wb") as f:
        f.write(b"".join(out))
