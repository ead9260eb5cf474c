"""Study 1 (ALS 2001 Table II and Fig. 9): an FTP-like application through 1..4
successive TCP stacks, simulated (ns-3) and real (Linux TCP over veth pairs),
side by side with the paper's numbers.

    python -m magnet.experiments.multistack [--runs 3] [--quick] [--out DIR]
    magnet experiment multistack --quick

Two demands: 10 KB written every 20 ms (the PAM 2002 FTP trace) and the
paper's Table II application, 3284 bytes every 0.124 s.  Each goes through a
chain of --stacks TCP stacks in four ways, --runs times each:

  ns-3 offline   stack k+1's writes are the segments stack k put on its link
                 (`magnet replay ns3`), the paper's method;
  ns-3 relay     one simulation, relays writing each read on at once;
  tcp offline    real TCP, each stack a fresh connection over its own veth
                 pair, replaying what the previous one put on its wire
                 (`magnet replay tcp --mode offline`);
  tcp relay      real TCP, all stacks at once, joined by split-TCP relays.

Every stack's path, in both engines (magnet.replay.engines, one Scenario):
20 Mbit/s, 30 ms one way, a drop-tail queue of 100 packets, MTU 1500, CUBIC,
Nagle on; real TCP crosses the userspace link emulator.  Without ns-3 the
ns-3 part is skipped; without root (network namespaces) the real-TCP part is;
the output and the README say which and why.

Results in --out (default ./magnet-results/multistack): README.md (Table II per demand,
engine and mode beside the paper's row; figures), runs.csv (every stack of
every run), summary.csv (mean and min-max over runs), PNG figures.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from magnet.replay import engines
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario
from magnetlib import knobs, metrics, signals, synth
from magnetlib.demand import Demand
from magnetlib.errors import MagnetError

from . import common

HONOURS_SIGNALS = True        # it checks for them itself (magnetlib.signals): see main()
# ALS 2001 Table II: (data size B, inter-packet spacing s); bandwidth -76% after three stacks (Fig. 9).
PAPER = [(3284, 0.124), (1016, 0.045), (919, 0.037), (761, 0.079), (723, 0.122)]
PAPER_DROP_AFTER_THREE_PCT = -76.0


@dataclass(frozen=True)
class Case:
    """A demand of the study: a synthetic workload and its duration (full, quick)."""
    name: str
    title: str
    workload: str
    seconds: float
    quick_seconds: float

    def demand(self, seconds: float, jitter: float, seed: int) -> Demand:
        return synth.WORKLOADS[self.workload](seconds, jitter=jitter, seed=seed)


CASES = {
    "ftp": Case("ftp", "10 KB every 20 ms", "ftp", 20.0, 3.0),
    "paper": Case("paper", "3284 B every 0.124 s (Table II's application)", "ftp-paper", 60.0, 5.0),
}
# (engine, mode)
CONFIGS = [("ns-3", "offline"), ("ns-3", "relay"), ("tcp", "offline"), ("tcp", "relay")]
METRICS = ["events", "bytes", "mean_size", "p50_size", "mean_spacing_s", "p50_spacing_s",
           "cv_spacing", "throughput_bps", "bandwidth_vs_app_pct"]


def scenario(stacks: int = 4, mode: str = "offline", seed: int = 1) -> Scenario:
    """Every stack's path, the same in both engines: 20 Mbit/s, 30 ms one way, a queue of
    100 packets, CUBIC with Nagle on."""
    return Scenario(stacks=stacks, mode=mode, seed=seed,
                    path=(NetPath(rate_bps=20_000_000, delay_ns=30_000_000, queue=knobs.Queue(100)),))


@dataclass
class Outcome:
    """One chain: Table II's series, how its wire was measured, and what to say about it."""
    series: list
    method: str
    notes: list
    applied: str = ""        # what the engine applied (paths, TCP), in its own words


# ----------------------------------------------------------- the engines ---
def ns3_available() -> str | None:
    """Why ns-3 cannot run here (None: it can); builds ns3-app/ on first use."""
    return engines.unavailable("ns-3")


def tcp_available() -> str | None:
    """Why the real-TCP chains cannot run here (None: it can)."""
    return engines.unavailable("tcp")


def run_one(engine: str, mode: str, demand: Demand, work: Path, chain: Scenario,
            progress=lambda line: None, tcp_model: str = "linux") -> Outcome:
    """One chain in one engine (magnet.replay.engines), as Table II's series; ns-3 with the
    TCP model given (Linux's by default)."""
    outcome = engines.run(engine, demand, chain.replace(mode=mode), work, progress,
                          **engines.options_for(engine, tcp_model))
    notes = list(outcome.notes) + [f"stack {s.k}: {note}" for s in outcome.stacks for note in s.notes]
    return Outcome(outcome.series(), outcome.method, notes, outcome.applied)


