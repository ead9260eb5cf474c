"""Study: the modulation map.  Where successive TCP stacks modulate an
application's traffic, by how much, and by which mechanism, in ns-3 and in real
Linux TCP over emulated paths (ALS 2001 Table II asked this of one WAN).

    magnet experiment modmap [--quick] [--out DIR] [--engines ns-3,tcp] [--runs N]
                             [--settings base,loss=1%,...] [--workloads paper,...]

From a base path (20 Mbit/s bottleneck, 60 ms RTT, a one-BDP drop-tail queue,
no loss, no competing traffic, CUBIC, Nagle on, MTU 1500, the receiver reading
64 KiB at a time) one factor changes at a time: RTT, bottleneck rate, random
loss (Bernoulli, Gilbert-Elliott bursts), cross traffic (bulk TCP flows, Pareto
on/off and Poisson UDP), congestion control, Nagle, a smaller MTU on later
stacks, the receiver's read size, the TCP of 2001 (NewReno without SACK,
timestamps or window scaling, delayed ACKs every 2 segments or 200 ms); and
one setting puts the paper's conditions together (a 30-hop path with loss,
cross traffic and the TCP of 2001).  Every setting runs a chain of --stacks
stacks (offline: stack k+1 replays stack k's wire output, the paper's method)
for each workload:

  paper      3284 B every 0.124 s (Table II's application)
  variable   FTP-like writes of varying size (log-normal around 3284 B), exponential gaps
  vsftpd     a real FTP server (Debian's vsftpd) sending a file to curl, captured live on the
             server side with `magnet capture` (its sendfile() calls are its writes)

Results in --out (default ./magnet-results/modmap): map.csv (one row per
setting, workload, engine, run and stack; stack 0 is the application),
summary.csv (medians over runs and the change from stack 1 to stack 3),
heatmap.png, per-stack.png and README.md (the paper's Table II beside the
closest settings, which conditions make later stacks modulate and why).
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from magnet.replay import engines
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario, Tcp
from magnetlib import knobs, signals, synth
from magnetlib.demand import Demand
from magnetlib.errors import MagnetError

from . import common, ftp_server

HONOURS_SIGNALS = True        # it checks for them itself (magnetlib.signals): see main()

PAPER = [(3284, 0.124), (1016, 0.045), (919, 0.037), (761, 0.079), (723, 0.122)]
# Later stacks "modulate" when stack 3 differs from stack 1 by more than this (and by
# more than the spread of repeated runs of the base setting).
SIZE_PCT, GAP_PCT, BW_PCT = 5.0, 10.0, 5.0


# ------------------------------------------------------------- settings ---
@dataclass(frozen=True)
class Setting:
    name: str                    # "base", "rtt=200ms", ...
    factor: str                  # what differs from the base
    build: Callable[[Scenario], Scenario]


BASE_PATH = NetPath(rate_bps=20_000_000, delay_ns=30_000_000, queue=knobs.Queue(1, "bdp"))
TCP_2001 = dict(cc="newreno", sack=False, timestamps=False, window_scaling=False, delack_count=2,
                delack_timeout_ns=200_000_000)


def _path(**changes) -> Callable[[Scenario], Scenario]:
    return lambda s: s.replace(path=tuple(p.__class__(**{**p.__dict__, **changes}) for p in s.path))


def _tcp(**changes) -> Callable[[Scenario], Scenario]:
    return lambda s: s.replace(tcp=Tcp(**{**s.tcp.__dict__, **changes}))


def _cross(text: str) -> Callable[[Scenario], Scenario]:
    from magnet.replay.scenario import cross
    return lambda s: s.replace(cross=(cross(text),))


def _later_mtu(mtu: int) -> Callable[[Scenario], Scenario]:
    return lambda s: s.replace(path=(s.path[0], NetPath(**{**s.path[0].__dict__, "mtu": mtu})))


def _wan(s: Scenario) -> Scenario:
    """The paper's conditions together: a long path with loss, competing traffic, 2001's TCP."""
    s = _path(hops=30, loss=knobs.loss("0.5%"))(s)
    return _tcp(**TCP_2001)(_cross("pareto:50%")(s))


SETTINGS = [
    Setting("base", "base", lambda s: s),
    Setting("rtt=2ms", "rtt", _path(delay_ns=1_000_000)),
    Setting("rtt=20ms", "rtt", _path(delay_ns=10_000_000)),
    Setting("rtt=200ms", "rtt", _path(delay_ns=100_000_000)),
    Setting("rate=2Mbps", "rate", _path(rate_bps=2_000_000)),
    Setting("rate=100Mbps", "rate", _path(rate_bps=100_000_000)),
    Setting("loss=1%", "loss", _path(loss=knobs.loss("1%"))),
    Setting("loss=ge:1%/25%", "loss", _path(loss=knobs.loss("ge:1%/25%"))),
    Setting("cross=tcp:4", "cross", _cross("tcp:4")),
    Setting("cross=pareto:50%", "cross", _cross("pareto:50%")),
    Setting("cross=poisson:30%", "cross", _cross("poisson:30%")),
    Setting("cc=newreno", "cc", _tcp(cc="newreno")),
    Setting("cc=bbr", "cc", _tcp(cc="bbr")),
    Setting("nagle=off", "nagle", _tcp(nagle=False)),
    Setting("later-mtu=576", "mss", _later_mtu(576)),
    Setting("read=1KiB", "read", _tcp(read_size=1024)),
    Setting("tcp=2001", "tcp", _tcp(**TCP_2001)),
    # The delayed-ACK timer capped at 40 ms (Linux's adapts from 40 ms up to 200 ms).
    Setting("delack=40ms", "delack", _tcp(delack_timeout_ns=40_000_000)),
    Setting("wan", "wan", _wan),
]
QUICK_SETTINGS = ["base", "loss=1%", "later-mtu=576", "wan"]
# The workloads other than the paper's run on these (the full map's time is bounded).
SUBSET = ["base", "cross=tcp:4", "later-mtu=576", "tcp=2001", "wan"]


# ------------------------------------------------------------ workloads ---
@dataclass(frozen=True)
class Workload:
    name: str
    title: str


WORKLOADS = {
    "paper": Workload("paper", "3284 B every 0.124 s (Table II's application)"),
    "variable": Workload("variable", "FTP-like writes of varying size (median 3284 B, exponential gaps)"),
    "vsftpd": Workload("vsftpd", "vsftpd sending a file to curl, captured live (sendfile calls)"),
}


def demand_of(workload: str, seconds: float, seed: int, live: Demand | None) -> Demand:
    if workload == "paper":
        return synth.ftp_paper(seconds)
    if workload == "variable":
        return synth.ftp_variable(seconds, seed=seed)
    return live


def capture_vsftpd(work: Path, size: int) -> tuple[Demand | None, str | None]:
    """The live FTP server's demand, or None and why not."""
    why = ftp_server.unavailable()
    if why:
        return None, why
    trace = work / "vsftpd.magnet"
    try:
        ftp_server.capture(trace, size, BASE_PATH)
        return ftp_server.server_demand(trace), None
    except MagnetError as e:
        return None, str(e)


