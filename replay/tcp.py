"""Replay application demand into real Linux TCP stacks, one after the other (`magnet replay tcp`).

    scenario = Scenario(stacks=4, path=(Path(rate_bps=20_000_000, delay_ns=30_000_000),))
    run = tcp.run_chain(demand, "out", scenario, tcp.TcpOptions(capture="auto"))
    run.series("send")     # [(label, ns, size)]: the application's writes, then each stack's wire
    run.stacks[0].timing   # how faithfully the first stack's writes were issued
    run.stacks[0].rtt_mean_ns, run.stacks[0].retrans_bytes, run.stacks[0].path_stats

Each stack is one TCP connection between two network namespaces joined by a
link emulator (replay.linkem on TUN devices, replay.wan): the scenario's path
of that stack (rate, one-way delay, drop-tail queue, loss, jitter, hops, MTU)
in the data direction, the same delay back, and its cross traffic from extra
namespaces through the same bottleneck.  The scenario's TCP is applied as
Linux can (replay.linuxtcp: socket options, per-namespace sysctls, route
options; refused with one line where it cannot).  Two ways to chain stacks:

* offline (the paper's method): stack k's wire output, the sizes and times of
  the data segments it put on its device (new data only, unless
  TcpOptions.new_data_only is off), is stack k+1's demand, replayed in a
  fresh connection after stack k has finished;
* relay: N connections at once, joined by split-TCP relays that forward each
  read as they get it (the paper's firewalls).

A stack's wire comes from the BPF capture (magnet-read on the stack's cgroup)
when it can run, else from tcpdump on the sender's device (read with
magnetlib.pcap), else from what the receiving application read.  `loopback`
needs no root: every connection on 127.0.0.1 with a 1448-byte MSS, no path
(the scenario's path is refused, not ignored), no capture.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from magnet import capture
from magnetlib import metrics, signals
from magnetlib.progress import timed
from magnetlib.demand import RECV, SEND, Demand
from magnetlib.errors import MagnetError
from magnetlib.metrics import Series

from . import cross, endpoint, fidelity, linkem, linuxtcp, netns, schedule, wan, wire, workers
from .errors import ReplayError
from .scenario import CAPTURES, CROSS_LEAD_NS, Scenario

LOOPBACK = "127.0.0.1"
LOOPBACK_MSS = 1448               # what a 1500-byte MTU gives, so loopback segments look alike
TOOLS = ("ip",)
SUBNET = "10.202"
# Device names FAMILY<pid>t<k>x fit IFNAMSIZ for a pid of 7 digits (pid_max 4194304) up to k = 99.
MAX_STACKS = 99
PACER_PRIORITY = 10                # SCHED_FIFO of the pacing ends: below the link emulator's
LEAD_SLACK_NS = 1_000_000          # a demand later than this into the cross traffic is noted


@dataclass
class TcpOptions:
    """The engine's own choices; what runs (paths, TCP, cross traffic) is the Scenario."""
    capture: str = "auto"              # auto | bpf | pcap | none
    loopback: bool = False             # 127.0.0.1, no root, no path, no capture
    pin: bool = True                   # the paced sender on a CPU of its own (if there are 2+)
    concurrent: bool = False           # both directions at their trace times (Tmix CONC)
    send_only: bool = False            # drop the demand's other direction
    new_data_only: bool = True         # offline: the next stack's writes leave retransmissions out
    realtime: bool = True              # the emulators and pacers under SCHED_FIFO where allowed
    cross_lead_ns: int = CROSS_LEAD_NS  # with cross traffic: its start -> the demand's time zero
    lead_ms: float = 200.0
    family: str = "mgrp"               # names of namespaces, devices, cgroups: FAMILY<pid>...
    bars: bool = False                 # a progress bar on stderr while each stack runs

    def __post_init__(self):
        if self.capture not in CAPTURES:
            raise ValueError(f"capture {self.capture!r}: one of {', '.join(CAPTURES)}")
        if self.loopback and self.capture in ("bpf", "pcap"):
            raise ValueError("--loopback captures nothing (no namespaces): drop --capture")


