"""The commands that honour signals, interrupted: what a run left behind, one trial, and the
signal fuzzer of `make fuzz`.

    python -m tests.interrupts --trials 40        # each command: SIGINT/SIGTERM/SIGHUP at random
                                                  # moments and at random forks (strace's injection)

A trial passes when the command exits 130 saying it was interrupted, prints no traceback,
and leaves nothing behind: no namespace, TUN device or veth, cgroup, or process of its run
(endpoints, relays, cross traffic, linkem, magnet-read, magnet-chain, the netns guard),
and for a study no results directory without its README nor a staging directory.  A
signal that came before magnet's handlers were installed (Python's own start-up: ~50 ms
idle, over a second under a load of 17 on 2 cores; /proc/PID/status's SigCgt says which)
is counted apart, as is a run that ended before its signal came.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# --------------------------------------------------------------- leftovers ---
def leftovers(pid: int, out: Path | None = None) -> dict:
    """What run `pid` (writing into `out`) left behind; other runs' objects do not count."""
    from magnet.replay import netns
    prefix = f"mgrp{pid}"
    return {"namespaces": [n for n in netns.listed() if n.startswith(prefix + "-")],
            "links": [line for line in netns.sh("ip", "-o", "link", check=False).stdout.splitlines()
                      if f"{prefix}h" in line or f"{prefix}t" in line],
            "cgroups": glob.glob(f"/sys/fs/cgroup/*/magnet/{prefix}-*") + glob.glob(f"/sys/fs/cgroup/magnet/{prefix}-*"),
            "processes": _processes(prefix, out)}


def _processes(prefix: str, out: Path | None) -> list[str]:
    """Processes whose arguments name the run's prefix or its output directory."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if int(cmdline.parent.name) == os.getpid():
            continue
        if any(a == prefix or a.startswith(prefix + "-") or f"={prefix}-" in a
               or (out is not None and str(out) in a) for a in args):
            found.append(f"{cmdline.parent.name} {' '.join(args)[:200]}")
    return found


def wait_clean(pid: int, out: Path | None, timeout_s: float = 20.0) -> dict:
    """leftovers() once empty, or what is still there after `timeout_s` (a guard may be sweeping)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = leftovers(pid, out)
        if not any(left.values()) or time.monotonic() > deadline:
            return {k: v for k, v in left.items() if v}
        time.sleep(0.2)


# ---------------------------------------------------------------- commands ---
@dataclass(frozen=True)
class Command:
    """A command that honours signals, as a trial runs it: `args(out)`, how long it takes
    here (random moments fall within it), and what it needs."""
    name: str
    args: object
    length_s: float
    needs: tuple = ()                            # "root", "ns3"
    says: str = "magnet: interrupted"            # (or magnet's own line, if it came as magnet loaded)

    def why_not(self) -> str | None:
        if "root" in self.needs:
            if os.geteuid() != 0:
                return "needs root"
            from magnet.replay import linkem
            why = linkem.unavailable()
            if why:
                return f"link emulator: {why}"
        if "ns3" in self.needs:
            from magnet.replay import engines
            why = engines.unavailable("ns-3")
            if why:
                return f"ns-3: {why}"
        return None


COMMANDS = {
    "tcp-loopback": Command("replay tcp --loopback (relay, 2 stacks)", lambda out: [
        "replay", "tcp", "synth:ftp", "--duration", "4", "--loopback", "--stacks", "2", "--mode", "relay",
        "--no-plots", "-o", out], 6.0),
    "tcp-relay-cross": Command("replay tcp (relay, 3 stacks, cross traffic)", lambda out: [
        "replay", "tcp", "synth:ftp", "--duration", "4", "--stacks", "3", "--mode", "relay", "--cross", "tcp:1",
        "--no-plots", "-o", out], 8.0, ("root",)),
    "tcp-offline": Command("replay tcp (offline, 2 stacks)", lambda out: [
        "replay", "tcp", "synth:ftp", "--duration", "2", "--stacks", "2", "--no-plots", "-o", out], 8.0, ("root",)),
    "ns3": Command("replay ns3 (4 stacks)", lambda out: [
        "replay", "ns3", "synth:ftp", "--duration", "600", "--stacks", "4", "--no-plots", "-o", out], 8.0, ("ns3",)),
    "multistack": Command("experiment multistack --quick (ns-3, 120 s demands)", lambda out: [
        "experiment", "multistack", "--quick", "--duration", "120", "--engines", "ns-3", "--cases", "ftp",
        "--out", out], 10.0, ("ns3",), "multistack: interrupted"),
}


