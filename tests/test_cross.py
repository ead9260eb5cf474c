"""The cross-traffic sender's origin: its flows start at the time it is given (the real
replay starts its demand a set lead after it, as ns-3 does), not when it was spawned; the
UDP sources' schedules (cross.UdpSchedule), free and held Pareto on/off among them."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from magnet.replay import cross, ns3
from magnet.replay.scenario import Path as NetPath, Scenario, cross as cross_spec

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


def play(sink, flows: str, wait: float, lead_ms: int, seconds: float) -> tuple[dict, np.ndarray]:
    """A UDP sender (10 Mbit/s, seed 3) told to start lead_ms after `wait` s: what it says it
    sent, and the sink's arrivals in ns since that origin."""
    proc, record = sink
    sender = spawn("send", "--origin=stdin", f"--addr={ADDR}", f"--to={ADDR}", "--rate=10e6", "--seed=3", flows)
    ready(sender)
    time.sleep(wait)                              # spawned, ready, and told nothing yet
    origin = time.monotonic_ns() + lead_ms * MS
    to_realtime = time.time_ns() - time.monotonic_ns()
    sender.stdin.write(f"go {origin}\n")
    sender.stdin.flush()
    time.sleep(seconds)
    sent = finish(sender)
    finish(proc)
    return sent, np.load(record) - to_realtime - origin      # on the monotonic clock


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
    sent, arrivals = play(sink, "--flows=poisson:0.1/1000", wait=0.3, lead_ms=400, seconds=1.2)
    assert sent["udp_packets"] == len(arrivals) > 50
    assert 0 <= arrivals.min() < 100 * MS


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


# ------------------------------------------------------------- schedules ---
RATE = 20_000_000
S = 1_000_000_000


def schedule(text: str, seed: int = 7, stream: int = 1) -> cross.UdpSchedule:
    return cross.UdpSchedule(cross.flow_of(cross_spec(text), RATE), RATE, seed, stream)


def test_free_sources_draw_what_they_always_drew():
    """The committed results stay reproducible: the default Pareto and Poisson schedules of a
    seed are the times they were before the held source came."""
    t = schedule("pareto:50%").until(30 * S)
    assert len(t) == 22088 and int(t.sum() % 1000003) == 562569
    assert t[[0, 1, 2, 100, 1000, 5000, -1]].tolist() == [0, 411200, 822400, 41120000, 411200000,
                                                          4922712349, 29636826035]
    t = schedule("poisson:30%").until(5 * S)
    assert len(t) == 3571 and t[[0, 1, 100, -1]].tolist() == [0, 2118541, 131188473, 4998670713]


@pytest.mark.parametrize("text", ["poisson:30%", "pareto:50%", "pareto:50%/held=10s", "pareto:20%/50ms/2s/held=1s"])
def test_schedules_are_the_same_however_far_drawn(text):
    short, long = schedule(text).until(13 * S), schedule(text).until(45 * S)
    assert short[-1] < 13 * S <= long[len(short)]
    np.testing.assert_array_equal(short, long[:len(short)])
    assert (np.diff(long) > 0).all()


@pytest.mark.parametrize("text, seed", [("pareto:50%/held=10s", 1), ("pareto:50%/held=10s", 2),
                                        ("pareto:50%/held=1s", 3), ("pareto:20%/50ms/2s/held=5s", 4)])
