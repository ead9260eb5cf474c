"""Benchmark: the MAGNeT paper's Table I (network throughput reduction) on today's stack.

    python -m magnet.experiments.bench_capture [--runs 5] [--duration 10] [--quick]

iperf3 sends as fast as it can over a veth pair between two network
namespaces (MTU 1500, offloads off), six ways, each at least --runs times
(interleaved, so that a noisy neighbour hits every configuration alike):

  no capture              the baseline
  loaded, not drained     magnet's programs attached to every socket, the
                          buffer never drained (the paper's "MAGNeTized")
  magnet-read/rcv, /snd   magnet-read records the receiver's (sender's)
                          connections: all four layers, default buffer
  tcpdump/rcv, /snd       tcpdump -w on the receiver's (sender's) interface

Reported: throughput (median ± half the range), the loss against the baseline,
machine CPU (both cores) and the capture tool's own CPU, events recorded per
second, events lost, packets tcpdump dropped, and the kernel cost per event
from BPF run-time statistics (extra --cost-runs with --stats, since those
statistics slow every program run down themselves). Traces go to a tmpfs
(--workdir) and are deleted after each run: the figures are of the capture,
not of the disk. Results: README.md, table_I.csv and runs.csv in --out (default
./magnet-results/bench-capture). Needs root, iperf3, tcpdump, ethtool.
"""
from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from magnet import capture
from magnetlib.trace import Trace

from . import capture_gate, common
from .capture_lab import CaptureLab, open_lab

NAME = "bench-capture"
BASELINE, LOADED = "no capture", "loaded, not drained"
MAGNET_RCV, MAGNET_SND = "magnet-read/rcv", "magnet-read/snd"
MAGNET_ALL = "magnet-read/all"          # cost runs only: every connection traced, runs ~ events
TCPDUMP_RCV, TCPDUMP_SND = "tcpdump/rcv", "tcpdump/snd"
CONFIGS = [BASELINE, LOADED, MAGNET_RCV, MAGNET_SND, TCPDUMP_RCV, TCPDUMP_SND]
MAGNET_CONFIGS = [LOADED, MAGNET_RCV, MAGNET_SND, MAGNET_ALL]
PORT = 5201
# Targets: the kernel's cost per recorded event, and the throughput lost to the capture at
# most TCPDUMP_SHARE of what tcpdump loses on the same side.
COST_TARGET_NS = 150
# An empty tp_btf program on netif_receive_skb measures this with BPF
# statistics on (their own clock reads), on this VM.
STATS_FLOOR_NS = 52
TCPDUMP_SHARE = 0.2


@dataclass
class Run:
    config: str
    run: int
    gbps: float
    cpu_pct: float                   # both cores, 0..200
    tool_cpu_pct: float = 0.0
    traffic_cpu_pct: float = 0.0     # iperf3's cgroups: the transfer and the kernel work it does
    events: int = 0                  # recorded
    lost: int = 0
    drops: int = 0                   # tcpdump: dropped by the kernel
    ns_per_event: float | None = None
    ns_per_run: float | None = None
    duration: float = 0.0
    # Runs with BPF statistics: each program's {"attach", "run_cnt", "run_time_ns", "recursion_misses"}.
    programs: dict = field(default_factory=dict)

    def row(self) -> dict:
        """The run as one flat row (runs.csv); the per-program statistics go to programs.csv."""
        out = asdict(self)
        del out["programs"]
        return out

    @property
    def cpu_s_per_gb(self) -> float:
        """CPU-seconds of the transfer and its capture per GB (1e9 bytes) transferred."""
        return (self.traffic_cpu_pct + self.tool_cpu_pct) / 100 * 8 / self.gbps


