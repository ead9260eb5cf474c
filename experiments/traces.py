"""Study 4, the papers' Fig. 8 (ALS 2001; PAM 2002 Fig. 9) and Fig. 10 (PAM 2002):
application writes and reads against wire packets, captured live.

An FTP-like transfer (10 KB writes every 1/5 s, as in ALS 2001 Fig. 8, and
every 20 ms, as in PAM 2002 Fig. 9) and an MP3-like stream (418-byte frames
about 21 ms apart, PAM 2002 Fig. 10) each run for real between two network
namespaces through a bottleneck, captured by the BPF capture.  For each: one
second of the sender's writes (SOCK_SEND) and wire packets (DEV_SEND), and of
the receiver's wire packets (DEV_RECV) and reads (SOCK_RECV), and per layer the
mean size, mean spacing and their coefficients of variation over the whole run
(magnetlib.metrics).

    python -m magnet.experiments.traces [--quick] [--rate 20mbit] [--duration 65]
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import magnetlib
from magnetlib import metrics, synth
from magnetlib.format import Event
from magnet.replay.report import plot_modulation

from . import common, live

# name -> (workload, what it stands for, where the paper's one-second window starts, s)
CASES = {
    "ftp-slow": (synth.ftp_slow, "FTP, 10 KB writes every 1/5 s (ALS 2001 Fig. 8)", 60.0),
    "ftp": (synth.ftp, "FTP, 10 KB writes every 20 ms (PAM 2002 Fig. 9)", 60.0),
    "mp3": (synth.mp3, "MP3 stream, 418-byte frames ~21 ms apart (PAM 2002 Fig. 10)", 5.0),
}
# The four panels of a figure: (label, event, which end).
PANELS = [("sender: application writes (SOCK_SEND)", Event.SOCK_SEND, "sender"),
          ("sender: wire packets (DEV_SEND)", Event.DEV_SEND, "sender"),
          ("receiver: wire packets (DEV_RECV)", Event.DEV_RECV, "receiver"),
          ("receiver: application reads (SOCK_RECV)", Event.SOCK_RECV, "receiver")]
# What the papers report for their traces (sizes in bytes, spacing in s, rate in kb/s).
PAPER = pd.DataFrame([
    ("ftp-slow", "application writes", 10240, 0.2, None, "ALS 2001 Fig. 8"),
    ("ftp-slow", "wire packets", 1500, None, None, "ALS 2001 Fig. 8: ~1500 B, 'considerably shorter intervals'"),
    ("ftp", "application writes", 10240, 0.02, None, "PAM 2002 Fig. 9"),
    ("ftp", "wire packets", 1500, None, None, "PAM 2002 Fig. 9: ~1500 B at intervals of varying duration"),
    ("mp3", "application reads", 418, 0.021, 127.1, "PAM 2002 Fig. 10 (one second, 5 s in)"),
    ("mp3", "wire packets (received)", 1380, 0.079, 139.9, "PAM 2002 Fig. 10"),
], columns=["case", "series", "mean_size_B", "mean_spacing_s", "rate_kbps", "source"])
# Layer rows kept in the table: the sender's send path and the receiver's receive path.
TABLE_COLUMNS = ["case", "end", "layer", "events", "mean_size", "cv_size", "mean_spacing_s",
                 "cv_spacing", "throughput_bps", "retrans"]


def build_parser():
    p = common.parser("traces", __doc__)
    p.add_argument("--rate", default="20mbit", help="bottleneck on the sender's end, tc syntax "
                                                    "(default 20mbit, WAN-like)")
    p.add_argument("--delay", default=None, help="one-way delay of the emulated path (default none)")
    p.add_argument("--duration", type=float, default=None,
                   help="seconds of each workload (default 65, the paper's window one minute in; "
                        "--quick: 4)")
    p.add_argument("--cases", default=",".join(CASES), help=f"which of {', '.join(CASES)}")
    p.add_argument("--work", type=Path, default=None,
                   help="keep the captured traces here (default: a temporary directory, removed)")
    return p


def window_start(case: str, duration: float) -> float:
    """The paper's window (one minute into FTP, 5 s into MP3) or the middle of a shorter run."""
    at = CASES[case][2]
    return at if duration >= at + 1.0 else max(0.0, duration / 2 - 0.5)


def layer_table(case: str, run: live.LiveRun):
    """Per layer of the sender's send path and the receiver's receive path: modulation metrics."""
    with magnetlib.open(run.trace) as trace:
        table = metrics.modulation(trace.check())
    ends = {run.sender: "sender", run.receiver: "receiver"}
    table["end"] = table["sockid"].map(ends)
    keep = ((table["end"] == "sender") & (table["direction"] == "send")) | \
           ((table["end"] == "receiver") & (table["direction"] == "recv"))
    table = table[keep].copy()
    table["case"] = case
    table["layer"] = table["layer"].str.upper() + "_" + table["direction"].str.upper()
    return table[TABLE_COLUMNS]


def panels(run: live.LiveRun) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The figure's four series: (label, ns, bytes)."""
    ends = {"sender": run.sender, "receiver": run.receiver}
    return [(label, *run.series(event, ends[end])) for label, event, end in PANELS]


