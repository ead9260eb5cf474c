"""One end of a replayed TCP connection, or a relay between two: a process of its own.

    python -m magnet.replay.endpoint acceptor --listen 10.201.1.2:0 --side b-writes --record b-record
    python -m magnet.replay.endpoint initiator --connect 10.201.1.2:PORT --side a-writes --record a-record
    python -m magnet.replay.endpoint relay --listen 10.201.2.1:0 --connect 10.201.2.2:PORT --record r-record

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
records its reads.  A record is a directory of .npy files (load_record() maps
them); rows grow in memory only CHUNK at a time before they go to their file,
so a demand of millions of writes needs tens of MB, not GB.  Every sending socket's smoothed RTT (TCP_INFO) is
sampled every RTT_SAMPLE_NS while it sends.
"""
from __future__ import annotations

import argparse
import bisect
import errno
import gc
import json
import select
import socket
import struct
import sys
import shutil
import threading
from pathlib import Path

import numpy as np

from .linuxtcp import available_cc
from .pacing import Pacer, now_ns, realtime, tight_timer_slack

SO_COOKIE = 57
EAGAIN = -11
READ_SIZE = 65536
CHUNK = 65536                     # rows of a record held in memory before they go to a file
RTT_SAMPLE_NS = 10_000_000
# struct tcp_info (linux/tcp.h): name -> (offset, format)
TCP_INFO_FIELDS = {"options": (5, "B"), "wscale": (6, "B"), "ato_us": (12, "I"), "snd_mss": (16, "I"),
                   "rcv_mss": (20, "I"), "pmtu": (60, "I"), "rtt_us": (68, "I"), "advmss": (84, "I"),
                   "total_retrans": (100, "I"), "min_rtt_us": (148, "I"), "data_segs_out": (156, "I"),
                   "bytes_sent": (200, "Q"), "bytes_retrans": (208, "Q")}
TCPI_OPT = {"timestamps": 1, "sack": 2, "window_scaling": 4}


class PeerClosed(Exception):
    pass


# ---------------------------------------------------------------- sockets ---
def cookie(sock: socket.socket) -> int:
    return struct.unpack("Q", sock.getsockopt(socket.SOL_SOCKET, SO_COOKIE, 8))[0]


def tcp_info(sock: socket.socket) -> dict:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232).ljust(232, b"\0")
    return {name: struct.unpack_from(fmt, raw, off)[0] for name, (off, fmt) in TCP_INFO_FIELDS.items()}


def srtt_us(sock: socket.socket) -> int:
    return struct.unpack_from("I", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 72), 68)[0]


def tcp_facts(sock: socket.socket) -> dict:
    """What the connection negotiated and runs: the knobs as the kernel applied them."""
    info = tcp_info(sock)
    facts = {name: bool(info["options"] & bit) for name, bit in TCPI_OPT.items()}
    facts.update(snd_wscale=info["wscale"] & 0xF, rcv_wscale=info["wscale"] >> 4,
                 cc=sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0].decode(),
                 nodelay=bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)),
                 sndbuf=sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                 rcvbuf=sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                 **{k: info[k] for k in ("snd_mss", "rcv_mss", "advmss", "pmtu")})
    return facts


class Spill:
    """Rows of int64 appended to `rows` (a list), moved to a raw file every CHUNK rows
    by check(): what stays in memory is bounded whatever the count."""

    def __init__(self, path: Path, width: int, opened: bool = False):
        self.path, self.width = path, width
        self.rows: list = []
        self.count = 0
        self.file = open(path, "wb") if opened else None     # opened: no open() needed later

    def check(self) -> None:
        if len(self.rows) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        if self.file is None:
            self.file = open(self.path, "wb")
        np.asarray(self.rows, np.int64).reshape(-1, self.width).tofile(self.file)
        self.count += len(self.rows)
        self.rows.clear()

    def save(self, npy: Path) -> None:
        """Every row as an .npy file (a spilled file is copied behind the header, then removed)."""
        if self.file is None:
            rows = np.asarray(self.rows, np.int64).reshape(-1, self.width)
            np.save(npy, rows.reshape(-1) if self.width == 1 else rows)
            return
        self.flush()
        self.file.close()
        shape = (self.count,) if self.width == 1 else (self.count, self.width)
        with open(npy, "wb") as out, open(self.path, "rb") as raw:
            np.lib.format.write_array_header_2_0(out, {"descr": "<i8", "fortran_order": False,
                                                       "shape": shape})
            shutil.copyfileobj(raw, out, 1 << 20)
        self.path.unlink()