# ---------------------------------------------------------------- helpers ---
def cpu_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def process_cpu(pid: int) -> int:
    """utime + stime of a process (and its waited-for children), in jiffies."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(v) for v in fields[11:15])
    except OSError:
        return 0


# ------------------------------------------------------------------ tools ---
class Tool:
    """The capture running during one iperf3 transfer."""
    pid = 0

    def stop(self, run: Run) -> None:
        pass


class MagnetTool(Tool):
    def __init__(self, lab: CaptureLab, config: str, stats: bool):
        self.trace = lab.work / "bench.magnet"
        self.stats = lab.work / "stats.json" if stats else None
        cgroup = {MAGNET_RCV: lab.cgroups["receiver"], MAGNET_SND: lab.cgroups["sender"]}.get(config)
        settings = capture.Settings(no_drain=config == LOADED, status_dir=str(lab.work / "status"),
                                    stats=str(self.stats) if stats else None)
        self.cap = capture.Capture(self.trace, cgroup=cgroup, settings=settings,
                                   binary=lab.binary).start()
        self.pid = self.cap.pid

    def stop(self, run: Run) -> None:
        if self.cap.stop() != 0:
            raise RuntimeError(f"magnet-read failed: {self.cap.error()}")
        scan = Trace(self.trace).scan
        run.events, run.lost = scan.records - scan.lost_records, scan.lost
        if self.stats:
            stats = json.loads(self.stats.read_text())
            runs = sum(p["run_cnt"] for p in stats["programs"].values())
            time_ns = sum(p["run_time_ns"] for p in stats["programs"].values())
            run.ns_per_event = time_ns / max(stats["records"] + stats["lost_buffer_full"], 1)
            run.ns_per_run = time_ns / max(runs, 1)
            run.programs = {name: {"attach": p.get("attach", name), "run_cnt": p["run_cnt"],
                                   "run_time_ns": p["run_time_ns"], "recursion_misses": p["recursion_misses"]}
                            for name, p in stats["programs"].items()}
            self.stats.unlink()
        self.trace.unlink()


class TcpdumpTool(Tool):
    def __init__(self, lab: CaptureLab, config: str):
        self.pcap = lab.work / "bench.pcap"
        ns, dev = ((lab.net.server, lab.net.devices["server"]) if config == TCPDUMP_RCV
                   else (lab.net.client, lab.net.devices["client"]))
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", dev, "-w", str(self.pcap)],
                                     stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        line = self.proc.stderr.readline()          # "listening on ...": capturing
        if "listening" not in line:
            raise RuntimeError(f"tcpdump: {line.strip()}")

    def stop(self, run: Run) -> None:
        self.proc.send_signal(signal.SIGINT)
        err = self.proc.communicate(timeout=30)[1]
        captured = re.search(r"(\d+) packets? captured", err)
        dropped = re.search(r"(\d+) packets? dropped by kernel", err)
        run.events = int(captured.group(1)) if captured else 0
        run.drops = int(dropped.group(1)) if dropped else 0
        self.pcap.unlink(missing_ok=True)


def start_tool(lab: CaptureLab, config: str, stats: bool) -> Tool:
    if config in MAGNET_CONFIGS:
        return MagnetTool(lab, config, stats)
    if config in (TCPDUMP_RCV, TCPDUMP_SND):
        return TcpdumpTool(lab, config)
    return Tool()


# -------------------------------------------------------------------- run ---
def iperf3_client(lab: CaptureLab) -> list[str]:
    cmd = ["iperf3", "-c", lab.net.server_addr, "-p", str(PORT), "-t", str(lab.duration), "-J"]
    return cmd + (["-b", lab.rate] if lab.rate else [])


def run_once(lab: CaptureLab, config: str, index: int, stats: bool = False) -> Run:
    server = lab.start("receiver", lab.net.server, ["iperf3", "-s", "-1", "-p", str(PORT)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tool = None
    try:
        lab.wait_listening(lab.net.server, PORT)
        tool = start_tool(lab, config, stats)
        busy0, total0 = cpu_busy()
        tool0, t0 = process_cpu(tool.pid) if tool.pid else 0, time.monotonic()
        traffic0 = lab.cpu_us()
        client = lab.start("sender", lab.net.client, iperf3_client(lab),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = client.communicate(timeout=lab.duration + 60)
        busy1, total1 = cpu_busy()
        elapsed = time.monotonic() - t0
        traffic = lab.cpu_us() - traffic0
        tool_cpu = (process_cpu(tool.pid) - tool0) if tool.pid else 0
        result = json.loads(out)
        if "error" in result:
            raise RuntimeError(f"iperf3: {result['error']}")
        hz = os.sysconf("SC_CLK_TCK")
        run = Run(config, index, result["end"]["sum_received"]["bits_per_second"] / 1e9,
                  cpu_pct=100.0 * (busy1 - busy0) / max(total1 - total0, 1) * os.cpu_count(),
                  tool_cpu_pct=100.0 * tool_cpu / hz / elapsed, duration=elapsed,
                  traffic_cpu_pct=100.0 * traffic / 1e6 / elapsed)
        tool.stop(run)
        tool = None
        return run
    finally:
        if tool is not None and tool.pid:
            os.kill(tool.pid, signal.SIGKILL)
        server.wait(timeout=30)


# ---------------------------------------------------------------- summary ---
def half_range(values: list[float]) -> str:
    """Half the range of several runs' values, as " ± x" after their median ("" for one run)."""
    if len(values) < 2:
        return ""
    return f" ± {(max(values) - min(values)) / 2:.2f}"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(runs: list[Run]) -> list[dict]:
    base = median([r.gbps for r in runs if r.config == BASELINE and r.ns_per_event is None])
    rows = []
    for config in CONFIGS + [MAGNET_ALL]:
        mine = [r for r in runs if r.config == config and r.ns_per_event is None]
        costs = [r for r in runs if r.config == config and r.ns_per_event is not None]
        gbps = [r.gbps for r in mine] or [r.gbps for r in costs]
        rows.append({
            "configuration": config, "runs": len(mine),
            "gbps": median(gbps), "gbps_spread": half_range(gbps),
            "reduction_pct": 100.0 * (1 - median(gbps) / base) if config != BASELINE else 0.0,
            "cpu_pct": median([r.cpu_pct for r in mine or costs]),
            "tool_cpu_pct": median([r.tool_cpu_pct for r in mine or costs]) if config != BASELINE else None,
            "traffic_cpu_pct": median([r.traffic_cpu_pct for r in mine or costs]),
            "events_per_s": (median([(r.events + r.lost) / r.duration for r in mine or costs])
                             if config != BASELINE else None),
            "lost": max((r.lost for r in mine), default=0),
            "drops": max((r.drops for r in mine), default=0),
            "ns_per_event": median([r.ns_per_event for r in costs]) if costs else None,
            "ns_per_run": median([r.ns_per_run for r in costs]) if costs else None,
        })
    return rows


