"""magnet replay ns3 | tcp: replay application demand through chains of TCP stacks.

Every replayer prints the same Table II (replay.report), so simulated and real
stacks can be set side by side.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from magnetlib.cli.common import parse_sockid
from magnetlib.errors import MagnetError, UsageError


def register(sub) -> None:
    from . import path_cli
    p = sub.add_parser("replay", help="replay application demand through simulated or real TCP stacks")
    replayers = p.add_subparsers(dest="replayer", metavar="REPLAYER", required=True)
    register_ns3(replayers)
    register_tcp(replayers)
    path_cli.register(sub)


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
@dataclass(frozen=True)
class Swept:
    """One value of a --sweep: as given (it names the run) and as parsed."""
    text: str
    value: object

    def __str__(self) -> str:
        return self.text


def sweep_keys() -> dict:
    """--sweep KEY -> (the argparse dest it sets, converter): the scenario's flags
    and the ns-3 ones, KEY the flag's name without dashes (window-scaling or window_scaling)."""
    from magnetlib import knobs

    from . import scenario
    keys = {"stacks": ("stacks", knobs.positive_count), "mode": ("mode", _mode),
            "seed": ("seed", knobs.count), "cross": ("cross", _cross_list),
            "new_data_only": ("new_data_only", knobs.onoff),
            "start_offset": ("start_offset", knobs.duration), "tcp_model": ("tcp_model", _tcp_model),
            "reader_wakeup": ("reader_wakeup", knobs.duration), "ack_lag": ("ack_lag", knobs.duration),
            "reply_lag": ("reply_lag", knobs.duration)}
    for flag, name, convert, *_ in scenario.PATH_FLAGS:
        keys[_key(flag)] = (f"path_{name}", lambda text, convert=convert: (convert(text),))
    for flag, name, convert, *_ in scenario.TCP_FLAGS:
        keys[_key(flag)] = (f"tcp_{name}", convert)
    return keys


def _key(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _tcp_model(text: str) -> str:
    from .scenario import TCP_MODELS
    if text not in TCP_MODELS:
        raise ValueError(f"tcp-model {text!r}: {' or '.join(TCP_MODELS)}")
    return text


def _mode(text: str) -> str:
    from .scenario import MODES
    if text not in MODES:
        raise ValueError(f"mode {text!r}: {' or '.join(MODES)}")
    return text


def _cross_list(text: str) -> list:
    from .scenario import cross
    return [] if text.strip().lower() == "none" else [cross(text)]


def _swept(convert):
    return lambda text: Swept(text, convert(text))


def register_ns3(replayers) -> None:
    from magnetlib import knobs

    from . import scenario
    p = replayers.add_parser(
        "ns3", help="through N simulated TCP stacks in sequence (ns-3), the paper's Table II",
        description="Replay DEMAND through N TCP stacks in ns-3, each over its own path (hops, a "
                    "bottleneck with its queue, loss and jitter, an MTU, cross traffic); in offline "
                    "mode stack k+1's writes are the segments stack k put on its wire. Prints "
                    "Table II and writes per-stack traces, table.csv and plots to --output.")
    add_demand_args(p)
    scenario.add_arguments(p)
    g = p.add_argument_group("ns-3 only")
    g.add_argument("--new-data-only", action="store_true",
                   help="offline: leave retransmitted bytes out of the next stack's writes")
    g.add_argument("--start-offset", type=knobs.arg(knobs.duration), default=0, metavar="TIME",
                   help="time from connection to the first write (default 0)")
    g.add_argument("--tcp-model", choices=scenario.TCP_MODELS, default="linux",
                   help="linux: ns-3 with Linux 6.x's TCP (delayed ACKs, Nagle, RTO, buffers, tail "
                        "loss probes as Linux has them); ns3: ns-3's own TcpSocketBase (default linux)")
    g.add_argument("--reader-wakeup", type=knobs.arg(knobs.duration), default=0, metavar="DURATION",
                   help="linux model: the host's wake-up of each receiving application (the replay's "
                        "receivers, the cross traffic's sinks): data that becomes readable is read "
                        "this long after, everything then readable in one read, and the ACKs Linux "
                        "sends on a read leave then (default 0: at once, an ideal host)")
    g.add_argument("--ack-lag", type=knobs.arg(knobs.duration), default=0, metavar="DURATION",
                   help="linux model: the host's way in for a segment carrying data, every host: TCP "
                        "processes it this long after it arrives, where the softirq's ACK for it "
                        "leaves (the reader's read --reader-wakeup after that); segments stay in "
                        "order (default 0: at once, an ideal host)")
    g.add_argument("--reply-lag", type=knobs.arg(knobs.duration), default=0, metavar="DURATION",
                   help="linux model: the host's way in for a pure ACK, every host: TCP processes it "
                        "this long after it arrives, where the data it releases leaves; segments "
                        "stay in order (default 0: at once, an ideal host)")
    g.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2",
                   help="run every combination; KEY is any flag above without its dashes "
                        "(rate, loss, cross, cc, window-scaling, ..., new-data-only); repeatable")
    g.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="sweep runs in parallel (default: CPUs)")
    g.add_argument("--open-loop", action="store_true",
                   help="whole-application demand: every event at its original time, no waits or "
                        "think times")
    p.set_defaults(func=cmd_replay_ns3, honours_signals=True)     # magnetlib.signals


