"""replay.linkem, the link emulator on TUN devices, driven with real UDP and TCP traffic
between network namespaces (replay.wan).  Needs root and /dev/net/tun; skips without."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

import numpy as np
import pytest

from magnetlib import buildcache, knobs, pcap
from magnet.replay import linkem, netns, wan
from magnet.replay.scenario import Path, Scenario, cross

from .conftest import require, require_link_emulator, require_tool, unprivileged

MS = 1_000_000
PROBE = [sys.executable, "-m", "magnet.replay.linkem.probe"]


@pytest.fixture(autouse=True)
def emulator_here(request):
    """Every test runs the emulator on TUN devices, unless marked `noroot` (arguments, refusals)."""
    if not request.node.get_closest_marker("noroot"):
        require_link_emulator()


@contextmanager
def path_net(tmp_path, path: Path, log_dir=None, **scenario):
    """One stack over `path`; the Wan (names carry this test process's pid)."""
    prefix = f"mglt{os.getpid()}"
    with wan.chain(prefix, Scenario(stacks=1, path=(path,), **scenario), tmp_path, log_dir=log_dir) as net:
        yield net


def one_way(net, tmp_path, count: int, size: int = 100, gap_us: float = 0, idle_s: float = 1.0,
            reverse: bool = False) -> np.ndarray:
    """Datagrams from stack 1's sender to its receiver (reverse: back): rows (seq, sent,
    received, bytes)."""
    s, out = net.stack(1), tmp_path / "got.npy"
    (src_ns, _), (dst_ns, dst) = ((s.left_ns, s.left_addr), (s.right_ns, s.right_addr))[::-1 if reverse else 1]
    recv = net.popen(dst_ns, [*PROBE, "recv", "--bind", f"{dst}:7000", "--out", out,
                              "--idle", idle_s], stdout=subprocess.PIPE, text=True)
    assert recv.stdout.readline().strip() == "ready"
    net.popen(src_ns, [*PROBE, "send", "--to", f"{dst}:7000", "--count", count,
                       "--size", size, "--gap-us", gap_us]).wait(60)
    assert recv.wait(60) == 0
    return np.load(out)


def stats(net) -> linkem.Stats:
    return net.stop(1)


# ----------------------------------------------------------------- delay ---
@pytest.mark.parametrize("hops,jitter_ms", [(1, 0), (7, 5)])
def test_delay_sum_of_hops_and_jitter_keeps_order(tmp_path, hops, jitter_ms):
    """One-way delay = the path's, however many hops it is spread over; jitter adds
    0..J per packet and never reorders (datagrams 0.5 ms apart, jitter up to 5 ms: a
    packet waits for the one before it, so the median lies between J/2 and J).  Exactly
    as emulated (the link log: departure - arrival), and as received (the receiver's
    kernel timestamps: never early, the median within 0.8 ms; the tail, where a busy
    machine's wake-ups show, is bench_linkem's)."""
    from magnet.replay import linklog
    path = Path(rate_bps=None, delay_ns=20 * MS, hops=hops, jitter_ns=jitter_ms * MS)
    with path_net(tmp_path, path, log_dir=tmp_path / "log") as net:
        got = one_way(net, tmp_path, 400, gap_us=500)
        st = stats(net)
    r = linklog.read(tmp_path / "log").records("forward")
    emulated = (r["departure_ns"] - r["arrival_ns"]) / MS
    assert len(r) == 400 and emulated.min() >= 20 and emulated.max() <= 20 + jitter_ms
    assert (np.diff(r["departure_ns"]) >= 0).all() and (jitter_ms or (emulated == 20).all())
    delay_ms = (got[:, 2] - got[:, 1]) / MS
    assert len(got) == 400 and (np.diff(got[:, 0]) == 1).all(), "lost or reordered"
    assert delay_ms.min() >= 20
    assert 20 + jitter_ms / 2 <= np.median(delay_ms) < 20.8 + jitter_ms, np.median(delay_ms)
    assert st["forward"]["forwarded"] == 400 and st["reverse"]["forwarded"] == 0


# ------------------------------------------------------------ rate, queue ---
def test_rate_serialises_and_queue_drops_tail(tmp_path):
    """A burst of 300 datagrams at once into 2 Mbit/s with a 40-packet queue: the first
    and the 40 that wait get through, spaced by their serialisation time; the rest
    are drop-tail losses, counted as such (a sender slowed by a busy machine may let
    a few more in as the queue drains: what arrives is what the counters say)."""
    path = Path(rate_bps=2_000_000, delay_ns=5 * MS, queue=knobs.queue("40p"))
    with path_net(tmp_path, path) as net:
        got = one_way(net, tmp_path, 300, size=972)            # 1000-byte IP packets
        st = stats(net)
    f = st["forward"]
    assert len(got) == f["forwarded"] and f["queue_drops"] + f["forwarded"] == 300
    assert 41 <= len(got) < 100 and (got[:41, 0] == np.arange(41)).all()
    spacing_ms = np.median(np.diff(got[:, 2])) / MS
    assert 3.9 < spacing_ms < 4.2                               # 1000 B at 2 Mbit/s: 4 ms
    assert f["queue_max_packets"] == 40


@pytest.mark.parametrize("duplex", [True, False])
def test_duplex_gives_the_reverse_direction_its_own_link(tmp_path, duplex):
    """With duplex the reverse direction is a link like the forward one (a burst of 300
    into 2 Mbit/s and a 40-packet queue: the queue fills, what gets through is spaced
    by 4 ms, the rest are drop-tail losses); without, it has the delay only and carries
    the whole burst."""
    path = Path(rate_bps=2_000_000, delay_ns=5 * MS, queue=knobs.queue("40p"), duplex=duplex)
    with path_net(tmp_path, path) as net:
        got = one_way(net, tmp_path, 300, size=972, reverse=True)
        st = stats(net)
    r = st["reverse"]
    assert st["forward"]["packets_in"] == 0
    if not duplex:
        assert len(got) == 300 and r["queue_drops"] == 0 and r["forwarded"] == 300
        return
    assert len(got) == r["forwarded"] and r["forwarded"] + r["queue_drops"] == 300
    assert 41 <= len(got) < 100 and (got[:41, 0] == np.arange(41)).all()
    assert 3.9 < np.median(np.diff(got[:, 2])) / MS < 4.2
    assert r["queue_max_packets"] == 40


def test_duplex_cross_traffic_runs_both_ways(tmp_path):
    """On a duplex path --cross runs in both directions, each through its own link: four
    bulk TCP flows each way load each direction's bottleneck up to its rate, never past
    it (each way's ACKs queue behind the other's data, so neither fills its link at
    once: more than half of it after a second); wan.crossing reports what each way moved,
    and when each of the four bulk flows connected each way (wan.bulk_starts: flow i due
    10 ms x i after the origin; a replay's summary.json keeps them)."""
    path = Path(rate_bps=10_000_000, delay_ns=5 * MS, duplex=True)
    scenario = Scenario(stacks=1, path=(path,), cross=(cross("tcp:4"),))
    with wan.chain(f"mglt{os.getpid()}", scenario, tmp_path) as net:
        emulator = net.stack(1).emulator
        with wan.crossing(net, scenario, [1], cc="cubic", warmup_s=1.0) as traffic:
            start = emulator.snapshot()
            time.sleep(2)
            end = emulator.snapshot()
    moved = traffic.moved[1]
    assert set(moved) == {"sent", "received", "reverse_sent", "reverse_received"}
    span = end.raw["elapsed_s"] - start.raw["elapsed_s"]
    for way in ("forward", "reverse"):
        bits = (end[way]["forwarded_bytes"] - start[way]["forwarded_bytes"]) * 8
        assert 0.5 * 10e6 < bits / span <= 1.01 * 10e6, (way, bits / span)
    assert moved["received"]["tcp_bytes"] > 0 and moved["reverse_received"]["tcp_bytes"] > 0
    assert "sent back" in wan.cross_line(moved) and "bulk flows connected at" in wan.cross_line(moved)
    starts = wan.bulk_starts(moved)
    assert set(starts) == {"forward", "reverse"}, starts
    for way in starts.values():
        assert len(way) == 4 and (np.array(way) >= [0, 10, 20, 30]).all(), starts


def test_per_packet_log_tells_each_packets_fate(tmp_path):
    """--log: every datagram of a burst into 2 Mbit/s with a 40-packet queue has its record:
    arrival, departure (arrival + its wait in the queue + 4 ms of serialisation + 5 ms of
    delay, exactly), the queue it found, and why it was dropped; the records agree with the
    emulator's counters and with what arrived; the summary says the same."""
    from magnet.replay import linklog
    path = Path(rate_bps=2_000_000, delay_ns=5 * MS, queue=knobs.queue("40p"))
    with path_net(tmp_path, path, log_dir=tmp_path / "log") as net:
        got = one_way(net, tmp_path, 300, size=972)
        st = stats(net)
    log = linklog.read(tmp_path / "log")
    r, f = log.records("forward"), st["forward"]
    assert len(r) == 300 and len(log.records("reverse")) == 0
    passed = r["reason"] == 0
    assert passed.sum() == f["forwarded"] == len(got) and (r["reason"] == 1).sum() == f["queue_drops"]
    took = r[passed]
    assert (took["departure_ns"] - took["arrival_ns"] - took["wait_ns"] == 9 * MS).all()
    assert (np.diff(took["departure_ns"])[1:] >= 4 * MS).all() and took["wait_ns"][0] == 0
    dropped = r[~passed]
    assert (dropped["queue_packets"] == 40).all() and (dropped["departure_ns"] == -1).all()
    assert (r["bytes"] == 1000).all() and (np.diff(r["arrival_ns"]) >= 0).all()
    summary = log.summaries()[0]
    assert summary.queue_peak_packets == f["queue_max_packets"] == 40
    assert summary.drops["queue drop"] == f["queue_drops"]
    assert (tmp_path / "log" / "summary.txt").read_text().splitlines()[0] == summary.line()
    assert st.log_summary[0] == summary.line()


@pytest.mark.noroot
def test_a_bad_link_log_is_refused_in_one_line(tmp_path, magnet):
    from .conftest import assert_clean_error
    assert_clean_error(magnet("linklog", tmp_path / "none"), "no such directory")
    (tmp_path / "forward.linklog").write_bytes(b"not a log at all")
    (tmp_path / "reverse.linklog").write_bytes(b"")
    assert_clean_error(magnet("linklog", tmp_path), "forward.linklog", "not a linkem link log")


def test_queue_in_bytes_and_sustained_rate(tmp_path):
    """A byte queue holds as many packets as fit; a stream above the rate arrives at the rate."""
    path = Path(rate_bps=10_000_000, delay_ns=2 * MS, queue=knobs.queue("20000B"))
    with path_net(tmp_path, path) as net:
        got = one_way(net, tmp_path, 3000, size=1222, gap_us=500)   # 1250-byte packets: 20 Mbit/s
        st = stats(net)
    f = st["forward"]
    assert f["queue_max_bytes"] <= 20000 and f["queue_max_packets"] == 16
    span_s = (got[-1, 2] - got[0, 2]) / 1e9
    rate = (len(got) - 1) * 1250 * 8 / span_s
    assert rate < 1.01 * 10e6, rate                   # never faster than the link
    # While the queue holds packets they leave one serialisation time apart (1 ms).  The
    # mean over the whole stream also counts the sender's stalls on a loaded machine (the
    # queue drains, the link idles: 9.61 Mbit/s once in CI-like runs), so the median gap
    # is what says the link runs at its rate.
    gap_ms = np.median(np.diff(got[:, 2])) / 1e6
    assert 0.99 < gap_ms < 1.01, gap_ms
    assert f["queue_drops"] + f["forwarded"] == 3000


# ------------------------------------------------------------------ loss ---
def lost(got: np.ndarray, count: int) -> np.ndarray:
    arrived = np.zeros(count, bool)
    arrived[got[:, 0]] = True
    return ~arrived


def bursts(mask: np.ndarray) -> np.ndarray:
    """Lengths of the runs of True."""
    edges = np.diff(np.r_[0, mask.astype(np.int8), 0])
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


@pytest.mark.parametrize("spec,mean,burst", [("10%", 0.10, (1.0, 1.3)), ("ge:5%/20%", 0.20, (3.5, 7))])
def test_random_loss(tmp_path, spec, mean, burst):
    """Bernoulli and Gilbert-Elliott loss: the long-run rate within 5 standard deviations
    of a binomial (GE: of its stationary mean), and GE's losses in bursts (mean length
    1/R = 5) where Bernoulli's are mostly single.  The same seed gives the same losses."""
    count = 3000
    runs = []
    for attempt in range(2):
        with path_net(tmp_path, Path(rate_bps=None, delay_ns=1 * MS, loss=knobs.loss(spec)), seed=7) as net:
            got = one_way(net, tmp_path, count, gap_us=100)
            st = stats(net)
        runs.append(lost(got, count))
        assert st["forward"]["random_losses"] == runs[-1].sum()
    rate = runs[0].mean()
    sd = np.sqrt(mean * (1 - mean) / count) * (3 if spec.startswith("ge") else 1)
    assert abs(rate - mean) < 5 * sd, rate
    assert burst[0] <= bursts(runs[0]).mean() <= burst[1], bursts(runs[0]).mean()
    assert (runs[0] == runs[1]).all()


# ------------------------------------------------------------- MTU, pcap ---
def test_mtu_and_tcpdump_on_tun_reads_as_raw_ip(tmp_path):
    """The path's MTU is the TUN devices' (TCP's MSS follows it); a tcpdump on a TUN
    device writes raw IP (LINKTYPE_RAW) and magnetlib.pcap reads it."""
    require_tool("tcpdump")
    with path_net(tmp_path, Path(rate_bps=None, delay_ns=1 * MS, mtu=1000)) as net:
        s = net.stack(1)
        link = netns.sh("ip", "-o", "link", "show", s.left_dev, ns=s.left_ns).stdout
        assert " mtu 1000 " in link
        dump = net.popen(s.right_ns, ["tcpdump", "-i", s.right_dev, "--immediate-mode", "-B", "8192", "-n", "-w", tmp_path / "t.pcap", "udp"],
                         stderr=subprocess.PIPE, text=True)
        assert "listening on" in dump.stderr.readline()
        one_way(net, tmp_path, 20, size=900, idle_s=0.3)
        time.sleep(0.2)
        dump.send_signal(signal.SIGINT)
        dump.communicate(timeout=10)
    cap = pcap.read(tmp_path / "t.pcap")
    assert cap.linktypes == [pcap.columns.LINK_RAW]
    p = cap.packets
    assert len(p) == 20 and (p["ip_len"] == 928).all()


# -------------------------------------------------------------- clean-up ---
def test_emulator_dies_with_its_parent_and_takes_its_devices(tmp_path):
    """A process that started an emulator is SIGKILLed: the emulator ends
    (PR_SET_PDEATHSIG) and its TUN devices go with it; sweep() removes the rest."""
    prefix = f"mglk{os.getpid()}"
    script = (f"import sys, time; from pathlib import Path as P; from magnet.replay import wan; "
              f"from magnet.replay.scenario import Scenario; "
              f"cm = wan.chain({prefix!r}, Scenario(stacks=2), P({str(tmp_path)!r}), guard=False); "
              f"cm.__enter__(); print('up', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    ns = f"{prefix}-n1"
    assert f"{prefix}t1b" in netns.sh("ip", "-o", "link", ns=ns).stdout
    emulators = netns._with_argument(f"--name={prefix}-s".encode(), exact=False)
    assert len(emulators) == 2
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{pid}") for pid in emulators) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in emulators)
    assert f"{prefix}t1b" not in netns.sh("ip", "-o", "link", ns=ns).stdout
    netns.sweep(prefix)
    assert not [n for n in netns.listed() if n.startswith(prefix)]


@pytest.mark.noroot
def test_core_unit_tests_under_sanitizers():
    """The core (stages, queue, loss, jitter: core.c) and the log's writer (linklog.c)
    tested alone, no devices: test_core.c and test_linklog.c built with ASan and UBSan by
    linkem's Makefile, then run as a user without root (nobody, where the suite is root)."""
    require_tool("make")
    with tempfile.TemporaryDirectory(prefix="magnet-linkem-core-") as out:
        os.chmod(out, 0o755)                    # the unprivileged user runs the programs in it
        programs = [f"{out}/test_core", f"{out}/test_linklog"]
        built = buildcache.run_make(linkem.SOURCE, out, programs)
        assert built.returncode == 0, built.stdout + built.stderr
        for program in programs:
            proc = subprocess.run(unprivileged([program]), capture_output=True, text=True)
            assert proc.returncode == 0 and proc.stdout.rstrip().endswith(" 0 failed"), \
                program + ":\n" + proc.stdout + proc.stderr


@pytest.mark.noroot
def test_emulator_arguments_are_refused_in_one_line(tmp_path):
    """Bad options die before any device is made (exit 2, one line naming the option)."""
    binary = linkem.build()
    for args, needle in ((["--hops", "0"], "--hops"), (["--loss", "2"], "--loss 2"),
                         (["--ge", "0.1,0.2"], "--ge"), (["--bottleneck", "5"], "--bottleneck 5"),
                         (["--tun", "c:-:x:1.2.3.4"], "--tun")):
        proc = subprocess.run([binary, "--tun=a:-:t0:10.0.0.1", "--tun=b:-:t1:10.0.0.2", *args],
                              capture_output=True, text=True)
        assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.splitlines()) == 1, \
            (args, proc.stderr)


@pytest.mark.noroot
def test_bad_path_is_refused_in_one_line():
    for path, flag in ((Path(rate_bps=10), "--rate"), (Path(delay_ns=20_000_000_000), "--delay"),
                       (Path(mtu=100), "--mtu"), (Path(hops=100), "--hops")):
        with pytest.raises(ValueError, match=flag):
            linkem.check(path)
