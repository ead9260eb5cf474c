"""The `magnet` command: one command, subcommands registered by the modules below."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import TraceError

# Each module has register(subparsers); its parsers set `func` to a function(args) -> int.
COMMAND_MODULES = [
    "magnetlib.cli.trace_cmds",
    "magnetlib.cli.pcap_cmds",
    "magnetlib.cli.replay_cmds",
    "magnetlib.cli.library_cmds",
    "magnetlib.cli.capture_cmds",
    "magnetlib.cli.experiment_cmds",
]


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    parser = argparse.ArgumentParser(
        prog="magnet",
        description="Capture what applications ask of the network, measure how the stack "
                    "modulates it, and replay it.")
    parser.add_argument("--version", action="version", version=f"magnet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .common import Status
    parser = build_parser()
    args = parser.parse_args(argv)
    Status.code = 0
    try:
        return args.func(args) or Status.code
    except TraceError as e:
        print(f"magnet: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (magnet parse | head): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"magnet: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("magnet: interrupted", file=sys.stderr)
        return 130
    except Exception as e:              # a bug of ours, not bad input: say so in one line
        if os.environ.get("MAGNET_DEBUG"):
            raise
        print(f"magnet: internal error: {type(e).__name__}: {e} "
              "(set MAGNET_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 1


def parse_main() -> int:
    """`magnet-parse`, the paper's name for `magnet parse`."""
    return main(["parse", *sys.argv[1:]])
