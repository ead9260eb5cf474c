"""What a replayer is asked to replay: one stream's send demand, from a file or a synthetic workload.

    DEMAND  x.magnet [--stream ID]     a magnet trace's SOCK_SEND records (a capture or `magnet demand`)
            x.csv / x.parquet          a demand table (`magnet demand -o x.csv`)
            synth:ftp, synth:ftp-paper, synth:mp3, ...   a workload of magnetlib.synth
"""
from __future__ import annotations

import sys

import numpy as np

import magnetlib
from magnetlib import demand as demand_mod
from magnetlib import synth
from magnetlib.demand import Demand
from magnetlib.errors import TraceError

SYNTH_PREFIX = "synth:"


def load_demand(spec: str, stream: int | None = None, duration_s: float = 30.0,
                seed: int = 0, directions: str = "send") -> Demand:
    """The demand of one stream, validated; TraceError names the input and the problem.

    directions "send": its writes only; "both": its reads too (a request/response
    replay: what the peer sent), times relative to the stream's first call.
    """
    if spec.startswith(SYNTH_PREFIX):
        return _synthetic(spec, duration_s, seed)
    d = demand_mod.read_demand(spec, stream)
    d = d.only("send") if directions == "send" else d
    _note_loss(spec)
    if not (d.direction == demand_mod.SEND).any():
        raise TraceError(spec, "no send-direction demand (SOCK_SEND) to replay")
    streams = np.unique(d.sockid)
    if len(streams) > 1:
        ids = ", ".join(f"{int(s):#x}" for s in streams[:4]) + (", ..." if len(streams) > 4 else "")
        raise TraceError(spec, f"demand of {len(streams)} streams ({ids}): choose one with --stream")
    return Demand(d.time_ns - d.time_ns[0], d.size, d.direction, d.sockid, errors=d.errors, zero=d.zero)


def _note_loss(path: str) -> None:
    """A capture that lost records gives a demand that may lack writes: say so."""
    if not path.lower().endswith((".magnet", ".trace")):
        return
    with magnetlib.open(path) as trace:
        lost = trace.scan.lost
    if lost:
        print(f"magnet: note: {path}: the capture lost {lost} records; the demand may lack writes",
              file=sys.stderr)


def _synthetic(spec: str, duration_s: float, seed: int) -> Demand:
    name = spec[len(SYNTH_PREFIX):].replace("_", "-")
    if name not in synth.WORKLOADS:
        raise TraceError(spec, f"unknown workload {name!r} (known: {', '.join(sorted(synth.WORKLOADS))})")
    if name == "bulk":
        return synth.bulk()
    params = {"duration_s": duration_s}
    if name in ("ftp", "ftp-slow", "ftp-paper", "ftp-variable", "mp3"):
        params["seed"] = seed
    return synth.WORKLOADS[name](**params)


# The compact form is a magnet trace: a write's size is a signed 32-bit field.
COMPACT_MAX_WRITE = 2**31 - 1


def write_compact(demand: Demand, path: str, source: str | None = None) -> str:
    """The demand as the compact binary form the replayers read (one stream, sockid 1).

    A write larger than the form holds is refused (TraceError naming `source`,
    default `path`), never cut to its low 32 bits.
    """
    too_big = np.flatnonzero(demand.size > COMPACT_MAX_WRITE)
    if len(too_big):
        i = int(too_big[0])
        raise TraceError(source or path, f"write {i + 1} is {int(demand.size[i])} bytes; the compact "
                                         f"demand (a magnet trace) holds at most {COMPACT_MAX_WRITE} "
                                         "bytes a write")
    one = Demand.from_arrays(demand.time_ns - demand.time_ns[0], demand.size, demand.direction)
    return demand_mod.write_demand(one, path)
