"""Benchmark: how faithfully `magnet replay tcp` issues paced writes.

    python -m magnet.experiments.bench_replay [--seconds 20] [--quick] [--loopback] [--out DIR]

Target: p99 of |issued - due| <= 50 us for writes 1 ms or more
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
Results: README.md and timing.csv in --out (default ./magnet-results/replay; the committed
run: experiments/results/replay/).
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from magnet.replay import tcp
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario
from magnetlib import knobs
from magnetlib.demand import Demand

from . import common

NAME = "replay"
CASES = [(1.0, 10240), (1.0, 418), (20.0, 10240), (20.0, 418)]
BLOCKING = (1.0, 10240, "20mbit")
TARGET_US = 50.0


def paced(seconds: float, spacing_ms: float, size: int) -> Demand:
    n = int(seconds * 1000 / spacing_ms)
    return Demand.from_arrays(np.arange(n) * int(spacing_ms * 1e6), np.full(n, size))


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


def report(rows: list[dict], context: dict, args) -> Path:
    """timing.csv and README.md in --out."""
    results = common.Results(NAME, args)
    frame = pd.DataFrame(rows)
    results.table("timing", frame)
    shown = frame.rename(columns={"spacing_ms": "spacing ms", "size_B": "bytes"})
    body = "\n".join([
        f"Load average before {context['load_before']}, after {context['load_after']}; "
        f"{args.seconds:g} s per demand. A CPU spinning on the clock for 1 s, before and after: "
        + "; ".join(f"{st['stalls_per_s']:.0f} stalls/s over 20 us, {st['stalled_pct']:.1f}% of its "
                    f"time, longest {st['max_stall_us']:.0f} us" for st in context["stalls"]) + "."
        + (f" {args.note}" if args.note else ""),
        "", f"Target: p99 <= {TARGET_US:g} us for writes >= 1 ms apart (unshaped rows).", "",
        common.markdown(shown, "{:.1f}")])
    return results.write("Replay timing fidelity", body)


def main(argv=None) -> int:
    p = common.bench_parser("bench_replay", NAME, __doc__)
    p.add_argument("--seconds", type=float, default=20.0, help="length of each paced demand (default 20)")
    p.add_argument("--loopback", action="store_true", help="no root: 127.0.0.1, no capture")
    args = common.parse(p, argv)
    common.quick(p, args, seconds=3.0)
    common.gate(args.loopback or os.geteuid() == 0, "bench_replay: needs root for network namespaces "
                                                    "(or --loopback)")
    context = {"load_before": common.load(), "stalls": [common.stalls()]}
    rows = []
    with tempfile.TemporaryDirectory(prefix="mgrp-bench-") as work:
        cases = [(sp, size, None) for sp, size in CASES] + ([] if args.loopback else [BLOCKING])
        for spacing_ms, size, rate in cases:
            rows.append(run_case(spacing_ms, size, args.seconds, rate, args.loopback, Path(work)))
            r = rows[-1]
            print(f"  {spacing_ms:g} ms, {size} B, {r['rate']}: p50 {r['p50_us']:.1f} us, p99 "
                  f"{r['p99_us']:.1f} us, blocked {r['blocked']}", file=sys.stderr)
    context["load_after"] = common.load()
    context["stalls"].append(common.stalls())
    path = report(rows, context, args)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