# ------------------------------------------------------------------ runs ---
def options(argv):
    p = common.parser("modmap", __doc__)
    p.add_argument("--engines", default=",".join(engines.ENGINES), help="ns-3, tcp or both (default both)")
    common.add_tcp_model(p)
    p.add_argument("--settings", help="settings to run (default all; --quick: %s)" % ",".join(QUICK_SETTINGS).replace("%", "%%"))
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="paper, variable, vsftpd (default all)")
    p.add_argument("--stacks", type=knobs.arg(knobs.positive_count), default=4, help="stacks per chain (default 4)")
    p.add_argument("--runs", type=knobs.arg(knobs.positive_count), default=1,
                   help="runs of every setting (default 1; the base runs --base-runs times)")
    p.add_argument("--base-runs", type=knobs.arg(knobs.positive_count),
                   help="runs of the base setting, for the run-to-run spread (default 3; --quick 1)")
    p.add_argument("--duration", type=float, help="seconds of each synthetic demand (default 15; --quick 5)")
    p.add_argument("--file-size", type=knobs.arg(knobs.positive_size), default="4MB",
                   help="the file vsftpd sends (default 4MB)")
    p.add_argument("--work", type=Path, help="keep every run's traces here (default: a temporary directory)")
    args = common.parse(p, argv)
    args.engines = common.choices(p, "--engines", args.engines, engines.ENGINES)
    names = [s.name for s in SETTINGS]
    args.settings = common.choices(p, "--settings", args.settings or ",".join(QUICK_SETTINGS if args.quick else names), names)
    args.workloads = common.choices(p, "--workloads", args.workloads, WORKLOADS)
    args.duration = args.duration or (5.0 if args.quick else 15.0)
    args.base_runs = args.base_runs or (1 if args.quick else 3)
    return args


