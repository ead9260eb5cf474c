"""magnet replay tcp: demand replayed into real TCP connections, really run.

Loopback tests need nothing; the others need root (network namespaces and the
link emulator on TUN devices), the BPF capture or tcpdump, and skip with the
reason without them.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import magnetlib
from magnetlib.demand import RECV, SEND, Demand
from magnetlib import knobs
from magnetlib.format import Event
from magnet.replay import endpoint, fidelity, linkem, netns, tcp, wan, wire
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario, Tcp, cross

from .conftest import BIN, assert_clean_error, require, require_root, require_tool, run_magnet
from .interrupts import leftovers, wait_clean

MS = 1_000_000
LOOPBACK = tcp.TcpOptions(loopback=True)


def chain(stacks: int = 1, mode: str = "offline", **path) -> Scenario:
    return Scenario(stacks=stacks, mode=mode, path=(NetPath(**path),))


def paced(count: int, spacing_ms: float, size: int) -> Demand:
    return Demand.from_arrays(np.arange(count) * int(spacing_ms * MS), np.full(count, size))


def check_bytes(run: tcp.TcpRun, demand_bytes: int, wire_exact: bool = True) -> None:
    """Bytes in == bytes out at every stack; the next stack was given what this one sent."""
    given = demand_bytes
    for s in run.stacks:
        assert s.written == given, (s.k, s.written, given)
        assert s.delivered == s.written, (s.k, s.delivered, s.written)
        if wire_exact:
            assert s.send.bytes >= s.delivered, (s.k, s.send.bytes, s.delivered)
        given = int(s.new_bytes.sum()) if run.scenario.mode == "offline" else s.delivered


def table_rows(out) -> list[str]:
    return pd.read_csv(out / "table.csv")["label"].tolist()


@pytest.fixture
def bpf():
    require_root()
    why = wire.bpf_unavailable()
    require(why is None, f"BPF capture unavailable: {why}")


@pytest.fixture
def namespaces():
    require_root()
    require_tool("ip")
    why = linkem.unavailable()
    require(why is None, f"link emulator: {why}")


# --------------------------------------------------------------- loopback ---
@pytest.mark.parametrize("mode", ["offline", "relay"])
def test_loopback_stacks_deliver_every_byte(tmp_path, mode):
    """No root: N connections on 127.0.0.1, each stack's row from its receiver's reads."""
    demand = paced(40, 10, 10240)
    run = tcp.run_chain(demand, tmp_path, Scenario(stacks=3, mode=mode), LOOPBACK)
    assert run.method == "reads" and [s.k for s in run.stacks] == [1, 2, 3]
    check_bytes(run, demand.total_bytes)
    assert [label for label, _, _ in run.series()] == ["Application", "1st TCP stack", "2nd TCP stack",
                                                       "3rd TCP stack"]


def test_request_response_waits_for_the_peer(tmp_path):
    """Tmix-style ADUs: each request goes out only after the whole previous response
    arrived (plus its think time), each response after its whole request."""
    rows = []
    for k in range(8):
        t = k * 60 * MS
        rows += [(t, SEND, 300), (t + 20 * MS, RECV, 3000), (t + 22 * MS, RECV, 2000)]
    t, d, size = map(np.array, zip(*rows))
    demand = Demand.from_arrays(t, size, d)
    run = tcp.run_chain(demand, tmp_path, Scenario(stacks=1), LOOPBACK)
    s = run.stacks[0]
    assert s.written == 8 * 300 and s.delivered == 8 * 300 and s.sender["read"] == 8 * 5000
    assert (tmp_path / "stack-1").stat().st_mode & 0o777 == 0o700     # private, as traces
    ini = endpoint.load_record(tmp_path / "stack-1" / "initiator-record")
    acc = endpoint.load_record(tmp_path / "stack-1" / "acceptor-record")
    ini_w, acc_w = fidelity.writes(ini), fidelity.writes(acc)
    got_response = arrival_times(ini["reads"], 5000 * np.arange(1, 9))
    got_request = arrival_times(acc["reads"], 300 * np.arange(1, 9))
    think = 60 * MS - 22 * MS
    assert (ini_w.issued[1:] >= got_response[:-1] + think).all()
    assert (acc_w.issued[::2] >= got_request + 20 * MS).all()
    assert np.abs(ini_w.issued - ini_w.due).max() < 20 * MS     # no write waited for nothing


def arrival_times(reads: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """When the reads had brought each of the cumulative byte counts."""
    data = reads[reads[:, 1] > 0]
    return data[np.searchsorted(np.cumsum(data[:, 1]), totals), 0]


def test_paced_timing_within_target(tmp_path):
    """Writes 2 ms apart are issued on time: half of them within 50 us of their due
    time (the issue's target), and the error does not grow along the run, as it would
    if sleeps accumulated (1000 writes: 100 ms late at the end for 100 us per sleep).
    The target's p99 is a benchmark's (experiments/bench_replay.py, make bench), not a
    test's: on this shared VM, stretches of stalls of a millisecond or more come now
    and then (a CI run under load had 5 % of the writes 0.5 ms late in three runs in a
    row), and a test must not fail on them."""
    demand = paced(1000, 2, 418)
    best = None
    for attempt in range(3):
        out = tmp_path / str(attempt)
        run = tcp.run_chain(demand, out, Scenario(stacks=1), LOOPBACK)
        timing = run.stacks[0].timing
        w = fidelity.writes(endpoint.load_record(out / "stack-1" / "initiator-record"))
        error_us = np.abs(w.issued - w.due) / 1e3
        assert timing.paced >= 990 and timing.blocked == 0
        assert np.median(error_us[:100]) <= 2000 and np.median(error_us[-100:]) <= 2000
        p50 = float(np.median(error_us))
        best = p50 if best is None else min(best, p50)
        if best <= 50:
            break
    assert best <= 50, f"median |issued - due| {best:.1f} us in the best of three runs"


def test_paced_writes_on_time_beside_busy_loops(tmp_path):
    """A machine's ordinary load never holds the pacer at a due time: with a busy loop on
    every CPU, writes 2 ms apart leave within 1 ms of their time (under normal scheduling
    a third of them left 1-12 ms late, several at once after each of the loop's slices)."""
    require_root()                               # SCHED_FIFO needs CAP_SYS_NICE
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count())]
    try:
        out = tmp_path / "out"
        run = tcp.run_chain(paced(500, 2, 418), out, Scenario(stacks=1), LOOPBACK)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert run.stacks[0].sender["sched_fifo"] is True
    w = fidelity.writes(endpoint.load_record(out / "stack-1" / "initiator-record"))
    late_ms = (w.issued - w.due) / 1e6
    assert np.mean(late_ms > 1) <= 0.01, f"{np.mean(late_ms > 1):.1%} of writes over 1 ms late"


