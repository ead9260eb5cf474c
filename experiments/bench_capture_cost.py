"""Benchmark: what recording costs, against the targets of "every layer for
half the cost" (optionally against another build of magnet-read).

    python -m magnet.experiments.bench_capture_cost [--rounds 6] [--duration 8] [--stats-runs 3]
                                                    [--baseline PATH|GIT-REVISION] [--check-rounds 4]
                                                    [--quick] [--out DIR] [--note TEXT]

iperf3 over a veth pair between two namespaces (MTU 1500, offloads off) as
fast as it goes, in rounds, each round's order rotated (a noisy neighbour or
TCP's memory of the previous run hits every case alike):

  no capture        the baseline of its round
  magnet net        magnet-read of every socket of the host, all network events
  magnet sock       the same, socket layer only (--events sock)
  magnet sock,dev   the same, the application and the wire only (--events sock,dev:
                    what Table II and `magnet compare` read), this build only
  tcpdump           tcpdump -w -B 64 MiB on the receiver's interface

With --baseline (a magnet-read, or a git revision of this repository whose
capture/ is built for the run), the two magnet cases again with that build:
the same machine, the same rounds, A B A B. Then a loopback bulk transfer
(iperf3 in one namespace) with BPF run-time statistics, per build: program
runs per packet (over the DEV_SEND records), per program the runs per data
segment and per ACK, and the kernel time per recorded event. With a baseline
last, --check-rounds rounds in which both builds record the same traffic at
once (--ext, the lab's cgroup only; loopback and veth, iperf3 at 1 Gb/s; which
one starts first alternates; every capture stops once iperf3's connections have
closed): per layer, the records of each (they must be equal) and how far
apart their timestamps are (median and 99th percentile, us).

Reported: medians [min, max] of throughput, its loss against the same round's
no-capture run, CPU-seconds per transferred GB (the transfer's cgroups and
the capture tool) and the extra over no capture, and every target's figure.
Needs root, iperf3, tcpdump, ethtool. The machine's load before and after go
to the README (it is shared: say what else ran with --note).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from magnet import capture
from magnet.replay import netns
from magnetlib.trace import Trace

from magnetlib.format import Event as E

from . import bench_capture as bench
from . import capture_gate, capture_times, common
from .capture_lab import CaptureLab, open_lab

PORT = 5201
BASELINE = "no capture"
TCPDUMP = "tcpdump"
WIRE_EVENTS = "sock,dev"      # the application and the wire: what Table II and compare need
# Targets: every network event, a loopback bulk transfer (runs) and a saturated veth pair.
RUNS_PER_PACKET_TARGET = 4.0  # program runs per DEV_SEND record
CPU_TCPDUMP_SHARE = 1 / 4     # extra CPU per GB, at most this share of tcpdump's
NET_LOSS_TARGET_PCT = 15.0    # throughput loss at saturation
NET_TCPDUMP_SHARE = 1 / 2     # ... and at most this share of tcpdump's loss in the same rounds
SOCK_LOSS_TARGET_PCT = 2.0    # socket layer only
CHECK_RATE = "1G"             # iperf3 -b of the check of times (two captures with --ext at once)
# The program behind each event (SYN-ACKs aside), for the per-program table; TCP_SEND
# is IP egress's in builds whose egress runs record two events (extra_events).
RECORDED_BY = {"magnet_sock_send": (E.SOCK_SEND,), "magnet_sock_recv": (E.SOCK_RECV,),
               "magnet_tcp_probe": (E.TCP_RECV,), "magnet_ip_send": (E.IP_SEND,),
               "magnet_ip_recv": (E.IP_RECV,), "magnet_dev_send": (E.DEV_SEND,),
               "magnet_dev_recv": (E.DEV_RECV,)}


class Magnet:
    """magnet-read of every socket during one transfer."""

    def __init__(self, lab: CaptureLab, binary: Path, events: str, stats: bool, name: str = "cost",
                 ext: bool = False, keep: bool = False):
        self.trace = lab.work / f"{name}.magnet"
        self.stats = lab.work / f"{name}.stats.json" if stats else None
        self.keep = keep
        settings = capture.Settings(events=events, stats=str(self.stats) if stats else None, ext=ext,
                                    buffer="64M" if ext else None, status_dir=str(lab.work / "status"),
                                    ports=str(PORT) if ext else None)
        # With --ext (the check of times: two captures compared record for record) only
        # the lab's connections: an iperf3 on the same port elsewhere on the host, while
        # one capture runs and the other does not yet or no longer, would reach one trace only.
        self.cap = capture.Capture(self.trace, cgroup=lab.cgroup if ext else None, settings=settings,
                                   binary=binary).start()
        self.pid = self.cap.pid

    def stop(self) -> dict:
        if self.cap.stop() != 0:
            raise RuntimeError(f"magnet-read failed: {self.cap.error()}")
        trace = Trace(self.trace)
        scan = trace.scan
        out = {"events": scan.records - scan.lost_records, "lost": scan.lost}
        if self.keep:
            out["trace"] = trace
        else:
            self.trace.unlink()
        if self.stats:
            stats = json.loads(self.stats.read_text())
            time_ns = sum(p["run_time_ns"] for p in stats["programs"].values())
            out["ns_per_event"] = time_ns / max(stats["records"] + stats["lost_buffer_full"], 1)
            out["programs"] = stats["programs"]
            out["extra_events"] = stats["extra_events"]
            out["recorded"] = {int(ev): [n, scan.zero_size.get(ev, 0)] for ev, n in scan.counts.items()}
            sent = out["recorded"].get(int(E.DEV_SEND), [0, 0])
            out["data_segments"], out["acks"] = sent[0] - sent[1], sent[1]
            out["runs_per_packet"] = sum(p["run_cnt"] for p in stats["programs"].values()) / max(sent[0], 1)
            self.stats.unlink()
        return out

    def kill(self) -> None:
        if self.cap.returncode is None:
            self.cap.stop(signal.SIGKILL)


class Tcpdump:
    """tcpdump -w with a 64 MiB buffer on the receiver's interface (what the targets compare with)."""

    def __init__(self, lab: CaptureLab):
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


