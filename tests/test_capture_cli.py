"""magnet-read and `magnet capture/status` as a user meets them: signals, rotation,
the status view, scheduler events, and clean errors (needs root and BPF)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import magnetlib
from magnet import capture
from magnetlib.format import Event as E

from .conftest import BIN, assert_clean_error, require, require_tool
from .test_capture import APP, PREFIX, magnet_read  # noqa: F401  (fixture)


def traffic(cgroup: Path, total: int = 10_000_000) -> subprocess.Popen:
    """A bulk transfer on loopback in 1000-byte writes, started inside `cgroup`."""
    return subprocess.Popen([sys.executable, APP, "bulk", "--total", str(total), "--chunk", "1000",
                             "--out", os.devnull], preexec_fn=lambda: capture.join_cgroup(cgroup))


@pytest.fixture
def cgroup(magnet_read):
    path = capture.make_cgroup(f"{PREFIX}-{os.urandom(3).hex()}")
    yield path
    capture.remove_cgroup(path)


@pytest.fixture
def start(tmp_path, cgroup):
    """Starts captures of the test's cgroup; whatever happens, stops them at the end."""
    started: list[capture.Capture] = []

    def start(name: str = "t.magnet", **settings) -> capture.Capture:
        settings.setdefault("status_dir", str(tmp_path / "status"))
        started.append(capture.Capture(tmp_path / name, cgroup=cgroup,
                                       settings=capture.Settings(**settings)).start())
        return started[-1]

    yield start
    for cap in started:
        if cap.returncode is None:
            cap.stop(signal.SIGKILL)


def wait_for_records(path: Path, minimum: int = 1000, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > minimum * 24:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path}: nothing recorded")


# ---------------------------------------------------------------- signals ---
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_closes_a_complete_trace(tmp_path, cgroup, start, sig):
    cap = start(ext=True)
    app = traffic(cgroup)
    wait_for_records(cap.output)
    assert cap.stop(sig) == 0
    app.wait()
    trace = magnetlib.open(cap.output).check()
    assert trace.truncated_bytes == 0 and trace.scan.records > 0
    assert trace.meta.segment_index == 0 and trace.meta.buffer_bytes > 0
    assert os.stat(cap.output).st_mode & 0o777 == 0o600
    assert not list((tmp_path / "status").glob("*.json"))          # status file removed


def test_sigkill_leaves_a_readable_trace(tmp_path, cgroup, start, magnet):
    cap = start()
    app = traffic(cgroup)
    wait_for_records(cap.output, 5000)
    cap.stop(signal.SIGKILL)
    app.wait()
    trace = magnetlib.open(cap.output).check()                      # whole records, up to the last
    assert trace.scan.records > 0 and trace.scan.counts.get(E.SOCK_SEND)
    status = magnet("status", "--status-dir", tmp_path / "status")
    assert "stale status file" in status.stdout_text and str(cap.pid) in status.stdout_text


# --------------------------------------------------------------- rotation ---
def test_rotation_by_size_and_sighup(tmp_path, cgroup, start):
    cap = start(rotate_size="48K", drain_delay="20ms")
    app = traffic(cgroup, total=4_000_000)
    app.wait()
    time.sleep(0.2)
    before = sorted(tmp_path.glob("t*.magnet"))
    cap.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert cap.stop() == 0
    files = sorted(tmp_path.glob("t*.magnet"), key=lambda p: magnetlib.open(p).meta.segment_index)
    assert len(before) >= 3 and len(files) == len(before) + 1      # SIGHUP started one more
    assert files[0].name == "t.magnet" and files[1].name == "t.1.magnet"
    total = 0
    for index, path in enumerate(files):
        trace = magnetlib.open(path).check()
        assert trace.meta.segment_index == index
        total += trace.scan.records
    assert total > 0


