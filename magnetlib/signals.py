"""SIGINT, SIGTERM and SIGHUP honoured at the points a run checks, never raised at a random instruction.

    with signals.honoured():                    # recorded from here on
        proc = subprocess.Popen(...)            # a signal during the fork is kept, not lost
        line = signals.readline(proc.stdout, 30)    # waits that a signal ends
        signals.readable(sock.fileno(), 2.0)
        out, err = signals.communicate(proc, timeout)
        signals.sleep(1.0)
        signals.check()                         # Interrupted (a KeyboardInterrupt) if one came

A handler that raises does so at whatever instruction the signal found: in
logging's after-fork hook, where Python prints the exception and drops it, or
between a Popen and the line that keeps its process for the clean-up.  So the
handler here only records the signal (and signal.set_wakeup_fd wakes the waits
below at once); Interrupted is raised by the run itself, at check() and in the
waits.  It is raised once: later signals are ignored, so the clean-up that
follows completes.  SIGINT is honoured even when the process started with it
ignored (a shell's background job); SIGHUP stays ignored when it was (nohup).
A signal recorded and not raised by the end of the block is raised there.

`magnet` records from its first instruction, so a signal while it loads is not
lost; a command that does not check runs with the handlers it started with
(suspended()), a signal that came meanwhile raised first unless it was ignored.
"""
from __future__ import annotations

import os
import select
import signal
import threading
import time
from contextlib import contextmanager

HONOURED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SLICE_S = 0.05          # a wait that cannot watch the wake-up pipe checks this often
# One select() at most this long: any timeout works however long, and a wake-up byte drained
# by a forked child (it inherits the pipe) delays a wait by no more than this.
MAX_STEP_S = 1.0


class Interrupted(KeyboardInterrupt):
    """A recorded signal, raised where the run checked for it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _State:
    depth = 0                        # nested honoured() blocks
    caught: int | None = None        # the first signal recorded
    raised = False                   # Interrupted raised for it: the clean-up runs undisturbed
    previous: dict = {}              # the handlers before recording, by signal
    pipe: tuple[int, int] | None = None
    old_wakeup = -1


_state = _State()


def _note(signum, frame) -> None:
    if _state.caught is None:
        _state.caught = signum


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _install() -> None:
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    _state.pipe = (read_end, write_end)
    _state.old_wakeup = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    _state.previous = {}
    for sig in HONOURED:
        if sig == signal.SIGHUP and signal.getsignal(sig) is signal.SIG_IGN:
            continue                                   # nohup: asked not to stop on a hang-up
        _state.previous[sig] = signal.signal(sig, _note)


def _uninstall() -> None:
    for sig, handler in _state.previous.items():
        signal.signal(sig, handler)
    signal.set_wakeup_fd(_state.old_wakeup)
    for fd in _state.pipe:
        os.close(fd)
    _state.pipe = None


def record() -> None:
    """Record the signals from now on (the main thread; nests, each with a release())."""
    if not _main_thread():
        return
    if _state.depth == 0:
        _install()
    _state.depth += 1


def release(honour: bool = True) -> None:
    """End a record(); the outermost puts the previous handlers back and raises a signal
    recorded but not yet raised (with honour off, only one the process did not ignore)."""
    if not _main_thread() or _state.depth == 0:
        return
    _state.depth -= 1
    if _state.depth:
        return
    previous, caught, raised = _state.previous, _state.caught, _state.raised
    _uninstall()
    _state.caught, _state.raised = None, False
    if caught is not None and not raised and (honour or previous.get(caught) is not signal.SIG_IGN):
        raise Interrupted(caught)


@contextmanager
def honoured():
    """Record SIGINT, SIGTERM and SIGHUP for the block; Interrupted at its checks."""
    record()
    try:
        yield
    finally:
        release()


@contextmanager
def suspended():
    """Inside honoured(), the handlers from before it for the block (a command that does
    not check); a signal recorded until now is raised first, unless it was ignored."""
    if not _main_thread() or _state.depth == 0:
        yield
        return
    depth, _state.depth = _state.depth, 1
    try:
        release(honour=False)
        yield
    finally:
        record()
        _state.depth = depth


def pending() -> int | None:
    """The signal recorded, if any (raised or not)."""
    return _state.caught


def check() -> None:
    """Raise Interrupted if a signal came and has not been raised yet."""
    if _state.caught is not None and not _state.raised:
        _state.raised = True
        raise Interrupted(_state.caught)


# ------------------------------------------------------------------ waits ---
def _wait_readable(fd: int | None, deadline: float | None) -> bool:
    """Until `fd` is readable (True) or the deadline passes (False); Interrupted on a signal.
    Only the main thread watches the wake-up pipe (its handlers run there); others look
    at the record every SLICE_S."""
    wake = _state.pipe[0] if _state.pipe and _main_thread() else None
    watched = [f for f in (fd, wake) if f is not None]
    while True:
        check()
        step = MAX_STEP_S if deadline is None else min(max(deadline - time.monotonic(), 0.0), MAX_STEP_S)
        if wake is None:
            step = min(step, SLICE_S)
        ready = select.select(watched, [], [], step)[0] if watched else time.sleep(step) or []
        if wake in ready:
            _drain(wake)
        if fd is not None and fd in ready:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def readable(fd: int, timeout: float | None = None) -> bool:
    """Whether `fd` became readable within `timeout` s (a socket, a pidfd); Interrupted on a signal."""
    return _wait_readable(fd, None if timeout is None else time.monotonic() + max(timeout, 0.0))


def sleep(seconds: float) -> None:
    """time.sleep that a signal ends (Interrupted)."""
    _wait_readable(None, time.monotonic() + max(seconds, 0.0))
    check()


def readline(stream, timeout: float | None = None) -> str:
    """One line from a process's pipe ("" at its end), read a byte at a time so that
    nothing is left in a buffer that Popen.communicate() would not see; TimeoutError
    when no whole line came within `timeout` s, Interrupted on a signal."""
    fd = stream.fileno()
    deadline = None if timeout is None else time.monotonic() + timeout
    line = bytearray()
    while not line.endswith(b"\n"):
        if not _wait_readable(fd, deadline):
            raise TimeoutError(f"no line within {timeout:g} s")
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line.decode("utf-8", "replace")


def communicate(proc: subprocess.Popen, timeout: float | None = None):
    """proc.communicate(), waiting in slices so that a signal ends it (Interrupted) and
    any timeout works (poll() takes at most 2**31 ms); subprocess.TimeoutExpired after
    `timeout` s as communicate() raises it."""
    import subprocess                   # here: `magnet` records signals before it loads this
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        check()
        left = SLICE_S if deadline is None else min(SLICE_S, max(deadline - time.monotonic(), 0.0))
        try:
            return proc.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout) from None


def wait(proc: subprocess.Popen, timeout: float | None = None) -> int:
    """proc.wait() that a signal ends (Interrupted); subprocess.TimeoutExpired after `timeout` s."""
    import subprocess
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        check()
        left = SLICE_S if deadline is None else min(SLICE_S, max(deadline - time.monotonic(), 0.0))
        try:
            return proc.wait(left)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout) from None