def figure(results: common.Results, case: str, series, duration: float) -> Path:
    """Fig. 8 / Fig. 10: one second of the four series, stacked."""
    stem = "fig10-mp3" if case == "mp3" else f"fig8-{case}"
    return plot_modulation(series, results.path(f"{stem}.png"), at_s=window_start(case, duration))


def window_table(case: str, series, duration: float):
    """The figure's second as numbers, as the papers quote theirs (metrics.stack_table)."""
    lo = series[0][1][0] + int(window_start(case, duration) * 1e9)
    cut = [(label, ns[(ns >= lo) & (ns < lo + 1e9)], size[(ns >= lo) & (ns < lo + 1e9)])
           for label, ns, size in series]
    table = metrics.stack_table(cut).rename(columns={"stack": "series"})
    table.insert(0, "case", case)
    table["throughput_bps"] = table["bytes"] * 8.0          # over the whole second, as the paper's rates
    return table[["case", "series", "events", "mean_size", "mean_spacing_s", "cv_spacing", "throughput_bps"]]


def check_sizes(case: str, run: live.LiveRun, demand) -> list[str]:
    """What a reader should know about a run: bytes that did not add up, notes of the replay."""
    notes = [f"{case}: {note}" for note in run.notes]
    written = int(run.series(Event.SOCK_SEND, run.sender)[1].sum())
    if written != demand.total_bytes:
        notes.append(f"{case}: SOCK_SEND bytes {written} != demand {demand.total_bytes}")
    missed = missed_at_device(run)
    if missed:
        notes.append(f"{case}: {missed}")
    return notes


def missed_at_device(run: live.LiveRun) -> str | None:
    """Data packets the receiver's IP layer took whose sequence number no DEV_SEND or no
    DEV_RECV record carries: device events the capture missed."""
    with magnetlib.open(run.trace) as trace:
        def seqs(event, cookie):
            pos = trace.select([event], cookie)
            return trace.column_at("seq", pos)[trace.column_at("size", pos) > 0]
        ip = seqs(Event.IP_RECV, run.receiver)
        no_send = int((~np.isin(ip, seqs(Event.DEV_SEND, run.sender))).sum())
        no_recv = int((~np.isin(ip, seqs(Event.DEV_RECV, run.receiver))).sum())
        lost = int(trace.series(trace.select([Event.LOST]))[1].sum())
    if not (no_send or no_recv):
        return None
    return (f"of {len(ip)} data packets the receiver's IP layer took, {no_send} have no DEV_SEND "
            f"and {no_recv} no DEV_RECV record (sequence numbers compared); the trace's LOST "
            f"records count {lost} events lost")


def main(argv=None) -> int:
    args = common.parse(build_parser(), argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    common.gate(not bad and bool(cases), f"traces: unknown case {', '.join(bad)} (use {', '.join(CASES)})")
    live.gate(args.rate)
    args.duration = args.duration or (4.0 if args.quick else 65.0)
    results = common.Results("traces", args)
    tables, windows, notes = [], [], []
    with tempfile.TemporaryDirectory(prefix="mgxl-traces-") as tmp:
        work = args.work or Path(tmp)
        for case in common.progress(cases, "traces", unit="case"):
            demand = CASES[case][0](duration_s=args.duration, seed=args.seed)
            run = live.run(case, demand, work, args.rate, args.delay)
            series = panels(run)
            tables.append(layer_table(case, run))
            windows.append(window_table(case, series, args.duration))
            figure(results, case, series, args.duration)
            notes += check_sizes(case, run, demand)
    table, window = pd.concat(tables, ignore_index=True), pd.concat(windows, ignore_index=True)
    results.write("Application traffic vs the wire, captured live (Fig. 8, Fig. 10)",
                  body(results, args, cases, table, window, notes))
    print(f"results in {results.dir}")
    return 0


def kbps(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(throughput_kbps=table["throughput_bps"] / 1e3).drop(columns="throughput_bps")


def body(results: common.Results, args, cases: list[str], table: pd.DataFrame, window: pd.DataFrame,
         notes: list[str]) -> str:
    figures = [f"![{c}]({'fig10-mp3' if c == 'mp3' else 'fig8-' + c}.png)" for c in cases]
    parts = [live.describe_setup(args), "",
             "Workloads: " + "; ".join(f"`{c}`: {CASES[c][1]}" for c in cases)
             + f"; each {args.duration:g} s. A figure shows one second: "
               "one minute in for FTP, 5 s in for MP3, as in the papers (the middle of shorter runs).",
             "", "## Per layer, whole run (magnetlib.metrics)", "",
             results.table("layers", kbps(table), floats="{:.4g}"), "",
             "Spacing is between consecutive events of the layer; CV = standard deviation / mean; "
             "throughput over the layer's span. TCP_SEND/IP_SEND are the buffers TCP hands down "
             "(GSO: TCP always builds them; with offloads off they are split in software before "
             "the device, so DEV_SEND is one wire packet).", "",
             "## The figures' second, as numbers", "",
             results.table("window", kbps(window), floats="{:.4g}"), "",
             "## The papers' numbers", "", results.table("paper", PAPER), "", "## Figures", ""]
    parts += figures
    if notes:
        parts += ["", "## Notes", ""] + [f"* {n}" for n in notes]
    return "\n".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
