"""Study: does the simulator agree with the kernel?  Every setting and workload of the
modulation map (experiments/modmap.py) as a chain of stacks in ns-3 (with Linux's TCP
profile, or --tcp-model ns3) and in Linux's TCP over linkem, compared stack by stack; and
the cross traffic both engines put on the bottleneck, compared on its own.

    magnet experiment agreement [--quick] [--out DIR] [--runs N] [--settings base,...]
                                [--workloads paper,...] [--stacks 4] [--tcp-model linux|ns3]
                                [--skip-map] [--skip-cross] [--cross-duration 30]
                                [--update PREVIOUS_OUT] [--host-lags ACK,REPLY,WAKEUP|constants]
    magnet experiment agreement --suite FIDELITY_WORK [--suite FIDELITY_WORK ...] [--out DIR]

The map: each (setting, workload) runs --runs times in each engine, interleaved (run r of
both engines with seed --seed + r), and for every stack k >= 1 the study reports the
difference of ns-3's median from Linux's median in mean data-segment size, mean gap,
throughput and the sender's measured RTT (and both engines' retransmitted bytes), beside
Linux's own run-to-run spread ((max - min) / median over its runs).  A cell agrees when
all four differences are within 10 %.  --update PREVIOUS_OUT re-runs only --settings x
--workloads and takes every other cell's runs from PREVIOUS_OUT/runs.csv (a previous map with
the same --runs), so that the whole map is scored again after a change that moves a few cells.
vsftpd's demand is captured live once per study and replayed by both engines in every
setting and run: the study keeps it, for each (setting, run) it replayed in, as
vsftpd-demand-SETTING-runR.csv (times and sizes, the demand format), so that
experiments/agreement_ns3.py replays what Linux replayed.

ns-3's Linux profile gets this host's lags (its ACK lag, reply lag and reader wake-up),
measured at the study's start (experiments/reader_wakeup.py for_study: 3 runs of 12 s over
linkem, about 50 s) unless --host-lags gives them; --quick, and a host where they cannot
be measured, give experiments/common.py's constants.  The study records them in host-lags.json, and
experiments/agreement_ns3.py's re-runs against its Linux runs take them from there.

The cross traffic (pareto:50%, the same held over every 10 s, poisson:30%, tcp:4 on the
base path, --cross-duration seconds, a probe of 100 B a second as the replay): its share of
the bottleneck (IP bytes
per second after it, against the rate), its burst structure after the bottleneck (bursts
split at gaps of 20 ms, for Pareto at half its shortest off period: their lengths, packets,
the silences between them), and the
bottleneck queue (drops per packet, the queue each packet found: p50, p90, p99, peak),
from ns-3's link log and from linkem's counters (and its link log, where linkem writes
one).  Both engines play the same UDP datagrams (cross.UdpSchedule): the schedule's own
share is reported beside what each engine delivered, and its share over DRAWS seeds.

The suite's applications (--suite, experiments/agreement_suite.py): runs nothing; reads
the runs a fidelity study kept in its --work directory (each application's whole demand
replayed across each target path by both engines) and compares ns-3 with Linux per
application and path, into OUT/suite/.  --suite again adds another study's runs: each
cell is then the medians of its runs, with each engine's own spread beside.

Results in --out (default ./magnet-results/agreement): runs.csv (every stack of every
run), cells.csv (one row per setting, workload and stack), vsftpd-demand-*.csv, cross.csv,
heatmap.png, cross.png, host-lags.json (the lags ns-3 ran with) and README.md (the targets,
each remaining difference and its mechanism).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from magnet.replay import engines, linklog
from magnet.replay.errors import ReplayError
from magnet.replay.scenario import Scenario, cross as cross_spec, stack_seed
from magnetlib import knobs
from magnetlib.demand import Demand, write_demand
from magnetlib.errors import MagnetError, TraceError

from . import common, modmap

METRICS = {"mean_size": "size", "mean_gap_s": "gap", "throughput_bps": "throughput",
           "rtt_measured_ms": "RTT"}
TARGET_PCT, CEILING_PCT, STACK1_PCT = 10.0, 25.0, 3.0
CROSS_TARGET_PCT = 5.0               # the cross traffic's share against its setting
DRAWS = 200                          # a UDP source's schedules drawn to show its share's spread
CROSS_KINDS = ("pareto:50%", "pareto:50%/held=10s", "poisson:30%", "tcp:4")
BURST_GAP_NS = 20_000_000            # a gap this long between Poisson datagrams ends a burst
PROBE = (100, 1_000_000_000)         # the cross study's replay: 100 B a second
IP_UDP = 28
IP_TCP_TS = 52                       # IPv4 + TCP with timestamps, per segment


# ------------------------------------------------------------------ options ---
def options(argv):
    p = common.parser("agreement", __doc__)
    p.add_argument("--runs", type=knobs.arg(knobs.positive_count),
                   help="runs of every cell in each engine (default 3; --quick 1)")
    p.add_argument("--settings", help="the map's settings (default all; --quick: %s)"
                   % ",".join(modmap.QUICK_SETTINGS).replace("%", "%%"))
    p.add_argument("--workloads", default=",".join(modmap.WORKLOADS),
                   help="paper, variable, vsftpd (default all)")
    p.add_argument("--stacks", type=knobs.arg(knobs.positive_count), default=4, help="stacks (default 4)")
    p.add_argument("--duration", type=float, help="seconds of each synthetic demand (default 15; --quick 5)")
    p.add_argument("--file-size", type=knobs.arg(knobs.positive_size), default="4MB",
                   help="the file vsftpd sends (default 4MB)")
    p.add_argument("--cross-duration", type=float,
                   help="seconds of the cross-traffic study per kind (default 30; --quick 10)")
    p.add_argument("--skip-map", action="store_true", help="only the cross-traffic study")
    p.add_argument("--skip-cross", action="store_true", help="only the map")
    p.add_argument("--work", type=Path, help="keep every run's files here (default: a temporary directory)")
    p.add_argument("--update", type=Path, metavar="PREVIOUS_OUT",
                   help="re-run only --settings x --workloads; every other cell's runs from "
                        "PREVIOUS_OUT/runs.csv (and vsftpd's kept demands from PREVIOUS_OUT)")
    p.add_argument("--suite", type=Path, metavar="FIDELITY_WORK", action="append",
                   help="only the suite's applications, from the runs a fidelity study kept in its --work "
                        "directory (runs nothing; results in OUT/suite); again for more studies: each "
                        "cell's medians over them")
    common.add_tcp_model(p)
    common.add_host_lags(p)
    args = common.parse(p, argv)
    args.lags = None                     # the host's lags ns-3 runs with (main: before any run)
    names = [s.name for s in modmap.SETTINGS]
    args.settings = common.choices(p, "--settings", args.settings
                                  or ",".join(modmap.QUICK_SETTINGS if args.quick else names), names)
    args.workloads = common.choices(p, "--workloads", args.workloads, modmap.WORKLOADS)
    args.runs = args.runs or (1 if args.quick else 3)
    args.duration = args.duration or (5.0 if args.quick else 15.0)
    args.cross_duration = args.cross_duration or (10.0 if args.quick else 30.0)
    args.engines = list(engines.ENGINES)
    return args


# ---------------------------------------------------------------------- map ---
def plan(args) -> list[tuple[int, modmap.Setting, str, str]]:
    """(run, setting, workload, engine): runs outermost, the engines side by side."""
    chosen = [s for s in modmap.SETTINGS if s.name in args.settings]
    return [(run, s, w, e) for run in range(args.runs) for s in chosen for w in args.workloads
            if w == "paper" or s.name in modmap.SUBSET or args.quick for e in engines.ENGINES]


def run_map(args, work: Path, live: Demand | None) -> tuple[pd.DataFrame | None, list[str]]:
    frames, failed = [], []
    todo = [r for r in plan(args) if not (r[2] == "vsftpd" and live is None)]
    for run, setting, workload, engine in common.progress(todo, "agreement"):
        seed = args.seed + run
        name = f"{engine} {setting.name} {workload} run {run + 1}"
        where = work / f"{engine}-{setting.name.replace('/', '_')}-{workload}-{run + 1}"
        try:
            demand = modmap.demand_of(workload, args.duration, seed, live)
            outcome = engines.run(engine, demand, modmap.scenario_of(setting, args.stacks, seed), where,
                                  **common.engine_options(engine, args.tcp_model, args.lags))
        except (MagnetError, OSError, ValueError) as e:
            failed.append(f"{name}: {e}")
            common.progress_note(f"agreement: {name} failed: {e}")
            continue
        frames.append(modmap.rows_of(outcome, {"engine": engine, "workload": workload, "setting": setting.name,
                                               "factor": setting.factor, "run": run + 1, "seed": seed,
                                               "duration_s": args.duration}))
        if not args.work:
            shutil.rmtree(where, ignore_errors=True)
    return (pd.concat(frames, ignore_index=True) if frames else None), failed


def previous_runs(args) -> pd.DataFrame:
    """--update's runs.csv, refused unless it holds the same number of runs of each cell."""
    path = args.update / "runs.csv"
    try:
        previous = pd.read_csv(path)
    except (OSError, ValueError) as e:
        common.gate(False, f"--update: {path}: {e}")
    runs = sorted(previous["run"].unique()) if "run" in previous else []
    common.gate(runs == list(range(1, args.runs + 1)),
                f"--update: {path}: runs {runs}, not 1-{args.runs} as --runs {args.runs}")
    return previous


