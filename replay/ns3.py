"""Build and run the ns-3 side of magnet (ns3-app/) against ns-3 from PyPI.

    from magnet.replay import ns3
    from magnet.replay.scenario import Scenario
    programs = ns3.build()            # compiled once, cached by a hash of sources, flags, ns-3
    run = ns3.run_chain("demand.magnet", "out", Scenario(stacks=4), ns3.Ns3Options())
    run.traces                        # out/stack-K.magnet
    run.stack(1)["srtt_mean_ns"], run.stack(1)["tcp_retrans_bytes"], run.new_bytes(1)
    run.applied, run.notes            # what ns-3 applied; what a reader should know
    app = ns3.run_app("D.csv", "out", Scenario(), open_loop=False)   # a whole application at once
    app.connections, app.adus, app.traces                            # connections.csv, adus.csv, ...

ns-3 comes from `pip install --no-deps ns3` (headers and shared libraries; the
Python bindings are not needed).  MAGNET_NS3_ROOT points at another ns-3
install tree (include/, lib64/ or lib/); MAGNET_NS3_BUILD moves the build cache
(default ~/.cache/magnet/ns3).

    python -m magnet.replay.ns3 build        # build now (make test does), print where
    python -m magnet.replay.ns3 test         # build, then run the ns-3 TestSuites
    g++ my-sim.cc $(python -m magnet.replay.ns3 flags) -o my-sim   # a user's own program
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from magnet import capture, ns3app
from magnetlib import buildcache, knobs, signals
from magnetlib.errors import MagnetError

from .errors import ReplayError
from .scenario import CROSS_LEAD_NS, TCP_MODELS, Cross, Path as NetPath, Scenario, path_seed, stack_seed

APP_DIR = Path(ns3app.__file__).resolve().parent            # ns3-app/ in a checkout
FORMAT_HEADER_DIR = Path(capture.__file__).resolve().parent  # capture/magnet_format.h
INSTALL_HINT = "pip install --no-deps ns3"
# What ns3-app/Makefile builds: the model and helpers as one library (and their headers
# in include/), the programs in bin/, and the ns-3 libraries they link in ns3-libs.
LIBRARY_NAME = "libns3-magnet.so"


class Ns3Error(ReplayError):
    """ns-3 missing or a failed run: one line, "WHAT: problem" (a failed build is a BuildError)."""


# ------------------------------------------------------------------ ns-3 ---
@dataclass(frozen=True)
class Ns3Install:
    root: Path
    version: str          # e.g. "3.44"
    libdir: Path


def find_ns3() -> Ns3Install:
    """The ns-3 to build against: MAGNET_NS3_ROOT, else the `ns3` pip package (not imported)."""
    root = os.environ.get("MAGNET_NS3_ROOT")
    if root is None:
        spec = importlib.util.find_spec("ns3")
        if spec is None or not spec.submodule_search_locations:
            raise Ns3Error("ns-3", f"not installed in this Python ({sys.executable}): "
                                   f"run `{INSTALL_HINT}`")
        root = list(spec.submodule_search_locations)[0]
    root = Path(root)
    for libdir in (root / "lib64", root / "lib"):
        cores = sorted(libdir.glob("libns3*-core*.so"))
        if cores and (root / "include" / "ns3" / "core-module.h").exists():
            match = re.match(r"libns(3[\d.]*?)-core", cores[0].name)
            return Ns3Install(root, match.group(1) if match else "unknown", libdir)
    raise Ns3Error(str(root), f"not an ns-3 install (no include/ns3 and lib64/libns3*-core.so); "
                              f"run `{INSTALL_HINT}`")


# ----------------------------------------------------------------- build ---
@dataclass(frozen=True)
class Programs:
    directory: Path
    ns3: Ns3Install
    built_seconds: float      # 0 when taken from the cache

    def path(self, name: str) -> Path:
        return self.directory / "bin" / name

    @property
    def chain(self) -> Path:
        return self.path("magnet-chain")

    @property
    def library(self) -> Path:
        """ns3-app's model and helpers as one shared library, for users' own programs."""
        return self.directory / "lib" / LIBRARY_NAME

    @property
    def include(self) -> Path:
        """Its headers (and magnet_format.h), for users' own programs."""
        return self.directory / "include"

    def user_flags(self) -> list[str]:
        """g++ flags that build a user's ns-3 program with MagnetReplayHelper and
        MagnetAppReplayHelper: compile and link, after the program's sources."""
        return (["-std=c++20", "-O2", f'-DMAGNET_NS3_VERSION="{self.ns3.version}"', f"-I{self.include}",
                 f"-I{self.ns3.root / 'include'}", f"-L{self.library.parent}",
                 f"-Wl,-rpath,{self.library.parent}", f"-l{LIBRARY_NAME[3:-3]}"]
                + (self.directory / "ns3-libs").read_text().split())


