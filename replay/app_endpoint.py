"""One side of a whole-application replay: every connection of the client's or the server's
side in one process, many non-blocking sockets on one epoll loop.

    python -m magnet.replay.app_endpoint client --plan DIR --listen 10.202.1.1:0 --peer 10.202.1.2 \
        --control FD --record DIR [TCP options]

It listens (for the connections the peer opens) and prints `ready PORT`; the run then
writes `go PEER_PORT ANCHOR DEADLINE` on its standard input: the peer's listening port,
time zero and when to give up (CLOCK_MONOTONIC ns, the same for both sides).  Each side runs its plan
(replay.schedule.AppPlan) with the semantics of docs/app-demand.md: a connection
opens at its time (or after the opener read all of another), each row is due
think_ns after the latest of (its wait_bytes read, the side's previous row done, the
open) and issued once the socket is established; every socket is read whenever
data arrives.  When one poll reads several connections' bytes at once, a row they
allow also waits for the rows of the other connections that the capture's process
wrote before its think time began and that poll allowed too (Side.held_by), so the
side writes in its process's order, not in that of due times collapsed on one batch
of reads.  The opener tells the peer over the control socket (a socketpair
across the namespaces) which local port each connection came from and when it
opened, so the acceptor knows an accepted socket's connection.

Due times are absolute; the loop sleeps in epoll until a margin before the next one
(replay.pacing.Pacer's learnt margin), spins the rest and writes at once.  Recorded
(replay.endpoint.Spill, .npy files): every send() call, every read, each row's due
and issue times, each connection's open, establishment, close and completion.  A
connection that cannot be opened or accepted (ports, file descriptors) gets its
reason as status; SIGTERM (the run's timeout) ends the loop at the next check, the
unfinished connections `incomplete` (so does the deadline).  One JSON line at the end.
"""
from __future__ import annotations

import argparse
import errno
import gc
import heapq
import json
import os
import resource
import select
import selectors
import signal
import socket
import struct
import sys
from pathlib import Path

import numpy as np

from .endpoint import Spill, add_tcp_args, cookie, tune
from .pacing import Pacer, now_ns, realtime, tight_timer_slack
from .schedule import AppPlan

SEND, CLOSE, RESET = 1, 2, 3            # magnetlib.app_demand's row kinds
OPEN, ROW = 0, 1                        # what a timer does
READS_PER_EVENT = 16                    # reads of one socket before the loop looks at the others
MAX_SLEEP_S = 1.0
RESERVE = "/dev/null"                   # an fd kept to free when accept() hits EMFILE
# per connection, what the record keeps (ns, or -1 when it did not happen)
CONN_TIMES = ("open_due", "open_at", "established", "shut_at", "eof_at", "done_at", "read_all_at")


class Conn:
    """One connection's state on this side."""
    __slots__ = ("k", "sock", "opener", "next", "end", "received", "sent", "open_at", "established",
                 "prev_done", "pending", "row_due", "scheduled", "wait_ptr", "shut", "eof", "done",
                 "status", "connecting", "events", "cookie", "port", "issued", "sched_at", "held", "held_i",
                 "own_due", "held_last")

    def __init__(self, k: int, first: int, end: int):
        self.k, self.next, self.end = k, first, end
        self.wait_ptr = first
        self.sock = None
        self.received = self.sent = 0
        self.open_at = self.established = self.prev_done = None
        self.pending = None
        self.row_due = self.issued = self.sched_at = 0
        self.scheduled = self.shut = self.eof = self.done = self.connecting = False
        self.status = None
        self.held = None                       # rows of other connections its next row waits for,
        self.held_i = self.own_due = self.held_last = 0    # the first not gone yet; its due; the last gone
        self.events = 0
        self.cookie = self.port = 0