def plan(args) -> list[tuple[int, Setting, str, str]]:
    """(run, setting, workload, engine), runs outermost so repeated runs interleave."""
    chosen = [s for s in SETTINGS if s.name in args.settings]
    runs = []
    for run in range(max(args.runs, args.base_runs)):
        for setting in chosen:
            if run >= (args.base_runs if setting.name == "base" else args.runs):
                continue
            for workload in args.workloads:
                if workload != "paper" and setting.name not in SUBSET and not args.quick:
                    continue
                runs += [(run, setting, workload, engine) for engine in args.engines]
    return runs


def scenario_of(setting: Setting, stacks: int, seed: int) -> Scenario:
    return setting.build(Scenario(stacks=stacks, mode="offline", path=(BASE_PATH,), seed=seed))


def rows_of(outcome: engines.Outcome, labels: dict) -> pd.DataFrame:
    """map.csv's rows for one chain."""
    table = outcome.table()
    s = outcome.scenario
    first = s.path_of(1)
    out = pd.DataFrame({
        **labels,
        "rtt_ms": first.rtt_ns / 1e6,
        "rtt_measured_ms": table["rtt_measured_ms"],
        "rate_bps": first.rate_bps,
        "loss_pct": first.loss.mean * 100,
        "loss": str(first.loss),
        "cross": "+".join(str(c) for c in s.cross) or "none",
        "cross_load": sum(c.share for c in s.cross if c.kind != "tcp"),
        "cross_flows": sum(c.flows for c in s.cross if c.kind == "tcp"),
        "cc": s.tcp.cc,
        "nagle": s.tcp.nagle,
        "sack": s.tcp.sack,
        "mtu": [s.path_of(max(k, 1)).mtu for k in table["k"]],
        "hops": first.hops,
        "read_size": s.tcp.read_size,
        "stack": table["k"],
        "events": table["events"],
        "mean_size": table["mean_size"],
        "mean_gap_s": table["mean_spacing_s"],
        "throughput_bps": table["throughput_bps"],
        "bw_vs_app_pct": table["bandwidth_vs_app_pct"],
        "retrans_bytes": table["retrans_bytes"],
        "writes_split": table["writes_split"],
        "writes_coalesced": table["writes_coalesced"],
        "submss_segments": table["submss_segments"],
        "cross_lead_s": [np.nan] + [st.cross_lead_ns / 1e9 if st.cross_lead_ns else np.nan
                                    for st in outcome.stacks],
        "method": outcome.method,
    })
    return out


def execute(args, work: Path, live: Demand | None, skipped: dict):
    frames, failed = [], []
    todo = [r for r in plan(args) if not (r[2] == "vsftpd" and live is None)]
    for run, setting, workload, engine in common.progress(todo, "modmap"):
        signals.check()
        seed = args.seed + run
        where = work / f"{engine}-{setting.name.replace('/', '_')}-{workload}-{run + 1}"
        name = f"{engine} {setting.name} {workload} run {run + 1}"
        try:
            demand = demand_of(workload, args.duration, seed, live)
            outcome = engines.run(engine, demand, scenario_of(setting, args.stacks, seed), where,
                                  **engines.options_for(engine, args.tcp_model))
        except (MagnetError, OSError, ValueError) as e:
            failed.append(f"{name}: {e}")
            common.progress_note(f"modmap: {name} failed: {e}")
            continue
        labels = {"engine": engine, "workload": workload, "setting": setting.name,
                  "factor": setting.factor, "run": run + 1, "seed": seed}
        frames.append(rows_of(outcome, labels))
        last = frames[-1].iloc[min(3, len(frames[-1]) - 1)]
        common.progress_note(f"{name}: stack {int(last['stack'])} {last['mean_size']:.0f} B every "
                             f"{last['mean_gap_s']:.4f} s, {last['bw_vs_app_pct']:+.1f}% vs the application")
    return frames, failed


