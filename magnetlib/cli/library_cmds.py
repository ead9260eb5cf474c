"""magnet library add | list | query | demand | modulation | top | loss | export-demand | export-tmix."""
from __future__ import annotations

import sys

from .. import private
from .common import Status, print_frame, warn

ANALYSES = {
    "demand": "demand statistics per host, application and direction (socket calls that moved data)",
    "modulation": "per stream and layer, the modulation columns of magnet stats (Table II and more)",
    "top": "the streams that moved the most bytes",
    "loss": "records and losses per host and time bin",
}


def register(sub) -> None:
    lib = sub.add_parser("library", help="trace libraries: many traces as Parquet, queried as one "
                                         "(DuckDB here, Dask on a cluster)")
    cmds = lib.add_subparsers(dest="library_command", metavar="ACTION", required=True)

    p = cmds.add_parser("add", help="import traces (idempotent; each trace whole or not at all)")
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("--library", required=True, metavar="DIR", help="the library (created if missing)")
    p.add_argument("--app", metavar="NAME", help="the application these traces record (default: the "
                                                 "trace's capture filter, else the process id, else unknown)")
    p.add_argument("--path", metavar="NAME", dest="network_path",
                   help="the network path these traces were captured across, e.g. 60ms-10Mbps "
                        "(the catalogues' path column; default empty)")
    p.set_defaults(func=cmd_add)

    p = cmds.add_parser("list", help="the catalogue: traces (default) or streams")
    p.add_argument("library", metavar="DIR")
    p.add_argument("--streams", action="store_true", help="one row per stream instead of per trace")
    _output_args(p)
    p.set_defaults(func=cmd_list)

    p = cmds.add_parser("query", help="SQL over the views traces, streams, records, event_types (DuckDB)")
    p.add_argument("library", metavar="DIR")
    p.add_argument("sql", metavar="SQL")
    _output_args(p)
    p.set_defaults(func=cmd_query)

    for name, text in ANALYSES.items():
        p = cmds.add_parser(name, help=text)
        p.add_argument("library", metavar="DIR")
        p.add_argument("--engine", choices=["duckdb", "dask"], default="duckdb",
                       help="duckdb (default, here) or dask (a cluster, over the same files)")
        p.add_argument("--scheduler", metavar="ADDRESS",
                       help="Dask scheduler, e.g. tcp://10.0.0.1:8786 (default: local threads)")
        if name == "top":
            p.add_argument("-n", type=int, default=10, help="how many streams (default 10)")
        if name == "loss":
            p.add_argument("--bin", type=float, default=60.0, metavar="SECONDS", help="bin width (default 60)")
        _output_args(p)
        p.set_defaults(func=cmd_analysis, analysis=name)

    p = cmds.add_parser("export-demand", help="the selected streams as a demand set for the replayers")
    _export_args(p, "OUTDIR")
    p.add_argument("--format", choices=["csv", "parquet", "magnet"], default="csv")
    p.add_argument("--all", action="store_true", dest="whole",
                   help="whole-application demands (docs/app-demand.md): every connection of each "
                        "capture, a magnet path capture's two traces together, one file per capture "
                        "(traces with a stream --where selects)")
    p.set_defaults(func=cmd_export_demand)

    p = cmds.add_parser("export-tmix", help="the selected streams as Tmix connection vectors")
    _export_args(p, "FILE")
    p.add_argument("--adu-gap", type=float, default=0.0, metavar="SECONDS",
                   help="merge calls in one direction at most this far apart into one ADU (default 0: "
                        "every call is an ADU)")
    p.add_argument("--concurrent", action="store_true", help="CONC vectors (each side on its own clock) "
                                                             "instead of SEQ (request/response)")
    p.set_defaults(func=cmd_export_tmix)


def _output_args(p) -> None:
    p.add_argument("-o", "--output", metavar="FILE", help="write the table to FILE (.csv, .parquet or .json) "
                                                          "instead of printing it")


