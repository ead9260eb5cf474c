"""magnet replay tcp: demand replayed into real TCP connections, really run.

Loopback tests need nothing; the others need root (network namespaces), the
BPF capture or tcpdump, and skip with the reason without them.
"""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import magnetlib
from magnetlib.demand import RECV, SEND, Demand
from magnetlib.format import Event
from magnet.replay import fidelity, netns, tcp, wire

from .conftest import BIN, assert_clean_error, require, require_root, require_tool, run_magnet

MS = 1_000_000


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
        given = s.send.bytes if run.params.mode == "offline" else s.delivered


def netem_here(tmp_path) -> bool:
    with netns.chain(f"mgrpt{os.getpid() % 100000}", 1) as topo:
        return netns.netem_available(topo.hops[0].right_ns, topo.hops[0].right_dev)


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
    for tool in ("ip", "tc", "ethtool"):
        require_tool(tool)


# --------------------------------------------------------------- loopback ---
@pytest.mark.parametrize("mode", ["offline", "relay"])
def test_loopback_stacks_deliver_every_byte(tmp_path, mode):
    """No root: N connections on 127.0.0.1, each stack's row from its receiver's reads."""
    demand = paced(40, 10, 10240)
    run = tcp.run_chain(demand, tmp_path, tcp.TcpParams(stacks=3, mode=mode, loopback=True))
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
    run = tcp.run_chain(demand, tmp_path, tcp.TcpParams(stacks=1, loopback=True))
    s = run.stacks[0]
    assert s.written == 8 * 300 and s.delivered == 8 * 300 and s.sender["read"] == 8 * 5000
    ini = dict(np.load(tmp_path / "stack-1" / "initiator.npz"))
    acc = dict(np.load(tmp_path / "stack-1" / "acceptor.npz"))
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
    """Writes 2 ms apart are issued within 50 us of their due time (the issue's target),
    and the error does not grow along the run, as it would if sleeps accumulated (1000
    writes: 100 ms late at the end for 100 us per sleep). The test holds 95 % of the
    writes to the target in the best of three runs; the target's p99 is measured by
    experiments/bench_replay.py over longer runs: on this VM a stretch of a few seconds
    with stalls of a millisecond or more (no process to blame) comes now and then, and
    a test must not fail on it."""
    demand = paced(1000, 2, 418)
    best = None
    for attempt in range(3):
        out = tmp_path / str(attempt)
        run = tcp.run_chain(demand, out, tcp.TcpParams(stacks=1, loopback=True))
        timing = run.stacks[0].timing
        w = fidelity.writes(dict(np.load(out / "stack-1" / "initiator.npz")))
        error_us = np.abs(w.issued - w.due) / 1e3
        assert timing.paced >= 990 and timing.blocked == 0
        assert np.median(error_us[:100]) <= 2000 and np.median(error_us[-100:]) <= 2000
        p95 = float(np.percentile(error_us, 95))
        best = p95 if best is None else min(best, p95)
        if best <= 50:
            break
    assert best <= 50, f"p95 of |issued - due| {best:.1f} us in the best of three runs"


# ------------------------------------------------------------- namespaces ---
def test_offline_stacks_over_veth_with_bpf_capture(tmp_path, namespaces, bpf):
    """`magnet replay tcp` offline: 3 rows, every byte delivered at every stack, stack
    k+1 given exactly stack k's wire segments, the capture confirming the timing."""
    out = tmp_path / "out"
    proc = run_magnet("replay", "tcp", "synth:ftp", "--duration", "1.5", "--stacks", "3",
                      "--rate", "20Mbps", "-o", out)
    assert proc.returncode == 0, proc.stderr_text
    text = proc.stdout_text
    assert "3rd TCP stack" in text and "wire recorded by the BPF capture" in text
    assert ("no delay emulation" in text) == (not netem_here(tmp_path))
    assert table_rows(out) == ["Application", "1st TCP stack", "2nd TCP stack", "3rd TCP stack"]
    summary = json.loads((out / "summary.json").read_text())
    demand_bytes = 75 * 10240
    given = demand_bytes
    for k, s in enumerate(summary["stacks"], start=1):
        assert s["written"] == given and s["delivered"] == given
        assert s["wire_bytes"] >= 0.98 * s["delivered"]           # capture shortfall (docs/capture.md)
        given = s["wire_bytes"]
        trace = magnetlib.open(out / f"stack-{k}.magnet").check()
        sent = trace.select([Event.DEV_SEND], s["sender"]["cookie"])
        assert int(np.count_nonzero(trace.column_at("size", sent) > 0)) == s["wire_segments"]
        assert (trace.column_at("size", sent) <= 1448).all()      # offloads off: wire segments
    first = summary["stacks"][0]
    assert first["capture_timing"]["matched"] == first["capture_timing"]["calls"] == 75
    for name in ("bandwidth.png", "modulation.png"):
        assert (out / name).stat().st_size > 1000
    # The capture of stack 1 is itself a demand: its sender's writes, replayed again.
    again = run_magnet("replay", "tcp", out / "stack-1.magnet", "--stream", hex(first["sender"]["cookie"]),
                       "--stacks", "1", "--loopback", "-o", tmp_path / "again")
    assert again.returncode == 0, again.stderr_text
    assert json.loads((tmp_path / "again" / "summary.json").read_text())["stacks"][0]["delivered"] == demand_bytes


