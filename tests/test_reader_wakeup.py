"""The reader's wake-up measured from a capture (experiments/reader_wakeup.py): the analysis,
on a capture written here; a study's measurement at its start (for_study), its runs stood in
for; and one short real-time run (it needs root and linkem)."""
from __future__ import annotations

import struct

import numpy as np
import pandas as pd
import pytest

from magnet.experiments import reader_wakeup


ME, PEER = bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1])


def packet(src: bytes, dst: bytes, sport: int, dport: int, payload: int) -> bytes:
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + payload, 0, 0, 64, 6, 0, src, dst)
    tcp = struct.pack(">HHIIBBHHH", sport, dport, 0, 0, 5 << 4, 0x10, 1000, 0, 0)
    return ip + tcp + bytes(payload)


def write_pcap(path, packets) -> None:
    out = [struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 101)]
    for t_ns, buf in packets:
        out.append(struct.pack("<IIII", t_ns // 10**9, t_ns % 10**9, len(buf), len(buf)) + buf)
    path.write_bytes(b"".join(out))


@pytest.mark.cpu                 # analysis of a capture written here: nothing real-time
def test_ack_lags_and_the_wakeup_from_a_capture(tmp_path):
    """Each ACK's lag is after the latest data of its own connection; the wake-up is the
    reader's median less the softirq's (lags over 100 us counted apart)."""
    rows, t = [], 10**9
    for i in range(40):                     # connection 1: data in, the ACK 10 us (even) or 30 us after
        rows.append((t, packet(PEER, ME, 5999, 40000, 1448)))
        rows.append((t + (10_000 if i % 2 == 0 else 30_000), packet(ME, PEER, 40000, 5999, 0)))
        rows.append((t + 5_000, packet(PEER, ME, 6000, 40001, 1448)))    # connection 2's data between
        t += 1_000_000
    rows.append((t, packet(PEER, ME, 5999, 40000, 1448)))
    rows.append((t + 500_000, packet(ME, PEER, 40000, 5999, 0)))        # a late one
    rows.append((t + 600_000, packet(ME, PEER, 50000, 7000, 100)))     # this host's own data: no ACK
    write_pcap(tmp_path / "a.pcap", sorted(rows, key=lambda r: r[0]))
    packets = reader_wakeup.read_pcap(tmp_path / "a.pcap")
    assert len(packets) == len(rows)
    lags = reader_wakeup.ack_lags_us(packets, ME)
    assert sorted(set(lags.round(3))) == [10.0, 30.0, 500.0]
    row = reader_wakeup.modes(lags)
    assert row["acks"] == 41 and row["softirq_pct"] == pytest.approx(100 * 20 / 41)
    assert row["softirq_p50_us"] == 10 and row["reader_p50_us"] == 30 and row["wakeup_us"] == 20
    assert row["later_pct"] == pytest.approx(100 / 41)


@pytest.mark.cpu                 # analysis of a capture written here: nothing real-time
def test_a_capture_not_in_nanoseconds_is_refused_and_an_empty_one_has_no_lags(tmp_path):
    (tmp_path / "u.pcap").write_bytes(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 101))
    with pytest.raises(ValueError, match="nanosecond"):
        reader_wakeup.read_pcap(tmp_path / "u.pcap")
    write_pcap(tmp_path / "e.pcap", [])
    assert reader_wakeup.ack_lags_us(reader_wakeup.read_pcap(tmp_path / "e.pcap"), ME).size == 0


@pytest.mark.cpu                 # analysis of a capture written here: nothing real-time
def test_reply_lags_from_a_capture(tmp_path):
    """Each pure ACK the host received on a connection it sends data on: the lag to the first
    data it sent on that connection after it, counted only if that left before the next ACK."""
    rows, t = [], 10**9
    for i in range(40):                     # connection 1: ACK in, data out 5 us (even) or 7 us after
        rows.append((t, packet(PEER, ME, 5999, 40000, 0)))
        rows.append((t + (5_000 if i % 2 == 0 else 7_000), packet(ME, PEER, 40000, 5999, 1448)))
        rows.append((t + 3_000, packet(PEER, ME, 6000, 40001, 0)))       # connection 2: no data from me
        t += 1_000_000
    rows.append((t, packet(PEER, ME, 5999, 40000, 0)))                   # no reply before the next ACK
    rows.append((t + 100_000, packet(PEER, ME, 5999, 40000, 0)))
    rows.append((t + 300_000, packet(ME, PEER, 40000, 5999, 1448)))     # ... this one's, 200 us
    rows.append((t + 400_000, packet(PEER, ME, 5999, 40000, 1448)))     # data in: not an ACK
    write_pcap(tmp_path / "r.pcap", sorted(rows, key=lambda r: r[0]))
    lags = reader_wakeup.reply_lags_us(reader_wakeup.read_pcap(tmp_path / "r.pcap"), ME)
    assert sorted(lags.round(3)) == [5.0] * 20 + [7.0] * 20 + [200.0]
    row = reader_wakeup.replies(lags)
    assert row["replies"] == 41 and row["reply_p50_us"] == 7.0 and row["reply_p10_us"] == 5.0
    assert reader_wakeup.replies(np.zeros(0))["replies"] == 0


@pytest.mark.cpu                 # the measurement stood in for: nothing real-time
def test_a_study_measures_its_host_lags_or_says_why_not(tmp_path, monkeypatch):
    """for_study: --host-lags as given; --quick the constants; a host without the emulator, a
    measurement that fails or gives no value, the constants and why; else each lag the median
    of the runs' (the softirq's ACKs' p50, the reply lag's p50, the wake-up), in ns."""
    from argparse import Namespace

    from magnet.experiments import common
    from magnet.replay import linkem
    args = Namespace(quick=False, host_lags=None, seed=1)
    given = common.HostLags(1, 2, 3, "given")
    assert reader_wakeup.for_study(Namespace(quick=True, host_lags=given, seed=1), tmp_path) is given
    quick = reader_wakeup.for_study(Namespace(quick=True, host_lags=None, seed=1), tmp_path)
    assert quick.options() == common.HostLags().options() and "--quick" in quick.how
    monkeypatch.setattr(linkem, "unavailable", lambda: "needs root")
    assert reader_wakeup.for_study(args, tmp_path).how == "not measured: needs root"
    monkeypatch.setattr(linkem, "unavailable", lambda: None)
    monkeypatch.setattr(reader_wakeup.shutil, "which", lambda name: f"/usr/bin/{name}")
    seen = []

    def measure(work, runs, seconds, seed, desc):
        seen.append((work, runs, seconds, seed))
        (work / "run-1").mkdir(parents=True)                  # its captures: removed after
        return pd.DataFrame({"softirq_p50_us": [9.0, 10.0, 12.0], "reply_p50_us": [7.0, 8.0, 7.5],
                             "wakeup_us": [17.0, 30.0, 18.5], "load": ["1.0 1 1", "1.5 1 1", "2.0 1 1"]})
    monkeypatch.setattr(reader_wakeup, "measure", measure)
    lags = reader_wakeup.for_study(args, tmp_path)
    assert seen == [(tmp_path / "host-lags", reader_wakeup.STUDY_RUNS, reader_wakeup.STUDY_SECONDS, 1)]
    assert (lags.ack_lag_ns, lags.reply_lag_ns, lags.reader_wakeup_ns, lags.source) == (10_000, 7_500, 18_500,
                                                                                        "measured")
    assert "wake-up 17.0/30.0/18.5 us" in lags.how and len(lags.runs) == 3 and not (tmp_path / "host-lags").exists()

    def fails(*a):
        raise OSError("tcpdump: no such device")
    monkeypatch.setattr(reader_wakeup, "measure", fails)
    lags = reader_wakeup.for_study(args, tmp_path)
    assert lags.source == "constants" and lags.how == "the measurement failed: tcpdump: no such device"
    monkeypatch.setattr(reader_wakeup, "measure", lambda *a: pd.DataFrame(
        {"softirq_p50_us": [9.0], "reply_p50_us": [7.0], "wakeup_us": [np.nan], "load": ["1 1 1"]}))
    lags = reader_wakeup.for_study(args, tmp_path)
    assert lags.source == "constants" and lags.how == "the measurement gave no value for reader_wakeup"


def test_the_host_lags_measured_over_linkem(tmp_path):
    """One short real-time run (root, linkem, tcpdump): the three lags the studies measure."""
    from magnet.replay import linkem

    from .conftest import require, require_tool
    require(linkem.unavailable() is None, f"linkem: {linkem.unavailable()}")
    require_tool("tcpdump")
    table = reader_wakeup.measure(tmp_path, 1, 4.0, 1)
    value = reader_wakeup.values_us(table)
    assert table["acks"].item() > 1000 and table["replies"].item() > 1000, table.to_dict("records")
    assert 1 < value["ack_lag"] <= reader_wakeup.SOFTIRQ_MAX_US and 1 < value["reply_lag"] < 100, value
    assert 0 < value["reader_wakeup"] < reader_wakeup.READER_MAX_US, value
