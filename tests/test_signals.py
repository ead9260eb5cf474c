"""magnetlib.signals: a signal is recorded at any instruction and raised where the run checks.

The commands that honour signals are tried under them in tests/test_interrupts.py.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from magnetlib import signals

from .conftest import require_tool


def send_later(sig: int, after_s: float = 0.2) -> threading.Timer:
    timer = threading.Timer(after_s, os.kill, (os.getpid(), sig))
    timer.start()
    return timer


def test_a_signal_is_raised_once_at_a_check():
    """Recorded, raised at the check as Interrupted; a second one is ignored (the clean-up
    completes); the handlers from before come back."""
    before = signal.getsignal(signal.SIGTERM)
    with signals.honoured():
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.pending() == signal.SIGTERM
        with pytest.raises(signals.Interrupted) as caught:
            signals.check()
        assert caught.value.signum == signal.SIGTERM and isinstance(caught.value, KeyboardInterrupt)
        os.kill(os.getpid(), signal.SIGINT)
        signals.check()                                    # the clean-up goes on
    assert signal.getsignal(signal.SIGTERM) is before and signals.pending() is None


def test_a_signal_not_checked_is_raised_at_the_end():
    with pytest.raises(signals.Interrupted):
        with signals.honoured():
            os.kill(os.getpid(), signal.SIGHUP)
    with pytest.raises(signals.Interrupted):             # also over another error it caused
        with signals.honoured():
            os.kill(os.getpid(), signal.SIGTERM)
            raise OSError("a worker died of the same Ctrl-C")


def test_ignored_sigint_is_honoured_ignored_sighup_is_not():
    """A shell's background job starts with SIGINT ignored: a SIGINT sent to it still
    stops the run.  nohup ignores SIGHUP: it stays ignored."""
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGHUP)}
    try:
        with pytest.raises(signals.Interrupted):
            with signals.honoured():
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(0.05)
                assert signals.pending() is None
                os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_suspended_gives_the_block_the_handlers_from_before():
    """A command that does not check runs with the handlers it started with; a signal
    recorded before it, not ignored then, is raised first."""
    before = signal.getsignal(signal.SIGINT)
    with signals.honoured():
        with signals.suspended():
            assert signal.getsignal(signal.SIGINT) is before
        assert signal.getsignal(signal.SIGINT) is not before
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(signals.Interrupted):
            with signals.suspended():
                pytest.fail("a recorded signal must stop the command before it starts")


@pytest.mark.parametrize("wait", ["sleep", "readline", "communicate", "wait"])
def test_waits_end_on_a_signal(wait):
    """Each wait ends at a signal (well before its 30 s), however long its timeout."""
    proc = subprocess.Popen(["sleep", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = send_later(signal.SIGTERM)
    started = time.monotonic()
    try:
        with pytest.raises(signals.Interrupted), signals.honoured():
            if wait == "sleep":
                signals.sleep(30)
            elif wait == "readline":
                signals.readline(proc.stdout, 30)
            elif wait == "communicate":
                signals.communicate(proc, 86400 * 365)     # past poll()'s 2**31 ms
            else:
                signals.wait(proc, 86400 * 365)
    finally:
        timer.cancel()
        proc.kill()
        proc.communicate()
    assert time.monotonic() - started < 5


def test_waits_time_out():
    proc = subprocess.Popen(["sleep", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with signals.honoured():
            with pytest.raises(TimeoutError):
                signals.readline(proc.stdout, 0.2)
            with pytest.raises(subprocess.TimeoutExpired):
                signals.communicate(proc, 0.2)
    finally:
        proc.kill()
        proc.communicate()
    echo = subprocess.Popen(["echo", "ready 1234"], stdout=subprocess.PIPE, text=True)
    assert signals.readline(echo.stdout, 10) == "ready 1234\n" and signals.readline(echo.stdout, 10) == ""
    echo.wait()


FORKS = """
import logging, subprocess, sys
from magnetlib import signals
try:
    with signals.honoured():
        for _ in range(6):
            subprocess.Popen(["true"], preexec_fn=lambda: None).wait()
        print("ran to the end")
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.parametrize("when", range(1, 7))
def test_a_signal_at_a_fork_is_kept(when):
    """SIGINT delivered as fork() returns (strace's injection) reaches the parent in
    logging's after-fork hook, where an exception raised by the handler is dropped and
    later signals were lost with it: now it is recorded and raised at the end."""
    strace = require_tool("strace")
    proc = subprocess.run([strace, "-o", "/dev/null", "-e", "trace=clone", "-e",
                           f"inject=clone:signal=SIGINT:when={when}", sys.executable, "-c", FORKS],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130 and "Exception ignored" not in proc.stderr, (proc.returncode, proc.stderr)
    assert "ran to the end" in proc.stdout           # recorded during the fork, raised where checked
