"""Benchmark: a trace library of >= 100 M records: import, re-import, queries on DuckDB (and Dask).

    python -m magnet.experiments.bench_library [--records 100e6] [--traces 20] [--hosts 4] [--dask]
                                        [--dir DIR] [--keep] [--quick]

Generates the traces (captures shaped like bench_parse's: per stream one
SOCK_SEND for every 7 TCP/IP/DEV sends, some replies, a LOST record now and
then; hosts and days spread so that the library has many partitions), then,
each in a fresh process: imports them all (records/s, peak private and mapped
memory: the import streams chunk by chunk, so private memory must not grow
with the library), adds them again (idempotence: hashing only), and runs
the analyses.  --dask also runs them on a local Dask cluster (2 workers) and
checks that the answers equal DuckDB's.  --quick: 2 M records, for a smoke test.
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
from pathlib import Path

import numpy as np

from . import common
from .bench_parse import PeakMemory

NAME = "bench-library"
STREAMS = 64
CHUNK = 1 << 22
DAY_NS = 86_400 * 10**9
EPOCH_NS = 1_700_000_000 * 10**9
ANALYSES = ("scan", "demand", "modulation", "top", "loss")


def generate(path: str, records: int, host: str, wall_ns: int, seed: int) -> None:
    """Streams of SOCK_SEND + 7 TCP/IP/DEV sends, a SOCK_RECV/DEV_RECV reply every 64 records,
    a LOST record every 2^20 records; about 10 us between records."""
    import magnetlib
    from magnetlib.format import Clock, Event
    pattern = np.array([Event.SOCK_SEND] + [Event.TCP_SEND, Event.IP_SEND, Event.DEV_SEND] * 2 + [Event.TCP_SEND],
                       np.uint32)
    meta = magnetlib.TraceMeta(anchor_ticks=1_000, clock_source=Clock.REALTIME, hostname=host,
                               wall_anchor_ns=wall_ns, producer="bench_library")
    rng = np.random.default_rng(seed)
    with magnetlib.TraceWriter(path, meta) as w:
        for lo in range(0, records, CHUNK):
            n = min(CHUNK, records - lo)
            i = np.arange(lo, lo + n)
            rec = magnetlib.empty_records(n)
            rec["timestamp"] = 1_000 + i * 10_000 + rng.integers(0, 5_000, n)      # CPUs reorder a little
            rec["event"] = pattern[i % len(pattern)]
            rec["sockid"] = 0x1000 + (i // len(pattern)) % STREAMS
            reply = i % 64 == 63
            rec["event"][reply] = np.where(i[reply] % 128 == 127, Event.SOCK_RECV, Event.DEV_RECV)
            rec["size"] = np.where(rec["event"] == Event.SOCK_SEND, 10240, rng.integers(1, 1449, n))
            lost = i % (1 << 20) == (1 << 20) - 1
            rec["event"][lost], rec["sockid"][lost], rec["size"][lost] = Event.LOST, 0, rng.integers(1, 500)
            w.append(rec)


def measure_import(lib: str, traces: list[str]) -> dict:
    from magnetlib.library import Library
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        added = Library.create(lib).add(traces)
        t1 = time.perf_counter()
    return {"seconds": t1 - t0, "records": sum(a.records for a in added),
            "statuses": sorted({a.status for a in added}),
            "rss_anon_peak": mem.peak["RssAnon"], "rss_file_peak": mem.peak["RssFile"]}


def measure_queries(lib: str, engine: str, scheduler: str | None) -> dict:
    from magnetlib.library import Library
    library = Library(lib)
    out, frames = {}, {}
    with PeakMemory() as mem:
        for name in ANALYSES:
            t0 = time.perf_counter()
            frames[name] = _analysis(library, name, engine, scheduler)
            out[name] = time.perf_counter() - t0
    out["rows"] = {k: len(v) for k, v in frames.items()}
    out["rss_anon_peak"], out["rss_file_peak"] = mem.peak["RssAnon"], mem.peak["RssFile"]
    out["digest"] = {k: _digest(v) for k, v in frames.items()}
    return out


def _analysis(library, name: str, engine: str, scheduler: str | None):
    if name == "scan":
        if engine != "duckdb":
            return library.query("SELECT 1 AS skipped")          # SQL is DuckDB's: not timed
        return library.query("SELECT host, event, count(*) AS n, sum(size) AS bytes FROM records "
                             "GROUP BY ALL ORDER BY ALL")
    call = {"demand": "demand_stats", "modulation": "modulation", "top": "top_streams", "loss": "loss"}[name]
    return getattr(library, call)(engine=engine, scheduler=scheduler)


def _digest(frame) -> list:
    """Numeric column sums, to compare engines without shipping whole tables between processes."""
    return [round(float(frame[c].sum()), 3) for c in frame.columns if frame[c].dtype.kind in "iuf"]


def _child(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "magnet.experiments.bench_library", *args],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = common.bench_parser("bench_library", NAME, __doc__)
    p.add_argument("--records", type=float, default=100e6, help="records in all traces (default 100e6)")
    p.add_argument("--traces", type=int, default=20)
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--dask", action="store_true", help="also run the analyses on a local Dask cluster")
    p.add_argument("--dir", default=None, help="where to work (default: a temp dir under /var/tmp)")
    p.add_argument("--keep", action="store_true", help="keep the traces and the library")
    p.add_argument("--measure-import", nargs="+", help=argparse.SUPPRESS)
    p.add_argument("--measure-queries", nargs=3, help=argparse.SUPPRESS)
    args = common.parse(p, argv)
    if args.measure_import:
        print(json.dumps(measure_import(args.measure_import[0], args.measure_import[1:])))
        return 0
    if args.measure_queries:
        lib, engine, scheduler = args.measure_queries
        print(json.dumps(measure_queries(lib, engine, None if scheduler == "-" else scheduler)))
        return 0
    common.quick(p, args, records=2e6, traces=4, dask=True)
    return run(args)


def run(args) -> int:
    records, ntraces = int(args.records), args.traces
    work = tempfile.mkdtemp(prefix="mglib-bench-", dir=args.dir or "/var/tmp")
    try:
        t = time.perf_counter()
        traces = []
        for k in range(ntraces):
            n = records // ntraces + (1 if k < records % ntraces else 0)
            path = os.path.join(work, f"trace{k:03d}.magnet")
            host = f"host{k % args.hosts}"
            generate(path, n, host, EPOCH_NS + (k // args.hosts) * DAY_NS + k * 3_600 * 10**9, seed=k)
            traces.append(path)
        size = sum(os.path.getsize(p) for p in traces)
        print(f"generated {ntraces} traces, {records:,} records, {size / 2**30:.2f} GiB "
              f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        lib = os.path.join(work, "lib")
        imp = _child("--measure-import", lib, *traces)
        again = _child("--measure-import", lib, *traces)
        disk = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(lib) for f in fs)
        duck = _child("--measure-queries", lib, "duckdb", "-")
        dask = _with_cluster(lib) if args.dask else None
        print(report(args, records, size, disk, imp, again, duck, dask).read_text())
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}", file=sys.stderr)
    return 0


def _with_cluster(lib: str) -> dict:
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_port=0, worker_dashboard_address=None, silence_logs=40) as cluster:
        return _child("--measure-queries", lib, "dask", cluster.scheduler_address)


def report(args, records: int, size: int, disk: int, imp: dict, again: dict, duck: dict,
           dask: dict | None) -> Path:
    """analyses.csv and README.md in --out: the import, the library's size, each analysis."""
    import pandas as pd
    mib = 2**20
    engines = [("duckdb", duck)] + ([("dask", dask)] if dask else [])
    frame = pd.DataFrame([{"analysis": name, "rows": duck["rows"][name],
                           **{f"{e}_s": (r[name] if e == "duckdb" or name != "scan" else float("nan"))
                              for e, r in engines},
                           **{f"{e}_M_records_per_s": (records / r[name] / 1e6 if e == "duckdb" or name != "scan"
                                                       else float("nan")) for e, r in engines}}
                          for name in ANALYSES])
    results = common.Results(NAME, args)
    table = results.table("analyses", frame, "{:.3g}")
    lines = [
        f"- import: {imp['records']:,} records in {imp['seconds']:.1f} s: "
        f"{imp['records'] / imp['seconds'] / 1e6:.2f} M records/s, {size / mib / imp['seconds']:.0f} MiB/s of "
        f"trace; peak private {imp['rss_anon_peak'] / mib:.0f} MiB, mapped {imp['rss_file_peak'] / mib:.0f} MiB",
        f"- re-import: {again['statuses']} in {again['seconds']:.1f} s (content hashes only)",
        f"- library: {disk / mib:.0f} MiB on disk, {disk / records:.2f} bytes/record "
        f"(traces: {size / mib:.0f} MiB, {size / disk:.1f}x larger)",
        *(f"- {label} queries: peak private {r['rss_anon_peak'] / mib:.0f} MiB, mapped "
          f"{r['rss_file_peak'] / mib:.0f} MiB (in this process; Dask workers are separate)" for label, r in engines)]
    if dask:
        same = {n: np.allclose(duck["digest"][n], dask["digest"][n], rtol=1e-6) for n in ANALYSES if n != "scan"}
        lines.append("- dask == duckdb: " + ", ".join(f"{n} {'yes' if ok else 'NO'}" for n, ok in same.items()))
    body = "\n".join([*lines, "", table, "", f"Load average at the end {common.load()}."
                      + (f" {args.note}" if args.note else "")])
    return results.write(f"A trace library of {records:,} records: import and analyses", body)


if __name__ == "__main__":
    sys.exit(main())
