"""The ns-3 replay, built and run for real: the C++ TestSuite, the chained-stack scenario, the CLI.

The programs are compiled once per cache key (sources, flags, ns-3); a test
session reuses them.  Without ns-3 or g++ these tests skip (fail under CI).
"""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import magnetlib
from magnetlib import demand as demand_mod
from magnetlib import synth
from magnetlib.format import Clock, Event
from magnet.replay import linkem, linklog, ns3, report
from magnet.replay.ns3 import Ns3Options
from magnet.replay.scenario import CROSS_LEAD_NS, Path as NetPath, Scenario, Tcp, cross, path_seed, stack_seed
from magnetlib import knobs

from .conftest import assert_clean_error, ns3_programs, run_magnet

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


@pytest.fixture(scope="session")
def programs():
    return ns3_programs()


@pytest.fixture(scope="session")
def ftp_demand(tmp_path_factory):
    d = synth.ftp(duration_s=6.0, jitter=0.3, seed=1)       # 10 KB about every 20 ms
    path = tmp_path_factory.mktemp("demand") / "ftp.magnet"
    demand_mod.write_demand(d, path)
    return d, path


def sock_send(path):
    with magnetlib.open(path) as trace:
        return demand_mod.extract(trace.check(), None, "send", "sock")


def layer_bytes(path) -> dict:
    with magnetlib.open(path) as trace:
        return {Event(ev).name: b for ev, b in trace.scan.bytes.items()}


# ------------------------------------------------------------- C++ tests ---
def test_ns3_test_suite_passes(programs):
    proc = ns3.run_tests(programs, "--verbose")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("PASS magnet-replay"), proc.stdout
    assert sum(line.strip().startswith("PASS") for line in lines) == 22, proc.stdout
    assert "FAIL" not in proc.stdout


