"""A capture file (pcap, pcapng) read into per-packet columns, with what could not be read."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .columns import LINK_NAMES, MALFORMED, Flag, flag_counts


@dataclass
class PcapFile:
    """Packets of a pcap/pcapng file (PACKET_DTYPE) and the file-level facts.

    problems: what was not read as packets and where (trailing garbage, a
    truncated final record, a corrupt record length); trailing_bytes counts them.
    """
    path: str
    packets: np.ndarray
    format: str                       # "pcap" or "pcapng"
    linktypes: list[int]
    snaplen: int
    byteorder: str
    nanosecond: bool                  # classic pcap with nanosecond timestamps
    problems: list[str] = field(default_factory=list)
    trailing_bytes: int = 0
    engine: str = "dpkt"
    fallback: int = 0                 # packets the fast path handed to dpkt
    interface_drops: dict[int, int] = field(default_factory=dict)   # pcapng if_drop

    def __len__(self) -> int:
        return len(self.packets)

    @property
    def flags(self) -> np.ndarray:
        return self.packets["flags"]

    @property
    def malformed(self) -> np.ndarray:
        return (self.flags & MALFORMED) != 0

    @property
    def ip(self) -> np.ndarray:
        """Packets with usable IP headers (not malformed)."""
        return ~self.malformed & (self.packets["ip_version"] != 0)

    def transport(self, proto: int) -> np.ndarray:
        """Packets of one transport protocol with its header decoded (fragments left out)."""
        p = self.packets
        return self.ip & (p["proto"] == proto) & ((p["flags"] & Flag.FRAGMENT) == 0)

    def flag_counts(self) -> dict[str, int]:
        return flag_counts(self.flags)

    def link_names(self) -> str:
        return ", ".join(LINK_NAMES.get(lt, f"link type {lt} (not decoded)") for lt in self.linktypes)

    @property
    def duration_ns(self) -> int:
        t = self.packets["time_ns"]
        return int(t.max() - t.min()) if len(t) else 0


class PacketStream:
    """A capture file read a chunk of packets at a time: iterate for PACKET_DTYPE arrays in
    file order; `file` holds the file-level facts (its packets empty), complete once the
    iteration has ended (problems, trailing bytes, fallback, link types, drops)."""

    def __init__(self, file: PcapFile, chunks):
        self.file = file
        self._chunks = chunks

    def __iter__(self):
        from ..scan import ahead
        yield from ahead(self._chunks)             # the next chunk is read while this one is used

    def read(self) -> PcapFile:
        """Every packet at once (as PcapFile.packets)."""
        parts = list(self)
        packets = np.concatenate(parts) if parts else self.file.packets
        return replace(self.file, packets=packets)
