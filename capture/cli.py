"""magnet capture | status | ship: the kernel capture from the command line."""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

from magnetlib import knobs, ship
from magnetlib.cli.common import human_bytes, warn
from magnetlib import format as fmt
from magnetlib.errors import MagnetError
from magnetlib.format import Event
from magnetlib.trace import Trace

from . import preload, session

# Sockets still closing when the command exits (FIN, TIME_WAIT ACKs) get this long.
LINGER_S = 0.2
SUMMARY_STREAMS = 10
# How often the command and magnet-read are looked at while the command runs.
POLL_S = 0.2
# How long the command has to end after a SIGTERM or SIGHUP passed on to it.
GRACE_S = 2.0


def register(sub) -> None:
    p = sub.add_parser("capture", help="run a command and record its TCP traffic at every layer",
                       description="Run CMD in a cgroup of its own and record its connections "
                                   "with magnet-read (like `perf record -- CMD`). Without root, "
                                   "or with --preload, record its socket calls with an LD_PRELOAD "
                                   "shim instead.")
    p.add_argument("-o", "--output", required=True, help="trace file")
    p.add_argument("-f", "--force", action="store_true",
                   help="replace the output if it exists and is not empty")
    add_capture_options(p)
    p.add_argument("--cgroup-name", help="name of the command's cgroup (default magnet-PID)")
    p.add_argument("--preload", action="store_true",
                   help="no BPF, no root: record the socket calls of CMD and its children with "
                        "an LD_PRELOAD shim (SOCK_SEND/SOCK_RECV only; chosen when not root; "
                        "--ext adds a TCP_INFO snapshot per call, --port keeps to those ports)")
    p.add_argument("--all-sockets", action="store_true",
                   help="with --preload: every socket (UNIX, UDP, ...), not only TCP")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS")
    p.set_defaults(func=cmd_capture)

    p = sub.add_parser("status", help="running captures, their settings, records and losses "
                                      "(the paper's /proc/net/magnet)")
    p.add_argument("--status-dir", default=session.STATUS_DIR)
    p.add_argument("--json", action="store_true", help="the status files as JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("ship", help="move finished traces to an archive, verified before deletion "
                                    "(the paper's magnet.copy)")
    p.add_argument("--spool", required=True, help="directory magnet-read writes into")
    p.add_argument("--to", required=True, dest="dest",
                   help="archive: a directory, or HOST:DIR (copied with scp, checked with ssh)")
    p.add_argument("--ssh", default="ssh", help="ssh command for HOST:DIR (default ssh)")
    p.add_argument("--scp", default="scp", help="scp command for HOST:DIR (default scp)")
    p.add_argument("--pattern", default="*.magnet", help="files to ship (default *.magnet)")
    p.add_argument("--status-dir", default=session.STATUS_DIR,
                   help="files that running captures still write are left alone")
    p.set_defaults(func=cmd_ship)


def add_capture_options(p) -> None:
    p.add_argument("-e", "--events", help="sock,tcp,ip,dev,sched, net, all or event names (default net)")
    p.add_argument("-x", "--ext", action="store_true",
                   help="extended records (TCP state, IP header, ...; with --preload: TCP_INFO after each call)")
    p.add_argument("-b", "--buffer", help="kernel buffer size, e.g. 16M")
    p.add_argument("-d", "--drain-delay", help="drain period, e.g. 10ms (default auto)")
    p.add_argument("-P", "--port", dest="ports",
                   help="only connections with one of these local or remote ports (comma-separated, up to 8)")
    p.add_argument("--rotate-size", help="new file at this size")
    p.add_argument("--rotate-time", help="new file every TIME")
    p.add_argument("--stats", help="write BPF run-time statistics as JSON to this file")
    p.add_argument("--status-dir", help=f"status directory (default {session.STATUS_DIR})")


def settings_from(args) -> session.Settings:
    return session.Settings(events=args.events, ext=args.ext, buffer=args.buffer,
                            drain_delay=args.drain_delay, ports=args.ports,
                            rotate_size=args.rotate_size, rotate_time=args.rotate_time,
                            stats=args.stats, status_dir=args.status_dir,
                            force=getattr(args, "force", False))


