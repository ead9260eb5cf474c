"""magnet path: real programs (python3's http.server, curl, sh) across the emulated path
between two network namespaces, run as a user runs them (the `magnet` command).  Tests
marked `noroot` check refusals and run anywhere; the rest need root and /dev/net/tun,
and skip without them (fail under CI)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import magnetlib
from magnet.replay import linkem, linklog, netns
from magnetlib.format import Event

from .conftest import BIN, assert_clean_error, require, require_link_emulator, require_tool, run_magnet, unprivileged

MS = 1_000_000
TCP_FIN, TCP_SYN, TCP_ACK = 0x01, 0x02, 0x10


@pytest.fixture(autouse=True)
def namespaces_here(request):
    """Every test runs the emulator on TUN devices, unless marked `noroot` (arguments, refusals)."""
    if not request.node.get_closest_marker("noroot"):
        require_link_emulator()


def leftovers(pid: int) -> list[str]:
    """What a run with this pid left behind: namespaces, cgroups, /etc/netns files, emulators."""
    prefix = f"mgpa{pid}"
    found = [n for n in netns.listed() if n.startswith(prefix + "-")]
    found += [str(p) for p in Path("/etc/netns").glob(f"{prefix}-*")]
    from magnet import capture
    found += [str(p) for p in (capture.cgroup2_root() / capture.CGROUP_PARENT).glob(f"{prefix}-*")]
    found += [f"process {p}" for p in netns._with_argument(f"--name={prefix}-s".encode(), exact=False)]
    return found


def marked(marker: str) -> list[int]:
    """Processes whose command line holds `marker` (NULs between arguments)."""
    return netns._with_argument(marker.encode())


# ------------------------------------------------------------------ refusals ---
@pytest.mark.noroot
def test_a_missing_program_is_named_with_its_package(tmp_path):
    """Before anything is built: a client or server program that is not installed is named
    in one line (with its Debian package when known), exit 2; without root, the run says so."""
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    proc = subprocess.run([str(BIN / "magnet"), "path", "--", "curl", "http://server/"], env=env,
                          capture_output=True, text=True)
    proc.stderr_text = proc.stderr
    assert_clean_error(proc, "curl: command not found", "apt-get install curl")
    proc = run_magnet("path", "--server", "no-such-daemon -p 1", "--", "true")
    assert_clean_error(proc, "--server", "no-such-daemon: command not found")
    proc = run_magnet("path", "--", "no-such-client")
    assert_clean_error(proc, "client command", "no-such-client")


@pytest.mark.noroot
def test_knobs_a_real_program_chooses_itself_are_refused():
    assert_clean_error(run_magnet("path", "--read-size", "8KiB", "--", "true"), "--read-size")
    assert_clean_error(run_magnet("path", "--rate", "10Mbps,5Mbps", "--", "true"), "one path")
    assert_clean_error(run_magnet("path", "--preload", "--", "true"), "--preload", "--capture")


@pytest.mark.noroot
def test_without_root_it_says_so():
    proc = subprocess.run(unprivileged([str(BIN / "magnet"), "path", "--", "true"]), capture_output=True,
                          text=True)
    proc.stderr_text = proc.stderr
    assert_clean_error(proc, "needs root")


# ------------------------------------------------------------- a real fetch ---
CURL_TIMES = "%{time_namelookup} %{time_connect} %{time_total} %{size_download} %{speed_download}\\n"


def test_curl_fetches_across_the_path_with_its_rtt_and_rate(tmp_path):
    """curl fetches 2 MB from python3's http.server across 10 Mbit/s, 30 ms each way: the
    client's measured RTT (the kernel's smoothed RTT of curl's socket, in the TCP state of
    the client's capture) is within 5 % of 60 ms, and so is the RTT magnet printed (within
    1 % on a quiet machine: make bench); curl's handshake (time_connect minus
    time_namelookup) takes no less than the path's 60 ms; its throughput is at most
    10 Mbit/s.  --capture
    gives both sides' records of the connection: the same 4-tuple, SYN and FIN in
    tcp_flags at the device layer, the bytes at the socket layer; HOSTNAME client and
    server.  --log: the file came back through the reverse link's queue (at most 100
    packets), and magnet printed the log's summary."""
    require_tool("curl")
    (tmp_path / "www").mkdir()
    size = 2_000_000
    (tmp_path / "www" / "f.bin").write_bytes(os.urandom(size))
    trace = tmp_path / "t"
    proc = run_magnet("path", "--rate", "10Mbps", "--delay", "30ms", "--capture", trace, "--log", tmp_path / "log",
                      "--server", f"python3 -m http.server 8000 --directory {tmp_path / 'www'}", "--",
                      "curl", "-sS", "-o", tmp_path / "got.bin", "-w", CURL_TIMES, "http://server:8000/f.bin")
    assert proc.returncode == 0, proc.stderr_text
    lookup, connect, total, got, speed = map(float, proc.stdout_text.split())
    assert got == size and (tmp_path / "got.bin").read_bytes() == (tmp_path / "www" / "f.bin").read_bytes()
    assert (connect - lookup) * 1000 >= 59.5, connect - lookup     # no shorter than the path's RTT
    assert speed * 8 <= 10e6, speed * 8
    printed = re.search(r"RTT measured: ([\d.]+) ms median", proc.stderr_text)
    assert printed and abs(float(printed.group(1)) - 60) <= 3, proc.stderr_text
    assert "duplex: the same link each way" in proc.stderr_text
    sides = {side: magnetlib.open(f"{trace}.{side}.magnet") for side in ("client", "server")}
    assert {side: t.meta.hostname for side, t in sides.items()} == {"client": "client", "server": "server"}
    conns = {side: connection(t.records) for side, t in sides.items()}
    assert conns["client"]["tuple"] == conns["server"]["tuple"][::-1] != (0, 0)
    client, server = conns["client"], conns["server"]
    assert abs(client["srtt_ms"] - 60) <= 3, client["srtt_ms"]
    assert client["syn_sent"] and server["synack_sent"] and client["synack_got"]
    assert client["fin_sent"] and client["fin_got"] and server["fin_sent"] and server["fin_got"]
    assert server["sock_send"] >= size and client["sock_recv"] == server["sock_send"]
    back = linklog.read(tmp_path / "log").summaries()[1]          # server -> client
    assert back.delivered_bytes > size and back.queue_peak_packets <= 100
    assert f"link log {back.line()}" in proc.stderr_text


