"""Study 6, sched: PAM 2002 Figs. 12 and 13, context-switch durations from
the capture's scheduler events, on an idle machine and with one CPU-bound
process.

    magnet experiment sched [--duration 20] [--quick]

The paper: "by context-switch duration we mean the time it takes for the
kernel to decide which process to execute next and to reload the process'
state", i.e. from entering the scheduler to leaving it. magnet-read records
SCHED_ENTER (tracepoint sched_entry_tp, at the start of __schedule),
SCHED_SWITCH and SCHED_LEAVE (sched_exit_tp, when __schedule returns, in the
task now running), with the CPU in `size`. A duration is ENTER -> LEAVE on
one CPU with a SCHED_SWITCH between them (a context switch); ENTER -> LEAVE
without one (the scheduler kept the same task) is counted apart. A task's
first run after fork does not return through __schedule (no LEAVE): those
switches are not measured. Two workloads, one capture each: the machine as
it is ("idle"), and the same with one process spinning in a loop. A short
extra capture with BPF statistics measures what the probes themselves add.
Needs root and BPF.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from magnet import capture
from magnetlib.format import Event
from magnetlib.trace import Trace

from . import bench_capture as bench
from . import capture_gate, common


WORKLOADS = ("idle", "CPU-bound")
SPIN = "while True: pass"
PAPER = ("PAM 2002 (dual 400 MHz Pentium II, Linux 2.4): idle, CPU #0 ~2 us (fast path) with "
         "excursions to ~4 us, CPU #1 ~4-6 us (run-queue lock contention); with one CPU-bound "
         "process both CPUs oscillate between 2 and 6 us with a period of ~2 s, 180 degrees out "
         "of phase, as the process migrates between the CPUs.")
SWITCH_PROGRAMS = ("magnet_sched_enter", "magnet_sched_switch", "magnet_sched_leave")


def options(argv):
    p = common.parser("sched", __doc__)
    p.add_argument("--duration", type=float, default=20.0, help="seconds per workload (default 20)")
    p.add_argument("--workdir", default="/dev/shm", help="where traces go (a tmpfs; deleted after)")
    p.add_argument("--prefix", default="mgxk", help="name prefix of temporary files (default mgxk)")
    args = common.parse(p, argv)
    common.quick(p, args, duration=5.0)
    return args


# --------------------------------------------------------------- analysis ---
def switch_durations(trace: Trace) -> pd.DataFrame:
    """Every scheduler pass of the trace: cpu, t_s (from the first record),
    duration_us (ENTER -> LEAVE on that CPU), switched (a SCHED_SWITCH between),
    next_pid (the task that ran next, for switches)."""
    pos = trace.select([Event.SCHED_ENTER, Event.SCHED_SWITCH, Event.SCHED_LEAVE])
    ev = trace.column_at("event", pos).astype(np.int64)
    cpu = trace.column_at("size", pos).astype(np.int64)
    sockid = trace.column_at("sockid", pos)
    ns = trace.ns_at(pos).astype(np.int64)
    order = np.lexsort((ns, cpu))                 # per CPU, in time order
    ev, cpu, sockid, ns = ev[order], cpu[order], sockid[order], ns[order]
    enter, switch, leave = int(Event.SCHED_ENTER), int(Event.SCHED_SWITCH), int(Event.SCHED_LEAVE)
    n = len(ev)
    i = np.flatnonzero(ev[:max(n - 1, 0)] == enter)
    same = i[(ev[i + 1] == leave) & (cpu[i + 1] == cpu[i])]
    j = i[i < n - 2]
    via = j[(ev[j + 1] == switch) & (ev[j + 2] == leave) & (cpu[j + 2] == cpu[j])]
    starts = np.concatenate([same, via])
    ends = np.concatenate([same + 1, via + 2])
    t0 = ns.min() if n else 0
    frame = pd.DataFrame({
        "cpu": cpu[starts], "t_s": (ns[starts] - t0) / 1e9,
        "duration_us": (ns[ends] - ns[starts]) / 1e3,
        "switched": np.r_[np.zeros(len(same), bool), np.ones(len(via), bool)],
        "next_pid": np.r_[np.zeros(len(same), np.int64), (sockid[via + 1] & 0xFFFFFFFF).astype(np.int64)],
    })
    return frame.sort_values("t_s", kind="stable").reset_index(drop=True)


def where_it_ran(trace: Trace, pid: int, t0_ns: int, bin_s: float) -> pd.DataFrame:
    """Per time bin, the share of the spinner's switch-ins that went to each CPU,
    and its migrations (switched in on another CPU than the time before)."""
    pos = trace.select(Event.SCHED_SWITCH)
    sockid = trace.column_at("sockid", pos)
    mine = (sockid & 0xFFFFFFFF) == pid
    cpu = trace.column_at("size", pos)[mine].astype(np.int64)
    t = (trace.ns_at(pos[mine]) - t0_ns) / 1e9
    return pd.DataFrame({"t_s": t, "cpu": cpu, "bin": np.floor(t / bin_s) * bin_s,
                         "migrated": np.r_[False, cpu[1:] != cpu[:-1]]})


# -------------------------------------------------------------------- run ---
def record(workdir: Path, binary: Path, name: str, duration: float, stats: Path | None = None) -> Path:
    """A capture of scheduler events for `duration` seconds."""
    trace = workdir / f"{name}.magnet"
    settings = capture.Settings(events="sched", status_dir=str(workdir / "status"),
                                stats=str(stats) if stats else None)
    cap = capture.Capture(trace, settings=settings, binary=binary).start()
    try:
        time.sleep(duration)
    finally:                                     # also on Ctrl-C: magnet-read has its own session
        status = cap.stop()
    if status != 0:
        raise RuntimeError(f"magnet-read failed: {cap.error()}")
    return trace


def run_workload(workdir: Path, binary: Path, workload: str, duration: float):
    """(durations, spinner placement, scan, machine CPU %) of one workload."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN]) if workload == "CPU-bound" else None
    try:
        time.sleep(0.5 if spinner else 0)          # the spinner is running
        busy0, total0 = bench.cpu_busy()
        path = record(workdir, binary, workload.replace(" ", "_"), duration)
        busy1, total1 = bench.cpu_busy()
    finally:
        if spinner:
            spinner.kill()
            spinner.wait()
    with Trace(path) as trace:
        durations = switch_durations(trace)
        scan = trace.scan
        placement = None
        if spinner:
            t0 = int(trace.ns[trace.header_len:].min())
            placement = where_it_ran(trace, spinner.pid, t0, 0.1)
    path.unlink()
    cpu_pct = 100.0 * (busy1 - busy0) / max(total1 - total0, 1) * os.cpu_count()
    return durations, placement, scan, cpu_pct