def _sources() -> list[tuple[str, Path]]:
    """Every file the programs are built from, by a name independent of where the tree is."""
    return ([(f"ns3-app/{name}", path) for name, path in buildcache.tree(APP_DIR, (".cc", ".h"), ("Makefile",))]
            + [("capture/magnet_format.h", FORMAT_HEADER_DIR / "magnet_format.h")])


def _variables(ns3: Ns3Install) -> dict[str, str]:
    """What ns3-app/Makefile is told: the compiler, the ns-3 to build against, magnet_format.h."""
    prefix = next(iter(ns3.libdir.glob("libns3*-core*.so"))).name.split("-core")[0][3:]
    return {"CXX": os.environ.get("CXX") or "g++", "NS3_ROOT": str(ns3.root), "NS3_VERSION": ns3.version,
            "NS3_LIBDIR": str(ns3.libdir), "NS3_LIB": prefix, "FORMAT_DIR": str(FORMAT_HEADER_DIR)}


def build_key(ns3: Ns3Install) -> str:
    """A hash of everything the programs depend on: sources, Makefile, compiler, ns-3."""
    return buildcache.make_key(_sources(), (), _variables(ns3))


def build(force: bool = False, quiet: bool = False) -> Programs:
    """The compiled programs, building them (ns3-app/Makefile) if their sources, compiler
    or ns-3 changed, into $MAGNET_NS3_BUILD, default the per-user cache's ns3/."""
    ns3 = find_ns3()
    variables = _variables(ns3)
    base = Path(os.environ["MAGNET_NS3_BUILD"]) if os.environ.get("MAGNET_NS3_BUILD") else None
    cached = ((base or buildcache.root() / "ns3") / build_key(ns3) / ".complete").exists()
    start = time.perf_counter()
    directory = buildcache.make("ns3", APP_DIR, _sources(), variables=variables, needs=("make", variables["CXX"]),
                                label=f"ns3-app against ns-3 {ns3.version}", quiet=quiet, base=base,
                                jobs=os.cpu_count() or 1, force=force)
    return Programs(directory, ns3, 0.0 if cached and not force else time.perf_counter() - start)


# ------------------------------------------------------------ parameters ---
@dataclass(frozen=True)
class Ns3Options:
    """The choices only the ns-3 engine has (the rest is the Scenario)."""
    new_data_only: bool = False        # offline: retransmitted bytes are not carried on
    start_offset_ns: int = 0           # connection established -> the demand's time zero
    bulk_reference: bool = False       # also time BulkSendApplication moving the same bytes
    no_trace: bool = False             # write no traces (benchmarks)
    stream: int = 0                    # the demand file's stream (0: the only one)
    cross_lead_ns: int = CROSS_LEAD_NS  # with cross traffic: its start -> the demand's time zero
    tcp_model: str = "linux"           # linux: Linux 6.x's TCP (MagnetLinuxTcpSocket); ns3: ns-3's own
    cross_schedules: bool = True       # UDP cross traffic plays cross.py's schedules (False: ns-3 draws)
    link_log: bool = False             # each stack's bottleneck log, stack-K.linklog (linkem's format)
    reader_wakeup_ns: int = 0          # linux: the host's wake-up of every receiving application (0: at once)
    ack_lag_ns: int = 0                # linux: the host's way in for a data segment, arrival -> TCP (0: at once)
    reply_lag_ns: int = 0              # linux: the host's way in for a pure ACK, arrival -> TCP (0: at once)

    def __post_init__(self):
        if self.tcp_model not in TCP_MODELS:
            raise ValueError(f"TCP model {self.tcp_model!r}: {' or '.join(TCP_MODELS)}")
        if self.reader_wakeup_ns < 0 or (self.reader_wakeup_ns and self.tcp_model != "linux"):
            raise ValueError(f"reader wake-up {self.reader_wakeup_ns} ns: 0 or more, with the linux "
                             "TCP model (ns-3's own TcpSocketBase reads at once)")
        for name, value in (("ACK lag", self.ack_lag_ns), ("reply lag", self.reply_lag_ns)):
            if value < 0 or (value and self.tcp_model != "linux"):
                raise ValueError(f"{name} {value} ns: 0 or more, with the linux TCP model (ns-3's own "
                                 "TcpSocketBase takes every segment at once)")