@dataclass
class StackRun:
    """One TCP connection of the chain: what went in, what came out, what the wire saw."""
    k: int
    sender: dict               # the sending socket (cookie, addresses, TCP_INFO, tcp facts)
    receiver: dict
    written: int               # bytes the sending application wrote
    delivered: int             # bytes the receiving application read
    send: Series               # data on the wire, sender -> receiver
    recv: Series               # and back
    shift_ns: int = 0          # added to this stack's times to line it up with the first
    trace: Path | None = None
    timing: fidelity.Timing | None = None
    confirmed: dict | None = None
    new_bytes: np.ndarray | None = None     # per send segment, bytes never sent before (None: unknown)
    path_stats: linkem.Stats | None = None  # what the emulator did on this stack's path
    cross: dict | None = None               # cross traffic: bytes sent and received
    cross_lead_ns: int | None = None        # its start -> the demand's time zero, as it came out
    srtt_updates_ns: float | None = None    # the sender's srtt over its updates (the BPF capture's)
    notes: list[str] = field(default_factory=list)

    @property
    def rtt_last_ns(self) -> float | None:
        rtt = self.sender.get("tcp_info", {}).get("rtt_us")
        return rtt * 1e3 if rtt else None

    @property
    def rtt_mean_ns(self) -> float | None:
        """The sender's smoothed RTT averaged over its updates, as the BPF capture's ACKs
        carry it (ns-3's measure). Without it (tcpdump, reads): over samples at its writes,
        at most one per 10 ms, which weight a slow stretch more than its ACKs do."""
        if self.srtt_updates_ns:
            return self.srtt_updates_ns
        rtt = self.sender.get("srtt_mean_us")
        return rtt * 1e3 if rtt else self.rtt_last_ns

    @property
    def retrans_bytes(self) -> int:
        return int(self.sender.get("tcp_info", {}).get("bytes_retrans", 0))

    def summary(self) -> dict:
        out = {"stack": self.k, "written": self.written, "delivered": self.delivered,
               "wire_segments": len(self.send), "wire_bytes": self.send.bytes,
               "new_bytes": int(self.new_bytes.sum()) if self.new_bytes is not None else None,
               "response_segments": len(self.recv), "response_bytes": self.recv.bytes,
               "rtt_mean_ms": self.rtt_mean_ns / 1e6 if self.rtt_mean_ns else None,
               "retrans_bytes": self.retrans_bytes,
               "sender": self.sender, "receiver": self.receiver,
               "path": self.path_stats.raw if self.path_stats else None, "cross": self.cross,
               "cross_bulk_starts_ms": wan.bulk_starts(self.cross) if self.cross else None,
               "cross_lead_ns": self.cross_lead_ns, "trace": str(self.trace) if self.trace else None, "notes": self.notes}
        if self.timing:
            out["timing"] = self.timing.as_dict()
        if self.confirmed:
            out["capture_timing"] = self.confirmed
        return out


@dataclass
class TcpRun:
    scenario: Scenario
    options: TcpOptions
    method: str                # bpf, pcap or reads
    stacks: list[StackRun]
    app: dict[str, Series]     # the first stack's writes: "send" (initiator), "recv" (acceptor)
    notes: list[str]
    out_dir: Path
    applied: str = ""          # what was applied (paths, TCP, emulator), in words

    def series(self, direction: str = "send") -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Table II's rows: the application, then each stack's wire, on the first stack's clock."""
        rows = [(metrics.ordinal_label(0), self.app[direction].ns, self.app[direction].size)]
        for s in self.stacks:
            part = s.send if direction == "send" else s.recv
            rows.append((metrics.ordinal_label(s.k), part.ns + s.shift_ns, part.size))
        return rows

    def summary(self) -> dict:
        return {"scenario": self.scenario.describe(), "options": asdict(self.options),
                "applied": self.applied, "method": self.method, "notes": self.notes,
                "stacks": [s.summary() for s in self.stacks]}


# ------------------------------------------------------------------- lab ---
@dataclass
class Place:
    """Where stack k runs: its sender's and receiver's namespaces, the receiver's
    address, and the sending end's device (for tcpdump)."""
    left_ns: str | None
    right_ns: str | None
    right_addr: str
    left_dev: str
    left_addr: str


