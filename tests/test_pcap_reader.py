"""Reading captures: the fast path equals the dpkt path packet by packet; bad input never crashes."""
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magnetlib import native, pcap
from magnetlib.errors import TraceError
from magnetlib.pcap import Flag
from magnetlib.pcap.fast import c_loops, read_fast
from magnetlib.pcap.writer import synthetic_packets, write_pcap

from .conftest import FUZZ_EXAMPLES, assert_clean_error, both_versions, numpy_only
from .pcapgen import T0, frames, write_classic, write_pcapng

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

DATA = Path(__file__).parent / "data" / "tcpdump"
CORPUS = Path("/work/shared/corpus/tcpdump-tests")


def fast_reads(read):
    """read() by the fast reader's C loops (where a compiler is) and by its numpy version."""
    return both_versions(read, c_loops() is not None)


def same(path, expect_fallback=None):
    """The dpkt engine and both versions of the fast one read `path` identically; returns
    the fast capture."""
    ref = pcap.read(path, engine="dpkt")
    for fast in fast_reads(lambda: pcap.read(path, engine="fast")):
        assert len(fast) == len(ref)
        diff = np.flatnonzero(fast.packets != ref.packets)
        assert not len(diff), (path, diff[:5], fast.packets[diff[:1]], ref.packets[diff[:1]])
        assert (fast.problems, fast.trailing_bytes) == (ref.problems, ref.trailing_bytes)
        if expect_fallback is not None:
            assert fast.fallback == expect_fallback
    return fast


def test_c_loops_are_used_where_a_compiler_is():
    """With a C compiler (CI has one) the pcap fast path, the accumulators and the trace
    scan loop in C."""
    from magnetlib import accumulate, scan
    if not native.buildable() and not os.environ.get("CI"):
        pytest.skip("no C compiler or make: magnetlib runs the numpy versions")
    for loops in (c_loops, accumulate.c_loops, scan.c_loops):
        assert loops() is not None
        with numpy_only():
            assert loops() is None


@pytest.mark.parametrize("linktype", [1, 113, 101, 0, 108, 276])
@pytest.mark.parametrize("order,nano", [("<", False), (">", True), ("<", True), (">", False)])
def test_fast_equals_dpkt_on_generated_links(tmp_path, monkeypatch, linktype, order, nano):
    from magnetlib.pcap import fast
    monkeypatch.setattr(fast, "CHUNK_PACKETS", 5)          # packets handed to dpkt inside
    monkeypatch.setattr(fast, "split", lambda lo, hi: [(a, min(a + 13, hi)) for a in range(lo, hi, 13)])
    made = frames(linktype)
    path = tmp_path / "g.pcap"
    write_classic(path, [f for f, _ in made], linktype, order, nano)
    cap = same(path, expect_fallback=sum(not plain for _, plain in made))
    p = cap.packets
    plain = np.array([plain for _, plain in made])
    assert (p["flags"][plain] == 0).all() and set(p["ip_version"][plain]) == {4, 6}
    assert (p["time_ns"][1] - p["time_ns"][0]) == (1_234_567 if nano else 1_234_000)


def test_columns_match_scapy(tmp_path):
    """An independent oracle: scapy's own view of the packets it built."""
    from scapy.layers.inet import TCP
    from scapy.layers.l2 import Ether
    made = frames(1)
    path = tmp_path / "e.pcap"
    write_classic(path, [f for f, _ in made], 1)
    p = pcap.read(path).packets
    for k, (frame, plain) in enumerate(made):
        pkt = Ether(frame)
        if plain and pkt.haslayer(TCP):
            tcp = pkt[TCP]
            assert (p["sport"][k], p["dport"][k], p["seq"][k], p["ack"][k]) == (tcp.sport, tcp.dport, tcp.seq, tcp.ack)
            assert p["payload"][k] == len(tcp.payload) and p["tcp_flags"][k] == int(tcp.flags)


