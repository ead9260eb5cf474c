"""Study: fidelity.  Does replaying an application's demand predict what the real
application does on another path, and how far does a tcpdump-driven replay stay?

    magnet experiment fidelity [--quick] [--out DIR] [--apps NAME,...] [--paths NAME,...]
                               [--runs 3] [--predictors NAME,...] [--jobs 2] [--work DIR]
    magnet experiment fidelity --work DIR --reanalyse            # measure the kept runs again
    magnet experiment fidelity --work DIR --rerun demand-ns3     # re-run ns-3 predictors, then measure

For each application of the suite (experiments/apps/):

1. **Source.**  It runs once across `magnet path --capture` on path A (100 Mbit/s,
   2 ms RTT), with tcpdump on the client's device (the TUN device linkem gives the
   client's namespace: a measurement point next to the client, where a tcpdump on the
   client host would be).
2. **Ground truth.**  It runs --runs times (3) across each path B, captured the same
   way; its run-to-run spread is the floor.
3. **Predictions of each path B from path A's capture alone**, replayed across B:
   `demand-tcp` and `demand-ns3`: the whole-application demand (`magnet demand --all`
   of both sides' traces) replayed by `magnet replay tcp` and `magnet replay ns3`;
   `wire-adu-tcp` and `wire-adu-ns3`: the tcpdump pcap's connections regrouped into
   ADUs as Tmix does (magnetlib.wire_demand), replayed the same way; `wire-open-tcp`
   and `wire-open-ns3`: every data segment of the pcap written at its time
   (`--open-loop`), as a packet replayer would.
4. **Metrics** (magnetlib.app_metrics, one reader for every source): KS of data-segment
   sizes and gaps per direction, per-connection completion-time error (median, p90),
   response-time KS and median error, throughput error in 100 ms bins, bytes per
   connection; each prediction against each truth run, each truth run against the others.

Real-time runs (the application, `magnet replay tcp`) run one at a time, each path's
truth runs interleaved with its real-TCP predictions; the ns-3 replays run afterwards,
--jobs at once, with nothing real-time running.  Results in --out (default
./magnet-results/fidelity): fidelity.csv (a row per application, path, predictor and
run), summary.csv (medians, the floor, the targets), runs.csv (every run: its status
and time), README.md (a table per application, the heat map, CDFs, the findings) and
the figures.  --quick: three applications on one path, under ten minutes.

--seed S (default 1) is every path's seed in both engines (`magnet path --seed`, `magnet replay
tcp|ns3 --seed`: linkem's random loss, ns-3's draws of its loss and of its bulk flows' starts) for
the source and the predictions; truth run k has seed S + k - 1 (run 1 draws as the replays do, the
others their own: a path's losses are not the same packets in every run of an application); give
each study of a suite its own, so that its replays sample the paths as independently as its real
runs do.

A study kept with --work can be measured again (--reanalyse, nothing runs) or have its
ns-3 predictors replayed again by this checkout's ns-3 from the demands its sources
kept (--rerun NAME,...: their runs and rows of runs.csv replaced, the rest kept, then
measured as usual), so that a change to the simulator is judged without the hour of
real-time runs; --rerun replays with the seed the study's ns-3 replays had (their replay.log;
1 where it names none), --seed S instead where given.  Real-TCP predictors are real-time runs: --rerun refuses them.

ns-3's Linux profile gets this host's lags (ACK lag, reply lag, reader wake-up), measured
at the study's start before its real-time runs (experiments/reader_wakeup.py for_study: 3
runs of 12 s over linkem, about 50 s) unless --host-lags gives them; --quick, and a host
where they cannot be measured, give experiments/common.py's constants.  The study records them in
--work and --out as host-lags.json; --rerun replays with the lags the study recorded (the
constants for a study that recorded none), and the README says which.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from magnetlib import app_demand, app_metrics, connections, knobs, signals, wire_demand
from magnetlib.errors import MagnetError

from . import common

# ------------------------------------------------------------------ paths ---
@dataclass(frozen=True)
class Site:
    """A path the applications run across: its name, its flags (those of `magnet path` and
    `magnet replay`, duplex: the same link each way), and what it is."""
    name: str
    flags: str
    title: str

    @property
    def argv(self) -> list[str]:
        return [*self.flags.split(), "--duplex", "on"]

    def scenario(self, seed: int = 1):
        """The Scenario of `magnet path --seed SEED` with these flags (one stack)."""
        from magnet.replay import scenario
        p = argparse.ArgumentParser()
        scenario.add_arguments(p, chain=False)
        s = scenario.from_args(p.parse_args([*self.argv, "--seed", str(seed)]))
        return s.replace(stacks=1)


SOURCE = Site("A", "--rate 100Mbps --delay 1ms", "100 Mbit/s, 2 ms RTT")
TARGETS = [Site("60ms-10M", "--rate 10Mbps --delay 30ms", "10 Mbit/s, 60 ms RTT"),
           Site("200ms-2M", "--rate 2Mbps --delay 100ms", "2 Mbit/s, 200 ms RTT"),
           Site("30ms-20M-loss", "--rate 20Mbps --delay 15ms --loss 1%", "20 Mbit/s, 30 ms RTT, 1 % loss"),
           Site("60ms-20M-cross", "--rate 20Mbps --delay 30ms --cross tcp:4",
                "20 Mbit/s, 60 ms RTT, 4 competing TCP flows each way")]
SITES = {s.name: s for s in TARGETS}


# ------------------------------------------------------------- predictors ---
@dataclass(frozen=True)
class Predictor:
    name: str
    engine: str                  # tcp or ns3 (`magnet replay ENGINE`)
    demand: str                  # which demand of the source: demand, wire-adu, wire-open
    open_loop: bool = False


PREDICTORS = {p.name: p for p in (
    Predictor("demand-tcp", "tcp", "demand"), Predictor("demand-ns3", "ns3", "demand"),
    Predictor("wire-adu-tcp", "tcp", "wire-adu"), Predictor("wire-adu-ns3", "ns3", "wire-adu"),
    Predictor("wire-open-tcp", "tcp", "wire-open", True), Predictor("wire-open-ns3", "ns3", "wire-open", True))}
QUICK_APPS = ["http-python", "redis-paced", "h2load-h2"]
# The work each application does in this study (the recipes' work parameters): about half of
# the suite's defaults for the long ones, so that 10 applications x 4 paths x (3 truth runs +
# 6 predictions) fit in an hour on 2 cores (--full-work: the suite's own).
WORK = {"nginx-bulk": {"size": 2_000_000}, "scp": {"size": 1_000_000}, "vsftpd": {"size": 2_000_000},
        "redis-benchmark": {"requests": 200}, "redis-paced": {"requests": 30}, "memcached": {"requests": 100},
        "h2load-h1": {"requests": 100}, "h2load-h2": {"requests": 100}, "mosquitto": {"messages": 100}}
HONOURS_SIGNALS = True          # it checks for them itself (magnetlib.signals): see main()
CLIENT_TIMEOUT_S = 300
REPLAY_TIMEOUT_S = 600


# ------------------------------------------------------------------- runs ---
@dataclass
class Run:
    """One run of the study: the source, a truth run or a prediction."""
    app: str
    site: str                    # "A" for the source
    kind: str                    # source, truth, or a predictor's name
    run: int
    dir: Path
    status: str = "pending"      # ok, or why not
    seconds: float = float("nan")
    note: str = ""

    @property
    def traces(self) -> tuple[Path, Path]:
        """(client, server) traces, in the form every source writes."""
        if self.kind in ("source", "truth"):
            return self.dir / "t.client.magnet", self.dir / "t.server.magnet"
        return self.dir / "client.magnet", self.dir / "server.magnet"

    def label(self) -> str:
        return f"{self.app} {self.kind}{'' if self.kind == 'source' else f' on {self.site}'}" + \
            (f" #{self.run}" if self.kind == "truth" else "")


def magnet_command() -> list[str]:
    """The `magnet` of this Python (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "magnet"
    return [str(beside)] if beside.exists() else ["magnet"]


def client_script(client: list[str], pcap: Path | None, log: Path) -> list[str]:
    """The client command, bounded in time; with `pcap`, under tcpdump on the client's one
    device (started before it, stopped once the closing handshakes are through)."""
    run = f"timeout {CLIENT_TIMEOUT_S} {shlex.join(client)}"
    if pcap is None:
        return ["sh", "-c", run]
    return ["sh", "-c", f"""dev=$(ls /sys/class/net | grep -vx lo | head -1)
tcpdump -i "$dev" -s 128 -U -n --immediate-mode -Z root --time-stamp-precision=nano -w {shlex.quote(str(pcap))} \
 2> {shlex.quote(str(log))} & td=$!
until grep -q listening {shlex.quote(str(log))}; do kill -0 $td 2>/dev/null || exit 125; sleep 0.01; done
{run}; status=$?
sleep 0.3; kill -INT $td; wait $td || exit 125
exit $status"""]


def truth_seed(seed: int, run: int) -> int:
    """The path's seed for truth run `run` (1-based) of a study with --seed `seed`: run 1 has
    the replays' seed (its loss drawn as theirs), each later run its own, so that the
    truth runs sample the path's randomness as independently as the application would."""
    return seed + run - 1


def run_app(run: Run, recipe, commands, site: Site, seed: int, pcap: bool = False) -> None:
    """The application across `site` (its seed `seed`) with both sides captured (and tcpdump
    for the source)."""
    from magnet.replay import path
    run.dir.mkdir(parents=True, exist_ok=True)
    out, log = run.dir / "client.out", run.dir / "path.log"
    started = time.monotonic()
    with open(out, "w") as stdout, open(run.dir / "client.err", "w") as stderr, open(log, "w") as said:
        try:
            result = path.run(site.scenario(seed), client_script(commands.client, run.dir / "a.pcap" if pcap else None,
                                                              run.dir / "tcpdump.log"),
                              server_cmd=shlex.join(commands.server), ready_port=commands.port,
                              capture=str(run.dir / "t"), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                              client_user="root", server_user="root", say=lambda line: print(line, file=said))
        except (MagnetError, OSError) as e:       # PathError, the emulator's, cross traffic's
            run.status = f"magnet path: {e}"
            return
    run.seconds = time.monotonic() - started
    if result.status:
        run.status = f"the client exited with status {result.status}" + (
            " (tcpdump failed)" if result.status == 125 else "")
        return
    try:
        run.note = str(recipe.verify(out.read_text(), commands))
    except MagnetError as e:
        run.status = str(e)
        return
    run.status = "ok"


def replay_options(engine: str, lags: common.HostLags | None = None, seed: int = 1) -> list[str]:
    """Engine options the study sets: the paths' seed; for ns-3 its Linux TCP profile where it
    has one (the truth is Linux's TCP), with this host's lags (`lags`, the study's; else the
    constants common.HOST_READER_WAKEUP_NS, HOST_ACK_LAG_NS, HOST_REPLY_LAG_NS) where this
    magnet has the options."""
    if engine != "ns3":
        return ["--seed", str(seed)]
    text = subprocess.run([*magnet_command(), "replay", "ns3", "--help"], capture_output=True, text=True).stdout
    options = ["--seed", str(seed)] + (["--tcp-model", "linux"] if "--tcp-model" in text else [])
    given = (lags or common.HostLags()).argv()
    if "--reader-wakeup" in text:
        options += given[0:2]
    if "--ack-lag" in text and "--reply-lag" in text:
        options += given[2:6]
    return options


NS3_OPTIONS = ("--seed", "--tcp-model", "--reader-wakeup", "--ack-lag", "--reply-lag")   # what the study sets


def ns3_options(runs: list[Run], named=NS3_OPTIONS) -> str:
    """The options the study gave `magnet replay ns3` (the seed, its TCP model, the host's
    lags; those of them `named`), as its first ns-3 replay's log recorded them: right also
    for runs measured again (--reanalyse)."""
    for run in runs:
        log = run.dir / "replay.log"
        if run.kind in PREDICTORS and PREDICTORS[run.kind].engine == "ns3" and log.exists():
            words = shlex.split(log.read_text(errors="replace").split("\n", 1)[0].removeprefix("$ "))
            return " ".join(f"{w} {words[i + 1]}" for i, w in enumerate(words[:-1]) if w in named)
    return ""


def ns3_seed(runs: list[Run]) -> int:
    """The seed the study's ns-3 replays had (1, ns-3's default, where their log names none)."""
    given = ns3_options(runs, ("--seed",)).split()
    return int(given[1]) if given else 1


def replay_unavailable(engine: str) -> str | None:
    """Why `magnet replay ENGINE` cannot replay a whole-application demand here (None: it can)."""
    from magnet.replay import engines
    why = engines.unavailable("ns-3" if engine == "ns3" else "tcp")
    if why:
        return why
    text = subprocess.run([*magnet_command(), "replay", engine, "--help"], capture_output=True, text=True).stdout
    if "--open-loop" not in text:
        return f"magnet replay {engine} does not replay a whole-application demand (no --open-loop) in this checkout"
    return None


def run_replay(run: Run, demand: Path, site: Site, predictor: Predictor, extra: list[str]) -> None:
    """`magnet replay ENGINE DEMAND -o DIR` across `site`."""
    run.dir.mkdir(parents=True, exist_ok=True)
    cmd = [*magnet_command(), "replay", predictor.engine, str(demand), "-o", str(run.dir), "--no-plots", *site.argv,
           *(["--open-loop"] if predictor.open_loop else []), *extra]
    started = time.monotonic()
    with open(run.dir / "replay.log", "w") as log:
        print("$ " + shlex.join(cmd), file=log, flush=True)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not finish(proc, started + REPLAY_TIMEOUT_S):
            run.status = f"no result after {REPLAY_TIMEOUT_S} s"
            return
    run.seconds = time.monotonic() - started
    if proc.returncode:
        run.status = f"magnet replay {predictor.engine} failed: {last_line(run.dir / 'replay.log')}"
    elif not all(p.exists() for p in run.traces):
        run.status = "the replay wrote no client.magnet/server.magnet"
    else:
        run.status = "ok"


def finish(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait for a replay (from any thread): True when it ended by itself; ended (and False)
    at the deadline; ended, then Interrupted, when a signal came (magnetlib.signals)."""
    while proc.poll() is None:
        caught = signals.pending()
        if caught or time.monotonic() > deadline:
            stop(proc)
            if caught:
                raise signals.Interrupted(caught)
            return False
        time.sleep(0.05)
    return True


def stop(proc: subprocess.Popen) -> None:
    """End a replay as Ctrl-C would (it cleans up), killed if it has not after 30 s."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip().removeprefix("magnet: ")[:300] if lines else "no output"


def make_demands(source: Run) -> dict[str, Path]:
    """The three demands of the source run: its own (both sides' traces) and the wire's two."""
    from magnet.replay import path
    client, server = source.traces
    out = {"demand": source.dir / "demand.csv", "wire-adu": source.dir / "wire-adu.csv",
           "wire-open": source.dir / "wire-open.csv"}
    d = connections.build([str(client), str(server)])
    app_demand.write(d, out["demand"])
    local = f"{path.SUBNET}.1.1"                     # the client's address in magnet path
    for name, per_segment in (("wire-adu", False), ("wire-open", True)):
        app_demand.write(wire_demand.from_pcap(source.dir / "a.pcap", local, per_segment), out[name])
    (source.dir / "demand-notes.txt").write_text("\n".join(d.notes) + "\n")
    return out


# ------------------------------------------------------------------ plan ---
def options(argv):
    from magnet.experiments.apps import RECIPES
    p = common.parser("fidelity", __doc__)
    p.add_argument("--apps", help=f"applications (default all: {', '.join(RECIPES)}; --quick: "
                                  f"{', '.join(QUICK_APPS)})")
    p.add_argument("--paths", help=f"target paths (default all: {', '.join(SITES)}; --quick: the first)")
    p.add_argument("--runs", type=knobs.arg(knobs.positive_count), help="ground-truth runs per path (default 3)")
    p.add_argument("--predictors", default=",".join(PREDICTORS), help="predictors (default all six)")
    p.add_argument("--jobs", type=knobs.arg(knobs.positive_count), default=2,
                   help="ns-3 replays at once, after the real-time runs (default 2)")
    p.add_argument("--full-work", action="store_true",
                   help="the applications' own work (default: the study's, about half for the long ones)")
    p.add_argument("--work", type=Path, help="keep every run's traces here (default: a temporary directory)")
    p.add_argument("--reanalyse", action="store_true",
                   help="run nothing: measure the runs kept in --work by an earlier run (its runs.csv) again")
    p.add_argument("--rerun", metavar="NAME,...",
                   help="replay only these ns-3 predictors (e.g. demand-ns3) again from the sources kept in "
                        "--work, replacing their runs and rows of runs.csv, then measure every kept run")
    common.add_host_lags(p)
    p.set_defaults(seed=None)                   # --rerun: the study's own unless given
    args = common.parse(p, argv)
    if args.rerun is None and args.seed is None:
        args.seed = 1
    if args.host_lags is not None and (args.reanalyse or args.rerun is not None):
        p.error("--host-lags: a study's own runs only (--rerun takes the lags the study in --work recorded)")
    if args.reanalyse and not args.work:
        p.error("--reanalyse: give the --work directory of the run to measure again")
    if args.rerun is not None:
        if args.reanalyse:
            p.error("--rerun measures the runs again itself: give --rerun or --reanalyse, not both")
        if not args.work:
            p.error("--rerun: give the --work directory of the study whose predictors to re-run")
        args.rerun = common.choices(p, "--rerun", args.rerun, PREDICTORS)
        realtime = [name for name in args.rerun if PREDICTORS[name].engine != "ns3"]
        if realtime:
            p.error(f"--rerun {','.join(realtime)}: real-time predictors (Linux's TCP over linkem) are not re-run; "
                    f"--rerun takes ns-3 ones: {', '.join(n for n, q in PREDICTORS.items() if q.engine == 'ns3')}")
    args.apps = common.choices(p, "--apps", args.apps or ",".join(QUICK_APPS if args.quick else RECIPES), RECIPES)
    args.paths = common.choices(p, "--paths", args.paths or ",".join(list(SITES)[:1] if args.quick else SITES), SITES)
    args.predictors = common.choices(p, "--predictors", args.predictors, PREDICTORS)
    if args.rerun and (left := [name for name in args.rerun if name not in args.predictors]):
        p.error(f"--rerun {','.join(left)}: not among --predictors")
    args.runs = args.runs or 3
    if args.runs < 2:
        p.error("--runs: at least 2 (the ground truth's spread needs two runs)")
    return args


def plan(args, work: Path) -> tuple[list[Run], list[Run]]:
    """(real-time runs in order, ns-3 runs).  Per application: its source, then per round
    r every path's truth run r followed by one of its real-TCP predictions, so that truth
    and predictions interleave in time."""
    realtime, ns3 = [], []
    tcp = [PREDICTORS[p] for p in args.predictors if PREDICTORS[p].engine == "tcp"]
    sim = [PREDICTORS[p] for p in args.predictors if PREDICTORS[p].engine == "ns3"]
    for app in args.apps:
        realtime.append(Run(app, SOURCE.name, "source", 1, work / app / "source"))
        for r in range(max(args.runs, len(tcp))):
            for site in args.paths:
                if r < args.runs:
                    realtime.append(Run(app, site, "truth", r + 1, work / app / site / f"truth-{r + 1}"))
                if r < len(tcp):
                    realtime.append(Run(app, site, tcp[r].name, 1, work / app / site / tcp[r].name))
        ns3 += [Run(app, site, p.name, 1, work / app / site / p.name) for site in args.paths for p in sim]
    return realtime, ns3


# --------------------------------------------------------------- execute ---
def execute(args, work: Path, lags: common.HostLags | None = None) -> list[Run]:
    """Every run of the plan, ns-3's with the host's `lags`; a run that cannot happen says
    why in its status."""
    realtime, ns3 = plan(args, work)
    engines_down = {e: why for e in ("tcp", "ns3") if (why := replay_unavailable(e))}
    extra = {e: replay_options(e, lags, args.seed) for e in ("tcp", "ns3") if e not in engines_down}
    sources = {r.app: r for r in realtime if r.kind == "source"}
    demands: dict[str, dict[str, Path]] = {}
    commands: dict = {}
    bar = common.progress(total=len(realtime) + len(ns3), desc="fidelity")

    def do(run: Run) -> Run:
        if signals.pending():                    # any thread: no new run once a signal came
            raise signals.Interrupted(signals.pending())
        source, recipe = sources[run.app], recipe_of(run.app, args.full_work)
        if run.kind == "source":
            commands[run.app] = recipe.prepare(work / run.app / "files")
            run_app(run, recipe, commands[run.app], SOURCE, args.seed, pcap=True)
            if run.status == "ok":
                try:
                    demands[run.app] = make_demands(run)
                except MagnetError as e:
                    run.status = f"its demand: {e}"
        elif source.status != "ok":
            run.status = f"no source ({source.status})"
        elif run.kind == "truth":
            run_app(run, recipe, commands[run.app], SITES[run.site], truth_seed(args.seed, run.run))
        else:
            predict(run, demands[run.app], engines_down, extra)
        return run

    def done(run: Run) -> None:
        bar.update()
        common.progress_note(f"  {run.label()}: {run.status} ({run.seconds:.1f} s)")

    for run in realtime:                         # one at a time: they would disturb each other
        done(do(run))
    with ThreadPoolExecutor(args.jobs) as pool:  # simulations only: nothing real-time runs now
        for run in pool.map(do, ns3):
            done(run)
    bar.close()
    runs_frame(realtime + ns3).to_csv(work / "runs.csv", index=False)
    return realtime + ns3


RUNS_COLUMNS = ("app", "path", "kind", "run", "status", "seconds", "work")     # runs.csv's


def study_runs(work: Path):
    """runs.csv of the study kept in `work`: StudyError if there is none."""
    import pandas as pd
    where = work / "runs.csv"
    try:
        frame = pd.read_csv(where, keep_default_na=False, dtype=str)
    except OSError as e:
        raise common.StudyError(str(where), f"not a fidelity study's runs (--work of one): {e.strerror}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise common.StudyError(str(where), f"not a fidelity study's runs: {e}") from None
    if missing := [c for c in RUNS_COLUMNS if c not in frame.columns]:
        raise common.StudyError(str(where), f"not a fidelity study's runs: lacks columns {', '.join(missing)}")
    return frame


def kept(args, work: Path) -> list[Run]:
    """The runs an earlier study left in `work` (--reanalyse), those of this one's options."""
    frame = study_runs(work)
    runs = []
    for r in frame.itertuples():
        if r.app not in args.apps or (r.kind != "source" and (r.path not in args.paths or
                                                              (r.kind != "truth" and r.kind not in args.predictors))):
            continue
        where = work / r.app / ("source" if r.kind == "source" else f"{r.path}/{r.kind}" if r.kind != "truth"
                                else f"{r.path}/truth-{r.run}")
        runs.append(Run(r.app, r.path, r.kind, int(r.run), where, r.status, float(r.seconds or "nan"), r.work))
    return runs


def rerun(args, work: Path, lags: common.HostLags | None = None) -> list[Run]:
    """--rerun: the kept runs, those of the named ns-3 predictors replayed again (--jobs at
    once, each into an emptied directory, with the host's `lags`) from their sources' kept
    demands; runs.csv's rows of those runs replaced, every other row as it was."""
    runs = kept(args, work)
    again = [r for r in runs if r.kind in args.rerun]
    if not again:
        raise common.StudyError(str(work / "runs.csv"), f"no {', '.join(args.rerun)} runs of "
                                f"{', '.join(args.apps)} on {', '.join(args.paths)} to re-run")
    seed = ns3_seed(runs) if args.seed is None else args.seed
    extra = {"ns3": replay_options("ns3", lags, seed)}
    sources = {r.app: r for r in runs if r.kind == "source"}
    bar = common.progress(total=len(again), desc="fidelity --rerun")

    def do(run: Run) -> Run:
        if signals.pending():
            raise signals.Interrupted(signals.pending())
        source = sources.get(run.app)
        demand = source.dir / f"{PREDICTORS[run.kind].demand}.csv" if source else None
        run.status, run.seconds = "its --rerun did not finish", float("nan")
        shutil.rmtree(run.dir, ignore_errors=True)
        if source is None or source.status != "ok":
            run.status = f"no source ({source.status if source else 'none in runs.csv'})"
        elif not demand.exists():
            run.status = f"no source demand: {demand} is missing"
        else:
            predict(run, {PREDICTORS[run.kind].demand: demand}, {}, extra)
        return run

    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            for run in pool.map(do, again):
                bar.update()
                common.progress_note(f"  {run.label()}: {run.status} ({run.seconds:.1f} s)")
    finally:                                     # interrupted too: no row says ok of a run removed
        bar.close()
        frame = study_runs(work)
        for run in again:
            row = (frame.app == run.app) & (frame.path == run.site) & (frame.kind == run.kind) & \
                (frame.run == str(run.run))
            frame.loc[row, ["status", "seconds"]] = [run.status, "" if run.seconds != run.seconds else
                                                     str(round(run.seconds, 2))]
        frame.to_csv(work / "runs.csv", index=False)
    return runs


def recipe_of(app: str, full_work: bool = False):
    """The application's recipe with the study's work (or its own)."""
    from magnet.experiments.apps import RECIPES
    return RECIPES[app] if full_work else RECIPES[app].with_work(**WORK.get(app, {}))


def predict(run: Run, demands: dict[str, Path], engines_down: dict, extra: dict) -> None:
    predictor = PREDICTORS[run.kind]
    if predictor.engine in engines_down:
        run.status = f"unavailable: {engines_down[predictor.engine]}"
        return
    run_replay(run, demands[predictor.demand], SITES[run.site], predictor, extra[predictor.engine])


# --------------------------------------------------------------- metrics ---
def measure(runs: list[Run]):
    """fidelity.csv's rows: each prediction against each truth run of its application and
    path, each truth run against the later ones (the floor); and the profiles (for the CDFs)."""
    import pandas as pd
    profiles = {}
    for run in runs:
        if run.status != "ok":
            continue
        try:
            profiles[id(run)] = app_metrics.profile(*map(str, run.traces), source=run.label())
        except MagnetError as e:
            run.status = f"its traces: {e}"
    rows = []
    for (app, site), group in _groups(runs):
        truths = [r for r in group if r.kind == "truth" and id(r) in profiles]
        for a_i, a in enumerate(truths):
            for b in truths[a_i + 1:]:
                rows.append(_row(app, site, "truth", f"{a.run}-{b.run}", profiles[id(a)], profiles[id(b)]))
        for run in group:
            if run.kind in ("truth", "source"):
                continue
            if run.status != "ok" or not truths:
                rows.append({"app": app, "path": site, "predictor": run.kind, "run": "", "status": run.status
                             if run.status != "ok" else "no ground truth"})
                continue
            for t in truths:
                rows.append(_row(app, site, run.kind, str(t.run), profiles[id(run)], profiles[id(t)]))
    return pd.DataFrame(rows), profiles


def facts(runs: list[Run], profiles: dict):
    """What the findings are drawn from, per application and path: on A, what its demands
    hold (connections, those opened `after` another, sends of each demand) and the share of
    its ADUs that answer the one before; on each B, that share in the truth runs (median)."""
    import numpy as np
    import pandas as pd
    rows = []
    for run in runs:
        p = profiles.get(id(run))
        if p is None or run.kind not in ("source", "truth"):
            continue
        row = {"app": run.app, "path": run.site, "run": run.run, "answering": p.answers / p.adus if p.adus
               else np.nan}
        if run.kind == "source":
            demands = {name: app_demand.read(run.dir / f"{name}.csv") for name in ("demand", "wire-adu")}
            d = demands["demand"]
            opens = d.event == app_demand.OPEN
            row.update(connections=int(opens.sum()), after=int((d.after[opens] > 0).sum()),
                       **{f"{name}_sends": int((x.event == app_demand.SEND).sum()) for name, x in demands.items()})
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.groupby(["app", "path"], sort=False).median(numeric_only=True).reset_index() if len(frame) else frame


def _groups(runs: list[Run]):
    keys = dict.fromkeys((r.app, r.site) for r in runs if r.kind != "source")
    for key in keys:
        yield key, [r for r in runs if (r.app, r.site) == key]


def _row(app: str, site: str, predictor: str, run: str, pred, truth) -> dict:
    return {"app": app, "path": site, "predictor": predictor, "run": run,
            **app_metrics.compare(pred, truth), "status": "ok"}


def runs_frame(runs: list[Run]):
    import pandas as pd
    return pd.DataFrame([{"app": r.app, "path": r.site, "kind": r.kind, "run": r.run, "status": r.status,
                          "seconds": round(r.seconds, 2), "work": r.note} for r in runs])


# ------------------------------------------------------------------ main ---
def unavailable(apps: list[str]) -> str | None:
    """Why the study cannot run here (None: it can): root, tcpdump, the BPF capture, the
    applications' packages."""
    from magnet.experiments.apps import RECIPES
    from magnet.replay import wire
    if os.geteuid() != 0:
        return "fidelity needs root (network namespaces, the BPF capture)"
    if shutil.which("tcpdump") is None:
        return "fidelity needs tcpdump (apt-get install tcpdump)"
    why = wire.bpf_unavailable()
    if why:
        return f"fidelity needs the BPF capture: {why}"
    return next((why for app in apps if (why := RECIPES[app].missing())), None)


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def others() -> str:
    """What else was running: network namespaces of other magnet runs (other processes)."""
    try:
        names = os.listdir("/run/netns")
    except OSError:
        names = []
    mine = str(os.getpid())
    runs = {n.split("-")[0] for n in names if n.startswith("mg") and mine not in n}
    return (f"{len(runs)} other magnet runs had network namespaces at the start" if runs else
            "no other magnet run had network namespaces at the start") + \
        f" (on {os.cpu_count()} CPUs)."


def main(argv: list[str] | None = None) -> int:
    from . import fidelity_report
    args = options(argv)
    why = replay_unavailable("ns3") if args.rerun else unavailable(args.apps)
    common.gate(why is None, why or "")
    started = time.monotonic()
    context = {"load": load(), "others": others(), "lags": None}
    if args.reanalyse or args.rerun:
        study_runs(args.work)                    # a study's, before anything is made in it
        try:                                     # the lags its ns-3 runs had (--rerun: will have)
            context["lags"] = common.HostLags.recorded(args.work) if args.rerun else \
                common.HostLags.read(args.work)
        except common.StudyError as e:
            common.gate(False, str(e))
    fresh_ns3 = not (args.reanalyse or args.rerun) and any(PREDICTORS[p].engine == "ns3" for p in args.predictors)
    try:
        with signals.honoured(), common.workspace(args, "magnet-fidelity-") as work:
            if fresh_ns3:                        # the host's lags, before the real-time runs
                from . import reader_wakeup
                context["lags"] = reader_wakeup.for_study(args, work)
                context["lags"].write(work / common.LAGS_FILE)
                common.progress_note(f"fidelity: ns-3's host lags: {context['lags']}")
            runs = kept(args, work) if args.reanalyse else rerun(args, work, context["lags"]) if args.rerun \
                else execute(args, work, context["lags"])
            rows, profiles = measure(runs)
            context["facts"] = facts(runs, profiles)
            minutes = (time.monotonic() - started) / 60
            context["load"] += f" at the start, {load()} at the end" + (" of this analysis" if args.reanalyse or args.rerun else "")
            path = fidelity_report.write(args, runs, rows, profiles, minutes, context)
    except KeyboardInterrupt:
        print("fidelity: interrupted (nothing written)", file=sys.stderr)
        return 130
    failed = [r for r in runs if r.status != "ok"]
    print(f"fidelity: {len(runs) - len(failed)} of {len(runs)} runs ok in {minutes:.1f} min; results in "
          f"{path.parent} (README.md, fidelity.csv, summary.csv, runs.csv, figures)")
    for r in failed:
        print(f"fidelity: {r.label()}: {r.status}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
