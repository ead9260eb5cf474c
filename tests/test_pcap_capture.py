"""A real capture: tcpdump on a veth pair between two network namespaces while a paced
TCP transfer runs; the application's own send() log is written as a magnet trace."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import magnetlib
from magnetlib import pcap
from magnetlib.format import Clock, Event, ExtValid
from magnet.replay import netns

from .conftest import require_root, require_tool

PREFIX = f"mgpc{os.getpid() % 100000}"
(NS_A, NS_B), ((VETH_A, VETH_B),) = netns.names(PREFIX, 1)
ADDR_A, ADDR_B, PORT = "10.231.1.1", "10.231.1.2", 5001
WRITES, WRITE_BYTES, INTERVAL_S = 120, 10240, 0.005

SINK = textwrap.dedent(f"""
    import socket
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("{ADDR_B}", {PORT})); s.listen(1); print("ready", flush=True)
    c, _ = s.accept(); total = 0
    while True:
        b = c.recv(65536)
        if not b: break
        total += len(b)
    print(total, flush=True)
""")

# The application: paced writes, each logged as (Unix ns before the call, bytes sent).
SOURCE = textwrap.dedent(f"""
    import socket, sys, time, numpy as np
    s = socket.create_connection(("{ADDR_B}", {PORT}))
    local = s.getsockname()
    log = []
    for k in range({WRITES}):
        t = time.time_ns()
        log.append((t, s.send(b"\\0" * {WRITE_BYTES})))
        time.sleep({INTERVAL_S})
    s.close()
    np.save(sys.argv[1], np.array(log, dtype=np.int64))
    print(local[1], flush=True)
""")


@pytest.fixture
def veth():
    """Two namespaces joined by a veth pair with its default offloads (replay.netns)."""
    require_root()
    require_tool("ip")
    require_tool("tcpdump")
    with netns.pair(PREFIX, subnet="10.231", offloads=True) as net:
        assert (net.client_addr, net.server_addr) == (ADDR_A, ADDR_B)
        yield net


def _trace_of(log: np.ndarray, local_port: int, path) -> None:
    """The application's send() calls as a REALTIME magnet trace with addresses."""
    rec = magnetlib.empty_records(len(log), ext=True)
    rec["sockid"], rec["event"] = 1, Event.SOCK_SEND
    rec["timestamp"], rec["size"] = log[:, 0], log[:, 1]
    rec["valid"], rec["ip_version"], rec["sport"], rec["dport"] = ExtValid.ADDR, 4, local_port, PORT
    for field, addr in (("saddr", ADDR_A), ("daddr", ADDR_B)):
        rec[field] = np.frombuffer(pcap.convert.parse_address(addr), np.uint8)
    first = int(log[0, 0])
    magnetlib.write(path, rec, anchor_ticks=first, wall_anchor_ns=first, clock_source=Clock.REALTIME)


def _wait_for_fin(capture, timeout_s: float = 20.0) -> None:
    """tcpdump may lag behind a loaded machine: stop it only once the client's FIN is written."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            p = pcap.read(capture).packets
            if ((p["tcp_flags"] & pcap.columns.TCP_FIN) & (p["dport"] == PORT)).any():
                return
        except magnetlib.TraceError:          # nothing written yet
            pass
        time.sleep(0.1)


@pytest.mark.parametrize("offload", ["on", "off"])
def test_real_capture_on_veth(veth, tmp_path, magnet, offload):
    """With segmentation offload (veth's default) tcpdump sees the stack's buffers, larger
    than the MTU, and says so; without it, MSS-sized segments: the stack's modulation."""
    capture = tmp_path / "veth.pcap"
    if offload == "off":
        require_tool("ethtool")
        netns.sh("ethtool", "-K", VETH_A, "tso", "off", "gso", "off", ns=NS_A)
    sink = subprocess.Popen(["ip", "netns", "exec", NS_B, sys.executable, "-c", SINK],
                            stdout=subprocess.PIPE, text=True)
    dump = subprocess.Popen(["ip", "netns", "exec", NS_A, "tcpdump", "-i", VETH_A, "-s", "128", "-U",
                             "-w", str(capture), "tcp", "port", str(PORT)],
                            stderr=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().strip() == "ready"
        assert "listening on" in dump.stderr.readline()
        log_path = tmp_path / "log.npy"
        src = subprocess.run(["ip", "netns", "exec", NS_A, sys.executable, "-c", SOURCE, str(log_path)],
                             capture_output=True, text=True, timeout=60, check=True)
        received = int(sink.stdout.readline())
        _wait_for_fin(capture)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
        sink.kill()
        sink.wait()
    log = np.load(log_path)
    assert received == int(log[:, 1].sum()) == WRITES * WRITE_BYTES

    fast, ref = pcap.read(capture, engine="fast"), pcap.read(capture, engine="dpkt")
    assert len(fast) > WRITES and not fast.problems
    assert np.array_equal(fast.packets, ref.packets)
    assert fast.fallback == 0                     # every packet took the vectorised path
    flows = pcap.flows.group(fast)
    assert len(flows) == 1 and flows.table.loc[0, "syn"]
    assert flows.table.loc[0, "a_addr"] == ADDR_A and flows.table.loc[0, "bytes_ab"] >= received

    big = pcap.offload.oversize(fast)
    if offload == "off":
        assert big.packets == 0 and fast.packets["ip_len"].max() <= 1500
    else:
        assert big.packets > 0 and big.sources[0][0] == ADDR_A

    _trace_of(log, int(src.stdout.strip()), tmp_path / "app.magnet")
    out = magnet("compare", tmp_path / "app.magnet", capture, "--plot", tmp_path / "f8.png").stdout_text
    assert "(matched by addresses)" in out, out
    s = pcap.compare.compare(magnetlib.open(tmp_path / "app.magnet"), fast).streams[0]
    assert int(s.wire["send"].size.sum()) >= received
    if offload == "off":                          # 10240-byte writes become <= MSS segments
        assert np.median(s.wire["send"].size) <= 1448 < np.median(s.app["send"].size)
    assert s.unmatched("send")["app bytes not on the wire"] == 0
    lag = s.lag("send")["first"]
    assert not np.isnan(lag).any() and np.median(lag) >= 0 and np.median(lag) < 50e6
    assert (tmp_path / "f8.png").stat().st_size > 1000

    magnet("from-pcap", capture, "-o", tmp_path / "wire.magnet", "--local", ADDR_A, check=True)
    wire = magnetlib.open(tmp_path / "wire.magnet").check()
    sent = wire.select(Event.DEV_SEND)
    assert int(wire.column_at("size", sent).sum()) == int(fast.packets["payload"][fast.packets["sport"] != PORT].sum())

    # One trace with both: the application's calls and (from the pcap) its device events.
    app = magnetlib.open(tmp_path / "app.magnet")
    both = np.concatenate([np.asarray(app.data), np.asarray(wire.data)])
    both["sockid"] = 1
    magnetlib.write(tmp_path / "both.magnet", both[np.argsort(both["timestamp"], kind="stable")],
                    app.meta.replace(anchor_ticks=None))
    out = magnet("compare", tmp_path / "both.magnet", capture, check=True).stdout_text
    data_packets = int(np.count_nonzero(wire.column_at("size", sent) > 0))
    assert (f"DEV_SEND events vs pcap packets (paired by seq and size): matched {data_packets}, "
            "only in the trace 0, only in the pcap 0") in out, out