def updated(previous: pd.DataFrame, settings: list[str], runs: pd.DataFrame | None,
            workloads=modmap.WORKLOADS) -> pd.DataFrame:
    """The previous map's runs with the rows of settings x workloads replaced by this run's,
    in plan order."""
    kept = previous[~(previous["setting"].isin(settings) & previous["workload"].isin(list(workloads)))]
    both = pd.concat([kept, runs] if runs is not None else [kept], ignore_index=True)
    order = {s.name: i for i, s in enumerate(modmap.SETTINGS)}
    return both.sort_values(["run", "setting"], key=lambda c: c.map(order) if c.name == "setting" else c,
                            kind="stable").reset_index(drop=True)


def demand_file(setting: str, run: int) -> str:
    """The file a study keeps the vsftpd demand of one (setting, run) in, beside runs.csv."""
    return f"vsftpd-demand-{setting.replace('/', '_')}-run{int(run)}.csv"


def kept_demands(args, runs: pd.DataFrame | None, fresh: pd.DataFrame | None,
                 live: Demand | None) -> dict[str, Demand | Path]:
    """vsftpd's demand for every (setting, run) of the map: this study's capture where it ran
    the cell, the previous study's kept file where --update kept the cell's rows (none for a
    study made before demands were kept)."""
    def pairs(frame):
        if frame is None or "workload" not in frame:
            return set()
        part = frame[frame["workload"] == "vsftpd"]
        return set(zip(part["setting"], part["run"]))
    mine = pairs(fresh) if live is not None else set()
    out: dict[str, Demand | Path] = {}
    for setting, run in sorted(pairs(runs)):
        name = demand_file(setting, run)
        if (setting, run) in mine:
            out[name] = live
        elif args.update and (args.update / name).is_file():
            out[name] = args.update / name
    return out


def cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, workload, stack >= 1): each engine's median and min-max over its
    runs, ns-3's difference from Linux's median in %, Linux's spread in %."""
    keys = ["setting", "workload", "stack"]
    runs = runs[runs["stack"] >= 1]
    stats = runs.groupby(["engine", *keys], sort=False)[[*METRICS, "retrans_bytes"]].agg(
        ["median", "min", "max"])
    stats.columns = [f"{m}_{s}" for m, s in stats.columns]
    if not {"ns-3", "tcp"} <= set(stats.index.get_level_values(0)):
        return pd.DataFrame()
    ns3, tcp = stats.xs("ns-3"), stats.xs("tcp")
    one_run = bool(runs[runs["engine"] == "tcp"]["run"].nunique() < 2)
    both = ns3.add_suffix("_ns3").join(tcp.add_suffix("_tcp"), how="inner")
    out = pd.DataFrame(index=both.index)
    for m, short in METRICS.items():
        out[f"{short}_ns3"] = both[f"{m}_median_ns3"]
        out[f"{short}_tcp"] = both[f"{m}_median_tcp"]
        out[f"{short}_diff_pct"] = 100 * (both[f"{m}_median_ns3"] / both[f"{m}_median_tcp"] - 1)
        spread = 100 * (both[f"{m}_max_tcp"] - both[f"{m}_min_tcp"]) / both[f"{m}_median_tcp"]
        out[f"{short}_tcp_spread_pct"] = np.nan if one_run else spread   # one run: unmeasured
    out["retrans_ns3"] = both["retrans_bytes_median_ns3"]
    out["retrans_tcp"] = both["retrans_bytes_median_tcp"]
    diffs = out[[f"{s}_diff_pct" for s in METRICS.values()]].abs()
    out["worst_pct"] = diffs.max(axis=1)
    out["worst"] = diffs.idxmax(axis=1).str.removesuffix("_diff_pct")
    out["agrees"] = out["worst_pct"] <= TARGET_PCT
    out = out.reset_index()
    order = {s.name: i for i, s in enumerate(modmap.SETTINGS)}
    return out.sort_values(["workload", "setting", "stack"], key=lambda c: c.map(order) if c.name == "setting"
                           else c).reset_index(drop=True)


def targets(table: pd.DataFrame) -> dict:
    """The issue's targets, as measured: agreeing cells, the worst cell, stack 1 of the paper."""
    if table.empty:
        return {}
    one = table[(table["workload"] == "paper") & (table["setting"] == "base") & (table["stack"] == 1)]
    worst = table.loc[table["worst_pct"].idxmax()]
    return {"cells": len(table), "agree": int(table["agrees"].sum()),
            "agree_pct": 100 * table["agrees"].mean(), "over_ceiling": int((table["worst_pct"] > CEILING_PCT).sum()),
            "worst": f"{worst.setting} {worst.workload} stack {worst.stack}: {worst.worst} {worst.worst_pct:.1f} %",
            "stack1_size_pct": float(one["size_diff_pct"].iloc[0]) if len(one) else np.nan,
            "stack1_gap_pct": float(one["gap_diff_pct"].iloc[0]) if len(one) else np.nan}


