"""Benchmark: each analysis command on a 1 GiB trace and a 1 GiB pcap, beside the limits.

    python -m magnet.experiments.bench_analysis [--gib 1.0] [--runs 3] [--dir DIR] [--out DIR]

Targets: `magnet stats` <= 20x the numpy column sum and <= 1.2 GiB peak RSS;
`magnet pcap-info` <= 5x a libpcap C loop and <= 1 GiB peak RSS.

The limits are measured in the same run: the time numpy takes to sum the size column
of the memory-mapped trace (the operation alone, in a fresh process), and the wall time
of a C program (experiments/native/pcaploop.c, built against libpcap: Debian libpcap-dev)
that reads every packet of the pcap with pcap_next_ex.  Each command runs as its own process (wall time,
and peak RSS from /usr/bin/time, the page cache it maps included); the files are read once
beforehand, and the runs are interleaved: run 1 of every command, then run 2, ...
Reported: medians [min, max], and each median as a ratio to its file's limit;
`magnet --version` shows what starting the command costs before it reads anything.
The trace is bench_parse's (64 streams, a SOCK_SEND per seven TCP/IP/DEV sends); the
pcap holds 16 bulk TCP/UDP flows over IPv4 and IPv6 captured with a 96-byte snaplen.
The inputs are deleted afterwards; results go to --out (default ./magnet-results/bench-analysis).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from magnetlib.errors import BuildError

from . import common
from .bench_parse import generate, warm_cache

NAME = "bench-analysis"
STATS_RATIO, STATS_RSS = 20.0, 1.2 * 2**30
PCAP_INFO_RATIO, PCAP_INFO_RSS = 5.0, 1.0 * 2**30
PCAP_SNAPLEN = 96

NUMPY_SUM = """
import sys, time
import numpy as np
from magnetlib import format as fmt
t0 = time.perf_counter()
m = np.memmap(sys.argv[1], dtype=fmt.record_dtype(), mode="r")
total = int(m["size"].sum())
print(time.perf_counter() - t0)
"""


def generate_pcap(path: str, nbytes: int) -> int:
    """A pcap of about `nbytes`: synthetic flows (magnetlib.pcap.writer), written a million
    packets at a time; returns the packets."""
    from magnetlib.pcap.writer import synthetic_packets, write_pcap
    part, packets, k = path + ".part", 0, 0
    with open(path, "wb") as out:
        while out.tell() < nbytes:
            n = 1 << 20
            chunk = synthetic_packets(n, seed=k, start_ns=1_700_000_000_000_000_000 + k * n * 2000)
            write_pcap(part, chunk, snaplen=PCAP_SNAPLEN)
            with open(part, "rb") as f:
                out.write(f.read()[24 if k else 0:])
            packets, k = packets + n, k + 1
    os.unlink(part)
    return packets


def build_c_loop() -> str | None:
    """The libpcap loop (experiments/native/pcaploop.c), or None (said why) where it cannot be built."""
    try:
        return str(common.native_program("pcaploop", ("make", "cc", "/usr/include/pcap.h")))
    except BuildError as e:
        print(f"bench_analysis: no libpcap limit: {e}", file=sys.stderr)
        return None


def run(cmd: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS bytes and stdout of one process.  The peak comes from
    /usr/bin/time, a small parent: a child forked from this (large) process would report
    this process's resident memory as its own peak."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        t0 = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", report.name, *cmd],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        elapsed = time.perf_counter() - t0
        peak_kib = int(report.read().split()[-1])
    if proc.returncode not in (0, 2):
        raise RuntimeError(f"{' '.join(cmd)}: exit status {proc.returncode}")
    return elapsed, peak_kib * 1024, proc.stdout


def commands(magnet: str, trace: str, pcap: str, scratch: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (input kind, command line)."""
    return {
        "magnet --version": ("startup", [magnet, "--version"]),
        "stats": ("trace", [magnet, "stats", trace]),
        "info": ("trace", [magnet, "info", trace]),
        "demand": ("trace", [magnet, "demand", trace, "-o", os.path.join(scratch, "demand.csv")]),
        "pcap-info": ("pcap", [magnet, "pcap-info", pcap]),
        "from-pcap": ("pcap", [magnet, "from-pcap", pcap, "-o", os.path.join(scratch, "from.magnet")]),
        "compare": ("both", [magnet, "compare", trace, pcap]),
    }


def measure(trace: str, pcap: str, loop: str | None, runs: int, scratch: str) -> dict[str, list]:
    """Interleaved runs: the limits, then every command, `runs` times."""
    magnet = shutil.which("magnet") or os.path.join(os.path.dirname(sys.executable), "magnet")
    cmds = commands(magnet, trace, pcap, scratch)
    times: dict[str, list] = {name: [] for name in ["numpy sum", "libpcap loop", *cmds]}
    for k in range(runs):
        for path in (trace, pcap):
            warm_cache(path)
        _, rss, out = run([sys.executable, "-c", NUMPY_SUM, trace])
        times["numpy sum"].append((float(out), rss))
        if loop:
            elapsed, rss, _ = run([loop, pcap])
            times["libpcap loop"].append((elapsed, rss))
        for name, (_, cmd) in cmds.items():
            elapsed, rss, _ = run(cmd)
            times[name].append((elapsed, rss))
            print(f"run {k + 1}/{runs}: {name} {elapsed:.2f} s, {rss / 2**20:.0f} MiB", file=sys.stderr)
    return times


