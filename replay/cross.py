"""Cross traffic for a real-TCP path: bulk TCP flows and Poisson or Pareto on/off UDP.

    python -m magnet.replay.cross sink --addr 10.203.1.4
    python -m magnet.replay.cross send --addr 10.203.1.3 --to 10.203.1.4 --rate 20e6 --seed 2 \
        --flows tcp:4 --flows pareto:0.5/1000/500000000/500000000
        (held over 10 s: --flows pareto:0.5/1000/500000000/500000000/10000000000)

Both run until SIGTERM (or SIGINT) and then print one JSON line: the bytes they moved.
With --origin stdin the sender prints `ready` and waits for one line on stdin, `go
ORIGIN_NS` (CLOCK_MONOTONIC), the time every flow starts from: so the flows of all of a
chain's stacks, and the replay that follows them by the scenario's lead, share one
origin.  The sink prints `ready` once it listens (TCP on SINK_PORT, UDP on SINK_PORT)
and discards what arrives. The sender opens one thread per bulk TCP flow (flow i of an
item connecting 10 ms x i after the start, as ns-3's; writing 64 KiB at a time, as fast
as TCP lets it, with the replay's congestion control: --cc, as ns-3's bulk flows use the
stacks' TCP) and one per UDP source, which sends `size`-byte datagrams at the times of
its UdpSchedule (Poisson: exponential gaps; Pareto on/off: bursts at a peak rate during
Pareto-distributed on periods, shape 1.5, separated by Pareto off periods, the peak set
so that the mean is the share; held over a window, a fifth field in ns: exactly the share
in every window, its Pareto bursts and silences scaled to fill it), the schedule ns-3
plays too. A share counts IP bytes (payload + 28) against the bottleneck's rate. Due times are absolute: a late wake-up
sends what is due at once, so the mean rate holds; how late datagrams left (p50, p99,
max) is in the JSON line.
"""
from __future__ import annotations

import argparse
import itertools
import json
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from magnetlib import buildcache

from .errors import ReplayError

SINK_PORT = 5999
UDP_OVERHEAD = 28                   # IPv4 + UDP headers
PARETO_SHAPE = 1.5
CHUNK = 65536
# Bulk flow i of a tcp:N item connects i x this after the origin, as ns-3's do (MagnetCrossTraffic,
# magnet-path-helper.cc): started at once, four flows' first overflow drops 73-75 packets or 41
# depending on microseconds between their SYNs, and a transfer among them forks on that.
BULK_STAGGER_NS = 10_000_000
SINK_UDP_BUFFER = 16 << 20                  # the sink's UDP receive buffer
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


# ------------------------------------------------------------------ spec ---
def spec_args(cross, rate_bps: int | None) -> list[str]:
    """--flows arguments for a scenario.Cross on a bottleneck of rate_bps."""
    if cross.kind == "tcp":
        return [f"--flows=tcp:{cross.flows}"]
    if not rate_bps:
        raise ValueError(f"cross traffic {cross}: a share of the bottleneck needs a --rate")
    parts = [cross.kind, repr(cross.share), str(cross.packet_bytes)]
    if cross.kind == "pareto":
        parts += [str(cross.on_ns), str(cross.off_ns)] + ([str(cross.held_ns)] if cross.held_ns else [])
    return ["--flows=" + parts[0] + ":" + "/".join(parts[1:])]


def flow_of(cross, rate_bps: int | None) -> dict:
    """A scenario.Cross as the sender takes it (its --flows argument, parsed)."""
    return _parse_flows(spec_args(cross, rate_bps)[0].removeprefix("--flows="))


def _parse_flows(text: str) -> dict:
    kind, _, rest = text.partition(":")
    values = rest.split("/")
    if kind == "tcp":
        return {"kind": "tcp", "flows": int(values[0])}
    share, size = float(values[0]), int(values[1])
    out = {"kind": kind, "share": share, "size": size}
    if kind == "pareto":
        out.update(on_ns=int(values[2]), off_ns=int(values[3]))
        if len(values) > 4:
            out["held_ns"] = int(values[4])
    return out