# ------------------------------------------------------------------ trials ---
@dataclass
class Trial:
    command: str
    sig: int
    how: str                   # "at 1.234 s" or "at fork 3"
    ignored: bool              # started with SIGINT ignored (a shell's background job)
    outcome: str = ""          # ok | before-handlers | ended-first | no-such-fork | FAILED: ...
    left: dict = field(default_factory=dict)

    def line(self) -> str:
        return (f"{self.command}: {signal.Signals(self.sig).name} {self.how}"
                f"{' (SIGINT ignored)' if self.ignored else ''}: {self.outcome}")


def run_trial(key: str, sig: int, work: Path, *, at_s: float | None = None, fork: int | None = None,
              ignored: bool = False, after: str | None = None) -> Trial:
    """One run of COMMANDS[key] in a directory made under `work`, signalled `at_s` seconds
    after it started (with `after`: after a process of the run whose arguments hold `after`
    started) or as its fork-th fork (clone or vfork) returns; its outcome."""
    command = COMMANDS[key]
    work = Path(tempfile.mkdtemp(prefix="mgsig-", dir=work))
    out = work / "out"
    how = f"at fork {fork}" if fork is not None else f"at {at_s:.3f} s" + (f" after {after} started" if after else "")
    trial = Trial(key, sig, how, ignored)
    argv = [str(BIN / "magnet"), *map(str, command.args(out))]
    log = work / "strace.log"
    if fork is not None:
        argv = ["strace", "-o", str(log), "-e", "trace=clone,vfork", "-e",
                f"inject=clone,vfork:signal={signal.Signals(sig).name}:when={fork}", *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: _start_signals(ignored))
    pid = proc.pid if fork is None else _child(proc.pid)
    handled = None
    if fork is None:
        try:
            if after is not None:
                _started(proc, after, out)
            proc.wait(at_s)
        except subprocess.TimeoutExpired:
            handled = _catches(pid, signal.SIGTERM)
            proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        err += "\n(did not end within 300 s of its signal)"
    trial.left = wait_clean(pid, out)
    trial.outcome = _judge(command, trial, proc.returncode, err, handled,
                           None if fork is None else _injected(log, sig), out)
    return trial


def _start_signals(sigint_ignored: bool) -> None:
    """The command's signals at its start: SIGHUP at its default whatever the fuzzer was
    started under (magnet keeps a SIGHUP ignored by nohup ignored, as it should, so under
    nohup every SIGHUP trial read as a dropped signal), SIGINT ignored when the trial says."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN if sigint_ignored else signal.SIG_DFL)


def _judge(command: Command, trial: Trial, status: int, err: str, handled: bool | None,
           injected: bool | None, out: Path) -> str:
    results = _results_problem(command, out)
    if trial.left or results:
        return f"FAILED: left {trial.left or results}"
    if injected is False or (handled is None and injected is None):
        return "ended-first" if status == 0 else f"FAILED: exit {status} without a signal: {_last(err)}"
    said = command.says in err or err.strip() == "magnet: interrupted"
    if status == 130 and said and "Traceback" not in err:
        return "ok"
    if handled is False:                  # the system's default (or SIG_IGN) still applied
        return "before-handlers"
    return f"FAILED: exit {status}: {_last(err)}"


def _results_problem(command: Command, out: Path) -> str | None:
    """A study's results: none, or whole (README.md with them); never a staging directory."""
    staged = glob.glob(str(out.parent / f".{out.name}.partial-*"))
    if staged:
        return f"staging directories {staged}"
    if command.says != "magnet: interrupted" and out.exists() and not (out / "README.md").exists():
        return f"{out} without its README.md: {sorted(p.name for p in out.iterdir())}"
    return None


