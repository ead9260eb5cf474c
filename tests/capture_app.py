"""A TCP application of known shape for the capture tests.

A client thread sends to a server thread (each optionally in its own network
namespace) and both count what they did: send and receive calls, bytes, the
socket cookies (SO_COOKIE) and TCP_INFO snapshots with CLOCK_MONOTONIC times.
The counts are printed as JSON on stdout: the independent truth the trace is
checked against.

    python capture_app.py bulk --total 4000000 --chunk 65536
    python capture_app.py periodic --size 10240 --interval 0.02 --count 40
    python capture_app.py periodic --size 418 --interval 0.021 --count 40 --probe
    python capture_app.py sendfile --total 3000000
    python capture_app.py bulk ... --server-netns A --client-netns B --addr 10.0.0.1
    python capture_app.py bulk ... --reply 2000000      # the server answers after the client's FIN
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SO_COOKIE = 57
CLONE_NEWNET = 0x40000000
# struct tcp_info (linux/tcp.h): field -> (offset, format)
TCP_CLOSE, TCP_TIME_WAIT = 7, 6
TCP_INFO_FIELDS = {
    "state": (0, "B"), "rto": (8, "I"), "snd_mss": (16, "I"), "unacked": (24, "I"), "rtt": (68, "I"),
    "snd_ssthresh": (76, "I"), "snd_cwnd": (80, "I"), "total_retrans": (100, "I"),
    "bytes_received": (128, "Q"), "segs_out": (136, "I"), "segs_in": (140, "I"), "notsent": (144, "I"),
    "data_segs_in": (152, "I"), "data_segs_out": (156, "I"), "bytes_sent": (200, "Q"),
    "bytes_retrans": (208, "Q"),
}


def cookie(sock: socket.socket) -> int:
    return struct.unpack("Q", sock.getsockopt(socket.SOL_SOCKET, SO_COOKIE, 8))[0]


def tcp_info(sock: socket.socket) -> dict:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 240).ljust(240, b"\0")
    info = {name: struct.unpack_from(fmt, raw, off)[0] for name, (off, fmt) in TCP_INFO_FIELDS.items()}
    info["time_ns"] = time.monotonic_ns()
    return info


def family(addr: str) -> int:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def ports(sock: socket.socket) -> dict:
    return {"local_port": sock.getsockname()[1], "remote_port": sock.getpeername()[1]}


def ss_snapshot(sock: socket.socket) -> dict:
    """`ss -tin` on this connection, with the time it was taken."""
    port = sock.getsockname()[1]
    out = subprocess.run(["ss", "-tinH", "src", f":{port}"], capture_output=True, text=True).stdout
    return {"time_ns": time.monotonic_ns(), "text": out}


def enter_netns(name: str | None) -> None:
    """Move the calling thread into a named network namespace."""
    if not name:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
    finally:
        os.close(fd)


class Server(threading.Thread):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.ready = threading.Event()
        self.result: dict = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            enter_netns(self.args.server_netns)
            with socket.socket(family(self.args.addr)) as lsock:
                lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                lsock.bind((self.args.addr, self.args.port))
                lsock.listen(1)
                self.port = lsock.getsockname()[1]
                self.ready.set()
                conn, _ = lsock.accept()
            with conn:
                self.result = self.receive(conn)
        except BaseException as e:          # reported by the main thread
            self.error = e
            self.ready.set()

    def receive(self, conn: socket.socket) -> dict:
        result = {"cookie": cookie(conn), **ports(conn)}
        result["recvs"], result["bytes"] = read_to_eof(conn, self.args.recv_size)
        # A reply after the client's FIN reaches the client in FIN_WAIT2, where TCP
        # takes segments on its slow path (not tcp_probe's).
        result["sends"], result["sent"] = send_bulk(conn, self.args.reply, self.args.chunk)
        conn.shutdown(socket.SHUT_WR)
        result["tcp_info"] = closed_info(conn)
        return result


def read_to_eof(sock: socket.socket, size: int) -> tuple[int, int]:
    """recv() until EOF: (calls, the EOF read included; bytes)."""
    calls = nbytes = 0
    while True:
        data = sock.recv(size)
        calls += 1
        nbytes += len(data)
        if not data:
            return calls, nbytes


def closed_info(sock: socket.socket, timeout: float = 10.0) -> dict:
    """TCP_INFO once both sides have closed and every segment is acknowledged:
    the counters are final, nothing is left in flight or in a queue."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = tcp_info(sock)
        if info["state"] in (TCP_CLOSE, TCP_TIME_WAIT):
            return info
        time.sleep(0.001)
    raise TimeoutError("the connection did not close")