# ------------------------------------------------------------- namespaces ---
def test_offline_stacks_over_emulated_path_with_bpf_capture(tmp_path, namespaces, bpf):
    """`magnet replay tcp` offline over linkem paths (30 ms one way): 3 rows, every byte
    delivered at every stack, stack k+1 given exactly stack k's new data, the capture
    recording each stack's wire on its TUN device, the senders measuring the RTT the
    path was set to, the emulator's counters in the summary."""
    out = tmp_path / "out"
    proc = run_magnet("replay", "tcp", "synth:ftp", "--duration", "1.5", "--stacks", "3",
                      "--rate", "20Mbps", "--delay", "30ms", "-o", out)
    assert proc.returncode == 0, proc.stderr_text
    text = proc.stdout_text
    assert "3rd TCP stack" in text and "wire recorded by the BPF capture" in text
    assert "30 ms one way (60 ms RTT)" in text and "linkem" in text and "netem" not in text
    assert table_rows(out) == ["Application", "1st TCP stack", "2nd TCP stack", "3rd TCP stack"]
    summary = json.loads((out / "summary.json").read_text())
    demand_bytes = 75 * 10240
    given = demand_bytes
    for k, s in enumerate(summary["stacks"], start=1):
        assert s["written"] == given and s["delivered"] == given
        assert s["wire_bytes"] >= 0.98 * s["delivered"]           # capture shortfall (docs/capture.md)
        given = s["new_bytes"]
        assert 60 <= s["rtt_mean_ms"] < 70, s["rtt_mean_ms"]
        assert s["path"]["forward"]["forwarded_bytes"] >= s["delivered"]
        trace = magnetlib.open(out / f"stack-{k}.magnet").check()
        sent = trace.select([Event.DEV_SEND], s["sender"]["cookie"])
        assert int(np.count_nonzero(trace.column_at("size", sent) > 0)) == s["wire_segments"]
        assert (trace.column_at("size", sent) <= 1448).all()      # no offloads on TUN: wire segments
        got = trace.select([Event.DEV_RECV], s["receiver"]["cookie"])
        assert int(trace.column_at("size", got).sum()) >= 0.98 * s["delivered"]
    first = summary["stacks"][0]
    assert first["capture_timing"]["matched"] == first["capture_timing"]["calls"] == 75
    for name in ("bandwidth.png", "modulation.png"):
        assert (out / name).stat().st_size > 1000
    # The capture of stack 1 is itself a demand: its sender's writes, replayed again.
    again = run_magnet("replay", "tcp", out / "stack-1.magnet", "--stream", hex(first["sender"]["cookie"]),
                       "--stacks", "1", "--loopback", "-o", tmp_path / "again")
    assert again.returncode == 0, again.stderr_text
    assert json.loads((tmp_path / "again" / "summary.json").read_text())["stacks"][0]["delivered"] == demand_bytes