def test_linux_tcp_test_suite_passes(programs):
    """The Linux profile's TestSuite: RTO, ACKs (on a bulk transfer one per two segments: PSH on
    each transmitted skb's last segment, __tcp_transmit_skb, not on each write's end), Nagle (a close sending the tail it held, with the
    FIN, at once: tcp_send_fin), autotuning, the reader's wake-up (an ACK left to the read leaving
    that long after its segment, at once at 0), the host's way in (a data segment reaching TCP
    AckLag after it arrives, a pure ACK ReplyLag after, in order; at once at 0), the handshake's last
    ACK lost (the peer's resent SYN-ACK drawing a challenge ACK, rate-limited, that completes
    its handshake: tcp_validate_incoming), the peer's FIN resent in LAST_ACK (its ACK taken, a
    duplicate ACK, this end's FIN resent until ACKed: tcp_rcv_state_process), a half-close with
    every byte sent and unACKed sending its FIN at once (tcp_send_fin), a FIN alone in flight
    resent as data (a loss probe with SACK, then the RTO doubling: tcp_retransmit_timer), the
    peer's FIN resent to TIME_WAIT ACKed again (tcp_timewait_state_process), a FIN clearing the
    delayed ACK it carries (tcp_event_ack_sent), the peer's FIN on its last data in FIN_WAIT_1
    drawing one ACK (tcp_fin), TIME_WAIT stopping the loss probe (tcp_done:
    tcp_clear_xmit_timers), the peer's FIN again in CLOSING ACKing this end's moving it to
    TIME_WAIT without an ACK (tcp_rcv_state_process), a segment of a
    connection gone drawing the listener's RST (tcp_v4_send_reset), an out-of-order segment growing rcv_ssthresh before
    it is charged, to the clamp (tcp_data_queue_ofo), tail loss probes (one while
    the peer sends, none once the tail is SACKed: RACK's reordering timer resends the hole),
    RACK resending a lost retransmission one RTT after it, RACK's reordering window once
    reordering is seen (a late segment not resent in Recovery), and the Open window on the
    ACK that ends Recovery (a late segment not resent), Recovery with no new data
    resending only segments marked lost (no RFC 6675 rule 3), a partial ACK in Recovery not
    resending a head not marked lost, a SACKed retransmission out of flight, CUBIC's RTT samples
    in Recovery (each duplicate ACK's SACKed segment's RTT, tcp_clean_rtx_queue's ca_rtt_us), a loss after the peer's FIN (a segment, the FIN itself), a receiver that
    closed first (FIN_WAIT_2: its RTT from a window of data, no timestamp samples, as
    tcp_rcv_state_process; the peer's FIN on its last data ACKed with it, the peer's LAST_ACK
    ending), a chain's sink half-closing at the demand's time zero (the transfer received in
    FIN_WAIT_2, as the real replay's receiving end), autotuning growing the buffer as 6.18's
    tcp_rcvbuf_grow (a window of 2 new + 4 new (new - old) / old, no 16-segment cushion), idle restart,
    TSO deferral (a lone freed segment waiting for the next ACK: tcp_tso_should_defer; a write
    judged once, after its skbs are queued), the window
    in packets (a short segment is one), slow start growing a window used in part (up to twice
    the packets out, tcp_is_cwnd_limited), growth in Disorder on an ACK that advances snd_una
    and SACKs, and on SACKs once reordering is above 3 (tcp_may_raise_cwnd), without SACK no resend after two duplicate ACKs and an
    ACK of new data (tcp_reset_reno_sack), the RTO restarted by each partial ACK and by a fast
    retransmission (tcp_rearm_rto, tcp_xmit_retransmit_queue) and, with SACK, by a later
    partial ACK that resends nothing (tcp_set_xmit_timer), after RACK's reordering timer from the
    head's last send (tcp_rack_reo_timeout, tcp_rto_delta_us), after an RTO no recovery from
    duplicate ACKs at the recovery point (tcp_is_non_sack_preventing_reopen), without SACK
    Recovery held on the ACK at high_seq, its duplicates resending nothing (an RTO), without SACK a
    partial ACK's head resent only as PRR's window allows (tcp_newreno_mark_lost,
    tcp_xmit_retransmit_queue: an RTO when it does not), F-RTO with and without SACK (a
    spurious RTO: new data on the ACK of the resent head, then undone, one segment resent;
    a real loss: new data first, then the resends, without SACK clocked by duplicate ACKs
    counted in Loss), an RTO in Recovery keeping the recovery's ssthresh (tcp_enter_loss), a write in Loss sending
    new data, not a lost segment (tcp_write_xmit), an RTO undone by the first ACK echoing a time
    before the resend (tcp_try_undo_loss: tcp_packet_delayed), a resent segment the receiver has
    drawing an ACK that echoes the resend's timestamp (tcp_replace_ts_recent), with RACK the RTO marking the head
    lost, not segments sent within RACK's RTT (tcp_timeout_mark_lost), with SACK in Loss every lost
    segment resent before new data (tcp_xmit_retransmit_queue), giving up (a
    100 s outage survived, a black hole given up 924.6 s after the first RTO, the RTO doubling
    to 120 s; the SYN's eleven sends, failed at 131 s)."""
    proc = ns3.run_tests(programs, "--verbose", program="magnet-linux-tcp-test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("PASS magnet-linux-tcp"), proc.stdout
    assert sum(line.strip().startswith("PASS") for line in lines) == 64, proc.stdout


def test_linux_profiles_kept_packet_count_is_the_walks(programs, monkeypatch):
    """The in-flight packet count kept through an event (a walk of the sent list, then one
    per new segment appended) equals a fresh walk at every use: MAGNET_PKTCOUNT_CHECK makes
    each reuse compare and abort, over the Linux profile's suite (RTO, RACK, TLP, no SACK)."""
    monkeypatch.setenv("MAGNET_PKTCOUNT_CHECK", "1")
    proc = ns3.run_tests(programs, program="magnet-linux-tcp-test")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_linux_profiles_rack_send_order_is_a_sort(programs, monkeypatch):
    """RACK's segments in the order they were last sent, walked only as far as RACK reads them
    (those never resent in sequence order, the resent ones sorted in), equal a sort of the whole
    sent list there: MAGNET_RACK_ORDER_CHECK makes each use compare and abort, over the Linux
    profile's suite (losses, lost retransmissions, reordering)."""
    monkeypatch.setenv("MAGNET_RACK_ORDER_CHECK", "1")
    proc = ns3.run_tests(programs, program="magnet-linux-tcp-test")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_linux_cc_test_suite_passes(programs):
    """The Linux profile's CUBIC, Reno and PRR on scripted ACKs: HyStart's delay and ACK-train
    exits, its rounds from the first ACK, Reno growing only while cwnd-limited, a packet per
    window, and PRR's rate as Linux computes them (ns-3's TcpCubic, TcpNewReno and
    TcpPrrRecovery beside); the window the profile's socket leaves fast recovery with (CUBIC and
    Reno, with and without SACK: ssthresh, grown by what the ending ACK newly delivered); and the profile selecting them."""
    proc = ns3.run_tests(programs, "--verbose", program="magnet-linux-cc-test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("PASS magnet-linux-cc"), proc.stdout
    assert sum(line.strip().startswith("PASS") for line in lines) == 8, proc.stdout


def test_example_program_replays_a_demand_file(programs, ftp_demand, tmp_path):
    d, path = ftp_demand
    proc = subprocess.run([str(programs.path("magnet-replay-example")), f"--demand={path}",
                           f"--trace={tmp_path / 'x.magnet'}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"delivered: {d.total_bytes} bytes" in proc.stdout
    assert layer_bytes(tmp_path / "x.magnet")["SOCK_RECV"] == d.total_bytes


# ------------------------------------------------------- offline chain ---
@pytest.fixture(scope="module")
def offline_chain(programs, ftp_demand, tmp_path_factory):
    out = tmp_path_factory.mktemp("chain")
    return ns3.run_chain(ftp_demand[1], out, Scenario(stacks=3), programs=programs)


def test_outputs_parse_with_magnetlib(offline_chain):
    assert len(offline_chain.traces) == 3
    for k, path in enumerate(offline_chain.traces, 1):
        with magnetlib.open(path) as trace:
            trace.check()
            assert trace.meta.clock_source == Clock.SIMULATION
            assert set(np.unique(trace.column("sockid")[trace.header_len:])) == {k}
            assert {Event.SOCK_SEND, Event.TCP_SEND, Event.DEV_SEND, Event.DEV_RECV,
                    Event.SOCK_RECV} <= set(trace.scan.counts)
        table = magnetlib.metrics.modulation(magnetlib.open(path))
        assert set(table["layer"]) == {"sock", "tcp", "dev"}


def test_bytes_conserved_through_every_stack(offline_chain, ftp_demand):
    total = ftp_demand[0].total_bytes
    assert offline_chain.summary["conserved"] is True
    for path in offline_chain.traces:
        b = layer_bytes(path)
        assert b["SOCK_SEND"] == b["TCP_SEND"] == b["DEV_SEND"] == b["DEV_RECV"] == b["SOCK_RECV"] == total


def test_first_stack_writes_match_the_demand_exactly(offline_chain, ftp_demand):
    d = ftp_demand[0]
    writes = sock_send(offline_chain.traces[0])
    np.testing.assert_array_equal(writes.size, d.size)
    np.testing.assert_array_equal(writes.time_ns, d.time_ns - d.time_ns[0])


def test_next_stack_writes_are_the_previous_stacks_wire(offline_chain):
    for before, after in zip(offline_chain.traces, offline_chain.traces[1:]):
        _, wire_ns, wire_size = report.trace_series(before, "wire", "dev")
        writes = sock_send(after)
        np.testing.assert_array_equal(writes.size, wire_size)
        np.testing.assert_array_equal(writes.time_ns, wire_ns - wire_ns[0])


def wire_sizes(run, k):
    return report.trace_series(run.traces[k - 1], "wire", "dev")[2]


def test_mss_follows_each_stacks_mtu(programs, ftp_demand, tmp_path):
    fast = NetPath(rate_bps=10**9)
    chain = Scenario(stacks=3, path=(fast, NetPath(rate_bps=10**9, mtu=576)))
    run = ns3.run_chain(ftp_demand[1], tmp_path / "mtu", chain, programs=programs)
    # MTU - 40 (IP, TCP) - 12 (the timestamp option), as Linux sends
    assert [wire_sizes(run, k).max() for k in (1, 2, 3)] == [1448, 524, 524]
    assert [p["mtu"] for p in run.summary["config"]["paths"]] == [1500, 576, 576]
    assert [s["segment_size"] for s in run.summary["stacks"]] == [1448, 524, 524]
    assert run.summary["conserved"] is True
    # A smaller MSS is taken as TCP_MAXSEG is (at most the path's); without timestamps, all data.
    plain = chain.replace(tcp=Tcp(mss=1000, timestamps=False))
    run = ns3.run_chain(ftp_demand[1], tmp_path / "mss", plain, programs=programs)
    assert [wire_sizes(run, k).max() for k in (1, 2, 3)] == [1000, 536, 536]


def test_big_endian_extended_demand_replays_like_native(programs, ftp_demand, tmp_path):
    d, native = ftp_demand
    rec = magnetlib.empty_records(len(d), ext=True)        # 144-byte records
    rec["sockid"], rec["timestamp"] = 1, d.time_ns + 10**9
    rec["event"], rec["size"] = Event.SOCK_SEND, d.size
    big = magnetlib.write(tmp_path / "big.magnet", rec, byteorder=">", clock_source=Clock.SYNTHETIC)
    assert magnetlib.open(big).meta.record_size == 144 and magnetlib.open(big).swapped
    runs = [ns3.run_chain(p, tmp_path / name, Scenario(stacks=1), programs=programs)
            for name, p in (("native", native), ("big", big))]
    a, b = (report.trace_series(r.traces[0], "wire", "dev") for r in runs)
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[2], b[2])


# --------------------------------------------------------- live, loss ---
def test_live_relays_conserve_bytes(programs, ftp_demand, tmp_path):
    run = ns3.run_chain(ftp_demand[1], tmp_path, Scenario(stacks=3, mode="relay"), programs=programs)
    assert run.summary["conserved"] is True
    for before, after in zip(run.summary["stacks"], run.summary["stacks"][1:]):
        assert after["writes_due"] == before["reads"]       # each read written on
        assert after["bytes_received"] == ftp_demand[0].total_bytes


def test_loss_retransmits_and_the_wire_carries_them_on(programs, ftp_demand, tmp_path):
    chain = Scenario(stacks=2, path=(NetPath(loss=knobs.loss("2%")),), seed=3)
    every = ns3.run_chain(ftp_demand[1], tmp_path / "all", chain, programs=programs)
    fresh = ns3.run_chain(ftp_demand[1], tmp_path / "new", chain, Ns3Options(new_data_only=True),
                          programs=programs).summary
    total = ftp_demand[0].total_bytes
    first = every.stack(1)
    assert first["tcp_retrans"] > 0 and first["dev_retrans"] > 0
    # the new-data sizes of the wire: what a new-data-only next stack is given
    assert every.new_bytes(1).sum() == total
    assert (every.new_bytes(1) < wire_sizes(every, 1)).sum() == first["dev_retrans"]
    every = every.summary
    assert first["bytes_received"] == total                   # TCP repaired the loss
    # A capture of the link holds the retransmissions too, and so does the next demand ...
    assert every["stacks"][1]["bytes_due"] == first["dev_send_bytes"] > total
    assert every["conserved"] is True
    # ... unless only new data is carried on.
    assert fresh["stacks"][1]["bytes_due"] == total


# -------------------------------------------------------------------- CLI ---
def test_cli_prints_table_ii_and_writes_csv_and_plots(programs, tmp_path):
    out = tmp_path / "out"
    proc = run_magnet("replay", "ns3", "synth:ftp-paper", "--duration", "4", "--stacks", "2",
                      "--rate", "10e6", "--delay", "0.03", "-o", out, check=True)
    text = proc.stdout_text
    assert "10Mbps bottleneck" in text and "30ms one way" in text, text
    assert "segments of 1448 B" in text and "SocketType=ns3::MagnetLinuxCubic" in text, text
    for label in ("Application", "1st TCP stack", "2nd TCP stack", "data size B", "spacing s"):
        assert label in text, text
    with open(out / "table.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["label"] for r in rows] == ["Application", "1st TCP stack", "2nd TCP stack"]
    assert [r["k"] for r in rows] == ["0", "1", "2"]
    assert float(rows[0]["mean_size_bytes"]) == 3284
    for name in ("bandwidth.png", "modulation.png", "stack-1.magnet", "stack-2.magnet",
                 "demand.magnet", "summary.json"):
        assert (out / name).stat().st_size > 0, name


def test_cli_sweep_runs_every_combination(programs, tmp_path):
    out = tmp_path / "sweep"
    proc = run_magnet("replay", "ns3", "synth:ftp", "--duration", "2", "--stacks", "1",
                      "--sweep", "rate=10Mbps,50e6", "--sweep", "cc=newreno,TcpCubic",
                      "--no-plots", "--jobs", "2", "-o", out, check=True)
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["rate"], r["cc"]) for r in rows} == {
        ("10Mbps", "newreno"), ("10Mbps", "TcpCubic"), ("50e6", "newreno"), ("50e6", "TcpCubic")}
    assert len(rows) == 8                                   # Application + 1 stack, 4 runs
    assert "TcpCubic" in proc.stdout_text
    run = out / "rate=50e6,cc=newreno"
    assert (run / "stack-1.magnet").exists()
    config = json.loads((run / "summary.json").read_text())["config"]
    assert config["paths"][0]["rate_bps"] == 50_000_000 and config["tcp"]["cc"] == "TcpNewReno"


def test_cli_bad_input_is_one_clear_line(programs, tmp_path):
    assert_clean_error(run_magnet("replay", "ns3", tmp_path / "missing.magnet", "-o", tmp_path),
                       "missing.magnet")
    assert_clean_error(run_magnet("replay", "ns3", "synth:ftp", "--cc", "TcpNope", "--duration", "1",
                                  "-o", tmp_path), "congestion control 'TcpNope'")
    assert_clean_error(run_magnet("replay", "ns3", "synth:ftp", "--sweep", "colour=red",
                                  "-o", tmp_path), "unknown key 'colour'")
    assert_clean_error(run_magnet("replay", "ns3", "synth:ftp", "--sweep", "loss=1%,lots",
                                  "-o", tmp_path), "loss 'lots'")
    assert_clean_error(run_magnet("replay", "ns3", "synth:nope", "-o", tmp_path), "unknown workload")
    assert_clean_error(run_magnet("replay", "ns3", "synth:ftp", "--rate", "none", "--queue", "1bdp",
                                  "--duration", "1", "-o", tmp_path), "needs a rate")
    assert_clean_error(run_magnet("replay", "ns3", "synth:ftp", "--mtu", "576", "--cross", "poisson:10%",
                                  "--duration", "1", "-o", tmp_path), "do not fit the MTU 576")
    two = tmp_path / "two.csv"
    two.write_text("sockid,time_ns,direction,size\n1,0,send,10\n2,5,send,20\n")
    assert_clean_error(run_magnet("replay", "ns3", two, "-o", tmp_path), "--stream")


def test_writes_of_2_31_bytes_and_more_are_refused_not_wrapped(programs, tmp_path):
    """The compact demand ns-3 reads holds 32-bit sizes: 4294967396 bytes must not become 100."""
    big = tmp_path / "big.csv"
    big.write_text("sockid,time_ns,direction,size\n1,0,send,4294967396\n1,1000000,send,100\n")
    proc = run_magnet("replay", "ns3", big, "--stacks", "1", "--no-plots", "-o", tmp_path / "o")
    assert_clean_error(proc, "big.csv: write 1 is 4294967396 bytes")
    assert not (tmp_path / "o" / "stack-1.magnet").exists()


def test_ns3_lists_its_congestion_controls_when_one_is_missing(programs, ftp_demand, tmp_path):
    proc = subprocess.run([str(programs.chain), f"--demand={ftp_demand[1]}", f"--out={tmp_path}",
                           "--cc=TcpNope"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unknown TCP variant 'TcpNope'" in proc.stderr
    for name in ("TcpNewReno", "TcpLinuxReno", "TcpCubic", "TcpBbr"):
        assert name in proc.stderr, proc.stderr


# ---------------------------------------------------------------- paths ---
def test_hops_share_the_delay_and_the_sender_measures_the_round_trip(programs, ftp_demand, tmp_path):
    path = NetPath(rate_bps=100_000_000, delay_ns=30_000_000, hops=5, jitter_ns=4_000_000)
    run = ns3.run_chain(ftp_demand[1], tmp_path, Scenario(stacks=1, path=(path,)), programs=programs)
    config = run.summary["config"]["paths"][0]
    assert config["hop_delays_ns"] == [6_000_000] * 5 and config["bottleneck_hop"] == 3
    assert "5 hops of 6ms" in run.applied and "jitter up to 4ms" in run.applied
    stack = run.stack(1)
    # 60 ms there and back, plus serialisation and jitter (samples from timestamps: whole ms)
    assert 60e6 <= stack["rtt_min_ns"] <= 62e6
    assert 60e6 < stack["srtt_mean_ns"] < 70e6 + 200e6       # delayed ACKs are in the samples
    with magnetlib.open(run.traces[0]) as trace:
        ev = trace.column("event")[trace.header_len:]
        ns = trace.column("timestamp")[trace.header_len:].astype(np.int64)
    first_out, first_in = ns[ev == Event.DEV_SEND][0], ns[ev == Event.DEV_RECV][0]
    assert 30e6 < first_in - first_out < 35e6                 # one way: the hops' delays add up


def test_loss_at_the_bottleneck_bernoulli_and_bursty(programs, ftp_demand, tmp_path):
    rates = {}
    for text in ("2%", "ge:1%/25%"):                        # 2 %; 3.85 % in bursts of 4
        chain = Scenario(stacks=1, path=(NetPath(loss=knobs.loss(text)),), seed=5)
        s = ns3.run_chain(ftp_demand[1], tmp_path / text, chain, programs=programs).stack(1)
        assert s["bytes_received"] == ftp_demand[0].total_bytes
        rates[text] = s["bottleneck_loss_drops_own"] / s["dev_send"]
    assert 0.01 < rates["2%"] < 0.03, rates
    assert 0.015 < rates["ge:1%/25%"] < 0.07, rates      # few bursts in 2200 packets: wide


@pytest.fixture(scope="session")
def linkem_draws(tmp_path_factory):
    """linkem's own loss decisions for a direction's seed: tests/linkem_draws.c over
    linkem's core.c, one bool per packet that passed the queue."""
    exe = tmp_path_factory.mktemp("linkem-draws") / "linkem_draws"
    subprocess.run(["gcc", "-O2", "-std=gnu11", f"-I{linkem.SOURCE}", str(Path(__file__).with_name("linkem_draws.c")),
                    str(linkem.SOURCE / "core.c"), "-o", str(exe)], check=True)

    def draws(seed: int, n: int, loss: knobs.Loss, jitter_ns: int = 0) -> np.ndarray:
        args = [loss.p, loss.r, loss.bad, loss.good] if loss.bursty else [loss.p]
        out = subprocess.run([str(exe), str(seed), str(n), *map(repr, args)], env={"JITTER_NS": str(jitter_ns)},
                             check=True, capture_output=True, text=True).stdout.strip()
        return np.frombuffer(out.encode(), np.uint8) == ord("1")
    return draws


@pytest.mark.parametrize("loss, extra", [("2%", {"rate_bps": 2_000_000, "queue": knobs.Queue(4)}),
                                         ("ge:1%/25%", {}), ("2%", {"jitter_ns": 5_000_000})],
                         ids=["bernoulli-queue-drops", "gilbert-elliott", "bernoulli-jitter"])
def test_loss_draws_are_linkems(programs, ftp_demand, linkem_draws, tmp_path, loss, extra):
    """Stack k of seed S loses the packets linkem's core loses with stack k's path seed
    (scenario.path_seed, as replay/wan.py gives linkem), its forward direction seeded twice that:
    of the packets that left the bottleneck's queue, the same ones in the same order; a packet
    the queue dropped draws nothing in either (linkem draws after the queue), a packet that
    got through also draws its jitter."""
    chain = Scenario(stacks=2, path=(NetPath(loss=knobs.loss(loss), **extra),), seed=3)
    run = ns3.run_chain(ftp_demand[1], tmp_path, chain, Ns3Options(link_log=True), programs=programs)
    for k in (1, 2):
        reason = linklog.read_file(tmp_path / f"stack-{k}.linklog")["reason"]
        drawn = reason[reason != linklog.REASONS.index("queue drop")]
        lost = drawn == linklog.REASONS.index("random loss")
        assert lost.sum() > 5 and lost.sum() == run.stack(k)["bottleneck_loss_drops"]
        seed = path_seed(3, k)                               # stack 2: not stack 1 of seed 4
        assert run.summary["config"]["paths"][k - 1]["seed"] == seed
        np.testing.assert_array_equal(lost, linkem_draws(2 * seed, len(drawn), knobs.loss(loss),
                                                         extra.get("jitter_ns", 0)))
        if "queue" in extra:
            assert len(drawn) < len(reason)                  # the queue dropped some


def test_no_stack_draws_what_a_stack_of_the_next_seed_draws():
    """Each stack's path seed (linkem's --seed, and the one ns-3 draws linkem's loss for) is
    its own over seeds and stacks: with seed + k, stack k + 1 of --seed S drew what stack k
    of --seed S + 1 drew.  Stack 1 keeps seed + 1 (single-stack results keep their draws)."""
    from magnet.replay import wan
    seen = {}
    for seed in range(1, 21):
        chain = Scenario(stacks=8, seed=seed)
        seeds = [s.seed for s in wan._plan("mgseed", chain, "10.203")]     # what linkem is given
        flag = next(a for a in ns3.chain_args(chain) if a.startswith("--pathSeed="))
        assert flag == "--pathSeed=" + ",".join(map(str, seeds))           # ns-3 draws for the same
        assert seeds[0] == seed + 1
        for k, s in enumerate(seeds, 1):
            assert s not in seen, f"stack {k} of seed {seed} draws what {seen[s]} draws"
            seen[s] = f"stack {k} of seed {seed}"


def test_a_duplex_path_logs_its_reverse_direction_too(programs, ftp_demand, tmp_path):
    """As linkem's reverse.linklog: on a duplex path with cross traffic both ways, the
    reverse direction's queue holds the reverse flows' data and the forward one's ACKs."""
    for duplex in (True, False):
        chain = Scenario(stacks=1, path=(NetPath(duplex=duplex),), cross=(cross("tcp:2"),))
        ns3.run_chain(ftp_demand[1], tmp_path / str(duplex), chain, Ns3Options(link_log=True), programs=programs)
        reverse = tmp_path / str(duplex) / "stack-1.reverse.linklog"
        assert reverse.exists() is duplex
    records = linklog.read_file(tmp_path / "True" / "stack-1.reverse.linklog")
    assert (records["bytes"] == 1500).sum() > 1000 and (records["bytes"] < 100).sum() > 100
    assert records["queue_packets"].max() > 10


def test_cross_traffic_shares_the_bottleneck(programs, ftp_demand, tmp_path):
    quiet = ns3.run_chain(ftp_demand[1], tmp_path / "quiet", Scenario(stacks=1), programs=programs)
    busy = {}
    for text in ("tcp:2", "poisson:30%"):
        chain = Scenario(stacks=1, cross=(cross(text),))
        busy[text] = ns3.run_chain(ftp_demand[1], tmp_path / text, chain, programs=programs)
    tcp, poisson = busy["tcp:2"].stack(1), busy["poisson:30%"].stack(1)
    share = {k: r.stack(1)["cross_bytes"] * 8 / (r.stack(1)["cross_ns"] / 1e9) / 20e6 for k, r in busy.items()}
    assert share["tcp:2"] > 0.7, share                     # the bulk flows take what is left
    assert 0.25 < share["poisson:30%"] < 0.35, share
    assert tcp["bottleneck_queue_drops"] > 0               # they fill its queue ...
    assert tcp["srtt_mean_ns"] > quiet.stack(1)["srtt_mean_ns"] + 20e6   # ... which the replay waits in
    for run in busy.values():
        assert run.summary["conserved"] is True
        # Connected before, and the first write exactly at, the cross traffic's lead (as the
        # real replay's ends wait for it).
        assert 0 < run.stack(1)["connected_ns"] < run.summary["config"]["cross_lead_ns"] == CROSS_LEAD_NS
        with magnetlib.open(run.traces[0]) as trace:
            assert int(trace.column_at("timestamp", trace.select([Event.SOCK_SEND]))[0]) == CROSS_LEAD_NS
    assert "2 bulk TCP flows" in busy["tcp:2"].applied


def test_a_connection_that_breaks_is_an_error_not_an_empty_table(programs, tmp_path):
    # Almost every packet lost from the start (bursts of 10000): the SYN never gets through.
    proc = run_magnet("replay", "ns3", "synth:ftp-paper", "--duration", "5", "--stacks", "1",
                      "--loss", "ge:50%/0.01%", "--cross", "poisson:5%", "--no-plots", "-o", tmp_path)
    assert_clean_error(proc, "stack 1 was given 134644 bytes, handed 0 to TCP and delivered 0 "
                             "(connection to the sink failed)")


def test_tcp_options_are_applied_and_stated(programs, ftp_demand, tmp_path):
    tcp = Tcp(cc="reno", sack=False, timestamps=False, window_scaling=False, delack_count=3,
              delack_timeout_ns=100_000_000, nagle=False, sndbuf=65536, rcvbuf=32768, read_size=1024)
    run = ns3.run_chain(ftp_demand[1], tmp_path, Scenario(stacks=1, tcp=tcp), Ns3Options(tcp_model="ns3"),
                        programs=programs)
    settings = run.summary["config"]["tcp_settings"]
    assert settings == {**settings, "SocketType": "ns3::TcpLinuxReno", "Sack": "false",
                        "Timestamp": "false", "WindowScaling": "false", "DelAckCount": "3",
                        "DelAckTimeout": "0.1s", "TcpNoDelay": "true", "SndBufSize": "65536",
                        "RcvBufSize": "32768"}
    for name in settings:
        assert f"{name}={settings[name]}" in run.applied
    stack = run.stack(1)
    assert stack["segment_size"] == 1460 and wire_sizes(run, 1).max() == 1460
    assert stack["bytes_received"] / stack["reads"] <= 1024
    # and ns-3's own defaults come back for the next chain (Config::SetDefault persists)
    again = ns3.run_chain(ftp_demand[1], tmp_path / "again", Scenario(stacks=1), Ns3Options(tcp_model="ns3"),
                          programs=programs)
    assert again.summary["config"]["tcp_settings"]["DelAckCount"] == "2"
    assert again.summary["config"]["tcp_settings"]["DelAckTimeout"] == "0.2s"


def test_an_ns3_abort_is_reported_by_its_cause():
    # ns-3's epilogue of a failed assertion, as magnet-chain printed it; the driver had
    # reported only "terminate called without an active exception".
    stderr = ('NS_ASSERT failed, cond="!outItem->m_sacked", +7.052825631s 1 '
              'file=/gcl-builds/src/internet/model/tcp-tx-buffer.cc, line=233\n'
              'NS_FATAL, terminating\nterminate called without an active exception\n')
    assert ns3._problem(stderr, -6) == ("ns-3", 'NS_ASSERT failed, cond="!outItem->m_sacked", +7.052825631s 1 '
                                                'file=/gcl-builds/src/internet/model/tcp-tx-buffer.cc, line=233')
    assert ns3._problem("magnet-chain: d.csv: row 3: bad size\n", 2) == ("d.csv", "row 3: bad size")


def test_missing_ns3_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("MAGNET_NS3_ROOT", str(tmp_path / "no-ns3"))
    proc = run_magnet("replay", "ns3", "synth:ftp", "--duration", "1", "-o", tmp_path / "o")
    assert_clean_error(proc, "pip install --no-deps ns3")


# ------------------------------------------------------------------ build ---
def test_build_key_follows_the_sources(programs, tmp_path, monkeypatch):
    copy = tmp_path / "ns3-app"
    shutil.copytree(ns3.APP_DIR, copy)
    monkeypatch.setattr(ns3, "APP_DIR", copy)
    key = ns3.build_key(programs.ns3)
    assert ns3.build_key(programs.ns3) == key
    src = copy / "model" / "magnet-replay-application.cc"
    src.write_text(src.read_text() + "\n// changed\n")
    assert ns3.build_key(programs.ns3) != key
    assert (programs.directory / ".complete").exists()


def test_cli_says_when_the_capture_lost_records(programs, tmp_path):
    rec = magnetlib.empty_records(5)
    rec["sockid"], rec["timestamp"] = 1, np.arange(5) * 10**7 + 10**9
    rec["event"], rec["size"] = Event.SOCK_SEND, 1000
    rec["event"][2], rec["sockid"][2], rec["size"][2] = Event.LOST, 0, 7
    path = magnetlib.write(tmp_path / "lossy.magnet", rec)
    proc = run_magnet("replay", "ns3", path, "--stacks", "1", "--no-plots", "-o", tmp_path / "o",
                      check=True)
    assert "the capture lost 7 records" in proc.stderr_text


# ----------------------------------------------------------- TCP models ---
def paper_stack1(programs, tmp_path, model: str, stacks: int = 1) -> tuple[dict, np.ndarray]:
    d = synth.ftp_paper(15)
    path = tmp_path / "paper.magnet"
    demand_mod.write_demand(d, path)
    chain = Scenario(stacks=stacks, path=(NetPath(queue=knobs.Queue(1, "bdp")),))
    run = ns3.run_chain(path, tmp_path / model, chain, Ns3Options(tcp_model=model), programs=programs)
    return run, wire_sizes(run, 1)


def test_tcp_model_ns3_still_gives_ns3s_own_figures(programs, tmp_path):
    """--tcp-model ns3: the figures the modulation map recorded before the Linux profile:
    1311 B every 0.0501 s at stack 1 of the paper's application, a 143 ms smoothed RTT."""
    run, sizes = paper_stack1(programs, tmp_path, "ns3")
    assert round(sizes.mean()) == 1311 and len(sizes) == 303
    assert round(run.stack(1)["srtt_mean_ns"] / 1e6) == 143
    assert "DelAckTimeout=0.2s" in run.applied and "MinRto=1s" in run.applied


def test_tcp_model_linux_gives_linuxs_figures(programs, tmp_path):
    """The Linux profile (the default): 1095 B every 0.0411 s, a 61 ms RTT, as Linux's TCP
    measured over linkem (docs/replay.md: 1095 B, 0.0412 s, 61 ms); each 3284-byte write
    leaves as 1448 + 1448 + 388, the tail at once (Minshall's Nagle)."""
    run, sizes = paper_stack1(programs, tmp_path, "linux")
    assert len(sizes) == 363 and sorted(set(sizes.tolist())) == [388, 1448]
    assert 60.5 < run.stack(1)["srtt_mean_ns"] / 1e6 < 62
    assert "Model=linux" in run.applied and "Nagle=Minshall" in run.applied
    settings = run.summary["config"]["tcp_settings"]
    assert settings["InitialCwnd"] == "10" and settings["RecoveryType"] == "ns3::MagnetLinuxPrrRecovery"
    assert settings["SocketType"] == "ns3::MagnetLinuxCubic"
    assert "ato from 0.04s" in settings["DelAck"] and "131072 autotuned up to 33554432" in settings["RcvBuf"]
    assert settings["Rack"].startswith("on (") and settings["TailLossProbe"] == "true"
    assert settings["GiveUp"].startswith("SYN x11 (4 linear), data after tcp_retries2=15's time")


def test_linux_model_takes_knobs_as_linux_does(programs, ftp_demand, tmp_path):
    tcp = Tcp(delack_count=1, delack_timeout_ns=20_000_000, sndbuf=65536, rcvbuf=32768)
    run = ns3.run_chain(ftp_demand[1], tmp_path, Scenario(stacks=1, tcp=tcp), programs=programs)
    settings = run.summary["config"]["tcp_settings"]
    assert settings["DelAck"] == "every segment at once (quickack)"
    assert settings["RcvBuf"] == "SO 32768 (doubled, fixed)" and settings["SndBuf"] == "SO 65536 (doubled, fixed)"
    assert run.stack(1)["bytes_received"] == ftp_demand[0].total_bytes
    # What Linux cannot do, the linux model refuses as replay tcp does; the ns3 model takes it.
    for bad, why in ((Tcp(delack_count=3), "Linux ACKs every second full-sized segment"),
                     (Tcp(delack_timeout_ns=300_000_000), "200 ms at most")):
        with pytest.raises(ns3.Ns3Error, match=why):
            ns3.run_chain(ftp_demand[1], tmp_path / "bad", Scenario(stacks=1, tcp=bad), programs=programs)


def test_udp_cross_traffic_plays_the_schedule_the_real_sender_sends(programs, ftp_demand, tmp_path):
    """ns-3 plays cross.UdpSchedule's datagrams (the seeds the real sender uses): every one due
    before the run's end crosses the bottleneck, none of ns-3's own draws."""
    from magnet.replay import cross as cross_mod
    chain = Scenario(stacks=2, cross=(cross("poisson:30%"), cross("pareto:20%")), seed=4)
    run = ns3.run_chain(ftp_demand[1], tmp_path, chain, programs=programs)
    assert "played from the schedules" in run.applied
    options = Ns3Options()
    horizon = ns3.cross_horizon_ns(ftp_demand[1], chain, options)
    for k in (1, 2):
        stack = run.stack(k)
        assert not stack["cross_schedule_exhausted"]
        due = sent = 0
        for i, c in enumerate(chain.cross):
            flow = cross_mod.flow_of(c, 20_000_000)
            times = cross_mod.UdpSchedule(flow, 20_000_000, stack_seed(4, k), i).until(horizon)
            with magnetlib.open(tmp_path / "cross" / f"stack-{k}-cross-{i + 1}.magnet") as trace:
                played = demand_mod.extract(trace, None, "send", "sock")
            np.testing.assert_array_equal(played.time_ns - played.time_ns[0], times)
            due += int((times < stack["cross_ns"] - 50_000_000).sum())  # across by the end (30 ms away)
            sent += int((times < stack["cross_ns"]).sum())
        delivered = stack["cross_bytes"] // 1000
        assert due <= delivered <= sent, (due, delivered, sent)
        assert stack["bottleneck_queue_drops"] == 0