def summarise(times: dict[str, list]) -> list[dict]:
    rows = []
    limit = {"trace": times["numpy sum"], "pcap": times["libpcap loop"], "both": times["libpcap loop"]}
    kinds = {"stats": "trace", "info": "trace", "demand": "trace", "pcap-info": "pcap",
             "from-pcap": "pcap", "compare": "both"}
    for name, runs in times.items():
        if not runs:
            continue
        secs, rss = [r[0] for r in runs], [r[1] for r in runs]
        row = {"what": name, "s": secs, "rss": rss, "s_median": statistics.median(secs), "s_min": min(secs),
               "s_max": max(secs),
               "rss_mib_median": statistics.median(rss) / 2**20, "rss_mib_min": min(rss) / 2**20,
               "rss_mib_max": max(rss) / 2**20, "limit": "", "ratio": np.nan}
        if name in kinds and limit[kinds[name]]:
            base = statistics.median(r[0] for r in limit[kinds[name]])
            row["limit"] = "numpy sum" if kinds[name] == "trace" else "libpcap loop"
            row["ratio"] = row["s_median"] / base
        rows.append(row)
    return rows


def verdicts(rows: list[dict]) -> list[str]:
    by = {r["what"]: r for r in rows}
    out = []
    for name, ratio, rss in (("stats", STATS_RATIO, STATS_RSS), ("pcap-info", PCAP_INFO_RATIO, PCAP_INFO_RSS)):
        r = by.get(name)
        if r is None or np.isnan(r["ratio"]):
            continue
        ok_t, ok_m = r["ratio"] <= ratio, r["rss_mib_median"] * 2**20 <= rss
        out.append(f"{name}: {r['ratio']:.1f}x its limit (target {ratio:g}x: {'met' if ok_t else 'MISSED'}), "
                   f"peak RSS {r['rss_mib_median']:.0f} MiB (target {rss / 2**30:g} GiB: "
                   f"{'met' if ok_m else 'MISSED'})")
    return out


def table(rows: list[dict]) -> str:
    lines = ["| what | wall s, median [min, max] | peak RSS MiB, median [min, max] | limit | x limit |",
             "|---|---|---|---|---|"]
    for r in rows:
        ratio = "" if np.isnan(r["ratio"]) else f"{r['ratio']:.1f}"
        lines.append(f"| {r['what']} | {common.spread(r['s'], '{:.3f}')} | "
                     f"{common.spread(np.array(r['rss']) / 2**20, '{:.0f}')} | {r['limit']} | {ratio} |")
    return "\n".join(lines)


def report(args, rows: list[dict], facts: dict, notes: list[str]) -> Path:
    """results.csv and README.md in --out."""
    import pandas as pd
    results = common.Results(NAME, args)
    results.table("results", pd.DataFrame([{k: v for k, v in r.items() if k not in ("s", "rss")}
                                           for r in rows]))
    body = "\n".join(["See the module's docstring for what is measured and how.", "",
                      *(f"- {k}: {v}" for k, v in facts.items()), "", table(rows), "",
                      *(f"- {n}" for n in notes)] + ([f"- {args.note}"] if args.note else []))
    return results.write(f"Analysis commands on {args.gib:g} GiB inputs, beside their limits", body)


def main(argv=None) -> int:
    p = common.bench_parser("bench_analysis", NAME, __doc__)
    p.add_argument("--gib", type=float, default=1.0, help="size of each input in GiB (default 1; --quick 0.02)")
    p.add_argument("--runs", type=int, default=3, help="interleaved runs (default 3; --quick 1)")
    p.add_argument("--dir", default=None, help="where to write the inputs (default: a temp dir in /tmp)")
    args = common.parse(p, argv)
    common.quick(p, args, gib=0.02, runs=1)
    from magnetlib.trace import NATIVE
    workdir = tempfile.mkdtemp(prefix="magnet-bench-analysis-", dir=args.dir or "/tmp")
    trace, pcap = os.path.join(workdir, "bench.magnet"), os.path.join(workdir, "bench.pcap")
    try:
        records = int(args.gib * (1 << 30)) // 24
        generate(trace, records, NATIVE)
        packets = generate_pcap(pcap, int(args.gib * (1 << 30)))
        facts = {"trace": f"{os.path.getsize(trace) / 2**30:.2f} GiB, {records:,} records, 64 streams",
                 "pcap": f"{os.path.getsize(pcap) / 2**30:.2f} GiB, {packets:,} packets, snaplen {PCAP_SNAPLEN}",
                 "runs": f"{args.runs}, interleaved", "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                 f"Linux {platform.release()}, load average {os.getloadavg()[0]:.1f} at the start",
                 "date": time.strftime("%Y-%m-%d")}
        print(json.dumps(facts), file=sys.stderr)
        loop = build_c_loop()
        times = measure(trace, pcap, loop, args.runs, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rows = summarise(times)
    notes = verdicts(rows) + ["compare matches the trace's streams against the pcap's flows: here they "
                              "are unrelated, so it reads both and reports no match (exit 2)."]
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if 2 * args.gib * (1 << 30) > memory:
        notes.append(f"the two inputs ({2 * args.gib:g} GiB) exceed this machine's memory "
                     f"({memory / 2**30:.0f} GiB): no run finds them all in the page cache, so the "
                     "limits too read from disk and the ratios compare disk-bound times.")
    print(report(args, rows, facts, notes).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
