"""What a replay runs through, the same for every engine: a chain of TCP stacks,
each over its own path, the TCP they run and the traffic they compete with.

    s = Scenario(stacks=4, path=(Path(rate_bps=20_000_000, delay_ns=30_000_000),))
    s.path_of(3)               # stack 3's path (the last one given holds for later stacks)
    s.describe()               # what will be applied, in words

Every knob has one flag, one unit syntax (magnetlib.knobs) and one default in
`magnet replay ns3`, `magnet replay tcp` and `magnet path`: add_arguments() declares
them, from_args() reads them back.  Link knobs take one value per stack, separated by
commas, the last repeated ("--rate 20Mbps,10Mbps").  A command may change a path
knob's default (`magnet path`: duplex on) with add_arguments(path_defaults=...).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, fields, replace

from magnetlib import knobs
from magnetlib.knobs import Loss, Queue

MODES = ("offline", "relay")
TCP_MODELS = ("linux", "ns3")     # ns-3's TCP: Linux 6.x's (MagnetLinuxTcpSocket) or its own
CAPTURES = ("auto", "bpf", "pcap", "none")          # how a real-TCP replay records its stacks


@dataclass(frozen=True)
class Path:
    """One stack's path from sender to receiver: `hops` links in a row, one of them
    (the middle one) the bottleneck with `rate_bps`, `queue` and `loss`; the others
    are fast and lossless.  `delay_ns` is the whole path's one-way delay, spread
    evenly over its hops; `jitter_ns` adds up to that much per packet without
    reordering.  The reverse direction has the same delay and jitter; with `duplex` it
    also has a link of its own with the same rate, queue and loss (a link of that rate
    each way, as for whole applications), without it no rate, queue or loss."""
    rate_bps: int | None = 20_000_000
    delay_ns: int = 30_000_000
    queue: Queue = Queue(100, "packets")
    loss: Loss = Loss()
    jitter_ns: int = 0
    hops: int = 1
    mtu: int = 1500
    duplex: bool = False

    @property
    def rtt_ns(self) -> int:
        return 2 * self.delay_ns

    @property
    def queue_bytes(self) -> int:
        return self.queue.bytes(self.rate_bps, self.rtt_ns, self.mtu)

    @property
    def queue_packets(self) -> int:
        return self.queue.packets(self.rate_bps, self.rtt_ns, self.mtu)

    @property
    def bottleneck(self) -> int:
        """The index (0-based) of the bottleneck among the path's hops."""
        return self.hops // 2

    def describe(self) -> str:
        text = (f"{knobs.fmt_rate(self.rate_bps)} bottleneck, {knobs.fmt_duration(self.delay_ns)} "
                f"one way ({knobs.fmt_duration(self.rtt_ns)} RTT), drop-tail queue {self.queue}")
        if self.queue.unit != "packets":
            text += f" ({self.queue_packets} packets)"
        if self.loss:
            text += f", loss {self.loss}"
        if self.jitter_ns:
            text += f", jitter up to {knobs.fmt_duration(self.jitter_ns)}"
        if self.hops > 1:
            text += f", {self.hops} hops (bottleneck: hop {self.bottleneck + 1})"
        if self.mtu != 1500:
            text += f", MTU {self.mtu}"
        if self.duplex:
            text += "; duplex: the same link each way"
        return text


CROSS_SYNTAX = ("tcp:N (N bulk TCP flows), poisson:SHARE[/SIZE] (UDP, exponential gaps) or "
                "pareto:SHARE[/ON/OFF][/held=W] (UDP on/off, Pareto on and off times, means ON and OFF, "
                "default 500ms each; held=W: exactly SHARE in every window of W, e.g. held=10s, its "
                "Pareto bursts and silences scaled to fill the window); SHARE of the bottleneck's rate, e.g. 30%")


@dataclass(frozen=True)
class Cross:
    """Competing traffic on each stack's bottleneck, in the same direction as the data."""
    kind: str                      # tcp | poisson | pareto
    flows: int = 1                 # tcp: bulk flows
    share: float = 0.0             # poisson, pareto: mean rate as a share of the bottleneck
    packet_bytes: int = 1000       # poisson, pareto: UDP payload
    on_ns: int = 500_000_000       # pareto: mean on time
    off_ns: int = 500_000_000      # pareto: mean off time
    held_ns: int = 0               # pareto: 0, or a window in each of which the share is exact

    def __str__(self) -> str:
        if self.kind == "tcp":
            return f"tcp:{self.flows}"
        if self.kind == "poisson":
            return f"poisson:{self.share * 100:g}%/{self.packet_bytes}B"
        held = f"/held={_compact(self.held_ns)}" if self.held_ns else ""
        return f"pareto:{self.share * 100:g}%/{_compact(self.on_ns)}/{_compact(self.off_ns)}{held}"

    def describe(self) -> str:
        if self.kind == "tcp":
            return f"{self.flows} bulk TCP flow{'s' if self.flows != 1 else ''}"
        what = "Poisson" if self.kind == "poisson" else "Pareto on/off"
        held = f", held over every {knobs.fmt_duration(self.held_ns)}" if self.held_ns else ""
        return f"{what} UDP at {self.share * 100:g}% of the bottleneck{held} ({self.packet_bytes} B packets)"