class Side:
    def __init__(self, args, plan: AppPlan):
        self.args, self.plan, self.side = args, plan, 0 if args.side == "client" else 1
        self.peer_addr = args.peer
        self.kind, self.size = plan.kind, plan.size
        self.wait, self.think, self.time = plan.wait, plan.think, plan.time_ns
        self.met = np.full(len(plan.kind), -1, np.int64)       # when each row's wait_bytes were read
        self.went_at = np.full(len(plan.kind), -1, np.int64)   # when each row's first send() returned
        self.batch = 0                                         # poll() calls that found events
        self.met_batch = np.full(len(plan.kind), -1, np.int64) # the one whose reads met each row's wait
        self.batches: dict[int, list | np.ndarray] = {}        # batch -> rows it met (several connections)
        self.read_now: list[Conn] = []                         # connections this poll read
        self.held: list[Conn] = []                             # connections whose next row waits for others
        n = len(plan.number)
        self.conn_of = np.repeat(np.arange(n), np.asarray(plan.end) - np.asarray(plan.first))
        self.conns = [Conn(k, int(plan.first[k]), int(plan.end[k])) for k in range(n)]
        self.conn_done = np.zeros(n, bool)
        self.remaining = n
        self.times = {name: np.full(n, -1, np.int64) for name in CONN_TIMES}
        self.dependents: dict[int, list[int]] = {}            # K -> connections this side opens after K
        for k in range(n):
            if plan.opener[k] == self.side and plan.after[k] >= 0:
                self.dependents.setdefault(int(plan.after[k]), []).append(k)
        biggest = int(plan.size.max()) if len(plan.size) else 1
        self.payload = memoryview(bytearray(max(biggest, 1)))
        self.buf = bytearray(args.read_size)
        self.heap: list = []
        self.seq = 0
        self.by_port: dict[int, int] = {}                      # the peer's port -> connection
        self.parked: dict[int, tuple] = {}                     # accepted before the peer said which
        self.refused_ports: dict[int, str] = {}                # accept failed before the peer said
        self.selector = selectors.EpollSelector()
        self.epoll_fd = self.selector.fileno()                 # a low number: select() takes it
        self.pacer = Pacer()
        self.stop = False
        record = args.record
        # opened now: when the sockets take every descriptor, the record still has its files
        self.calls = Spill(record / "calls.raw", 5, opened=True)   # connection, row, before, after, returned
        self.rows = Spill(record / "rows.raw", 5, opened=True)     # row, due, issued, done, when scheduled
        self.reads = Spill(record / "reads.raw", 3, opened=True)   # time, connection, bytes (0: EOF)
        self.control_buf = b""
        self.reserve = os.open(RESERVE, os.O_RDONLY)

    # ------------------------------------------------------------ set-up ---
    def listen(self) -> int:
        host, _, port = self.args.listen.rpartition(":")
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tune(self.listener, self.args)
        self.listener.bind((host, int(port)))
        self.listener.listen(socket.SOMAXCONN)
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.control = socket.socket(fileno=self.args.control)     # blocking: sendall() whole lines
        self.selector.register(self.control, selectors.EVENT_READ, "control")
        self.wakeup_r, wakeup_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wakeup_w, warn_on_full_buffer=False)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._note_signal)
        self.selector.register(self.wakeup_r, selectors.EVENT_READ, "wakeup")
        return self.listener.getsockname()[1]

    def _note_signal(self, signum, frame) -> None:
        self.stop = True                       # acted on at the loop's next check

    def start(self, peer_port: int, anchor: int, deadline: int) -> None:
        self.peer_port, self.anchor, self.deadline = peer_port, anchor, deadline
        if self.args.open_loop:
            self.dependents.clear()
        for k in range(len(self.conns)):
            if self.plan.opener[k] == self.side and (self.plan.after[k] < 0 or self.args.open_loop):
                self.push(anchor + int(self.plan.open_ns[k]), OPEN, k)

    def push(self, due: int, what: int, k: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (due, self.seq, what, k))

    # ------------------------------------------------------------- loop ---
    def run(self) -> None:
        heap, pacer = self.heap, self.pacer
        self.pacer.calibrate(self.anchor - self.pacer.margin, lambda s: self.poll(s))
        while self.remaining and not self.stop:
            now = now_ns()
            if now >= self.deadline:
                break
            if not heap:
                self.poll(MAX_SLEEP_S)
                continue
            due = heap[0][0]
            wake = due - pacer.margin
            if now < wake:
                if not self.poll(min((wake - now) / 1e9, MAX_SLEEP_S)):
                    late = now_ns() - wake
                    if late >= 0:
                        pacer.learn(late)
                continue
            if heap[0][2] == OPEN:
                self.prepare(heap[0][3])                     # the socket, before the spin
            while now < due:                                 # spin, then act at once
                now = now_ns()
            while heap and heap[0][0] <= now:
                due, _, what, k = heapq.heappop(heap)
                if what == ROW:
                    self.do_row(self.conns[k], due)
                else:
                    self.open(k, due)
            self.calls.check()
            self.reads.check()
            self.rows.check()

    def poll(self, timeout: float) -> int:
        """Wait up to `timeout` s for sockets; handle what they have. Returns the events.
        The wait is a select() on the epoll descriptor: epoll_wait counts whole
        milliseconds (rounded up), select() microseconds, and a margin learnt from
        millisecond oversleeps would keep the loop spinning at 1,000 rows a second."""
        self.reads.check()
        if timeout > 0 and not select.select([self.epoll_fd], [], [], timeout)[0]:
            return 0
        events = self.selector.select(0)
        self.batch += 1
        for key, mask in events:
            data = key.data
            if data is None:
                self.accept()
            elif data == "control":
                self.read_control()
            elif data == "wakeup":
                os.read(self.wakeup_r, 64)
            elif not data.done:
                if mask & selectors.EVENT_WRITE:
                    self.writable(data)
                if mask & selectors.EVENT_READ and not data.done:
                    self.readable(data)
        self.end_batch()
        return len(events)

    def end_batch(self) -> None:
        """The poll's reads are all in: the rows they met, in the demand's order (kept when they
        are several connections'), then the connections read scheduled, in the order of their
        next rows in the demand."""
        rows = self.batches.get(self.batch)
        if rows is not None:
            rows = np.asarray(rows, np.int64)
            if len(set(self.conn_of[rows].tolist())) < 2:
                del self.batches[self.batch]         # one connection's: its own order holds
            else:
                self.batches[self.batch] = rows[np.argsort(np.asarray(self.plan.row)[rows], kind="stable")]
        read, self.read_now = self.read_now, []
        if len(read) > 1:
            read.sort(key=lambda c: int(self.plan.row[c.next]) if c.next < c.end else -1)
        for c in read:
            self.advance(c)

    # ------------------------------------------------------------ opens ---
    def prepare(self, k: int) -> None:
        """Connection k's socket, made and tuned ahead of its open (an error: at the open)."""
        c = self.conns[k]
        if c.sock is None and not c.done:
            try:
                c.sock = socket.socket()
                tune(c.sock, self.args)
                c.sock.setblocking(False)
            except OSError as e:
                c.sock = e

    def open(self, k: int, due: int) -> None:
        c = self.conns[k]
        self.times["open_due"][k] = due
        self.prepare(k)
        sock, c.sock = c.sock, None
        try:
            if isinstance(sock, OSError):
                raise sock
            c.open_at = now_ns()
            err = sock.connect_ex((self.peer_addr, self.peer_port))
            if err not in (0, errno.EINPROGRESS):
                sock.close()
                raise OSError(err, os.strerror(err))
        except OSError as e:
            self.fail(c, f"connect: {errno.errorcode.get(e.errno, e.errno)}", tell=True)
            return
        c.sock, c.connecting = sock, True
        c.port = sock.getsockname()[1]
        c.cookie = cookie(sock)
        self.times["open_at"][k] = c.open_at
        self.tell(f"open {k} {c.port} {c.open_at}")
        c.events = selectors.EVENT_READ | selectors.EVENT_WRITE
        self.selector.register(sock, c.events, c)

    def accept(self) -> None:
        while True:
            try:
                sock, addr = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                if not self.refuse_one(f"accept: {errno.errorcode[e.errno]}"):
                    return
                continue
            port, t = addr[1], now_ns()
            k = self.by_port.pop(port, None)
            if k is None:
                self.parked[port] = (sock, t)
            else:
                self.attach(k, sock, t)

    def refuse_one(self, reason: str) -> bool:
        """Out of file descriptors: accept the waiting connection on the reserve fd, reset it,
        and fail its connection (named by its port, now or when the peer says).  False when
        none was waiting (accept() says EMFILE before it looks)."""
        os.close(self.reserve)
        try:
            sock, addr = self.listener.accept()
        except BlockingIOError:
            return False
        finally:
            self.reserve = os.open(RESERVE, os.O_RDONLY)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        k = self.by_port.pop(addr[1], None)
        if k is None:
            self.refused_ports[addr[1]] = reason
        else:
            self.fail(self.conns[k], reason, tell=True)
        return True

    def attach(self, k: int, sock: socket.socket, t: int) -> None:
        """An accepted socket of connection k."""
        c = self.conns[k]
        if c.done:                                  # failed meanwhile (its opener gave up)
            sock.close()
            return
        sock.setblocking(False)
        if self.args.nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.sock, c.cookie, c.port = sock, cookie(sock), sock.getsockname()[1]
        c.events = selectors.EVENT_READ
        self.selector.register(sock, c.events, c)
        self.established(c, t)

    def established(self, c: Conn, t: int) -> None:
        c.established, c.connecting = t, False
        self.times["established"][c.k] = t
        self.note_read(c, t)                 # a peer that sends nothing has been read whole
        self.advance(c)

    # ---------------------------------------------------------- control ---
    def tell(self, line: str) -> None:
        try:
            self.control.sendall((line + "\n").encode())
        except (BrokenPipeError, ConnectionResetError):
            pass                              # the peer side has ended: nothing waits for this

    def read_control(self) -> None:
        try:
            data = self.control.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except ConnectionResetError:          # the peer side has ended (with our lines unread)
            data = b""
        if not data:
            self.selector.unregister(self.control)
            return
        self.control_buf += data
        *lines, self.control_buf = self.control_buf.split(b"\n")
        for line in lines:
            word, k, *rest = line.decode().split(" ", 2)
            c = self.conns[int(k)]
            if word == "open":
                port, t = map(int, rest[0].split())
                c.open_at = t
                if port in self.refused_ports:
                    self.fail(c, self.refused_ports.pop(port), tell=True)
                elif port in self.parked:
                    self.attach(c.k, *self.parked.pop(port))
                else:
                    self.by_port[port] = c.k
            elif word == "fail" and not c.done:
                self.fail(c, rest[0])

    # ------------------------------------------------------------- rows ---
    def advance(self, c: Conn) -> None:
        """Schedule c's next row when its conditions hold (docs/app-demand.md), or close
        by default after the last one."""
        if c.scheduled or c.pending is not None or c.done or c.established is None:
            return
        r = c.next
        if r == c.end:
            if not c.shut and not self.plan.closes[c.k] and c.received >= self.plan.peer_total[c.k]:
                self.shutdown(c, now_ns())
            return
        wait = int(self.wait[r])
        if self.args.open_loop:                      # every row at its time, waiting for nothing
            due = max(self.anchor + int(self.time[r]), c.established)
        elif c.received < wait:
            return
        else:
            ref = max(c.open_at, c.prev_done or 0, int(self.met[r]) if wait else 0)
            due = max(ref + int(self.think[r]), c.established)
            held = self.held_by(r, c.k)
            if held is not None:
                c.scheduled, c.held, c.held_i, c.own_due, c.held_last = True, held, 0, due, 0
                self.held.append(c)
                return
        c.scheduled, c.row_due, c.sched_at = True, due, now_ns()
        self.push(due, ROW, c.k)

    def held_by(self, r: int, k: int) -> np.ndarray | None:
        """The rows of other connections row r waits for, in the demand's order (None: none).
        When one poll read several connections' bytes at once (the loop was busy or held off
        the CPU while they arrived), every row they allow would be due its think time after
        the same batch of reads, and the side would write the connections' rows in the order
        of those collapsed due times, not in its process's: a server that answered each of
        five requests header then body would send the five headers first.  So row r, whose
        wait_bytes such a poll met, waits for the rows that poll met on other connections
        which the capture had before r's think time began (earlier in the demand, at or before
        r's time less its think time) and whose first send() has not returned yet.  Only rows
        the peer's bytes already allow, each earlier in the demand than the row it holds:
        nothing waits for the peer through another connection, and no two rows wait for each
        other.  A row that left in its own poll is never held: the reads' own times order it."""
        rows = self.batches.get(int(self.met_batch[r])) if self.wait[r] else None
        if rows is None:
            return rows
        order = np.asarray(self.plan.row)
        rows = rows[(order[rows] < order[r]) & (self.conn_of[rows] != k)
                    & (np.asarray(self.time)[rows] <= int(self.time[r]) - int(self.think[r]))
                    & (self.went_at[rows] < 0) & ~self.conn_done[self.conn_of[rows]]]
        return rows if len(rows) else None

    def release(self) -> None:
        """Held rows whose blockers have all gone (their first send() returned, or their connection
        ended): due their think time after the last of them, as after their own previous row,
        or at their own due time if later."""
        if not self.held:
            return
        waiting = []
        for c in self.held:
            if c.done:
                continue
            rows, i = c.held, c.held_i
            while i < len(rows):
                s = rows[i]
                if self.went_at[s] >= 0:
                    c.held_last = max(c.held_last, int(self.went_at[s]))
                elif not self.conn_done[self.conn_of[s]]:
                    break
                i += 1
            c.held_i = i
            if i < len(rows):
                waiting.append(c)
                continue
            due = max(c.own_due, c.held_last + int(self.think[c.next]))
            c.held, c.row_due, c.sched_at = None, due, now_ns()
            self.push(due, ROW, c.k)
        self.held = waiting

    def do_row(self, c: Conn, due: int) -> None:
        if c.done:
            return
        r, kind = c.next, self.kind[c.next]
        if kind == SEND:
            c.issued = now_ns()
            self.send_some(c, self.payload[:int(self.size[r])])
            return
        t = c.issued = now_ns()
        if kind == CLOSE:
            self.shutdown(c, t)
            self.row_done(c, t)
        else:
            self.rows.rows.append((r, c.row_due, t, t, c.sched_at))
            self.went_at[r] = t
            self.reset(c, t)

    def row_done(self, c: Conn, t: int) -> None:
        self.rows.rows.append((c.next, c.row_due, c.issued, t, c.sched_at))
        if self.went_at[c.next] < 0:
            self.went_at[c.next] = t
        c.prev_done, c.next, c.scheduled = t, c.next + 1, False
        self.advance(c)
        self.release()

    def writable(self, c: Conn) -> None:
        if c.connecting:
            err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self.fail(c, f"connect: {errno.errorcode.get(err, err)}", tell=True)
                return
            self.want_write(c, False)
            self.established(c, now_ns())
            return
        if c.pending is None:
            self.want_write(c, False)
        else:
            self.send_some(c, c.pending)

    def send_some(self, c: Conn, view: memoryview) -> None:
        """One send() of what is left of c's current row (non-blocking: what the buffer
        takes); the rest waits for the socket to be writable, the row is done once all went."""
        before = now_ns()
        try:
            n = c.sock.send(view)
        except BlockingIOError:
            n = -errno.EAGAIN
        except OSError as e:
            self.lost(c, e)
            return
        after = now_ns()
        self.calls.rows.append((c.k, c.next, before, after, n))
        c.sent += max(n, 0)
        rest = view[max(n, 0):]
        c.pending = rest if len(rest) else None
        self.want_write(c, c.pending is not None)
        if c.pending is None:
            self.row_done(c, after)
        elif self.went_at[c.next] < 0:       # the rest waits for room; the process went on
            self.went_at[c.next] = after
            self.release()

    def want_write(self, c: Conn, on: bool) -> None:
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if on else 0)
        if c.eof:
            events &= ~selectors.EVENT_READ
        if events == c.events:
            return
        if not c.events:
            self.selector.register(c.sock, events, c)
        elif events:
            self.selector.modify(c.sock, events, c)
        else:
            self.selector.unregister(c.sock)
        c.events = events

    # ------------------------------------------------------------ reads ---
    def readable(self, c: Conn) -> None:
        sock, buf, log = c.sock, self.buf, self.reads.rows
        for _ in range(READS_PER_EVENT):
            try:
                n = sock.recv_into(buf)
            except BlockingIOError:
                break
            except OSError as e:
                self.lost(c, e)
                return
            t = now_ns()
            log.append((t, c.k, n))
            if n == 0:
                c.eof = True
                self.times["eof_at"][c.k] = t
                self.want_write(c, c.pending is not None or c.connecting)
                self.check_done(c, t)
                break
            c.received += n
            self.note_read(c, t)
        self.read_now.append(c)                      # scheduled once the poll's reads are all in

    def note_read(self, c: Conn, t: int) -> None:
        """Rows whose wait_bytes this read completed get its time; all of the peer's bytes
        read: the connections this side opens after this one are due."""
        wait, received, end = self.wait, c.received, c.end
        while c.wait_ptr < end and wait[c.wait_ptr] <= received:
            if wait[c.wait_ptr] > 0:
                self.met[c.wait_ptr] = t
                self.met_batch[c.wait_ptr] = self.batch
                self.batches.setdefault(self.batch, []).append(c.wait_ptr)
            c.wait_ptr += 1
        if received >= self.plan.peer_total[c.k] and self.times["read_all_at"][c.k] < 0:
            self.times["read_all_at"][c.k] = t
            for j in self.dependents.pop(c.k, []):
                self.push(t + int(self.plan.open_think[j]), OPEN, j)

    # ----------------------------------------------------------- endings ---
    def shutdown(self, c: Conn, t: int) -> None:
        try:
            c.sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            self.lost(c, e)
            return
        c.shut = True
        self.times["shut_at"][c.k] = t
        self.check_done(c, t)

    def reset(self, c: Conn, t: int) -> None:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.times["shut_at"][c.k] = t
        self.finish(c, t, "ok")

    def check_done(self, c: Conn, t: int) -> None:
        if c.shut and c.eof:
            self.finish(c, t, "ok")

    def lost(self, c: Conn, e: OSError) -> None:
        """The connection broke: a reset the plan has the peer make is its end, else a failure."""
        t = now_ns()
        if e.errno in (errno.ECONNRESET, errno.EPIPE) and self.plan.peer_resets[c.k]:
            self.finish(c, t, "ok")
        else:
            self.finish(c, t, "reset" if e.errno in (errno.ECONNRESET, errno.EPIPE)
                        else f"{errno.errorcode.get(e.errno, e.errno)}")

    def fail(self, c: Conn, reason: str, tell: bool = False) -> None:
        if tell:
            self.tell(f"fail {c.k} {reason}")
        self.finish(c, now_ns(), reason)

    def finish(self, c: Conn, t: int, status: str) -> None:
        if c.done:
            return
        c.done, c.status = True, status
        self.conn_done[c.k] = True
        self.times["done_at"][c.k] = t
        if isinstance(c.sock, socket.socket):
            if c.events:
                self.selector.unregister(c.sock)
            c.sock.close()
            c.sock = None
        self.remaining -= 1
        self.release()
        if status != "ok":                      # what waits for it will never come
            for j in self.dependents.pop(c.k, []):
                self.fail(self.conns[j], f"after connection {int(self.plan.number[c.k])}: {status}",
                          tell=True)

    # ----------------------------------------------------------- record ---
    def end(self) -> None:
        """The loop is over (done, deadline or signal): what did not finish is incomplete."""
        for c in self.conns:
            if not c.done:
                self.finish(c, now_ns(), "incomplete")

    def result(self) -> dict:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        failed = {}
        for c in self.conns:
            if c.status != "ok":
                failed[int(self.plan.number[c.k])] = c.status
        return {"side": self.args.side, "failed": failed, "margin_ns": self.pacer.margin,
                "connections": len(self.conns), "max_rss_kib": peak_rss_kib(),
                "cpu_s": usage.ru_utime + usage.ru_stime}

    def save(self) -> None:
        record = self.args.record
        for spill in (self.calls, self.rows, self.reads):
            spill.save(record / f"{spill.path.stem}.npy")
        for name, values in self.times.items():
            np.save(record / f"{name}.npy", values)
        for name in ("sent", "received", "cookie", "port"):
            np.save(record / f"{name}.npy", np.array([getattr(c, name) for c in self.conns], np.int64)
                    if name != "cookie" else np.array([c.cookie for c in self.conns], np.uint64))


