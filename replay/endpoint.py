"""One end of a replayed TCP connection, or a relay between two: a process of its own.

    python -m magnet.replay.endpoint acceptor --listen 10.201.1.2:0 --side b.npz --record b-rec.npz
    python -m magnet.replay.endpoint initiator --connect 10.201.1.2:PORT --side a.npz --record a-rec.npz
    python -m magnet.replay.endpoint relay --listen 10.201.2.1:0 --connect 10.201.2.2:PORT --record r.npz

acceptor and relay print `ready PORT` once listening.  Every role prints one
JSON line at the end: its socket cookies (SO_COOKIE, the capture's ids), bytes
written and read, TCP_INFO counters, or `error`.

An initiator or acceptor issues its Side's writes (replay.schedule), each at
its due time (replay.pacing), and reads whatever the peer sends.  One thread
and a non-blocking socket: while waiting it select()s on the socket and reads,
so two ends that both write never block each other.  A write the send buffer
cannot take whole is *blocked*: the rest goes as soon as there is room, and
the record says so.  Recorded, in CLOCK_MONOTONIC ns (the capture's clock):
every send() call (write, time before, time after, what it returned: -11 is
EAGAIN), every read (time after, bytes; 0 is the end of the stream), and per
write its due time.  A relay forwards each read at once (one thread per
direction, blocking sockets: a full downstream holds up its upstream) and
records its reads.
"""
from __future__ import annotations

import argparse
import bisect
import gc
import json
import select
import socket
import struct
import sys
import threading

from .pacing import Pacer, now_ns, tight_timer_slack

SO_COOKIE = 57
EAGAIN = -11
READ_SIZE = 65536
# struct tcp_info (linux/tcp.h): name -> (offset, format)
TCP_INFO_FIELDS = {"snd_mss": (16, "I"), "rtt_us": (68, "I"), "total_retrans": (100, "I"),
                   "data_segs_out": (156, "I"), "bytes_sent": (200, "Q"), "bytes_retrans": (208, "Q")}


class PeerClosed(Exception):
    pass


# ---------------------------------------------------------------- sockets ---
def cookie(sock: socket.socket) -> int:
    return struct.unpack("Q", sock.getsockopt(socket.SOL_SOCKET, SO_COOKIE, 8))[0]


def tcp_info(sock: socket.socket) -> dict:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232).ljust(232, b"\0")
    return {name: struct.unpack_from(fmt, raw, off)[0] for name, (off, fmt) in TCP_INFO_FIELDS.items()}


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def tune(sock: socket.socket, args) -> None:
    """The TCP settings every socket of the replay gets (before connect or listen)."""
    if args.mss:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, args.mss)
    if args.cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.cc.encode())
    if args.nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if args.sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, args.sndbuf)
    if args.rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)


def listen(args) -> socket.socket:
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tune(lsock, args)
    lsock.bind(address(args.listen))
    lsock.listen(1)
    print(f"ready {lsock.getsockname()[1]}", flush=True)
    return lsock


def accept(lsock: socket.socket, args) -> socket.socket:
    conn, _ = lsock.accept()
    lsock.close()
    if args.nodelay:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def connect(args) -> socket.socket:
    sock = socket.socket()
    tune(sock, args)
    sock.connect(address(args.connect))
    return sock


# --------------------------------------------------------------- replaying ---
class Replayer:
    """Issue a Side's writes on a connected socket at their due times; read all the peer sends."""

    def __init__(self, sock: socket.socket, side, anchor_ns: int):
        self.sock, self.side, self.anchor = sock, side, anchor_ns
        self.payload = memoryview(bytearray(int(side.size.max()) if len(side) else 1))
        self.buf = bytearray(READ_SIZE)
        self.calls: list[tuple[int, int, int, int]] = []
        self.reads: list[tuple[int, int]] = []
        self.total_after: list[int] = []           # per data read: bytes so far, and when
        self.time_after: list[int] = []
        self.due: list[int] = []
        self.received = 0
        self.peer_eof = False
        self.pacer = Pacer()

    def run(self) -> None:
        self.sock.setblocking(False)
        t, size = self.side.time_ns.tolist(), self.side.size.tolist()
        after, think = self.side.after_peer.tolist(), self.side.think_ns.tolist()
        send, calls, payload, pacer = self.sock.send, self.calls, self.payload, self.pacer
        pacer.calibrate(self.anchor - pacer.margin, self._idle)
        base = self.anchor
        for i in range(len(t)):
            if after[i] > self.received:
                self._wait_for_peer(after[i])
            if think[i] >= 0 and after[i] > 0:            # an ADU answering the peer
                base = self._arrived_at(after[i]) + think[i] - t[i]
            due = base + t[i]
            self.due.append(due)
            view = payload[:size[i]]
            now = pacer.sleep_before(due, self._idle)
            while now < due:                              # spin, then write at once
                now = now_ns()
            before = now_ns()
            try:
                n = send(view)
            except BlockingIOError:
                n = EAGAIN
            calls.append((i, before, now_ns(), n))
            if n != size[i]:
                self._write_rest(i, view[max(n, 0):])
        self.sock.shutdown(socket.SHUT_WR)
        while not self.peer_eof:
            self._idle(None)

    def _write_rest(self, i: int, view: memoryview) -> None:
        """A blocked write: the rest as the send buffer makes room (reading meanwhile)."""
        while len(view):
            self._wait_writable()
            before = now_ns()
            try:
                n = self.sock.send(view)
            except BlockingIOError:
                n = EAGAIN
            self.calls.append((i, before, now_ns(), n))
            view = view[max(n, 0):]

    def _idle(self, timeout: float | None) -> None:
        """Sleep up to `timeout` s (None: until data comes), reading what arrives."""
        if self.peer_eof:
            if timeout is None:
                raise PeerClosed("the peer closed")
            select.select([], [], [], timeout)
        elif select.select([self.sock], [], [], timeout)[0]:
            self._read_available()

    def _wait_writable(self) -> None:
        readable, _, _ = select.select([] if self.peer_eof else [self.sock], [self.sock], [])
        if readable:
            self._read_available()

    def _read_available(self) -> None:
        while True:
            try:
                n = self.sock.recv_into(self.buf)
            except BlockingIOError:
                return
            t = now_ns()
            self.reads.append((t, n))
            if n == 0:
                self.peer_eof = True
                return
            self.received += n
            self.total_after.append(self.received)
            self.time_after.append(t)

    def _wait_for_peer(self, nbytes: int) -> None:
        while self.received < nbytes:
            if self.peer_eof:
                raise PeerClosed(f"the peer closed after {self.received} bytes; the next write "
                                 f"waits for {nbytes}")
            self._idle(None)

    def _arrived_at(self, nbytes: int) -> int:
        """When the read that brought the peer's nbytes-th byte returned."""
        return self.time_after[bisect.bisect_left(self.total_after, nbytes)]

    def record(self) -> dict:
        return {"calls": self.calls, "reads": self.reads, "due": self.due,
                "size": self.side.size}