# --------------------------------------------------------------- summary ---
KEYS = ["engine", "workload", "setting", "factor"]


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (engine, workload, setting, stack): the median over runs, and min-max."""
    g = runs.groupby([*KEYS, "stack"], sort=False)
    out = g.size().rename("runs").reset_index()
    for col in ("mean_size", "mean_gap_s", "throughput_bps", "bw_vs_app_pct", "rtt_measured_ms",
                "retrans_bytes", "writes_split", "writes_coalesced", "submss_segments", "events"):
        stats = g[col].agg(["median", "min", "max"]).reset_index(drop=True)
        out[col] = stats["median"].to_numpy()
        if col in ("mean_size", "mean_gap_s", "throughput_bps"):
            out[f"{col}_min"], out[f"{col}_max"] = stats["min"].to_numpy(), stats["max"].to_numpy()
    return out


def changes(summary: pd.DataFrame, later: int = 3) -> pd.DataFrame:
    """Per (engine, workload, setting): stack `later` against stack 1, in percent, and
    what stacks 2..`later` did to their inputs (summed counters)."""
    first = summary[summary["stack"] == 1].set_index(KEYS)
    last = summary[summary["stack"] == later].set_index(KEYS)
    after = summary[summary["stack"].between(2, later)].groupby(KEYS, sort=False)[
        ["writes_split", "writes_coalesced", "submss_segments", "events", "retrans_bytes"]].sum()
    both = first.join(last, lsuffix="_1", rsuffix="_k", how="inner")
    out = pd.DataFrame({
        "size_pct": 100 * (both["mean_size_k"] / both["mean_size_1"] - 1),
        "gap_pct": 100 * (both["mean_gap_s_k"] / both["mean_gap_s_1"] - 1),
        "bw_pct": 100 * (both["throughput_bps_k"] / both["throughput_bps_1"] - 1),
        "size_1": both["mean_size_1"], "size_k": both["mean_size_k"],
    }).join(after.add_prefix("later_"), how="left").reset_index()
    out.attrs["later"] = later
    return out


def base_noise(runs: pd.DataFrame, later: int = 3) -> dict:
    """Per engine and workload: the largest |change| stack 1 -> `later` among repeated base runs."""
    base = runs[runs["setting"] == "base"]
    out = {}
    for (engine, workload), part in base.groupby(["engine", "workload"]):
        per_run = []
        for _, r in part.groupby("run"):
            one, k = r[r["stack"] == 1].iloc[0], r[r["stack"] == later]
            if k.empty:
                continue
            k = k.iloc[0]
            per_run.append((100 * (k.mean_size / one.mean_size - 1), 100 * (k.mean_gap_s / one.mean_gap_s - 1),
                            100 * (k.throughput_bps / one.throughput_bps - 1)))
        if per_run:
            arr = np.array(per_run)
            out[(engine, workload)] = np.ptp(arr, axis=0) if len(arr) > 1 else np.zeros(3)
    return out


def verdicts(change: pd.DataFrame, noise: dict) -> pd.DataFrame:
    """Whether later stacks modulate in each setting: beyond the thresholds and the base's spread."""
    def modulates(r) -> bool:
        size_n, gap_n, bw_n = noise.get((r.engine, r.workload), np.zeros(3))
        return bool(abs(r.size_pct) > max(SIZE_PCT, size_n) or abs(r.gap_pct) > max(GAP_PCT, gap_n)
                    or abs(r.bw_pct) > max(BW_PCT, bw_n))
    out = change.copy()
    out["later_stacks_modulate"] = [modulates(r) for r in change.itertuples()]
    out["mechanism"] = [mechanism(r, change.attrs.get("later", 3)) for r in change.itertuples()]
    return out


