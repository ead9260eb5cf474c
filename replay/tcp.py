"""Replay application demand into real Linux TCP stacks, one after the other (`magnet replay tcp`).

    run = tcp.run_chain(demand, "out", tcp.TcpParams(stacks=4, mode="offline"))
    run.series("send")     # [(label, ns, size)]: the application's writes, then each stack's wire
    run.stacks[0].timing   # how faithfully the first stack's writes were issued

Each stack is one TCP connection across its own veth pair between two network
namespaces (replay.netns: MTU 1500, offloads off, a bottleneck rate and delay
per hop).  Two ways to chain them:

* offline (the paper's method): stack k's wire output, the sizes and times of
  the data segments it put on its veth, is stack k+1's demand, replayed in a
  fresh connection after stack k has finished;
* relay: N connections at once, joined by split-TCP relays that forward each
  read as they get it (the paper's firewalls).

A stack's wire comes from the BPF capture (magnet-read on the stack's cgroup)
when it can run, else from tcpdump on the hop (read with magnetlib.pcap), else
from what the receiving application read.  `loopback` needs no root: every
connection on 127.0.0.1 with a 1448-byte MSS, no shaping, no capture.
"""
from __future__ import annotations

import json
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
from magnetlib import metrics
from magnetlib.demand import RECV, SEND, Demand
from magnetlib.errors import TraceError

from . import fidelity, netns, schedule, wire
from .wire import Series

MODES = ("offline", "relay")
CAPTURES = ("auto", "bpf", "pcap", "none")
LOOPBACK = "127.0.0.1"
LOOPBACK_MSS = 1448               # what a 1500-byte MTU gives, so loopback segments look alike
TOOLS = ("ip", "tc", "ethtool")


class ReplayError(TraceError):
    """A replay that cannot start or did not complete: one line, "WHAT: problem"."""


@dataclass
class TcpParams:
    stacks: int = 4
    mode: str = "offline"
    rate: str | None = "20mbit"        # per hop, tc syntax; None: the veth's speed
    delay: str | None = "30ms"         # one way, per hop (netem, where the kernel has it)
    queue: str | None = None           # shaper queue in bytes (tc limit); default 100 frames
    shaper: str = "tbf"
    loopback: bool = False
    capture: str = "auto"
    mss: int | None = None
    cc: str | None = None
    nagle: bool = True
    sndbuf: int | None = None
    rcvbuf: int | None = None
    concurrent: bool = False
    pin: bool = True                   # the paced sender on a CPU of its own (if there are 2+)
    lead_ms: float = 200.0
    family: str = "mgrp"               # names of namespaces, veths, cgroups: FAMILY<pid>...

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}: offline or relay")
        if self.capture not in CAPTURES:
            raise ValueError(f"capture {self.capture!r}: one of {', '.join(CAPTURES)}")
        if self.stacks < 1:
            raise ValueError(f"stacks {self.stacks}: at least 1")
        if self.loopback and self.capture in ("bpf", "pcap"):
            raise ValueError("--loopback captures nothing (no namespaces): drop --capture")

    def endpoint_args(self) -> list[str]:
        mss = self.mss or (LOOPBACK_MSS if self.loopback else None)
        args = [f"--lead-ms={self.lead_ms}"]
        for flag, value in (("--mss", mss), ("--cc", self.cc), ("--sndbuf", self.sndbuf),
                            ("--rcvbuf", self.rcvbuf)):
            if value:
                args.append(f"{flag}={value}")
        return args + ([] if self.nagle else ["--nodelay"])


