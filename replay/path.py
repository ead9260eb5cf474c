"""Real programs across an emulated path: the engine of `magnet path` (mahimahi's mm-link
shape, with both ends in network namespaces of their own).

    from magnet.replay import path
    from magnet.replay.scenario import Path, Scenario
    run = path.run(Scenario(stacks=1, path=(Path(rate_bps=10_000_000, duplex=True),)),
                   ["curl", "-s", "-o", "/dev/null", "http://server:8000/f"],
                   server_cmd="python3 -m http.server 8000", capture="out/t")
    run.status, run.rtt.median_ms, run.traces, run.stats.line()

    client side                                    server side
    PREFIX-n0 (10.203.1.1, "client") =[linkem]= PREFIX-n1 (10.203.1.2, "server")
    cgroup magnet/PREFIX-client                    cgroup magnet/PREFIX-server

The path is the scenario's one path (replay.wan: one linkem process, both directions;
duplex as the scenario says, `magnet path` defaults it on), its cross traffic
wan.crossing()'s.  The TCP knobs a real program's sockets inherit are sysctls of both
namespaces; the rest (per-socket options) are the program's own (linux_tcp()).  Each
side's processes live in a cgroup: what the BPF capture records (one magnet-read per
side, HOSTNAME `client`/`server`, extended records), and how every process of a side
is found and ended, daemons included.  The server runs in a session of its own.
The client gets its own process group; when our standard input is the terminal's
foreground it is made the foreground, so Ctrl-C reaches it alone (as a shell's job).

Signals (SIGINT, SIGTERM, SIGHUP) are recorded (magnetlib.signals) and acted on where
the run checks and waits: while the client runs, passed on to its process group; then
everything is torn down and Interrupted raised.  Nothing outlives the run: namespaces, devices, emulator,
cgroups (and their processes), captures and /etc/netns files go on every exit, and
a guard process (replay.netns.Guard) sweeps them if this process is killed.
"""
from __future__ import annotations

import ctypes
import os
import pwd
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from magnet import capture
from magnet.capture import preload
from magnetlib import knobs, signals
from magnetlib.errors import MagnetError

from . import cross, linkem, linuxtcp, netns, sockopts, wan
from .errors import ReplayError
from .scenario import CROSS_LEAD_NS, Scenario

FAMILY = "mgpa"                       # namespaces, devices and cgroups: mgpa<pid>-...
SUBNET = "10.203"
SIDES = ("client", "server")
GRACE_S = 5.0                         # what a side gets to end after SIGTERM, before SIGKILL
LINGER_S = 0.2                        # closing handshakes after the client ends, before the captures stop
PROBES = 10                           # UDP round trips measured before the programs start
PROBE_GAP_S = 0.02
CROSS_WARMUP_S = CROSS_LEAD_NS / 1e9       # the client starts this long into the cross traffic,
                                        # where ns-3's whole-application replay starts
# Programs whose Debian package is not named after them (the missing-command message).
PACKAGES = {"h2load": "nghttp2-client", "redis-benchmark": "redis-tools", "redis-cli": "redis-tools",
            "nginx": "nginx-light", "sshd": "openssh-server", "scp": "openssh-client",
            "sftp": "openssh-client", "ssh": "openssh-client", "mosquitto_pub": "mosquitto-clients",
            "mosquitto_sub": "mosquitto-clients", "python3": "python3", "ffmpeg": "ffmpeg",
            "iperf3": "iperf3", "curl": "curl", "wget": "wget", "memcached": "memcached",
            "redis-server": "redis-server", "mosquitto": "mosquitto", "vsftpd": "vsftpd"}


class PathError(ReplayError):
    """magnet path cannot run as asked: one line, "WHAT: problem"."""


Interrupted = signals.Interrupted       # a recorded signal, raised where the run checked


# ------------------------------------------------------------------ users ---
@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    def give(self, path: Path) -> None:
        """A file, or a directory and its files, made this user's (what magnet wrote as root)."""
        if self.uid == os.geteuid():
            return
        for item in [path, *(path.iterdir() if path.is_dir() else [])]:
            os.chown(item, self.uid, self.gid)

    def wrap(self, cmd: list[str]) -> list[str]:
        """`cmd` run as this user (nothing to do when that is who we are)."""
        if self.uid == os.geteuid():
            return cmd
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--", *cmd]


