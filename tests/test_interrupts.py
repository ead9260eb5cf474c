"""The commands that honour signals, interrupted at the moments that used to lose them: while
magnet loads, at a fork, mid-simulation; each exits 130 and leaves nothing behind.

tests/interrupts.py runs one trial (and, in `make fuzz`, many at random moments).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from magnet.replay import cli as replay_cli

from . import interrupts
from .conftest import BIN, require, require_tool


def need(key: str) -> None:
    why = interrupts.COMMANDS[key].why_not()
    require(why is None, why or "")


@pytest.mark.parametrize("ignored", [False, True])
def test_a_signal_while_magnet_loads_is_kept(tmp_path, ignored):
    """SIGINT as magnet loads its commands (strace injects it as replay/cli.py is looked up):
    before, a run started with SIGINT ignored dropped it and ran to its end (exit 0), and
    one that did not printed a KeyboardInterrupt traceback."""
    strace = require_tool("strace")
    proc = subprocess.run(
        [strace, "-o", "/dev/null", "-P", replay_cli.__file__, "-e", "trace=%file", "-e",
         "inject=%file:signal=SIGINT:when=1", str(BIN / "magnet"), "replay", "tcp", "synth:ftp",
         "--duration", "2", "--loopback", "--stacks", "1", "-o", tmp_path / "out"],
        capture_output=True, text=True, timeout=120,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None)
    assert proc.returncode == 130 and proc.stderr.strip() == "magnet: interrupted", proc.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("fork", [1, 2, 3])
def test_a_signal_at_each_fork_of_a_loopback_run(tmp_path, sig, fork):
    """Injected as each worker's fork returns (no root needed): exit 130, no worker left."""
    require_tool("strace")
    trial = interrupts.run_trial("tcp-loopback", sig, tmp_path, fork=fork)
    assert trial.outcome == "ok", trial.line()


@pytest.mark.parametrize("fork,sig", [(2, signal.SIGINT), (7, signal.SIGTERM), (25, signal.SIGINT)])
def test_a_signal_at_a_fork_of_a_namespace_run(tmp_path, fork, sig):
    """The probe's reproducer: relay mode, 3 stacks, cross traffic, SIGINT injected at a
    fork.  Before, the handler's KeyboardInterrupt was dropped in logging's after-fork
    hook, every later signal was ignored, and the run exited 0 at its end."""
    require_tool("strace")
    need("tcp-relay-cross")
    trial = interrupts.run_trial("tcp-relay-cross", sig, tmp_path, fork=fork)
    assert trial.outcome == "ok", trial.line()


@pytest.mark.parametrize("sig,ignored", [(signal.SIGTERM, False), (signal.SIGHUP, False),
                                         (signal.SIGINT, True)])
def test_ns3_ends_its_simulation(tmp_path, sig, ignored):
    """SIGTERM or SIGHUP mid-simulation: before, magnet-chain ran on as an orphan; SIGINT
    to a run started with it ignored: before, dropped (the run went on 43 s to exit 0).
    The signal comes 0.5 s after magnet-chain started (it came 4 s after the start, where
    magnet-chain starts within 1 s: 3.5 s later, and on a slow enough machine before it)."""
    need("ns3")
    trial = interrupts.run_trial("ns3", sig, tmp_path, at_s=0.5, ignored=ignored, after="magnet-chain")
    assert trial.outcome == "ok", trial.line()


def test_ns3_sweep_ends_its_workers(tmp_path):
    """A sweep's worker processes and their simulations end with it."""
    need("ns3")
    out = tmp_path / "sweep"
    proc = subprocess.Popen([str(BIN / "magnet"), "replay", "ns3", "synth:ftp", "--duration", "600",
                             "--stacks", "2", "--sweep", "rate=10Mbps,20Mbps,30Mbps", "--jobs", "2",
                             "--no-plots", "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not interrupts.leftovers(proc.pid, out)["processes"] and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "magnet: interrupted" in err, err
    assert interrupts.wait_clean(proc.pid, out) == {}


def test_multistack_interrupted_writes_nothing(tmp_path):
    need("multistack")
    trial = interrupts.run_trial("multistack", signal.SIGTERM, tmp_path, at_s=3.0)
    assert trial.outcome == "ok", trial.line()


def test_results_appear_whole(tmp_path):
    """A study's files are staged beside --out and moved in with their README, last: the
    probe's SIGTERM during multistack's write_results left a directory without it.  A
    signal before the move leaves nothing."""
    import argparse

    import pandas as pd

    from magnet.experiments import common
    from magnetlib import signals
    out = tmp_path / "study"
    args = argparse.Namespace(out=out, quick=True, argv=["--quick"])
    results = common.Results("study", args)
    results.table("runs", pd.DataFrame({"a": [1, 2]}))
    assert not out.exists()
    assert results.write("A study", "body") == out / "README.md"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "runs.csv"]
    assert not list(tmp_path.glob(".study.partial-*"))
    again = common.Results("study", argparse.Namespace(out=tmp_path / "again", quick=True, argv=[]))
    again.table("runs", pd.DataFrame({"a": [1]}))
    with pytest.raises(signals.Interrupted), signals.honoured():
        os.kill(os.getpid(), signal.SIGTERM)
        again.write("Interrupted", "body")
    assert not (tmp_path / "again").exists() and not list(tmp_path.glob(".again.partial-*"))


def test_a_demand_of_days_runs_until_interrupted(tmp_path):
    """Nine days between two writes: before, "internal error: OverflowError: timeout is too
    large" at once (the worker's timeout, 3x the demand, went to poll() past 2**31 ms)."""
    demand = tmp_path / "d.csv"
    demand.write_text("time_ns,size\n0,100\n777600000000000,200\n")
    out = tmp_path / "out"
    proc = subprocess.Popen([str(BIN / "magnet"), "replay", "tcp", demand, "--loopback", "--stacks", "1",
                             "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # The error came as the run began to wait for its workers, right after it started the
    # initiator: once that runs, the run must still be waiting 2 s on (the test waited 8 s from
    # the start, where the initiator runs after 1-2 s).
    deadline = time.monotonic() + 60
    while proc.poll() is None and not any(" initiator " in p
                                          for p in interrupts.leftovers(proc.pid, out)["processes"]):
        assert time.monotonic() < deadline, "no initiator within 60 s"
        time.sleep(0.1)
    try:
        proc.wait(2)
    except subprocess.TimeoutExpired:
        pass
    assert proc.returncode is None, proc.stderr.read()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().endswith("magnet: interrupted"), err
    assert interrupts.wait_clean(proc.pid, out) == {}


# ---------------------------------------------------------------- workers ---
def test_a_worker_that_never_gets_ready_is_ended():
    """Every readiness wait has a timeout: before, 100000 cross-traffic flows kept the run
    waiting for `ready` (7,362 threads and 723 MB after 90 s)."""
    from magnet.replay import workers
    proc = subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    with pytest.raises(workers.WorkerError, match="not ready within 0.5 s"):
        workers.ready(proc, timeout=0.5)
    assert proc.returncode is not None and time.monotonic() - started < 5


def test_a_worker_error_before_ready_is_kept():
    """What the endpoint says when it cannot listen ({"error": ...} on stdout) is the message:
    before, "exited with status 1"."""
    from magnet.replay import workers
    proc = subprocess.Popen(["sh", "-c", 'echo \'{"error": "acceptor: TCP_MAXSEG 100000: Invalid argument"}\'; '
                             'echo noise >&2; exit 1'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with pytest.raises(workers.WorkerError, match=r"^acceptor: TCP_MAXSEG 100000: Invalid argument$"):
        workers.ready(proc)
