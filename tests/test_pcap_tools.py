"""Flows, offload detection, trace <-> pcap conversion, and magnet compare."""
import numpy as np
import pytest

import magnetlib
from magnetlib import pcap
from magnetlib.format import Event, ExtValid
from magnetlib.pcap.columns import PACKET_DTYPE, V4_MAPPED
from magnetlib.pcap.writer import synthetic_packets, write_pcap

from .conftest import assert_clean_error

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

T0 = 1_700_000_000_000_000_000


def _v4(a, b, c, d):
    return np.frombuffer(V4_MAPPED + bytes([a, b, c, d]), np.uint8)


def handshake_and_data(n_data=50, mss=1448, big=False):
    """A TCP connection from 10.0.0.2 (client) to 10.0.0.1:80 (server), data server->client."""
    rows = [(0, "c", 0x02, 0, 0), (1, "s", 0x12, 0, 0), (2, "c", 0x10, 0, 0)]
    for k in range(n_data):
        rows.append((3 + 2 * k, "s", 0x18, mss * (8 if big else 1), k))
        rows.append((4 + 2 * k, "c", 0x10, 0, k))
    p = np.zeros(len(rows), PACKET_DTYPE)
    client, server = _v4(10, 0, 0, 2), _v4(10, 0, 0, 1)
    for i, (t, who, flags, size, k) in enumerate(rows):
        c = who == "c"
        p[i]["time_ns"] = T0 + t * 1_000_000
        p[i]["ip_version"], p[i]["proto"], p[i]["tcp_flags"], p[i]["payload"] = 4, 6, flags, size
        p[i]["saddr"], p[i]["daddr"] = (client, server) if c else (server, client)
        p[i]["sport"], p[i]["dport"] = (50000, 80) if c else (80, 50000)
        p[i]["seq"] = 100 if c else 5000 + (0 if flags & 2 else 1 + k * mss * (8 if big else 1))
    return p


def test_flows_group_both_directions_initiator_first(tmp_path):
    write_pcap(tmp_path / "h.pcap", handshake_and_data())
    cap = pcap.read(tmp_path / "h.pcap")
    f = pcap.flows.group(cap)
    assert len(f) == 1
    row = f.table.iloc[0]
    assert (row["a_addr"], row["a_port"], row["b_addr"], row["b_port"]) == ("10.0.0.2", 50000, "10.0.0.1", 80)
    assert row["bytes_ba"] == 50 * 1448 and row["bytes_ab"] == 0 and row["syn"]
    assert row["packets_ab"] == 52 and row["packets_ba"] == 51


def test_flows_of_many(tmp_path):
    p = synthetic_packets(20000, flows=16)
    write_pcap(tmp_path / "s.pcap", p)
    f = pcap.flows.group(pcap.read(tmp_path / "s.pcap"))
    assert len(f) == 16 and f.table[["packets_ab", "packets_ba"]].to_numpy().sum() == 20000


def _flow_table_by_chunks(p, cuts):
    table, seen = pcap.flows.FlowTable(), []
    for lo, hi in zip([0, *cuts], [*cuts, len(p)]):
        index, flow, low = table.add(p[lo:hi])
        seen.append((index + lo, flow, low))
    final = table.final_ids()
    return ([np.concatenate([s[0] for s in seen]), final[np.concatenate([s[1] for s in seen])],
             np.concatenate([s[2] for s in seen])], table.table())


