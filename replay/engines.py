"""One replay API for every engine: a demand and a Scenario in, an outcome per stack out.

    outcome = engines.run("ns-3", demand, scenario, "out/ns3")      # or "tcp"
    outcome.series()       # Table II's rows: the application, then each stack's wire
    outcome.table()        # Table II with each stack's RTT, retransmissions and segmentation
    engines.unavailable("tcp")    # why an engine cannot run here (None: it can)

Both engines chain scenario.stacks TCP stacks over the scenario's paths and
report the same things, so a study, the CLI and the demo run either without
knowing which.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from magnetlib import metrics, segmentation
from magnetlib.demand import SEND, Demand
from magnetlib.errors import MagnetError, TraceError

from .scenario import Scenario

ENGINES = ("ns-3", "tcp")
Progress = Callable[[str], None]


@dataclass
class StackResult:
    """What stack k put on its wire (data segments, times on the first stack's clock) and
    what its TCP says of itself."""
    k: int
    ns: np.ndarray
    size: np.ndarray
    new_size: np.ndarray | None = None      # bytes never sent before, per segment (None: unknown)
    rtt_ns: float | None = None              # the sender's smoothed RTT, mean over the run
    retrans_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    cross_lead_ns: int | None = None         # cross traffic's start -> the demand's time zero

    @property
    def fresh(self) -> np.ndarray:
        """New-data sizes: what the next stack of an offline chain takes as its writes."""
        return self.size if self.new_size is None else self.new_size


@dataclass
class Outcome:
    engine: str
    scenario: Scenario
    method: str                              # how the wire was seen: simulation, bpf, pcap, reads
    app_ns: np.ndarray                       # the first stack's writes as replayed
    app_size: np.ndarray
    stacks: list[StackResult]
    notes: list[str]
    out_dir: Path
    applied: str = ""                        # what the engine applied, in its own words

    def series(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        return ([(metrics.ordinal_label(0), self.app_ns, self.app_size)]
                + [(metrics.ordinal_label(s.k), s.ns, s.size) for s in self.stacks])

    def inputs(self, k: int) -> np.ndarray:
        """The write sizes stack k was given: the application's, or stack k-1's new data."""
        return self.app_size if k == 1 else self.stacks[k - 2].fresh

    def table(self) -> pd.DataFrame:
        """Table II (metrics.stack_table) with k, and per stack: the RTT its TCP measured,
        retransmitted bytes, and how it cut its input (magnetlib.segmentation)."""
        table = metrics.stack_table(self.series())
        table.insert(0, "k", range(len(table)))
        extra = {"rtt_measured_ms": [np.nan], "retrans_bytes": [0], "writes_split": [0],
                 "writes_coalesced": [0], "submss_segments": [0]}
        for s in self.stacks:
            mss = self.scenario.tcp.mss or None
            fate = segmentation.fate(self.inputs(s.k), s.fresh, mss).as_dict()
            extra["rtt_measured_ms"].append(s.rtt_ns / 1e6 if s.rtt_ns else np.nan)
            extra["retrans_bytes"].append(s.retrans_bytes)
            for name, value in fate.items():
                extra[name].append(value)
        for name, values in extra.items():
            table[name] = values
        return table


# ------------------------------------------------------------------ ns-3 ---
def _ns3_unavailable() -> str | None:
    from . import ns3
    try:
        ns3.build(quiet=True)
    except MagnetError as e:
        return str(e)
    return None


def _run_ns3(demand: Demand, scenario: Scenario, out: Path, progress: Progress, **options) -> Outcome:
    from . import inputs, ns3, report
    path = inputs.write_compact(demand, str(out / "demand.magnet"))
    run = ns3.run_chain(path, out, scenario, ns3.Ns3Options(**options))
    series = report.chain_series(path, run.traces)
    stacks = []
    for (_, ns, size), info in zip(series[1:], run.summary["stacks"]):
        stacks.append(StackResult(info["stack"], ns, size, run.new_bytes(info["stack"]),
                                  info.get("srtt_mean_ns") or info.get("srtt_last_ns"),
                                  int(info.get("tcp_retrans_bytes", 0)),
                                  cross_lead_ns=run.summary["config"].get("cross_lead_ns") or None))
    return Outcome("ns-3", scenario, "simulation", series[0][1], series[0][2], stacks,
                   list(run.notes), out, run.applied)


# ------------------------------------------------------------- real TCP ---
def _tcp_unavailable() -> str | None:
    from . import tcp
    try:
        tcp.check_privileges(tcp.TcpOptions())
    except MagnetError as e:
        return str(e)
    return None


def _run_tcp(demand: Demand, scenario: Scenario, out: Path, progress: Progress, **options) -> Outcome:
    from . import tcp
    run = tcp.run_chain(demand, out, scenario, tcp.TcpOptions(**options), progress=progress)
    rows = run.series("send")
    stacks = []
    for (_, ns, size), s in zip(rows[1:], run.stacks):
        stacks.append(StackResult(s.k, ns, size, s.new_bytes, s.rtt_mean_ns, s.retrans_bytes, list(s.notes),
                                  s.cross_lead_ns))
    return Outcome("tcp", scenario, run.method, rows[0][1], rows[0][2], stacks, list(run.notes),
                   out, run.applied)


_RUNNERS = {"ns-3": (_ns3_unavailable, _run_ns3), "tcp": (_tcp_unavailable, _run_tcp)}


def unavailable(engine: str) -> str | None:
    """Why `engine` cannot run here (ns-3 missing, not root, ...); None when it can."""
    return _RUNNERS[_known(engine)][0]()


def run(engine: str, demand: Demand, scenario: Scenario, out_dir: str | os.PathLike,
        progress: Progress = lambda line: None, **options) -> Outcome:
    """Replay the send direction of `demand` through `scenario` in `engine`; the engine's
    own files (traces, summary.json) go to out_dir.  `options` are the engine's own
    (ns3.Ns3Options, tcp.TcpOptions)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not (demand.direction == SEND).any():
        raise TraceError("demand", "nothing to send")
    return _RUNNERS[_known(engine)][1](demand, scenario, out, progress, **options)


def options_for(engine: str, tcp_model: str = "linux") -> dict:
    """The engine's own options a study passes on: ns-3's TCP model (Ns3Options.tcp_model)."""
    return {"tcp_model": tcp_model} if _known(engine) == "ns-3" else {}


def _known(engine: str) -> str:
    if engine not in _RUNNERS:
        raise ValueError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
    return engine
