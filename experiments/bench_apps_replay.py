"""Benchmark: a whole application's connections replayed at once into real TCP.

    python -m magnet.experiments.bench_apps_replay [--connections 1000] [--seconds 600] [--runs 2]
                                                   [--quick] [--loopback] [--out DIR]
    python -m magnet.experiments.bench_apps_replay --write-demand D.magnet    # the demand alone

Target: 1,000 connections over 10 minutes of demand replayed in real TCP with a
timing error p99 <= 1 ms, all 1,000 connections open at once.  The demand
(magnetlib.synth.app_requests, also what the ns-3 benchmark replays) is 1,000
persistent request/response clients opened over the first 10 s: each sends a
300-byte request an exponential think time (mean 1 s) after reading the previous
answer, the server answers after 1 ms with about 2 KB (log-normal), until 10
minutes: about 2,000 sends a second, both sides.  It is replayed by `magnet replay
tcp` over one duplex path (100 Mbit/s, 5 ms each way) with the BPF capture of both
sides, `--runs` times.  Per run and side: |issued - due| of the paced sends (due at
least 1 ms after the side could schedule them: the requests), of every send (the
answers too, whose error is how soon a side answered what it read), and of the
opens; the side process's peak RSS; connections complete; the run's wall time; the
machine's load before and after and a stall probe (a CPU spinning on the clock).
`--pin both` interleaves runs with the client side alone on the last CPU (what
`magnet replay tcp` does) and runs without (`--no-pin`).  `--quick`: 100
connections, 30 s.  `--loopback`: no root (127.0.0.1, no path, no capture).
Results: README.md and runs.csv in --out (default ./magnet-results/apps-replay).
"""
from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from magnet.replay import app_tcp, tcp
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario
from magnetlib import app_demand, synth

from . import common

NAME = "apps-replay"
TARGET_P99_US = 1000.0


def demand(connections: int, seconds: float):
    return synth.app_requests(connections=connections, duration_s=seconds, ramp_s=min(10.0, seconds / 3),
                              request_bytes=300, response_bytes=2000, period_s=1.0, server_think_s=0.001)


def run_once(d, loopback: bool, pin: bool, out: Path) -> list[dict]:
    scenario = Scenario(stacks=1, path=(NetPath(rate_bps=100_000_000, delay_ns=5_000_000, duplex=True),))
    options = tcp.TcpOptions(loopback=loopback, capture="none" if loopback else "auto", pin=pin)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    run = app_tcp.run(d, out, scenario, options)
    wall = time.monotonic() - started
    complete = int((run.connections["status"] == "ok").sum())
    rows = []
    for side, t in run.timing.items():
        rows.append({"pin": "pinned" if pin else "not pinned", "side": side,
                     "connections": len(run.connections), "complete": complete,
                     "sends": t["sends"], "paced": t["paced"], "paced_p50_us": t["paced_p50_us"],
                     "paced_p99_us": t["paced_p99_us"], "paced_max_us": t["paced_max_us"],
                     "all_p50_us": t["all_p50_us"], "all_p99_us": t["all_p99_us"],
                     "open_p99_us": t["open_p99_us"], "max_rss_mib": t["max_rss_mib"], "cpu_s": t["cpu_s"],
                     "wall_s": wall, "load_before": load_before, "load_after": os.getloadavg()[0],
                     "capture": run.method})
    return rows


def _us(value) -> str:
    return "-" if value is None or value != value else f"{value:.0f} us"


def summarise(frame: pd.DataFrame) -> str:
    """Per side, median [min, max] over the runs; the target over every send (answers too)."""
    lines = []
    for (pin, side), part in frame.groupby(["pin", "side"], sort=False):
        p99 = {name: common.spread(part[f"{name}_p99_us"], "{:.0f}") for name in ("all", "paced", "open")}
        lines.append(f"- {side} side, {pin}, over {len(part)} runs, p99 in us: every send's {p99['all']}; "
                     f"paced sends' {p99['paced']}; opens' {p99['open']}; peak RSS "
                     f"{part['max_rss_mib'].max():.0f} MiB")
    met = (frame["all_p99_us"] <= TARGET_P99_US).all()
    lines.append(f"- target p99 <= {TARGET_P99_US:.0f} us over every send of both sides: "
                 f"{'met in every run' if met else 'missed'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = common.bench_parser("bench_apps_replay", NAME, __doc__)
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=600.0, help="the demand's length (default 600)")
    p.add_argument("--runs", type=int, default=2, help="replays of the demand per configuration (default 2)")
    p.add_argument("--pin", choices=["pinned", "not-pinned", "both"], default="pinned",
                   help="the client side alone on the last CPU (the default of magnet replay tcp), not, "
                        "or both interleaved (A B A B)")
    p.add_argument("--loopback", action="store_true", help="no root: 127.0.0.1, no path, no capture")
    p.add_argument("--write-demand", metavar="FILE", help="write the demand (.csv, .parquet, .magnet), do nothing else")
    args = common.parse(p, argv)
    common.quick(p, args, connections=100, seconds=30.0, runs=1)
    d = demand(args.connections, args.seconds)
    if args.write_demand:
        app_demand.write(d, args.write_demand)
        print(f"{args.write_demand}: {d.summary()}, {len(d)} rows", file=sys.stderr)
        return 0
    common.gate(args.loopback or os.geteuid() == 0, "bench_apps_replay: needs root for network namespaces "
                                                    "(or --loopback)")
    probes = [common.stalls()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="mgrp-bench-") as work:
        pins = {"pinned": [True], "not-pinned": [False], "both": [True, False]}[args.pin]
        for k, pin in ((k, pin) for k in range(args.runs) for pin in pins):
            for row in run_once(d, args.loopback, pin, Path(work) / f"run{k}-{pin}"):
                rows.append({"run": k + 1, **row})
                r = rows[-1]
                print(f"  run {k + 1}, {r['pin']}, {r['side']}: {r['paced']} paced sends p99 {_us(r['paced_p99_us'])}, "
                      f"all {r['sends']} p99 {_us(r['all_p99_us'])}, {r['complete']}/{r['connections']} "
                      f"complete, {r['max_rss_mib']:.0f} MiB, load {r['load_before']:.1f}", file=sys.stderr)
    probes.append(common.stalls())
    frame = pd.DataFrame(rows)
    results = common.Results(NAME, args)
    table = results.table("runs", frame, "{:.1f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    body = "\n".join([
        f"Demand: {d.summary()}, {len(d)} rows. Path: 100 Mbit/s, 5 ms each way, duplex"
        + (" (loopback: none)" if args.loopback else "") + f". Peak RSS of the run's own process "
        f"{rss:.0f} MiB. A CPU spinning on the clock for 1 s, before and after: "
        + "; ".join(f"{p['stalls_per_s']:.0f} stalls/s over 20 us, {p['stalled_pct']:.1f}% of its time, "
                    f"longest {p['max_stall_us']:.0f} us" for p in probes) + "."
        + (f" {args.note}" if args.note else ""),
        "", summarise(frame), "", table])
    path = results.write(f"Whole-application replay: {args.connections} connections, {args.seconds:g} s of demand",
                         body)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