def _compact(ns: int) -> str:
    return knobs.fmt_duration(ns).replace(" ", "")


MAX_CROSS_FLOWS = 1000          # bulk flows per bottleneck: a thread and a socket each, both ends
MAX_UDP_PAYLOAD = 65507         # an IPv4 datagram's payload at most (65535 - 20 - 8)


def cross(text: str) -> Cross:
    """A --cross value; ValueError naming it, its syntax, or the range it is out of."""
    c = _cross(text)
    if c.kind == "tcp" and c.flows > MAX_CROSS_FLOWS:
        raise ValueError(f"cross traffic {text!r}: 1 to {MAX_CROSS_FLOWS} bulk TCP flows")
    if c.kind != "tcp" and c.packet_bytes > MAX_UDP_PAYLOAD:
        raise ValueError(f"cross traffic {text!r}: UDP packets of 1 to {MAX_UDP_PAYLOAD} B (an IPv4 datagram)")
    return c


def _cross(text: str) -> Cross:
    kind, _, rest = text.strip().partition(":")
    kind = kind.lower()
    parts = rest.split("/") if rest else []
    try:
        if kind == "tcp":
            if len(parts) != 1:
                raise ValueError
            return Cross("tcp", flows=knobs.positive_count(parts[0]))
        if kind in ("poisson", "pareto") and parts:
            share = knobs.probability(parts[0])
            if share <= 0 or share >= 1:
                raise ValueError
            if kind == "poisson" and len(parts) <= 2:
                return Cross("poisson", share=share,
                             packet_bytes=knobs.positive_size(parts[1]) if len(parts) == 2 else 1000)
            held = parts.pop()[len("held="):] if parts[-1].lower().startswith("held=") else None
            if kind == "pareto" and len(parts) in (1, 3):
                times = [knobs.duration(p) for p in parts[1:]] or [500_000_000, 500_000_000]
                held_ns = knobs.duration(held) if held is not None else 0
                if min(times) <= 0 or (held is not None and held_ns <= 0):
                    raise ValueError
                return Cross("pareto", share=share, on_ns=times[0], off_ns=times[1], held_ns=held_ns)
    except ValueError:
        pass
    raise ValueError(f"cross traffic {text!r}: use {CROSS_SYNTAX}")


@dataclass(frozen=True)
class Tcp:
    """The TCP every stack runs (the sender's and the receiver's socket alike).
    None: the engine's own default (said in the run's description)."""
    cc: str = "cubic"                      # a name of knobs.CONGESTION_CONTROL
    nagle: bool = True
    sack: bool = True
    timestamps: bool = True
    window_scaling: bool = True
    delack_count: int | None = None        # segments per delayed ACK (Linux: 2, not settable)
    delack_timeout_ns: int | None = None   # delayed-ACK timeout (Linux: 40 ms min., ns-3: 200 ms)
    mss: int | None = None                 # default: the path MTU's
    sndbuf: int | None = None              # default: Linux's autotuning, ns-3's 131072
    rcvbuf: int | None = None
    read_size: int = 65536                 # the receiving application's recv() buffer

    def describe(self) -> str:
        flags = [f"{self.cc}", f"Nagle {knobs.fmt_onoff(self.nagle)}", f"SACK {knobs.fmt_onoff(self.sack)}",
                 f"timestamps {knobs.fmt_onoff(self.timestamps)}",
                 f"window scaling {knobs.fmt_onoff(self.window_scaling)}"]
        if self.delack_count is not None:
            flags.append(f"delayed ACK every {self.delack_count} segments")
        if self.delack_timeout_ns is not None:
            flags.append(f"delayed-ACK timeout {knobs.fmt_duration(self.delack_timeout_ns)}")
        for name, value in (("MSS", self.mss), ("SO_SNDBUF", self.sndbuf), ("SO_RCVBUF", self.rcvbuf)):
            if value:
                flags.append(f"{name} {value}")
        flags.append(f"receiver reads {self.read_size} B at a time")
        return ", ".join(flags)


