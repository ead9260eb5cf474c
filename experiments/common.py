"""What every study and benchmark shares: its command line, its results directory,
the record of how and where it ran, Markdown tables, figures, a progress bar and
the median [min, max] of repeated runs.

A study module `experiments/NAME.py` has `main(argv) -> int` and uses:

    args = common.parse(common.parser("NAME", __doc__), argv) # --quick, --out, --seed
    results = common.Results("NAME", args)                   # --out, default ./magnet-results/NAME/
    for run in common.progress(runs, "runs"): ...            # bar with ETA on stderr
    results.table("table", frame)                            # table.csv, returns Markdown
    results.figure(fig, "fig8")                              # fig8.png
    results.write(body_markdown)                             # README.md: how it ran + body

so every result directory holds the command, parameters, versions and machine
that produced it.  A benchmark (`python -m magnet.experiments.bench_NAME`) does the
same from common.bench_parser, which adds --note (what else ran on the shared
machine) and names the command it was run by.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:                 # pandas costs every magnet command 0.2 s to import
    import pandas as pd

from magnetlib import knobs, signals
from magnetlib.cli import Parser
from magnetlib.errors import MagnetError


class StudyError(MagnetError):
    """A study's step that failed (a capture, a client, what it produced): "WHAT: problem"."""



def default_out(name: str) -> Path:
    """Where a study or benchmark writes unless told (--out): magnet-results/NAME in the
    current directory, never inside the installed package.  The runs committed with
    the repository are made with --out experiments/results/NAME."""
    return Path.cwd() / "magnet-results" / name
STUDIES = ("multistack", "modmap", "overhead", "loss", "traces", "sndbuf", "sched", "apps", "fidelity", "agreement")


