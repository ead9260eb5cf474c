"""Network namespaces joined by veth pairs: the one netns module of magnet.

    with netns.chain("mgrp4711", hops=3, link=netns.Link(rate="20mbit", delay="30ms")) as topo:
        topo.namespaces                 # mgrp4711-n0 .. mgrp4711-n3, one veth pair between neighbours
        hop = topo.hops[0]              # hop.left_ns/left_dev/left_addr, hop.right_ns/...
        topo.popen(hop.left_ns, ["ping", "-c1", hop.right_addr])
    with netns.pair("mgcap1v") as net:                   # client ns -- server ns
    with netns.routed("mgcap1r", rate="50mbit") as net:  # client -- router (token bucket) -- server

Every hop is a veth pair, MTU 1500, offloads off (tso, gso, gro: each packet is
one wire segment) unless asked otherwise.  A hop's Link shapes what its left
end sends: a rate (tbf or htb) and a one-way delay (netem, on both ends).
Kernels without netem (this one) get the rate only; `topo.notes` says so.

Clean-up is guaranteed: leaving the `with` block (normally, by an exception or
Ctrl-C) deletes the namespaces, which takes their veths and qdiscs with them;
a guard process deletes them if this process is killed outright; and
`sweep(prefix)` / `sweep_stale(family)` remove what an earlier run left.

    python -m magnet.replay.netns sweep PREFIX     # remove a prefix's namespaces by hand
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ReplayError

IFNAMSIZ = 15
MTU_FRAME = 1514                  # bytes of a full Ethernet frame at MTU 1500
NETNS_ETC = Path("/etc/netns")    # `ip netns exec NAME` bind-mounts NETNS_ETC/NAME/* over /etc/*


class NetnsError(ReplayError):
    """A command that builds the topology failed (its stderr in one line)."""


def sh(*cmd: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command (in namespace `ns`); NetnsError with its stderr if it fails and `check`."""
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    proc = subprocess.run(full, capture_output=True, text=True)
    if check and proc.returncode:
        raise NetnsError(f"{' '.join(full)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc


def popen(ns: str | None, cmd: list, **kw) -> subprocess.Popen:
    """Start `cmd` in namespace `ns` (None: this one)."""
    return subprocess.Popen((["ip", "netns", "exec", ns] if ns else []) + [str(c) for c in cmd], **kw)


# ------------------------------------------------------------------ links ---
@dataclass(frozen=True)
class Link:
    """How a hop shapes what its left end sends (tc syntax: "20mbit", "30ms", "150kb")."""
    rate: str | None = None          # bottleneck rate; None: the veth's own speed
    delay: str | None = None         # one-way delay, applied on both ends (netem)
    limit: str | None = None         # shaper queue; default 100 full frames
    burst: str | None = None         # token bucket depth; default max(2 frames, 1 ms at rate)
    shaper: str = "tbf"              # "tbf" or "htb"

    def __post_init__(self):
        if self.shaper not in ("tbf", "htb"):
            raise ValueError(f"shaper {self.shaper!r}: tbf or htb")


def rate_bits(text: str) -> int:
    """tc's rate syntax ("20mbit", "1gbit", "500kbit", "20000000bit") in bits/s."""
    m = re.fullmatch(r"(\d+(?:\.\d*)?)\s*([kmg]?)(bit|bps)?", text.strip().lower())
    if not m:
        raise ValueError(f"rate {text!r}: use tc's syntax, e.g. 20mbit")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return round(float(m.group(1)) * scale * (8 if m.group(3) == "bps" else 1))


def _shaper_cmds(dev: str, link: Link, delay: str | None) -> list[list[str]]:
    """tc commands for a rate (tbf, or htb with a byte FIFO) with netem as its leaf if `delay`."""
    bits = rate_bits(link.rate)
    burst = link.burst or str(max(2 * MTU_FRAME, bits // 8 // 1000))
    limit = link.limit or str(100 * MTU_FRAME)
    if link.shaper == "tbf":
        cmds = [["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", f"{bits}bit",
                 "burst", burst, "limit", limit]]
    else:
        cmds = [["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
                ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                 "rate", f"{bits}bit", "ceil", f"{bits}bit", "burst", burst]]
    leaf = ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"]
    if delay:
        cmds.append(leaf + ["netem", "delay", delay, "limit", "10000"])
    elif link.shaper == "htb":
        cmds.append(leaf + ["bfifo", "limit", limit])
    return cmds


def _netem_cmd(dev: str, delay: str) -> list[str]:
    return ["tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", delay, "limit", "10000"]


def netem_available(ns: str, dev: str) -> bool:
    """Whether the kernel has netem, tried on a device (left as it was)."""
    proc = sh(*_netem_cmd(dev, "1ms"), ns=ns, check=False)
    if proc.returncode == 0:
        sh("tc", "qdisc", "del", "dev", dev, "root", ns=ns, check=False)
        return True
    if "qdisc kind is unknown" in proc.stderr:
        return False
    raise NetnsError(f"tc qdisc add dev {dev} root netem: {proc.stderr.strip()}")


# --------------------------------------------------------------- topology ---
@dataclass
class Hop:
    left_ns: str
    left_dev: str
    left_addr: str
    right_ns: str
    right_dev: str
    right_addr: str
    link: Link = field(default_factory=Link)


@dataclass
class Topology:
    prefix: str
    namespaces: list[str]
    hops: list[Hop]
    notes: list[str] = field(default_factory=list)
    delay_emulated: bool = True

    def popen(self, ns: str | None, cmd: list[str], **kw) -> subprocess.Popen:
        return popen(ns, cmd, **kw)

    def run(self, ns: str | None, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return sh(*cmd, ns=ns, check=check)


def names(prefix: str, hops: int) -> tuple[list[str], list[tuple[str, str]]]:
    """Namespace names and (left, right) veth names of a chain."""
    namespaces = [f"{prefix}-n{i}" for i in range(hops + 1)]
    devs = [(f"{prefix}h{k}a", f"{prefix}h{k}b") for k in range(hops)]
    longest = max(len(d) for pair in devs for d in pair)
    if longest > IFNAMSIZ:
        raise ValueError(f"prefix {prefix!r} too long: interface names would have {longest} "
                         f"characters (at most {IFNAMSIZ})")
    return namespaces, devs


def _add_namespaces(namespaces: list[str]) -> None:
    for name in namespaces:
        sh("ip", "netns", "del", name, check=False)
        sh("ip", "netns", "add", name)
        sh("ip", "link", "set", "lo", "up", ns=name)


def _add_veth(hop: Hop, mtu: int, offloads: bool) -> None:
    # Created directly inside the namespaces: nothing ever sits in this namespace.
    sh("ip", "link", "add", hop.left_dev, "netns", hop.left_ns, "type", "veth",
       "peer", "name", hop.right_dev, "netns", hop.right_ns)
    for ns, dev, addr in ((hop.left_ns, hop.left_dev, hop.left_addr),
                          (hop.right_ns, hop.right_dev, hop.right_addr)):
        sh("ip", "addr", "add", f"{addr}/24", "dev", dev, ns=ns)
        sh("ip", "link", "set", dev, "mtu", str(mtu), "up", ns=ns)
        if not offloads:
            sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns)


def _shape(hop: Hop, delay: str | None) -> None:
    """The rate on the left end (what it sends), the delay (if emulated) on both ends."""
    if hop.link.rate:
        for cmd in _shaper_cmds(hop.left_dev, hop.link, delay):
            sh(*cmd, ns=hop.left_ns)
    elif delay:
        sh(*_netem_cmd(hop.left_dev, delay), ns=hop.left_ns)
    if delay:
        sh(*_netem_cmd(hop.right_dev, delay), ns=hop.right_ns)


def _shape_all(topo: Topology) -> None:
    delays = {hop.link.delay for hop in topo.hops if hop.link.delay}
    if delays and not netem_available(topo.hops[0].right_ns, topo.hops[0].right_dev):
        topo.delay_emulated = False
        topo.notes.append(f"no delay emulation: this kernel has no netem qdisc, so the "
                          f"{', '.join(sorted(delays))} one-way delay per hop is not applied "
                          "(rate shaping only)")
    for hop in topo.hops:
        _shape(hop, hop.link.delay if topo.delay_emulated else None)


def _route(topo: Topology) -> None:
    """Routes for a routed chain: ends by default towards the middle, middles forward."""
    hops, last = topo.hops, len(topo.namespaces) - 1
    sh("ip", "route", "add", "default", "via", hops[0].right_addr, ns=topo.namespaces[0])
    sh("ip", "route", "add", "default", "via", hops[-1].left_addr, ns=topo.namespaces[last])
    for i in range(1, last):
        ns = topo.namespaces[i]
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=ns)
        sh("ip", "route", "add", "default", "via", hops[i - 1].left_addr, ns=ns)
        for hop in hops[i + 1:]:
            subnet = hop.left_addr.rsplit(".", 1)[0] + ".0/24"
            sh("ip", "route", "add", subnet, "via", hops[i].right_addr, ns=ns)


@contextmanager
def chain(prefix: str, hops: int = 1, link: Link | list[Link | None] | None = None, *,
          subnet: str = "10.201", mtu: int = 1500, offloads: bool = False, routed: bool = False,
          guard: bool = True):
    """hops+1 namespaces in a line, neighbours joined by a veth pair.

    Hop k (0-based) is subnet.{k+1}.0/24, its left end .1 and its right end .2.
    `link` shapes every hop, or one per hop (None: not shaped).  `routed`: the
    end namespaces reach each other through the middle ones (IP forwarding).
    """
    namespaces, devs = names(prefix, hops)
    links = link if isinstance(link, list) else [link] * hops
    topo = Topology(prefix, namespaces, [
        Hop(namespaces[k], devs[k][0], f"{subnet}.{k + 1}.1",
            namespaces[k + 1], devs[k][1], f"{subnet}.{k + 1}.2", links[k] or Link())
        for k in range(hops)])
    guardian = Guard(prefix) if guard else None
    try:
        _add_namespaces(namespaces)
        for hop in topo.hops:
            _add_veth(hop, mtu, offloads)
        _shape_all(topo)
        if routed:
            _route(topo)
        yield topo
    finally:
        remove(namespaces)
        if guardian:
            guardian.close()


def remove(namespaces: list[str]) -> None:
    """Delete namespaces; their veths (both ends) and qdiscs go with them."""
    for name in namespaces:
        sh("ip", "netns", "del", name, check=False)


# ---------------------------------------------------- the capture topologies ---
@dataclass
class Net:
    """Two ends (and what lies between) as the capture tests and benchmarks use them."""
    topo: Topology
    client: str
    server: str
    client_addr: str
    server_addr: str
    devices: dict[str, str]

    @property
    def namespaces(self) -> list[str]:
        return self.topo.namespaces

    def run_in(self, ns: str, cmd: list[str], **kw) -> subprocess.Popen:
        return self.topo.popen(ns, cmd, **kw)


@contextmanager
def pair(prefix: str, subnet: str = "10.201", offloads: bool = False):
    """client ns <-veth-> server ns."""
    with chain(prefix, 1, subnet=subnet, offloads=offloads) as topo:
        hop = topo.hops[0]
        yield Net(topo, hop.left_ns, hop.right_ns, hop.left_addr, hop.right_addr,
                  {"client": hop.left_dev, "server": hop.right_dev})


@contextmanager
def routed(prefix: str, rate: str = "50mbit", limit: str = "6kb", subnet: str = "10.201"):
    """client ns -- router ns -- server ns; the router's way to the server is a
    token bucket that drops what exceeds `rate`: losses on the path, not on the
    sending host."""
    bottleneck = Link(rate=rate, limit=limit, burst="5kb")
    with chain(prefix, 2, [None, bottleneck], subnet=subnet, routed=True) as topo:
        a, b = topo.hops
        yield Net(topo, a.left_ns, b.right_ns, a.left_addr, b.right_addr,
                  {"client": a.left_dev, "router_in": a.right_dev, "router_out": b.left_dev,
                   "server": b.right_dev})


# ---------------------------------------------------------------- clean-up ---
def listed() -> list[str]:
    """Named network namespaces (`ip netns list`)."""
    out = sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def sweep(prefix: str) -> list[str]:
    """Delete what a run made with `prefix` left: its namespaces (with their veths
    and qdiscs, and their /etc/netns files), any of its veths left here, and its
    cgroups (magnet/PREFIX-*, after interrupting captures that record them and
    killing their processes); returns what was removed."""
    gone = sweep_cgroups(prefix) + _stop_emulators(prefix)
    for folder in _scratch_dirs(prefix):
        shutil.rmtree(folder, ignore_errors=True)
        gone.append(str(folder))
    ns_name = re.compile(rf"{re.escape(prefix)}-(n\d+|cs|cr)")
    names_found = [name for name in listed() if ns_name.fullmatch(name)]
    remove(names_found)
    gone += names_found
    for folder in NETNS_ETC.glob(f"{prefix}-*"):
        if ns_name.fullmatch(folder.name):
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(str(folder))
    dev_name = re.compile(rf"{re.escape(prefix)}h\d+[ab]")
    links = sh("ip", "-o", "link", "show", check=False).stdout
    for dev in re.findall(r"^\d+: ([^:@]+)", links, re.M):
        if dev_name.fullmatch(dev):
            sh("ip", "link", "del", dev, check=False)
            gone.append(dev)
    return gone


def scratch(prefix: str) -> Path:
    """A new working directory for a run with `prefix`, which sweep(prefix) removes: a run
    killed outright (SIGKILL) leaves its guard to delete it with the namespaces."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-scratch-"))


def _scratch_dirs(prefix: str) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"{prefix}-scratch-*"))


def _stop_emulators(prefix: str) -> list[str]:
    """End the link emulators (replay.linkem) of a prefix: their TUN devices go with them."""
    found = _with_argument(f"--name={prefix}-s".encode(), exact=False)
    for pid in found:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return [f"linkem process {pid}" for pid in found]


def sweep_cgroups(prefix: str) -> list[str]:
    """Remove a prefix's cgroups (magnet/PREFIX-*), interrupting captures that record them."""
    from magnet import capture
    try:
        parent = capture.cgroup2_root() / capture.CGROUP_PARENT
    except capture.CaptureError:
        return []
    found = sorted(parent.glob(f"{prefix}-*"))
    for pid in [pid for path in found for pid in _capturing(path)]:
        try:
            os.kill(pid, signal.SIGINT)            # a capture closes its trace properly
        except ProcessLookupError:
            pass
    for path in found:
        try:
            capture.remove_cgroup(path)
        except capture.CaptureError:
            pass
    return [str(path) for path in found]


def sweep_stale(family: str) -> list[str]:
    """Sweep the prefixes FAMILY<pid> whose process <pid> no longer runs (namespaces
    FAMILY<pid>-n<k>, cgroups magnet/FAMILY<pid>-*): what killed runs left behind."""
    from magnet import capture
    pattern = re.compile(rf"({re.escape(family)}(\d+))-")
    try:
        cgroups = [p.name for p in (capture.cgroup2_root() / capture.CGROUP_PARENT).glob(f"{family}*")]
    except capture.CaptureError:
        cgroups = []
    scratches = [p.name for p in Path(tempfile.gettempdir()).glob(f"{family}*-scratch-*")]
    stale = {m.group(1) for m in map(pattern.match, listed() + cgroups + scratches)
             if m and not Path(f"/proc/{m.group(2)}").exists()}
    return [name for prefix in sorted(stale) for name in sweep(prefix)]


class Guard:
    """A process that cleans up after us if we are killed before we can.

    It waits on a pipe from us.  When the pipe closes without `done` (we died),
    it sweeps the prefix (sweep(): captures interrupted so their traces are
    closed properly, cgroups, namespaces).  It has its own session, so a
    Ctrl-C for our process group does not stop it first.
    """

    def __init__(self, prefix: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "magnet.replay.netns", "guard", prefix],
                                     stdin=subprocess.PIPE, text=True, start_new_session=True)

    def close(self) -> None:
        """We cleaned up ourselves: the guard exits without doing anything."""
        try:
            self.proc.stdin.write("done\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _guard(prefix: str) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if sys.stdin.read().strip() != "done":
        sweep(prefix)
    return 0


def _capturing(cgroup: Path) -> list[int]:
    """Processes started with `--cgroup CGROUP` (magnet-read) on their command line."""
    return _with_argument(f"--cgroup\0{cgroup}\0".encode())


def _with_argument(wanted: bytes, exact: bool = True) -> list[int]:
    """Processes whose command line holds `wanted` (exact: as whole arguments, which
    `wanted` then spells with its NULs; else as the start of one argument)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = b"\0" + cmdline.read_bytes()
        except OSError:
            continue
        if (wanted in text) if exact else (b"\0" + wanted in text):
            found.append(int(cmdline.parent.name))
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "guard":
        return _guard(args[1])
    if len(args) == 2 and args[0] == "sweep":
        for name in sweep(args[1]):
            print(f"removed {name}")
        return 0
    print("usage: python -m magnet.replay.netns sweep PREFIX", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