def test_measured_rtt_is_the_mean_over_the_senders_srtt_updates(tmp_path, namespaces, bpf):
    """One 1.5 MB write into 20 Mbit/s, 30 ms one way and 100 packets of queue: the write is
    sampled once (when the send buffer took its last byte), while the ACKs carry the srtt
    from the path's 60 ms up as slow start fills the queue; the stack's RTT is the mean
    over the sender's srtt updates, each value once (ns-3's measure)."""
    demand = Demand.from_arrays(np.array([0]), np.array([1_500_000]))
    run = tcp.run_chain(demand, tmp_path, chain(rate_bps=20_000_000, delay_ns=30 * MS), tcp.TcpOptions())
    s = run.stacks[0]
    assert run.method == "bpf" and s.delivered == demand.total_bytes
    with magnetlib.open(s.trace) as trace:
        acks = trace.select([Event.TCP_RECV], s.sender["cookie"])
        srtt = trace.column_at("srtt_us", acks).astype(np.int64)
    srtt = srtt[srtt > 0]
    updates = srtt[np.r_[True, srtt[1:] != srtt[:-1]]]
    assert len(updates) > 50 and updates.min() < 62_000 and updates.max() > 80_000   # the queue filled
    assert len(np.load(tmp_path / "stack-1" / "initiator-record" / "rtt.npy")) == 1   # one write, one sample
    assert s.rtt_mean_ns == pytest.approx(updates.mean() * 1e3)
    assert s.summary()["rtt_mean_ms"] == pytest.approx(updates.mean() / 1e3)


