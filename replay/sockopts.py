"""Socket options on every TCP connection of a cgroup, for what Linux sets only per
socket: a sockops program (replay/linkem/sockopts.bpf.c, loaded by linkem-sockopts,
built on first use by linkem's Makefile like magnet-read: clang, bpftool, libbpf,
vmlinux.h) calls bpf_setsockopt as each connection is established (both ends:
active and passive).

    why = sockopts.unavailable()                       # None: it can run here
    opts = sockopts.SockOpts(cgroup, cc="cubic", nodelay=True, delack_max_ns=None)
    opts.stop()                                        # {"applied": connections, "refused": ...}

Used for the delayed-ACK cap of `magnet replay tcp` (replay.delack) and for the
congestion control and Nagle of the real programs of `magnet path`.  An option set
this way holds whatever the program set before the handshake; a program that sets it
again afterwards has the last word.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from magnet import capture
from magnetlib import buildcache

from . import workers
from .errors import ReplayError

SOURCE = Path(__file__).resolve().parent / "linkem"
NEEDS = ("make", "cc", *buildcache.BPF_NEEDS)


def unavailable() -> str | None:
    """Why the sockops program cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (a sockops BPF program sets it)"
    missing = buildcache.missing(NEEDS)
    if missing:
        return f"needs a sockops BPF program, built with clang, bpftool and libbpf (missing: {', '.join(missing)})"
    return None


def build(quiet: bool = True) -> Path:
    """linkem-sockopts, built by linkem's Makefile once per version of its sources."""
    files = [*((name, SOURCE / name) for name in ("sockopts.bpf.c", "sockopts.c", "Makefile")),
             ("capture/bpf.mk", Path(capture.__file__).resolve().parent / "bpf.mk")]
    return buildcache.make("sockopts", SOURCE, files, targets=["sockopts"], needs=NEEDS,
                           label="linkem-sockopts", quiet=quiet) / "linkem-sockopts"


class SockOpts:
    """linkem-sockopts attached to a cgroup until stop(); BuildError if it cannot be built,
    ReplayError (one line) if it cannot be loaded or attached."""

    def __init__(self, cgroup: Path, *, cc: str | None = None, nodelay: bool = False,
                 delack_max_ns: int | None = None):
        args = [str(build()), str(cgroup)]
        if delack_max_ns:
            args.append(f"--delack-max-us={delack_max_ns // 1000}")
        if cc:
            args.append(f"--cc={cc}")
        if nodelay:
            args.append("--nodelay")
        self.counts: dict | None = None
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        try:
            line = workers.first_line(self.proc)
        except workers.WorkerError as e:
            raise ReplayError("linkem-sockopts", str(e)) from None
        if line.strip() != "ready":
            self.proc.wait()
            err = self.proc.stderr.read().strip().splitlines()
            raise ReplayError(err[-1] if err else f"linkem-sockopts exited with {self.proc.returncode}")

    def stop(self) -> dict:
        """Detached; how many connections took the options and refused them (once)."""
        if self.counts is None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            out, _ = self.proc.communicate(timeout=10)
            lines = [line for line in out.splitlines() if line.startswith("{")]
            self.counts = json.loads(lines[-1]) if lines else {}
        return self.counts