# --------------------------------------------------------------- tables ---
def paper_frame() -> pd.DataFrame:
    """The paper's Table II, with the bandwidth its sizes and spacings imply."""
    size, spacing = np.array(PAPER, float).T
    implied = size / spacing
    return pd.DataFrame({"k": range(len(PAPER)), "stack": [metrics.ordinal_label(k) for k in range(len(PAPER))],
                         "paper_size": size, "paper_spacing_s": spacing,
                         "paper_implied_vs_app_pct": 100 * implied / implied[0] - 100})


def run_rows(series: list, labels: dict) -> pd.DataFrame:
    """Table II of one chain (magnetlib.metrics.stack_table) with the run's labels in front."""
    table = metrics.stack_table(series)
    table.insert(0, "k", range(len(table)))
    for i, (key, value) in enumerate(labels.items()):
        table.insert(i, key, value)
    return table[[*labels, "k", "stack", *METRICS]]


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, min and max over runs of each (case, engine, mode, stack)."""
    keys = ["case", "engine", "mode", "method", "k", "stack"]
    grouped = runs.groupby(keys, sort=False)
    out = grouped.size().rename("runs").reset_index()
    for col in ("mean_size", "mean_spacing_s", "throughput_bps", "bandwidth_vs_app_pct"):
        stats = grouped[col].agg(["mean", "min", "max"]).reset_index(drop=True)
        for stat in ("mean", "min", "max"):
            out[f"{col}_{stat}"] = stats[stat].to_numpy()
    return out.merge(paper_frame(), on=["k", "stack"], how="left")


def mean_range(mean: float, lo: float, hi: float, fmt: str) -> str:
    """'1095 [1089, 1101]' over several runs (mean [min, max]), '1095' when they agree."""
    text = fmt.format(mean)
    if np.isfinite(lo) and fmt.format(lo) != fmt.format(hi):
        text += f" [{fmt.format(lo)}, {fmt.format(hi)}]"
    return text


def table_ii(summary: pd.DataFrame) -> str:
    """One (case, engine, mode) of the summary as Table II beside the paper's row, in Markdown."""
    rows = []
    for r in summary.itertuples(index=False):
        paper = "–" if np.isnan(r.paper_size) else f"{r.paper_size:.0f} B, {r.paper_spacing_s:.3f} s"
        rows.append({"Trial": r.stack, "paper (size, spacing)": paper,
                     "size B": mean_range(r.mean_size_mean, r.mean_size_min, r.mean_size_max, "{:.0f}"),
                     "spacing s": mean_range(r.mean_spacing_s_mean, r.mean_spacing_s_min,
                                             r.mean_spacing_s_max, "{:.4f}"),
                     "Mb/s": mean_range(r.throughput_bps_mean / 1e6, r.throughput_bps_min / 1e6,
                                        r.throughput_bps_max / 1e6, "{:.3f}"),
                     "vs app %": mean_range(r.bandwidth_vs_app_pct_mean, r.bandwidth_vs_app_pct_min,
                                            r.bandwidth_vs_app_pct_max, "{:+.1f}"),
                     "paper vs app % (implied)": "–" if np.isnan(r.paper_size)
                     else f"{r.paper_implied_vs_app_pct:+.0f}"})
    return common.markdown(pd.DataFrame(rows))


# -------------------------------------------------------------- figures ---
def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def bandwidth_figure(case: Case, chains: dict):
    """Fig. 9 style: bandwidth of the application and each stack over time, one column
    per (engine, mode), one row per stack, all on one scale; the first run of each."""
    from magnet.replay import report
    plt = _pyplot()
    rows = max(len(series) for series in chains.values())
    fig, axes = plt.subplots(rows, len(chains), figsize=(3.6 * len(chains), 1.0 + 1.15 * rows),
                             sharey=True, squeeze=False)
    for col, ((engine, mode), series) in enumerate(chains.items()):
        start, edges = report.time_bins(series)
        for row, (label, ns, size) in enumerate(series):
            report.bandwidth_panel(axes[row, col], label, ns, size, start, edges, f"C{row}")
        axes[0, col].annotate(f"{engine} {mode}", (0.5, 1.32), xycoords="axes fraction", ha="center",
                              fontsize=10)
        axes[-1, col].set_xlabel(f"time, s (bins of {edges[1] - edges[0]:g} s)")
    for row in range(rows):
        axes[row, 0].set_ylabel("Mb/s")
    fig.suptitle(f"Effect of multiple TCP stacks: {case.title} (Fig. 9 style, run 1)", fontsize=11)
    fig.tight_layout()
    return fig