def user(name: str | None) -> User:
    """A user by name or number; None: the one who ran sudo (SUDO_UID), else ourselves."""
    try:
        if name is None:
            uid = int(os.environ["SUDO_UID"]) if os.geteuid() == 0 and "SUDO_UID" in os.environ else os.geteuid()
            entry = pwd.getpwuid(uid)
        else:
            entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, ValueError):
        raise PathError("--user", f"no such user: {name}") from None
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid)


# --------------------------------------------------------------- commands ---
def check_command(argv: list[str], what: str) -> None:
    """PathError naming a program that is not installed (and its Debian package)."""
    if not argv:
        raise PathError(what, "an empty command")
    name = argv[0]
    found = (os.path.isfile(name) and os.access(name, os.X_OK)) if "/" in name else shutil.which(name)
    if not found:
        package = PACKAGES.get(os.path.basename(name))
        raise PathError(what, f"{name}: command not found"
                        + (f" (Debian: apt-get install {package})" if package else ""))


def server_argv(cmd: str) -> list[str]:
    """The server command as the shell runs it; its program checked."""
    try:
        words = shlex.split(cmd)
    except ValueError as e:
        raise PathError("--server", f"{cmd!r}: {e}") from None
    while words and "=" in words[0] and not words[0].startswith("="):    # VAR=value prefixes
        words.pop(0)
    if words and words[0] not in ("exec", "env"):
        check_command(words, "--server")
    return ["sh", "-c", cmd]


# -------------------------------------------------------------------- TCP ---
ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


@dataclass
class Applied:
    """What Linux is told for the programs' TCP: sysctls of both namespaces, options the
    sockops program sets on every connection of both sides (replay.sockopts), in words."""
    cc: str
    sysctls: list[str]
    sockopts: dict
    lines: list[str]


def linux_tcp(tcp) -> Applied:
    """The scenario's TCP for programs magnet did not write.  SACK, timestamps and window
    scaling are sysctls of both namespaces; the congestion control too where a namespace
    may default to it (tcp_allowed_congestion_control), else the sockops program sets it
    on every connection as it is established, as it sets TCP_NODELAY for --nagle off.
    What only the program chooses (its read size) is refused when asked to differ."""
    if tcp.read_size != type(tcp)().read_size:
        raise PathError("--read-size", "a real program reads with its own buffer size; "
                                       "magnet path cannot set it")
    for name in ("delack_count", "delack_timeout_ns", "mss", "sndbuf", "rcvbuf"):
        if getattr(tcp, name) is not None:
            raise PathError(f"--{name.removesuffix('_ns').replace('_', '-')}", "not a knob of magnet path")
    try:
        plan = linuxtcp.plan(tcp, True, linuxtcp.available_cc())
    except ValueError as e:
        raise PathError("magnet path", str(e)) from None
    try:
        allowed = ALLOWED_CC.read_text().split()
    except OSError:
        allowed = []
    sysctls, opts = list(plan.sysctls), {}
    if plan.cc in allowed:
        sysctls.insert(0, f"net.ipv4.tcp_congestion_control={plan.cc}")
    else:
        opts["cc"] = plan.cc
    if not tcp.nagle:
        opts["nodelay"] = True
    if opts:
        why = sockopts.unavailable()
        if why:
            flag = "--nagle off" if "cc" not in opts else f"--cc {tcp.cc}"
            raise PathError(flag, why + (f" (a namespace may only default to {', '.join(allowed)})"
                                         if "cc" in opts else ""))
    lines = ["sysctls of both namespaces: " + ", ".join(s.removeprefix("net.ipv4.") for s in sysctls)]
    if "cc" in opts:
        lines.append(f"congestion control {plan.cc} set on every connection of both sides as it is "
                     f"established (sockops TCP_CONGESTION; a namespace may only default to "
                     f"{', '.join(allowed)})")
    else:
        lines[0] += f" (every socket starts with {plan.cc}; a program may choose another)"
    lines.append("Nagle off: TCP_NODELAY set on every connection of both sides as it is established "
                 "(sockops; a program may clear it afterwards)" if not tcp.nagle else
                 "Nagle: each program's own choice (on is Linux's default; many set TCP_NODELAY, curl "
                 "and nginx among them)")
    lines.append("read sizes, buffers and MSS: each program's own, or Linux's")
    return Applied(plan.cc, sysctls, opts, lines)


