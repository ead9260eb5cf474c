"""The capture without root (libmagnet-preload.so, `magnet capture --preload`):
real programs over loopback, their own counts of their calls per connection
against the trace, the BPF capture of the same run, and the faults a
preloaded library must survive (fork without exec, SIGKILL, fds clobbered,
threads). Only the comparison with BPF needs root."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

import magnetlib
from magnet import capture
from magnet.capture import preload
from magnetlib.format import Event as E, ExtValid

from .conftest import (BIN, assert_clean_error, require, require_tool, run_magnet, small_tmpfs,
                       unprivileged)
from .test_capture import APP, PREFIX, magnet_read  # noqa: F401  (fixture)

PRELOAD_APP = Path(__file__).with_name("preload_app.py")
SIGNALS_APP = Path(__file__).with_name("preload_signals.c")
ESTABLISHED, TCP_CLOSE, CLOSE_WAIT = 1, 7, 8          # the kernel's TCP states


@pytest.fixture(scope="module")
def library() -> Path:
    require_tool("cc")
    return preload.find_library()


def captured(tmp_path: Path, *command, options=()) -> tuple[magnetlib.Trace, dict]:
    """`magnet capture --preload` of a command that writes its JSON to --out."""
    out, app_out = tmp_path / "p.magnet", tmp_path / "app.json"
    proc = run_magnet("capture", "--preload", "-o", out, *options, "--",
                      *map(str, command), "--out", app_out)
    assert proc.returncode == 0, proc.stderr_text
    assert "magnet capture:" in proc.stdout_text
    return magnetlib.open(out).check(), json.loads(app_out.read_text())


def per_stream(trace: magnetlib.Trace) -> dict[int, dict]:
    """{sockid: {sends, sent, recvs, received}} of the trace's SOCK records."""
    d = trace.data
    out: dict[int, dict] = {}
    for event, calls, nbytes in ((E.SOCK_SEND, "sends", "sent"), (E.SOCK_RECV, "recvs", "received")):
        mine = d[d["event"] == event]
        ids, index = np.unique(mine["sockid"], return_inverse=True)
        for sockid, n, b in zip(ids.tolist(), np.bincount(index).tolist(),
                                np.bincount(index, weights=mine["size"]).tolist()):
            out.setdefault(sockid, {})[calls] = n
            out[sockid][nbytes] = int(b)
    return out


def app_streams(app: dict) -> dict[int, dict]:
    return {int(k): v for k, v in app["streams"].items()}


def assert_preload_trace(trace: magnetlib.Trace) -> None:
    assert trace.meta.capture_method == "preload"
    assert set(np.unique(trace.data["event"]).tolist()) <= {E.SOCK_SEND, E.SOCK_RECV}
    assert trace.scan.lost == 0
    assert np.all(np.diff(trace.data["timestamp"].astype(np.int64)) >= 0)
    assert os.stat(trace.path).st_mode & 0o777 == 0o600


# ---------------------------------------------------------- real traffic ---
def test_python_sender_through_a_shell(library, tmp_path):
    """capture_app's bulk transfer, started by sh (fork + exec): every call it
    counted is a record of its connection, with its bytes."""
    trace, app = captured(tmp_path, "sh", "-c", '"$@"', "sh", sys.executable, APP, "bulk",
                          "--total", 2_000_000, "--chunk", 1000, "--recv-size", 4096)
    assert_preload_trace(trace)
    streams = per_stream(trace)
    client, server = app["client"], app["server"]
    assert streams[client["cookie"]] == {"sends": client["sends"], "sent": client["bytes"],
                                         "recvs": client["recvs"], "received": 0}
    assert streams[server["cookie"]] == {"recvs": server["recvs"], "received": server["bytes"]}
    assert client["sends"] == 2000 and server["bytes"] == 2_000_000
    assert not list(tmp_path.glob(".magnet-preload-*"))     # the spool is gone


def test_sendfile_server(library, tmp_path):
    trace, app = captured(tmp_path, sys.executable, APP, "sendfile", "--total", 3_000_000)
    client = app["client"]
    assert per_stream(trace)[client["cookie"]]["sends"] == client["sends"]
    assert per_stream(trace)[client["cookie"]]["sent"] == client["bytes"] == 3_000_000


