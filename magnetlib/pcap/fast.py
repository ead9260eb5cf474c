"""The fast path: classic pcap decoded over the memory-mapped file, in C or numpy.

No Python object per packet.  Two steps, each as a C loop (fastpath.c, built on
first use by magnetlib.native) or, without a C compiler, as numpy does it below:

1. Record offsets.  Each record's start depends on the one before (start +
   16 + caplen), a chain no array operation computes at once.  The file is
   cut into lanes; each lane guesses its first record (the first position
   whose header looks like one, checked three records deep), and all lanes
   walk their records in lock step, one numpy step per record of the longest
   lane (about sqrt(records) steps in all).  A lane's guess is accepted only
   when the lane before it, itself accepted, ends exactly there; a lane that
   guessed wrong is walked again from where its predecessor ended.  So the
   offsets are exactly those of a sequential walk, whatever the guesses.

2. Columns.  Record headers, link, IP and transport headers are gathered at
   those offsets through structured numpy views with a stride of one byte
   (fields at any offset, in either byte order), and the plain case is
   computed for every packet at once: Ethernet (up to two VLAN tags), Linux
   cooked v1/v2, raw IP, loopback; IPv4 (with options) or IPv6; TCP or UDP.
   Every other packet (ARP, fragments, IPv6 extension headers, anything
   truncated or malformed) goes to decode.py, the dpkt decoder, so the result
   equals reader.py's column for column.  Chunks are decoded on up to four
   threads: numpy releases the GIL.
"""
from __future__ import annotations

import ctypes
import math
import sys

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import native
from ..native import I32, I64, PTR
from . import files
from .columns import (AF_INET, AF_INET6, ETH_8021Q, ETH_IP, ETH_IP6, ETH_VLAN, IPPROTO_TCP,
                      IPPROTO_UDP, LINK_ETHERNET, LINK_IPV4, LINK_IPV6, LINK_LOOP, LINK_NULL,
                      LINK_SLL, LINK_SLL2, PACKET_DTYPE, SUPPORTED_LINKS, Flag)
from .decode import decode
from .files import RECORD_HEADER_LEN as RH
from ..scan import in_parallel, release_pages as release, split
from .pcapfile import PacketStream, PcapFile
from .reader import row, rows_to_packets

MAX_LANES = 4096
SYNC_WINDOW = 2048           # bytes searched for a lane's first record
SYNC_DEPTH = 3               # records a guess must chain through
SYNC_TRIES = 8               # candidates tried per lane
CHUNK_PACKETS = 1 << 17      # packets decoded at a time: temporaries stay small
MAX_SPAN_S = 5 * 366 * 86400  # a guessed record's time: within this of the first record's


def _hdr_dtype(order: str) -> np.dtype:
    return np.dtype({"names": ["sec", "frac", "caplen", "origlen"], "formats": [order + "u4"] * 4,
                     "offsets": [0, 4, 8, 12], "itemsize": RH})


def _view(data, size: int, dtype, order: str | None = None) -> np.ndarray:
    """An array of `dtype` starting at every byte of the file (stride 1, no copy)."""
    dtype = np.dtype(order + dtype) if order else np.dtype(dtype)
    return np.ndarray((size - dtype.itemsize + 1,), dtype, buffer=data, offset=0, strides=(1,))


# ------------------------------------------------------------ C loops ---
SIGNATURES = {
    "magnet_pcap_walk": ([PTR, I64, I64, I64, I32, I64, PTR, PTR], I64),
    "magnet_pcap_decode": ([PTR, I64, PTR, I64, I32, I64, I64, I32, I32, PTR, PTR], I64),
    "magnet_packet_layout": ([PTR, I64], I64),
    "magnet_flows_new": ([], PTR),
    "magnet_flows_free": ([PTR], None),
    "magnet_flows_lookup": ([PTR, PTR, PTR, I64, PTR, PTR, PTR], I64),
}


def c_loops() -> ctypes.CDLL | None:
    """fastpath.c's walk, decode and flow lookup, or None (no compiler, or MAGNET_NATIVE=0)."""
    lib = native.library("pcap/fastpath.c", SIGNATURES)
    if lib is None or getattr(lib, "checked", False):
        return lib
    offsets = np.zeros(len(PACKET_DTYPE.names), np.int64)
    itemsize = lib.magnet_packet_layout(offsets.ctypes.data, len(offsets))
    if itemsize != PACKET_DTYPE.itemsize or offsets.tolist() != [
            PACKET_DTYPE.fields[name][1] for name in PACKET_DTYPE.names]:
        raise RuntimeError("fastpath.c: struct packet does not match columns.PACKET_DTYPE")
    lib.checked = True
    return lib


