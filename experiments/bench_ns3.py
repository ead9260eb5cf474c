"""Benchmark: replaying demand in ns-3 against ns-3's own BulkSendApplication.

    python -m magnet.experiments.bench_ns3 [--events 1000000] [--quick] [--dir DIR] [--keep]

1M demand writes (sizes uniform in 1..2895 bytes, Poisson arrivals at 70% of
the link rate) go through one stack and through four (20 Mb/s, 30 ms, the
chain's defaults), every stack recorded as a magnet trace.  In the same
process the chain then moves each stack's bytes with BulkSendApplication over
an identical link (write size = that stack's mean write), unrecorded.  Target:
the replay within 1.3x BulkSend's time for the same bytes, in every row.  A run
without traces (and its own BulkSend reference) shows what the recording costs,
and one with every write due at time 0 (back-to-back, as BulkSend writes, the
send buffer always full) what variable-size writes cost ns-3's TCP.

Which time: the target is judged on the simulations' CPU time (user + system
of the process while each phase ran).  A simulation is one thread, so on an idle
machine its wall time equals its CPU time; on the shared 2-core machine the wall
time also counts the time spent waiting for a CPU, which depends on what else
runs, and the two phases of a run (replay, then BulkSend) do not see the same
load.  The wall ratio is reported beside it; both still vary by up to +-25 %
from run to run, so compare medians of several runs.  Reported: wall and CPU
time of each phase, replayed writes per second, the replay's Send() calls per
write (a write that finds the send buffer full goes in parts, one per freed
space), peak resident memory of each phase (VmHWM, reset between phases; the
bulk phase's includes what the process still holds).
--quick: 100k writes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import common

NAME = "bench-ns3"
TARGET_RATIO = 1.3               # replay time at most this many times BulkSend's (CPU time judged)
LOAD = 0.7
RATE, RATE_BPS = "20Mbps", 20e6


def make_demand(path: str, events: int, rate_bps: float, seed: int = 1, at_once: bool = False) -> int:
    """Poisson writes of 1..2895 bytes at LOAD x the link rate (or all due at time 0); returns the bytes."""
    from magnetlib.demand import Demand, write_demand
    rng = np.random.default_rng(seed)
    size = rng.integers(1, 2896, events)
    gaps = rng.exponential(size.mean() * 8 / (LOAD * rate_bps), events)
    t = np.cumsum(gaps * 1e9).astype(np.int64)
    write_demand(Demand.from_arrays(np.zeros(events, np.int64) if at_once else t - t[0], size), path)
    return int(size.sum())


def run(programs, demand: str, out: str, stacks: int, trace: bool) -> dict:
    """One chain run in a child process: its summary plus the process's wall time and peak RSS."""
    command = [str(programs.chain), f"--demand={demand}", f"--out={out}", f"--stacks={stacks}",
               f"--rate={RATE}", "--bulkReference=1", f"--noTrace={int(not trace)}"]
    os.makedirs(out, exist_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_ns3: {' '.join(command)} failed: {stderr.strip()}")
    summary = json.loads(open(os.path.join(out, "summary.json")).read())
    summary["process_wall_s"] = wall
    summary["process_peak_rss"] = usage.ru_maxrss * 1024
    summary["trace_bytes"] = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
                                 if f.endswith(".magnet"))
    return summary