def _chain(args):
    """The Scenario and ns-3 options the parsed flags describe; ValueError names the problem."""
    from . import ns3, scenario
    chain = scenario.from_args(args)
    options = ns3.Ns3Options(new_data_only=args.new_data_only, start_offset_ns=args.start_offset,
                             tcp_model=args.tcp_model, reader_wakeup_ns=args.reader_wakeup,
                             ack_lag_ns=args.ack_lag, reply_lag_ns=args.reply_lag)
    ns3.chain_args(chain, options)              # what ns-3 cannot run, refused before building it
    return chain, options


def cmd_replay_ns3(args) -> int:
    from magnetlib import app_demand

    from . import inputs, ns3, sweep
    if args.stream is None and app_demand.is_app_demand(args.demand):
        from .ns3_app import replay_app_ns3
        return replay_app_ns3(args)
    if args.open_loop:
        raise UsageError("--open-loop", "only for a whole-application demand (magnet demand --all)")
    combos = [{}]
    if args.sweep:
        try:
            combos = sweep.parse(args.sweep, {k: _swept(conv) for k, (_, conv) in sweep_keys().items()})
        except ValueError as e:
            raise UsageError("--sweep", str(e).removeprefix("--sweep ")) from None
    runs, keys = [], sweep_keys()
    for combo in combos:
        changed = argparse.Namespace(**vars(args))
        for key, setting in combo.items():
            setattr(changed, keys[key][0], setting.value)
        try:
            runs.append(_chain(changed))
        except ValueError as e:
            raise UsageError(sweep.label(combo) or "magnet replay ns3", str(e)) from None
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    demand = inputs.load_demand(args.demand, args.stream, args.duration, args.seed)
    demand_path = inputs.write_compact(demand, str(out / "demand.magnet"), source=args.demand)
    programs = ns3.build()
    if not args.sweep:
        return _single_run(demand_path, out, *runs[0], programs, not args.no_plots)
    tasks = [(demand_path, str(out / sweep.slug(c)), chain, options, programs, not args.no_plots)
             for c, (chain, options) in zip(combos, runs)]
    results = sweep.run_parallel(_sweep_task, tasks, args.jobs, desc="ns-3 runs")
    return _sweep_summary(combos, results, out)


def _single_run(demand_path, out: Path, chain, options, programs, plots: bool) -> int:
    from . import ns3, report
    run = ns3.run_chain(demand_path, out, chain, options, programs=programs)
    print(run.output, end="")
    series = report.chain_series(demand_path, run.traces)
    table, files = report.write_report(series, out, plots=plots)
    print()
    print(report.format_table(table))
    for note in run.notes:
        print(f"note: {note}")
    print(f"\nwrote {', '.join(str(p) for p in [*run.traces, *files, out / 'summary.json'])}")
    return 0


def _sweep_task(task) -> dict:
    """One sweep run in a worker process; errors come back as text (they do not pickle)."""
    from . import ns3, report
    demand_path, out_dir, chain, options, programs, plots = task
    try:
        run = ns3.run_chain(demand_path, out_dir, chain, options, programs=programs)
        table, _ = report.write_report(report.chain_series(demand_path, run.traces), out_dir,
                                       plots=plots)
        return {"table": table}
    except MagnetError as e:
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
            table.insert(0, key, str(value))
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
    from .scenario import CAPTURES, add_arguments
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
    g.add_argument("--open-loop", action="store_true",
                   help="a whole-application demand: every row at its time, waiting for nothing "
                        "(docs/app-demand.md)")
    p.set_defaults(func=cmd_replay_tcp, stacks=None, honours_signals=True)   # a whole application: one path