# ---------------------------------------------------------------- capture ---
class Signals:
    """SIGTERM and SIGHUP, noted to be acted on while the command runs: it is
    passed on to the command, then the trace is closed and the cgroup removed.
    A signal already ignored (nohup) stays ignored."""
    HANDLED = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.got: int | None = None
        self._old: dict = {}

    def __enter__(self) -> "Signals":
        for sig in self.HANDLED:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                self._old[sig] = signal.signal(sig, self._note)
        return self

    def _note(self, sig, frame) -> None:
        self.got = self.got or sig

    def __exit__(self, *exc) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def cmd_capture(args) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        warn("capture: no command given (magnet capture -o FILE -- CMD ARGS)")
        return 2
    bpf_only = bpf_only_options(args)
    if args.preload and bpf_only:
        warn(f"capture: --preload records socket calls only: {bpf_only} needs the BPF capture")
        return 2
    if args.all_sockets and not args.preload and os.geteuid() == 0:
        warn("capture: --all-sockets is an option of --preload")
        return 2
    if not args.preload and os.geteuid() != 0:
        if bpf_only:
            warn(f"capture: {bpf_only} needs root (to load BPF programs and create a cgroup)")
            return 2
        warn("capture: not root, so no BPF: recording the socket calls with the LD_PRELOAD shim "
             "(--preload)")
        args.preload = True
    if args.preload:
        return capture_preloaded(command, args)
    with Signals() as signals:
        return capture_command(command, args, signals)


def capture_command(command: list[str], args, signals: Signals) -> int:
    try:
        binary = session.find_magnet_read()
        cgroup = session.make_cgroup(args.cgroup_name or f"magnet-{os.getpid()}")
    except MagnetError as e:                # the capture's, or magnet-read's build

        warn(f"capture: {e}")
        return 2
    try:
        status, elapsed, failure = run_captured(command, cgroup, args, binary, signals)
    except session.CaptureError as e:
        warn(f"capture: {e}")
        return 2
    finally:
        try:
            session.remove_cgroup(cgroup)
        except session.CaptureError as e:
            warn(f"capture: {e}")
    if status is None:
        return 128 + signals.got if signals.got else 127
    print_summary(Trace(args.output), elapsed, ended_early=failure is not None)
    if failure:
        return 2                            # said when it was found
    return 128 + signals.got if signals.got else status


def bpf_only_options(args) -> str | None:
    """The first option given that only the BPF capture honours, as the user wrote it."""
    events = (args.events or "sock").lower().split(",")
    if not set(events) <= {"sock", "sock_send", "sock_recv"}:
        return f"--events {args.events}"
    for flag, value in (("--buffer", args.buffer), ("--drain-delay", args.drain_delay),
                        ("--rotate-size", args.rotate_size), ("--rotate-time", args.rotate_time),
                        ("--stats", args.stats), ("--status-dir", args.status_dir),
                        ("--cgroup-name", args.cgroup_name)):
        if value:
            return flag
    return None


def capture_preloaded(command: list[str], args) -> int:
    """Run `command` with the shim preloaded, merge its processes' records into the trace."""
    out = Path(args.output)
    if not args.force and out.is_file() and out.stat().st_size > 0:
        warn(f"capture: {out}: exists and is not empty (--force replaces it)")
        return 2
    try:
        preload.check_command(command)
        spool = preload.Spool(args.output, all_sockets=args.all_sockets, ext=args.ext,
                              ports=args.ports, command=command)
    except session.CaptureError as e:
        warn(f"capture: {e}")
        return 2
    try:
        with Signals() as signals:
            status, elapsed = run_preloaded(command, spool, signals)
    except preload.SpoolKept as e:
        warn(f"capture: {e}")
        return 2
    except MagnetError as e:                # the capture's, or the shim's build
        spool.remove()
        warn(f"capture: {e}")
        return 2
    print_summary(Trace(args.output), elapsed)
    if signals.got:
        return 128 + signals.got
    return status if status >= 0 else 128 - status


