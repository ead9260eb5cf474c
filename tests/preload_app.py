"""Programs of known shape for the preload capture's tests; each prints (or
writes with --out) JSON with its own count of its socket calls per
connection, keyed by socket cookie (SO_COOKIE, the trace's sockid):
{"streams": {cookie: {"sends": n, "sent": bytes, ...}}, ...}.

    python preload_app.py fork --kill        # fork without exec; the child SIGKILLs itself
    python preload_app.py clobber            # dup2 a file over every fd, closerange, keep sending
    python preload_app.py threads --threads 8
    python preload_app.py http --fetches 3   # curl against python -m http.server
    python preload_app.py pending --end kill # ends while a thread is inside send()
    python preload_app.py pending --call recv # ... inside recv(), waiting for data
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

from capture_app import cookie

MESSAGE = b"m" * 100


class Sink(threading.Thread):
    """A server thread that drains every connection it accepts (recv until EOF)."""

    def __init__(self, connections: int):
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.connections = connections
        self.received: dict[int, dict] = {}
        self.fds: list[int] = []            # of the connections accepted so far
        self.accepted = threading.Semaphore(0)

    @property
    def address(self):
        return self.listener.getsockname()

    def run(self) -> None:
        workers = []
        for _ in range(self.connections):
            conn, _ = self.listener.accept()
            self.fds.append(conn.fileno())
            self.accepted.release()
            workers.append(threading.Thread(target=self.drain, args=(conn,)))
            workers[-1].start()
        for w in workers:
            w.join()

    def drain(self, conn: socket.socket) -> None:
        recvs = nbytes = 0
        with conn:
            while True:
                data = conn.recv(65536)
                recvs += 1
                nbytes += len(data)
                if not data:
                    break
            self.received[cookie(conn)] = {"recvs": recvs, "received": nbytes}


def send_messages(sock: socket.socket, count: int, tally: Counter) -> None:
    for _ in range(count):
        tally["sent"] += sock.send(MESSAGE)
        tally["sends"] += 1


def finish(sink: Sink, streams: dict, out: str | None, **extra) -> None:
    sink.join(30)
    for key, value in sink.received.items():
        streams.setdefault(key, {}).update(value)
    result = {"streams": {str(k): v for k, v in streams.items()}, **extra}
    with open(out, "w") if out else sys.stdout as f:
        json.dump(result, f)


# ------------------------------------------------------------------- fork ---
def fork(args) -> None:
    """Parent and a forked child (no exec) send on a shared connection; the
    child also opens its own, then exits with _exit or is SIGKILLed."""
    sink = Sink(2)
    sink.start()
    shared = socket.create_connection(sink.address)
    before, after = Counter(), Counter()
    send_messages(shared, 50, before)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        own = socket.create_connection(sink.address)
        mine, theirs = Counter(), Counter()
        send_messages(own, 700, mine)          # past a thread's first chunk
        send_messages(shared, 30, theirs)
        report = {"own": [cookie(own), dict(mine)], "shared": dict(theirs)}
        own.close()
        os.write(w, json.dumps(report).encode())
        os.close(w)
        if args.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(0)
    os.close(w)
    child = json.loads(os.read(r, 65536))
    os.waitpid(pid, 0)
    send_messages(shared, 20, after)
    streams = {cookie(shared): {"sends": before["sends"] + after["sends"] + child["shared"]["sends"],
                                "sent": before["sent"] + after["sent"] + child["shared"]["sent"]}}
    own_id, own_tally = child["own"]
    streams[own_id] = own_tally
    shared.close()
    finish(sink, streams, args.out)


# ---------------------------------------------------------------- clobber ---
def clobber(args) -> None:
    """Put a file of ours on every fd the program does not use (the shim's
    spool fd among them), close a range of fds, and keep sending: the shim
    must neither write into that file nor lose records."""
    sink = Sink(2)
    sink.start()
    first = socket.create_connection(sink.address)
    tally = Counter()
    send_messages(first, 100, tally)
    sink.accepted.acquire()
    keep = {0, 1, 2, first.fileno(), sink.listener.fileno(), *sink.fds}
    spool_fds = [fd for fd, target in open_fds().items() if target.endswith(".spool")]
    with tempfile.NamedTemporaryFile(dir=args.dir, delete=False) as bait:
        for fd in range(3, 1024):
            if fd not in keep and fd != bait.fileno():
                dup2_unless_reserved(bait.fileno(), fd)
    close_except(keep, 600, 1024)
    send_messages(first, 2000, tally)           # new chunks: the spool must be found again
    second = socket.create_connection(sink.address)
    more = Counter()
    send_messages(second, 2000, more)
    streams = {cookie(first): dict(tally), cookie(second): dict(more)}
    first.close()
    second.close()
    finish(sink, streams, args.out, bait=bait.name, spool_fds=spool_fds)


def open_fds() -> dict[int, str]:
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except FileNotFoundError:       # the listing's own fd, closed since
            pass
    return found


def dup2_unless_reserved(fd: int, target: int) -> None:
    try:
        os.dup2(fd, target)
    except OSError as e:                # EBUSY: the number a blocked accept() holds for its connection
        if e.errno != errno.EBUSY:
            raise


def close_except(keep: set[int], low: int, high: int) -> None:
    """os.closerange (close_range() in libc) around the fds in `keep`."""
    start = low
    for fd in sorted(f for f in keep if low <= f < high) + [high]:
        os.closerange(start, fd)
        start = fd + 1


# ---------------------------------------------------------------- threads ---
def threads(args) -> None:
    """--waves of --threads threads, each sending on a connection of its own."""
    sink = Sink(args.threads * args.waves)
    sink.start()
    streams: dict[int, dict] = {}

    def worker() -> None:
        sock = socket.create_connection(sink.address)
        tally = Counter()
        send_messages(sock, args.count, tally)
        streams[cookie(sock)] = dict(tally)
        sock.close()
    for _ in range(args.waves):
        workers = [threading.Thread(target=worker) for _ in range(args.threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finish(sink, streams, args.out)


# ------------------------------------------------------------------- http ---
def http(args) -> None:
    """curl fetches a file from `python -m http.server` (both under the capture)."""
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        with open(os.path.join(root, "file"), "wb") as f:
            f.write(os.urandom(args.size))
        server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind",
                                   "127.0.0.1", "--directory", root],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            port = int(server.stdout.readline().split(" port ")[1].split()[0])
            fetches = [curl(f"http://127.0.0.1:{port}/file") for _ in range(args.fetches)]
        finally:
            server.terminate()
            server.wait()
    with open(args.out, "w") if args.out else sys.stdout as f:
        json.dump({"fetches": fetches, "size": args.size}, f)


def curl(url: str) -> dict:
    out = subprocess.run(["curl", "-s", "-o", os.devnull, "-w",
                          '{"request": %{size_request}, "header": %{size_header}, '
                          '"download": %{size_download}}', url],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


# ---------------------------------------------------------------- pending ---
def pending(args) -> None:
    """A thread sends 8 MB in one call; the peer reads 1 MB of it, then the
    process ends (SIGKILL, or _exit from the main thread) while that call is
    still inside the kernel. Writes the sender's cookie before it ends.
    --call recv: a thread waits in recv() on a connection nobody writes to
    when the process ends; writes that socket's cookie."""
    if args.call == "recv":
        return pending_recv(args)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)   # small buffers: the send blocks
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    sender = socket.socket()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    sender.connect(listener.getsockname())
    peer, _ = listener.accept()
    threading.Thread(target=sender.sendall, args=(b"p" * 8_000_000,), daemon=True).start()
    received = 0
    while received < 1_000_000:
        received += len(peer.recv(65536))
    time.sleep(0.2)
    with open(args.out, "w") as f:
        json.dump({"cookie": cookie(sender), "received": received}, f)
    end(args)


