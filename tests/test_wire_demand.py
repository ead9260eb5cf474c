"""The demand a tcpdump-driven simulation replays: ADUs regrouped from a pcap's segments."""
from __future__ import annotations

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP
from scapy.packet import Raw

from magnetlib import app_demand, wire_demand
from magnetlib.app_demand import CLIENT, CLOSE, OPEN, SEND, SERVER
from magnetlib.errors import TraceError

from .pcapgen import write_classic

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

MS = 1_000_000
CLIENT_IP, SERVER_IP = "10.203.1.1", "10.203.1.2"


class Conversation:
    """Packets of TCP connections as a capture next to the client sees them."""

    def __init__(self):
        self.packets = []                  # (ns, bytes)

    def add(self, ns, sender, port, flags, seq, size=0, ack=1):
        src, dst = (CLIENT_IP, SERVER_IP) if sender == CLIENT else (SERVER_IP, CLIENT_IP)
        sport, dport = (port, 80) if sender == CLIENT else (80, port)
        pkt = IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, flags=flags, seq=seq, ack=ack)
        self.packets.append((ns, bytes(pkt / Raw(b"\0" * size)) if size else bytes(pkt)))

    def write(self, path):
        self.packets.sort(key=lambda p: p[0])
        frames = [data for _, data in self.packets]
        times = [ns for ns, _ in self.packets]
        write_classic(path, frames, 101, nano=True)
        # write_classic spaces records evenly: rewrite their times
        raw = bytearray(path.read_bytes())
        at = 24
        for ns, data in zip(times, frames):
            sec, sub = divmod(1_700_000_000_000_000_000 + ns, 1_000_000_000)
            raw[at:at + 8] = np.array([sec, sub], "<u4").tobytes()
            at += 16 + len(data)
        path.write_bytes(bytes(raw))
        return path


def web(conv: Conversation, port: int = 40001, t0: int = 0) -> None:
    """A request of 100 B, a 3000 B answer in three segments (the second sent twice: a
    retransmission), a second request of 50 B 20 ms later, a 1448 B answer, FINs."""
    c, s = 1000, 5000                           # initial sequence numbers
    conv.add(t0, CLIENT, port, "S", c)
    conv.add(t0 + 2 * MS, SERVER, port, "SA", s)
    conv.add(t0 + 2 * MS + 50_000, CLIENT, port, "A", c + 1)
    conv.add(t0 + 3 * MS, CLIENT, port, "PA", c + 1, 100)
    for k, (ns, size) in enumerate([(8 * MS, 1448), (8 * MS + 100_000, 1448), (8 * MS + 200_000, 104)]):
        conv.add(t0 + ns, SERVER, port, "PA", s + 1 + 1448 * k, size)
    conv.add(t0 + 12 * MS, SERVER, port, "PA", s + 1 + 1448, 1448)          # retransmitted
    conv.add(t0 + 30 * MS, CLIENT, port, "PA", c + 101, 50)
    conv.add(t0 + 36 * MS, SERVER, port, "PA", s + 3001, 1448)
    conv.add(t0 + 40 * MS, CLIENT, port, "FA", c + 151)
    conv.add(t0 + 42 * MS, SERVER, port, "FA", s + 4449)


def rows(d, connection, event=SEND):
    keep = (d.connection == connection) & (d.event == event)
    return d.part(keep)


@pytest.fixture
def pcap(tmp_path):
    conv = Conversation()
    web(conv)
    web(conv, port=40002, t0=5 * MS)            # a second connection, overlapping the first
    return conv.write(tmp_path / "a.pcap")


def test_adus_as_tmix_regroups_them(pcap):
    d = wire_demand.from_pcap(pcap, CLIENT_IP)
    assert list(d.connections) == [1, 2]
    one = rows(d, 1)
    assert list(one.side) == [CLIENT, SERVER, CLIENT, SERVER]
    assert list(one.size) == [100, 3000, 50, 1448]          # the retransmission counted once
    assert list(one.adu) == [0, 1, 2, 3]
    assert list(one.wait_bytes) == [0, 100, 3000, 150]
    # think times as seen at the capture point: from the open, then from the last segment before
    # that brought new bytes (the retransmission at 12 ms brought none)
    assert list(one.think_ns) == [3 * MS, 5 * MS, 30 * MS - 8_200_000, 6 * MS]
    assert list(one.time_ns) == [3 * MS, 8 * MS, 30 * MS, 36 * MS]
    opens = d.part(d.event == OPEN)
    assert list(opens.time_ns) == [0, 5 * MS] and list(opens.side) == [CLIENT, CLIENT]
    closes = rows(d, 1, CLOSE)
    assert list(closes.side) == [CLIENT, SERVER] and list(closes.time_ns) == [40 * MS, 42 * MS]
    assert list(closes.wait_bytes) == [4448, 150]
    assert list(rows(d, 2).time_ns) == [8 * MS, 13 * MS, 35 * MS, 41 * MS]


def test_per_segment_for_open_loop(pcap):
    d = wire_demand.from_pcap(pcap, CLIENT_IP, per_segment=True)
    one = rows(d, 1)
    assert list(one.size) == [100, 1448, 1448, 104, 50, 1448]
    assert list(one.adu) == [0, 1, 1, 1, 2, 3]
    assert list(one.time_ns) == [3 * MS, 8 * MS, 8 * MS + 100_000, 8 * MS + 200_000, 30 * MS, 36 * MS]
    # a packet replayer waits for nothing: each side's segments at their spacing
    assert not d.wait_bytes.any()
    assert list(one.think_ns) == [3 * MS, 8 * MS, 100_000, 100_000, 27 * MS, 36 * MS - 8_200_000]
    assert list(rows(d, 1, CLOSE).think_ns) == [10 * MS, 6 * MS]
    assert d.sent_bytes(SERVER) == 2 * 4448 and d.sent_bytes(CLIENT) == 2 * 150


def test_written_and_read_back_by_both_replayers_form(pcap, tmp_path):
    d = wire_demand.from_pcap(pcap, CLIENT_IP)
    for name in ("w.csv", "w.magnet"):
        app_demand.write(d, tmp_path / name)
        back = app_demand.read(tmp_path / name)
        for column in app_demand.COLUMNS:
            assert np.array_equal(getattr(back, column), getattr(d, column)), (name, column)


def test_server_side_capture_point(pcap):
    """Seen from the server's address, the sides swap: the server's host is `client`."""
    d = wire_demand.from_pcap(pcap, SERVER_IP)
    assert list(rows(d, 1).side) == [SERVER, CLIENT, SERVER, CLIENT]
    assert list(d.part(d.event == OPEN).side) == [SERVER, SERVER]


def test_from_a_from_pcap_trace(pcap, tmp_path):
    import magnetlib
    from magnetlib.pcap import convert, read
    out = convert.from_pcap(read(pcap), convert.parse_address(CLIENT_IP))
    magnetlib.write(tmp_path / "a.magnet", out.records, out.meta)
    with magnetlib.open(tmp_path / "a.magnet") as t:
        d = wire_demand.from_wire(t)
    assert list(rows(d, 1).size) == [100, 3000, 50, 1448]


def test_no_tcp_headers_refused(tmp_path):
    import magnetlib
    rec = magnetlib.empty_records(3)
    rec["timestamp"], rec["event"], rec["size"] = [1, 2, 3], 3, 100
    magnetlib.write(tmp_path / "t.magnet", rec)
    with magnetlib.open(tmp_path / "t.magnet") as t, pytest.raises(TraceError, match="sequence numbers"):
        wire_demand.from_wire(t)
