"""magnet path: real programs across an emulated path (replay.path), from the command line."""
from __future__ import annotations

import argparse
import sys

from magnetlib import knobs
from magnetlib.errors import UsageError

USAGE_EXAMPLES = """examples:
  sudo magnet path --rate 10Mbps --delay 30ms --server 'python3 -m http.server 8000' -- \\
      curl -o /dev/null http://server:8000/big.file
  sudo magnet path --rate 2Mbps --loss 1% --capture t -- sh     # a shell; t.client.magnet, t.server.magnet
"""


# The knobs of scenario.Tcp that apply to programs magnet did not write (replay.path.linux_tcp).
TCP_KNOBS = ["cc", "nagle", "sack", "timestamps", "window_scaling", "read_size"]


def register(sub) -> None:
    from . import scenario
    p = sub.add_parser(
        "path", help="run real programs across an emulated path (client and server namespaces)",
        description="Start the server command in the server's network namespace, wait until it "
                    "listens, then run the client command (default: a shell) in the client's, the "
                    "two joined by the link emulator with the path's rate, delay, queue, loss, "
                    "jitter, hops, MTU and cross traffic, both directions alike by default "
                    "(--duplex on). The client finds the server at $MAGNET_SERVER, or by the host "
                    "name `server`. Prints the path applied and the RTT it measured; the exit "
                    "status is the client's. Needs root.",
        epilog=USAGE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    scenario.add_arguments(p, chain=False, path_defaults={"duplex": True}, tcp_knobs=TCP_KNOBS,
                           path_title="path", tcp_title="TCP (sysctls of both namespaces where Linux has one)")
    g = p.add_argument_group("programs")
    g.add_argument("--server", metavar="'CMD'", help="a shell command run in the server's namespace")
    g.add_argument("--ready", metavar="PORT",
                   help="the server is ready once it listens on this TCP port (udp:PORT: once it "
                        "has bound this UDP port; default: once it listens on any TCP port)")
    g.add_argument("--ready-timeout", type=knobs.arg(knobs.duration), default=30_000_000_000,
                   metavar="TIME", help="give up on the server after this long (default 30s)")
    g.add_argument("--user", help="run the programs as this user (default: the one who ran sudo, "
                                  "else the current one)")
    g.add_argument("--server-user", help="run the server as this user (default: as --user; "
                                         "root for servers that need it)")
    g = p.add_argument_group("records")
    g.add_argument("--capture", metavar="T", help="record both sides: T.client.magnet and "
                                                 "T.server.magnet (every layer, BPF)")
    g.add_argument("--preload", action="store_true",
                   help="with --capture: the socket calls only, through the LD_PRELOAD shim")
    g.add_argument("--log", metavar="DIR", help="linkem's per-packet log of both directions into DIR "
                                               "(magnet linklog DIR summarises and plots it)")
    g.add_argument("--no-rt", dest="realtime", action="store_false",
                   help="run the link emulator without SCHED_FIFO")
    p.add_argument("command", nargs="*", metavar="-- CMD ARGS",
                   help="the client command (default: $SHELL)")
    p.set_defaults(func=cmd_path, honours_signals=True)

    p = sub.add_parser("linklog", help="summarise or plot linkem's per-packet link log (--log DIR)",
                       description="One line per direction of a link log written by `magnet path "
                                   "--log DIR`: packets, bytes, drops by reason, the queue's peak, "
                                   "queueing delay (mean, p99), throughput; --plot draws throughput and "
                                   "queueing delay over time (mahimahi's mm-graph).")
    p.add_argument("folder", metavar="DIR")
    p.add_argument("--plot", metavar="FILE.png", help="throughput and queueing delay over time")
    p.add_argument("--bin", type=knobs.arg(knobs.duration), metavar="TIME",
                   help="throughput bins (default: 1/200 of the log's span, at least 10ms)")
    p.set_defaults(func=cmd_linklog)


def cmd_path(args) -> int:
    from . import path
    from .scenario import from_args
    if args.preload and not args.capture:
        raise UsageError("--preload", "records with --capture T only")
    try:
        chain = from_args(args).replace(stacks=1)
    except ValueError as e:
        raise UsageError("magnet path", str(e)) from None
    try:
        run = path.run(chain, args.command, args.server, ready_port=args.ready,
                       ready_timeout_s=args.ready_timeout / 1e9, capture=args.capture,
                       preload_shim=args.preload, log=args.log, client_user=args.user,
                       server_user=args.server_user,
                       realtime=args.realtime)
    except path.Interrupted as e:
        print(f"magnet: interrupted ({e}); everything torn down", file=sys.stderr)
        return 128 + e.signum
    return run.status


def cmd_linklog(args) -> int:
    from . import linklog
    log = linklog.read(args.folder)
    if log.path.get("description"):
        print(f"path: {log.path['description']}")
    for line in log.summary_lines():
        print(line)
    if args.plot:
        print(f"wrote {log.plot(args.plot, args.bin / 1e9 if args.bin else None)}")
    return 0
