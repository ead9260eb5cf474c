"""The capture under faults: `magnet capture` killed, magnet-read killed, a full
disk, an output that is not a fresh file (needs root and BPF, except the last test)."""
from __future__ import annotations

import json
import os
import re
import resource
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
from magnetlib.writer import TraceWriter

from .conftest import BIN, assert_clean_error, require, small_tmpfs
from .test_capture import APP, PREFIX, magnet_read  # noqa: F401  (fixture)

BULK = [sys.executable, str(APP), "bulk", "--total", "20000000", "--chunk", "1000", "--out", os.devnull]


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, timeout=120, **kw)
    proc.stdout_text = proc.stdout.decode("utf-8", "replace")
    proc.stderr_text = proc.stderr.decode("utf-8", "replace")
    return proc


def capture_cmd(out: Path, status_dir: Path, name: str, *command, options=()) -> list:
    return [BIN / "magnet", "capture", "-o", out, "--status-dir", status_dir,
            "--cgroup-name", f"{PREFIX}-{name}", *options, "--", *command]


def wait_for(check, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {what} after {timeout} s")


def reader_pid(status_dir: Path) -> int:
    """The pid of the magnet-read that keeps a status file in `status_dir`."""
    def pid():
        for path in status_dir.glob("magnet-read.*.json"):
            return json.loads(path.read_text())["pid"]
    return wait_for(pid, "status file")


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"     # dead, not yet reaped
    except FileNotFoundError:
        return True


def last_record(path: Path):
    trace = magnetlib.open(path).check()
    assert trace.truncated_bytes == 0
    return trace.records[-1], trace


def ended_early(record) -> bool:
    return record["event"] == E.LOST and record["sockid"] == capture.LOST_ENDED_EARLY


# ------------------------------------------------------- magnet capture killed ---
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_the_reader_stops_with_magnet_capture(magnet_read, tmp_path, sig):
    out, status = tmp_path / "x.magnet", tmp_path / "status"
    name = f"kill{sig}"
    cgroup = capture.cgroup2_root() / capture.CGROUP_PARENT / f"{PREFIX}-{name}"
    started = tmp_path / "started"
    # The signal's default action, even when the tests run under nohup (an ignored
    # SIGHUP stays ignored by magnet capture, by design).
    wrapper = subprocess.Popen(capture_cmd(out, status, name, "sh", "-c", f"touch {started}; exec sleep 60"),
                               preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL)
                                                   for s in (signal.SIGTERM, signal.SIGHUP)])
    reader = None
    try:
        reader = reader_pid(status)
        wait_for(started.exists, "command")
        wrapper.send_signal(sig)
        assert wrapper.wait(30) == (128 + sig if sig != signal.SIGKILL else -sig)
        wait_for(lambda: gone(reader), f"end of magnet-read {reader}", timeout=10)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
        if reader and not gone(reader):
            os.kill(reader, signal.SIGKILL)
        capture.remove_cgroup(cgroup)                      # what a SIGKILL leaves: the command
    record, trace = last_record(out)
    assert trace.meta.segment_index == 0
    # asked to stop, the trace is complete; orphaned, it says that it ended early
    assert ended_early(record) == (sig == signal.SIGKILL)


