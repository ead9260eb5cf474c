"""The `magnet` command: one command, its subcommands registered by every layer.

The library does not import the layers above it (capture, replay, experiments):
each layer names a register(subparsers) function in the `magnet.commands`
entry-point group (setup.cfg), and the parsers it adds set `func` to a
function(args) -> int.
"""
from __future__ import annotations

import argparse
import os
import sys

from .. import signals
from ..errors import MagnetError

COMMAND_GROUP = "magnet.commands"
# Optional dependencies, by the extra (setup.cfg) that installs them.
EXTRAS = {"pyarrow": "parquet", "duckdb": "library", "dask": "library", "distributed": "library"}
# The order of the subcommands in --help: the library's, then the layers upward.
ORDER = ["trace", "pcap", "library", "capture", "replay", "experiment"]


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (and exit status 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def registrations() -> list:
    """The register functions of every installed layer, lowest layer first."""
    from importlib.metadata import entry_points
    found = sorted(entry_points(group=COMMAND_GROUP),
                   key=lambda ep: (ORDER.index(ep.name) if ep.name in ORDER else len(ORDER), ep.name))
    return [ep.load() for ep in found]


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    parser = Parser(
        prog="magnet",
        description="Capture what applications ask of the network, measure how the stack "
                    "modulates it, and replay it.")
    parser.add_argument("--version", action="version", version=f"magnet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in registrations():
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Signals are recorded from here on (magnetlib.signals): one that comes while
    magnet loads is kept.  A command whose parser sets honours_signals checks for
    them itself; the others run with the handlers magnet started with."""
    try:
        with signals.honoured():
            args = build_parser().parse_args(argv)
            if getattr(args, "honours_signals", False):
                signals.check()                  # one that came while magnet loaded: nothing starts
                return run(args)
            with signals.suspended():
                return run(args)
    except KeyboardInterrupt:
        print("magnet: interrupted", file=sys.stderr)
        return 130


def run(args) -> int:
    """The command, its errors as one line and an exit status."""
    from .common import Status
    from ..scan import keep_freed_memory
    Status.code = 0
    keep_freed_memory()
    try:
        return args.func(args) or Status.code
    except MagnetError as e:
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
    except ModuleNotFoundError as e:
        extra = EXTRAS.get((e.name or "").split(".")[0])
        if extra is None:
            raise
        extra = "library" if args.command == "library" else extra
        print(f"magnet: this command needs {e.name}: pip install 'magnet[{extra}]'", file=sys.stderr)
        return 2
    except Exception as e:              # a bug of ours, not bad input: say so in one line
        if os.environ.get("MAGNET_DEBUG"):
            raise
        print(f"magnet: internal error: {type(e).__name__}: {e} "
              "(set MAGNET_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 1


def parse_main() -> int:
    """`magnet-parse`, the paper's name for `magnet parse`."""
    return main(["parse", *sys.argv[1:]])
