"""The scenario's TCP (scenario.Tcp) on Linux: what each knob becomes, or why Linux cannot do it.

    plan = linuxtcp.plan(scenario.tcp, namespaces=True, available=linuxtcp.available_cc())
    plan.endpoint_args     # socket options for replay.endpoint
    plan.sysctls           # per-namespace sysctls (every namespace of the chain)
    plan.route_opts        # options of every route of the chain
    plan.applied           # what was applied, in words

  knob               Linux
  cc                 TCP_CONGESTION on every socket (a name in tcp_available_congestion_control)
  nagle              TCP_NODELAY on every socket when off
  sack, timestamps,  net.ipv4.tcp_sack, tcp_timestamps, tcp_window_scaling: sysctls of each
  window_scaling     network namespace (not possible with --loopback: they would be global)
  delack_count       Linux ACKs at least every second full-sized segment (and every segment
                     while in quick-ACK mode): 2 is Linux's own; 1 is the route option
                     `quickack 1` (every segment ACKed at once); any other count is refused
  delack_timeout     Linux's delayed-ACK timer adapts (40 ms at first, towards the RTT) and
                     is capped by the socket's delack_max, 200 ms by default: 200 ms is
                     Linux's own; another cap needs a sockops program calling
                     bpf_setsockopt(TCP_BPF_DELACK_MAX) (replay.delack), 8 to 200 ms
  mss                TCP_MAXSEG on every socket (default: the path MTU's), 88 to 32767
  sndbuf, rcvbuf     SO_SNDBUF, SO_RCVBUF (Linux doubles the value for its bookkeeping and
                     caps it at net.core.wmem_max, rmem_max), up to 2**31 - 1 (a C int)
  read_size          the receiving application's recv() size (endpoint --read-size), the same
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from magnetlib import knobs

AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
LINUX_DELACK_MAX_NS = 200_000_000           # TCP_DELACK_MAX (HZ/5)
LINUX_DELACK_COUNT = 2
MSS_RANGE = (88, 32767)                     # TCP_MAXSEG: TCP_MIN_MSS to MAX_TCP_WINDOW (net/tcp.h)
C_INT_MAX = 2**31 - 1                       # socket options and sizes the endpoint passes as int


def available_cc() -> list[str]:
    """Congestion controls this kernel has loaded (it cannot load more here)."""
    try:
        return AVAILABLE_CC.read_text().split()
    except OSError:
        return ["reno", "cubic"]


@dataclass
class LinuxTcp:
    endpoint_args: list[str]
    cc: str = "cubic"                         # Linux's name of the congestion control
    sysctls: list[str] = field(default_factory=list)
    route_opts: list[str] = field(default_factory=list)
    delack_max_ns: int | None = None          # a cap that needs replay.delack
    applied: list[str] = field(default_factory=list)


def plan(tcp, namespaces: bool, available: list[str], default_mss: int | None = None) -> LinuxTcp:
    """How Linux runs `tcp`; ValueError (naming the flag) for what it cannot do."""
    try:
        cc = knobs.cc_for("tcp", tcp.cc, available)
    except ValueError as e:
        raise ValueError(f"--cc: {e}") from None
    _check_ranges(tcp)
    args = [f"--cc={cc}", f"--read-size={tcp.read_size}"]
    mss = tcp.mss or default_mss
    for flag, value in (("--mss", mss), ("--sndbuf", tcp.sndbuf), ("--rcvbuf", tcp.rcvbuf)):
        if value:
            args.append(f"{flag}={value}")
    if not tcp.nagle:
        args.append("--nodelay")
    out = LinuxTcp(args, cc)
    out.applied.append(f"TCP_CONGESTION {cc}" + ("" if tcp.nagle else ", TCP_NODELAY")
                       + (f", TCP_MAXSEG {mss}" if mss else "")
                       + "".join(f", {n} {v}" for n, v in (("SO_SNDBUF", tcp.sndbuf), ("SO_RCVBUF", tcp.rcvbuf)) if v)
                       + f", reads of {tcp.read_size} B")
    switches = {"--sack": ("net.ipv4.tcp_sack", tcp.sack), "--timestamps": ("net.ipv4.tcp_timestamps", tcp.timestamps),
                "--window-scaling": ("net.ipv4.tcp_window_scaling", tcp.window_scaling)}
    if namespaces:
        out.sysctls = [f"{name}={int(on)}" for name, on in switches.values()]
        out.applied.append("per namespace " + ", ".join(out.sysctls))
    else:
        for flag, (name, on) in switches.items():
            if not on:
                raise ValueError(f"{flag} off: {name} is a sysctl of a network namespace; "
                                 "--loopback would change it for the whole machine")
    _delack(tcp, namespaces, out)
    return out


def _check_ranges(tcp) -> None:
    """ValueError naming the flag and what Linux takes, before anything starts."""
    low, high = MSS_RANGE
    if tcp.mss is not None and not low <= tcp.mss <= high:
        raise ValueError(f"--mss {tcp.mss}: Linux takes {low} to {high} bytes (TCP_MAXSEG)")
    for flag, value, what in (("--sndbuf", tcp.sndbuf, "SO_SNDBUF"), ("--rcvbuf", tcp.rcvbuf, "SO_RCVBUF"),
                              ("--read-size", tcp.read_size, "a recv() size")):
        if value is not None and not 1 <= value <= C_INT_MAX:
            raise ValueError(f"{flag} {value}: {what} is 1 to {C_INT_MAX} bytes on Linux (a C int)")


def _delack(tcp, namespaces: bool, out: LinuxTcp) -> None:
    count, timeout = tcp.delack_count, tcp.delack_timeout_ns
    if count == 1:
        if not namespaces:
            raise ValueError("--delack-count 1: needs the route option quickack of a network "
                             "namespace, not --loopback")
        out.route_opts.append("quickack 1")
        out.applied.append("route quickack 1 (every segment ACKed at once)")
    elif count not in (None, LINUX_DELACK_COUNT):
        raise ValueError(f"--delack-count {count}: Linux cannot set it (it ACKs every second "
                         "full-sized segment; 1 is possible with the route's quickack)")
    elif count == LINUX_DELACK_COUNT:
        out.applied.append("delayed ACK every 2 full-sized segments (Linux's own rule)")
    if timeout is None or timeout == LINUX_DELACK_MAX_NS:
        if timeout is not None:
            out.applied.append("delayed-ACK timer capped at 200 ms (Linux's own cap; the timer "
                               "adapts from 40 ms towards the RTT)")
        return
    from . import delack
    why = delack.unavailable(timeout)
    if why:
        raise ValueError(f"--delack-timeout {knobs.fmt_duration(timeout)}: {why}")
    out.delack_max_ns = timeout
    out.applied.append(f"delayed-ACK timer capped at {knobs.fmt_duration(delack.rounded(timeout))} "
                       "(sockops TCP_BPF_DELACK_MAX; the timer adapts from 40 ms towards the RTT)")
