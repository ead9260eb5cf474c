"""linkem: the userspace link emulator of `magnet replay tcp` (linkem.c), built on first use.

    path = scenario.Path(rate_bps=20_000_000, delay_ns=30_000_000, hops=3)
    linkem.check(path)                           # ValueError naming the flag if out of range
    emu = linkem.Emulator("mgrp42-s1", [linkem.Tun("a", "mgrp42-n0", "mgrp42t1a", "10.203.1.1"),
                                        linkem.Tun("b", "mgrp42-n1", "mgrp42t1b", "10.203.1.2")],
                          path, seed=1, stats=Path("s1.json"))
    ...                                          # configure the devices, run traffic
    stats = emu.stop()                           # counters per direction (Stats)

One process per stack's path, both directions (the kernel here has no netem:
docs/replay.md).  Each Tun is a TUN device the emulator opens in a network
namespace: side "a" holds senders, side "b" receivers; a packet read on one
side goes to the device of the other side that holds its destination address.
The binary is built by its Makefile (the system's C compiler and make) into the
per-user cache (magnetlib.buildcache), keyed by a hash of its sources, so an
installed magnet needs no checkout.  Its core (core.c: stages, queue, loss,
jitter) has no system calls; `make test` runs its unit tests (test_core.c).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from magnetlib import buildcache, knobs

from .. import workers
from ..errors import ReplayError

SOURCE = Path(__file__).resolve().parent
TUN_DEVICE = "/dev/net/tun"
NETNS_DIR = "/run/netns"

# What the emulator can honour (the flags these limits are reported against).
RATE_RANGE = (1_000, 10_000_000_000)             # bit/s
DELAY_MAX_NS = 10_000_000_000
HOPS_MAX = 64
MTU_RANGE = (576, 9000)


class LinkemError(ReplayError):
    """The emulator cannot be built or started, or failed: one line, "WHAT: problem"."""


# ----------------------------------------------------------------- build ---
SOURCES = ("linkem.c", "core.c", "core.h", "linklog.c", "linklog.h", "Makefile")


def build(quiet: bool = True) -> Path:
    """The linkem binary, built by its Makefile once per version of its sources
    ($MAGNET_LINKEM: that binary instead, e.g. another version to compare against)."""
    given = os.environ.get("MAGNET_LINKEM")
    if given:
        return Path(given)
    files = [(name, SOURCE / name) for name in SOURCES]
    return buildcache.make("linkem", SOURCE, files, targets=["all"], quiet=quiet) / "linkem"


def unavailable() -> str | None:
    """Why the emulator cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (TUN devices in network namespaces)"
    if not os.path.exists(TUN_DEVICE):
        return f"{TUN_DEVICE} is missing (a kernel without TUN, or a container without the device)"
    return None


# ---------------------------------------------------------------- limits ---
def check(path) -> None:
    """A scenario.Path the emulator can apply, else ValueError naming the flag."""
    if path.rate_bps is not None and not RATE_RANGE[0] <= path.rate_bps <= RATE_RANGE[1]:
        raise ValueError(f"--rate {knobs.fmt_rate(path.rate_bps)}: out of range for the link "
                         f"emulator ({knobs.fmt_rate(RATE_RANGE[0])} to {knobs.fmt_rate(RATE_RANGE[1])}, "
                         "or none)")
    for flag, value in (("--delay", path.delay_ns), ("--jitter", path.jitter_ns)):
        if not 0 <= value <= DELAY_MAX_NS:
            raise ValueError(f"{flag} {knobs.fmt_duration(value)}: out of range for the link emulator "
                             f"(0 to {knobs.fmt_duration(DELAY_MAX_NS)})")
    if not 1 <= path.hops <= HOPS_MAX:
        raise ValueError(f"--hops {path.hops}: out of range (1 to {HOPS_MAX})")
    if not MTU_RANGE[0] <= path.mtu <= MTU_RANGE[1]:
        raise ValueError(f"--mtu {path.mtu}: out of range ({MTU_RANGE[0]} to {MTU_RANGE[1]} bytes)")
    if path.queue.unit == "bdp" and not path.rate_bps:
        raise ValueError(f"--queue {path.queue}: a bandwidth-delay product needs a --rate")
    if path.rate_bps and path.queue.unit == "bytes" and path.queue.amount < path.mtu:
        raise ValueError(f"--queue {path.queue}: smaller than one packet of the MTU ({path.mtu} B)")


def path_args(path, seed: int) -> list[str]:
    """linkem's options for a scenario.Path."""
    args = [f"--delay={path.delay_ns}", f"--hops={path.hops}", f"--bottleneck={path.bottleneck}",
            f"--mtu={path.mtu}", f"--seed={seed}"]
    if path.jitter_ns:
        args.append(f"--jitter={path.jitter_ns}")
    if path.duplex:
        args.append("--duplex")
    if path.rate_bps:
        args.append(f"--rate={path.rate_bps}")
        if path.queue.unit == "packets":
            args.append(f"--queue-packets={int(path.queue.amount)}")
        else:
            args.append(f"--queue-bytes={path.queue_bytes}")
    loss = path.loss
    if loss.bursty:
        args.append(f"--ge={loss.p!r},{loss.r!r},{loss.bad!r},{loss.good!r}")
    elif loss.p:
        args.append(f"--loss={loss.p!r}")
    return args