@pytest.mark.parametrize("cut", [0, 10, 14, 17, 30, 34, 40, 53, 60, 74])
def test_snaplen_shorter_than_headers(tmp_path, cut):
    made = frames(1, n_rounds=1)
    path = tmp_path / "cut.pcap"
    write_classic(path, [f for f, _ in made], 1, cut=cut)
    cap = same(path)
    if cut < 14:
        assert (cap.flags & Flag.TRUNCATED).all()


def test_payload_from_headers_when_snapped(tmp_path, monkeypatch):
    """Also: packets decoded in several ranges (threads) and chunks give the same columns."""
    from magnetlib.pcap import fast
    monkeypatch.setattr(fast, "CHUNK_PACKETS", 700)
    monkeypatch.setattr(fast, "split", lambda lo, hi: [(a, min(a + 1300, hi)) for a in range(lo, hi, 1300)])
    packets = synthetic_packets(5000)
    write_pcap(tmp_path / "s.pcap", packets, snaplen=96)
    cap = same(tmp_path / "s.pcap", expect_fallback=0)
    for name in ("time_ns", "payload", "seq", "ack", "sport", "dport", "saddr", "daddr", "tcp_flags", "proto"):
        assert np.array_equal(cap.packets[name], packets[name]), name
    assert (cap.packets["caplen"] == 96).sum() > 1000


def test_file_level_problems(tmp_path):
    made = [f for f, _ in frames(1, n_rounds=1)]
    write_classic(tmp_path / "tail.pcap", made, 1, tail=b"\x01" * 7)
    cap = same(tmp_path / "tail.pcap")
    assert len(cap) == len(made) and cap.trailing_bytes == 7 and "7 bytes after the last packet" in cap.problems[0]
    raw = (tmp_path / "tail.pcap").read_bytes()[:-7]
    (tmp_path / "trunc.pcap").write_bytes(raw[:-10])
    cap = same(tmp_path / "trunc.pcap")
    assert len(cap) == len(made) - 1 and "truncated final record" in cap.problems[0]
    bogus = bytearray(raw)
    second = 24 + 16 + len(made[0])
    bogus[second + 8:second + 12] = struct.pack("<I", 0xFFFFFF00)
    (tmp_path / "bogus.pcap").write_bytes(bytes(bogus))
    cap = same(tmp_path / "bogus.pcap")
    assert len(cap) == 1 and "corrupt record length" in cap.problems[0]
    write_classic(tmp_path / "link.pcap", made, 147)                  # a user link type
    cap = same(tmp_path / "link.pcap")
    assert (cap.flags & Flag.UNKNOWN_LINK).all() and cap.link_names() == "link type 147 (not decoded)"


@pytest.mark.parametrize("segment", [64, 700, 5000])
def test_segments_of_any_size_read_as_one_walk(tmp_path, monkeypatch, segment):
    """The fast reader walks and decodes the file a segment at a time: however the segments
    cut the records (and the fake headers in payloads), the packets and problems are the
    sequential walk's."""
    from magnetlib.pcap import fast
    monkeypatch.setattr(fast, "SEGMENT_BYTES", segment)
    rng = np.random.default_rng(5)
    fake = struct.pack("<IIII", 1_700_000_000, 5, 20, 20) + bytes(20)
    made = [f for f, _ in frames(1, n_rounds=2)] + [
        bytes(rng.integers(0, 256, 14)) + fake * int(rng.integers(0, 4)) for _ in range(300)]
    write_classic(tmp_path / "seg.pcap", made, 1, tail=b"\x01" * 9)
    cap = same(tmp_path / "seg.pcap")
    assert len(cap) == len(made) and "9 bytes after the last packet" in cap.problems[0]
    raw = (tmp_path / "seg.pcap").read_bytes()[:-9]
    (tmp_path / "trunc.pcap").write_bytes(raw[:-3])
    cap = same(tmp_path / "trunc.pcap")
    assert len(cap) == len(made) - 1 and "truncated final record" in cap.problems[0]
    chunks = list(pcap.stream(tmp_path / "seg.pcap", engine="fast"))
    assert len(chunks) > 1 and sum(len(c) for c in chunks) == len(made)


