"""magnet pcap-info | from-pcap | to-pcap | compare: tcpdump captures next to traces.

Each command imports magnetlib.pcap itself: registering these commands does not load
it (nor dpkt), so every other magnet command starts 50 ms sooner."""
from __future__ import annotations

import sys

import numpy as np

from .common import add_stream_arg, human_bytes, open_checked, print_frame, Status, warn

TABLE_COLUMNS = {"stack": "", "events": "events", "bytes": "bytes", "mean_size": "mean size",
                 "p50_size": "p50 size", "cv_size": "CV size", "mean_spacing_s": "mean gap s",
                 "p50_spacing_s": "p50 gap s", "cv_spacing": "CV gap", "throughput_bps": "Mb/s",
                 "bandwidth_vs_app_pct": "vs app %"}


def register(sub) -> None:
    p = sub.add_parser("pcap-info", help="what a pcap/pcapng holds: packets, flows, problems, offload")
    p.add_argument("pcap")
    _reader_args(p)
    p.set_defaults(func=cmd_pcap_info)

    p = sub.add_parser("from-pcap", help="a pcap's TCP/UDP packets as a trace of DEV_SEND/DEV_RECV events")
    p.add_argument("pcap")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--local", metavar="ADDR", help="the capturing host's address (default: inferred, "
                                                   "the address in the most flows)")
    p.add_argument("--no-ext", action="store_true", help="24-byte records without addresses, ports, seq")
    _reader_args(p)
    p.set_defaults(func=cmd_from_pcap)

    p = sub.add_parser("to-pcap", help="a trace's wire-level events as a pcap (zero payloads) for Wireshark")
    p.add_argument("trace")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--layer", choices=["dev", "ip", "tcp"], help="events to write (default: the lowest present)")
    p.add_argument("--snaplen", type=int, default=65535, help="bytes kept of each packet (default 65535)")
    p.add_argument("--microseconds", action="store_true", help="a microsecond pcap (default nanosecond)")
    p.set_defaults(func=cmd_to_pcap)

    p = sub.add_parser("compare", help="application demand (trace) next to the wire (pcap), per stream")
    p.add_argument("trace")
    p.add_argument("pcap")
    add_stream_arg(p)
    p.add_argument("--plot", metavar="FILE.png", help="write one second of writes and wire packets (Fig. 8)")
    p.add_argument("--plot-start", type=float, default=0.0, metavar="S",
                   help="where the plotted second starts, seconds into the stream (default 0)")
    _reader_args(p)
    p.set_defaults(func=cmd_compare)


def _reader_args(p) -> None:
    p.add_argument("--engine", choices=["auto", "fast", "dpkt"], default="auto",
                   help="auto: the vectorised reader for classic pcap, dpkt otherwise")
    p.add_argument("--mtu", type=int, help="link MTU for offload detection (default 1500, loopback 65536)")


def stream_pcap(args, take) -> tuple[pcap.PcapFile, pcap.Summary]:
    """Read a capture a chunk at a time, handing each chunk to `take`; report what could not
    be read (status 2), malformed packets and offload artefacts.  Returns the capture's
    file-level facts (no packets) and its summary."""
    from .. import pcap
    packets = pcap.stream(args.pcap, engine=args.engine)
    summary = pcap.Summary(args.mtu)
    for chunk in packets:
        summary.add(chunk)
        take(chunk)
    report_pcap(packets.file, summary)
    return packets.file, summary


def report_pcap(cap: pcap.PcapFile, summary: pcap.Summary) -> None:
    for problem in cap.problems:
        warn(f"{cap.path}: {problem}")
        Status.code = 2
    if summary.malformed:
        counts = summary.malformed_counts()
        warn(f"{cap.path}: {summary.malformed} malformed packets skipped "
             f"({', '.join(f'{k} {v}' for k, v in counts.items())})")
    message = summary.oversize(cap).message()
    if message:
        warn(f"{cap.path}: {message}")


# -------------------------------------------------------------- pcap-info ---
def cmd_pcap_info(args) -> int:
    from .. import pcap
    flows = pcap.flows.FlowTable()
    cap, s = stream_pcap(args, flows.add)
    fmt_name = cap.format + (f", {'nanosecond' if cap.nanosecond else 'microsecond'} timestamps"
                             if cap.format == "pcap" else "")
    rows = [("file", cap.path), ("format", f"{fmt_name}, {'little' if cap.byteorder == '<' else 'big'}-endian"),
            ("link", cap.link_names()), ("snaplen", str(cap.snaplen)),
            ("packets", f"{s.packets} ({human_bytes(float(s.wire_bytes))} on the wire)"),
            ("duration", f"{s.duration_ns / 1e9:.6f} s"),
            ("IP", f"{s.usable_ip} usable (IPv4 {s.ipv4}, IPv6 {s.ipv6})"),
            ("flows", f"{len(flows)} TCP/UDP"),
            ("reader", f"{cap.engine}" + (f" ({cap.fallback} packets decoded by dpkt)" if cap.engine == "fast" else ""))]
    counts = s.flag_counts()
    if counts:
        rows.append(("flagged", ", ".join(f"{k} {v}" for k, v in counts.items())))
    if cap.interface_drops:
        rows.append(("kernel drops", str(sum(cap.interface_drops.values()))))
    for problem in cap.problems:
        rows.append(("problem", problem))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    if len(flows):
        print()
        t = flows.table().drop(columns=["first_ns", "last_ns"]).head(20)
        print_frame(t)
        if len(flows) > 20:
            print(f"... and {len(flows) - 20} more flows")
    return 0