@dataclass
class StackRun:
    """One TCP connection of the chain: what went in, what came out, what the wire saw."""
    k: int
    sender: dict               # the sending socket (cookie, addresses, TCP_INFO)
    receiver: dict
    written: int               # bytes the sending application wrote
    delivered: int             # bytes the receiving application read
    send: Series               # data on the wire, sender -> receiver
    recv: Series               # and back
    shift_ns: int = 0          # added to this stack's times to line it up with the first
    trace: Path | None = None
    timing: fidelity.Timing | None = None
    confirmed: dict | None = None
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        out = {"stack": self.k, "written": self.written, "delivered": self.delivered,
               "wire_segments": len(self.send), "wire_bytes": self.send.bytes,
               "response_segments": len(self.recv), "response_bytes": self.recv.bytes,
               "sender": self.sender, "receiver": self.receiver,
               "trace": str(self.trace) if self.trace else None, "notes": self.notes}
        if self.timing:
            out["timing"] = self.timing.as_dict()
        if self.confirmed:
            out["capture_timing"] = self.confirmed
        return out


@dataclass
class TcpRun:
    params: TcpParams
    method: str                # bpf, pcap or reads
    stacks: list[StackRun]
    app: dict[str, Series]     # the first stack's writes: "send" (initiator), "recv" (acceptor)
    notes: list[str]
    out_dir: Path

    def series(self, direction: str = "send") -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Table II's rows: the application, then each stack's wire, on the first stack's clock."""
        rows = [(metrics.ordinal_label(0), self.app[direction].ns, self.app[direction].size)]
        for s in self.stacks:
            part = s.send if direction == "send" else s.recv
            rows.append((metrics.ordinal_label(s.k), part.ns + s.shift_ns, part.size))
        return rows

    def summary(self) -> dict:
        return {"params": asdict(self.params), "method": self.method, "notes": self.notes,
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
    """The namespaces (or loopback), the capture sessions and the worker processes of one run."""

    def __init__(self, params: TcpParams, out: Path):
        self.params, self.out = params, out
        self.prefix = f"{params.family}{os.getpid()}"
        self.notes: list[str] = []
        self.method, note = choose_method(params)
        if note:
            self.notes.append(note)
        self.exits = ExitStack()
        self.topo: netns.Topology | None = None
        self.procs: list[subprocess.Popen] = []
        self.sessions = 0
        self.cpus = self.saved_cpus = os.sched_getaffinity(0)
        self.pacer_cpus = self.cpus
        if params.pin and len(self.cpus) > 1:
            self.pacer_cpus = {max(self.cpus)}
            self.cpus = self.cpus - self.pacer_cpus

    def __enter__(self) -> "Lab":
        # Everything this run starts (workers, captures) inherits self.cpus; the
        # initiator, whose writes are paced, moves to self.pacer_cpus alone.
        self.exits.callback(os.sched_setaffinity, 0, self.saved_cpus)
        try:
            os.sched_setaffinity(0, self.cpus)
            if not self.params.loopback:
                netns.sweep_stale(self.params.family)
                link = netns.Link(rate=self.params.rate, delay=self.params.delay,
                                  limit=self.params.queue, shaper=self.params.shaper)
                self.topo = self.exits.enter_context(
                    netns.chain(self.prefix, self.params.stacks, link, subnet="10.202"))
                self.notes += self.topo.notes
        except BaseException:
            self.exits.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.kill_workers()
        self.exits.close()

    def place(self, k: int) -> Place:
        if self.topo is None:
            return Place(None, None, LOOPBACK, "lo", LOOPBACK)
        hop = self.topo.hops[k - 1]
        return Place(hop.left_ns, hop.right_ns, hop.right_addr, hop.left_dev, hop.left_addr)

    # -- capture sessions
    def session(self, stacks: list[int], name: str):
        """A capture of the given stacks (BPF, else tcpdump, else none)."""
        self.sessions += 1
        if self.method == "bpf":
            try:
                return wire.BpfSession(self.out / f"{name}.magnet", f"{self.prefix}-{self.sessions}")
            except capture.CaptureError as e:
                if self.params.capture == "bpf":
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
        cmd = [sys.executable, "-m", "magnet.replay.endpoint", role, *args, *self.params.endpoint_args()]

        def preexec():
            wire._die_with_parent(signal.SIGKILL)
            if role == "initiator":
                os.sched_setaffinity(0, self.pacer_cpus)
            session.preexec()
        proc = netns.popen(ns, cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=preexec)
        self.procs.append(proc)
        return proc

    @staticmethod
    def ready(proc: subprocess.Popen, role: str) -> int:
        """The port a listening worker reports."""
        line = proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            proc.wait()
            raise ReplayError(role, _worker_error(proc, proc.stderr.read()))
        return int(line[1])

    @staticmethod
    def finish(proc: subprocess.Popen, role: str, timeout: float) -> dict:
        """A worker's result once it has ended."""
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise ReplayError(role, f"did not finish within {timeout:.0f} s") from None
        lines = out.strip().splitlines()
        result = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
        if proc.returncode != 0 or result is None or "error" in result:
            raise ReplayError(role, (result or {}).get("error") or _worker_error(proc, err))
        return result

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

    def kill_workers(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.procs.clear()


def _worker_error(proc: subprocess.Popen, stderr: str) -> str:
    lines = [line for line in (stderr or "").splitlines() if line.strip()]
    return lines[-1] if lines else f"exited with status {proc.returncode}"


def choose_method(params: TcpParams) -> tuple[str, str | None]:
    """(bpf | pcap | reads, a note saying why when it is not what was asked for or the best)."""
    if params.loopback:
        return "reads", ("loopback: no capture; each stack's row is what its receiving "
                         "application read (a read takes what arrived since the last)")
    if params.capture == "none":
        return "reads", "no capture (--capture none): each stack's row is its receiver's reads"
    why = None
    if params.capture in ("auto", "bpf"):
        why = wire.bpf_unavailable()
        if why is None:
            return "bpf", None
        if params.capture == "bpf":
            raise ReplayError("BPF capture", why)
    if shutil.which("tcpdump"):
        return "pcap", (f"BPF capture unavailable ({why}): tcpdump pcaps read with magnetlib.pcap"
                        if why else None)
    if params.capture == "pcap":
        raise ReplayError("tcpdump", "not installed")
    return "reads", f"no capture (BPF: {why}; no tcpdump): each stack's row is its receiver's reads"


def check_privileges(params: TcpParams) -> None:
    if params.loopback:
        return
    if os.geteuid() != 0:
        raise ReplayError("magnet replay tcp", "needs root for network namespaces (or use --loopback: "
                                               "127.0.0.1, no shaping, no capture)")
    missing = [tool for tool in TOOLS if not shutil.which(tool)]
    if missing:
        raise ReplayError("magnet replay tcp", f"needs {', '.join(missing)} (Debian: iproute2, ethtool)")


# ------------------------------------------------------------ one stack ---
@dataclass
class Work:
    """A stack's files: the writes of each end, and what each end recorded."""
    directory: Path

    def __post_init__(self):
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        return self.directory / name


def save_sides(demand: Demand, work: Work, concurrent: bool) -> tuple[Path, Path]:
    initiator, acceptor = schedule.sides(demand, concurrent)
    paths = (work.path("initiator-writes.npz"), work.path("acceptor-writes.npz"))
    initiator.save(paths[0])
    acceptor.save(paths[1])
    return paths


def timeout_for(demand: Demand, params: TcpParams) -> float:
    """Long enough for the demand at the bottleneck rate, with room."""
    seconds = demand.duration_ns / 1e9
    if params.rate and not params.loopback:
        seconds = max(seconds, demand.total_bytes * 8 / netns.rate_bits(params.rate))
    return 3 * seconds + 60


def run_pair(lab: Lab, k: int, demand: Demand, session) -> tuple[dict, dict, Work]:
    """Stack k's initiator and acceptor, replaying `demand`; their results."""
    work = Work(lab.out / f"stack-{k}")
    ini_side, acc_side = save_sides(demand, work, lab.params.concurrent)
    where = lab.place(k)
    acc = lab.start(where.right_ns, "acceptor", ["--listen", f"{where.right_addr}:0", "--side", acc_side,
                                                 "--record", work.path("acceptor.npz")], session)
    port = lab.ready(acc, f"stack {k} acceptor")
    ini = lab.start(where.left_ns, "initiator", ["--connect", f"{where.right_addr}:{port}",
                                                 "--side", ini_side, "--record", work.path("initiator.npz")],
                    session)
    timeout = timeout_for(demand, lab.params)
    return (lab.finish(ini, f"stack {k} initiator", timeout),
            lab.finish(acc, f"stack {k} acceptor", timeout), work)


def wire_of(lab: Lab, k: int, sender: dict, trace: Path | None,
            reads: tuple[np.ndarray, np.ndarray], offset: int | None) -> tuple[Series, Series, Path | None]:
    """Stack k's two directions on the wire, by the run's method."""
    if lab.method == "bpf":
        return (*wire.from_trace(trace, sender["cookie"]), trace)
    if lab.method == "pcap":
        pcap_path, trace = lab.out / f"stack-{k}.pcap", lab.out / f"stack-{k}.magnet"
        send, recv = wire.from_pcap(pcap_path, sender["local"][0], sender["local"][1], offset)
        wire.pcap_to_trace(pcap_path, trace, sender["local"][0], offset)
        return send, recv, trace
    return wire.from_reads(reads[0]), wire.from_reads(reads[1]), None


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


def sent_bytes(demand: Demand) -> int:
    """The initiator's bytes (a request/response demand holds the acceptor's too)."""
    return int(demand.size[demand.direction == SEND].sum())


def record_of(work: Work, name: str):
    with np.load(work.path(name)) as f:
        return {key: f[key] for key in f.files}


# --------------------------------------------------------------- offline ---
def run_offline(lab: Lab, demand: Demand, progress) -> list[StackRun]:
    stacks: list[StackRun] = []
    for k in range(1, lab.params.stacks + 1):
        started = time.monotonic()
        session = lab.session([k], f"stack-{k}")
        with lab.capturing(session):
            ini, acc, work = run_pair(lab, k, demand, session)
        ini_rec, acc_rec = record_of(work, "initiator.npz"), record_of(work, "acceptor.npz")
        trace = lab.out / f"stack-{k}.magnet" if lab.method == "bpf" else None
        send, recv, trace = wire_of(lab, k, ini, trace, (acc_rec["reads"], ini_rec["reads"]),
                                    getattr(session, "offset", None))
        s = StackRun(k, ini, acc, ini["written"], acc["read"], send, recv, trace=trace,
                     timing=fidelity.timing(ini_rec))
        s.shift_ns = 0 if k == 1 else stacks[-1].shift_ns + _origin(stacks[-1]) - ini["anchor_ns"]
        if lab.method == "bpf":
            s.confirmed = fidelity.confirmed(ini_rec, *wire.sock_sends(trace, ini["cookie"]))
        fidelity.writes(ini_rec).frame().to_csv(work.path("writes.csv"), index=False)
        stack_notes(s, sent_bytes(demand), lab.method)
        stacks.append(s)
        progress(f"stack {k}/{lab.params.stacks}: {len(send)} segments, {send.bytes} bytes on the wire "
                 f"({time.monotonic() - started:.1f} s)")
        if k < lab.params.stacks:
            demand = next_demand(s)
    return stacks


def _origin(s: StackRun) -> int:
    """The time the next stack's demand starts from: this stack's first wire event."""
    firsts = [int(part.ns[0]) for part in (s.send, s.recv) if len(part)]
    return min(firsts)


def next_demand(s: StackRun) -> Demand:
    """Stack k's wire output as stack k+1's demand: every data segment (retransmissions
    too, as a capture of the link holds them), sizes and times from its first."""
    if not len(s.send):
        raise ReplayError(f"stack {s.k}", "put no data on the wire: nothing for the next stack")
    origin = _origin(s)
    ns = np.concatenate([s.send.ns, s.recv.ns]) - origin
    size = np.concatenate([s.send.size, s.recv.size])
    direction = np.r_[np.full(len(s.send), SEND), np.full(len(s.recv), RECV)]
    order = np.argsort(ns, kind="stable")
    return Demand.from_arrays(ns[order], size[order], direction[order])


# ----------------------------------------------------------------- relay ---
def run_relay(lab: Lab, demand: Demand, progress) -> list[StackRun]:
    n = lab.params.stacks
    work = Work(lab.out / "relay")
    ini_side, acc_side = save_sides(demand, work, lab.params.concurrent)
    session = lab.session(list(range(1, n + 1)), "relay")
    timeout = timeout_for(demand, lab.params) + 10 * n
    with lab.capturing(session):
        sink = lab.start(lab.place(n).right_ns, "acceptor",
                         ["--listen", f"{lab.place(n).right_addr}:0", "--side", acc_side,
                          "--record", work.path("acceptor.npz")], session)
        port = lab.ready(sink, "sink")
        relays = {}
        for k in range(n - 1, 0, -1):                # relay k: end of stack k, start of stack k+1
            relays[k] = lab.start(lab.place(k).right_ns, "relay",
                                  ["--listen", f"{lab.place(k).right_addr}:0",
                                   "--connect", f"{lab.place(k + 1).right_addr}:{port}",
                                   "--record", work.path(f"relay-{k}.npz")], session)
            port = lab.ready(relays[k], f"relay {k}")
        ini = lab.start(lab.place(1).left_ns, "initiator",
                        ["--connect", f"{lab.place(1).right_addr}:{port}", "--side", ini_side,
                         "--record", work.path("initiator.npz")], session)
        ini_res = lab.finish(ini, "initiator", timeout)
        relay_res = {k: lab.finish(p, f"relay {k}", timeout) for k, p in relays.items()}
        sink_res = lab.finish(sink, "sink", timeout)
    progress(f"relay chain of {n} stacks done")
    return relay_stacks(lab, work, ini_res, relay_res, sink_res, demand, session)


def relay_stacks(lab: Lab, work: Work, ini: dict, relays: dict, sink: dict, demand: Demand,
                 session) -> list[StackRun]:
    n = lab.params.stacks
    records = {k: record_of(work, f"relay-{k}.npz") for k in relays}
    ini_rec, sink_rec = record_of(work, "initiator.npz"), record_of(work, "acceptor.npz")
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
    for k in range(1, n + 1):
        trace = lab.out / f"stack-{k}.magnet" if lab.method == "bpf" else None
        send, recv, trace = wire_of(lab, k, senders[k - 1], trace, (reads_down[k - 1], reads_up[k - 1]),
                                    getattr(session, "offset", None))
        s = StackRun(k, senders[k - 1], receivers[k - 1], written[k - 1], delivered[k - 1], send, recv,
                     trace=trace)
        if k == 1:
            s.timing = fidelity.timing(ini_rec)
            if lab.method == "bpf":
                s.confirmed = fidelity.confirmed(ini_rec, *wire.sock_sends(trace, ini["cookie"]))
            fidelity.writes(ini_rec).frame().to_csv(work.path("writes.csv"), index=False)
        stack_notes(s, sent_bytes(demand) if k == 1 else written[k - 1], lab.method)
        stacks.append(s)
    return stacks


# ------------------------------------------------------------------- run ---
def app_series(run_dir: Path, mode: str) -> dict[str, Series]:
    """The first stack's writes as replayed (due times, sizes), both ends."""
    work = run_dir / ("relay" if mode == "relay" else "stack-1")
    out = {}
    for direction, name in (("send", "initiator.npz"), ("recv", "acceptor.npz")):
        with np.load(work / name) as f:
            w = fidelity.writes(f)
        out[direction] = Series(w.due, w.size)
    return out


def run_chain(demand: Demand, out_dir: str | os.PathLike, params: TcpParams | None = None,
              progress=lambda line: None) -> TcpRun:
    """Replay `demand` through params.stacks real TCP stacks; per-stack files go to out_dir."""
    params = params or TcpParams()
    check_privileges(params)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runner = run_relay if params.mode == "relay" else run_offline
    try:
        with Lab(params, out) as lab:
            stacks = runner(lab, demand, progress)
            return TcpRun(params, lab.method, stacks, app_series(out, params.mode), lab.notes, out)
    except (netns.NetnsError, ValueError) as e:
        raise ReplayError("network namespaces", str(e)) from None