class Lab:
    """The namespaces and emulators (or loopback), the capture sessions, the cross traffic
    and the worker processes of one run."""

    def __init__(self, scenario: Scenario, options: TcpOptions, linux: linuxtcp.LinuxTcp, out: Path):
        self.scenario, self.options, self.linux, self.out = scenario, options, linux, out
        self.prefix = f"{options.family}{os.getpid()}"
        self.notes: list[str] = []
        self.method, note = choose_method(options)
        if note:
            self.notes.append(note)
        self.exits = ExitStack()
        self.net: wan.Wan | None = None
        self.procs: list[subprocess.Popen] = []           # the stacks' ends and relays
        self.cross: dict[int, dict] = {}
        self.cross_origin: dict[int, int] = {}    # per stack: when its cross traffic started
        self.start_at: int | None = None          # the demand's time zero while cross traffic runs
        self.app: dict[str, Series] = {}          # the first stack's writes as replayed, both ends
        self.sessions = 0
        self.cpus = self.saved_cpus = os.sched_getaffinity(0)
        self.pacer_cpus = self.cpus
        if options.pin and len(self.cpus) > 1:
            self.pacer_cpus = {max(self.cpus)}
            self.cpus = self.cpus - self.pacer_cpus

    def __enter__(self) -> "Lab":
        # Everything this run starts (workers, captures, emulators) inherits self.cpus;
        # the initiator, whose writes are paced, moves to self.pacer_cpus alone.
        self.exits.callback(os.sched_setaffinity, 0, self.saved_cpus)
        self.exits.callback(netns.sweep_cgroups, self.prefix)   # last: what an interrupt left
        try:
            os.sched_setaffinity(0, self.cpus)
            if not self.options.loopback:
                netns.sweep_stale(self.options.family)
                self.net = self.exits.enter_context(wan.chain(
                    self.prefix, self.scenario, self.out, subnet=SUBNET, sysctls=self.linux.sysctls,
                    route_opts=self.linux.route_opts, realtime=self.options.realtime))
                self.notes += self.net.notes
        except BaseException:
            self.exits.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.kill_workers()
        self.exits.close()

    def place(self, k: int) -> Place:
        if self.net is None:
            return Place(None, None, LOOPBACK, "lo", LOOPBACK)
        s = self.net.stack(k)
        return Place(s.left_ns, s.right_ns, s.right_addr, s.left_dev, s.left_addr)

    def path_stats(self, k: int) -> linkem.Stats | None:
        """Stack k's emulator, stopped; what it did (None on loopback)."""
        return self.net.stop(k) if self.net else None

    # -- capture sessions
    def session(self, stacks: list[int], name: str, side: str | None = None):
        """A capture of the given stacks (BPF, else tcpdump, else none), and the
        delayed-ACK cap on the stacks' cgroup if the scenario sets one.  `side`: one side of
        a whole application (wire.BpfSession)."""
        session = self._capture_session(stacks, name, side)
        if self.linux.delack_max_ns is None:
            return session
        try:
            return CappedSession(session, f"{self.prefix}-d{self.sessions}", self.linux.delack_max_ns,
                                 self.notes)
        except BaseException:
            session.stop(complete=False)
            raise

    def _capture_session(self, stacks: list[int], name: str, side: str | None = None):
        self.sessions += 1
        if self.method == "bpf":
            try:
                return wire.BpfSession(self.out / f"{name}.magnet", f"{self.prefix}-{self.sessions}", side)
            except capture.CaptureError as e:
                if self.options.capture == "bpf":
                    raise ReplayError("BPF capture", str(e)) from None
                self.method = "pcap" if shutil.which("tcpdump") else "reads"
                self.notes.append(f"the BPF capture failed ({e}): "
                                  + ("tcpdump pcaps read with magnetlib.pcap instead"
                                     if self.method == "pcap" else "each stack's row is its receiver's reads"))
        if self.method == "pcap":
            hops = {k: (self.place(k).left_ns, self.place(k).left_dev, self.out / f"stack-{k}.pcap")
                    for k in stacks}
            return wire.PcapSession(hops)
        return wire.ReadsSession()

    # -- workers
    def start(self, ns: str | None, role: str, args: list[str], session) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "magnet.replay.endpoint", role, *args,
               f"--lead-ms={self.options.lead_ms}", *self.linux.endpoint_args]
        if self.start_at and role != "relay":
            cmd.append(f"--start-at={self.start_at}")
        if role == "initiator" and self.options.realtime:     # the pacer: on time under load
            cmd.append(f"--realtime={PACER_PRIORITY}")

        def preexec():
            wire._die_with_parent(signal.SIGKILL)
            if role == "initiator":
                os.sched_setaffinity(0, self.pacer_cpus)
            session.preexec()
        return self.spawn(ns, cmd, self.procs, preexec)

    @staticmethod
    def spawn(ns: str | None, cmd: list, group: list, preexec=None, **popen) -> subprocess.Popen:
        """A process of the run (dying with it), kept in `group` to be killed with it."""
        proc = netns.popen(ns, cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=preexec or (lambda: wire._die_with_parent(signal.SIGKILL)), **popen)
        group.append(proc)
        return proc

    @staticmethod
    def ready(proc: subprocess.Popen, role: str) -> int | None:
        """The port a listening worker reports (None: it reports none)."""
        try:
            words = workers.ready(proc)
        except workers.WorkerError as e:
            raise ReplayError(role, str(e)) from None
        return int(words[0]) if words else None

    def note_pacer(self, result: dict) -> None:
        """Say once when the pacer could not have SCHED_FIFO: its writes are late under load."""
        note = "SCHED_FIFO refused: the writes were paced under normal scheduling (late under load)"
        if self.options.realtime and not result.get("sched_fifo") and note not in self.notes:
            self.notes.append(note)

    @staticmethod
    def finish(proc: subprocess.Popen, role: str, timeout: float) -> dict:
        """A worker's result once it has ended."""
        try:
            return workers.finish(proc, timeout)
        except workers.WorkerError as e:
            raise ReplayError(role, str(e)) from None

    @contextmanager
    def capturing(self, session):
        """Stop the session after the workers: completely, or at once if they failed."""
        try:
            yield session
        except BaseException:
            self.kill_workers()
            session.stop(complete=False)
            raise
        self.kill_workers()
        session.stop()

    @contextmanager
    def crossing(self, stacks: list[int]):
        """The scenario's cross traffic on these stacks' bottlenecks, from before they start
        (their demand's time zero is options.cross_lead_ns after its start) to after they end;
        what it moved goes to self.cross[k]."""
        if self.net is None:
            yield
            return
        with wan.crossing(self.net, self.scenario, stacks, self.linux.cc, warmup_s=0) as traffic:
            if traffic.origin_ns is not None:
                self.cross_origin.update(dict.fromkeys(stacks, traffic.origin_ns))
                self.start_at = traffic.origin_ns + self.options.cross_lead_ns
            try:
                yield
            finally:
                self.start_at = None
        self.cross.update(traffic.moved)

    def cross_lead(self, k: int, anchor_ns: int) -> int | None:
        """Stack k's cross traffic start -> its demand's time zero (None: no cross traffic);
        a note when the set-up overran the scenario's lead."""
        if k not in self.cross_origin:
            return None
        lead = anchor_ns - self.cross_origin[k]
        if lead > self.options.cross_lead_ns + LEAD_SLACK_NS:
            self.notes.append(f"stack {k}: the demand started {lead / 1e9:.3f} s into the cross traffic, "
                              f"not {self.options.cross_lead_ns / 1e9:g} s: the set-up took longer")
        return lead

    def kill_workers(self, group: list | None = None) -> None:
        group = self.procs if group is None else group
        for proc in group:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        group.clear()


