"""Conversions between captures and traces.

from_pcap: a pcap's TCP/UDP packets as DEV_SEND/DEV_RECV records (size = transport
  payload), clock REALTIME (timestamps are the packets' Unix ns, the wall anchor is
  the first packet's), one sockid per flow (its number + 1), direction from the
  local host's point of view, extended data (addresses, ports, seq/ack, flags, the IP
  header's length, protocol, TOS, TTL, ID and flags) unless ext=False.  Kernel drops a pcapng file reports become
  a LOST record.
to_pcap: a trace's wire-level events as packets for write_pcap (zero payloads),
  with the trace's addresses/ports/seq/flags where its extended data has them and
  placeholders otherwise: the traced host is 10.0.0.1, stream k's peer 10.1.k/256.k%256
  (k from 1), ports 40000+k (local) and 5001, sequence numbers counting the
  stream's bytes in each direction from 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import format as fmt
from ..errors import TraceError
from ..format import Clock, Event, ExtValid
from ..meta import TraceMeta
from ..trace import Trace, format_addresses
from ..writer import TraceWriter, empty_records
from .columns import IPPROTO_TCP, IPPROTO_UDP, PACKET_DTYPE, TCP_ACK, TCP_PSH, V4_MAPPED
from .flows import FlowTable
from .pcapfile import PcapFile

EXT_GROUPS = ExtValid.ADDR | ExtValid.SEGMENT | ExtValid.IP
NEVER = np.iinfo(np.int64).max


@dataclass
class LocalHost:
    address: bytes            # 16 bytes, IPv4 mapped
    how: str                  # "given", or how it was inferred

    @property
    def name(self) -> str:
        return str(format_addresses(np.frombuffer(self.address, np.uint8)[None, :])[0])


def parse_address(text: str) -> bytes:
    import ipaddress
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"not an IP address: {text!r}") from None
    return V4_MAPPED + addr.packed if addr.version == 4 else addr.packed


@dataclass
class FromPcap:
    count: int              # records
    meta: TraceMeta
    local: LocalHost | None
    flows: int
    skipped: int            # packets that are not whole TCP/UDP packets
    foreign_flows: int      # flows the local host is no end of: direction from their initiator
    records: np.ndarray | None = None     # from_pcap only: the records themselves


class PcapFlows:
    """from-pcap's first pass over a capture: its flows, and what writing them in time
    order needs (each chunk's earliest flow packet, the first packet before the epoch)."""

    def __init__(self):
        self.flows = FlowTable()
        self.chunk_first_ns: list[int] = []
        self.flow_packets = 0
        self.bad_time: int | None = None          # capture position of a packet at time <= 0

    def add(self, chunk: np.ndarray) -> None:
        before = self.flows.packets_seen
        index, _, _ = self.flows.add(chunk)
        t = chunk["time_ns"][index]
        self.chunk_first_ns.append(int(t.min()) if len(t) else NEVER)
        self.flow_packets += len(index)
        if self.bad_time is None and (t <= 0).any():
            self.bad_time = before + int(index[np.argmax(t <= 0)])

    def local_host(self, local: bytes | None) -> LocalHost:
        """The given host, or the address taking part in the most flows; ties go to the
        sender of the first packet."""
        if local is not None:
            return LocalHost(local, "given")
        a, b = self.flows.ends()
        uniq, counts = np.unique(np.concatenate([a, b]), axis=0, return_counts=True)
        best = np.flatnonzero(counts == counts.max())
        n = len(self.flows)
        if len(best) == 1:
            return LocalHost(uniq[best[0]].tobytes(), f"in {counts.max()} of {n} flows")
        return LocalHost(self.flows.first_sender().tobytes(), "the sender of the first packet (every "
                                                               f"address is in {counts.max()} of {n} flows)")


def from_pcap(cap: PcapFile, local: bytes | None = None, ext: bool = True) -> FromPcap:
    """DEV_SEND/DEV_RECV records of a capture's TCP and UDP packets (see the module doc)."""
    first = PcapFlows()
    first.add(cap.packets)
    conversion = _Conversion(cap, first, local, ext)
    parts = list(conversion.batches([cap.packets]))
    records = np.concatenate(parts) if parts else empty_records(0, ext=ext)
    return conversion.result(len(records), records)


def write_from_pcap(cap: PcapFile, first: PcapFlows, packets, path: str, local: bytes | None = None,
                    ext: bool = True) -> FromPcap:
    """from_pcap's records written as a trace at `path`, a chunk at a time: `first` is the
    first pass over the capture, `packets` a second stream of the same packets."""
    conversion = _Conversion(cap, first, local, ext)
    count = 0
    with TraceWriter(path, conversion.meta, ext=ext) as out:
        for batch in conversion.batches(packets):
            out.append(batch)
            count += len(batch)
    return conversion.result(count)


class _Conversion:
    """Packets to records, given the first pass: the local host, each flow's id and sides."""

    def __init__(self, cap: PcapFile, first: PcapFlows, local: bytes | None, ext: bool):
        if not first.flow_packets:
            raise TraceError(cap.path, "no whole TCP or UDP packets to convert")
        if first.bad_time is not None:
            raise TraceError(cap.path, f"packet {first.bad_time} has a time at or before the Unix epoch: "
                                       "not usable as a trace timestamp")
        self.cap, self.first, self.ext = cap, first, ext
        self.host = first.local_host(local)
        self.here = np.frombuffer(self.host.address, np.uint8)
        a, b = first.flows.ends()
        self.ours = (a == self.here).all(axis=1) | (b == self.here).all(axis=1)
        self.final = first.flows.final_ids()
        self.a_low = first.flows.openers()[1]
        self.seen = first.flows.packets_seen
        self.drops = sum(cap.interface_drops.values())
        start = int(min(first.chunk_first_ns))
        self.meta = TraceMeta(anchor_ticks=start, wall_anchor_ns=start, clock_source=Clock.REALTIME,
                              producer=f"magnet from-pcap (local host {self.host.name}, {self.host.how})",
                              event_mask=fmt.event_mask([Event.DEV_SEND, Event.DEV_RECV]),
                              ext_mask=int(EXT_GROUPS) if ext else None)

    def batches(self, packets):
        """Records of the flow packets of each chunk, in time order across chunks (a record
        waits until no later chunk can hold an earlier one), then the LOST record of drops."""
        later = np.minimum.accumulate(np.array(self.first.chunk_first_ns + [NEVER], np.int64)[::-1])[::-1]
        flows = self.first.flows                    # the same flows, looked up again
        pending = empty_records(0, ext=self.ext)
        for k, chunk in enumerate(packets):
            index, provisional, src_low = flows.add(chunk, count=False)
            flow = self.final[provisional]
            p = chunk[index]
            sent = np.where(self.ours[flow], (p["saddr"] == self.here).all(axis=1), src_low == self.a_low[flow])
            records = _records(p, flow, sent, self.ext)
            pending = np.concatenate([pending, records]) if len(pending) else records
            t = pending["timestamp"]
            if not len(t) or (t[-1] <= later[k + 1] and (t[1:] >= t[:-1]).all()):
                yield pending                        # in order and complete: as it is
                pending = pending[:0]
                continue
            ready = t <= later[k + 1]
            yield pending[ready][np.argsort(t[ready], kind="stable")]
            pending = pending[~ready]
        yield pending[np.argsort(pending["timestamp"], kind="stable")]
        if self.drops:                              # the kernel's count: after the packets
            lost = empty_records(1, ext=self.ext)
            lost["timestamp"], lost["event"], lost["size"] = flows.last_ns(), Event.LOST, self.drops
            yield lost

    def result(self, count: int, records: np.ndarray | None = None) -> FromPcap:
        return FromPcap(count, self.meta, self.host, len(self.first.flows), self.seen - self.first.flow_packets,
                        int(np.count_nonzero(~self.ours)), records)


def _records(p: np.ndarray, flow: np.ndarray, sent: np.ndarray, ext: bool) -> np.ndarray:
    rec = empty_records(len(p), ext=ext)
    rec["sockid"] = flow + 1
    rec["timestamp"] = p["time_ns"]
    rec["event"] = np.where(sent, Event.DEV_SEND, Event.DEV_RECV)
    rec["size"] = np.minimum(p["payload"], np.iinfo(np.int32).max)
    if ext:
        _fill_ext(rec, p)
    return rec


def _fill_ext(rec: np.ndarray, p: np.ndarray) -> None:
    rec["valid"] = int(EXT_GROUPS)
    rec["ip_version"], rec["sport"], rec["dport"] = p["ip_version"], p["sport"], p["dport"]
    rec["saddr"], rec["daddr"] = p["saddr"], p["daddr"]
    rec["seq"], rec["ack_seq"], rec["tcp_flags"] = p["seq"], p["ack"], p["tcp_flags"]
    rec["ip_len"] = np.minimum(p["ip_len"], 0xFFFF)
    rec["ip_protocol"] = p["proto"]
    rec["ip_tos"], rec["ip_ttl"] = p["ip_tos"], p["ip_ttl"]
    rec["ip_id"], rec["ip_frag_off"] = p["ip_id"], p["ip_frag_off"]


# ------------------------------------------------------------- to pcap ---
WIRE_LAYERS = ("dev", "ip", "tcp")
LOCAL_PLACEHOLDER = V4_MAPPED + bytes([10, 0, 0, 1])


def wire_layer(trace: Trace) -> str:
    """The lowest layer the trace has send or receive events of."""
    counts = trace.scan.counts
    for layer in WIRE_LAYERS:
        if any(counts.get(ev, 0) for ev in fmt.layer_events(layer, "send") + fmt.layer_events(layer, "recv")):
            return layer
    raise TraceError(trace.path, "no TCP, IP or device events to write as packets")


def to_packets(trace: Trace, layer: str | None = None) -> tuple[np.ndarray, str, bool]:
    """Packets (PACKET_DTYPE) for a trace's events of one layer; returns (packets, layer, placeholders)."""
    layer = layer or wire_layer(trace)
    send, recv = fmt.layer_events(layer, "send"), fmt.layer_events(layer, "recv")
    pos = trace.select(send + recv)
    ns, size = trace.series(pos)
    keep = size >= 0
    pos, ns, size = pos[keep], ns[keep], size[keep]
    if not len(pos):
        raise TraceError(trace.path, f"no {layer.upper()} events to write as packets")
    is_send = np.isin(trace.column_at("event", pos), send)
    sid = trace.column_at("sockid", pos)
    p = np.zeros(len(pos), PACKET_DTYPE)
    p["time_ns"] = trace.datetimes(ns).astype(np.int64) if trace.meta.wall_anchor_ns is not None else ns
    p["payload"], p["proto"], p["ip_version"] = size, IPPROTO_TCP, 4
    _placeholders(p, sid, is_send)
    valid = trace.column_at("valid", pos) if trace.has_ext else np.zeros(len(pos), np.uint8)
    addr = (valid & ExtValid.ADDR) != 0
    if addr.any():
        r = trace.records[pos[addr]]
        p["ip_version"][addr] = r["ip_version"]
        p["sport"][addr], p["dport"][addr] = _native(r["sport"]), _native(r["dport"])
        p["saddr"][addr], p["daddr"][addr] = r["saddr"], r["daddr"]
    seg = (valid & ExtValid.SEGMENT) != 0
    if seg.any():
        r = trace.records[pos[seg]]
        p["seq"][seg], p["ack"][seg], p["tcp_flags"][seg] = _native(r["seq"]), _native(r["ack_seq"]), r["tcp_flags"]
    ip = (valid & ExtValid.IP) != 0
    if ip.any():
        proto = trace.column_at("ip_protocol", pos[ip])
        p["proto"][ip] = np.where(proto == IPPROTO_UDP, IPPROTO_UDP, IPPROTO_TCP)
    order = np.argsort(p["time_ns"], kind="stable")
    return p[order], layer, not bool(addr.all())


def _native(col: np.ndarray) -> np.ndarray:
    return col if col.dtype.isnative else col.astype(col.dtype.newbyteorder("="))


def _placeholders(p: np.ndarray, sid: np.ndarray, is_send: np.ndarray) -> None:
    """Addresses, ports, seq/ack and flags for events without extended data."""
    streams, k = np.unique(sid, return_inverse=True)
    k = k.reshape(-1).astype(np.int64) + 1
    peer = np.zeros((len(p), 16), np.uint8)
    peer[:, 10:12] = 0xFF
    peer[:, 12], peer[:, 13], peer[:, 14], peer[:, 15] = 10, 1, (k >> 8) & 0xFF, k & 0xFF
    local = np.broadcast_to(np.frombuffer(LOCAL_PLACEHOLDER, np.uint8), (len(p), 16))
    p["saddr"] = np.where(is_send[:, None], local, peer)
    p["daddr"] = np.where(is_send[:, None], peer, local)
    lport, rport = 40000 + (k % 20000), np.full(len(p), 5001)
    p["sport"], p["dport"] = np.where(is_send, lport, rport), np.where(is_send, rport, lport)
    # Sequence numbers: bytes of the stream so far in each direction (events are in file order).
    size = p["payload"].astype(np.int64)
    seq = np.zeros(len(p), np.int64)
    for direction in (True, False):
        sel = np.flatnonzero(is_send == direction)
        if not len(sel):
            continue
        order = sel[np.lexsort((np.arange(len(sel)), k[sel]))]
        csum = np.cumsum(size[order])
        starts = np.flatnonzero(np.r_[True, k[order][1:] != k[order][:-1]])
        base = np.repeat(csum[starts] - size[order][starts], np.diff(np.r_[starts, len(order)]))
        seq[order] = 1 + csum - size[order] - base
    p["seq"] = seq & 0xFFFFFFFF
    p["ack"] = 1
    p["tcp_flags"] = np.where(size > 0, TCP_PSH | TCP_ACK, TCP_ACK)