def peak_rss_kib() -> int:
    """This program's peak resident memory (VmHWM: getrusage's maxrss would count the
    process it was forked from, before the exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def raise_fd_limit() -> None:
    """Many connections need many descriptors: the soft limit up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m magnet.replay.app_endpoint", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("side", choices=["client", "server"])
    p.add_argument("--plan", required=True, help="this side's plan (replay.schedule.AppPlan, a directory)")
    p.add_argument("--listen", required=True, metavar="ADDR:PORT")
    p.add_argument("--peer", required=True, metavar="ADDR", help="the peer's address")
    p.add_argument("--control", required=True, type=int, metavar="FD", help="the socket to the peer side")
    p.add_argument("--record", required=True, type=Path, help="where the record goes (a directory)")
    p.add_argument("--open-loop", action="store_true", help="every row at its time_ns, waiting for nothing")
    p.add_argument("--realtime", type=int, default=0, metavar="PRIORITY",
                   help="run under SCHED_FIFO at this priority where allowed (0: no)")
    p.add_argument("--lead-ms", type=float, default=200.0, help="(set by the run's go line)")
    add_tcp_args(p)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.record.mkdir(parents=True, exist_ok=True)
    tight_timer_slack()
    raise_fd_limit()
    fifo = realtime(args.realtime) if args.realtime else False
    side = Side(args, AppPlan.load(args.plan))
    try:
        print(f"ready {side.listen()}", flush=True)
        words = sys.stdin.readline().split()
        if words[:1] != ["go"]:
            return 1                                   # the run went away before starting us
        side.start(*map(int, words[1:4]))
        gc.disable()                                   # no collector pause between due times
        try:
            side.run()
        finally:
            gc.enable()
            side.end()
            side.save()
        result = {**side.result(), "sched_fifo": fifo}
        status = 0
    except OSError as e:
        result, status = {"error": f"{args.side}: {e.strerror or e}"}, 1
    print(json.dumps(result), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
