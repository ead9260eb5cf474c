"""A whole-application demand replayed into real TCP: every connection at once over one
shared path (`magnet replay tcp D`, D from `magnet demand --all`).

    run = app_tcp.run(demand, "out", scenario, tcp.TcpOptions())
    run.connections        # connections.csv: per connection start, completion, bytes, status
    run.adus               # adus.csv: per ADU its bytes, first write, last byte read, response time
    run.timing             # per side, |issued - due| of its rows
    run.failed             # {connection: why}; the CLI exits non-zero when any

The client side runs in the path's left namespace, the server side in its right one
(replay.wan, one stack: one linkem, both directions; Path.duplex on by default, the
CLI's choice), each one process holding every socket of its side
(replay.app_endpoint): the client's pinned to a CPU of its own, the server's with
the rest of the run.  A socketpair joins the two so an acceptor learns which
connection each accepted socket is.  Each side's processes are in a cgroup of their
own, recorded by the BPF capture into client.magnet and server.magnet (extended
records), as `magnet path --capture` records a real application.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from magnetlib import signals
from magnetlib.app_demand import CLIENT, SERVER, SIDES, AppDemand
from magnetlib.progress import timed

from . import app_results, wan, wire
from .errors import ReplayError
from .pacing import now_ns
from .scenario import Scenario
from .schedule import AppPlan
from .tcp import PACER_PRIORITY, Lab, TcpOptions, Work, describe, prepare

DEADLINE_SLACK_S = 60.0            # beyond 3x the demand's span (or its bytes at the path's rate)


@dataclass
class AppRun:
    scenario: Scenario
    options: TcpOptions
    method: str                    # bpf or reads
    connections: object            # DataFrame (connections.csv)
    adus: object                   # DataFrame (adus.csv)
    timing: dict                   # per side: fidelity of its rows' issue times, its peak RSS
    failed: dict                   # {connection: why}
    traces: dict                   # side -> its capture (bpf)
    notes: list[str]
    out_dir: Path
    applied: str = ""
    series: dict = field(default_factory=dict)   # "send"/"recv": [(label, ns, size)] for Table II
    cross_lead_ns: int | None = None               # cross traffic's start -> time zero (None: none)
    cross: dict | None = None                      # what the cross traffic moved (wan.CrossTraffic.moved[1])

    def summary(self) -> dict:
        return {"scenario": self.scenario.describe(), "options": asdict(self.options),
                "applied": self.applied, "method": self.method, "notes": self.notes,
                "cross_lead_ns": self.cross_lead_ns, "cross": self.cross,
                "cross_bulk_starts_ms": wan.bulk_starts(self.cross) if self.cross else None,
                "timing": self.timing, "failed": {str(k): v for k, v in self.failed.items()},
                "connections": len(self.connections),
                "traces": {side: str(p) for side, p in self.traces.items()}}


def check(scenario: Scenario, options: TcpOptions) -> None:
    """What a whole-application replay cannot do: ReplayError naming the flag."""
    if scenario.stacks != 1:
        raise ReplayError("--stacks", "a whole-application demand is replayed over one path (--stacks 1): "
                                      "every connection shares it")
    if options.capture == "pcap":
        raise ReplayError("--capture", "a whole-application replay records each side with the BPF "
                                       "capture (or --capture none), not tcpdump")


def run(demand: AppDemand, out_dir: str | os.PathLike, scenario: Scenario, options: TcpOptions,
        progress=lambda line: None, open_loop: bool = False) -> AppRun:
    """Replay every connection of `demand` at once; the files go to out_dir."""
    check(scenario, options)
    linux = prepare(scenario, options)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    work = Work(out / "sides")
    plans = {side: AppPlan.of(demand, k) for k, side in enumerate(SIDES)}
    for side, plan in plans.items():
        plan.save(work.path(f"{side}-plan"))
    with signals.honoured():                 # Ctrl-C, SIGTERM, SIGHUP: clean up, Interrupted
        with Lab(scenario, options, linux, out) as lab:
            if lab.method == "pcap":
                lab.method = "reads"
                lab.notes.append("no BPF capture: no client.magnet or server.magnet (a whole-application "
                                 "replay does not record with tcpdump)")
            results, anchor = _replay(lab, work, demand, plans, open_loop)
            cross_lead_ns = lab.cross_lead(1, anchor)      # before the notes: it may add one
            applied = describe(scenario, options, linux) + (("\n" + lab.net.describe()) if lab.net else "")
            path_stats = lab.path_stats(1)
            notes = list(lab.notes) + ([wan.cross_line(lab.cross[1])] if lab.cross.get(1) else [])
            method = lab.method
            moved = lab.cross.get(1)
    if path_stats:
        notes.append(f"path: {path_stats.line()}")
    fifo = [side for side, result in results.items() if result.get("sched_fifo")]
    if options.realtime:
        notes.append(f"the sides ran under SCHED_FIFO ({' and '.join(fifo)})" if fifo else
                     "SCHED_FIFO refused: the sides ran under normal scheduling (timing suffers under load)")
    traces = {side: out / f"{side}.magnet" for side in SIDES} if method == "bpf" else {}
    tables = app_results.collect(demand, plans, {side: work.path(f"{side}-record") for side in SIDES},
                                 results, anchor, traces)
    failed = app_results.failures(tables.connections)
    for side, result in results.items():
        tables.timing[side]["max_rss_mib"] = result["max_rss_kib"] / 1024
        tables.timing[side]["cpu_s"] = result["cpu_s"]
    app_results.write(tables, out)
    return AppRun(scenario, options, method, tables.connections, tables.adus, tables.timing, failed,
                  traces, notes, out, applied, tables.series, cross_lead_ns, moved)


def _replay(lab: Lab, work: Work, demand: AppDemand, plans: dict, open_loop: bool) -> tuple[dict, int]:
    """Both sides, started, released at one time zero, and their results."""
    where = lab.place(1)
    ends = {"client": (where.left_ns, where.left_addr, where.right_addr),
            "server": (where.right_ns, where.right_addr, where.left_addr)}
    deadline_s = _deadline_s(demand, lab)
    sessions = {side: lab.session([1], side, side) for side in SIDES}
    with lab.capturing(sessions["client"]), lab.capturing(sessions["server"]), lab.crossing([1]):
        control = dict(zip(SIDES, socket.socketpair()))
        procs = {}
        try:
            for side in ("server", "client"):
                ns, mine, peer = ends[side]
                procs[side] = _start(lab, side, ns, mine, peer, control[side], work, sessions[side],
                                     deadline_s, open_loop)
        finally:
            for sock in control.values():
                sock.close()
        ports = {side: lab.ready(proc, f"{side} side") for side, proc in procs.items()}
        # With cross traffic, time zero is the scenario's lead into it (as in ns-3), unless
        # the set-up overran it (then a note).
        anchor = max(lab.start_at or 0, now_ns() + int(lab.options.lead_ms * 1e6))
        for side, proc in procs.items():
            peer = "server" if side == "client" else "client"
            proc.stdin.write(f"go {ports[peer]} {anchor} {anchor + int(deadline_s * 1e9)}\n")
            proc.stdin.flush()
        with timed(f"{len(plans['client'].number)} connections", demand.duration_ns / 1e9, lab.options.bars):
            results = {side: lab.finish(procs[side], f"{side} side", deadline_s + 60) for side in SIDES}
    return results, anchor


def _start(lab: Lab, side: str, ns, mine: str, peer: str, control: socket.socket, work: Work, session,
           deadline_s: float, open_loop: bool) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "magnet.replay.app_endpoint", side, "--plan", work.path(f"{side}-plan"),
           "--listen", f"{mine}:0", "--peer", peer, "--control", str(control.fileno()),
           "--record", work.path(f"{side}-record"), *lab.linux.endpoint_args]
    if open_loop:
        cmd.append("--open-loop")
    if lab.options.realtime:
        cmd.append(f"--realtime={PACER_PRIORITY}")

    def preexec():
        wire._die_with_parent(9)
        if side == "client":                    # the busier pacer: a CPU of its own
            os.sched_setaffinity(0, lab.pacer_cpus)
        session.preexec()
    return lab.spawn(ns, cmd, lab.procs, preexec, stdin=subprocess.PIPE, pass_fds=(control.fileno(),))


def _deadline_s(demand: AppDemand, lab: Lab) -> float:
    """How long the sides may run before they stop and report what did not finish."""
    seconds = demand.duration_ns / 1e9
    rate = lab.scenario.path_of(1).rate_bps
    if rate and lab.net:
        seconds = max(seconds, (demand.sent_bytes(CLIENT) + demand.sent_bytes(SERVER)) * 8 / rate)
    return 3 * seconds + DEADLINE_SLACK_S
