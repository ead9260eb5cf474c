"""Offload artefacts: IP packets larger than the link's MTU.

A capture taken on a sender with TSO/GSO sees the buffers the stack hands to
the NIC (up to 64 KB, or more with BIG TCP, whose IPv4 length field reads 0),
not the frames on the wire; on a receiver, GRO/LRO merges frames the same way.
Either way the capture's "wire" is not the wire: segment sizes and spacing are
the stack's, before (or after) the hardware cut them to MTU size.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .columns import LINK_LOOP, LINK_NULL
from .pcapfile import PcapFile

LOOPBACK_MTU, ETHERNET_MTU = 65536, 1500


def default_mtu(cap: PcapFile) -> int:
    return LOOPBACK_MTU if set(cap.linktypes) <= {LINK_NULL, LINK_LOOP} else ETHERNET_MTU


@dataclass
class Oversize:
    mtu: int
    packets: int = 0
    largest: int = 0
    sources: list[tuple[str, int]] = field(default_factory=list)   # (address, oversize packets)

    def message(self) -> str | None:
        if not self.packets:
            return None
        who = ", ".join(f"{addr} ({n})" for addr, n in self.sources[:4])
        return (f"{self.packets} packets larger than the {self.mtu}-byte MTU (largest {self.largest} "
                f"bytes) from {who}: segmentation/receive offload (TSO/GSO on a sender, GRO/LRO on a "
                f"receiver) was on where this was captured, so these packets are the stack's "
                f"buffers, not frames on the wire (use --mtu if the link's MTU is larger)")


def oversize(cap: PcapFile, mtu: int | None = None) -> Oversize:
    """IP packets whose length exceeds `mtu` (default: 1500, or 65536 on loopback links)."""
    from ..trace import format_addresses
    mtu = mtu or default_mtu(cap)
    p = cap.packets
    big = np.flatnonzero(cap.ip & (p["ip_len"] > mtu))
    report = Oversize(mtu)
    if len(big):
        report.packets, report.largest = len(big), int(p["ip_len"][big].max())
        names, counts = np.unique(format_addresses(p["saddr"][big]).astype(str), return_counts=True)
        order = np.argsort(-counts)
        report.sources = [(str(names[i]), int(counts[i])) for i in order]
    return report