def client(args, port: int) -> dict:
    enter_netns(args.client_netns)
    sock = socket.socket(family(args.addr))
    if args.cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.cc.encode())
    sock.connect((args.addr, port))
    sends = nbytes = 0
    probes = []
    with sock:
        if args.pattern == "sendfile":
            sends, nbytes = send_file(sock, args.total)
        elif args.pattern == "bulk":
            sends, nbytes = send_bulk(sock, args.total, args.chunk)
        else:
            frame = b"p" * args.size
            for _ in range(args.count):
                nbytes += sock.send(frame)
                sends += 1
                if args.probe:
                    probes.append(tcp_info(sock))
                time.sleep(args.interval)
        result = {"cookie": cookie(sock), "sends": sends, "bytes": nbytes, "probes": probes,
                  **ports(sock)}
        if args.probe:
            result["ss"] = ss_snapshot(sock)
        sock.shutdown(socket.SHUT_WR)
        result["recvs"], result["received"] = read_to_eof(sock, args.recv_size)
        result["tcp_info"] = closed_info(sock)
    return result


def send_bulk(sock: socket.socket, total: int, chunk: int) -> tuple[int, int]:
    """send() of up to `chunk` bytes until `total` are sent: (calls, bytes)."""
    data = b"m" * chunk
    calls = sent = 0
    while sent < total:
        sent += sock.send(data[:total - sent])
        calls += 1
    return calls, sent


def send_file(sock: socket.socket, total: int) -> tuple[int, int]:
    """os.sendfile() calls from a temporary file: (calls, bytes)."""
    with tempfile.TemporaryFile() as f:
        f.write(os.urandom(1 << 16) * (total // (1 << 16) + 1))
        f.flush()
        calls = sent = 0
        while sent < total:
            sent += os.sendfile(sock.fileno(), f.fileno(), sent, total - sent)
            calls += 1
        return calls, sent


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("pattern", choices=["bulk", "periodic", "sendfile"])
    p.add_argument("--total", type=int, default=4_000_000)
    p.add_argument("--chunk", type=int, default=65536)
    p.add_argument("--size", type=int, default=10240)
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--count", type=int, default=40)
    p.add_argument("--recv-size", type=int, default=65536)
    p.add_argument("--reply", type=int, default=0,
                   help="bytes the server sends after the client's FIN (half-close)")
    p.add_argument("--probe", action="store_true",
                   help="TCP_INFO after every periodic send, `ss -ti` at the end")
    p.add_argument("--addr", default="127.0.0.1")
    p.add_argument("--server-netns")
    p.add_argument("--client-netns")
    p.add_argument("--cc", help="the client's congestion control (TCP_CONGESTION)")
    p.add_argument("--port", type=int, default=0, help="the server's port (default: any free one)")
    p.add_argument("--delay", type=float, default=0.0, help="seconds to wait before starting")
    p.add_argument("--out", help="write the JSON here instead of stdout")
    args = p.parse_args()

    time.sleep(args.delay)
    server = Server(args)
    server.start()
    server.ready.wait(10)
    if server.error:
        raise server.error
    result = {"client": client(args, server.port)}
    server.join(30)
    if server.error:
        raise server.error
    result["server"] = server.result
    with open(args.out, "w") if args.out else sys.stdout as out:
        json.dump(result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