class CappedSession:
    """A capture session whose processes' TCP connections get the delayed-ACK cap
    (replay.delack): on the BPF capture's cgroup, else on a cgroup of its own."""

    def __init__(self, inner, cgroup_name: str, timeout_ns: int, notes: list[str]):
        from . import delack
        self.inner, self.notes = inner, notes
        self.own = getattr(inner, "cgroup", None) is None
        self.cgroup = capture.make_cgroup(cgroup_name) if self.own else inner.cgroup
        try:
            self.cap = delack.Cap(self.cgroup, timeout_ns)
        except BaseException as e:             # an interrupt too: the cgroup must not outlive us
            if self.own:
                capture.remove_cgroup(self.cgroup)
            if isinstance(e, (MagnetError, OSError)):
                raise ReplayError("--delack-timeout", str(e)) from None
            raise

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def preexec(self) -> None:
        self.inner.preexec()
        if self.own:
            capture.join_cgroup(self.cgroup)

    def stop(self, complete: bool = True) -> None:
        try:
            self.inner.stop(complete)
        finally:
            counts = self.cap.stop()
            if self.own:
                capture.remove_cgroup(self.cgroup)
        if counts.get("refused"):
            self.notes.append(f"the delayed-ACK cap was refused by {counts['refused']} connections")


