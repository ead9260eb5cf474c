"""A demand run for real between two network namespaces and captured live: what the
studies `traces` and `sndbuf` share.

    live.gate("20mbit")                                # rate, root, tools, BPF: else one line, exit 2
    run = live.run("ftp", synth.ftp(10), work, rate="20mbit")
    run.series(Event.SOCK_SEND, run.sender)           # (ns, bytes) of the writes

One TCP connection between two network namespaces joined by the link emulator
(replay.linkem: `rate` at the bottleneck, `delay` one way, MTU 1500), the paced sender of replay.tcp
issuing the demand's writes at their due times, and the BPF capture
(magnet-read, extended data) recording both ends.  Names carry the prefix
`mgxl<pid>`; replay.netns removes them whatever happens.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import magnetlib
from magnet import capture
from magnetlib import knobs
from magnetlib.demand import Demand
from magnetlib.format import Event
from magnet.replay import linkem, tcp, wire
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario, Tcp

from . import common

FAMILY = "mgxl"


def unavailable() -> str | None:
    """Why a live capture cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and the BPF capture)"
    missing = [t for t in tcp.TOOLS if not shutil.which(t)]
    if missing:
        return f"needs {', '.join(missing)} (Debian: iproute2)"
    why = linkem.unavailable()
    if why:
        return f"the link emulator {why}"
    why = wire.bpf_unavailable()
    return f"the BPF capture cannot run: {why}" if why else None


def gate(rate: str | None) -> None:
    """Stop with one line (exit 2) if the rate is not a rate or a prerequisite is missing."""
    try:
        if rate:
            knobs.rate(rate)
    except ValueError as e:
        common.gate(False, f"--rate: {e}")
    why = unavailable()
    common.gate(why is None, why or "")


@dataclass
class LiveRun:
    """One captured connection: its trace, the two ends' socket cookies, the replay's record."""
    name: str
    trace: Path
    sender: int
    receiver: int
    replay: tcp.TcpRun

    @property
    def notes(self) -> list[str]:
        """The replay's notes, and how faithfully the sender issued the demand's writes."""
        stack = self.replay.stacks[0]
        # A blocked write is in the replay's notes already, and makes "late" meaningless.
        timing = [f"the sender's {stack.timing.line()}"] if stack.timing and not stack.timing.blocked else []
        return self.replay.notes + stack.notes + timing

    def series(self, event: Event, cookie: int, data_only: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(ns, size) of one event kind of one socket; data_only: size > 0."""
        with magnetlib.open(self.trace) as trace:
            ns, size = trace.series(trace.select([event], cookie))
        keep = size > 0 if data_only else np.ones(len(size), bool)
        return ns[keep], size[keep]


def params(rate: str | None, delay: str | None = None,
           sndbuf: int | None = None) -> tuple[Scenario, tcp.TcpOptions]:
    """One stack over one emulated hop (no delay unless asked), BPF capture required, our names."""
    path = NetPath(rate_bps=knobs.optional_rate(rate) if rate else None,
                   delay_ns=knobs.duration(delay) if delay else 0)
    return Scenario(stacks=1, path=(path,), tcp=Tcp(sndbuf=sndbuf)), tcp.TcpOptions(capture="bpf", family=FAMILY)


def run(name: str, demand: Demand, work: Path, rate: str | None, delay: str | None = None,
        sndbuf: int | None = None) -> LiveRun:
    """Replay `demand` over one shaped veth hop with the BPF capture on; files in work/name.
    A run that fails stops the study with one line (exit 2)."""
    try:
        replay = tcp.run_chain(demand, Path(work) / name, *params(rate, delay, sndbuf))
    except (tcp.ReplayError, capture.CaptureError) as e:
        common.gate(False, f"{name}: {e}")
    stack = replay.stacks[0]
    return LiveRun(name, stack.trace, stack.sender["cookie"], stack.receiver["cookie"], replay)


def describe_setup(args) -> str:
    """The common paragraph on how the connection was set up, for a study's README."""
    delay = f"a {args.delay} one-way delay" if args.delay else "no added delay"
    return (f"One TCP connection between two network namespaces joined by the link emulator "
            f"(replay.linkem on TUN devices, MTU 1500, every device event one wire packet): a "
            f"{args.rate or 'unlimited'} bottleneck with a 100-packet drop-tail queue, {delay}. "
            f"The sender is replay.tcp's paced replayer "
            f"(each write issued at its due time); the receiver reads whatever has arrived "
            f"(64 KiB reads). Both ends are captured live by the BPF capture (magnet-read --ext).")
