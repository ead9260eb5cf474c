"""Helpers shared by the subcommands: opening inputs, reporting, formatting."""
from __future__ import annotations

import sys

from .. import knobs
from ..trace import Trace


class Status:
    """The exit status of a command that may finish with a reported problem."""
    code = 0


def warn(message: str) -> None:
    print(f"magnet: {message}", file=sys.stderr)


def open_checked(path: str) -> Trace:
    """Open and check a trace; a truncated last record is reported, and the command
    still runs on the whole records but ends with status 2."""
    trace = Trace(path).check()
    if trace.truncated_bytes:
        warn(f"{path}: truncated final record ({trace.truncated_bytes} bytes) ignored; "
             f"using the {len(trace)} whole records before it")
        Status.code = 2
    return trace


def add_stream_arg(parser) -> None:
    parser.add_argument("--stream", type=parse_sockid, metavar="ID",
                        help="one stream (sockid, decimal or 0x hex); default: all")


parse_sockid = knobs.arg(knobs.stream)     # stream ids: 0xb0 or 176, printed as 0xb0 everywhere


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def print_frame(frame, floatfmt: str = "{:.6g}") -> None:
    """A DataFrame as an aligned text table."""
    if frame.empty:
        print("(no rows)")
        return
    print(frame.to_string(index=False, float_format=floatfmt.format))