def _export_args(p, out: str) -> None:
    p.add_argument("library", metavar="DIR")
    p.add_argument("-o", "--output", required=True, metavar=out)
    p.add_argument("--where", metavar="SQL", help="which streams: a condition on the streams catalogue, "
                                                  "e.g. \"application = 'ftp' AND bytes > 1e6\"")
    p.add_argument("--layer", choices=["sock", "tcp", "ip", "dev"], default="sock",
                   help="sock (the demand, default) or a lower layer's events")


def _library(path: str):
    from ..library import Library
    return Library(path)


def emit(frame, output: str | None) -> None:
    from ..errors import TraceError
    if output is None:
        print_frame(frame)
        return
    kind = output.rsplit(".", 1)[-1].lower()
    writers = {"csv": lambda: frame.to_csv(output, index=False),
               "parquet": lambda: frame.to_parquet(output, index=False),
               "json": lambda: frame.to_json(output, orient="records", lines=True, date_format="iso")}
    if kind not in writers:
        raise TraceError(output, "unknown output type (use .csv, .parquet or .json)")
    private.touch(output)
    writers[kind]()


def cmd_add(args) -> int:
    from ..library import Library
    lib = Library.create(args.library)

    def report(added) -> None:
        if added.status == "present":
            print(f"{added.path}: already in the library (trace {added.trace})", file=sys.stderr)
            return
        print(f"{added.path}: added as trace {added.trace}, {added.records} records in {added.seconds:.2f} s",
              file=sys.stderr)
        if added.truncated_bytes:
            warn(f"{added.path}: truncated final record ({added.truncated_bytes} bytes) left out; "
                 "the whole records before it were imported")
            Status.code = 2

    lib.add(args.traces, application=args.app, progress=report, network_path=args.network_path)
    return 0


def cmd_list(args) -> int:
    lib = _library(args.library)
    if args.streams:
        emit(lib.streams(), args.output)
        return 0
    frame = lib.traces()
    if args.output is None and not frame.empty:
        frame = frame[["trace", "host", "application", "path", "start_time", "records", "streams", "lost",
                       "sock_send_bytes", "sock_recv_bytes", "source"]]
    emit(frame, args.output)
    return 0


def cmd_query(args) -> int:
    emit(_library(args.library).query(args.sql), args.output)
    return 0


def cmd_analysis(args) -> int:
    lib = _library(args.library)
    engine = lib.engine(args.engine, args.scheduler)
    if args.analysis == "demand":
        frame = engine.demand_stats()
    elif args.analysis == "modulation":
        frame = engine.modulation()
    elif args.analysis == "top":
        frame = engine.top_streams(args.n)
    else:
        frame = engine.loss(args.bin)
    emit(frame, args.output)
    return 0


def cmd_export_demand(args) -> int:
    from ..library import export
    lib = _library(args.library)
    if args.whole:
        if args.layer != "sock":
            from ..errors import TraceError
            raise TraceError("--layer", "a whole-application demand is built from the socket layer "
                                        "and the device's TCP flags: --all takes no --layer")
        done = export.export_app_demand(lib.layout, args.output, args.where, args.format)
        print(f"{done.path}: {done.streams} connections as whole-application demands and index.csv "
              f"({done.calls} sends, {done.bytes} bytes)", file=sys.stderr)
        for note in done.notes:
            warn(f"{done.path}: {note}")
        return 0
    done = export.export_demand(lib.layout, args.output, args.where, args.format, args.layer)
    _report_export(done, "demand files and index.csv")
    return 0


def cmd_export_tmix(args) -> int:
    from ..library import export
    lib = _library(args.library)
    done = export.export_tmix(lib.layout, args.output, args.where, args.layer, args.adu_gap, args.concurrent)
    _report_export(done, "connection vectors")
    return 0


def _report_export(done, what: str) -> None:
    print(f"{done.path}: {done.streams} streams as {what} ({done.calls} calls, {done.bytes} bytes)",
          file=sys.stderr)
    for note in done.notes:
        warn(f"{done.path}: {note}")
