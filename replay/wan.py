"""The paths of a real-TCP scenario: network namespaces in a line, each stack's path a
link emulator (replay.linkem) joining two of them through TUN devices.

    with wan.chain("mgrp4711", scenario, out_dir) as net:
        s = net.stacks[0]                  # stack 1: s.left_ns/left_dev/left_addr, s.right_ns/...
        net.popen(s.left_ns, ["iperf3", "-c", s.right_addr])
        stats = net.stop(1)                # stack 1's emulator: counters per direction

       stack 1                 stack 2                 stack N
  n0 =[linkem 1]= n1 =[linkem 2]= n2 ... n(N-1) =[linkem N]= nN
       ^       v        ^       v
      cs       cr      cs       cr         (with cross traffic: senders, sinks)

    with wan.crossing(net, scenario, [1], cc="cubic") as traffic:   # the scenario's --cross
        ...                                # traffic.moved[k] once the block is left

Stack k's sender lives in n(k-1) at SUBNET.k.1 on device PREFIXt<k>a, its
receiver in nk at SUBNET.k.2 on PREFIXt<k>b; with cross traffic, its cross
senders in cs at SUBNET.k.3 (PREFIXt<k>x) and their sinks in cr at SUBNET.k.4
(PREFIXt<k>y), through the same emulator, so they share the bottleneck in the
data direction (and, on a duplex path, senders in cr and sinks in cs the other
way, sharing the reverse link).  Every namespace routes SUBNET.k.0/24 into its device of
stack k; the emulator forwards by destination address.  The TCP knobs that
Linux sets per namespace (SACK, timestamps, window scaling) are set in n0..nN,
and IPv6 is off (nothing but the replay crosses the emulators).  Clean-up as
netns.chain: the namespaces go when the block is left, a Guard sweeps them
(and the emulators) if this process is killed; the TUN devices vanish with
their emulator.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from magnetlib import signals

from . import cross, linkem, netns, workers
from .scenario import Scenario, path_seed, stack_seed

TXQUEUELEN = 1000


class WanError(netns.NetnsError):
    pass


@dataclass
class StackPath:
    """Stack k's ends, and the cross-traffic addresses on its path (None: no cross traffic)."""
    k: int
    path: object                  # scenario.Path
    left_ns: str
    left_dev: str
    left_addr: str
    right_ns: str
    right_dev: str
    right_addr: str
    cross_ns: tuple[str, str] | None = None       # (senders, sinks)
    cross_dev: tuple[str, str] | None = None
    cross_addr: tuple[str, str] | None = None
    seed: int = 1                                 # linkem's --seed: cross.path_seed
    emulator: linkem.Emulator | None = None
    stats: linkem.Stats | None = None


@dataclass
class Wan:
    prefix: str
    namespaces: list[str]
    stacks: list[StackPath]
    sched_fifo: bool = False
    notes: list[str] = field(default_factory=list)

    def stack(self, k: int) -> StackPath:
        return self.stacks[k - 1]

    def popen(self, ns: str | None, cmd: list, **kw) -> subprocess.Popen:
        return netns.popen(ns, cmd, **kw)

    def stop(self, k: int) -> linkem.Stats:
        """Stack k's emulator stopped (its devices go with it); its counters."""
        s = self.stack(k)
        if s.stats is None:
            s.stats = s.emulator.stop()
        return s.stats

    def describe(self) -> str:
        fifo = "SCHED_FIFO" if self.sched_fifo else "normal scheduling (SCHED_FIFO refused)"
        return (f"  emulated by linkem on TUN devices: one process per stack, both directions, {fifo}; "
                "delays spread over the hops, fast hops unshaped")


def names(prefix: str, stacks: int, cross: bool) -> list[str]:
    """The namespaces of a chain: n0..nN, then cs, cr with cross traffic."""
    found = [f"{prefix}-n{i}" for i in range(stacks + 1)]
    return found + ([f"{prefix}-cs", f"{prefix}-cr"] if cross else [])


def _devices(prefix: str, k: int) -> dict[str, str]:
    devs = {side: f"{prefix}t{k}{side}" for side in "abxy"}
    if max(map(len, devs.values())) > netns.IFNAMSIZ:
        raise ValueError(f"prefix {prefix!r} too long for device names ({netns.IFNAMSIZ} characters at most)")
    return devs


QUIET = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]


def _plan(prefix: str, scenario: Scenario, subnet: str) -> list[StackPath]:
    cross = bool(scenario.cross)
    ns = names(prefix, scenario.stacks, cross)
    plan = []
    for k in range(1, scenario.stacks + 1):
        dev, net = _devices(prefix, k), f"{subnet}.{k}"
        plan.append(StackPath(k, scenario.path_of(k), ns[k - 1], dev["a"], f"{net}.1", ns[k], dev["b"],
                              f"{net}.2", (ns[-2], ns[-1]) if cross else None,
                              (dev["x"], dev["y"]) if cross else None,
                              (f"{net}.3", f"{net}.4") if cross else None,
                              seed=path_seed(scenario.seed, k)))
    return plan