def load_record(path) -> dict:
    """A record's arrays by name (calls, reads, due, size, rtt; a relay's reads_down,
    reads_up), memory-mapped."""
    return {p.stem: np.load(p, mmap_mode="r") for p in sorted(Path(path).glob("*.npy"))}


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def set_congestion_control(sock: socket.socket, cc: str) -> None:
    """TCP_CONGESTION, or an error naming `cc` and what this kernel has."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    except OSError as e:
        raise OSError(e.errno, f"congestion control {cc!r}: {e.strerror} "
                               f"(available: {', '.join(available_cc())})") from None


def tune(sock: socket.socket, args) -> None:
    """The TCP settings every socket of the replay gets (before connect or listen)."""
    if args.mss:
        _set(sock, socket.IPPROTO_TCP, socket.TCP_MAXSEG, args.mss, "TCP_MAXSEG")
    if args.cc:
        set_congestion_control(sock, args.cc)
    if args.nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if args.sndbuf:
        _set(sock, socket.SOL_SOCKET, socket.SO_SNDBUF, args.sndbuf, "SO_SNDBUF")
    if args.rcvbuf:
        _set(sock, socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf, "SO_RCVBUF")


def _set(sock: socket.socket, level: int, option: int, value: int, name: str) -> None:
    """setsockopt, or OSError naming the option and the value (one past a C int too)."""
    try:
        sock.setsockopt(level, option, value)
    except (OSError, OverflowError, TypeError) as e:
        raise OSError(getattr(e, "errno", None) or errno.EINVAL,
                      f"{name} {value}: {getattr(e, 'strerror', None) or 'out of range'}") from None


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

    def __init__(self, sock: socket.socket, side, anchor_ns: int, record: Path, read_size: int = READ_SIZE):
        self.sock, self.side, self.anchor = sock, side, anchor_ns
        self.payload = memoryview(bytearray(int(side.size.max()) if len(side) else 1))
        self.buf = bytearray(read_size)
        self.calls = Spill(record / "calls.raw", 4)      # write, before, after, returned
        self.reads = Spill(record / "reads.raw", 2)      # time, bytes
        self.due = Spill(record / "due.raw", 1)
        self.rtt: list[tuple[int, int]] = []                     # time, srtt (us)
        self.waits = bool(len(side) and side.after_peer.max() > 0)
        self.total_after: list[int] = []           # per data read: bytes so far, and when
        self.time_after: list[int] = []
        self.received = 0
        self.peer_eof = False
        self.pacer = Pacer()

    def run(self) -> None:
        self.sock.setblocking(False)
        self.pacer.calibrate(self.anchor - self.pacer.margin, self._idle)
        self.base = self.anchor
        for lo in range(0, len(self.side), CHUNK):
            self._run_chunk(lo, slice(lo, lo + CHUNK))
        self.sock.shutdown(socket.SHUT_WR)
        while not self.peer_eof:
            self._idle(None)

    def _run_chunk(self, lo: int, part: slice) -> None:
        """Writes lo.. of one chunk of the Side (Python lists of a chunk only)."""
        side = self.side
        t, size = side.time_ns[part].tolist(), side.size[part].tolist()
        after, think = side.after_peer[part].tolist(), side.think_ns[part].tolist()
        send, calls, payload, pacer = self.sock.send, self.calls.rows, self.payload, self.pacer
        dues, last_rtt = self.due.rows, 0
        for j in range(len(t)):
            i = lo + j
            if after[j] > self.received:
                self._wait_for_peer(after[j])
            if think[j] >= 0 and after[j] > 0:            # an ADU answering the peer
                self.base = self._arrived_at(after[j]) + think[j] - t[j]
            due = self.base + t[j]
            dues.append(due)
            view = payload[:size[j]]
            now = pacer.sleep_before(due, self._idle)
            while now < due:                              # spin, then write at once
                now = now_ns()
            before = now_ns()
            try:
                n = send(view)
            except BlockingIOError:
                n = EAGAIN
            calls.append((i, before, now_ns(), n))
            if n != size[j]:
                self._write_rest(i, view[max(n, 0):])
            if before - last_rtt >= RTT_SAMPLE_NS:
                self.rtt.append((before, srtt_us(self.sock)))
                last_rtt = before
            self.calls.check()
            self.reads.check()
        self.due.flush()

    def _write_rest(self, i: int, view: memoryview) -> None:
        """A blocked write: the rest as the send buffer makes room (reading meanwhile)."""
        while len(view):
            self._wait_writable()
            before = now_ns()
            try:
                n = self.sock.send(view)
            except BlockingIOError:
                n = EAGAIN
            self.calls.rows.append((i, before, now_ns(), n))
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
            self.reads.rows.append((t, n))
            if n == 0:
                self.peer_eof = True
                return
            self.received += n
            if self.waits:
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
        return {"calls": self.calls, "reads": self.reads, "due": self.due, "rtt": self.rtt,
                "size": self.side.size}


# ------------------------------------------------------------------ relay ---
class Relay:
    """Forward each read at once, both directions, until both have ended."""

    def __init__(self, upstream: socket.socket, downstream: socket.socket, record: Path,
                 read_size: int = READ_SIZE):
        self.reads = {way: Spill(record / f"reads_{way}.raw", 2) for way in ("down", "up")}
        self.rtt: list[tuple[int, int]] = []        # the downstream (sending) socket's srtt
        self.read_size = read_size
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
        buf = bytearray(self.read_size)
        view = memoryview(buf)
        spill = self.reads[way]
        log, last_rtt = spill.rows, 0
        try:
            while n := src.recv_into(buf):
                t = now_ns()
                log.append((t, n))
                dst.sendall(view[:n])
                self.moved[way] += n
                if way == "down" and t - last_rtt >= RTT_SAMPLE_NS:
                    self.rtt.append((t, srtt_us(dst)))
                    last_rtt = t
                spill.check()
            log.append((now_ns(), 0))
            dst.shutdown(socket.SHUT_WR)
        except OSError as e:
            self.errors.append(f"relay {way}: {e.strerror or e}")


# ------------------------------------------------------------------- main ---
def _save(path: Path, record: dict) -> None:
    """The record as a directory of .npy files, one per array."""
    for name, value in record.items():
        if isinstance(value, Spill):
            value.save(path / f"{value.path.stem}.npy")
        else:
            width = 2 if name == "rtt" else 1
            np.save(path / f"{name}.npy", np.asarray(value, np.int64).reshape(-1, width)[:, 0]
                    if width == 1 else np.asarray(value, np.int64).reshape(-1, width))


def _result(sock: socket.socket, **extra) -> dict:
    return {"cookie": cookie(sock), "local": list(sock.getsockname()), "peer": list(sock.getpeername()),
            "tcp_info": tcp_info(sock), "tcp": tcp_facts(sock), **extra}


def _rtt_mean(samples: list[tuple[int, int]]) -> float | None:
    values = [rtt for _, rtt in samples if rtt]
    return sum(values) / len(values) if values else None


def time_zero(args) -> int:
    """The writes' time zero: --start-at (at once if it has passed), else --lead-ms from now."""
    if args.start_at:
        return max(args.start_at, now_ns())
    return now_ns() + int(args.lead_ms * 1e6)


