"""magnet replay ns3 | tcp: replay application demand through chains of TCP stacks.

Every replayer prints the same Table II (replay.report), so simulated and real
stacks can be set side by side.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from magnetlib.cli.common import parse_sockid
from magnetlib.errors import TraceError


def register(sub) -> None:
    p = sub.add_parser("replay", help="replay application demand through simulated or real TCP stacks")
    replayers = p.add_subparsers(dest="replayer", metavar="REPLAYER", required=True)
    register_ns3(replayers)
    register_tcp(replayers)


def add_demand_args(p) -> None:
    """DEMAND and what selects or shapes it: shared by the replayers."""
    p.add_argument("demand", metavar="DEMAND",
                   help="a magnet trace (with --stream if it holds several), a demand CSV/Parquet, "
                        "or synth:NAME (ftp, ftp-slow, ftp-paper, mp3, bulk)")
    p.add_argument("--stream", type=parse_sockid, metavar="ID", help="the stream of DEMAND to replay")
    p.add_argument("--duration", type=float, default=30.0,
                   help="seconds of a synth: workload (default 30)")
    p.add_argument("-o", "--output", default="replay-out", metavar="DIR",
                   help="directory for traces, table.csv and plots (default replay-out)")
    p.add_argument("--no-plots", action="store_true", help="write no plots")


# ------------------------------------------------------------------- ns3 ---
def _argtype(convert):
    def parse(text):
        try:
            return convert(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = convert.__name__
    return parse


def _onoff(text: str) -> bool:
    if text not in ("on", "off", "1", "0", "true", "false"):
        raise ValueError(f"{text!r}: on or off")
    return text in ("on", "1", "true")


def sweep_keys():
    """--sweep KEY -> (ChainParams field, converter)."""
    from .ns3 import ns3_queue, ns3_rate, ns3_time
    return {"rate": ("rate", ns3_rate), "delay": ("delay", ns3_time), "queue": ("queue", ns3_queue),
            "tcp": ("tcp", str), "mss": ("mss", int), "stacks": ("stacks", int),
            "loss": ("loss", float), "sndbuf": ("sndbuf", int), "rcvbuf": ("rcvbuf", int),
            "nagle": ("nagle", _onoff), "live": ("live", _onoff)}


def register_ns3(replayers) -> None:
    from .ns3 import ChainParams, ns3_queue, ns3_rate, ns3_time
    d = ChainParams()
    p = replayers.add_parser(
        "ns3", help="through N simulated TCP stacks in sequence (ns-3), the paper's Table II",
        description="Replay DEMAND through N TCP stacks in ns-3, each over its own point-to-point "
                    "link; stack k+1's writes are the segments stack k put on its link. Prints "
                    "Table II and writes per-stack traces, table.csv and plots to --output.")
    add_demand_args(p)
    p.add_argument("--stacks", type=int, default=d.stacks, help=f"TCP stacks (default {d.stacks})")
    p.add_argument("--rate", type=_argtype(ns3_rate), default=d.rate,
                   help=f"link rate, bit/s: 20e6, 20Mbps (default {d.rate})")
    p.add_argument("--delay", type=_argtype(ns3_time), default=d.delay,
                   help=f"one-way delay: 0.03 (s) or 30ms (default {d.delay})")
    p.add_argument("--queue", type=_argtype(ns3_queue), default=d.queue,
                   help=f"sender's DropTail queue, packets or bytes: 100p, 150000B (default {d.queue})")
    p.add_argument("--mss", type=int, default=d.mss, help=f"TCP segment size (default {d.mss})")
    p.add_argument("--tcp", default=d.tcp, help=f"ns-3 congestion control (default {d.tcp})")
    p.add_argument("--sndbuf", type=int, default=d.sndbuf, help=f"send buffer (default {d.sndbuf})")
    p.add_argument("--rcvbuf", type=int, default=d.rcvbuf, help=f"receive buffer (default {d.rcvbuf})")
    p.add_argument("--loss", type=float, default=d.loss, help="packet loss rate per link (default 0)")
    p.add_argument("--no-nagle", dest="nagle", action="store_false",
                   help="disable Nagle's algorithm (on by default, as in Linux)")
    p.add_argument("--live", action="store_true",
                   help="relay live (each read written on at once) instead of the offline re-replay")
    p.add_argument("--new-data-only", action="store_true",
                   help="offline: leave retransmitted bytes out of the next stack's writes")
    p.add_argument("--start-offset", type=_argtype(ns3_time), default=d.start_offset,
                   help="time from connection to the first write (default 0)")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed (loss model, synth)")
    p.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2",
                   help=f"run every combination (keys: {', '.join(sweep_keys())}); repeatable")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="sweep runs in parallel (default: CPUs)")
    p.set_defaults(func=cmd_replay_ns3)


def _params(args):
    from .ns3 import ChainParams
    return ChainParams(stacks=args.stacks, rate=args.rate, delay=args.delay, queue=args.queue,
                       mss=args.mss, tcp=args.tcp, sndbuf=args.sndbuf, rcvbuf=args.rcvbuf,
                       loss=args.loss, nagle=args.nagle, live=args.live,
                       new_data_only=args.new_data_only, start_offset=args.start_offset,
                       seed=args.seed)


def cmd_replay_ns3(args) -> int:
    from . import inputs, ns3, sweep
    combos = [{}]
    if args.sweep:
        keys = sweep_keys()
        try:
            combos = sweep.parse(args.sweep, {k: conv for k, (_, conv) in keys.items()})
        except ValueError as e:
            raise TraceError("--sweep", str(e).removeprefix("--sweep ")) from None
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    demand = inputs.load_demand(args.demand, args.stream, args.duration, args.seed)
    demand_path = inputs.write_compact(demand, str(out / "demand.magnet"))
    programs = ns3.build()
    base = _params(args)
    if not args.sweep:
        return _single_run(demand_path, out, base, programs, not args.no_plots)
    keys = sweep_keys()
    tasks = [(demand_path, str(out / sweep.slug(c)), base.replace(**{keys[k][0]: v for k, v in c.items()}),
              programs, not args.no_plots) for c in combos]
    results = sweep.run_parallel(_sweep_task, tasks, args.jobs, desc="ns-3 runs")
    return _sweep_summary(combos, results, out)


def _single_run(demand_path, out: Path, params, programs, plots: bool) -> int:
    from . import ns3, report
    run = ns3.run_chain(demand_path, out, params, programs=programs)
    print(run.output, end="")
    series = report.chain_series(demand_path, run.traces)
    table, files = report.write_report(series, out, plots=plots)
    print()
    print(report.format_table(table))
    _print_notes(run.summary)
    print(f"\nwrote {', '.join(str(p) for p in [*run.traces, *files, out / 'summary.json'])}")
    return 0


def _print_notes(summary: dict) -> None:
    for s in summary["stacks"]:
        if s["late_writes"]:
            print(f"note: stack {s['stack']}: {s['late_writes']} writes waited for TCP's send buffer "
                  f"(at most {s['max_lag_ns'] / 1e9:.3f} s late)")
        if s["dev_retrans"]:
            print(f"note: stack {s['stack']}: {s['dev_retrans']} of {s['dev_send']} segments on the "
                  f"wire were retransmissions")


def _sweep_task(task) -> dict:
    """One sweep run in a worker process; errors come back as text (they do not pickle)."""
    from . import ns3, report
    demand_path, out_dir, params, programs, plots = task
    try:
        run = ns3.run_chain(demand_path, out_dir, params, programs=programs)
        table, _ = report.write_report(report.chain_series(demand_path, run.traces), out_dir,
                                       plots=plots)
        return {"table": table}
    except TraceError as e:
        return {"error": str(e)}


SWEEP_COLUMNS = ["stack", "events", "mean_size", "mean_spacing_s", "cv_spacing", "throughput_bps",
                 "bandwidth_vs_app_pct"]


def _sweep_summary(combos: list[dict], results: list[dict], out: Path) -> int:
    import pandas as pd

    from . import report, sweep
    frames, failed = [], []
    for combo, result in zip(combos, results):
        if "error" in result:
            failed.append(f"{sweep.label(combo)}: {result['error']}")
            continue
        table = result["table"]
        for key, value in reversed(combo.items()):
            table.insert(0, key, value)
        frames.append(table)
    if frames:
        summary = pd.concat(frames, ignore_index=True)
        report.write_csv(summary, out / "sweep.csv")
        shown = summary[[*combos[0], *SWEEP_COLUMNS]].rename(columns=report.TABLE_COLUMNS)
        shown["Mb/s"] = shown["Mb/s"] / 1e6
        print(shown.to_string(index=False, float_format="{:.6g}".format, na_rep="-"))
        print(f"\nwrote {out / 'sweep.csv'} and one directory per run under {out}")
    for line in failed:
        print(f"magnet: {line}", file=sys.stderr)
    return 2 if failed else 0


# ------------------------------------------------------------------- tcp ---
def register_tcp(replayers) -> None:
    from .scenario import add_arguments
    from .tcp import CAPTURES
    p = replayers.add_parser(
        "tcp", help="through N real Linux TCP stacks (network namespaces and a link emulator, or loopback)",
        description="Replay DEMAND into real TCP connections, each between two network namespaces "
                    "(root) joined by a link emulator on TUN devices that applies the stack's path "
                    "(rate, delay, queue, loss, jitter, hops, MTU) and its cross traffic, and measure "
                    "what each stack puts on its wire. offline: stack k's wire output is stack k+1's "
                    "demand (the paper's method); relay: N connections joined by split-TCP relays. "
                    "Prints Table II as `magnet replay ns3` does and writes per-stack traces, "
                    "table.csv and plots.")
    add_demand_args(p)
    add_arguments(p)
    g = p.add_argument_group("real TCP only")
    g.add_argument("--loopback", action="store_true",
                   help="no root needed: connections on 127.0.0.1 (MSS 1448), no path, no capture")
    g.add_argument("--capture", choices=CAPTURES, default="auto",
                   help="how each stack's wire is recorded: the BPF capture, tcpdump, none (the "
                        "receiver's reads); auto: the first that works (default)")
    g.add_argument("--no-pin", dest="pin", action="store_false",
                   help="let the scheduler place the paced sender (default: a CPU of its own, the "
                        "rest of the run on the others, when there are 2 or more)")
    g.add_argument("--send-only", action="store_true",
                   help="replay only the send direction of a request/response demand")
    g.add_argument("--concurrent", action="store_true",
                   help="both directions at their trace times, no waiting for the peer (Tmix CONC)")
    g.add_argument("--all-segments", dest="new_data_only", action="store_false",
                   help="offline: the next stack replays every data segment, retransmissions "
                        "included (default: new data only)")
    g.add_argument("--no-rt", dest="realtime", action="store_false",
                   help="run the link emulators without SCHED_FIFO")
    p.set_defaults(func=cmd_replay_tcp)


def cmd_replay_tcp(args) -> int:
    from . import tcp
    with tcp.interruptible():                   # Ctrl-C and SIGTERM clean up, exit 130
        return _replay_tcp(args)


def _replay_tcp(args) -> int:
    from . import inputs, tcp
    from .scenario import PATH_FLAGS, from_args
    try:
        scenario = from_args(args)
        options = tcp.TcpOptions(capture=args.capture, loopback=args.loopback, pin=args.pin,
                                 concurrent=args.concurrent, send_only=args.send_only,
                                 new_data_only=args.new_data_only, realtime=args.realtime)
    except ValueError as e:
        raise TraceError("magnet replay tcp", str(e)) from None
    if args.loopback:
        given = [flag for flag, name, *_ in PATH_FLAGS if getattr(args, f"path_{name}") is not None]
        if given or args.cross:
            raise TraceError((given or ["--cross"])[0], "--loopback emulates no path (127.0.0.1): drop "
                                                        "it, or run without --loopback (root)")
    linux = tcp.prepare(scenario, options)
    demand = inputs.load_demand(args.demand, args.stream, args.duration, args.seed,
                                directions="send" if args.send_only else "both")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    inputs.write_compact(demand, str(out / "demand.magnet"))
    print(tcp.describe(scenario, options, linux), flush=True)
    print(_pinning(options) + _demand_line(demand), flush=True)
    run = tcp.run_chain(demand, out, scenario, options, progress=lambda line: print(line, file=sys.stderr))
    _report_tcp(run, not args.no_plots)
    return 0


def _demand_line(demand) -> str:
    from magnetlib.demand import RECV
    responses = int((demand.direction == RECV).sum())
    return (f"  demand: {len(demand) - responses} writes, {demand.total_bytes} bytes over "
            f"{demand.duration_ns / 1e9:.3f} s"
            + (f", {responses} of them responses (the acceptor's)" if responses else ""))


def _pinning(options) -> str:
    cpus = sorted(os.sched_getaffinity(0))
    if not options.pin or len(cpus) < 2:
        return ""
    return f"  pacing: the sender on CPU {cpus[-1]}, the rest of the run on {', '.join(map(str, cpus[:-1]))}\n"


def _report_tcp(run, plots: bool) -> None:
    from . import fidelity, report
    out = run.out_dir
    tables = [("send", "table.csv")] + ([("recv", "table-response.csv")] if len(run.app["recv"]) else [])
    files = []
    for direction, name in tables:
        series = run.series(direction)
        if direction == "send":
            table, written = report.write_report(series, out, plots=plots)
            files += written
        else:
            table = report.stack_table(series)
            files.append(report.write_csv(table, out / name))
            print("\nresponse direction (acceptor -> initiator):")
        print()
        print(report.format_table(table))
    print()
    if run.applied.count("\n") and not run.options.loopback:
        print(run.applied.splitlines()[-1].strip())
    for note in run.notes:
        print(f"note: {note}")
    print(f"note: wire recorded by {_METHODS[run.method]}")
    for s in run.stacks:
        for line in ([s.timing.line()] if s.timing else []) + \
                ([fidelity.confirmed_line(s.confirmed)] if s.confirmed else []) + s.notes:
            print(f"stack {s.k}: {line}")
    summary = out / "summary.json"
    summary.write_text(json.dumps(run.summary(), indent=1, default=_plain) + "\n")
    traces = [s.trace for s in run.stacks if s.trace]
    print(f"\nwrote {', '.join(str(p) for p in [*traces, *files, summary])}")


_METHODS = {"bpf": "the BPF capture (magnet-read; DEV_SEND of each sending socket)",
            "pcap": "tcpdump on each hop's sending end (read with magnetlib.pcap)",
            "reads": "the receiving applications' reads (no capture)"}


def _plain(value):
    """JSON for numpy scalars."""
    return value.item() if hasattr(value, "item") else str(value)