def _tuns(s: StackPath) -> list[linkem.Tun]:
    tuns = [linkem.Tun("a", s.left_ns, s.left_dev, s.left_addr),
            linkem.Tun("b", s.right_ns, s.right_dev, s.right_addr)]
    if s.cross_ns:
        tuns += [linkem.Tun("a", s.cross_ns[0], s.cross_dev[0], s.cross_addr[0]),
                 linkem.Tun("b", s.cross_ns[1], s.cross_dev[1], s.cross_addr[1])]
    return tuns


def _configure(s: StackPath, scenario: Scenario, route_opts: list[str]) -> dict[str, list[str]]:
    """`ip -batch` lines per namespace for stack s's devices: MTU, address, route."""
    subnet = s.left_addr.rsplit(".", 1)[0] + ".0/24"
    lines: dict[str, list[str]] = {}
    for tun in _tuns(s):
        lines.setdefault(tun.ns, []).extend([
            f"link set {tun.dev} mtu {s.path.mtu} txqueuelen {TXQUEUELEN} up",
            f"addr add {tun.addr}/32 dev {tun.dev}",
            " ".join(["route add", subnet, "dev", tun.dev, *route_opts])])
    return lines


def _batch(ns: str, lines: list[str]) -> None:
    proc = subprocess.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True)
    if proc.returncode:
        raise WanError(f"ip -n {ns} -batch: {proc.stderr.strip() or f'exit {proc.returncode}'}")


@contextmanager
def chain(prefix: str, scenario: Scenario, out_dir: Path, *, subnet: str = "10.203",
          sysctls: list[str] = (), route_opts: list[str] = (), realtime: bool = True,
          guard: bool = True, log_dir: Path | None = None):
    """The chain of `scenario`: namespaces, one emulator per stack, devices configured.
    `sysctls` are set in the chain's namespaces n0..nN (e.g. "net.ipv4.tcp_sack=0"),
    `route_opts` go on every route (e.g. "quickack 1"); emulator stats files go to out_dir;
    with `log_dir`, every packet's record (replay.linklog) goes there (one stack) or to
    log_dir/stack-K."""
    for k in range(1, scenario.stacks + 1):
        linkem.check(scenario.path_of(k))
    plan = _plan(prefix, scenario, subnet)
    namespaces = names(prefix, scenario.stacks, bool(scenario.cross))
    guardian = netns.Guard(prefix) if guard else None
    net = Wan(prefix, namespaces, plan)
    try:
        netns._add_namespaces(namespaces)
        for i, ns in enumerate(namespaces):
            chain_ns = i <= scenario.stacks
            netns.sh("sysctl", "-qw", *QUIET, *(sysctls if chain_ns else []), ns=ns)
        batches: dict[str, list[str]] = {}
        for s in plan:
            signals.check()                      # a signal during the set-up ends it here
            log = None if log_dir is None else Path(log_dir) / (f"stack-{s.k}" if scenario.stacks > 1 else "")
            s.emulator = linkem.Emulator(f"{prefix}-s{s.k}", _tuns(s), s.path, seed=s.seed,
                                         stats=Path(out_dir) / f"linkem-{s.k}.json", realtime=realtime,
                                         log=log)
            for ns, lines in _configure(s, scenario, list(route_opts)).items():
                batches.setdefault(ns, []).extend(lines)
        for ns, lines in batches.items():
            _batch(ns, lines)
        net.sched_fifo = all(s.emulator.sched_fifo for s in plan)
        yield net
    finally:
        for s in plan:
            if s.emulator and s.stats is None:
                s.emulator.kill()
        netns.remove(namespaces)
        if guardian:
            guardian.close()


# ---------------------------------------------------------- cross traffic ---
CROSS = [sys.executable, "-m", "magnet.replay.cross"]
GO_AHEAD_NS = 20_000_000            # from the `go` to the cross traffic's origin