# ----------------------------------------------------------------- status ---
def test_status_shows_a_running_capture(tmp_path, start, magnet):
    cap = start(buffer="8M", events="sock,tcp", ports="1,2")
    time.sleep(1.2)                                                    # one status period
    out = magnet("status", "--status-dir", tmp_path / "status", check=True).stdout_text
    assert "1 capture(s) running" in out and f"pid {cap.pid}" in out
    assert str(cap.output) in out and "SOCK_SEND" in out and "ports 1,2" in out
    listed = json.loads(magnet("status", "--status-dir", tmp_path / "status", "--json",
                               check=True).stdout_text)
    assert listed[0]["pid"] == cap.pid and listed[0]["alive"]
    assert listed[0]["buffer_bytes"] <= 8 << 20 and listed[0]["lost"] == 0
    cap.stop()
    out = magnet("status", "--status-dir", tmp_path / "status", check=True).stdout_text
    assert "0 capture(s) running" in out


# -------------------------------------------------------------- scheduler ---
def test_scheduler_events(magnet_read, tmp_path):
    out = tmp_path / "sched.magnet"
    proc = subprocess.run([magnet_read, "-o", out, "-e", "sched", "-x", "-D", "0.5s", "-q"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    trace = magnetlib.open(out).check()
    counts = trace.scan.counts
    assert counts.get(E.SCHED_SWITCH, 0) > 10
    assert counts.get(E.SCHED_ENTER, 0) > 10 and counts.get(E.SCHED_LEAVE, 0) > 10
    data = trace.data
    assert (data["size"] == data["cpu"]).all() and data["size"].max() < os.cpu_count()
    assert not any(counts.get(ev) for ev in (E.SOCK_SEND, E.TCP_SEND, E.DEV_SEND))


# --------------------------------------------------------- the capture CLI ---
def test_capture_passes_on_the_exit_status(magnet_read, tmp_path, magnet):
    proc = magnet("capture", "-o", tmp_path / "x.magnet", "--cgroup-name", f"{PREFIX}-exit",
                  "--", "sh", "-c", "exit 3")
    assert proc.returncode == 3, proc.stderr_text
    assert "magnet capture:" in proc.stdout_text and "0 stream(s)" in proc.stdout_text
    proc = magnet("capture", "-o", tmp_path / "y.magnet", "--cgroup-name", f"{PREFIX}-none",
                  "--", "/nonexistent/command")
    assert proc.returncode == 127 and "/nonexistent/command" in proc.stderr_text


def test_capture_without_a_command(magnet, tmp_path):
    assert_clean_error(magnet("capture", "-o", tmp_path / "x.magnet"), "no command")


# ----------------------------------------------------------------- errors ---
def read_error(binary, *args, user: bool = False) -> str:
    """magnet-read's one-line error (exit status 2)."""
    cmd = [str(binary), *map(str, args)]
    if user:
        cmd = [require_tool("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups",
               "--inh-caps=-all", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("magnet-read: ") and "Traceback" not in proc.stderr
    return lines[0]


def test_clean_errors(magnet_read, tmp_path):
    out = tmp_path / "x.magnet"
    assert "needs root" in read_error(magnet_read, "-o", out, user=True)
    assert "--btf /nonexistent/vmlinux" in read_error(magnet_read, "-o", out, "--btf", "/nonexistent/vmlinux")
    assert "not a cgroup v2 directory" in read_error(magnet_read, "-o", out, "--cgroup", tmp_path)
    assert "not a size" in read_error(magnet_read, "-o", out, "--buffer", "12Q")
    assert "unknown event 'NOPE'" in read_error(magnet_read, "-o", out, "-e", "NOPE")
    assert "no output file" in read_error(magnet_read)
    assert "No such file or directory" in read_error(magnet_read, "-o", tmp_path / "no" / "x.magnet")
    assert not out.exists()


def test_capture_needs_root(magnet_read, tmp_path):
    """For what only BPF records (without root, the rest goes to the preload shim)."""
    proc = subprocess.run([require_tool("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups",
                           str(BIN / "magnet"), "capture", "-e", "tcp", "-o", "/tmp/x.magnet", "--", "true"],
                          capture_output=True, text=True)
    require("Permission denied" not in proc.stderr, "the magnet command is not readable by nobody")
    assert proc.returncode == 2 and "--events tcp needs root" in proc.stderr, proc.stderr
