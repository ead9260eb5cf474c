"""pcapng: a block walker that yields packets with their interface's link type and clock.

Sections (each with its own byte order), several interfaces with their own link
types and timestamp resolutions (if_tsresol, if_tsoffset), enhanced, simple and
obsolete packet blocks, and interface statistics (kernel drops).  A block with
an impossible length ends the walk: what follows cannot be located.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..errors import TraceError
from .columns import Flag
from .files import End

SHB, IDB, PB, SPB, ISB, EPB = 0x0A0D0D0A, 1, 2, 3, 5, 6
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_TSRESOL, OPT_TSOFFSET, OPT_ISB_IFDROP = 9, 14, 5


@dataclass
class Interface:
    linktype: int
    snaplen: int
    units_per_s: int = 1_000_000       # default resolution: microseconds
    binary: bool = False               # if_tsresol with the high bit: 2^-n
    exponent: int = 6
    offset_s: int = 0

    def to_ns(self, ticks: int) -> int:
        if self.binary:
            return (ticks * 1_000_000_000 >> self.exponent) + self.offset_s * 1_000_000_000
        if self.exponent <= 9:
            return ticks * 10 ** (9 - self.exponent) + self.offset_s * 1_000_000_000
        return ticks // 10 ** (self.exponent - 9) + self.offset_s * 1_000_000_000


@dataclass
class Walk:
    """What the walk learned beyond the packets."""
    interfaces: list[Interface] = field(default_factory=list)
    linktypes: set[int] = field(default_factory=set)
    snaplen: int = 0
    byteorder: str = "<"
    drops: dict[int, int] = field(default_factory=dict)   # interface (over all sections) -> if_drop
    end: End = field(default_factory=End)


def _options(data, start: int, stop: int, order: str):
    """(code, value bytes) of an option list, stopping at opt_endofopt or the block's end."""
    while start + 4 <= stop:
        code, length = struct.unpack_from(order + "HH", data, start)
        if code == 0 or start + 4 + length > stop:
            return
        yield code, bytes(data[start + 4:start + 4 + length])
        start += 4 + (length + 3) // 4 * 4


def _interface(data, off: int, blen: int, order: str) -> Interface:
    linktype, _, snaplen = struct.unpack_from(order + "HHI", data, off + 8)
    iface = Interface(linktype, snaplen)
    for code, value in _options(data, off + 16, off + blen - 4, order):
        if code == OPT_TSRESOL and value:
            iface.binary, iface.exponent = bool(value[0] & 0x80), value[0] & 0x7F
        elif code == OPT_TSOFFSET and len(value) == 8:
            iface.offset_s = struct.unpack(order + "q", value)[0]
    if not iface.binary and iface.exponent > 30:        # nonsense resolution: keep microseconds
        iface.exponent = 6
    return iface


def _section_order(path: str, data, off: int, size: int) -> str:
    if off + 12 > size:
        raise TraceError(path, "truncated pcapng section header")
    bom = struct.unpack_from("<I", data, off + 8)[0]
    if bom == BYTE_ORDER_MAGIC:
        return "<"
    if bom == struct.unpack("<I", struct.pack(">I", BYTE_ORDER_MAGIC))[0]:
        return ">"
    raise TraceError(path, f"pcapng section header at byte {off} has no byte-order magic")


def walk(path: str, data, size: int, info: Walk):
    """Yield (time_ns, caplen, origlen, flags, linktype, data offset) per packet; set info.end."""
    order = _section_order(path, data, 0, size)
    info.byteorder = order
    off, last_ns, base = 0, 0, 0                 # base: interfaces of earlier sections
    while off < size:
        if size - off < 12:
            info.end = End(size - off, f"{size - off} bytes after the last block at byte {off}")
            return
        btype = struct.unpack_from("<I", data, off)[0]
        if btype == SHB:
            try:
                order = _section_order(path, data, off, size)
            except TraceError:
                info.end = End(size - off, f"corrupt section header at byte {off}: "
                                           f"the {size - off} bytes from there on were not read")
                return
            base = len(info.interfaces)
        btype, blen = struct.unpack_from(order + "II", data, off)
        if blen < 12 or blen % 4 or off + blen > size:
            info.end = End(size - off, f"corrupt block length {blen} at byte {off}: "
                                       f"the {size - off} bytes from there on were not read")
            return
        if btype == IDB and blen >= 20:
            iface = _interface(data, off, blen, order)
            info.interfaces.append(iface)
            info.linktypes.add(iface.linktype)
            info.snaplen = max(info.snaplen, iface.snaplen)
        elif btype in (EPB, PB, SPB):
            packet = _packet(data, off, blen, btype, order, info.interfaces, base, last_ns)
            if packet is not None:
                last_ns = packet[0]
                yield packet
        elif btype == ISB and blen >= 20:
            iface = struct.unpack_from(order + "I", data, off + 8)[0]
            for code, value in _options(data, off + 20, off + blen - 4, order):
                if code == OPT_ISB_IFDROP and len(value) == 8:
                    info.drops[base + iface] = struct.unpack(order + "Q", value)[0]
        off += blen


def _packet(data, off, blen, btype, order, interfaces, base, last_ns):
    body_end = off + blen - 4
    if btype == SPB:
        if blen < 16:
            return None
        iface_id, flags = base, int(Flag.NO_TIMESTAMP)
        origlen = struct.unpack_from(order + "I", data, off + 8)[0]
        start = off + 12
        iface = interfaces[iface_id] if iface_id < len(interfaces) else None
        caplen = min(origlen, body_end - start, iface.snaplen or origlen) if iface else body_end - start
        time_ns = last_ns
    else:
        if blen < 32:
            return None
        if btype == EPB:
            iface_id, hi, lo, caplen, origlen = struct.unpack_from(order + "IIIII", data, off + 8)
        else:
            iface_id, _drops, hi, lo, caplen, origlen = struct.unpack_from(order + "HHIIII", data, off + 8)
        iface_id += base
        start, flags = off + 28, 0
        iface = interfaces[iface_id] if iface_id < len(interfaces) else None
        time_ns = iface.to_ns(hi << 32 | lo) if iface else 0
        if caplen > body_end - start:                   # claims more than the block holds
            caplen, flags = max(body_end - start, 0), int(Flag.BAD_RECORD)
        if origlen < caplen:
            flags |= Flag.BAD_RECORD
    if not 0 <= time_ns < 1 << 63:                      # a resolution no clock ticks at
        time_ns, flags = 0, flags | Flag.BAD_RECORD
    linktype = iface.linktype if iface else -1
    return time_ns, caplen, origlen, flags, linktype, start