def mechanism(r, later: int = 3) -> str:
    """What stacks 2..`later` did to their inputs, from their counters
    (magnetlib.segmentation; retransmitted bytes from the senders' TCP)."""
    events = max(r.later_events, 1)
    parts = []
    if r.later_writes_split / events > 0.05:
        parts.append(f"split {r.later_writes_split:.0f} writes")
    if r.later_writes_coalesced / events > 0.05:
        parts.append(f"coalesce into {r.later_writes_coalesced:.0f} segments")
    if r.later_retrans_bytes > 0:
        parts.append(f"retransmit {r.later_retrans_bytes:.0f} B")
    what = ", ".join(parts) or "pass their inputs on as they came"
    return f"stacks 2-{later} {what}"


# ---------------------------------------------------------------- figures ---
def heatmap(change: pd.DataFrame, workload: str, later: int = 3):
    """Change from stack 1 to stack `later`, per setting (rows) and engine x metric (columns)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    part = change[change["workload"] == workload]
    settings = [s.name for s in SETTINGS if s.name in set(part["setting"])]
    cols = [(e, m) for e in engines.ENGINES if e in set(part["engine"])
            for m in ("size_pct", "gap_pct", "bw_pct")]
    grid = np.full((len(settings), len(cols)), np.nan)
    index = part.set_index(["setting", "engine"])
    for i, s in enumerate(settings):
        for j, (e, m) in enumerate(cols):
            if (s, e) in index.index:
                grid[i, j] = index.loc[(s, e), m]
    fig, ax = plt.subplots(figsize=(1.3 * len(cols) + 2.5, 0.42 * len(settings) + 1.8))
    limit = max(10.0, float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 10.0)
    image = ax.imshow(np.clip(grid, -limit, limit), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    for i in range(len(settings)):
        for j in range(len(cols)):
            text = "–" if np.isnan(grid[i, j]) else f"{int(round(grid[i, j])) + 0:+d}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    names = {"size_pct": "mean size", "gap_pct": "mean gap", "bw_pct": "bandwidth"}
    ax.set_xticks(range(len(cols)), [f"{e}\n{names[m]}" for e, m in cols], fontsize=8)
    ax.set_yticks(range(len(settings)), settings, fontsize=8)
    fig.colorbar(image, ax=ax, label=f"stack {later} vs stack 1, %")
    ax.set_title(f"Change from stack 1 to stack {later} ({WORKLOADS[workload].title})", fontsize=9)
    return fig


def per_stack(summary: pd.DataFrame, setting_names: list[str], workload: str = "paper"):
    """Mean size and gap per stack for the chosen settings and the paper's Table II."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    size, gap = np.array(PAPER).T
    for ax, col, paper, title in ((axes[0], "mean_size", size, "mean data size, B"),
                                  (axes[1], "mean_gap_s", gap, "mean gap, s")):
        ax.plot(range(len(paper)), paper, "k--s", label="paper (ALS 2001)")
        for (engine, name), part in summary[(summary["workload"] == workload)
                                            & summary["setting"].isin(setting_names)].groupby(["engine", "setting"]):
            part = part.sort_values("stack")
            err = np.vstack([part[col] - part[f"{col}_min"], part[f"{col}_max"] - part[col]]).clip(0)
            ax.errorbar(part["stack"], part[col], yerr=err, marker="o", capsize=3, label=f"{engine} {name}")
        ax.set_xticks(range(len(paper)), ["app"] + [f"{k}" for k in range(1, len(paper))])
        ax.set_xlabel("stack")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=7)
    fig.suptitle("Per stack: the paper's Table II beside the closest settings (error bars: min-max over runs)",
                 fontsize=10)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------- write-up ---
def closest(summary: pd.DataFrame, engine: str) -> str | None:
    """The setting whose stacks 1-4 come nearest the paper's Table II: the least mean
    |log ratio| of mean size and of mean gap over the stacks both have."""
    part = summary[(summary["engine"] == engine) & (summary["workload"] == "paper")
                   & summary["stack"].between(1, len(PAPER) - 1)]
    if part.empty:
        return None
    size, gap = np.array(PAPER, float).T
    distance = (np.abs(np.log(part["mean_size"] / size[part["stack"]]))
                + np.abs(np.log(part["mean_gap_s"] / gap[part["stack"]])))
    return distance.groupby(part["setting"]).mean().idxmin()