@pytest.mark.parametrize("seed", range(4))
def test_flow_lookup_in_c_equals_numpy(monkeypatch, seed):
    """FlowTable's C hash table and its numpy lookup give the same flows, sides and table,
    fed the same packets in chunks of any size: many flows, both directions, IPv4 and
    IPv6, one address with two ports, and packets no flow holds."""
    from magnetlib.pcap.fast import c_loops
    if c_loops() is None:
        pytest.skip("no C compiler: only the numpy lookup exists here")
    rng = np.random.default_rng(seed)
    n, hosts = 20000, 300
    p = np.zeros(n, PACKET_DTYPE)
    addrs = rng.integers(0, 256, (hosts, 16), dtype=np.uint8)
    addrs[: hosts // 2, :12] = np.frombuffer(V4_MAPPED, np.uint8)
    a, b = rng.integers(0, hosts, n), rng.integers(0, hosts, n)
    p["saddr"], p["daddr"] = addrs[a], addrs[b]
    p["sport"], p["dport"] = rng.integers(0, 4, n) + 80, rng.integers(0, 4, n) + 80
    p["ip_version"] = np.where(a < hosts // 2, 4, 6)
    p["proto"] = rng.choice([6, 17, 1], n, p=[0.6, 0.35, 0.05])
    p["tcp_flags"] = rng.choice([0x02, 0x12, 0x10], n)
    p["payload"], p["time_ns"] = rng.integers(0, 1500, n), T0 + np.arange(n) * 1000
    p["flags"][rng.random(n) < 0.02] = pcap.Flag.TRUNCATED
    cuts = sorted(rng.choice(np.arange(1, n), int(rng.integers(1, 30)), replace=False).tolist())
    arrays, table = _flow_table_by_chunks(p, cuts)
    monkeypatch.setenv("MAGNET_NATIVE", "0")
    arrays_np, table_np = _flow_table_by_chunks(p, cuts)
    assert len(table) > 1000
    for got, want in zip(arrays, arrays_np):
        assert np.array_equal(got, want)
    assert table.equals(table_np)


def test_offload_detected(tmp_path, magnet):
    write_pcap(tmp_path / "tso.pcap", handshake_and_data(big=True), snaplen=128)
    cap = pcap.read(tmp_path / "tso.pcap")
    report = pcap.offload.oversize(cap)
    assert report.packets == 50 and report.largest == 8 * 1448 + 40 and report.sources[0][0] == "10.0.0.1"
    assert "TSO/GSO" in report.message()
    assert pcap.offload.oversize(cap, mtu=65536).packets == 0
    err = magnet("pcap-info", tmp_path / "tso.pcap", check=True).stderr_text
    assert "50 packets larger than the 1500-byte MTU" in err


def test_from_pcap_directions_and_ext(tmp_path, magnet):
    write_pcap(tmp_path / "h.pcap", handshake_and_data())
    magnet("from-pcap", tmp_path / "h.pcap", "-o", tmp_path / "h.magnet", "--local", "10.0.0.1", check=True)
    t = magnetlib.open(tmp_path / "h.magnet").check()
    assert t.meta.clock_name == "REALTIME" and t.meta.wall_anchor_ns == T0 and t.has_ext
    ev = t.column("event")[t.header_len:]
    assert (ev == Event.DEV_SEND).sum() == 51 and (ev == Event.DEV_RECV).sum() == 52
    sent = t.select(Event.DEV_SEND)
    assert t.column_at("size", sent).sum() == 50 * 1448
    assert (t.column_at("sport", sent) == 80).all() and (t.column_at("valid", sent) & ExtValid.ADDR).all()
    # Inferred without --local: the address in the most flows (a tie here: the first packet's sender).
    proc = magnet("from-pcap", tmp_path / "h.pcap", "-o", tmp_path / "i.magnet", "--no-ext", check=True)
    assert "local host 10.0.0.2" in proc.stderr_text
    assert not magnetlib.open(tmp_path / "i.magnet").has_ext


def test_from_pcap_writes_the_ip_fields_it_marks_valid(tmp_path, magnet):
    """The IP group of the extended data holds the packet's own TOS, TTL, ID and flags."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap
    frames = [Ether() / IP(src="10.0.0.1", dst="10.0.0.2", ttl=64, flags="DF", id=0xC0D0, tos=0x10)
              / TCP(sport=80, dport=5000, flags="PA") / (b"x" * 100),
              Ether() / IPv6(src="fd00::1", dst="fd00::2", hlim=33, tc=0xB8)
              / TCP(sport=81, dport=5001, flags="PA") / (b"y" * 10)]
    wrpcap(str(tmp_path / "ip.pcap"), frames)
    for engine in ("fast", "dpkt"):
        out = tmp_path / f"{engine}.magnet"
        magnet("from-pcap", tmp_path / "ip.pcap", "-o", out, "--engine", engine, "--local", "10.0.0.1", check=True)
        t = magnetlib.open(out)
        r = t.records[t.header_len:]
        assert (r["valid"] & ExtValid.IP).all()
        assert list(r["ip_ttl"]) == [64, 33] and list(r["ip_tos"]) == [0x10, 0xB8]
        assert list(r["ip_id"]) == [0xC0D0, 0] and list(r["ip_frag_off"]) == [0x4000, 0]


@pytest.mark.parametrize("workload", ["ftp", "mp3"])
def test_round_trip_trace_pcap_trace(tmp_path, magnet, workload):
    src = tmp_path / "a.magnet"
    magnet("synth", workload, "--duration", "3", "-o", src, check=True)
    magnet("to-pcap", src, "-o", tmp_path / "a.pcap", check=True)
    assert (tmp_path / "a.pcap").stat().st_mode & 0o777 == 0o600          # private, as traces
    magnet("from-pcap", tmp_path / "a.pcap", "-o", tmp_path / "b.magnet", check=True)
    a, b = magnetlib.open(src), magnetlib.open(tmp_path / "b.magnet")
    pa, pb = a.select(Event.DEV_SEND), b.select(Event.DEV_SEND)
    (na, sa), (nb, sb) = a.series(pa), b.series(pb)
    assert len(pa) == len(pb) == a.scan.counts[Event.DEV_SEND]
    assert np.array_equal(sa, sb)
    assert np.array_equal(na - na[0], nb - nb[0])                  # nanosecond pcap: exact
    assert b.scan.counts.get(Event.DEV_RECV, 0) == 0


def test_round_trip_keeps_extended_data_and_both_directions(tmp_path, magnet):
    write_pcap(tmp_path / "h.pcap", handshake_and_data())
    magnet("from-pcap", tmp_path / "h.pcap", "-o", tmp_path / "h.magnet", "--local", "10.0.0.1", check=True)
    magnet("to-pcap", tmp_path / "h.magnet", "-o", tmp_path / "back.pcap", check=True)
    a, b = pcap.read(tmp_path / "h.pcap").packets, pcap.read(tmp_path / "back.pcap").packets
    for name in ("time_ns", "payload", "seq", "sport", "dport", "saddr", "daddr", "tcp_flags"):
        assert np.array_equal(a[name], b[name]), name


def test_to_pcap_opens_in_scapy_with_valid_checksums(tmp_path, magnet):
    from scapy.layers.inet import IP, TCP
    from scapy.utils import rdpcap
    magnet("synth", "ftp-paper", "--duration", "2", "-o", tmp_path / "p.magnet", check=True)
    magnet("to-pcap", tmp_path / "p.magnet", "-o", tmp_path / "p.pcap", check=True)
    for pkt in rdpcap(str(tmp_path / "p.pcap"))[:20]:
        sums = pkt[IP].chksum, pkt[TCP].chksum
        del pkt[IP].chksum, pkt[TCP].chksum
        again = pkt.__class__(bytes(pkt))
        assert (again[IP].chksum, again[TCP].chksum) == sums
        assert pkt[IP].src == "10.0.0.1" and pkt[TCP].dport == 5001


def test_compare_by_size_and_plot(tmp_path, magnet):
    src = tmp_path / "f.magnet"
    magnet("synth", "ftp", "--duration", "3", "-o", src, check=True)
    magnet("to-pcap", src, "-o", tmp_path / "f.pcap", check=True)
    out = magnet("compare", src, tmp_path / "f.pcap", "--plot", tmp_path / "f8.png", check=True).stdout_text
    assert "matched by time and size" in out and "Application (SOCK_SEND)" in out and "Wire (pcap)" in out
    assert "app bytes not on the wire 0" in out and "retransmitted wire packets 0" in out
    assert (tmp_path / "f8.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trace, cap = magnetlib.open(src), pcap.read(tmp_path / "f.pcap")
    s = pcap.compare.compare(trace, cap).streams[0]
    assert len(s.wire["send"].size) == trace.scan.counts[Event.DEV_SEND]
    lag = s.lag("send")
    assert (lag["first"] >= 0).all() and (lag["last"] >= lag["first"]).all()
    assert s.table("send")["bytes"].tolist() == [250 * 10240 * 3 // 5, 250 * 10240 * 3 // 5]
    dev = s.device["send"]                         # the trace's own DEV_SEND events, paired by size/time
    assert dev["matched"] == trace.scan.counts[Event.DEV_SEND] and dev["only in the pcap"] == 0
    assert "DEV_SEND events vs pcap packets (paired by size and time): matched" in out


def test_compare_streamed_equals_compare_in_memory(tmp_path, magnet, monkeypatch):
    """compare reads the pcap a chunk at a time (three passes): with tiny chunks its answer
    is the one it gives for the whole capture in memory."""
    from magnetlib.pcap import fast
    src = tmp_path / "f.magnet"
    magnet("synth", "ftp-variable", "--duration", "3", "-o", src, check=True)
    magnet("to-pcap", src, "-o", tmp_path / "f.pcap", check=True)
    trace = magnetlib.open(src)
    whole = pcap.compare.compare(trace, pcap.read(tmp_path / "f.pcap"))
    monkeypatch.setattr(fast, "SEGMENT_BYTES", 5000)
    monkeypatch.setattr(fast, "DECODED_PACKETS", 97)
    streamed = pcap.compare.compare(trace, lambda: pcap.stream(tmp_path / "f.pcap", engine="fast"))
    assert len(whole.streams) == len(streamed.streams) == 1
    a, b = whole.streams[0], streamed.streams[0]
    for direction in ("send", "recv"):
        for name in ("ns", "size", "seq"):
            assert np.array_equal(getattr(a.wire[direction], name), getattr(b.wire[direction], name))
        assert a.table(direction).equals(b.table(direction))
    assert a.device == b.device and a.retransmissions == b.retransmissions


def test_compare_by_addresses(tmp_path, magnet):
    """A trace with extended data (addresses, ports) matches its flow among others."""
    p = np.concatenate([handshake_and_data(), synthetic_packets(3000, start_ns=T0)])
    p = p[np.argsort(p["time_ns"], kind="stable")]
    write_pcap(tmp_path / "m.pcap", p)
    rec = magnetlib.empty_records(10, ext=True)
    rec["sockid"], rec["event"], rec["size"] = 7, Event.SOCK_SEND, 1448 * 5
    rec["timestamp"] = T0 + 2_500_000 + np.arange(10) * 10_000_000
    rec["valid"], rec["ip_version"], rec["sport"], rec["dport"] = ExtValid.ADDR, 4, 80, 50000
    rec["saddr"], rec["daddr"] = _v4(10, 0, 0, 1), _v4(10, 0, 0, 2)
    magnetlib.write(tmp_path / "s.magnet", rec, wall_anchor_ns=T0, anchor_ticks=T0)
    out = magnet("compare", tmp_path / "s.magnet", tmp_path / "m.pcap", check=True).stdout_text
    assert "stream 0x7 <-> flow 0: 10.0.0.1:80 -> 10.0.0.2:50000 (matched by addresses)" in out
    assert "wall-clock anchor" in out


def test_compare_no_match_and_bad_input(tmp_path, magnet):
    magnet("synth", "ftp", "--duration", "2", "-o", tmp_path / "f.magnet", check=True)
    write_pcap(tmp_path / "h.pcap", handshake_and_data())
    assert_clean_error(magnet("compare", tmp_path / "f.magnet", tmp_path / "h.pcap"), "matched a TCP flow")
    (tmp_path / "junk.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(10))
    assert_clean_error(magnet("compare", tmp_path / "f.magnet", tmp_path / "junk.pcap"), "junk.pcap")
    assert_clean_error(magnet("to-pcap", tmp_path / "junk.pcap", "-o", tmp_path / "o.pcap"), "magnet trace")


def test_cli_reports_file_problems_with_status_2(tmp_path, magnet):
    write_pcap(tmp_path / "h.pcap", handshake_and_data())
    raw = (tmp_path / "h.pcap").read_bytes()
    (tmp_path / "t.pcap").write_bytes(raw[:-30])
    proc = magnet("pcap-info", tmp_path / "t.pcap")
    assert proc.returncode == 2 and "truncated final record" in proc.stderr_text
    assert "Traceback" not in proc.stderr_text and "packets   102" in proc.stdout_text