def test_curl_against_an_http_server(library, tmp_path):
    """Both ends in the trace: curl's request and the server's response, as curl counts them."""
    require_tool("curl")
    trace, app = captured(tmp_path, sys.executable, PRELOAD_APP, "http", "--fetches", 3,
                          "--dir", tmp_path)
    assert_preload_trace(trace)
    sides = sorted((s.get("sent", 0), s.get("received", 0)) for s in per_stream(trace).values())
    expect = []
    for f in app["fetches"]:
        assert f["download"] == app["size"]
        expect += [(f["request"], f["header"] + f["download"]), (f["header"] + f["download"], f["request"])]
    assert sides == sorted(expect)


# ------------------------------------------------- TCP_INFO and ports ---
def assert_sequence_fields(trace: magnetlib.Trace) -> None:
    """Every record (but for a rare one whose queues never stood still) a TCP_INFO
    snapshot whose byte counts are the calls' own: at each send, write_seq = the
    bytes sent so far; at each read, copied_seq = the bytes read so far, +1 from
    when the peer's FIN arrived (sequence numbers count it); snd_una <= snd_nxt <=
    write_seq."""
    d = trace.data
    assert trace.has_ext and trace.meta.ext_mask == preload.EXT_GROUPS and np.all(d["pid"] > 0)
    assert set(d["valid"].tolist()) <= {preload.EXT_GROUPS, ExtValid.TASK}
    assert (d["valid"] == preload.EXT_GROUPS).mean() >= 0.99
    for sockid in np.unique(d["sockid"]):
        mine = d[d["sockid"] == sockid]
        sends, reads = mine[mine["event"] == E.SOCK_SEND], mine[mine["event"] == E.SOCK_RECV]
        sent = np.cumsum(np.maximum(sends["size"], 0))              # over every call
        fin = reads["copied_seq"].astype(np.int64) - np.cumsum(np.maximum(reads["size"], 0))
        sent_ok, read_ok = sends["valid"] == preload.EXT_GROUPS, reads["valid"] == preload.EXT_GROUPS
        sends, reads, sent, fin = sends[sent_ok], reads[read_ok], sent[sent_ok], fin[read_ok]
        assert sends["write_seq"].tolist() == sent.tolist()
        assert set(fin.tolist()) <= {0, 1} and np.all(np.diff(fin) >= 0), hex(sockid)
        assert np.all(fin[reads["size"] == 0] == 1)                     # EOF: the FIN is in
        assert set(reads["tcp_state"][fin == 1].tolist()) <= {CLOSE_WAIT, TCP_CLOSE}
        assert np.all(sends["snd_una"] <= sends["snd_nxt"]) and np.all(sends["snd_nxt"] <= sends["write_seq"])
        full = mine[mine["valid"] == preload.EXT_GROUPS]
        assert np.all(full["srtt_us"] > 0) and np.all(full["snd_cwnd"] > 0) and np.all(full["mss"] > 0)
        assert set(full["tcp_state"][full["size"] > 0].tolist()) <= {ESTABLISHED, CLOSE_WAIT}


def test_tcp_info_snapshot_of_a_connecting_sender(library, tmp_path):
    """--ext: the sender connect()ed (its SYN is in bytes_acked), the receiver accepted."""
    trace, app = captured(tmp_path, sys.executable, APP, "bulk", "--total", 2_000_000,
                          "--chunk", 1000, "--recv-size", 4096, options=["--ext"])
    assert_preload_trace(trace)
    assert_sequence_fields(trace)
    d = trace.data
    sends = d[(d["sockid"] == app["client"]["cookie"]) & (d["event"] == E.SOCK_SEND)]
    assert sends["write_seq"][-1] == 2_000_000 and sends["snd_una"][0] < 2_000_000


def test_tcp_info_snapshot_of_an_accepting_sender(library, tmp_path):
    """--ext on curl and an HTTP server: the server's side sends on an accepted socket."""
    require_tool("curl")
    trace, _ = captured(tmp_path, sys.executable, PRELOAD_APP, "http", "--fetches", 2,
                        "--dir", tmp_path, options=["--ext"])
    assert_sequence_fields(trace)
    assert len(np.unique(trace.data["sockid"])) == 4


PORTS_APP = """
import json, socket, struct, sys
cookie = lambda s: struct.unpack("=Q", s.getsockopt(socket.SOL_SOCKET, 57, 8))[0]  # SO_COOKIE
a, b = socket.socketpair()                  # no ports: not kept by --port
a.send(b"u" * 100) and b.recv(100)
out = {}
for port in map(int, sys.argv[1:3]):
    server = socket.create_server(("127.0.0.1", port))
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    client.sendall(b"x" * 5000)
    assert conn.recv(65536)
    out[port] = sorted([cookie(client), cookie(conn)])
json.dump(out, open(sys.argv[-1], "w"))
"""