def test_held_pareto_sends_its_share_in_every_window(text, seed):
    """Every full window holds round(share x W / mean gap) datagrams: the setting within one packet."""
    spec = cross_spec(text)
    s = schedule(text, seed)
    windows = np.bincount(s.until(40 * spec.held_ns) // spec.held_ns)
    assert (windows == s.window_packets).all(), windows
    packet_bits = (spec.packet_bytes + cross.UDP_OVERHEAD) * 8
    assert abs(s.window_packets * packet_bits - spec.share * RATE * spec.held_ns / S) <= packet_bits / 2
    # The free source of the same seed wanders: its windows hold what its draws did.
    free = np.bincount(schedule(str(spec).partition("/held")[0], seed).until(40 * spec.held_ns) // spec.held_ns)
    assert free.max() > 1.2 * s.window_packets, free


def burst_packets(s: cross.UdpSchedule, times: np.ndarray, window_ns: int) -> list[np.ndarray]:
    """Each window's bursts, in packets (a burst: datagrams at the peak gap)."""
    on, off = s.flow["on_ns"], s.flow["off_ns"]
    cut = np.flatnonzero(np.diff(times) > 1.5 * s.mean_gap * on / (on + off))
    starts = np.r_[0, cut + 1]
    packets = np.diff(np.r_[starts, len(times)])
    window = times[starts] // window_ns
    return [packets[window == w] for w in np.unique(window)]


def test_held_bursts_still_come_from_a_heavy_tailed_draw():
    """Within a window the bursts' lengths spread far wider than Poisson counts would (variance
    over mean 1): a Pareto (shape 1.5) draw of about ten bursts a 10 s window; and a window's
    bursts and silences fill it, at the peak rate while on."""
    s = schedule("pareto:50%/held=10s", 5)
    per_window = burst_packets(s, s.until(40 * 10 * S), 10 * S)
    assert all(b.sum() == s.window_packets and (b >= 1).all() for b in per_window)
    spread = [b.var() / b.mean() for b in per_window if len(b) > 2]
    assert len(spread) >= 30 and np.median(spread) > 50, spread
    pooled = np.concatenate(per_window)
    assert 8 <= len(pooled) / len(per_window) <= 16
    assert np.percentile(pooled, 90) > 3 * np.percentile(pooled, 10), np.percentile(pooled, [10, 90])


@pytest.mark.parametrize("text, shown", [("pareto:50%/held=10s", "pareto:50%/500ms/500ms/held=10s"),
                                         ("PARETO:30%/1s/2s/held=2.5s", "pareto:30%/1s/2s/held=2.5s")])
def test_held_is_a_field_of_the_cross_spec(text, shown):
    spec = cross_spec(text)
    assert str(spec) == shown and cross_spec(str(spec)) == spec
    assert "held over every" in spec.describe()
    flow = cross.flow_of(spec, RATE)
    assert flow["held_ns"] == spec.held_ns
    assert cross._parse_flows(cross.spec_args(spec, RATE)[0].removeprefix("--flows=")) == flow
    assert "held" not in cross.flow_of(cross_spec("pareto:50%"), RATE)
    assert str(cross_spec("pareto:50%")) == "pareto:50%/500ms/500ms"


@pytest.mark.parametrize("text", ["pareto:50%/held=0s", "pareto:50%/held=", "poisson:30%/held=10s",
                                  "pareto:50%/500ms/held=10s", "pareto:50%/held=10s/500ms/500ms"])
def test_bad_held_specs_are_one_clear_error(text):
    with pytest.raises(ValueError, match="use tcp:N"):
        cross_spec(text)


def test_a_window_too_short_for_one_packet_is_refused():
    with pytest.raises(ValueError, match="holds no packet"):
        schedule("pareto:1%/held=1ms")


def test_ns3_holds_the_share_only_where_it_plays_the_schedule():
    """ns-3's own OnOffApplication would draw the free source: a held one is refused where ns-3
    draws (a duplex path's reverse direction, a whole application, cross_schedules=False)."""
    held = Scenario(cross=(cross_spec("pareto:50%/held=10s"),))
    assert any(a.startswith("--cross=pareto:") for a in ns3.chain_args(held))
    for scenario, options in ((held, ns3.Ns3Options(cross_schedules=False)),
                              (held.replace(path=(NetPath(duplex=True),)), ns3.Ns3Options())):
        with pytest.raises(ValueError, match="ns-3 holds a share only in the schedules it plays"):
            ns3.chain_args(scenario, options)
    with pytest.raises(ValueError, match="a whole application"):
        ns3.check_held(held, schedules=False)


def test_sender_holds_the_share_in_every_window(sink):
    """udpsched plays the held schedule: each full 0.5 s window after the origin brings the
    window's datagrams (20 % of 10 Mbit/s in 1000 B datagrams: 122)."""
    sent, arrivals = play(sink, "--flows=pareto:0.2/1000/100000000/100000000/500000000", wait=0, lead_ms=200,
                          seconds=1.5)
    windows = np.bincount(arrivals[arrivals < 1000 * MS] // (500 * MS))
    assert windows.tolist() == [122, 122], (windows, sent)