def test_relay_chain_over_veth(tmp_path, namespaces, bpf):
    """Live relays: N connections at once, each relay forwarding every byte it read."""
    demand = paced(60, 20, 10240)
    run = tcp.run_chain(demand, tmp_path, tcp.TcpParams(stacks=3, mode="relay", rate="20mbit"))
    assert run.method == "bpf" and [s.k for s in run.stacks] == [1, 2, 3]
    check_bytes(run, demand.total_bytes, wire_exact=False)
    for s in run.stacks:
        assert s.send.bytes >= 0.98 * s.delivered
        assert s.trace.exists()
    # The stacks overlap in time: each relays while the previous one still sends.
    starts = [int(s.send.ns[0]) for s in run.stacks]
    assert starts == sorted(starts) and starts[-1] - starts[0] < 200 * MS


def test_pcap_fallback(tmp_path, namespaces):
    """tcpdump on each hop's sending end instead of the BPF capture; same rows."""
    require_tool("tcpdump")
    demand = paced(50, 20, 3284)
    run = tcp.run_chain(demand, tmp_path, tcp.TcpParams(stacks=2, capture="pcap", rate="10mbit"))
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
    """A bulk demand over a 10 Mbit/s hop takes the time the rate says, and blocks."""
    demand = Demand.from_arrays(np.zeros(32, np.int64), np.full(32, 65536))   # 2 MiB at once
    run = tcp.run_chain(demand, tmp_path, tcp.TcpParams(stacks=1, rate="10mbit", capture="none"))
    s = run.stacks[0]
    assert s.delivered == demand.total_bytes
    seconds = (s.send.ns[-1] - s.send.ns[0]) / 1e9
    assert 1.5 < seconds < 2.5, seconds                 # 2 MiB at 10 Mbit/s: 1.68 s
    assert s.timing.blocked > 0 and s.timing.blocked_lag_max_ms > 300


# ---------------------------------------------------------------- clean-up ---
def leftovers(pid: int, out: Path | None = None) -> dict:
    """What run `pid` (writing into `out`) left behind; other runs' processes do not count."""
    prefix = f"mgrp{pid}"
    return {"namespaces": [n for n in netns.listed() if n.startswith(prefix + "-")],
            "links": [line for line in netns.sh("ip", "-o", "link").stdout.splitlines()
                      if f"{prefix}h" in line],
            "cgroups": glob.glob(f"/sys/fs/cgroup/*/magnet/{prefix}-*") + glob.glob(f"/sys/fs/cgroup/magnet/{prefix}-*"),
            "processes": [line for line in subprocess.run(["pgrep", "-af", "magnet-read|replay.endpoint"],
                                                          capture_output=True, text=True).stdout.splitlines()
                          if f"{prefix}-" in line or (out is not None and str(out) in line)]}


def wait_clean(pid: int, out: Path, timeout_s: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = leftovers(pid, out)
        if not any(left.values()):
            return left
        time.sleep(0.2)
    return leftovers(pid, out)


@pytest.mark.parametrize("sig,after_s", [(signal.SIGKILL, 0.4), (signal.SIGKILL, 2.0), (signal.SIGINT, 2.0)])
def test_interrupted_run_leaves_nothing(tmp_path, namespaces, sig, after_s):
    """Killed while setting up or while replaying, in relay mode (most to clean up):
    no namespace, veth, qdisc (they go with the namespaces), cgroup or process is left."""
    proc = subprocess.Popen([str(BIN / "magnet"), "replay", "tcp", "synth:ftp", "--duration", "30",
                             "--stacks", "3", "--mode", "relay", "-o", tmp_path / "out"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if after_s > 1:                          # mid-run: once the namespaces exist
        deadline = time.monotonic() + 20
        while not leftovers(proc.pid)["namespaces"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert leftovers(proc.pid)["namespaces"]
    time.sleep(after_s)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "magnet: interrupted" in err, err
    assert wait_clean(proc.pid, tmp_path) == {"namespaces": [], "links": [], "cgroups": [], "processes": []}


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
                                  "-o", tmp_path / "o"), "stacks 0")
