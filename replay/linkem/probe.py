"""UDP probes of an emulated path: what a packet's trip took, one way or there and back.

    python -m magnet.replay.linkem.probe recv --bind 10.203.1.2:7000 --out got.npy [--idle 1]
    python -m magnet.replay.linkem.probe send --to 10.203.1.2:7000 --count 1000 --size 1000 --gap-us 100
    python -m magnet.replay.linkem.probe echo --bind 10.203.1.2:7001
    python -m magnet.replay.linkem.probe ping --to 10.203.1.2:7001 --count 200 --interval 0.02 --out rtt.npy

Every datagram carries its sequence number and the CLOCK_MONOTONIC time it was
sent; both ends of a path on one machine share that clock, so `recv` records
each datagram's one-way delay: rows (seq, sent_ns, received_ns, bytes), in
arrival order, saved as .npy once no datagram came for --idle seconds.  Its
received_ns is the kernel's receive timestamp (SO_TIMESTAMPNS, moved from
CLOCK_REALTIME to CLOCK_MONOTONIC), so a receiver scheduled late on a busy
machine does not lengthen the delay it measures.  `ping`
records round trips through `echo` (rows: seq, sent_ns, rtt_ns).  `recv` and
`echo` print `ready` once bound.
"""
from __future__ import annotations

import argparse
import socket
import struct
import sys
import time

import numpy as np

HEADER = struct.Struct("<QQ")            # seq, sent ns


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESPEC = struct.Struct("@qq")


def realtime_offset_ns() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of a few back-to-back readings."""
    best = None
    for _ in range(20):
        a, real, b = time.monotonic_ns(), time.time_ns(), time.monotonic_ns()
        if best is None or b - a < best[0]:
            best = (b - a, real - (a + b) // 2)
    return best[1]


def recv(bind: str, out: str, idle_s: float, count: int | None) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(_addr(bind))
    offset = realtime_offset_ns()
    print("ready", flush=True)
    rows, buf = [], bytearray(65536)
    sock.settimeout(None)
    while count is None or len(rows) < count:
        try:
            n, ancillary, _, _ = sock.recvmsg_into([buf], 64)
        except TimeoutError:
            break
        got = time.monotonic_ns()
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = TIMESPEC.unpack_from(data)
                got = sec * 1_000_000_000 + nsec - offset
        seq, sent = HEADER.unpack_from(buf)
        rows.append((seq, sent, got, n))
        sock.settimeout(idle_s)
    np.save(out, np.array(rows, np.int64).reshape(-1, 4))
    return 0


def send(to: str, count: int, size: int, gap_us: float) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = bytearray(max(size, HEADER.size))
    dest, gap = _addr(to), int(gap_us * 1000)
    due = time.monotonic_ns()
    for seq in range(count):
        if gap:
            due += gap
            while time.monotonic_ns() < due:
                pass
        HEADER.pack_into(payload, 0, seq, time.monotonic_ns())
        sock.sendto(payload, dest)
    return 0


def echo(bind: str) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(_addr(bind))
    print("ready", flush=True)
    buf = bytearray(65536)
    while True:
        n, peer = sock.recvfrom_into(buf)
        sock.sendto(memoryview(buf)[:n], peer)


def ping(to: str, count: int, interval_s: float, size: int, out: str) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(5)
    dest, rows = _addr(to), []
    payload, buf = bytearray(max(size, HEADER.size)), bytearray(65536)
    for seq in range(count):
        sent = time.monotonic_ns()
        HEADER.pack_into(payload, 0, seq, sent)
        sock.sendto(payload, dest)
        try:
            while HEADER.unpack_from(buf[:sock.recv_into(buf)])[0] != seq:
                pass
            rows.append((seq, sent, time.monotonic_ns() - sent))
        except TimeoutError:
            pass
        time.sleep(max(0.0, interval_s - (time.monotonic_ns() - sent) / 1e9))
    np.save(out, np.array(rows, np.int64).reshape(-1, 3))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m magnet.replay.linkem.probe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["recv", "send", "echo", "ping"])
    p.add_argument("--bind")
    p.add_argument("--to")
    p.add_argument("--out")
    p.add_argument("--count", type=int)
    p.add_argument("--size", type=int, default=100, help="datagram payload, bytes")
    p.add_argument("--gap-us", type=float, default=0.0, help="send: between datagrams (0: at once)")
    p.add_argument("--interval", type=float, default=0.02, help="ping: seconds between probes")
    p.add_argument("--idle", type=float, default=1.0, help="recv: stop after this long without data")
    a = p.parse_args(argv)
    if a.role == "recv":
        return recv(a.bind, a.out, a.idle, a.count)
    if a.role == "send":
        return send(a.to, a.count, a.size, a.gap_us)
    if a.role == "echo":
        return echo(a.bind)
    return ping(a.to, a.count, a.interval, a.size, a.out)


if __name__ == "__main__":
    sys.exit(main())
