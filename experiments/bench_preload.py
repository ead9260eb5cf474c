"""Benchmark: what the preload capture (libmagnet-preload.so) costs a program.

    python -m magnet.experiments.bench_preload [--rounds 7] [--seconds 1] [--quick] [--out DIR]

A small C program (experiments/native/preload_bench.c) is run with and without the shim,
interleaved round by round so that a noisy neighbour hits both alike:

  per call    send() + recv() of 64 bytes over a UNIX socketpair (recorded
              with MAGNET_PRELOAD_SOCKETS=all) and over a TCP loopback
              connection; write() to /dev/null (not a socket: the cached fd
              check only). In each process, blocks of --calls iterations
              through libc alternate with blocks of the same system calls
              made raw (syscall(2), which the shim cannot see); the median of
              the blocks' differences, with the shim minus without it, is what
              the shim adds, per call.
  bulk        one TCP loopback connection, a forked receiver (sender and
              receiver pinned to CPUs 0 and 1), sends of 64 KiB and of 1 KiB
              for --seconds: throughput, and CPU per GB (both processes,
              user + system). Loopback throughput varies by more than the
              shim's cost from run to run, so the loss is also estimated
              from the cost per call: calls a second x that cost / CPU time.

The TCP calls also run with --ext (a TCP_INFO snapshot per call: three to
five more system calls), to say what the snapshot costs.

strace -f -e trace=network runs the same programs (fewer blocks: it stops the
process at every call). Reported: medians [min, max] over the rounds.
Every shim run's spool is checked: one record per call, none lost.
Targets: <= 100 ns per intercepted call, <= 3 % throughput loss.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from magnet.capture import preload
from magnetlib.format import Event

from . import common
from .common import spread

NAME = "preload"
NS_TARGET, LOSS_TARGET_PCT = 100, 3.0
CALL_MODES = ("unix", "tcp", "devnull")
BULK_CHUNKS = (65536, 1024)
BLOCKS, STRACE_BLOCKS = 100, 4         # blocks of --calls iterations per process

@dataclass
class Run:
    test: str           # "calls unix", "bulk 65536", ...
    config: str         # without, shim, ext (shim with --ext), strace
    value: float        # ns per iteration through libc, or Gb/s
    extra: float        # ns per iteration more than the raw system calls, or CPU s per GB
    records_ok: bool | None = None
    calls_per_s: float = 0.0    # bulk: send and recv calls per second


class Runner:
    """Runs the program one way: without the shim, with it (a fresh spool each
    run, checked afterwards), or under strace."""

    def __init__(self, binary: Path, library: Path, workdir: Path):
        self.binary, self.library, self.workdir = binary, library, workdir
        self.strace = shutil.which("strace")

    def run(self, config: str, args: list[str], all_sockets: bool = False) -> tuple[list[str], bool | None]:
        cmd = [str(self.binary), *args]
        if config == "strace":
            cmd = [self.strace, "-f", "-qq", "-e", "trace=network", "-o", os.devnull, *cmd]
        if config not in ("shim", "ext"):
            return self._output(cmd, None), None
        spool = preload.Spool(self.workdir / "spool.magnet", all_sockets=all_sockets, ext=config == "ext")
        try:
            out = self._output(cmd, spool.environment(self.library))
            return out, spool_matches(spool, out, args)
        finally:
            spool.remove()

    @staticmethod
    def _output(cmd: list[str], env: dict | None) -> list[str]:
        return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.split()


def spool_matches(spool: preload.Spool, out: list[str], args: list[str]) -> bool:
    """One record per call the program made, none lost."""
    records = preload.read_spool_dir(spool.path, spool.record_size)
    events = records["event"]
    if (events == Event.LOST).any():
        return False
    if args[0] == "calls":
        expect = 0 if args[1] == "devnull" else 2 * int(out[3])
        return len(records) == expect
    return (events == Event.SOCK_SEND).sum() == int(out[2]) and (events == Event.SOCK_RECV).sum() == int(out[3])


def measure(args, runner: Runner) -> list[Run]:
    configs = ["without", "shim"] + (["strace"] if runner.strace else [])
    runs = []
    for round_ in range(args.rounds):
        print(f"round {round_ + 1}/{args.rounds}", file=sys.stderr, flush=True)
        for mode in CALL_MODES:
            for config in configs + (["ext"] if mode == "tcp" else []):
                blocks = STRACE_BLOCKS if config == "strace" else BLOCKS
                out, ok = runner.run(config, ["calls", mode, str(args.calls), str(blocks)],
                                     all_sockets=True)
                runs.append(Run(f"calls {mode}", config, float(out[0]), float(out[2]), ok))
        for chunk in BULK_CHUNKS:
            for config in configs:
                out, ok = runner.run(config, ["bulk", str(args.seconds), str(chunk)])
                runs.append(Run(f"bulk {chunk}", config, float(out[0]), float(out[1]), ok,
                                (int(out[2]) + int(out[3])) / float(out[4])))
    return runs


# ---------------------------------------------------------------- report ---
def values(runs: list[Run], test: str, config: str, field: str = "value") -> list[float]:
    return [getattr(r, field) for r in runs if r.test == test and r.config == config]


def call_rows(runs: list[Run]) -> tuple[list[str], list[float]]:
    """Per-call lines, and the shim's added ns per call of each mode (paired by round)."""
    lines, added = [], []
    calls_per_iteration = {"unix": 2, "tcp": 2, "devnull": 1}   # per iteration
    for mode in CALL_MODES:
        test = f"calls {mode}"
        without, shim = values(runs, test, "without"), values(runs, test, "shim")
        per_call = [(s - w) / calls_per_iteration[mode]
                    for w, s in zip(values(runs, test, "without", "extra"), values(runs, test, "shim", "extra"))]
        added.append(statistics.median(per_call))
        strace = values(runs, test, "strace")
        lines.append(f"| {test} (ns per iteration) | {spread(without, '{:.1f}')} | {spread(shim, '{:.1f}')} | "
                     f"{spread(strace, '{:.1f}') if strace else '–'} | {spread(per_call, '{:.1f}')} |")
        ext = values(runs, test, "ext")
        if ext:
            per_call = [(e - w) / calls_per_iteration[mode] for w, e in
                        zip(values(runs, test, "without", "extra"), values(runs, test, "ext", "extra"))]
            lines.append(f"| {test} with --ext (ns per iteration) | {spread(without, '{:.1f}')} | "
                         f"{spread(ext, '{:.1f}')} | | {spread(per_call, '{:.1f}')} |")
    return lines, added


