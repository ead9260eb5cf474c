"""The whole-application replay's endpoint (replay.app_endpoint), really run on loopback: when
one read of the epoll loop completes several connections' requests at once, the side writes
in the order the capture's process did, not in the order of the collapsed due times."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np

from magnetlib import app_demand
from magnetlib.app_demand import CLIENT, CLOSE, OPEN, SEND, SERVER
from magnet.replay.pacing import now_ns
from magnet.replay.schedule import AppPlan

from .conftest import REPO

US = 1_000
REQUEST, HEADER, BODY = 86, 256, 10_000


def one_process_serves_three() -> app_demand.AppDemand:
    """h2load over HTTP/1.1 against nginx: three requests at once on three connections; the
    server (one process) read each in turn and answered it header then body, so connection
    k's request was read (its header's think time began) after connection k-1's body."""
    rows = []                                   # connection, event, side, time, size, adu, wait, think
    for k in (1, 2, 3):
        rows.append((k, OPEN, CLIENT, k * US, 0, -1, 0, 0))
        rows.append((k, SEND, CLIENT, 100 * US + k * US, REQUEST, 0, 0, 100 * US))
    t = 200 * US
    for k, think in ((1, 100 * US), (2, 20 * US), (3, 20 * US)):
        t += think
        rows.append((k, SEND, SERVER, t, HEADER, 1, REQUEST, think))
        t += 30 * US
        rows.append((k, SEND, SERVER, t, BODY, 1, REQUEST, 30 * US))
        t += 25 * US                            # the next connection's read
    for k in (1, 2, 3):
        rows.append((k, CLOSE, CLIENT, 2000 * US + k * US, 0, -1, HEADER + BODY, 1000 * US))
    rows.sort(key=lambda r: (r[3], r[0]))
    cols = list(zip(*rows))
    n = len(rows)
    d = app_demand.AppDemand.from_columns(connection=cols[0], event=cols[1], side=cols[2], time_ns=cols[3],
                                          size=cols[4], adu=cols[5], wait_bytes=cols[6], think_ns=cols[7],
                                          after=np.zeros(n, np.int64))
    return app_demand.validate(d, "three")


class Server:
    """The real server side (python -m magnet.replay.app_endpoint server) of demand `d`, on
    loopback; the test is its client: it connects, names each connection to it over the
    control socket, and writes the requests itself."""

    def __init__(self, d: app_demand.AppDemand, tmp_path, *options: str):
        self.plan = AppPlan.of(d, SERVER)
        self.plan.save(tmp_path / "plan")
        self.record = tmp_path / "record"
        self.control, theirs = socket.socketpair()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "magnet.replay.app_endpoint", "server", "--plan", str(tmp_path / "plan"),
             "--listen", "127.0.0.1:0", "--peer", "127.0.0.1", "--control", str(theirs.fileno()),
             "--record", str(self.record), *options],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=(theirs.fileno(),))
        theirs.close()
        self.socks: list[socket.socket] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for s in self.socks:
            s.close()
        self.control.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def connect(self, n: int, rcvbuf: int = 0) -> None:
        port = int(self.proc.stdout.readline().split()[1])
        anchor = now_ns() + 50_000_000
        self.proc.stdin.write(f"go 1 {anchor} {anchor + 30_000_000_000}\n")
        self.proc.stdin.flush()
        for k in range(n):
            s = socket.socket()
            if rcvbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            s.connect(("127.0.0.1", port))
            self.socks.append(s)
            self.control.sendall(f"open {k} {s.getsockname()[1]} {now_ns()}\n".encode())
        time.sleep(0.3)                         # accepted and attached; the loop waits in epoll

    def requests_at_once(self) -> None:
        """Every connection's request arrives while the server cannot read: its next poll
        finds them all."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            for s in self.socks:
                s.sendall(b"r" * REQUEST)
            time.sleep(0.1)
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)

    def read_response(self, k: int, size: int, timeout: float = 20.0) -> None:
        s, got = self.socks[k], 0
        s.settimeout(timeout)
        while got < size:
            chunk = s.recv(1 << 20)
            assert chunk, "the server closed early"
            got += len(chunk)

    def finish(self) -> None:
        for s in self.socks:
            s.shutdown(socket.SHUT_WR)
        for s in self.socks:
            assert s.recv(1) == b""
        out, _ = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, out

    def first_calls(self) -> list[tuple[int, int]]:
        """(connection number, bytes) of each row, in the order of its first send() call."""
        calls = np.load(self.record / "calls.npy")        # connection, row, before, after, returned
        first = {}
        for conn, row, *_ in calls:
            first.setdefault(int(row), int(conn))
        return [(int(self.plan.number[c]), int(self.plan.size[r])) for r, c in first.items()]


def test_a_batch_of_requests_is_answered_in_the_captures_order(tmp_path):
    with Server(one_process_serves_three(), tmp_path) as server:
        server.connect(3)
        server.requests_at_once()
        for k in range(3):
            server.read_response(k, HEADER + BODY)
        server.finish()
        reads = np.load(server.record / "reads.npy")
        calls = np.load(server.record / "calls.npy")
        # the three requests were read in one batch, before any response was written
        assert reads[reads[:, 2] > 0, 0].max() < calls[:, 2].min()
        order = server.first_calls()
    assert order == [(1, HEADER), (1, BODY), (2, HEADER), (2, BODY), (3, HEADER), (3, BODY)], order


def test_a_held_row_waits_for_the_earlier_ones_first_write_not_for_its_room(tmp_path):
    """Connection 1's body cannot all go (its reader stops): connection 2's header, which
    the capture had after it, leaves once the body's first send() returned, and its reader
    gets all of it before connection 1's is read at all."""
    big = 4_000_000
    d = one_process_serves_three()
    d.size[(d.connection == 1) & (d.size == BODY)] = big
    d.wait_bytes[(d.connection == 1) & (d.event == CLOSE)] = HEADER + big
    with Server(app_demand.validate(d, "big"), tmp_path, "--sndbuf", "65536") as server:
        server.connect(3, rcvbuf=65536)
        server.requests_at_once()
        for k in (1, 2):
            server.read_response(k, HEADER + BODY)
        server.read_response(0, HEADER + big)
        server.finish()
        order = server.first_calls()
    assert order == [(1, HEADER), (1, big), (2, HEADER), (2, BODY), (3, HEADER), (3, BODY)], order
