"""An FTP-like application for `make demo`: fixed-size writes at a fixed period, and a sink.

    python -m magnet.experiments.ftp_app sink --listen 10.204.1.2:0          # prints "ready PORT", then
                                                                      # {"read": BYTES} at EOF
    python -m magnet.experiments.ftp_app send --connect 10.204.1.2:PORT --size 3284 --interval 0.124 \
        --duration 15                                                 # prints {"written": BYTES}

The sender is an ordinary blocking program (sleep until the next write is due,
then sendall), as the paper's FTP was: what it asks of its socket is what the
capture records as the application's demand.
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import time


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def sink(listen: tuple[str, int]) -> dict:
    with socket.create_server(listen) as server:
        print(f"ready {server.getsockname()[1]}", flush=True)
        conn, _ = server.accept()
        total = 0
        with conn:
            while chunk := conn.recv(1 << 16):
                total += len(chunk)
    return {"read": total}


def send(connect: tuple[str, int], size: int, interval: float, duration: float) -> dict:
    payload = bytes(size)
    writes = int(duration / interval)
    with socket.create_connection(connect) as sock:
        start = time.monotonic() + 0.2          # past the handshake and slow start's first RTT
        for i in range(writes):
            wait = start + i * interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            sock.sendall(payload)
    return {"written": writes * size, "writes": writes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m magnet.experiments.ftp_app", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("sink")
    s.add_argument("--listen", type=address, required=True, metavar="ADDR:PORT")
    c = sub.add_parser("send")
    c.add_argument("--connect", type=address, required=True, metavar="ADDR:PORT")
    c.add_argument("--size", type=int, default=3284, help="bytes per write (default 3284)")
    c.add_argument("--interval", type=float, default=0.124, help="seconds between writes (default 0.124)")
    c.add_argument("--duration", type=float, default=15.0, help="seconds of writing (default 15)")
    args = p.parse_args(argv)
    if args.role == "sink":
        result = sink(args.listen)
    else:
        result = send(args.connect, args.size, args.interval, args.duration)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
