"""Benchmark: how faithfully `magnet replay tcp` issues paced writes.

    python -m magnet.experiments.bench_replay [--seconds 20] [--quick] [--loopback] [--out DIR]

Target (issue 4): p99 of |issued - due| <= 50 us for writes 1 ms or more
apart, on an idle machine.  Four paced demands (one write every 1 ms and every
20 ms; 10 KB and 418 B writes), each replayed through one real TCP connection
across a veth pair between two network namespaces, unshaped (nothing blocks),
with the BPF capture on.  Per demand:

* the replayer's own record: |issued - due| (issued = just before send()),
  p50, p99, max, over the writes not held up by a blocked one;
* the capture's SOCK_SEND records: how many of the send() calls it saw inside
  their [before, after] interval (confirming the record), and SOCK_SEND - due,
  which adds the time the kernel spends in the call (SOCK_SEND is stamped as
  the call returns);
* one blocking case: 10 KB every 1 ms (82 Mb/s) into a 20 Mb/s bottleneck,
  where the send buffer fills: how many writes blocked, and their lag.

Also printed: the machine's load and how much of a spinning CPU's time went to
stalls (interrupts, the hypervisor): the floor under any userspace timer.
`--loopback` runs without root (no namespaces, no capture); `--quick` 3 s each.
Results: experiments/results/replay/timing.{md,csv}.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from magnet.replay import tcp
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario
from magnetlib import knobs
from magnetlib.demand import Demand

from . import common

CASES = [(1.0, 10240), (1.0, 418), (20.0, 10240), (20.0, 418)]
BLOCKING = (1.0, 10240, "20mbit")
TARGET_US = 50.0


def paced(seconds: float, spacing_ms: float, size: int) -> Demand:
    n = int(seconds * 1000 / spacing_ms)
    return Demand.from_arrays(np.arange(n) * int(spacing_ms * 1e6), np.full(n, size))


def stalls(seconds: float = 1.0, threshold_ns: int = 20_000) -> dict:
    """Spin on the clock: how often and how long the CPU was taken away."""
    gaps, now = [], time.monotonic_ns
    end = now() + int(seconds * 1e9)
    prev = now()
    while prev < end:
        t = now()
        if t - prev > threshold_ns:
            gaps.append(t - prev)
        prev = t
    gaps = np.array(gaps or [0])
    return {"stalls_per_s": len(gaps) / seconds, "stalled_pct": 100 * gaps.sum() / (seconds * 1e9),
            "max_stall_us": gaps.max() / 1e3}


def run_case(spacing_ms: float, size: int, seconds: float, rate: str | None, loopback: bool,
             workdir: Path) -> dict:
    scenario = Scenario(stacks=1, path=(NetPath(rate_bps=knobs.rate(rate) if rate else None, delay_ns=0),))
    options = tcp.TcpOptions(loopback=loopback, capture="none" if loopback else "auto")
    out = workdir / f"{spacing_ms:g}ms-{size}B-{rate or 'unshaped'}"
    run = tcp.run_chain(paced(seconds, spacing_ms, size), out, scenario, options)
    s = run.stacks[0]
    t, c = s.timing, s.confirmed or {}
    return {"spacing_ms": spacing_ms, "size_B": size, "rate": rate or "unshaped", "writes": t.writes,
            "paced": t.paced, "p50_us": t.p50_us, "p99_us": t.p99_us, "max_us": t.max_us,
            "blocked": t.blocked, "blocked_lag_p50_ms": t.blocked_lag_p50_ms,
            "blocked_lag_max_ms": t.blocked_lag_max_ms, "held_up": t.held_up, "capture": run.method,
            "capture_calls_seen": f"{c['matched']}/{c['calls']}" if c else "-",
            "sock_send_p50_us": c.get("p50_us", np.nan), "sock_send_p99_us": c.get("p99_us", np.nan),
            "in_call_p50_us": c.get("in_call_p50_us", np.nan)}


def write_results(rows: list[dict], context: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "timing.csv", index=False)
    shown = frame.rename(columns={"spacing_ms": "spacing ms", "size_B": "bytes"})
    lines = ["# Replay timing fidelity (python -m magnet.experiments.bench_replay"
             + (" --quick" if context["quick"] else "") + (" --loopback" if context["loopback"] else "") + ")",
             "",
             f"{context['when']}; load average before {context['load_before']}, after {context['load_after']}; "
             f"{context['seconds']:g} s per demand. A CPU spinning on the clock for 1 s, before and after: "
             + "; ".join(f"{st['stalls_per_s']:.0f} stalls/s over 20 us, {st['stalled_pct']:.1f}% of its "
                         f"time, longest {st['max_stall_us']:.0f} us" for st in context["stalls"]) + ".",
             "", f"Target: p99 <= {TARGET_US:g} us for writes >= 1 ms apart (unshaped rows).", "",
             markdown(shown), ""]
    path = out / "timing.md"
    path.write_text("\n".join(lines))
    return path


def markdown(frame: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table, floats with one decimal."""
    cells = [[f"{v:.1f}" if isinstance(v, float) else str(v) for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each paced demand (default 20)")
    ap.add_argument("--quick", action="store_true", help="3 s per demand")
    ap.add_argument("--loopback", action="store_true", help="no root: 127.0.0.1, no capture")
    ap.add_argument("--out", default=str(common.default_out("replay")),
                    help="results directory (default ./magnet-results/replay)")
    args = ap.parse_args(argv)
    seconds = 3.0 if args.quick else args.seconds
    if not args.loopback and os.geteuid() != 0:
        sys.exit("bench_replay: needs root for network namespaces (or --loopback)")
    context = {"quick": args.quick, "loopback": args.loopback, "seconds": seconds,
               "when": time.strftime("%Y-%m-%d %H:%M"),
               "load_before": " ".join(open("/proc/loadavg").read().split()[:3]), "stalls": [stalls()]}
    rows = []
    with tempfile.TemporaryDirectory(prefix="mgrp-bench-") as work:
        cases = [(sp, size, None) for sp, size in CASES] + ([] if args.loopback else [BLOCKING])
        for spacing_ms, size, rate in cases:
            rows.append(run_case(spacing_ms, size, seconds, rate, args.loopback, Path(work)))
            r = rows[-1]
            print(f"  {spacing_ms:g} ms, {size} B, {r['rate']}: p50 {r['p50_us']:.1f} us, p99 "
                  f"{r['p99_us']:.1f} us, blocked {r['blocked']}", file=sys.stderr)
    context["load_after"] = " ".join(open("/proc/loadavg").read().split()[:3])
    context["stalls"].append(stalls())
    path = write_results(rows, context, Path(args.out))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