def parser(name: str, doc: str | None, prog: str | None = None) -> argparse.ArgumentParser:
    """The options every study has; a study adds its own."""
    p = Parser(prog=prog or f"magnet experiment {name}", description=doc,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a short run (under two minutes), as the tests run it")
    p.add_argument("--out", type=Path, default=default_out(name),
                   help=f"results directory (default ./magnet-results/{name})")
    p.add_argument("--seed", type=int, default=1, help="first random seed (default 1)")
    return p


def bench_parser(module: str, name: str, doc: str | None) -> argparse.ArgumentParser:
    """The options every benchmark has (a study's, and --note); `module` is how it is
    run (python -m magnet.experiments.MODULE), `name` its results directory's."""
    p = parser(name, doc, prog=f"python -m magnet.experiments.{module}")
    p.add_argument("--note", default="", help="a sentence for the README: what else ran on the machine")
    return p


def quick(p: argparse.ArgumentParser, args: argparse.Namespace, **settings) -> None:
    """--quick: these settings, for the options the command line left at their defaults."""
    if args.quick:
        for name, value in settings.items():
            if getattr(args, name) == p.get_default(name):
                setattr(args, name, value)


def choices(p: argparse.ArgumentParser, option: str, text: str, known) -> list[str]:
    """The comma-separated names of `text`, each one of `known` (else a usage error naming them)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        p.error(f"{option} {text!r}: use {', '.join(known)}")
    return names


# The host's lags on a packet's way through it, given to ns-3's Linux profile (Ns3Options
# .ack_lag_ns, .reply_lag_ns, .reader_wakeup_ns; `magnet replay ns3 --ack-lag --reply-lag
# --reader-wakeup`) by the studies that compare ns-3 with Linux on this host.  Measured, not
# fitted, each with one definition both engines share (a packet in at the host's device -> the
# packet it causes out at it): `python -m magnet.experiments.reader_wakeup --runs 5` (root; its
# docstring defines them) on 2026-11-27 08:45-08:46, Linux 6.18 over linkem on this 2-vCPU VM,
# nothing else running (/work/contracts/QUIET held; load average 1.0-2.4, decaying from earlier
# builds), the agreement study's probe path (duplex 20 Mbit/s, 30 ms, 100p, tcp:4 each way,
# Python sinks; 12 s each, the first 2 s left out); each value the median over the 5 runs.
# - ACK lag: a data segment in -> the softirq's ACK for it out (a receiver's ACKs up to 15 us
#   after their connection's latest segment, 12-24 % of them): p50 11.0/9.9/10.2/10.4/10.1 us.
# - Reply lag: a pure ACK in -> the first data segment it releases out (before the next ACK
#   came): p50 8.3/7.3/7.8/7.8/8.2 us (p10 4.9-5.2, p90 13.9-14.7 us).
# - Reader wake-up: the ACKs sent from the woken reader's recvmsg (15-100 us, 70-81 %; 6-8 %
#   later still) p50 40.2/37.0/40.0/41.6/39.2 us; ns-3's reader reads ReaderWakeup after the
#   segment's processing (AckLag after its arrival), so the value is the reader's p50 less the
#   softirq's: 29.2/27.1/29.8/31.3/29.1 us.
# The same measurement at load 1.4 (08:22-08:26, 3 runs, builds beside it; 10-52 % of ACKs later
# than 100 us) gave 10.0 / 8.1 / 27.5 us; round 10's captures on an earlier instance of this VM
# gave an ACK lag of 9.5-9.8 us and a wake-up of 17.2-20.5 us (reader p50 26.8-30.2 us): the
# wake-up is a property of the host and its load, measured again with the Linux runs it is
# compared against: the agreement and fidelity studies measure all three at their start
# (reader_wakeup.for_study) and record them (HostLags, LAGS_FILE); these constants are their
# fallback (--quick, no root, a failed measurement) and that of a re-run against a study that
# recorded none.
HOST_ACK_LAG_NS = 10_245
HOST_REPLY_LAG_NS = 7_812
HOST_READER_WAKEUP_NS = 29_184


LAGS_FILE = "host-lags.json"        # where a study records the lags it gave ns-3


@dataclass
class HostLags:
    """The host's three lags a study gives ns-3's Linux profile, and where they came from:
    `measured` on this host at the study's start (experiments/reader_wakeup.py for_study),
    `given` (--host-lags), or the `constants` above (HOST_ACK_LAG_NS, HOST_REPLY_LAG_NS,
    HOST_READER_WAKEUP_NS; `how` says why not measured).  A study records them in its
    results (LAGS_FILE), and the ns-3 re-runs scored against its Linux runs read them back."""
    ack_lag_ns: int = HOST_ACK_LAG_NS
    reply_lag_ns: int = HOST_REPLY_LAG_NS
    reader_wakeup_ns: int = HOST_READER_WAKEUP_NS
    source: str = "constants"            # measured, given or constants
    how: str = ""                        # how measured, or why the constants
    date: str = ""
    runs: list = field(default_factory=list)     # the measurement's runs (reader_wakeup.modes, .replies)
    read_from: str = ""                  # the study whose record these are (not written)

    def __str__(self) -> str:
        return (f"ACK lag {self.ack_lag_ns / 1000:g} us, reply lag {self.reply_lag_ns / 1000:g} us, "
                f"reader wake-up {self.reader_wakeup_ns / 1000:g} us ({self.source})")

    def options(self) -> dict:
        """Ns3Options' fields."""
        return {"reader_wakeup_ns": self.reader_wakeup_ns, "ack_lag_ns": self.ack_lag_ns,
                "reply_lag_ns": self.reply_lag_ns}

    def argv(self) -> list[str]:
        """`magnet replay ns3`'s options."""
        return ["--reader-wakeup", f"{self.reader_wakeup_ns}ns", "--ack-lag", f"{self.ack_lag_ns}ns",
                "--reply-lag", f"{self.reply_lag_ns}ns"]

    def provenance(self) -> str:
        """Where the lags came from, for a README."""
        if self.source == "measured":
            text = f"this host's lags, measured on Linux over linkem at the study's start ({self.how})"
        elif self.source == "given":
            text = f"given to the study ({self.how or '`--host-lags`'})"
        else:
            text = ("experiments/common.py's HOST_ACK_LAG_NS, HOST_REPLY_LAG_NS, HOST_READER_WAKEUP_NS "
                    "(this VM's lags as measured once, not with these Linux runs)"
                    + (f": {self.how}" if self.how else ""))
        if self.read_from:
            text += f"; as the study in `{self.read_from}` recorded them ({LAGS_FILE})"
        return text

    def write(self, path: Path) -> None:
        record = {k: v for k, v in asdict(self).items() if k != "read_from"}
        Path(path).write_text(json.dumps(record, indent=1, default=str) + "\n")

    @classmethod
    def read(cls, directory: Path) -> HostLags | None:
        """The lags the study in `directory` recorded (None: it recorded none); StudyError if
        its record cannot be read."""
        path = Path(directory) / LAGS_FILE
        if not path.is_file():
            return None
        try:
            record = json.loads(path.read_text())
            lags = cls(**{k: record[k] for k in ("ack_lag_ns", "reply_lag_ns", "reader_wakeup_ns", "source")},
                       how=str(record.get("how", "")), date=str(record.get("date", "")),
                       runs=list(record.get("runs", [])), read_from=str(Path(directory)))
            if not all(isinstance(v, int) and v >= 0 for v in (lags.ack_lag_ns, lags.reply_lag_ns,
                                                                lags.reader_wakeup_ns)):
                raise ValueError("the lags are not whole nanoseconds")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise StudyError(str(path), f"not a study's record of its host lags: {e}") from None
        return lags

    @classmethod
    def recorded(cls, directory: Path) -> HostLags:
        """For an ns-3 re-run scored against the Linux runs of the study in `directory`: the
        lags it recorded, else the constants (saying so)."""
        return cls.read(directory) or cls(how=f"the study in `{directory}` recorded none ({LAGS_FILE}: "
                                              "made before studies measured them)")


def host_lags_arg(text: str) -> HostLags:
    """--host-lags: ACK,REPLY,WAKEUP in ns (or with a unit: 10us), or `constants`."""
    if text.strip().lower() == "constants":
        return HostLags(how="`--host-lags constants`")
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 3:
        raise ValueError(f"--host-lags {text!r}: ACK,REPLY,WAKEUP (ns, or with a unit: 10us), or constants")
    values = [round(float(part)) if re.fullmatch(r"[0-9]*\.?[0-9]+", part) else knobs.duration(part)
              for part in parts]
    return HostLags(*values, source="given", how=f"`--host-lags {text}`")


def add_host_lags(p: argparse.ArgumentParser) -> None:
    """--host-lags for a study that measures them at its start (root, linkem) unless given."""
    p.add_argument("--host-lags", type=knobs.arg(host_lags_arg), metavar="ACK,REPLY,WAKEUP",
                   help="the host's ACK lag, reply lag and reader wake-up for ns-3's Linux profile, in ns "
                        "(or with a unit: 10us), or `constants` (experiments/common.py's); default: "
                        "measured on this host at the study's start (experiments/reader_wakeup.py, about "
                        "50 s, root), the constants where that cannot run and under --quick")


def engine_options(engine: str, tcp_model: str = "linux", lags: HostLags | None = None) -> dict:
    """An engine's options in a study that compares ns-3 with Linux on this host: ns-3's TCP
    model and, with the linux model, this host's lags: `lags` (the study's), else the
    constants (HOST_READER_WAKEUP_NS, HOST_ACK_LAG_NS, HOST_REPLY_LAG_NS)."""
    from magnet.replay import engines
    options = engines.options_for(engine, tcp_model)
    if options and tcp_model == "linux":
        options.update((lags or HostLags()).options())
    return options


def wakeup_note(tcp_model: str, lags: HostLags | None = None) -> str:
    """What a study's README says of the host's lags it gave ns-3 (`lags`, else the constants)."""
    if tcp_model != "linux":
        return ""
    lags = lags or HostLags()
    return (f"ns-3's hosts take a data segment to TCP {lags.ack_lag_ns / 1000:g} us after it arrives "
            f"(`--ack-lag`), a pure ACK {lags.reply_lag_ns / 1000:g} us after (`--reply-lag`), and "
            f"their receiving applications read {lags.reader_wakeup_ns / 1000:g} us after their data "
            f"becomes readable (`--reader-wakeup`): {lags.provenance()}. ")


def add_tcp_model(p: argparse.ArgumentParser) -> None:
    """--tcp-model for a study that runs ns-3: its TCP, Linux's (the default) or ns-3's own."""
    p.add_argument("--tcp-model", choices=("linux", "ns3"), default="linux",
                   help="ns-3's TCP: linux (Linux 6.x's, MagnetLinuxTcpSocket) or ns3 (ns-3's own "
                        "TcpSocketBase) (default linux)")


def parse(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse the study's options, keeping its command line for the results' README."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    args.argv, args.prog = argv, p.prog
    return args


def progress(iterable=None, desc: str = "", total: int | None = None, unit: str = "run"):
    """A progress bar with ETA on stderr (tqdm): long studies say where they are."""
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, mininterval=1.0,
                dynamic_ncols=True, leave=True)


def progress_note(line: str) -> None:
    """A line on stderr that leaves a running progress bar intact."""
    from tqdm.auto import tqdm
    tqdm.write(line, file=sys.stderr)


def spread(values, fmt: str = "{:.3g}") -> str:
    """Repeated runs' values as "median [min, max]" (the value alone when there is one;
    "–" when there are none): how every study and benchmark reports them."""
    import numpy as np
    v = np.asarray(values, float)
    v = v[~np.isnan(v)]
    if not len(v):
        return "–"
    if len(v) == 1:
        return fmt.format(v[0])
    return f"{fmt.format(np.median(v))} [{fmt.format(v.min())}, {fmt.format(v.max())}]"


def stalls(seconds: float = 1.0, threshold_ns: int = 20_000) -> dict:
    """Spin on the clock: how often and how long the CPU was taken away (interrupts, the
    hypervisor, other work): the floor under any userspace timer on this machine."""
    import numpy as np
    gaps, now = [], time.monotonic_ns
    end = now() + int(seconds * 1e9)
    prev = now()
    while prev < end:
        t = now()
        if t - prev > threshold_ns:
            gaps.append(t - prev)
        prev = t
    gaps = np.array(gaps or [0])
    return {"stalls_per_s": len(gaps) / seconds, "stalled_pct": 100 * gaps.sum() / (seconds * 1e9),
            "max_stall_us": gaps.max() / 1e3}


def load() -> str:
    """The load averages (1, 5, 15 minutes): how busy the shared machine was."""
    return " ".join(open("/proc/loadavg").read().split()[:3])


def busiest(exclude: int) -> str:
    """The processes using most CPU right now (ps), `exclude` left out: what else ran."""
    out = subprocess.run(["ps", "-eo", "pid,pcpu,comm", "--sort=-pcpu", "--no-headers"],
                         capture_output=True, text=True).stdout.splitlines()
    rows = [line.split(None, 2) for line in out]
    return ", ".join(f"{comm} {cpu}%" for pid, cpu, comm in rows[:8]
                     if int(pid) != exclude and float(cpu) >= 1.0)[:300] or "none above 1% CPU"


def markdown(frame: pd.DataFrame, floats: str = "{:.3g}") -> str:
    """A DataFrame as a GitHub Markdown table (no tabulate dependency)."""
    def cell(v) -> str:
        if isinstance(v, float):
            return "–" if v != v else floats.format(v)
        return str(v)
    head = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(head + rows)


def _run(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0] if out.returncode == 0 else ""
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return ""


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _sysctl(name: str) -> str:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return "?"


def environment() -> dict:
    """Versions and machine: what a reader needs to compare our numbers with theirs."""
    mem_kib = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    repo = Path(__file__).resolve().parent.parent
    return {
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "kernel": platform.release(),
        "machine": f"{_cpu_model()}, {os.cpu_count()} CPUs, {mem_kib / 2**20:.0f} GiB",
        "virtualised": _run(["systemd-detect-virt"]) or "unknown",
        "tcp": f"congestion control {_sysctl('net.ipv4.tcp_congestion_control')}, "
               f"qdisc {_sysctl('net.core.default_qdisc')}, wmem {_sysctl('net.ipv4.tcp_wmem')}",
        "python": platform.python_version(),
        "magnet": f"{_version('magnet')} ({_run(['git', '-C', str(repo), 'rev-parse', '--short', 'HEAD']) or 'no git'})",
        "numpy": _version("numpy"), "pandas": _version("pandas"), "ns-3": _version("ns3"),
        "clang": _run(["clang", "--version"]) or "not installed",
        "iperf3": _run(["iperf3", "--version"]) or "not installed",
        "tcpdump": _run(["tcpdump", "--version"]) or "not installed",
    }


class Results:
    """The results directory of one study run: tables, figures and README.md.

    Written into a staging directory beside it (`dir` until write()) and moved in by
    write(), README.md last, if no signal came first (magnetlib.signals): a results
    directory never holds a run's files without their README.  An unfinished run
    leaves nothing: its staging directory is removed when the Results goes away."""

    def __init__(self, name: str, args: argparse.Namespace):
        self.name, self.args = name, args
        self.out = Path(args.out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.partial-", dir=self.out.parent))
        self._discard = weakref.finalize(self, shutil.rmtree, self.dir, True)
        prog = getattr(args, "prog", None) or f"magnet experiment {name}"
        self.command = f"{prog} {shlex.join(getattr(args, 'argv', []))}".strip()
        self.files: list[str] = []

    def path(self, filename: str) -> Path:
        self.files.append(filename)
        return self.dir / filename

    def table(self, stem: str, frame: pd.DataFrame, floats: str = "{:.3g}") -> str:
        """Write STEM.csv; return the table as Markdown for the write-up."""
        frame.to_csv(self.path(f"{stem}.csv"), index=False)
        return markdown(frame, floats)

    def figure(self, fig, stem: str) -> Path:
        """Save a matplotlib figure as STEM.png and close it."""
        import matplotlib.pyplot as plt
        path = self.path(f"{stem}.png")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return path

    def write(self, title: str, body: str) -> Path:
        """README.md: the title, how the run was made (parameters, versions, machine), the
        body; then every file moves into the results directory, README.md last."""
        params = {k: str(v) for k, v in sorted(vars(self.args).items()) if k not in ("func", "argv", "prog")}
        env = environment()
        lines = [f"# {title}", "",
                 f"Made by `{self.command}` on {env['date']}.", "",
                 body.rstrip(), "",
                 "## How this run was made", "",
                 "Parameters: " + ", ".join(f"`{k}={v}`" for k, v in params.items()) + ".", "",
                 "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in env.items()]
        lines += ["", "Files: " + ", ".join(f"[{f}]({f})" for f in sorted(set(self.files))) + "."]
        (self.dir / "README.md").write_text("\n".join(lines) + "\n")
        try:
            signals.check()                       # interrupted: nothing goes out
        except KeyboardInterrupt:
            self._discard()
            raise
        return self._commit()

    def _commit(self) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        staged = sorted(self.dir.iterdir(), key=lambda p: p.name == "README.md")
        for path in staged:
            os.replace(path, self.out / path.name)
        self._discard()
        self.dir = self.out
        return self.out / "README.md"


@contextmanager
def workspace(args: argparse.Namespace, prefix: str):
    """The study's work directory: --work, else a temporary one removed at the end."""
    work = args.work or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        yield work
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def largest_sender(trace, who: str) -> int:
    """The sockid of an open trace's stream whose writes (SOCK_SEND) moved the most bytes:
    a transfer's data connection; StudyError if `who` (the sender, the server) wrote nothing."""
    import numpy as np

    from magnetlib import demand
    every = demand.extract(trace, None, "send", "sock")
    if not len(every):
        raise StudyError(str(trace.path), f"no SOCK_SEND records: the {who}'s writes were not captured")
    streams, index = np.unique(every.sockid, return_inverse=True)
    return int(streams[np.argmax(np.bincount(index, weights=every.size))])


def native_program(name: str, needs: tuple[str, ...] = ("make", "cc")) -> Path:
    """One of the C programs the benchmarks measure against (experiments/native/), built
    by its Makefile into the per-user cache; BuildError naming what is missing."""
    from magnetlib import buildcache
    source = Path(__file__).resolve().parent / "native"
    files = [(f.name, f) for f in sorted(source.iterdir()) if f.suffix == ".c" or f.name == "Makefile"]
    return buildcache.make("bench", source, files, targets=[name], needs=needs, label=name) / name


def gate(ok: bool, why: str) -> None:
    """Stop the study with one line (exit 2) when a prerequisite is missing."""
    if not ok:
        print(f"magnet experiment: {why}", file=sys.stderr)
        raise SystemExit(2)