@pytest.mark.parametrize("content,problem", [
    (b"", "empty file"), (b"\xd4\xc3", "too short"), (b"hello, this is text\n" * 3, "not a pcap"),
    (struct.pack("<IHH", 0xA1B2C3D4, 2, 4) + b"\0" * 4, "truncated pcap file header"),
    (struct.pack("<IHHiIII", 0xA1B2C3D4, 3, 0, 0, 0, 65535, 1), "version 3.0"),
    (struct.pack("<IIII", 0x0A0D0D0A, 28, 0x01020304, 0), "no byte-order magic"),
])
def test_unreadable_files_are_one_clear_error(tmp_path, magnet, content, problem):
    path = tmp_path / "bad.pcap"
    path.write_bytes(content)
    for engine in ("auto", "dpkt"):
        with pytest.raises(TraceError, match=problem):
            pcap.read(path, engine=engine)
    assert_clean_error(magnet("pcap-info", path), "bad.pcap", problem)
    assert_clean_error(magnet("from-pcap", path, "-o", tmp_path / "x.magnet"), problem)
    assert not (tmp_path / "x.magnet").exists()


def test_lane_walk_survives_fake_headers(tmp_path, monkeypatch):
    """Payloads holding chains of valid-looking records mislead the lanes' guesses:
    lanes are walked again until the offsets are exactly the sequential walk's."""
    from magnetlib.pcap import fast
    monkeypatch.setenv("MAGNET_NATIVE", "0")             # the lanes are numpy's
    rng = np.random.default_rng(3)
    fake = struct.pack("<IIII", 1_700_000_000, 5, 20, 20) + bytes(20)
    made = [bytes(rng.integers(0, 256, 14)) + fake * int(rng.integers(0, 6))
            + bytes(rng.integers(0, 256, int(rng.integers(1, 30)))) for _ in range(40000)]
    write_classic(tmp_path / "fake.pcap", made, 1)
    rounds = []
    walk = fast._Walker.walk
    monkeypatch.setattr(fast._Walker, "walk", lambda self, s, b: rounds.append(len(s)) or walk(self, s, b))
    cap = same(tmp_path / "fake.pcap")
    assert len(rounds) > 1, "the guesses were never wrong: this test no longer tests the re-walk"
    assert np.array_equal(cap.packets["caplen"], [len(m) for m in made])


def test_lanes_over_zero_payloads_and_huge_records(tmp_path):
    packets = synthetic_packets(30000, start_ns=1_000_000_000)       # times near the epoch
    packets["payload"][::500] = 60000
    write_pcap(tmp_path / "z.pcap", packets)
    cap = same(tmp_path / "z.pcap", expect_fallback=0)
    assert np.array_equal(cap.packets["payload"], packets["payload"])


@pytest.mark.parametrize("order,tsresol", [("<", None), (">", 9), ("<", 3)])
def test_pcapng_multi_interface(tmp_path, order, tsresol):
    made = [(lt, frame, plain) for lt in (1, 101, 113) for frame, plain in frames(lt, 1)]
    times = [T0 + k * 1_000_001_000 for k in range(len(made))]
    write_pcapng(tmp_path / "m.pcapng", [(lt, f, t) for (lt, f, _), t in zip(made, times)], order, tsresol)
    cap = pcap.read(tmp_path / "m.pcapng")
    assert cap.format == "pcapng" and cap.linktypes == [1, 101, 113] and len(cap) == len(made)
    plain = np.array([p for _, _, p in made])
    assert (cap.flags[plain] == 0).all()
    unit = 10 ** (9 - (tsresol if tsresol is not None else 6))
    assert np.array_equal(cap.packets["time_ns"], np.array(times) // unit * unit)
    # The same packets in a classic pcap decode to the same columns.
    write_classic(tmp_path / "e.pcap", [f for lt, f, _ in made if lt == 1], 1, nano=True)
    eth = pcap.read(tmp_path / "e.pcap").packets
    cols = [n for n in eth.dtype.names if n != "time_ns"]
    assert all(np.array_equal(eth[n], cap.packets[: len(eth)][n]) for n in cols)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_pcaps_never_crash(tmp_path_factory, data):
    base = data.draw(st.sampled_from(_fuzz_bases(tmp_path_factory)))
    raw = bytearray(base.read_bytes())
    for _ in range(data.draw(st.integers(1, 12))):
        what = data.draw(st.sampled_from(["flip", "cut", "insert", "set32"]))
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if what == "flip" and raw:
            raw[at] ^= data.draw(st.integers(1, 255))
        elif what == "cut":
            del raw[at:]
        elif what == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=40))
        elif len(raw) >= at + 4:
            raw[at:at + 4] = struct.pack("<I", data.draw(st.sampled_from([0, 1, 13, 0xFFFF, 0x40000, 0xFFFFFFFF])))
    path = base.parent / "fuzz.pcap"
    path.write_bytes(bytes(raw))
    try:
        ref = pcap.read(path, engine="dpkt")
    except TraceError:
        with pytest.raises(TraceError):
            pcap.read(path, engine="auto")
        return
    for fast in fast_reads(lambda: read_fast(str(path))):
        if fast is not None:
            assert np.array_equal(fast.packets, ref.packets) and fast.problems == ref.problems


