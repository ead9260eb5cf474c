"""Write packets (PACKET_DTYPE columns) as a classic pcap of Ethernet frames, vectorised.

Each packet becomes Ethernet + IPv4 or IPv6 + TCP or UDP with the columns'
addresses, ports, sequence numbers and flags, and a zero-filled payload of
`payload` bytes (cut at `snaplen`, origlen keeping the full size).  Checksums
are correct (zero payload adds nothing to the TCP/UDP sum), so Wireshark shows
no errors.  A payload too large for IPv4's 16-bit length (a TSO-sized buffer)
gets IP length 0, as Linux writes it for BIG TCP; origlen still says its size.
Used by `magnet to-pcap` and to generate test and benchmark captures.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from .. import private
from .columns import IPPROTO_TCP, LINK_ETHERNET, PACKET_DTYPE

ETH_LEN, IP4_LEN, IP6_LEN, TCP_LEN, UDP_LEN = 14, 20, 40, 20, 8
SRC_MAC, DST_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def _frame_dtype(ip_len: int, l4_len: int) -> np.dtype:
    """Ethernet + IP + TCP/UDP header bytes in network order, one record per packet."""
    f = {"dst": (("u1", (6,)), 0), "src": (("u1", (6,)), 6), "type": (">u2", 12)}
    if ip_len == IP4_LEN:
        f.update({"vhl": ("u1", 14), "len": (">u2", 16), "id": (">u2", 18), "frag": (">u2", 20),
                  "ttl": ("u1", 22), "proto": ("u1", 23), "csum": (">u2", 24),
                  "saddr": (("u1", (4,)), 26), "daddr": (("u1", (4,)), 30)})
    else:
        f.update({"vtc": (">u4", 14), "plen": (">u2", 18), "nxt": ("u1", 20), "hlim": ("u1", 21),
                  "saddr": (("u1", (16,)), 22), "daddr": (("u1", (16,)), 38)})
    t = ETH_LEN + ip_len
    f.update({"sport": (">u2", t), "dport": (">u2", t + 2)})
    if l4_len == TCP_LEN:
        f.update({"seq": (">u4", t + 4), "ack": (">u4", t + 8), "doff": ("u1", t + 12),
                  "flags": ("u1", t + 13), "win": (">u2", t + 14), "l4sum": (">u2", t + 16)})
    else:
        f.update({"ulen": (">u2", t + 4), "l4sum": (">u2", t + 6)})
    return np.dtype({"names": list(f), "formats": [v[0] for v in f.values()],
                     "offsets": [v[1] for v in f.values()], "itemsize": t + l4_len})


def _fold(total: np.ndarray) -> np.ndarray:
    """Ones' complement of the 16-bit ones' complement sum."""
    total = total.astype(np.uint64)
    for _ in range(3):
        total = (total & 0xFFFF) + (total >> 16)
    return (~total & 0xFFFF).astype(np.uint16)


def _words(raw: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Sum of the big-endian 16-bit words of bytes [lo, hi) of each row."""
    b = raw[:, lo:hi].astype(np.uint64)
    return (b[:, 0::2] << 8).sum(axis=1) + b[:, 1::2].sum(axis=1)


def frame_headers(p: np.ndarray, v6: bool, tcp: bool) -> np.ndarray:
    """(n, header bytes) uint8: the headers of packets that are all IPv4/IPv6 and TCP/UDP alike."""
    ip_len, l4_len = (IP6_LEN if v6 else IP4_LEN), (TCP_LEN if tcp else UDP_LEN)
    h = np.zeros(len(p), _frame_dtype(ip_len, l4_len))
    h["dst"], h["src"] = np.frombuffer(DST_MAC, np.uint8), np.frombuffer(SRC_MAC, np.uint8)
    payload = p["payload"].astype(np.int64)
    l4_total = payload + l4_len
    if v6:
        h["type"], h["vtc"], h["nxt"], h["hlim"] = 0x86DD, 6 << 28, 6 if tcp else 17, 64
        h["plen"] = np.where(l4_total <= 0xFFFF, l4_total, 0)
        h["saddr"], h["daddr"] = p["saddr"], p["daddr"]
    else:
        total = l4_total + IP4_LEN
        h["type"], h["vhl"], h["ttl"], h["proto"], h["frag"] = 0x0800, 0x45, 64, 6 if tcp else 17, 0x4000
        h["len"] = np.where(total <= 0xFFFF, total, 0)
        h["id"] = np.arange(len(p)) & 0xFFFF
        h["saddr"], h["daddr"] = p["saddr"][:, 12:], p["daddr"][:, 12:]
    h["sport"], h["dport"] = p["sport"], p["dport"]
    if tcp:
        h["seq"], h["ack"], h["doff"], h["flags"], h["win"] = p["seq"], p["ack"], 5 << 4, p["tcp_flags"], 65535
    else:
        h["ulen"] = np.where(l4_total <= 0xFFFF, l4_total, 0)
    raw = h.view(np.uint8).reshape(len(p), h.dtype.itemsize)
    if not v6:
        h["csum"] = _fold(_words(raw, ETH_LEN, ETH_LEN + IP4_LEN))
    a = ETH_LEN + (8 if v6 else 12)                       # addresses: the pseudo header's
    pseudo = _words(raw, a, a + (32 if v6 else 8)) + (6 if tcp else 17) + (l4_total & 0xFFFF) + (l4_total >> 16)
    l4sum = _fold(pseudo + _words(raw, ETH_LEN + ip_len, ETH_LEN + ip_len + l4_len))
    h["l4sum"] = l4sum if tcp else np.where(l4sum == 0, 0xFFFF, l4sum)
    return raw


