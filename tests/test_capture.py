"""The kernel capture, loaded for real, recording real traffic (needs root and BPF).

Each test runs tests/capture_app.py (a TCP client and server that count what
they do) under `magnet capture`, and checks the trace against the
application's own counts and the kernel's TCP_INFO counters: send calls and
bytes, segments per layer, retransmissions, socket cookies, TCP state.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import magnetlib
from magnet import capture
from magnetlib.format import Event as E
from magnet.replay import netns

from .conftest import require, require_root, require_tool, run_magnet

APP = Path(__file__).with_name("capture_app.py")
PREFIX = f"mgcap{os.getpid() % 100000}"
TCP_CLOSE = 7
SEND_EVENTS = (E.TCP_SEND, E.TCP_RETRANS, E.IP_SEND, E.DEV_SEND)
RECV_EVENTS = (E.TCP_RECV, E.IP_RECV, E.DEV_RECV)


@pytest.fixture(scope="module")
def magnet_read() -> Path:
    require_root()
    require(os.path.exists("/sys/kernel/btf/vmlinux"), "the kernel has no BTF")
    try:
        return capture.find_magnet_read()
    except capture.CaptureError as e:
        require(False, str(e))


@pytest.fixture(scope="module")
def veth(magnet_read):
    require_tool("ethtool")
    with netns.pair(f"{PREFIX}v") as net:
        yield net


@dataclass
class Run:
    trace: magnetlib.Trace
    client: dict
    server: dict
    stats: dict


# On this kernel (6.18), programs attached to tracepoints (DEV_*, SOCK_*, and
# TCP_RECV in ESTABLISHED) now and then do not run for a short burst of
# events, mostly when TCP sends from a timer at interrupt exit (BBR's pacing
# timer, retransmission timers), and the kernel counts no miss for them
# (docs/capture.md, "Known limits"). The client uses cubic, which needs no
# pacing timer; where losses bring retransmission timers, the checks of the
# tracepoint-fed layers allow this share to be missing.
CONGESTION_CONTROL = "cubic"
TRACEPOINT_SHORTFALL = 0.02


def about(value: int, expected: int, inexact: bool) -> bool:
    """value == expected, or within the tracepoint shortfall below it."""
    if not inexact:
        return value == expected
    return (1 - TRACEPOINT_SHORTFALL) * expected <= value <= expected


def captured(tmp_path: Path, name: str, app_args: list, *options: str) -> Run:
    """The application under `magnet capture`; the trace, its counts, BPF statistics."""
    out, app_out, stats = (tmp_path / f"{name}.{ext}" for ext in ("magnet", "json", "stats.json"))
    proc = run_magnet("capture", "-o", out, "--cgroup-name", f"{PREFIX}-{name}", "--stats", stats,
                      *options, "--", sys.executable, APP, *map(str, app_args),
                      "--cc", CONGESTION_CONTROL, "--out", app_out)
    assert proc.returncode == 0, proc.stderr_text
    assert "magnet capture:" in proc.stdout_text
    app = json.loads(app_out.read_text())
    return Run(magnetlib.open(out).check(), app["client"], app["server"],
               json.loads(stats.read_text()))


@dataclass
class Layer:
    records: int
    segs: int                         # wire segments (GSO buffers count their segments)
    bytes: int


def layer(trace, sockid: int, *events) -> Layer:
    pos = trace.select(list(events), sockid)
    size = trace.column_at("size", pos).astype(np.int64)
    segs = np.maximum(trace.column_at("gso_segs", pos), 1) if trace.has_ext else np.ones(len(pos))
    return Layer(len(pos), int(segs.sum()), int(size.clip(0).sum()))


# ------------------------------------------------------------ the checks ---
def check_app_calls(run: Run) -> None:
    """SOCK_SEND/SOCK_RECV: one record per call, sizes = what the calls returned."""
    t, c, s = run.trace, run.client, run.server
    assert layer(t, c["cookie"], E.SOCK_SEND) == Layer(c["sends"], c["sends"], c["bytes"])
    assert layer(t, s["cookie"], E.SOCK_RECV) == Layer(s["recvs"], s["recvs"], s["bytes"])
    assert layer(t, c["cookie"], E.SOCK_RECV) == Layer(c["recvs"], c["recvs"], c["received"])
    assert layer(t, s["cookie"], E.SOCK_SEND) == Layer(s["sends"], s["sends"], s["sent"])


def check_layers(run: Run, path_drops: bool = False) -> None:
    """Payload bytes and segments of every layer against the app and TCP_INFO,
    read once both sides had closed (the kernel's counters are final then).

    The server's segs_in counts the SYN, which arrives before its socket
    exists; its segs_out does not count the SYN-ACK, which the request socket
    sends."""
    t, c, s = run.trace, run.client, run.server
    ci, si = c["tcp_info"], s["tcp_info"]
    new = layer(t, c["cookie"], E.TCP_SEND)
    again = layer(t, c["cookie"], E.TCP_RETRANS)
    assert new.bytes == c["bytes"]                           # each byte once as TCP_SEND
    assert (again.segs, again.bytes) == (ci["total_retrans"], ci["bytes_retrans"])
    assert new.segs + again.segs == ci["segs_out"]
    assert layer(t, c["cookie"], E.IP_SEND).bytes == ci["bytes_sent"] == new.bytes + again.bytes
    assert about(layer(t, c["cookie"], E.TCP_RECV).segs, ci["segs_in"], path_drops), not_at_tcp(t, c)
    assert about(layer(t, s["cookie"], E.TCP_RECV).segs + 1, si["segs_in"], path_drops), not_at_tcp(t, s)
    assert layer(t, s["cookie"], E.TCP_SEND).segs - 1 == si["segs_out"]
    dev = layer(t, c["cookie"], E.DEV_SEND)     # a GSO buffer is one record of several segments
    assert about(dev.segs, ci["segs_out"], path_drops)
    assert about(dev.bytes, ci["bytes_sent"], path_drops)
    received = {ev: layer(t, s["cookie"], ev).bytes for ev in (E.DEV_RECV, E.IP_RECV, E.TCP_RECV)}
    assert received[E.IP_RECV] >= s["bytes"]
    assert about(received[E.DEV_RECV], received[E.IP_RECV], path_drops)
    assert about(received[E.TCP_RECV], received[E.IP_RECV], path_drops)
    if not path_drops:
        assert received[E.IP_RECV] == ci["bytes_sent"]


def not_at_tcp(trace, side: dict) -> str:
    """For a failed check: the segments IP took for this socket (each one that
    segs_in counts) that no TCP_RECV record has, by sequence and ACK numbers
    (a segment merged into another in the backlog shows here as well)."""
    if not trace.has_ext:
        return ""
    ip, tcp = (trace.records[trace.select([ev], side["cookie"])] for ev in (E.IP_RECV, E.TCP_RECV))
    key = lambda r: r["seq"].astype(np.uint64) << np.uint64(32) | r["ack_seq"].astype(np.uint64)
    lone = ip[~np.isin(key(ip), key(tcp))]
    return "IP_RECV without TCP_RECV: " + "; ".join(
        f"t={r['timestamp']} seq={r['seq']} ack={r['ack_seq']} flags={r['tcp_flags']:#x} "
        f"state={r['tcp_state']} size={r['size']}" for r in lone)


def check_ids(run: Run) -> None:
    """sockid is SO_COOKIE at every layer, and each cookie's records carry its ports."""
    t, c, s = run.trace, run.client, run.server
    net = t.select(sorted(magnetlib.format.NETWORK_EVENTS))
    assert set(np.unique(t.column_at("sockid", net)).tolist()) == {c["cookie"], s["cookie"]}
    if not t.has_ext:
        return
    for side in (c, s):
        for events, (sport, dport) in ((SEND_EVENTS + (E.SOCK_SEND,), (side["local_port"], side["remote_port"])),
                                       (RECV_EVENTS + (E.SOCK_RECV,), (side["remote_port"], side["local_port"]))):
            pos = t.select(list(events), side["cookie"])
            pos = pos[t.column_at("tcp_state", pos) != TCP_CLOSE]   # a closed socket forgets its peer
            assert (t.column_at("sport", pos) == sport).all()
            assert (t.column_at("dport", pos) == dport).all()


def check_cpu_order(trace) -> None:
    """On each CPU, timestamps never go back (LOST records magnet-read writes
    itself carry no CPU)."""
    data = trace.data
    data = data[data["event"] != E.LOST]
    for cpu in np.unique(data["cpu"]):
        ts = data["timestamp"][data["cpu"] == cpu].astype(np.int64)
        assert (np.diff(ts) >= 0).all(), f"CPU {cpu}: timestamps go back"


def check_all(run: Run, path_drops: bool = False) -> None:
    check_app_calls(run)
    check_layers(run, path_drops)
    check_ids(run)
    if run.trace.has_ext:
        check_cpu_order(run.trace)
    assert run.trace.scan.lost == 0


# ----------------------------------------------------------------- tests ---
def test_loopback_bulk(magnet_read, tmp_path):
    run = captured(tmp_path, "bulk", ["bulk", "--total", 4_000_000, "--chunk", 65536], "--ext")
    check_all(run)
    assert os.stat(run.trace.path).st_mode & 0o777 == 0o600


def test_loopback_418_byte_frames_with_tcp_state(magnet_read, tmp_path):
    run = captured(tmp_path, "frames", ["periodic", "--size", 418, "--interval", 0.021,
                                        "--count", 40, "--probe"], "--ext")
    check_all(run)
    sends = run.trace.select(E.SOCK_SEND, run.client["cookie"])
    assert (run.trace.column_at("size", sends) == 418).all()
    check_tcp_state(run)


def check_tcp_state(run: Run) -> None:
    """The extended TCP state agrees with TCP_INFO read by the application right
    after each send, and with `ss -ti` at the end: the values read must be those
    of the socket's record just before or just after that moment (an ACK may
    change the state in between)."""
    t = run.trace
    pos = t.select(sorted(magnetlib.format.NETWORK_EVENTS), run.client["cookie"])
    rec = t.records[pos]
    rec = rec[(rec["valid"] & magnetlib.ExtValid.TCP_STATE) != 0]
    rtt_ok = 0
    for probe in run.client["probes"]:
        after = np.searchsorted(rec["timestamp"], probe["time_ns"])
        near = rec[max(after - 1, 0):after + 1]
        for field, name in (("snd_cwnd", "snd_cwnd"), ("snd_ssthresh", "snd_ssthresh"),
                            ("mss", "snd_mss"), ("rto_us", "rto")):
            assert probe[name] in near[field].tolist(), (field, probe[name], near[field])
        rtt_ok += any(abs(int(v) - probe["rtt"]) <= max(20, 0.25 * probe["rtt"]) for v in near["srtt_us"])
    assert rtt_ok >= 0.9 * len(run.client["probes"])
    ss = run.client["ss"]
    last = rec[np.searchsorted(rec["timestamp"], ss["time_ns"]) - 1]
    assert int(re.search(r"\bcwnd:(\d+)", ss["text"]).group(1)) == last["snd_cwnd"]
    rtt_us = float(re.search(r"\brtt:([\d.]+)/", ss["text"]).group(1)) * 1000
    assert abs(rtt_us - last["srtt_us"]) <= max(20, 0.25 * rtt_us)


def test_loopback_ipv6(magnet_read, tmp_path):
    run = captured(tmp_path, "ipv6", ["bulk", "--total", 1_000_000, "--addr", "::1"], "--ext")
    check_all(run)
    data = run.trace.data
    assert (data["ip_version"][data["event"] != E.LOST] == 6).all()


def test_loopback_half_close(magnet_read, tmp_path):
    """The server answers after the client's FIN: the client takes that data in
    FIN_WAIT2, on TCP's slow path, where segments that waited in the socket
    backlog arrive merged (one record standing for several, as segs_in counts)."""
    run = captured(tmp_path, "halfclose", ["bulk", "--total", 100_000, "--reply", 2_000_000], "--ext")
    check_all(run)
    received = layer(run.trace, run.client["cookie"], E.TCP_RECV)
    assert received.bytes == run.client["received"] == 2_000_000


def test_veth_10k_every_20ms(veth, tmp_path):
    run = captured(tmp_path, "veth10k", ["periodic", "--size", 10240, "--interval", 0.02,
                                         "--count", 40, "--addr", veth.server_addr,
                                         "--server-netns", veth.server,
                                         "--client-netns", veth.client], "--ext")
    check_all(run)
    # Offloads off: the device sends what TCP sent, one wire segment per record.
    dev = layer(run.trace, run.client["cookie"], E.DEV_SEND)
    assert dev.records == dev.segs


def test_veth_bulk_without_ext(veth, tmp_path):
    run = captured(tmp_path, "vethbulk", ["bulk", "--total", 2_000_000, "--addr", veth.server_addr,
                                          "--server-netns", veth.server,
                                          "--client-netns", veth.client])
    assert not run.trace.has_ext
    check_app_calls(run)
    check_ids(run)
    c = run.client
    assert layer(run.trace, c["cookie"], E.TCP_SEND).bytes == c["bytes"]
    assert layer(run.trace, c["cookie"], E.DEV_SEND).records == c["tcp_info"]["segs_out"]


def test_retransmissions_are_marked(magnet_read, tmp_path):
    """Losses on the path (a router's token bucket): TCP_RETRANS carries exactly
    what TCP retransmitted; the router's devices do not count."""
    require_tool("tc")
    with netns.routed(f"{PREFIX}r", rate="50mbit") as net:
        run = captured(tmp_path, "retrans", ["bulk", "--total", 3_000_000, "--addr", net.server_addr,
                                             "--server-netns", net.server,
                                             "--client-netns", net.client], "--ext")
    check_all(run, path_drops=True)
    assert run.client["tcp_info"]["total_retrans"] > 0


def test_sendfile_is_seen(magnet_read, tmp_path):
    """sendfile() reaches the socket layer (in pieces: one SOCK_SEND per splice)."""
    run = captured(tmp_path, "sendfile", ["sendfile", "--total", 3_000_000])
    sent = layer(run.trace, run.client["cookie"], E.SOCK_SEND)
    assert sent.bytes == run.client["bytes"] == 3_000_000
    assert sent.records >= run.client["sends"]
    assert layer(run.trace, run.client["cookie"], E.TCP_SEND).bytes == 3_000_000


# --------------------------------------------------------------- filters ---
def test_port_filter(magnet_read, tmp_path):
    port = 40000 + os.getpid() % 20000
    args = ["periodic", "--count", 5, "--interval", 0.01, "--port", port]
    run = captured(tmp_path, "port", args, "--port", str(port))
    check_app_calls(run)
    other = captured(tmp_path, "noport", args, "--port", str(port + 1))
    assert other.trace.scan.records == 0


def test_pid_filter(magnet_read, tmp_path):
    """Only the connections of one process, among two doing the same."""
    outs = [tmp_path / f"app{i}.json" for i in range(2)]
    apps = [subprocess.Popen([sys.executable, APP, "periodic", "--count", "5", "--interval", "0.01",
                              "--delay", "1", "--out", out]) for out in outs]
    trace_path = tmp_path / "pid.magnet"
    reader = subprocess.Popen([magnet_read, "-o", trace_path, "--pid", str(apps[0].pid), "-q",
                               "--status-dir", tmp_path])
    try:
        for app in apps:
            assert app.wait(30) == 0
    finally:
        reader.send_signal(signal.SIGINT)
        assert reader.wait(30) == 0
    trace = magnetlib.open(trace_path).check()
    mine, theirs = (json.loads(out.read_text()) for out in outs)
    streams = set(trace.stream_ids().tolist())
    assert streams == {mine["client"]["cookie"], mine["server"]["cookie"]}
    assert layer(trace, mine["client"]["cookie"], E.SOCK_SEND).records == mine["client"]["sends"]


def test_concurrent_captures_keep_to_their_ports(magnet_read, tmp_path):
    """Two captures at once, each with its own port filter, and traffic on both
    ports: each trace holds its own port's connections and nothing else, at every
    layer (the other capture asks the kernel for per-segment callbacks on its
    sockets: those must not leak into this one's trace)."""
    ports = [30000 + os.getpid() % 20000 + i for i in range(2)]
    caps = [capture.Capture(tmp_path / f"port{port}.magnet", binary=magnet_read,
                            settings=capture.Settings(ports=str(port), ext=True, status_dir=str(tmp_path)))
            for port in ports]
    outs = [tmp_path / f"app{port}.json" for port in ports]
    try:
        for cap in caps:
            cap.start()
        apps = [subprocess.Popen([sys.executable, APP, "bulk", "--total", "2000000", "--chunk", "1000",
                                  "--port", str(port), "--cc", CONGESTION_CONTROL, "--out", out])
                for port, out in zip(ports, outs)]
        for app in apps:
            assert app.wait(60) == 0
    finally:
        for cap in caps:
            cap.stop()
    for cap, port, out in zip(caps, ports, outs):
        assert cap.returncode == 0, cap.error()
        app = json.loads(out.read_text())
        trace = magnetlib.open(cap.output).check()
        mine = {app["client"]["cookie"], app["server"]["cookie"]}
        assert set(trace.stream_ids().tolist()) == mine, port
        data = trace.data[trace.data["event"] != E.LOST]
        assert np.isin(port, np.stack([data["sport"], data["dport"]])).all()
        assert layer(trace, app["client"]["cookie"], E.TCP_SEND).bytes == app["client"]["bytes"]


def test_only_the_chosen_layers_are_attached(magnet_read, tmp_path):
    """Layers left out of --events cost nothing: their programs are not loaded
    (the socket layer alone needs no sockops program either)."""
    expected = {"sock": {"magnet_sock_send", "magnet_sock_recv"},
                "TCP_RECV": {"magnet_sockops", "magnet_tcp_probe"},
                "dev": {"magnet_sockops", "magnet_dev_send", "magnet_dev_recv"}}
    for events, programs in expected.items():
        run = captured(tmp_path, f"layers-{events}", ["periodic", "--count", 3, "--interval", 0.01],
                       "--events", events)
        assert set(run.stats["programs"]) == programs, events
        assert run.trace.scan.records > 0


# ------------------------------------------------------------------ loss ---
def accounting(stats: dict) -> tuple[int, int]:
    """(program runs + their second events, recorded + lost + skipped runs)."""
    runs = sum(p["run_cnt"] for p in stats["programs"].values())
    return (runs + stats["extra_events"],
            stats["records"] + stats["lost_buffer_full"] + sum(stats["skipped_by_group"]))


def test_loss_is_counted_exactly(magnet_read, tmp_path):
    """A tiny buffer drained slowly: LOST records appear where the loss happened,
    and recorded + lost equals the application's own count of send calls."""
    run = captured(tmp_path, "loss", ["bulk", "--total", 1_500_000, "--chunk", 100],
                   "--events", "SOCK_SEND", "--buffer", "4K", "--drain-delay", "300ms")
    t, c = run.trace, run.client
    lost = t.select(E.LOST)
    assert len(lost) > 0 and t.scan.lost > 0
    assert layer(t, c["cookie"], E.SOCK_SEND).records + t.scan.lost == c["sends"] == 15000
    assert run.stats["lost"] == t.scan.lost
    runs, outcomes = accounting(run.stats)
    assert runs == outcomes


def test_loss_accounting_all_events(magnet_read, tmp_path):
    """Every program run is recorded, lost (and announced) or skipped, whatever the layer."""
    run = captured(tmp_path, "lossall", ["bulk", "--total", 3_000_000, "--chunk", 1000],
                   "--buffer", "4K", "--drain-delay", "200ms", "--ext")
    t = run.trace
    assert t.scan.lost > 0
    assert t.scan.lost == run.stats["lost"] == run.stats["lost_buffer_full"] + run.stats["lost_skipped_runs"]
    runs, outcomes = accounting(run.stats)
    assert runs == outcomes
    recorded = sum(n for ev, n in t.scan.counts.items() if ev != E.LOST)
    assert recorded == run.stats["records"]