def choose_method(options: TcpOptions) -> tuple[str, str | None]:
    """(bpf | pcap | reads, a note saying why when it is not what was asked for or the best)."""
    if options.loopback:
        return "reads", ("loopback: no capture; each stack's row is what its receiving "
                         "application read (a read takes what arrived since the last)")
    if options.capture == "none":
        return "reads", "no capture (--capture none): each stack's row is its receiver's reads"
    why = None
    if options.capture in ("auto", "bpf"):
        why = wire.bpf_unavailable()
        if why is None:
            return "bpf", None
        if options.capture == "bpf":
            raise ReplayError("BPF capture", why)
    if shutil.which("tcpdump"):
        return "pcap", (f"BPF capture unavailable ({why}): tcpdump pcaps read with magnetlib.pcap"
                        if why else None)
    if options.capture == "pcap":
        raise ReplayError("tcpdump", "not installed")
    return "reads", f"no capture (BPF: {why}; no tcpdump): each stack's row is its receiver's reads"


def check_privileges(options: TcpOptions) -> None:
    """Root, /dev/net/tun and ip for namespaces (not for loopback); ReplayError if not."""
    if options.loopback:
        return
    if os.geteuid() != 0:
        raise ReplayError("magnet replay tcp", "needs root for network namespaces (or use --loopback: "
                                               "127.0.0.1, no path emulation, no capture)")
    why = linkem.unavailable()
    if why:
        raise ReplayError("magnet replay tcp", f"the link emulator {why}")
    missing = [tool for tool in TOOLS if not shutil.which(tool)]
    if missing:
        raise ReplayError("magnet replay tcp", f"needs {', '.join(missing)} (Debian: iproute2)")


# ------------------------------------------------------------ one stack ---
@dataclass
class Work:
    """A stack's files: the writes of each end, and what each end recorded. Its
    directory is private (0700), as traces are 0600: they say who sent what when."""
    directory: Path

    def __post_init__(self):
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.directory, 0o700)

    def path(self, name: str) -> Path:
        return self.directory / name


def save_sides(demand: Demand, work: Work, concurrent: bool) -> tuple[Path, Path]:
    initiator, acceptor = schedule.sides(demand, concurrent)
    paths = (work.path("initiator-writes"), work.path("acceptor-writes"))
    initiator.save(paths[0])
    acceptor.save(paths[1])
    return paths


def timeout_for(demand: Demand, lab: Lab, k: int) -> float:
    """Long enough for the demand at stack k's bottleneck rate, with room."""
    seconds = demand.duration_ns / 1e9
    rate = lab.scenario.path_of(k).rate_bps
    if rate and lab.net:
        seconds = max(seconds, demand.total_bytes * 8 / rate)
    return 3 * seconds + 60


def run_pair(lab: Lab, k: int, demand: Demand, session) -> tuple[dict, dict, Work]:
    """Stack k's initiator and acceptor, replaying `demand`; their results."""
    work = Work(lab.out / f"stack-{k}")
    ini_side, acc_side = save_sides(demand, work, lab.options.concurrent)
    where = lab.place(k)
    acc = lab.start(where.right_ns, "acceptor", ["--listen", f"{where.right_addr}:0", "--side", acc_side,
                                                 "--record", work.path("acceptor-record")], session)
    port = lab.ready(acc, f"stack {k} acceptor")
    ini = lab.start(where.left_ns, "initiator", ["--connect", f"{where.right_addr}:{port}",
                                                 "--side", ini_side, "--record", work.path("initiator-record")],
                    session)
    timeout = timeout_for(demand, lab, k)
    with timed(f"stack {k}/{lab.scenario.stacks}", demand.duration_ns / 1e9, lab.options.bars):
        return (lab.finish(ini, f"stack {k} initiator", timeout),
                lab.finish(acc, f"stack {k} acceptor", timeout), work)