def _last(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    return " | ".join(lines[-3:])


def _started(proc: subprocess.Popen, what: str, out: Path, timeout_s: float = 60.0) -> None:
    """Once a process of the run whose arguments name `out` and hold `what` runs (or the run
    has ended)."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and not any(what in p for p in _processes(f"mgrp{proc.pid}", out)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} of the run within {timeout_s} s")
        time.sleep(0.05)


def _child(pid: int, timeout_s: float = 10.0) -> int:
    """strace's child: the command it runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.001)
    raise RuntimeError(f"strace ({pid}) started no command within {timeout_s} s")


def _catches(pid: int, sig: int) -> bool:
    """Whether the process has a handler for `sig` (its SigCgt mask): magnet's are in place."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    mask = int(re.search(r"^SigCgt:\s*([0-9a-f]+)", status, re.M).group(1), 16)
    return bool(mask >> (sig - 1) & 1)


def _injected(log: Path, sig: int) -> bool:
    name = signal.Signals(sig).name
    return f"--- {name} {{si_signo={name}, si_code=SI_KERNEL}}" in log.read_text()


# ------------------------------------------------------------------ fuzzer ---
# The forks (clone, vfork) of a whole run of each command, counted with strace here: strace
# injects at the Nth of each, so a trial picks N up to the larger count.
FORKS = {"tcp-loopback": 3, "tcp-relay-cross": 42, "tcp-offline": 23, "ns3": 1, "multistack": 8}


def fuzz(keys: list[str], trials: int, seed: int, say=print) -> list[Trial]:
    """`trials` trials of each command: half at a random moment of its run, half at a
    random fork; a random signal, SIGINT ignored at start one time in four."""
    rng = random.Random(seed)
    forks = shutil.which("strace") is not None
    if not forks:
        say("signal fuzzer: strace is not installed: signals at random moments only, none at forks")
    done = []
    with tempfile.TemporaryDirectory(prefix="mgsig-") as work:
        for key in keys:
            for i in range(trials):
                sig = rng.choice(SIGNALS)
                ignored = rng.random() < 0.25
                if i % 2 == 0 or not forks:
                    t = run_trial(key, sig, Path(work), at_s=rng.uniform(0, COMMANDS[key].length_s),
                                  ignored=ignored)
                else:
                    t = run_trial(key, sig, Path(work), fork=rng.randint(1, FORKS[key]), ignored=ignored)
                done.append(t)
                say(t.line())
    return done


def summary(trials: list[Trial]) -> str:
    counts: dict[str, int] = {}
    for t in trials:
        kind = "failed" if t.outcome.startswith("FAILED") else t.outcome
        counts[kind] = counts.get(kind, 0) + 1
    return (f"signal fuzzer: {len(trials)} trials, {counts.get('failed', 0)} failed; "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.interrupts", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=20, help="trials per command (default 20)")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--commands", default=",".join(COMMANDS), help=", ".join(COMMANDS))
    args = p.parse_args(argv)
    keys = []
    for key in args.commands.split(","):
        why = COMMANDS[key].why_not()
        if why:
            print(f"signal fuzzer: {key} skipped: {why}", file=sys.stderr)
            if os.environ.get("CI"):
                return 1
        else:
            keys.append(key)
    print(f"signal fuzzer: seed {args.seed}, {args.trials} trials of each of {', '.join(keys)}")
    trials = fuzz(keys, args.trials, args.seed)
    print(summary(trials))
    return 1 if any(t.outcome.startswith("FAILED") for t in trials) else 0


if __name__ == "__main__":
    sys.exit(main())