# -------------------------------------------------------------- from-pcap ---
def cmd_from_pcap(args) -> int:
    from .. import pcap
    local = None
    if args.local:
        try:
            local = pcap.convert.parse_address(args.local)
        except ValueError as e:
            raise SystemExit(f"magnet: --local: {e}") from None
    first = pcap.convert.PcapFlows()
    cap, _ = stream_pcap(args, first.add)
    out = pcap.convert.write_from_pcap(cap, first, pcap.stream(args.pcap, engine=args.engine), args.output,
                                       local=local, ext=not args.no_ext)
    print(f"{args.output}: {out.count} DEV_SEND/DEV_RECV records from {out.flows} flows; local host "
          f"{out.local.name} ({out.local.how}); {out.skipped} packets that are not whole TCP/UDP "
          f"packets left out" + (f"; {out.foreign_flows} flows without the local host, directed "
                                 "from their initiator" if out.foreign_flows else ""), file=sys.stderr)
    return 0


# ---------------------------------------------------------------- to-pcap ---
def cmd_to_pcap(args) -> int:
    from .. import pcap
    trace = open_checked(args.trace)
    packets, layer, placeholders = pcap.convert.to_packets(trace, args.layer)
    pcap.writer.write_pcap(args.output, packets, snaplen=args.snaplen, nanosecond=not args.microseconds)
    print(f"{args.output}: {len(packets)} packets from the trace's {layer.upper()} events"
          + ("; addresses and ports are placeholders (10.0.0.1 is the traced host) where the "
             "trace has no extended data" if placeholders else ""), file=sys.stderr)
    return 0


# ---------------------------------------------------------------- compare ---
def cmd_compare(args) -> int:
    from .. import pcap
    trace = open_checked(args.trace)
    first = pcap.compare.WireFlows()
    stream_pcap(args, first.add)
    result = pcap.compare.compare(trace, lambda: pcap.stream(args.pcap, engine=args.engine), first)
    print(f"clock: {result.clock_note}")
    shown = [s for s in result.streams if args.stream is None or s.sockid == args.stream]
    if not result.streams and not result.unmatched_streams:
        print(f"magnet: {args.trace}: no stream with application calls (SOCK_SEND/SOCK_RECV) to compare",
              file=sys.stderr)
        return 2
    if not shown:
        which = "no stream" if args.stream is None else f"stream {args.stream:#x}"
        print(f"magnet: {args.trace}: {which} matched a TCP flow of {args.pcap}", file=sys.stderr)
        return 2
    for s in shown:
        _print_stream(s, result.flow_table)
    if result.unmatched_streams:
        print(f"\nstreams without a flow: {' '.join(f'{sid:#x}' for sid in result.unmatched_streams)}")
    if result.unmatched_flows:
        print(f"TCP flows without a stream: {' '.join(map(str, result.unmatched_flows))}")
    if args.plot:
        path = pcap.plot.fig8(shown[0], args.plot, start_s=args.plot_start)
        print(f"\nplot: {path} (stream {shown[0].sockid:#x})")
    return 0


def _print_stream(s, flow_table) -> None:
    f = flow_table.loc[s.flow]
    a, b = f"{f['a_addr']}:{f['a_port']}", f"{f['b_addr']}:{f['b_port']}"
    local, remote = (a, b) if s.local_side == 0 else (b, a)
    print(f"\n== stream {s.sockid:#x} <-> flow {s.flow}: {local} -> {remote} (matched by {s.how})")
    for direction in ("send", "recv"):
        if not len(s.app[direction].size) and not len(s.wire[direction].size):
            continue
        print(f"\n-- {direction}: application vs wire (Table II columns)")
        table = s.table(direction)[list(TABLE_COLUMNS)].rename(columns=TABLE_COLUMNS)
        table["Mb/s"] = table["Mb/s"] / 1e6
        print_frame(table)
        print("\n   distributions")
        print_frame(s.distributions(direction))
        lag = s.lag(direction)
        what = "write -> wire" if direction == "send" else "wire -> read"
        for name in ("first", "last"):
            v = lag[name][~np.isnan(lag[name])] / 1e6
            if len(v):
                print(f"   lag {what}, {name} byte: p50 {np.median(v):.3f} ms, p95 "
                      f"{np.quantile(v, 0.95):.3f} ms, max {v.max():.3f} ms ({len(v)} calls)")
        missing = int(np.isnan(lag["first"]).sum())
        extra = s.unmatched(direction)
        extra["app calls with no byte on the wire"] = missing
        print("   in one but not the other: " + ", ".join(f"{k} {v}" for k, v in extra.items()))
        dev = s.device.get(direction)
        if dev:
            print(f"   the trace's DEV_{direction.upper()} events vs pcap packets (paired by {dev['by']}): "
                  + ", ".join(f"{k} {v}" for k, v in dev.items() if k != "by"))