# ------------------------------------------------------------------ relay ---
class Relay:
    """Forward each read at once, both directions, until both have ended."""

    def __init__(self, upstream: socket.socket, downstream: socket.socket):
        self.reads = {"down": [], "up": []}         # forwarded downstream / upstream
        self.moved = {"down": 0, "up": 0}
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._pump, args=(upstream, downstream, "down")),
                        threading.Thread(target=self._pump, args=(downstream, upstream, "up"))]

    def run(self) -> None:
        for th in self.threads:
            th.start()
        for th in self.threads:
            th.join()
        if self.errors:
            raise OSError(self.errors[0])

    def _pump(self, src: socket.socket, dst: socket.socket, way: str) -> None:
        buf = bytearray(READ_SIZE)
        view = memoryview(buf)
        log = self.reads[way]
        try:
            while n := src.recv_into(buf):
                log.append((now_ns(), n))
                dst.sendall(view[:n])
                self.moved[way] += n
            log.append((now_ns(), 0))
            dst.shutdown(socket.SHUT_WR)
        except OSError as e:
            self.errors.append(f"relay {way}: {e.strerror or e}")


# ------------------------------------------------------------------- main ---
def _save(path: str, record: dict) -> None:
    import numpy as np
    arrays = {"calls": np.array(record.get("calls", []), np.int64).reshape(-1, 4),
              "reads": np.array(record.get("reads", []), np.int64).reshape(-1, 2),
              "due": np.array(record.get("due", []), np.int64),
              "size": np.array(record.get("size", []), np.int64)}
    for way in ("down", "up"):
        if way in record:
            arrays[f"reads_{way}"] = np.array(record[way], np.int64).reshape(-1, 2)
    np.savez(path, **arrays)


def _result(sock: socket.socket, **extra) -> dict:
    return {"cookie": cookie(sock), "local": list(sock.getsockname()), "peer": list(sock.getpeername()),
            "tcp_info": tcp_info(sock), **extra}


def run_replayer(args) -> dict:
    from .schedule import Side
    side = Side.load(args.side)
    if args.role == "acceptor":
        sock = accept(listen(args), args)
    else:
        sock = connect(args)
    result = _result(sock)                       # addresses while both ends are open
    replayer = Replayer(sock, side, now_ns() + int(args.lead_ms * 1e6))
    gc.disable()                                 # no collector pause between due times
    try:
        replayer.run()
    finally:
        gc.enable()
        _save(args.record, replayer.record())
    result.update(anchor_ns=replayer.anchor, written=side.total_bytes, read=replayer.received,
                  margin_ns=replayer.pacer.margin, tcp_info=tcp_info(sock))
    sock.close()
    return result


def run_relay(args) -> dict:
    upstream = accept(listen(args), args)
    downstream = connect(args)
    up_info, down_info = _result(upstream), _result(downstream)
    relay = Relay(upstream, downstream)
    try:
        relay.run()
    finally:
        _save(args.record, {"down": relay.reads["down"], "up": relay.reads["up"]})
    up_info["tcp_info"], down_info["tcp_info"] = tcp_info(upstream), tcp_info(downstream)
    upstream.close()
    downstream.close()
    return {"upstream": up_info, "downstream": down_info, "forwarded": relay.moved}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m magnet.replay.endpoint", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["initiator", "acceptor", "relay"])
    p.add_argument("--listen", metavar="ADDR:PORT")
    p.add_argument("--connect", metavar="ADDR:PORT")
    p.add_argument("--side", help="the writes (replay.schedule.Side, .npz)")
    p.add_argument("--record", required=True, help="where the record goes (.npz)")
    p.add_argument("--lead-ms", type=float, default=200.0,
                   help="time zero of the writes: this long after the connection is set up")
    p.add_argument("--mss", type=int)
    p.add_argument("--cc", help="congestion control (TCP_CONGESTION)")
    p.add_argument("--nodelay", action="store_true", help="TCP_NODELAY (Nagle off)")
    p.add_argument("--sndbuf", type=int)
    p.add_argument("--rcvbuf", type=int)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    tight_timer_slack()
    try:
        result = run_relay(args) if args.role == "relay" else run_replayer(args)
    except (OSError, PeerClosed) as e:
        result, status = {"error": f"{args.role}: {getattr(e, 'strerror', None) or e}"}, 1
    else:
        status = 0
    print(json.dumps(result), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