def program_costs(runs: list[Run]) -> list[dict]:
    """Where the kernel time goes: per configuration and program (attach point), over
    the runs with BPF statistics, its runs per second, ns per run (the statistics' own
    ~STATS_FLOOR_NS included) and share of the configuration's program time, beside the
    configuration's throughput and CPU per transferred GB in those runs."""
    rows = []
    for config in MAGNET_CONFIGS:
        costs = [r for r in runs if r.config == config and r.programs]
        if not costs:
            continue
        seconds = sum(r.duration for r in costs)
        total_ns = sum(p["run_time_ns"] for r in costs for p in r.programs.values())
        for name in dict.fromkeys(n for r in costs for n in r.programs):
            mine = [r.programs[name] for r in costs if name in r.programs]
            count, ns = sum(p["run_cnt"] for p in mine), sum(p["run_time_ns"] for p in mine)
            rows.append({
                "configuration": config, "program": name, "attach": mine[0]["attach"],
                "runs_per_s": round(count / seconds), "ns_per_run": ns / count if count else None,
                "share_pct": 100.0 * ns / total_ns if total_ns else 0.0,
                "recursion_misses": sum(p["recursion_misses"] for p in mine),
                "gbps": median([r.gbps for r in costs]),
                "cpu_s_per_gb": median([r.cpu_s_per_gb for r in costs]),
            })
    return rows


def program_table(rows: list[dict]) -> str:
    lines = ["| Configuration | Program | Attach point | runs/s | ns/run | share of kernel time | "
             "Gb/s | CPU s/GB |", "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r['configuration']} | {r['program']} | `{r['attach']}` | "
                     f"{r['runs_per_s']:,.0f} | {fmt(r['ns_per_run'])} | {r['share_pct']:.1f} % | "
                     f"{r['gbps']:.2f} | {r['cpu_s_per_gb']:.2f} |")
    return "\n".join(lines)


def fmt(value, pattern: str = "{:.0f}") -> str:
    return "–" if value is None else pattern.format(value)