def test_relay_chain_with_cross_traffic(tmp_path, namespaces, bpf):
    """Live relays over emulated paths, each bottleneck shared with a bulk TCP flow and
    Poisson UDP from the cross namespaces: every byte relayed, the cross traffic
    through the same emulator (its counters hold both), the queue filled by it, and the
    summary keeping when the bulk flow connected (test_linkem: four each way)."""
    demand = paced(60, 20, 10240)
    scenario = chain(3, "relay", rate_bps=10_000_000, delay_ns=5 * MS).replace(
        cross=(cross("tcp:1"), cross("poisson:20%")))
    run = tcp.run_chain(demand, tmp_path, scenario, tcp.TcpOptions(cross_lead_ns=3_000_000_000))
    assert run.method == "bpf" and [s.k for s in run.stacks] == [1, 2, 3]
    # One start for every stack's cross traffic, the demand 3 s after it (as in ns-3).
    assert [s.cross_lead_ns for s in run.stacks] == [3_000_000_000] * 3, run.notes
    check_bytes(run, demand.total_bytes, wire_exact=False)
    for s in run.stacks:
        assert s.send.bytes >= 0.98 * s.delivered
        assert s.trace.exists()
        got = s.cross["received"]
        assert got["tcp_bytes"] > 1_000_000 and got["udp_packets"] > 100
        assert s.cross["sent"]["tcp_cc"] == [scenario.tcp.cc]     # the stacks' TCP, as in ns-3
        starts = s.summary()["cross_bulk_starts_ms"]
        assert list(starts) == ["forward"] and len(starts["forward"]) == 1 and starts["forward"][0] >= 0
        assert "bulk flows connected at" in wan.cross_line(s.cross)
        forward = s.path_stats["forward"]
        assert forward["forwarded_bytes"] >= s.delivered + got["tcp_bytes"] + got["udp_bytes"]
        assert forward["queue_max_packets"] > 20
    # The stacks overlap in time: each relays while the previous one still sends.
    for before, after in zip(run.stacks, run.stacks[1:]):
        assert before.send.ns[0] <= after.send.ns[0] < before.send.ns[-1]


def test_pcap_fallback(tmp_path, namespaces):
    """tcpdump on each stack's sending TUN device instead of the BPF capture; same rows."""
    require_tool("tcpdump")
    demand = paced(50, 20, 3284)
    run = tcp.run_chain(demand, tmp_path, chain(2, rate_bps=10_000_000, delay_ns=2 * MS),
                        tcp.TcpOptions(capture="pcap"))
    assert run.method == "pcap"
    check_bytes(run, demand.total_bytes)
    for s in run.stacks:
        assert (tmp_path / f"stack-{s.k}.pcap").exists()
        assert (s.send.size <= 1448).all() and s.send.bytes == s.delivered
        trace = magnetlib.open(s.trace).check()
        assert trace.meta.clock_name == "MONOTONIC"
        sent = trace.select([Event.DEV_SEND])
        assert int(trace.column_at("size", sent).sum()) == s.send.bytes


def test_rate_is_shaped(tmp_path, namespaces):
    """A bulk demand over a 10 Mbit/s path takes the time the rate says, and blocks."""
    demand = Demand.from_arrays(np.zeros(32, np.int64), np.full(32, 65536))   # 2 MiB at once
    run = tcp.run_chain(demand, tmp_path, chain(rate_bps=10_000_000, delay_ns=5 * MS, queue=knobs.queue("1bdp")),
                        tcp.TcpOptions(capture="none"))
    s = run.stacks[0]
    assert s.delivered == demand.total_bytes
    seconds = (s.send.ns[-1] - s.send.ns[0]) / 1e9
    assert 1.6 < seconds < 2.5, seconds                 # 2 MiB of 1448-B payloads at 10 Mbit/s: 1.75 s
    assert s.timing.blocked > 0 and s.timing.blocked_lag_max_ms > 300