def _loss(loss: knobs.Loss) -> str:
    if not loss.bursty:
        return repr(loss.p)
    return "ge:" + "/".join(repr(v) for v in (loss.p, loss.r, loss.bad, loss.good))


def _queue(path: NetPath) -> str:
    if path.queue.unit == "packets":
        return f"{path.queue_packets}p"
    return f"{path.queue_bytes}B"


def _cross(c: Cross) -> str:
    if c.kind == "tcp":
        return f"tcp:{c.flows}"
    if c.kind == "poisson":
        return f"poisson:{c.share!r}/{c.packet_bytes}"
    return f"pareto:{c.share!r}/{c.packet_bytes}/{c.on_ns}ns/{c.off_ns}ns"      # held: its schedule


def check_held(scenario: Scenario, schedules: bool) -> None:
    """ValueError if a Pareto source held over a window would be drawn by ns-3's own
    OnOffApplication (the free source): ns-3 holds it only by playing cross.py's schedules,
    which cover a chain's forward direction (`schedules`: this run plays them)."""
    held = [str(c) for c in scenario.cross if c.held_ns]
    duplex = any(scenario.path_of(k).duplex for k in range(1, scenario.stacks + 1))
    if held and (duplex or not schedules):
        raise ValueError(f"cross traffic {held[0]}: ns-3 holds a share only in the schedules it plays, "
                         "the data direction of a chain replay (not a duplex path's reverse direction, "
                         "a whole application's replay, or cross_schedules=False)")


# magnet-chain's path flags: one value per stack, comma-separated.
_PATH_ARGS = {
    "rate": lambda p: f"{p.rate_bps}bps" if p.rate_bps else "none",
    "delay": lambda p: f"{p.delay_ns}ns",
    "queue": _queue,
    "loss": lambda p: _loss(p.loss),
    "jitter": lambda p: f"{p.jitter_ns}ns",
    "hops": lambda p: str(p.hops),
    "mtu": lambda p: str(p.mtu),
    "duplex": lambda p: str(int(p.duplex)),
}


def chain_args(scenario: Scenario, options: Ns3Options = Ns3Options()) -> list[str]:
    """The magnet-chain flags that run `scenario`: every knob, as ns-3 takes it."""
    check_held(scenario, options.cross_schedules)
    paths = [scenario.path_of(k) for k in range(1, scenario.stacks + 1)]
    tcp = scenario.tcp
    args = [f"--{flag}={','.join(fmt(p) for p in paths)}" for flag, fmt in _PATH_ARGS.items()]
    args.append("--pathSeed=" + ",".join(str(path_seed(scenario.seed, k))
                                         for k in range(1, scenario.stacks + 1)))
    if scenario.cross:
        args.append(f"--cross={','.join(_cross(c) for c in scenario.cross)}")
    values = {
        "stacks": scenario.stacks, "mode": scenario.mode, "seed": scenario.seed,
        "tcpModel": options.tcp_model, "linkLog": options.link_log,
        "cc": knobs.cc_for("ns-3", tcp.cc), "nagle": tcp.nagle, "sack": tcp.sack,
        "timestamps": tcp.timestamps, "windowScaling": tcp.window_scaling,
        "delAckCount": tcp.delack_count or 0,
        "delAckTimeout": f"{tcp.delack_timeout_ns}ns" if tcp.delack_timeout_ns is not None else "-1ns",
        "mss": tcp.mss or 0, "sndbuf": tcp.sndbuf or 0, "rcvbuf": tcp.rcvbuf or 0,
        "readSize": tcp.read_size, "readerWakeup": f"{options.reader_wakeup_ns}ns",
        "ackLag": f"{options.ack_lag_ns}ns", "replyLag": f"{options.reply_lag_ns}ns",
        "newDataOnly": options.new_data_only,
        "startOffset": f"{options.start_offset_ns}ns", "crossLead": f"{options.cross_lead_ns}ns",
        "stream": options.stream, "bulkReference": options.bulk_reference, "noTrace": options.no_trace,
    }
    return args + [f"--{name}={int(v) if isinstance(v, bool) else v}" for name, v in values.items()]