# ---------------------------------------------------------- magnet-read killed ---
def test_a_killed_reader_ends_the_trace_early(magnet_read, tmp_path):
    out, status, started = tmp_path / "x.magnet", tmp_path / "status", tmp_path / "started"
    wrapper = subprocess.Popen(capture_cmd(out, status, "deadreader", "sh", "-c", f"touch {started}; sleep 3"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader = reader_pid(status)
    wait_for(started.exists, "command")
    os.kill(reader, signal.SIGKILL)
    stdout, stderr = wrapper.communicate(timeout=60)
    assert wrapper.returncode == 2, stderr
    assert b"magnet-read was killed (SIGKILL)" in stderr and b"runs on, unrecorded" in stderr
    record, _ = last_record(out)
    assert ended_early(record)
    left = status / f"magnet-read.{reader}.json"                # stale: it names files and connections
    assert left.stat().st_mode & 0o777 == 0o600


# ------------------------------------------------------------------ full disk ---
@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs."""
    with small_tmpfs(tmp_path / "small", "512k") as mnt:
        yield mnt


def check_ended_early_with_loss(path: Path, magnet) -> None:
    """The trace ends at a whole record: a LOST record marked as ended early,
    counting what could not be written."""
    record, trace = last_record(path)
    assert ended_early(record) and record["size"] > 0
    info = magnet("info", path, check=True).stdout_text
    reported = re.search(r"^lost\s+(\d+) records", info, re.M)
    assert reported and int(reported[1]) == trace.scan.lost >= record["size"]
    assert re.search(r"^ended early\s+yes", info, re.M) and trace.scan.ended_early


def test_a_full_disk_ends_the_trace_early(magnet_read, small_disk, tmp_path, magnet):
    out = small_disk / "x.magnet"
    proc = run(capture_cmd(out, tmp_path / "status", "full", *BULK, options=["-x"]))
    assert proc.returncode == 2, proc.stderr_text
    assert "No space left on device" in proc.stderr_text and "the trace ends early" in proc.stderr_text
    check_ended_early_with_loss(out, magnet)


def test_a_file_size_limit_ends_the_trace_early(magnet_read, tmp_path, magnet):
    out = tmp_path / "x.magnet"
    limit = 200_000
    reader = subprocess.Popen([magnet_read, "-o", out, "-x", "-d", "10ms", "-q", "--status-dir", tmp_path],
                              stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    wait_for(out.exists, "trace")
    subprocess.run(BULK, check=True)
    reader.send_signal(signal.SIGINT)
    _, stderr = reader.communicate(timeout=30)
    assert reader.returncode == 1 and "File too large" in stderr, stderr
    assert out.stat().st_size <= limit
    check_ended_early_with_loss(out, magnet)


# ---------------------------------------------------------------- the output ---
def read_refusal(binary, out: Path, *options) -> str:
    proc = run([binary, "-o", out, "-D", "0.1s", "-q", *options])
    lines = proc.stderr_text.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr_text
    return lines[0]


def test_outputs_are_fresh_regular_files_or_forced(magnet_read, tmp_path, magnet):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    victim.chmod(0o644)
    link = tmp_path / "link.magnet"
    link.symlink_to(victim)
    assert "is a symbolic link" in read_refusal(magnet_read, link, "--force")
    hard = tmp_path / "hard.magnet"
    os.link(victim, hard)
    assert "other hard links" in read_refusal(magnet_read, hard, "--force")
    assert victim.read_text() == "precious" and victim.stat().st_mode & 0o777 == 0o644
    fifo = tmp_path / "fifo.magnet"
    os.mkfifo(fifo)
    assert "not a regular file" in read_refusal(magnet_read, fifo, "--force")
    old = tmp_path / "old.magnet"
    subprocess.run([magnet_read, "-o", old, "-D", "0.1s", "-q"], check=True)
    before = old.read_bytes()
    assert "exists and is not empty (--force replaces it)" in read_refusal(magnet_read, old)
    assert old.read_bytes() == before
    refused = run(capture_cmd(old, tmp_path / "status", "exists", "true"))
    assert_clean_error(refused, str(old), "exists and is not empty")
    assert old.read_bytes() == before
    old.chmod(0o644)
    forced = run(capture_cmd(old, tmp_path / "status", "forced", "true", options=["--force"]))
    assert forced.returncode == 0, forced.stderr_text
    assert old.read_bytes() != before and old.stat().st_mode & 0o777 == 0o600
    magnetlib.open(old).check()


# ------------------------------------------------------- marking a dead trace ---
def test_a_trace_left_mid_record_is_ended_early(tmp_path):
    path = tmp_path / "t.magnet"
    records = np.zeros(3, magnetlib.format.record_dtype())
    records["timestamp"], records["event"], records["sockid"], records["size"] = [10, 20, 30], E.SOCK_SEND, 7, 100
    with TraceWriter(path) as w:
        w.append(records)
    with open(path, "ab") as f:
        f.write(b"\x01" * 10)                               # a record cut by the kill
    assert capture.mark_ended_early(path)
    record, trace = last_record(path)
    assert ended_early(record) and record["size"] == 0 and trace.scan.counts[E.SOCK_SEND] == 3
    assert not capture.mark_ended_early(tmp_path / "missing.magnet")
    (tmp_path / "text").write_text("not a trace at all")
    assert not capture.mark_ended_early(tmp_path / "text")


# --------------------------------------------------- interrupted while loading ---
class Interrupted(BaseException):
    pass


def test_an_interrupted_start_leaves_no_reader_and_no_cgroup(magnet_read, tmp_path):  # noqa: F811
    """A Ctrl-C while magnet-read loads its programs (a replay's stack starting its
    capture) stops that magnet-read and removes the cgroup made for it: none may
    outlive the interrupted caller (a test once left the cgroup behind)."""
    from magnet.replay import wire
    name = f"{PREFIX}-interrupted"
    out = tmp_path / "interrupted.magnet"

    def interrupt(*_):
        raise Interrupted
    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.05)                # magnet-read takes longer to load
    try:
        with pytest.raises(Interrupted):
            wire.BpfSession(out, name)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not (capture.cgroup2_root() / capture.CGROUP_PARENT / name).exists()
    readers = subprocess.run(["pgrep", "-af", "magnet-read"], capture_output=True, text=True).stdout
    assert str(out) not in readers