def test_tcp_knobs_on_the_sockets(tmp_path, namespaces):
    """The TCP of 2001 as Linux sets it, seen on both ends' sockets: SACK, timestamps and
    window scaling off (per-namespace sysctls), reno, Nagle off, a 1000-byte MTU on the
    second stack's path (its MSS follows), 1 KiB reads, the delayed-ACK cap accepted."""
    scenario = Scenario(stacks=2, path=(NetPath(rate_bps=20_000_000, delay_ns=2 * MS),
                                        NetPath(rate_bps=20_000_000, delay_ns=2 * MS, mtu=1000)),
                        tcp=Tcp(cc="newreno", nagle=False, sack=False, timestamps=False,
                                window_scaling=False, read_size=1024, delack_count=2,
                                delack_timeout_ns=200 * MS))
    run = tcp.run_chain(paced(20, 10, 3000), tmp_path, scenario, tcp.TcpOptions(capture="none"))
    assert "tcp_sack=0" in run.applied and "Linux's own" in run.applied
    for s in run.stacks:
        for end in (s.sender["tcp"], s.receiver["tcp"]):
            assert not end["sack"] and not end["timestamps"] and not end["window_scaling"]
            assert end["cc"] == "reno" and end["nodelay"]
            assert end["snd_mss"] == (1460 if s.k == 1 else 960)
        reads = endpoint.load_record(tmp_path / f"stack-{s.k}" / "acceptor-record")["reads"]
        assert reads[:, 1].max() <= 1024


# ---------------------------------------------------------------- clean-up ---
@pytest.mark.parametrize("sig,after_s,ignored", [(signal.SIGKILL, 0.4, False), (signal.SIGKILL, 2.0, False),
                                                 (signal.SIGINT, 2.0, False), (signal.SIGTERM, 2.0, False),
                                                 (signal.SIGINT, 2.0, True)])
