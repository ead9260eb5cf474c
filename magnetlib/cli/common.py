"""Helpers shared by the subcommands: opening inputs, reporting, formatting."""
from __future__ import annotations

import sys

import numpy as np

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
    """A DataFrame as an aligned text table (numbers formatted here, other columns such
    as dates as pandas writes them; anything missing reads NaN)."""
    print_table({str(name): _column(col) for name, col in frame.items()}, floatfmt)


def _column(col):
    if isinstance(col.dtype, np.dtype) and col.dtype.kind in "iuf":
        return col.to_numpy()
    texts = col.astype(str).to_numpy(dtype=object)
    texts[col.isna().to_numpy()] = "NaN"
    return texts


def print_table(columns: dict, floatfmt: str = "{:.6g}") -> None:
    """Columns (name -> array, all one length) as an aligned text table: values right-
    justified under their names, floats in `floatfmt`."""
    cells = [[name, *_texts(values, floatfmt)] for name, values in columns.items()]
    if not cells or len(cells[0]) == 1:
        print("(no rows)")
        return
    widths = [max(map(len, column)) for column in cells]
    for row in zip(*cells):
        print("  ".join(text.rjust(width) for text, width in zip(row, widths)))


def _texts(values, floatfmt: str) -> list[str]:
    values = np.asarray(values)
    if values.dtype.kind == "f":
        return ["NaN" if v != v else floatfmt.format(v) for v in values.tolist()]
    return [str(v) for v in values.tolist()]