# ------------------------------------------------------------------ probe ---
@dataclass
class Rtt:
    """Round trips measured across the path before the programs start."""
    samples_ns: np.ndarray
    method: str = (f"{PROBES} UDP datagrams of 64 bytes from the client's namespace to the server's "
                   "and back, sent and echoed by magnet itself, before the programs started")

    @property
    def median_ms(self) -> float:
        return float(np.median(self.samples_ns)) / 1e6 if len(self.samples_ns) else float("nan")

    @property
    def min_ms(self) -> float:
        return float(self.samples_ns.min()) / 1e6 if len(self.samples_ns) else float("nan")

    def line(self) -> str:
        if not len(self.samples_ns):
            return "RTT: no probe came back"
        return (f"RTT measured: {self.median_ms:.2f} ms median, {self.min_ms:.2f} ms least "
                f"({len(self.samples_ns)} of {PROBES} probes back; {self.method})")


CLONE_NEWNET = 0x40000000


def socket_in(ns: str, kind: int = socket.SOCK_DGRAM) -> socket.socket:
    """A socket of network namespace `ns`, made by this thread entering it and coming back."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(f"{linkem.NETNS_DIR}/{ns}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"entering network namespace {ns}")
        try:
            return socket.socket(socket.AF_INET, kind)
        finally:
            if libc.setns(home, CLONE_NEWNET) != 0:
                raise SystemExit(f"magnet: cannot return to our network namespace: "
                                 f"{os.strerror(ctypes.get_errno())}")
    finally:
        os.close(home)
        os.close(target)


def probe_rtt(client: tuple[str, str], server: tuple[str, str]) -> Rtt:
    """PROBES round trips client -> server -> client ((namespace, address) each)."""
    a, b = socket_in(client[0]), socket_in(server[0])
    with a, b:
        a.bind((client[1], 0))
        b.bind((server[1], 0))
        to, rtts, payload = b.getsockname(), [], bytearray(64)
        for seq in range(PROBES):
            payload[:4] = seq.to_bytes(4, "little")
            sent = time.monotonic_ns()
            a.sendto(payload, to)
            if signals.readable(b.fileno(), 2.0):
                data, peer = b.recvfrom(256)
                b.sendto(data, peer)
                while signals.readable(a.fileno(), 2.0):
                    if a.recv(256)[:4] == payload[:4]:
                        rtts.append(time.monotonic_ns() - sent)
                        break
            signals.sleep(max(0.0, PROBE_GAP_S - (time.monotonic_ns() - sent) / 1e9))
    return Rtt(np.array(rtts, np.int64))


# ---------------------------------------------------------------- capture ---
class SideCapture(capture.Capture):
    """magnet-read on one side's cgroup, every layer with extended records (ADDR: the
    4-tuple, tcp_flags: SYN/FIN/RST), its trace's HOSTNAME the side's name (it runs in
    a UTS namespace of its own named so)."""

    def __init__(self, output: Path, cgroup: Path, side: str):
        super().__init__(output, cgroup=cgroup, settings=capture.Settings(ext=True, force=True))
        self.side = side

    def command(self, ready_fd: int) -> list[str]:
        return ["unshare", "--uts", "--", "sh", "-c", 'hostname "$1" && shift && exec "$@"', "sh",
                self.side, *super().command(ready_fd)]


class SideSpool(preload.Spool):
    """The LD_PRELOAD shim's spool of one side: its trace's HOSTNAME the side's name."""

    def __init__(self, output: Path, side: str, owner: User):
        super().__init__(output, ext=True)
        self.side = side
        os.chown(self.path, owner.uid, owner.gid)

    def meta(self, command: list[str]):
        return replace(super().meta(command), hostname=self.side)


# -------------------------------------------------------------------- run ---
@dataclass
class PathRun:
    """What a run of `magnet path` did."""
    status: int                                   # the client's exit status (128+N: killed by signal N)
    rtt: Rtt
    traces: dict[str, Path]                       # side -> trace (with capture)
    stats: linkem.Stats | None
    applied: str                                  # the path and TCP, in words
    server_port: int | None = None
    elapsed_s: float = 0.0                        # the client's run
    notes: list[str] = field(default_factory=list)
    log_dir: Path | None = None                   # linkem's per-packet log (replay.linklog)


