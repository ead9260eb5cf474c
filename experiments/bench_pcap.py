"""Benchmark: packets/s of the dpkt path and the fast (vectorised) path on the same large pcap.

    python -m magnet.experiments.bench_pcap [--packets 3000000] [--snaplen 128] [--dir DIR] [--keep]

Target: fast >= 20x dpkt.  The pcap holds `--packets` packets of 16
TCP/UDP flows over IPv4 and IPv6 (magnetlib.pcap.writer.synthetic_packets),
captured with a 128-byte snaplen as `tcpdump -s 128` would.  Each measurement
runs in a fresh process after the file has been read once (the parser, not the
disk); the fast path's figure is the best of three runs.  Memory: peak private
memory (RssAnon) above the process's baseline, and the peak of the file mapping
(RssFile: shared page cache, not a copy).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import common
from .bench_parse import PeakMemory, warm_cache

NAME = "bench-pcap"
TARGET = 20.0                   # the fast path at least this many times dpkt's packets/s


def measure(path: str, engine: str) -> dict:
    from magnetlib import pcap
    warm_cache(path)
    base = PeakMemory()
    base._sample()
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        cap = pcap.read(path, engine=engine)
        elapsed = time.perf_counter() - t0
    return {"engine": cap.engine, "packets": len(cap), "seconds": elapsed, "packets_per_s": len(cap) / elapsed,
            "fallback": cap.fallback, "rss_anon_peak": mem.peak["RssAnon"] - base.peak["RssAnon"],
            "rss_file_peak": mem.peak["RssFile"]}


def run(path: str, engine: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "magnet.experiments.bench_pcap", "--measure", path, "--engine", engine],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main(argv=None) -> int:
    p = common.bench_parser("bench_pcap", NAME, __doc__)
    p.add_argument("--packets", type=int, default=3_000_000, help="packets (default 3M; --quick 200k)")
    p.add_argument("--snaplen", type=int, default=128)
    p.add_argument("--dir", default=None, help="where to write the pcap (default: a temp dir in /var/tmp)")
    p.add_argument("--keep", action="store_true", help="keep the generated pcap")
    p.add_argument("--measure", help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    args = common.parse(p, argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.engine)))
        return 0
    common.quick(p, args, packets=200_000)

    from magnetlib.pcap.writer import synthetic_packets, write_pcap
    workdir = tempfile.mkdtemp(prefix="mgpc-bench-", dir=args.dir or "/var/tmp")
    path = os.path.join(workdir, "bench.pcap")
    try:
        t = time.perf_counter()
        write_pcap(path, synthetic_packets(args.packets), snaplen=args.snaplen)
        print(f"generated {path}: {args.packets:,} packets, {os.path.getsize(path) / 2**20:.0f} MiB "
              f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        fast = max((run(path, "fast") for _ in range(3)), key=lambda r: r["packets_per_s"])
        ref = run(path, "dpkt")
    finally:
        if not args.keep:
            if os.path.exists(path):
                os.unlink(path)
            os.rmdir(workdir)
    print(report(ref, fast, args).read_text())
    return 0


def report(ref: dict, fast: dict, args) -> Path:
    """results.csv and README.md in --out: both engines and the target's verdict."""
    import pandas as pd
    frame = pd.DataFrame([{"engine": r["engine"], "packets": r["packets"], "seconds": r["seconds"],
                           "packets_per_s": r["packets_per_s"], "private_MiB": r["rss_anon_peak"] / 2**20,
                           "mapped_MiB": r["rss_file_peak"] / 2**20} for r in (ref, fast)])
    results = common.Results(NAME, args)
    table = results.table("results", frame, "{:.4g}")
    speedup = fast["packets_per_s"] / ref["packets_per_s"]
    body = "\n".join([
        table, "",
        f"fast/dpkt: {speedup:.1f}x (target {TARGET:g}x: {'met' if speedup >= TARGET else 'MISSED'}); "
        f"the fast path handed {fast['fallback']} packets to dpkt; the fast path's figure is the best of three runs.",
        "", f"Load average at the end {common.load()}." + (f" {args.note}" if args.note else "")])
    return results.write("Reading a pcap: the fast path against dpkt", body)


if __name__ == "__main__":
    sys.exit(main())