def heatmap(table: pd.DataFrame):
    """ns-3 vs Linux per cell: rows (setting, workload), columns metric x stack; colour the
    difference, the number in each cell the difference."""
    rows = list(dict.fromkeys(zip(table["setting"], table["workload"])))
    stacks = sorted(table["stack"].unique())
    cols = [(short, k) for short in METRICS.values() for k in stacks]
    grid = np.full((len(rows), len(cols)), np.nan)
    index = table.set_index(["setting", "workload", "stack"])
    for i, (s, w) in enumerate(rows):
        for j, (short, k) in enumerate(cols):
            if (s, w, k) in index.index:
                grid[i, j] = index.loc[(s, w, k), f"{short}_diff_pct"]
    return draw_grid(grid, [f"{s} · {w}" for s, w in rows], [f"{short}\n{k}" for short, k in cols],
                     "ns-3 vs Linux per cell (metric, stack); bold: beyond 10 %",
                     separators=range(len(stacks), len(cols), len(stacks)))


def draw_grid(grid: np.ndarray, rows: list[str], cols: list[str], title: str, separators=(),
              row_notes: dict | None = None):
    """A heat map of differences in % (clipped at the ceiling), each cell's number in it, bold
    beyond the target; a row in row_notes is greyed and says why it has no numbers."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(0.55 * len(cols) + 3.5, 0.36 * len(rows) + 2.0))
    image = ax.imshow(np.clip(grid, -CEILING_PCT, CEILING_PCT), cmap="RdBu_r", vmin=-CEILING_PCT,
                      vmax=CEILING_PCT, aspect="auto")
    for i in range(len(rows)):
        if row_notes and i in row_notes:
            ax.axhspan(i - 0.5, i + 0.5, color="0.8")
            ax.text((len(cols) - 1) / 2, i, row_notes[i], ha="center", va="center", fontsize=6.5, style="italic")
            continue
        for j in range(len(cols)):
            if np.isfinite(grid[i, j]):
                bold = abs(grid[i, j]) > TARGET_PCT
                ax.text(j, i, f"{grid[i, j]:+.0f}", ha="center", va="center", fontsize=6.5,
                        fontweight="bold" if bold else "normal")
    ax.set_xticks(range(len(cols)), cols, fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    for j in separators:
        ax.axvline(j - 0.5, color="k", lw=0.8)
    fig.colorbar(image, ax=ax, label="ns-3 vs Linux, %", shrink=0.6)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------ cross traffic ---
def cross_scenario(kind: str, seed: int) -> Scenario:
    return Scenario(stacks=1, path=(modmap.BASE_PATH,), cross=(cross_spec(kind),), seed=seed)


def probe_demand(seconds: float) -> Demand:
    size, gap = PROBE
    n = max(2, int(seconds * 1e9 // gap) + 1)       # the last write at `seconds`
    return Demand.from_arrays(np.arange(n, dtype=np.int64) * gap, np.full(n, size))


def burst_gap_ns(kind: str) -> int:
    """The silence that ends a burst: for Pareto on/off, half its shortest off period (the
    Pareto scale), so that neither a stall of the sender or the emulator nor a real off
    period is mistaken for the other; BURST_GAP_NS for Poisson."""
    from magnet.replay import cross
    spec = cross_spec(kind)
    if spec.kind != "pareto":
        return BURST_GAP_NS
    return int(spec.off_ns * (cross.PARETO_SHAPE - 1) / cross.PARETO_SHAPE / 2)


def bursts(times_ns: np.ndarray, gap_ns: int = BURST_GAP_NS) -> dict:
    """The burst structure of a series of datagram arrivals: bursts split at gaps over gap_ns."""
    if len(times_ns) < 2:
        return {"bursts": 0}
    times = np.sort(times_ns)
    cut = np.flatnonzero(np.diff(times) > gap_ns)
    starts, ends = np.r_[0, cut + 1], np.r_[cut, len(times) - 1]
    length, packets = (times[ends] - times[starts]) / 1e6, ends - starts + 1
    silence = (times[starts[1:]] - times[ends[:-1]]) / 1e6
    q = lambda a, p: float(np.percentile(a, p)) if len(a) else np.nan
    return {"bursts": len(starts), "on_ms_p50": q(length, 50), "on_ms_p90": q(length, 90),
            "packets_p50": q(packets, 50), "packets_p90": q(packets, 90),
            "off_ms_p50": q(silence, 50), "off_ms_p90": q(silence, 90)}


def queue_stats(records) -> dict:
    """Drops and the queue packets found, from a link log (replay/linklog.py's RECORD)."""
    if records is None or len(records) == 0:
        return {}
    found = records["queue_packets"]
    return {"packets": len(records), "drop_pct": 100 * float((records["reason"] == 1).mean()),
            "queue_p50": float(np.percentile(found, 50)), "queue_p90": float(np.percentile(found, 90)),
            "queue_p99": float(np.percentile(found, 99)), "queue_peak": int(found.max())}


def ns3_cross(kind: str, args, where: Path) -> dict:
    """The cross traffic of `kind` in ns-3, with a 100 B/s probe as the replay."""
    scenario = cross_scenario(kind, args.seed)
    engines.run("ns-3", probe_demand(args.cross_duration), scenario, where,
                **common.engine_options("ns-3", args.tcp_model, args.lags), link_log=True)
    stack = json.loads((where / "summary.json").read_text())["stacks"][0]
    log = linklog.read_file(where / "stack-1.linklog")
    spec = scenario.cross[0]
    seconds = stack["cross_ns"] / 1e9
    out = {"engine": "ns-3", "kind": kind, "seconds": seconds, **queue_stats(log)}
    if spec.kind == "tcp":
        out["share_pct"] = 100 * stack["cross_bytes"] * (1448 + IP_TCP_TS) / 1448 * 8 / seconds / BASE_RATE
        return out
    ip = spec.packet_bytes + IP_UDP
    after = log["departure_ns"][(log["bytes"] == ip) & (log["departure_ns"] >= 0)]
    out["share_pct"] = 100 * len(after) * ip * 8 / seconds / BASE_RATE
    return {**out, **bursts(after, burst_gap_ns(kind))}


BASE_RATE = modmap.BASE_PATH.rate_bps


def real_cross(kind: str, args, where: Path) -> dict:
    """The cross traffic of `kind` over linkem: the sender and a recording sink in their
    namespaces for the cross lead plus --cross-duration, no replay."""
    from magnet.replay import cross, wan
    scenario = cross_scenario(kind, args.seed)
    spec = scenario.cross[0]
    prefix = f"mgag{os.getpid()}"
    where.mkdir(parents=True, exist_ok=True)
    record = where / "arrivals.npy"
    extra = {"log_dir": where / "linklog"}
    seconds = 1.0 + args.cross_duration
    command = [sys.executable, "-m", "magnet.replay.cross"]
    with wan.chain(prefix, scenario, where, **extra) as net:
        s = net.stack(1)
        sink = _ready(net.popen(s.cross_ns[1], [*command, "sink", f"--addr={s.cross_addr[1]}", f"--record={record}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), "cross sink")
        sender = _ready(net.popen(s.cross_ns[0], [*command, "send", f"--addr={s.cross_addr[0]}",
                                                  f"--to={s.cross_addr[1]}", f"--rate={s.path.rate_bps}",
                                                  f"--seed={stack_seed(scenario.seed, 1)}", "--cc=cubic",
                                                  *cross.spec_args(spec, s.path.rate_bps)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), "cross sender")
        started = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - started          # the sender's run, until told to stop
        sent = _stop(sender, "cross sender")
        got = _stop(sink, "cross sink")
        stats = net.stop(1)
    out = {"engine": "tcp", "kind": kind, "seconds": elapsed, "late_us_p99": sent.get("udp_late_us", {}).get("p99"),
           "sched_fifo": sent.get("udp_sched_fifo")}
    forward = stats["forward"]
    logs = sorted((where / "linklog").glob("**/forward.linklog"))
    out.update(queue_stats(linklog.read_file(logs[0])) if logs else
               {"packets": forward["packets_in"], "drop_pct": 100 * forward["queue_drops"] / max(1, forward["packets_in"]),
                "queue_peak": forward["queue_max_packets"]})
    if spec.kind == "tcp":
        out["share_pct"] = 100 * got["tcp_bytes"] * (1448 + IP_TCP_TS) / 1448 * 8 / elapsed / BASE_RATE
        return out
    arrivals = np.sort(np.load(record))
    ip = spec.packet_bytes + IP_UDP
    window = arrivals[arrivals - arrivals[0] < elapsed * 1e9] if len(arrivals) else arrivals
    out["share_pct"] = 100 * len(window) * ip * 8 / elapsed / BASE_RATE
    return {**out, **bursts(window, burst_gap_ns(kind))}


def _ready(proc, role: str):
    if proc.stdout.readline().split()[:1] != ["ready"]:
        proc.kill()
        raise ReplayError(role, (proc.communicate()[1].strip().splitlines() or ["did not start"])[-1])
    return proc


def _stop(proc, role: str) -> dict:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise ReplayError(role, (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
    return json.loads(lines[-1])


def schedule_share(kind: str, args, seconds: float) -> dict:
    """What the UDP schedule itself holds over the run: the share the engines should deliver."""
    from magnet.replay import cross
    spec = cross_spec(kind)
    if spec.kind == "tcp":
        return {"engine": "schedule", "kind": kind}
    flow = cross.flow_of(spec, BASE_RATE)
    times = cross.UdpSchedule(flow, BASE_RATE, stack_seed(args.seed, 1), 0).until(int(seconds * 1e9))
    return {"engine": "schedule", "kind": kind, "seconds": seconds, "share_pct": _share(spec, times, seconds),
            **bursts(times, burst_gap_ns(kind)), **draws_share(spec, flow, seconds)}


def _share(spec, times: np.ndarray, seconds: float) -> float:
    """A schedule's IP bytes over `seconds`, as a share of the bottleneck, %."""
    return 100 * len(times) * (spec.packet_bytes + IP_UDP) * 8 / seconds / BASE_RATE


def draws_share(spec, flow: dict, seconds: float) -> dict:
    """The source's share over DRAWS seeds' schedules of the run's length: its mean (the
    setting, if the source is right), p10, p90 and how many draws are within 5 % of the
    setting.  One run holds one draw, and a heavy-tailed one can be far from the mean."""
    from magnet.replay import cross
    shares = np.array([_share(spec, cross.UdpSchedule(flow, BASE_RATE, stack_seed(s, 1), 0)
                              .until(int(seconds * 1e9)), seconds) for s in range(1, DRAWS + 1)])
    setting = 100 * spec.share
    return {"draws": DRAWS, "draws_share_mean": shares.mean(), "draws_share_p10": np.percentile(shares, 10),
            "draws_share_p90": np.percentile(shares, 90),
            "draws_within_5pct": 100 * np.mean(np.abs(shares / setting - 1) <= CROSS_TARGET_PCT / 100)}


def run_cross(args, work: Path) -> tuple[pd.DataFrame | None, list[str]]:
    rows, failed = [], []
    for kind in common.progress(CROSS_KINDS, "cross traffic", unit="kind"):
        for engine, fn in (("ns-3", ns3_cross), ("tcp", real_cross)):
            if engine not in args.engines:
                continue
            try:
                rows.append(fn(kind, args, work / f"cross-{engine}-{_file_name(kind)}"))
            except (MagnetError, OSError, ValueError) as e:
                failed.append(f"cross {kind} {engine}: {e}")
                common.progress_note(f"agreement: cross {kind} in {engine} failed: {e}")
        seconds = next((r["seconds"] for r in rows if r["kind"] == kind and r["engine"] == "ns-3"),
                       1 + args.cross_duration)
        rows.append(schedule_share(kind, args, seconds))
    return (pd.DataFrame(rows) if rows else None), failed


def _file_name(kind: str) -> str:
    """pareto:50%/held=10s -> pareto-50-held10s"""
    return kind.replace(":", "-").replace("/", "-").replace("%", "").replace("=", "")


def cross_figure(table: pd.DataFrame):
    """Share, drops and the queue found per engine and kind (the schedule's own share beside)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    kinds = list(dict.fromkeys(table["kind"]))
    x = np.arange(len(kinds))
    for i, engine in enumerate(("schedule", "ns-3", "tcp")):
        part = table[table["engine"] == engine].set_index("kind").reindex(kinds)
        for ax, col in zip(axes, ("share_pct", "drop_pct", "queue_p90")):
            if col in part:
                ax.bar(x + (i - 1) * 0.27, part[col].astype(float), width=0.27, label=engine)
    for ax, title in zip(axes, ("share of the bottleneck, %", "queue drops, % of packets",
                                "queue found, p90 packets")):
        ax.set_xticks(x, kinds, fontsize=7, rotation=15)
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------- mechanisms ---
# What is known to make the engines differ where a cell misses, by setting (measured while
# building the Linux profile; see docs/ns3-replay.md).  A cell within Linux's own spread
# is noise, whatever its setting.
MECHANISMS = {
    "rtt=2ms": "linkem delivers each packet p50 25 us late and reads it p50 17 us after the device sent "
               "it, and each host takes 5-10 us more (tcpdump against linkem's log): about 0.1 ms of a "
               "2 ms round trip; ns-3's path is exactly 2 ms",
    "cc=bbr": "ns-3's TcpBbr is not Linux's bbr (its gains, its probing of the RTT and of the bandwidth "
              "of an application-limited flow)",
    "cross=tcp:4": "four bulk flows on the bottleneck (one way: the map's path is not duplex): a "
                   "transfer's throughput depends on where in their sawtooth it starts, and every run and "
                   "every stack of a chain is a new draw of it, in Linux (its own spread up to 37 % in "
                   "throughput over 3 runs) as in ns-3 (the flows' starts drawn from the seed and stack "
                   "from the real sender's measured lateness, MagnetCrossTraffic::DrawStarts): a single "
                   "run of each engine compares two draws; the medians over runs compare the engines",
    "cross=pareto:50%": "the same datagrams in both engines; Linux's sender leaves some late (udpsched's "
                        "p99 in cross.csv) and the on periods run at the link's rate, so any late datagram "
                        "queues up behind the rest",
    "wan": "2001's TCP (NewReno, no SACK) with 0.5 % random loss and Pareto cross traffic: from stack 2 "
           "each stack replays the previous one's recovered wire, and a loss or a burst met at another "
           "moment compounds (Linux's own spread at stacks 3-4: 70-80 % in throughput over 3 runs)",
}
SPREAD_NOTE = "within Linux's own run-to-run spread"
LOAD_NOTE = ("later stacks replay the earlier stack's wire; on a loaded machine Linux's receiver reads "
             "late now and then, a pushed tail's ACK waits and the next write's tail coalesces with it")


def mechanism(row) -> str:
    spread = row[f"{row.worst}_tcp_spread_pct"]
    if np.isfinite(spread) and abs(row.worst_pct) <= spread:
        return SPREAD_NOTE
    # The late reader's pushed tails concern application-limited writes, not a bulk transfer.
    late_reader = row.stack > 1 and row.workload != "vsftpd"
    return MECHANISMS.get(row.setting, LOAD_NOTE if late_reader else "not yet explained")


def misses(table: pd.DataFrame) -> pd.DataFrame:
    """The cells beyond the target: where, by how much, Linux's spread, and why."""
    bad = table[~table["agrees"]].copy()
    rows = []
    for r in bad.itertuples():
        spread = getattr(r, f"{r.worst}_tcp_spread_pct")
        rows.append({"setting": r.setting, "workload": r.workload, "stack": r.stack, "metric": r.worst,
                     "ns-3 vs Linux %": f"{r.worst_pct:+.1f}" if getattr(r, f"{r.worst}_diff_pct") >= 0
                     else f"{-r.worst_pct:+.1f}",
                     "Linux spread %": f"{spread:.1f}" if np.isfinite(spread) else "–",
                     "mechanism": mechanism(pd.Series(r._asdict()))})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------- results ---
def write_results(args, runs: pd.DataFrame | None, cross: pd.DataFrame | None, skipped: dict,
                  failed: list[str], load: list[float], minutes: float,
                  demands: dict[str, Demand | Path] | None = None) -> Path:
    results = common.Results("agreement", args)
    body = [intro(args, skipped, failed, load, minutes)]
    for name, source in (demands or {}).items():
        if isinstance(source, Path):
            shutil.copyfile(source, results.path(name))
        else:
            write_demand(source, results.path(name))
    if demands:
        body.append(f"vsftpd's captured demand, as both engines replayed it, is kept for each of its "
                    f"{len(demands)} (setting, run) as vsftpd-demand-SETTING-runR.csv.\n")
    if args.lags is not None:
        args.lags.write(results.path(common.LAGS_FILE))
    if runs is not None:
        runs.to_csv(results.path("runs.csv"), index=False)
        table = cells(runs)
        table.to_csv(results.path("cells.csv"), index=False)
        if not table.empty:
            body += [map_section(table), ""]
            results.figure(heatmap(table), "heatmap")
            body.append("![heatmap](heatmap.png)\n")
    if cross is not None:
        cross.to_csv(results.path("cross.csv"), index=False)
        body += [cross_section(cross), ""]
        results.figure(cross_figure(cross), "cross")
        body.append("![cross traffic](cross.png)\n")
    path = results.write("Does the simulator agree with the kernel?", "\n".join(body))
    print(f"agreement: results in {path.parent} (README.md, cells.csv, cross.csv, figures)")
    return path


def intro(args, skipped: dict, failed: list[str], load: list[float], minutes: float) -> str:
    lines = [
        f"ns-3 {'with the Linux profile (`--tcp-model linux`)' if args.tcp_model == 'linux' else 'with its own TCP (`--tcp-model ns3`)'} "
        f"against Linux's TCP over linkem, {args.runs} run(s) of each cell in each engine, interleaved, "
        f"chains of {args.stacks} stacks offline, {args.duration:g} s of each synthetic demand. "
        f"{common.wakeup_note(args.tcp_model, args.lags)}{previous_lags(args)}"
        "A cell is a (setting, workload, stack); its difference is ns-3's median over Linux's, in %; "
        "Linux's spread is (max - min) / median over its runs"
        f"{' (unmeasured with one run: –)' if args.runs < 2 else ''}. The study took "
        f"{minutes:.0f} minutes; the load average (1 min) read {min(load):.1f}-{max(load):.1f} during it "
        "(a 2-core machine shared with other work).",
    ]
    lines += [""] + [f"**Skipped:** {what}: {why}." for what, why in skipped.items()] if skipped else []
    lines += [""] + [f"**Failed:** {f}" for f in failed] if failed else []
    return "\n".join(lines) + "\n"


def previous_lags(args) -> str:
    """With --update: the lags the cells kept from PREVIOUS_OUT ran ns-3 with."""
    if not args.update or args.tcp_model != "linux" or args.skip_map:
        return ""
    try:
        lags = common.HostLags.recorded(args.update)
    except common.StudyError as e:
        return f"The cells kept from `{args.update}` ran ns-3 with lags it did not record readably ({e}). "
    return (f"The cells kept from `{args.update}` ran ns-3 with an ACK lag of {lags.ack_lag_ns / 1000:g} us, "
            f"a reply lag of {lags.reply_lag_ns / 1000:g} us and a reader wake-up of "
            f"{lags.reader_wakeup_ns / 1000:g} us: {lags.provenance()}. ")


def map_section(table: pd.DataFrame) -> str:
    t = targets(table)
    stack1 = ("" if np.isnan(t["stack1_size_pct"]) else
              f" Stack 1 of the paper's application (base): size {t['stack1_size_pct']:+.2f} %, gap "
              f"{t['stack1_gap_pct']:+.2f} % (target: within {STACK1_PCT:g} %).")
    out = ["## The map, cell by cell", "",
           f"**{t['agree']} of {t['cells']} cells ({t['agree_pct']:.0f} %) agree within {TARGET_PCT:g} %** on "
           f"mean size, mean gap, throughput and RTT (target: 90 %); {t['over_ceiling']} cell(s) beyond "
           f"{CEILING_PCT:g} % (target: none); the worst: {t['worst']}.{stack1}", ""]
    miss = misses(table)
    if not miss.empty:
        out += ["### Where they differ, and why", "", common.markdown(miss), ""]
    shown = table[["setting", "workload", "stack", *[f"{s}_diff_pct" for s in METRICS.values()],
                   *[f"{s}_tcp_spread_pct" for s in METRICS.values()], "retrans_ns3", "retrans_tcp"]]
    out += ["### Every cell (ns-3 vs Linux %, Linux's spread %, retransmitted bytes)", "",
            common.markdown(shown, "{:+.1f}"), ""]
    return "\n".join(out)


def cross_section(table: pd.DataFrame) -> str:
    cols = [c for c in ("engine", "kind", "seconds", "share_pct", "draws_share_mean", "draws_share_p10",
                        "draws_share_p90", "draws_within_5pct", "drop_pct", "queue_p50", "queue_p90",
                        "queue_p99", "queue_peak", "bursts", "on_ms_p50", "on_ms_p90", "packets_p50",
                        "off_ms_p50", "late_us_p99") if c in table]
    return "\n".join([
        "## Cross traffic in both engines", "",
        "The cross traffic alone on the base path (a 100 B/s probe as the replay): its share of the "
        "bottleneck after it (IP bytes), its bursts after the bottleneck (split at gaps of 20 ms for "
        "Poisson, of half the shortest off period for Pareto: 83 ms for 500 ms off), and the "
        "queue each packet found. *schedule* is what the UDP sources were to send (cross.UdpSchedule, the "
        "same datagrams in both engines): its share over the run is the setting as drawn; a Pareto source "
        "(shape 1.5: infinite variance) holds about one on/off cycle a second, and its share over a short "
        "run is its draws', not the setting's. *draws_share_…*: the schedule's share over the same length "
        f"drawn with {DRAWS} seeds (mean, p10, p90, and the % of draws within {CROSS_TARGET_PCT:g} % of the "
        "setting): the mean says whether the source is right, p10-p90 how far one run's draw can be. "
        "*held=10s* is the same Pareto source conditioned on its share per window: every 10 s window holds "
        "exactly the setting's packets, in bursts whose lengths are Pareto draws scaled to fill the window "
        "with its off times; the heavy tail stays within a window, not across windows (no burst or silence "
        "outlasts a window, and a long draw shortens the window's other bursts and silences, some below the "
        "83 ms that splits bursts). A run that is not a whole number of windows ends in the first part of "
        "one, as drawn: a window opens with a burst.", "",
        common.markdown(table[cols], "{:.3g}")])


# -------------------------------------------------------------------- main ---
def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    if args.suite:
        from . import agreement_suite
        return agreement_suite.main(args)
    skipped = {e: why for e in engines.ENGINES if (why := engines.unavailable(e))}
    if "ns-3" in skipped or ("tcp" in skipped and not args.skip_map):
        common.gate(False, "the study needs both engines: " + "; ".join(f"{e}: {w}" for e, w in skipped.items()))
    work = args.work or Path(tempfile.mkdtemp(prefix="magnet-agreement-"))
    work.mkdir(parents=True, exist_ok=True)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    started, load = time.monotonic(), [os.getloadavg()[0]]
    runs = cross = live = fresh = None
    failed: list[str] = []
    try:
        earlier = previous_runs(args) if args.update and not args.skip_map else None
        if args.tcp_model == "linux":
            from . import reader_wakeup
            args.lags = reader_wakeup.for_study(args, work)
            common.progress_note(f"agreement: ns-3's host lags: {args.lags}")
        if not args.skip_map:
            if "vsftpd" in args.workloads:
                live, why = modmap.capture_vsftpd(work, args.file_size)
                if why:
                    skipped["vsftpd workload"] = why
            fresh, failed = run_map(args, work, live)
            runs = updated(earlier, args.settings, fresh, args.workloads) if args.update else fresh
            load.append(os.getloadavg()[0])
        if not args.skip_cross:
            cross, more = run_cross(args, work)
            failed += more
            load.append(os.getloadavg()[0])
    except KeyboardInterrupt:
        print("agreement: interrupted (nothing written)", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if runs is None and cross is None:
        common.gate(False, "nothing ran: " + "; ".join(failed or ["no run matches these options"]))
    write_results(args, runs, cross, skipped, failed, load, (time.monotonic() - started) / 60,
                  kept_demands(args, runs, fresh, live))
    return 1 if failed else 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
