"""magnet info | parse | demand | stats | synth: the trace subcommands."""
from __future__ import annotations

import sys
from datetime import datetime, timezone

import numpy as np

from .. import demand as demand_mod
from .. import format as fmt
from .. import knobs, metrics, synth
from ..accumulate import Index
from ..errors import TraceError
from ..format import Event, ExtValid
from ..trace import NATIVE, event_names, format_addresses
from .common import add_stream_arg, human_bytes, open_checked, print_frame, print_table

PARSE_CHUNK = 1 << 18


def register(sub) -> None:
    p = sub.add_parser("info", help="what a trace holds: format, clock, streams, events, loss")
    p.add_argument("trace")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("parse", help="the records as a tab-delimited table (magnet-parse)")
    p.add_argument("trace")
    add_stream_arg(p)
    p.add_argument("--events", help="comma-separated event names, e.g. SOCK_SEND,DEV_SEND")
    p.add_argument("--header-records", action="store_true", help="include SYSINFO and META records")
    p.set_defaults(func=cmd_parse)

    p = sub.add_parser("demand", help="a stream's application demand (SOCK_SEND/SOCK_RECV), "
                                      "a lower layer's series, or (--all) every connection's",
                       description="The demand of one stream, or with --all the whole application's: "
                                   "every connection, who opened it, each side's writes with what it "
                                   "waited for and its think time, how it closed (docs/app-demand.md). "
                                   "--all takes one trace, a client's and a server's trace (magnet path "
                                   "--capture T: T.client.magnet T.server.magnet), or their prefix T.")
    p.add_argument("trace", nargs="+", help="a trace; with --all also CLIENT SERVER or a path capture's prefix")
    add_stream_arg(p)
    p.add_argument("--all", action="store_true",
                   help="every connection: the whole-application demand (docs/app-demand.md)")
    p.add_argument("--after-within", type=knobs.arg(knobs.duration), default=None, metavar="TIME",
                   help="--all: a connection opened at most this long after its process read the last "
                        "byte of an earlier one (and closed it) opens after it in a replay (default 1s; "
                        "0: never)")
    p.add_argument("--direction", choices=["send", "recv", "both"], default="both")
    p.add_argument("--layer", choices=fmt.LAYERS, default="sock",
                   help="sock (the demand, default) or a lower layer's post-modulation series")
    p.add_argument("-o", "--output", required=True, help="OUT.csv, OUT.parquet or OUT.magnet")
    p.set_defaults(func=cmd_demand)

    p = sub.add_parser("stats", help="the modulation table: per stream and layer, sizes and spacing")
    p.add_argument("trace")
    add_stream_arg(p)
    p.add_argument("--all-events", action="store_true",
                   help="count events that moved no data (pure ACKs, EOF reads) too")
    p.add_argument("--csv", metavar="FILE", help="also write the full table as CSV")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("synth", help="generate a synthetic trace (workload + a simple wire model)")
    p.add_argument("workload", choices=sorted(synth.WORKLOADS))
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--duration", type=float, default=30.0, help="seconds (default 30)")
    p.add_argument("--mss", type=int, default=1448)
    p.add_argument("--rate", type=float, default=100e6, help="modelled link rate, bit/s")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--byteorder", choices=["native", "little", "big"], default="native")
    p.set_defaults(func=cmd_synth)