_BASE = {}


def _fuzz_bases(factory):
    """A classic pcap and a pcapng (big-endian, two interfaces) to corrupt."""
    if "p" not in _BASE:
        d = factory.mktemp("fuzz")
        ng = [(lt, f, T0 + k * 1000) for k, (lt, f) in enumerate((lt, f) for lt in (1, 113) for f, _ in frames(lt, 1))]
        write_pcapng(d / "base.pcapng", ng[::3], ">", 9)
        _BASE["p"] = [_fuzz_base_path(d), d / "base.pcapng"]
    return _BASE["p"]


def _read_all(paths):
    read = 0
    for path in paths:
        try:
            ref = pcap.read(path, engine="dpkt")
        except TraceError:
            continue
        for fast in fast_reads(lambda: read_fast(str(path))):
            if fast is not None:
                assert np.array_equal(fast.packets, ref.packets), path
                assert fast.problems == ref.problems, path
        pcap.flows.group(ref)
        read += 1
    return read


def test_tcpdump_subset():
    """The nastiest of tcpdump's regression captures (tests/data/tcpdump, BSD licence)."""
    paths = sorted(p for p in DATA.iterdir() if p.name != "LICENSE")
    assert _read_all(paths) == len(paths)


def test_tcpdump_corpus():
    """All of tcpdump's regression captures, when the shared corpus is present."""
    if not CORPUS.is_dir():
        pytest.skip(f"{CORPUS} is not here")
    paths = sorted(p for p in CORPUS.iterdir() if p.name != "LICENSE")
    assert _read_all(paths) == len(paths)


def test_commands_on_hostile_captures(tmp_path, capsys):
    """Every pcap command on every curated tcpdump capture and on corrupted ones: status 0 or 2,
    never an exception (main() turns only TraceError/OSError into messages)."""
    from magnetlib.cli import main
    rng = np.random.default_rng(5)
    base = bytearray(_fuzz_base_path(tmp_path).read_bytes())
    hostile = sorted(p for p in DATA.iterdir() if p.name != "LICENSE")
    for k in range(20):
        raw = bytearray(base)
        for at in rng.integers(0, len(raw), 6):
            raw[at] = rng.integers(0, 256)
        path = tmp_path / f"corrupt{k}.pcap"
        path.write_bytes(bytes(raw[: rng.integers(24, len(raw) + 1)]))
        hostile.append(path)
    trace = tmp_path / "t.magnet"
    assert main(["synth", "ftp", "--duration", "1", "-o", str(trace)]) == 0
    for path in hostile:
        for argv in (["pcap-info", str(path)], ["from-pcap", str(path), "-o", str(tmp_path / "o.magnet")],
                     ["compare", str(trace), str(path)]):
            assert main(argv) in (0, 2), argv
    capsys.readouterr()


def _fuzz_base_path(tmp_path):
    write_classic(tmp_path / "base.pcap", [f for f, _ in frames(1, 1)], 1)
    return tmp_path / "base.pcap"