@dataclass
class Side:
    name: str
    ns: str
    addr: str
    cgroup: Path
    user: User
    sockopts: sockopts.SockOpts | None = None

    def sockopts_line(self) -> str:
        counts = self.sockopts.stop()
        return (f"socket options set on {counts.get('applied', 0)} connections of the {self.name}"
                + (f", refused by {counts['refused']}" if counts.get("refused") else ""))

    def procs(self) -> list[int]:
        try:
            return [int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()]
        except OSError:
            return []


def check(scenario: Scenario) -> None:
    """PathError unless this machine can run `scenario` as one path."""
    if scenario.stacks != 1 or len(scenario.path) != 1:
        raise PathError("magnet path", "one path (a Scenario of one stack): give each path flag one value")
    why = linkem.unavailable()
    if why:
        raise PathError("magnet path", why + ("; run it with sudo" if os.geteuid() else ""))
    try:
        linkem.check(scenario.path[0])
        for c in scenario.cross:
            cross.spec_args(c, scenario.path[0].rate_bps)
    except ValueError as e:
        raise PathError("magnet path", str(e)) from None
    if not shutil.which("setpriv") or not shutil.which("unshare"):
        raise PathError("magnet path", "needs setpriv and unshare (Debian: apt-get install util-linux)")


def run(scenario: Scenario, client_cmd: list[str] | None = None, server_cmd: str | None = None, *,
        ready_port: int | str | None = None, ready_timeout_s: float = 30.0,
        capture: str | os.PathLike | None = None,
        preload_shim: bool = False, log: str | os.PathLike | None = None, client_user: str | None = None,
        server_user: str | None = None, env: dict | None = None, stdin=None, stdout=None, stderr=None,
        realtime: bool = True, say=lambda line: print(line, file=sys.stderr, flush=True)) -> PathRun:
    """Run `client_cmd` (default: a shell) in the client namespace across the scenario's path,
    after `server_cmd` (a shell command) is listening in the server namespace; the server is
    ended when the client exits.  `capture`: T gives T.client.magnet and T.server.magnet (BPF,
    or the LD_PRELOAD shim with `preload_shim`); `log`: a directory for linkem's per-packet
    log (replay.linklog).
    `say` gets the lines that describe the run.  PathError for what cannot run, Interrupted
    after cleaning up when a signal came."""
    client_cmd = list(client_cmd) if client_cmd else [os.environ.get("SHELL") or "/bin/sh"]
    check_command(client_cmd, "client command")
    server_argv_ = server_argv(server_cmd) if server_cmd else None
    try:
        ready = ready_spec(ready_port)
    except ValueError as e:
        raise PathError("--ready", str(e).removeprefix("--ready ")) from None
    check(scenario)
    tcp = linux_tcp(scenario.tcp)
    users = {"client": user(client_user), "server": user(server_user if server_user is not None else client_user)}
    with signals.honoured(), ExitStack() as stack:
        return _run(stack, scenario, tcp, client_cmd, server_cmd, server_argv_, ready,
                    ready_timeout_s, capture, preload_shim, log, users, env, (stdin, stdout, stderr),
                    realtime, say)


def _run(stack: ExitStack, scenario: Scenario, tcp: Applied, client_cmd, server_cmd,
         server_argv_, ready, ready_timeout_s, capture_to, preload_shim, log, users, env, stdio,
         realtime, say) -> PathRun:
    work = netns.scratch(run_prefix())
    stack.callback(shutil.rmtree, work, True)
    net, sides = set_up(stack, scenario, tcp, users, work, log, realtime)
    applied = describe(net, scenario, tcp)
    say(applied)
    captures = Captures(capture_to, sides, preload_shim, users["client"]) if capture_to else None
    if captures:
        captures.start(stack)
        say("  " + captures.describe())
    signals.check()
    s = net.stack(1)
    base_env = {**os.environ, **(env or {}), "MAGNET_SERVER": s.right_addr, "MAGNET_CLIENT": s.left_addr}
    port = None
    if server_argv_:
        server_env = captures.environment("server", base_env) if captures else base_env
        port = start_server(sides["server"], server_argv_, server_cmd, ready, ready_timeout_s, work,
                            server_env, say)
        base_env["MAGNET_SERVER_PORT"] = str(port)
    rtt = probe_rtt((s.left_ns, s.left_addr), (s.right_ns, s.right_addr))
    say("  " + rtt.line())
    client_env = captures.environment("client", base_env) if captures else base_env
    with wan.crossing(net, scenario, [1], cc=tcp.cc, warmup_s=CROSS_WARMUP_S) as traffic:
        signals.check()
        status, elapsed = run_client(sides["client"], client_cmd, client_env, stdio, say)
    for side in ("server", "client"):
        end_side(sides[side])
    time.sleep(LINGER_S)
    notes = captures.stop({"client": client_cmd, "server": server_argv_ or []}) if captures else []
    notes += [side.sockopts_line() for side in sides.values() if side.sockopts]
    notes += [wan.cross_line(moved) for moved in traffic.moved.values()]
    run = PathRun(status, rtt, captures.traces if captures else {}, net.stop(1), applied, port, elapsed,
                  notes, Path(log) if log else None)
    report(run, users["client"], say)
    return run