def bulk_rows(runs: list[Run], ns_per_call: float) -> tuple[list[str], list[float], list[float]]:
    """Bulk lines; measured throughput losses; losses estimated from the cost per call
    (the calls a second without the shim, times that cost, over the CPU time they took)."""
    lines, losses, estimates = [], [], []
    for chunk in BULK_CHUNKS:
        test = f"bulk {chunk}"
        without, shim, strace = (values(runs, test, c) for c in ("without", "shim", "strace"))
        loss = [100 * (1 - s / w) for w, s in zip(without, shim)]
        losses.append(statistics.median(loss))
        cpu = [values(runs, test, c, "extra") for c in ("without", "shim")]
        cpu_per_s = [c * g / 8 for c, g in zip(cpu[0], without)]
        estimate = [100 * n * ns_per_call * 1e-9 / c
                    for n, c in zip(values(runs, test, "without", "calls_per_s"), cpu_per_s)]
        estimates.append(statistics.median(estimate))
        lines.append(f"| {test} B sends (Gb/s) | {spread(without, '{:.1f}')} | {spread(shim, '{:.1f}')} | "
                     f"{spread(strace, '{:.1f}') if strace else '–'} | {spread(loss, '{:.1f}')} % |")
        lines.append(f"| {test} B sends (CPU s per GB) | {spread(cpu[0], '{:.3f}')} | "
                     f"{spread(cpu[1], '{:.3f}')} | | {spread(estimate, '{:.2f}')} % "
                     "(estimated) |")
    return lines, losses, estimates


def report(runs: list[Run], args) -> str:
    calls, added = call_rows(runs)
    bulk, losses, estimates = bulk_rows(runs, added[CALL_MODES.index("tcp")])
    checked = [r.records_ok for r in runs if r.records_ok is not None]
    head = ["| test | without | with the shim | strace -f -e trace=network | shim's cost |",
            "|---|---|---|---|---|"]
    text = [f"{args.rounds} interleaved rounds; medians [min, max]. Per call: {BLOCKS} blocks of "
            f"{args.calls:,} iterations each way per process (strace: {STRACE_BLOCKS}); the shim's "
            f"cost is paired, block by block, with raw system calls. Bulk: {args.seconds:g} s "
            "per run over TCP loopback.", "", *head, *calls, *bulk, "",
            f"- added per intercepted call (socket calls recorded; /dev/null: the fd check only): "
            + ", ".join(f"{m} {a:.1f} ns" for m, a in zip(CALL_MODES, added))
            + f"; target <= {NS_TARGET} ns: {'met' if max(added[:2]) <= NS_TARGET else 'MISSED'}",
            f"- throughput loss at saturation, measured (loopback varies more than that from run "
            "to run): " + ", ".join(f"{c} B sends {l:.1f} %" for c, l in zip(BULK_CHUNKS, losses))
            + f"; target <= {LOSS_TARGET_PCT:g} %: "
            + ("met" if max(losses) <= LOSS_TARGET_PCT else "MISSED"),
            "- estimated from the TCP cost per call (calls per second without the shim x that "
            "cost / the CPU time they took): "
            + ", ".join(f"{c} B sends {e:.2f} %" for c, e in zip(BULK_CHUNKS, estimates))
            + f"; target <= {LOSS_TARGET_PCT:g} %: "
            + ("met" if max(estimates) <= LOSS_TARGET_PCT else "MISSED"),
            f"- spools checked: {sum(checked)}/{len(checked)} had one record per call and none lost"]
    if not shutil.which("strace"):
        text.append("- strace is not installed (Debian: apt-get install strace): its column is empty")
    return "\n".join(text)


def main(argv=None) -> int:
    p = common.bench_parser("bench_preload", NAME, __doc__)
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds per bulk run (default 1)")
    p.add_argument("--calls", type=int, default=500, help="iterations per block (default 500)")
    args = common.parse(p, argv)
    common.quick(p, args, rounds=3, seconds=0.3, calls=200)
    with tempfile.TemporaryDirectory(prefix="magnet-bench-preload-") as tmp:
        workdir = Path(tmp)
        runner = Runner(common.native_program("preload_bench"), preload.find_library(), workdir)
        text = report(measure(args, runner), args)
    results = common.Results(NAME, args)
    path = results.write("The preload capture's cost", f"{text}\n\nLoad average at the end {common.load()} "
                         f"(shared with other work)." + (f" {args.note}" if args.note else ""))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