# ------------------------------------------------------------------- run ---
@dataclass
class ChainRun:
    """One run of magnet-chain: its summary.json, what it printed, its traces."""
    out_dir: Path
    scenario: Scenario
    options: Ns3Options
    summary: dict
    output: str                                  # stdout: what was applied, then per-stack lines
    traces: list[Path] = field(default_factory=list)

    @property
    def applied(self) -> str:
        """What ns-3 applied, in its words: the configuration the program printed."""
        lines = self.output.splitlines()
        end = next((i for i, line in enumerate(lines) if line.startswith("  demand:")), len(lines) - 1)
        return "\n".join(lines[:end + 1])

    def stack(self, k: int) -> dict:
        """Stack k's entry of summary.json (1-based)."""
        return self.summary["stacks"][k - 1]

    def new_bytes(self, k: int):
        """The new (never sent before) bytes of each data segment stack k put on its
        wire, in the order of its trace's DEV_SEND records; None without traces."""
        import numpy as np
        path = self.stack(k).get("new_bytes")
        return np.load(path).astype(np.int64) if path else None

    @property
    def notes(self) -> list[str]:
        """What a reader of the table should know: late writes, retransmissions, drops, cross traffic."""
        out = []
        for s in self.summary["stacks"]:
            k = s["stack"]
            if s["late_writes"]:
                out.append(f"stack {k}: {s['late_writes']} writes waited for TCP's send buffer "
                           f"(at most {s['max_lag_ns'] / 1e9:.3f} s late)")
            if s["dev_retrans"]:
                out.append(f"stack {k}: {s['dev_retrans']} of {s['dev_send']} segments on the wire "
                           f"were retransmissions ({s['tcp_retrans_bytes']} bytes)")
            drops = s["bottleneck_queue_drops"] + s["bottleneck_loss_drops"]
            if drops:
                out.append(f"stack {k}: the bottleneck dropped {s['bottleneck_queue_drops']} packets "
                           f"from its queue and lost {s['bottleneck_loss_drops']} on its link "
                           f"({s['bottleneck_queue_drops_own'] + s['bottleneck_loss_drops_own']} "
                           f"of them this stack's)")
            if s["cross_ns"]:
                rate = s["cross_bytes"] * 8 / (s["cross_ns"] / 1e9)
                bottleneck = self.summary["config"]["paths"][k - 1]["rate_bps"]
                out.append(f"stack {k}: cross traffic carried {knobs.fmt_rate(rate)}"
                           + (f" ({rate / bottleneck:.0%} of the bottleneck)" if bottleneck else ""))
            if s["srtt_mean_ns"] is not None:
                out.append(f"stack {k}: the sender's smoothed RTT {s['srtt_mean_ns'] / 1e6:.1f} ms on "
                           f"average, {s['srtt_last_ns'] / 1e6:.1f} ms at the end "
                           f"(least sample {s['rtt_min_ns'] / 1e6:.1f} ms)")
        return out