def probe_cost(workdir: Path, binary: Path, duration: float) -> dict[str, float]:
    """ns per run of each scheduler program (BPF statistics, which add ~52 ns themselves)."""
    stats = workdir / "stats.json"
    record(workdir, binary, "cost", duration, stats).unlink()
    programs = json.loads(stats.read_text())["programs"]
    return {name: p["run_time_ns"] / max(p["run_cnt"], 1) for name, p in programs.items()
            if name in SWITCH_PROGRAMS}


def measure(args, binary: Path):
    out = {}
    with tempfile.TemporaryDirectory(prefix=f"{args.prefix}-sched-", dir=args.workdir) as work:
        bar = common.progress(desc="sched", total=len(WORKLOADS) + 1, unit="capture")
        try:
            for workload in WORKLOADS:
                bar.set_postfix_str(f"{workload}, {args.duration:g} s")
                out[workload] = run_workload(Path(work), binary, workload, args.duration)
                bar.update(1)
            bar.set_postfix_str("probe cost")
            cost = probe_cost(Path(work), binary, min(args.duration, 3.0))
            bar.update(1)
        except capture.CaptureError as e:
            capture_gate.refused(e)
        finally:
            bar.close()
    return out, cost


# ---------------------------------------------------------------- results ---
def median_stay(placement: pd.DataFrame | None) -> float:
    """Median time the spinner stayed on one CPU between migrations (the paper saw ~2 s)."""
    if placement is None or not placement.migrated.any():
        return float("nan")
    moves = placement.t_s[placement.migrated].to_numpy()
    return float(np.median(np.diff(np.r_[placement.t_s.iloc[0], moves, placement.t_s.iloc[-1]])))


def table(out: dict) -> pd.DataFrame:
    rows = []
    for workload, (d, placement, scan, cpu_pct) in out.items():
        span = max(d.t_s.max(), 1e-9) if len(d) else 1.0
        for cpu, g in d.groupby("cpu"):
            sw = g[g.switched].duration_us
            rows.append({
                "workload": workload, "cpu": f"CPU #{cpu}", "machine_cpu_pct": cpu_pct,
                "switches_per_s": len(sw) / span, "switches": len(sw),
                "mean_us": sw.mean(), "median_us": sw.median(), "p10_us": sw.quantile(0.1),
                "p90_us": sw.quantile(0.9), "p99_us": sw.quantile(0.99), "max_us": sw.max(),
                "kept_same_task": int((~g.switched).sum()),
                "kept_median_us": g[~g.switched].duration_us.median(),
                "spinner_migrations": int(placement.migrated.sum()) if placement is not None else 0,
                "spinner_median_stay_s": median_stay(placement),
                "lost": scan.lost,
            })
    return pd.DataFrame(rows)