def wire_of(lab: Lab, k: int, sender: dict, trace: Path | None, reads: tuple[np.ndarray, np.ndarray],
            offset: int | None) -> tuple[Series, Series, Path | None, np.ndarray | None]:
    """Stack k's two directions on the wire, by the run's method, and the new bytes of
    each sent segment (from sequence numbers; reads are new data)."""
    if lab.method == "bpf":
        send, recv = wire.from_trace(trace, sender["cookie"])
        return send, recv, trace, wire.trace_new_bytes(trace, sender["cookie"])
    if lab.method == "pcap":
        pcap_path, trace = lab.out / f"stack-{k}.pcap", lab.out / f"stack-{k}.magnet"
        local = sender["local"]
        send, recv = wire.from_pcap(pcap_path, local[0], local[1], offset)
        wire.pcap_to_trace(pcap_path, trace, local[0], offset)
        return send, recv, trace, wire.pcap_new_bytes(pcap_path, local[0], local[1])
    send = wire.from_reads(reads[0])
    return send, wire.from_reads(reads[1]), None, send.size


def stack_notes(s: StackRun, demand_bytes: int, method: str) -> None:
    info = s.sender.get("tcp_info", {})
    if s.written != demand_bytes or s.delivered != s.written:
        s.notes.append(f"bytes: demand {demand_bytes}, written {s.written}, delivered {s.delivered}")
    if method != "reads" and s.send.bytes < s.delivered:
        s.notes.append(f"the capture saw {s.delivered - s.send.bytes} bytes fewer on the wire than were "
                       "delivered: events it missed (docs/capture.md, Known limits; tcpdump: drops)")
    if info.get("total_retrans"):
        s.notes.append(f"{info['total_retrans']} segments retransmitted ({info['bytes_retrans']} bytes)")
    if s.timing and s.timing.blocked:
        s.notes.append(f"{s.timing.blocked} writes blocked on a full send buffer (lag up to "
                       f"{s.timing.blocked_lag_max_ms:.1f} ms), {s.timing.held_up} more issued late")
    if s.path_stats:
        s.notes.append(f"path: {s.path_stats.line()}")
    if s.cross:
        s.notes.append(wan.cross_line(s.cross))


def sent_bytes(demand: Demand) -> int:
    """The initiator's bytes (a request/response demand holds the acceptor's too)."""
    return int(demand.size[demand.direction == SEND].sum())


def record_of(work: Work, name: str) -> dict:
    return endpoint.load_record(work.path(name))


# --------------------------------------------------------------- offline ---
def run_offline(lab: Lab, demand: Demand, progress) -> list[StackRun]:
    stacks: list[StackRun] = []
    n = lab.scenario.stacks
    for k in range(1, n + 1):
        started = time.monotonic()
        with lab.crossing([k]):
            session = lab.session([k], f"stack-{k}")
            with lab.capturing(session):
                ini, acc, work = run_pair(lab, k, demand, session)
        lab.note_pacer(ini)
        ini_rec, acc_rec = record_of(work, "initiator-record"), record_of(work, "acceptor-record")
        trace = lab.out / f"stack-{k}.magnet" if lab.method == "bpf" else None
        send, recv, trace, new = wire_of(lab, k, ini, trace, (acc_rec["reads"], ini_rec["reads"]),
                                         getattr(session, "offset", None))
        s = StackRun(k, ini, acc, ini["written"], acc["read"], send, recv, trace=trace,
                     new_bytes=new, path_stats=lab.path_stats(k), cross=lab.cross.get(k),
                     cross_lead_ns=lab.cross_lead(k, ini["anchor_ns"]),
                     srtt_updates_ns=wire.srtt_mean_ns(trace, ini["cookie"]))
        s.shift_ns = 0 if k == 1 else stacks[-1].shift_ns + _origin(stacks[-1]) - ini["anchor_ns"]
        first_writes(lab, s, work, ini_rec, acc_rec, trace, ini["cookie"], app=k == 1)
        del ini_rec, acc_rec
        stack_notes(s, sent_bytes(demand), lab.method)
        stacks.append(s)
        progress(f"stack {k}/{n}: {len(send)} segments, {send.bytes} bytes on the wire "
                 f"({time.monotonic() - started:.1f} s)")
        if k < n:
            demand = next_demand(s, lab.options.new_data_only)
    return stacks


def _origin(s: StackRun) -> int:
    """The time the next stack's demand starts from: this stack's first wire event."""
    firsts = [int(part.ns[0]) for part in (s.send, s.recv) if len(part)]
    return min(firsts)