def transfer(lab: CaptureLab, start_tool, loopback: bool = False, rate: str | None = None) -> dict:
    """One iperf3 transfer (veth, or loopback inside the client's namespace) under a tool
    (or tools: a tuple of them, started in order)."""
    ns = lab.net.client if loopback else lab.net.server
    addr = "127.0.0.1" if loopback else lab.net.server_addr
    server = lab.start("receiver", ns, ["iperf3", "-s", "-1", "-p", str(PORT)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tool = None
    try:
        lab.wait_listening(ns, PORT)
        tool = start_tool()
        cpu0 = lab.cpu_us()
        tool0, t0 = bench.process_cpu(tool.pid) if tool else 0, time.monotonic()
        client = lab.start("sender", lab.net.client, ["iperf3", "-c", addr, "-p", str(PORT),
                                                      "-t", str(lab.duration), "-J",
                                                      *(["-b", rate] if rate else [])],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        result = json.loads(client.communicate(timeout=lab.duration + 60)[0])
        cpu_s = (lab.cpu_us() - cpu0) / 1e6
        cpu_s += ((bench.process_cpu(tool.pid) - tool0) if tool else 0) / os.sysconf("SC_CLK_TCK")
        if "error" in result:
            raise RuntimeError(f"iperf3: {result['error']}")
        received = result["end"]["sum_received"]
        run = {"gbps": received["bits_per_second"] / 1e9, "seconds": time.monotonic() - t0,
               "cpu_s_per_gb": cpu_s / (received["bytes"] / 1e9)}
        if tool:
            settle(lab, server, ns)
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


def settle(lab: CaptureLab, server: subprocess.Popen, ns: str, timeout: float = 10.0) -> None:
    """Wait until the transfer's connections have closed: the iperf3 server has
    exited and no socket of the port is left but in TIME-WAIT. Their last
    segments (FINs, last ACKs) follow the client's exit: a capture stopped
    before them misses what one stopped a moment later records."""
    server.wait(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [line.split()[0] for space in {ns, lab.net.client} for line in netns.sh(
            "ss", "-Htan", f"( sport = :{PORT} or dport = :{PORT} )", ns=space).stdout.splitlines()]
        if all(state == "TIME-WAIT" for state in states):
            return
        time.sleep(0.01)
    raise RuntimeError(f"iperf3's connections did not close within {timeout:g} s")


def cases(lab: CaptureLab, builds: dict[str, Path]) -> dict:
    """Case name -> how to start its tool (None: no capture)."""
    out = {BASELINE: lambda: None, TCPDUMP: lambda: Tcpdump(lab)}
    for build, binary in builds.items():
        for events in ("net", "sock") if build else ("net", "sock", WIRE_EVENTS):
            out[f"magnet {events}{build}"] = lambda b=binary, e=events: Magnet(lab, b, e, stats=False)
    return out


class Both:
    """This build and the baseline recording the same traffic at once, with --ext,
    iperf3's connections only (`first` starts first: its programs run first at
    each hook)."""

    def __init__(self, lab: CaptureLab, builds: dict[str, Path], first: str):
        order = sorted(builds, key=lambda b: b != first)
        self.caps = {b: Magnet(lab, builds[b], "net", stats=False, name=f"check{i}", ext=True, keep=True)
                     for i, b in enumerate(order)}
        self.pid = self.caps[order[0]].pid

    def stop(self) -> dict:
        done = {b: cap.stop() for b, cap in self.caps.items()}
        new, old = (done[b] for b in sorted(done))
        diffs = capture_times.differences(new.pop("trace"), old.pop("trace"))
        for cap in self.caps.values():
            cap.trace.unlink()
        return {"events": new["events"], "lost": new["lost"] + old["lost"], "times": diffs}

    def kill(self) -> None:
        for cap in self.caps.values():
            cap.kill()


def measure(args, builds: dict[str, Path]) -> list[dict]:
    rows = []
    with open_lab("mgcc", ("sender", "receiver"), workdir=args.workdir, duration=args.duration) as lab:
        for ns in (lab.net.client, lab.net.server):     # no TCP memory from one run to the next
            netns.sh("sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1", ns=ns)
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
                common.progress_note(f"loopback {build or 'this build'}: {run['runs_per_packet']:.2f} "
                                     f"runs per packet, {run['ns_per_event']:.0f} ns/event")
        rows += check_times(args, lab, builds)
    return rows


def check_times(args, lab: CaptureLab, builds: dict[str, Path]) -> list[dict]:
    """Both builds on the same traffic, loopback and veth, which one first alternating."""
    if len(builds) < 2:
        return []
    rows = []
    lab.duration = args.check_duration
    for round_ in range(args.check_rounds):
        first = sorted(builds)[round_ % 2]
        for loopback in (True, False):
            run = transfer(lab, lambda: Both(lab, builds, first), loopback=loopback, rate=CHECK_RATE)
            rows.append({"kind": "check times", "case": "loopback" if loopback else "veth",
                         "round": round_, "first": "baseline" if first else "this build", **run})
            common.progress_note(f"check times {rows[-1]['case']} round {round_ + 1}: {run['events']} events")
    return rows


# ---------------------------------------------------------------- summary ---
def with_losses(runs: pd.DataFrame) -> pd.DataFrame:
    """Each veth run's throughput loss and extra CPU per GB against the no-capture
    run of its round."""
    veth = runs[runs.kind == "veth"].copy()
    base = veth[veth.case == BASELINE].set_index("round")
    veth["loss_pct"] = 100.0 * (1 - veth.gbps / veth["round"].map(base.gbps))
    veth["extra_cpu_s_per_gb"] = veth.cpu_s_per_gb - veth["round"].map(base.cpu_s_per_gb)
    return veth


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    veth = with_losses(runs)
    for case, part in veth.groupby("case", sort=False):
        rows.append({"case": case, "runs": len(part), "gbps": common.spread(part.gbps),
                     "loss_pct": common.spread(part.loss_pct, "{:.1f}"),
                     "cpu_s_per_gb": common.spread(part.cpu_s_per_gb),
                     "extra_cpu_s_per_gb": common.spread(part.extra_cpu_s_per_gb),
                     "events_per_s": common.spread(part.events / part.seconds) if "events" in part else "–",
                     "lost": int(part.get("lost", pd.Series(dtype=float)).fillna(0).max()),
                     "tcpdump_drops": int(part.get("drops", pd.Series(dtype=float)).fillna(0).max())})
    cost = runs[runs.kind == "loopback, BPF statistics"]
    for case, part in cost.groupby("case", sort=False):
        rows.append({"case": f"{case}, loopback with BPF statistics", "runs": len(part),
                     "gbps": common.spread(part.gbps), "cpu_s_per_gb": common.spread(part.cpu_s_per_gb),
                     "runs_per_packet": common.spread(part.runs_per_packet, "{:.2f}"),
                     "ns_per_event": common.spread(part.ns_per_event, "{:.0f}")})
    return pd.DataFrame(rows)


def per_packet(part: pd.DataFrame) -> pd.DataFrame:
    """One build's loopback runs: per program, its runs per data segment and per
    ACK (the runs that recorded a packet's event, by the record's size: 0 is an
    ACK), the others (filtered out, not an event, e.g. TCP sizing its segments)
    per packet, ns per run and share of the time."""
    data, acks = part.data_segments.sum(), part.acks.sum()
    recorded: dict[int, list[int]] = {}
    for counts in part.recorded:
        for ev, (n, zero) in counts.items():
            acc = recorded.setdefault(int(ev), [0, 0])
            acc[0] += n
            acc[1] += zero
    totals: dict[str, list] = {}
    for stats in part.programs:
        for name, p in stats.items():
            acc = totals.setdefault(name, [0, 0, p.get("attach", "")])
            acc[0] += p["run_cnt"]
            acc[1] += p["run_time_ns"]
    egress_tcp = part.extra_events.sum() > 0.5 * recorded.get(int(E.IP_SEND), [0])[0]
    by = dict(RECORDED_BY, magnet_sockops=() if egress_tcp else (E.TCP_SEND, E.TCP_RETRANS))
    all_ns = sum(t[1] for t in totals.values())
    rows = []
    for name, (count, ns, attach) in totals.items():
        n = sum(recorded.get(int(ev), [0, 0])[0] for ev in by.get(name, ()))
        zero = sum(recorded.get(int(ev), [0, 0])[1] for ev in by.get(name, ()))
        rows.append({"program": name, "attach": attach, "runs": count,
                     "per_data_segment": (n - zero) / max(data, 1), "per_ack": zero / max(acks, 1),
                     "other_per_packet": (count - n) / max(data + acks, 1),
                     "per_packet": count / max(data + acks, 1),
                     "ns_per_run": ns / count if count else None,
                     "share_pct": 100.0 * ns / all_ns if all_ns else 0.0})
    return pd.DataFrame(rows)


def programs(runs: pd.DataFrame) -> pd.DataFrame:
    """Per build and program, over the loopback runs (per_packet)."""
    parts = [per_packet(part).assign(case=case)
             for case, part in runs[runs.kind == "loopback, BPF statistics"].groupby("case", sort=False)]
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return frame[["case"] + [c for c in frame.columns if c != "case"]] if len(frame) else frame


def times(runs: pd.DataFrame) -> pd.DataFrame:
    """The check of times, per traffic (loopback, veth) and layer."""
    check = runs[runs.kind == "check times"]
    parts = [capture_times.summary(list(part.times)).assign(traffic=case)
             for case, part in check.groupby("case", sort=False)]
    if not parts:
        return pd.DataFrame()
    frame = pd.concat(parts, ignore_index=True)
    return frame[["traffic"] + [c for c in frame.columns if c != "traffic"]]


def ratio(veth: pd.DataFrame, case: str, column: str) -> pd.Series:
    """Per round, a case's `column` over tcpdump's."""
    mine = veth[veth.case == case].set_index("round")[column]
    dump = veth[veth.case == TCPDUMP].set_index("round")[column]
    return (mine / dump).dropna()


def verdicts(runs: pd.DataFrame, builds: dict[str, Path], check: pd.DataFrame) -> list[str]:
    veth = with_losses(runs)
    loss = veth.groupby("case").loss_pct.median()
    cost = runs[runs.kind == "loopback, BPF statistics"]
    out = []
    for build in builds:
        who = f" ({build.strip(', ')})" if build else ""
        net = f"magnet net{build}"
        mine = cost[cost.case == net]
        if len(mine):
            rpp = mine.runs_per_packet.median()
            out.append(f"program runs per packet{who}, every network event, loopback bulk (over the DEV_SEND "
                       f"records): {common.spread(mine.runs_per_packet, '{:.2f}')}, target <= {RUNS_PER_PACKET_TARGET:g}: "
                       f"{'met' if rpp <= RUNS_PER_PACKET_TARGET else 'MISSED'}; kernel time per recorded "
                       f"event {mine.ns_per_event.median():.0f} ns (BPF statistics, ~{bench.STATS_FLOOR_NS} ns "
                       "per run of it their own)")
        dump = loss.get(TCPDUMP)
        if net in loss and dump is not None:
            share = ratio(veth, net, "loss_pct")
            ok = loss[net] <= NET_LOSS_TARGET_PCT and loss[net] <= NET_TCPDUMP_SHARE * max(dump, 0)
            out.append(f"throughput loss at saturation{who}, every network event: "
                       f"{common.spread(veth[veth.case == net].loss_pct, '{:.1f}')} % (tcpdump "
                       f"{common.spread(veth[veth.case == TCPDUMP].loss_pct, '{:.1f}')} %; per round "
                       f"{common.spread(share, '{:.2f}')} of tcpdump's), target <= {NET_LOSS_TARGET_PCT:g} % and "
                       f"<= 1/2 of tcpdump's: {'met' if ok else 'MISSED'}")
            cpu = ratio(veth, net, "extra_cpu_s_per_gb")
            mine_cpu = veth[veth.case == net].extra_cpu_s_per_gb
            dump_cpu = veth[veth.case == TCPDUMP].extra_cpu_s_per_gb
            ok = mine_cpu.median() <= CPU_TCPDUMP_SHARE * dump_cpu.median()
            out.append(f"extra CPU per GB{who}, every network event: {common.spread(mine_cpu)} s (tcpdump "
                       f"{common.spread(dump_cpu)} s; per round {common.spread(cpu, '{:.2f}')} of tcpdump's), target <= 1/4 "
                       f"of tcpdump's: {'met' if ok else 'MISSED'}")
            lost = veth[veth.case == net].get("lost", pd.Series(dtype=float)).fillna(0)
            out.append(f"events lost at saturation{who}, default buffer: {int(lost.max())} at most in a run "
                       f"({int(lost.sum())} in all), target none: {'met' if lost.sum() == 0 else 'MISSED'}")
        sock = loss.get(f"magnet sock{build}")
        if sock is not None:
            out.append(f"throughput loss{who}, socket layer only: {sock:.1f} %, target <= "
                       f"{SOCK_LOSS_TARGET_PCT:g} %: {'met' if sock <= SOCK_LOSS_TARGET_PCT else 'MISSED'}")
        wire = loss.get(f"magnet {WIRE_EVENTS}{build}")
        if wire is not None:
            out.append(f"throughput loss{who}, the application and the wire only (--events {WIRE_EVENTS}): "
                       f"{wire:.1f} % (no target)")
    for traffic, part in check.groupby("traffic", sort=False) if len(check) else ():
        equal = part.counts_equal.all()
        layers = ", ".join(f"{r.layer} {r.median_us:+.2f}/{r.p99_us:+.2f}" for r in part.itertuples()
                           if r.matched)
        out.append(f"check of times, {traffic}: records of every layer equal in both builds: "
                   f"{'yes' if equal else 'NO'}; this build minus the baseline, median/p99 us: {layers}")
    return out


def baseline_binary(spec: str, work: Path) -> Path:
    """--baseline: a magnet-read, or a git revision of this repository whose
    capture/ is built into `work` (its Makefile, as `make capture` builds it)."""
    path = Path(spec)
    if path.is_file():
        common.gate(os.access(path, os.X_OK), f"--baseline {spec}: not an executable")
        return path
    repo = Path(__file__).resolve().parents[1]
    common.gate((repo / ".git").exists(), f"--baseline {spec}: no such file, and {repo} is not a git "
                                          "checkout to build a revision from")
    tree = work / "baseline"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", spec, "capture"], capture_output=True)
    common.gate(archive.returncode == 0, f"--baseline {spec}: not a file, nor a revision of {repo} "
                f"({archive.stderr.decode(errors='replace').strip()})")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    built = subprocess.run(["make", "-s", "-C", str(tree / "capture"), f"OUTPUT={tree / 'build'}",
                            str(tree / "build" / "magnet-read")], capture_output=True, text=True)
    common.gate(built.returncode == 0, f"--baseline {spec}: building its magnet-read failed: "
                f"{(built.stderr or built.stdout).strip().splitlines()[-1:]}")
    return tree / "build" / "magnet-read"


def main(argv=None) -> int:
    p = common.bench_parser("bench_capture_cost", "capture-cost", __doc__)
    p.add_argument("--rounds", type=int, default=6, help="rounds of every case (default 6)")
    p.add_argument("--duration", type=float, default=8.0, help="seconds per veth transfer (default 8)")
    p.add_argument("--stats-runs", type=int, default=3, help="loopback runs with BPF statistics per build")
    p.add_argument("--stats-duration", type=float, default=4.0, help="seconds per loopback run (default 4)")
    p.add_argument("--baseline", help="another magnet-read, or a git revision to build one from, "
                                      "measured beside this one (A B A B)")
    p.add_argument("--check-rounds", type=int, default=4,
                   help="rounds of both builds recording the same traffic (with --baseline; default 4)")
    p.add_argument("--check-duration", type=float, default=2.0, help="seconds per such transfer (default 2)")
    p.add_argument("--workdir", default="/dev/shm", help="where traces and pcaps go (a tmpfs)")
    args = common.parse(p, argv)
    common.quick(p, args, rounds=2, duration=3.0, stats_runs=1, check_rounds=2)
    builds = {"": capture_gate.ready("iperf3", "tcpdump", "ethtool", "ip")}
    with tempfile.TemporaryDirectory(prefix="mgcc-build-") as work:
        if args.baseline:
            builds[", baseline"] = baseline_binary(args.baseline, Path(work))
        context = {"before": common.load(), "others_before": common.busiest(os.getpid())}
        runs = pd.DataFrame(measure(args, builds))
        context.update(after=common.load(), others_after=common.busiest(os.getpid()))
    results = common.Results("capture-cost", args)
    results.table("runs", runs.drop(columns=["programs", "recorded", "times"], errors="ignore"))
    per_program = results.table("programs", programs(runs), floats="{:.4g}")
    check = times(runs)
    check_table = results.table("times", check, floats="{:.3g}") if len(check) else ""
    builds_text = f" Baseline build: `{args.baseline}`." if args.baseline else ""
    body = "\n".join([
        f"iperf3 over a veth pair (MTU 1500, offloads off), {args.rounds} rounds of {args.duration:g} s, "
        "each round's order rotated; loss and extra CPU against the same round's no-capture run; "
        f"medians [min, max]. Then {args.stats_runs} loopback bulk transfer(s) of {args.stats_duration:g} s "
        f"per build with BPF run-time statistics.{builds_text}", "",
        *[f"* {line}" for line in verdicts(runs, builds, check)], "",
        common.markdown(summary(runs)), "",
        "Program runs per packet, per program (loopback runs with BPF statistics, all runs together; "
        "per data segment and per ACK: the runs that recorded that packet's event; other: runs that "
        "recorded none, per packet):", "",
        per_program, "",
        *(["Both builds recording the same traffic at once (--ext, iperf3 at " + CHECK_RATE + "b/s, "
           f"{args.check_rounds} rounds of {args.check_duration:g} s, which one starts first alternating): "
           "records per layer and their time differences, this build minus the baseline, in us:", "",
           check_table, ""] if check_table else []),
        f"Load average before {context['before']}, after {context['after']}. Busiest other processes "
        f"before: {context['others_before']}; after: {context['others_after']}."
        + (f" {args.note}" if args.note else "")])
    path = results.write("What recording costs: every layer for half the cost", body)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
