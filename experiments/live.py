"""A demand run for real between two network namespaces and captured live: what the
studies `traces` and `sndbuf` share.

    live.gate("20mbit")                                # rate, root, tools, BPF: else one line, exit 2
    run = live.run("ftp", synth.ftp(10), work, rate="20mbit")
    run.series(Event.SOCK_SEND, run.sender)           # (ns, bytes) of the writes

One TCP connection over one veth pair (replay.netns: MTU 1500, offloads off, a
token bucket of `rate` on the sender's end), the paced sender of replay.tcp
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
from magnetlib.demand import Demand
from magnetlib.format import Event
from magnet.replay import netns, tcp, wire

from . import common

FAMILY = "mgxl"


def unavailable() -> str | None:
    """Why a live capture cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and the BPF capture)"
    missing = [t for t in tcp.TOOLS if not shutil.which(t)]
    if missing:
        return f"needs {', '.join(missing)} (Debian: iproute2, ethtool)"
    why = wire.bpf_unavailable()
    return f"the BPF capture cannot run: {why}" if why else None


def gate(rate: str | None) -> None:
    """Stop with one line (exit 2) if the rate is not tc's syntax or a prerequisite is missing."""
    try:
        if rate:
            netns.rate_bits(rate)
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


def params(rate: str | None, delay: str | None = None, sndbuf: int | None = None) -> tcp.TcpParams:
    """One stack, BPF capture required, our names."""
    return tcp.TcpParams(stacks=1, mode="offline", rate=rate, delay=delay, capture="bpf",
                         sndbuf=sndbuf, family=FAMILY)


def run(name: str, demand: Demand, work: Path, rate: str | None, delay: str | None = None,
        sndbuf: int | None = None) -> LiveRun:
    """Replay `demand` over one shaped veth hop with the BPF capture on; files in work/name.
    A run that fails stops the study with one line (exit 2)."""
    try:
        replay = tcp.run_chain(demand, Path(work) / name, params(rate, delay, sndbuf))
    except (tcp.ReplayError, capture.CaptureError) as e:
        common.gate(False, f"{name}: {e}")
    stack = replay.stacks[0]
    return LiveRun(name, stack.trace, stack.sender["cookie"], stack.receiver["cookie"], replay)


def describe_setup(args) -> str:
    """The common paragraph on how the connection was set up, for a study's README."""
    delay = f"a {args.delay} one-way delay requested" if args.delay else "no delay emulation"
    return (f"One TCP connection between two network namespaces joined by a veth pair (MTU 1500, "
            f"TSO/GSO/GRO off, so every device event is one wire packet), a token bucket of "
            f"{args.rate or 'the veth speed'} on the sender's end, {delay} (this kernel has no "
            f"netem, so the RTT is the veth's, ~0.1 ms). The sender is replay.tcp's paced replayer "
            f"(each write issued at its due time); the receiver reads whatever has arrived "
            f"(64 KiB reads). Both ends are captured live by the BPF capture (magnet-read --ext).")