def table_ii(summary: pd.DataFrame, engine: str, setting: str) -> str:
    part = summary[(summary["engine"] == engine) & (summary["setting"] == setting)
                   & (summary["workload"] == "paper")].sort_values("stack")
    rows = []
    for r in part.itertuples():
        paper = PAPER[r.stack] if r.stack < len(PAPER) else (np.nan, np.nan)
        rows.append({"stack": "application" if r.stack == 0 else f"{r.stack}",
                     "paper B / s": f"{paper[0]:.0f} / {paper[1]:.3f}" if r.stack < len(PAPER) else "–",
                     "size B": f"{r.mean_size:.0f}", "gap s": f"{r.mean_gap_s:.4f}",
                     "vs app %": f"{r.bw_vs_app_pct:+.1f}", "RTT ms": f"{r.rtt_measured_ms:.1f}",
                     "retrans B": f"{r.retrans_bytes:.0f}", "split": f"{r.writes_split:.0f}",
                     "coalesced": f"{r.writes_coalesced:.0f}", "sub-MSS": f"{r.submss_segments:.0f}"})
    return common.markdown(pd.DataFrame(rows))


def engines_at_stack1(summary: pd.DataFrame, tcp_model: str) -> str | None:
    """Stack 1 of the paper's workload, base and delack=40ms, in each engine: whether the
    engines' TCPs agree where the map starts (magnet experiment agreement has every cell)."""
    part = summary[(summary["workload"] == "paper") & (summary["stack"] == 1)
                   & summary["setting"].isin(["base", "delack=40ms"])]
    if part["setting"].nunique() < 2 or part["engine"].nunique() < 2:
        return None
    rows = [{"engine": r.engine, "setting": r.setting, "size B": f"{r.mean_size:.0f}",
             "gap s": f"{r.mean_gap_s:.4f}", "RTT ms": f"{r.rtt_measured_ms:.1f}"}
            for r in part.sort_values(["setting", "engine"]).itertuples()]
    why = ("ns-3 runs the Linux profile (MagnetLinuxTcpSocket: Linux's delayed ACKs, Minshall's Nagle, "
           "RTO and buffers): its stack 1 is Linux's" if tcp_model == "linux" else
           "ns-3 runs its own TCP (delayed ACKs every 2 segments or 200 ms, classic Nagle): its sender "
           "holds each write's 388-byte tail a round trip and sees a longer RTT")
    return (f"## The engines at stack 1\n\n{why}. The paper's workload, base and with the delayed-ACK "
            "timer capped at 40 ms:\n\n" + common.markdown(pd.DataFrame(rows)) + "\n")


def findings(verdict: pd.DataFrame) -> str:
    lines = []
    for (engine, workload), part in verdict.groupby(["engine", "workload"], sort=False):
        yes = part[part["later_stacks_modulate"]]
        head = f"**{engine}, {WORKLOADS[workload].title}:** "
        if yes.empty:
            lines.append(head + "no setting makes stacks 2-3 differ from stack 1 beyond "
                         f"{SIZE_PCT:g} % in size, {GAP_PCT:g} % in gap or {BW_PCT:g} % in bandwidth.")
            continue
        items = [f"{r.setting} (size {r.size_pct:+.0f} %, gap {r.gap_pct:+.0f} %, bandwidth {r.bw_pct:+.0f} %; "
                 f"{r.mechanism})" for r in yes.itertuples()]
        lines.append(head + "later stacks modulate in " + "; ".join(items) + ".")
    return "\n\n".join(lines)