def next_demand(s: StackRun, new_data_only: bool = True) -> Demand:
    """Stack k's wire output as stack k+1's demand, sizes and times from its first segment:
    its data segments' new bytes (retransmissions left out, as the next stack's
    application would never have been handed them twice), or with new_data_only off
    every data segment whole (as a capture of the link holds them)."""
    if not len(s.send):
        raise ReplayError(f"stack {s.k}", "put no data on the wire: nothing for the next stack")
    origin = _origin(s)
    sent = s.send.size
    if new_data_only and s.new_bytes is not None:
        sent = s.new_bytes
    keep = sent > 0
    ns = np.concatenate([s.send.ns[keep], s.recv.ns]) - origin
    size = np.concatenate([sent[keep], s.recv.size])
    direction = np.r_[np.full(int(keep.sum()), SEND), np.full(len(s.recv), RECV)]
    order = np.argsort(ns, kind="stable")
    return Demand.from_arrays(ns[order], size[order], direction[order])


# ----------------------------------------------------------------- relay ---
def run_relay(lab: Lab, demand: Demand, progress) -> list[StackRun]:
    n = lab.scenario.stacks
    work = Work(lab.out / "relay")
    ini_side, acc_side = save_sides(demand, work, lab.options.concurrent)
    timeout = max(timeout_for(demand, lab, k) for k in range(1, n + 1)) + 10 * n
    with lab.crossing(list(range(1, n + 1))):
        session = lab.session(list(range(1, n + 1)), "relay")
        with lab.capturing(session):
            sink = lab.start(lab.place(n).right_ns, "acceptor",
                             ["--listen", f"{lab.place(n).right_addr}:0", "--side", acc_side,
                              "--record", work.path("acceptor-record")], session)
            port = lab.ready(sink, "sink")
            relays = {}
            for k in range(n - 1, 0, -1):            # relay k: end of stack k, start of stack k+1
                relays[k] = lab.start(lab.place(k).right_ns, "relay",
                                      ["--listen", f"{lab.place(k).right_addr}:0",
                                       "--connect", f"{lab.place(k + 1).right_addr}:{port}",
                                       "--record", work.path(f"relay-{k}-record")], session)
                port = lab.ready(relays[k], f"relay {k}")
            ini = lab.start(lab.place(1).left_ns, "initiator",
                            ["--connect", f"{lab.place(1).right_addr}:{port}", "--side", ini_side,
                             "--record", work.path("initiator-record")], session)
            with timed(f"relay chain of {n} stacks", demand.duration_ns / 1e9, lab.options.bars):
                ini_res = lab.finish(ini, "initiator", timeout)
                relay_res = {k: lab.finish(p, f"relay {k}", timeout) for k, p in relays.items()}
                sink_res = lab.finish(sink, "sink", timeout)
    progress(f"relay chain of {n} stacks done")
    return relay_stacks(lab, work, ini_res, relay_res, sink_res, demand, session)


def relay_stacks(lab: Lab, work: Work, ini: dict, relays: dict, sink: dict, demand: Demand,
                 session) -> list[StackRun]:
    n = lab.scenario.stacks
    lab.note_pacer(ini)
    records = {k: record_of(work, f"relay-{k}-record") for k in relays}
    ini_rec, sink_rec = record_of(work, "initiator-record"), record_of(work, "acceptor-record")
    senders = [ini] + [relays[k]["downstream"] for k in range(1, n)]
    receivers = [relays[k]["upstream"] for k in range(1, n)] + [sink]
    written = [ini["written"]] + [relays[k]["forwarded"]["down"] for k in range(1, n)]
    delivered = written[1:] + [sink["read"]]
    reads_down = [records[k]["reads_down"] for k in range(1, n)] + [sink_rec["reads"]]
    reads_up = [ini_rec["reads"]] + [records[k]["reads_up"] for k in range(1, n)]
    if lab.method == "bpf":
        wire.split(lab.out / "relay.magnet", {lab.out / f"stack-{k}.magnet":
                                              [senders[k - 1]["cookie"], receivers[k - 1]["cookie"]]
                                              for k in range(1, n + 1)})
    stacks = []
    lead = lab.cross_lead(1, ini["anchor_ns"])            # one cross traffic start, one demand
    for k in range(1, n + 1):
        trace = lab.out / f"stack-{k}.magnet" if lab.method == "bpf" else None
        send, recv, trace, new = wire_of(lab, k, senders[k - 1], trace, (reads_down[k - 1], reads_up[k - 1]),
                                         getattr(session, "offset", None))
        s = StackRun(k, senders[k - 1], receivers[k - 1], written[k - 1], delivered[k - 1], send, recv,
                     trace=trace, new_bytes=new, path_stats=lab.path_stats(k), cross=lab.cross.get(k),
                     cross_lead_ns=lead, srtt_updates_ns=wire.srtt_mean_ns(trace, senders[k - 1]["cookie"]))
        if k == 1:
            first_writes(lab, s, work, ini_rec, sink_rec, trace, ini["cookie"], app=True)
        stack_notes(s, sent_bytes(demand) if k == 1 else written[k - 1], lab.method)
        stacks.append(s)
    return stacks