def run_chain(demand_path: str | os.PathLike, out_dir: str | os.PathLike,
              scenario: Scenario | None = None, options: Ns3Options | None = None, *,
              programs: Programs | None = None) -> ChainRun:
    """Run `scenario` in ns-3 on the demand in `demand_path` (a magnet trace, e.g.
    inputs.write_compact's); traces, stack-K.new.npy and summary.json go to `out_dir`."""
    scenario = scenario or Scenario()
    options = options or Ns3Options()
    programs = programs or build()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        args = chain_args(scenario, options)
    except ValueError as e:                       # e.g. a queue of 1bdp on a path with no rate
        raise Ns3Error("scenario", str(e)) from None
    if options.cross_schedules and any(c.kind != "tcp" for c in scenario.cross):
        args.append(f"--crossSchedules={write_cross_schedules(demand_path, out / 'cross', scenario, options)}")
    command = [str(programs.chain), f"--demand={os.fspath(demand_path)}", f"--out={out}", *args]
    stdout, stderr, status = _simulate(command)
    if status != 0:
        raise Ns3Error(*_problem(stderr, status))
    summary = json.loads((out / "summary.json").read_text())
    traces = [Path(s["trace"]) for s in summary["stacks"] if s["trace"]]
    return ChainRun(out, scenario, options, summary, stdout, traces)


# What ns-3 prints after a failed NS_ASSERT, NS_ABORT or NS_FATAL_ERROR (then it aborts):
# the cause is the line before.
_NS3_EPILOGUE = ("NS_FATAL, terminating", "terminate called without an active exception")


def _problem(stderr: str, status: int) -> tuple[str, str]:
    """magnet-chain's failure as (what, problem): its last line of stderr, or when ns-3
    aborted, the line that says why (the assertion, its file and line)."""
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith(_NS3_EPILOGUE)]
    problem = lines[-1].removeprefix("magnet-chain: ") if lines else f"exit {status}"
    what, _, rest = problem.partition(": ") if ": " in problem else ("ns-3", "", problem)
    return what, rest


def _simulate(command: list[str]) -> tuple[str, str, int]:
    """Run magnet-chain to its end: its stdout, stderr and status.  It dies with this
    process, and ends with the run when a signal interrupts it (magnetlib.signals)."""
    from .wire import _die_with_parent
    with signals.honoured():
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: _die_with_parent(signal.SIGKILL))
        try:
            stdout, stderr = signals.communicate(proc)
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
    return stdout, stderr, proc.returncode


# ----------------------------------------------------- whole application ---
class AppRunFailed(Ns3Error):
    """A whole-application replay ran, but some connection failed: `run` holds every result."""

    def __init__(self, what: str, problem: str, run: "AppRun"):
        super().__init__(what, problem)
        self.run = run


@dataclass
class AppRun:
    """One whole-application replay in ns-3: its summary.json, what it printed, its files."""
    out_dir: Path
    scenario: Scenario
    summary: dict
    output: str

    @property
    def connections(self):
        import pandas as pd
        return pd.read_csv(self.out_dir / "connections.csv")

    @property
    def adus(self):
        import pandas as pd
        return pd.read_csv(self.out_dir / "adus.csv")

    @property
    def traces(self) -> dict:
        """{"client": client.magnet, "server": server.magnet}."""
        return {side: self.out_dir / f"{side}.magnet" for side in ("client", "server")}

    @property
    def applied(self) -> str:
        lines = self.output.splitlines()
        end = next((i for i, line in enumerate(lines) if line.startswith("  demand:")), len(lines) - 1)
        return "\n".join(lines[:end + 1])

    @property
    def series(self) -> dict:
        """Table II per direction ("send": client -> server, "recv": back): the writing
        side's application writes (SOCK_SEND), then its wire (DEV_SEND), every connection,
        times on the simulation's clock."""
        import magnetlib
        from magnetlib import demand as demand_mod
        from magnetlib import metrics
        out = {}
        for direction, side in (("send", "client"), ("recv", "server")):
            rows = []
            with magnetlib.open(self.traces[side]) as trace:
                for k, layer in enumerate(("sock", "dev")):
                    d = demand_mod.extract(trace.check(), None, "send", layer)
                    rows.append((metrics.ordinal_label(k), d.time_ns + d.start_ns, d.size))
            out[direction] = rows
        return out


def write_app_csv(demand, path: str | os.PathLike) -> Path:
    """A whole-application demand (magnetlib.app_demand.AppDemand) as the CSV ns-3 reads."""
    demand.to_frame().to_csv(path, index=False)
    return Path(path)