def run_replayer(args) -> dict:
    from .schedule import Side
    side = Side.load(args.side)
    if args.role == "acceptor":
        sock = accept(listen(args), args)
    else:
        sock = connect(args)
    result = _result(sock)                       # addresses while both ends are open
    replayer = Replayer(sock, side, time_zero(args), args.record, args.read_size)
    gc.disable()                                 # no collector pause between due times
    try:
        replayer.run()
    finally:
        gc.enable()
        _save(args.record, replayer.record())
    result.update(anchor_ns=replayer.anchor, written=side.total_bytes, read=replayer.received,
                  margin_ns=replayer.pacer.margin, tcp_info=tcp_info(sock),
                  srtt_mean_us=_rtt_mean(replayer.rtt))
    sock.close()
    return result


def run_relay(args) -> dict:
    upstream = accept(listen(args), args)
    downstream = connect(args)
    up_info, down_info = _result(upstream), _result(downstream)
    relay = Relay(upstream, downstream, args.record, args.read_size)
    try:
        relay.run()
    finally:
        _save(args.record, {"down": relay.reads["down"], "up": relay.reads["up"], "rtt": relay.rtt})
    up_info["tcp_info"], down_info["tcp_info"] = tcp_info(upstream), tcp_info(downstream)
    down_info["srtt_mean_us"] = _rtt_mean(relay.rtt)
    upstream.close()
    downstream.close()
    return {"upstream": up_info, "downstream": down_info, "forwarded": relay.moved}


def _record_dir(text: str) -> Path:
    path = Path(text)
    path.mkdir(parents=True, exist_ok=True)
    return path


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m magnet.replay.endpoint", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["initiator", "acceptor", "relay"])
    p.add_argument("--listen", metavar="ADDR:PORT")
    p.add_argument("--connect", metavar="ADDR:PORT")
    p.add_argument("--side", help="the writes (replay.schedule.Side, a directory)")
    p.add_argument("--record", required=True, type=_record_dir, help="where the record goes (a directory)")
    p.add_argument("--lead-ms", type=float, default=200.0,
                   help="time zero of the writes: this long after the connection is set up")
    p.add_argument("--start-at", type=int, default=0, metavar="NS",
                   help="time zero of the writes instead: this CLOCK_MONOTONIC time (at once if passed)")
    p.add_argument("--realtime", type=int, default=0, metavar="PRIORITY",
                   help="run under SCHED_FIFO at this priority where allowed (0: no)")
    add_tcp_args(p)
    return p.parse_args(argv)


def add_tcp_args(p) -> None:
    """The socket options every end of a replay takes (replay.linuxtcp's endpoint_args)."""
    p.add_argument("--mss", type=int)
    p.add_argument("--cc", help="congestion control (TCP_CONGESTION)")
    p.add_argument("--nodelay", action="store_true", help="TCP_NODELAY (Nagle off)")
    p.add_argument("--sndbuf", type=int)
    p.add_argument("--rcvbuf", type=int)
    p.add_argument("--read-size", type=int, default=READ_SIZE, help="bytes per recv() call")


def main(argv=None) -> int:
    args = parse_args(argv)
    tight_timer_slack()
    fifo = realtime(args.realtime) if args.realtime else False
    try:
        result = run_relay(args) if args.role == "relay" else run_replayer(args)
    except (OSError, PeerClosed) as e:
        result, status = {"error": f"{args.role}: {getattr(e, 'strerror', None) or e}"}, 1
    else:
        result["sched_fifo"], status = fifo, 0
    print(json.dumps(result), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