# -------------------------------------------------------------- schedule ---
class UdpSchedule:
    """The send times of one UDP source (ns from its start, int64), drawn BLOCK packets
    (Poisson) or CYCLES on/off cycles (Pareto) at a time from np.random.default_rng([seed,
    stream]): the same times however far it is drawn, so that ns-3 plays the very
    packets the real sender sends (replay/ns3.py writes them for it).

    poisson: exponential gaps, mean size*8/(share*rate) (IP bytes: payload + 28).
    pareto:  bursts at the peak gap, mean_gap*on/(on+off), of round(T/peak gap) packets
             (at least 1) for a Pareto on time T (shape 1.5, mean on), each followed by a
             Pareto off time (mean off): the mean is the share, the peak rate while on
             share*(on+off)/on of the bottleneck.
    held:    (pareto with held_ns: W) one window of W a block, holding exactly
             round(W/mean_gap) packets at the peak gap: bursts in proportion to Pareto on
             draws (drawn until they add up to the window's on time; at least 1 packet
             each), Pareto off times after each, both scaled to fill W.  The share over
             each window is the setting; the heavy tail stays within a window."""

    BLOCK = 4096                                  # Poisson: packets drawn at once
    CYCLES = 64                                   # Pareto: on/off cycles drawn at once

    def __init__(self, flow: dict, rate_bps: float, seed: int, stream: int):
        if flow["kind"] not in ("poisson", "pareto") or not rate_bps:
            raise ValueError(f"a UDP schedule needs poisson or pareto and a rate: {flow}")
        self.flow = flow
        self.rng = np.random.default_rng([seed, stream])
        self.mean_gap = (flow["size"] + UDP_OVERHEAD) * 8e9 / (flow["share"] * rate_bps)   # ns
        self.start = 0.0                                    # ns: where the next block begins
        self.held = flow.get("held_ns", 0)
        self.window_packets = round(self.held / self.mean_gap)
        if self.held and self.window_packets < 1:
            raise ValueError(f"a held Pareto source's window of {self.held} ns holds no packet at its share")

    def blocks(self):
        """The schedule, block after block, forever."""
        draw = (self._poisson if self.flow["kind"] == "poisson" else
                self._held if self.held else self._pareto)
        while True:
            times, self.start = draw(self.start)
            yield np.rint(times).astype(np.int64)

    def until(self, end_ns: int) -> np.ndarray:
        """Every send time before end_ns."""
        out = []
        for block in self.blocks():
            out.append(block[block < end_ns])
            if block[-1] >= end_ns:
                return np.concatenate(out)

    def _poisson(self, start: float):
        gaps = self.rng.exponential(self.mean_gap, self.BLOCK)
        times = start + np.concatenate(([0.0], np.cumsum(gaps[:-1])))
        return times, times[-1] + gaps[-1]

    def _pareto(self, start: float):
        on, off = self.flow["on_ns"], self.flow["off_ns"]
        peak_gap = self.mean_gap * on / (on + off)              # faster while on: the mean is the share
        scale = (PARETO_SHAPE - 1) / PARETO_SHAPE               # Pareto x_m for a given mean
        on_times = (self.rng.pareto(PARETO_SHAPE, self.CYCLES) + 1) * on * scale
        off_times = (self.rng.pareto(PARETO_SHAPE, self.CYCLES) + 1) * off * scale
        burst = np.maximum(1, np.rint(on_times / peak_gap)).astype(np.int64)
        return _played(start, burst, off_times, peak_gap)

    def _held(self, start: float):
        on, off, n = self.flow["on_ns"], self.flow["off_ns"], self.window_packets
        peak_gap = self.mean_gap * on / (on + off)
        scale = (PARETO_SHAPE - 1) / PARETO_SHAPE
        ons = np.empty(0)
        while ons.sum() < n * peak_gap:                     # on draws up to the window's on time
            ons = np.r_[ons, (self.rng.pareto(PARETO_SHAPE, self.CYCLES) + 1) * on * scale]
        ons = ons[:min(n, np.searchsorted(np.cumsum(ons), n * peak_gap) + 1)]
        offs = (self.rng.pareto(PARETO_SHAPE, len(ons)) + 1) * off * scale
        extra = (n - len(ons)) * ons / ons.sum()            # 1 packet each, the rest by the draws,
        burst = 1 + np.floor(extra).astype(np.int64)        # the largest remainders rounded up
        burst[np.argsort(np.floor(extra) - extra, kind="stable")[:n - burst.sum()]] += 1
        offs *= (self.held - n * peak_gap) / offs.sum()     # the silences fill the rest of W
        times, _ = _played(start, burst, offs, peak_gap)
        return times, start + self.held