def connection(records: np.ndarray) -> dict:
    """The one traced TCP connection (to port 8000) at the device and socket layers."""
    ours = records[(records["sport"] == 8000) | (records["dport"] == 8000)]
    sent, got = (ours[ours["event"] == e] for e in (Event.DEV_SEND, Event.DEV_RECV))

    def has(rows, flags: int, ack: bool) -> bool:
        f = rows["tcp_flags"]
        return bool((((f & flags) == flags) & (((f & TCP_ACK) != 0) == ack)).any())

    def sock(event) -> int:
        return int(ours["size"][ours["event"] == event].sum())
    srtt = ours["srtt_us"][ours["srtt_us"] > 0]
    return {"tuple": (int(sent[0]["sport"]), int(sent[0]["dport"])),
            "syn_sent": has(sent, TCP_SYN, False), "synack_sent": has(sent, TCP_SYN, True),
            "synack_got": has(got, TCP_SYN, True), "fin_sent": has(sent, TCP_FIN, True),
            "fin_got": has(got, TCP_FIN, True), "sock_send": sock(Event.SOCK_SEND),
            "sock_recv": sock(Event.SOCK_RECV), "srtt_ms": float(np.median(srtt)) / 1e3}


# --------------------------------------------------- the client's surroundings ---
def test_client_sees_the_server_by_name_and_its_exit_status_is_returned(tmp_path):
    """Without --server: MAGNET_SERVER and the host name `server` reach the server's
    namespace (nothing listens: connection refused, across the path); the exit status
    is the client's; --user runs it as that user; the seed of what the path draws is said."""
    script = ('echo "$MAGNET_SERVER"; getent hosts server; id -u; '
              'python3 -c "import socket; socket.create_connection((\'server\', 9))" 2>&1 | tail -1; exit 7')
    proc = run_magnet("path", "--delay", "5ms", "--jitter", "1ms", "--seed", "4", "--user", "nobody", "--",
                      "sh", "-c", script)
    assert proc.returncode == 7, proc.stderr_text
    assert "  seed 4: the draws of its jitter\n" in proc.stderr_text
    lines = proc.stdout_text.splitlines()
    assert lines[0] == "10.203.1.2" and lines[1].split() == ["10.203.1.2", "server"]
    assert lines[2] == "65534" and "Connection refused" in lines[3]
    assert "(as nobody)" in proc.stderr_text