def run_app(demand_csv: str | os.PathLike, out_dir: str | os.PathLike, scenario: Scenario | None = None,
            options: Ns3Options | None = None, *, open_loop: bool = False,
            programs: Programs | None = None) -> AppRun:
    """Replay every connection of a whole-application demand (its CSV form) at once over
    scenario's first path in ns-3; connections.csv, adus.csv, client.magnet,
    server.magnet and summary.json go to `out_dir`.  Raises AppRunFailed (with the
    results) when a connection failed, Ns3Error for bad input."""
    scenario = (scenario or Scenario()).replace(stacks=1, mode="offline")
    options = options or Ns3Options()
    programs = programs or build()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        check_held(scenario, schedules=False)
        args = chain_args(scenario, options)
    except ValueError as e:
        raise Ns3Error("scenario", str(e)) from None
    command = [str(programs.chain), f"--app={os.fspath(demand_csv)}", f"--openLoop={int(open_loop)}",
               f"--out={out}", *args]
    stdout, stderr, status = _simulate(command)
    what, rest = _problem(stderr, status)
    if status == 1 and (out / "summary.json").exists():
        run = AppRun(out, scenario, json.loads((out / "summary.json").read_text()), stdout)
        raise AppRunFailed(what, rest, run)
    if status != 0:
        raise Ns3Error(what, rest)
    return AppRun(out, scenario, json.loads((out / "summary.json").read_text()), stdout)


def cross_horizon_ns(demand_path, scenario: Scenario, options: Ns3Options) -> int:
    """How long a stack's UDP cross traffic may have to run: its lead, then twice the longer of
    the demand's span and the time its bytes take at the slowest bottleneck, and 30 s more."""
    import magnetlib
    from magnetlib import demand as demand_mod
    with magnetlib.open(demand_path) as trace:
        d = demand_mod.extract(trace, None, "send", "sock")
    span = int(d.time_ns[-1] - d.time_ns[0]) if len(d) else 0
    rates = [p.rate_bps for p in (scenario.path_of(k) for k in range(1, scenario.stacks + 1)) if p.rate_bps]
    transfer = int(d.size.sum() * 8e9 / min(rates)) if rates else 0
    return options.cross_lead_ns + 2 * max(span, transfer) + 30_000_000_000


def write_cross_schedules(demand_path, directory: Path, scenario: Scenario, options: Ns3Options) -> Path:
    """The UDP cross traffic of every stack as the real sender draws it (cross.UdpSchedule,
    the same seeds and streams), as magnet traces ns-3 plays: DIRECTORY/stack-K-cross-I.magnet."""
    import numpy as np
    from magnetlib.demand import Demand, write_demand
    from . import cross as cross_mod
    directory.mkdir(parents=True, exist_ok=True)
    horizon = cross_horizon_ns(demand_path, scenario, options)
    for k in range(1, scenario.stacks + 1):
        rate = scenario.path_of(k).rate_bps
        flows = [cross_mod.flow_of(c, rate) for c in scenario.cross]
        for i, flow in enumerate(flows):
            if flow["kind"] == "tcp":
                continue
            times = cross_mod.UdpSchedule(flow, rate, stack_seed(scenario.seed, k), i).until(horizon)
            write_demand(Demand.from_arrays(times, np.full(len(times), flow["size"])),
                         directory / f"stack-{k}-cross-{i + 1}.magnet")
    return directory


TEST_PROGRAMS = ("magnet-replay-test", "magnet-linux-tcp-test", "magnet-linux-cc-test")


def run_tests(programs: Programs | None = None, *args: str,
              program: str = "magnet-replay-test") -> subprocess.CompletedProcess:
    """Run one of the ns-3 TestSuites (TEST_PROGRAMS); returns the completed process."""
    programs = programs or build()
    return subprocess.run([str(programs.path(program)), *args], capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m magnet.replay.ns3", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["build", "test", "flags"],
                    help="flags: print the g++ flags of a user's program using ns3-app")
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = ap.parse_args(argv)
    try:
        programs = build(force=args.force, quiet=args.action == "flags")
        if args.action == "flags":
            print(" ".join(shlex.quote(f) for f in programs.user_flags()))
            return 0
        print(programs.directory)
        if args.action == "test":
            status = 0
            for program in TEST_PROGRAMS:
                proc = run_tests(programs, program=program)
                sys.stdout.write(proc.stdout + proc.stderr)
                status = status or proc.returncode
            return status
    except MagnetError as e:
        print(f"replay.ns3: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
