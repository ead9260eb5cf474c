"""Benchmark: a whole application's connections replayed in ns-3, against the same
connections as plain ns-3 applications.

    python -m magnet.experiments.bench_ns3_app [--connections 1000] [--duration 600] [--runs 3] [--quick]
    python -m magnet.experiments.bench_ns3_app --connections 100,200,400,1000 --duration 60   # scaling

The demand is magnetlib.synth.app_requests (the one both engines' benchmarks use):
1,000 persistent request/response connections opened over the first 10 s, each
asking about once a second (300-byte requests, ~8 kB answers after 1 ms) for 10
minutes.  magnet-chain --app replays it closed-loop over a 100 Mbit/s, 10 ms duplex
path, recording both sides' traces and connections.csv / adus.csv; in the same
process it then runs the same connections as OnOffApplications over TCP (each
direction's bytes at an even rate over the connection's span, in its mean write
size, PacketSinks reading), on the same path until the same simulated time.
Target: replay wall time <= 1.3x the plain applications'.  Reported per run: wall
and CPU seconds of both, their ratio, peak RSS of each phase (VmHWM, reset
between them), the simulated events' scale (writes, segments), the segments
handed to their connection by MagnetTcpDemux's table and by ns-3's own walk.
Several connection counts (comma-separated) run interleaved, run by run, and the
table adds each size's replay CPU seconds per connection against the smallest's
(1.0 = cost linear in connections).  --quick: 100 connections over 60 s, one run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pandas as pd

from . import common

TARGET = 1.3
PATH_ARGS = ["--rate=100000000bps", "--delay=10000000ns", "--duplex=1", "--queue=1000p"]


def run_once(programs, demand_csv: str, out: str) -> dict:
    """One magnet-chain --app run with the reference: its summary and the process's wall time."""
    os.makedirs(out, exist_ok=True)
    command = [str(programs.chain), f"--app={demand_csv}", f"--out={out}", "--appReference=1", *PATH_ARGS]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench_ns3_app: {' '.join(command)} failed: {proc.stderr.strip()}")
    summary = json.loads(open(os.path.join(out, "summary.json")).read())
    summary["process_s"] = time.perf_counter() - start
    return summary


def row(k: int, s: dict, load: float) -> dict:
    ref = s["reference"]
    return {"run": k, "connections": s["connections"], "failed": s["failed"], "tcp": s["config"]["tcp"]["model"],
            "simulated_s": s["sim_end_ns"] / 1e9,
            "writes": s["client"]["sock_send"] + s["server"]["sock_send"],
            "segments": s["client"]["dev_send"] + s["server"]["dev_send"],
            "replay_s": s["wall_s"], "plain_s": ref["wall_s"], "ratio": s["wall_s"] / ref["wall_s"],
            "replay_cpu_s": s["cpu_s"], "plain_cpu_s": ref["cpu_s"], "cpu_ratio": s["cpu_s"] / ref["cpu_s"],
            "replay_rss_mib": s["peak_rss"] / 2**20, "plain_rss_mib": ref["peak_rss"] / 2**20,
            "plain_bytes": ref["bytes"], "demand_bytes": s["demand_bytes"],
            "by_table": s["demux"]["hits"], "by_walk": s["demux"]["passed"], "load": load,
            "load_end": os.getloadavg()[0]}


def sizes(text: str) -> list[int]:
    """--connections: one count or several, comma-separated."""
    try:
        counts = [int(v) for v in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: connection counts, e.g. 1000 or 100,200,400")
    return counts


def scaling(frame: pd.DataFrame) -> str:
    """Each size's median replay CPU per connection against the smallest size's."""
    per = frame.groupby("connections").median(numeric_only=True)
    unit = per.replay_cpu_s / per.index
    lines = [f"{n} connections: replay {per.replay_cpu_s[n]:.3g} s CPU, plain {per.plain_cpu_s[n]:.3g} s, "
             f"{unit[n] / unit.iloc[0]:.2f}x the smallest's CPU per connection" for n in per.index]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = common.bench_parser("bench_ns3_app", "bench-ns3-app", __doc__)
    p.add_argument("--connections", type=sizes, default=[1000],
                   help="connection count, or several comma-separated (default 1000)")
    p.add_argument("--duration", type=float, default=600.0, help="seconds of demand (default 600)")
    p.add_argument("--runs", type=int, default=3)
    args = common.parse(p, argv)
    common.quick(p, args, connections=[100], duration=60.0, runs=1)

    from magnetlib import synth
    from magnet.replay import ns3
    programs = ns3.build()
    results = common.Results("bench-ns3-app", args)
    demands = {n: synth.app_requests(connections=n, duration_s=args.duration, seed=args.seed)
               for n in args.connections}
    for demand in demands.values():
        print(f"demand: {demand.summary()}", file=sys.stderr)
    work = tempfile.mkdtemp(prefix="mgns3app-bench-", dir="/var/tmp")   # the demand and traces: GBs
    try:
        csvs = {n: ns3.write_app_csv(d, os.path.join(work, f"demand-{n}.csv")) for n, d in demands.items()}
        rows = []
        cases = [(k, n) for k in range(1, args.runs + 1) for n in args.connections]
        for k, n in common.progress(cases, "runs", total=len(cases)):
            load = os.getloadavg()[0]
            out = os.path.join(work, f"run-{k}-{n}")
            rows.append(row(k, run_once(programs, str(csvs[n]), out), load))
            shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    frame = pd.DataFrame(rows)
    table = results.table("runs", frame)
    largest = frame[frame.connections == max(args.connections)]      # the target's size
    med = largest.median(numeric_only=True)
    verdict = "met" if med["ratio"] <= TARGET else "MISSED"
    described = "; ".join(d.summary() for d in demands.values())
    body = (f"{'/'.join(map(str, args.connections))} connections over {args.duration:g} s of demand "
            f"({described}), replayed closed-loop in ns-3 {programs.ns3.version} "
            f"(TCP model {frame.tcp.iloc[0]}) over a "
            f"100 Mbit/s, 10 ms duplex path with both sides traced, against the same connections "
            f"as OnOffApplications (even rate, mean write size) on the same path.\n\n{table}\n\n"
            f"At {max(args.connections)} connections: median replay/plain wall ratio {med['ratio']:.2f} "
            f"(min {largest.ratio.min():.2f}, max {largest.ratio.max():.2f}), CPU ratio {med['cpu_ratio']:.2f}; target {TARGET}x: {verdict}. "
            f"Peak RSS: replay {med['replay_rss_mib']:.0f} MiB, plain {med['plain_rss_mib']:.0f} MiB. "
            f"Load average at the runs' starts and ends: "
            f"{', '.join(f'{a:.1f}-{b:.1f}' for a, b in zip(frame.load, frame.load_end))} on "
            f"{os.cpu_count()} CPUs (other work shared the machine)."
            + (f" {args.note}" if args.note else "") + "\n")
    if len(args.connections) > 1:
        body += f"\nScaling (medians):\n\n{scaling(frame)}\n"
    results.write("ns-3 whole-application replay against plain ns-3 applications", body)
    print(table)
    print(body.splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