def row(label: str, s: dict) -> dict:
    writes = sum(st["writes_due"] for st in s["stacks"])
    replay = sum(st["wall_s"] for st in s["stacks"])
    bulk = sum(b["wall_s"] for b in s["bulk_reference"])
    replay_cpu = sum(st["cpu_s"] for st in s["stacks"])
    bulk_cpu = sum(b["cpu_s"] for b in s["bulk_reference"])
    return {"run": label, "stacks": len(s["stacks"]), "writes": writes,
            "segments": sum(st["dev_send"] for st in s["stacks"]),
            "sends_per_write": sum(st["send_calls"] for st in s["stacks"]) / writes, "replay_s": replay,
            "writes_per_s": writes / replay, "bulk_s": bulk, "ratio": replay / bulk,
            "replay_cpu_s": replay_cpu, "bulk_cpu_s": bulk_cpu, "cpu_ratio": replay_cpu / bulk_cpu,
            "rss_mib": s["peak_rss"] / 2**20,
            "bulk_rss_mib": s["bulk_peak_rss"] / 2**20,
            "trace_mib": s["trace_bytes"] / 2**20, "process_s": s["process_wall_s"]}


def main(argv=None) -> int:
    p = common.bench_parser("bench_ns3", NAME, __doc__)
    p.add_argument("--events", type=int, default=1_000_000, help="demand writes (default 1M; --quick 100k)")
    p.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the demand and traces")
    args = common.parse(p, argv)
    common.quick(p, args, events=100_000)
    events = args.events

    from magnet.replay import ns3
    programs = ns3.build()
    print(f"ns-3 {programs.ns3.version}, programs in {programs.directory}"
          + (f" (built now in {programs.built_seconds:.1f} s)" if programs.built_seconds else ""),
          file=sys.stderr)
    load_before = common.load()
    work = tempfile.mkdtemp(prefix="mgns3-bench-", dir=args.dir or "/var/tmp")
    try:
        demand = os.path.join(work, "demand.magnet")
        total = make_demand(demand, events, RATE_BPS)
        print(f"demand: {events:,} writes, {total / 1e6:.1f} MB", file=sys.stderr)
        rows = []
        for stacks in (1, 4):
            label = f"{stacks} stack{'s' if stacks > 1 else ''}"
            print(f"running {label} (+ BulkSend reference) ...", file=sys.stderr, flush=True)
            rows.append(row(label, run(programs, demand, os.path.join(work, f"s{stacks}"), stacks, True)))
        print("running 1 stack without traces (+ BulkSend reference) ...", file=sys.stderr, flush=True)
        untraced = run(programs, demand, os.path.join(work, "untraced"), 1, False)
        rows.append(row("1 stack, no traces", untraced))
        # Every write due at once: back-to-back like BulkSend's, but of the demand's sizes.
        at_once = os.path.join(work, "at-once.magnet")
        make_demand(at_once, events, RATE_BPS, at_once=True)
        print("running 1 stack, all writes due at 0 (+ BulkSend reference) ...", file=sys.stderr, flush=True)
        rows.append(row("1 stack, all at 0", run(programs, at_once, os.path.join(work, "at-once"), 1, True)))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}", file=sys.stderr)
    print(report(rows, args, programs, f"{load_before} before, {common.load()} after").read_text())
    return 0


def report(rows: list[dict], args, programs, load: str) -> Path:
    """results.csv and README.md in --out: each run beside its BulkSend reference, the verdicts."""
    import pandas as pd
    results = common.Results(NAME, args)
    table = results.table("results", pd.DataFrame(rows), "{:.4g}")
    verdicts = [f"{r['run']}: replay {r['cpu_ratio']:.2f}x BulkSend in CPU time ({r['ratio']:.2f}x wall), "
                f"target {TARGET_RATIO}x: {'met' if r['cpu_ratio'] <= TARGET_RATIO else 'MISSED'}" for r in rows]
    body = "\n".join([
        f"{args.events:,} demand writes in ns-3 {programs.ns3.version}. replay_s, bulk_s: wall time of the "
        "simulations; cpu_s: their CPU time; writes/s over wall time.", "", table, "",
        *(f"- {v}" for v in verdicts), "",
        f"Load average {load}: other work on the machine makes these figures noisy."
        + (f" {args.note}" if args.note else "")])
    return results.write("ns-3: replaying demand against BulkSendApplication", body)


if __name__ == "__main__":
    sys.exit(main())
