"""One dialect for the knobs of every command: rates, times, sizes, queues, loss,
switches, congestion control and stream ids, parsed and printed in one place.

    knobs.rate("20Mbps") == knobs.rate("20mbit") == knobs.rate("20e6") == 20_000_000  # bit/s
    knobs.duration("30ms") == knobs.duration("0.03") == 30_000_000                    # ns
    knobs.size("64KiB") == 65536; knobs.size("64kB") == 64000                          # bytes
    knobs.queue("100p"), knobs.queue("150kB"), knobs.queue("1bdp")                     # Queue
    knobs.loss("1%"), knobs.loss("0.01"), knobs.loss("ge:1%/25%")                      # Loss
    knobs.cc("TcpCubic") == "cubic"; knobs.cc_for("ns-3", "cubic") == "TcpCubic"
    knobs.per_stack(knobs.rate)("20Mbps,10Mbps")   # one value per stack, the last repeated
    knobs.fmt_rate(20e6) == "20 Mbit/s"; knobs.fmt_stream(176) == "0xb0"

Rates are bits per second whatever the spelling (bps, bit, b/s: bits; a bare
number: bit/s); byte rates (MB/s, MBps) are refused rather than guessed.  Sizes
are bytes: k, M, G are powers of 1000, Ki, Mi, Gi powers of 1024.  Every parser
raises ValueError with a message that names the value and shows the syntax;
`arg()` turns a parser into an argparse type.
"""
from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_SI = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_IEC = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError
    return value


# ------------------------------------------------------------------ rates ---
RATE_SYNTAX = "bits per second, e.g. 20Mbps, 20mbit, 20e6 or 1Gbit/s"


def rate(text: str | float | int) -> int:
    """A rate in bit/s: 20Mbps, 20mbit, 20Mbit/s, 20M, 20e6 (all 20 Mbit/s)."""
    if isinstance(text, (int, float)):
        text = repr(text)
    s = text.strip().replace(" ", "")
    if re.fullmatch(_NUMBER + r"([kKmMgGtT]?)(B/s|Bps|byte/s)", s):
        raise ValueError(f"rate {text!r}: bytes per second are ambiguous here; use {RATE_SYNTAX}")
    m = re.fullmatch(_NUMBER + r"([kKmMgGtT]?)(bps|bit/s|bits/s|bit|b/s)?", s)
    if not m:
        raise ValueError(f"rate {text!r}: use {RATE_SYNTAX}")
    bits = round(_number(m.group(1)) * _SI[m.group(2).lower()])
    if bits <= 0:
        raise ValueError(f"rate {text!r}: must be above 0 bit/s")
    return bits


def optional_rate(text: str) -> int | None:
    """A rate, or none/off/0 for no limit."""
    return None if text.strip().lower() in ("none", "off", "0", "unlimited") else rate(text)


def fmt_rate(bps: float | None) -> str:
    """20000000 -> '20 Mbit/s'; None -> 'unlimited'."""
    if bps is None:
        return "unlimited"
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if abs(bps) >= scale:
            return f"{bps / scale:.4g} {unit}"
    return f"{bps:.4g} bit/s"


# ------------------------------------------------------------------ times ---
TIME_SYNTAX = "seconds or a unit, e.g. 30ms, 0.03, 500us or 2s"
_TIME_UNITS = {"": 1e9, "s": 1e9, "sec": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1}


def duration(text: str | float | int) -> int:
    """A time in ns: 30ms, 0.03 (seconds), 500us, 2s, 250ns; 0 allowed, negative not."""
    if isinstance(text, (int, float)):
        text = repr(text)
    m = re.fullmatch(_NUMBER + r"(s|sec|ms|us|µs|ns)?", text.strip().replace(" ", ""))
    if not m:
        raise ValueError(f"time {text!r}: use {TIME_SYNTAX}")
    return round(_number(m.group(1)) * _TIME_UNITS[m.group(2) or ""])


def optional_duration(text: str) -> int | None:
    return None if text.strip().lower() in ("none", "off") else duration(text)


def fmt_duration(ns: float | None) -> str:
    """30000000 -> '30 ms'."""
    if ns is None:
        return "none"
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"


# ------------------------------------------------------------------ sizes ---
SIZE_SYNTAX = "bytes, e.g. 65536, 64KiB or 64kB"


def size(text: str | int) -> int:
    """A size in bytes: 65536, 64KiB (65536), 64kB or 64k (64000), 1MiB, 1.5MB."""
    if isinstance(text, int):
        text = str(text)
    m = re.fullmatch(_NUMBER + r"([kKmMgGtT]i?)?(B|b|bytes?)?", text.strip().replace(" ", ""))
    if not m:
        raise ValueError(f"size {text!r}: use {SIZE_SYNTAX}")
    prefix = (m.group(2) or "").lower()
    value = _number(m.group(1)) * (_IEC[prefix] if prefix.endswith("i") else _SI[prefix])
    if value != int(value):
        raise ValueError(f"size {text!r}: a whole number of bytes")
    return int(value)