def run_prefix() -> str:
    """This run's names: its namespaces, devices, cgroups and scratch directory."""
    return f"{FAMILY}{os.getpid()}"


def set_up(stack: ExitStack, scenario: Scenario, tcp: Applied, users: dict[str, User], work: Path,
           log, realtime: bool) -> tuple[wan.Wan, dict[str, Side]]:
    """The namespaces and the emulator (replay.wan), each side's hosts file, cgroup and
    socket options; everything undone when `stack` closes."""
    prefix = run_prefix()
    netns.sweep_stale(FAMILY)
    stack.callback(netns.sweep_cgroups, prefix)            # last: whatever an interrupt left
    try:
        net = stack.enter_context(wan.chain(prefix, scenario, work, subnet=SUBNET, sysctls=tcp.sysctls,
                                            realtime=realtime, log_dir=log))
    except netns.NetnsError as e:
        raise PathError("network namespaces", str(e)) from None
    s = net.stack(1)
    sides = {"client": Side("client", s.left_ns, s.left_addr, None, users["client"]),
             "server": Side("server", s.right_ns, s.right_addr, None, users["server"])}
    hosts = "".join(f"{side.addr}\t{side.name}\n" for side in sides.values())
    for side in sides.values():
        stack.callback(remove_etc, side.ns)
        write_etc(side.ns, "hosts", f"127.0.0.1\tlocalhost\n{hosts}")
        side.cgroup = capture.make_cgroup(f"{prefix}-{side.name}")
        stack.callback(end_side, side)
        if tcp.sockopts:
            try:
                side.sockopts = sockopts.SockOpts(side.cgroup, **tcp.sockopts)
            except MagnetError as e:
                raise PathError("socket options", str(e)) from None
            stack.callback(side.sockopts.stop)
    signals.check()
    return net, sides


def describe(net: wan.Wan, scenario: Scenario, tcp: Applied) -> str:
    """What the run applies, before the programs start."""
    s, path = net.stack(1), scenario.path[0]
    cross = ([f"  cross traffic: {'; '.join(c.describe() for c in scenario.cross)}"
              + (" (both directions)" if path.duplex else "")] if scenario.cross else [])
    drawn = [what for what, there in (("random loss", path.loss), ("jitter", path.jitter_ns),
                                      ("cross traffic", scenario.cross)) if there]
    seed = [f"  seed {scenario.seed}: the draws of its {', '.join(drawn)}"] if drawn else []
    return "\n".join([f"magnet path: client {s.left_ns} ({s.left_addr}) -- linkem -- server "
                      f"{s.right_ns} ({s.right_addr})", f"  path: {path.describe()}", *cross, *seed,
                      *(f"  TCP: {line}" for line in tcp.lines), net.describe()])


def report(run: PathRun, owner: User, say) -> None:
    """What the run did, after it (the link log given to `owner`)."""
    say(f"magnet path: client exited with status {run.status} after {run.elapsed_s:.2f} s")
    say(f"  path: {run.stats.line()}")
    for line in run.stats.log_summary or []:
        say(f"  link log {line}")
    if run.log_dir:
        say(f"  link log: {run.log_dir} (magnet linklog {run.log_dir} --plot FILE.png)")
        owner.give(run.log_dir)
    for note in run.notes:
        say(f"  note: {note}")