def run_preloaded(command: list[str], spool, signals: Signals) -> tuple[int, float]:
    """(exit status, seconds) of `command` run with the shim writing into `spool`,
    then merged into its trace."""
    env = spool.environment(preload.find_library())
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, env=env)
    except OSError as e:
        raise session.CaptureError(f"{command[0]}: {e.strerror}") from None
    status, _ = wait_for_command(proc, None, signals)
    elapsed = time.monotonic() - start
    spool.merge()
    return status, elapsed


def run_captured(command: list[str], cgroup, args, binary,
                 signals: Signals) -> tuple[int | None, float, str | None]:
    """Run `command` in `cgroup` under a capture: (its exit status or None, seconds,
    why the capture ended before the command did or None)."""
    cap = session.Capture(args.output, cgroup=cgroup, settings=settings_from(args), binary=binary)
    try:
        cap.start()
    except session.CaptureError as e:
        raise session.CaptureError(str(e).removeprefix("magnet-read: ")) from None
    if signals.got:                         # told to stop while it started: run nothing
        cap.stop()
        return None, 0.0, None
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, preexec_fn=lambda: session.join_cgroup(cgroup))
    except OSError as e:
        cap.stop()
        warn(f"capture: {command[0]}: {e.strerror}")
        return None, 0.0, None
    status, failure = wait_for_command(proc, cap, signals)
    elapsed = time.monotonic() - start
    time.sleep(LINGER_S)
    if failure is None and cap.stop() != 0:
        failure = reader_failure(cap)
        warn(f"capture: {failure}")
    return (status if status >= 0 else 128 - status), elapsed, failure


def wait_for_command(proc: subprocess.Popen, cap: session.Capture | None,
                     signals: Signals) -> tuple[int, str | None]:
    """Wait for the command: (its status, why the capture stopped early or None).

    A Ctrl-C reaches the command directly and we keep waiting; SIGTERM or SIGHUP
    is passed on to it (then SIGKILL after GRACE_S). A capture that stops by
    itself is reported at once; the command runs on, unrecorded.  (No `cap` for
    the preload shim: it lives in the command.)"""
    failure, deadline = None, None
    while True:
        try:
            return proc.wait(POLL_S), failure
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:
            continue
        if signals.got and deadline is None:
            proc.send_signal(signals.got)
            deadline = time.monotonic() + GRACE_S
        elif deadline is not None and time.monotonic() > deadline:
            proc.kill()
        if failure is None and cap is not None and cap.poll() is not None:
            failure = reader_failure(cap)
            warn(f"capture: {failure}; {os.path.basename(proc.args[0])} runs on, unrecorded")


def reader_failure(cap: session.Capture) -> str:
    """What stopped magnet-read early (its message says the trace ends early); a
    killed one's trace is ended here as it would have ended it."""
    if cap.returncode < 0:
        ended = cap.end_early()
        name = signal_name(-cap.returncode)
        return (f"magnet-read was killed ({name}); the trace ends early: {ended or cap.output} "
                "at its last whole record" + (", then a LOST record saying so" if ended else ""))
    return cap.error().removeprefix("magnet-read: ") or f"magnet-read: exit status {cap.returncode}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:                      # a real-time signal
        return f"signal {number}"


def print_summary(trace: Trace, elapsed: float, ended_early: bool = False) -> None:
    s = trace.scan
    streams = trace.streams()
    print(f"magnet capture: {trace.path}: {elapsed:.2f} s, {len(streams)} stream(s), "
          f"{s.records - s.lost_records} records, {s.lost} lost")
    if len(streams):
        print_streams(streams, trace.path)
    print(f"{'layer':<6}{'send events':>12}{'bytes':>15}{'recv events':>12}{'bytes':>15}")
    for layer, send, recv in layers_recorded(trace):
        print(f"{layer:<6}{s.counts.get(send, 0):>12,}{s.bytes.get(send, 0):>15,}"
              f"{s.counts.get(recv, 0):>12,}{s.bytes.get(recv, 0):>15,}")
    if s.counts.get(Event.TCP_RETRANS):
        print(f"retransmitted: {s.counts[Event.TCP_RETRANS]} segments, "
              f"{human_bytes(s.bytes[Event.TCP_RETRANS])}")
    if s.lost:
        print(f"LOST: {s.lost} events could not be recorded ({s.lost_records} LOST records); "
              f"{lost_reason(trace, ended_early)}")