def free_ports(n: int) -> list[int]:
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(n)]
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_port_filter(library, tmp_path):
    """--port: the connections with that port (the client's remote port, the
    server's local one), not the other, nor a UNIX socket under --all-sockets;
    the filter is in the trace's metadata."""
    script = tmp_path / "ports.py"
    script.write_text(PORTS_APP)
    first, second = free_ports(2)
    out = tmp_path / "ports.magnet"
    proc = run_magnet("capture", "--preload", "--all-sockets", "--port", f"9,{second}", "-o", out, "--",
                      sys.executable, script, first, second, "--out", tmp_path / "app.json")
    assert proc.returncode == 0, proc.stderr_text
    cookies = json.loads((tmp_path / "app.json").read_text())
    trace = magnetlib.open(out)
    assert sorted(per_stream(trace)) == cookies[str(second)]
    assert f"with port 9,{second}" in trace.meta.filter


# ---------------------------------------------------------------- faults ---
@pytest.mark.parametrize("end", ["_exit", "SIGKILL"])
def test_fork_without_exec(library, tmp_path, end):
    """A forked child (no exec) records into a file of its own, including on the
    connection it shares with its parent; SIGKILL loses none of it."""
    trace, app = captured(tmp_path, sys.executable, PRELOAD_APP, "fork",
                          *(["--kill"] if end == "SIGKILL" else []))
    assert_preload_trace(trace)
    assert per_stream(trace) == app_streams(app)


def test_program_that_clobbers_the_shims_fd(library, tmp_path):
    """dup2() of a file over every fd, close_range() over the shim's: no record
    lost, none written into the program's file."""
    trace, app = captured(tmp_path, sys.executable, PRELOAD_APP, "clobber", "--dir", tmp_path)
    assert app["spool_fds"], "the shim had no spool fd open to clobber"
    assert_preload_trace(trace)
    assert per_stream(trace) == app_streams(app)
    assert os.path.getsize(app["bait"]) == 0


def test_threads(library, tmp_path):
    trace, app = captured(tmp_path, sys.executable, PRELOAD_APP, "threads", "--threads", 16,
                          "--count", 3000)
    assert_preload_trace(trace)
    assert per_stream(trace) == app_streams(app)
    assert len(app["streams"]) == 32


def test_short_lived_threads(library, tmp_path):
    """A thread per connection, 400 of them: later threads fill what ended ones left
    of their chunks (and the sink's threads theirs), no record lost or doubled."""
    trace, app = captured(tmp_path, sys.executable, PRELOAD_APP, "threads", "--threads", 8,
                          "--waves", 50, "--count", 30)
    assert_preload_trace(trace)
    assert per_stream(trace) == app_streams(app)
    assert len(app["streams"]) == 800


def test_all_sockets(library, tmp_path):
    """TCP only by default, as the BPF capture; --all-sockets adds UNIX sockets."""
    script = ("import socket; a, b = socket.socketpair(); a.send(b'x' * 10); b.recv(10); "
              "a.close(); b.recv(10)")
    counts = {}
    for options in ((), ("--all-sockets",)):
        out = tmp_path / f"s{len(options)}.magnet"
        run_magnet("capture", "--preload", *options, "-o", out, "--", sys.executable, "-c", script,
                   check=True)
        counts[options] = magnetlib.open(out).scan.records
    assert counts == {(): 0, ("--all-sockets",): 3}


def test_unfinished_slots_are_counted_as_lost(tmp_path):
    """A slot a killed process had claimed but not finished (a record after it is),
    is a LOST record in the merged trace; the unused slots after the last record,
    and a chunk it had reserved but not begun, are nothing."""
    dtype = magnetlib.format.record_dtype()
    chunk = np.zeros(preload.CHUNK_ALIGN, np.uint8)
    head = chunk[:24].view(preload.CHUNK_HEADER)
    head["magic"], head["bytes"], head["record_size"] = preload.CHUNK_MAGIC, preload.CHUNK_ALIGN, 24
    slots = chunk[24:24 + 3 * 24].view(dtype)
    slots["sockid"], slots["event"], slots["size"] = 7, E.SOCK_SEND, 100
    slots["timestamp"] = [1000, 0, 2000]                     # slot 1 unfinished
    spool = tmp_path / "spool"
    spool.mkdir()
    np.concatenate([chunk, np.zeros(preload.CHUNK_ALIGN, np.uint8)]).tofile(spool / f"1-1{preload.SUFFIX}")
    records = preload.read_spool_dir(spool)
    assert records["event"].tolist() == [E.SOCK_SEND, E.SOCK_SEND, E.LOST]
    assert records["size"].tolist() == [100, 100, 1] and records["timestamp"][-1] == 2000