def first_writes(lab: Lab, s: StackRun, work: Work, ini_rec: dict, acc_rec: dict, trace: Path | None,
                 cookie: int, app: bool) -> None:
    """How faithfully stack s's sender issued its writes (its record, the capture's view,
    writes.csv), derived once; for the chain's first stack, the application's writes
    as replayed (due times, sizes) of both ends go to lab.app."""
    w = fidelity.writes(ini_rec)
    s.timing = fidelity.timing(ini_rec, w=w)
    if lab.method == "bpf":
        s.confirmed = fidelity.confirmed(ini_rec, *wire.sock_sends(trace, cookie), w=w)
    w.to_csv(work.path("writes.csv"))
    if app:
        other = fidelity.writes(acc_rec)
        lab.app = {"send": Series(w.due, w.size), "recv": Series(other.due, other.size)}


# ------------------------------------------------------------------- run ---

def prepare(scenario: Scenario, options: TcpOptions) -> linuxtcp.LinuxTcp:
    """Check that this machine can run the scenario as asked (root, TUN, the paths in
    the emulator's range, the TCP knobs Linux can set); how Linux will run its TCP.
    ReplayError naming the flag and the problem otherwise."""
    check_privileges(options)
    try:
        if scenario.stacks > MAX_STACKS:
            raise ValueError(f"--stacks {scenario.stacks}: real TCP runs 1 to {MAX_STACKS} stacks "
                             "(its devices and addresses are numbered by stack)")
        if options.loopback:
            return linuxtcp.plan(scenario.tcp, False, linuxtcp.available_cc(), LOOPBACK_MSS)
        for k in range(1, scenario.stacks + 1):
            linkem.check(scenario.path_of(k))
            for c in scenario.cross:
                cross.spec_args(c, scenario.path_of(k).rate_bps)
        return linuxtcp.plan(scenario.tcp, True, linuxtcp.available_cc())
    except ValueError as e:
        raise ReplayError("magnet replay tcp", str(e)) from None


def describe(scenario: Scenario, options: TcpOptions, linux: linuxtcp.LinuxTcp) -> str:
    """What the run applies, before it starts (never a path it does not emulate)."""
    if options.loopback:
        lines = [f"{scenario.stacks} TCP stack{'s' if scenario.stacks != 1 else ''}, {scenario.mode}, "
                 "on 127.0.0.1 (loopback): no path emulation, no capture"]
    else:
        lines = [scenario.describe(), "  each stack's path emulated by linkem on TUN devices between two "
                 "network namespaces (one process per stack, both directions)"]
    lines.append("  Linux: " + "; ".join(linux.applied))
    return "\n".join(lines)


def run_chain(demand: Demand, out_dir: str | os.PathLike, scenario: Scenario | None = None,
              options: TcpOptions | None = None, progress=lambda line: None) -> TcpRun:
    """Replay `demand` through scenario.stacks real TCP stacks over the scenario's paths;
    per-stack files (records, captures, emulator counters) go to out_dir."""
    scenario, options = scenario or Scenario(), options or TcpOptions()
    linux = prepare(scenario, options)
    if options.send_only:
        demand = demand.only("send")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runner = run_relay if scenario.mode == "relay" else run_offline
    with signals.honoured():                  # Ctrl-C, SIGTERM, SIGHUP: clean up, Interrupted
        try:
            with Lab(scenario, options, linux, out) as lab:
                stacks = runner(lab, demand, progress)
                signals.check()               # not a whole run: its report is not written
                applied = describe(scenario, options, linux)
                if lab.net:
                    applied += "\n" + lab.net.describe()
                return TcpRun(scenario, options, lab.method, stacks, lab.app, lab.notes, out, applied)
        except netns.NetnsError as e:
            raise ReplayError("network namespaces", str(e)) from None
        except ValueError as e:
            raise ReplayError("magnet replay tcp", str(e)) from None