def _played(start: float, burst: np.ndarray, off_times: np.ndarray, peak_gap: float):
    """Bursts of `burst` packets peak_gap apart, each followed by its off time, from `start`:
    the send times, and where the next cycle begins."""
    cycles = burst * peak_gap + off_times
    starts = start + np.concatenate(([0.0], np.cumsum(cycles[:-1])))
    index = np.arange(burst.sum()) - np.repeat(np.cumsum(burst) - burst, burst)
    return np.repeat(starts, burst) + index * peak_gap, starts[-1] + cycles[-1]


# ---------------------------------------------------------------- sender ---
UDPSCHED = Path(__file__).resolve().parent / "udpsched.c"


def build_udpsched() -> Path:
    """udpsched, the UDP sources' sender (C: it keeps the schedule's times), built by
    replay/Makefile once per version of udpsched.c into the per-user cache."""
    files = [("udpsched.c", UDPSCHED), ("Makefile", UDPSCHED.parent / "Makefile")]
    return buildcache.make("udpsched", UDPSCHED.parent, files, targets=["udpsched"], label="udpsched") / "udpsched"


# --------------------------------------------------------------- sources ---
class Sender:
    def __init__(self, addr: str, to: str, rate_bps: float, seed: int, cc: str | None = None):
        self.addr, self.to, self.rate, self.seed, self.cc = addr, to, rate_bps, seed, cc
        self.sent = {"tcp_bytes": 0, "udp_bytes": 0, "udp_packets": 0, "udp_send_errors": 0, "tcp_cc": [],
                     "tcp_start_ms": []}                  # each bulk flow's connect, after the origin
        self.late: list[dict] = []                              # per UDP source: p50, p99, max (us)
        self.udp_procs: list[subprocess.Popen] = []
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.origin_ns = 0                   # when the flows start (CLOCK_MONOTONIC)

    def count(self, key: str, n: int, packets: int = 0) -> None:
        with self.lock:
            self.sent[key] += n
            if packets:
                self.sent["udp_packets"] += packets

    def bulk(self, i: int) -> None:
        try:
            start = self.origin_ns + i * BULK_STAGGER_NS
            time.sleep(max(0.0, (start - time.monotonic_ns()) / 1e9))
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if self.cc:                   # else the namespace's default (init_net's: often bbr)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.cc.encode())
            sock.bind((self.addr, 0))
            sock.settimeout(10)
            with self.lock:
                self.sent["tcp_start_ms"].append(round((time.monotonic_ns() - self.origin_ns) / 1e6, 3))
            sock.connect((self.to, SINK_PORT))
            sock.settimeout(0.5)
            used = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
            with self.lock:
                self.sent["tcp_cc"] = sorted({*self.sent["tcp_cc"], used.rstrip(b"\0").decode()})
            payload = memoryview(bytearray(CHUNK))
            while not self.stopping.is_set():
                try:
                    self.count("tcp_bytes", sock.send(payload))
                except TimeoutError:
                    pass
            sock.close()
        except OSError as e:
            if not self.stopping.is_set():
                self.errors.append(f"bulk TCP flow: {e.strerror or e}")

    def udp(self, flow: dict, stream: int) -> None:
        """One UDP source: udpsched sends the datagrams, this thread feeds it their times
        (writing blocks ahead; the pipe holds it back)."""
        try:
            proc = subprocess.Popen([str(build_udpsched()), f"--bind={self.addr}", f"--to={self.to}:{SINK_PORT}",
                                     f"--size={flow['size']}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        except (OSError, ReplayError) as e:
            self.errors.append(f"UDP source: {e}")
            return
        self.udp_procs.append(proc)
        blocks = UdpSchedule(flow, self.rate, self.seed, stream).blocks()
        first = next(blocks)                                  # drawn before the clock starts
        origin = max(self.origin_ns, time.monotonic_ns())
        try:
            for block in itertools.chain([first], blocks):
                if self.stopping.is_set():
                    break
                proc.stdin.write((block + origin).tobytes())
                proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass                                              # stopped: udpsched is gone

    def udp_results(self) -> None:
        """Stop the UDP sources and add up what they sent."""
        for proc in self.udp_procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=10)
            lines = out.decode().strip().splitlines()
            if proc.returncode != 0 or not lines:
                self.errors.append(f"UDP source: {err.decode().strip() or f'exit {proc.returncode}'}")
                continue
            got = json.loads(lines[-1])
            for key in ("udp_packets", "udp_bytes", "udp_send_errors"):
                self.sent[key] += got[key]
            self.sent["udp_sched_fifo"] = self.sent.get("udp_sched_fifo", True) and got["sched_fifo"]
            self.late.append(got["udp_late_us"])

    def run(self, flows: list[dict], origin_from_stdin: bool = False) -> dict:
        threads = []
        for i, flow in enumerate(flows):
            if flow["kind"] == "tcp":
                threads += [threading.Thread(target=self.bulk, args=(f,), daemon=True) for f in range(flow["flows"])]
            else:
                threads.append(threading.Thread(target=self.udp, args=(flow, i), daemon=True))
        print("ready", flush=True)
        self.origin_ns = _read_origin() if origin_from_stdin else time.monotonic_ns()
        for t in threads:
            t.start()
        _wait_for_stop()
        self.stopping.set()
        for t in threads:
            t.join(2)
        self.udp_results()
        out = {**self.sent, "tcp_start_ms": sorted(self.sent["tcp_start_ms"]), "errors": self.errors[:3]}
        if self.late:
            out["udp_late_us"] = {q: max(late[q] for late in self.late) for q in ("p50", "p99", "max")}
        return out


# ------------------------------------------------------------------ sink ---
def sink(addr: str, record: str | None = None) -> dict:
    """Count what arrives; `record`: also save each datagram's arrival (the kernel's receive
    timestamp, CLOCK_REALTIME ns) there as .npy, for the burst structure after the bottleneck."""
    got = {"tcp_bytes": 0, "udp_bytes": 0, "udp_packets": 0, "tcp_flows": 0}
    arrivals: list[int] = []
    lock = threading.Lock()
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((addr, SINK_PORT))
    lsock.listen(64)
    usock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:                                          # a burst must not overflow it while we read:
        usock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, SINK_UDP_BUFFER)   # root's, beyond rmem_max
    except OSError:
        usock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SINK_UDP_BUFFER)
    usock.bind((addr, SINK_PORT))
    if record:
        usock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def drain(conn: socket.socket) -> None:
        buf = bytearray(CHUNK)
        try:
            while n := conn.recv_into(buf):
                with lock:
                    got["tcp_bytes"] += n
        except OSError:
            pass

    def accept() -> None:
        while True:
            conn, _ = lsock.accept()
            got["tcp_flows"] += 1
            threading.Thread(target=drain, args=(conn,), daemon=True).start()

    def datagrams() -> None:
        buf = bytearray(CHUNK)
        while True:
            n, ancillary, _, _ = usock.recvmsg_into([buf], 64)
            with lock:
                got["udp_bytes"] += n
                got["udp_packets"] += 1
                for level, kind, data in ancillary:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
                        sec, nsec = struct.unpack("qq", data[:16])
                        arrivals.append(sec * 1_000_000_000 + nsec)

    for target in (accept, datagrams):
        threading.Thread(target=target, daemon=True).start()
    print("ready", flush=True)
    _wait_for_stop()
    with lock:
        if record:
            np.save(record, np.array(arrivals, np.int64))
        return dict(got)


