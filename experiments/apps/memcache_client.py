"""A small memcached client at a fixed request rate (memcached's text protocol).

    python -m magnet.experiments.apps.memcache_client --server 10.0.0.1 --requests 200 \
        --keys 20 --value 2000 --period 0.05             # prints {"stored": 20, "hits": 180, ...}

Request i is sent at i * period from the first: the first `keys` are SETs of `value`-byte
values, the rest GETs of them in turn.  It sends on schedule whether or not earlier answers
have arrived (the requests queue up on a slow path, as a periodic job's would) and reads
answers at all times; it ends when every answer is in.
"""
from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import time


class Answers:
    """Counts the server's answers as they arrive, across reads."""

    def __init__(self):
        self.buf = bytearray()
        self.stored = self.hits = self.misses = self.bytes = 0

    @property
    def count(self) -> int:
        return self.stored + self.hits + self.misses

    def feed(self, data: bytes) -> None:
        self.bytes += len(data)
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n")
            if end < 0:
                return
            line = bytes(self.buf[:end])
            if line.startswith(b"VALUE "):
                # VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n: wait for all of it
                size = int(line.split()[3])
                whole = end + 2 + size + 2 + len(b"END\r\n")
                if len(self.buf) < whole:
                    return
                del self.buf[:whole]
                self.hits += 1
                continue
            del self.buf[:end + 2]
            if line == b"STORED":
                self.stored += 1
            elif line == b"END":
                self.misses += 1
            else:
                raise RuntimeError(f"memcached answered {line[:80]!r}")


def request(i: int, keys: int, value: bytes) -> bytes:
    key = f"magnet:{i % keys}".encode()
    if i < keys:
        return b"set %s 0 0 %d\r\n%s\r\n" % (key, len(value), value)
    return b"get %s\r\n" % key


def run(server: str, port: int, requests: int, keys: int, size: int, period: float,
        timeout: float = 120.0) -> dict:
    value = b"m" * size
    answers = Answers()
    with socket.create_connection((server, port), timeout=timeout) as sock:
        sock.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(sock, selectors.EVENT_READ)
        start = time.monotonic()
        deadline = start + requests * period + timeout
        sent = 0
        while answers.count < requests:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"{answers.count} of {requests} answers after {timeout:.0f} s")
            if sent < requests and now >= start + sent * period:
                sock.setblocking(True)
                sock.sendall(request(sent, keys, value))
                sock.setblocking(False)
                sent += 1
                continue
            due = start + sent * period if sent < requests else deadline
            for _ in sel.select(max(0.0, due - now)):
                data = sock.recv(1 << 16)
                if not data:
                    raise ConnectionError(f"memcached closed after {answers.count} answers")
                answers.feed(data)
        seconds = time.monotonic() - start
    return {"requests": requests, "stored": answers.stored, "hits": answers.hits,
            "misses": answers.misses, "bytes_received": answers.bytes, "seconds": round(seconds, 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m magnet.experiments.apps.memcache_client",
                                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True)
    p.add_argument("--port", type=int, default=11211)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--keys", type=int, default=20)
    p.add_argument("--value", type=int, default=2000, help="bytes per value")
    p.add_argument("--period", type=float, default=0.05, help="seconds between requests")
    args = p.parse_args(argv)
    try:
        done = run(args.server, args.port, args.requests, args.keys, args.value, args.period)
    except (OSError, RuntimeError, TimeoutError) as e:
        print(f"memcache_client: {e}", file=sys.stderr)
        return 1
    print(json.dumps(done), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