def write_results(args, runs: pd.DataFrame, skipped: dict, failed: list[str]) -> Path:
    results = common.Results("modmap", args)
    runs.to_csv(results.path("map.csv"), index=False)
    summary = summarise(runs)
    later = min(3, int(summary["stack"].max()))     # stack 3, or the last of a shorter chain
    change = changes(summary, later)
    verdict = verdicts(change, base_noise(runs, later))
    summary.to_csv(results.path("summary.csv"), index=False)
    body = [intro(args, skipped, failed), "## Which conditions make later stacks modulate", "",
            findings(verdict), "", common.markdown(verdict[[*KEYS, "size_pct", "gap_pct", "bw_pct",
                                                            "later_stacks_modulate", "mechanism"]], "{:+.1f}"), ""]
    for workload in dict.fromkeys(change["workload"]):
        stem = "heatmap" if workload == "paper" else f"heatmap-{workload}"
        results.figure(heatmap(change, workload, later), stem)
        body.append(f"![{stem}]({stem}.png)\n")
    if (stack1 := engines_at_stack1(summary, args.tcp_model)):
        body.append(stack1)
    body.append("## The paper's Table II beside the closest settings\n")
    shown = set()
    for engine in args.engines:
        for setting in dict.fromkeys(["wan", closest(summary, engine)]):
            if setting and not summary[(summary["engine"] == engine) & (summary["setting"] == setting)].empty:
                why = "the paper's conditions" if setting == "wan" else "nearest the paper's sizes and gaps"
                body.append(f"### {engine}, {setting} ({why})\n")
                body.append(table_ii(summary, engine, setting) + "\n")
                shown.add(setting)
    if shown:
        results.figure(per_stack(summary, sorted(shown)), "per-stack")
        body.append("![per stack](per-stack.png)\n")
    path = results.write("The modulation map: where successive TCP stacks modulate", "\n".join(body))
    print(f"modmap: results in {path.parent} (README.md, map.csv, summary.csv, figures)")
    return path


def intro(args, skipped: dict, failed: list[str]) -> str:
    lines = [
        f"Each setting runs a chain of {args.stacks} TCP stacks offline (stack k+1 replays the "
        "data segments stack k put on its wire, the paper's method) in each engine, for "
        f"{args.duration:g} s of each synthetic demand. Stack 0 is the application. *size*, *gap* and "
        "*bandwidth* are the change from stack 1 to stack 3 in mean data-segment size, mean gap between "
        "data segments, and throughput over each stack's span. A setting counts as making later stacks "
        f"modulate when one of them exceeds {SIZE_PCT:g} %, {GAP_PCT:g} % or {BW_PCT:g} % and the spread "
        f"of {args.base_runs} repeated runs of the base setting. *split*: input writes that left in two "
        "or more segments; *coalesced*: segments holding bytes of two or more writes; *sub-MSS*: segments "
        "below the MSS (magnetlib.segmentation, on new data only where sequence numbers are known).",
        "",
        "Base: " + scenario_of(SETTINGS[0], args.stacks, args.seed).describe().replace("\n", "; ") + ".",
    ]
    lines += [""] + [f"**Skipped:** {what}: {why}." for what, why in skipped.items()] if skipped else []
    lines += [""] + [f"**Failed:** {f}" for f in failed] if failed else []
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------- main ---
def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    skipped = {e: why for e in args.engines if (why := engines.unavailable(e))}
    args.engines = [e for e in args.engines if e not in skipped]
    if not args.engines:
        common.gate(False, "no engine can run here: " + "; ".join(f"{e}: {w}" for e, w in skipped.items()))
    work = args.work or Path(tempfile.mkdtemp(prefix="magnet-modmap-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        with signals.honoured():             # Ctrl-C, SIGTERM, SIGHUP: clean up, write nothing
            live = None
            if "vsftpd" in args.workloads:
                live, why = capture_vsftpd(work, args.file_size)
                if why:
                    skipped["vsftpd workload"] = why
            frames, failed = execute(args, work, live, skipped)
            if not frames:
                why = failed or [f"{what}: {reason}" for what, reason in skipped.items()]
                common.gate(False, "nothing ran: " + "; ".join(why or ["no run matches these options"]))
            write_results(args, pd.concat(frames, ignore_index=True), skipped, failed)
    except KeyboardInterrupt:
        print("modmap: interrupted", file=sys.stderr)
        return 130
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
