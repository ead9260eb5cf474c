"""Benchmark: what the preload capture (libmagnet-preload.so) costs a program.

    python -m magnet.experiments.bench_preload [--rounds 7] [--seconds 1] [--quick] [--out DIR]

A small C program (built here with cc) is run with and without the shim,
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
process at every call). Reported: medians with [min-max] over the rounds.
Every shim run's spool is checked: one record per call, none lost.
Targets (issue 15): <= 100 ns per intercepted call, <= 3 % throughput loss.
"""
from __future__ import annotations

import argparse
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

NS_TARGET, LOSS_TARGET_PCT = 100, 3.0
CALL_MODES = ("unix", "tcp", "devnull")
BULK_CHUNKS = (65536, 1024)
BLOCKS, STRACE_BLOCKS = 100, 4         # blocks of --calls iterations per process

PROGRAM = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (void *)addr, sizeof(*addr)) || listen(l, 1) || getsockname(l, (void *)addr, &len))
		exit(1);
	return l;
}

static void tcp_pair(int sv[2])
{
	struct sockaddr_in addr;
	int l = listener(&addr), one = 1;
	sv[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(sv[0], (void *)&addr, sizeof(addr)))
		exit(1);
	sv[1] = accept(l, NULL, NULL);
	setsockopt(sv[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(l);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp);
	return v[n / 2];
}

/* One iteration: send + recv of 64 bytes (or one write to /dev/null), through
 * libc (what the shim interposes) or as raw system calls (what it cannot see). */
static void iteration(const char *mode, int sv[2], int devnull, int raw)
{
	static char buf[64];

	if (!strcmp(mode, "devnull")) {
		if (raw)
			syscall(SYS_write, devnull, buf, sizeof(buf));
		else
			write(devnull, buf, sizeof(buf));
	} else if (raw) {
		syscall(SYS_sendto, sv[0], buf, sizeof(buf), 0, NULL, 0);
		syscall(SYS_recvfrom, sv[1], buf, sizeof(buf), 0, NULL, NULL);
	} else {
		send(sv[0], buf, sizeof(buf), 0);
		recv(sv[1], buf, sizeof(buf), 0);
	}
}

/* Blocks of n iterations through libc and as raw system calls, alternating
 * (paired: a neighbour's noise hits both): ns per iteration of each (medians),
 * the median of the blocks' differences, the libc calls made. */
static void calls(const char *mode, long n, int blocks)
{
	double lib[256], raw[256], diff[256];
	int sv[2], devnull = open("/dev/null", O_WRONLY);

	if (!strcmp(mode, "tcp"))
		tcp_pair(sv);
	else
		socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	for (int b = 0; b < blocks; b++) {
		for (int k = 0; k < 2; k++) {
			int is_raw = (b + k) % 2;	/* which goes first alternates */
			double t0 = now();

			for (long i = 0; i < n; i++)
				iteration(mode, sv, devnull, is_raw);
			(is_raw ? raw : lib)[b] = (now() - t0) * 1e9 / n;
		}
		diff[b] = lib[b] - raw[b];
	}
	printf("%.2f %.2f %.2f %ld\n", median(lib, blocks), median(raw, blocks), median(diff, blocks),
	       n * blocks);
}

/* Sender and receiver on CPUs of their own: loopback throughput is bimodal otherwise. */
static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % sysconf(_SC_NPROCESSORS_ONLN), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static double cpu_seconds(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Gb/s, CPU seconds per GB (both processes), send calls, recv calls, seconds */
static void bulk(double seconds, size_t chunk)
{
	static char buf[1 << 16];
	struct sockaddr_in addr;
	int l = listener(&addr), p[2], status;
	long long sent = 0, got = 0, sends = 0, recvs[2] = {0, 0};
	double t0, elapsed;

	if (pipe(p))
		exit(1);
	if (fork() == 0) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		ssize_t k;

		pin(1);
		if (connect(c, (void *)&addr, sizeof(addr)))
			_exit(1);
		recvs[0] = got = 0;
		while ((k = recv(c, buf, sizeof(buf), 0)) > 0) {
			got += k;
			recvs[0]++;
		}
		recvs[1] = got;
		write(p[1], recvs, sizeof(recvs));
		_exit(0);
	}
	int s = accept(l, NULL, NULL);
	pin(0);
	t0 = now();
	while (now() - t0 < seconds)
		for (int i = 0; i < 64; i++) {
			ssize_t k = send(s, buf, chunk, 0);
			if (k < 0)
				exit(1);
			sent += k;
			sends++;
		}
	shutdown(s, SHUT_WR);
	if (read(p[0], recvs, sizeof(recvs)) != sizeof(recvs))
		exit(1);
	elapsed = now() - t0;
	wait(&status);
	printf("%.3f %.3f %lld %lld %.6f\n", recvs[1] * 8 / elapsed / 1e9,
	       (cpu_seconds(RUSAGE_SELF) + cpu_seconds(RUSAGE_CHILDREN)) / (recvs[1] / 1e9),
	       sends, recvs[0] + 1, elapsed);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "calls"))
		calls(argv[2], atol(argv[3]), atoi(argv[4]));
	else if (argc == 4 && !strcmp(argv[1], "bulk"))
		bulk(atof(argv[2]), atol(argv[3]));
	else
		return 2;
	return 0;
}
"""


@dataclass
class Run:
    test: str           # "calls unix", "bulk 65536", ...
    config: str         # without, shim, ext (shim with --ext), strace
    value: float        # ns per iteration through libc, or Gb/s
    extra: float        # ns per iteration more than the raw system calls, or CPU s per GB
    records_ok: bool | None = None
    calls_per_s: float = 0.0    # bulk: send and recv calls per second


def build(workdir: Path) -> Path:
    source, binary = workdir / "bench.c", workdir / "bench"
    source.write_text(PROGRAM)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", str(binary), str(source)], check=True)
    return binary


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
def median_range(values: list[float], pattern: str = "{:.1f}") -> str:
    return (f"{pattern.format(statistics.median(values))} "
            f"[{pattern.format(min(values))}-{pattern.format(max(values))}]")


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
        lines.append(f"| {test} (ns per iteration) | {median_range(without)} | {median_range(shim)} | "
                     f"{median_range(strace) if strace else '–'} | {median_range(per_call)} |")
        ext = values(runs, test, "ext")
        if ext:
            per_call = [(e - w) / calls_per_iteration[mode] for w, e in
                        zip(values(runs, test, "without", "extra"), values(runs, test, "ext", "extra"))]
            lines.append(f"| {test} with --ext (ns per iteration) | {median_range(without)} | "
                         f"{median_range(ext)} | | {median_range(per_call)} |")
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
        lines.append(f"| {test} B sends (Gb/s) | {median_range(without)} | {median_range(shim)} | "
                     f"{median_range(strace) if strace else '–'} | {median_range(loss)} % |")
        lines.append(f"| {test} B sends (CPU s per GB) | {median_range(cpu[0], '{:.3f}')} | "
                     f"{median_range(cpu[1], '{:.3f}')} | | {median_range(estimate, '{:.2f}')} % "
                     "(estimated) |")
    return lines, losses, estimates


def report(runs: list[Run], args) -> str:
    calls, added = call_rows(runs)
    bulk, losses, estimates = bulk_rows(runs, added[CALL_MODES.index("tcp")])
    checked = [r.records_ok for r in runs if r.records_ok is not None]
    head = ["| test | without | with the shim | strace -f -e trace=network | shim's cost |",
            "|---|---|---|---|---|"]
    text = [f"{args.rounds} interleaved rounds; medians [min-max]. Per call: {BLOCKS} blocks of "
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
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds per bulk run (default 1)")
    p.add_argument("--calls", type=int, default=500, help="iterations per block (default 500)")
    p.add_argument("--quick", action="store_true", help="3 rounds, shorter runs")
    p.add_argument("--out", type=Path, help="also write README.md there")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds, args.calls = 3, 0.3, 200
    with tempfile.TemporaryDirectory(prefix="magnet-bench-preload-") as tmp:
        workdir = Path(tmp)
        runner = Runner(build(workdir), preload.find_library(), workdir)
        text = report(measure(args, runner), args)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        command = "python -m magnet.experiments.bench_preload " + " ".join(argv or sys.argv[1:])
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        (args.out / "README.md").write_text(
            f"# The preload capture's cost\n\n`{command.strip()}` on {os.uname().nodename} "
            f"(kernel {os.uname().release}, {os.cpu_count()} CPUs, load average at the end "
            f"{load}: shared with other work).\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
