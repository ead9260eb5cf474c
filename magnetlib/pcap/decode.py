"""Decode one packet with dpkt: the reference for every column (see columns.py).

This is the per-packet path: reader.py runs it on every packet, fast.py only on
the packets its vectorised decoder leaves aside (anything but the plain
Ethernet/SLL/raw/loopback + IPv4/IPv6 + TCP/UDP case).  dpkt's classes are
subclassed only to decode no further than TCP/UDP: other payloads are not
needed, and their decoders are where hostile input raises surprises.
"""
from __future__ import annotations

import struct

import dpkt

from .columns import (AF_INET, AF_INET6, ETH_IP, ETH_IP6, IPPROTO_TCP, IPPROTO_UDP, LINK_ETHERNET,
                      LINK_IPV4, LINK_IPV6, LINK_LOOP, LINK_NULL, LINK_RAW, LINK_RAW_BSD, LINK_SLL,
                      LINK_SLL2, V4_MAPPED, Flag)

_TRANSPORT = {IPPROTO_TCP: dpkt.tcp.TCP, IPPROTO_UDP: dpkt.udp.UDP}


class _IP(dpkt.ip.IP):
    _protosw = _TRANSPORT


class _IP6(dpkt.ip6.IP6):
    _protosw = _TRANSPORT


_NETWORK = {ETH_IP: _IP, ETH_IP6: _IP6, dpkt.ethernet.ETH_TYPE_IPX: dpkt.ipx.IPX}


class _Ethernet(dpkt.ethernet.Ethernet):
    _typesw = _NETWORK


class _SLL(dpkt.sll.SLL):
    _typesw = _NETWORK


class _SLL2(dpkt.sll2.SLL2):
    _typesw = _NETWORK


class Skip(Exception):
    """The packet cannot be decoded further; args[0] is its Flag."""


def _network(decoded, ethertype: int):
    """The IP object a link-layer decoder produced, or why there is none."""
    if isinstance(decoded.data, (_IP, _IP6)):
        return decoded.data
    if ethertype not in (ETH_IP, ETH_IP6):
        raise Skip(Flag.NOT_IP)
    return _strict(_NETWORK[ethertype], decoded.data)   # raises: say why it failed


def _strict(cls, buf):
    """Decode, turning dpkt's errors into flags."""
    try:
        return cls(buf)
    except dpkt.NeedData:
        raise Skip(Flag.TRUNCATED) from None
    except dpkt.UnpackError:
        raise Skip(Flag.BAD_HEADER) from None


def _ethernet(buf: bytes):
    eth = _strict(_Ethernet, buf)
    ethertype = getattr(eth, "_next_type", None) or eth.type   # after VLAN tags / MPLS labels
    l3off = 14 + 4 * len(getattr(eth, "mpls_labels", ()))
    for tag in getattr(eth, "vlan_tags", ()):
        l3off += 4 if isinstance(tag, dpkt.ethernet.VLANtag8021Q) else 26   # ISL: its own header
    return _network(eth, ethertype), l3off


def _cooked(cls, header_len: int):
    def link(buf: bytes):
        sll = _strict(cls, buf)
        return _network(sll, sll.ethtype), header_len
    return link


def _loopback(order: str):
    def link(buf: bytes):
        if len(buf) < 4:
            raise Skip(Flag.TRUNCATED)
        family = struct.unpack_from(order, buf)[0]
        if order == "=I" and family & 0xFFFF0000:           # written on the other byte order
            family = struct.unpack_from(">I" if struct.pack("=I", 1)[0] else "<I", buf)[0]
        if family == AF_INET:
            return _strict(_IP, buf[4:]), 4
        if family in AF_INET6:
            return _strict(_IP6, buf[4:]), 4
        raise Skip(Flag.NOT_IP)
    return link


def _raw(version: int | None):
    def link(buf: bytes):
        if not buf:
            raise Skip(Flag.TRUNCATED)
        v = buf[0] >> 4 if version is None else version
        if v not in (4, 6):
            raise Skip(Flag.BAD_HEADER)
        return _strict(_IP if v == 4 else _IP6, buf), 0
    return link