# With cross traffic, the demand's time zero is this long after the cross traffic starts, in
# both engines: its bursts and its bulk flows' state are chaotic in that phase, so the engines
# compare only at one phase.  Long enough for the real replay's set-up (about 0.8 s).
CROSS_LEAD_NS = 2_000_000_000


# ---------------------------------------------------------- a stack's seeds ---
def stack_seed(seed: int, k: int, reverse: bool = False) -> int:
    """The seed of stack k's cross traffic (each direction its own) for a scenario's seed
    (cross.UdpSchedule's, the real sender's and ns-3's)."""
    return seed * 1000 + k + (500 if reverse else 0)


PATH_SEED_STRIDE = 1_000_003        # a prime above any scenario seed used


def path_seed(seed: int, k: int) -> int:
    """The seed of stack k's path (linkem's --seed; ns-3 draws linkem's loss for it) for a
    scenario's seed: seed + 1 for stack 1, as it always was, and a stride apart for each
    later stack, so that no stack of --seed S draws what a stack of --seed S + 1 draws
    (seed + k did: stack k + 1 of S was stack k of S + 1)."""
    return seed + 1 + (k - 1) * PATH_SEED_STRIDE


@dataclass(frozen=True)
class Scenario:
    """A chain of `stacks` TCP stacks: stack k runs over path_of(k); in `offline` mode
    stack k+1 replays what stack k put on its wire, in `relay` mode all run at once
    joined by relays that write each read on at once."""
    stacks: int = 4
    mode: str = "offline"
    path: tuple[Path, ...] = (Path(),)
    tcp: Tcp = Tcp()
    cross: tuple[Cross, ...] = ()
    seed: int = 1

    def __post_init__(self):
        if self.stacks < 1:
            raise ValueError(f"stacks {self.stacks}: at least 1")
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}: {' or '.join(MODES)}")
        if not self.path:
            raise ValueError("a scenario needs at least one path")

    def path_of(self, k: int) -> Path:
        """Stack k's path (1-based)."""
        return knobs.for_stack(self.path, k)

    def replace(self, **changes) -> "Scenario":
        return replace(self, **changes)

    def describe(self) -> str:
        lines = [f"{self.stacks} TCP stack{'s' if self.stacks != 1 else ''}, {self.mode}"]
        paths = [self.path_of(k) for k in range(1, self.stacks + 1)]
        if all(p == paths[0] for p in paths):
            lines.append(f"  every path: {paths[0].describe()}")
        else:
            lines += [f"  stack {k}'s path: {p.describe()}" for k, p in enumerate(paths, 1)]
        if self.cross:
            ways = sum(p.duplex for p in paths)
            where = ("each bottleneck" if not ways else "each bottleneck, both directions" if ways == len(paths)
                     else "each bottleneck (both directions on the duplex paths)")
            lines.append(f"  cross traffic on {where}: " + "; ".join(c.describe() for c in self.cross))
        lines.append(f"  TCP: {self.tcp.describe()}")
        return "\n".join(lines)


# ------------------------------------------------------------- the flags ---
# (flag, Path field, parser, metavar, help) for the per-stack path knobs.
PATH_FLAGS = [
    ("--rate", "rate_bps", knobs.optional_rate, "RATE", "bottleneck rate: 20Mbps, 20mbit, 20e6 or none"),
    ("--delay", "delay_ns", knobs.duration, "TIME", "one-way delay of the whole path: 30ms or 0.03"),
    ("--queue", "queue", knobs.queue, "QUEUE", "bottleneck's drop-tail queue: 100p, 150kB, 64KiB or 1bdp"),
    ("--loss", "loss", knobs.loss, "LOSS", "random loss at the bottleneck: 1%, 0.01 or ge:P/R (bursts)"),
    ("--jitter", "jitter_ns", knobs.duration, "TIME", "extra delay per packet, up to this, order kept: 2ms"),
    ("--hops", "hops", knobs.positive_count, "N", "links in the path, one of them the bottleneck"),
    ("--mtu", "mtu", knobs.positive_count, "BYTES", "MTU of the path, bytes"),
    ("--duplex", "duplex", knobs.onoff, "on|off", "on: the reverse direction has the same rate, queue "
                                                  "and loss, and cross traffic runs both ways; off: "
                                                  "its delay and jitter only"),
]
# (flag, Tcp field, parser, metavar, help)
TCP_FLAGS = [
    ("--cc", "cc", knobs.cc, "NAME", "congestion control: cubic, reno, newreno, bbr ... or ns-3's TcpCubic"),
    ("--nagle", "nagle", knobs.onoff, "on|off", "Nagle's algorithm: on or off"),
    ("--sack", "sack", knobs.onoff, "on|off", "selective acknowledgements: on or off"),
    ("--timestamps", "timestamps", knobs.onoff, "on|off", "TCP timestamps: on or off"),
    ("--window-scaling", "window_scaling", knobs.onoff, "on|off", "window scaling: on or off"),
    ("--delack-count", "delack_count", knobs.positive_count, "N", "segments per delayed ACK"),
    ("--delack-timeout", "delack_timeout_ns", knobs.duration, "TIME", "delayed-ACK timeout: 40ms"),
    ("--mss", "mss", knobs.positive_count, "BYTES", "TCP maximum segment size"),
    ("--sndbuf", "sndbuf", knobs.positive_size, "BYTES", "SO_SNDBUF of every socket: 64KiB"),
    ("--rcvbuf", "rcvbuf", knobs.positive_size, "BYTES", "SO_RCVBUF of every socket: 64KiB"),
    ("--read-size", "read_size", knobs.positive_size, "BYTES", "the receiver's recv() size: 8KiB"),
]