def cmd_replay_tcp(args) -> int:
    from magnetlib import app_demand

    from . import inputs, tcp
    from .scenario import PATH_FLAGS, Scenario, from_args
    whole = args.stream is None and app_demand.is_app_demand(args.demand)
    if args.open_loop and not whole:
        raise UsageError("--open-loop", "only for a whole-application demand (magnet demand --all)")
    args.stacks = args.stacks or (1 if whole else Scenario().stacks)
    try:
        scenario = from_args(args)
        options = tcp.TcpOptions(capture=args.capture, loopback=args.loopback, pin=args.pin,
                                 concurrent=args.concurrent, send_only=args.send_only,
                                 new_data_only=args.new_data_only, realtime=args.realtime, bars=True)
    except ValueError as e:
        raise UsageError("magnet replay tcp", str(e)) from None
    if args.loopback:
        given = [flag for flag, name, *_ in PATH_FLAGS if getattr(args, f"path_{name}") is not None]
        if given or args.cross:
            raise UsageError((given or ["--cross"])[0], "--loopback emulates no path (127.0.0.1): drop "
                                                        "it, or run without --loopback (root)")
    if whole:
        return _replay_app(args, scenario, options)
    linux = tcp.prepare(scenario, options)
    demand = inputs.load_demand(args.demand, args.stream, args.duration, args.seed,
                                directions="send" if args.send_only else "both")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    inputs.write_compact(demand, str(out / "demand.magnet"), source=args.demand)
    print(tcp.describe(scenario, options, linux), flush=True)
    print(_pinning(options) + _demand_line(demand), flush=True)
    run = tcp.run_chain(demand, out, scenario, options, progress=lambda line: print(line, file=sys.stderr))
    _report_tcp(run, not args.no_plots)
    return 0


def _replay_app(args, scenario, options) -> int:
    """Every connection of a whole-application demand at once over one path."""
    from dataclasses import replace

    from magnetlib import app_demand

    from . import app_results, app_tcp, tcp
    for flag, given in (("--send-only", args.send_only), ("--concurrent", args.concurrent),
                        ("--all-segments", not args.new_data_only), ("--mode", args.mode != "offline")):
        if given:
            raise UsageError(flag, "not for a whole-application demand (every connection, both sides, "
                                   "replayed at once over one path)")
    if args.path_duplex is None:              # whole applications: the same link each way
        scenario = scenario.replace(path=tuple(replace(p, duplex=True) for p in scenario.path))
    app_tcp.check(scenario, options)
    linux = tcp.prepare(scenario, options)
    demand = app_demand.read(args.demand)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    print(tcp.describe(scenario, options, linux), flush=True)
    print(_pinning(options) + f"  demand: {demand.summary()}", flush=True)
    run = app_tcp.run(demand, out, scenario, options, open_loop=args.open_loop,
                      progress=lambda line: print(line, file=sys.stderr))
    return _report_app(run, not args.no_plots)


def report_app_tables(run, plots: bool) -> list:
    """Table II per direction, completions and response times of a whole-application
    replay (either engine's run: out_dir, series, connections, adus); the files written."""
    from magnetlib import metrics

    from . import report
    out = run.out_dir
    files = [out / "connections.csv", out / "adus.csv"]
    for direction, label in (("send", "client -> server"), ("recv", "server -> client")):
        series = run.series[direction]
        if not len(series[0][1]):
            continue
        print(f"\n{label}:")
        if direction == "send":
            table, written = report.write_report(series, out, plots=plots)
            files += written
        else:
            table = metrics.stack_table(series)
            files.append(report.write_csv(table, out / "table-response.csv"))
        print(report.format_table(table))
    conns = run.connections
    ok = conns["status"] == "ok"
    print(f"\n{int(ok.sum())} of {len(conns)} connections complete; duration p50 "
          f"{conns['duration_s'].median():.3f} s, last completion {conns['completion_s'].max():.3f} s")
    for side in ("server", "client"):
        answers = run.adus["response_s"][run.adus["side"] == side].dropna()
        if len(answers):
            print(f"{len(answers)} {side} ADUs answering the other side's: response p50 "
                  f"{answers.median() * 1e3:.2f} ms, p99 {answers.quantile(0.99) * 1e3:.2f} ms")
    return files


def _report_app(run, plots: bool) -> int:
    from . import app_results
    out = run.out_dir
    files = report_app_tables(run, plots)
    for side, timing in run.timing.items():
        print(app_results.timing_line(side, timing))
    for note in run.notes:
        print(f"note: {note}")
    print(f"note: wire recorded by {_METHODS[run.method]}" if run.method == "bpf" else
          "note: no capture: each direction's wire row is what the other side read")
    summary = out / "summary.json"
    summary.write_text(json.dumps(run.summary(), indent=1, default=_plain) + "\n")
    print(f"\nwrote {', '.join(str(p) for p in [*run.traces.values(), *files, summary])}")
    if run.failed:
        first = list(run.failed.items())[:3]
        print(f"magnet: {len(run.failed)} of {len(run.connections)} connections failed ("
              + ", ".join(f"connection {k}: {why}" for k, why in first)
              + (", ..." if len(run.failed) > 3 else "") + f"); see {out / 'connections.csv'}",
              file=sys.stderr)
        return 1
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
    from magnetlib import metrics

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
            table = metrics.stack_table(series)
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
