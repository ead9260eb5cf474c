"""`make demo`: the headline of magnet in a few minutes.

    python -m magnet.experiments.demo [--out out/demo] [--duration 15] [--quick] [--work DIR]

1. capture a real FTP-like transfer (experiments/ftp_app.py: the paper's
   3284-byte writes every 0.124 s) with the BPF capture, `magnet capture`,
   between two network namespaces joined by the emulated WAN path (linkem:
   20 Mbit/s, 30 ms one way);
2. extract its demand (the application's SOCK_SEND records) with magnetlib;
3. replay that demand through four TCP stacks in ns-3 (`magnet replay ns3`'s
   chain, offline),
4. and through four real Linux TCP stacks over the same emulated paths
   (`magnet replay tcp`, offline), printing the path each engine applied;
5. print Table II with the paper's row beside ours, and where the figures are;
6. print one line of the fidelity study (`magnet experiment fidelity --quick` on python's
   http.server and curl, one path): how close each of the six replays of its capture on a
   fast path comes to the real application on a slower one.

Where the BPF capture cannot run (not root, no BTF, no magnet-read) the demo
says so and replays the synthetic demand (magnetlib.synth.ftp_paper) instead;
without ns-3 or root the step that needs it is skipped, saying why.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import magnetlib
from magnetlib import demand as demand_mod
from magnetlib import metrics, synth
from magnetlib.demand import Demand
from magnetlib.errors import MagnetError

from . import multistack
from .common import StudyError, largest_sender

SIZE, INTERVAL = 3284, 0.124          # the paper's Table II application
CHAIN = multistack.scenario(stacks=4)  # each stack: 20 Mbit/s, 30 ms one way, 100 packets


def say(line: str) -> None:
    print(line, flush=True)


# --------------------------------------------------------------- capture ---
def capture_unavailable() -> str | None:
    """Why the BPF capture of a real transfer cannot run here (None: it can)."""
    from magnet.replay import engines, wire
    return wire.bpf_unavailable() or engines.unavailable("tcp")


def magnet_command() -> list[str]:
    """The `magnet` of this Python (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "magnet"
    return [str(beside)] if beside.exists() else ["magnet"]


def capture_transfer(out: Path, seconds: float) -> Path:
    """Run ftp_app's sender under `magnet capture` across the chain's first path (the
    emulated WAN: linkem between two namespaces); the trace."""
    from magnet.replay import wan
    prefix = f"mgxm{os.getpid()}"
    trace = out / "capture.magnet"
    app = [sys.executable, "-m", "magnet.experiments.ftp_app"]
    one = CHAIN.replace(stacks=1)
    with wan.chain(prefix, one, out, subnet="10.204") as net:
        hop = net.stack(1)
        say(f"  path: {one.path_of(1).describe()} (linkem)")
        sink = net.popen(hop.right_ns, [*app, "sink", "--listen", f"{hop.right_addr}:0"],
                         stdout=subprocess.PIPE, text=True)
        try:
            port = int(sink.stdout.readline().split()[1])
            sender = [*app, "send", "--connect", f"{hop.right_addr}:{port}", "--size", str(SIZE),
                      "--interval", str(INTERVAL), "--duration", str(seconds)]
            command = [*magnet_command(), "capture", "-o", str(trace), "--cgroup-name", f"{prefix}-cap",
                       "--", "ip", "netns", "exec", hop.left_ns, *sender]
            say(f"  $ {' '.join(command)}")
            proc = subprocess.run(command, capture_output=True, text=True)
            if proc.returncode != 0:
                problem = (proc.stderr.strip().splitlines() or ["failed"])[-1]
                raise StudyError("magnet capture", problem.removeprefix("magnet: "))
            read = json.loads(sink.communicate(timeout=30)[0].strip().splitlines()[-1])["read"]
        finally:
            if sink.poll() is None:
                sink.kill()
                sink.wait()
    say(f"  captured {trace} ({trace.stat().st_size} bytes); the sink read {read} bytes")
    return trace


def captured_demand(trace: Path) -> tuple[Demand, tuple]:
    """The sender's writes (SOCK_SEND) and its own stack's wire (DEV_SEND) from the capture."""
    with magnetlib.open(trace) as t:
        t.check()
        sid = largest_sender(t, "sender")
        demand = demand_mod.extract(t, sid, "send", "sock")
        wire = demand_mod.extract(t, sid, "send", "dev")
        lost = t.scan.lost
    if lost:
        say(f"  note: the capture lost {lost} records; the demand may lack writes")
    own = (metrics.ordinal_label(1), wire.time_ns + wire.start_ns, wire.size)
    app = (metrics.ordinal_label(0), demand.time_ns + demand.start_ns, demand.size)
    return Demand.from_arrays(demand.time_ns, demand.size), [app, own]


def get_demand(out: Path, seconds: float) -> tuple[Demand, list | None, str]:
    """(the demand, the captured [application, own stack] series or None, where it came from)."""
    why = capture_unavailable()
    if why is None:
        try:
            demand, captured = captured_demand(capture_transfer(out, seconds))
            return demand, captured, "captured (BPF) from experiments/ftp_app.py"
        except MagnetError as e:
            why = str(e)
    say(f"  the BPF capture of a real transfer is unavailable ({why}):")
    say(f"  using the synthetic demand instead (magnetlib.synth.ftp_paper: {SIZE} B every {INTERVAL} s)")
    return synth.ftp_paper(seconds), None, "synthetic (magnetlib.synth.ftp_paper), no capture"


# ---------------------------------------------------------------- replay ---
def replay(name: str, run, out: Path) -> list | None:
    """One engine's chain; its series, or None (said why) when it cannot run here."""
    from magnet.replay import report
    started = time.monotonic()
    try:
        outcome = run()
    except (MagnetError, OSError) as e:
        say(f"  skipped: {e}")
        return None
    for line in outcome.applied.strip().splitlines():
        say(f"  applied: {line.strip()}")
    for note in dict.fromkeys(outcome.notes):
        say(f"  note: {note}")
    table, files = report.write_report(outcome.series, out)
    say(f"  {name}: done in {time.monotonic() - started:.0f} s, wire from {outcome.method}; "
        f"figures {', '.join(str(f) for f in files if f.suffix == '.png')}")
    return outcome.series


def comparison(columns: dict[str, list]) -> pd.DataFrame:
    """Table II, numeric: one row per (source, stack) with the paper's rows first
    (source "paper"); units in the headings."""
    paper = multistack.paper_frame()
    rows = [pd.DataFrame({"source": "paper", "k": paper["k"], "label": paper["stack"],
                          "mean_size_bytes": paper["paper_size"],
                          "mean_spacing_s": paper["paper_spacing_s"],
                          "bandwidth_vs_app_pct": paper["paper_implied_vs_app_pct"]})]
    for name, series in columns.items():
        table = metrics.stack_table(series)
        rows.append(pd.DataFrame({"source": name, "k": range(len(table)), "label": table["stack"],
                                  "mean_size_bytes": table["mean_size"],
                                  "mean_spacing_s": table["mean_spacing_s"],
                                  "throughput_bps": table["throughput_bps"],
                                  "bandwidth_vs_app_pct": table["bandwidth_vs_app_pct"]}))
    return pd.concat(rows, ignore_index=True)


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """The comparison as printed: one column per source, "size B / spacing s / change"."""
    cells = table.apply(lambda r: f"{r.mean_size_bytes:.0f} B {r.mean_spacing_s:.3f} s"
                        + ("" if r.source == "paper" else f" {r.bandwidth_vs_app_pct:+.1f}%"), axis=1)
    wide = table.assign(cell=cells).pivot(index="k", columns="source", values="cell")
    wide.insert(0, "Trial", table.drop_duplicates("k").set_index("k")["label"])
    sources = list(dict.fromkeys(table["source"]))            # paper first, then as given
    return wide[["Trial", *sources]].fillna("-").reset_index(drop=True).rename_axis(columns=None)


# ------------------------------------------------------------- fidelity ---
FIDELITY = ("http-python", "60ms-10M")      # one application, one path (experiments/fidelity.py)


def fidelity_line(out: Path, work: Path | None = None) -> str:
    """One line of the fidelity study: python's http.server and curl on path A and on one
    path B (two runs), predicted by the six replays; or why it could not run here.  Its
    runs' traces are kept in `work` when given (the study's --work)."""
    from . import fidelity, fidelity_report
    app, site = FIDELITY
    why = fidelity.unavailable([app])
    if why:
        return f"  fidelity skipped: {why}"
    fidelity.main(["--quick", "--apps", app, "--paths", site, "--runs", "2", "--out", str(out),
                   *(["--work", str(work)] if work else [])])
    rows = pd.read_csv(out / "fidelity.csv")
    return f"  {fidelity_report.headline(rows, app, site)}\n  (README, heat map and CDFs in {out})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m magnet.experiments.demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="output directory (default out/demo)")
    p.add_argument("--duration", type=float, help="seconds of the transfer (default 15; --quick 4)")
    p.add_argument("--quick", action="store_true", help="a 4-second transfer (the tests run this)")
    p.add_argument("--work", type=Path, help="keep the fidelity study's traces here (its --work; "
                                             "default: a temporary directory)")
    args = p.parse_args(argv)
    seconds = args.duration or (4.0 if args.quick else 15.0)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        say(f"magnet demo: the paper's FTP case ({SIZE} B every {INTERVAL} s) for {seconds:g} s, "
            f"captured, then replayed through {CHAIN.stacks} TCP stacks")
        say("  the chain: " + CHAIN.describe().replace("\n", "\n  "))
        say("1/4 capturing a real FTP-like transfer with the BPF capture (magnet capture) ...")
        demand, captured, source = get_demand(out, seconds)
        demand_path = demand_mod.write_demand(demand, out / "demand.magnet")
        say(f"2/4 demand ({source}): {len(demand)} writes, {demand.total_bytes} bytes, mean "
            f"{demand.size.mean():.0f} B every {np.diff(demand.time_ns).mean() / 1e9:.4f} s -> {demand_path}")
        say(f"3/4 replaying it through {CHAIN.stacks} TCP stacks in ns-3 (offline re-replay) ...")
        ns3 = replay("ns-3", lambda: multistack.run_one("ns-3", "offline", demand, out / "ns3", CHAIN),
                     out / "ns3")
        say(f"4/4 replaying it through {CHAIN.stacks} real Linux TCP stacks (offline, namespaces "
            "joined by the userspace link emulator, BPF capture of each wire) ...")
        real = replay("real TCP", lambda: multistack.run_one("tcp", "offline", demand, out / "tcp", CHAIN,
                                                             progress=lambda line: say(f"  {line}")),
                      out / "tcp")
    except KeyboardInterrupt:
        print("magnet demo: interrupted", file=sys.stderr)
        return 130
    except (MagnetError, OSError) as e:
        print(f"magnet demo: {e}", file=sys.stderr)
        return 2
    columns = {"captured": captured, "ns-3": ns3, "real TCP": real}
    table = comparison({k: v for k, v in columns.items() if v})
    say("\nTable II (mean size, mean spacing, bandwidth vs the application; paper: ALS 2001):")
    say(shown(table).to_string(index=False))
    table.to_csv(out / "table.csv", index=False)
    say(f"\n'captured' is the transfer's own first stack, as the capture saw its wire; "
        "the paper's bandwidth fell 76% after three stacks.")
    say(f"\nFidelity (magnet experiment fidelity --quick on {FIDELITY[0]}, path {FIDELITY[1]}): the real "
        "application on a slower path, predicted from its capture on a fast one ...")
    try:
        say(fidelity_line(out / "fidelity", args.work and args.work.resolve()))
    except KeyboardInterrupt:
        print("magnet demo: interrupted", file=sys.stderr)
        return 130
    say(f"\n"
        f"Figures (Fig. 9 style bandwidth.png, Fig. 8 style modulation.png) in {out}/ns3 and {out}/tcp; "
        f"the table in {out / 'table.csv'}; the full study: python -m magnet.experiments.multistack "
        f"(results in experiments/results/multistack). Done in {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