def positive_size(text: str) -> int:
    value = size(text)
    if value <= 0:
        raise ValueError(f"size {text!r}: must be at least 1 byte")
    return value


def count(text: str) -> int:
    """A whole number >= 0."""
    try:
        value = int(text, 10)
    except (TypeError, ValueError):
        raise ValueError(f"{text!r}: a whole number, e.g. 2") from None
    if value < 0:
        raise ValueError(f"{text!r}: at least 0")
    return value


def positive_count(text: str) -> int:
    value = count(text)
    if value < 1:
        raise ValueError(f"{text!r}: at least 1")
    return value


# ----------------------------------------------------------------- queues ---
QUEUE_SYNTAX = "packets (100p), bytes (150kB, 64KiB, 150000B) or bandwidth-delay products (1bdp)"


@dataclass(frozen=True)
class Queue:
    """A drop-tail queue's capacity: `amount` packets, bytes or bandwidth-delay products."""
    amount: float
    unit: str = "packets"           # packets | bytes | bdp

    def bytes(self, rate_bps: float | None, rtt_ns: float, mtu: int = 1500) -> int:
        """The capacity in bytes (a packet counts as one MTU)."""
        if self.unit == "bytes":
            return int(self.amount)
        if self.unit == "packets":
            return int(self.amount) * mtu
        if not rate_bps:
            raise ValueError(f"queue {self}: a bandwidth-delay product needs a rate")
        return max(mtu, round(self.amount * rate_bps / 8 * rtt_ns / 1e9))

    def packets(self, rate_bps: float | None, rtt_ns: float, mtu: int = 1500) -> int:
        """The capacity in packets (bytes rounded up to whole MTUs)."""
        if self.unit == "packets":
            return int(self.amount)
        return max(1, -(-self.bytes(rate_bps, rtt_ns, mtu) // mtu))

    def __str__(self) -> str:
        return {"packets": f"{self.amount:g}p", "bytes": f"{self.amount:g}B",
                "bdp": f"{self.amount:g}bdp"}[self.unit]


def queue(text: str) -> Queue:
    """100, 100p, 100pkts (packets); 150000B, 150kB, 64KiB (bytes); 1bdp, 0.5bdp."""
    s = text.strip().replace(" ", "")
    m = re.fullmatch(_NUMBER + r"(p|pkt|pkts|packets?)?", s)
    if m and float(m.group(1)) == int(float(m.group(1))) and float(m.group(1)) >= 1:
        return Queue(int(float(m.group(1))), "packets")
    m = re.fullmatch(_NUMBER + r"bdp", s, re.I)
    if m and float(m.group(1)) > 0:
        return Queue(float(m.group(1)), "bdp")
    try:
        return Queue(positive_size(s), "bytes")          # a bare number was packets, above
    except ValueError:
        pass
    raise ValueError(f"queue {text!r}: use {QUEUE_SYNTAX}")


# ------------------------------------------------------------------- loss ---
LOSS_SYNTAX = ("a probability per packet (1%, 0.01), or Gilbert-Elliott bursts ge:P/R[/BAD[/GOOD]] "
               "(P: good to bad, R: bad to good, BAD and GOOD: loss in each state, default 100% and 0%)")


@dataclass(frozen=True)
class Loss:
    """Random loss per packet: Bernoulli (r is None) or a Gilbert-Elliott two-state chain."""
    p: float = 0.0                  # Bernoulli: loss probability; GE: P(good -> bad) per packet
    r: float | None = None          # GE: P(bad -> good) per packet
    bad: float = 1.0                # GE: loss probability in the bad state
    good: float = 0.0               # GE: loss probability in the good state

    @property
    def bursty(self) -> bool:
        return self.r is not None

    @property
    def mean(self) -> float:
        """The long-run loss probability."""
        if not self.bursty:
            return self.p
        if self.p + self.r == 0:
            return self.good
        in_bad = self.p / (self.p + self.r)
        return in_bad * self.bad + (1 - in_bad) * self.good

    def __bool__(self) -> bool:
        return self.mean > 0

    def __str__(self) -> str:
        if not self.bursty:
            return _pct(self.p)
        return "ge:" + "/".join(_pct(v) for v in (self.p, self.r, self.bad, self.good))


def _pct(value: float) -> str:
    return f"{value * 100:.6g}%"


def probability(text: str) -> float:
    """1%, 0.5 %, 0.01 (a fraction) -> 0.01."""
    s = text.strip().replace(" ", "")
    try:
        value = _number(s[:-1]) / 100 if s.endswith("%") else _number(s)
    except ValueError:
        raise ValueError(f"probability {text!r}: use a percentage (1%) or a fraction (0.01)") from None
    if not 0 <= value <= 1:
        raise ValueError(f"probability {text!r}: between 0 and 100%")
    return value


def loss(text: str) -> Loss:
    """1%, 0.01, 0 (Bernoulli); ge:1%/25% or ge:1%/25%/90%/0.1% (Gilbert-Elliott)."""
    s = text.strip()
    try:
        if s.lower().startswith(("ge:", "gilbert:")):
            parts = [probability(p) for p in s.split(":", 1)[1].split("/")]
            if not 2 <= len(parts) <= 4:
                raise ValueError
            return Loss(*parts)
        return Loss(probability(s))
    except ValueError:
        raise ValueError(f"loss {text!r}: use {LOSS_SYNTAX}") from None


# --------------------------------------------------------------- switches ---
_ON = ("on", "1", "true", "yes")
_OFF = ("off", "0", "false", "no")


def onoff(text: str) -> bool:
    """on/off (also 1/0, true/false, yes/no)."""
    s = text.strip().lower()
    if s in _ON or s in _OFF:
        return s in _ON
    raise ValueError(f"{text!r}: on or off")


def fmt_onoff(value: bool) -> str:
    return "on" if value else "off"


# ------------------------------------------------------ congestion control ---
# One name per algorithm (Linux's), and what each engine calls it.  Linux's
# "reno" is NewReno loss recovery (RFC 6582) with SACK when SACK is on.
CONGESTION_CONTROL = {
    "cubic":    {"tcp": "cubic", "ns-3": "TcpCubic"},
    "newreno":  {"tcp": "reno", "ns-3": "TcpNewReno"},
    "reno":     {"tcp": "reno", "ns-3": "TcpLinuxReno"},
    "bbr":      {"tcp": "bbr", "ns-3": "TcpBbr"},
    "vegas":    {"tcp": "vegas", "ns-3": "TcpVegas"},
    "westwood": {"tcp": "westwood", "ns-3": "TcpWestwoodPlus"},
    "htcp":     {"tcp": "htcp", "ns-3": "TcpHtcp"},
    "illinois": {"tcp": "illinois", "ns-3": "TcpIllinois"},
    "dctcp":    {"tcp": "dctcp", "ns-3": "TcpDctcp"},
    "scalable": {"tcp": "scalable", "ns-3": "TcpScalable"},
    "hybla":    {"tcp": "hybla", "ns-3": "TcpHybla"},
    "highspeed": {"tcp": "highspeed", "ns-3": "TcpHighSpeed"},
    "veno":     {"tcp": "veno", "ns-3": "TcpVeno"},
    "yeah":     {"tcp": "yeah", "ns-3": "TcpYeah"},
    "lp":       {"tcp": "lp", "ns-3": "TcpLp"},
}
_CC_ALIASES = {names["ns-3"].lower(): name for name, names in CONGESTION_CONTROL.items()}
_CC_ALIASES.update({"tcpreno": "reno", "westwoodplus": "westwood", "westwood+": "westwood"})


def cc(text: str) -> str:
    """A congestion control by its Linux name (cubic, reno, bbr) or ns-3's (TcpCubic)."""
    s = text.strip().lower()
    if s in CONGESTION_CONTROL:
        return s
    if s in _CC_ALIASES:
        return _CC_ALIASES[s]
    raise ValueError(f"congestion control {text!r}: use one of {', '.join(CONGESTION_CONTROL)} "
                     "(or ns-3's names, e.g. TcpCubic)")


def cc_for(engine: str, name: str, available: list[str] | None = None) -> str:
    """What `engine` ("tcp" or "ns-3") calls congestion control `name`; with `available`,
    refuses one the engine here does not have, naming those it does."""
    own = CONGESTION_CONTROL[cc(name)][engine]
    if available is not None and own not in available:
        raise ValueError(f"congestion control {name!r}: not available in {engine} here "
                         f"(available: {', '.join(sorted(available))})")
    return own


# ---------------------------------------------------------------- streams ---
def stream(text: str) -> int:
    """A stream id (socket cookie), hexadecimal with 0x or decimal."""
    try:
        value = int(text.strip(), 0)
    except (AttributeError, ValueError):
        raise ValueError(f"stream {text!r}: a socket id, e.g. 0xb0 or 176") from None
    if value < 0:
        raise ValueError(f"stream {text!r}: not negative")
    return value


def fmt_stream(sockid: int) -> str:
    """Stream ids print the same way everywhere: hexadecimal, 0xb0."""
    return f"{int(sockid):#x}"


# ------------------------------------------------------- lists and argparse ---
def per_stack(convert):
    """A comma-separated list of `convert`ed values, one per TCP stack; the last
    one holds for the stacks after it ("20Mbps,10Mbps": 20 for stack 1, 10 after)."""
    def parse(text: str) -> tuple:
        parts = [p for p in text.split(",")]
        if not parts or any(not p.strip() for p in parts):
            raise ValueError(f"{text!r}: one value, or one per stack separated by commas")
        return tuple(convert(p) for p in parts)
    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


def for_stack(values: tuple, k: int):
    """Stack k's value (1-based) of a per-stack tuple: the last one repeats."""
    return values[min(k, len(values)) - 1]


def arg(convert):
    """`convert` as an argparse type: its ValueError message becomes argparse's."""
    def parse(text: str):
        try:
            return convert(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = getattr(convert, "__name__", "value")
    return parse
