"""Study 2, overhead: the papers' Table I (network throughput reduction) and
Fig. 6 (average increase in CPU utilisation), magnet-read against tcpdump.

    magnet experiment overhead [--runs 4] [--duration 8] [--rates max,1G] [--quick]

The measurement is experiments/bench_capture.py's (iperf3 over a veth pair
between two namespaces, MTU 1500, offloads off; six configurations
interleaved: no capture, programs loaded but never drained, magnet-read on the
receiver's / sender's connections, tcpdump -w on the receiver's / sender's
interface), once per offered load: `max` (as fast as it goes, the paper's
netperf) and paced rates (iperf3 -b), where the machine is not CPU-bound and
a CPU increase means something. Sender and receiver share this machine, so
"CPU" is the machine's (both cores) and the capture tool's own. Extra runs
with BPF statistics (kernel.bpf_stats_enabled) say where the kernel time
goes: per program (attach point), its runs, ns per run and share of the
total, beside throughput and CPU per transferred GB (programs.csv).
Needs root, BPF, iperf3, tcpdump, ethtool.
"""
from __future__ import annotations

import argparse
import os
import sys
import textwrap

import numpy as np
import pandas as pd

from . import bench_capture as bench
from . import capture_gate, common


B = bench
# ALS 2001 Table I (throughput, % reduction) and PAM 2002 Table I (send, receive CPU %).
PAPER = pd.DataFrame([
    (B.BASELINE, 94.1, 0.0, 459.5, 0.0, 15.2, 33.5, 61.0, 82.4),
    (B.LOADED, 94.1, 0.01, 452.5, 1.53, 16.9, 33.5, 63.0, 82.6),
    (B.MAGNET_RCV, 90.8, 3.56, 444.3, 3.30, 20.7, 34.4, 62.4, 82.0),
    (B.MAGNET_SND, 90.7, 3.67, 440.2, 4.19, 23.7, 32.4, 63.1, 81.1),
    (B.TCPDUMP_RCV, 89.4, 5.04, 290.7, 36.74, 18.0, 59.8, 36.1, 91.5),
    (B.TCPDUMP_SND, 89.4, 5.42, 343.2, 25.30, 45.0, 31.9, 93.2, 64.1),
], columns=["configuration", "mbps_100", "reduction_100", "mbps_1000", "reduction_1000",
            "snd_cpu_100", "rcv_cpu_100", "snd_cpu_1000", "rcv_cpu_1000"])
for _speed in ("100", "1000"):       # Fig. 6: increase of the sender/receiver average CPU
    _avg = (PAPER[f"snd_cpu_{_speed}"] + PAPER[f"rcv_cpu_{_speed}"]) / 2
    PAPER[f"cpu_increase_{_speed}"] = 100.0 * (_avg / _avg.iloc[0] - 1)
SHOWN = [B.LOADED, B.MAGNET_RCV, B.MAGNET_SND, B.TCPDUMP_RCV, B.TCPDUMP_SND]


def options(argv):
    p = common.parser("overhead", __doc__)
    p.add_argument("--runs", type=int, default=4, help="runs per configuration and load (default 4)")
    p.add_argument("--duration", type=float, default=8.0, help="seconds per iperf3 run (default 8)")
    p.add_argument("--cost-runs", type=int, default=2,
                   help="extra runs with BPF statistics for ns/event, at the first load (default 2)")
    p.add_argument("--rates", default="max,1G", help="offered loads: max and/or iperf3 -b rates (default max,1G)")
    p.add_argument("--workdir", default="/dev/shm", help="where traces and pcaps go (a tmpfs; deleted per run)")
    p.add_argument("--prefix", default="mgxk", help="name prefix of namespaces and cgroups (default mgxk)")
    args = common.parse(p, argv)
    common.quick(p, args, runs=2, duration=3.0, cost_runs=1, rates="max")
    args.rate_list = [r.strip() for r in args.rates.split(",") if r.strip()]
    return args


def measure(args) -> dict[str, list[bench.Run]]:
    """Runs per offered load, with a progress bar over all of them."""
    per_load = len(bench.CONFIGS) * args.runs
    total = per_load * len(args.rate_list) + len(bench.MAGNET_CONFIGS) * args.cost_runs
    bar = common.progress(desc="overhead", total=total)
    out = {}
    try:
        for i, rate in enumerate(args.rate_list):
            load = argparse.Namespace(**{**vars(args), "cost_runs": args.cost_runs if i == 0 else 0})

            def report(run, cost, rate=rate):
                bar.set_postfix_str(f"{rate} {run.config} {run.gbps:.2f} Gb/s")
                bar.update(1)
            out[rate] = bench.measure(load, None if rate == "max" else rate, report)
    except bench.capture.CaptureError as e:
        capture_gate.refused(e)
    finally:
        bar.close()
    return out


def summary(runs: dict[str, list[bench.Run]]) -> pd.DataFrame:
    """bench_capture's Table I rows per load, with CPU increases and the papers' figures."""
    frames = []
    for rate, load_runs in runs.items():
        rows = pd.DataFrame(bench.summarize(load_runs)).astype(
            {c: float for c in ("tool_cpu_pct", "events_per_s", "ns_per_event", "ns_per_run")})
        rows = rows[(rows.runs > 0) | rows.ns_per_run.notna()]
        rows["transfer_cpu_pct"] = rows.traffic_cpu_pct + rows.tool_cpu_pct.fillna(0)
        rows["cpu_increase_pct"] = 100.0 * (rows.transfer_cpu_pct / rows.transfer_cpu_pct.iloc[0] - 1)
        rows["cpu_s_per_gb"] = rows.transfer_cpu_pct / 100 * 8 / rows.gbps
        per_gbit = rows.transfer_cpu_pct / rows.gbps
        rows["cpu_per_gbit_increase_pct"] = 100.0 * (per_gbit / per_gbit.iloc[0] - 1)
        rows.insert(0, "load", rate)
        frames.append(rows)
    table = pd.concat(frames, ignore_index=True)
    paper = PAPER[["configuration", "reduction_100", "reduction_1000", "cpu_increase_100",
                   "cpu_increase_1000"]].add_prefix("paper_").rename(columns={"paper_configuration": "configuration"})
    return table.merge(paper, on="configuration", how="left")