def test_signal_handler_records_are_not_overwritten(library, tmp_path):
    """A SIGALRM handler every 50 us sends on a second connection while the main
    loop sends 300,000 calls: both streams exact, or the handler's shortfall
    counted by LOST (a handler interrupting the shim's slot claim used to take
    the same slot and overwrite a record: 1 run in 2 or 3 lost some uncounted)."""
    cc = require_tool("cc")
    program = tmp_path / "signals"
    subprocess.run([cc, "-O2", "-pthread", SIGNALS_APP, "-o", program], check=True)
    for run in range(3):
        out = tmp_path / f"s{run}.magnet"
        proc = run_magnet("capture", "--preload", "-o", out, "--", program, 300_000, check=True)
        app = json.loads(proc.stdout_text.splitlines()[0])
        trace = magnetlib.open(out).check()
        streams = per_stream(trace)
        assert streams[app["main"]["cookie"]]["sends"] == app["main"]["sends"], run
        assert app["handler"]["sends"] > 1000, run
        recorded = streams[app["handler"]["cookie"]]["sends"]
        assert recorded + trace.scan.lost == app["handler"]["sends"], (run, recorded, trace.scan.lost)


@pytest.mark.parametrize("end", ["kill", "exit"])
def test_a_call_the_process_never_returns_from_is_lost_not_missing(library, tmp_path, end):
    """A thread inside send() (its data partly read by the peer) when the process
    is SIGKILLed or _exits from another thread: no SOCK_SEND, but one LOST, and
    the summary says what such losses are (not --buffer, which --preload refuses)."""
    out, app_out = tmp_path / "p.magnet", tmp_path / "app.json"
    proc = run_magnet("capture", "--preload", "-o", out, "--", sys.executable, PRELOAD_APP, "pending",
                      "--end", end, "--out", app_out)
    assert proc.returncode == (128 + 9 if end == "kill" else 0), proc.stderr_text
    app = json.loads(app_out.read_text())
    trace = magnetlib.open(out).check()
    assert app["received"] >= 1_000_000
    assert "sends" not in per_stream(trace).get(app["cookie"], {})
    assert trace.scan.lost == 1
    assert "sends a process never returned from" in proc.stdout_text
    assert "--buffer" not in proc.stdout_text and "--drain-delay" not in proc.stdout_text