def pending_recv(args) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    waiter = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    threading.Thread(target=waiter.recv, args=(65536,), daemon=True).start()
    time.sleep(0.2)                     # the thread is inside recv()
    with open(args.out, "w") as f:
        json.dump({"cookie": cookie(waiter), "received": 0}, f)
    end(args)


def end(args) -> None:
    if args.end == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(0)


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="app", required=True)
    f = sub.add_parser("fork")
    f.add_argument("--kill", action="store_true", help="the child ends by SIGKILL")
    c = sub.add_parser("clobber")
    c.add_argument("--dir", help="where the file goes")
    t = sub.add_parser("threads")
    t.add_argument("--threads", type=int, default=8)
    t.add_argument("--count", type=int, default=2000)
    t.add_argument("--waves", type=int, default=1, help="one after the other")
    h = sub.add_parser("http")
    h.add_argument("--fetches", type=int, default=3)
    h.add_argument("--size", type=int, default=3_000_000)
    h.add_argument("--dir")
    e = sub.add_parser("pending")
    e.add_argument("--end", choices=("kill", "exit"), default="kill")
    e.add_argument("--call", choices=("send", "recv"), default="send")
    for s in (f, c, t, h, e):
        s.add_argument("--out")
    args = p.parse_args()
    {"fork": fork, "clobber": clobber, "threads": threads, "http": http, "pending": pending}[args.app](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