def series(out: dict) -> pd.DataFrame:
    """Per workload, CPU and 100 ms: context switches and their durations (the figures' lines)."""
    frames = []
    for workload, (d, *_rest) in out.items():
        sw = d[d.switched]
        g = sw.groupby(["cpu", np.floor(sw.t_s * 10) / 10]).duration_us
        f = g.agg(["count", "median", "mean", "max"]).reset_index()
        f.insert(0, "workload", workload)
        frames.append(f.rename(columns={"t_s": "t_s", "count": "switches", "median": "median_us",
                                        "mean": "mean_us", "max": "max_us"}))
    return pd.concat(frames, ignore_index=True)


def time_series_figure(d: pd.DataFrame, placement, title: str):
    """Figs. 12/13: every context switch's duration against time, per CPU, with a
    100 ms median; with the spinner, where it ran."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cpus = sorted(d.cpu.unique())
    rows = len(cpus) + (placement is not None)
    fig, axes = plt.subplots(rows, 1, figsize=(12, 2.6 * rows), sharex=True, squeeze=False)
    sw = d[d.switched]
    for ax, cpu in zip(axes[:, 0], cpus):
        g = sw[sw.cpu == cpu]
        ax.scatter(g.t_s, g.duration_us, s=1, alpha=0.25, label="each switch")
        binned = g.groupby(np.floor(g.t_s * 10) / 10).duration_us.median()
        ax.plot(binned.index, binned.to_numpy(), color="C3", linewidth=1, label="median per 100 ms")
        ax.set_yscale("log")
        ax.set_ylabel(f"CPU #{cpu}: us (log)")
    axes[0, 0].legend(fontsize=8, loc="upper right")
    if placement is not None:
        ax = axes[-1, 0]
        ax.scatter(placement.t_s, placement.cpu, s=2, color="C2")
        ax.set_yticks(cpus, [f"CPU #{c}" for c in cpus])
        ax.set_ylabel("spinner ran on")
    axes[-1, 0].set_xlabel("time since the start of the capture (s)")
    fig.suptitle(title)
    return fig


def distribution_figure(out: dict):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for workload, (d, *_rest) in out.items():
        for cpu, g in d[d.switched].groupby("cpu"):
            x = np.sort(g.duration_us.to_numpy())
            ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=f"{workload}, CPU #{cpu}",
                    linestyle="-" if workload == "idle" else "--")
    ax.set_xscale("log")
    ax.set_xlabel("context-switch duration (us): scheduler entry to exit")
    ax.set_ylabel("fraction of switches")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Distribution of context-switch durations")
    return fig


def write(results: common.Results, args, out: dict, cost: dict) -> pd.DataFrame:
    summary = table(out)
    markdown = results.table("table", summary)
    results.table("series", series(out))
    for workload, (d, placement, *_rest) in out.items():
        stem = "fig12_idle" if workload == "idle" else "fig13_cpu_bound"
        results.figure(time_series_figure(d, placement, f"Context-switch durations, {workload} machine"), stem)
    results.figure(distribution_figure(out), "distribution")
    probes = ", ".join(f"`{k}` {v:.0f} ns" for k, v in cost.items())
    results.write("Sched: context-switch durations (Figs. 12 and 13)", f"""
Two captures of {args.duration:g} s of scheduler events (`magnet-read --events sched`, every
task of the machine): as it is ("idle") and with one process spinning (`python -c '{SPIN}'`).
A context switch's duration is SCHED_ENTER -> SCHED_LEAVE on one CPU with a SCHED_SWITCH
between them; scheduler passes that kept the same task are counted apart (`kept_same_task`).
Machine CPU is both cores' use during the capture (200 % = both busy). The machine was shared
with other work (network benchmarks of other sessions) while this ran: "idle" is not idle,
and the durations include that load.

Paper: {PAPER}

Probe effect: every measured switch includes the scheduler probes' own run time after the
ENTER timestamp and before the LEAVE one. Their cost per run, from BPF statistics (which add
~{bench.STATS_FLOOR_NS} ns per run themselves): {probes or 'not measured'}.

![idle](fig12_idle.png)

![CPU-bound](fig13_cpu_bound.png)

![distribution](distribution.png)

{markdown}
""")
    return summary


def main(argv=None) -> int:
    args = options(argv)
    binary = capture_gate.ready()
    out, cost = measure(args, binary)
    results = common.Results("sched", args)
    write(results, args, out, cost)
    print(f"sched: results in {results.dir}/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
