"""The per-packet columns every pcap reader produces, and the flags of packets it could not use.

Both readers (reader.py, one dpkt decode per packet; fast.py, vectorised over
the memory-mapped file) return a numpy structured array of PACKET_DTYPE with
identical contents; tests compare them packet by packet.

Column meanings (0 where a packet has no such field):
  time_ns      Unix time in ns
  caplen       bytes captured; origlen: bytes the packet had on the wire
  ip_version   4 or 6; proto: IP protocol / final next header
  saddr/daddr  16 bytes, network order, IPv4 as ::ffff:a.b.c.d (as in the trace format)
  sport/dport  TCP/UDP ports
  tcp_flags    TCP header byte 13 (FIN 0x01 ... CWR 0x80); seq, ack: TCP numbers
  ip_tos       IPv4 TOS / IPv6 traffic class; ip_ttl: IPv4 TTL / IPv6 hop limit
  ip_id        IPv4 identification; ip_frag_off: IPv4 flags and fragment offset (0 for IPv6)
  ip_len       IP packet length, header included (from the header; for a length of 0,
               as TSO/GSO and jumbo packets carry, from origlen)
  payload      transport payload bytes, from the headers (so a capture cut short by
               its snaplen still gives the size the packet had): TCP/UDP payload, the
               IP payload for other protocols and for non-first fragments
  flags        Flag bits below
"""
from __future__ import annotations

import enum

import numpy as np

_FIELDS = [("time_ns", "i8"), ("caplen", "u4"), ("origlen", "u4"), ("ip_len", "u4"), ("payload", "u4"),
           ("seq", "u4"), ("ack", "u4"), ("sport", "u2"), ("dport", "u2"), ("flags", "u2"),
           ("ip_version", "u1"), ("proto", "u1"), ("tcp_flags", "u1"), ("ip_tos", "u1"), ("ip_ttl", "u1"),
           ("ip_id", "u2"), ("ip_frag_off", "u2"),
           ("saddr", ("u1", (16,))), ("daddr", ("u1", (16,)))]
# Every field naturally aligned and the record 80 bytes: column access stays fast.
PACKET_DTYPE = np.dtype({"names": [n for n, _ in _FIELDS], "formats": [f for _, f in _FIELDS],
                         "offsets": [0, 8, 12, 16, 20, 24, 28, 32, 34, 36, 38, 39, 40, 41, 42, 44, 46, 48, 64],
                         "itemsize": 80})


class Flag(enum.IntFlag):
    """Why a packet is not (wholly) usable; 0 for a clean IP packet."""
    NOT_IP = 0x01        # the link layer holds something other than IPv4/IPv6 (ARP, LLC, ...)
    UNKNOWN_LINK = 0x02  # a link type this reader does not decode
    TRUNCATED = 0x04     # caplen ends inside the link, IP or transport header
    BAD_HEADER = 0x08    # impossible header values (IHL < 5, lengths shorter than headers, ...)
    FRAGMENT = 0x10      # an IP fragment: a non-first one has no transport header
    BAD_RECORD = 0x20    # record header impossible: origlen < caplen, sub-second part >= 1 s
    NO_TIMESTAMP = 0x40  # pcapng simple packet block: time copied from the packet before


# Packets analyses leave out (and count): they are broken, not merely foreign.
MALFORMED = Flag.TRUNCATED | Flag.BAD_HEADER | Flag.UNKNOWN_LINK | Flag.BAD_RECORD

IPPROTO_TCP, IPPROTO_UDP = 6, 17
TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10

# Link types (pcap LINKTYPE_ values).
LINK_NULL, LINK_ETHERNET, LINK_RAW, LINK_LOOP = 0, 1, 101, 108
LINK_SLL, LINK_SLL2, LINK_IPV4, LINK_IPV6 = 113, 276, 228, 229
LINK_RAW_BSD = (12, 14)      # DLT_RAW as some BSDs wrote it into files
LINK_NAMES = {LINK_NULL: "BSD loopback (NULL)", LINK_ETHERNET: "Ethernet", LINK_RAW: "raw IP",
              LINK_LOOP: "OpenBSD loopback", LINK_SLL: "Linux cooked (SLL)",
              LINK_SLL2: "Linux cooked v2 (SLL2)", LINK_IPV4: "raw IPv4", LINK_IPV6: "raw IPv6",
              12: "raw IP (DLT 12)", 14: "raw IP (DLT 14)"}
SUPPORTED_LINKS = frozenset(LINK_NAMES)

# Address families of the NULL/LOOP header that mean IPv6 (Linux, NetBSD/OpenBSD, FreeBSD, macOS).
AF_INET = 2
AF_INET6 = frozenset({10, 24, 28, 30})
ETH_IP, ETH_IP6 = 0x0800, 0x86DD
# Ethernet types dpkt reads as VLAN tags (one, or two when the inner one is 802.1Q).
ETH_VLAN = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})
ETH_8021Q = 0x8100

# A record longer than this is a corrupt length (libpcap's MAXIMUM_SNAPLEN), unless the
# file's snaplen is larger.
MAX_CAPLEN = 262144
V4_MAPPED = bytes(10) + b"\xff\xff"


def empty(n: int) -> np.ndarray:
    return np.zeros(n, PACKET_DTYPE)


def flag_counts(flags: np.ndarray) -> dict[str, int]:
    """Packets per flag name (a packet can count under several)."""
    return {f.name: int(np.count_nonzero(flags & f)) for f in Flag if np.any(flags & f)}