# --------------------------------------------------------------- process ---
@dataclass(frozen=True)
class Tun:
    side: str          # "a": senders, "b": receivers
    ns: str            # network namespace name (ip netns)
    dev: str
    addr: str          # the IPv4 address behind this device

    def arg(self) -> str:
        return f"--tun={self.side}:{NETNS_DIR}/{self.ns}:{self.dev}:{self.addr}"


def write_log_meta(folder: Path, path) -> None:
    """The path a per-packet log was taken on (path.json beside the log, for its readers)."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"rate_bps": path.rate_bps, "delay_ns": path.delay_ns, "queue": str(path.queue),
            "queue_packets": path.queue_packets if path.rate_bps else None,
            "queue_bytes": path.queue_bytes if path.rate_bps else None, "loss": str(path.loss),
            "jitter_ns": path.jitter_ns, "hops": path.hops, "mtu": path.mtu, "duplex": path.duplex,
            "description": path.describe()}
    (folder / "path.json").write_text(json.dumps(meta, indent=1) + "\n")


@dataclass
class Stats:
    """What the emulator did: counters per direction ("forward", "reverse"); with a
    per-packet log, its summary lines (log_summary)."""
    raw: dict
    log_summary: list[str] | None = None

    def __getitem__(self, direction: str) -> dict:
        return self.raw[direction]

    @property
    def sched_fifo(self) -> bool:
        return bool(self.raw.get("sched_fifo"))

    def line(self) -> str:
        parts = []
        for way in ("forward", "reverse"):
            c = self.raw[way]
            text = f"{way} {c['forwarded']} packets ({c['forwarded_bytes']} B)"
            drops = [f"{c[key]} {what}" for key, what in (("queue_drops", "queue drops"),
                                                           ("random_losses", "random losses"),
                                                           ("too_big", "over the MTU"),
                                                           ("overflow", "emulator overflows"),
                                                           ("write_errors", "write errors"),
                                                           ("log_lost", "records lost from the link log"))
                     if c.get(key)]
            parts.append(text + (", " + ", ".join(drops) if drops else ""))
        f, r = self.raw["forward"], self.raw["reverse"]
        peak = f"{f['queue_max_packets']} packets" + (f" ({r['queue_max_packets']} reverse)"
                                                      if r["queue_max_packets"] else "")
        return ("; ".join(parts) + f"; queue peak {peak}; delivery late "
                f"p50 {f['late_p50_us']:.0f} us, p99 {f['late_p99_us']:.0f} us")


class Emulator:
    """One linkem process joining its Tun devices; running once constructed."""

    def __init__(self, name: str, tuns: list[Tun], path, seed: int = 1, stats: Path | None = None,
                 realtime: bool = True, preexec_fn=None, log: Path | None = None):
        self.name, self.tuns, self.path, self.stats_path, self.log = name, tuns, path, stats, log
        cmd = [str(build()), f"--name={name}", *(t.arg() for t in tuns), *path_args(path, seed)]
        if stats:
            cmd.append(f"--stats={stats}")
        if log:
            write_log_meta(Path(log), path)
            cmd.append(f"--log={log}")
        if not realtime:
            cmd.append("--no-rt")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
        try:
            line = workers.first_line(self.proc).split()
        except workers.WorkerError as e:
            raise LinkemError(name, str(e)) from None
        if not line or line[0] != "ready":
            self.proc.wait()
            raise LinkemError(name, self._error())
        self.sched_fifo = "sched_fifo=1" in line
        self.final: Stats | None = None

    def _error(self) -> str:
        lines = [line for line in self.proc.stderr.read().splitlines() if line.strip()]
        return lines[-1].removeprefix(f"{self.name}: ") if lines else \
            f"exited with status {self.proc.returncode}"

    def snapshot(self) -> Stats | None:
        """The counters so far (SIGUSR1 makes the emulator write its stats file)."""
        if not self.stats_path or self.proc.poll() is not None:
            return self.final
        before = self.stats_path.stat().st_mtime_ns if self.stats_path.exists() else 0
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(200):                      # up to 1 s
            if self.stats_path.exists() and self.stats_path.stat().st_mtime_ns != before:
                break
            time.sleep(0.005)
        return Stats(json.loads(self.stats_path.read_text()))

    def stop(self) -> Stats:
        """End the process; its counters."""
        if self.final is not None:
            return self.final
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if self.proc.returncode != 0 or not lines:
            raise LinkemError(self.name, (err.strip().splitlines() or
                                          [f"exited with status {self.proc.returncode}"])[-1])
        self.final = Stats(json.loads(lines[-1]))
        if self.log:
            from .. import linklog
            self.final.log_summary = linklog.write_summary(self.log)
        return self.final

    def kill(self) -> None:
        """End the process at once (clean-up after a failure); counters are not read."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()
