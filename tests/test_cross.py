"""The cross-traffic sender's origin: its flows start at the time it is given (the real
replay starts its demand a set lead after it, as ns-3 does), not when it was spawned."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from magnet.replay import cross

ADDR = "127.0.0.77"                  # a loopback address of its own: SINK_PORT is fixed
MS = 1_000_000


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "magnet.replay.cross", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ready(proc: subprocess.Popen) -> None:
    line = proc.stdout.readline().strip()
    assert line == "ready", proc.stderr.read() if proc.poll() is not None else line


def finish(proc: subprocess.Popen) -> dict:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def sink(tmp_path):
    try:
        cross.build_udpsched()
    except Exception as e:                       # no C compiler: the sender cannot run
        pytest.skip(f"udpsched: {e}")
    record = tmp_path / "arrivals.npy"
    proc = spawn("sink", f"--addr={ADDR}", f"--record={record}")
    ready(proc)
    yield proc, record
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_flows_start_at_the_origin_given(sink):
    """Nothing leaves before `go ORIGIN`'s time, however long after `ready` it comes; the
    first datagram soon after it (Poisson, 10 % of 10 Mbit/s in 1000 B: 8 ms mean gap)."""
    proc, record = sink
    sender = spawn("send", "--origin=stdin", f"--addr={ADDR}", f"--to={ADDR}", "--rate=10e6", "--seed=3",
                   "--flows=poisson:0.1/1000")
    ready(sender)
    time.sleep(0.3)                               # spawned, ready, and told nothing yet
    origin = time.monotonic_ns() + 400 * MS
    to_realtime = time.time_ns() - time.monotonic_ns()
    sender.stdin.write(f"go {origin}\n")
    sender.stdin.flush()
    time.sleep(1.2)
    sent = finish(sender)
    finish(proc)
    arrivals = np.load(record) - to_realtime     # on the monotonic clock
    assert sent["udp_packets"] == len(arrivals) > 50
    assert origin <= arrivals.min() < origin + 100 * MS


def test_bad_go_line_is_one_clear_error(sink):
    sender = spawn("send", "--origin=stdin", f"--addr={ADDR}", f"--to={ADDR}", "--rate=10e6",
                   "--flows=poisson:0.1/1000")
    ready(sender)
    _, err = sender.communicate("start now\n", timeout=20)
    assert sender.returncode != 0
    assert err.strip() == "cross send: expected 'go ORIGIN_NS' on stdin, got 'start now'"


def test_bulk_flows_start_10ms_apart_as_in_ns3(sink):
    """Flow i of tcp:N connects 10 ms x i after the origin, as ns-3's bulk flows start: four
    flows started at once fork on microseconds between their SYNs (a first overflow of 73-75
    drops or of 41), which ns-3 never sees; the JSON line says when each connected."""
    proc, _ = sink
    sender = spawn("send", "--origin=stdin", f"--addr={ADDR}", f"--to={ADDR}", "--flows=tcp:4")
    ready(sender)
    sender.stdin.write(f"go {time.monotonic_ns() + 200 * MS}\n")
    sender.stdin.flush()
    time.sleep(0.6)
    sent = finish(sender)
    got = finish(proc)
    assert got["tcp_flows"] == 4 and sent["tcp_bytes"] > 0
    starts = np.array(sent["tcp_start_ms"])
    assert len(starts) == 4
    slots = np.array([0, 10, 20, 30])            # none before its slot; a loaded machine wakes late
    assert (starts >= slots).all() and (starts < slots + 50).all(), starts