def per_stack_figure(case: Case, summary: pd.DataFrame):
    """Mean size, mean spacing and bandwidth change per stack, every (engine, mode) with its
    min-max over runs, the paper's values in black."""
    plt = _pyplot()
    paper = paper_frame()
    panels = [("mean_size", "paper_size", "mean data size, B"),
              ("mean_spacing_s", "paper_spacing_s", "mean spacing, s"),
              ("bandwidth_vs_app_pct", "paper_implied_vs_app_pct", "bandwidth vs application, %")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (col, paper_col, title) in zip(axes, panels):
        for (engine, mode), part in summary.groupby(["engine", "mode"], sort=False):
            mean = part[f"{col}_mean"].to_numpy()
            err = np.clip(np.vstack([mean - part[f"{col}_min"], part[f"{col}_max"] - mean]), 0, None)
            ax.errorbar(part["k"], mean, yerr=err, marker="o", capsize=3, label=f"{engine} {mode}")
        ax.plot(paper["k"], paper[paper_col], "k--s", label="paper (ALS 2001: 3284 B / 0.124 s)")
        ax.set_xticks(range(int(summary["k"].max()) + 1))
        ax.set_xticklabels(["app"] + [metrics.ordinal_label(k).split()[0] for k in
                                      range(1, int(summary["k"].max()) + 1)])
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("stack")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Per stack: {case.title} (error bars: min–max over runs)", fontsize=11)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------- study ---
def options(argv):
    p = common.parser("multistack", __doc__)
    p.add_argument("--runs", type=int, help="runs of every configuration (default 3; --quick 1)")
    p.add_argument("--stacks", type=int, default=4, help="TCP stacks in each chain (default 4)")
    p.add_argument("--cases", default=",".join(CASES), help=f"demands (default {','.join(CASES)})")
    p.add_argument("--engines", default="ns-3,tcp", help="ns-3, tcp or both (default both)")
    common.add_tcp_model(p)
    p.add_argument("--duration", type=float,
                   help="seconds of every demand (default: ftp 20, paper 60; --quick: 3 and 5)")
    p.add_argument("--jitter", type=float, default=0.0,
                   help="move each write by up to this share of its period, random per seed (default 0: "
                        "strictly periodic, as the paper's case is given)")
    p.add_argument("--work", type=Path, help="keep every run's traces here (default: a temporary "
                                             "directory, removed)")
    args = common.parse(p, argv)
    args.runs = args.runs or (1 if args.quick else 3)
    args.cases = common.choices(p, "--cases", args.cases, CASES)
    args.engines = common.choices(p, "--engines", args.engines, sorted({engine for engine, _ in CONFIGS}))
    if args.runs < 1 or args.stacks < 1:
        p.error("--runs and --stacks: at least 1")
    return args


def plan(args) -> tuple[list, list[str]]:
    """The runs to make, and what is skipped and why."""
    skipped, configs = [], []
    engines = set(args.engines)
    reasons = {"ns-3": ns3_available() if "ns-3" in engines else "not asked for (--engines)",
               "tcp": tcp_available() if "tcp" in engines else "not asked for (--engines)"}
    for engine, why in reasons.items():
        if why:
            skipped.append(f"{engine} skipped: {why}")
    configs = [(e, m) for e, m in CONFIGS if not reasons[e]]
    cases = [CASES[name] for name in args.cases]
    runs = [(case, engine, mode, run) for case in cases for engine, mode in configs
            for run in range(args.runs)]
    return runs, skipped


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    chain = scenario(args.stacks)
    runs, skipped = plan(args)
    for line in skipped:
        print(f"multistack: {line}", file=sys.stderr)
    if not runs:
        common.gate(False, "nothing to run: " + "; ".join(skipped))
    work = args.work or Path(tempfile.mkdtemp(prefix="mgxm-multistack-"))
    written = None
    try:
        with signals.honoured():             # Ctrl-C, SIGTERM, SIGHUP: clean up, write nothing
            frames, chains, notes, failed = execute(runs, args, chain, work)
            if not frames:
                common.gate(False, "every run failed: " + "; ".join(failed))
            written = write_results(args, chain, pd.concat(frames, ignore_index=True), chains, notes,
                                    skipped, failed)
    except KeyboardInterrupt:
        print(f"multistack: interrupted ({f'results in {written}' if written else 'nothing written'})",
              file=sys.stderr)
        return 130
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def execute(runs, args, chain: Scenario, work: Path):
    """Every run in turn (real TCP is timing-sensitive: nothing runs beside it)."""
    from tqdm import tqdm
    frames, chains, notes, failed = [], {}, {}, []
    for case, engine, mode, run in common.progress(runs, "multistack"):
        signals.check()
        seconds = args.duration or (case.quick_seconds if args.quick else case.seconds)
        seed = args.seed + run
        demand = case.demand(seconds, args.jitter, seed)
        where = work / f"{case.name}-{engine}-{mode}-{run + 1}"
        name = f"{engine} {mode} {case.name} run {run + 1}"
        try:
            outcome = run_one(engine, mode, demand, where, chain.replace(seed=seed), tcp_model=args.tcp_model)
        except (MagnetError, OSError) as e:
            failed.append(f"{name}: {e}")
            tqdm.write(f"multistack: {name} failed: {e}", file=sys.stderr)
            continue
        labels = {"case": case.name, "engine": engine, "mode": mode, "method": outcome.method,
                  "run": run + 1, "seed": seed, "seconds": seconds}
        frames.append(run_rows(outcome.series, labels))
        chains.setdefault(case.name, {}).setdefault((engine, mode), outcome.series)
        for note in outcome.notes:
            notes.setdefault(f"{engine} {mode}", {}).setdefault(note, []).append(f"{case.name} {run + 1}")
        last = frames[-1].iloc[-1]
        tqdm.write(f"{name}: {last['stack']} {last['mean_size']:.0f} B every {last['mean_spacing_s']:.4f} s, "
                   f"{last['bandwidth_vs_app_pct']:+.1f}% vs the application", file=sys.stderr)
    return frames, chains, notes, failed


def write_results(args, chain: Scenario, runs: pd.DataFrame, chains: dict, notes: dict,
                  skipped: list[str], failed: list[str]) -> Path:
    results = common.Results("multistack", args)
    results.table("runs", runs)
    summary = summarise(runs)
    results.table("summary", summary)
    body = [intro(chain, skipped, failed)]
    for name, case in CASES.items():
        part = summary[summary["case"] == name]
        if part.empty:
            continue
        body.append(f"## {case.title}\n")
        for (engine, mode, method), config in part.groupby(["engine", "mode", "method"], sort=False):
            body.append(f"### {engine}, {mode} (wire: {method}; runs: {int(config['runs'].max())})\n")
            body.append(table_ii(config) + "\n")
        results.figure(bandwidth_figure(case, chains[name]), f"fig9-bandwidth-{name}")
        results.figure(per_stack_figure(case, part), f"per-stack-{name}")
        body.append(f"![Fig. 9 style]({f'fig9-bandwidth-{name}.png'})\n")
        body.append(f"![per stack]({f'per-stack-{name}.png'})\n")
    body.append(notes_section(notes))
    path = results.write("Multistack: ALS 2001 Table II and Fig. 9 on today's stacks", "\n".join(body))
    print(f"multistack: results in {path.parent} (README.md, runs.csv, summary.csv, figures)")
    return path.parent


def intro(chain: Scenario, skipped: list[str], failed: list[str]) -> str:
    lines = [
        "The paper's Table II (ALS 2001): an FTP application's writes (3284 B every 0.124 s on "
        "average) through successive TCP stacks, each stack's wire output the next one's input: "
        "1016 B / 0.045 s, 919 / 0.037, 761 / 0.079, 723 / 0.122; bandwidth down "
        f"{-PAPER_DROP_AFTER_THREE_PCT:.0f}% after three stacks (Fig. 9). The paper's column "
        "*vs app % (implied)* is size / spacing against the application's; its stated figure is "
        f"{PAPER_DROP_AFTER_THREE_PCT:+.0f}%. The paper's row stands beside both demands here, but "
        "belongs to its own FTP transfer (LANL to Dallas, Linux 2.4, a WAN).",
        "",
        "The chain, the same in both engines: " + chain.describe().replace("\n", "; ") + ". "
        "ns-3 3.44: point-to-point links. Real TCP: network namespaces joined through the userspace "
        "link emulator (TUN devices), the paced sender alone on one CPU; the wire of each stack from "
        "the BPF capture (DEV_SEND of the sending socket; tcpdump where BPF is unavailable). "
        "Sizes are TCP payload bytes; a cell "
        "shows the mean over runs and, where runs differ, [min, max]. *vs app %* compares "
        "each stack's throughput over its span (first to last segment) with the application's: "
        "a stack that ends later (slow start, queueing) reads lower, more so in short runs.",
        "",
        "ns-3 without loss is deterministic: its runs come out identical (the seed drives only "
        "its loss model, off here, and --jitter, 0 by default); *ns-3 relay* is its live chain "
        "(`magnet replay ns3 --mode relay`).",
        "",
        "This machine was shared with other studies running at the same time (2 cores): real-TCP "
        "timing carries that noise.",
    ]
    lines += [""] + [f"**Skipped:** {s}." for s in skipped] if skipped else []
    lines += [""] + [f"**Failed:** {f}" for f in failed] if failed else []
    return "\n".join(lines) + "\n"


def notes_section(notes: dict) -> str:
    if not notes:
        return ""
    lines = ["## Notes from the replayers", ""]
    for config, by_note in notes.items():
        for note, where in by_note.items():
            lines.append(f"- {config} ({', '.join(where)}): {note}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