def figure(table: pd.DataFrame):
    """Fig. 6 style: throughput reduction and CPU increase per configuration, today vs 2001."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 5), layout="constrained")
    x = np.arange(len(SHOWN))
    series = [(f"today, {rate}", table[table.load == rate].set_index("configuration"), "")
              for rate in table.load.unique()]
    series += [("paper, 1000 Mb/s", PAPER.set_index("configuration"), "1000"),
               ("paper, 100 Mb/s", PAPER.set_index("configuration"), "100")]
    panels = [("throughput reduction (%)", "reduction_pct", "reduction_{}"),
              ("CPU increase (%): transfer + capture", "cpu_increase_pct", "cpu_increase_{}"),
              ("CPU per Gb/s increase (%)", "cpu_per_gbit_increase_pct", None)]
    width = 0.8 / len(series)
    for ax, (title, ours, theirs) in zip(axes, panels):
        for k, (label, frame, speed) in enumerate(series):
            column = ours if not speed else (theirs.format(speed) if theirs else None)
            if column is None:
                continue
            values = frame.reindex(SHOWN)[column].to_numpy(dtype=float)
            ax.bar(x + (k - (len(series) - 1) / 2) * width, values, width, label=label,
                   hatch="//" if speed else None, alpha=0.6 if speed else 1.0)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xticks(x, [textwrap.fill(c.replace("/", " "), 11) for c in SHOWN], fontsize=8)
        ax.set_title(title)
    fig.suptitle("The cost of capturing: magnet-read (BPF) vs tcpdump, against no capture")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8)
    return fig


def write(results: common.Results, args, runs, table: pd.DataFrame, load: dict) -> None:
    all_runs = pd.DataFrame([{"load": rate, **r.row()} for rate, rs in runs.items() for r in rs])
    results.table("runs", all_runs)
    shown = table[["load", "configuration", "runs", "gbps", "gbps_spread", "reduction_pct",
                   "paper_reduction_1000", "transfer_cpu_pct", "tool_cpu_pct", "cpu_increase_pct",
                   "paper_cpu_increase_1000", "cpu_per_gbit_increase_pct", "cpu_s_per_gb", "cpu_pct",
                   "events_per_s", "lost", "drops", "ns_per_event", "ns_per_run"]]
    markdown = results.table("table_I", shown, floats="{:.3g}")
    results.figure(figure(table), "fig6")
    first = args.rate_list[0]
    programs = results.table("programs", pd.DataFrame(bench.program_costs(runs[first])), floats="{:.3g}")
    rows = bench.summarize(runs[first])
    table_i = bench.table(rows) + "\n\n" + "\n".join(f"- {v}" for v in bench.verdicts(rows))
    results.path("table_I.md").write_text(
        f"# Table I on today's stack (load {first})\n\nMade by `{results.command}`; "
        f"see README.md for the machine and parameters.\n\n{table_i}\n")
    results.write("Overhead: Table I and Fig. 6 on today's stack", f"""
iperf3 over a veth pair between two namespaces (MTU 1500, offloads off), {args.runs} runs of
{args.duration:g} s per configuration and load, interleaved; medians (± half the range).
`transfer_cpu_pct` is the CPU of the transfer and its capture: the iperf3 client's and
server's cgroups (their processes and the kernel work done in their context: on veth the whole
stack, and the capture's BPF programs) plus the capture tool's process (`tool_cpu_pct`), in % of
one core. Unlike the machine's CPU (`cpu_pct`, both cores, 200 % = both busy), it leaves out
other work on the host. "CPU increase" is against the no-capture runs of the same load, "CPU
per Gb/s" divides by the throughput (at `max` the transfer is CPU-bound, so its cost shows as
lost throughput rather than more CPU). The paper's columns: ALS 2001 Table I (Gigabit) and the Fig. 6 increase
computed from PAM 2002 Table I (mean of sender and receiver CPU, against stock Linux).
The machine was shared with other work while this ran: throughput and CPU are noisy
(load averages over 1/5/15 min: {load['start']} at the start, {load['end']} at the end).

![Fig. 6 style](fig6.png)

{markdown}

## Where the kernel time goes

{args.cost_runs} more run(s) per magnet configuration at load {first} with BPF run-time
statistics (`kernel.bpf_stats_enabled`, each program's `run_time_ns`/`run_cnt`, as
`bpftool prog show` reports them): per program (its attach point), runs per second, ns per
run and its share of all the configuration's program time, beside that configuration's
throughput and CPU-seconds per transferred GB in those runs (`cpu_s_per_gb`: transfer and
capture tool). The statistics themselves add ~{bench.STATS_FLOOR_NS} ns to every run (an
empty program measures that), so these runs are slower than the others.

{programs}

At load {first}:

{table_i}
""")


def load_averages() -> str:
    """The machine's 1/5/15-minute load averages (other work sharing it)."""
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def main(argv=None) -> int:
    args = options(argv)
    capture_gate.ready("iperf3", "tcpdump", "ethtool", "ip")
    load = {"start": load_averages()}
    runs = measure(args)
    load["end"] = load_averages()
    table = summary(runs)
    results = common.Results("overhead", args)
    write(results, args, runs, table, load)
    print(f"overhead: results in {results.dir}/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