def _read_origin() -> int:
    """The `go ORIGIN_NS` line on stdin (SystemExit with a one-line error otherwise)."""
    words = sys.stdin.readline().split()
    if len(words) != 2 or words[0] != "go" or not words[1].isdigit():
        raise SystemExit(f"cross send: expected 'go ORIGIN_NS' on stdin, got {' '.join(words)!r}")
    return int(words[1])


def _wait_for_stop() -> None:
    """Until SIGTERM, SIGINT or SIGHUP."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(1):
        pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m magnet.replay.cross", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["send", "sink"])
    p.add_argument("--addr", required=True, help="this end's address")
    p.add_argument("--to", help="the sink's address (send)")
    p.add_argument("--rate", type=float, default=0, help="the bottleneck's rate, bit/s (send)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--record", help="sink: save each datagram's arrival time (ns) here, .npy")
    p.add_argument("--cc", help="the bulk TCP flows' congestion control (default: the namespace's)")
    p.add_argument("--origin", choices=["now", "stdin"], default="now",
                   help="send: start now, or at the time given on stdin after `ready` (go ORIGIN_NS)")
    p.add_argument("--flows", action="append", default=[], help="tcp:N, poisson:SHARE/SIZE, "
                   "pareto:SHARE/SIZE/ON_NS/OFF_NS[/HELD_NS] (send)")
    args = p.parse_args(argv)
    if args.role == "sink":
        result = sink(args.addr, args.record)
    else:
        sender = Sender(args.addr, args.to, args.rate, args.seed, args.cc)
        result = sender.run([_parse_flows(f) for f in args.flows], args.origin == "stdin")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
