"""Capture files: which container a file is, the classic pcap header, and the record walk.

The rules for where records start and where reading stops are here once; the
per-packet walk (reader.py) and the vectorised one (fast.py) both follow them:

  * a record header whose caplen exceeds max(snaplen, MAX_CAPLEN) is a corrupt
    length: nothing after it can be located, so reading stops there;
  * a record that runs past the end of the file is a truncated final record;
  * what is left after the last whole record is reported in bytes, never read as packets.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

from ..errors import TraceError
from .columns import MAX_CAPLEN, Flag

PCAP_HEADER_LEN = 24
RECORD_HEADER_LEN = 16
PCAPNG_SHB = 0x0A0D0D0A
# Magic numbers as read little-endian: (byte order, nanosecond timestamps).
PCAP_MAGIC = {0xA1B2C3D4: ("<", False), 0xA1B23C4D: ("<", True),
              0xD4C3B2A1: (">", False), 0x4D3CB2A1: (">", True)}
MODIFIED_PCAP_MAGIC = {0xA1B2CD34, 0x34CDB2A1}


@dataclass
class PcapHeader:
    byteorder: str
    nanosecond: bool
    version: tuple[int, int]
    snaplen: int
    linktype: int

    @property
    def frac_limit(self) -> int:
        """Sub-second units in a second."""
        return 1_000_000_000 if self.nanosecond else 1_000_000

    @property
    def max_caplen(self) -> int:
        return max(self.snaplen, MAX_CAPLEN)


def map_file(path: str) -> tuple[mmap.mmap | bytes, int]:
    """The file's bytes, memory-mapped (b"" when empty); OSError becomes TraceError."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as e:
        raise TraceError(path, e.strerror or str(e)) from None
    return data, size


def container(path: str, data, size: int) -> str:
    """'pcap' or 'pcapng'; anything else is one clear error."""
    if size == 0:
        raise TraceError(path, "empty file")
    if size < 4:
        raise TraceError(path, f"too short to be a capture file ({size} bytes)")
    magic = struct.unpack_from("<I", data)[0]
    if magic in PCAP_MAGIC:
        return "pcap"
    if magic == PCAPNG_SHB:
        return "pcapng"
    if magic in MODIFIED_PCAP_MAGIC:
        raise TraceError(path, "a Kuznetzov 'modified pcap' file: not supported "
                               "(convert it with editcap -F pcap)")
    raise TraceError(path, f"not a pcap or pcapng file (magic number 0x{magic:08x})")


def pcap_header(path: str, data, size: int) -> PcapHeader:
    if size < PCAP_HEADER_LEN:
        raise TraceError(path, f"truncated pcap file header ({size} of {PCAP_HEADER_LEN} bytes)")
    order, ns = PCAP_MAGIC[struct.unpack_from("<I", data)[0]]
    major, minor, _zone, _sigfigs, snaplen, link = struct.unpack_from(order + "HHiIII", data, 4)
    if major != 2:
        raise TraceError(path, f"pcap format version {major}.{minor} is not one this reader knows (2.x)")
    return PcapHeader(order, ns, (major, minor), snaplen, link & 0xFFFF)


@dataclass
class End:
    """Where reading stopped: the bytes not read as packets, and why (None: a clean end)."""
    trailing_bytes: int = 0
    problem: str | None = None


# Why a walk stops at a record header (both walks use these codes).
STOP_NONE, STOP_SHORT_HEADER, STOP_BOGUS_LENGTH, STOP_TRUNCATED = 0, 1, 2, 3


def stop_end(kind: int, offset: int, size: int, caplen: int = 0) -> End:
    """The End for a walk that stopped at `offset` for reason `kind`."""
    rest = size - offset
    if kind == STOP_NONE:
        return End()
    if kind == STOP_SHORT_HEADER:
        return End(rest, f"{rest} bytes after the last packet at byte {offset} (less than a record header)")
    if kind == STOP_BOGUS_LENGTH:
        return End(rest, f"corrupt record length {caplen} at byte {offset}: "
                         f"the {rest} bytes from there on were not read")
    return End(rest, f"truncated final record at byte {offset} "
                     f"({rest - RECORD_HEADER_LEN} of {caplen} bytes present)")


def record_flags(caplen: int, origlen: int, frac: int, frac_limit: int) -> int:
    return int(Flag.BAD_RECORD) if origlen < caplen or frac >= frac_limit else 0


def walk_pcap(header: PcapHeader, data, size: int):
    """Yield (time_ns, caplen, origlen, record flags, data offset) per record; return an End."""
    unpack = struct.Struct(header.byteorder + "IIII").unpack_from
    scale = 1 if header.nanosecond else 1000
    limit, max_caplen = header.frac_limit, header.max_caplen
    off = PCAP_HEADER_LEN
    while off < size:
        if size - off < RECORD_HEADER_LEN:
            return stop_end(STOP_SHORT_HEADER, off, size)
        sec, frac, caplen, origlen = unpack(data, off)
        if caplen > max_caplen:
            return stop_end(STOP_BOGUS_LENGTH, off, size, caplen)
        if off + RECORD_HEADER_LEN + caplen > size:
            return stop_end(STOP_TRUNCATED, off, size, caplen)
        yield (sec * 1_000_000_000 + frac * scale, caplen, origlen,
               record_flags(caplen, origlen, frac, limit), off + RECORD_HEADER_LEN)
        off += RECORD_HEADER_LEN + caplen
    return End()