# ------------------------------------------------------------------- info ---
def cmd_info(args) -> int:
    trace = open_checked(args.trace)
    m, s = trace.meta, trace.scan
    order = {"<": "little-endian", ">": "big-endian"}[trace.byteorder]
    rows = [
        ("file", trace.path),
        ("byte order", f"{order} ({'byte-swapped on this machine' if trace.swapped else 'native'})"),
        ("format", f"version {m.version}, {m.record_size}-byte records "
                   f"({'with' if trace.has_ext else 'no'} extended data)"),
        ("clock", f"{m.clock_name}, {m.clock_khz} kHz" +
                  (f", {len(s.sysinfo_positions) - 1} clock change(s)" if len(s.sysinfo_positions) > 1 else "")),
    ]
    if m.wall_anchor_ns is not None:
        start = datetime.fromtimestamp(m.wall_anchor_ns / 1e9, tz=timezone.utc)
        rows.append(("start", start.isoformat(timespec="microseconds")))
    rows.append(("duration", f"{trace.duration_ns / 1e9:.6f} s"))
    for label, value in (("host", m.hostname), ("host id", None if m.host_id is None else f"{m.host_id:#x}"),
                         ("producer", m.producer), ("capture method", m.capture_method),
                         ("kernel", m.kernel), ("filter", m.filter)):
        if value is not None:
            rows.append((label, value))
    rows += _capture_rows(m)
    rows.append(("records", f"{s.records} (+{trace.header_len} header)"))
    rows.append(("streams", str(len(trace.stream_ids()))))
    rows.append(("lost", f"{s.lost} records (reported by {s.lost_records} LOST records)"))
    if s.ended_early:
        rows.append(("ended early", "yes: the capture stopped before it was asked to "
                                    "(its file could not be written, or it was killed)"))
    if s.backsteps:
        rows.append(("reordered", f"{s.backsteps} records earlier than their predecessor "
                                  f"(at most {trace.ticks_to_ns(s.max_backstep_ticks) / 1e3:.1f} us)"))
    if trace.truncated_bytes:
        rows.append(("truncated", f"{trace.truncated_bytes} trailing bytes ignored"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    print()
    _print_event_table(s)
    return 0


def _capture_rows(m) -> list[tuple[str, str]]:
    parts = []
    if m.buffer_bytes is not None:
        parts.append(f"buffer {human_bytes(m.buffer_bytes)}")
    if m.drain_delay_us is not None:
        parts.append(f"drain every {m.drain_delay_us / 1000:g} ms")
    rows = [("capture", ", ".join(parts))] if parts else []
    if m.event_mask is not None:
        names = [ev.name for ev, spec in fmt.EVENT_SPEC.items()
                 if spec["bit"] and m.event_mask >> spec["bit"] & 1]
        rows.append(("events", " ".join(names) or "none"))
    if m.ext_mask is not None:
        rows.append(("extended", " ".join(v.name for v in ExtValid if m.ext_mask & v) or "none"))
    return rows


def _print_event_table(s) -> None:
    print(f"{'event':<14}{'records':>12}{'bytes':>16}{'errors':>9}{'zero-size':>11}")
    for ev in sorted(s.counts):
        if ev in fmt.SCHED_EVENTS:             # size is a CPU number: no bytes, errors or zero sizes
            nbytes, errors, zero = "-", "-", "-"
        else:
            nbytes, errors, zero = s.bytes[ev] if ev != Event.LOST else 0, s.errors[ev], s.zero_size[ev]
        print(f"{Event(ev).name:<14}{s.counts[ev]:>12}{nbytes:>16}{errors:>9}{zero:>11}")


# ------------------------------------------------------------------ parse ---
def cmd_parse(args) -> int:
    import pandas as pd
    trace = open_checked(args.trace)
    codes = None
    if args.events:
        try:
            codes = [Event[name.strip().upper()] for name in args.events.split(",")]
        except KeyError as e:
            print(f"magnet: unknown event name {e.args[0]} "
                  f"(known: {', '.join(ev.name for ev in Event)})", file=sys.stderr)
            return 2
    start = 0 if args.header_records else trace.header_len
    ext = [f.name for f in fmt.EXT_FIELDS] if trace.has_ext else []
    out, first = sys.stdout, True
    for lo, hi in trace.chunks(start=start, size=PARSE_CHUNK):
        pos = np.arange(lo, hi)
        if codes is not None or args.stream is not None:
            pos = trace.select(codes, args.stream, start=lo, stop=hi)
        cols = {"timestamp_ns": trace.ns_at(pos), "sockid": trace.column_at("sockid", pos),
                "event": event_names(trace.column_at("event", pos)), "size": trace.column_at("size", pos)}
        for name in ext:
            cols[name] = (format_addresses(np.asarray(trace.records[name][pos]))
                          if name in ("saddr", "daddr") else trace.column_at(name, pos))
        if len(pos) or first:
            pd.DataFrame(cols).to_csv(out, sep="\t", index=False, header=first, lineterminator="\n")
            first = False
    out.flush()
    return 0


# ----------------------------------------------------------------- demand ---
def cmd_demand(args) -> int:
    if args.all:
        return _demand_all(args)
    if len(args.trace) > 1:
        raise TraceError(" ".join(args.trace), "one trace (several only with --all)")
    if args.after_within is not None:
        raise TraceError("--after-within", "only with --all")
    trace = open_checked(args.trace[0])
    left, written = demand_mod.Left(), _Written()
    with demand_mod.DemandWriter(args.output) as out:
        for piece in demand_mod.pieces(trace, args.stream, args.direction, args.layer, left):
            if len(piece):
                out.write(written.relative(piece))
        if not written.calls:
            out.abort()
            which = "any stream" if args.stream is None else f"stream {knobs.fmt_stream(args.stream)}"
            print(f"magnet: {args.trace[0]}: {which} has no {args.layer.upper()} events that moved data",
                  file=sys.stderr)
            return 2
    print(f"{args.output}: {written.calls} events, {written.bytes} bytes over {written.duration_ns / 1e9:.6f} s "
          f"from {len(written.streams)} stream(s); left out {left.errors} failed and "
          f"{left.zero} zero-byte calls", file=sys.stderr)
    return 0


def _demand_all(args) -> int:
    """magnet demand T [T2] --all -o D: the whole-application demand."""
    from .. import app_demand, connections
    for flag, value in (("--stream", args.stream), ("--direction", args.direction != "both" or None),
                        ("--layer", args.layer != "sock" or None)):
        if value is not None:
            raise TraceError(flag, "not with --all (it takes every connection's socket calls)")
    paths = connections.pair_paths(args.trace[0]) if len(args.trace) == 1 else None
    paths = paths or args.trace
    app_demand.kind_of(args.output)
    within = connections.AFTER_WITHIN_NS if args.after_within is None else args.after_within
    d = connections.build(paths, after_within_ns=within)
    app_demand.validate(d, " and ".join(paths))
    app_demand.write(d, args.output)
    for note in d.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"{args.output}: {d.summary()}, {len(d)} rows", file=sys.stderr)
    return 0


class _Written:
    """What a demand file holds so far; times made relative to its first call."""

    def __init__(self):
        self.calls = self.bytes = self.duration_ns = 0
        self.start_ns = None
        self.streams = Index()

    def relative(self, piece):
        if self.start_ns is None:
            self.start_ns = int(piece.time_ns[0])
        piece.time_ns = piece.time_ns - self.start_ns
        self.calls += len(piece)
        self.bytes += piece.total_bytes
        self.duration_ns = int(piece.time_ns[-1])
        self.streams.of(piece.sockid)
        return piece


# ------------------------------------------------------------------ stats ---
STATS_COLUMNS = {"sockid": "stream", "layer": "layer", "direction": "dir", "events": "events",
                 "bytes": "bytes", "mean_size": "mean size", "p50_size": "p50 size",
                 "mean_spacing_s": "mean gap s", "p50_spacing_s": "p50 gap s",
                 "cv_spacing": "CV gap", "throughput_bps": "Mb/s"}


def cmd_stats(args) -> int:
    trace = open_checked(args.trace)
    table = metrics.modulation_columns(trace, args.stream, data_only=not args.all_events)
    if args.csv:
        import pandas as pd
        pd.DataFrame(table).to_csv(args.csv, index=False)
    columns = dict(STATS_COLUMNS)
    if args.all_events:                   # failed calls: counted as events, never as bytes
        columns = {k: v for k, v in [*list(columns.items())[:4], ("errors", "errors"),
                                     *list(columns.items())[4:]]}
    shown = {label: table[name] for name, label in columns.items()}
    shown["Mb/s"] = shown["Mb/s"] / 1e6
    shown["stream"] = [knobs.fmt_stream(s) for s in shown["stream"]]
    print_table(shown)
    if trace.scan.lost:
        print(f"\nnote: {trace.scan.lost} records were lost during capture; "
              "these figures undercount around the LOST records")
    if trace.scan.ended_early:
        print("\nnote: the capture ended early (stopped before it was asked to); "
              "these figures stop where it did")
    return 0


# ------------------------------------------------------------------ synth ---
def cmd_synth(args) -> int:
    order = {"native": "=", "little": "<", "big": ">"}[args.byteorder]
    params = {} if args.workload == "bulk" else {"duration_s": args.duration}
    path = synth.write_synthetic(args.output, args.workload, mss=args.mss, rate_bps=args.rate,
                                 byteorder=order, seed=args.seed, **params)
    print(f"wrote {path} (synthetic {args.workload}, wire modelled at {args.rate / 1e6:g} Mb/s, "
          f"MSS {args.mss}, {'native' if order in ('=', NATIVE) else args.byteorder}-endian)",
          file=sys.stderr)
    return 0
