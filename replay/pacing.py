"""Waiting until an absolute instant of CLOCK_MONOTONIC with microsecond accuracy, in Python.

Every due time is absolute (the replay's anchor plus the write's trace time),
so errors never accumulate (the tcpreplay drift bug: sleeping for each gap in
turn adds every oversleep to all later writes).  To reach an instant the pacer
sleeps until `margin` before it and the caller spins on the clock for the rest,
then writes at once: on the VM this was written on, even a function return
between the spin and the write cost 5-15 us of cold interpreter after a 20 ms
sleep, against 0.2 us inline.  The kernel wakes a sleeper late by its timer
slack (50 us by default, set to 1 ns here) plus the scheduler's and the
hypervisor's latency: 100-200 us typically on that VM, 0.4 ms at p99, a few ms
now and then.  So the margin follows the wake-ups: the largest oversleep of the
last 64 sleeps plus 200 us, between 200 us and 5 ms, learnt before the first
write (calibrate) and all along.  Spinning costs CPU only within that margin of
each write (at 1 ms spacing on that VM: all the time).

A C spin loop sees the same stalls as a Python one (the VM's interrupts, about
60 us each, ~2% of the time a CPU runs), so a C helper would gain little:
docs/replay.md has the measurements.
"""
from __future__ import annotations

import ctypes
import os
import time
from collections import deque

PR_SET_TIMERSLACK = 29
MIN_MARGIN_NS = 200_000
MAX_MARGIN_NS = 5_000_000
EXTRA_NS = 200_000
WINDOW = 64
START_MARGIN_NS = 1_000_000
CALIBRATION_SLEEP_NS = 2_000_000

now_ns = time.monotonic_ns


def realtime(priority: int) -> bool:
    """SCHED_FIFO at `priority` (below the link emulator's 20), where allowed: a process
    of the machine's ordinary load then never holds a pacer's CPU at a due time (under two
    busy loops a normal-priority pacer wrote 5 writes at once, 10 ms late, every few
    hundred milliseconds)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return True
    except OSError:
        return False


def tight_timer_slack() -> bool:
    """Ask the kernel to wake this thread's sleeps on time (timer slack 1 ns)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class Pacer:
    """Sleeps until shortly before due times; the caller spins the rest:

        now = pacer.sleep_before(due, idle)
        while now < due:
            now = now_ns()
        ...write...

    `idle(seconds)` does the sleeping (e.g. a select() that also reads what
    arrives); it may return early, the pacer sleeps again as needed.
    """

    def __init__(self):
        self.margin = START_MARGIN_NS
        self.oversleep: deque[int] = deque(maxlen=WINDOW)

    def sleep_before(self, due: int, idle=time.sleep) -> int:
        """Sleep until `margin` before `due`; returns the time it woke (or now)."""
        wake = due - self.margin
        now = now_ns()
        if now < wake:
            while now < wake:
                idle((wake - now) / 1e9)
                now = now_ns()
            self.learn(now - wake)
        return now

    def wait(self, due: int, idle=time.sleep) -> int:
        """Return at `due` or just after (with that time)."""
        now = self.sleep_before(due, idle)
        while now < due:
            now = now_ns()
        return now

    def calibrate(self, until: int, idle=time.sleep) -> None:
        """Learn the wake-up latency with short sleeps until `until`."""
        while now_ns() + CALIBRATION_SLEEP_NS < until:
            target = now_ns() + CALIBRATION_SLEEP_NS
            idle(CALIBRATION_SLEEP_NS / 1e9)
            self.learn(max(now_ns() - target, 0))

    def learn(self, late: int) -> None:
        """One wake-up that came `late` ns after it was asked for."""
        self.oversleep.append(late)
        self.margin = min(max(max(self.oversleep) + EXTRA_NS, MIN_MARGIN_NS), MAX_MARGIN_NS)