class CrossTraffic:
    """The scenario's cross traffic on some stacks' bottlenecks of a built Wan: per stack
    a sender in cs and a sink in cr (the data direction), and on a duplex path also a
    sender in cr and a sink in cs (the reverse direction, the same spec).  Every process
    dies with this one.  `moved[k]`: what stack k's flows sent and received, once stopped
    ("sent", "received"; "reverse_sent", "reverse_received" on a duplex path).  Every flow
    of every stack starts at one time, `origin_ns` (CLOCK_MONOTONIC), set once all are ready."""

    def __init__(self, net: Wan, scenario: Scenario, stacks: list[int], cc: str | None = None):
        self.net, self.scenario, self.stacks, self.cc = net, scenario, stacks, cc
        self.procs: dict[tuple[int, str], tuple[subprocess.Popen, subprocess.Popen]] = {}
        self.moved: dict[int, dict] = {}
        self.origin_ns: int | None = None

    def start(self) -> "CrossTraffic":
        try:
            for k in self.stacks:
                s = self.net.stack(k)
                ways = [("", 0, 1)] + ([("reverse_", 1, 0)] if s.path.duplex else [])
                for way, src, dst in ways:
                    self._start_way(s, way, src, dst)
            self._go()
        except BaseException:
            self.kill()
            raise
        return self

    def _start_way(self, s: StackPath, way: str, src: int, dst: int) -> None:
        label = f"stack {s.k} {way.replace('_', ' ')}cross-traffic"
        flows = [arg for c in self.scenario.cross for arg in cross.spec_args(c, s.path.rate_bps)]
        seed = stack_seed(self.scenario.seed, s.k, reverse=bool(way))
        sink = self._spawn(s.cross_ns[dst], ["sink", f"--addr={s.cross_addr[dst]}"])
        self.procs[(s.k, way)] = (sink, sink)
        _ready(sink, f"{label} sink")
        sender = self._spawn(s.cross_ns[src], ["send", "--origin=stdin", f"--addr={s.cross_addr[src]}",
                                               f"--to={s.cross_addr[dst]}", f"--rate={s.path.rate_bps or 0}",
                                               f"--seed={seed}", *([f"--cc={self.cc}"] if self.cc else []),
                                               *flows])
        self.procs[(s.k, way)] = (sender, sink)
        _ready(sender, f"{label} sender")

    def _go(self) -> None:
        """Every sender is ready: give them one origin, a moment ahead (the writes take that)."""
        if not self.procs:
            return
        self.origin_ns = time.monotonic_ns() + GO_AHEAD_NS
        for sender, _ in self.procs.values():
            sender.stdin.write(f"go {self.origin_ns}\n")
            sender.stdin.flush()

    @staticmethod
    def _spawn(ns: str, args: list[str]) -> subprocess.Popen:
        from .wire import _die_with_parent
        return netns.popen(ns, [*CROSS, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, preexec_fn=lambda: _die_with_parent(signal.SIGKILL))

    def stop(self) -> dict[int, dict]:
        """End every flow; what each moved (WanError if a process failed)."""
        try:
            for (k, way), (sender, sink) in self.procs.items():
                for name, proc in (("sent", sender), ("received", sink)):
                    proc.send_signal(signal.SIGTERM)
                    self.moved.setdefault(k, {})[way + name] = _finish(proc, f"stack {k} cross traffic")
        finally:
            self.kill()
        return self.moved

    def kill(self) -> None:
        for proc in {proc for pair in self.procs.values() for proc in pair}:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        self.procs.clear()


@contextmanager
def crossing(net: Wan, scenario: Scenario, stacks: list[int], cc: str | None = None,
             warmup_s: float = 1.0):
    """The scenario's cross traffic on these stacks, from `warmup_s` before the block to
    its end (none without --cross); the CrossTraffic, whose `moved` is filled on leaving."""
    traffic = CrossTraffic(net, scenario, stacks if scenario.cross else [], cc)
    if not traffic.stacks:
        yield traffic
        return
    traffic.start()
    try:
        signals.sleep(warmup_s)
        yield traffic
    except BaseException:
        traffic.kill()
        raise
    traffic.stop()


def bulk_starts(moved: dict) -> dict[str, list[float]]:
    """When one stack's bulk TCP cross flows (CrossTraffic.moved[k]) connected, ms after the
    cross traffic's origin, per direction ("forward"; "reverse" on a duplex path), sorted:
    flow i is due at 10 ms x i (cross.BULK_STAGGER_NS), the rest is how late its thread
    set it up (what ns-3's MagnetCrossTraffic::kBulkLateUs draws from)."""
    return {name: list(moved[way + "sent"].get("tcp_start_ms", []))
            for name, way in (("forward", ""), ("reverse", "reverse_")) if way + "sent" in moved}


def cross_line(moved: dict) -> str:
    """One stack's cross traffic (CrossTraffic.moved[k]) in words."""
    parts = []
    for way in ("", "reverse_"):
        if way + "sent" in moved:
            sent, got = moved[way + "sent"], moved[way + "received"]
            starts = sent.get("tcp_start_ms")
            parts.append(f"{sent['tcp_bytes']} B TCP and {sent['udp_bytes']} B UDP sent"
                         f"{' back' if way else ''}, {got['tcp_bytes']} B and {got['udp_bytes']} B arrived"
                         + (f" (bulk flows connected at {', '.join(f'{t:g}' for t in starts)} ms)"
                            if starts else ""))
    return "cross traffic: " + "; ".join(parts)


def _ready(proc: subprocess.Popen, role: str) -> None:
    try:
        workers.ready(proc)
    except workers.WorkerError as e:
        raise WanError(f"{role}: {e}") from None


def _finish(proc: subprocess.Popen, role: str, timeout: float = 30) -> dict:
    try:
        return workers.finish(proc, timeout)
    except workers.WorkerError as e:
        raise WanError(f"{role}: {e}") from None