def write_pcap(path: str | os.PathLike, packets: np.ndarray, *, snaplen: int = 65535,
               nanosecond: bool = True, byteorder: str = "<") -> str:
    """Write `packets` (PACKET_DTYPE; time_ns, addresses, ports, seq/ack, tcp_flags, payload,
    ip_version, proto used) as a pcap, atomically; returns the path."""
    p = np.asarray(packets, PACKET_DTYPE)
    v6, tcp = p["ip_version"] == 6, p["proto"] == IPPROTO_TCP
    head = ETH_LEN + np.where(v6, IP6_LEN, IP4_LEN) + np.where(tcp, TCP_LEN, UDP_LEN)
    origlen = head + p["payload"].astype(np.int64)
    caplen = np.minimum(origlen, snaplen)
    starts = 24 + np.concatenate(([0], np.cumsum(16 + caplen)[:-1])).astype(np.int64)
    out = np.zeros(24 + int((16 + caplen).sum()), np.uint8)
    order = "<" if byteorder in ("<", "little") else ">"
    out[:24] = np.frombuffer(struct.pack(order + "IHHiIII", 0xA1B23C4D if nanosecond else 0xA1B2C3D4,
                                         2, 4, 0, 0, snaplen, LINK_ETHERNET), np.uint8)
    rec = np.zeros(len(p), np.dtype([(n, order + "u4") for n in ("sec", "frac", "caplen", "origlen")]))
    sec, frac = np.divmod(p["time_ns"], 1_000_000_000)
    rec["sec"], rec["frac"] = sec, frac if nanosecond else frac // 1000
    rec["caplen"], rec["origlen"] = caplen, origlen
    _scatter(out, starts, rec.view(np.uint8).reshape(len(p), 16), np.full(len(p), 16))
    for is6 in (False, True):
        for is_tcp in (False, True):
            sel = np.flatnonzero((v6 == is6) & (tcp == is_tcp))
            if len(sel):
                _scatter(out, starts[sel] + 16, frame_headers(p[sel], is6, is_tcp), caplen[sel])
    return _write_atomic(os.fspath(path), out)


def _scatter(out: np.ndarray, starts: np.ndarray, rows: np.ndarray, limit: np.ndarray) -> None:
    """out[starts[i] + j] = rows[i, j] for j < limit[i], a block of rows at a time."""
    width = rows.shape[1]
    for lo in range(0, len(rows), 1 << 18):
        s, r, lim = starts[lo:lo + (1 << 18)], rows[lo:lo + (1 << 18)], limit[lo:lo + (1 << 18)]
        keep = np.arange(width) < lim[:, None]
        out[(s[:, None] + np.arange(width))[keep]] = r[keep]


def _write_atomic(path: str, data: np.ndarray) -> str:
    with private.replacing(path) as tmp, open(tmp, "wb") as f:
        f.write(data.tobytes())
    return path


def synthetic_packets(n: int, flows: int = 16, seed: int = 0, mss: int = 1448,
                      start_ns: int = 1_700_000_000_000_000_000) -> np.ndarray:
    """`n` packets of `flows` bulk TCP transfers (IPv4 and IPv6, data one way, ACKs back)
    and a little UDP, a packet every 2 us: test and benchmark input."""
    rng = np.random.default_rng(seed)
    p = np.zeros(n, PACKET_DTYPE)
    flow = rng.integers(0, flows, n)
    back = rng.random(n) < 0.3                          # ACKs from the receiver
    udp = (flow % 8 == 7)
    p["time_ns"] = start_ns + np.arange(n, dtype=np.int64) * 2000 + rng.integers(0, 1000, n)
    p["ip_version"] = np.where(flow % 2, 6, 4)
    p["proto"] = np.where(udp, 17, 6)
    a, b = np.zeros((n, 16), np.uint8), np.zeros((n, 16), np.uint8)
    v4 = p["ip_version"] == 4
    a[v4, 10:12], b[v4, 10:12] = 0xFF, 0xFF
    a[v4, 12:], b[v4, 12:] = [10, 0, 0, 1], [10, 0, 1, 2]
    a[~v4, :2], b[~v4, :2] = [0xFD, 0], [0xFD, 0]
    a[~v4, 15], b[~v4, 15] = 1, 2
    b[:, 14] += flow.astype(np.uint8)                   # a peer per flow
    p["saddr"], p["daddr"] = np.where(back[:, None], b, a), np.where(back[:, None], a, b)
    ports = np.stack([40000 + flow, np.full(n, 5201)])
    p["sport"], p["dport"] = np.where(back, ports[1], ports[0]), np.where(back, ports[0], ports[1])
    size = np.where(back, 0, np.minimum(mss, rng.integers(1, 4 * mss, n)))
    p["payload"] = np.where(udp, rng.integers(20, 1200, n), size)
    sent = np.zeros(n, np.int64)
    for f in range(flows):                              # sequence numbers per flow (few flows)
        sel = np.flatnonzero((flow == f) & ~back)
        sent[sel] = np.cumsum(p["payload"][sel]) - p["payload"][sel]
    p["seq"] = np.where(back, 7, 1000 + sent) & 0xFFFFFFFF
    p["ack"] = np.where(back, 1000 + sent, 7) & 0xFFFFFFFF
    p["tcp_flags"] = np.where(udp, 0, np.where(p["payload"] > 0, 0x18, 0x10))
    p["seq"][udp], p["ack"][udp] = 0, 0
    return p