def lost_reason(trace: Trace, ended_early: bool) -> str:
    """What the losses of a trace mean, and what to do about them."""
    if ended_early:
        return "the capture stopped early"
    if trace.meta.capture_method == "preload":
        return ("sends a process never returned from (killed, or ended by another thread), "
                "and records its spool had no room for (a full disk)")
    return "raise --buffer or lower --drain-delay"


def layers_recorded(trace: Trace) -> list[tuple[str, Event, Event]]:
    """(layer, send event, receive event) of the layers the trace's event mask names."""
    layers = [("sock", Event.SOCK_SEND, Event.SOCK_RECV), ("tcp", Event.TCP_SEND, Event.TCP_RECV),
              ("ip", Event.IP_SEND, Event.IP_RECV), ("dev", Event.DEV_SEND, Event.DEV_RECV)]
    mask = trace.meta.event_mask
    if mask is None:
        return layers
    return [row for row in layers if mask & fmt.event_mask(row[1:])]


def print_streams(streams, path: str) -> None:
    top = streams.sort_values("sock_send_bytes", ascending=False).head(SUMMARY_STREAMS)
    print(f"{'stream (sockid)':<18}{'app sent':>12}{'app recv':>12}{'sends':>8}{'recvs':>8}"
          f"{'segs out':>10}{'segs in':>9}{'retrans':>8}")
    for sockid, row in top.iterrows():
        print(f"{knobs.fmt_stream(sockid):<18}{human_bytes(row.sock_send_bytes):>12}"
              f"{human_bytes(row.sock_recv_bytes):>12}{row.sock_send_records:>8}"
              f"{row.sock_recv_records:>8}{row.tcp_send_records:>10}{row.tcp_recv_records:>9}"
              f"{row.tcp_retrans_records:>8}")
    if len(streams) > SUMMARY_STREAMS:
        print(f"... and {len(streams) - SUMMARY_STREAMS} more streams (magnet stats {path})")


# ----------------------------------------------------------------- status ---
def cmd_status(args) -> int:
    found = session.running_captures(args.status_dir)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    alive = [s for s in found if s["alive"]]
    print(f"magnet: {len(alive)} capture(s) running" + (":" if alive else ""))
    for s in alive:
        print_status(s)
    for s in found:
        if not s["alive"]:
            print(f"(stale status file {s['status_file']}: pid {s['pid']} is gone, "
                  "it was killed before it could clean up)")
    return 0


def print_status(s: dict) -> None:
    started = datetime.fromtimestamp(s["started"]).strftime("%Y-%m-%d %H:%M:%S")
    delay = f"{s['drain_delay_us'] / 1000:g} ms" + (" (auto)" if s["drain_auto"] else "")
    drain = "not drained (--no-drain)" if s["no_drain"] else f"drained every {delay}"
    print(f"  pid {s['pid']}, since {started}, writing {s['output']} (file {s['segment'] + 1})")
    print(f"    buffer {human_bytes(s['buffer_bytes'])}, {drain}, "
          f"fill {s['buffer_fill']:.0%} (peak {s['buffer_fill_peak']:.0%})")
    print(f"    events {s['events']}; extended data {'on' if s['ext'] else 'off'}; "
          f"filter: {s['filter']}")
    print(f"    recorded {s['records']}, lost {s['lost']} "
          f"(buffer full {s['lost_buffer_full']}, skipped runs {s['lost_skipped_runs']}), "
          f"{human_bytes(s['bytes_written'])} written")


# ------------------------------------------------------------------- ship ---
def cmd_ship(args) -> int:
    shipper = ship.Shipper(args.dest, ssh=args.ssh, scp=args.scp)
    busy = {os.path.realpath(s["output"]) for s in session.running_captures(args.status_dir)
            if s["alive"]}
    failures = 0
    for path in ship.finished(args.spool, args.pattern, busy):
        try:
            shipper.ship(path)
            print(f"shipped {path} -> {shipper.dest}")
        except ship.ShipError as e:
            warn(f"ship: {e} (kept)")
            failures += 1
    return 2 if failures else 0