def test_tcp_knobs_reach_the_programs_sockets(tmp_path):
    """--cc cubic (which a namespace may not default to here: set by the sockops program
    on both ends) and --nagle off (TCP_NODELAY, both ends); each side says what it got."""
    require(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().count("cubic") > 0,
            "no cubic in this kernel")
    show = ("import socket, sys; s = {}; "
            "print(s.getsockopt(6, socket.TCP_CONGESTION, 16).rstrip(b'\\0').decode(), "
            "s.getsockopt(6, socket.TCP_NODELAY), flush=True); ")
    server = show.format("socket.socket(); s.bind(('0.0.0.0', 8000)); s.listen(); s = s.accept()[0]")
    client = show.format("socket.create_connection(('server', 8000))") + "s.recv(1)"
    out = tmp_path / "server.out"
    proc = run_magnet("path", "--delay", "5ms", "--cc", "cubic", "--nagle", "off",
                      "--server", f"python3 -c \"{server}\" > {out}", "--", "python3", "-c", client)
    assert proc.returncode == 0, proc.stderr_text
    assert proc.stdout_text.split() == ["cubic", "1"] and out.read_text().split() == ["cubic", "1"]
    assert "sockops" in proc.stderr_text


def test_a_udp_server_is_ready_once_bound():
    """--ready udp:PORT: a server that only binds a UDP port (no TCP listener) is ready."""
    server = "python3 -c \"import socket, time; s = socket.socket(2, 2); s.bind(('0.0.0.0', 9)); time.sleep(60)\""
    proc = run_magnet("path", "--delay", "1ms", "--ready", "udp:9", "--ready-timeout", "20s",
                      "--server", server, "--", "true")
    assert proc.returncode == 0 and "ready on udp port 9" in proc.stderr_text, proc.stderr_text
    assert_clean_error(run_magnet("path", "--ready", "sctp:9", "--", "true"), "--ready", "udp:PORT")


# ------------------------------------------------------------- bad servers ---
def test_a_server_never_ready_is_reported_and_everything_torn_down():
    """A server that never listens on --ready's port: one line after --ready-timeout, exit
    2, no namespace, cgroup, file or process left (the server included)."""
    proc = subprocess.Popen([str(BIN / "magnet"), "path", "--ready", "8000", "--ready-timeout", "1s",
                             "--server", "sleep 31.25", "--", "true"], stderr=subprocess.PIPE, text=True)
    err = proc.communicate(timeout=60)[1]
    lines = [line for line in err.splitlines() if line.startswith("magnet:")]
    assert proc.returncode == 2 and len(lines) == 1 and "not listening on tcp port 8000 after 1 s" in lines[0], err
    assert "Traceback" not in err
    assert not leftovers(proc.pid) and not marked("\0sleep\x0031.25\0")


# ----------------------------------------------------------------- signals ---
def test_ctrl_c_at_the_terminal_reaches_the_client_alone():
    """On a terminal the client is the foreground job: Ctrl-C goes to it, not to magnet,
    and the client decides (this one traps it and exits 7: magnet exits 7, no teardown
    message)."""
    import pty
    import select
    script = "trap 'echo trapped; exit 7' INT; echo x$((6*7))x; sleep 20 & wait"
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(str(BIN / "magnet"), ["magnet", "path", "--delay", "1ms", "--", "sh", "-c", script])
    out, deadline = b"", time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if b"x42x" in out and b"\x03" not in out:
                os.write(fd, b"\x03")
                out += b"\x03"
            if select.select([fd], [], [], 1)[0]:
                try:
                    data = os.read(fd, 4096)
                except OSError:                       # the terminal closed: magnet is done
                    break
                if not data:
                    break
                out += data
    finally:
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGTERM)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        os.close(fd)
    text = out.decode(errors="replace")
    assert status == 7 and "trapped" in text and "interrupted" not in text, text[-2000:]
    assert not leftovers(pid)



@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_leaves_nothing_behind(sig, tmp_path):
    """magnet path is signalled while the client runs (a server listening): SIGTERM and
    SIGINT are passed on to the client, everything is torn down, exit 128+N; after
    SIGKILL the guard process removes it all, the run's scratch directory too (it was
    left in /tmp)."""
    marker = f"{31 + sig / 100:.2f}"
    scratch = tmp_path / "tmp"                     # the run's TMPDIR, to see what it leaves
    scratch.mkdir()
    proc = subprocess.Popen([str(BIN / "magnet"), "path", "--delay", "1ms", "--server",
                             "python3 -m http.server 8000", "--", "sh", "-c", f"sleep {marker}"],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(scratch)})
    client = f"\0sleep\0{marker}\0"              # not in magnet's own command line
    deadline = time.monotonic() + 60
    while not marked(client) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(client), "the client never started"
    proc.send_signal(sig)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode in (128 + sig, -sig), (proc.returncode, err)
    if sig != signal.SIGKILL:
        assert f"interrupted ({signal.Signals(sig).name})" in err and "Traceback" not in err
    deadline = time.monotonic() + 20                # SIGKILL: the guard's sweep
    while (leftovers(proc.pid) or marked(client) or any(scratch.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not leftovers(proc.pid) and not marked(client)
    assert not list(scratch.iterdir())