def test_interrupted_run_leaves_nothing(tmp_path, namespaces, sig, after_s, ignored):
    """Killed while setting up or while replaying, in relay mode with cross traffic (most
    to clean up): no namespace, TUN device, emulator, cgroup or process is left.  SIGINT
    ends the run even when it started with SIGINT ignored (a shell's background job,
    where a run once went on to its end and exited 0)."""
    def preexec():
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    proc = subprocess.Popen([str(BIN / "magnet"), "replay", "tcp", "synth:ftp", "--duration", "30",
                             "--stacks", "3", "--mode", "relay", "--cross", "tcp:1", "-o", tmp_path / "out"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    if after_s > 1:                          # mid-run: once the namespaces exist
        deadline = time.monotonic() + 20
        while not leftovers(proc.pid)["namespaces"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert leftovers(proc.pid)["namespaces"]
    time.sleep(after_s)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if sig != signal.SIGKILL:
        assert proc.returncode == 130 and "magnet: interrupted" in err, err
    assert wait_clean(proc.pid, tmp_path) == {}


# ------------------------------------------------------------------ errors ---
def test_needs_root_or_loopback(tmp_path):
    """Without root: one line saying so and naming --loopback (run as nobody when we are root)."""
    cmd = [str(BIN / "magnet"), "replay", "tcp", "synth:ftp", "-o", str(tmp_path / "x")]
    if os.geteuid() == 0:
        require_tool("setpriv")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, capture_output=True)
    proc.stderr_text = proc.stderr.decode()
    assert_clean_error(proc, "needs root", "--loopback")


@pytest.mark.parametrize("content,problem", [                  # the rest: tests/test_demand.py
    ("time_ns,size\n0,100\n10,-5\n", "size -5 is not a positive byte count"),
    ("time_ns,direction,size\n0,recv,100\n", "no send-direction demand"),
])
def test_bad_demand_is_one_line(tmp_path, content, problem):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert_clean_error(run_magnet("replay", "tcp", path, "--loopback", "-o", tmp_path / "o"),
                       str(path), problem)


def test_bad_options_are_one_line(tmp_path):
    assert_clean_error(run_magnet("replay", "tcp", "synth:ftp", "--loopback", "--capture", "bpf",
                                  "-o", tmp_path / "o"), "--loopback")
    assert_clean_error(run_magnet("replay", "tcp", "synth:ftp", "--loopback", "--stacks", "0",
                                  "-o", tmp_path / "o"), "--stacks")
    assert_clean_error(run_magnet("replay", "tcp", "synth:ftp", "--loopback", "--delay", "10ms",
                                  "-o", tmp_path / "o"), "--delay", "--loopback emulates no path")
    assert_clean_error(run_magnet("replay", "tcp", "synth:ftp", "--loopback", "--sack", "off",
                                  "-o", tmp_path / "o"), "--sack off", "network namespace")
    assert_clean_error(run_magnet("replay", "tcp", "synth:ftp", "--loopback", "--cc", "nosuchcc",
                                  "-o", tmp_path / "o"), "--cc", "nosuchcc", "cubic, newreno, reno, bbr")


def test_an_endpoint_names_the_congestion_control_it_cannot_set():
    """A name that reached an endpoint unchecked (a scenario file) is named, with what the kernel has."""
    with socket.socket() as sock, pytest.raises(OSError, match=r"congestion control 'nosuchcc': .*available: .*reno"):
        endpoint.set_congestion_control(sock, "nosuchcc")


@pytest.mark.parametrize("flags,needles", [
    (["--rate", "10bit"], ["--rate", "out of range"]),
    (["--delay", "20s"], ["--delay", "out of range"]),
    (["--mtu", "100"], ["--mtu", "out of range"]),
    (["--delack-count", "3"], ["--delack-count 3", "Linux cannot set it"]),
    (["--delack-timeout", "1s"], ["--delack-timeout", "between"]),
])
def test_out_of_range_knobs_are_one_line(tmp_path, namespaces, flags, needles):
    assert_clean_error(run_magnet("replay", "tcp", "synth:ftp", *flags, "-o", tmp_path / "o"), *needles)


def test_failed_run_is_one_line_and_leaves_nothing(tmp_path, namespaces):
    """A socket option the kernel refuses (TCP_MAXSEG 10, past --mss's check as a plan
    made by hand can be) fails the first stack's ends after everything is set up: the
    endpoint's own error naming the option, and nothing left behind."""
    scenario = chain(2, rate_bps=10_000_000, delay_ns=2 * MS).replace(cross=(cross("tcp:1"),))
    options = tcp.TcpOptions(capture="none")
    linux = tcp.prepare(scenario, options)
    linux.endpoint_args.append("--mss=10")
    with pytest.raises(tcp.ReplayError, match=r"^stack 1 acceptor: acceptor: TCP_MAXSEG 10: Invalid argument$"):
        with tcp.Lab(scenario, options, linux, tmp_path) as lab:
            tcp.run_offline(lab, paced(10, 10, 1000), lambda line: None)
    assert wait_clean(os.getpid(), tmp_path) == {}


@pytest.mark.parametrize("flags,needles", [
    (["--mss", "100000"], ["--mss 100000", "88 to 32767"]),
    (["--mss", "30"], ["--mss 30", "88 to 32767"]),
    (["--mss", "65536"], ["--mss 65536", "88 to 32767"]),
    (["--sndbuf", "10GiB"], ["--sndbuf 10737418240", "1 to 2147483647"]),
    (["--rcvbuf", "3GiB"], ["--rcvbuf 3221225472", "1 to 2147483647"]),
    (["--read-size", "3GiB"], ["--read-size 3221225472", "1 to 2147483647"]),
    (["--stacks", "10000"], ["--stacks 10000", "1 to 99"]),
    (["--cross", "tcp:100000"], ["--cross", "1 to 1000 bulk TCP flows"]),
    (["--cross", "poisson:30%/100000"], ["--cross", "UDP packets of 1 to 65507 B"]),
])
def test_knobs_out_of_linux_range_are_one_line_before_anything_starts(tmp_path, flags, needles):
    """Before: "stack 1 acceptor: exited with status 1" (the endpoint's error dropped),
    "acceptor: TypeError: a bytes-like object is required", "prefix too long", a hang
    starting 100000 cross-traffic threads, 0 B of UDP sent; now one line naming the flag
    and its range, with no namespace made (the loopback runs need no root)."""
    loopback = [] if "--cross" in flags else ["--loopback"]
    proc = run_magnet("replay", "tcp", "synth:ftp", *loopback, *flags, "-o", tmp_path / "o")
    assert_clean_error(proc, *needles)
    assert not (tmp_path / "o").exists()


def test_no_tun_device_is_one_line(tmp_path):
    """Without /dev/net/tun (a mount namespace hiding it) the run says so in one line."""
    require_root()
    require_tool("unshare")
    cmd = ["unshare", "--mount", "sh", "-c",
           f"mount -t tmpfs none /dev/net && exec {BIN / 'magnet'} replay tcp synth:ftp -o {tmp_path / 'o'}"]
    proc = subprocess.run(cmd, capture_output=True)
    proc.stderr_text = proc.stderr.decode()
    assert_clean_error(proc, "/dev/net/tun")


# --------------------------------------------------------- delayed ACKs ---
ACK_SERVER = """
import socket, sys, time
s = socket.socket(); s.bind((sys.argv[1], 7100)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); time.sleep(30)
"""
ACK_CLIENT = """
import socket, struct, sys, time
s = socket.create_connection((sys.argv[1], 7100)); s.setsockopt(6, socket.TCP_NODELAY, 1)
delays = []
for i in range(30):
    time.sleep(0.06)
    sent = time.monotonic(); s.send(bytes(1448))
    while struct.unpack_from("I", s.getsockopt(6, socket.TCP_INFO, 28), 24)[0]:   # tcpi_unacked
        time.sleep(0.0002)
    delays.append(time.monotonic() - sent)
print(" ".join(f"{d:.4f}" for d in delays))
"""


def ack_delays(tmp_path, route_opts=(), cap_ns=None) -> np.ndarray:
    """Seconds from sending one full segment to its ACK, over a 10 ms path, to a receiver
    that does not read (so only the delayed-ACK timer, or a quick ACK, answers)."""
    from magnet import capture
    from magnet.replay import delack, wan
    prefix = f"mgak{os.getpid()}"
    with wan.chain(prefix, chain(rate_bps=None, delay_ns=5 * MS), tmp_path, route_opts=list(route_opts)) as net:
        s = net.stack(1)
        cgroup = capture.make_cgroup(f"{prefix}-ack")
        cap = delack.Cap(cgroup, cap_ns) if cap_ns else None
        try:
            server = net.popen(s.right_ns, [sys.executable, "-c", ACK_SERVER, s.right_addr], stdout=subprocess.PIPE,
                               text=True, preexec_fn=lambda: capture.join_cgroup(cgroup))
            assert server.stdout.readline().strip() == "ready"
            out = subprocess.run(["ip", "netns", "exec", s.left_ns, sys.executable, "-c", ACK_CLIENT, s.right_addr],
                                 capture_output=True, text=True, timeout=60).stdout
            server.kill()
            server.wait()
            counts = cap.stop() if cap else {}
        finally:
            capture.remove_cgroup(cgroup)
    assert not cap or counts["applied"] >= 1
    return np.array(out.split(), float)[-12:]              # past the quick ACKs of the start


def test_delayed_ack_knobs_change_when_acks_leave(tmp_path, namespaces):
    """Linux's own delayed ACK answers a lone full segment after 40 ms; the cap
    (--delack-timeout 20ms: sockops TCP_BPF_DELACK_MAX) after 20; the route's quickack
    (--delack-count 1) at once.  RTT 10 ms."""
    from magnet.replay import delack
    why = delack.unavailable(20 * MS)
    require(why is None, f"delayed-ACK cap: {why}")
    own = np.median(ack_delays(tmp_path / "own")) * 1e3
    capped = np.median(ack_delays(tmp_path / "cap", cap_ns=20 * MS)) * 1e3
    quick = np.median(ack_delays(tmp_path / "quick", route_opts=["quickack 1"])) * 1e3
    assert 45 < own < 56 and 26 < capped < 36 and quick < 14, (own, capped, quick)