def table(rows: list[dict]) -> str:
    head = ("| Configuration | Throughput (Gb/s) | % reduction | CPU % (2 cores) | tool CPU % | "
            "events/s | events lost | tcpdump drops | ns/event | ns/run |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        name = r["configuration"] + (" †" if r["configuration"] == MAGNET_ALL else "")
        lines.append(f"| {name} | {r['gbps']:.2f}{r['gbps_spread']} | "
                     f"{r['reduction_pct']:.1f} | {r['cpu_pct']:.0f} | {fmt(r['tool_cpu_pct'])} | "
                     f"{fmt(r['events_per_s'], '{:,.0f}')} | {r['lost']:,} | {r['drops']:,} | "
                     f"{fmt(r['ns_per_event'])} | {fmt(r['ns_per_run'])} |")
    lines.append(f"\n† every connection traced, measured only in the runs with BPF statistics on "
                 f"(which slow each program run by ~{STATS_FLOOR_NS} ns): its ns/run is the cost "
                 f"of recording one event.")
    return "\n".join(lines)


def verdicts(rows: list[dict]) -> list[str]:
    by = {r["configuration"]: r for r in rows}
    out = []
    cost = by[MAGNET_ALL]["ns_per_run"]
    if cost:
        out.append(f"kernel cost per event ({MAGNET_ALL}: every run records an event; BPF statistics "
                   f"run_time_ns/run_cnt, of which ~{STATS_FLOOR_NS} ns are the statistics' own "
                   f"clock reads): {cost:.0f} ns, target <= {COST_TARGET_NS} ns: "
                   f"{'met' if cost <= COST_TARGET_NS else 'MISSED'}")
    lost = by[MAGNET_RCV]["lost"] + by[MAGNET_SND]["lost"]
    out.append(f"events lost at saturation with the default buffer: {lost}, target 0: "
               f"{'met' if lost == 0 else 'MISSED'}")
    for side, magnet, dump in (("receiver", MAGNET_RCV, TCPDUMP_RCV), ("sender", MAGNET_SND, TCPDUMP_SND)):
        m, t = by[magnet]["reduction_pct"], by[dump]["reduction_pct"]
        ok = m <= TCPDUMP_SHARE * max(t, 0)
        out.append(f"throughput loss on the {side}: magnet-read {m:.1f}% vs tcpdump {t:.1f}%, "
                   f"target <= 1/5 of tcpdump's: {'met' if ok else 'MISSED'}")
    return out


def report(rows: list[dict], runs: list[Run], args) -> Path:
    """runs.csv, table_I.csv and README.md in --out."""
    import pandas as pd
    results = common.Results(NAME, args)
    results.table("runs", pd.DataFrame([r.row() for r in runs]))
    results.table("table_I", pd.DataFrame(rows))
    body = (f"iperf3 over veth between two namespaces, MTU 1500, offloads off, {args.runs} runs of "
            f"{args.duration:g} s each (medians, ± half the range), {args.cost_runs} more per magnet "
            f"configuration with BPF statistics for ns/event.\n\n{table(rows)}\n\n"
            + "\n".join(f"- {v}" for v in verdicts(rows))
            + f"\n\nWhere the kernel time goes (runs with BPF statistics):\n\n{program_table(program_costs(runs))}\n"
            + (f"\n{args.note}\n" if args.note else ""))
    return results.write("Table I on today's stack: the cost of capturing", body)


# ------------------------------------------------------------------- main ---
def parse_args(argv):
    p = common.bench_parser("bench_capture", NAME, __doc__)
    p.add_argument("--runs", type=int, default=5, help="runs per configuration (default 5)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per iperf3 run (default 10)")
    p.add_argument("--cost-runs", type=int, default=2, help="extra runs with BPF statistics (default 2)")
    p.add_argument("--prefix", default="mgcap", help="name prefix of namespaces and cgroups (default mgcap)")
    p.add_argument("--workdir", default="/dev/shm", help="where traces and pcaps go (default /dev/shm)")
    args = common.parse(p, argv)
    common.quick(p, args, runs=2, duration=3.0, cost_runs=1)
    return args


def measure(args, rate: str | None = None, progress=None) -> list[Run]:
    """Every configuration args.runs times (interleaved), then the cost runs.
    `progress(run, cost)` is called after each run."""
    binary = capture_gate.ready("iperf3", "tcpdump", "ethtool", "ip")
    runs: list[Run] = []
    with open_lab(args.prefix, ("receiver", "sender"), workdir=args.workdir, duration=args.duration,
                  binary=binary, rate=rate) as lab:
        for index in range(args.runs):
            for config in CONFIGS:
                runs.append(run_once(lab, config, index))
                (progress or print_run)(runs[-1], False)
        for index in range(args.cost_runs):
            for config in MAGNET_CONFIGS:
                runs.append(run_once(lab, config, index, stats=True))
                (progress or print_run)(runs[-1], True)
    return runs


def print_run(run: Run, cost: bool) -> None:
    if cost:
        print(f"  {run.config:22s} cost run {run.run + 1}: {run.ns_per_event:.0f} ns/event", file=sys.stderr)
    else:
        print(f"  {run.config:22s} run {run.run + 1}: {run.gbps:.2f} Gb/s", file=sys.stderr)


def main(argv=None) -> int:
    args = parse_args(argv)
    runs = measure(args)
    rows = summarize(runs)
    path = report(rows, runs, args)
    print(path.read_text())
    return 0

if __name__ == "__main__":
    sys.exit(main())