LINKS = {LINK_ETHERNET: _ethernet, LINK_SLL: _cooked(_SLL, 16), LINK_SLL2: _cooked(_SLL2, 20),
         LINK_NULL: _loopback("=I"), LINK_LOOP: _loopback(">I"), LINK_RAW: _raw(None),
         LINK_IPV4: _raw(4), LINK_IPV6: _raw(6), **{lt: _raw(None) for lt in LINK_RAW_BSD}}

ZERO16 = bytes(16)
NO_IP = (0, 0, 0, 0)


def decode(linktype: int, buf: bytes, origlen: int) -> tuple:
    """One packet as (ip_len, payload, seq, ack, sport, dport, flags, ip_version, proto,
    tcp_flags, (ip_tos, ip_ttl, ip_id, ip_frag_off), saddr, daddr): the non-record columns
    of PACKET_DTYPE, in that order."""
    link = LINKS.get(linktype)
    if link is None:
        return 0, 0, 0, 0, 0, 0, int(Flag.UNKNOWN_LINK), 0, 0, 0, NO_IP, ZERO16, ZERO16
    try:
        ip, l3off = link(buf)
        return _ip_columns(ip, origlen - l3off)
    except Skip as skip:
        return 0, 0, 0, 0, 0, 0, int(skip.args[0]), 0, 0, 0, NO_IP, ZERO16, ZERO16
    except Exception:   # noqa: BLE001 -- dpkt on hostile bytes: a bad packet, never a crash
        return 0, 0, 0, 0, 0, 0, int(Flag.BAD_HEADER), 0, 0, 0, NO_IP, ZERO16, ZERO16


def _ip_columns(ip, wire_l3: int) -> tuple:
    if isinstance(ip, _IP):
        version, hdr, length = 4, ip.hl * 4, ip.len
        saddr, daddr = V4_MAPPED + ip.src, V4_MAPPED + ip.dst
        fragment, later_fragment = bool(ip.mf or ip.offset), ip.offset != 0
        fields = (ip.tos, ip.ttl, ip.id, ip._flags_offset)
    else:
        version, length = 6, (40 + ip.plen if ip.plen else 0)
        hdr = 40 + sum(len(ext) for ext in ip.all_extension_headers)
        saddr, daddr = ip.src, ip.dst
        frag = ip.extension_hdrs.get(dpkt.ip.IP_PROTO_FRAGMENT)
        fragment, later_fragment = frag is not None, frag is not None and frag.frag_off > 0
        fields = (ip.fc, ip.hlim, 0, 0)
    proto = ip.p
    ip_len = length or max(wire_l3, 0)          # 0: TSO/GSO or jumbo, the frame tells
    flags = int(Flag.FRAGMENT) if fragment else 0
    if ip.v != version or ip_len < hdr:
        return ip_len, 0, 0, 0, 0, 0, flags | Flag.BAD_HEADER, version, proto, 0, fields, saddr, daddr
    rest = ip_len - hdr
    if later_fragment or proto not in _TRANSPORT:
        return ip_len, rest, 0, 0, 0, 0, flags, version, proto, 0, fields, saddr, daddr
    segment = ip.data
    if not isinstance(segment, _TRANSPORT[proto]):
        try:
            segment = _strict(_TRANSPORT[proto], segment)
        except Skip as skip:
            return ip_len, 0, 0, 0, 0, 0, flags | skip.args[0], version, proto, 0, fields, saddr, daddr
    if proto == IPPROTO_TCP:
        seq, ack, tflags, thdr = segment.seq, segment.ack, segment._off_flags & 0xFF, segment.off * 4
    else:
        seq, ack, tflags, thdr = 0, 0, 0, 8
    payload = rest - thdr
    if payload < 0:
        flags |= Flag.BAD_HEADER
        payload = 0
    return (ip_len, payload, seq, ack, segment.sport, segment.dport, flags, version, proto, tflags,
            fields, saddr, daddr)
