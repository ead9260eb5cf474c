"""Benchmark: what recording costs, against the targets of issue 17 (optionally
against another build of magnet-read).

    python -m magnet.experiments.bench_capture_cost [--rounds 6] [--duration 8] [--stats-runs 3]
                                                    [--baseline PATH] [--quick] [--out DIR] [--note TEXT]

iperf3 over a veth pair between two namespaces (MTU 1500, offloads off) as
fast as it goes, in rounds, each round's order rotated (a noisy neighbour or
TCP's memory of the previous run hits every case alike):

  no capture        the baseline of its round
  magnet net        magnet-read of every socket of the host, all network events
  magnet sock       the same, socket layer only (--events sock)
  magnet sock,dev   the same, the application and the wire only (--events sock,dev:
                    what Table II and `magnet compare` read), this build only
  tcpdump           tcpdump -w -B 64 MiB on the receiver's interface

With --baseline PATH, the two magnet cases again with that magnet-read (an
earlier build): the same machine, the same rounds, A B A B. Then a loopback
bulk transfer (iperf3 in one namespace) with BPF run-time statistics, per
build: kernel time per recorded event, all network events, and where it goes
per program. Reported: medians [min, max] of throughput, its loss against the
same round's no-capture run, CPU-seconds per transferred GB (the transfer's
cgroups and the capture tool), ns per recorded event, and the targets.
Needs root, iperf3, tcpdump, ethtool. The machine's load before and after go
to the README (it is shared: say what else ran with --note).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from magnet import capture
from magnet.replay import netns
from magnetlib.trace import Trace

from . import bench_capture as bench
from . import capture_gate, common
from .bench_linkem import busiest, load

PORT = 5201
BASELINE = "no capture"
TCPDUMP = "tcpdump"
# Issue 17's targets.
WIRE_EVENTS = "sock,dev"      # the application and the wire: what Table II and compare need
COST_TARGET_NS = 100          # kernel time per recorded event, all network events, loopback bulk
NET_LOSS_TARGET_PCT = 8.0     # all network events at saturation on veth
NET_TCPDUMP_SHARE = 1 / 3     # ... and at most this share of tcpdump's loss in the same runs
SOCK_LOSS_TARGET_PCT = 2.0    # socket layer only


@dataclass
class Lab:
    net: netns.Net
    sender: Path                  # cgroups of the iperf3 client and server (their CPU)
    receiver: Path
    work: Path
    duration: float


class Magnet:
    """magnet-read of every socket during one transfer."""

    def __init__(self, lab: Lab, binary: Path, events: str, stats: bool):
        self.trace, self.stats = lab.work / "cost.magnet", (lab.work / "stats.json" if stats else None)
        settings = capture.Settings(events=events, stats=str(self.stats) if stats else None,
                                    status_dir=str(lab.work / "status"))
        self.cap = capture.Capture(self.trace, settings=settings, binary=binary).start()
        self.pid = self.cap.pid

    def stop(self) -> dict:
        if self.cap.stop() != 0:
            raise RuntimeError(f"magnet-read failed: {self.cap.error()}")
        scan = Trace(self.trace).scan
        out = {"events": scan.records - scan.lost_records, "lost": scan.lost}
        self.trace.unlink()
        if self.stats:
            stats = json.loads(self.stats.read_text())
            time_ns = sum(p["run_time_ns"] for p in stats["programs"].values())
            out["ns_per_event"] = time_ns / max(stats["records"] + stats["lost_buffer_full"], 1)
            out["programs"] = stats["programs"]
            self.stats.unlink()
        return out

    def kill(self) -> None:
        if self.cap.returncode is None:
            self.cap.stop(signal.SIGKILL)


class Tcpdump:
    """tcpdump -w with a 64 MiB buffer on the receiver's interface (issue 17's comparison)."""

    def __init__(self, lab: Lab):
        self.pcap = lab.work / "cost.pcap"
        self.proc = subprocess.Popen(["ip", "netns", "exec", lab.net.server, "tcpdump", "-B", "65536",
                                      "-i", lab.net.devices["server"], "-w", str(self.pcap)],
                                     stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        line = self.proc.stderr.readline()
        if "listening" not in line:
            raise RuntimeError(f"tcpdump: {line.strip()}")

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGINT)
        err = self.proc.communicate(timeout=30)[1]
        self.pcap.unlink(missing_ok=True)
        captured = re.search(r"(\d+) packets? captured", err)
        dropped = re.search(r"(\d+) packets? dropped by kernel", err)
        return {"events": int(captured.group(1)) if captured else 0,
                "drops": int(dropped.group(1)) if dropped else 0}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def transfer(lab: Lab, start_tool, loopback: bool = False) -> dict:
    """One iperf3 transfer (veth, or loopback inside the client's namespace) under a tool."""
    ns = lab.net.client if loopback else lab.net.server
    addr = "127.0.0.1" if loopback else lab.net.server_addr
    server = bench.start_in(lab.receiver, ns, ["iperf3", "-s", "-1", "-p", str(PORT)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tool = None
    try:
        bench.wait_port(ns, PORT)
        tool = start_tool()
        cpu0 = bench.cgroup_cpu_us(lab.sender) + bench.cgroup_cpu_us(lab.receiver)
        tool0, t0 = bench.process_cpu(tool.pid) if tool else 0, time.monotonic()
        client = bench.start_in(lab.sender, lab.net.client, ["iperf3", "-c", addr, "-p", str(PORT),
                                                            "-t", str(lab.duration), "-J"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        result = json.loads(client.communicate(timeout=lab.duration + 60)[0])
        cpu_s = (bench.cgroup_cpu_us(lab.sender) + bench.cgroup_cpu_us(lab.receiver) - cpu0) / 1e6
        cpu_s += ((bench.process_cpu(tool.pid) - tool0) if tool else 0) / os.sysconf("SC_CLK_TCK")
        if "error" in result:
            raise RuntimeError(f"iperf3: {result['error']}")
        received = result["end"]["sum_received"]
        run = {"gbps": received["bits_per_second"] / 1e9, "seconds": time.monotonic() - t0,
               "cpu_s_per_gb": cpu_s / (received["bytes"] / 1e9)}
        if tool:
            run.update(tool.stop())
            tool = None
        return run
    finally:
        if tool:
            tool.kill()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:     # no client ever came (a failed start)
            server.kill()
            server.wait()


def cases(lab: Lab, builds: dict[str, Path]) -> dict:
    """Case name -> how to start its tool (None: no capture)."""
    out = {BASELINE: lambda: None, TCPDUMP: lambda: Tcpdump(lab)}
    for build, binary in builds.items():
        for events in ("net", "sock") if build else ("net", "sock", WIRE_EVENTS):
            out[f"magnet {events}{build}"] = lambda b=binary, e=events: Magnet(lab, b, e, stats=False)
    return out


def measure(args, builds: dict[str, Path]) -> list[dict]:
    rows = []
    sender, receiver = (capture.make_cgroup(f"mgcc{os.getpid()}-{side}") for side in ("snd", "rcv"))
    try:
        with netns.pair(f"mgcc{os.getpid() % 10000}") as net, \
                tempfile.TemporaryDirectory(prefix="mgcc-", dir=args.workdir) as work:
            for ns in (net.client, net.server):          # no TCP memory from one run to the next
                netns.sh("sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1", ns=ns)
            lab = Lab(net, sender, receiver, Path(work), args.duration)
            order = list(cases(lab, builds).items())
            for round_ in common.progress(range(args.rounds), "rounds", unit="round"):
                k = round_ % len(order)
                for name, start in order[k:] + order[:k]:
                    rows.append({"kind": "veth", "case": name, "round": round_, **transfer(lab, start)})
                    common.progress_note(f"round {round_ + 1} {name}: {rows[-1]['gbps']:.2f} Gb/s")
            lab.duration = args.stats_duration
            for round_ in range(args.stats_runs):
                for build, binary in builds.items():
                    run = transfer(lab, lambda b=binary: Magnet(lab, b, "net", stats=True), loopback=True)
                    rows.append({"kind": "loopback, BPF statistics", "case": f"magnet net{build}",
                                 "round": round_, **run})
                    common.progress_note(f"loopback {build or 'this build'}: {run['ns_per_event']:.0f} ns/event")
    finally:
        capture.remove_cgroup(sender)
        capture.remove_cgroup(receiver)
    return rows


# ---------------------------------------------------------------- summary ---
def with_losses(runs: pd.DataFrame) -> pd.DataFrame:
    """Each veth run's throughput loss against the no-capture run of its round."""
    veth = runs[runs.kind == "veth"].copy()
    base = veth[veth.case == BASELINE].set_index("round").gbps
    veth["loss_pct"] = 100.0 * (1 - veth.gbps / veth["round"].map(base))
    return veth


def spread(values: pd.Series, fmt: str = "{:.3g}") -> str:
    v = values.dropna().astype(float)
    if v.empty:
        return "–"
    return f"{fmt.format(v.median())} [{fmt.format(v.min())}, {fmt.format(v.max())}]"


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    veth = with_losses(runs)
    for case, part in veth.groupby("case", sort=False):
        rows.append({"case": case, "runs": len(part), "gbps": spread(part.gbps),
                     "loss_pct": spread(part.loss_pct, "{:.1f}"), "cpu_s_per_gb": spread(part.cpu_s_per_gb),
                     "events_per_s": spread(part.events / part.seconds) if "events" in part else "–",
                     "lost": int(part.get("lost", pd.Series(dtype=float)).fillna(0).max()),
                     "tcpdump_drops": int(part.get("drops", pd.Series(dtype=float)).fillna(0).max())})
    cost = runs[runs.kind != "veth"]
    for case, part in cost.groupby("case", sort=False):
        rows.append({"case": f"{case}, loopback with BPF statistics", "runs": len(part),
                     "gbps": spread(part.gbps), "cpu_s_per_gb": spread(part.cpu_s_per_gb),
                     "ns_per_event": spread(part.ns_per_event, "{:.0f}")})
    return pd.DataFrame(rows)


def programs(runs: pd.DataFrame) -> pd.DataFrame:
    """Per build and program, over the loopback runs: runs, ns per run, share of the time."""
    rows = []
    for case, part in runs[runs.kind != "veth"].groupby("case", sort=False):
        totals: dict[str, list[int]] = {}
        for stats in part.programs:
            for name, p in stats.items():
                acc = totals.setdefault(name, [0, 0])
                acc[0] += p["run_cnt"]
                acc[1] += p["run_time_ns"]
        all_ns = sum(ns for _, ns in totals.values())
        attach = {name: p.get("attach", "") for stats in part.programs for name, p in stats.items()}
        rows += [{"case": case, "program": name, "attach": attach[name],  # older builds do not say
                  "runs": count, "ns_per_run": ns / count if count else None,
                  "share_pct": 100.0 * ns / all_ns if all_ns else 0.0}
                 for name, (count, ns) in totals.items()]
    return pd.DataFrame(rows)


def verdicts(runs: pd.DataFrame, builds: dict[str, Path]) -> list[str]:
    veth = with_losses(runs)
    loss = veth.groupby("case").loss_pct.median()
    cost = runs[runs.kind != "veth"].groupby("case").ns_per_event.median()
    out = []
    for build in builds:
        who = f" ({build.strip(', ')})" if build else ""
        ns = cost.get(f"magnet net{build}")
        if ns is not None:
            out.append(f"kernel time per recorded event{who}, all network events, loopback bulk: "
                       f"{ns:.0f} ns (BPF statistics, ~{bench.STATS_FLOOR_NS} ns per run of it "
                       f"their own), target <= {COST_TARGET_NS} ns: {'met' if ns <= COST_TARGET_NS else 'MISSED'}")
        net, sock, dump = loss.get(f"magnet net{build}"), loss.get(f"magnet sock{build}"), loss.get(TCPDUMP)
        if net is not None and dump is not None:
            ok = net <= NET_LOSS_TARGET_PCT and net <= NET_TCPDUMP_SHARE * max(dump, 0)
            out.append(f"throughput loss{who}, all network events: {net:.1f} % (tcpdump {dump:.1f} %), "
                       f"target <= {NET_LOSS_TARGET_PCT:g} % and <= 1/3 of tcpdump's: {'met' if ok else 'MISSED'}")
        if sock is not None:
            out.append(f"throughput loss{who}, socket layer only: {sock:.1f} %, target <= "
                       f"{SOCK_LOSS_TARGET_PCT:g} %: {'met' if sock <= SOCK_LOSS_TARGET_PCT else 'MISSED'}")
        wire = loss.get(f"magnet {WIRE_EVENTS}{build}")
        if wire is not None:
            out.append(f"throughput loss{who}, the application and the wire only (--events {WIRE_EVENTS}): "
                       f"{wire:.1f} % (no target)")
    return out


def main(argv=None) -> int:
    p = common.parser("capture-cost", __doc__)
    p.add_argument("--rounds", type=int, default=6, help="rounds of every case (default 6)")
    p.add_argument("--duration", type=float, default=8.0, help="seconds per veth transfer (default 8)")
    p.add_argument("--stats-runs", type=int, default=3, help="loopback runs with BPF statistics per build")
    p.add_argument("--stats-duration", type=float, default=4.0, help="seconds per loopback run (default 4)")
    p.add_argument("--baseline", type=Path, help="another magnet-read to measure beside this one (A B A B)")
    p.add_argument("--workdir", default="/dev/shm", help="where traces and pcaps go (a tmpfs)")
    p.add_argument("--note", default="", help="a sentence for the README: what else ran on the machine")
    args = common.parse(p, argv)
    capture_gate.quick(p, args, rounds=2, duration=3.0, stats_runs=1)
    builds = {"": capture_gate.ready("iperf3", "tcpdump", "ethtool", "ip")}
    if args.baseline:
        common.gate(os.access(args.baseline, os.X_OK), f"--baseline {args.baseline}: not an executable")
        builds[", baseline"] = args.baseline
    context = {"before": load(), "others_before": busiest(os.getpid())}
    runs = pd.DataFrame(measure(args, builds))
    context.update(after=load(), others_after=busiest(os.getpid()))
    results = common.Results("capture-cost", args)
    results.command = f"python -m magnet.experiments.bench_capture_cost {shlex.join(args.argv)}".strip()
    results.table("runs", runs.drop(columns=["programs"], errors="ignore"))
    per_program = results.table("programs", programs(runs), floats="{:.4g}")
    builds_text = f" Baseline build: `{args.baseline}`." if args.baseline else ""
    body = "\n".join([
        f"iperf3 over a veth pair (MTU 1500, offloads off), {args.rounds} rounds of {args.duration:g} s, "
        "each round's order rotated; loss against the same round's no-capture run; medians "
        f"[min, max]. Then {args.stats_runs} loopback bulk transfer(s) of {args.stats_duration:g} s per "
        f"build with BPF run-time statistics.{builds_text}", "",
        *[f"* {line}" for line in verdicts(runs, builds)], "",
        common.markdown(summary(runs)), "",
        "Where the kernel time goes (loopback runs with BPF statistics, all runs together):", "",
        per_program, "",
        f"Load average before {context['before']}, after {context['after']}. Busiest other processes "
        f"before: {context['others_before']}; after: {context['others_after']}."
        + (f" {args.note}" if args.note else "")])
    path = results.write("What recording costs: issue 17's targets", body)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