# -------------------------------------------------------------- the sides ---
def write_etc(ns: str, name: str, text: str) -> None:
    """/etc/NAME as the programs of namespace `ns` see it (ip netns exec bind-mounts it)."""
    folder = netns.NETNS_ETC / ns
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def remove_etc(ns: str) -> None:
    shutil.rmtree(netns.NETNS_ETC / ns, ignore_errors=True)
    try:
        netns.NETNS_ETC.rmdir()                  # only if no other namespace has files there
    except OSError:
        pass


def end_side(side: Side) -> None:
    """Every process of a side ended: SIGTERM, then SIGKILL after GRACE_S; its cgroup removed."""
    if side.cgroup is None or not side.cgroup.exists():
        return
    signal_all(side, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while side.procs() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        capture.remove_cgroup(side.cgroup)          # SIGKILLs what remains
    except capture.CaptureError:
        pass


def signal_all(side: Side, sig: int) -> None:
    for pid in side.procs():
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def spawn(side: Side, argv: list[str], env: dict, *, session: bool, stdio=(None, None, None),
          foreground: bool = False) -> subprocess.Popen:
    """`argv` in the side's namespace and cgroup, as its user; a session of its own
    (`session`) or a process group of its own (made the terminal's foreground with `foreground`)."""
    def preexec():
        capture.join_cgroup(side.cgroup)
        if session:
            os.setsid()
            return
        os.setpgid(0, 0)
        if foreground:
            old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            os.tcsetpgrp(0, os.getpgrp())
            signal.signal(signal.SIGTTOU, old)
    cmd = ["ip", "netns", "exec", side.ns, *side.user.wrap(argv)]
    return subprocess.Popen(cmd, env=env, preexec_fn=preexec, stdin=stdio[0], stdout=stdio[1],
                            stderr=stdio[2])


def in_foreground() -> bool:
    """Whether our standard input is a terminal whose foreground process group is ours."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def run_client(side: Side, argv: list[str], env: dict, stdio, say) -> tuple[int, float]:
    """The client to its end: (exit status, seconds).  A signal to us is passed on to its
    process group, which has GRACE_S to end before it is killed; then Interrupted."""
    foreground = stdio[0] is None and in_foreground()
    say(f"  client: {shlex.join(argv)}" + (f" (as {side.user.name})" if side.user.uid != os.geteuid() else ""))
    start = time.monotonic()
    proc = spawn(side, argv, env, session=False, stdio=stdio, foreground=foreground)
    pidfd = os.pidfd_open(proc.pid)
    try:
        signals.readable(pidfd)
    except Interrupted as e:
        _signal_group(proc.pid, e.signum)
        if not signals.readable(pidfd, GRACE_S):           # later signals are not raised
            _signal_group(proc.pid, signal.SIGKILL)
        raise
    finally:
        os.close(pidfd)
        if foreground:
            old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            try:
                os.tcsetpgrp(0, os.getpgrp())
            except OSError:
                pass
            signal.signal(signal.SIGTTOU, old)
    proc.wait()
    status = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    return status, time.monotonic() - start


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def ready_spec(value: int | str | None) -> tuple[str, int | None]:
    """--ready as (protocol, port): PORT or tcp:PORT (a TCP listener), udp:PORT (a bound UDP
    socket); None: any TCP listener.  ValueError naming the problem."""
    if value is None or isinstance(value, int):
        proto, port = "tcp", value
    else:
        proto, _, text = str(value).rpartition(":")
        proto = proto.lower() or "tcp"
        if proto not in ("tcp", "udp") or not text.isdigit():
            raise ValueError(f"--ready {value}: PORT, tcp:PORT or udp:PORT")
        port = int(text)
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"--ready {value}: a port from 1 to 65535")
    return proto, port


def start_server(side: Side, argv: list[str], cmd: str, ready: tuple[str, int | None], timeout_s: float,
                 work: Path, env: dict, say) -> int:
    """The server started and ready (ready_spec(): listening on a TCP port, or bound to a UDP
    one): the port.  Readiness is read from the namespace's socket tables, never by
    connecting (a probe connection would be part of the application's capture)."""
    proto, wanted = ready
    log = work / "server.log"
    with open(log, "wb") as out:
        proc = spawn(side, argv, env, session=True, stdio=(subprocess.DEVNULL, out, out))
    start = time.monotonic()
    while True:
        ports = listening(side, proto)
        found = [p for p, _ in ports if wanted in (None, p)]
        if found:
            port = found[0]
            local = [addr for p, addr in ports if p == port]
            say(f"  server: {cmd} ready on {proto} port {port} (after {time.monotonic() - start:.2f} s)"
                + (f" (as {side.user.name})" if side.user.uid != os.geteuid() else ""))
            if all(addr.startswith("127.") for addr in local):
                say(f"  note: the server listens on {local[0]}:{port} only: the client cannot reach it")
            return port
        if not side.procs():
            raise PathError("--server", f"{cmd!r} exited (status {proc.wait()}) before listening"
                            + _last_words(log))
        if time.monotonic() - start > timeout_s:
            where = f"on {proto} port {wanted}" if wanted else f"on any {proto.upper()} port"
            raise PathError("--server", f"{cmd!r} was not listening {where} after "
                            f"{knobs.fmt_duration(timeout_s * 1e9)} (--ready-timeout)" + _last_words(log))
        signals.sleep(0.05)


def _last_words(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return f"; its last output: {lines[-1].strip()[:200]}" if lines else ""


READY_STATE = {"tcp": "0A", "udp": "07"}      # TCP_LISTEN; a bound, unconnected UDP socket


def listening(side: Side, proto: str = "tcp") -> list[tuple[int, str]]:
    """(port, local address) of the TCP sockets listening (UDP sockets bound) in the side's
    namespace, read from the tables of one of its processes (/proc/PID/net/tcp is that
    process's namespace's; a process that joined the cgroup may not have entered the
    namespace yet)."""
    home = os.stat(f"{linkem.NETNS_DIR}/{side.ns}").st_ino
    for pid in side.procs():
        found = []
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino != home:
                continue
            for table in (proto, proto + "6"):
                for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                    fields = line.split()
                    if fields[3] == READY_STATE[proto]:
                        addr, port = fields[1].split(":")
                        found.append((int(port, 16), _address(addr)))
        except (OSError, IndexError, ValueError):
            continue
        return found
    return []


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


# --------------------------------------------------------------- captures ---
class Captures:
    """Per side a BPF capture on its cgroup, or an LD_PRELOAD spool (`preload_shim`):
    the traces T.client.magnet and T.server.magnet, owned by `owner` once written."""

    def __init__(self, to, sides: dict[str, Side], preload_shim: bool, owner: User):
        self.traces = {name: Path(f"{os.fspath(to)}.{name}.magnet") for name in SIDES}
        self.sides, self.preload_shim, self.owner = sides, preload_shim, owner
        self.caps: dict[str, SideCapture] = {}
        self.spools: dict[str, SideSpool] = {}

    def describe(self) -> str:
        what = ("the socket calls of each side (LD_PRELOAD shim)" if self.preload_shim else
                "every layer of each side (BPF, extended records)")
        return f"capture: {what} into {', '.join(map(str, self.traces.values()))}"

    def start(self, stack: ExitStack) -> None:
        if self.preload_shim:
            for name, side in self.sides.items():
                self.spools[name] = SideSpool(self.traces[name], name, side.user)
                stack.callback(self.spools[name].remove)
            return
        from .wire import bpf_unavailable
        why = bpf_unavailable()
        if why:
            raise PathError("--capture", f"the BPF capture cannot run: {why} (--preload: the socket calls)")
        for name, side in self.sides.items():
            cap = SideCapture(self.traces[name], side.cgroup, name)
            try:
                cap.start()
            except capture.CaptureError as e:
                raise PathError("--capture", str(e)) from None
            self.caps[name] = cap
            stack.callback(_stop_capture, cap)

    def environment(self, side: str, env: dict) -> dict:
        """`env` for a side's programs: with the shim preloaded when it records them."""
        spool = self.spools.get(side)
        return spool.environment(preload.find_library(), env) if spool else env

    def stop(self, commands: dict[str, list[str]]) -> list[str]:
        """The traces closed (spools merged); notes on what went wrong."""
        notes = []
        for name, cap in self.caps.items():
            if cap.poll() is None and cap.stop() != 0:
                notes.append(f"the {name}'s capture failed: {cap.error() or f'status {cap.returncode}'}")
        for name, spool in self.spools.items():
            _, lost = spool.merge(commands[name])
            if lost:
                notes.append(f"the {name}'s shim lost {lost} records")
        for trace in self.traces.values():
            if trace.exists():
                self.owner.give(trace)
        return notes


def _stop_capture(cap: capture.Capture) -> None:
    if cap.poll() is None:
        cap.stop()
