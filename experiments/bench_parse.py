"""Benchmark: open + full scan + demand extraction of a >= 1 GB trace, native and byte-swapped.

    python -m magnet.experiments.bench_parse [--gib 1.0] [--dir DIR] [--keep]

Targets: >= 50 M records/s native, >= 20 M records/s byte-swapped, and
private memory bounded by the chunk size, not the file (the mapping is shared
page cache, reported separately as RssFile).  Each measurement runs in a fresh
process; the file is read once beforehand so that the figures are of the
parser, not of the disk (pass --cold to drop the page cache first, as root).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from . import common

NAME = "bench-parse"
# Records per second of the whole parse (open, scan, demand), by byte order.
TARGETS = {"native": 50e6, "byte-swapped": 20e6}
STREAMS = 64
CHUNK = 1 << 22


def generate(path: str, records: int, byteorder: str) -> None:
    """A trace shaped like a capture: per stream, one SOCK_SEND for every 7 TCP/IP/DEV sends."""
    import magnetlib
    from magnetlib.format import Clock, Event
    pattern = np.array([Event.SOCK_SEND] + [Event.TCP_SEND, Event.IP_SEND, Event.DEV_SEND] * 2 + [Event.TCP_SEND],
                       np.uint32)
    meta = magnetlib.TraceMeta(anchor_ticks=1, clock_source=Clock.SYNTHETIC, producer="bench_parse")
    rng = np.random.default_rng(1)
    with magnetlib.TraceWriter(path, meta, byteorder=byteorder) as w:
        for lo in range(0, records, CHUNK):
            n = min(CHUNK, records - lo)
            rec = magnetlib.empty_records(n)
            i = np.arange(lo, lo + n)
            rec["timestamp"] = 1_000 + i * 1_000
            rec["event"] = pattern[i % len(pattern)]
            rec["sockid"] = 0x1000 + (i // len(pattern)) % STREAMS
            rec["size"] = np.where(rec["event"] == Event.SOCK_SEND, 10240, rng.integers(1, 1449, n))
            w.append(rec)


def warm_cache(path: str) -> None:
    """Read the file once: measure the parser, not the disk."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


class PeakMemory:
    """Samples /proc/self/status: peak private (RssAnon) and file-backed (RssFile) memory."""

    def __init__(self):
        self.peak = {"RssAnon": 0, "RssFile": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in self.peak:
                    self.peak[key] = max(self.peak[key], int(value.split()[0]) * 1024)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self._sample()

    def __enter__(self):
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


def measure(path: str) -> dict:
    """In this process: open, scan (with every check), extract one stream's demand."""
    import magnetlib
    from magnetlib import demand
    warm_cache(path)
    base_anon = PeakMemory()
    base_anon._sample()
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        trace = magnetlib.open(path)
        t1 = time.perf_counter()
        trace.check()
        t2 = time.perf_counter()
        d = demand.extract(trace, sockid=0x1000, direction="send")
        t3 = time.perf_counter()
    n = len(trace.records)
    return {"records": n, "bytes": os.path.getsize(path), "swapped": trace.swapped,
            "open_s": t1 - t0, "scan_s": t2 - t1, "demand_s": t3 - t2, "total_s": t3 - t0,
            "records_per_s": n / (t3 - t0), "demand_calls": len(d),
            "rss_anon_peak": mem.peak["RssAnon"] - base_anon.peak["RssAnon"],
            "rss_file_peak": mem.peak["RssFile"]}


def main(argv=None) -> int:
    p = common.bench_parser("bench_parse", NAME, __doc__)
    p.add_argument("--gib", type=float, default=1.05, help="trace size in GiB (default 1.05; --quick 0.05)")
    p.add_argument("--dir", default=None, help="where to write the traces (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the generated traces")
    p.add_argument("--cold", action="store_true", help="drop the page cache before each run (root)")
    p.add_argument("--measure", help=argparse.SUPPRESS)
    args = common.parse(p, argv)
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    common.quick(p, args, gib=0.05)

    from magnetlib.trace import NATIVE
    records = int(args.gib * (1 << 30)) // 24
    workdir = tempfile.mkdtemp(prefix="magnet-bench-", dir=args.dir or "/var/tmp")
    swapped = ">" if NATIVE == "<" else "<"
    rows = []
    try:
        for label, order in (("native", NATIVE), ("byte-swapped", swapped)):
            path = os.path.join(workdir, f"{label}.magnet")
            t = time.perf_counter()
            generate(path, records, order)
            print(f"generated {label} trace: {os.path.getsize(path) / 2**30:.2f} GiB, "
                  f"{records:,} records in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            if args.cold:
                subprocess.run(["sh", "-c", "sync; echo 1 > /proc/sys/vm/drop_caches"], check=False)
            out = subprocess.run([sys.executable, "-m", "magnet.experiments.bench_parse", "--measure", path],
                                 check=True, capture_output=True, text=True).stdout
            rows.append({"trace": label, **json.loads(out)})
            if not args.keep:
                os.unlink(path)
    finally:
        if not args.keep:
            os.rmdir(workdir)
    print(report(rows, args).read_text())
    return 0


def report(rows: list[dict], args) -> Path:
    """results.csv and README.md in --out: each trace's figures and the targets' verdicts."""
    import pandas as pd
    frame = pd.DataFrame([{"trace": r["trace"], "GiB": r["bytes"] / 2**30, "records": r["records"],
                           "open_s": r["open_s"], "scan_s": r["scan_s"], "demand_s": r["demand_s"],
                           "total_s": r["total_s"], "M_records_per_s": r["records_per_s"] / 1e6,
                           "private_MiB": r["rss_anon_peak"] / 2**20, "mapped_MiB": r["rss_file_peak"] / 2**20}
                          for r in rows])
    results = common.Results(NAME, args)
    table = results.table("results", frame, "{:.4g}")
    verdicts = [f"{r['trace']}: {r['records_per_s'] / 1e6:.1f} M records/s, target {TARGETS[r['trace']] / 1e6:.0f} M: "
                f"{'met' if r['records_per_s'] >= TARGETS[r['trace']] else 'MISSED'}" for r in rows]
    body = "\n".join([table, "", *(f"- {v}" for v in verdicts), "",
                      f"Load average at the end {common.load()}." + (f" {args.note}" if args.note else "")])
    return results.write("Parsing a trace: open, scan and demand, native and byte-swapped", body)


if __name__ == "__main__":
    sys.exit(main())