def _default_text(value) -> str:
    if value is None:
        return "the engine's"
    if isinstance(value, bool):
        return knobs.fmt_onoff(value)
    return str(value)


def add_arguments(parser: argparse.ArgumentParser, *, chain: bool = True,
                  path_defaults: dict | None = None, tcp_knobs: list[str] | None = None,
                  path_title: str = "path (one value, or one per stack separated by commas)",
                  tcp_title: str = "TCP (every socket)") -> None:
    """The scenario's flags, the same in every command that runs one.  `chain`: the
    chain's flags (--stacks, --mode); `path_defaults`: Path fields whose default this
    command changes (from_args applies them); `tcp_knobs`: only these Tcp fields."""
    d, dp, dt = Scenario(), replace(Path(), **(path_defaults or {})), Tcp()
    parser.set_defaults(_path_defaults=dict(path_defaults or {}))
    if chain:
        g = parser.add_argument_group("chain")
        g.add_argument("--stacks", type=knobs.arg(knobs.positive_count), default=d.stacks,
                       help=f"TCP stacks in the chain (default {d.stacks})")
        g.add_argument("--mode", choices=MODES, default=d.mode,
                       help="offline: stack k+1 replays stack k's wire; relay: all at once, joined by "
                            f"relays (default {d.mode})")
    g = g if chain else parser.add_argument_group(path_title)
    g.add_argument("--seed", type=int, default=d.seed, help=f"random seed (default {d.seed})")
    g = parser.add_argument_group(path_title) if chain else g
    shown = {"rate_bps": "20Mbps", "delay_ns": "30ms", "jitter_ns": "0"}
    for flag, name, convert, metavar, text in PATH_FLAGS:
        default = shown.get(name, _default_text(getattr(dp, name)))
        g.add_argument(flag, dest=f"path_{name}", type=knobs.arg(knobs.per_stack(convert)),
                       default=None, metavar=metavar,
                       help=f"{text} (default {default})".replace("%", "%%"))
    g.add_argument("--cross", type=knobs.arg(cross), metavar="KIND:...", action="append", default=[],
                   help="competing traffic on each bottleneck, repeatable: " + CROSS_SYNTAX.replace("%", "%%"))
    g = parser.add_argument_group(tcp_title)
    shown = {"mss": "the MTU's"}
    for flag, name, convert, metavar, text in TCP_FLAGS:
        if tcp_knobs is not None and name not in tcp_knobs:
            continue
        default = shown.get(name, _default_text(getattr(dt, name)))
        g.add_argument(flag, dest=f"tcp_{name}", type=knobs.arg(convert), default=None, metavar=metavar,
                       help=f"{text} (default {default})".replace("%", "%%"))


def from_args(args: argparse.Namespace) -> Scenario:
    """The Scenario the flags of add_arguments() describe."""
    given = {f.name: getattr(args, f"path_{f.name}") for f in fields(Path)
             if getattr(args, f"path_{f.name}", None) is not None}
    defaults = {name: (value,) for name, value in getattr(args, "_path_defaults", {}).items()}
    given = {**defaults, **given}
    longest = max((len(v) for v in given.values()), default=1)
    paths = tuple(Path(**{name: knobs.for_stack(values, k) for name, values in given.items()})
                  for k in range(1, longest + 1))
    tcp = Tcp(**{f.name: getattr(args, f"tcp_{f.name}") for f in fields(Tcp)
                 if getattr(args, f"tcp_{f.name}", None) is not None})
    d = Scenario()
    return Scenario(stacks=getattr(args, "stacks", d.stacks), mode=getattr(args, "mode", d.mode),
                    path=paths, tcp=tcp, cross=tuple(args.cross), seed=args.seed)