def _address(data) -> int:
    """Where the mapped file's bytes are (read-only: C only reads them)."""
    return np.frombuffer(data, np.uint8).ctypes.data if len(data) else 0


def _swapped(header: files.PcapHeader) -> int:
    return int(header.byteorder != ("<" if sys.byteorder == "little" else ">"))


class _CDecoder:
    """_Columns.fill by fastpath.c: one pass per packet, no temporaries."""

    def __init__(self, lib, data, size: int, header: files.PcapHeader):
        self.lib, self.data, self.size, self.header = lib, data, size, header
        self.address = _address(data)

    def fill(self, offsets: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Fill zeroed PACKET_DTYPE rows; returns the positions of those left for dpkt."""
        h = self.header
        offsets = np.ascontiguousarray(offsets)
        plain = np.empty(len(offsets), np.uint8)
        left = self.lib.magnet_pcap_decode(
            self.address, self.size, offsets.ctypes.data, len(offsets), _swapped(h),
            1 if h.nanosecond else 1000, h.frac_limit, h.linktype, h.linktype in SUPPORTED_LINKS,
            out.ctypes.data, plain.ctypes.data)
        return np.flatnonzero(plain == 0) if left else np.zeros(0, np.int64)


# ------------------------------------------------------------ offsets ---
class _Walker:
    def __init__(self, data, size: int, header: files.PcapHeader):
        self.size = size
        self.caplen = _view(data, size, "u4", header.byteorder)
        self.hdr = _view(data, size, _hdr_dtype(header.byteorder))
        self.max_caplen = header.max_caplen
        self.frac_limit = header.frac_limit

    def walk(self, starts: np.ndarray, bounds: np.ndarray):
        """Walk lanes from `starts` until a record starts at or after `bounds`.

        Returns (lane of each record, offset of each record, landing, stop kind) where
        landing is where each lane stopped and kind why (files.STOP_*).
        """
        size, caplen, limit = self.size, self.caplen, self.max_caplen
        landing = np.zeros(len(starts), np.int64)
        kind = np.zeros(len(starts), np.int8)
        lanes, offs = [], []
        active = np.arange(len(starts), dtype=np.int16)      # int16: a radix sort later
        off, bound = starts.astype(np.int64), bounds.astype(np.int64)
        while len(active):
            c = caplen[np.minimum(off + 8, size - 4)].astype(np.int64)
            nxt = off + RH + c
            stop = (off >= bound) | (nxt > size) | (c > limit)   # a short header also overruns
            if stop.any():
                o, cs = off[stop], c[stop]
                done, short = o >= bound[stop], size - o < RH
                bogus = ~done & ~short & (cs > limit)
                landing[active[stop]] = o
                kind[active[stop]] = np.where(done, files.STOP_NONE, np.where(
                    short, files.STOP_SHORT_HEADER, np.where(bogus, files.STOP_BOGUS_LENGTH, files.STOP_TRUNCATED)))
                keep = ~stop
                active, off, nxt, bound = active[keep], off[keep], nxt[keep], bound[keep]
            lanes.append(active)
            offs.append(off)
            off = nxt
        return (np.concatenate(lanes) if lanes else np.zeros(0, np.int16),
                np.concatenate(offs) if offs else np.zeros(0, np.int64), landing, kind)

    def plausible(self, pos: np.ndarray, t0: int) -> np.ndarray:
        """Does a record header at `pos` look real (its record inside the file)?"""
        ok = pos + RH <= self.size
        h = self.hdr[np.minimum(pos, self.size - RH)]
        c = h["caplen"].astype(np.int64)
        return (ok & (h["frac"] < self.frac_limit) & (c > 0) & (c <= self.max_caplen)
                & (h["origlen"] >= h["caplen"]) & (pos + RH + c <= self.size)
                & (np.abs(h["sec"].astype(np.int64) - t0) < MAX_SPAN_S))

    def sync(self, regions: np.ndarray, stride: int, t0: int) -> np.ndarray:
        """Per lane, the first position in its window that chains SYNC_DEPTH records; -1: none."""
        width = min(SYNC_WINDOW, stride - RH)      # the window's headers stay inside the file
        win = as_strided(self.hdr[regions[0]:], shape=(len(regions), width),
                         strides=(stride * self.hdr.strides[0], self.hdr.strides[0]))
        cand = (win["frac"] < self.frac_limit) & (win["caplen"] > 0) & (win["caplen"] <= self.max_caplen)
        found = np.full(len(regions), -1, np.int64)
        todo = np.arange(len(regions))
        for _ in range(SYNC_TRIES):
            row_has = cand[todo].any(axis=1)
            todo = todo[row_has]
            if not len(todo):
                break
            first = cand[todo].argmax(axis=1)
            pos = regions[todo] + first
            good = np.ones(len(todo), bool)
            p = pos.copy()
            for _ in range(SYNC_DEPTH):
                at_end = p == self.size
                good &= at_end | self.plausible(p, t0)
                p = np.where(at_end | ~good, p, p + RH + self.caplen[np.minimum(p + 8, self.size - 4)])
            found[todo[good]] = pos[good]
            cand[todo[~good], first[~good]] = False
            todo = todo[~good]
        return found


def record_offsets(data, size: int, header: files.PcapHeader, first: int = files.PCAP_HEADER_LEN,
                   stop: int | None = None) -> tuple[np.ndarray, int, files.End]:
    """Offsets of the whole records that start in [first, stop) (as a sequential walk finds
    them; `first` is a record's start), where the next record starts, and where reading
    ended (a clean End while there is more to read)."""
    stop = size if stop is None else stop
    lib = c_loops()
    if lib is not None:
        return _walk_c(lib, data, size, header, first, stop)
    if stop - first < 4 * RH:                     # a handful of bytes: no lanes needed
        if size < first + RH:
            kind = files.STOP_SHORT_HEADER if size > first else files.STOP_NONE
            return np.zeros(0, np.int64), first, files.stop_end(kind, first, size)
        w = _Walker(data, size, header)
        _, offs, landing, kind = w.walk(np.array([first]), np.array([stop]))
        land = int(landing[0])
        return offs, land, files.stop_end(int(kind[0]), land, size, int(w.caplen[land + 8])
                                          if land + 12 <= size else 0)
    w = _Walker(data, size, header)
    t0 = int(w.hdr[first]["sec"])
    lanes = int(min(MAX_LANES, max(1, math.isqrt((stop - first) // 64))))
    stride = (stop - first) // lanes
    regions = first + stride * np.arange(lanes, dtype=np.int64)
    starts = w.sync(regions, stride, t0) if lanes > 1 else np.array([first])
    starts[0] = first
    keep = starts >= 0                       # lanes that found no record merge into the one before
    regions, starts = regions[keep], starts[keep]
    bounds = np.append(regions[1:], stop)
    return _confirm(w, regions, starts, bounds, first, size)


def _confirm(w: _Walker, regions, starts, bounds, first: int, size: int):
    """Walk, accept lanes whose start the accepted lane before them reached, re-walk the rest."""
    n = len(starts)
    walked = {}                              # lane -> (offsets, landing, kind)
    todo = np.arange(n)
    while True:
        lane_of, offs, landing, kind = w.walk(starts[todo], bounds[todo])
        order = np.argsort(lane_of, kind="stable")
        counts = np.bincount(lane_of, minlength=len(todo))
        for i, part in enumerate(np.split(offs[order], np.cumsum(counts)[:-1])):
            walked[int(todo[i])] = (part, int(landing[i]), int(kind[i]))
        pos, accepted, retry = first, [], []
        for j in range(n):
            if pos >= bounds[j]:
                continue                     # a long record covers this lane's whole region
            part, land, stop = walked.get(j, (None, -1, 0))
            if starts[j] != pos or part is None:
                retry.append(j)
                starts[j] = pos
                break
            accepted.append(part)
            pos = land
            if stop:
                return _join(accepted), pos, files.stop_end(stop, pos, size, int(w.caplen[pos + 8])
                                                            if pos + 12 <= size else 0)
        else:
            return _join(accepted), pos, files.End()
        # Later lanes whose start disagrees with their predecessor's landing: guess again from it.
        for k in range(retry[0] + 1, n):
            prev = walked.get(k - 1)
            if prev and prev[2] == 0 and prev[1] != starts[k] and regions[k] <= prev[1] < bounds[k]:
                starts[k] = prev[1]
                walked.pop(k, None)
                retry.append(k)
        for k in retry:
            walked.pop(k, None)
        todo = np.array(sorted(retry))


def _walk_c(lib, data, size: int, header: files.PcapHeader, first: int, stop: int):
    """record_offsets as one sequential walk in C."""
    offsets = np.empty(max(stop - first, 0) // RH + 1, np.int64)
    out = np.zeros(2, np.int64)
    n = lib.magnet_pcap_walk(_address(data), size, first, stop, _swapped(header), header.max_caplen,
                             offsets.ctypes.data, out.ctypes.data)
    land, kind = int(out[0]), int(out[1])
    order = "little" if header.byteorder == "<" else "big"
    caplen = int.from_bytes(data[land + 8:land + 12], order) if land + 12 <= size else 0
    return offsets[:n], land, files.stop_end(kind, land, size, caplen)


def _join(parts) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


# ------------------------------------------------------------ columns ---
def _be(fields: dict[str, tuple[str, int]], itemsize: int) -> np.dtype:
    """A structured dtype of network-order fields at given offsets (fields may overlap)."""
    return np.dtype({"names": list(fields), "formats": [f for f, _ in fields.values()],
                     "offsets": [o for _, o in fields.values()], "itemsize": itemsize})


ETH = _be({"type": (">u2", 12), "type2": (">u2", 16), "type3": (">u2", 20)}, 22)
SLL = _be({"type": (">u2", 14)}, 16)
SLL2 = _be({"type": (">u2", 0)}, 20)
# IPv4 and IPv6 headers in one union: which fields apply depends on the version.
IP = _be({"vhl": ("u1", 0), "tos4": ("u1", 1), "len4": (">u2", 2), "id4": (">u2", 4), "frag": (">u2", 6),
          "hlim": ("u1", 7), "ttl4": ("u1", 8), "proto4": ("u1", 9),
          "src4": (("u1", (4,)), 12), "dst4": (("u1", (4,)), 16), "plen": (">u2", 4),
          "nxt": ("u1", 6), "src6": (("u1", (16,)), 8), "dst6": (("u1", (16,)), 24)}, 40)
L4 = _be({"sport": (">u2", 0), "dport": (">u2", 2), "seq": (">u4", 4), "ack": (">u4", 8),
          "doff": ("u1", 12), "flags": ("u1", 13)}, 14)
UDP_HEADER, TCP_MIN_HEADER = 8, 20
IS_VLAN = np.isin(np.arange(1 << 16), list(ETH_VLAN))     # per ethertype: a lookup, not np.isin
# The packets' addresses as little-endian 64-bit words (bytes 0-7, 8-15).
ADDRESS_WORDS = np.dtype({"names": ["saddr", "daddr"], "formats": [("<u8", (2,))] * 2,
                          "offsets": [PACKET_DTYPE.fields[n][1] for n in ("saddr", "daddr")],
                          "itemsize": PACKET_DTYPE.itemsize})


class _Columns:
    """Vectorised decode of the plain case for packets at given record offsets."""

    def __init__(self, data, size: int, header: files.PcapHeader):
        self.data, self.size, self.header = data, size, header
        self.hdr = _view(data, size, _hdr_dtype(header.byteorder))
        self.views = {}

    def view(self, dtype: np.dtype) -> np.ndarray:
        if dtype not in self.views:
            self.views[dtype] = _view(self.data, self.size, dtype)
        return self.views[dtype]

    def gather(self, dtype: np.dtype, pos: np.ndarray):
        """Records of `dtype` at byte positions `pos`, and whether they lie inside the file.

        Gathered as raw bytes (a plain copy per record), then viewed as `dtype`."""
        inside = pos + dtype.itemsize <= self.size
        raw = self.view(np.dtype(f"V{dtype.itemsize}"))[np.where(inside, pos, 0)]
        return raw.view(dtype), inside

    def records(self, offsets: np.ndarray, out: np.ndarray) -> None:
        """Fill in the record header's columns of `out` (zeroed PACKET_DTYPE rows)."""
        rec, _ = self.gather(self.hdr.dtype, offsets)
        ns = 1 if self.header.nanosecond else 1000
        out["time_ns"] = rec["sec"].astype(np.int64) * 1_000_000_000 + rec["frac"].astype(np.int64) * ns
        out["caplen"], out["origlen"] = rec["caplen"], rec["origlen"]
        bad = (rec["origlen"] < rec["caplen"]) | (rec["frac"] >= self.header.frac_limit)
        out["flags"] = np.where(bad, np.uint16(Flag.BAD_RECORD), np.uint16(0))

    def fill(self, offsets: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Fill zeroed PACKET_DTYPE rows; returns the positions of those left for dpkt."""
        self.records(offsets, out)
        if self.header.linktype not in SUPPORTED_LINKS:
            out["flags"] |= np.uint16(Flag.UNKNOWN_LINK)
            return np.zeros(0, np.int64)
        return np.flatnonzero(~self.decode(out, offsets))

    def decode(self, out: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Fill in the plain packets of `out`; returns the mask of those decoded."""
        caplen = out["caplen"].astype(np.int64)
        start = offsets + RH
        version, l3off, ok = self.link(start, caplen)
        self.network(out, start + l3off, caplen - l3off, version, ok)
        return ok

    def link(self, start: np.ndarray, caplen: np.ndarray):
        """Per packet: IP version the link header announces (0: none), IP header offset, usable."""
        lt = self.header.linktype
        n = len(start)
        if lt == LINK_ETHERNET:
            eth, ok = self.gather(ETH, start)
            t1, t2, t3 = eth["type"], eth["type2"], eth["type3"]
            vlan = IS_VLAN[t1]
            qinq = vlan & (t2 == ETH_8021Q)
            ethertype = np.where(qinq, t3, np.where(vlan, t2, t1))
            l3off = 14 + 4 * vlan.astype(np.int64) + 4 * qinq
            ok &= t1 > 1500
        elif lt in (LINK_SLL, LINK_SLL2):
            sll, ok = self.gather(SLL if lt == LINK_SLL else SLL2, start)
            ethertype, l3off = sll["type"], np.full(n, 16 if lt == LINK_SLL else 20)
        elif lt in (LINK_NULL, LINK_LOOP):
            fam, ok = self.gather(np.dtype((">" if lt == LINK_LOOP else "=") + "u4"), start)
            if lt == LINK_NULL:
                fam = np.where(fam & 0xFFFF0000, fam.byteswap(), fam)
            v = np.where(fam == AF_INET, 4, np.where(np.isin(fam, list(AF_INET6)), 6, 0))
            return v, np.full(n, 4), ok & (v != 0) & (caplen >= 4)
        else:
            first, ok = self.gather(np.dtype("u1"), start)
            fixed = {LINK_IPV4: 4, LINK_IPV6: 6}.get(lt)
            v = np.full(n, fixed) if fixed else (first >> 4).astype(np.int64)
            return v, np.zeros(n, np.int64), ok & (caplen >= 1) & ((v == 4) | (v == 6))
        v = np.where(ethertype == ETH_IP, 4, np.where(ethertype == ETH_IP6, 6, 0))
        return v, l3off, ok & (caplen >= l3off) & (v != 0)

    def network(self, out, l3: np.ndarray, room: np.ndarray, version: np.ndarray, ok: np.ndarray):
        """IP and transport columns of the plain packets; clears `ok` for the others."""
        ip, inside = self.gather(IP, l3)
        v4 = version == 4
        vhl = ip["vhl"].copy()                  # each field converted once to a native array
        ihl = (vhl & 0x0F).astype(np.int32) * 4
        len4, plen = ip["len4"].astype(np.int32), ip["plen"].astype(np.int32)
        hdr = np.where(v4, ihl, 40)
        length = np.where(v4, len4, plen + 40)
        proto = np.where(v4, ip["proto4"], ip["nxt"])
        ok &= inside & ((vhl >> 4) == version)
        ok &= np.where(v4, (ihl >= 20) & ((ip["frag"] & 0x3FFF) == 0) & (len4 != 0), plen != 0)
        tcp = proto == IPPROTO_TCP
        ok &= (tcp | (proto == IPPROTO_UDP)) & (room >= hdr + np.where(tcp, TCP_MIN_HEADER, UDP_HEADER))
        seg, inside = self.gather(L4, l3 + hdr)
        thdr = np.where(tcp, (seg["doff"] >> 4).astype(np.int32) * 4, UDP_HEADER)
        ok &= inside & (~tcp | (thdr >= TCP_MIN_HEADER)) & (length >= hdr + thdr)
        every = bool(ok.all())
        sel = slice(None) if every else np.flatnonzero(ok)
        is_tcp = tcp[sel]
        columns = {"ip_version": version, "proto": proto, "ip_len": length,
                   "payload": length - hdr - thdr, "sport": seg["sport"], "dport": seg["dport"]}
        for name, value in columns.items():
            out[name][sel] = value[sel]
        for name in ("seq", "ack"):
            out[name][sel] = np.where(is_tcp, seg[name][sel], 0)
        out["tcp_flags"][sel] = np.where(is_tcp, seg["flags"][sel], 0)
        ip, s4 = ip[sel], v4[sel]
        traffic_class = (ip["vhl"] & 0x0F) << 4 | ip["tos4"] >> 4       # IPv6: bits 4-11
        out["ip_tos"][sel] = np.where(s4, ip["tos4"], traffic_class)
        out["ip_ttl"][sel] = np.where(s4, ip["ttl4"], ip["hlim"])
        out["ip_id"][sel] = np.where(s4, ip["id4"], 0)
        out["ip_frag_off"][sel] = np.where(s4, ip["frag"], 0)
        words = out.view(ADDRESS_WORDS)
        for name, v4name, v6name in (("saddr", "src4", "src6"), ("daddr", "dst4", "dst6")):
            v6 = ip[v6name].view("<u8")                      # as two words, not 16 bytes
            v4 = ip[v4name].view("<u4")[:, 0].astype(np.uint64)
            words[name][sel, 0] = np.where(s4, 0, v6[:, 0])
            words[name][sel, 1] = np.where(s4, v4 << 32 | 0xFFFF0000, v6[:, 1])   # ::ffff:a.b.c.d


SEGMENT_BYTES = 128 << 20     # file bytes walked at a time (the walk's steps grow as its square root)
DECODED_PACKETS = 1 << 18     # packets decoded and handed on at a time: memory stays bounded


def stream_fast(path: str) -> PacketStream | None:
    """Read a classic pcap with the vectorised decoder, a segment of the file at a time;
    None for pcapng (use the dpkt path)."""
    data, size = files.map_file(path)
    if files.container(path, data, size) != "pcap":
        return None
    header = files.pcap_header(path, data, size)
    cap = PcapFile(path, np.zeros(0, PACKET_DTYPE), "pcap", [header.linktype], header.snaplen,
                  header.byteorder, header.nanosecond, engine="fast")
    return PacketStream(cap, _segments(cap, data, size, header))


def read_fast(path: str) -> PcapFile | None:
    """stream_fast, every packet at once."""
    packets = stream_fast(path)
    return None if packets is None else packets.read()


def _segments(cap: PcapFile, data, size: int, header: files.PcapHeader):
    lib = c_loops()
    cols = _Columns(data, size, header) if lib is None else _CDecoder(lib, data, size, header)
    pos = files.PCAP_HEADER_LEN
    while True:
        offsets, landing, end = record_offsets(data, size, header, pos, min(pos + SEGMENT_BYTES, size))
        for lo in range(0, len(offsets), DECODED_PACKETS):
            yield _decode(cols, data, header, offsets[lo:lo + DECODED_PACKETS], cap)
        release(data, pos, landing)
        pos = landing
        if end.problem or pos >= size:
            cap.problems, cap.trailing_bytes = ([end.problem] if end.problem else []), end.trailing_bytes
            return


def _decode(cols: "_Columns | _CDecoder", data, header: files.PcapHeader, offsets: np.ndarray, cap: PcapFile) -> np.ndarray:
    """The packets at these record offsets; counts those handed to dpkt in cap.fallback."""
    packets = np.zeros(len(offsets), PACKET_DTYPE)

    def decode_range(lo: int, hi: int) -> int:
        """Decode packets[lo:hi] a chunk at a time; returns how many went to dpkt."""
        handed = 0
        for start in range(lo, hi, CHUNK_PACKETS):
            part = offsets[start:min(start + CHUNK_PACKETS, hi)]
            decoded = packets[start:start + len(part)]         # filled in place
            rest = cols.fill(part, decoded)
            if len(rest):
                decoded[rest] = _by_dpkt(data, header.linktype, part[rest], decoded[rest])
                handed += len(rest)
        return handed

    # numpy and ctypes release the GIL: the cores share the chunks (as the trace scan does).
    cap.fallback += sum(in_parallel(decode_range, split(0, len(offsets))))
    return packets


def _by_dpkt(data, linktype: int, offsets: np.ndarray, done: np.ndarray) -> np.ndarray:
    """The packets the vectorised decoder left aside, decoded one by one with dpkt."""
    rows = []
    for off, time_ns, caplen, origlen, flags in zip(
            offsets.tolist(), done["time_ns"].tolist(), done["caplen"].tolist(),
            done["origlen"].tolist(), done["flags"].tolist()):
        start = off + RH
        rows.append(row(time_ns, caplen, origlen, flags & Flag.BAD_RECORD,
                        decode(linktype, data[start:start + caplen], origlen)))
    return rows_to_packets(rows)