@pytest.mark.parametrize("end", ["kill", "exit"])
def test_a_receive_the_process_never_returns_from_is_not_a_loss(library, tmp_path, end):
    """A thread waiting in recv() when the process is SIGKILLed or _exits: the
    application received nothing, so no record and no LOST (a server stopped
    while it waits for a request is the common case; it counted one LOST)."""
    out, app_out = tmp_path / "p.magnet", tmp_path / "app.json"
    proc = run_magnet("capture", "--preload", "-o", out, "--", sys.executable, PRELOAD_APP, "pending",
                      "--call", "recv", "--end", end, "--out", app_out)
    assert proc.returncode == (128 + 9 if end == "kill" else 0), proc.stderr_text
    app = json.loads(app_out.read_text())
    trace = magnetlib.open(out).check()
    assert "recvs" not in per_stream(trace).get(app["cookie"], {})
    assert trace.scan.lost == 0 and "LOST" not in proc.stdout_text


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs."""
    with small_tmpfs(tmp_path / "small", "4m") as mnt:
        yield mnt


def test_a_merge_without_room_keeps_the_spool(library, small_disk, tmp_path):
    """120,000 records fit in the spool but not twice: the merge fails, keeps
    every record in the spool and says how to merge it later; that merge, to a
    disk with room, gives the whole trace."""
    out = small_disk / "z.magnet"
    proc = run_magnet("capture", "--preload", "-o", out, "--", sys.executable, APP, "bulk",
                      "--total", 12_000_000, "--chunk", 100, "--recv-size", 1_000_000, "--out", os.devnull)
    assert proc.returncode == 2, proc.stderr_text
    assert_clean_error(proc, str(out), "No space left on device", "python -m magnet.capture merge")
    spool = Path(re.search(r"kept in (\S+);", proc.stderr_text)[1])
    assert spool.is_dir() and spool.parent == small_disk
    assert not out.exists() and [p.name for p in small_disk.iterdir()] == [spool.name]
    whole = tmp_path / "z.magnet"
    merged = subprocess.run([sys.executable, "-m", "magnet.capture", "merge", spool, whole],
                            capture_output=True, text=True)
    assert merged.returncode == 0, merged.stderr
    trace = magnetlib.open(whole).check()
    assert trace.scan.counts[E.SOCK_SEND] == 120_000 and trace.scan.lost == 0
    assert trace.meta.capture_method == "preload" and "bulk" in trace.meta.filter
    assert not spool.exists()
    again = subprocess.run([sys.executable, "-m", "magnet.capture", "merge", spool],
                           capture_output=True, text=True)
    assert again.returncode == 2 and "not a spool" in again.stderr


# ---------------------------------------------------------- refusals ---
def test_refuses_what_bypasses_libc(library, tmp_path):
    """Static binaries and Go programs: one line, exit 2, no empty trace."""
    cc = require_tool("cc")
    source = tmp_path / "hello.c"
    source.write_text("int main(void) { return 0; }\n")
    static = tmp_path / "static-hello"
    built = subprocess.run([cc, "-static", "-o", static, source], capture_output=True)
    require(built.returncode == 0, "no static libc (libc6-dev) to link a static test program")
    fake_go = tmp_path / "go-hello"
    shutil.copy("/bin/true", fake_go)
    subprocess.run([require_tool("objcopy"), "--add-section", f".go.buildinfo={source}", fake_go],
                   check=True)
    out = tmp_path / "x.magnet"
    assert_clean_error(run_magnet("capture", "--preload", "-o", out, "--", static),
                       "static-hello", "statically linked")
    assert_clean_error(run_magnet("capture", "--preload", "-o", out, "--", fake_go),
                       "go-hello", "Go program")
    script = tmp_path / "script"
    script.write_text(f"#!{static}\n")
    script.chmod(0o755)
    assert_clean_error(run_magnet("capture", "--preload", "-o", out, "--", script), "statically linked")
    assert not out.exists()


def test_bad_input(library, tmp_path):
    out = tmp_path / "x.magnet"
    assert_clean_error(run_magnet("capture", "--preload", "-o", out, "--", "/nonexistent/cmd"),
                       "/nonexistent/cmd", "no such command")
    assert_clean_error(run_magnet("capture", "--preload", "-o", out, "--", "no-such-command-xyz"),
                       "no-such-command-xyz", "no such command")
    plain = tmp_path / "plain"
    plain.write_text("data")
    assert_clean_error(run_magnet("capture", "--preload", "-o", out, "--", plain),
                       "not an executable")
    broken = tmp_path / "broken"
    broken.write_bytes(b"\x7fELF broken")
    broken.chmod(0o755)
    assert_clean_error(run_magnet("capture", "--preload", "-o", out, "--", broken),
                       str(broken), "Exec format error")
    assert_clean_error(run_magnet("capture", "--preload", "-o", tmp_path / "no" / "x.magnet",
                                  "--", "true"), "no such directory")
    assert_clean_error(run_magnet("capture", "--preload", "-o", tmp_path, "--", "true"),
                       "is a directory")
    assert_clean_error(run_magnet("capture", "--preload", "--buffer", "16M", "-o", out, "--", "true"),
                       "--buffer needs the BPF capture")
    assert_clean_error(run_magnet("capture", "--preload", "--port", "80,99999", "-o", out, "--", "true"),
                       "--port", "'99999' is not a port number")
    assert not out.exists()


def test_an_existing_trace_is_kept_unless_forced(library, tmp_path):
    out = tmp_path / "x.magnet"
    out.write_bytes(b"an earlier capture")
    assert_clean_error(run_magnet("capture", "--preload", "-o", out, "--", "true"),
                       str(out), "--force")
    assert out.read_bytes() == b"an earlier capture"
    assert run_magnet("capture", "--preload", "--force", "-o", out, "--", "true").returncode == 0
    assert magnetlib.open(out).meta


@pytest.fixture
def shared():
    """A directory anyone can write (tmp_path's parents may be closed to others)."""
    path = Path(tempfile.mkdtemp(prefix="magnet-preload-test-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_chosen_without_root(library, shared):
    """Not root: `magnet capture` says in one line that it uses the shim, and does;
    asked for what only BPF records, it still says that it needs root."""
    script = ("import socket; s = socket.create_server(('127.0.0.1', 0)); "
              "c = socket.create_connection(s.getsockname()); c.sendall(b'x' * 1000)")
    env = {**os.environ, "MAGNET_CACHE": str(shared / "cache")}

    def capture_as_user(*args):
        return subprocess.run(unprivileged([str(BIN / "magnet"), "capture", *args]),
                              capture_output=True, text=True, env=env, cwd=shared)
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    proc = capture_as_user("-o", "x.magnet", "--", python, "-c", script)
    require("Permission denied" not in proc.stderr, "magnet or python is not readable by nobody")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "magnet: capture: not root, so no BPF: recording the socket calls with the LD_PRELOAD "
        "shim (--preload)"]
    trace = magnetlib.open(shared / "x.magnet")
    assert trace.meta.capture_method == "preload" and trace.scan.bytes[E.SOCK_SEND] == 1000
    proc = capture_as_user("-x", "-o", "y.magnet", "--", python, "-c", script)
    assert proc.returncode == 0, proc.stderr
    trace = magnetlib.open(shared / "y.magnet")
    assert trace.has_ext and set(trace.data["valid"].tolist()) == {preload.EXT_GROUPS}
    proc = capture_as_user("--buffer", "4M", "-o", "z.magnet", "--", "true")
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        "magnet: capture: --buffer needs root (to load BPF programs and create a cgroup)"]


# ---------------------------------------------------------- against BPF ---
def both_captures(tmp_path: Path, name: str, command: list) -> tuple[dict, dict, dict]:
    """One run of `command` under the BPF capture (its cgroup) and the shim at
    once: (BPF streams, preload streams, the app's JSON)."""
    cgroup = capture.make_cgroup(f"{PREFIX}-pl-{name}")
    app_out = tmp_path / f"{name}.json"
    try:
        with capture.Capture(tmp_path / f"{name}-bpf.magnet", cgroup=cgroup,
                             settings=capture.Settings(events="sock")) as cap:
            spool = preload.Spool(tmp_path / f"{name}-preload.magnet")
            env = spool.environment(preload.find_library())
            subprocess.run([*map(str, command), "--out", app_out], env=env, check=True,
                           preexec_fn=lambda: capture.join_cgroup(cgroup))
            time.sleep(0.2)
        assert cap.returncode == 0, cap.error()
        spool.merge(command)
    finally:
        capture.remove_cgroup(cgroup)
    bpf = magnetlib.open(cap.output).check()
    assert bpf.scan.lost == 0
    return (per_stream(bpf), per_stream(magnetlib.open(spool.output).check()),
            json.loads(app_out.read_text()))


@pytest.mark.parametrize("name, command", [
    ("sender", [sys.executable, APP, "bulk", "--total", 3_000_000, "--chunk", 1500]),
    ("threads", [sys.executable, PRELOAD_APP, "threads", "--threads", 4, "--count", 2000]),
    ("fork", [sys.executable, PRELOAD_APP, "fork"]),
    ("http", [sys.executable, PRELOAD_APP, "http", "--fetches", 2]),
])
def test_agrees_with_the_bpf_capture(magnet_read, library, tmp_path, name, command):  # noqa: F811
    """The same run, recorded by both: the same connections (socket cookies),
    the same calls and bytes on each."""
    if name == "http":
        require_tool("curl")
    bpf, shim, _ = both_captures(tmp_path, name, command)
    assert shim == bpf
    assert len(shim) >= 2


def test_sendfile_agrees_with_the_bpf_capture_in_bytes(magnet_read, library, tmp_path):  # noqa: F811
    """sendfile() reaches the kernel's socket layer as one send per chunk it moves:
    BPF records those, the shim the calls; the bytes agree."""
    bpf, shim, app = both_captures(tmp_path, "sendfile",
                                   [sys.executable, APP, "sendfile", "--total", 3_000_000])
    client = app["client"]["cookie"]
    assert shim[client]["sent"] == bpf[client]["sent"] == 3_000_000
    assert shim[client]["sends"] == app["client"]["sends"] <= bpf[client]["sends"]
    assert {k: v for k, v in shim.items() if k != client} == {k: v for k, v in bpf.items() if k != client}
