"""`magnet replay ns3 D` for a whole-application demand: every connection at once over
one path in ns-3 (ns3.run_app), reported as `magnet replay tcp D` reports its run.

The demand (CSV, Parquet or .magnet, validated by magnetlib.app_demand) is handed to
ns-3 as OUT/demand.csv; the path is duplex unless --duplex off.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from magnetlib.errors import UsageError

# Flags of `magnet replay ns3` that shape a chain of stacks, not a whole application.
CHAIN_ONLY = (("--sweep", "sweep"), ("--new-data-only", "new_data_only"), ("--start-offset", "start_offset"))


def replay_app_ns3(args) -> int:
    from magnetlib import app_demand

    from . import ns3, scenario as scenario_mod
    for flag, name in CHAIN_ONLY + (("--mode", "mode"),):
        value = getattr(args, name)
        if value and value != "offline":
            raise UsageError(flag, "not for a whole-application demand (every connection, both sides, "
                                   "replayed at once over one path)")
    try:
        scenario = scenario_mod.from_args(args)
        if args.path_duplex is None:          # whole applications: a link each way
            scenario = scenario.replace(path=tuple(replace(p, duplex=True) for p in scenario.path))
        ns3.check_held(scenario, schedules=False)
        options = ns3.Ns3Options(tcp_model=args.tcp_model, reader_wakeup_ns=args.reader_wakeup,
                                 ack_lag_ns=args.ack_lag, reply_lag_ns=args.reply_lag)
        ns3.chain_args(scenario.replace(stacks=1), options)
    except ValueError as e:
        raise UsageError("magnet replay ns3", str(e)) from None
    demand = app_demand.read(args.demand)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    csv = ns3.write_app_csv(demand, out / "demand.csv")
    programs = ns3.build()
    try:
        run = ns3.run_app(csv, out, scenario, options, open_loop=args.open_loop,
                          programs=programs)
        failed = None
    except ns3.AppRunFailed as e:
        run, failed = e.run, str(e)
    print(run.output, end="")
    report_app(run, not args.no_plots)
    if failed:
        print(f"magnet: {failed}", file=sys.stderr)
        return 1
    return 0


def report_app(run, plots: bool) -> None:
    """Table II per direction, completions and response times (as `magnet replay tcp D`
    prints them), the bottleneck's drops, the files written."""
    from .cli import report_app_tables
    files = report_app_tables(run, plots)
    for direction in ("forward", "reverse"):
        drops = run.summary[f"bottleneck_{direction}"]
        if drops["queue_drops"] or drops["loss_drops"]:
            print(f"note: the bottleneck's {direction} direction dropped {drops['queue_drops']} packets "
                  f"from its queue and lost {drops['loss_drops']} on its link (every flow's)")
    traces = [p for p in run.traces.values() if p.exists()]
    print(f"\nwrote {', '.join(str(p) for p in [*traces, *files, run.out_dir / 'summary.json'])}")
